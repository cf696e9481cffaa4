/* fuzz_graph.c — libFuzzer target: graph YAML bytes → ts_spec_load_text → ts_check → ts_interp_run.
 *
 * Properties (abort() on violation):
 *  - a rejected input (load or check) has at least one error, each headline "fuzz.yaml:L:C: error: ..."
 *    (L, C >= 1) or, for file-level errors, "fuzz.yaml: error: ..."; ts_check's return agrees with the
 *    error count; printing the diagnostics does not fault;
 *  - an accepted graph is checked again with every axis bound to a size <= 3 (dynamic ones too); if that
 *    also passes, the float64 interpreter evaluates it under a 1 MiB budget without a sanitizer report,
 *    either refusing with a message or returning every output, and a second evaluation of the same
 *    inputs gives bit-identical outputs (no reads of uninitialised memory, no hidden state). */
#include <math.h>

#include "fuzz_common.h"
#include "interp.h"

#define MAX_INPUT 8192

static void eval_tiny(const ts_graph *g) {
    double in_bytes = 0;
    for (int i = 0; i < g->ninputs; i++) in_bytes += 8.0 * (double)ts_input_numel(g, i);
    if (in_bytes > (double)(1 << 20)) return; /* more than 64 axes: some stayed large */
    ts_interp_opts opts = {.max_bytes = 1 << 20};
    double **in = ts_random_inputs(g, 7);
    double **out1 = NULL, **out2 = NULL;
    char *err = NULL;
    int rc = ts_interp_run(g, in, &out1, &opts, &err);
    if (rc != 0) {
        if (!err || !*err) fuzz_fail("interpreter refused without a message");
        if (!strstr(err, "budget")) fuzz_fail("interpreter refusal does not name the budget: %s", err);
        free(err);
        ts_free_buffers(in, g->ninputs);
        return;
    }
    if (ts_interp_run(g, in, &out2, &opts, &err) != 0) fuzz_fail("second evaluation refused: %s", err);
    for (int i = 0; i < g->noutputs; i++) {
        int64_t n = ts_output_numel(g, i);
        if (n < 0) fuzz_fail("output %d has %lld elements", i, (long long)n);
        for (int64_t k = 0; k < n; k++) {
            double x = out1[i][k];
            if (!(isfinite(x) || isnan(x) || isinf(x))) fuzz_fail("output %d[%lld] is not a number", i, (long long)k);
        }
        if (n && memcmp(out1[i], out2[i], sizeof(double) * (size_t)n) != 0)
            fuzz_fail("output '%s' differs between two evaluations of the same inputs", g->outputs[i].name);
    }
    ts_free_buffers(out1, g->noutputs);
    ts_free_buffers(out2, g->noutputs);
    ts_free_buffers(in, g->ninputs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return -1;
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    int rc = ts_spec_load_text(&spec, FUZZ_PATH, (const char *)data, size, &d);
    if (rc != 0) {
        check_rejection(&d, FUZZ_PATH, "load");
        ts_diags_free(&d);
        ts_spec_free(&spec);
        return 0;
    }
    rc = ts_check(&spec, NULL, &g, &d);
    if ((rc != 0) != (d.nerrors > 0)) fuzz_fail("ts_check returned %d with %d errors", rc, d.nerrors);
    if (rc != 0) check_rejection(&d, FUZZ_PATH, "check");
    ts_diags_free(&d);
    if (rc == 0) {
        ts_binding b;
        tiny_binding(&g, &b);
        ts_graph small;
        ts_diags d2;
        ts_diags_init(&d2, FUZZ_PATH, spec.text, spec.len);
        int rc2 = ts_check(&spec, &b, &small, &d2);
        if ((rc2 != 0) != (d2.nerrors > 0)) fuzz_fail("ts_check (bound) returned %d with %d errors", rc2, d2.nerrors);
        if (rc2 != 0) check_rejection(&d2, FUZZ_PATH, "check at tiny sizes");
        else eval_tiny(&small);
        ts_graph_free(&small);
        ts_diags_free(&d2);
        ts_binding_free(&b);
    }
    ts_graph_free(&g);
    ts_spec_free(&spec);
    return 0;
}
