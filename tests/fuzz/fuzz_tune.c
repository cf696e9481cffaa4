/* fuzz_tune.c — libFuzzer target: tune-record bytes (JSON) → ts_tune_load_text → the efficiency fit, the
 * accuracy report and the rewritten cost model (tunefit.h, `tsopt calibrate --from-tune`).
 *
 * Properties (abort() on violation):
 *  - a rejected record has at least one error, each headline "fuzz.json:L:C: error: ..." (L, C >= 1) or
 *    "fuzz.json: error: ..."; nothing is added to the set; printing the diagnostics does not fault;
 *  - an accepted record has no error; every fitted efficiency is finite and in [0.02, 2], with finite
 *    residuals; the accuracy metrics are in range (APE >= 0, Spearman in [-1, 1] or NaN, hits <= groups);
 *  - when something was fitted, the cost model rewritten from a fixed base is produced and parses as
 *    YAML. */
#include <math.h>

#include "fuzz_common.h"
#include "tunefit.h"

#define MAX_INPUT 8192
#define PATH "fuzz.json"

static const char base_text[] =
    "# A cost model.\n"
    "# gemm_efficiency, attention_efficiency, reduce_efficiency and map_efficiency are NOT measured.\n"
    "gpu: X\ncoefficients:\n  launch_s: 4.288e-06\n  dram_bytes_per_s: 3.9076e+12\n  tensor_flops_per_s: 6.3557e+14\n"
    "  fma_flops_per_s: 6.3636e+13\n  sfu_ops_per_s: 4.1806e+12\n  sms: 132\n  l2_bytes: 62914560\n"
    "  gemm_efficiency: 0.75\n  attention_efficiency: 0.5\n  reduce_efficiency: 0.6\n  map_efficiency: 0.8\n"
    "fit:\n  launch: {model: \"t\", coef: [1], r2: 1, resid_rms: 0, resid_max: 0, samples: 3}\n";

static void check_fit(const ts_tune_fit *f) {
    for (int k = 0; k < TS_FIT_SLOTS; k++) {
        const ts_eff_fit *e = &f->kind[k];
        if (!e->fitted) {
            if (!e->why_not || e->after != e->before) fuzz_fail("kind %d not fitted but changed or unexplained", k);
            continue;
        }
        if (!(e->after >= TS_TUNE_EFF_MIN * 0.999 && e->after <= TS_TUNE_EFF_MAX * 1.001))
            fuzz_fail("kind %d fitted outside the range: %g", k, e->after);
        if (e->samples < TS_TUNE_MIN_SAMPLES || !isfinite(e->fit.resid_rms) || !isfinite(e->fit.resid_max))
            fuzz_fail("kind %d: %d samples, resid %g %g", k, e->samples, e->fit.resid_rms, e->fit.resid_max);
    }
}

static void check_accuracy(const ts_tune_set *s, const double *eff) {
    ts_acc_point *p;
    ts_accuracy a;
    int n = ts_tune_points(s, eff, &p);
    ts_accuracy_compute(p, n, &a);
    free(p);
    if (a.points != n || a.top1_hits > a.groups || (n && !(a.median_ape >= 0)))
        fuzz_fail("accuracy: %d points, %d hits of %d groups, median APE %g", n, a.top1_hits, a.groups, a.median_ape);
    if (!isnan(a.spearman) && !(a.spearman >= -1 - 1e-9 && a.spearman <= 1 + 1e-9))
        fuzz_fail("Spearman %g out of [-1, 1]", a.spearman);
}

static void check_model(const ts_tune_fit *f) {
    const char *records[] = {PATH};
    char *err = NULL, *text = ts_tune_model_text(base_text, "base.yaml", f, records, 1, 0, &err);
    if (!text) fuzz_fail("the fixed base could not be rewritten: %s", err ? err : "?");
    ts_spec spec;
    ts_diags d;
    if (ts_spec_load_text(&spec, "model.yaml", text, strlen(text), &d) != 0) fuzz_fail("rewritten model:\n%s", text);
    ts_diags_free(&d);
    ts_spec_free(&spec);
    free(text);
}

static void accepted(const ts_tune_set *s) {
    ts_costmodel base = {.launch_s = 4.288e-06, .dram_bytes_per_s = 3.9076e+12, .tensor_flops_per_s = 6.3557e+14,
                         .fma_flops_per_s = 6.3636e+13, .sfu_ops_per_s = 4.1806e+12, .sms = 132,
                         .l2_bytes = 62914560, .gemm_efficiency = 0.75, .attention_efficiency = 0.5,
                         .reduce_efficiency = 0.6, .map_efficiency = 0.8, .skinny_gemm_efficiency = 0.85,
                         .skinny_tensor_efficiency = 0.3};
    ts_tune_fit f;
    ts_tune_fit_run(s, &base, &f);
    check_fit(&f);
    double eff[TS_FIT_SLOTS];
    for (int k = 0; k < TS_FIT_SLOTS; k++) eff[k] = f.kind[k].after;
    check_accuracy(s, NULL);
    check_accuracy(s, eff);
    if (f.nfitted) check_model(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return -1;
    ts_tune_set s = {0};
    ts_diags d;
    int rc = ts_tune_load_text(&s, PATH, (const char *)data, size, &d);
    if (rc != 0) {
        check_rejection(&d, PATH, "load");
        if (s.n) fuzz_fail("a rejected record was added");
    } else {
        if (d.nerrors || s.n != 1) fuzz_fail("accepted with %d errors, %d records", d.nerrors, s.n);
        accepted(&s);
    }
    ts_diags_free(&d);
    ts_tune_set_free(&s);
    return 0;
}
