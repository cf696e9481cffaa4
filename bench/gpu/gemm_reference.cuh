// gemm_reference.cuh — what bench/gpu/gemm_test.cu (mma.sync) and gemm_sm90_test.cu (wgmma) check against:
// the epilogue kinds they instantiate, the fp32 reference of each epilogue over cuBLAS's product, the row
// statistics the folding kinds compute themselves (in double), and the comparison of an output with the
// reference; and for them and gemm_row_parts_test.cu the cuBLAS product itself (blas_gemm), the random inputs
// (rand_fill) and the timing (median_ms). Included after gemm.cuh (or gemm_sm90.cuh).
#pragma once
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "checks.cuh"

template <typename T> struct TypeName;
template <> struct TypeName<__half> { static constexpr const char *s = "f16"; static constexpr cudaDataType_t cu = CUDA_R_16F; };
template <> struct TypeName<__nv_bfloat16> { static constexpr const char *s = "bf16"; static constexpr cudaDataType_t cu = CUDA_R_16BF; };

// C (batch, M, N) row-major, ld ldc, type ctype = A·B via cuBLAS handle h (column-major: Cᵀ = Bᵀ·Aᵀ); b_kn: B
// stored (K, N), else (N, K); a_km: A stored (K, M), else (M, K); beta: C's share kept (1: add to it).
template <typename T>
static void blas_gemm(cublasHandle_t h, bool b_kn, bool a_km, const T *A, int64_t lda, int64_t a_bs, const T *B, int64_t ldb,
                      int64_t b_bs, void *C, cudaDataType_t ctype, int64_t ldc, int64_t c_bs, int M, int N, int K, int batch,
                      float beta = 0.f) {
    const float one = 1.f, zero = beta;
    CKB(cublasGemmStridedBatchedEx(h, b_kn ? CUBLAS_OP_N : CUBLAS_OP_T, a_km ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &one, B,
                                   TypeName<T>::cu, (int)ldb, b_bs, A, TypeName<T>::cu, (int)lda, a_bs, &zero, C, ctype,
                                   (int)ldc, c_bs, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// ---- inputs and timing shared by the GEMM tests -------------------------------------------------------
// Hash-random fill (never zeros by design: uniform in [lo, hi)), the same values for the same seed and index.
__device__ __forceinline__ uint32_t hash32(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}
template <typename T> __global__ void fill_rand(T *p, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (hash32(seed * 0x9e3779b97f4a7c15ull + i) >> 8) * (1.f / 16777216.f);
        p[i] = tst::elem<T>::from_float(lo + (hi - lo) * u);
    }
}
template <typename T> static void rand_fill(T *p, size_t n, uint64_t seed, float lo, float hi) {
    fill_rand<T><<<1024, 256>>>(p, n, seed, lo, hi);
    CK(cudaGetLastError());
}

// The median of 25 CUDA-event timings of f() after 3 warm-up runs, the L2 flushed before each (flush_bytes
// written at flush).
template <class F> static float median_ms(void *flush, size_t flush_bytes, F &&f) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) f();   // warm-up
    std::vector<float> t;
    for (int i = 0; i < 25; i++) {
        CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes));
        CK(cudaEventRecord(a));
        f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// kDiscard is a timing probe, never validated: the store functor with its global stores skipped (the output
// is written only where a product equals an impossible value), so that ours(kStore) − ours(kDiscard) is what
// a tile's stores cost beyond parking and reading back the accumulators.
enum Kind { kStore, kRowScale, kSwiglu, kGated, kResidual, kRowStat, kGatedStat, kDiscard };
static const char *kind_name[] = {"store", "rowscale", "swiglu", "gated", "residual", "rowstat", "gatedstat", "discard"};
static const float kStatEps = 1e-6f;

// The row statistics kRowStat / kGatedStat fold inside the GEMM, in double: scale[b·M + m] =
// rsqrt(mean_k A² + eps), mx[b·M + m] = max_k A.
template <typename T>
__global__ void ref_row_stats(const T *A, int64_t lda, int64_t a_bs, int M, int K, int batch, float *scale, float *mx) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch * M; i += gridDim.x * blockDim.x) {
        const T *row = A + (i / M) * a_bs + (int64_t)(i % M) * lda;
        double s = 0, m = -INFINITY;
        for (int k = 0; k < K; k++) {
            const double a = tst::elem<T>::to_float(row[k]);
            s += a * a;
            m = fmax(m, a);
        }
        scale[i] = (float)(1.0 / sqrt(s / K + kStatEps));
        mx[i] = (float)m;
    }
}

// ref[b, m, n] (dense) = epilogue(C0, C1) in fp32.
template <typename T>
__global__ void ref_epilogue(float *ref, const float *c0, const float *c1, int kind, const float *scale, const float *mx,
                             const T *res, int64_t ldr, int64_t res_bs, int M, int N, int batch) {
    size_t total = (size_t)batch * M * N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i % N), m = (int)((i / N) % M), b = (int)(i / ((size_t)N * M));
        float v = c0[i], r = v;
        if (kind == kRowScale) r = v * scale[(size_t)b * M + m];
        else if (kind == kSwiglu) { float w = c1[i]; r = v * (w / (1.f + expf(-w))); }
        else if (kind == kGated || kind == kGatedStat) { float s = scale ? scale[(size_t)b * M + m] : 1.f; r = (v * s) * (c1[i] * s); }
        else if (kind == kRowStat) r = v * scale[(size_t)b * M + m] + mx[(size_t)b * M + m];
        else if (kind == kResidual) r = v + tst::elem<T>::to_float(res[b * res_bs + (int64_t)m * ldr + n]);
        ref[i] = r;
    }
}

// stats: [0] Σ(o−r)², [1] Σr², [2] max|o−r| (as float bits), [3] NaN/Inf count, [4] padding elements written
template <typename T>
__global__ void compare(const T *out, int64_t ldc, int64_t out_bs, const float *ref, int M, int N, int batch,
                        double *sums, unsigned long long *counts, unsigned *maxbits) {
    size_t total = (size_t)batch * M * ldc;
    double se = 0, sr = 0;
    float mx = 0;
    unsigned long long bad = 0, pad = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i % ldc), m = (int)((i / ldc) % M), b = (int)(i / ((size_t)ldc * M));
        T o = out[b * out_bs + (int64_t)m * ldc + n];
        if (n >= N) {
            if (*reinterpret_cast<const uint16_t *>(&o) != 0xFFFFu) pad++;
            continue;
        }
        float of = tst::elem<T>::to_float(o), r = ref[((size_t)b * M + m) * N + n];
        if (!isfinite(of)) { bad++; continue; }
        double d = (double)of - r;
        se += d * d;
        sr += (double)r * r;
        mx = fmaxf(mx, fabsf((float)d));
    }
    atomicAdd(&sums[0], se);
    atomicAdd(&sums[1], sr);
    atomicMax(maxbits, __float_as_uint(mx));
    if (bad) atomicAdd(&counts[0], bad);
    if (pad) atomicAdd(&counts[1], pad);
}

// A two-pair GEMM's second operand pair (GemmParams::A2/B2/K2: C = A·B0 + A2·B2) for the tests: A2 is
// (batch, M, K2) and B2 in B0's layout, with the shape's row padding; fill(ptr, n, seed) fills each with fresh
// random values; describe() puts them into p; the reference adds A2·B2 to the first product (beta = 1).
template <typename T> struct SecondPair {
    T *A2 = nullptr, *B2 = nullptr;
    int K2 = 0;
    int64_t lda2 = 0, ldb2 = 0, a2_bs = 0, b2_bs = 0;
    template <class Fill>
    cudaError_t make(bool b_kn, int M, int N, int k2, int batch, int lda_pad, int ldb_pad, bool b_broadcast, uint64_t seed,
                     Fill fill) {
        K2 = k2;
        if (K2 <= 0) return cudaSuccess;
        lda2 = K2 + lda_pad, ldb2 = (b_kn ? N : K2) + ldb_pad, a2_bs = (int64_t)M * lda2;
        const int64_t b_rows = b_kn ? K2 : N;
        b2_bs = b_broadcast ? 0 : b_rows * ldb2;
        const size_t a_n = (size_t)batch * a2_bs, b_n = (size_t)(b_broadcast ? 1 : batch) * b_rows * ldb2;
        cudaError_t e = cudaMalloc(&A2, a_n * sizeof(T));
        if (e == cudaSuccess) e = cudaMalloc(&B2, b_n * sizeof(T));
        if (e != cudaSuccess) return e;
        fill(A2, a_n, seed * 16 + 6);
        fill(B2, b_n, seed * 16 + 7);
        return cudaGetLastError();
    }
    template <class Ep> void describe(tsg::GemmParams<T, Ep> &p) const {
        p.A2 = A2, p.B2 = B2, p.K2 = K2, p.lda2 = lda2, p.ldb2 = ldb2, p.a2_batch_stride = a2_bs, p.b2_batch_stride = b2_bs;
    }
    void release() {
        if (A2) cudaFree(A2);
        if (B2) cudaFree(B2);
        A2 = B2 = nullptr;
    }
};

// The tsg epilogue functor of each kind.
template <typename T, int KIND> struct EpFor;
template <typename T> struct EpFor<T, kStore> { using type = tsg::StoreEpilogue<T>; };
template <typename T> struct EpFor<T, kRowScale> { using type = tsg::RowScaleEpilogue<T>; };
template <typename T> struct EpFor<T, kSwiglu> { using type = tsg::SwigluEpilogue<T>; };
template <typename T> struct EpFor<T, kGated> { using type = tsg::GatedEpilogue<T>; };
template <typename T> struct EpFor<T, kResidual> { using type = tsg::ResidualEpilogue<T>; };
template <typename T> struct EpFor<T, kRowStat> { using type = tsg::RowStatEpilogue<T>; };
template <typename T> struct EpFor<T, kGatedStat> { using type = tsg::GatedStatEpilogue<T>; };
template <typename TOut> struct DiscardEpilogue {   // kDiscard: StoreEpilogue's fields, no store in practice
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    template <typename T> __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1) const {
        if (v0 == 1.5e38f) tsg::store2(out + b * batch_stride + row * ldc + col, v0, v1, col + 1 < n);
    }
};
template <typename T> struct EpFor<T, kDiscard> { using type = DiscardEpilogue<T>; };
