/* tune.h — `tsopt tune`: the best few plans by prediction built, validated and timed on the GPU; the
 * fastest valid one emitted with its measured time.
 *
 * Pipeline: the top K ranked plans are emitted as headers (the very text users get); each is compiled into
 * a shared library exposing the header's C ABI, in a cache keyed by a hash of the header's code (past its
 * banner) and the compiler flags (so a plan already built — on this machine or on a development machine, `--build-only` — is never
 * rebuilt); the float64 reference is computed on sampled rows (sample.h) and cached the same way; on the
 * GPU (the CUDA driver opened with dlopen, gpu.h) every candidate runs on fresh random inputs with its
 * outputs poisoned, is compared with the reference, then timed (warm-up, median of CUDA events, L2 flushed
 * before each run) and profiled once with CUPTI for per-kernel times. A candidate that fails to build, run
 * or validate is reported and never emitted. Each candidate runs in a child process of its own (a kernel
 * fault poisons the process's CUDA context; a hung kernel is killed by a watchdog), so a faulting, crashing
 * or hanging candidate costs only itself and the table says how it ended.
 *
 * Why a shared library and not NVRTC: a header's launch code is host C++ (grid sizes, TMA descriptors,
 * fallbacks) and NVRTC compiles device code only, so timing the header itself — what is shipped — needs
 * the CUDA compiler. NVRTC is what `tsopt calibrate` uses for its device-only microbenchmarks. */
#ifndef TS_TUNE_H
#define TS_TUNE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "costmodel.h"
#include "hlir.h"
#include "plan.h"
#include "spec.h"

typedef enum { TS_CAND_PENDING, TS_CAND_OK, TS_CAND_INVALID, TS_CAND_BUILD_FAILED, TS_CAND_RUN_FAILED } ts_cand_status;

/* "ok", "invalid", "build-failed", "run-failed", "pending" (the record's spelling). */
const char *ts_cand_status_name(ts_cand_status s);

typedef struct {
    int rank;             /* 1-based rank by prediction among the graph's plans */
    const ts_plan *plan;
    char *header;         /* the emitted header (not tuned: its banner says so) */
    size_t header_len;
    unsigned long long code_hash; /* of the header past its banner, and the compiler flags */
    char hash[17];        /* code_hash in hex: the cache key (equal code, same candidate) */
    char *lib;            /* the cached shared library */
    ts_cand_status status;
    char *detail;         /* why it failed, or a note */
    double predicted_s, measured_s, rel_error; /* NAN until known */
    double *kernel_s;     /* per plan kernel (CUPTI), NAN when not measured */
    ts_plan *owned;       /* a configuration variant of a ranked plan (plan points to it; freed with it) */
} ts_tune_cand;

/* The candidate to emit: the fastest with status ok (a tie goes to the better predicted rank); -1 when
 * none passed. */
int ts_tune_select(const ts_tune_cand *c, int n);

/* The table `tsopt tune` prints: rank, plan, kernels, predicted, measured, error, status. */
void ts_tune_print_table(FILE *out, const ts_tune_cand *c, int n, int chosen);

typedef struct {
    const char *file;         /* the graph, as named on the command line */
    ts_spec *spec;
    const ts_binding *bind;   /* --dims (sizes timed; dynamic axes included) */
    ts_graph *g;              /* checked at bind */
    const ts_costmodel *cm;
    const ts_plan *plans;     /* ranked, best predicted first */
    int nplans;
    double baseline_s;
    int top, reps, warmup, jobs;
    double watchdog_s;        /* per candidate (its own process): killed past this many seconds (0: 120) */
    uint64_t seed;
    const char *out_dir, *record, *cache_dir, *arch, *nvcc, *templates_dir;
    bool build_only;
    bool allow_library;       /* --allow-cublas: cuBLASLt's GEMMs are a candidate too (they link -lcublasLt) */
} ts_tune_opts;

/* Exit codes: 0, 1 (bad input, nothing valid, a write failed), 3 (no GPU, driver or compiler). */
int ts_tune(const ts_tune_opts *o);

/* Value of double x (exactly representable in fp16) as IEEE binary16 bits; rounds to nearest even
 * otherwise. For tests. */
uint16_t ts_half_bits(double x);

#endif
