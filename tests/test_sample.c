/* test_sample.c — the sampled float64 reference of `tsopt tune` (src/sample.c): which axes are separable
 * in the bench graphs, and that the reference computed on sampled rows equals the full reference at those
 * rows, exactly (float64, same operations), including iota-based causal masks. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "interp.h"
#include "sample.h"
#include "util.h"

typedef struct {
    ts_spec spec;
    ts_binding bind;
    ts_graph g;
} loaded;

static void load(loaded *l, const char *path, const char *dims) {
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    memset(&l->bind, 0, sizeof l->bind);
    int rc = ts_spec_load(&l->spec, path, &d);
    if (rc == 0 && dims) rc = ts_binding_parse(&l->bind, dims, &d);
    if (rc == 0) rc = ts_check(&l->spec, &l->bind, &l->g, &d);
    ts_diags_free(&d);
    cr_assert_eq(rc, 0, "%s does not check at %s", path, dims ? dims : "its sizes");
}

static void unload(loaded *l) {
    ts_graph_free(&l->g);
    ts_binding_free(&l->bind);
    ts_spec_free(&l->spec);
}

/* The names of g's separable axes, space-separated, in axis order. */
static char *separable_names(const ts_graph *g) {
    bool *sep = calloc((size_t)g->naxes + 1, sizeof *sep);
    ts_separable_axes(g, sep);
    char *out = ts_strdup("");
    for (int a = 0; a < g->naxes; a++)
        if (sep[a]) {
            char *next = ts_strfmt("%s%s%s", out, out[0] ? " " : "", g->axes[a].name);
            free(out);
            out = next;
        }
    free(sep);
    return out;
}

static void expect_separable(const char *path, const char *dims, const char *want) {
    loaded l;
    load(&l, path, dims);
    char *got = separable_names(&l.g);
    cr_expect_str_eq(got, want, "%s", path);
    free(got);
    unload(&l);
}

Test(sample, separable_axes_of_the_bench_graphs) {
    expect_separable("bench/graphs/attention.yaml", "t_q=8,t_kv=8", "h t_q");
    expect_separable("bench/graphs/attention_causal.yaml", "t_q=8,t_kv=8", "h t_q");
    expect_separable("bench/graphs/matmul.yaml", "m=4,d=8,n=8", "m n");
    expect_separable("bench/graphs/rmsnorm.yaml", "m=4,d=8,n=8", "m n");
    expect_separable("bench/graphs/swiglu.yaml", "m=4,d=8,n=8", "m n");
    /* tokens mix in attention, d is normalised over, heads are summed by the output projection */
    expect_separable("bench/graphs/decoder_layer.yaml", "t=4,d=64,f=32", "");
}

/* Full reference at the rows vs the sampled reference: equal up to the summation order of the BLAS that
 * computes contractions (its blocking depends on how many rows there are): relative 1e-13. */
static void expect_sampled_equals_full(const char *path, const char *dims, int64_t rows) {
    loaded l;
    load(&l, path, dims);
    double **in = ts_random_inputs(&l.g, 7), **full = NULL, **sampled = NULL;
    char *err = NULL;
    cr_assert_eq(ts_interp_run(&l.g, in, &full, NULL, &err), 0, "%s", err);
    ts_sample_plan p;
    ts_sample_choose(&l.g, rows, 0 /* sample every separable axis */, 3, &p);
    cr_assert_gt(p.n, 0, "%s: nothing sampled", path);
    cr_assert_eq(ts_sample_reference(&l.spec, &l.bind, &l.g, in, &p, &sampled, &err), 0, "%s", err ? err : "");
    for (int o = 0; o < l.g.noutputs; o++) {
        const ts_view *v = &l.g.outputs[o].ref.view;
        int64_t n = ts_sample_numel(&l.g, v->axis, v->ndim, &p);
        double *want = malloc(sizeof *want * (size_t)n);
        ts_sample_gather(&l.g, v->axis, v->ndim, &p, full[o], want);
        for (int64_t e = 0; e < n; e++)
            cr_assert(fabs(want[e] - sampled[o][e]) <= 1e-13 * fabs(want[e]) || (isnan(want[e]) && isnan(sampled[o][e])),
                      "%s output %d element %ld: full %.17g sampled %.17g", path, o, (long)e, want[e], sampled[o][e]);
        free(want);
    }
    ts_free_buffers(full, l.g.noutputs);
    ts_free_buffers(sampled, l.g.noutputs);
    ts_free_buffers(in, l.g.ninputs);
    ts_sample_free(&p);
    unload(&l);
}

Test(sample, sampled_reference_equals_full_reference) {
    expect_sampled_equals_full("bench/graphs/attention.yaml", "h=3,t_q=40,t_kv=24,d_h=8", 5);
    expect_sampled_equals_full("bench/graphs/attention_causal.yaml", "h=2,t_q=33,t_kv=33,d_h=8", 6);
    expect_sampled_equals_full("bench/graphs/attention_gqa.yaml", "t_q=20,t_kv=20", 4);
    expect_sampled_equals_full("bench/graphs/rmsnorm_mlp.yaml", "m=17,d=16,n=12", 5);
    expect_sampled_equals_full("bench/graphs/swiglu.yaml", "m=9,d=8,n=12", 3);
}

Test(sample, rows_are_distinct_sorted_and_include_both_ends) {
    loaded l;
    load(&l, "bench/graphs/matmul.yaml", "m=100,d=8,n=8");
    ts_sample_plan p;
    ts_sample_choose(&l.g, 10, 0, 11, &p);
    cr_assert_geq(p.n, 1);
    for (int s = 0; s < p.n; s++) {
        int64_t size = l.g.axes[p.axis[s]].size;
        cr_expect_eq(p.index[s][0], 0);
        cr_expect_eq(p.index[s][p.count[s] - 1], size - 1);
        for (int64_t i = 1; i < p.count[s]; i++) cr_expect_lt(p.index[s][i - 1], p.index[s][i]);
    }
    ts_sample_free(&p);
    unload(&l);
}

Test(sample, stops_sampling_once_under_budget) {
    loaded l;
    load(&l, "bench/graphs/attention.yaml", NULL);
    ts_sample_plan p;
    ts_sample_choose(&l.g, 32, 2e9, 1, &p);
    cr_expect_eq(p.n, 1, "one axis (t_q, the largest separable one) suffices");
    cr_expect_str_eq(l.g.axes[p.axis[0]].name, "t_q");
    cr_expect_lt(ts_sample_flops(&l.g, &p), 2e9);
    ts_sample_free(&p);
    unload(&l);
}
