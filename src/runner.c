/* runner.c — the saturation loop: search, apply, rebuild; backoff scheduling; limits and stop reasons
 * (see runner.h). It does not parse rules or match patterns (rules.c). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif

#include "runner.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

const char *ts_runner_stop_str(ts_runner_stop s) {
    static const char *const names[TS_STOP_COUNT] = {
        [TS_STOP_SATURATED] = "saturated",
        [TS_STOP_ITER_LIMIT] = "iteration limit",
        [TS_STOP_NODE_LIMIT] = "node limit",
        [TS_STOP_TIME_LIMIT] = "time limit",
    };
    return (unsigned)s < TS_STOP_COUNT ? names[s] : "?";
}

ts_runner_limits ts_runner_default_limits(void) {
    return (ts_runner_limits){
        .iter_limit = 30, .node_limit = 10000, .time_limit_s = 5.0, .match_limit = 1000, .ban_length = 5};
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ts_runner_init(ts_runner *run, ts_egraph *eg, const ts_rules *rules) {
    memset(run, 0, sizeof *run);
    run->eg = eg;
    run->rules = rules;
    size_t n = (size_t)rules->nrules;
    run->stats = ts_xcalloc(n, sizeof *run->stats);
    run->banned_until = ts_xcalloc(n, sizeof *run->banned_until);
    run->found = ts_xcalloc(n, sizeof *run->found);
}

void ts_runner_free(ts_runner *run) {
    for (int i = 0; i < run->rules->nrules; i++) ts_rule_matches_free(&run->found[i]);
    free(run->found);
    free(run->banned_until);
    free(run->stats);
    free(run->phase);
    memset(run, 0, sizeof *run);
}

/* ======== one iteration =========================================================================== */

/* Backoff: searches rule r unless banned; drops its matches and bans it when they exceed the threshold.
 * Returns whether the rule is banned after this iteration. */
static bool search_rule(ts_runner *run, int r, uint32_t iter, const ts_runner_limits *lim) {
    ts_runner_rule_stats *st = &run->stats[r];
    ts_rule_matches *ms = &run->found[r];
    ms->n = 0;
    if (run->banned_until[r] > iter) return true;
    uint32_t shift = st->times_banned < 20 ? st->times_banned : 20;
    size_t threshold = (size_t)lim->match_limit << shift; /* match_limit 0: no backoff */
    double t0 = now_s();
    size_t n = ts_rule_search(run->eg, &run->rules->rule[r], threshold ? threshold + 1 : 0, ms);
    st->search_s += now_s() - t0;
    st->matches += n;
    if (!threshold || n <= threshold) return false;
    ms->n = 0;
    run->banned_until[r] = iter + (lim->ban_length << shift);
    st->times_banned++;
    return true;
}

/* Applies rule r's matches until the node limit, the nodes they add tagged with r and the iteration;
 * returns whether the graph changed. */
static bool apply_rule(ts_runner *run, int r, const ts_runner_limits *lim) {
    ts_runner_rule_stats *st = &run->stats[r];
    const ts_rule *rule = &run->rules->rule[r];
    const ts_rule_matches *ms = &run->found[r];
    bool changed = false;
    double t0 = now_s();
    ts_eg_set_origin(run->eg, r, (int32_t)run->iteration);
    for (size_t i = 0; i < ms->n && ts_eg_node_count(run->eg) < lim->node_limit; i++) {
        const ts_rule_match *m = &ms->m[i];
        if (!ts_rule_guards_hold(run->rules, run->eg, rule, m)) continue;
        st->applied++;
        if (ts_rule_apply_match(run->eg, rule, m)) {
            st->changed++;
            changed = true;
        }
    }
    st->apply_s += now_s() - t0;
    return changed;
}

typedef struct {
    bool changed, any_banned, out_of_time;
} iter_result;

/* Search every rule of the set on the clean graph, then apply, then rebuild once. */
static iter_result iterate(ts_runner *run, const ts_ruleset *set, uint32_t iter, const ts_runner_limits *lim,
                           double deadline) {
    iter_result res = {false, false, false};
    if (run->scan_all) /* the graph is clean here: rebuilt before the phase and after each iteration */
        ts_eg_drop_op_index(run->eg);
    else
        ts_eg_index_ops(run->eg);
    for (int i = 0; i < set->n; i++) {
        if (now_s() >= deadline) {
            res.out_of_time = true;
            for (int j = i; j < set->n; j++) run->found[set->rule[j]].n = 0;
            break;
        }
        res.any_banned |= search_rule(run, set->rule[i], iter, lim);
    }
    uint32_t nodes = ts_eg_node_count(run->eg), classes = ts_eg_class_count(run->eg);
    for (int i = 0; i < set->n; i++) res.changed |= apply_rule(run, set->rule[i], lim);
    ts_eg_set_origin(run->eg, -1, (int32_t)run->iteration); /* nodes the analysis adds in the rebuild */
    ts_eg_rebuild(run->eg);
    ts_eg_set_origin(run->eg, -1, -1);
    run->iteration++;
    res.changed |= nodes != ts_eg_node_count(run->eg) || classes != ts_eg_class_count(run->eg);
    return res;
}

/* ======== phases ================================================================================== */

static void lift_bans(ts_runner *run, const ts_ruleset *set) {
    for (int i = 0; i < set->n; i++) run->banned_until[set->rule[i]] = 0;
}

/* The loop of one phase; returns why it stopped and the iterations run. */
static ts_runner_stop saturate(ts_runner *run, const ts_ruleset *set, const ts_runner_limits *lim, uint32_t *iters) {
    double start = now_s(), deadline = start + lim->time_limit_s;
    for (uint32_t iter = 0;; iter++) {
        *iters = iter;
        if (iter >= lim->iter_limit) return TS_STOP_ITER_LIMIT;
        if (ts_eg_node_count(run->eg) >= lim->node_limit) return TS_STOP_NODE_LIMIT;
        if (now_s() >= deadline) return TS_STOP_TIME_LIMIT;
        iter_result res = iterate(run, set, iter, lim, deadline);
        *iters = iter + 1;
        if (res.out_of_time) return TS_STOP_TIME_LIMIT;
        if (ts_eg_node_count(run->eg) >= lim->node_limit) return TS_STOP_NODE_LIMIT;
        if (res.changed) continue;
        if (!res.any_banned) return TS_STOP_SATURATED;
        lift_bans(run, set); /* nothing changed, but banned rules may still have work */
    }
}

ts_runner_stop ts_runner_run_phase(ts_runner *run, int ruleset, const ts_runner_limits *lim) {
    TS_ASSERT(ruleset >= 0 && ruleset < run->rules->nsets);
    const ts_ruleset *set = &run->rules->set[ruleset];
    memset(run->banned_until, 0, (size_t)run->rules->nrules * sizeof *run->banned_until);
    double t0 = now_s();
    ts_eg_rebuild(run->eg);
    uint32_t iters = 0;
    ts_runner_stop stop = saturate(run, set, lim, &iters);
    TS_GROW(run->phase, run->nphases, run->cap_phases);
    run->phase[run->nphases++] = (ts_runner_phase){
        ruleset, stop, iters, ts_eg_node_count(run->eg), ts_eg_class_count(run->eg), now_s() - t0};
    return stop;
}

bool ts_runner_run(ts_runner *run, const char *const *rulesets, int n, const ts_runner_limits *lim, int *missing) {
    for (int i = 0; i < n; i++) {
        if (ts_rule_find_ruleset(run->rules, rulesets[i]) >= 0) continue;
        if (missing) *missing = i;
        return false;
    }
    for (int i = 0; i < n; i++) ts_runner_run_phase(run, ts_rule_find_ruleset(run->rules, rulesets[i]), lim);
    return true;
}

/* ======== derivations ============================================================================= */

/* The e-class of each node of t in eg, bottom-up (TS_EG_NONE where the node is not in eg). Malloc'd. */
static uint32_t *term_classes(ts_egraph *eg, const ts_eg_term *t) {
    uint32_t *cls = ts_xmalloc((t->n + 1) * sizeof *cls);
    for (uint32_t i = 0; i < t->n; i++) {
        ts_enode n = t->node[i];
        const ts_eg_opinfo *info = ts_eg_op_info(ts_eg_ops_of(eg), n.op);
        TS_ASSERT(info != NULL);
        bool ok = true;
        for (int k = 0; k < info->arity && ok; k++) {
            ok = cls[n.kid[k]] != TS_EG_NONE;
            n.kid[k] = cls[n.kid[k]];
        }
        cls[i] = ok ? ts_eg_lookup(eg, &n) : TS_EG_NONE;
    }
    return cls;
}

/* Adds (rule, iteration) to steps[0..*n), keeping the earliest iteration per rule. */
static void add_step(ts_runner_step *steps, size_t *n, int rule, int32_t iteration) {
    for (size_t i = 0; i < *n; i++) {
        if (steps[i].rule != rule) continue;
        if (iteration < steps[i].iteration) steps[i].iteration = iteration;
        return;
    }
    steps[(*n)++] = (ts_runner_step){rule, iteration};
}

static int cmp_step(const void *a, const void *b) {
    const ts_runner_step *x = a, *y = b;
    if (x->iteration != y->iteration) return x->iteration < y->iteration ? -1 : 1;
    return (x->rule > y->rule) - (x->rule < y->rule);
}

size_t ts_runner_derivation(ts_runner *run, const ts_eg_term *t, ts_runner_step **out) {
    uint32_t *cls = term_classes(run->eg, t);
    ts_runner_step *steps = ts_xmalloc((t->n + 1) * sizeof *steps);
    size_t n = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        if (cls[i] == TS_EG_NONE) continue;
        ts_enode node = t->node[i];
        const ts_eg_opinfo *info = ts_eg_op_info(ts_eg_ops_of(run->eg), node.op);
        for (int k = 0; k < info->arity; k++) node.kid[k] = cls[node.kid[k]];
        int32_t tag, iter;
        if (ts_eg_node_origin(run->eg, &node, &tag, &iter) && tag >= 0 && tag < run->rules->nrules)
            add_step(steps, &n, tag, iter);
    }
    free(cls);
    qsort(steps, n, sizeof *steps, cmp_step);
    if (n == 0) {
        free(steps);
        steps = NULL;
    }
    *out = steps;
    return n;
}
