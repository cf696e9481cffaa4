/* verify.h — rule verification, tsopt's formal layer: both sides of every rule are evaluated with the
 * float64 reference interpreter on random shapes and values that satisfy the rule's guards, and compared.
 *
 * Each trial draws a pool of named axes (sizes from 1 through sizes just past the tile sizes the rules use,
 * so size-1 axes and tile counts that do not divide are covered), binds every operand variable to a random
 * input over a random subset of those axes (or, sometimes, to a random scalar constant, so that guards
 * such as (positive ?c) can hold), binds param variables that name axes to axes of the pool, and skips
 * the trial when a guard fails. A rule passes when the two sides agree on every trial within a relative
 * L2 tolerance (NaN where, and only where, the other side is NaN) — the guard's own where a guard admits rounding
 * (`(rounding ?t)`: eight units of ?t's rounding). A failure comes with a counterexample. */
#ifndef TS_VERIFY_H
#define TS_VERIFY_H

#include <stdint.h>
#include <stdio.h>

#include "rules.h"

typedef struct {
    int trials;       /* trials that must pass per rule (default 40) */
    uint64_t seed;    /* default 1 */
    double tolerance; /* relative L2 (default 1e-9); a guard that admits rounding may allow more */
} ts_verify_opts;

typedef enum { TS_VERIFY_PASSED, TS_VERIFY_FAILED, TS_VERIFY_UNSATISFIABLE, TS_VERIFY_SKIPPED } ts_verify_status;

typedef struct {
    ts_verify_status status;
    int trials;   /* trials run with guards holding */
    double error; /* the largest relative error seen */
    char *detail; /* failure: the counterexample; skipped/unsatisfiable: why (heap, or NULL) */
} ts_verify_result;

/* Verifies rule `r` of rs. */
ts_verify_result ts_verify_rule(const ts_rules *rs, int r, const ts_verify_opts *opts);
void ts_verify_result_free(ts_verify_result *res);

/* Verifies every rule of rs, printing one line per rule (and counterexamples) to out, then
 * "N passed, N failed". Returns the number of rules that failed or could not be verified. */
int ts_verify_all(const ts_rules *rs, const ts_verify_opts *opts, FILE *out);

#endif
