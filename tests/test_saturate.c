/* test_saturate.c — rewrite-to-goal: saturating the naive bench graphs with the shipped rules reaches the
 * fused forms (online softmax for attention, the row scale after the contraction for rmsnorm, ...), and
 * the shipped rules load without errors. */
#include <math.h>

#include "saturate.h"
#include "testutil.h"

typedef struct {
    checked c;
    ts_rules rs;
    ts_saturation s;
} saturated;

static void saturate_bench(saturated *t, const char *name, const char *dims) {
    check_bench(&t->c, name, dims);
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&t->rs, &env);
    const char *dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&t->rs, &dir, 1, stderr), 0);
    ts_runner_limits lim = ts_runner_default_limits();
    char *err = NULL;
    cr_assert_eq(ts_saturate(&t->c.g, &t->rs, ts_default_phases, ts_default_nphases, &lim, &t->s, &err), 0, "%s", err);
}

static void free_saturated(saturated *t) {
    cr_assert_eq(t->s.x.axis_conflicts, 0, "no rule merged tensors of different axes");
    ts_saturation_free(&t->s);
    ts_rule_free(&t->rs);
    free_checked(&t->c);
}

/* The node of op `op` in class cls, or NULL. */
static const ts_enode *class_node_of(ts_egraph *eg, uint32_t cls, int32_t op) {
    cls = ts_eg_find(eg, cls);
    for (uint32_t i = 0; i < ts_eg_class_size(eg, cls); i++)
        if (ts_eg_class_node(eg, cls, i)->op == op) return ts_eg_class_node(eg, cls, i);
    return NULL;
}

/* The class of the graph's node that the user tensor `name` is. */
static uint32_t class_of_tensor(saturated *t, const char *name) {
    for (int i = 0; i < t->c.g.nnamed; i++)
        if (strcmp(t->c.g.named[i].name, name) == 0)
            return ts_eg_find(t->s.x.eg, t->s.x.node_class[t->c.g.named[i].ref.node]);
    cr_assert_fail("no tensor %s", name);
    return TS_EG_NONE;
}

Test(saturate, attention_reaches_the_online_softmax_form) {
    saturated t;
    saturate_bench(&t, "attention", "h=2,t_q=8,t_kv=8,d_h=4");
    const ts_enode *n = class_node_of(t.s.x.eg, t.s.x.output_class[0], TS_OP_ONLINE_WSUM);
    cr_assert_not_null(n, "O = online_wsum(S, V, c)");
    cr_assert_eq(ts_eg_find(t.s.x.eg, n->kid[0]), class_of_tensor(&t, "S"), "scores S stream");
    cr_assert_eq(ts_eg_find(t.s.x.eg, n->kid[1]), class_of_tensor(&t, "V"), "values V are accumulated");
    free_saturated(&t);
}

Test(saturate, scaled_causal_and_gqa_attention_reach_the_online_softmax_form) {
    const char *graphs[][2] = {{"attention_causal", "h=2,t_q=8,t_kv=8,d_h=4"},
                               {"attention_gqa", "t_q=8,t_kv=8,d_h=4"}};
    for (int i = 0; i < 2; i++) {
        saturated t;
        saturate_bench(&t, graphs[i][0], graphs[i][1]);
        const ts_enode *n = class_node_of(t.s.x.eg, t.s.x.output_class[0], TS_OP_ONLINE_WSUM);
        cr_assert_not_null(n, "%s: O = online_wsum(scores, V, c)", graphs[i][0]);
        cr_assert_eq(ts_eg_find(t.s.x.eg, n->kid[1]), class_of_tensor(&t, "V"));
        /* the scores stream is the masked, scaled S: the mask and scale are fused into the score expression */
        cr_assert_eq(ts_eg_find(t.s.x.eg, n->kid[0]), class_of_tensor(&t, "S_masked"));
        free_saturated(&t);
    }
}

Test(saturate, rmsnorm_reaches_the_row_scale_after_the_contraction) {
    saturated t;
    saturate_bench(&t, "rmsnorm", "m=4,d=8,n=4");
    ts_egraph *eg = t.s.x.eg;
    /* the plain contraction X·W exists, and Y = (X·W) * rowscale with rowscale constant along d */
    ts_enode xw = {.op = TS_OP_REDUCE_SUM, .param = {ts_graph_find_axis(&t.c.g, "d")}};
    ts_enode prod = {.op = TS_OP_MUL, .kid = {class_of_tensor(&t, "X"), class_of_tensor(&t, "W")}};
    xw.kid[0] = ts_eg_lookup(eg, &prod);
    cr_assert_neq(xw.kid[0], TS_EG_NONE, "X*W is in the e-graph");
    uint32_t xw_cls = ts_eg_lookup(eg, &xw);
    cr_assert_neq(xw_cls, TS_EG_NONE, "sum_d X*W is in the e-graph");
    uint32_t y = ts_eg_find(eg, t.s.x.output_class[0]);
    bool found = false;
    for (uint32_t i = 0; i < ts_eg_class_size(eg, y); i++) {
        const ts_enode *n = ts_eg_class_node(eg, y, i);
        if (n->op != TS_OP_MUL) continue;
        for (int k = 0; k < 2; k++) {
            const ts_egir_data *other = ts_eg_data_const(eg, ts_eg_find(eg, n->kid[1 - k]));
            if (ts_eg_find(eg, n->kid[k]) == ts_eg_find(eg, xw_cls) &&
                !(other->axes & (1ull << ts_graph_find_axis(&t.c.g, "d"))) &&
                !(other->axes & (1ull << ts_graph_find_axis(&t.c.g, "n"))))
                found = true;
        }
    }
    cr_assert(found, "Y = (sum_d X*W) * s[m]");
    free_saturated(&t);
}

Test(saturate, the_saturated_output_still_evaluates_to_the_graph) {
    saturated t;
    saturate_bench(&t, "attention_causal", "h=2,t_q=8,t_kv=8,d_h=4");
    ts_eg_term term;
    cr_assert(ts_eg_extract_smallest(t.s.x.eg, ts_eg_find(t.s.x.eg, t.s.x.output_class[0]), &term));
    ts_graph tg;
    ts_egir_term_graph(&t.s.x, &term, &tg);
    double **in = ts_random_inputs(&t.c.g, 3), **a = NULL, **b = NULL;
    char *err;
    cr_assert_eq(ts_interp_run(&t.c.g, in, &a, NULL, &err), 0);
    cr_assert_eq(ts_interp_run(&tg, in, &b, NULL, &err), 0);
    int64_t n = ts_output_numel(&t.c.g, 0);
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += (a[0][i] - b[0][i]) * (a[0][i] - b[0][i]), den += a[0][i] * a[0][i];
    cr_assert_lt(sqrt(num / den), 1e-12, "the extracted fused term computes the same attention");
    ts_free_buffers(in, t.c.g.ninputs);
    ts_free_buffers(a, 1);
    ts_free_buffers(b, 1);
    ts_graph_free(&tg);
    ts_eg_term_free(&term);
    free_saturated(&t);
}

Test(saturate, softcapped_attention_reaches_the_online_softmax_form) {
    saturated t;
    const char *y = "axes: {h: 2, t_q: 8, t_kv: 8, d_h: 4}\ninputs:\n"
                    "  Q: {dtype: fp16, shape: [h, t_q, d_h]}\n  K: {dtype: fp16, shape: [h, t_kv, d_h]}\n"
                    "  V: {dtype: fp16, shape: [h, t_kv, d_h]}\nops:\n"
                    "  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                    "  - {name: S1, op: scale, args: [S], by: 0.02}\n"
                    "  - {name: S2, op: tanh, args: [S1]}\n"
                    "  - {name: S3, op: scale, args: [S2], by: 50}\n"
                    "  - {name: P, op: softmax, args: [S3], axis: t_kv}\n"
                    "  - {name: O, op: matmul, args: [P, V], over: t_kv}\noutputs: [O]\n";
    check_ok(&t.c, y);
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&t.rs, &env);
    const char *dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&t.rs, &dir, 1, stderr), 0);
    ts_runner_limits lim = ts_runner_default_limits();
    char *err = NULL;
    cr_assert_eq(ts_saturate(&t.c.g, &t.rs, ts_default_phases, ts_default_nphases, &lim, &t.s, &err), 0, "%s", err);
    const ts_enode *n = class_node_of(t.s.x.eg, t.s.x.output_class[0], TS_OP_ONLINE_WSUM);
    cr_assert_not_null(n, "O = online_wsum(softcapped scores, V, c)");
    cr_assert_eq(ts_eg_find(t.s.x.eg, n->kid[0]), class_of_tensor(&t, "S3"));
    free_saturated(&t);
}

/* The output class holds an expression whose dual contraction reads `x` once for both weights. */
static void assert_dual_form(const char *graph, const char *dims, const char *x, const char *w0, const char *w1) {
    saturated t;
    saturate_bench(&t, graph, dims);
    ts_egraph *eg = t.s.x.eg;
    uint32_t cx = class_of_tensor(&t, x), c0 = class_of_tensor(&t, w0), c1 = class_of_tensor(&t, w1);
    bool found = false;
    for (uint32_t cls = 0; cls < ts_eg_id_bound(eg) && !found; cls++) {
        if (!ts_eg_is_root(eg, cls)) continue;
        for (uint32_t i = 0; i < ts_eg_class_size(eg, cls); i++) {
            const ts_enode *n = ts_eg_class_node(eg, cls, i);
            if (n->op != TS_OP_DUAL) continue;
            uint32_t k0 = ts_eg_find(eg, n->kid[0]), k1 = ts_eg_find(eg, n->kid[1]), k2 = ts_eg_find(eg, n->kid[2]);
            found |= k0 == cx && ((k1 == c0 && k2 == c1) || (k1 == c1 && k2 == c0));
        }
    }
    cr_assert(found, "%s: dual{k}(%s, %s, %s) is in the e-graph", graph, x, w0, w1);
    /* and the two contractions the graph wrote are the dual's halves */
    const char *halves[2] = {"U", "G"};
    for (int h = 0; h < 2; h++)
        cr_assert_not_null(class_node_of(eg, class_of_tensor(&t, halves[h]), TS_OP_PICK), "%s is a pick of the dual",
                           halves[h]);
    free_saturated(&t);
}

Test(saturate, swiglu_reaches_the_dual_contraction_form) { assert_dual_form("swiglu", "m=4,d=8,n=4", "X", "W_up", "W_gate"); }

Test(saturate, rmsnorm_mlp_reaches_the_dual_contraction_form) {
    assert_dual_form("rmsnorm_mlp", "m=4,d=8,n=4", "X", "W_up", "W_gate");
}
