/* test_saturate.c — rewrite-to-goal: saturating the naive bench graphs with the shipped rules reaches the
 * fused forms (online softmax for attention, the row scale after the contraction for rmsnorm, ...), and
 * the shipped rules load without errors. */
#include "saturate.h"
#include "testutil.h"

typedef struct {
    checked c;
    ts_rules rs;
    ts_saturation s;
} saturated;

static void saturate_bench(saturated *t, const char *name, const char *dims) {
    char *path = ts_strfmt("bench/graphs/%s.yaml", name);
    size_t len;
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    char *text = ts_read_text_file(path, &len, &d);
    cr_assert_not_null(text);
    text = ts_xrealloc(text, len + 1);
    text[len] = '\0';
    check_ok_dims(&t->c, text, dims);
    free(text);
    free(path);
    ts_diags_free(&d);
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
