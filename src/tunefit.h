/* tunefit.h — `tsopt calibrate --from-tune`: the cost model's template efficiencies (GEMM, attention,
 * reduce, map, row) fitted to the per-kernel timings that `tsopt tune` records (docs/tune-records.md), the
 * cost model's accuracy over the timed candidates before and after the fit, and the base cost-model file
 * rewritten with the fitted values. Needs no GPU.
 *
 * Records are JSON, read with libyaml (JSON is YAML flow style) and checked strictly: every error is a
 * `file:line:col: error:` diagnostic, never a crash (files up to 10 MiB, nesting up to 64 levels, no YAML
 * aliases, bounded candidate and kernel counts). */
#ifndef TS_TUNEFIT_H
#define TS_TUNEFIT_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "calibrate.h"
#include "costmodel.h"
#include "diag.h"

#define TS_TUNE_FORMAT "tsopt-tune-record 1"
#define TS_TUNE_MAX_CANDIDATES 10000 /* per record */
#define TS_TUNE_MAX_KERNELS 100000   /* per record, all candidates together */
#define TS_TUNE_MIN_SAMPLES 3        /* timed kernels a kind needs before its efficiency is fitted */
#define TS_TUNE_EFF_MIN 0.02         /* the range searched for an efficiency */
#define TS_TUNE_EFF_MAX 2.0
#define TS_TUNE_NUM_MIN 1e-30        /* every number of a record is 0 or within these in magnitude */
#define TS_TUNE_NUM_MAX 1e30

typedef struct {
    ts_kernel_work work;
    double predicted_s; /* as recorded */
    double measured_s;  /* NAN when null */
} ts_tune_kernel;

typedef struct {
    int rank;
    char *plan, *status;
    bool ok;            /* status "ok": validated and timed */
    double predicted_s; /* as recorded */
    double measured_s;  /* NAN when null */
    ts_tune_kernel *k;
    int nk;
} ts_tune_candidate;

typedef struct {
    const char *path; /* owned by the set */
    char *graph;
    ts_costmodel cm; /* the record's `costmodel` coefficients (numbers only; no strings) */
    ts_tune_candidate *c;
    int nc;
} ts_tune_record;

/* Records loaded so far, and the path and text of every file tried, so that diagnostics stay printable
 * until ts_tune_set_free. */
typedef struct {
    ts_tune_record *r;
    int n, cap;
    char **keep;
    int nkeep, capkeep;
} ts_tune_set;

/* Reads one record file and appends it to s. Errors into d (initialised here; valid while s lives).
 * Returns 0, or -1 with nothing appended. */
int ts_tune_load(ts_tune_set *s, const char *path, ts_diags *d);
/* The same from memory; `path` is used in messages. */
int ts_tune_load_text(ts_tune_set *s, const char *path, const char *text, size_t len, ts_diags *d);
void ts_tune_set_free(ts_tune_set *s);

/* ---- the fit --------------------------------------------------------------------------------------- */


typedef struct {
    int samples;        /* timed kernels of ok candidates */
    bool fitted;
    bool at_bound;       /* the minimum is an end of the searched range */
    const char *why_not; /* static text when not fitted */
    double before;       /* the base cost model's value */
    double after;        /* fitted, or `before` when not fitted */
    ts_fit fit;          /* when fitted: "<kind>_efficiency", coef[0] = after, R², residual spread, samples */
} ts_eff_fit;

/* The fitted efficiencies ("slots"): one per kernel kind (indexed by ts_kernel_kind), then
 * skinny_gemm_efficiency, the share of DRAM bandwidth of the kernels that stream one operand at a share of
 * the SMs (decode-size GEMMs in their skinny form, decode attention: ts_kernel_work.skinny), then
 * cublas_efficiency, the tensor rate of GEMMs cuBLASLt ran (ts_kernel_work.library, not skinny), then
 * gemm_tf32x3_efficiency, that of fp32 GEMMs in gemm_f32.cuh (ts_kernel_work.tf32x3). */
#define TS_FIT_SKINNY TS_NKINDS
#define TS_FIT_CUBLAS (TS_NKINDS + 1)
#define TS_FIT_TF32X3 (TS_NKINDS + 2)
#define TS_FIT_SLOTS (TS_NKINDS + 3)

typedef struct {
    ts_eff_fit kind[TS_FIT_SLOTS];
    int nfitted;
} ts_tune_fit;

/* The efficiency field of m that slot uses (a ts_kernel_kind, TS_FIT_SKINNY, TS_FIT_CUBLAS or TS_FIT_TF32X3). */
double *ts_costmodel_efficiency_slot(ts_costmodel *m, int slot);

/* Fits each kind with at least TS_TUNE_MIN_SAMPLES timed kernels (status "ok", kernel measured_s > 0):
 * the efficiency e in [TS_TUNE_EFF_MIN, TS_TUNE_EFF_MAX] minimising Σ log²(predicted(e) / measured), a
 * kernel predicted with its record's coefficients but e for its kind's efficiency (a log-spaced scan
 * brackets the minimum, GSL's Brent minimiser refines it). `before` values come from base. GEMMs that ran
 * in their skinny form are left out of gemm_efficiency's fit (their MMAs use skinny_tensor_efficiency); they
 * and decode attention (every kernel with work.skinny) fit skinny_gemm_efficiency. */
void ts_tune_fit_run(const ts_tune_set *s, const ts_costmodel *base, ts_tune_fit *f);

/* ---- accuracy -------------------------------------------------------------------------------------- */

typedef struct {
    int group;        /* candidates of one tuning run (one record) share a group */
    double predicted; /* seconds */
    double measured;  /* seconds, > 0 */
} ts_acc_point;

typedef struct {
    int points, groups;        /* candidates; groups with at least one */
    double median_ape;         /* median of |predicted - measured| / measured (NAN: no points) */
    double spearman;           /* over all points pooled (NAN: fewer than 2, or a constant side) */
    double spearman_per_group; /* mean over groups with >= 3 points whose Spearman is defined (NAN: none) */
    int spearman_groups;       /* the groups in that mean */
    int top1_hits;             /* groups whose predicted-best point is within 10% of their measured best */
    double top1_share;         /* top1_hits / groups (NAN: no groups) */
} ts_accuracy;

/* Spearman's rank correlation, ties given their average rank; NAN when n < 2 or a side is constant. */
double ts_spearman(const double *x, const double *y, int n);
/* The median of x (n values; x is reordered). NAN when n == 0. */
double ts_median(double *x, int n);
void ts_accuracy_compute(const ts_acc_point *p, int n, ts_accuracy *a);

/* The ok, measured candidates of s as points (one group per record), each predicted as the sum of its
 * kernels' ts_costmodel_time with the record's coefficients — and, when eff is not NULL (TS_FIT_SLOTS
 * values), eff[slot] for the template efficiencies. Returns the count; *out is freed by the caller. */
int ts_tune_points(const ts_tune_set *s, const double *eff, ts_acc_point **out);

/* ---- the cost-model file --------------------------------------------------------------------------- */

/* The base cost model's text with the fitted efficiencies: their `coefficients:` lines replaced (with a
 * `# fitted: N kernels from tsopt tune records` comment), the header sentence saying they are not
 * measured replaced by one naming the records, and one `fit:` entry per fitted efficiency (an older entry
 * of the same name is replaced). Returns a fresh string, or NULL with *err set when the base's layout
 * does not allow it (a flow-style `coefficients` or `fit`). */
char *ts_tune_model_text(const char *base_text, const char *base_path, const ts_tune_fit *f,
                         const char *const *records, int nrecords, time_t when, char **err);

/* The command: loads the records and the base (o->base_path), fits, prints the table and the accuracy
 * report, writes the model to o->out_path (atomically; stdout when NULL; the report then goes to stderr).
 * Returns TS_CALIB_OK or TS_CALIB_INPUT (diagnostics on stderr; nothing written). */
int ts_calibrate_from_tune(const ts_calib_opts *o);

#endif
