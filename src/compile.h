/* compile.h — the offline compiler's middle: a checked graph saturated with the rules, its candidate
 * kernel plans found by the cost-model-guided search (search.h) and ranked best first. Shared by
 * `tsopt compile` and the tests; emission is emit.h's. */
#ifndef TS_COMPILE_H
#define TS_COMPILE_H

#include "check.h"
#include "costmodel.h"
#include "plan.h"
#include "rules.h"
#include "search.h"
#include "spec.h"

typedef struct {
    ts_plan *plans; /* best predicted first */
    int n;
    double baseline_s; /* the one-kernel-per-op plan's predicted time */
    ts_search_stats search;
} ts_compiled;

/* g was checked from spec with `bind` (NULL: the file's sizes). Returns 0, or -1 with *err (heap). */
int ts_compile(ts_spec *spec, const ts_binding *bind, ts_graph *g, const ts_rules *rs, const ts_costmodel *cm,
               ts_compiled *out, char **err);
/* ts_compile, and with allow_library the search may configure GEMMs to run by cuBLASLt (--allow-cublas). */
int ts_compile_with(ts_spec *spec, const ts_binding *bind, ts_graph *g, const ts_rules *rs, const ts_costmodel *cm,
                    bool allow_library, ts_compiled *out, char **err);
void ts_compiled_free(ts_compiled *c);

#endif
