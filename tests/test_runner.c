/* test_runner.c — saturation: start terms rewritten into goal terms, the backoff scheduler keeping
 * commutativity and associativity in check, every stop reason, phases in order, per-rule statistics. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "egraph.h"
#include "ops.h"
#include "rules.h"
#include "runner.h"

static const ts_eg_opinfo extra_ops[] = {{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"d", 0, 0}, {"e", 0, 0}};
static const ts_eg_ops ops = {extra_ops, 5};

static bool never(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs) {
    (void)ctx, (void)eg, (void)args, (void)nargs;
    return false;
}

static const ts_rule_guard guards[] = {{"never", 1, never}};
static const ts_rule_env env = {&ops, guards, 1, NULL};

static const char *algebra =
    "ruleset algebra\n"
    "# a*b = b*a\n"
    "rule mul-commute: (mul ?a ?b) => (mul ?b ?a)\n"
    "# a+b = b+a\n"
    "rule add-commute: (add ?a ?b) => (add ?b ?a)\n"
    "# (a+b)+c = a+(b+c)\n"
    "rule add-assoc: (add (add ?a ?b) ?c) <=> (add ?a (add ?b ?c))\n"
    "# (a+b)*c = a*c + b*c\n"
    "rule distribute: (mul (add ?a ?b) ?c) <=> (add (mul ?a ?c) (mul ?b ?c))\n"
    "ruleset cleanup\n"
    "# 1/(1/x) = x\n"
    "rule recip-recip: (recip (recip ?x)) => ?x\n"
    "rule neg-neg: (neg (neg ?x)) => ?x\n"
    "rule blocked: (neg ?x) => ?x if (never ?x)\n"
    "ruleset grow\n"
    "# -x = -(x*x): false, but it never saturates\n"
    "rule grow: (neg ?x) => (neg (mul ?x ?x))\n"
    "ruleset ac\n"
    "rule add-commute2: (add ?a ?b) => (add ?b ?a)\n"
    "rule add-assoc2: (add (add ?a ?b) ?c) <=> (add ?a (add ?b ?c))\n";

typedef struct {
    ts_rules rs;
    ts_egraph *eg;
    ts_runner run;
} fixture;

static void setup(fixture *f) {
    ts_rule_init(&f->rs, &env);
    ts_diags d;
    bool ok = ts_rule_load_string(&f->rs, "algebra.rules", algebra, &d);
    if (!ok) ts_diags_print(&d, stderr);
    cr_assert(ok);
    ts_diags_free(&d);
    f->eg = ts_eg_new(&ops, NULL);
    ts_runner_init(&f->run, f->eg, &f->rs);
}

static void teardown(fixture *f) {
    ts_runner_free(&f->run);
    ts_eg_free(f->eg);
    ts_rule_free(&f->rs);
}

static uint32_t term(ts_egraph *eg, const char *text) {
    ts_diags d;
    uint32_t c = ts_rule_add_term(eg, "term", text, &d);
    if (c == TS_EG_NONE) ts_diags_print(&d, stderr);
    cr_assert_neq(c, TS_EG_NONE);
    ts_diags_free(&d);
    return c;
}

/* Whether goal is in start's class (adding goal's nodes, then rebuilding). */
static bool reaches(ts_egraph *eg, uint32_t start, const char *goal) {
    uint32_t g = term(eg, goal);
    ts_eg_rebuild(eg);
    return ts_eg_find(eg, g) == ts_eg_find(eg, start);
}

static ts_runner_stop run_set(fixture *f, const char *set, const ts_runner_limits *lim) {
    int i = ts_rule_find_ruleset(&f->rs, set);
    cr_assert_geq(i, 0);
    return ts_runner_run_phase(&f->run, i, lim);
}

Test(runner, stop_reasons_have_names) {
    cr_assert_str_eq(ts_runner_stop_str(TS_STOP_SATURATED), "saturated");
    cr_assert_str_eq(ts_runner_stop_str(TS_STOP_ITER_LIMIT), "iteration limit");
    cr_assert_str_eq(ts_runner_stop_str(TS_STOP_NODE_LIMIT), "node limit");
    cr_assert_str_eq(ts_runner_stop_str(TS_STOP_TIME_LIMIT), "time limit");
}

Test(runner, distributivity_rewrites_product_of_sum_into_sum_of_products) {
    fixture f;
    setup(&f);
    uint32_t start = term(f.eg, "(mul (add a b) c)");
    ts_runner_limits lim = ts_runner_default_limits();
    ts_runner_stop stop = run_set(&f, "algebra", &lim);
    cr_assert_eq(stop, TS_STOP_SATURATED, "stopped: %s", ts_runner_stop_str(stop));
    cr_assert(reaches(f.eg, start, "(add (mul a c) (mul b c))"));
    cr_assert(reaches(f.eg, start, "(add (mul c b) (mul c a))"));
    cr_assert_not(reaches(f.eg, start, "(mul a c)"));
    cr_assert(ts_eg_check_invariants(f.eg));
    teardown(&f);
}

Test(runner, two_way_rule_rewrites_both_ways) {
    fixture f;
    setup(&f);
    uint32_t start = term(f.eg, "(add (mul a c) (mul b c))");
    ts_runner_limits lim = ts_runner_default_limits();
    run_set(&f, "algebra", &lim);
    cr_assert(reaches(f.eg, start, "(mul (add a b) c)"));
    cr_assert_gt(f.run.stats[ts_rule_find(&f.rs, "distribute-rev")].changed, 0);
    teardown(&f);
}

Test(runner, cleanup_simplifies_and_extracts_the_smallest_term) {
    fixture f;
    setup(&f);
    uint32_t start = term(f.eg, "(add (recip (recip (neg (neg a)))) b)");
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert_eq(run_set(&f, "cleanup", &lim), TS_STOP_SATURATED);
    ts_eg_term t;
    cr_assert(ts_eg_extract_smallest(f.eg, start, &t));
    char *s = ts_eg_term_str(&ops, &t);
    cr_assert_str_eq(s, "(add a b)");
    free(s);
    ts_eg_term_free(&t);
    teardown(&f);
}

Test(runner, guarded_rule_that_never_holds_never_applies) {
    fixture f;
    setup(&f);
    term(f.eg, "(neg a)");
    ts_runner_limits lim = ts_runner_default_limits();
    run_set(&f, "cleanup", &lim);
    const ts_runner_rule_stats *st = &f.run.stats[ts_rule_find(&f.rs, "blocked")];
    cr_assert_eq(st->matches, 1);
    cr_assert_eq(st->applied, 0);
    cr_assert_eq(st->changed, 0);
    cr_assert_eq(ts_eg_class_count(f.eg), 2);
    teardown(&f);
}

Test(runner, commutativity_and_associativity_saturate_thanks_to_backoff) {
    fixture f;
    setup(&f);
    uint32_t start = term(f.eg, "(add a (add b (add c (add d e))))");
    ts_runner_limits lim = ts_runner_default_limits();
    lim.match_limit = 8; /* small, so the scheduler has to ban */
    lim.ban_length = 2;
    lim.iter_limit = 200;
    ts_runner_stop stop = run_set(&f, "ac", &lim);
    cr_assert_eq(stop, TS_STOP_SATURATED, "stopped: %s", ts_runner_stop_str(stop));
    uint32_t bans = 0;
    for (int i = 0; i < f.rs.nrules; i++) bans += f.run.stats[i].times_banned;
    cr_assert_gt(bans, 0);
    /* the AC closure of 5 leaves: 31 sums of non-empty subsets; one class per subset */
    cr_assert_eq(ts_eg_class_count(f.eg), 31);
    cr_assert(reaches(f.eg, start, "(add (add e d) (add (add c a) b))"));
    cr_assert_eq(f.run.nphases, 1);
    cr_assert_eq(f.run.phase[0].stop, TS_STOP_SATURATED);
    cr_assert_gt(f.run.phase[0].iterations, 1);
    teardown(&f);
}

Test(runner, endless_growth_stops_at_the_iteration_limit) {
    fixture f;
    setup(&f);
    term(f.eg, "(neg a)");
    ts_runner_limits lim = ts_runner_default_limits();
    lim.iter_limit = 5;
    cr_assert_eq(run_set(&f, "grow", &lim), TS_STOP_ITER_LIMIT);
    cr_assert_eq(f.run.phase[0].iterations, 5);
    teardown(&f);
}

Test(runner, endless_growth_stops_at_the_node_limit) {
    fixture f;
    setup(&f);
    term(f.eg, "(neg a)");
    ts_runner_limits lim = ts_runner_default_limits();
    lim.iter_limit = 1000000;
    lim.node_limit = 40;
    cr_assert_eq(run_set(&f, "grow", &lim), TS_STOP_NODE_LIMIT);
    cr_assert_geq(ts_eg_node_count(f.eg), 40);
    cr_assert_lt(ts_eg_node_count(f.eg), 40 + 10); /* application stops at the limit within an iteration */
    cr_assert_eq(f.run.phase[0].nodes, ts_eg_node_count(f.eg));
    teardown(&f);
}

Test(runner, endless_growth_stops_at_the_time_limit) {
    fixture f;
    setup(&f);
    term(f.eg, "(neg a)");
    ts_runner_limits lim = ts_runner_default_limits();
    lim.iter_limit = 1000000;
    lim.node_limit = 1000000;
    lim.time_limit_s = 0.05;
    cr_assert_eq(run_set(&f, "grow", &lim), TS_STOP_TIME_LIMIT);
    cr_assert_lt(f.run.phase[0].seconds, 2.0);
    teardown(&f);
}

Test(runner, phases_run_in_the_given_order) {
    fixture f;
    setup(&f);
    uint32_t start = term(f.eg, "(mul (add (recip (recip a)) b) c)");
    const char *phases[] = {"cleanup", "algebra"};
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert(ts_runner_run(&f.run, phases, 2, &lim, NULL));
    cr_assert_eq(f.run.nphases, 2);
    cr_assert_str_eq(f.rs.set[f.run.phase[0].ruleset].name, "cleanup");
    cr_assert_str_eq(f.rs.set[f.run.phase[1].ruleset].name, "algebra");
    cr_assert_eq(f.run.phase[0].stop, TS_STOP_SATURATED);
    cr_assert(reaches(f.eg, start, "(add (mul a c) (mul b c))"));
    teardown(&f);
}

Test(runner, unknown_phase_runs_nothing) {
    fixture f;
    setup(&f);
    const char *phases[] = {"cleanup", "lowering"};
    int missing = -1;
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert_not(ts_runner_run(&f.run, phases, 2, &lim, &missing));
    cr_assert_eq(missing, 1);
    cr_assert_eq(f.run.nphases, 0);
    teardown(&f);
}

Test(runner, statistics_count_matches_and_changes_per_rule) {
    fixture f;
    setup(&f);
    term(f.eg, "(mul a b)");
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert_eq(run_set(&f, "algebra", &lim), TS_STOP_SATURATED);
    const ts_runner_rule_stats *st = &f.run.stats[ts_rule_find(&f.rs, "mul-commute")];
    /* iteration 1: (mul a b) adds (mul b a); iteration 2: both match, nothing changes */
    cr_assert_eq(st->matches, 3);
    cr_assert_eq(st->applied, 3);
    cr_assert_eq(st->changed, 1);
    cr_assert_eq(st->times_banned, 0);
    cr_assert_geq(st->search_s, 0.0);
    cr_assert_eq(f.run.phase[0].iterations, 2);
    teardown(&f);
}
