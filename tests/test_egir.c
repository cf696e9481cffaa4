/* test_egir.c — tensors in the e-graph: every bench graph converts, and the term extracted back evaluates
 * exactly like the original graph; permutes and copies vanish; constants fold; guards see the analysis. */
#include <math.h>

#include "egir.h"
#include "testutil.h"

/* Relative L2 distance of a and b (n values); NaN positions must agree. */
static double rel_l2(const double *a, const double *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            if (isnan(a[i]) != isnan(b[i])) return INFINITY;
            continue;
        }
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* Values of output 0 of g, and of the smallest term of its class, on the same random inputs. */
static double round_trip_error(checked *c) {
    ts_egir x;
    char *err = NULL;
    cr_assert_eq(ts_egir_init(&x, &c->g, &err), 0);
    ts_eg_term t;
    cr_assert(ts_eg_extract_smallest(x.eg, ts_eg_find(x.eg, x.output_class[0]), &t));
    ts_graph tg;
    ts_egir_term_graph(&x, &t, &tg);
    double **in = ts_random_inputs(&c->g, 5), **want = NULL, **got = NULL;
    cr_assert_eq(ts_interp_run(&c->g, in, &want, NULL, &err), 0);
    cr_assert_eq(ts_interp_run(&tg, in, &got, NULL, &err), 0);
    /* the term's output has the output's axes, maybe in another order: compare by name */
    ts_view w = c->g.outputs[0].ref.view, v = tg.outputs[0].ref.view;
    cr_assert_eq(w.ndim, v.ndim);
    int64_t n = ts_output_numel(&c->g, 0);
    double *aligned = ts_xmalloc(sizeof(double) * (size_t)n);
    int64_t idx[TS_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) { /* e walks w's order; find the same named index in v's order */
        int64_t off = 0, stride = 1;
        for (int d = v.ndim - 1; d >= 0; d--) {
            off += idx[ts_view_find(&w, v.axis[d])] * stride;
            stride *= v.size[d];
        }
        aligned[e] = got[0][off];
        for (int d = w.ndim - 1; d >= 0 && ++idx[d] == w.size[d]; d--) idx[d] = 0;
    }
    double e = rel_l2(aligned, want[0], n);
    free(aligned);
    ts_free_buffers(in, c->g.ninputs);
    ts_free_buffers(want, 1);
    ts_free_buffers(got, 1);
    ts_graph_free(&tg);
    ts_eg_term_free(&t);
    cr_assert_eq(x.axis_conflicts, 0);
    ts_egir_free(&x);
    return e;
}

Test(egir, every_bench_graph_round_trips_through_the_egraph) {
    const char *graphs[][2] = {{"attention", "h=2,t_q=8,t_kv=8,d_h=4"},
                               {"attention_causal", "h=2,t_q=8,t_kv=8,d_h=4"},
                               {"attention_gqa", "t_q=8,t_kv=8,d_h=4"},
                               {"decoder_layer", "t=5,d=16,f=8"},
                               {"matmul", "m=3,d=8,n=5"},
                               {"rmsnorm", "m=3,d=8,n=5"},
                               {"rmsnorm_mlp", "m=3,d=8,n=5"},
                               {"swiglu", "m=3,d=8,n=5"}};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        checked c;
        check_bench(&c, graphs[i][0], graphs[i][1]);
        double e = round_trip_error(&c);
        cr_assert_eq(e, 0.0, "%s: extracted term differs from the graph (rel. L2 %g)", graphs[i][0], e);
        free_checked(&c);
    }
}

/* Index tables read through slices (egir.c index_table_view): a table of iotas computed over [m, m2] and read as a box
 * — from 2 in steps of 2 along m, from 1 along m2, broadcast along b — is the same function of the iotas of the box's
 * own axes, each times its step plus its start; a row fixed by the view is its index as a constant. The extracted term
 * evaluates as the graph does, and no view of the table is left in its class. */
Test(egir, a_sliced_index_table_is_the_table_of_the_slice) {
    checked c;
    check_ok(&c, "axes: {b: 3, t: 5, s: 6, m: 12, m2: 12, one1: 1}\ninputs:\n  X: {dtype: fp32, shape: [b, t, s]}\nops:\n"
                 "  - {name: i, op: iota, axis: m}\n  - {name: j, op: iota, axis: m2}\n"
                 "  - {name: ib, op: expand, args: [i], shape: [m, m2]}\n  - {name: fut, op: less_than, args: [ib, j]}\n"
                 "  - {name: w, op: sin, args: [j]}\n  - {name: tab, op: where, args: [fut, w, 3]}\n"
                 "  - {name: t1, op: slice, args: [tab], axis: m, start: 2, step: 2, as: t}\n"
                 "  - {name: t2, op: slice, args: [t1], axis: m2, start: 1, as: s}\n"
                 "  - {name: row, op: slice, args: [tab], axis: m, start: 7, as: one1}\n"
                 "  - {name: r2, op: slice, args: [row], axis: m2, start: 0, as: s}\n"
                 "  - {name: r3, op: reshape, args: [r2], shape: [s]}\n"
                 "  - {name: Y0, op: add, args: [X, t2]}\n  - {name: Y, op: add, args: [Y0, r3]}\noutputs: [Y]\n");
    cr_assert_eq(round_trip_error(&c), 0.0);
    ts_egir x;
    char *err = NULL;
    cr_assert_eq(ts_egir_init(&x, &c.g, &err), 0);
    cr_expect_eq(x.nviews, 0, "the table's slices are expressions of the iotas of t and s, not views of it");
    ts_egir_free(&x);
    free_checked(&c);
}

Test(egir, permutes_and_copies_add_no_enode) {
    checked c;
    check_ok(&c, "axes: {a: 2, b: 3}\ninputs:\n  X: {dtype: fp32, shape: [a, b]}\nops:\n"
                 "  - {name: P, op: permute, args: [X], order: [b, a]}\n"
                 "  - {name: C, op: copy, args: [P]}\n"
                 "  - {name: Y, op: add, args: [X, C]}\noutputs: [Y]\n");
    ts_egir x;
    char *err;
    cr_assert_eq(ts_egir_init(&x, &c.g, &err), 0);
    cr_assert_eq(ts_eg_node_count(x.eg), 2, "input and add: (add X X)");
    ts_egir_free(&x);
    free_checked(&c);
}

Test(egir, constants_fold_into_a_constant_node) {
    checked c;
    check_ok(&c, "axes: {a: 2}\ninputs:\n  X: {dtype: fp32, shape: [a]}\nops:\n"
                 "  - {name: two, op: constant, value: 2}\n  - {name: three, op: constant, value: 3}\n"
                 "  - {name: six, op: mul, args: [two, three]}\n"
                 "  - {name: Y, op: mul, args: [X, six]}\noutputs: [Y]\n");
    ts_egir x;
    char *err;
    cr_assert_eq(ts_egir_init(&x, &c.g, &err), 0);
    ts_enode six = {.op = TS_OP_CONSTANT};
    double v = 6;
    memcpy(&six.param[0], &v, sizeof v);
    uint32_t k = ts_eg_lookup(x.eg, &six);
    cr_assert_neq(k, TS_EG_NONE, "6 is in the e-graph");
    const ts_egir_data *d = ts_eg_data_const(x.eg, ts_eg_find(x.eg, k));
    cr_assert(d->is_const);
    cr_assert_eq(d->value, 6);
    ts_egir_free(&x);
    free_checked(&c);
}

/* Σ_a c is c·size(a): a constant for a fixed a, folded; for a dynamic a its size is known only at run time
 * (the typical size stands in for ranking), so the sum stays a computation. Folding it at the typical size
 * baked 4096 - 512 into decoder_prefill's mask and rotation for every size. */
static const ts_egir_data *output_data(ts_egir *x) {
    return ts_eg_data_const(x->eg, ts_eg_find(x->eg, x->output_class[0]));
}

Test(egir, a_sum_of_a_constant_folds_over_a_fixed_axis_only) {
    const char *fixed = "axes: {a: 8}\ninputs:\n  X: {dtype: fp32, shape: [a]}\nops:\n"
                        "  - {name: one, op: constant, value: 3}\n  - {name: ones, op: expand, args: [one], shape: [a]}\n"
                        "  - {name: Y, op: reduce_sum, args: [ones], axis: a}\noutputs: [Y]\n";
    const char *dynamic = "axes: {a: {dynamic: true, typical: 8}}\ninputs:\n  X: {dtype: fp32, shape: [a]}\nops:\n"
                          "  - {name: one, op: constant, value: 3}\n  - {name: ones, op: expand, args: [one], shape: [a]}\n"
                          "  - {name: Y, op: reduce_sum, args: [ones], axis: a}\noutputs: [Y]\n";
    checked c;
    ts_egir x;
    char *err;
    check_ok(&c, fixed);
    cr_assert_eq(ts_egir_init(&x, &c.g, &err), 0);
    cr_assert(output_data(&x)->is_const);
    cr_assert_eq(output_data(&x)->value, 24);
    ts_egir_free(&x);
    free_checked(&c);
    check_ok(&c, dynamic);
    cr_assert_eq(ts_egir_init(&x, &c.g, &err), 0);
    cr_assert(!output_data(&x)->is_const, "3 · size(a), not 3 · 8");
    ts_egir_free(&x);
    free_checked(&c);
}

Test(egir, analysis_tracks_axes_through_reductions) {
    checked c;
    check_bench(&c, "matmul", "m=3,d=8,n=5");
    ts_egir x;
    char *err;
    cr_assert_eq(ts_egir_init(&x, &c.g, &err), 0);
    const ts_egir_data *d = ts_eg_data_const(x.eg, ts_eg_find(x.eg, x.output_class[0]));
    uint64_t want = (1ull << ts_graph_find_axis(&c.g, "m")) | (1ull << ts_graph_find_axis(&c.g, "n"));
    cr_assert_eq(d->axes, want);
    cr_assert_eq(d->dtype, TS_FP16);
    ts_egir_free(&x);
    free_checked(&c);
}
