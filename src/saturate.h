/* saturate.h — the saturation stage: loads rule files, converts a checked graph into the e-graph (egir)
 * and runs the rulesets in phases under limits. Shared by `tsopt explain`, `verify-rules`, tests and the
 * saturation benchmark. */
#ifndef TS_SATURATE_H
#define TS_SATURATE_H

#include <stdio.h>

#include "egir.h"
#include "hlir.h"
#include "rules.h"
#include "runner.h"

/* The phases, in order: algebra → reductions → fusion → lowering. */
extern const char *const ts_default_phases[];
extern const int ts_default_nphases;

/* Loads every path into rs (a directory: its *.rules files in name order). Diagnostics go to `err`.
 * Returns the number of errors (0: all loaded). rs must have been initialised with ts_egir_rule_env(). */
int ts_load_rule_paths(ts_rules *rs, const char *const *paths, int n, FILE *err);

typedef struct {
    ts_egir x;
    ts_runner run;
    double seconds;
} ts_saturation;

/* Converts g and saturates it with rs over `phases`. Returns 0, or -1 with *err (heap) set. */
int ts_saturate(ts_graph *g, const ts_rules *rs, const char *const *phases, int nphases,
                const ts_runner_limits *lim, ts_saturation *out, char **err);
void ts_saturation_free(ts_saturation *s);

#endif
