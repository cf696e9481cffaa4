/* test_calibrate.c — `tsopt calibrate` without a GPU: the least-squares fits on recorded (synthetic but
 * realistic) measurements, refusal of degenerate inputs, the calibrated cost-model file and its loading,
 * NVRTC compiling calibrate/kernels.cu for sm_90 (where libnvrtc.so.13 loads), and the command on a machine
 * without the CUDA driver (exit 3, the missing library named, nothing written). */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate.h"
#include "costmodel.h"
#include "testutil.h"

/* A normal deviate (Box-Muller) from the splitmix stream. */
static double gauss(unsigned long long *st) {
    double u = ts_uniform(st), v = ts_uniform(st);
    return sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

/* Bandwidth samples as the DRAM benchmarks record them: 1 MiB .. 1 GiB, 5 repetitions, times from
 * t = launch + bytes / bw with relative noise. */
static int dram_samples(double launch, double bw, double noise, double *bytes, double *t, unsigned long long seed) {
    int n = 0;
    for (int rep = 0; rep < 5; rep++)
        for (int i = 0; i < 11; i++) {
            bytes[n] = (double)((1ull << 20) << i);
            t[n] = (launch + bytes[n] / bw) * (1 + noise * gauss(&seed));
            n++;
        }
    return n;
}

Test(calibrate, bandwidth_fit_recovers_launch_and_bandwidth) {
    double bytes[64], t[64];
    for (unsigned long long seed = 1; seed <= 5; seed++) {
        int n = dram_samples(3e-6, 4.3e12, 0.01, bytes, t, seed);
        ts_fit f;
        char *err = NULL;
        cr_assert_eq(ts_fit_rate("dram_copy", "t = c0 + bytes * c1", bytes, t, n, &f, &err), 0, "%s", err ? err : "");
        cr_assert_eq(f.n, 55);
        cr_assert_float_eq(ts_fit_rate_of(&f), 4.3e12, 4.3e12 * 0.01, "bandwidth %g", ts_fit_rate_of(&f));
        cr_assert_float_eq(f.coef[0], 3e-6, 3e-6 * 0.05, "launch %g", f.coef[0]);
        cr_assert_gt(f.r2, 0.99);
        cr_assert_gt(f.resid_rms, 0.005, "residual spread %g should reflect the 1%% noise", f.resid_rms);
        cr_assert_lt(f.resid_rms, 0.02);
        cr_assert_lt(f.resid_max, 0.05);
    }
}

Test(calibrate, noiseless_fit_is_exact) {
    double bytes[64], t[64];
    int n = dram_samples(2.5e-6, 3.9e12, 0, bytes, t, 1);
    ts_fit f;
    char *err = NULL;
    cr_assert_eq(ts_fit_rate("dram_read", "", bytes, t, n, &f, &err), 0);
    cr_assert_float_eq(ts_fit_rate_of(&f), 3.9e12, 3.9e12 * 1e-9);
    cr_assert_float_eq(f.coef[0], 2.5e-6, 2.5e-6 * 1e-6);
    cr_assert_float_eq(f.r2, 1.0, 1e-12);
    cr_assert_lt(f.resid_max, 1e-9);
}

Test(calibrate, compute_fit_recovers_the_rate) {
    /* FMA loop: 132*8 blocks of 256 threads, depth 256 .. 16384, fixed 4 us, 6.6e13 FLOP/s, 2% noise */
    double work[32], t[32];
    unsigned long long seed = 7;
    int n = 0;
    for (int rep = 0; rep < 4; rep++)
        for (int i = 0; i < 7; i++, n++) {
            work[n] = 132.0 * 8 * 256 * (256 << i) * 16;
            t[n] = (4e-6 + work[n] / 6.6e13) * (1 + 0.02 * gauss(&seed));
        }
    ts_fit f;
    char *err = NULL;
    cr_assert_eq(ts_fit_rate("fma", "", work, t, n, &f, &err), 0, "%s", err ? err : "");
    cr_assert_float_eq(ts_fit_rate_of(&f), 6.6e13, 6.6e13 * 0.02);
    cr_assert_gt(f.r2, 0.99);
}

Test(calibrate, launch_line_is_ordinary_least_squares) {
    /* start timestamps of back-to-back empty kernels: 4.2 us apart with jitter; the first at 0 */
    double X[2 * 400], start[400];
    unsigned long long seed = 3;
    for (int i = 0; i < 400; i++) {
        X[2 * i] = 1, X[2 * i + 1] = i;
        start[i] = i * 4.2e-6 + (i ? 0.3e-6 * gauss(&seed) : 0);
    }
    ts_fit f;
    char *err = NULL;
    cr_assert_eq(ts_fit_linear("launch", "", X, start, 400, 2, false, &f, &err), 0, "%s", err ? err : "");
    cr_assert_float_eq(f.coef[1], 4.2e-6, 4.2e-6 * 0.01);
    cr_assert_gt(f.r2, 0.99);
}

#define EXPECT_REFUSED(call, needle)                                                                   \
    do {                                                                                               \
        ts_fit f_;                                                                                     \
        char *err_ = NULL;                                                                             \
        int rc_ = (call);                                                                              \
        cr_assert_eq(rc_, -1, "accepted: " #call);                                                     \
        cr_assert_not_null(err_);                                                                      \
        cr_assert_not_null(strstr(err_, needle), "message: %s", err_);                                 \
        free(err_);                                                                                    \
    } while (0)

Test(calibrate, degenerate_inputs_are_errors_not_crashes) {
    double one_b[] = {1e6}, one_t[] = {3e-6};
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", one_b, one_t, 1, &f_, &err_), "1 sample for 2 parameters");
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", one_b, one_t, 0, &f_, &err_), "0 samples");
    double same_b[] = {1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20}, t[] = {3.2e-6, 3.3e-6, 3.25e-6, 3.1e-6, 3.2e-6};
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", same_b, t, 5, &f_, &err_), "the sizes must vary");
    double zero_b[] = {0, 0, 0, 0, 0};
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", zero_b, t, 5, &f_, &err_), "all zero");
    double b[] = {1e6, 2e6, 4e6, 8e6, 16e6}, tnan[] = {3e-6, NAN, 4e-6, 5e-6, 7e-6}, tneg[] = {3e-6, 0, 4e-6, 5e-6, 7e-6};
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", b, tnan, 5, &f_, &err_), "must be finite");
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", b, tneg, 5, &f_, &err_), "positive");
    double shrinking[] = {9e-6, 8e-6, 7e-6, 6e-6, 5e-6};
    EXPECT_REFUSED(ts_fit_rate("dram_read", "", b, shrinking, 5, &f_, &err_), "rate is not positive");
    double X[10] = {0};
    EXPECT_REFUSED(ts_fit_linear("x", "", X, t, 5, 7, false, &f_, &err_), "parameters");
}

/* ---- the file -------------------------------------------------------------------------------------- */

static void sample_result(ts_calib_result *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->gpu, sizeof r->gpu, "NVIDIA H200");
    snprintf(r->driver, sizeof r->driver, "580.159.04, CUDA 13.0");
    snprintf(r->timer, sizeof r->timer, "CUPTI kernel activity records");
    snprintf(r->arch, sizeof r->arch, "sm_90");
    snprintf(r->efficiencies_from, sizeof r->efficiencies_from, "costmodel/h200.yaml");
    r->launch_s = 4.1e-6, r->dram_bytes_per_s = 3.96e12, r->tensor_flops_per_s = 5.2e14, r->fma_flops_per_s = 6.5e13;
    r->sfu_ops_per_s = 4.1e12, r->sms = 132, r->l2_bytes = 52428800;
    r->gemm_efficiency = 0.75, r->attention_efficiency = 0.5, r->reduce_efficiency = 0.6, r->map_efficiency = 0.8;
    r->row_efficiency = 0.85, r->strided_efficiency = 0.5, r->gemm_wave_overhead_s = 4.6e-6;
    r->empty_kernel_s = 6e-7, r->launch_gap_mean_s = 4.4e-6, r->occupancy_blocks_per_sm = 1, r->wave_s = 3.3e-5;
    r->fractional_r2 = 0.93;
    double bytes[64], t[64];
    int n = dram_samples(3e-6, 4.3e12, 0.01, bytes, t, 11);
    char *err = NULL;
    cr_assert_eq(ts_fit_rate("dram_copy", "t = c0 + bytes * c1", bytes, t, n, &r->fit[r->nfits++], &err), 0);
    cr_assert_eq(ts_fit_rate("fma", "t = c0 + flops * c1", bytes, t, n, &r->fit[r->nfits++], &err), 0);
}

static char *write_to_temp(const ts_calib_result *r, char *path) {
    strcpy(path, "/tmp/tsopt-calib-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    time_t when;
    cr_assert_eq(ts_calib_parse_date("2026-11-29", &when), 0);
    cr_assert_eq(ts_calib_write_yaml(f, r, when), 0);
    fclose(f);
    size_t len;
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    char *text = ts_read_text_file(path, &len, &d);
    ts_diags_free(&d);
    return text;
}

Test(calibrate, written_file_loads_as_a_calibrated_cost_model) {
    ts_calib_result r;
    sample_result(&r);
    char path[64];
    char *text = write_to_temp(&r, path);
    cr_assert_not_null(text);
    cr_assert_not_null(strstr(text, "calibrated: true\n"));
    cr_assert_not_null(strstr(text, "date: 2026-11-29\n"));
    cr_assert_not_null(strstr(text, "row_efficiency) are NOT measured by the\n# microbenchmarks: kept at their values"),
                       "%s", text);
    cr_assert_not_null(strstr(text, "\nfit:\n  dram_copy: {model: \"t = c0 + bytes * c1\", coef: ["), "%s", text);
    cr_assert_not_null(strstr(text, "samples: 55}"));
    ts_costmodel m;
    ts_diags d;
    int rc = ts_costmodel_load(&m, path, &d);
    char *msg = d.n ? ts_diag_headline(&d, 0) : ts_strdup("");
    cr_assert_eq(rc, 0, "%s\n%s", msg, text);
    free(msg);
    cr_assert(m.calibrated);
    cr_assert_str_eq(m.gpu, "NVIDIA H200");
    cr_assert_str_eq(m.driver, "580.159.04, CUDA 13.0");
    cr_assert_str_eq(m.date, "2026-11-29");
    cr_assert_eq(m.nfits, 2);
    cr_assert_float_eq(m.launch_s, 4.1e-6, 1e-12);
    cr_assert_float_eq(m.dram_bytes_per_s, 3.96e12, 1e6);
    cr_assert_float_eq(m.tensor_flops_per_s, 5.2e14, 1e9);
    cr_assert_float_eq(m.sms, 132, 0);
    cr_assert_float_eq(m.l2_bytes, 52428800, 1);
    cr_assert_float_eq(m.gemm_efficiency, 0.75, 0);
    cr_assert_float_eq(m.map_efficiency, 0.8, 0);
    cr_assert_float_eq(m.row_efficiency, 0.85, 0);
    /* every unmeasured coefficient present is written as kept (strided_efficiency was once dropped) */
    cr_assert_not_null(strstr(text, "\n  strided_efficiency: 0.5  # not measured: kept\n"), "%s", text);
    cr_assert_not_null(strstr(text, "\n  gemm_wave_overhead_s: 4.6e-06  # not measured: kept\n"), "%s", text);
    cr_assert_null(strstr(text, "skinny_tensor_efficiency"), "an absent one (0) is not written:\n%s", text);
    cr_assert_not_null(strstr(text, "\n  l2_bytes: 52428800\n"), "%s", text);
    cr_assert_float_eq(m.strided_efficiency, 0.5, 0);
    cr_assert_float_eq(m.gemm_wave_overhead_s, 4.6e-6, 1e-15);
    cr_assert(ts_calib_measures("dram_bytes_per_s") && !ts_calib_measures("gemm_efficiency"));
    ts_diags_free(&d);
    ts_costmodel_free(&m);
    unlink(path);
    free(text);
}

Test(calibrate, shipped_calibrated_model_loads_and_a_bad_fit_section_is_an_error) {
    ts_costmodel m;
    ts_diags d;
    cr_assert_eq(ts_costmodel_load(&m, "costmodel/h200.yaml", &d), 0);
    cr_assert(m.calibrated, "the shipped model is the H200 calibration");
    cr_assert_eq(m.nfits, 14, "with its eight microbenchmark fits and six efficiency fits (calibrate --from-tune)");
    cr_assert(m.gemm_efficiency != 0.75 && m.attention_efficiency != 0.5 && m.skinny_gemm_efficiency != 0.85,
              "the efficiencies are fitted, not the defaults");
    cr_assert_str_eq(m.driver, "580.159.04, CUDA 13.0");
    ts_diags_free(&d);
    ts_costmodel_free(&m);

    char path[] = "/tmp/tsopt-cm-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("gpu: X\ncoefficients:\n  launch_s: 3.0e-6\n  dram_bytes_per_s: 4.3e12\n  tensor_flops_per_s: 9.9e14\n"
          "  fma_flops_per_s: 6.7e13\n  sfu_ops_per_s: 1.7e13\n  sms: 132\n  l2_bytes: 6.0e7\n  gemm_efficiency: 0.75\n"
          "  attention_efficiency: 0.5\n  reduce_efficiency: 0.6\n  map_efficiency: 0.8\nfit: 3\n",
          f);
    fclose(f);
    cr_assert_eq(ts_costmodel_load(&m, path, &d), -1);
    char *msg = ts_diag_headline(&d, 0);
    cr_assert_not_null(strstr(msg, ":14:6: error: 'fit' must be a mapping from fit names to their results"), "%s", msg);
    free(msg);
    ts_diags_free(&d);
    ts_costmodel_free(&m);
    /* the existing messages are unchanged */
    f = fopen(path, "w");
    fputs("gpu: X\ncoefficients:\n  launch_s: -1\n", f);
    fclose(f);
    cr_assert_eq(ts_costmodel_load(&m, path, &d), -1);
    msg = ts_diag_headline(&d, 0);
    cr_assert_not_null(strstr(msg, "error: launch_s must be a positive number"), "%s", msg);
    free(msg);
    ts_diags_free(&d);
    ts_costmodel_free(&m);
    unlink(path);
}

Test(calibrate, dates) {
    time_t t;
    cr_assert_eq(ts_calib_parse_date("2026-11-29", &t), 0);
    cr_assert_eq((long long)t, 1795910400LL);
    cr_assert_eq(ts_calib_parse_date("2026-11-29x", &t), -1);
    cr_assert_eq(ts_calib_parse_date("2026-13-01", &t), -1);
    cr_assert_eq(ts_calib_parse_date("26-1-1", &t), -1);
}

/* ---- the kernels and the command ----------------------------------------------------------------- */

Test(calibrate, kernels_compile_with_nvrtc_for_sm_90) {
    char *err = NULL;
    int rc = ts_calib_compile_check("calibrate/kernels.cu", "90", &err);
    if (rc == 1) {
        free(err);
        cr_skip_test("NVRTC not available here");
    }
    cr_assert_eq(rc, 0, "%s", err ? err : "");
    free(err);
}

Test(calibrate, without_the_driver_it_names_the_library_and_exits_3) {
    unlink("build/calibrate-test.yaml");
    tsopt_result r = run_tsopt_env("TSOPT_LIBCUDA=/nonexistent/libcuda.so.1", "calibrate -o build/calibrate-test.yaml");
    cr_assert_eq(r.code, 3, "exit %d:\n%s", r.code, r.out);
    cr_assert_not_null(strstr(r.out, "tsopt: error: calibrate needs the CUDA driver (a GPU machine): cannot load "
                                     "/nonexistent/libcuda.so.1"),
                       "%s", r.out);
    cr_assert_eq(access("build/calibrate-test.yaml", F_OK), -1, "a file was written");
    free(r.out);

    tsopt_result h = run_tsopt_env("", "calibrate --help");
    cr_assert_eq(h.code, 0);
    cr_assert_not_null(strstr(h.out, "usage: tsopt calibrate [-o FILE]"));
    free(h.out);
    tsopt_result u = run_tsopt_env("", "calibrate --bogus");
    cr_assert_eq(u.code, 2);
    free(u.out);
    tsopt_result m = run_tsopt_env("", "--help");
    cr_assert_not_null(strstr(m.out, "  calibrate [-o FILE]     fit the cost model's coefficients"));
    free(m.out);

    /* this machine as it is: where there is no driver at all (CI, development machines) */
    void *h1 = dlopen("libcuda.so.1", RTLD_LAZY);
    if (h1) {
        dlclose(h1);
        return;
    }
    tsopt_result plain = run_tsopt_env("", "calibrate");
    cr_assert_eq(plain.code, 3, "exit %d:\n%s", plain.code, plain.out);
    cr_assert_not_null(strstr(plain.out, "cannot load libcuda.so.1 (libcuda.so.1: cannot open shared object file"),
                       "%s", plain.out);
    free(plain.out);
}
