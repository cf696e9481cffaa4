/* test_egraph.c — the e-graph: hashcons, union-find, deferred rebuild and congruence, the analysis hooks,
 * and smallest-term extraction. Terms are built node by node here; the rule syntax is tested elsewhere. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "egraph.h"
#include "ops.h"

/* Test leaves: ops of arity 0 named a..e, and f, a unary op outside the primitives. */
static const ts_eg_opinfo extra_ops[] = {
    {"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"d", 0, 0}, {"e", 0, 0}, {"f", 1, 0},
};
static const ts_eg_ops ops = {extra_ops, 6};
enum { OP_A = TS_OP_COUNT, OP_B, OP_C, OP_D, OP_E, OP_F };

static uint32_t leaf(ts_egraph *eg, int32_t op) { return ts_eg_add(eg, &(ts_enode){.op = op}); }
static uint32_t un(ts_egraph *eg, int32_t op, uint32_t x) { return ts_eg_add(eg, &(ts_enode){.op = op, .kid = {x}}); }
static uint32_t bin(ts_egraph *eg, int32_t op, uint32_t x, uint32_t y) {
    return ts_eg_add(eg, &(ts_enode){.op = op, .kid = {x, y}});
}

/* ---- ops ---------------------------------------------------------------------------------------- */

Test(egraph, op_info_covers_primitives_then_extras) {
    cr_assert_str_eq(ts_eg_op_info(&ops, TS_OP_MUL)->name, "mul");
    cr_assert_eq(ts_eg_op_info(&ops, TS_OP_MUL)->arity, 2);
    cr_assert_eq(ts_eg_op_info(&ops, TS_OP_REDUCE_SUM)->nparams, 1);
    cr_assert_eq(ts_eg_op_info(&ops, TS_OP_ADD)->nparams, 0);
    cr_assert_str_eq(ts_eg_op_info(&ops, OP_F)->name, "f");
    cr_assert_null(ts_eg_op_info(&ops, OP_F + 1));
    cr_assert_null(ts_eg_op_info(NULL, OP_A));
    cr_assert_null(ts_eg_op_info(&ops, -1));
    cr_assert_eq(ts_eg_op_lookup(&ops, "recip"), TS_OP_RECIP);
    cr_assert_eq(ts_eg_op_lookup(&ops, "c"), OP_C);
    cr_assert_eq(ts_eg_op_lookup(&ops, "nope"), -1);
}

/* ---- hashcons ----------------------------------------------------------------------------------- */

Test(egraph, hashcons_returns_same_id_for_same_node) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    uint32_t x = bin(eg, TS_OP_MUL, a, b);
    cr_assert_eq(bin(eg, TS_OP_MUL, a, b), x);
    cr_assert_eq(leaf(eg, OP_A), a);
    cr_assert_neq(bin(eg, TS_OP_MUL, b, a), x); /* operand order is identity */
    cr_assert_neq(bin(eg, TS_OP_ADD, a, b), x);
    cr_assert_eq(ts_eg_node_count(eg), 5);
    cr_assert_eq(ts_eg_class_count(eg), 5);
    cr_assert_eq(ts_eg_lookup(eg, &(ts_enode){.op = TS_OP_MUL, .kid = {a, b}}), x);
    cr_assert_eq(ts_eg_lookup(eg, &(ts_enode){.op = TS_OP_MAX, .kid = {a, b}}), TS_EG_NONE);
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, params_are_part_of_node_identity) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A);
    uint32_t s1 = ts_eg_add(eg, &(ts_enode){.op = TS_OP_REDUCE_SUM, .kid = {a}, .param = {1}});
    uint32_t s2 = ts_eg_add(eg, &(ts_enode){.op = TS_OP_REDUCE_SUM, .kid = {a}, .param = {2}});
    cr_assert_neq(s1, s2);
    cr_assert_eq(ts_eg_add(eg, &(ts_enode){.op = TS_OP_REDUCE_SUM, .kid = {a}, .param = {1}}), s1);
    uint32_t k1 = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {0x3ff0000000000000}});
    uint32_t k2 = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {0x4000000000000000}});
    cr_assert_neq(k1, k2);
    ts_eg_free(eg);
}

Test(egraph, fields_past_arity_and_nparams_are_ignored) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A);
    uint32_t r = un(eg, TS_OP_RECIP, a);
    cr_assert_eq(ts_eg_add(eg, &(ts_enode){.op = TS_OP_RECIP, .kid = {a, 77, 5}, .param = {9, 9}}), r);
    cr_assert_eq(ts_eg_add(eg, &(ts_enode){.op = OP_A, .kid = {3}, .param = {4}}), a);
    ts_eg_free(eg);
}

Test(egraph, hashcons_survives_growth) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t ids[5000];
    for (int i = 0; i < 5000; i++) ids[i] = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {i}});
    for (int i = 0; i < 5000; i++)
        cr_assert_eq(ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {i}}), ids[i]);
    cr_assert_eq(ts_eg_node_count(eg), 5000);
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

/* ---- union-find and rebuild --------------------------------------------------------------------- */

Test(egraph, union_is_recorded_until_rebuild) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    cr_assert(ts_eg_union(eg, a, b));
    cr_assert(ts_eg_is_dirty(eg));
    cr_assert_neq(ts_eg_find(eg, a), ts_eg_find(eg, b));
    cr_assert_eq(ts_eg_class_count(eg), 2);
    ts_eg_rebuild(eg);
    cr_assert_not(ts_eg_is_dirty(eg));
    cr_assert_eq(ts_eg_find(eg, a), ts_eg_find(eg, b));
    cr_assert_eq(ts_eg_class_count(eg), 1);
    cr_assert_eq(ts_eg_class_size(eg, ts_eg_find(eg, a)), 2);
    cr_assert_not(ts_eg_union(eg, a, b)); /* already one class */
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, union_then_rebuild_merges_congruent_parents) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B), c = leaf(eg, OP_C);
    uint32_t fa = un(eg, OP_F, a), fb = un(eg, OP_F, b);
    uint32_t ma = bin(eg, TS_OP_MUL, a, c), mb = bin(eg, TS_OP_MUL, b, c);
    cr_assert_eq(ts_eg_node_count(eg), 7);
    ts_eg_union(eg, a, b);
    ts_eg_rebuild(eg);
    cr_assert_eq(ts_eg_find(eg, fa), ts_eg_find(eg, fb));
    cr_assert_eq(ts_eg_find(eg, ma), ts_eg_find(eg, mb));
    cr_assert_eq(ts_eg_node_count(eg), 5); /* a, b, c, f(a|b), mul(a|b, c) */
    cr_assert_eq(ts_eg_class_count(eg), 4);
    cr_assert_eq(ts_eg_class_size(eg, ts_eg_find(eg, fa)), 1);
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, rebuild_propagates_congruence_upwards) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    uint32_t x = a, y = b;
    for (int i = 0; i < 20; i++) {
        x = un(eg, OP_F, x);
        y = un(eg, OP_F, y);
    }
    uint32_t top_x = bin(eg, TS_OP_ADD, x, a), top_y = bin(eg, TS_OP_ADD, y, b);
    ts_eg_union(eg, a, b);
    ts_eg_rebuild(eg);
    cr_assert_eq(ts_eg_find(eg, top_x), ts_eg_find(eg, top_y));
    cr_assert_eq(ts_eg_class_count(eg), 22);
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, adding_with_stale_ids_finds_the_merged_node) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    uint32_t fa = un(eg, OP_F, a);
    ts_eg_union(eg, a, b);
    ts_eg_rebuild(eg);
    cr_assert_eq(un(eg, OP_F, b), ts_eg_find(eg, fa));
    cr_assert_eq(ts_eg_node_count(eg), 3);
    ts_eg_free(eg);
}

Test(egraph, path_halving_keeps_find_canonical) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    enum { N = 1000 };
    uint32_t id[N];
    for (int i = 0; i < N; i++) id[i] = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {i}});
    for (int i = 1; i < N; i++) { /* a long chain, merged one rebuild at a time */
        ts_eg_union(eg, id[i - 1], id[i]);
        ts_eg_rebuild(eg);
    }
    uint32_t root = ts_eg_find(eg, id[0]);
    cr_assert(ts_eg_is_root(eg, root));
    for (int rep = 0; rep < 2; rep++) /* finds compress paths; results stay the same */
        for (int i = N - 1; i >= 0; i--) cr_assert_eq(ts_eg_find(eg, id[i]), root);
    cr_assert_eq(ts_eg_class_count(eg), 1);
    cr_assert_eq(ts_eg_class_size(eg, root), N);
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, class_nodes_lists_every_member) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B), c = leaf(eg, OP_C);
    ts_eg_union(eg, a, b);
    ts_eg_union(eg, b, c);
    ts_eg_rebuild(eg);
    uint32_t r = ts_eg_find(eg, a);
    bool seen[3] = {false, false, false};
    for (uint32_t i = 0; i < ts_eg_class_size(eg, r); i++) seen[ts_eg_class_node(eg, r, i)->op - OP_A] = true;
    cr_assert(seen[0] && seen[1] && seen[2]);
    uint32_t roots = 0;
    for (uint32_t id = 0; id < ts_eg_id_bound(eg); id++) roots += ts_eg_is_root(eg, id);
    cr_assert_eq(roots, ts_eg_class_count(eg));
    ts_eg_free(eg);
}

/* Random unions checked against a naive partition, with the invariants after every rebuild. */
Test(egraph, random_unions_match_a_naive_partition) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    enum { N = 60 };
    uint32_t leaf_id[N], label[N], unary[N];
    for (int i = 0; i < N; i++) {
        leaf_id[i] = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {i}});
        unary[i] = un(eg, TS_OP_NEG, leaf_id[i]);
        label[i] = (uint32_t)i;
    }
    srand(7);
    for (int round = 0; round < 30; round++) {
        for (int k = 0; k < 3; k++) {
            int i = rand() % N, j = rand() % N;
            ts_eg_union(eg, leaf_id[i], leaf_id[j]);
            uint32_t from = label[j], to = label[i];
            for (int t = 0; t < N; t++)
                if (label[t] == from) label[t] = to;
        }
        ts_eg_rebuild(eg);
        cr_assert(ts_eg_check_invariants(eg));
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                bool same = label[i] == label[j];
                cr_assert_eq(ts_eg_find(eg, leaf_id[i]) == ts_eg_find(eg, leaf_id[j]), same);
                cr_assert_eq(ts_eg_find(eg, unary[i]) == ts_eg_find(eg, unary[j]), same); /* congruence */
            }
    }
    ts_eg_free(eg);
}

/* ---- analysis ----------------------------------------------------------------------------------- */

/* Constant folding over small integers: constant{v} is v; add of known values is known. */
typedef struct {
    bool known;
    int64_t value;
} fold;

static void fold_make(void *ctx, const ts_egraph *eg, const ts_enode *n, void *out) {
    (void)ctx;
    fold *f = out;
    *f = (fold){false, 0};
    if (n->op == TS_OP_CONSTANT) *f = (fold){true, n->param[0]};
    if (n->op == TS_OP_ADD) {
        const fold *x = ts_eg_data_const(eg, n->kid[0]), *y = ts_eg_data_const(eg, n->kid[1]);
        if (x->known && y->known) *f = (fold){true, x->value + y->value};
    }
}

static bool fold_merge(void *ctx, void *into, const void *from) {
    (void)ctx;
    fold *a = into;
    const fold *b = from;
    if (a->known || !b->known) return false;
    *a = *b;
    return true;
}

static int modify_calls;

/* Puts the folded constant into every class whose value is known. */
static void fold_modify(void *ctx, ts_egraph *eg, uint32_t cls) {
    (void)ctx;
    modify_calls++;
    fold f = *(const fold *)ts_eg_data(eg, cls);
    if (!f.known) return;
    uint32_t k = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {f.value}});
    ts_eg_union(eg, cls, k);
}

static const ts_eg_analysis folding = {sizeof(fold), NULL, fold_make, fold_merge, fold_modify};

Test(egraph, analysis_make_computes_data_of_new_classes) {
    ts_egraph *eg = ts_eg_new(&ops, &folding);
    uint32_t two = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {2}});
    uint32_t three = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {3}});
    uint32_t sum = bin(eg, TS_OP_ADD, two, three);
    const fold *f = ts_eg_data(eg, sum);
    cr_assert(f->known);
    cr_assert_eq(f->value, 5);
    ts_eg_rebuild(eg);
    uint32_t five = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {5}});
    cr_assert_eq(five, ts_eg_find(eg, sum)); /* modify added constant{5} and merged it */
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, analysis_merge_propagates_to_parents_on_rebuild) {
    ts_egraph *eg = ts_eg_new(&ops, &folding);
    uint32_t x = leaf(eg, OP_A);
    uint32_t one = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {1}});
    uint32_t y = bin(eg, TS_OP_ADD, x, one);
    uint32_t z = bin(eg, TS_OP_ADD, y, one);
    cr_assert_not(((const fold *)ts_eg_data(eg, z))->known);
    modify_calls = 0;
    uint32_t four = ts_eg_add(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {4}});
    ts_eg_union(eg, x, four); /* now a = 4, so y = 5 and z = 6 */
    ts_eg_rebuild(eg);
    const fold *fz = ts_eg_data(eg, z);
    cr_assert(fz->known);
    cr_assert_eq(fz->value, 6);
    cr_assert_gt(modify_calls, 0);
    uint32_t six = ts_eg_lookup(eg, &(ts_enode){.op = TS_OP_CONSTANT, .param = {6}});
    cr_assert_eq(six, ts_eg_find(eg, z));
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

/* ---- extraction --------------------------------------------------------------------------------- */

static char *extract_str(ts_egraph *eg, uint32_t cls) {
    ts_eg_term t;
    cr_assert(ts_eg_extract_smallest(eg, cls, &t));
    char *s = ts_eg_term_str(&ops, &t);
    ts_eg_term_free(&t);
    return s;
}

Test(egraph, extract_smallest_picks_fewest_nodes) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    uint32_t rr = un(eg, TS_OP_RECIP, un(eg, TS_OP_RECIP, a));
    uint32_t big = bin(eg, TS_OP_MUL, rr, b);
    char *s = extract_str(eg, big);
    cr_assert_str_eq(s, "(mul (recip (recip a)) b)");
    free(s);
    ts_eg_union(eg, rr, a);
    ts_eg_rebuild(eg);
    s = extract_str(eg, big);
    cr_assert_str_eq(s, "(mul a b)");
    free(s);
    ts_eg_free(eg);
}

Test(egraph, extract_terminates_on_cycles) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A);
    uint32_t fa = un(eg, OP_F, a);
    ts_eg_union(eg, a, fa); /* the class holds a and f(itself) */
    ts_eg_rebuild(eg);
    cr_assert_eq(ts_eg_class_size(eg, ts_eg_find(eg, a)), 2);
    char *s = extract_str(eg, fa);
    cr_assert_str_eq(s, "a");
    free(s);
    ts_eg_free(eg);
}

Test(egraph, term_str_prints_params_in_braces) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t in = ts_eg_add(eg, &(ts_enode){.op = TS_OP_INPUT, .param = {0}});
    uint32_t s = ts_eg_add(eg, &(ts_enode){.op = TS_OP_REDUCE_SUM, .kid = {in}, .param = {3}});
    char *str = extract_str(eg, s);
    cr_assert_str_eq(str, "(reduce_sum{3} input{0})");
    free(str);
    ts_eg_free(eg);
}

/* ---- provenance --------------------------------------------------------------------------------- */

Test(egraph, node_keeps_the_origin_current_when_it_was_first_added) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    ts_eg_set_origin(eg, 3, 7);
    bin(eg, TS_OP_MUL, a, b);
    ts_eg_set_origin(eg, 5, 9);
    bin(eg, TS_OP_MUL, a, b); /* already there: keeps (3, 7) */
    un(eg, OP_F, a);
    int32_t tag = 0, iter = 0;
    cr_assert(ts_eg_node_origin(eg, &(ts_enode){.op = TS_OP_MUL, .kid = {a, b}}, &tag, &iter));
    cr_assert_eq(tag, 3);
    cr_assert_eq(iter, 7);
    cr_assert_eq(ts_eg_node_tag(eg, &(ts_enode){.op = OP_F, .kid = {a}}), 5);
    cr_assert_eq(ts_eg_node_iter(eg, &(ts_enode){.op = OP_F, .kid = {a}}), 9);
    cr_assert_eq(ts_eg_node_tag(eg, &(ts_enode){.op = OP_A}), -1); /* from the input */
    cr_assert_eq(ts_eg_node_iter(eg, &(ts_enode){.op = OP_A}), -1);
    cr_assert_not(ts_eg_node_origin(eg, &(ts_enode){.op = TS_OP_ADD, .kid = {a, b}}, &tag, &iter));
    cr_assert_eq(tag, -1);
    cr_assert_eq(iter, -1);
    ts_eg_free(eg);
}

Test(egraph, origin_survives_merges_and_stale_kid_ids) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    ts_eg_set_origin(eg, 2, 0);
    uint32_t fa = un(eg, OP_F, a);
    ts_eg_set_origin(eg, 4, 1);
    un(eg, OP_F, b);
    ts_eg_union(eg, a, b);
    ts_eg_rebuild(eg); /* f(a) and f(b) are now one node: one of the two origins survives */
    int32_t tag = ts_eg_node_tag(eg, &(ts_enode){.op = OP_F, .kid = {b}});
    cr_assert(tag == 2 || tag == 4);
    cr_assert_eq(ts_eg_node_tag(eg, &(ts_enode){.op = OP_F, .kid = {a}}), tag); /* a is a stale id now */
    cr_assert_eq(ts_eg_find(eg, fa), ts_eg_lookup(eg, &(ts_enode){.op = OP_F, .kid = {b}}));
    ts_eg_free(eg);
}

/* ---- op index ----------------------------------------------------------------------------------- */

static void assert_classes(const ts_egraph *eg, int32_t op, const uint32_t *want, uint32_t nwant) {
    uint32_t n;
    const uint32_t *got = ts_eg_classes_with_op(eg, op, &n);
    cr_assert_not_null(got);
    cr_assert_eq(n, nwant, "%u classes, want %u", n, nwant);
    for (uint32_t i = 0; i < n; i++) cr_assert_eq(got[i], want[i], "class %u: %u, want %u", i, got[i], want[i]);
}

Test(egraph, op_index_lists_each_ops_classes_until_the_graph_changes) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t n;
    cr_assert_null(ts_eg_classes_with_op(eg, TS_OP_MUL, &n)); /* never built */
    uint32_t a = leaf(eg, OP_A), b = leaf(eg, OP_B);
    uint32_t m = bin(eg, TS_OP_MUL, a, b), s = bin(eg, TS_OP_ADD, a, b), m2 = bin(eg, TS_OP_MUL, b, a);
    ts_eg_union(eg, m2, s); /* one class holding a mul and an add */
    ts_eg_rebuild(eg);
    ts_eg_index_ops(eg);
    uint32_t ms = ts_eg_find(eg, s);
    assert_classes(eg, TS_OP_MUL, (uint32_t[]){m < ms ? m : ms, m < ms ? ms : m}, 2);
    assert_classes(eg, TS_OP_ADD, (uint32_t[]){ms}, 1);
    assert_classes(eg, OP_A, (uint32_t[]){a}, 1);
    assert_classes(eg, TS_OP_EXP2, NULL, 0);
    leaf(eg, OP_C); /* a new node: stale */
    cr_assert_null(ts_eg_classes_with_op(eg, OP_C, &n));
    cr_assert_eq(n, 0);
    ts_eg_index_ops(eg);
    assert_classes(eg, OP_C, (uint32_t[]){ts_eg_lookup(eg, &(ts_enode){.op = OP_C})}, 1);
    ts_eg_union(eg, a, b);
    cr_assert_null(ts_eg_classes_with_op(eg, OP_A, &n)); /* a pending union: stale */
    ts_eg_rebuild(eg);
    cr_assert_null(ts_eg_classes_with_op(eg, OP_A, &n)); /* merged: stale */
    ts_eg_index_ops(eg);
    ts_eg_drop_op_index(eg);
    cr_assert_null(ts_eg_classes_with_op(eg, OP_A, &n));
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}

Test(egraph, op_index_makes_each_ops_nodes_one_span_of_the_class) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t leaves[5], cls[10];
    for (int i = 0; i < 5; i++) leaves[i] = leaf(eg, OP_A + i);
    for (int i = 0; i < 10; i++) /* alternate add and mul so the class's nodes interleave by op */
        cls[i] = bin(eg, i % 2 ? TS_OP_MUL : TS_OP_ADD, leaves[i % 5], leaves[(i + 1 + i / 5) % 5]);
    for (int i = 1; i < 10; i++) ts_eg_union(eg, cls[0], cls[i]);
    ts_eg_rebuild(eg);
    uint32_t c = ts_eg_find(eg, cls[0]), first, end;
    cr_assert_eq(ts_eg_class_size(eg, c), 10);
    ts_eg_class_op_span(eg, c, TS_OP_MUL, &first, &end); /* no index: the whole class */
    cr_assert_eq(first, 0);
    cr_assert_eq(end, 10);
    ts_eg_index_ops(eg);
    for (int32_t op = TS_OP_ADD; op <= TS_OP_MUL; op += TS_OP_MUL - TS_OP_ADD) {
        ts_eg_class_op_span(eg, c, op, &first, &end);
        cr_assert_eq(end - first, 5);
        for (uint32_t i = 0; i < 10; i++) cr_assert_eq(ts_eg_class_node(eg, c, i)->op == op, i >= first && i < end);
    }
    ts_eg_class_op_span(eg, c, TS_OP_EXP2, &first, &end);
    cr_assert_eq(first, end);
    cr_assert(ts_eg_check_invariants(eg));
    ts_eg_free(eg);
}
