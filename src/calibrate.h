/* calibrate.h — `tsopt calibrate`: microbenchmarks on the GPU, least-squares fits of the cost model's
 * coefficients (GSL), and the calibrated cost-model file.
 *
 * The GPU libraries are never linked: the CUDA driver (libcuda.so.1), NVRTC (libnvrtc.so.13) and CUPTI
 * (libcupti.so.13) are opened with dlopen at run time, so the binary starts where they are absent and the
 * command says which one is missing. Kernel durations come from CUPTI activity records (concurrent-kernel
 * start/end timestamps), or from CUDA events when CUPTI cannot be loaded or enabled. The kernels are the
 * CUDA C file calibrate/kernels.cu, read at run time and compiled with NVRTC for the device.
 *
 * The fitting and the file writer need no GPU and are unit-tested (tests/test_calibrate.c). */
#ifndef TS_CALIBRATE_H
#define TS_CALIBRATE_H

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "costmodel.h"

#define TS_FIT_MAXP 4

/* One least-squares fit: y ≈ Σ_j coef[j]·x_j over n samples. */
typedef struct {
    char name[32];      /* "dram_copy" */
    const char *model;  /* "t = a + bytes / bw" (static text) */
    int n, p;           /* samples, parameters */
    double coef[TS_FIT_MAXP];
    double r2;          /* 1 - SS_res / SS_tot, on the unweighted times */
    double resid_rms;   /* RMS of (y - fit) / y */
    double resid_max;   /* max |y - fit| / y */
} ts_fit;

/* Least squares of y ≈ X·c, X row-major with n rows of p columns (p ≤ TS_FIT_MAXP). relative: weights
 * 1/y² (gsl_multifit_wlinear: every sample's relative error counts the same, right for times spanning
 * decades); otherwise ordinary least squares (gsl_multifit_linear). Refuses, with *err set (free it), fewer
 * than p + 1 samples, non-finite or (when relative) non-positive y, and a design whose columns do not
 * vary independently (all sizes equal: launch cannot be told from bandwidth). Returns 0 or -1. */
int ts_fit_linear(const char *name, const char *model, const double *X, const double *y, int n, int p, bool relative,
                  ts_fit *f, char **err);

/* The throughput fit every family uses: time = a + work / rate, relative weights. coef[0] = a (seconds),
 * coef[1] = 1 / rate. Also refuses a fit whose rate is not positive. */
int ts_fit_rate(const char *name, const char *model, const double *work, const double *time, int n, ts_fit *f,
                char **err);
static inline double ts_fit_rate_of(const ts_fit *f) { return 1.0 / f->coef[1]; }

/* What a calibration produced: coefficients in costmodel order, the fits behind them, the device. */
typedef struct {
    char gpu[128], driver[128], timer[64], arch[16];
    /* Every cost-model coefficient (costmodel.h's list): those ts_calib_measures() names come from the
     * microbenchmarks, every other one is kept from the base model (0: absent, not written). */
#define TS_X_COEF_FIELD(name, same_as, fallback) double name;
    TS_COSTMODEL_COEFFICIENTS(TS_X_COEF_FIELD)
#undef TS_X_COEF_FIELD
    char efficiencies_from[256]; /* the file the unmeasured coefficients were kept from, or "built-in defaults" */
    /* extra measured figures recorded beside the fits */
    double empty_kernel_s, launch_gap_mean_s, occupancy_blocks_per_sm, wave_s, fractional_r2;
    ts_fit fit[16];
    int nfits;
} ts_calib_result;

/* Whether `tsopt calibrate`'s microbenchmarks measure the cost-model coefficient named so (launch, DRAM,
 * tensor, FMA and special-function rates, SMs, L2); the others are kept from the base model. */
bool ts_calib_measures(const char *coefficient);

/* Writes r in the format of costmodel/h200.yaml with `calibrated: true`, the GPU, driver, date (UTC, from
 * `when`) and a `fit:` section. Returns 0, or -1 on a write error. */
int ts_calib_write_yaml(FILE *out, const ts_calib_result *r, time_t when);

/* One `fit:` entry line: "  NAME: {model: "...", coef: [...], r2: ..., resid_rms: ..., resid_max: ..., samples: N}". */
void ts_calib_write_fit(FILE *out, const ts_fit *f);

/* Parses YYYY-MM-DD (UTC midnight). Returns 0 or -1. */
int ts_calib_parse_date(const char *s, time_t *out);

typedef struct {
    const char *out_path;   /* NULL: stdout */
    const char *base_path;  /* cost model whose efficiencies are kept (default costmodel/h200.yaml) */
    const char *kernels;    /* NULL: calibrate/kernels.cu, then beside the binary */
    time_t when;            /* the date written into the file */
    bool quick;             /* fewer repetitions (a smoke run) */
    bool events;            /* time with CUDA events even where CUPTI loads */
    const char *const *from_tune; /* tune record files (`--from-tune`: see tunefit.h); none: microbenchmarks */
    int nfrom_tune;
    const char *const *evaluate;  /* --evaluate: held-out records, only predicted (with the fitted model) */
    int nevaluate;
} ts_calib_opts;

enum { TS_CALIB_OK = 0, TS_CALIB_INPUT = 1, TS_CALIB_NO_GPU = 3 };

/* Runs every microbenchmark on GPU 0, fits, and writes the file. Progress on stderr. Returns TS_CALIB_OK,
 * TS_CALIB_NO_GPU (a library missing, no device, a CUDA failure: said on stderr) or TS_CALIB_INPUT (the
 * kernels or base file unreadable, a fit refused, the output not writable). Library names can be
 * overridden for tests with $TSOPT_LIBCUDA, $TSOPT_LIBNVRTC, $TSOPT_LIBCUPTI. */
int ts_calibrate(const ts_calib_opts *o);

/* Compiles the kernel file with NVRTC for sm_<arch> (e.g. "90") without a GPU: 0 ok, -1 a compile error
 * (log in *err), 1 NVRTC cannot be loaded (reason in *err). For tests. */
int ts_calib_compile_check(const char *kernels_path, const char *arch, char **err);

#endif
