// gemm_f32_test.cu — validation and timing of templates/gemm_f32.cuh (fp32 GEMM by 3xTF32) on a GPU.
// For each config: fresh hash-random inputs on the device (never zeros), the output poisoned with NaN, our
// kernel, a float64 reference computed on the device (one thread an output), relative L2 error
// ‖out − ref‖/‖ref‖ ≤ 6e-7·√K (fp32 accumulation: 7.2e-6 at K = 1024 and 2.9e-5 at 4096 on the H200, run 124;
// a plain TF32 product lands near 2.6e-4 and fails; NaN or an unwritten element fails), then timings of ours,
// cuBLAS SGEMM (fp32 on the CUDA cores, PyTorch's default for fp32 matmuls) and cuBLAS with TF32 tensor-op
// math (the errors of both printed too), median of 20 runs with CUDA events,
// the L2 flushed by a 256 MB memset before each. Exits 1 if any config fails, 2 on a CUDA/cuBLAS error.
// Every single-form case runs gemm_f32_sm90.cuh's wgmma kernel too (validated and timed the same way: "sm90").
// Build (repository root): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates \
//                           bench/gpu/gemm_f32_test.cu -lcublas -lcuda -o gemm_f32_test
// Run: ./gemm_f32_test [quick]   (quick: validation only)
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gemm_f32.cuh"
#include "gemm_f32_sm90.cuh"
#include "checks.cuh"

__device__ __forceinline__ uint32_t hash32(uint64_t x) {
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull, x ^= x >> 33;
    return (uint32_t)x;
}
__global__ void fill_random(float *p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (hash32(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
__global__ void fill_nan(float *p, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = NAN;
}

// The DUAL form's test epilogue: out = silu(acc0) · acc1 (a gated MLP's).
struct GatedEpilogue {
    float *out;
    int64_t ob, om;
    int n;
    template <typename T> __device__ void apply(int b, int row, int col, float v0, float v1, float w0, float w1) const {
        float *o = out + b * ob + row * om + col;
        o[0] = tsg::silu(v0) * w0;
        if (col + 1 < n) o[1] = tsg::silu(v1) * w1;
    }
};

// Float64 reference: ref[b, m, n] = Σ_k A·B (and the gated form). A (M, K) lda; B KN: (K, N) ldb, else (N, K).
__global__ void reference(const float *A, const float *B0, const float *B1, double *ref, int M, int N, int K,
                          int64_t lda, int64_t ldb, int64_t abs, int64_t bbs, bool kn, bool dual) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y, b = blockIdx.z;
    if (n >= N) return;
    double s0 = 0, s1 = 0;
    for (int k = 0; k < K; ++k) {
        const double a = A[b * abs + m * lda + k];
        const int64_t bi = b * bbs + (kn ? k * ldb + n : n * ldb + k);
        s0 += a * B0[bi];
        if (dual) s1 += a * B1[bi];
    }
    ref[((int64_t)b * M + m) * N + n] = dual ? s0 / (1 + exp(-s0)) * s1 : s0;
}

struct Config {
    int M, N, K, batch;
    bool kn, dual, small, offset;   // small: the 64×64 tile; offset: operands one float off 16 bytes (4-byte loader)
    int split;                      // > 1: split-K over clusters of that many CTAs (64×64 tiles only)
    int chunks;                     // > 1: split-K through memory as well (GemmParams::k_chunks; sums poisoned first)
};

static cublasHandle_t g_blas;
static void *g_flush;
static int g_failures;

template <class F> static float time_ms(F f) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> v;
    for (int i = 0; i < 23; ++i) {
        CK(cudaMemsetAsync(g_flush, i, 256u << 20));
        CK(cudaEventRecord(e0));
        f();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 3) v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return v[v.size() / 2];
}

static double rel_error(const float *dev, const double *ref_dev, size_t n) {
    std::vector<float> out(n);
    std::vector<double> ref(n);
    CK(cudaMemcpy(out.data(), dev, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ref.data(), ref_dev, n * 8, cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) return INFINITY;
        num += (out[i] - ref[i]) * (out[i] - ref[i]), den += ref[i] * ref[i];
    }
    return std::sqrt(num / den);
}

template <int BM, int BN, int WM, int WN, bool KN, bool DUAL, class E, int SPLIT = 1>
static cudaError_t launch(const tsg::GemmParams<float, E> &p) {
    return tsg::launch_gemm_f32<BM, BN, 32, WM, WN, 4, KN, DUAL, E, SPLIT>(p, 0);
}

template <bool KN, bool DUAL, class E> static cudaError_t launch_small(const tsg::GemmParams<float, E> &p, int split) {
    switch (split) {
    case 2: return launch<64, 64, 2, 2, KN, DUAL, E, 2>(p);
    case 3: return launch<64, 64, 2, 2, KN, DUAL, E, 3>(p);
    case 4: return launch<64, 64, 2, 2, KN, DUAL, E, 4>(p);
    case 8: return launch<64, 64, 2, 2, KN, DUAL, E, 8>(p);
    default: return launch<64, 64, 2, 2, KN, DUAL, E>(p);
    }
}

template <bool KN, bool DUAL> static void run(const Config &c, bool timing) {
    using E = std::conditional_t<DUAL, GatedEpilogue, tsg::StoreEpilogue<float>>;
    const int off = c.offset ? 1 : 0;
    const int64_t lda = c.K + off, ldb = (KN ? c.N : c.K) + off, brows = KN ? c.K : c.N;
    const int64_t abs = (int64_t)c.M * lda, bbs = c.batch > 1 && c.small ? 0 : brows * ldb;  // small: B broadcast
    const size_t na = abs * c.batch + off, nb = (bbs ? bbs * c.batch : brows * ldb) + off, nc = (size_t)c.batch * c.M * c.N;
    float *A, *B0, *B1 = nullptr, *C;
    double *ref;
    CK(cudaMalloc(&A, na * 4));
    CK(cudaMalloc(&B0, nb * 4));
    if (DUAL) CK(cudaMalloc(&B1, nb * 4));
    CK(cudaMalloc(&C, nc * 4));
    CK(cudaMalloc(&ref, nc * 8));
    static uint64_t seed = 1;
    fill_random<<<1024, 256>>>(A, na, seed++);
    fill_random<<<1024, 256>>>(B0, nb, seed++);
    if (DUAL) fill_random<<<1024, 256>>>(B1, nb, seed++);
    fill_nan<<<1024, 256>>>(C, nc);
    CK(cudaGetLastError());
    tsg::GemmParams<float, E> p{};
    p.A = A + off, p.B0 = B0 + off, p.B1 = DUAL ? B1 + off : nullptr;
    p.M = c.M, p.N = c.N, p.K = c.K, p.batch = c.batch, p.lda = lda, p.ldb = ldb;
    p.a_batch_stride = abs, p.b_batch_stride = bbs;
    if constexpr (DUAL) p.ep = E{C, (int64_t)c.M * c.N, c.N, c.N};
    else p.ep = E{C, c.N, (int64_t)c.M * c.N, c.N};
    float *partials = nullptr;
    if (c.chunks > 1) {
        p.k_chunks = c.chunks, p.k_partials_floats = (int64_t)c.chunks * (DUAL ? 2 : 1) * nc;
        CK(cudaMalloc(&partials, p.k_partials_floats * 4));
        fill_nan<<<1024, 256>>>(partials, p.k_partials_floats);
        p.k_partials = partials;
    }
    auto ours = [&] {
        cudaError_t e = c.small ? launch_small<KN, DUAL, E>(p, c.split) : launch<128, 128, 2, 4, KN, DUAL>(p);
        CK(e);
    };
    ours();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    reference<<<dim3((c.N + 127) / 128, c.M, c.batch), 128>>>(p.A, p.B0, p.B1, ref, c.M, c.N, c.K, lda, ldb, abs, bbs,
                                                              KN, DUAL);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const double err = rel_error(C, ref, nc);
    const bool ok = err <= 6e-7 * std::sqrt((double)c.K);
    g_failures += !ok;
    printf("%-4s M=%5d N=%5d K=%6d batch=%3d %s%s%s%s split %d chunks %d  rel.err %.2e", ok ? "PASS" : "FAIL", c.M, c.N, c.K,
           c.batch, KN ? "KN" : "NK", DUAL ? " dual" : "", c.small ? " 64x64" : " 128x128", c.offset ? " 4B-loader" : "",
           c.split > 1 ? c.split : 1, c.chunks > 1 ? c.chunks : 1, err);
    if (timing && DUAL && !c.offset && c.batch == 1) printf("  ours %.4f ms", time_ms(ours));
    if (timing && !DUAL && KN && !c.offset && c.batch == 1) {
        const float t = time_ms(ours);
        const float alpha = 1, beta = 0;
        auto blas = [&] {
            CKB(cublasSgemm(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, c.N, c.M, c.K, &alpha, p.B0, (int)ldb, p.A, (int)lda, &beta,
                            C, c.N));
        };
        CKB(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH));
        const float tb = time_ms(blas);
        CK(cudaDeviceSynchronize());
        const double serr = rel_error(C, ref, nc);
        CKB(cublasSetMathMode(g_blas, CUBLAS_TF32_TENSOR_OP_MATH));
        const float tt = time_ms(blas);
        CK(cudaDeviceSynchronize());
        const double terr = rel_error(C, ref, nc);
        CKB(cublasSetMathMode(g_blas, CUBLAS_DEFAULT_MATH));
        const double fl = 2.0 * c.M * c.N * c.K;
        printf("  ours %.4f ms (%.1f TFLOP/s)  cuBLAS SGEMM %.4f (%.2fx, err %.1e)  cuBLAS TF32 %.4f (err %.1e)", t,
               fl / t * 1e-9, tb, tb / t, serr, tt, terr);
    }
    printf("\n");
    if constexpr (!DUAL) {   // the wgmma form (gemm_f32_sm90.cuh) on the same operands, against the same reference
        auto wg = [&] { CK(tsg90::launch_gemm_f32_sm90<KN>(p, 0)); };
        fill_nan<<<1024, 256>>>(C, nc);
        wg();
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        const double werr = rel_error(C, ref, nc);
        const bool wok = werr <= 6e-7 * std::sqrt((double)c.K);
        g_failures += !wok;
        printf("%-4s   sm90 wgmma 128x128                                rel.err %.2e", wok ? "PASS" : "FAIL", werr);
        if (timing && !c.offset && c.batch == 1) {
            const float tw = time_ms(wg);
            printf("  sm90 %.4f ms (%.1f TFLOP/s)", tw, 2.0 * c.M * c.N * c.K / tw * 1e-9);
        }
        printf("\n");
    }
    CK(cudaFree(A));
    CK(cudaFree(B0));
    if (B1) CK(cudaFree(B1));
    CK(cudaFree(C));
    CK(cudaFree(ref));
    if (partials) CK(cudaFree(partials));
}

int main(int argc, char **argv) {
    const bool timing = !(argc > 1 && !strcmp(argv[1], "quick"));
    CKB(cublasCreate(&g_blas));
    CK(cudaMalloc(&g_flush, 256u << 20));
    const Config kn[] = {
        {1024, 1024, 1024, 1, true, false, false, false}, {4096, 4096, 4096, 1, true, false, false, false},
        {2048, 1024, 4096, 1, true, false, false, false}, {1000, 3000, 2500, 1, true, false, false, false},
        {128, 512, 1024, 1, true, false, true, false},    {77, 130, 61, 1, true, false, false, true},
        {333, 200, 257, 3, true, false, true, true},      {1024, 512, 1024, 16, true, false, false, false},
        // split-K (its time beside the same tiles without it, above or below); K = 131072 and the 8193 below: a
        // CTA's share of K over kF32ChainK, each k8 step added in by an FADD (its errors, then, as cuBLAS's)
        {128, 512, 1024, 1, true, false, true, false, 4}, {77, 130, 1000, 1, true, false, true, true, 3},
        {256, 256, 131072, 1, true, false, true, false},  {256, 256, 131072, 1, true, false, true, false, 8},
        {333, 200, 4097, 3, true, false, true, false, 2}, {1024, 1024, 1024, 1, true, false, true, false},
        {512, 512, 8193, 1, true, false, false, true},
    };
    for (const Config &c : kn) run<true, false>(c, timing);
    const Config nk[] = {{1024, 1024, 512, 1, false, false, false, false}, {300, 129, 70, 2, false, false, true, true},
                         {128, 512, 2048, 1, false, false, true, false, 4}};
    for (const Config &c : nk) run<false, false>(c, timing);
    const Config dual[] = {{1024, 2048, 1024, 1, true, true, false, false}, {65, 100, 37, 2, true, true, true, true},
                           {64, 256, 4096, 1, true, true, true, false, 8}, {256, 512, 16384, 1, true, true, false, false}};
    for (const Config &c : dual) run<true, true>(c, timing);
    // split-K through memory (k_chunks) beside the clusters alone: KernelBench's deep K, odd sizes, a batch, the dual form
    const Config chunked[] = {{256, 256, 524288, 1, true, false, true, false, 8},    {256, 256, 524288, 1, true, false, true, false, 8, 8},
                              {256, 256, 131072, 1, true, false, true, false, 8, 4}, {77, 130, 20001, 1, true, false, true, true, 2, 3},
                              {333, 200, 40960, 3, true, false, true, false, 2, 5}};
    for (const Config &c : chunked) run<true, false>(c, timing);
    const Config chunked_nk[] = {{128, 96, 65536, 1, false, false, true, false, 4, 8}};
    for (const Config &c : chunked_nk) run<false, false>(c, timing);
    const Config chunked_dual[] = {{64, 256, 65536, 1, true, true, true, false, 8, 4}};
    for (const Config &c : chunked_dual) run<true, true>(c, timing);
    printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "all passed", g_failures);
    return g_failures ? 1 : 0;
}
