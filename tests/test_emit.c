/* test_emit.c — the emitter: a golden header (with stub templates, so that the golden file pins the
 * emitter's own output: banner, functors, workspace, launch, C ABI), byte-identical regeneration, and
 * the header contract's required pieces. Regenerate the golden file with TSOPT_REGEN_GOLDEN=1. */
#include <stdio.h>

#include "compile.h"
#include "egir.h"
#include "emit.h"
#include "saturate.h"
#include "testutil.h"

#define GOLDEN_YAML "tests/golden/norm_softmax.yaml"
#define GOLDEN_CUH "tests/golden/norm_softmax.cuh"

/* The header of the best plan of `path`, emitted with the templates in `templates`. */
static char *emit_best(const char *path, const char *templates) {
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    cr_assert_eq(ts_spec_load(&spec, path, &d), 0);
    cr_assert_eq(ts_check(&spec, NULL, &g, &d), 0);
    ts_diags_free(&d);
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    const char *dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&rs, &dir, 1, stderr), 0);
    ts_costmodel cm;
    cr_assert_eq(ts_costmodel_load(&cm, "costmodel/h200.yaml", &d), 0);
    ts_diags_free(&d);
    ts_compiled c;
    char *err = NULL;
    cr_assert_eq(ts_compile(&spec, NULL, &g, &rs, &cm, &c, &err), 0, "%s", err);
    ts_emit_opts eo = {.source_path = path, .source_text = spec.text, .source_len = spec.len,
                       .templates_dir = templates, .cost_model = &cm, .baseline_s = c.baseline_s};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ts_emit_header(f, &g, &c.plans[0], &eo, &err), 0, "%s", err);
    fclose(f);
    ts_compiled_free(&c);
    ts_costmodel_free(&cm);
    ts_rule_free(&rs);
    ts_graph_free(&g);
    ts_spec_free(&spec);
    return buf;
}

Test(emit, header_matches_the_golden_file) {
    char *got = emit_best(GOLDEN_YAML, "tests/golden/templates");
    assert_matches_golden(got, GOLDEN_CUH);
    free(got);
}

Test(emit, regenerating_gives_the_same_bytes) {
    char *a = emit_best("bench/graphs/decoder_layer.yaml", "templates");
    char *b = emit_best("bench/graphs/decoder_layer.yaml", "templates");
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
}

Test(emit, header_has_the_contract_pieces) {
    char *h = emit_best("bench/graphs/swiglu.yaml", "templates");
    cr_assert_not_null(strstr(h, "do not edit"));
    cr_assert_not_null(strstr(h, "static inline size_t swiglu_workspace_bytes(void)"));
    cr_assert_not_null(strstr(h, "static inline cudaError_t swiglu_launch(const __half *X, const __half *W_up, "
                                 "const __half *W_gate, __half *Y, void *workspace, cudaStream_t stream)"));
    cr_assert_not_null(strstr(h, "extern \"C\" int swiglu_run(void *const *buffers, const int64_t *dims, "
                                 "void *workspace, cudaStream_t stream);"));
    cr_assert_not_null(strstr(h, "#ifdef TSOPT_SWIGLU_IMPLEMENTATION"));
    cr_assert_null(strstr(h, "printf("), "headers never print");
    cr_assert_null(strstr(h, "exit("), "headers never exit");
    /* only CUDA toolkit headers (the runtime's, and cuda.h for TMA descriptor types: no libcuda link), and
     * the C++ standard library's <atomic> (the per-device caches) */
    for (const char *p = strstr(h, "#include"); p; p = strstr(p + 1, "#include")) {
        bool ok = !strncmp(p, "#include <atomic>", 17) || !strncmp(p, "#include <cuda_runtime.h>", 25) || !strncmp(p, "#include <cuda_fp16.h>", 22) ||
                  !strncmp(p, "#include <cuda_bf16.h>", 22) || !strncmp(p, "#include <stdint.h>", 19) ||
                  !strncmp(p, "#include <math.h>", 17) || !strncmp(p, "#include <cuda.h>", 17) ||
                  !strncmp(p, "#include <cudaTypedefs.h>", 25);
        cr_assert(ok, "unexpected include: %.40s", p);
    }
    free(h);
}

Test(emit, dynamic_sizes_are_launch_arguments) {
    char *h = emit_best(GOLDEN_YAML, "templates");
    cr_assert_not_null(strstr(h, "norm_softmax_launch(const __half *X, const __half *g, __half *S, int64_t t, "
                                 "void *workspace, cudaStream_t stream)"));
    cr_assert_not_null(strstr(h, "if (t < 0 || t > ((int64_t)1 << 40)) return cudaErrorInvalidValue;"));
    free(h);
}

/* The launch helper checks its arguments before launching: the text tests/abi/test_abi.c runs on a stub
 * runtime (make abi-check) and the banner documents. */
Test(emit, launch_helpers_refuse_misuse_before_launching) {
    char *h = emit_best("bench/graphs/decoder_layer.yaml", "templates");
    const char *launch = strstr(h, "static inline cudaError_t decoder_layer_launch(");
    cr_assert_not_null(launch);
    const char *first_launch = strstr(launch, "tst::device_facts(&facts)");
    cr_assert_not_null(first_launch, "device facts come from the per-device cache");
    const char *checks[] = {
        "if (t < 0 || t > ((int64_t)1 << 40)) return cudaErrorInvalidValue;",
        "if (((t) == 0)) return cudaSuccess; /* every output is empty: nothing to compute, nothing launched */",
        "if (!x || !g_attn || !W_qkv || !W_o || !g_mlp || !W_gate || !W_up || !W_down || !out) return "
        "cudaErrorInvalidValue;",
        "reinterpret_cast<uintptr_t>(W_o) % sizeof(*W_o) ||",
        "reinterpret_cast<uintptr_t>(workspace) % 16)\n        return cudaErrorMisalignedAddress;",
        "if ((int64_t)t > INT32_MAX) return cudaErrorInvalidValue; /* t: a 32-bit kernel parameter */",
    };
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        const char *at = strstr(launch, checks[i]);
        cr_expect(at && at < first_launch, "missing before the first launch: %s", checks[i]);
    }
    cr_expect_null(strstr(h, "cudaGetDevice(&dev)"), "no per-launch device query in the helper");
    cr_expect_not_null(strstr(h, "// Arguments: cudaErrorInvalidValue for a null buffer"), "the banner documents them");
    free(h);
}
