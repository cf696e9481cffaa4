/* runner.h — equality saturation: runs rulesets over an e-graph in phases, under limits, with egg's
 * backoff scheduler, and says why each phase stopped.
 *
 * What it is: each iteration searches every (unbanned) rule of the phase's ruleset on the clean graph,
 * then applies all the matches, then rebuilds once. A phase ends when an iteration changes nothing
 * (saturated) or at its iteration, e-node or wall-time limit. Backoff: a rule whose matches in one
 * iteration exceed match_limit << times_banned is banned (its matches dropped) for
 * ban_length << times_banned iterations, so commutativity and associativity cannot flood the graph; when
 * an iteration changes nothing while rules are banned, the bans are lifted instead of declaring
 * saturation. Each iteration first builds the e-graph's op index, so matching tries a pattern only on the
 * classes holding its root op. Every node an application adds is tagged with the rule and the iteration
 * (counted over all phases), so ts_runner_derivation can say which rules built an extracted term.
 * What it is not: extraction or cost (later stages).
 *
 * Usage:
 *     ts_runner run; ts_runner_init(&run, eg, &rules);
 *     const char *phases[] = {"algebra", "fusion"};
 *     ts_runner_run(&run, phases, 2, &limits);   // run.phase[i] says how each phase ended
 *     ts_runner_free(&run); */
#ifndef TS_RUNNER_H
#define TS_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "egraph.h"
#include "rules.h"

typedef enum {
    TS_STOP_SATURATED,  /* an iteration changed nothing and no rule was banned */
    TS_STOP_ITER_LIMIT, /* ran iter_limit iterations */
    TS_STOP_NODE_LIMIT, /* the e-graph reached node_limit e-nodes */
    TS_STOP_TIME_LIMIT, /* the phase ran time_limit_s seconds */
    TS_STOP_COUNT
} ts_runner_stop;

/* "saturated", "iteration limit", "node limit", "time limit". */
const char *ts_runner_stop_str(ts_runner_stop s);

typedef struct {
    uint32_t iter_limit;   /* iterations per phase */
    uint32_t node_limit;   /* e-nodes in the graph */
    double time_limit_s;   /* wall time per phase */
    uint32_t match_limit;  /* backoff: matches per iteration before a first ban */
    uint32_t ban_length;   /* backoff: iterations of a first ban */
} ts_runner_limits;

/* iter 30, nodes 10000, 5 s, match limit 1000, ban length 5 (egg's defaults). */
ts_runner_limits ts_runner_default_limits(void);

/* Per rule, over all phases run so far. */
typedef struct {
    uint64_t matches;      /* matches found (including those dropped by a ban) */
    uint64_t applied;      /* matches whose guards held, so the right side was added */
    uint64_t changed;      /* applications that changed the graph (a new node or a new union) */
    uint32_t times_banned;
    double search_s, apply_s;
} ts_runner_rule_stats;

typedef struct {
    int ruleset;             /* index into the rules' sets */
    ts_runner_stop stop;
    uint32_t iterations;
    uint32_t nodes, classes; /* the e-graph's size when the phase ended */
    double seconds;
} ts_runner_phase;

typedef struct {
    ts_egraph *eg;
    const ts_rules *rules;
    ts_runner_rule_stats *stats; /* one per rule of `rules` */
    ts_runner_phase *phase;      /* one per phase run */
    int nphases, cap_phases;
    /* scheduler state of the current phase, one per rule */
    uint32_t *banned_until; /* iteration at which the ban ends */
    ts_rule_matches *found; /* matches of the current iteration */
    uint32_t iteration;     /* iterations run over all phases: the provenance iteration of the next one */
    bool scan_all;          /* set to match without the op index, scanning every class (for comparisons) */
} ts_runner;

/* eg and rules are borrowed; load every rule before this (the statistics are sized by rules->nrules). */
void ts_runner_init(ts_runner *run, ts_egraph *eg, const ts_rules *rules);
void ts_runner_free(ts_runner *run);

/* Runs ruleset `ruleset` (an index from ts_rule_find_ruleset) to saturation or its limits; the graph is
 * rebuilt before and after. Appends a ts_runner_phase and returns how it stopped. */
ts_runner_stop ts_runner_run_phase(ts_runner *run, int ruleset, const ts_runner_limits *lim);
/* Runs the named rulesets in order, each a phase under `lim`. Returns false, running nothing, when a name
 * is not a ruleset of the rules (its index in *missing when not NULL). */
bool ts_runner_run(ts_runner *run, const char *const *rulesets, int n, const ts_runner_limits *lim, int *missing);

/* One step of a derivation: a rule, and the first iteration in which it added a node of the term. */
typedef struct {
    int rule;          /* index into the rules */
    int32_t iteration; /* counted over all phases run, from 0 */
} ts_runner_step;

/* The derivation of term t (extracted from run's e-graph, e.g. by ts_eg_extract_smallest): the distinct
 * rules whose applications first added t's nodes, ordered by (iteration, rule index). Nodes from the
 * input (or absent from the graph) contribute none. Returns the count; *out is malloc'd for the caller
 * to free (NULL when the count is 0). For each step, rules->rule[step.rule] has its name and file:line. */
size_t ts_runner_derivation(ts_runner *run, const ts_eg_term *t, ts_runner_step **out);

#endif
