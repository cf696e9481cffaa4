/* test_tune.c — `tsopt tune` without a GPU: the choice among candidates, fp16 conversion, and the whole
 * command end to end on the simulated driver (calibrate/mock_cuda.c, built by make as
 * $MOCKCUDA) with CPU stand-ins for the compiled candidates (tests/tune/fake_nvcc.sh builds
 * tests/tune/fake_candidate.c in place of nvcc: the baseline plan computes a wrong result, every plan
 * "launches" one 5 us simulated kernel per kernel of its plan; planted candidates fault, hang or crash). */
#include <math.h>
#include <unistd.h>

#include "testutil.h"
#include "tune.h"

/* ---- the choice -------------------------------------------------------------------------------- */

static ts_plan plan_named(const char *name) { return (ts_plan){.name = (char *)name}; }

static ts_tune_cand cand(const ts_plan *p, int rank, ts_cand_status st, double measured) {
    return (ts_tune_cand){.rank = rank, .plan = p, .status = st, .measured_s = measured, .predicted_s = NAN};
}

Test(tune, chooses_the_fastest_valid_candidate) {
    ts_plan a = plan_named("fused"), b = plan_named("fused-separate-gemms"), c = plan_named("baseline");
    /* recorded on the H200 (bench/NOTES.md run 8, rmsnorm_mlp): the invalid one is fastest and loses */
    ts_tune_cand cs[] = {cand(&a, 1, TS_CAND_OK, 18.1e-6), cand(&b, 2, TS_CAND_OK, 24.9e-6),
                         cand(&c, 3, TS_CAND_INVALID, 9e-6)};
    cr_expect_eq(ts_tune_select(cs, 3), 0);
    cs[0].status = TS_CAND_RUN_FAILED;
    cr_expect_eq(ts_tune_select(cs, 3), 1, "a failed run is never chosen");
    cs[1].status = TS_CAND_BUILD_FAILED;
    cr_expect_eq(ts_tune_select(cs, 3), -1, "nothing valid: nothing chosen");
}

Test(tune, a_tie_goes_to_the_better_predicted_rank_and_nan_times_never_win) {
    ts_plan a = plan_named("a"), b = plan_named("b");
    ts_tune_cand cs[] = {cand(&b, 2, TS_CAND_OK, 1e-5), cand(&a, 1, TS_CAND_OK, 1e-5)};
    cr_expect_eq(ts_tune_select(cs, 2), 1);
    ts_tune_cand ns[] = {cand(&a, 1, TS_CAND_OK, NAN), cand(&b, 2, TS_CAND_OK, 2e-5)};
    cr_expect_eq(ts_tune_select(ns, 2), 1);
    cr_expect_eq(ts_tune_select(ns, 0), -1);
}

/* ---- fp16 -------------------------------------------------------------------------------------- */

static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

Test(tune, half_bits_round_trip_every_finite_half) {
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 31) == 31) continue; /* inf and nan */
        uint16_t got = ts_half_bits(half_value((uint16_t)h));
        cr_assert_eq(got, h, "%#x -> %g -> %#x", h, half_value((uint16_t)h), got);
    }
}

Test(tune, half_bits_round_to_nearest_even) {
    cr_expect_eq(ts_half_bits(1 + 0x1p-11), 0x3c00, "a tie rounds to the even 1.0");
    cr_expect_eq(ts_half_bits(1 + 3 * 0x1p-11), 0x3c02, "a tie rounds to the even 1+2^-9");
    cr_expect_eq(ts_half_bits(65519.0), 0x7bff);
    cr_expect_eq(ts_half_bits(65520.0), 0x7c00, "rounds to infinity");
    cr_expect_eq(ts_half_bits(-INFINITY), 0xfc00);
    cr_expect_eq(ts_half_bits(0x1p-25), 0x0000, "half the smallest subnormal: tie to even zero");
    cr_expect_eq(ts_half_bits(3 * 0x1p-26), 0x0001);
    cr_expect_eq(ts_half_bits(0x1p-14 - 0x1p-26), 0x0400, "rounds up into the normals");
    cr_expect_eq(ts_half_bits(NAN) & 0x7c00, 0x7c00);
}

/* ---- end to end on the simulated driver -------------------------------------------------------- */

static const char *mock(void) {
    const char *m = getenv("MOCKCUDA");
    return m ? m : "build/tests/libmockcuda.so";
}

static char *scratch(const char *what) {
    char *dir = ts_strfmt("build/tune-test-%s-%ld", what, (long)getpid());
    char *cmd = ts_strfmt("rm -rf %s && mkdir -p %s", dir, dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    return dir;
}

static void remove_dir(char *dir) {
    char *cmd = ts_strfmt("rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
    free(cmd);
    free(dir);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = ts_xmalloc(1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* tsopt tune on bench/graphs/rmsnorm.yaml at the sizes the stand-in computes. */
static tsopt_result tune(const char *dir, const char *env, const char *extra) {
    char *e = ts_strfmt("TSOPT_LIBCUDA=%s TSOPT_LIBCUPTI=%s %s", mock(), mock(), env);
    char *args = ts_strfmt("tune --dims m=16,d=32,n=24 --nvcc tests/tune/fake_nvcc.sh --cache %s/cache "
                           "--record %s/record.json -o %s/out %s bench/graphs/rmsnorm.yaml",
                           dir, dir, dir, extra);
    tsopt_result r = run_tsopt_env(e, args);
    free(e), free(args);
    return r;
}

/* The name of the plan `tsopt compile` ranks `rank` for the graph tune() tunes: the search names its plans
 * by seed and evaluation, so the tests ask rather than hard-code them. */
static char *ranked_name_kernels(int rank, int *kernels) {
    char *dir = scratch("rank");
    char *args = ts_strfmt("compile --dims m=16,d=32,n=24 -o %s bench/graphs/rmsnorm.yaml", dir);
    tsopt_result r = run_tsopt_env("", args);
    cr_assert_eq(r.code, 0, "%s", r.out);
    char *want = ts_strfmt("\n%d ", rank), *at = strstr(r.out, want);
    cr_assert_not_null(at, "no rank %d in:\n%s", rank, r.out);
    at += strlen(want);
    while (*at == ' ') at++;
    const char *end = at;
    while (*end && !(end[0] == ' ' && end[1] == ' ')) end++; /* names hold single spaces only */
    char *name = ts_strfmt("%.*s", (int)(end - at), at);
    if (kernels) *kernels = atoi(end);
    free(want), free(args), free(r.out);
    remove_dir(dir);
    return name;
}

static char *ranked_name(int rank) { return ranked_name_kernels(rank, NULL); }

/* How the time of plan `rank` prints: one 5 us simulated kernel per kernel of the plan (one: 0.0053 ms,
 * two: 0.0105 ms, ...). */
static const char *simulated_ms(int kernels) { return kernels == 1 ? "0.005" : "0.01"; }

Test(tune, end_to_end_picks_the_fastest_valid_plan_and_records_everything) {
    cr_assert_eq(access(mock(), R_OK), 0, "the simulated driver %s is missing (make builds it)", mock());
    char *dir = scratch("e2e");
    tsopt_result r = tune(dir, "", "--top 9");
    cr_assert_eq(r.code, 0, "%s", r.out);
    /* the table: the best plan (one kernel: the GEMM folds RMSNorm's statistics) is fastest (1 x 5 us), the
     * baseline computes a wrong result */
    int nk = 0;
    char *best = ranked_name_kernels(1, &nk), *line = ts_strfmt(": %s, measured %s", best, simulated_ms(nk));
    char *plan = ts_strfmt("// plan:      %s", best), *measured = ts_strfmt("// measured:  %s", simulated_ms(nk));
    cr_expect_not_null(strstr(r.out, "graph rmsnorm on Mock H200: 9 candidates"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "invalid (rel. error"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "^ chosen"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, line), "%s\n%s", line, r.out);
    char *header = ts_strfmt("%s/out/rmsnorm.cuh", dir), *record = ts_strfmt("%s/record.json", dir);
    char *h = slurp(header), *j = slurp(record);
    cr_assert_not_null(h);
    cr_expect_not_null(strstr(h, plan));
    free(best), free(line), free(plan);
    cr_expect_not_null(strstr(h, measured), "%.800s", h);
    free(measured);
    cr_expect_not_null(strstr(h, "on Mock H200 by `tsopt tune`"));
    cr_assert_not_null(j);
    cr_expect_not_null(strstr(j, "\"format\": \"tsopt-tune-record 1\""));
    cr_expect_not_null(strstr(j, "\"chosen\": 1"));
    cr_expect_not_null(strstr(j, "\"status\": \"invalid\""));
    cr_expect_not_null(strstr(j, "\"kernel_timer\": \"CUPTI\""));
    cr_expect_not_null(strstr(j, "\"measured_s\": 5e-06}"), "per-kernel times from the CUPTI records");
    /* a second run finds every candidate in the cache: nothing is rebuilt */
    tsopt_result again = tune(dir, "", "--top 9");
    cr_expect_eq(again.code, 0, "%s", again.out);
    cr_expect_null(strstr(again.out, "tune: building"), "%s", again.out);
    free(again.out);
    free(h), free(j), free(header), free(record), free(r.out);
    remove_dir(dir);
}

Test(tune, a_candidate_that_does_not_build_is_reported_and_skipped) {
    char *dir = scratch("buildfail");
    char *first = ranked_name(1), *second = ranked_name(2);
    char *env = ts_strfmt("FAKE_NVCC_FAIL='%s'", first), *line = ts_strfmt(": %s, measured", second);
    tsopt_result r = tune(dir, env, "");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "build-failed ("), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "simulated compiler failure"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, line), "the other valid plan is emitted:\n%s", r.out);
    free(r.out), free(first), free(second), free(env), free(line);
    remove_dir(dir);
}

/* A kernel fault poisons its process's CUDA context, a hung kernel never returns: each candidate runs in a
 * child process of its own, so a planted faulting (rank 1) and hanging candidate cost only themselves.
 * The watchdog leaves room for a valid candidate's runs under ASan on a loaded machine (each simulated
 * L2 flush is a real 256 MiB memset). */
Test(tune, a_faulting_and_a_hanging_candidate_cost_only_themselves) {
    char *dir = scratch("fault");
    int nk = 0;
    char *first = ranked_name(1), *second = ranked_name_kernels(2, &nk), *third = ranked_name(3);
    char *env = ts_strfmt("FAKE_NVCC_FAULT='%s' FAKE_NVCC_HANG='%s'", first, third);
    char *emitted = ts_strfmt(" (plan 2: %s, measured %s", second, simulated_ms(nk));
    tsopt_result r = tune(dir, env, "--watchdog 15");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "run-failed (failed while validating: cuCtxSynchronize() failed: an illegal memory "
                                     "access was encountered (CUresult 700))"),
                       "%s", r.out);
    cr_expect_not_null(strstr(r.out, "run-failed (hung while validating: killed by the 15 s watchdog)"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "ok\n     ^ chosen"), "the next candidate still validated and timed:\n%s", r.out);
    cr_expect_not_null(strstr(r.out, "wrote "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, emitted), "the best valid one is emitted:\n%s", r.out);
    free(first), free(second), free(third), free(env), free(emitted);
    char *record = ts_strfmt("%s/record.json", dir), *j = slurp(record);
    cr_assert_not_null(j);
    cr_expect_not_null(strstr(j, "\"chosen\": 2"));
    cr_expect_not_null(strstr(j, "\"status\": \"run-failed\", \"detail\": \"hung while validating: killed by the 15 s watchdog\""));
    cr_expect_not_null(strstr(j, "\"kernel_timer\": \"CUPTI\""), "the survivor is still profiled");
    free(j), free(record), free(r.out);
    remove_dir(dir);
}

Test(tune, a_candidate_that_crashes_its_process_is_reported_with_its_signal) {
    char *dir = scratch("crash");
    int nk = 0;
    char *first = ranked_name(1), *second = ranked_name_kernels(2, &nk);
    char *env = ts_strfmt("FAKE_NVCC_CRASH='%s'", first);
    char *emitted = ts_strfmt(" (plan 2: %s, measured %s", second, simulated_ms(nk));
    tsopt_result r = tune(dir, env, "");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "run-failed (crashed while validating: signal 6 (Aborted))"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, emitted), "%s", r.out);
    free(first), free(second), free(env), free(emitted);
    free(r.out);
    remove_dir(dir);
}

Test(tune, nothing_valid_writes_no_header) {
    char *dir = scratch("invalid");
    tsopt_result r = tune(dir, "FAKE_NVCC_WRONG=all", "");
    cr_assert_eq(r.code, 1, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "error: no candidate passed validation; nothing was emitted"), "%s", r.out);
    char *header = ts_strfmt("%s/out/rmsnorm.cuh", dir), *record = ts_strfmt("%s/record.json", dir);
    cr_expect_eq(access(header, F_OK), -1, "a header was written");
    char *j = slurp(record);
    cr_assert_not_null(j, "the record is written even so");
    cr_expect_not_null(strstr(j, "\"chosen\": 0"));
    free(j), free(header), free(record), free(r.out);
    remove_dir(dir);
}

Test(tune, without_a_gpu_it_says_so_and_writes_nothing) {
    char *dir = scratch("nogpu");
    char *args = ts_strfmt("tune --cache %s/cache -o %s/out --record %s/r.json bench/graphs/matmul.yaml", dir, dir, dir);
    tsopt_result r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", args);
    cr_expect_eq(r.code, 3, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "tsopt: error: tune needs the CUDA driver (a GPU machine): cannot load "
                                     "/nonexistent/libcuda.so.1"),
                       "%s", r.out);
    cr_expect_not_null(strstr(r.out, "hint: `tsopt tune --build-only` prepares the cache without a GPU"));
    char *out = ts_strfmt("%s/out", dir);
    cr_expect_eq(access(out, F_OK), -1, "nothing written");
    free(out), free(args), free(r.out);
    remove_dir(dir);
}

Test(tune, build_only_needs_no_gpu_and_fills_the_cache) {
    char *dir = scratch("buildonly");
    char *args = ts_strfmt("tune --build-only --dims m=16,d=32,n=24 --nvcc tests/tune/fake_nvcc.sh --cache %s/cache "
                           "bench/graphs/rmsnorm.yaml",
                           dir);
    tsopt_result r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", args);
    cr_expect_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "4 candidates built into"), "%s", r.out); /* --top 4 by default */
    cr_expect_not_null(strstr(r.out, "/librmsnorm.so"), "%s", r.out);
    free(r.out);
    /* with no compiler, the build fails clearly */
    free(args);
    args = ts_strfmt("tune --build-only --nvcc /nonexistent/nvcc --cache %s/cache2 bench/graphs/rmsnorm.yaml", dir);
    r = run_tsopt_env("", args);
    cr_expect_eq(r.code, 1, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "build failed: "), "%s", r.out);
    free(r.out), free(args);
    remove_dir(dir);
}

/* Validation sizes: a dynamic axis is halved while the reference is over budget only when that saves work.
 * Here the GEMM's rows m carry the work (8.6 GFLOP at 4096) and are halved to 1024; the other axis s only
 * feeds a cheap sum and keeps its timed 4096 (a decode step's cache length is validated where it is timed).
 * The output is a scalar, so no rows can be sampled instead. */
Test(tune, validation_shrinks_the_axes_that_carry_the_work, .timeout = 120) {
    char *dir = scratch("valsizes");
    char *graph = ts_strfmt("%s/g.yaml", dir);
    FILE *f = fopen(graph, "w");
    cr_assert_not_null(f);
    fputs("graph: g\naxes:\n  m: {dynamic: true, typical: 4096}\n  s: {dynamic: true, typical: 4096}\n"
          "  d: 1024\n  n: 1024\ninputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
          "  C: {dtype: fp16, shape: [s, n]}\nops:\n  - {name: Y, op: matmul, args: [X, W], over: d}\n"
          "  - {name: T, op: reduce_sum, args: [Y], axis: m}\n  - {name: U, op: reduce_sum, args: [C], axis: s}\n"
          "  - {name: V, op: add, args: [T, U]}\n  - {name: Z, op: reduce_sum, args: [V], axis: n}\noutputs: [Z]\n",
          f);
    fclose(f);
    char *env = ts_strfmt("TSOPT_LIBCUDA=%s TSOPT_LIBCUPTI=%s", mock(), mock());
    char *args = ts_strfmt("tune --top 1 --nvcc tests/tune/fake_nvcc.sh --cache %s/cache -o %s/out %s", dir, dir, graph);
    tsopt_result r = run_tsopt_env(env, args);
    cr_expect_not_null(strstr(r.out, "validated at m=1024, timed"), "%s", r.out);
    free(r.out), free(args), free(env), free(graph);
    remove_dir(dir);
}

/* A reference whose float64 inputs could not fit in this machine's memory (a 32-layer stack's take 56 GB;
 * here two 2^20 x 2^20 operands, 17.6 TB): --build-only builds the candidates and leaves the reference to the
 * GPU machine; tune proper refuses with the sizes instead of allocating. Nothing is allocated either way. */
Test(tune, a_reference_too_large_for_memory_is_left_or_refused_before_allocating, .timeout = 120) {
    char *dir = scratch("hugeref");
    char *args = ts_strfmt("tune --build-only --top 1 --dims m=262144,d=262144,n=262144 --nvcc tests/tune/fake_nvcc.sh "
                           "--cache %s/cache bench/graphs/matmul.yaml",
                           dir);
    tsopt_result r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", args);
    cr_expect_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "the float64 reference is left to the GPU machine: its inputs take 1099.5 GB"),
                       "%s", r.out);
    cr_expect_not_null(strstr(r.out, "not made here"), "%s", r.out);
    free(r.out), free(args);
    char *env = ts_strfmt("TSOPT_LIBCUDA=%s TSOPT_LIBCUPTI=%s", mock(), mock());
    args = ts_strfmt("tune --top 1 --dims m=262144,d=262144,n=262144 --nvcc tests/tune/fake_nvcc.sh --cache %s/cache "
                     "-o %s/out bench/graphs/matmul.yaml",
                     dir, dir);
    r = run_tsopt_env(env, args);
    cr_expect_eq(r.code, 1, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "cannot compute the reference: the float64 validation inputs take 1099.5 GB"),
                       "%s", r.out);
    free(r.out), free(args), free(env);
    remove_dir(dir);
}

/* matmul's third plan computes the contraction as a reduce kernel, predicted 48x the best: not a candidate;
 * the best plan (its twin "fused" has the same header) and two configurations of it are. */
Test(tune, plans_predicted_over_ten_times_the_best_are_not_candidates) {
    char *dir = scratch("hopeless");
    char *args = ts_strfmt("tune --build-only --nvcc tests/tune/fake_nvcc.sh --cache %s/cache bench/graphs/matmul.yaml", dir);
    tsopt_result r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", args);
    cr_expect_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "3 candidates built into"), "%s", r.out);
    cr_expect_null(strstr(r.out, "fused/2"), "%s", r.out);
    free(r.out), free(args);
    remove_dir(dir);
}

/* With --top 2 one more candidate: the best plan computing the graph with other main kernels, when one is predicted
 * within 15% of the best. An additive score mask at head dim 256: the top two are the score GEMM, softmax row kernel
 * and P·V GEMM in two tilings; the one attention kernel, ranked 4th at +8%, is timed too. With --top 1, none. */
Test(tune, the_best_plan_of_other_kernel_kinds_is_a_candidate_too) {
    char *dir = scratch("diverse");
    char *args = ts_strfmt("tune --build-only --top 2 --nvcc tests/tune/fake_nvcc.sh --cache %s/cache "
                           "bench/probes/attention_mask_d256.yaml",
                           dir);
    tsopt_result r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", args);
    cr_expect_eq(r.code, 0, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\n1    fused/14 "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\n2    fused/39 "), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "\n4    fused/3 "), "the attention kernel's plan: %s", r.out);
    free(r.out), free(args);
    args = ts_strfmt("tune --build-only --top 1 --nvcc tests/tune/fake_nvcc.sh --cache %s/cache "
                     "bench/probes/attention_mask_d256.yaml",
                     dir);
    r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", args);
    cr_expect_null(strstr(r.out, "\n4    fused/3 "), "%s", r.out);
    free(r.out), free(args);
    remove_dir(dir);
}

Test(tune, bad_options_are_usage_errors) {
    tsopt_result r = run_tsopt("tune --reps 0 bench/graphs/matmul.yaml");
    cr_expect_eq(r.code, 2, "%s", r.out);
    free(r.out);
    r = run_tsopt("tune --watchdog 0 bench/graphs/matmul.yaml");
    cr_expect_eq(r.code, 2, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "bad number"), "%s", r.out);
    free(r.out);
    r = run_tsopt("tune --arch 'sm_9;rm' bench/graphs/matmul.yaml");
    cr_expect_eq(r.code, 2, "%s", r.out);
    cr_expect_not_null(strstr(r.out, "--arch wants a target such as 90a"), "%s", r.out);
    free(r.out);
    r = run_tsopt("tune --help");
    cr_expect_eq(r.code, 0);
    cr_expect_not_null(strstr(r.out, "usage: tsopt tune"));
    free(r.out);
}
