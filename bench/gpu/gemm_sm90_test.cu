// gemm_sm90_test.cu — validation and timing of templates/gemm_sm90.cuh (TMA + wgmma, sm_90a) on an H100/H200
// (one file, no other sources). Same method as gemm_test.cu: per config fresh hash-random inputs on the device
// (never zeros), the output poisoned with NaN, our kernel, a reference (cuBLAS fp32-accumulate GEMM with fp32
// output + the epilogue in a plain kernel), relative L2 error ‖out − ref‖/‖ref‖ ≤ 1e-2 (NaN or an unwritten
// element fails, and so does a write into the output's row padding), then the timing of ours and of cuBLAS
// (same GEMM(s), output in T, no epilogue: a baseline generous to cuBLAS; DUAL: the sum of two cuBLAS GEMMs),
// median of 25 runs with CUDA events, L2 flushed by a 256 MB memset before each run; then the output is
// checked again (a race shows as a changed error). Also checked: which path ran ("wgmma" or "fallback", the
// mma.sync kernel) against what the config expects — an unexpected path is a FAIL.
// Prints one line per config; exits 1 if any config fails, 2 on a CUDA/cuBLAS error (the message names the
// call; with TSG90_WATCHDOG a pipeline barrier stuck for ~4 s traps, so a deadlock shows as a launch failure on
// the line of the config that was running, whose name is printed before its launch).
// The cluster (CM=2, TMA multicast) configs run last: if one of them breaks the CUDA context, the lines
// above it are still complete.
//
// Build (from the repository root):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates bench/gpu/gemm_sm90_test.cu -lcublas -o gemm_sm90_test
//   (add -Werror all-warnings -Xptxas -v to see the resource report; it builds warning-free)
// Run: ./gemm_sm90_test          (quick: validation only, no timing, large shapes cut to 256x1024x1024; cluster:
//      CM=1 against CM=2 on large shapes and a K sweep over one wave of tiles; one: the bench matmul alone,
//      for ncu, or `one M N K`; epilogue: each large shape with its stores and with them skipped (kDiscard); quick K/N: only configs K, K+N, K+2N, ... of the list, so that N sanitizer processes share
//      the work; twopair: the two-operand-pair set alone, timed)
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define TSG90_WATCHDOG 1   // a deadlocked barrier traps (~4 s) instead of hanging
#include "gemm_sm90.cuh"
#include "gemm_reference.cuh"
#include "checks.cuh"

// ---- checks -------------------------------------------------------------------------------------

static cublasHandle_t g_blas;
static void *g_flush;                       // 256 MB, written before each timed run
static const size_t kFlushBytes = 256u << 20;
static bool g_timing = true;
static int g_part = 0, g_parts = 1, g_config = 0;  // `quick K/N`: run config i only when i % N == K
static const int kQuickM = 256, kQuickN = 1024, kQuickK = 1024;  // `quick`: the largest shape run (see run_config)
static const int64_t kQuickOutputs = 16 << 20;
static int g_failures = 0;


// ---- one config -------------------------------------------------------------------------------
struct Shape {
    const char *name;
    int M, N, K, batch;
    int lda_pad = 0, ldb_pad = 0, ldc_pad = 0;   // extra elements per row (strided views)
    int a_off = 0;                               // A starts this many elements into its buffer
    int64_t a_bs_pad = 0;                        // extra elements between A batches
    bool b_broadcast = false;                    // B batch stride 0
    bool expect_wgmma = true;                    // false: the launcher must fall back to tsg::launch_gemm
    int K2 = 0;                                  // > 0: a second operand pair (A2 M×K2, B2), C = A·B + A2·B2
};


struct Check {
    double rel;
    float maxerr_over_refmax;
    unsigned long long bad, pad;
};


static const char *path_name(int r) { return r == 0 ? "wgmma" : r == 1 ? "fallback(align)" : "fallback(encode)"; }

// s with a second operand pair of K2 columns.
static Shape with_k2(Shape s, int k2) {
    s.K2 = k2;
    return s;
}

template <typename T, int BM, int BN, int ST, int CM, bool B_KN, bool DUAL, int KIND, bool PP, bool TWO, bool A_KM>
static void run_config_impl(const Shape &s, uint64_t seed) {
    using Ep = typename EpFor<T, KIND>::type;
    static_assert(DUAL == (KIND == kSwiglu || KIND == kGated || KIND == kGatedStat), "DUAL epilogues go with DUAL configs");
    constexpr bool STATS = KIND == kRowStat || KIND == kGatedStat;
    // `quick` (validation only, for compute-sanitizer): shapes with K > kQuickK or more than kQuickOutputs
    // outputs shrink to at most kQuickM×kQuickN×kQuickK, still several tiles along M and N and several trips
    // around the K pipeline; the others (odd shapes, more tiles than SMs at a small K) run as they are.
    const bool clip = !g_timing && (s.K > kQuickK || (int64_t)s.M * s.N * s.batch > kQuickOutputs);
    const int M = clip ? std::min(s.M, kQuickM) : s.M, N = clip ? std::min(s.N, kQuickN) : s.N;
    const int K = clip ? std::min(s.K, kQuickK) : s.K, batch = s.batch;
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
    const int K2 = clip ? std::min(s.K2, kQuickK) : s.K2;
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
#ifndef GEMM_SM90_TEST_NO_TWO   // (and a_ready, from the same change)
    two.describe(p);
    p.a_ready = p.b_ready = seed & 1;   // odd seeds: the main loop before the PDL wait, the epilogue after it
#endif
    if constexpr (KIND == kRowScale) p.ep.scale = scale, p.ep.scale_batch_stride = M;
    if constexpr (KIND == kGated) p.ep.rs = scale, p.ep.rs_batch_stride = M;
    if constexpr (KIND == kResidual) p.ep.res = res, p.ep.ldr = ldc, p.ep.res_batch_stride = c_bs;
    if constexpr (STATS) p.ep.inv_k = 1.f / K, p.ep.eps = kStatEps;
#ifndef GEMM_SM90_TEST_NO_PUBLISH   // (templates from before the published row statistics fold them)
    float *stats[4] = {};   // where the wgmma kernel publishes each row's statistics: NaN-poisoned
    for (int o = 0; o < tsg::kRowOuts<Ep>; ++o) {
        CK(cudaMalloc(&stats[o], (size_t)batch * M * sizeof(float)));
        CK(cudaMemset(stats[o], 0xFF, (size_t)batch * M * sizeof(float)));
        p.row_stats[o] = stats[o];
    }
#endif
    char cfg[112];
    snprintf(cfg, sizeof cfg, "%s %s%s %s%s %dx%d%s s%d cm%d%s", TypeName<T>::s, A_KM ? "KM·" : "", B_KN ? "KN" : "NK",
             kind_name[KIND], DUAL ? "(dual)" : "", BM, BN, DUAL ? "x2" : "", ST, CM, PP ? " pp" : "");
    printf("%-24s %-36s ... ", s.name, cfg);   // so that a crash inside the config still names it
    fflush(stdout);
#ifdef GEMM_SM90_TEST_NO_PP
    auto launch = [&] { return tsg90::launch_gemm_sm90<T, BM, BN, ST, CM, B_KN, DUAL, Ep>(p, 0); };
#elif defined(GEMM_SM90_TEST_NO_TWO)
    auto launch = [&] { return tsg90::launch_gemm_sm90<T, BM, BN, ST, CM, B_KN, DUAL, Ep, PP>(p, 0); };
#else
    auto launch = [&] { return tsg90::launch_gemm_sm90<T, BM, BN, ST, CM, B_KN, DUAL, Ep, PP, TWO, A_KM>(p, 0); };
#endif
    auto ours = [&] { CK(launch()); };
    CK(cudaMemset(out, 0xFF, c_n * sizeof(T)));   // NaN poison (0xFFFF is a NaN in f16 and bf16)
    CK(launch());
    const int path = tsg90::last_fallback_reason();
    CK(cudaDeviceSynchronize());
    const bool path_ok = (path == 0) == s.expect_wgmma;

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
    constexpr bool PROBE = KIND == kDiscard;   // a timing probe: nothing to validate (gemm_reference.cuh)
    Check c = PROBE ? Check{0, 0, 0, 0} : check();
    bool pass = c.bad == 0 && c.pad == 0 && c.rel <= 1e-2 && std::isfinite(c.rel) && path_ok;

    float t_ours = NAN, t_blas = NAN;
    bool moved = false;
    Check c2 = c;
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
        c2 = PROBE ? c : check();   // after 28 more runs: a race would move the error
        if (c2.bad || c2.pad || std::fabs(c2.rel - c.rel) > 1e-6 * std::max(1.0, c.rel)) {
            pass = false;
            moved = true;
        }
    }
    const double flops = 2.0 * M * N * ((double)K * (DUAL ? 2 : 1) + K2) * batch;
    printf("M=%-5d N=%-5d K=%-5d b=%-3d %-16s relL2 %.2e maxerr/max %.2e nan %llu pad %llu %s  ours %8.4f ms  "
           "cuBLAS %8.4f ms  %6.1f TFLOP/s  ratio %.3f%s\n",
           M, N, K, batch, path_name(path), c.rel, c.maxerr_over_refmax, c.bad, c.pad, pass ? "PASS" : "FAIL", t_ours, t_blas,
           flops / (t_ours * 1e-3) / 1e12, t_blas / t_ours, path_ok ? "" : "  UNEXPECTED PATH");
    if (moved)
        printf("  %s: error moved after the timing runs: %.3e -> %.3e (nan %llu, pad %llu)\n", s.name, c.rel, c2.rel,
               c2.bad, c2.pad);
    fflush(stdout);
    if (!pass) g_failures++;

    two.release();
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
#ifndef GEMM_SM90_TEST_NO_PUBLISH
    for (float *st : stats)
        if (st) CK(cudaFree(st));
#endif
    CK(cudaFree(sums));
    CK(cudaFree(counts));
    CK(cudaFree(maxbits));
}

template <typename T, int BM, int BN, int ST, int CM, bool B_KN, bool DUAL, int KIND, bool PP = false, bool TWO = false,
          bool A_KM = false>
static void run_config(const Shape &s, uint64_t seed) {
    if (g_config++ % g_parts != g_part) return;
#ifdef GEMM_SM90_TEST_NO_PP   // templates from before the ping-pong form (bench/gpu/gemm_ab.sh's OLD build)
    if constexpr (PP) return;
    else
#endif
#ifdef GEMM_SM90_TEST_NO_TWO   // templates from before the second operand pair (gemm_ab.sh's OLD build)
    if constexpr (TWO) return;
    else
#endif
#ifdef GEMM_SM90_TEST_NO_AKM   // templates from before the M-major A (gemm_ab.sh's OLD build)
    if constexpr (A_KM) return;
    else
#endif
        run_config_impl<T, BM, BN, ST, CM, B_KN, DUAL, KIND, PP, TWO, A_KM>(s, seed);
}

// Active clusters of 2 the device can hold for a kernel (how many of the 2-CTA clusters run in one wave).
template <typename T, int BM, int BN, int ST, bool B_KN, bool DUAL, class Ep> static void print_cluster_occupancy(const char *what) {
#ifdef GEMM_SM90_TEST_NO_PP   // templates from before the ping-pong form
    printf("cluster occupancy %s: not asked (older templates)\n", what);
#else
    using C = tsg90::Cfg<BM, BN, ST, 2, DUAL>;
#ifdef GEMM_SM90_TEST_NO_TWO
    auto kernel = tsg90::gemm_sm90_kernel<T, BM, BN, ST, 2, B_KN, DUAL, Ep, false>;
#else
    auto kernel = tsg90::gemm_sm90_kernel<T, BM, BN, ST, 2, B_KN, DUAL, Ep, false, false>;
#endif
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM));
    // the launch configuration built here, not by a template helper: gemm_ab.sh builds this file against
    // older templates too
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3(128, 1, 1), cfg.blockDim = dim3(C::THREADS, 1, 1), cfg.dynamicSmemBytes = C::SMEM;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr, cfg.numAttrs = 1;
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, kernel, &cfg);
    printf("cluster occupancy %s: %d active 2-CTA clusters (%s)\n", what, n, cudaGetErrorString(e));
    (void)cudaGetLastError();
#endif
}

// ---- the configs --------------------------------------------------------------------------------
using h16 = __half;
using b16 = __nv_bfloat16;
using tsg::StoreEpilogue;

// Row statistics with no grid counter free: takes every counter of this translation unit (keys no allocation
// has), so that the launches after it take the launcher's other path — row_stats_kernel before the GEMM, which
// then only reads the statistics — and runs stats configs through it.
static void run_stats_without_counters(uint64_t &seed) {
#ifndef GEMM_SM90_TEST_NO_PUBLISH
    for (uintptr_t i = 1; i <= tsg90::kSyncSlots; ++i) (void)tsg90::grid_sync_slot(reinterpret_cast<void *>(i << 48));
    if (tsg90::grid_sync_slot(reinterpret_cast<void *>(uintptr_t{1} << 47)) >= 0) {
        printf("grid counters: one still free after %d claims: FAIL\n", tsg90::kSyncSlots);
        g_failures++;
    }
    run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"rmsnorm(stats) no counter", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 4, 2, true, true, kGatedStat>({"odd dual gatedstat no counter", 333, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 128, 5, 1, false, false, kRowStat>({"batched NK rowstat no counter", 333, 700, 448, 3, 8, 16, 0}, seed++);
#else
    (void)seed;
#endif
}

// Two operand pairs, C = A·B + A2·B2 (a LoRA update beside its base weight): the bench LoRA's 16-wide second pair
// inside one zero-filled K tile (and the same GEMM without it, for its cost), a second pair over several tiles
// with a partial one (batched, B_NK, odd M), ping-pong, and a K2 whose rows no tensor map can describe (the
// mma.sync fallback). Returns the next seed.
static uint64_t two_pair_configs(uint64_t seed) {
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"lora base alone", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, true>(with_k2({"lora two-pair", 4096, 4096, 4096, 1}, 16), seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, true>(with_k2({"two-pair 1024", 1024, 4096, 4096, 1}, 16), seed++);
    run_config<b16, 128, 128, 5, 1, false, false, kResidual, false, true>(
        with_k2({"two-pair batched NK", 333, 700, 448, 3, 8, 16, 0}, 136), seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true, true>(with_k2({"two-pair pp", 1000, 2000, 1000, 1}, 40), seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, true>(
        with_k2({"two-pair K2=13 fallback", 300, 520, 512, 1, 0, 0, 3, 0, 0, false, false}, 13), seed++);
    return seed;
}

// An M-major A (A stored [k, m]: `A.T @ B`, a weight gradient Xᵀ·dY), read by wgmma with imm-trans-a: the held-out
// matmul_at shape and the bench matmul's, both B layouts, bf16, ping-pong (64- and 128-row tiles), a cluster of 2,
// the dual form, edges in every dimension with padded lda, batches with gaps, a row-scale epilogue, and an lda the
// tensor map cannot take (the mma.sync fallback, ldmatrix.trans). Returns the next seed.
static uint64_t a_km_configs(uint64_t seed) {
    constexpr bool KM = true;
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T matmul_at", 2048, 2048, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"(A k-major) matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, false, false, kStore, false, false, KM>({"A^T B_NK", 1024, 4096, 4096, 1}, seed++);
    run_config<b16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T bf16 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"(A k-major) 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true, false, KM>({"A^T pp", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 64, 128, 6, 1, true, false, kStore, true, false, KM>({"A^T pp 64 odd", 1000, 2000, 1000, 1, 8, 0, 8}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kStore, false, false, KM>({"A^T cluster", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 4, 1, true, true, kSwiglu, false, false, KM>({"A^T swiglu", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T odd (lda 80)", 77, 1000, 1000, 1, 3, 0, 8}, seed++);
    run_config<b16, 128, 128, 5, 1, false, false, kRowScale, false, false, KM>({"A^T batched NK rowscale", 333, 700, 448, 3, 3, 16, 0, 0, 72}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T many tiles odd", 3000, 5000, 300, 1, 8, 0, 8}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore, false, false, KM>({"A^T m=1003 fallback", 1003, 520, 600, 1, 0, 0, 0, 0, 0, false, false}, seed++);
    return seed;
}

// Small static GEMMs, as GEMM-fusion suites have them (1024 rows against a 1024×512 weight): fewer 128×256
// tiles than half the SMs, so config.c gives them a small-tile form. Here the wgmma forms with small tiles —
// ping-pong 64-row tiles (one consumer warpgroup a tile), the cooperative 128×64 — against cuBLAS; gemm_test
// small times the mma.sync forms on the same shapes.
static const Shape kSmallShapes[] = {{"small 1024x512 k1024", 1024, 512, 1024, 1},
                                     {"small 128x512 k1024", 128, 512, 1024, 1},
                                     {"small 1024x1024 k4096", 1024, 1024, 4096, 1},
                                     {"small 4096x256 k1024", 4096, 256, 1024, 1},
                                     {"small 256x4096 k1024", 256, 4096, 1024, 1}};
static void small_configs(uint64_t seed) {
    for (const Shape &s : kSmallShapes) {
        run_config<h16, 64, 64, 8, 1, true, false, kStore, true>(s, seed++);
        run_config<h16, 64, 128, 6, 1, true, false, kStore, true>(s, seed++);
        run_config<h16, 128, 64, 6, 1, true, false, kStore>(s, seed++);
        run_config<h16, 128, 128, 5, 1, true, false, kStore>(s, seed++);
    }
    // The small-GEMM configuration (128×64, 6 stages) with the epilogues a plan gives it: row statistics of A
    // folded (RMSNorm before a small projection), a residual, a row scale; bf16 and an [n, k] weight.
    run_config<h16, 128, 64, 6, 1, true, false, kRowStat>({"small rowstat", 1024, 512, 1024, 1}, seed++);
    run_config<b16, 128, 64, 6, 1, false, false, kResidual>({"small residual NK bf16", 1000, 520, 1000, 1}, seed++);
    run_config<h16, 128, 64, 6, 1, true, false, kRowScale>({"small batched rowscale", 300, 264, 512, 3}, seed++);
}

// M, N and K of s from three command-line words; false unless each is a positive integer.
static bool sizes_from_args(char **w, Shape &s) {
    return sscanf(w[0], "%d", &s.M) == 1 && sscanf(w[1], "%d", &s.N) == 1 && sscanf(w[2], "%d", &s.K) == 1 &&
           s.M >= 1 && s.N >= 1 && s.K >= 1;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "quick") == 0) g_timing = false;
    if (!g_timing && argc > 2 && (sscanf(argv[2], "%d/%d", &g_part, &g_parts) != 2 || g_parts < 1 || g_part < 0 ||
                                  g_part >= g_parts)) {
        fprintf(stderr, "usage: %s quick [K/N] (0 <= K < N)\n", argv[0]);
        return 2;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, cc %d.%d, %d SMs, %zu KB smem/block opt-in, L2 %d MB\n", prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024, prop.l2CacheSize >> 20);
    CKB(cublasCreate(&g_blas));
    CK(cudaMalloc(&g_flush, kFlushBytes));
    uint64_t seed = 1;
    if (argc > 1 && strcmp(argv[1], "twopair") == 0) {   // the two-pair set alone, timed
        two_pair_configs(seed);
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "akm") == 0) {   // the M-major A set alone, timed
        a_km_configs(seed);
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "small") == 0) {   // small static GEMMs (fewer 128x256 tiles than half the SMs)
        small_configs(seed);
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "one") == 0) {   // the bench matmul alone, or `one M N K` (for a profiler)
        Shape s{"matmul", 1024, 4096, 4096, 1};
        if (argc == 5 && !sizes_from_args(argv + 2, s)) {
            fprintf(stderr, "usage: %s one [M N K]\n", argv[0]);
            return 2;
        }
        run_config<h16, 128, 256, 4, 1, true, false, kStore>(s, seed++);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "shape") == 0) {   // `shape M N K`: config.c's single variants and the small
        Shape s{"shape", 0, 0, 0, 1};                    // ping-pong tiles, timed on one shape against cuBLAS
        if (argc != 5 || !sizes_from_args(argv + 2, s)) {
            fprintf(stderr, "usage: %s shape M N K\n", argv[0]);
            return 2;
        }
        run_config<h16, 128, 256, 4, 1, true, false, kStore>(s, seed++);
        run_config<h16, 128, 128, 5, 1, true, false, kStore>(s, seed++);
        run_config<h16, 128, 64, 6, 1, true, false, kStore>(s, seed++);
        run_config<h16, 128, 256, 4, 2, true, false, kStore>(s, seed++);
        run_config<h16, 128, 128, 5, 1, true, false, kStore, true>(s, seed++);
        run_config<h16, 64, 128, 6, 1, true, false, kStore, true>(s, seed++);
        run_config<h16, 64, 256, 4, 1, true, false, kStore, true>(s, seed++);
        run_config<h16, 64, 64, 8, 1, true, false, kStore, true>(s, seed++);
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "rowstat") == 0) {   // row statistics of A published beside the main loop, timed
        run_config<h16, 128, 256, 4, 1, true, false, kRowScale>({"rmsnorm(flashnorm)", 1024, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"rmsnorm(stats)", 1024, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 2, true, false, kRowStat>({"rmsnorm(stats)", 1024, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 1, true, false, kRowScale>({"rmsnorm 4096^3 (flashnorm)", 4096, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"rmsnorm 4096^3 (stats)", 4096, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 1, true, false, kRowScale>({"K=1024 (flashnorm)", 4096, 4096, 1024, 1}, seed++);
        run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"K=1024 (stats)", 4096, 4096, 1024, 1}, seed++);
        run_config<h16, 128, 128, 4, 1, true, true, kGated>({"rmsnorm_mlp (flashnorm)", 1024, 1024, 1024, 1}, seed++);
        run_config<h16, 128, 128, 4, 1, true, true, kGatedStat>({"rmsnorm_mlp(stats)", 1024, 1024, 1024, 1}, seed++);
        run_config<h16, 128, 128, 5, 1, true, false, kRowStat, true>({"many tiles rowstat pp", 2000, 4000, 200, 1}, seed++);
        run_config<b16, 256, 128, 4, 1, false, false, kRowStat>({"odd 256x128 rowstat", 300, 1000, 1000, 1, 0, 0, 8}, seed++);
        run_stats_without_counters(seed);
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "epilogue") == 0) {   // what the stores cost: kStore against kDiscard, timed
        const Shape shapes[] = {{"matmul", 1024, 4096, 4096, 1}, {"matmul 4096^3", 4096, 4096, 4096, 1},
                                {"gemm_gelu shape", 8192, 8192, 2048, 1}, {"4096x4096 K=1024", 4096, 4096, 1024, 1}};
        for (const Shape &s : shapes) {
            run_config<h16, 128, 256, 4, 1, true, false, kStore>(s, seed++);
            run_config<h16, 128, 256, 4, 1, true, false, kDiscard>(s, seed++);
        }
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    if (argc > 1 && strcmp(argv[1], "cluster") == 0) {   // clusters of 2 with multicast against one CTA, large shapes
        run_config<h16, 128, 256, 4, 1, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 2, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
        run_config<h16, 256, 128, 4, 2, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
        for (int k : {256, 1024, 8192}) {   // one wave of tiles: time = fixed cost + k · main-loop rate
            char name[32];
            snprintf(name, sizeof name, "1024x4096 K=%d", k);
            run_config<h16, 128, 256, 4, 1, true, false, kStore>({name, 1024, 4096, k, 1}, seed++);
            run_config<h16, 128, 256, 4, 2, true, false, kStore>({name, 1024, 4096, k, 1}, seed++);
        }
        run_config<h16, 128, 256, 4, 1, true, false, kStore>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 2, true, false, kStore>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 1, true, false, kStore>({"gemm_gelu shape", 8192, 8192, 2048, 1}, seed++);
        run_config<h16, 128, 256, 4, 2, true, false, kStore>({"gemm_gelu shape", 8192, 8192, 2048, 1}, seed++);
        run_config<h16, 128, 128, 4, 1, true, true, kSwiglu>({"swiglu", 1024, 2048, 2048, 1}, seed++);
        run_config<h16, 128, 128, 4, 2, true, true, kSwiglu>({"swiglu", 1024, 2048, 2048, 1}, seed++);
        run_config<h16, 128, 256, 4, 2, false, false, kStore>({"matmul B_NK", 1024, 4096, 4096, 1}, seed++);
        run_config<h16, 128, 256, 4, 2, true, false, kStore>({"odd (odd tile rows)", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
        printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
        return g_failures ? 1 : 0;
    }
    // Shape fields: name, M, N, K, batch, lda_pad, ldb_pad, ldc_pad, a_off, a_bs_pad, b_broadcast, expect_wgmma.

    // The goal shape (fp16, B = weight [d, n]): three tile shapes, the first one twice (timing noise).
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 256, 128, 4, 1, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 6, 1, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"matmul (again)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, false, false, kStore>({"matmul B_NK", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 256, 128, 4, 1, false, false, kStore>({"matmul B_NK", 1024, 4096, 4096, 1}, seed++);
    // The fused forms of the seed benchmarks.
    run_config<h16, 128, 128, 4, 1, true, true, kSwiglu>({"swiglu", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 64, 6, 1, true, true, kSwiglu>({"swiglu", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kRowScale>({"rmsnorm(flashnorm)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 4, 1, true, true, kGated>({"rmsnorm_mlp", 1024, 1024, 1024, 1}, seed++);
    run_config<h16, 128, 64, 6, 1, true, true, kGated>({"rmsnorm_mlp", 1024, 1024, 1024, 1}, seed++);
    run_config<h16, 128, 128, 4, 1, false, true, kSwiglu>({"swiglu B_NK", 1024, 2048, 2048, 1}, seed++);
    // Row statistics of A folded inside the GEMM from its shared-memory tiles (a sum and a max; dual: RMSNorm's
    // scale): the same shapes as rowscale / gated above, then edges in K (a partial last tile), 256-row tiles.
    run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"rmsnorm(stats)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 4, 1, true, true, kGatedStat>({"rmsnorm_mlp(stats)", 1024, 1024, 1024, 1}, seed++);
    run_config<h16, 128, 64, 6, 1, true, true, kGatedStat>({"rmsnorm_mlp(stats)", 1024, 1024, 1024, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"odd rowstat", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<b16, 256, 128, 4, 1, false, false, kRowStat>({"odd 256x128 rowstat", 300, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"K=12 rowstat (lda 16)", 200, 1003, 12, 1, 4, 5, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, false, false, kRowStat>({"batched NK rowstat", 333, 700, 448, 3, 8, 16, 0}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"k=1001 rowstat fallback", 300, 520, 1001, 1, 0, 0, 3, 0, 0, false, false}, seed++);
    // bf16
    run_config<b16, 128, 256, 4, 1, true, false, kStore>({"matmul bf16", 1024, 4096, 4096, 1}, seed++);
    run_config<b16, 128, 256, 4, 1, false, false, kStore>({"matmul bf16 B_NK", 1024, 4096, 4096, 1}, seed++);
    run_config<b16, 128, 128, 4, 1, true, true, kSwiglu>({"swiglu bf16", 1024, 2048, 2048, 1}, seed++);
    // Batched attention scores Q·Kᵀ (h=16, t=1024, d_h=128): B_NK, K = 128 (two k tiles).
    run_config<h16, 128, 128, 6, 1, false, false, kStore>({"scores Q.K^T", 1024, 1024, 128, 16}, seed++);
    // Odd sizes: edges in every dim (TMA zero fill), padded ldc.
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"odd", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 256, 4, 1, false, false, kStore>({"odd B_NK", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 256, 128, 4, 1, true, false, kStore>({"odd 256x128", 300, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<b16, 128, 128, 4, 1, false, true, kGated>({"odd dual B_NK bf16", 333, 1000, 1000, 1, 0, 0, 8}, seed++);
    seed = two_pair_configs(seed);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"m=1", 1, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"K=8 N=1003 (partial)", 200, 1003, 8, 1, 0, 5, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"K=12 N=1003 (lda 16)", 200, 1003, 12, 1, 4, 5, 1}, seed++);
    // More tiles than SMs: each persistent CTA runs several tiles, the stage ring running on across them
    // (edges, 256-row tiles, row statistics, the dual form, a two-phase functor, batches), then the sizes of
    // issue 11's acceptance.
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"many tiles odd", 3000, 5000, 300, 1, 4, 0, 8}, seed++);
    run_config<b16, 256, 128, 4, 1, false, false, kStore>({"many tiles odd 256x128", 3001, 4999, 520, 1, 8, 0, 0}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kRowStat>({"many tiles rowstat", 2000, 4000, 200, 1}, seed++);
    run_config<h16, 128, 128, 4, 1, true, true, kGated>({"many tiles dual", 2000, 4000, 200, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kResidual>({"residual 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 6, 1, false, false, kStore>({"scores 16x2048^2x128", 2048, 2048, 128, 16}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<b16, 128, 256, 4, 1, true, false, kStore>({"matmul bf16 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"gemm_gelu shape", 8192, 8192, 2048, 1}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"matmul 8192^3", 8192, 8192, 8192, 1}, seed++);
    run_config<b16, 128, 256, 4, 1, true, false, kStore>({"matmul bf16 8192^3", 8192, 8192, 8192, 1}, seed++);
    // Ping-pong (PP): the two consumer warpgroups take turns, a whole tile each (64 or 128 rows), so that one's
    // epilogue runs beside the other's main loop.
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 6, 1, true, false, kStore, true>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 64, 256, 5, 1, true, false, kStore, true>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 64, 256, 5, 1, true, false, kStore, true>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true>({"gemm_gelu shape", 8192, 8192, 2048, 1}, seed++);
    run_config<h16, 64, 256, 5, 1, true, false, kStore, true>({"gemm_gelu shape", 8192, 8192, 2048, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kResidual, true>({"residual 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true>({"matmul 8192^3", 8192, 8192, 8192, 1}, seed++);
    run_config<b16, 128, 128, 5, 1, false, false, kStore, true>({"many tiles odd 256x128", 3001, 4999, 520, 1, 8, 0, 0}, seed++);
    run_config<h16, 64, 256, 5, 1, true, false, kStore, true>({"many tiles odd", 3000, 5000, 300, 1, 4, 0, 8}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kRowStat, true>({"many tiles rowstat", 2000, 4000, 200, 1}, seed++);
    run_config<h16, 64, 128, 5, 1, true, true, kGated, true>({"many tiles dual", 2000, 4000, 200, 1}, seed++);
    run_config<h16, 64, 128, 5, 1, true, true, kSwiglu, true>({"swiglu", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 128, 5, 1, false, false, kRowScale, true>({"batched NK rowscale", 333, 700, 448, 3, 8, 16, 0}, seed++);
    run_config<h16, 128, 128, 5, 1, true, false, kStore, true>({"K=12 N=1003 (lda 16)", 200, 1003, 12, 1, 4, 5, 1}, seed++);
    run_config<h16, 64, 256, 5, 1, true, false, kStore, true>({"m=1", 1, 4096, 4096, 1}, seed++);
    // Fallbacks to the mma.sync kernel (rows not 16-byte aligned, misaligned pointer).
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"k=1001 fallback", 300, 520, 1001, 1, 0, 0, 3, 0, 0, false, false}, seed++);
    run_config<h16, 128, 256, 4, 1, false, false, kStore>({"k=1001 fallback NK", 300, 517, 1001, 1, 0, 0, 0, 0, 0, false, false}, seed++);
    run_config<b16, 128, 128, 4, 1, true, true, kGated>({"k=1001 dual bf16", 130, 260, 1001, 1, 0, 0, 0, 0, 0, false, false}, seed++);
    run_config<h16, 128, 256, 4, 1, true, false, kStore>({"misaligned A ptr", 256, 512, 512, 1, 0, 0, 0, 1, 0, false, false}, seed++);
    // Batched, strided views: padded lda, gaps between A batches, residual epilogue, padded ldc; broadcast B.
    run_config<h16, 128, 256, 4, 1, true, false, kResidual>({"batched residual", 200, 384, 320, 4, 64, 0, 8, 0, 72}, seed++);
    run_config<b16, 128, 256, 4, 1, false, false, kRowScale>({"batched NK rowscale", 333, 700, 448, 3, 8, 16, 0}, seed++);
    run_config<h16, 128, 128, 4, 1, true, true, kSwiglu>({"batched bcast-B swiglu", 100, 256, 192, 5, 0, 0, 0, 0, 0, true}, seed++);

    seed = a_km_configs(seed);

    // Clusters of 2 with TMA multicast of B (last: riskiest).
    print_cluster_occupancy<h16, 128, 256, 4, true, false, StoreEpilogue<h16>>("128x256 s4");
    run_config<h16, 128, 256, 4, 2, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 256, 128, 4, 2, true, false, kStore>({"matmul", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 2, false, false, kStore>({"matmul B_NK", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 4, 2, true, true, kSwiglu>({"swiglu", 1024, 2048, 2048, 1}, seed++);
    run_config<h16, 128, 128, 4, 2, true, true, kGated>({"rmsnorm_mlp", 1024, 1024, 1024, 1}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kRowScale>({"rmsnorm(flashnorm)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kRowStat>({"rmsnorm(stats)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 4, 2, true, true, kGatedStat>({"odd dual gatedstat", 333, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<b16, 128, 256, 4, 2, true, false, kStore>({"matmul bf16", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kStore>({"odd (odd tile rows)", 77, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 256, 4, 2, false, false, kStore>({"odd B_NK", 333, 1000, 1000, 1, 0, 0, 8}, seed++);
    run_config<h16, 128, 128, 4, 2, true, true, kSwiglu>({"batched bcast-B swiglu", 300, 256, 192, 5, 0, 0, 0, 0, 0, true}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kStore>({"matmul (again)", 1024, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kStore>({"many tiles odd", 3000, 5000, 300, 1, 4, 0, 8}, seed++);
    run_config<h16, 128, 128, 4, 2, true, true, kSwiglu>({"many tiles dual", 1000, 2000, 200, 3, 0, 0, 0, 0, 0, true}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kStore>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 256, 4, 2, true, false, kStore>({"gemm_gelu shape", 8192, 8192, 2048, 1}, seed++);
    run_config<h16, 128, 128, 5, 2, true, false, kStore, true>({"matmul 4096^3", 4096, 4096, 4096, 1}, seed++);
    run_config<h16, 128, 128, 5, 2, true, false, kStore, true>({"many tiles odd", 3000, 5000, 300, 1, 4, 0, 8}, seed++);
    run_config<h16, 64, 128, 5, 2, true, true, kSwiglu, true>({"many tiles dual", 1000, 2000, 200, 3, 0, 0, 0, 0, 0, true}, seed++);
    run_stats_without_counters(seed);   // last: no stats config after it publishes

    CKB(cublasDestroy(g_blas));
    CK(cudaFree(g_flush));
    printf("%s: %d config(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
    return g_failures ? 1 : 0;
}
