/* test_runner.c — saturation: start terms rewritten into goal terms, the backoff scheduler keeping
 * commutativity and associativity in check, every stop reason, phases in order, per-rule statistics,
 * derivations of extracted terms, multi-pattern rules in the loop, and the op index (same result, timed). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egraph.h"
#include "ops.h"
#include "rules.h"
#include "runner.h"

static const ts_eg_opinfo extra_ops[] = {{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"d", 0, 0},
                                         {"e", 0, 0}, {"f", 0, 0}, {"g", 0, 0}};
static const ts_eg_ops ops = {extra_ops, 7};

static bool never(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs) {
    (void)ctx, (void)eg, (void)args, (void)nargs;
    return false;
}

static const ts_rule_guard guards[] = {{"never", 1, never, NULL}};
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

/* ---- derivations -------------------------------------------------------------------------------- */

/* `text` as a ts_eg_term, as extraction returns it (built in a scratch e-graph of the same ops). */
static ts_eg_term term_of(const char *text) {
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    uint32_t c = term(eg, text);
    ts_eg_rebuild(eg);
    ts_eg_term t;
    cr_assert(ts_eg_extract_smallest(eg, c, &t));
    ts_eg_free(eg);
    return t;
}

/* The derivation of `text` in f's saturated graph as "name@iteration ..." (malloc'd). */
static char *derivation_str(fixture *f, const char *text) {
    ts_eg_term t = term_of(text);
    ts_runner_step *steps;
    size_t n = ts_runner_derivation(&f->run, &t, &steps);
    char *s = calloc(1, 512);
    for (size_t i = 0; i < n; i++)
        snprintf(s + strlen(s), 512 - strlen(s), "%s%s@%d", i ? " " : "", f->rs.rule[steps[i].rule].name,
                 (int)steps[i].iteration);
    cr_assert_eq(steps == NULL, n == 0);
    free(steps);
    ts_eg_term_free(&t);
    return s;
}

Test(runner, derivation_of_distributed_term_is_the_distribute_rule) {
    fixture f;
    setup(&f);
    uint32_t start = term(f.eg, "(mul (add a b) c)");
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert_eq(run_set(&f, "algebra", &lim), TS_STOP_SATURATED);
    cr_assert(reaches(f.eg, start, "(add (mul a c) (mul b c))"));
    char *s = derivation_str(&f, "(add (mul a c) (mul b c))");
    cr_assert_str_eq(s, "distribute@0");
    free(s);
    const ts_rule *r = &f.rs.rule[ts_rule_find(&f.rs, "distribute")];
    cr_assert_str_eq(r->file, "algebra.rules"); /* what `tsopt explain` prints beside the name */
    cr_assert_eq(r->line, 9);
    teardown(&f);
}

Test(runner, derivation_lists_rules_by_iteration_then_rule) {
    fixture f;
    setup(&f);
    term(f.eg, "(mul (add a b) c)");
    ts_runner_limits lim = ts_runner_default_limits();
    run_set(&f, "algebra", &lim);
    /* (mul a c) came from distribute in iteration 0, (mul c a) from it by mul-commute in iteration 1 */
    char *s = derivation_str(&f, "(add (mul c a) (mul b c))");
    cr_assert_str_eq(s, "distribute@0 mul-commute@1");
    free(s);
    teardown(&f);
}

Test(runner, input_term_has_an_empty_derivation) {
    fixture f;
    setup(&f);
    term(f.eg, "(mul (add a b) c)");
    ts_runner_limits lim = ts_runner_default_limits();
    run_set(&f, "algebra", &lim);
    char *s = derivation_str(&f, "(mul (add a b) c)");
    cr_assert_str_eq(s, "");
    free(s);
    s = derivation_str(&f, "(neg d)"); /* not in the graph at all */
    cr_assert_str_eq(s, "");
    free(s);
    teardown(&f);
}

Test(runner, iterations_count_on_across_phases) {
    fixture f;
    setup(&f);
    term(f.eg, "(mul (add (recip (recip a)) b) c)");
    const char *phases[] = {"cleanup", "algebra"};
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert(ts_runner_run(&f.run, phases, 2, &lim, NULL));
    cr_assert_eq(f.run.iteration, f.run.phase[0].iterations + f.run.phase[1].iterations);
    char *s = derivation_str(&f, "(add (mul a c) (mul b c))");
    char want[64];
    snprintf(want, sizeof want, "distribute@%u", f.run.phase[0].iterations); /* algebra's first iteration */
    cr_assert_str_eq(s, want);
    free(s);
    teardown(&f);
}

/* ---- multi-patterns in the loop ----------------------------------------------------------------- */

static const ts_eg_opinfo mp_extra[] = {{"x", 0, 0}, {"a", 0, 0}, {"b", 0, 0}, {"dual", 3, 1}, {"pick", 1, 1}};
static const ts_eg_ops mp_ops = {mp_extra, 5};

static bool distinct(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs) {
    (void)ctx, (void)eg, (void)nargs;
    return args[0].cls != args[1].cls;
}

static const ts_rule_guard mp_guards[] = {{"distinct", 2, distinct, NULL}};

Test(runner, multi_pattern_rule_fuses_two_contractions_sharing_an_operand) {
    ts_rules rs;
    ts_rule_init(&rs, &(ts_rule_env){&mp_ops, mp_guards, 1, NULL});
    ts_diags d;
    cr_assert(ts_rule_load_string(&rs, "fusion.rules",
                                  "rule shared-operand: (reduce_sum{?k} (mul ?x ?a)) ; (reduce_sum{?k} (mul ?x ?b))\n"
                                  "  => (pick{0} (dual{?k} ?x ?a ?b)) ; (pick{1} (dual{?k} ?x ?a ?b))"
                                  " if (distinct ?a ?b)\n",
                                  &d));
    ts_diags_free(&d);
    ts_egraph *eg = ts_eg_new(&mp_ops, NULL);
    uint32_t sa = term(eg, "(reduce_sum{1} (mul x a))"), sb = term(eg, "(reduce_sum{1} (mul x b))");
    ts_runner run;
    ts_runner_init(&run, eg, &rs);
    ts_runner_limits lim = ts_runner_default_limits();
    cr_assert_eq(ts_runner_run_phase(&run, 0, &lim), TS_STOP_SATURATED);
    cr_assert_eq(run.stats[0].changed, 2); /* (sa,sb) and (sb,sa); the second iteration adds nothing */
    uint32_t p0 = term(eg, "(pick{0} (dual{1} x a b))"), p1 = term(eg, "(pick{1} (dual{1} x a b))");
    ts_eg_rebuild(eg);
    cr_assert_eq(ts_eg_find(eg, p0), ts_eg_find(eg, sa));
    cr_assert_eq(ts_eg_find(eg, p1), ts_eg_find(eg, sb));
    cr_assert_eq(ts_eg_node_tag(eg, &(ts_enode){.op = ts_eg_op_lookup(&mp_ops, "pick"), .kid = {
        ts_eg_lookup(eg, &(ts_enode){.op = ts_eg_op_lookup(&mp_ops, "dual"), .kid = {term(eg, "x"), term(eg, "a"),
                                     term(eg, "b")}, .param = {1}})}, .param = {1}}), 0);
    ts_runner_free(&run);
    ts_eg_free(eg);
    ts_rule_free(&rs);
}

/* ---- the op index ------------------------------------------------------------------------------- */

static const char *bench_rules =
    "ruleset bench\n"
    "rule b-mul-commute: (mul ?a ?b) => (mul ?b ?a)\n"
    "rule b-add-commute: (add ?a ?b) => (add ?b ?a)\n"
    "rule b-add-assoc: (add (add ?a ?b) ?c) <=> (add ?a (add ?b ?c))\n"
    "rule b-mul-assoc: (mul (mul ?a ?b) ?c) <=> (mul ?a (mul ?b ?c))\n"
    "rule b-distribute: (mul (add ?a ?b) ?c) <=> (add (mul ?a ?c) (mul ?b ?c))\n"
    /* rules rooted at ops the term lacks, as most of a real ruleset is for any one graph */
    "rule b-neg-neg: (neg (neg ?x)) => ?x\n"
    "rule b-recip-recip: (recip (recip ?x)) => ?x\n"
    "rule b-recip-mul: (recip (mul ?a ?b)) => (mul (recip ?a) (recip ?b))\n"
    "rule b-exp2-add: (exp2 (add ?a ?b)) => (mul (exp2 ?a) (exp2 ?b))\n"
    "rule b-log2-exp2: (log2 (exp2 ?x)) => ?x\n"
    "rule b-sum-add: (reduce_sum{?k} (add ?a ?b)) => (add (reduce_sum{?k} ?a) (reduce_sum{?k} ?b))\n"
    "rule b-sum-swap: (reduce_sum{?j} (reduce_sum{?k} ?x)) => (reduce_sum{?k} (reduce_sum{?j} ?x))\n";

typedef struct {
    uint32_t nodes, classes, iterations;
    double cpu_s, search_s;
} bench_result;

/* comm + assoc + distrib (and rules that never match) over a 7-leaf term, with or without the index. */
static bench_result bench(bool scan_all) {
    ts_rules rs;
    ts_rule_init(&rs, &env);
    ts_diags d;
    cr_assert(ts_rule_load_string(&rs, "bench.rules", bench_rules, &d));
    ts_diags_free(&d);
    ts_egraph *eg = ts_eg_new(&ops, NULL);
    term(eg, "(mul (add a (add b c)) (add d (add e (add f g))))");
    ts_runner run;
    ts_runner_init(&run, eg, &rs);
    run.scan_all = scan_all;
    ts_runner_limits lim = ts_runner_default_limits();
    lim.node_limit = 1000000; /* stop on iterations only, so both runs do the same work */
    lim.iter_limit = 17;
    lim.time_limit_s = 600;
    clock_t t0 = clock();
    ts_runner_run_phase(&run, 0, &lim);
    bench_result r = {ts_eg_node_count(eg), ts_eg_class_count(eg), run.phase[0].iterations,
                      (double)(clock() - t0) / CLOCKS_PER_SEC, 0};
    for (int i = 0; i < rs.nrules; i++) r.search_s += run.stats[i].search_s;
    ts_runner_free(&run);
    ts_eg_free(eg);
    ts_rule_free(&rs);
    return r;
}

Test(runner, op_index_leaves_the_saturated_graph_unchanged_benchmark) {
    bench_result scan = bench(true), indexed = bench(false);
    cr_assert_eq(indexed.nodes, scan.nodes);
    cr_assert_eq(indexed.classes, scan.classes);
    cr_assert_eq(indexed.iterations, scan.iterations);
    cr_assert_gt(scan.nodes, 5000);
    cr_log_info("op index benchmark, %u nodes %u classes after %u iterations: full scan %.3f s cpu (search %.3f s), "
                "op index %.3f s cpu (search %.3f s)",
                scan.nodes, scan.classes, scan.iterations, scan.cpu_s, scan.search_s, indexed.cpu_s, indexed.search_s);
}
