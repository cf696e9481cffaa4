/* test_libgemm.c — which GEMMs cuBLASLt may run (libgemm.h, --allow-cublas) and what the header then holds:
 * the epilogue forms it recognises by evaluation (bias, ReLU, GELU's tanh form, a scale, a residual C), the
 * near misses it must refuse (GELU's erf form, SiLU, a bias along m, a dual GEMM), the configuration variant
 * the search and tune see only when allowed, the cost model's price, and the emitted call with its link
 * note, workspace share and fallback to the plan's own kernel. */
#include <math.h>

#include "config.h"
#include "costmodel.h"
#include "emit.h"
#include "libgemm.h"
#include "testutil.h"

/* A GEMM Y[m, n] = epilogue(X[m, d]·W[d, n]) over fp16 with a bias b[n], a row vector r[m] and a residual
 * R[m, n] among its inputs; `ops` are the YAML op lines after H = X·W, `out` the output's name. */
static char *gemm_yaml(const char *ops, const char *out) {
    return ts_strfmt("graph: g\naxes: {m: 512, d: 256, n: 384}\ninputs:\n"
                     "  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                     "  b: {dtype: fp16, shape: [n]}\n  r: {dtype: fp16, shape: [m]}\n  R: {dtype: fp16, shape: [m, n]}\n"
                     "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n%soutputs: [%s]\n",
                     ops, out);
}

static void compile_gemm(compiled_graph *cg, const char *ops, const char *out) {
    char *yaml = gemm_yaml(ops, out);
    compile_yaml(cg, yaml);
    free(yaml);
}

/* ts_emit_header of plan p of cg into *text (heap, whatever the result); its return code, *err on failure. */
static int emit_into(compiled_graph *cg, const ts_plan *p, char **text, char **err) {
    size_t len;
    *text = NULL, *err = NULL;
    FILE *f = open_memstream(text, &len);
    ts_emit_opts eo = {.source_path = "g.yaml", .source_text = "", .source_len = 0, .templates_dir = "templates",
                       .cost_model = &cg->cm, .baseline_s = 1e-3};
    int rc = ts_emit_header(f, &cg->c.g, p, &eo, err);
    fclose(f);
    return rc;
}

/* Plan p of cg as header text (heap). */
static char *emit_text(compiled_graph *cg, const ts_plan *p) {
    char *buf, *err;
    cr_assert_eq(emit_into(cg, p, &buf, &err), 0, "%s", err);
    return buf;
}

/* The best plan of the graph, which must be one GEMM; whether it matches, with *e. */
static bool match_best(compiled_graph *cg, const char *ops, const char *out, ts_lt_epilogue *e, const char **why) {
    compile_gemm(cg, ops, out);
    const ts_plan *p = &cg->out.plans[0];
    char *desc = ts_plan_describe(p, &cg->c.g);
    cr_assert_eq(p->nk, 1, "%s: %s", ops, desc);
    cr_assert_eq(p->k[0].kind, TS_KERNEL_GEMM, "%s: %s", ops, desc);
    free(desc);
    return ts_libgemm_match(&cg->c.g, p, &p->k[0], e, why);
}

Test(libgemm, recognises_the_epilogues_cublaslt_has) {
    const struct {
        const char *ops, *out;
        ts_lt_act act;
        bool bias, residual;
        double alpha, beta;
    } cases[] = {
        {"", "H", TS_LT_ACT_NONE, false, false, 1, 0},
        {"  - {name: Y, op: add, args: [H, b]}\n", "Y", TS_LT_ACT_NONE, true, false, 1, 0},
        {"  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: relu, args: [Hb]}\n", "Y", TS_LT_ACT_RELU, true, false, 1, 0},
        {"  - {name: Y, op: relu, args: [H]}\n", "Y", TS_LT_ACT_RELU, false, false, 1, 0},
        {"  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: gelu, args: [Hb], approximate: tanh}\n", "Y",
         TS_LT_ACT_GELU, true, false, 1, 0},
        {"  - {name: Hs, op: scale, args: [H], by: 0.125}\n  - {name: Hb, op: add, args: [Hs, b]}\n"
         "  - {name: Y, op: gelu, args: [Hb], approximate: tanh}\n", "Y", TS_LT_ACT_GELU, true, false, 0.125, 0},
        {"  - {name: Hs, op: scale, args: [H], by: 0.5}\n  - {name: Y, op: add, args: [Hs, R]}\n", "Y", TS_LT_ACT_NONE,
         false, true, 0.5, 1},
        {"  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: add, args: [Hb, R]}\n", "Y", TS_LT_ACT_NONE, true,
         true, 1, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        compiled_graph cg;
        ts_lt_epilogue e;
        const char *why = NULL;
        cr_assert(match_best(&cg, cases[c].ops, cases[c].out, &e, &why), "case %zu: %s", c, why);
        cr_expect_eq(e.act, cases[c].act, "case %zu", c);
        cr_expect_eq(e.bias >= 0, cases[c].bias, "case %zu", c);
        cr_expect_eq(e.residual >= 0, cases[c].residual, "case %zu", c);
        cr_expect(fabs(e.alpha - cases[c].alpha) < 1e-9, "case %zu: alpha %g", c, e.alpha);
        cr_expect(fabs(e.beta - cases[c].beta) < 1e-9, "case %zu: beta %g", c, e.beta);
        free_compiled(&cg);
    }
}

/* What cuBLASLt computes differently, or cannot express, is refused: the reference is the graph's. */
Test(libgemm, refuses_what_cublaslt_would_compute_differently) {
    const char *cases[][2] = {
        {"  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: gelu, args: [Hb]}\n", "Y"}, /* erf form */
        {"  - {name: Y, op: silu, args: [H]}\n", "Y"},
        {"  - {name: Y, op: add, args: [H, r]}\n", "Y"},                  /* a bias along m */
        {"  - {name: Hb, op: add, args: [H, b]}\n  - {name: Hr, op: add, args: [Hb, R]}\n"
         "  - {name: Y, op: relu, args: [Hr]}\n", "Y"},                   /* C under an activation */
        {"  - {name: one, op: constant, value: 1, dtype: fp16}\n  - {name: Y, op: add, args: [H, one]}\n", "Y"},
        {"  - {name: Y, op: tanh, args: [H]}\n", "Y"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        compiled_graph cg;
        ts_lt_epilogue e;
        const char *why = NULL;
        cr_expect_not(match_best(&cg, cases[c][0], cases[c][1], &e, &why), "case %zu matched", c);
        cr_expect_not_null(why, "case %zu: no reason", c);
        free_compiled(&cg);
    }
}

Test(libgemm, a_dual_gemm_is_not_a_cublaslt_call) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {m: 512, d: 256, n: 384}\ninputs:\n  X: {dtype: fp16, shape: [m, d]}\n"
                      "  W: {dtype: fp16, shape: [d, n]}\n  V: {dtype: fp16, shape: [d, n]}\n"
                      "ops:\n  - {name: G, op: matmul, args: [X, W], over: d}\n  - {name: U, op: matmul, args: [X, V], over: d}\n"
                      "  - {name: S, op: silu, args: [G]}\n  - {name: Y, op: mul, args: [S, U]}\noutputs: [Y]\n");
    const ts_plan *p = &cg.out.plans[0];
    for (int i = 0; i < p->nk; i++) {
        ts_lt_epilogue e;
        if (p->k[i].kind == TS_KERNEL_GEMM && p->k[i].b1 >= 0) cr_expect_not(ts_libgemm_match(&cg.c.g, p, &p->k[i], &e, NULL));
    }
    free_compiled(&cg);
}

/* The library is a configuration variant only when allowed, the last one; priced at cublas_efficiency. */
Test(libgemm, the_variant_exists_only_when_allowed_and_is_priced_by_its_coefficient) {
    compiled_graph cg;
    compile_gemm(&cg, "  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: relu, args: [Hb]}\n", "Y");
    ts_plan *p = &cg.out.plans[0];
    ts_kernel *k = &p->k[0];
    ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
    int n = ts_config_variants(&cg.c.g, p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS);
    for (int i = 0; i < n; i++) cr_expect_not(alt[i].library);
    int m = ts_config_variants(&cg.c.g, p, k, true, 132, alt, TS_CONFIG_MAX_VARIANTS);
    cr_assert_eq(m, n + 1);
    cr_expect(alt[m - 1].library);
    char buf[64];
    ts_kernel_config own = k->cfg;
    k->cfg = alt[m - 1];
    cr_expect_str_eq(ts_config_describe(k, buf, sizeof buf), "cuBLASLt");
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, p, k, &w);
    cr_expect(w.library);
    double t1 = ts_costmodel_time(&cg.cm, &w);
    cg.cm.cublas_efficiency *= 2; /* the library's rate, not the own kernel's, sets its tensor time */
    double t2 = ts_costmodel_time(&cg.cm, &w);
    cr_expect_lt(t2, t1);
    k->cfg = own;
    ts_costmodel_work(&cg.cm, &cg.c.g, p, k, &w);
    cr_expect_not(w.library);
    cr_expect_float_eq(ts_costmodel_time(&cg.cm, &w), k->predicted_s, 1e-12 + k->predicted_s * 1e-9);
    free_compiled(&cg);
}

/* The header of a library-configured GEMM: the cuBLASLt call with the epilogue, its workspace after the
 * temporaries, the own kernel as its fallback, and the link requirement said in the banner and as a macro. */
Test(libgemm, the_header_calls_cublaslt_and_keeps_its_own_kernel_as_fallback) {
    compiled_graph cg;
    compile_gemm(&cg, "  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: gelu, args: [Hb], approximate: tanh}\n", "Y");
    ts_plan *p = &cg.out.plans[0];
    p->k[0].cfg.library = true;
    char *buf = emit_text(&cg, p);
    const char *want[] = {"#define TSOPT_G_NEEDS_CUBLASLT 1", "link with\n// -lcublasLt", "#include <cublasLt.h>",
                          "namespace tslt", "lt.act = tslt::kGelu;", "lt.bias = ", "lt.b_ncontig = true;",
                          "err = tslt::matmul(lt, lt_cache, lt_workspace, 4194304, stream);",
                          "if (err != cudaErrorNotSupported) return err;", "tsg90::launch_gemm_sm90<",
                          "bytes += 4194304;", "void *lt_workspace = ws;", "kernel 1 (gemm): cuBLASLt"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) cr_expect(strstr(buf, want[i]), "missing: %s", want[i]);
    free(buf);
    /* without the flag on the kernel nothing of it is there */
    p->k[0].cfg.library = false;
    buf = emit_text(&cg, p);
    cr_expect_null(strstr(buf, "cublasLt"));
    cr_expect_null(strstr(buf, "tslt"));
    free(buf);
    free_compiled(&cg);
}

/* compile --allow-cublas is accepted and says nothing about cuBLASLt when the search keeps its own kernels (a
 * dual GEMM is none of cuBLASLt's); the flag is refused where it means nothing. */
Test(libgemm, the_cli_flag) {
    tsopt_result r = run_tsopt("compile --allow-cublas -o build/tests bench/graphs/swiglu.yaml");
    cr_expect_eq(r.code, 0, "%s", r.out);
    cr_expect_null(strstr(r.out, "cuBLASLt"), "%s", r.out);
    free(r.out);
    r = run_tsopt("check --allow-cublas bench/graphs/gemm_gelu.yaml");
    cr_expect_eq(r.code, 2, "%s", r.out);
    cr_expect(strstr(r.out, "unknown option '--allow-cublas'"), "%s", r.out);
    free(r.out);
}

/* A linear layer with K = 2500 (rows 5000 bytes apart): its operands are copied into padded rows (pad.h) and
 * the GEMM over them is cheaper by cuBLASLt (the model's cublas_efficiency above gemm_efficiency, its ReLU
 * epilogue hidden), so with --allow-cublas the search picks it and says so; the header compiles with every
 * warning an error and links with -lcublasLt. Without the flag nothing of it is there. */
Test(libgemm, an_unaligned_linear_layer_runs_by_cublaslt_and_its_header_builds, .timeout = 600) {
    cr_assert_eq(system("rm -rf build/libgemm-test && mkdir -p build/libgemm-test"), 0);
    tsopt_result r = run_tsopt("compile --allow-cublas -o build/libgemm-test bench/heldout/gemm_odd_relu.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect(strstr(r.out, "cuBLASLt"), "%s", r.out);
    char *h = read_text("build/libgemm-test/gemm_odd_relu.cuh");
    cr_expect(strstr(h, "(gemm): cuBLASLt\n"), "%s", h);
    cr_expect(strstr(h, "lt.act = tslt::kRelu;"));
    cr_expect(strstr(h, "lt.b_ncontig = false;"), "W is [o, i]: k contiguous, cuBLASLt's op T");
    free(h);
    free(r.out);
    r = run_tsopt("compile -o build/libgemm-test/own bench/heldout/gemm_odd_relu.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect_null(strstr(r.out, "cuBLASLt"), "without the flag: %s", r.out);
    free(r.out);
    cr_assert_eq(system("cd build/libgemm-test && printf '#define TSOPT_GEMM_ODD_RELU_IMPLEMENTATION\\n#include "
                        "\"gemm_odd_relu.cuh\"\\n' > impl.cu && nvcc -std=c++17 -Werror all-warnings "
                        "-gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared impl.cu -o libimpl.so -lcublasLt "
                        "-Xlinker --no-undefined"), 0, "nvcc failed");
}

/* fp32 operands: the plan's GEMM kernel runs gemm_f32.cuh's 3xTF32 kernel (no warning, no cuBLASLt); with
 * --allow-cublas cuBLASLt's exact-fp32 SGEMM is one more variant (its bias and ReLU in cuBLASLt's epilogue), the
 * own fp32 kernel its fallback; that header compiles with every warning an error and links with -lcublasLt. */
Test(libgemm, an_fp32_linear_layer_is_an_own_gemm_and_cublaslt_a_variant_when_allowed, .timeout = 600) {
    cr_assert_eq(system("rm -rf build/libgemm-fp32 && mkdir -p build/libgemm-fp32"), 0);
    FILE *f = fopen("build/libgemm-fp32/f32lin.yaml", "w");
    fputs("graph: f32lin\naxes: {m: 2048, d: 1024, n: 4096}\ninputs:\n  X: {dtype: fp32, shape: [m, d]}\n"
          "  W: {dtype: fp32, shape: [d, n]}\n  b: {dtype: fp32, shape: [n]}\nops:\n"
          "  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: Hb, op: add, args: [H, b]}\n"
          "  - {name: Y, op: relu, args: [Hb]}\noutputs: [Y]\n", f);
    fclose(f);
    tsopt_result r = run_tsopt("compile -o build/libgemm-fp32 build/libgemm-fp32/f32lin.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect_null(strstr(r.out, "warning:"), "%s", r.out);
    cr_expect(strstr(r.out, "1    fused                                 1 "), "one GEMM kernel: %s", r.out);
    free(r.out);
    char *h = read_text("build/libgemm-fp32/f32lin.cuh");
    cr_expect(strstr(h, "tsg::GemmParams<float, K0>"));
    cr_expect(strstr(h, "tsg90::launch_gemm_f32_sm90<true, K0>(p, stream);"),
              "128x128 tiles, 512 of them, unsplit: the wgmma kernel (the default since run 171)");
    cr_expect_null(strstr(h, "cublasLt"));
    free(h);
    compiled_graph cg;
    char *yaml = read_text("build/libgemm-fp32/f32lin.yaml");
    compile_yaml(&cg, yaml);
    free(yaml);
    ts_plan *p = &cg.out.plans[0];
    cr_assert_eq(p->nk, 1);
    ts_kernel *k = &p->k[0];
    cr_expect(k->cfg.tf32x3 && !k->cfg.library);
    ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
    int n = ts_config_variants(&cg.c.g, p, k, true, 132, alt, TS_CONFIG_MAX_VARIANTS);
    cr_assert_eq(n, 3, "the 64x64 tiles, the 128x128 ones by mma.sync, and cuBLASLt");
    cr_expect(!alt[0].library && alt[0].tile_m == 64 && alt[0].tf32x3);
    cr_expect(!alt[1].library && alt[1].tile_m == 128 && !alt[1].f32_wgmma);
    cr_expect(alt[2].library);
    char *wg = emit_text(&cg, p);
    cr_expect(strstr(wg, "err = tsg90::launch_gemm_f32_sm90<true, K0>(p, stream);"), "the wgmma kernel's call");
    cr_expect(strstr(wg, "// ---- gemm_f32_sm90.cuh"), "and its template");
    k->cfg = alt[1];
    char *ms = emit_text(&cg, p);
    cr_expect(strstr(ms, "err = tsg::launch_gemm_f32<128, 128, 32, 2, 4, 4, true, false, K0, 1>(p, stream);"),
              "the mma.sync variant's call");
    free(ms);
    k->cfg = alt[2];
    char *buf = emit_text(&cg, p);
    cr_expect(strstr(buf, "lt.ab_type = CUDA_R_32F;"));
    cr_expect(strstr(buf, "lt.act = tslt::kRelu;"));
    cr_expect(strstr(buf, "err = tsg90::launch_gemm_f32_sm90<true, K0>(p, stream);"), "the own fp32 kernel as the fallback");
    FILE *f2 = fopen("build/libgemm-fp32/f32lin.cuh", "w");
    fputs(buf, f2);
    fclose(f2);
    free(buf);
    f2 = fopen("build/libgemm-fp32/f32wg.cuh", "w"); /* the same graph's header under another name, wgmma form */
    fputs(wg, f2);
    fclose(f2);
    free(wg);
    free_compiled(&cg);
    cr_assert_eq(system("cd build/libgemm-fp32 && printf '#define TSOPT_F32LIN_IMPLEMENTATION\\n#include "
                        "\"f32lin.cuh\"\\n' > impl.cu && nvcc -std=c++17 -Werror all-warnings "
                        "-gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC -shared impl.cu -o libimpl.so -lcublasLt "
                        "-Xlinker --no-undefined"), 0, "nvcc failed");
    /* the wgmma form for sm_90a with its fallback for sm_80, no cuBLASLt */
    cr_assert_eq(system("cd build/libgemm-fp32 && printf '#define TSOPT_F32LIN_IMPLEMENTATION\\n#include "
                        "\"f32wg.cuh\"\\n' > wg.cu && nvcc -std=c++17 -Werror all-warnings "
                        "-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 -Xcompiler -fPIC "
                        "-shared wg.cu -o libwg.so -lcuda -Xlinker --no-undefined"), 0, "nvcc failed on the wgmma form");
}

/* `A.T @ B` (A stored [k, m]), fp16: the own templates read A as it is (A_KM: wgmma's imm-trans-a, the fallback's
 * ldmatrix.trans) — one GEMM kernel, no copy, with or without --allow-cublas, and nothing links cuBLASLt. */
Test(libgemm, a_transposed_fp16_a_is_read_as_it_is_by_the_own_templates) {
    cr_assert_eq(system("mkdir -p build/libgemm-at"), 0);
    tsopt_result r = run_tsopt("compile -o build/libgemm-at bench/heldout/matmul_at.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect(strstr(r.out, "1    baseline (one kernel per op)          1 "), "one GEMM, no copy: %s", r.out);
    cr_expect_null(strstr(r.out, "map [m,k]; gemm [m,n] over k"), "no copy of A: %s", r.out);
    free(r.out);
    char *h = read_text("build/libgemm-at/matmul_at.cuh");
    cr_expect(strstr(h, "p.lda = (int64_t)2048;"), "lda: A's stride along k");
    cr_expect(strstr(h, "tsg90::launch_gemm_sm90<__half, 128, 256, 4, 1, true, false, K0, false, false, true>(p, stream);"),
              "A_KM on the wgmma kernel");
    cr_expect(strstr(h, "tsg::launch_gemm<__half, 128, 256, 64, 2, 4, 3, true, false, K0, 1, false, true, tst::kOtherCode>(p, stream);"),
              "and on its mma.sync fallback");
    cr_expect_null(strstr(h, "cublasLt"));
    free(h);
}

/* The same with fp32 operands: the own fp32 template reads A k-contiguous, so the plan copies it first; with
 * --allow-cublas a plan whose one GEMM cuBLASLt runs reading A as it is (its op T) is a candidate too — ranked
 * below the copy + 3xTF32 GEMM here, cuBLASLt's exact-fp32 SGEMM being the slower of the two. */
Test(libgemm, a_transposed_fp32_a_is_read_as_it_is_by_cublaslt_when_allowed) {
    cr_assert_eq(system("mkdir -p build/libgemm-at32"), 0);
    FILE *f = fopen("build/libgemm-at32/at32.yaml", "w");
    fputs("graph: at32\naxes: {m: 2048, k: 4096, n: 2048}\ninputs:\n  A: {dtype: fp32, shape: [k, m]}\n"
          "  B: {dtype: fp32, shape: [k, n]}\nops:\n  - {name: At, op: permute, args: [A], order: [m, k]}\n"
          "  - {name: Y, op: matmul, args: [At, B], over: k}\noutputs: [Y]\n", f);
    fclose(f);
    tsopt_result r = run_tsopt("compile -o build/libgemm-at32 build/libgemm-at32/at32.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect(strstr(r.out, "map [m,k]; gemm [m,n] over k"), "the copy of A: %s", r.out);
    cr_expect_null(strstr(r.out, "x  gemm [m,n] over k\n"), "no one-kernel plan without cuBLASLt: %s", r.out);
    free(r.out);
    r = run_tsopt("compile --allow-cublas -o build/libgemm-at32 build/libgemm-at32/at32.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect(strstr(r.out, "map [m,k]; gemm [m,n] over k"), "the copy + 3xTF32 GEMM, chosen: %s", r.out);
    cr_expect(strstr(r.out, "x  gemm [m,n] over k\n"), "one GEMM, cuBLASLt's: %s", r.out);
    free(r.out);
}

/* Every bench and held-out graph compiles with --allow-cublas: a plan transform after the configuration choice (row
 * statistics folded into a GEMM, padded operands) never leaves a GEMM configured for cuBLASLt that cuBLASLt cannot
 * run (the emitter asserts it). */
Test(libgemm, every_bench_graph_compiles_with_the_flag, .timeout = 600) {
    cr_assert_eq(system("mkdir -p build/libgemm-all"), 0);
    int rc = system("for g in bench/graphs/*.yaml bench/heldout/*.yaml; do "
                    "build/tsopt compile --allow-cublas -o build/libgemm-all $g > build/libgemm-all/log 2>&1 || "
                    "{ echo \"$g failed\"; tail -n 3 build/libgemm-all/log; exit 1; }; done");
    cr_expect_eq(rc, 0);
}

/* A plan whose GEMM is configured for cuBLASLt but which cuBLASLt cannot run (here: a SiLU epilogue) is refused by
 * the emitter with a reason, never emitted or asserted on. */
Test(libgemm, a_gemm_cublaslt_cannot_run_is_refused_by_the_emitter) {
    compiled_graph cg;
    compile_gemm(&cg, "  - {name: Y, op: silu, args: [H]}\n", "Y");
    ts_plan *p = &cg.out.plans[0];
    p->k[0].cfg.library = true;
    char *buf, *err;
    cr_expect_eq(emit_into(&cg, p, &buf, &err), -1);
    cr_assert_not_null(err);
    cr_expect(strstr(err, "kernel 1 (GEMM) is configured for cuBLASLt, which cannot run it: the epilogue is not"), "%s", err);
    free(err);
    free(buf);
    free_compiled(&cg);
}
