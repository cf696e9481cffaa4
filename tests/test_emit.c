/* test_emit.c — the emitter: a golden header (with stub templates, so that the golden file pins the
 * emitter's own output: banner, functors, workspace, launch, C ABI), byte-identical regeneration, and
 * the header contract's required pieces. Regenerate the golden file with TSOPT_REGEN_GOLDEN=1. */
#include <stdio.h>

#include "compile.h"
#include "config.h"
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
    cr_assert_not_null(strstr(h, "\ncudaError_t swiglu_launch(const __half *X, const __half *W_up, "
                                 "const __half *W_gate, __half *Y, void *workspace, cudaStream_t stream) {"));
    cr_assert_not_null(strstr(h, "\nint swiglu_run(void *const *buffers, const int64_t *dims, "
                                 "void *workspace, struct CUstream_st *stream);"));
    cr_assert_not_null(strstr(h, "\nconst char *swiglu_fallback(void);"));
    cr_assert_not_null(strstr(h, "\nint swiglu_graph_run(void *const *buffers, const int64_t *dims, "
                                 "void *workspace, struct CUstream_st *stream);"));
    cr_assert_not_null(strstr(h, "\nint swiglu_graph_reset(void);"));
    cr_assert_not_null(strstr(h, "-arch=sm_90a") , "the banner states the Hopper build flag");
    cr_assert_not_null(strstr(h, "no -rdc"));
    cr_assert_null(strstr(h, "printf("), "headers never print");
    cr_assert_null(strstr(h, "exit("), "headers never exit");
    /* only CUDA toolkit headers (the runtime's, and cuda.h for TMA descriptor types: no libcuda link), and
     * the C++ standard library's <atomic> (the per-device caches), <cstdlib> (getenv: TSOPT_NO_PDL) and <mutex>
     * (the CUDA-graph cache's lock) */
    for (const char *p = strstr(h, "#include"); p; p = strstr(p + 1, "#include")) {
        bool ok = !strncmp(p, "#include <atomic>", 17) || !strncmp(p, "#include <cstdlib>", 18) ||
                  !strncmp(p, "#include <mutex>", 16) || !strncmp(p, "#include <cuda_runtime.h>", 25) || !strncmp(p, "#include <cuda_fp16.h>", 22) ||
                  !strncmp(p, "#include <cuda_bf16.h>", 22) || !strncmp(p, "#include <stdint.h>", 19) ||
                  !strncmp(p, "#include <math.h>", 17) || !strncmp(p, "#include <cuda.h>", 17) ||
                  !strncmp(p, "#include <stddef.h>", 19) ||
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
    const char *impl = strstr(h, "#if defined(TSOPT_DECODER_LAYER_IMPLEMENTATION)");
    cr_assert_not_null(impl);
    const char *launch = strstr(impl, "cudaError_t decoder_layer_launch("); /* the definition, not the declaration */
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

/* The part of the header before the implementation section. */
static char *declarations_of(const char *h) {
    const char *impl = strstr(h, "#if defined(TSOPT_");
    cr_assert_not_null(impl);
    return ts_strfmt("%.*s", (int)(impl - h), h);
}

Test(emit, kernels_only_in_the_implementation_section) {
    char *h = emit_best("bench/graphs/attention.yaml", "templates");
    char *decl = declarations_of(h);
    cr_assert_null(strstr(decl, "__global__"), "no kernel outside TSOPT_ATTENTION_IMPLEMENTATION");
    cr_assert_null(strstr(decl, "namespace"), "the declarations are plain C");
    cr_assert_not_null(strstr(h, "#if defined(TSOPT_ATTENTION_IMPLEMENTATION) && !defined(TSOPT_ATTENTION_IMPLEMENTED)"));
    free(decl);
    free(h);
}

Test(emit, no_self_test_code_and_every_macro_prefixed_and_undefined) {
    char *h = emit_best("bench/graphs/attention.yaml", "templates");
    cr_assert_null(strstr(h, "SELFTEST"));
    int defines = 0;
    for (const char *p = strstr(h, "#define "); p; p = strstr(p + 1, "#define ")) {
        char name[80];
        cr_assert_eq(sscanf(p + 8, "%79[A-Za-z0-9_]", name), 1);
        cr_assert(!strncmp(name, "TSOPT_", 6), "macro %s is not TSOPT_-prefixed", name);
        if (!strcmp(name, "TSOPT_ATTENTION_H") || !strcmp(name, "TSOPT_ATTENTION_IMPLEMENTED")) continue; /* guards */
        char *undef = ts_strfmt("#undef %s\n", name);
        cr_assert_not_null(strstr(p, undef), "%s is never #undef'd", name);
        free(undef);
        defines++;
    }
    cr_assert_gt(defines, 10, "the Hopper templates' macros are there to check");
    free(h);
}

Test(emit, reserved_names_are_mangled_one_to_one) {
    const char *cases[][2] = {{"class", "class_"}, {"class_", "class__"}, {"p", "p_"}, {"stream", "stream_"},
                              {"workspace__", "workspace___"}, {"K0", "K0_"}, {"K1Inner", "K1Inner_"},
                              {"tmp3", "tmp3_"}, {"cudaFree", "cudaFree_"}, {"NAN", "NAN_"}, {"X", "X"},
                              {"K", "K"}, {"Kx", "Kx"}, {"tmp", "tmp"}, {"pp", "pp"}, {"_x", "_x"},
                              {"__x", "__x_"}, {"_X", "_X_"}, {"W_up", "W_up"}, {"x_", "x_"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = ts_emit_ident(cases[i][0]);
        cr_assert_str_eq(got, cases[i][1], "%s", cases[i][0]);
        free(got);
    }
}

Test(emit, symbol_prefix_must_be_an_identifier) {
    cr_assert(ts_emit_name_ok("swiglu_m32"));
    cr_assert(ts_emit_name_ok("class"), "symbols are suffixed, so a keyword prefix is fine");
    cr_assert(!ts_emit_name_ok("two words"));
    cr_assert(!ts_emit_name_ok("9lives"));
    cr_assert(!ts_emit_name_ok("__x"));
    cr_assert(!ts_emit_name_ok(""));
}

/* ---- names that must compile (runs build/tsopt, nvcc and gcc) --------------------------------------- */

/* A graph whose axis, input and output names are every reserved word (and a few of the reserved
 * patterns): 4 outputs, each the sum of a quarter of the inputs over [dev, sms]. */
/* a followed by b; both freed. */
static char *append(char *a, char *b) {
    char *c = ts_strfmt("%s%s", a, b);
    free(a), free(b);
    return c;
}

static char *reserved_names_graph(void) {
    const char *extra[] = {"K0", "K1Inner", "K2Finish", "tmp0", "cudaMalloc", "tsopt_x", "_X", "class_", "p_"};
    const char *w[256];
    int n = 0;
    for (const char *const *r = ts_emit_reserved; *r; r++)
        if (strcmp(*r, "dev") && strcmp(*r, "sms")) w[n++] = *r; /* those two name the axes */
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) w[n++] = extra[i];
    char *y = ts_strfmt("graph: names\naxes:\n  dev: {dynamic: true, typical: 64}\n  sms: 4\ninputs:\n");
    int nin = n - 4;
    for (int i = 0; i < nin; i++) y = append(y, ts_strfmt("  %s: {dtype: fp32, shape: [dev, sms]}\n", w[i]));
    y = append(y, ts_strdup("ops:\n"));
    int per = nin / 4;
    for (int o = 0; o < 4; o++) {
        int lo = o * per, hi = o == 3 ? nin : lo + per;
        for (int i = lo + 1; i < hi; i++) {
            const char *prev = i == lo + 1 ? w[lo] : NULL;
            char *acc = prev ? ts_strdup(prev) : ts_strfmt("s%d_%d", o, i - 1);
            char *dst = i + 1 == hi ? ts_strdup(w[nin + o]) : ts_strfmt("s%d_%d", o, i);
            y = append(y, ts_strfmt("  - {name: %s, op: add, args: [%s, %s]}\n", dst, acc, w[i]));
            free(acc);
            free(dst);
        }
    }
    return append(y, ts_strfmt("outputs: [%s, %s, %s, %s]\n", w[nin], w[nin + 1], w[nin + 2], w[nin + 3]));
}

static int shell(const char *cmd) {
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(emit, every_reserved_name_compiles_with_nvcc_gcc_and_gxx, .timeout = 600) {
    char *yaml = reserved_names_graph();
    const char *dir = "build/names-test";
    cr_assert_eq(shell("rm -rf build/names-test && mkdir -p build/names-test"), 0);
    FILE *f = fopen("build/names-test/names.yaml", "w");
    fputs(yaml, f);
    fclose(f);
    char *args = ts_strfmt("compile -o %s %s/names.yaml", dir, dir);
    tsopt_result r = run_tsopt(args);
    cr_assert_eq(r.code, 0, "%s", r.out);
    char *h = read_text("build/names-test/names.cuh");
    cr_assert_not_null(strstr(h, "const float *class_, "));
    cr_assert_not_null(strstr(h, " float *class__, "), "an output named class_");
    cr_assert_not_null(strstr(h, "int64_t dev_, void *workspace, cudaStream_t stream)"));
    cr_assert_not_null(strstr(h, "// Renamed in C (reserved words, see tsopt's README): alignas → alignas_,"));
    cr_assert_eq(shell("cd build/names-test && printf '#define TSOPT_NAMES_IMPLEMENTATION\\n#include \"names.cuh\"\\n' > impl.cu && "
                       "nvcc -std=c++17 -Werror all-warnings -arch=sm_80 -c impl.cu -o impl.o"), 0, "nvcc failed");
    cr_assert_eq(shell("cd build/names-test && printf '#include \"names.cuh\"\\nsize_t f(void) { return names_workspace_bytes(3); }\\n' > c.c && "
                       "gcc -std=c99 -Wall -Wextra -Wpedantic -Werror -c c.c -o c.o && "
                       "g++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -x c++ -c c.c -o cxx.o"), 0, "gcc or g++ failed");
    free(h);
    free(r.out);
    free(args);
    free(yaml);
}

/* ---- the attention family ------------------------------------------------------------------------ */

Test(emit, head_dim_256_attention_launches_the_wgmma_kernel_with_64_key_tiles_then_the_fallback) {
    char *h = emit_best("bench/graphs/attention_d256.yaml", "templates");
    cr_expect_not_null(strstr(h, "err = tsa90::launch_attention_sm90<256, 2, true, 64>(p, stream);"));
    cr_expect_not_null(strstr(h, "err = tsa::launch_attention<256, 64, 32, 4, 32, tst::kOtherCode>(p, stream);"));
    free(h);
}

/* Head dim 192: the wgmma kernel's 64-key tiles in 3 stages (P·V as m64n192k16), the mma.sync kernel's 64-row
 * tiles as a fallback; no decode form at 2048 static query rows. */
Test(emit, head_dim_192_attention_launches_the_wgmma_kernel_with_64_key_tiles_and_no_decode_form) {
    char *h = emit_best("bench/probes/attention_d192.yaml", "templates");
    cr_expect_not_null(strstr(h, "err = tsa90::launch_attention_sm90<192, 3, true, 64>(p, stream);"));
    cr_expect_not_null(strstr(h, "err = tsa::launch_attention<192, 64, 32, 4, 32, tst::kOtherCode>(p, stream);"));
    cr_expect_null(strstr(h, "launch_attention_decode<192>"));
    free(h);
}

/* Head dim 96: no 96-wide kernel; the head-dim-128 kernels run it zero-padded (p.d = 96 below the template's D);
 * no decode form at 2048 static query rows. */
Test(emit, head_dim_96_attention_runs_the_128_kernels_zero_padded) {
    char *h = emit_best("bench/probes/attention_d96.yaml", "templates");
    cr_expect_not_null(strstr(h, "p.d = (int64_t)96;"));
    cr_expect_not_null(strstr(h, "err = tsa90::launch_attention_sm90<128, 3, true, 128>(p, stream);"));
    cr_expect_not_null(strstr(h, "err = tsa::launch_attention<128, 128, 32, 4, 32, tst::kOtherCode>(p, stream);"));
    cr_expect_null(strstr(h, "launch_attention_decode<"));
    free(h);
}

/* Decode at head dim 96 (Phi-3): a dynamic t_q gets the decode form in the head-dim-128 decode kernel (its padding
 * chunks zero-filled without reads) for few rows, the tiled head-dim-128 kernels otherwise; p.d = 96 for both. The
 * decode form's head dims are 64, 128 and 256: 192 runs at 256 there while its tiled kernel is the 192 one. */
Test(emit, a_decode_attention_at_head_dim_96_runs_the_decode_form_zero_padded) {
    char *h = emit_best("bench/probes/attention_decode_d96.yaml", "templates");
    cr_expect_not_null(strstr(h, "p.d = (int64_t)96;"));
    cr_expect_not_null(strstr(h, "if (p.t_q <= 16) {\n            err = tsa::launch_attention_decode<128>(p, stream);"), "%s",
                       strstr(h, "p.d = ") ? strstr(h, "p.d = ") : h);
    cr_expect_not_null(strstr(h, "err = tsa90::launch_attention_sm90<128, 3, true, 128>(p, stream);"));
    free(h);
    const int64_t head[] = {8, 40, 64, 80, 96, 128, 160, 192, 256}, dec[] = {64, 64, 64, 128, 128, 128, 256, 256, 256},
                  tiled[] = {64, 64, 64, 128, 128, 128, 192, 192, 256};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++) {
        cr_expect_eq(ts_config_attention_decode_dim(head[i]), dec[i], "decode form at head dim %lld", (long long)head[i]);
        cr_expect_eq(ts_config_attention_kernel_dim(head[i]), tiled[i], "tiled kernel at head dim %lld", (long long)head[i]);
    }
}

Test(emit, a_tanh_soft_capped_score_uses_the_hardware_tanh_and_nothing_the_composite_needed) {
    char *h = emit_best("bench/graphs/attention_softcap.yaml", "templates");
    const char *k0 = strstr(h, "struct K0 {\n    static constexpr bool causal = true;");
    cr_assert_not_null(k0);
    const char *end = strstr(k0, "};");
    char *functor = ts_strfmt("%.*s", (int)(end - k0), k0);
    cr_expect_not_null(strstr(functor, " = tst::fast_tanh(v"), "%s", functor);
    cr_expect_null(strstr(functor, "fast_exp2"), "the composite's exp2 is not evaluated: %s", functor);
    cr_expect_null(strstr(functor, "__fdividef"), "nor its reciprocal: %s", functor);
    free(functor);
    free(h);
}

/* The text of the struct that starts with `name` in header h, up to its closing brace. */
static char *functor_of(const char *h, const char *name) {
    const char *k = strstr(h, name);
    cr_assert_not_null(k, "%s", name);
    return ts_strfmt("%.*s", (int)(strstr(k, "\n};") - k), k);
}

/* A GEMM epilogue that reads memory (the bias) comes in two phases — load, then apply_loaded — so that the
 * staged epilogue can issue several pairs' reads before storing; the bias, which the kernel does not write,
 * is read through the read-only path. An epilogue that reads nothing has only apply. */
Test(emit, a_gemm_epilogue_that_reads_memory_has_a_load_phase) {
    char *h = emit_best("bench/graphs/gemm_gelu.yaml", "templates"), *functor = functor_of(h, "struct K0 {");
    cr_expect_not_null(strstr(functor, "struct In { float x[2][1]; };"), "%s", functor);
    cr_expect_not_null(strstr(functor, "In load(int b, int row, int col) const"), "%s", functor);
    cr_expect_not_null(strstr(functor, "tst::load_ro(p"), "%s", functor);
    cr_expect_not_null(strstr(functor, "void apply_loaded(int b, int row, int col, const In &in, float v0, float v1)"),
                       "%s", functor);
    cr_expect_not_null(strstr(functor, "apply_loaded<T>(b, row, col, load(b, row, col), v0, v1);"), "%s", functor);
    free(functor);
    free(h);
    h = emit_best("bench/graphs/matmul.yaml", "templates"), functor = functor_of(h, "struct K0 {");
    cr_expect_null(strstr(functor, "struct In"), "%s", functor);
    cr_expect_not_null(strstr(functor, "void apply(int b, int row, int col, float v0, float v1) const"), "%s", functor);
    free(functor);
    free(h);
}

/* An epilogue reading a residual (an operand that differs from row to row) asks its lines into L2 near the end
 * of the tile's main loop (gemm.cuh's prefetch): once per such operand, never for a bias every row shares; an
 * epilogue reading only a bias has no prefetch. */
static int occurrences(const char *s, const char *what) {
    int n = 0;
    for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
    return n;
}
Test(emit, a_gemm_epilogue_reading_a_residual_prefetches_its_rows_and_not_the_bias) {
    char *h = emit_best("bench/heldout/rmsnorm_gemm_residual.yaml", "templates"), *functor = functor_of(h, "struct K1 {");
    cr_expect_not_null(strstr(functor, "static constexpr int kPrefetchStep = 64;"), "%s", functor);
    cr_expect_eq(occurrences(functor, "tst::prefetch_l2(p"), 1, "%s", functor);
    cr_expect_not_null(strstr(functor, "tst::prefetch_l2(p2 + o2 + (int64_t)(row) * 2048 + (int64_t)(cc));"), "%s", functor);
    free(functor);
    free(h);
    h = emit_best("bench/heldout/clip_mlp.yaml", "templates");
    functor = functor_of(h, "struct K2 {"); /* the second GEMM: bias and residual */
    cr_expect_eq(occurrences(functor, "tst::prefetch_l2(p"), 1, "the residual only: %s", functor);
    free(functor);
    free(h);
    h = emit_best("bench/graphs/gemm_gelu.yaml", "templates"), functor = functor_of(h, "struct K0 {");
    cr_expect_null(strstr(functor, "prefetch"), "a bias alone: %s", functor);
    free(functor);
    free(h);
}

/* A GEMM epilogue's loads (emit_gemm_loads): a bias or a residual, contiguous along the columns, as one pair load
 * in load_pair, which the kernel calls where pair_ok() finds the addresses aligned (an input need only be aligned
 * to its element type, so the check includes the pointer); a row scale, which does not vary along the columns, once for both columns of the pair.
 * An epilogue reading only a bias declares kLoadByColumn (the kernel loads a column's bias once for the rows a
 * thread holds); one reading a residual or a row scale does not. */
Test(emit, a_gemm_epilogue_loads_pairs_at_once_and_a_bias_once_per_column) {
    char *h = emit_best("bench/graphs/gemm_gelu.yaml", "templates"), *functor = functor_of(h, "struct K0 {");
    cr_expect_not_null(strstr(functor, "bool pair_ok() const { return reinterpret_cast<uintptr_t>(p"), "%s", functor);
    cr_expect_eq(occurrences(functor, "tst::load2_ro(p"), 1, "%s", functor);
    cr_expect_not_null(strstr(functor, "In load_pair(int b, int row, int col) const"), "%s", functor);
    cr_expect_null(strstr(functor, "if (two && pair_ok())"), "no branch beside a load: %s", functor);
    cr_expect_not_null(strstr(functor, "static constexpr bool kLoadByColumn = true;"), "a bias alone: %s", functor);
    free(functor);
    free(h);
    h = emit_best("bench/heldout/clip_mlp.yaml", "templates");
    functor = functor_of(h, "struct K2 {"); /* the second GEMM: bias and residual */
    cr_expect_eq(occurrences(functor, "tst::load2_ro(p"), 2, "%s", functor);
    cr_expect_null(strstr(functor, "kLoadByColumn"), "a residual varies along the rows: %s", functor);
    free(functor);
    free(h);
    h = emit_best("bench/probes/linear_weight_first.yaml", "templates");
    functor = functor_of(h, "struct K0 {"); /* Wᵀ·X: the bias [n] is one value a GEMM row */
    cr_expect_not_null(strstr(functor, "in.x[0][0] = in.x[1][0] = "), "one load for both columns: %s", functor);
    cr_expect_null(strstr(functor, "load2_ro"), "%s", functor);
    cr_expect_null(strstr(functor, "pair_ok"), "%s", functor);
    cr_expect_null(strstr(functor, "kLoadByColumn"), "a per-row operand varies along the rows: %s", functor);
    free(functor);
    free(h);
}

/* A mask whose rows have an odd length: two keys' elements are not aligned as a pair for every query, so the
 * score functor has no pair form (the kernels score a key at a time); an even length gets one. */
#define ODD_MASK_YAML                                                                                        \
    "graph: om\naxes: {h: 2, t: 64, s: %d, d: 64}\n"                                                       \
    "inputs:\n  Q: {dtype: fp16, shape: [h, t, d]}\n  K: {dtype: fp16, shape: [h, s, d]}\n"                 \
    "  V: {dtype: fp16, shape: [h, s, d]}\n  M: {dtype: fp16, shape: [t, s]}\n"                             \
    "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d}\n  - {name: S1, op: add, args: [S, M]}\n"       \
    "  - {name: P, op: softmax, args: [S1], axis: s}\n  - {name: O, op: matmul, args: [P, V], over: s}\n"   \
    "outputs: [O]\n"
Test(emit, a_score_tensor_with_odd_rows_has_no_pair_form) {
    cr_assert_eq(shell("rm -rf build/odd-mask-test && mkdir -p build/odd-mask-test"), 0);
    for (int s = 81; s <= 82; s++) {
        char *path = ts_strfmt("build/odd-mask-test/om%d.yaml", s), *text = ts_strfmt(ODD_MASK_YAML, s);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
        char *args = ts_strfmt("compile -o build/odd-mask-test/%d %s", s, path);
        tsopt_result r = run_tsopt(args);
        cr_assert_eq(r.code, 0, "%s", r.out);
        char *hpath = ts_strfmt("build/odd-mask-test/%d/om.cuh", s), *h = read_text(hpath);
        char *functor = functor_of(h, "struct K0 {"); /* one attention kernel */
        if (s % 2) cr_expect_null(strstr(functor, "float2 pair("), "rows of %d: %s", s, functor);
        else cr_expect_not_null(strstr(functor, "float2 pair(float dot0, float dot1, int q, int k2) const {"), "%s", functor);
        free(functor);
        free(h);
        free(hpath);
        free(r.out);
        free(args);
        free(text);
        free(path);
    }
}

/* Attention scores that read tensors along the batch, the heads and the keys only (a padding mask per
 * sequence, ALiBi-style slopes per head): the score functor gets at(b, h), and the header compiles with
 * every warning an error (the query index it does not use once warned). */
Test(emit, attention_scores_reading_batch_and_head_tensors_compile_with_nvcc, .timeout = 600) {
    const char *dir = "build/score-tensors-test";
    cr_assert_eq(shell("rm -rf build/score-tensors-test && mkdir -p build/score-tensors-test"), 0);
    FILE *f = fopen("build/score-tensors-test/st.yaml", "w");
    fputs("graph: st\naxes: {b: 2, h: 4, t: 64, s: 80, d: 64}\n"
          "inputs:\n  Q: {dtype: fp16, shape: [b, h, t, d]}\n  K: {dtype: fp16, shape: [b, h, s, d]}\n"
          "  V: {dtype: fp16, shape: [b, h, s, d]}\n  Pad: {dtype: fp16, shape: [b, s]}\n"
          "  Slope: {dtype: fp16, shape: [h]}\n"
          "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d}\n  - {name: S1, op: add, args: [S, Pad]}\n"
          "  - {name: S2, op: add, args: [S1, Slope]}\n  - {name: P, op: softmax, args: [S2], axis: s}\n"
          "  - {name: O, op: matmul, args: [P, V], over: s}\noutputs: [O]\n", f);
    fclose(f);
    char *args = ts_strfmt("compile -o %s %s/st.yaml", dir, dir);
    tsopt_result r = run_tsopt(args);
    cr_assert_eq(r.code, 0, "%s", r.out);
    char *h = read_text("build/score-tensors-test/st.cuh");
    cr_assert_not_null(strstr(h, "attention"), "one attention kernel");
    cr_assert_not_null(strstr(h, " at(int b, int h) const {"), "the functor keeps the kernel's batch and head");
    cr_assert_not_null(strstr(h, "(int64_t)(b_) * 80"), "the padding mask indexed by the batch (its stride s = 80 folded)");
    /* the pair form: the mask's two keys in one load (its offset even: stride 80), the slope once for both */
    cr_assert_not_null(strstr(h, "bool pair_ok() const { return ((o0) & 1) == 0; }"), "%s", strstr(h, "struct K0"));
    cr_assert_not_null(strstr(h, "const float2 t = tst::load2_ro(p0 + o0 + (int64_t)(b_) * 80 + (int64_t)(kc0));"));
    cr_assert_not_null(strstr(h, "ld0[1] = ld1[1] = tst::elem<__half>::to_float(tst::load_ro(p1 + o1 + (int64_t)(h_)));"),
                       "%s", strstr(h, "float2 pair("));
    cr_assert_eq(shell("cd build/score-tensors-test && printf '#define TSOPT_ST_IMPLEMENTATION\\n#include \"st.cuh\"\\n' > impl.cu && "
                       "nvcc -std=c++17 -Werror all-warnings -arch=sm_80 -c impl.cu -o impl.o"), 0, "nvcc failed");
    free(h);
    free(r.out);
    free(args);
}

/* A map reading an operand transposed declares map.cuh's transposed walk along the output's rows; a plain map
 * does not. */
Test(emit, a_map_over_a_transposed_operand_declares_its_walk) {
    char *h = emit_best("bench/probes/transpose_add.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr int kWalk = 0;"));
    free(h);
    h = emit_best("bench/heldout/lstm.yaml", "templates"); /* its map reads the GEMM's gates row-major */
    cr_expect_not_null(strstr(h, "tsm::MapParams<"));
    cr_expect_null(strstr(h, "static constexpr int kWalk = "));
    free(h);
}

/* Rows of 2500 halves start 4 bytes off 16 every other row: the row kernel's functor declares kPairs (span.cuh's
 * 4-byte pair moves) and its loads and stores use it; an aligned row kernel compiles without the path, which cost
 * aligned kernels 10-15% (bench/NOTES.md run 121). So do the padding copies of a K = 2500 linear layer. */
Test(emit, spans_off_16_bytes_declare_the_pair_path_and_aligned_ones_do_not) {
    char *h = emit_best("bench/probes/rmsnorm_rows2500.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr bool kPairs = true;"));
    cr_expect_not_null(strstr(h, "tsv::load_span<kVec, kPairs>(x[0], "));
    cr_expect_not_null(strstr(h, "tsv::store_span<kVec, kPairs>(q0 + b.out[0], "));
    free(h);
    h = emit_best("bench/heldout/gemm_odd_relu.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr bool kPairs = true;"), "the copies into padded rows");
    free(h);
    h = emit_best("bench/graphs/residual_rmsnorm.yaml", "templates");
    cr_expect_null(strstr(h, "kPairs = true"));
    cr_expect_null(strstr(h, "<kVec, kPairs>"));
    free(h);
}

/* Rows of an odd length start at odd elements: the row functor over a 50257-word vocabulary and a map over the
 * same rows declare kHead (row.cuh and map.cuh take each row's head apart, so that the rest moves in 16-byte
 * vectors); rows of 2500 halves, 4-byte aligned, keep the pairs and no head, and aligned rows have neither. */
Test(emit, rows_starting_at_odd_elements_declare_a_head_and_others_do_not) {
    char *h = emit_best("bench/probes/softmax_lse_vocab.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr bool kHead = true;"));
    cr_expect_not_null(strstr(h, "__device__ int head(const Base &b) const { return tsv::span_head<kVec>(p0 + b.in[0], 1); }"));
    cr_expect_null(strstr(h, "kPairs = true"), "odd rows are not 4-byte aligned either");
    free(h);
    cr_assert_eq(system("mkdir -p build/tests"), 0);
    FILE *f = fopen("build/tests/odd_map.yaml", "w");
    fputs("graph: g\naxes: {t: 1024, v: 50257}\ninputs:\n  Z: {dtype: bf16, shape: [t, v]}\n  b: {dtype: bf16, shape: [v]}\n"
          "ops:\n  - {name: Y, op: add, args: [Z, b]}\noutputs: [Y]\n", f);
    fclose(f);
    h = emit_best("build/tests/odd_map.yaml", "templates");
    cr_expect_not_null(strstr(h, "tsm::MapParams<"));
    cr_expect_not_null(strstr(h, "static constexpr bool kHead = true;"));
    free(h);
    const char *none[] = {"bench/probes/rmsnorm_rows2500.yaml", "bench/graphs/residual_rmsnorm.yaml", "bench/probes/softmax_vocab.yaml"};
    for (int i = 0; i < 3; i++) {
        h = emit_best(none[i], "templates");
        cr_expect_null(strstr(h, "kHead = true"), "%s", none[i]);
        free(h);
    }
}

/* A GEMM whose rows merge two axes ([b, t, d]·[d, n], b a run-time size): M is b·t, no batch, and the launch
 * helper refuses a b·t its 32-bit row count cannot hold before launching anything. */
Test(emit, merged_rows_are_one_row_count_checked_against_32_bits) {
    cr_assert_eq(system("mkdir -p build/tests"), 0);
    FILE *f = fopen("build/tests/merged_rows.yaml", "w");
    fputs("graph: g\naxes: {b: {dynamic: true, typical: 8}, t: 77, d: 768, n: 768}\n"
          "inputs:\n  X: {dtype: fp16, shape: [b, t, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
          "ops:\n  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Y]\n", f);
    fclose(f);
    char *h = emit_best("build/tests/merged_rows.yaml", "templates");
    cr_expect(strstr(h, "p.M = (int64_t)77*b;"), "rows b·t");
    cr_expect(strstr(h, "p.batch = (int64_t)1;"));
    cr_expect(strstr(h, "if ((int64_t)77*b > INT32_MAX) return cudaErrorInvalidValue; /* the GEMM's rows"));
    free(h);
}

/* A softmax's maximum and its sum of exponentials fold into one pass over a row too long to cache (row.cuh
 * kOnline: rowstat.h ts_row_online_stage, checked on samples): the functor declares the stage and the factor that
 * rescales a partial sum from its maximum to a new one; a LayerNorm's two sums, or a maximum read by a sum other
 * than through exponentials of the difference, do not fold. */
Test(emit, a_softmax_declares_its_online_stage_and_a_layernorm_none) {
    char *h = emit_best("bench/probes/softmax_vocab.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr int kOnline = 0;"));
    const char *mf = strstr(h, "__forceinline__ float merge(float part_sum, float part_max, float new_max) const {");
    cr_assert_not_null(mf);
    const char *end = strstr(mf, "return v");
    cr_assert_not_null(end);
    cr_expect_not_null(strstr(mf, "part_sum"), "the partial sum is an operand of the factor");
    cr_expect(strstr(mf, "tst::fast_exp2(") && strstr(mf, "tst::fast_exp2(") < end, "rescaled by an exponential");
    free(h);
    h = emit_best("bench/probes/row_layernorm.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr int kOnline = -1;"));
    cr_expect_null(strstr(h, "__forceinline__ float merge(float part_sum"));
    free(h);
    h = emit_best("bench/probes/colsum_d64.yaml", "templates");  /* Σ, no maximum */
    cr_expect_null(strstr(h, "kOnline = 0"));
    free(h);
}

/* A cross-entropy's target logit (Σ over the vocabulary of the logit where the position is the target) reads
 * neither the maximum nor the sum of exponentials: the functor declares it joined to an uncached row's first pass
 * (row.cuh kJoinFirst), so that its 32000-long rows take one pass (rowstat.h ts_row_uncached_passes) and no wide
 * block caching them (run 164: 139 us for 131 MB); a softmax's sum, which reads the maximum, joins nothing. */
Test(emit, a_cross_entropy_reads_its_target_logit_in_the_log_sum_exp_pass) {
    char *h = emit_best("bench/probes/cross_entropy_loss.yaml", "templates");
    const char *fn = strstr(h, "static constexpr int64_t kLen = 32000;");
    cr_assert_not_null(fn, "the row kernel over the vocabulary");
    const char *end = strstr(fn, "kLen = 2048;");
    const char *online = strstr(fn, "static constexpr int kOnline = 0;");
    const char *join = strstr(fn, "static constexpr unsigned kJoinFirst = 4u;");
    cr_expect(online && (!end || online < end), "the maximum and the sum of exponentials in one pass");
    cr_expect(join && (!end || join < end), "stage 2 (the target logit) in that pass too");
    free(h);
    h = emit_best("bench/probes/softmax_vocab.yaml", "templates");
    cr_expect_null(strstr(h, "u; /* stages read in the first pass */"));
    free(h);
}

/* A GEMM folding row statistics of A (prologue fusion) tells the wgmma kernel where its grid publishes the rows'
 * values: a workspace temporary of 4 bytes a row (rmsnorm·W: 1024 rows), live while the GEMM runs. */
Test(emit, a_gemm_with_row_statistics_names_the_buffer_its_grid_publishes_them_to) {
    char *h = emit_best("bench/graphs/rmsnorm.yaml", "templates");
    cr_expect_not_null(strstr(h, "static constexpr int kRowStats = 1, kRowOuts = 1;"));
    const char *set = strstr(h, "p.row_stats[0] = K0_b");
    cr_expect_not_null(set, "the statistics' buffer is passed");
    cr_expect_null(set ? strstr(set + 1, "p.row_stats[1] =") : NULL, "one value a row");
    cr_expect_not_null(strstr(h, "bytes += (((size_t)(int64_t)4096 + 255) & ~(size_t)255);"), "1024 rows × 4 bytes in the workspace");
    free(h);
}
