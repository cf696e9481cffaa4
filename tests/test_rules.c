/* test_rules.c — the rule language: loading (names, rulesets, positions, docs, two-way rules, params),
 * the exact text of every load-time error (fixtures in tests/rules_bad/), e-matching, guards and
 * instantiation, multi-patterns (egg's join semantics) and the op index. The saturation loop is tested in
 * test_runner.c. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "egraph.h"
#include "ops.h"
#include "rules.h"

static const ts_eg_opinfo extra_ops[] = {
    {"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"t", 0, 1}, /* t{mask}: a leaf varying along the axes in mask */
};
static const ts_eg_ops ops = {extra_ops, 4};

/* const-along ?s ?k: class s does not vary along axis k (its analysis data is a mask of varying axes). */
static bool const_along(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs) {
    (void)ctx, (void)eg;
    cr_assert_eq(nargs, 2);
    cr_assert_not(args[0].is_param);
    cr_assert(args[1].is_param);
    return !(*(const uint64_t *)args[0].data & (1ull << args[1].value));
}

static int record_calls;
static ts_rule_arg recorded[3];

static bool record_args(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs) {
    (void)eg;
    cr_assert_eq(ctx, &record_calls);
    record_calls++;
    for (int i = 0; i < nargs; i++) recorded[i] = args[i];
    return true;
}

static const ts_rule_guard guards[] = {{"const-along", 2, const_along, NULL}, {"record", 3, record_args, NULL}};
static const ts_rule_env env = {&ops, guards, 2, &record_calls};

/* The varying-axes analysis: t{m} varies along m, a..c along everything, reduce_sum{k} removes k. */
static void axes_make(void *ctx, const ts_egraph *eg, const ts_enode *n, void *out) {
    (void)ctx;
    uint64_t m = ~0ull;
    const ts_eg_opinfo *info = ts_eg_op_info(&ops, n->op);
    if (strcmp(info->name, "t") == 0) m = (uint64_t)n->param[0];
    if (info->arity > 0) {
        m = 0;
        for (int k = 0; k < info->arity; k++) m |= *(const uint64_t *)ts_eg_data_const(eg, n->kid[k]);
    }
    if (n->op == TS_OP_REDUCE_SUM) m &= ~(1ull << n->param[0]);
    *(uint64_t *)out = m;
}

static bool axes_merge(void *ctx, void *into, const void *from) {
    (void)ctx;
    uint64_t *a = into, b = *(const uint64_t *)from;
    if ((*a & b) == *a) return false;
    *a &= b;
    return true;
}

static const ts_eg_analysis axes = {sizeof(uint64_t), NULL, axes_make, axes_merge, NULL};

static const char *good =
    "ruleset algebra\n"
    "\n"
    "# Multiplication commutes:\n"
    "#   a*b = b*a\n"
    "rule mul-commute: (mul ?a ?b) <=> (mul ?b ?a)\n"
    "# 1/(1/x) = x\n"
    "rule recip-recip: (recip (recip ?x)) => ?x\n"
    "\n"
    "rule scale-past-sum: (reduce_sum{?k} (mul ?x ?s))\n"
    "    => (mul (reduce_sum{?k} ?x) ?s)\n"
    "    if (const-along ?s ?k)   # sum(x*s) = sum(x)*s when s is constant along k\n"
    "ruleset cleanup\n"
    "rule sum-axis-3: (reduce_sum{3} ?x) => (reduce_max{0x3} ?x) if (record ?x 7 ?x)\n"
    "ruleset algebra\n"
    "rule add-self: (add ?x ?x) => (mul ?x constant{2})\n";

static void load_good(ts_rules *rs) {
    ts_rule_init(rs, &env);
    ts_diags d;
    bool ok = ts_rule_load_string(rs, "good.rules", good, &d);
    if (!ok) ts_diags_print(&d, stderr);
    cr_assert(ok);
    cr_assert_eq(d.n, 0);
    ts_diags_free(&d);
}

/* ---- loading ------------------------------------------------------------------------------------ */

Test(rules, load_keeps_names_rulesets_positions_and_docs) {
    ts_rules rs;
    load_good(&rs);
    cr_assert_eq(rs.nrules, 6);
    cr_assert_eq(rs.nsets, 2);
    int alg = ts_rule_find_ruleset(&rs, "algebra"), clean = ts_rule_find_ruleset(&rs, "cleanup");
    cr_assert_eq(alg, 0);
    cr_assert_eq(clean, 1);
    cr_assert_eq(rs.set[alg].n, 5); /* a ruleset named again continues */
    cr_assert_eq(rs.set[clean].n, 1);
    const ts_rule *r = &rs.rule[ts_rule_find(&rs, "recip-recip")];
    cr_assert_str_eq(r->file, "good.rules");
    cr_assert_eq(r->line, 7);
    cr_assert_eq(r->col, 6);
    cr_assert_eq(r->ruleset, alg);
    cr_assert_str_eq(r->doc, "1/(1/x) = x");
    cr_assert_str_eq(rs.rule[0].doc, "Multiplication commutes:\n  a*b = b*a");
    cr_assert_null(rs.rule[ts_rule_find(&rs, "scale-past-sum")].doc);
    cr_assert_eq(ts_rule_find(&rs, "nope"), -1);
    cr_assert_eq(ts_rule_find_ruleset(&rs, "nope"), -1);
    ts_rule_free(&rs);
}

Test(rules, two_way_rule_loads_as_name_and_name_rev) {
    ts_rules rs;
    load_good(&rs);
    int f = ts_rule_find(&rs, "mul-commute"), b = ts_rule_find(&rs, "mul-commute-rev");
    cr_assert_eq(f, 0);
    cr_assert_eq(b, 1);
    cr_assert_not(rs.rule[f].reverse);
    cr_assert(rs.rule[b].reverse);
    char *l = ts_rule_pattern_str(&rs, &rs.rule[b], &rs.rule[b].lhs);
    char *r = ts_rule_pattern_str(&rs, &rs.rule[b], &rs.rule[b].rhs);
    cr_assert_str_eq(l, "(mul ?b ?a)");
    cr_assert_str_eq(r, "(mul ?a ?b)");
    cr_assert_str_eq(rs.rule[b].doc, rs.rule[f].doc);
    cr_assert_eq(rs.rule[b].line, 5);
    free(l);
    free(r);
    ts_rule_free(&rs);
}

Test(rules, patterns_print_back_in_the_rule_syntax) {
    ts_rules rs;
    load_good(&rs);
    const ts_rule *r = &rs.rule[ts_rule_find(&rs, "scale-past-sum")];
    char *l = ts_rule_pattern_str(&rs, r, &r->lhs), *s = ts_rule_pattern_str(&rs, r, &r->rhs);
    cr_assert_str_eq(l, "(reduce_sum{?k} (mul ?x ?s))");
    cr_assert_str_eq(s, "(mul (reduce_sum{?k} ?x) ?s)");
    cr_assert_eq(r->nconds, 1);
    cr_assert_eq(r->nvars, 3);
    cr_assert(r->var[0].is_param);
    free(l);
    free(s);
    const ts_rule *h = &rs.rule[ts_rule_find(&rs, "sum-axis-3")];
    s = ts_rule_pattern_str(&rs, h, &h->rhs);
    cr_assert_str_eq(s, "(reduce_max{3} ?x)"); /* hex literal */
    free(s);
    const ts_rule *k = &rs.rule[ts_rule_find(&rs, "add-self")];
    s = ts_rule_pattern_str(&rs, k, &k->rhs);
    cr_assert_str_eq(s, "(mul ?x constant{2})");
    free(s);
    ts_rule_free(&rs);
}

Test(rules, load_file_reports_a_missing_file) {
    ts_rules rs;
    ts_rule_init(&rs, &env);
    ts_diags d;
    cr_assert_not(ts_rule_load_file(&rs, "tests/rules_bad/no-such-file.rules", &d));
    char *h = ts_diag_headline(&d, 0);
    cr_assert_str_eq(h, "tests/rules_bad/no-such-file.rules: error: cannot read rule file (No such file or directory)");
    free(h);
    ts_diags_free(&d);
    ts_rule_free(&rs);
}

/* ---- load-time errors, exactly ------------------------------------------------------------------ */

/* Loads tests/rules_bad/<name>.rules and checks its one error's headline. */
static void expect_error(const char *name, const char *want) {
    char path[256];
    snprintf(path, sizeof path, "tests/rules_bad/%s.rules", name);
    ts_rules rs;
    ts_rule_init(&rs, &env);
    ts_diags d;
    cr_assert_not(ts_rule_load_file(&rs, path, &d), "%s loaded without errors", path);
    cr_assert_eq(d.nerrors, 1, "%s: %d errors", path, d.nerrors);
    char *h = ts_diag_headline(&d, 0);
    char *full = NULL;
    size_t n = strlen(path) + strlen(want) + 2;
    full = malloc(n);
    snprintf(full, n, "%s:%s", path, want);
    cr_assert_str_eq(h, full);
    free(full);
    free(h);
    ts_diags_free(&d);
    ts_rule_free(&rs);
}

Test(rules_bad, unknown_op) { expect_error("unknown_op", "3:20: error: unknown op 'mull'"); }
Test(rules_bad, unknown_op_hints_the_closest_name) {
    ts_rules rs;
    ts_rule_init(&rs, &env);
    ts_diags d;
    ts_rule_load_file(&rs, "tests/rules_bad/unknown_op.rules", &d);
    cr_assert_str_eq(d.items[0].hint, "did you mean 'mul'?");
    cr_assert_eq(d.items[0].len, 4);
    ts_diags_free(&d);
    ts_rule_free(&rs);
}
Test(rules_bad, wrong_arity) { expect_error("wrong_arity", "2:18: error: 'mul' takes 2 operands, got 3"); }
Test(rules_bad, wrong_params) { expect_error("wrong_params", "2:17: error: 'reduce_sum' takes 1 param, got 0"); }
Test(rules_bad, right_side_uses_unbound_variable) {
    expect_error("unbound_var", "2:38: error: '?c' is not bound by the left side");
}
Test(rules_bad, guard_uses_unbound_variable) {
    expect_error("unbound_guard_var", "3:21: error: '?t' is not bound by the left side");
}
Test(rules_bad, unknown_guard) { expect_error("unknown_guard", "3:9: error: unknown guard 'const-alnog'"); }
Test(rules_bad, duplicate_rule_name) {
    expect_error("duplicate_name", "5:6: error: duplicate rule name 'mul-commute' (first defined at "
                                   "tests/rules_bad/duplicate_name.rules:2:6)");
}
Test(rules_bad, unclosed_parenthesis) {
    expect_error("unbalanced_open", "2:19: error: unbalanced parentheses: '(' is never closed");
}
Test(rules_bad, stray_closing_parenthesis) {
    expect_error("unbalanced_close", "2:37: error: unbalanced parentheses: ')' has no matching '('");
}
Test(rules_bad, missing_arrow) {
    expect_error("missing_arrow", "2:31: error: expected '=>' or '<=>' after the left side, got '-'");
}
Test(rules_bad, missing_colon) {
    expect_error("missing_colon", "2:15: error: expected ':' after the rule name, got '('");
}
Test(rules_bad, variable_used_as_param_and_operand) {
    expect_error("var_kind_mismatch", "2:29: error: '?x' is used both as an operand and as a param");
}
Test(rules_bad, two_way_rule_with_a_variable_missing_on_the_right) {
    expect_error("two_way_unbound",
                 "2:20: error: '?b' is not bound by the right side (both sides of a '<=>' rule must bind it)");
}
Test(rules_bad, bare_variable_left_side) {
    expect_error("bare_left_side", "2:16: error: the left side of a rule cannot be a bare variable");
}
Test(rules_bad, trailing_text_after_a_rule) {
    expect_error("trailing_junk",
                 "2:42: error: unexpected 'extra' after the rule (a rule ends where the next 'rule' begins)");
}

Test(rules_bad, guard_with_wrong_number_of_arguments) {
    expect_error("guard_arity", "3:9: error: guard 'const-along' takes 2 arguments, got 1");
}
Test(rules_bad, two_way_arrow_cannot_join_multi_patterns) {
    expect_error("multi_two_way", "2:34: error: '<=>' cannot join multi-patterns (write each direction as a '=>' rule)");
}
Test(rules_bad, multi_pattern_rule_needs_one_right_pattern_per_left_one) {
    expect_error("multi_count_mismatch", "2:34: error: 2 left patterns but 1 right pattern (a multi-pattern rule "
                                         "needs one right pattern per left one)");
}
Test(rules_bad, every_left_pattern_must_not_be_a_bare_variable) {
    expect_error("multi_bare_left", "2:23: error: the left side of a rule cannot be a bare variable");
}
Test(rules_bad, right_patterns_use_only_variables_bound_by_some_left_pattern) {
    expect_error("multi_unbound", "2:50: error: '?c' is not bound by the left side");
}
Test(rules_bad, at_most_four_patterns_on_a_side) {
    expect_error("multi_too_many", "2:56: error: too many patterns (at most 4 on a side)");
}
Test(rules_bad, ruleset_without_a_name) {
    expect_error("ruleset_without_name", "3:8: error: expected a ruleset name after 'ruleset', got end of file");
}

/* Every fixture in tests/rules_bad/ has a test above: a new fixture without one fails here. */
Test(rules_bad, every_fixture_is_checked) {
    static const char *const checked[] = {
        "unknown_op",      "wrong_arity",     "wrong_params",      "unbound_var",       "unbound_guard_var",
        "unknown_guard",   "duplicate_name",  "unbalanced_open",   "unbalanced_close",  "missing_arrow",
        "missing_colon",   "var_kind_mismatch", "two_way_unbound", "bare_left_side",    "trailing_junk",
        "guard_arity",     "ruleset_without_name", "multi_two_way", "multi_count_mismatch", "multi_bare_left",
        "multi_unbound",   "multi_too_many",
    };
    DIR *dir = opendir("tests/rules_bad");
    cr_assert_not_null(dir);
    int files = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n < 7 || strcmp(e->d_name + n - 6, ".rules") != 0) continue;
        files++;
        bool found = false;
        for (size_t i = 0; i < sizeof checked / sizeof *checked; i++)
            found |= strlen(checked[i]) == n - 6 && strncmp(checked[i], e->d_name, n - 6) == 0;
        cr_assert(found, "tests/rules_bad/%s has no test", e->d_name);
    }
    closedir(dir);
    cr_assert_eq(files, (int)(sizeof checked / sizeof *checked));
}

Test(rules_bad, good_rules_beside_a_bad_one_still_load) {
    ts_rules rs;
    ts_rule_init(&rs, &env);
    ts_diags d;
    cr_assert_not(ts_rule_load_file(&rs, "tests/rules_bad/unbalanced_open.rules", &d));
    cr_assert_eq(rs.nrules, 1);
    cr_assert_str_eq(rs.rule[0].name, "ok");
    ts_diags_free(&d);
    ts_rule_free(&rs);
}

Test(rules_bad, every_error_in_a_text_is_reported_in_order) {
    ts_rules rs;
    ts_rule_init(&rs, &env);
    ts_diags d;
    const char *text = "bogus\n"
                       "rule x: (foo ?a) => ?a\n"
                       "rule y: (neg ?a) => ?b\n"
                       "rule z: (neg ?a) => (neg ?a) if\n"
                       "rule w: (neg ?a) => ?a % 3\n"
                       "rule v: (neg{?k} ?a) => ?a\n"
                       "rule u: (reduce_sum{99999999999999999999} ?a) => ?a\n";
    cr_assert_not(ts_rule_load_string(&rs, "t.rules", text, &d));
    const char *want[] = {
        "t.rules:1:1: error: expected 'rule' or 'ruleset', got 'bogus'",
        "t.rules:2:10: error: unknown op 'foo'",
        "t.rules:3:21: error: '?b' is not bound by the left side",
        "t.rules:5:1: error: expected a guard '(name ?var ...)' after 'if', got 'rule'",
        "t.rules:5:24: error: unexpected '%' after the rule (a rule ends where the next 'rule' begins)",
        "t.rules:6:10: error: 'neg' takes 0 params, got 1",
        "t.rules:7:21: error: bad integer '99999999999999999999' (not a 64-bit integer)",
    };
    cr_assert_eq(d.n, 7);
    for (int i = 0; i < 7; i++) {
        char *h = ts_diag_headline(&d, i);
        cr_assert_str_eq(h, want[i]);
        free(h);
    }
    cr_assert_eq(rs.nrules, 0);
    ts_diags_free(&d);
    ts_rule_free(&rs);
}

/* ---- matching ----------------------------------------------------------------------------------- */

/* The rule named `name` of a one-off rule text. */
static const ts_rule *one_rule(ts_rules *rs, const char *text, const char *name) {
    ts_rule_init(rs, &env);
    ts_diags d;
    bool ok = ts_rule_load_string(rs, "t.rules", text, &d);
    if (!ok) ts_diags_print(&d, stderr);
    cr_assert(ok);
    ts_diags_free(&d);
    int i = ts_rule_find(rs, name);
    cr_assert_geq(i, 0);
    return &rs->rule[i];
}

static uint32_t term(ts_egraph *eg, const char *text) {
    ts_diags d;
    uint32_t c = ts_rule_add_term(eg, "term", text, &d);
    if (c == TS_EG_NONE) ts_diags_print(&d, stderr);
    cr_assert_neq(c, TS_EG_NONE);
    ts_diags_free(&d);
    return c;
}

Test(rules, search_finds_every_match_with_its_bindings) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs, "rule m: (mul ?x (add ?y ?z)) => ?x", "m");
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t t1 = term(eg, "(mul a (add b c))");
    uint32_t t2 = term(eg, "(mul (add b c) (add b c))");
    term(eg, "(mul a b)");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 2);
    uint32_t bc = term(eg, "(add b c)"), a = term(eg, "a");
    cr_assert_eq(ms.m[0].root, t1);
    cr_assert_eq(ms.m[0].val[0], a);
    cr_assert_eq(ms.m[1].root, t2);
    cr_assert_eq(ms.m[1].val[0], bc);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, repeated_variable_must_match_the_same_class) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs, "rule d: (add ?x ?x) => (mul ?x constant{2})", "d");
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    term(eg, "(add a b)");
    uint32_t aa = term(eg, "(add a a)");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 1);
    cr_assert_eq(ms.m[0].root, aa);
    ts_eg_union(eg, term(eg, "a"), term(eg, "b")); /* after a = b, (add a b) is (add a a) */
    ts_eg_rebuild(eg);
    ms.n = 0;
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 1);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, param_variables_bind_and_carry_to_the_right_side) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs,
                                "rule swap-sums: (reduce_sum{?i} (reduce_sum{?j} ?x)) => (reduce_sum{?j} (reduce_sum{?i} ?x))\n"
                                "rule same-axis: (reduce_max{?i} (reduce_max{?i} ?x)) => (reduce_max{?i} ?x)\n",
                                "swap-sums");
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t s = term(eg, "(reduce_sum{1} (reduce_sum{2} a))");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 1);
    cr_assert_eq(ms.m[0].val[0], 1);
    cr_assert_eq(ms.m[0].val[1], 2);
    cr_assert(ts_rule_apply(&rs, eg, r, &ms.m[0]));
    ts_eg_rebuild(eg);
    cr_assert_eq(term(eg, "(reduce_sum{2} (reduce_sum{1} a))"), ts_eg_find(eg, s));
    /* a param variable repeated on the left must see the same value */
    const ts_rule *same = &rs.rule[ts_rule_find(&rs, "same-axis")];
    term(eg, "(reduce_max{1} (reduce_max{2} a))");
    uint32_t m11 = term(eg, "(reduce_max{1} (reduce_max{1} a))");
    ts_eg_rebuild(eg);
    ms.n = 0;
    cr_assert_eq(ts_rule_search(eg, same, 0, &ms), 1);
    cr_assert_eq(ms.m[0].root, m11);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, literal_params_must_be_equal) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs, "rule s3: (reduce_sum{3} ?x) => ?x", "s3");
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    term(eg, "(reduce_sum{2} a)");
    uint32_t s3 = term(eg, "(reduce_sum{3} a)");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 1);
    cr_assert_eq(ms.m[0].root, s3);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, search_respects_its_limit) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs, "rule n: (neg ?x) => ?x", "n");
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    term(eg, "(neg (neg (neg (neg a))))");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 4);
    ms.n = 0;
    cr_assert_eq(ts_rule_search(eg, r, 3, &ms), 3);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, apply_instantiates_the_right_side_and_unions) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs, "rule recip-recip: (recip (recip ?x)) => ?x", "recip-recip");
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t rr = term(eg, "(mul (recip (recip a)) b)");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 1);
    cr_assert(ts_rule_apply(&rs, eg, r, &ms.m[0]));
    ts_eg_rebuild(eg);
    cr_assert_eq(term(eg, "(mul a b)"), ts_eg_find(eg, rr));
    cr_assert_not(ts_rule_apply(&rs, eg, r, &ms.m[0])); /* nothing new the second time */
    cr_assert(ts_eg_check_invariants(eg));
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

/* ---- guards ------------------------------------------------------------------------------------- */

Test(rules, guard_gets_classes_data_and_params) {
    ts_rules rs;
    load_good(&rs);
    const ts_rule *r = &rs.rule[ts_rule_find(&rs, "sum-axis-3")];
    ts_egraph *eg = ts_eg_new(&ops, &axes);
    term(eg, "(reduce_sum{3} t{5})");
    uint32_t x = term(eg, "t{5}");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 1);
    record_calls = 0;
    cr_assert(ts_rule_guards_hold(&rs, eg, r, &ms.m[0]));
    cr_assert_eq(record_calls, 1);
    cr_assert_not(recorded[0].is_param);
    cr_assert_eq(recorded[0].cls, x);
    cr_assert_eq(*(const uint64_t *)recorded[0].data, 5);
    cr_assert(recorded[1].is_param);
    cr_assert_eq(recorded[1].value, 7);
    cr_assert_eq(recorded[2].cls, x);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, guard_decides_whether_a_rule_fires) {
    ts_rules rs;
    load_good(&rs);
    const ts_rule *r = &rs.rule[ts_rule_find(&rs, "scale-past-sum")];
    ts_egraph *eg = ts_eg_new(&ops, &axes);
    /* x varies along axes 1 and 2 (mask 6); s only along 2 (mask 4) */
    uint32_t ok = term(eg, "(reduce_sum{1} (mul t{6} t{4}))");
    uint32_t no = term(eg, "(reduce_sum{2} (mul t{6} t{4}))");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 2);
    for (size_t i = 0; i < ms.n; i++) ts_rule_apply(&rs, eg, r, &ms.m[i]);
    ts_eg_rebuild(eg);
    cr_assert_eq(ts_eg_lookup(eg, &(ts_enode){.op = TS_OP_MUL,
                                              .kid = {term(eg, "(reduce_sum{1} t{6})"), term(eg, "t{4}")}}),
                 ts_eg_find(eg, ok));
    cr_assert_eq(ts_eg_class_size(eg, ts_eg_find(eg, no)), 1);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

/* ---- ground terms ------------------------------------------------------------------------------- */

Test(rules, terms_reject_variables_and_unknown_ops) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    ts_diags d;
    cr_assert_eq(ts_rule_add_term(eg, "term", "(mul a ?x)", &d), TS_EG_NONE);
    char *h = ts_diag_headline(&d, 0);
    cr_assert_str_eq(h, "term:1:8: error: a term cannot contain variables ('?x')");
    free(h);
    ts_diags_free(&d);
    cr_assert_eq(ts_rule_add_term(eg, "term", "(mul a b) c", &d), TS_EG_NONE);
    h = ts_diag_headline(&d, 0);
    cr_assert_str_eq(h, "term:1:11: error: expected the end of the term, got 'c'");
    free(h);
    ts_diags_free(&d);
    ts_eg_free(eg);
}

/* ---- multi-patterns ----------------------------------------------------------------------------- */

/* dual{k} x a b computes Σ_k x·a and Σ_k x·b in one pass; pick{i} takes result i. */
static const ts_eg_opinfo mp_extra[] = {
    {"x", 0, 0}, {"y", 0, 0}, {"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"dual", 3, 1}, {"pick", 1, 1},
};
static const ts_eg_ops mp_ops = {mp_extra, 7};

static int distinct_calls;

static bool distinct(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs) {
    (void)ctx, (void)eg;
    cr_assert_eq(nargs, 2);
    distinct_calls++;
    return args[0].cls != args[1].cls;
}

static const ts_rule_guard mp_guards[] = {{"distinct", 2, distinct, NULL}};
static const ts_rule_env mp_env = {&mp_ops, mp_guards, 1, NULL};

static const char *shared_operand =
    "# two contractions sharing an operand become one dual contraction\n"
    "rule shared-operand: (reduce_sum{?k} (mul ?x ?a)) ; (reduce_sum{?k} (mul ?x ?b))\n"
    "    => (pick{0} (dual{?k} ?x ?a ?b)) ; (pick{1} (dual{?k} ?x ?a ?b)) if (distinct ?a ?b)\n";

static const ts_rule *load_shared_operand(ts_rules *rs) {
    ts_rule_init(rs, &mp_env);
    ts_diags d;
    bool ok = ts_rule_load_string(rs, "fusion.rules", shared_operand, &d);
    if (!ok) ts_diags_print(&d, stderr);
    cr_assert(ok);
    ts_diags_free(&d);
    cr_assert_eq(rs->nrules, 1);
    return &rs->rule[0];
}

Test(rules, multi_pattern_rule_loads_one_right_pattern_per_left_one) {
    ts_rules rs;
    const ts_rule *r = load_shared_operand(&rs);
    cr_assert_str_eq(r->name, "shared-operand");
    cr_assert_str_eq(r->doc, "two contractions sharing an operand become one dual contraction");
    cr_assert_eq(ts_rule_npatterns(r), 2);
    cr_assert_eq(r->nvars, 4); /* ?k ?x ?a ?b: ?b first bound by the second pattern */
    cr_assert_eq(ts_rule_lhs(r, 0), &r->lhs);
    cr_assert_eq(ts_rule_rhs(r, 0), &r->rhs);
    char *l = ts_rule_side_str(&rs, r, false), *rr = ts_rule_side_str(&rs, r, true);
    cr_assert_str_eq(l, "(reduce_sum{?k} (mul ?x ?a)) ; (reduce_sum{?k} (mul ?x ?b))");
    cr_assert_str_eq(rr, "(pick{0} (dual{?k} ?x ?a ?b)) ; (pick{1} (dual{?k} ?x ?a ?b))");
    free(l);
    free(rr);
    char *p1 = ts_rule_pattern_str(&rs, r, ts_rule_rhs(r, 1));
    cr_assert_str_eq(p1, "(pick{1} (dual{?k} ?x ?a ?b))");
    free(p1);
    ts_rule_free(&rs);
}

Test(rules, single_pattern_rules_have_one_pattern_per_side) {
    ts_rules rs;
    load_good(&rs);
    const ts_rule *r = &rs.rule[ts_rule_find(&rs, "scale-past-sum")];
    cr_assert_eq(ts_rule_npatterns(r), 1);
    char *l = ts_rule_side_str(&rs, r, false);
    cr_assert_str_eq(l, "(reduce_sum{?k} (mul ?x ?s))");
    free(l);
    ts_rule_free(&rs);
}

Test(rules, multi_pattern_matches_are_the_join_on_shared_variables) {
    ts_rules rs;
    const ts_rule *r = load_shared_operand(&rs);
    ts_egraph *eg = ts_eg_new(&mp_ops, NULL);
    uint32_t sa = term(eg, "(reduce_sum{1} (mul x a))"), sb = term(eg, "(reduce_sum{1} (mul x b))");
    uint32_t sc = term(eg, "(reduce_sum{2} (mul x c))");  /* another axis */
    uint32_t yc = term(eg, "(reduce_sum{1} (mul y c))");  /* another shared operand */
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    /* pairs agreeing on ?k and ?x: (sa,sa) (sa,sb) (sb,sa) (sb,sb) (sc,sc) (yc,yc) — not all 16 pairs */
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 6);
    int pairs[4][4] = {{0}};
    const uint32_t cls[4] = {sa, sb, sc, yc};
    for (size_t i = 0; i < ms.n; i++) {
        int p = -1, q = -1;
        for (int j = 0; j < 4; j++) {
            if (ms.m[i].roots[0] == cls[j]) p = j;
            if (ms.m[i].roots[1] == cls[j]) q = j;
        }
        cr_assert(p >= 0 && q >= 0);
        cr_assert_eq(ms.m[i].root, ms.m[i].roots[0]);
        cr_assert_eq(ms.m[i].roots[2], TS_EG_NONE);
        pairs[p][q]++;
    }
    cr_assert_eq(pairs[0][1] + pairs[1][0] + pairs[0][0] + pairs[1][1] + pairs[2][2] + pairs[3][3], 6);
    cr_assert_eq(pairs[0][1], 1);
    cr_assert_eq(pairs[1][0], 1);
    ms.n = 0;
    cr_assert_eq(ts_rule_search(eg, r, 4, &ms), 4); /* the limit counts whole matches */
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, multi_pattern_apply_unions_each_right_pattern_with_its_root) {
    ts_rules rs;
    const ts_rule *r = load_shared_operand(&rs);
    ts_egraph *eg = ts_eg_new(&mp_ops, NULL);
    uint32_t sa = term(eg, "(reduce_sum{1} (mul x a))"), sb = term(eg, "(reduce_sum{1} (mul x b))");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, r, 0, &ms), 4);
    distinct_calls = 0;
    int applied = 0;
    for (size_t i = 0; i < ms.n; i++) applied += ts_rule_apply(&rs, eg, r, &ms.m[i]);
    cr_assert_eq(distinct_calls, 4);
    cr_assert_eq(applied, 2); /* (sa,sb) and (sb,sa); the guard rejects a pattern paired with itself */
    ts_eg_rebuild(eg);
    cr_assert_eq(term(eg, "(pick{0} (dual{1} x a b))"), ts_eg_find(eg, sa));
    cr_assert_eq(term(eg, "(pick{1} (dual{1} x a b))"), ts_eg_find(eg, sb));
    cr_assert_eq(term(eg, "(pick{0} (dual{1} x b a))"), ts_eg_find(eg, sb));
    cr_assert_neq(ts_eg_find(eg, sa), ts_eg_find(eg, sb));
    cr_assert(ts_eg_check_invariants(eg));
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

Test(rules, multi_pattern_variables_bound_late_reach_every_right_pattern) {
    ts_rules rs;
    ts_rule_init(&rs, &mp_env);
    ts_diags d;
    /* ?b is bound by the second left pattern and used by the first right one */
    cr_assert(ts_rule_load_string(&rs, "t.rules", "rule swap: (neg ?a) ; (recip ?b) => (neg ?b) ; (recip ?a)", &d));
    ts_diags_free(&d);
    ts_egraph *eg = ts_eg_new(&mp_ops, NULL);
    uint32_t na = term(eg, "(neg a)"), rb = term(eg, "(recip b)");
    ts_eg_rebuild(eg);
    ts_rule_matches ms = {0};
    cr_assert_eq(ts_rule_search(eg, &rs.rule[0], 0, &ms), 1);
    cr_assert(ts_rule_apply(&rs, eg, &rs.rule[0], &ms.m[0]));
    ts_eg_rebuild(eg);
    cr_assert_eq(term(eg, "(neg b)"), ts_eg_find(eg, na));
    cr_assert_eq(term(eg, "(recip a)"), ts_eg_find(eg, rb));
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

/* The join of three patterns (ts_rule_search matches each pattern alone, then pairs them on their shared
 * variables): ?a shared by the first two, the third sharing nothing (every one of its matches pairs), in the
 * order of a nested search — the first pattern's matches in turn, each with the later ones' in their order. */
Test(rules, multi_pattern_join_of_three_patterns_keeps_the_nested_order) {
    ts_rules rs;
    ts_rule_init(&rs, &mp_env);
    ts_diags d;
    cr_assert(ts_rule_load_string(&rs, "t.rules",
                                  "rule tri: (neg ?a) ; (recip ?a) ; (neg ?b) => (neg ?a) ; (recip ?a) ; (neg ?b)\n"
                                  "rule negs: (neg ?b) => ?b\n", &d));
    ts_diags_free(&d);
    ts_egraph *eg = ts_eg_new(&mp_ops, NULL);
    uint32_t nx = term(eg, "(neg x)"), rx = term(eg, "(recip x)");
    term(eg, "(neg y)");
    term(eg, "(recip a)");
    ts_eg_rebuild(eg);
    ts_rule_matches negs = {0}, ms = {0};
    cr_assert_eq(ts_rule_search(eg, &rs.rule[1], 0, &negs), 2);
    cr_assert_eq(ts_rule_search(eg, &rs.rule[0], 0, &ms), 2, "(neg x) (recip x) with either neg");
    for (size_t i = 0; i < ms.n; i++) {
        cr_assert_eq(ms.m[i].roots[0], ts_eg_find(eg, nx));
        cr_assert_eq(ms.m[i].roots[1], ts_eg_find(eg, rx));
        cr_assert_eq(ms.m[i].roots[2], negs.m[i].root, "the third pattern's matches in their own order");
        cr_assert_eq(ms.m[i].roots[3], TS_EG_NONE);
    }
    ms.n = 0;
    cr_assert_eq(ts_rule_search(eg, &rs.rule[0], 1, &ms), 1, "the limit counts whole matches");
    ts_rule_matches_free(&negs);
    ts_rule_matches_free(&ms);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

/* ---- the op index ------------------------------------------------------------------------------- */

Test(rules, search_with_the_op_index_finds_the_same_matches_as_a_full_scan) {
    ts_rules rs;
    const ts_rule *r = one_rule(&rs,
                                "rule m: (mul ?x (add ?y ?z)) => ?x\n"
                                "rule s: (reduce_sum{?k} (mul ?x ?s)) => ?x\n", "m");
    const ts_rule *s2 = &rs.rule[ts_rule_find(&rs, "s")];
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    term(eg, "(mul a (add b c))");
    term(eg, "(reduce_sum{1} (mul (add b c) (add b c)))");
    uint32_t x = term(eg, "(mul a b)"), y = term(eg, "(add (mul c a) a)");
    ts_eg_union(eg, x, y);
    ts_eg_rebuild(eg);
    for (int k = 0; k < 2; k++) {
        const ts_rule *rule = k ? s2 : r;
        ts_rule_matches scan = {0}, indexed = {0};
        ts_eg_drop_op_index(eg);
        size_t n = ts_rule_search(eg, rule, 0, &scan);
        ts_eg_index_ops(eg);
        cr_assert_eq(ts_rule_search(eg, rule, 0, &indexed), n);
        cr_assert_gt(n, 0);
        for (size_t i = 0; i < n; i++) {
            cr_assert_eq(scan.m[i].root, indexed.m[i].root);
            cr_assert_eq(memcmp(scan.m[i].val, indexed.m[i].val, sizeof scan.m[i].val), 0);
        }
        ts_rule_matches_free(&scan);
        ts_rule_matches_free(&indexed);
    }
    ts_eg_free(eg);
    ts_rule_free(&rs);
}
