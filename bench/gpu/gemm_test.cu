// gemm_test.cu — validation and timing of templates/gemm.cuh on a GPU (one file, no other sources).
// For each config: fresh hash-random inputs on the device (never zeros), the output poisoned with NaN,
// our kernel, a reference (cuBLAS fp32-accumulate GEMM with fp32 output + the epilogue in a plain kernel),
// relative L2 error ‖out − ref‖/‖ref‖ ≤ 1e-2 (NaN or an unwritten element fails, and so does a write
// into the output's row padding), then the timing of ours and of cuBLAS (same GEMM(s), output in T,
// no epilogue: a baseline generous to cuBLAS), median of 25 runs with CUDA events, L2 flushed by a
// 256 MB memset before each run; then the output is checked again (a race shows as a changed error).
// Prints one line per config; exits 1 if any config fails, 2 on a CUDA/cuBLAS error.
//
// Build (from the repository root):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Werror all-warnings -I templates \
//        bench/gpu/gemm_test.cu -lcublas -o gemm_test
//   (sm_80 build: replace the -gencode with -arch=sm_80)
// Run: ./gemm_test            (./gemm_test quick: validation only, no timing, shapes at most 256x1024x1024;
//      quick K/N: only configs K, K+N, K+2N, ... of the list, so that N sanitizer processes share the work;
//      ./gemm_test decode: the decode-size set (skinny tiles, split-K), validated and timed, with the weight
//      stream's TB/s; ./gemm_test profile: the same set validated once at full size, no timing — for ncu;
//      ./gemm_test narrow: outputs 16 or 8 columns wide, several tile shapes and splits, validated and timed;
//      ./gemm_test deep: few output tiles over a long K, split-K over clusters and through memory (k_chunks))
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gemm.cuh"
#include "gemm_reference.cuh"
#include "checks.cuh"

// ---- checks -------------------------------------------------------------------------------------

static cublasHandle_t g_blas;
static void *g_flush;                       // 256 MB, written before each timed run
static const size_t kFlushBytes = 256u << 20;
static bool g_timing = true;
static bool g_decode = false;   // `decode`/`profile`: the decode-size set only (`profile`: full shapes, no timing, for ncu)
static int g_part = 0, g_parts = 1, g_config = 0;  // `quick K/N`: run config i only when i % N == K
static const int kQuickM = 256, kQuickN = 1024, kQuickK = 1024;  // `quick`: the largest shape run (see run_config)
static int g_failures = 0;


// ---- one config -------------------------------------------------------------------------------
struct Shape {
    const char *name;
    int M, N, K, batch;
    int lda_pad = 0, ldb_pad = 0, ldc_pad = 0;   // extra elements per row (strided views)
    int a_off = 0;                               // A starts this many elements into its buffer
    int64_t a_bs_pad = 0;                        // extra elements between A batches
    bool b_broadcast = false;                    // B batch stride 0
    int K2 = 0;                                  // > 0: a second operand pair (A2 M×K2, B2), C = A·B + A2·B2
    int chunks = 0;                              // > 1: split-K through memory (GemmParams::k_chunks), partials poisoned
};

// s split over `chunks` chunks of K through memory.
static Shape with_chunks(Shape s, int chunks) {
    s.chunks = chunks;
    return s;
}


struct Check {
    double rel;
    float maxerr_over_refmax;
    unsigned long long bad, pad;
};

// s with a second operand pair of K2 columns.
static Shape with_k2(Shape s, int k2) {
    s.K2 = k2;
    return s;
}

template <typename T, int BM, int BN, int BK, int WM, int WN, int ST, bool B_KN, bool DUAL, int KIND, int SPLIT = 1,
          bool TWO = false, bool A_KM = false>
static void run_config(const Shape &s, uint64_t seed) {
    if (g_config++ % g_parts != g_part) return;
    using Ep = typename EpFor<T, KIND>::type;
    static_assert(DUAL == (KIND == kSwiglu || KIND == kGated || KIND == kGatedStat), "DUAL epilogues go with DUAL configs");
    constexpr bool STATS = KIND == kRowStat || KIND == kGatedStat;
    // `quick` (validation only, for compute-sanitizer): large shapes shrink to at most kQuickM×kQuickN×kQuickK,
    // still several tiles along M and N and several trips around the K pipeline; the odd shapes run as they are.
    const bool full = g_timing || g_decode;
    const int M = full ? s.M : std::min(s.M, kQuickM), N = full ? s.N : std::min(s.N, kQuickN);
    const int K = full ? s.K : std::min(s.K, kQuickK), batch = s.batch;
    const int64_t lda = (A_KM ? M : K) + s.lda_pad, ldb = (B_KN ? N : K) + s.ldb_pad, ldc = N + s.ldc_pad;
    const int64_t a_bs = (int64_t)(A_KM ? K : M) * lda + s.a_bs_pad, b_rows = B_KN ? K : N;
    const int64_t b_bs = s.b_broadcast ? 0 : b_rows * ldb, c_bs = (int64_t)M * ldc;
    const int64_t b_batches = s.b_broadcast ? 1 : batch;

    T *A, *B0, *B1 = nullptr, *out, *res = nullptr, *blas_out;
    float *scale = nullptr, *mx = nullptr, *c0, *c1 = nullptr, *ref;
    const size_t a_n = s.a_off + (size_t)batch * a_bs, b_n = (size_t)b_batches * b_rows * ldb, c_n = (size_t)batch * c_bs;
    const size_t r_n = (size_t)batch * M * N;
    CK(cudaMalloc(&A, a_n * sizeof(T)));
    CK(cudaMalloc(&B0, b_n * sizeof(T)));
    if (DUAL) CK(cudaMalloc(&B1, b_n * sizeof(T)));
    CK(cudaMalloc(&out, c_n * sizeof(T)));
    CK(cudaMalloc(&blas_out, r_n * sizeof(T)));
    CK(cudaMalloc(&c0, r_n * sizeof(float)));
    if (DUAL) CK(cudaMalloc(&c1, r_n * sizeof(float)));
    CK(cudaMalloc(&ref, r_n * sizeof(float)));
    // cuBLAS writes the reference products with stores compute-sanitizer's initcheck does not track (TMA):
    // cleared first, its later reads of them are not 262,044 false "uninitialized" reports a config (run 38)
    CK(cudaMemset(c0, 0, r_n * sizeof(float)));
    if (DUAL) CK(cudaMemset(c1, 0, r_n * sizeof(float)));
    CK(cudaMemset(blas_out, 0, r_n * sizeof(T)));
    rand_fill(A, a_n, seed * 16 + 1, -1.f, 1.f);
    rand_fill(B0, b_n, seed * 16 + 2, -1.f, 1.f);
    if (DUAL) rand_fill(B1, b_n, seed * 16 + 3, -1.f, 1.f);
    if (KIND == kRowScale || KIND == kGated) {
        CK(cudaMalloc(&scale, (size_t)batch * M * sizeof(float)));
        rand_fill(scale, (size_t)batch * M, seed * 16 + 4, 0.5f, 1.5f);
    }
    if (KIND == kResidual) {
        CK(cudaMalloc(&res, c_n * sizeof(T)));
        rand_fill(res, c_n, seed * 16 + 5, -4.f, 4.f);
    }
    const T *Aview = A + s.a_off;
    SecondPair<T> two;   // s.K2 > 0: the second operand pair (never with DUAL or folded statistics)
    const int K2 = full ? s.K2 : std::min(s.K2, kQuickK);
    CK(two.make(B_KN, M, N, K2, batch, s.lda_pad, s.ldb_pad, s.b_broadcast, seed,
                [](T *ptr, size_t n, uint64_t sd) { rand_fill(ptr, n, sd, -1.f, 1.f); }));

    // Our kernel.
    tsg::GemmParams<T, Ep> p{};
    p.A = Aview;
    p.B0 = B0;
    p.B1 = B1;
    p.M = M, p.N = N, p.K = K, p.batch = batch;
    p.lda = lda, p.ldb = ldb, p.a_batch_stride = a_bs, p.b_batch_stride = b_bs;
    p.ep.out = out, p.ep.ldc = ldc, p.ep.batch_stride = c_bs, p.ep.n = N;
    two.describe(p);
    p.b_ready = seed & 1;   // both prologue orders (B first, or A and B together) ...
    p.a_ready = p.b_ready && (seed & 2);   // ... and the main loop before the PDL wait
    if constexpr (KIND == kRowScale) p.ep.scale = scale, p.ep.scale_batch_stride = M;
    if constexpr (KIND == kGated) p.ep.rs = scale, p.ep.rs_batch_stride = M;
    if constexpr (KIND == kResidual) p.ep.res = res, p.ep.ldr = ldc, p.ep.res_batch_stride = c_bs;
    if constexpr (STATS) p.ep.inv_k = 1.f / K, p.ep.eps = kStatEps;
    float *partials = nullptr;
    if (s.chunks > 1) {   // the chunks' sums: NaN-poisoned, so that a sum the kernel leaves out shows
        p.k_chunks = s.chunks, p.k_partials_floats = (int64_t)s.chunks * (DUAL ? 2 : 1) * batch * M * N;
        CK(cudaMalloc(&partials, (size_t)p.k_partials_floats * sizeof(float)));
        CK(cudaMemset(partials, 0xFF, (size_t)p.k_partials_floats * sizeof(float)));
        p.k_partials = partials;
    }
    const int loader = tsg::gemm_loader_bytes<T, Ep, DUAL>(p);
    auto ours = [&] { CK((tsg::launch_gemm<T, BM, BN, BK, WM, WN, ST, B_KN, DUAL, Ep, SPLIT, TWO, A_KM>(p, 0))); };
    CK(cudaMemset(out, 0xFF, c_n * sizeof(T)));   // NaN poison (0xFFFF is a NaN in f16 and bf16)
    ours();
    CK(cudaDeviceSynchronize());

    // Reference.
    blas_gemm<T>(g_blas, B_KN, A_KM, Aview, lda, a_bs, B0, ldb, b_bs, c0, CUDA_R_32F, N, (int64_t)M * N, M, N, K, batch);
    if (DUAL) blas_gemm<T>(g_blas, B_KN, A_KM, Aview, lda, a_bs, B1, ldb, b_bs, c1, CUDA_R_32F, N, (int64_t)M * N, M, N, K, batch);
    if (K2 > 0)
        blas_gemm<T>(g_blas, B_KN, A_KM, two.A2, two.lda2, two.a2_bs, two.B2, two.ldb2, two.b2_bs, c0, CUDA_R_32F, N, (int64_t)M * N, M, N,
                     K2, batch, 1.f);
    if (STATS) {   // the statistics the kernel folded itself, computed here from A
        CK(cudaMalloc(&scale, (size_t)batch * M * sizeof(float)));
        CK(cudaMalloc(&mx, (size_t)batch * M * sizeof(float)));
        ref_row_stats<T><<<256, 256>>>(Aview, lda, a_bs, M, K, batch, scale, mx);
        CK(cudaGetLastError());
    }
    ref_epilogue<T><<<1024, 256>>>(ref, c0, c1, KIND, scale, mx, res, ldc, c_bs, M, N, batch);
    CK(cudaGetLastError());

    double *sums;
    unsigned long long *counts;
    unsigned *maxbits;
    CK(cudaMalloc(&sums, 2 * sizeof(double)));
    CK(cudaMalloc(&counts, 2 * sizeof(unsigned long long)));
    CK(cudaMalloc(&maxbits, sizeof(unsigned)));
    // ref's own max |r|, for a readable max error
    std::vector<float> ref_h(r_n);
    CK(cudaMemcpy(ref_h.data(), ref, r_n * sizeof(float), cudaMemcpyDeviceToHost));
    float refmax = 0;
    for (float r : ref_h) refmax = std::max(refmax, std::fabs(r));
    auto check = [&]() {
        CK(cudaMemset(sums, 0, 2 * sizeof(double)));
        CK(cudaMemset(counts, 0, 2 * sizeof(unsigned long long)));
        CK(cudaMemset(maxbits, 0, sizeof(unsigned)));
        compare<T><<<1024, 256>>>(out, ldc, c_bs, ref, M, N, batch, sums, counts, maxbits);
        CK(cudaGetLastError());
        double sh[2];
        unsigned long long ch[2];
        unsigned mb;
        CK(cudaMemcpy(sh, sums, sizeof sh, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ch, counts, sizeof ch, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&mb, maxbits, sizeof mb, cudaMemcpyDeviceToHost));
        float mx;
        memcpy(&mx, &mb, sizeof mx);
        return Check{std::sqrt(sh[0] / std::max(sh[1], 1e-300)), refmax > 0 ? mx / refmax : mx, ch[0], ch[1]};
    };
    Check c = check();
    bool pass = c.bad == 0 && c.pad == 0 && c.rel <= 1e-2 && std::isfinite(c.rel);

    float t_ours = NAN, t_blas = NAN;
    if (g_timing) {
        t_ours = median_ms(g_flush, kFlushBytes, ours);
        t_blas = median_ms(g_flush, kFlushBytes, [&] {
            blas_gemm<T>(g_blas, B_KN, A_KM, Aview, lda, a_bs, B0, ldb, b_bs, blas_out, TypeName<T>::cu, N, (int64_t)M * N, M, N, K, batch);
            if (DUAL)
                blas_gemm<T>(g_blas, B_KN, A_KM, Aview, lda, a_bs, B1, ldb, b_bs, blas_out, TypeName<T>::cu, N, (int64_t)M * N, M, N, K,
                             batch);
            if (K2 > 0)
                blas_gemm<T>(g_blas, B_KN, A_KM, two.A2, two.lda2, two.a2_bs, two.B2, two.ldb2, two.b2_bs, blas_out, TypeName<T>::cu, N,
                             (int64_t)M * N, M, N, K2, batch, 1.f);
        });
        CK(cudaDeviceSynchronize());
        Check c2 = check();   // after 28 more runs: a race would move the error
        if (c2.bad || c2.pad || std::fabs(c2.rel - c.rel) > 1e-6 * std::max(1.0, c.rel)) {
            pass = false;
            fprintf(stdout, "  %s: error moved after the timing runs: %.3e -> %.3e (nan %llu, pad %llu)\n", s.name,
                    c.rel, c2.rel, c2.bad, c2.pad);
        }
    }
    const double flops = 2.0 * M * N * ((double)K * (DUAL ? 2 : 1) + K2) * batch;
    const double b_bytes = (double)b_n * sizeof(T) * (DUAL ? 2 : 1);   // the weights: what a decode GEMM streams
    char cfg[112];
    snprintf(cfg, sizeof cfg, "%s %s %s%s %dx%dx%d w%dx%d s%d%s %s", TypeName<T>::s, A_KM ? (B_KN ? "KM·KN" : "KM·NK") : B_KN ? "KN" : "NK", kind_name[KIND],
             DUAL ? "(dual)" : "", BM, BN, BK, WM, WN, ST, SPLIT > 1 ? (SPLIT == 2 ? " k2" : SPLIT == 4 ? " k4" : " k8") : "",
             loader == 16 ? "cp16" : loader == 4 ? "cp4" : "scalar");
    if (s.chunks > 1) snprintf(cfg + strlen(cfg), sizeof cfg - strlen(cfg), " c%d", s.chunks);
    printf("%-24s %-48s M=%-5d N=%-5d K=%-5d b=%-3d relL2 %.2e maxerr/max %.2e nan %llu pad %llu %s  ours %8.4f ms  "
           "cuBLAS %8.4f ms  %6.1f TFLOP/s  %5.2f TB/s(B)  ratio %.3f\n",
           s.name, cfg, M, N, K, batch, c.rel, c.maxerr_over_refmax, c.bad, c.pad, pass ? "PASS" : "FAIL", t_ours, t_blas,
           flops / (t_ours * 1e-3) / 1e12, b_bytes / (t_ours * 1e-3) / 1e12, t_blas / t_ours);
    fflush(stdout);
    if (!pass) g_failures++;

    two.release();
    if (partials) CK(cudaFree(partials));
    CK(cudaFree(A));
    CK(cudaFree(B0));
    if (B1) CK(cudaFree(B1));
    CK(cudaFree(out));
    CK(cudaFree(blas_out));
    CK(cudaFree(c0));
    if (c1) CK(cudaFree(c1));
    CK(cudaFree(ref));
    if (scale) CK(cudaFree(scale));
    if (mx) CK(cudaFree(mx));
    if (res) CK(cudaFree(res));
    CK(cudaFree(sums));
    CK(cudaFree(counts));
    CK(cudaFree(maxbits));
}

// ---- the configs --------------------------------------------------------------------------------
using h16 = __half;
using b16 = __nv_bfloat16;

// Decode-size GEMMs (Llama-3-8B's projections at 16 tokens and two at 1, weights [K, N]): the skinny tiles at
// several depths, widths and split-K factors, to find what limits a CTA's weight stream (bench/NOTES.md).
static void decode_configs(uint64_t seed) {
    const int m = 16;
    const Shape o{"decode O", m, 4096, 4096, 1}, down{"decode down", m, 4096, 14336, 1};
    const Shape qkv{"decode QKV", m, 6144, 4096, 1}, up{"decode gate/up", m, 14336, 4096, 1};
    run_config<h16, 16, 64, 64, 1, 4, 8, true, false, kStore, 4>(o, seed++);   // the pre-run-56 choice
    run_config<h16, 16, 64, 64, 1, 4, 3, true, false, kStore, 4>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 4>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 5, true, false, kStore, 4>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 6, true, false, kStore, 4>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 8>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 3, true, false, kStore, 8>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 2>(o, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 4, true, false, kStore, 4>(o, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 4, true, false, kStore, 8>(o, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 8, true, false, kStore, 4>(down, seed++);   // the pre-run-56 choice
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 4>(down, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 6, true, false, kStore, 4>(down, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 8>(down, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 2>(down, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 4, true, false, kStore, 4>(down, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 5, true, false, kStore, 4>(down, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 4, true, false, kStore, 8>(down, seed++);
    run_config<h16, 16, 128, 128, 1, 8, 3, true, false, kStore, 4>(down, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 8, true, false, kStore, 2>(qkv, seed++);   // the pre-run-56 choice
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 2>(qkv, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 4>(qkv, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 4, true, false, kStore, 4>(qkv, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 5, true, true, kSwiglu, 1>(up, seed++);   // the pre-run-56 choice
    run_config<h16, 16, 64, 64, 1, 4, 3, true, true, kSwiglu, 1>(up, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, true, kSwiglu, 2>(up, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 3, true, true, kSwiglu, 2>(up, seed++);
    run_config<h16, 16, 128, 64, 1, 4, 3, true, true, kSwiglu, 2>(up, seed++);
    // RMSNorm's statistics folded in, merged over split-K
    run_config<h16, 16, 64, 64, 1, 4, 5, true, false, kRowStat, 2>(qkv, seed++);
    // M = 1 (batch 1): the same weight stream
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 4>({"decode O m=1", 1, 4096, 4096, 1}, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 4>({"decode down m=1", 1, 4096, 14336, 1}, seed++);
}

// Narrow outputs (N ≤ 64: a LoRA down-projection X·A at rank 16 or 8, a router's logits): the small-GEMM
// form's 64×64 tiles with split-K (what src/config.c picks for them) against taller tiles and other splits.
static void narrow_configs(uint64_t seed) {
    for (const Shape &s : {Shape{"narrow lora X.A", 4096, 16, 4096, 1}, Shape{"narrow adapter", 2048, 8, 3072, 1}}) {
        run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 4>(s, seed++);   // the small-GEMM form (run 74)
        run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 1>(s, seed++);
        run_config<h16, 64, 64, 64, 1, 4, 4, true, false, kStore, 2>(s, seed++);
        run_config<h16, 64, 64, 64, 4, 1, 4, true, false, kStore, 1>(s, seed++);
        run_config<h16, 64, 64, 64, 4, 1, 4, true, false, kStore, 2>(s, seed++);
        run_config<h16, 128, 64, 64, 4, 1, 4, true, false, kStore, 1>(s, seed++);
        run_config<h16, 128, 64, 64, 4, 1, 4, true, false, kStore, 2>(s, seed++);
        run_config<h16, 128, 64, 64, 8, 1, 3, true, false, kStore, 1>(s, seed++);
        run_config<h16, 32, 64, 64, 2, 2, 6, true, false, kStore, 1>(s, seed++);
    }
}

// Small static GEMMs (gemm_sm90_test small has the wgmma forms on the same shapes): the small-tile form config.c
// gives them (64×64 tiles, 1×4 warps, split-K when there are few tiles) against 2×2 warps and taller tiles.
static void small_configs(uint64_t seed) {
    const Shape shapes[] = {{"small 1024x512 k1024", 1024, 512, 1024, 1},
                            {"small 128x512 k1024", 128, 512, 1024, 1},
                            {"small 1024x1024 k4096", 1024, 1024, 4096, 1},
                            {"small 4096x256 k1024", 4096, 256, 1024, 1},
                            {"small 256x4096 k1024", 256, 4096, 1024, 1}};
    for (const Shape &s : shapes) {
        run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 2>(s, seed++);   // config.c's choice for the first
        run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 1>(s, seed++);
        run_config<h16, 64, 64, 64, 2, 2, 6, true, false, kStore, 1>(s, seed++);
        run_config<h16, 64, 64, 64, 2, 2, 6, true, false, kStore, 2>(s, seed++);
        run_config<h16, 128, 64, 64, 2, 2, 4, true, false, kStore, 2>(s, seed++);
        run_config<h16, 64, 128, 64, 2, 2, 4, true, false, kStore, 2>(s, seed++);
    }
}

// Few output tiles over a long K (KernelBench's 256×256 over K = 524288): config.c's deep variant (64×64 tiles,
// split-K over clusters of 8) beside split-K through memory (k_chunks), and the chunked form's edges: odd sizes, the
// dual form, a batch with a residual, the 4-byte loader (`deep`).
static void deep_configs(uint64_t seed) {
    const Shape deep{"deep 256x256 k524288", 256, 256, 524288, 1};
    run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 8>(deep, seed++);   // the deep variant before chunks
    for (int c : {2, 4, 8})   // 8: what config.c's deep variant takes (sk_chunks)
        run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 8>(with_chunks(deep, c), seed++);
    for (int c : {4, 8})
        run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore, 8>(with_chunks(deep, c), seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore, 4>(with_chunks(deep, 8), seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore, 8>(with_chunks({"deep NK", 256, 256, 524288, 1}, 4), seed++);
    run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 2>(with_chunks({"deep odd", 77, 130, 70001, 1, 0, 0, 3}, 3), seed++);
    run_config<b16, 64, 64, 64, 1, 4, 6, true, true, kSwiglu, 4>(with_chunks({"deep dual bf16", 256, 192, 65536, 1}, 3), seed++);
    run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kResidual, 2>(
        with_chunks({"deep batched residual", 200, 384, 32000, 3, 64, 0, 8, 0, 72}, 5), seed++);
    run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 8>(with_chunks({"deep 4-byte", 130, 200, 40002, 1}, 2), seed++);
    run_config<h16, 64, 64, 64, 1, 4, 6, true, false, kStore, 1>(with_chunks({"deep no cluster", 128, 128, 65536, 1}, 16), seed++);
}

// An M-major A (A stored [k, m]: `A.T @ B`; ldmatrix.trans of BK×BM tiles): both B layouts, bf16, the dual
// form, edges with a padded lda, a batch with gaps, and each loader (16-byte, 4-byte: an even lda that is
// not a multiple of 8, element-wise: an odd one). Returns the next seed.
static uint64_t a_km_configs(uint64_t seed) {
    constexpr bool KM = true;
    run_config<h16, 128, 256, 64, 2, 4, 3, true, false, kStore, 1, false, KM>({"A^T matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 64, 2, 4, 3, true, false, kStore>({"(A k-major) matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore, 1, false, KM>({"A^T B_NK", 1024, 4096, 4096, 1}, seed++);
    run_config<b16, 128, 128, 64, 2, 4, 3, true, true, kSwiglu, 1, false, KM>({"A^T swiglu bf16", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore, 1, false, KM>({"A^T odd (lda 80)", 77, 1000, 1000, 1, 3, 0, 8}, seed++);
    run_config<b16, 128, 256, 64, 2, 4, 3, false, false, kRowScale, 1, false, KM>(
        {"A^T batched NK rowscale", 333, 700, 448, 3, 3, 16, 0, 0, 72}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore, 1, false, KM>({"A^T m=1002 4-byte", 1002, 520, 600, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kResidual, 1, false, KM>({"A^T m=1001 scalar", 1001, 520, 600, 1}, seed++);
    return seed;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "quick") == 0) g_timing = false;
    if (argc > 1 && strcmp(argv[1], "decode") == 0) g_decode = true;
    if (argc > 1 && strcmp(argv[1], "profile") == 0) g_decode = true, g_timing = false;
    const bool narrow = argc > 1 && strcmp(argv[1], "narrow") == 0, small = argc > 1 && strcmp(argv[1], "small") == 0;
    const bool akm = argc > 1 && strcmp(argv[1], "akm") == 0;   // the M-major A set alone, timed
    const bool deep = argc > 1 && strcmp(argv[1], "deep") == 0;  // few tiles over a long K: split-K through memory
    if (!g_timing && argc > 2 && (sscanf(argv[2], "%d/%d", &g_part, &g_parts) != 2 || g_parts < 1 || g_part < 0 ||
                                  g_part >= g_parts)) {
        fprintf(stderr, "usage: %s quick [K/N] (0 <= K < N)\n", argv[0]);
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, %zu KB smem/block opt-in\n", prop.name, prop.multiProcessorCount,
           prop.sharedMemPerBlockOptin / 1024);
    CKB(cublasCreate(&g_blas));
    CK(cudaMalloc(&g_flush, kFlushBytes));
    uint64_t seed = 1;
    if (g_decode || narrow || small || akm || deep) {
        if (narrow) narrow_configs(seed);
        else if (deep) deep_configs(seed);
        else if (small) small_configs(seed);
        else if (akm) a_km_configs(seed);
        else decode_configs(seed);
        CKB(cublasDestroy(g_blas));
        CK(cudaFree(g_flush));
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }

    // The seed's benchmark GEMMs (fp16, B = weight [d, n]), two tile shapes each for the big one.
    run_config<h16, 128, 256, 64, 2, 4, 3, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 64, 2, 4, 4, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 3, true, true, kSwiglu>({"swiglu", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 256, 64, 2, 4, 3, true, false, kRowScale>({"rmsnorm(flashnorm)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 3, true, true, kGated>({"rmsnorm_mlp", 1024, 1024, 1024, 1}, seed++);
    // Row statistics of A folded inside the GEMM (a sum and a max; dual: RMSNorm's scale), read from A's rows.
    run_config<h16, 128, 256, 64, 2, 4, 3, true, false, kRowStat>({"rmsnorm(stats)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 3, true, true, kGatedStat>({"rmsnorm_mlp(stats)", 1024, 1024, 1024, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kRowStat>({"k=1001 rowstat", 300, 520, 1001, 1, 0, 0, 3}, seed++);
    run_config<b16, 128, 128, 64, 2, 4, 4, false, false, kRowStat>({"batched NK rowstat", 200, 384, 320, 4, 64, 16, 8, 0, 72}, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 8, true, false, kRowStat>({"m=5 skinny rowstat", 5, 4096, 4096, 1}, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 6, true, true, kGatedStat>({"m=3 skinny gatedstat", 3, 1000, 1000, 1}, seed++);
    // ... merged over a split-K cluster (each rank folds its share of k; rank 0 adds the partials)
    run_config<h16, 16, 64, 64, 1, 4, 5, true, false, kRowStat, 2>({"m=5 skinny rowstat k2", 5, 4096, 4096, 1}, seed++);
    run_config<b16, 16, 64, 64, 1, 4, 4, true, false, kRowStat, 4>({"m=16 skinny rowstat k4", 16, 1000, 1000, 1}, seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, true, kGatedStat, 2>({"m=7 skinny gatedstat k2", 7, 1000, 1001, 1}, seed++);
    // B_NK (K contiguous): a plain one and batched attention scores Q·Kᵀ (h=16, t=1024, d_h=128).
    // two operand pairs, C = A·B + A2·B2: a 16-wide second pair, a scalar one (K2 = 13) batched over NK weights, and
    // the skinny form with split-K over both pairs' K tiles
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore, 1, true>(with_k2({"two-pair", 1000, 1024, 1000, 1}, 16), seed++);
    run_config<b16, 128, 128, 64, 2, 4, 3, false, false, kResidual, 1, true>(
        with_k2({"two-pair scalar NK", 200, 384, 320, 2, 8, 16, 0}, 13), seed++);
    run_config<h16, 16, 64, 64, 1, 4, 4, true, false, kStore, 2, true>(with_k2({"m=5 skinny two-pair k2", 5, 4096, 4096, 1}, 16), seed++);
    run_config<h16, 128, 256, 64, 2, 4, 3, false, false, kStore>({"matmul B_NK", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore>({"scores Q.K^T", 1024, 1024, 128, 16}, seed++);
    // bf16
    run_config<b16, 128, 256, 64, 2, 4, 3, true, false, kStore>({"matmul bf16", 1024, 4096, 4096, 1}, seed++);
    run_config<b16, 128, 128, 64, 2, 4, 3, true, true, kSwiglu>({"swiglu bf16", 1024, 2048, 2048, 1}, seed++);
    // Odd sizes (edges in every dim), one row, the fallback loader (K=1001: rows not 16-byte aligned).
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore>({"odd", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore>({"odd B_NK", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore>({"m=1", 1, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore>({"k=1001 fallback", 300, 520, 1001, 1, 0, 0, 3}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore>({"k=1001 fallback NK", 300, 517, 1001, 1}, seed++);
    run_config<b16, 128, 128, 64, 2, 4, 3, true, true, kGated>({"k=1001 dual bf16", 130, 260, 1001, 1}, seed++);
    run_config<h16, 128, 256, 64, 2, 4, 3, true, false, kStore>({"K=12 N=1003 (partial)", 200, 1003, 12, 1, 4, 5, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore>({"misaligned A ptr", 256, 512, 512, 1, 0, 0, 0, 1}, seed++);
    // Even K that is not a multiple of 8 (rows 4-byte, not 16-byte aligned): the 4-byte cp.async loader.
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kStore>({"k=2500 4-byte loader", 300, 520, 2500, 1, 0, 0, 3}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore>({"k=2502 4-byte loader NK", 300, 517, 2502, 1}, seed++);
    run_config<b16, 128, 128, 64, 2, 4, 3, true, true, kGated>({"k=1002 dual bf16 4-byte", 130, 260, 1002, 1}, seed++);
    run_config<h16, 128, 128, 64, 2, 4, 4, false, false, kStore>({"linear 1000x3000x2500 4-byte", 1000, 3000, 2500, 1}, seed++);
    // Batched, strided views: padded lda, gaps between A batches, residual epilogue, padded ldc.
    run_config<h16, 128, 128, 64, 2, 4, 4, true, false, kResidual>({"batched residual", 200, 384, 320, 4, 64, 0, 8, 0, 72},
                                                                  seed++);
    run_config<b16, 128, 256, 64, 2, 4, 3, false, false, kRowScale>({"batched NK rowscale", 333, 700, 448, 3, 8, 16, 0},
                                                                     seed++);
    run_config<h16, 128, 128, 64, 2, 4, 3, true, true, kSwiglu>({"batched bcast-B swiglu", 100, 256, 192, 5, 0, 0, 0, 0, 0, true},
                                                                seed++);

    a_km_configs(seed);

    CKB(cublasDestroy(g_blas));
    CK(cudaFree(g_flush));
    printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
    return g_failures ? 1 : 0;
}
