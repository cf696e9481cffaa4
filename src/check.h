/* check.h — giving a YAML graph spec its meaning: axes, inputs, ops and outputs checked (names, shapes,
 * dtypes, named axes, contractions, cycles) and lowered to HLIR. Every user error is a diagnostic at the
 * offending item's file:line:col; nothing here prints or exits. */
#ifndef TS_CHECK_H
#define TS_CHECK_H

#include "hlir.h"
#include "spec.h"

#define TS_MAX_OPS 100000 /* ops in one graph file (and inputs, and outputs) */
#define TS_MAX_AXES 4096  /* axes in one graph file */
#define TS_MAX_DEPTH 10000 /* primitive ops on the longest path: the planner recurses along paths */
/* Elements a tensor (or an op's product space) may hold: 2^56, so that its bytes, strides and offsets times the
 * small factors the later stages apply (a float64 reference, a 16-byte vector) stay inside int64. */
#define TS_MAX_ELEMENTS_LOG2 56

/* Sizes that override the file's axis sizes (`--dims m=8,d=16`). */
typedef struct {
    int n;
    char *name[64];
    int64_t size[64];
    bool scaled; /* compile.c's second binding (dynamic sizes times primes, for symbolic strides): a bound
                    that compares a dynamic size with a static one (append's length) is not checked */
} ts_binding;

/* Parses "m=8,d=16" into b; on error returns -1 and reports (without a place) into d. */
int ts_binding_parse(ts_binding *b, const char *text, ts_diags *d);
void ts_binding_free(ts_binding *b);
/* out = a copy of in (NULL: empty); free out with ts_binding_free. */
void ts_binding_copy(ts_binding *out, const ts_binding *in);
/* Binds axis `name` to size in b (replacing an earlier binding of it; ignored past 64 axes). */
void ts_binding_set(ts_binding *b, const char *name, int64_t size);

/* Checks the spec and builds g for the binding (NULL: the file's sizes, typical ones for dynamic axes).
 * Returns 0 when there are no errors (warnings may be in d); g must be freed either way. */
int ts_check(ts_spec *spec, const ts_binding *bind, ts_graph *g, ts_diags *d);

#endif
