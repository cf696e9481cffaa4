// gemm_row_parts_test.cu — validation and timing of the GEMM that reduces the rows of its product instead of
// storing it (gemm.cuh: kRowParts): a log-sum-exp over each row of A·B (a maximum, then Σ exp(v − max)), and a
// row's sum and maximum of A·B + bias (two independent reductions, a loaded operand). The wgmma kernel writes each
// tile's results to a scratch and the CTA finishing a row band last merges them; without TMA (an unaligned A)
// the mma.sync GEMM stores the product into the scratch and a warp a row reduces it. Per config: fresh
// hash-random inputs (never zeros), the outputs poisoned with NaN, ours, then a reference — cuBLAS's fp32 product,
// the reductions in double per row — and the relative L2 error ≤ 1e-3 (a NaN or an unwritten row fails), the path
// that ran checked against the expected one; then (timed) ours beside our own GEMM storing the product (128×256,
// the plan this replaces writes it, then a row kernel reads it) and cuBLAS's, median of 25 runs, L2 flushed.
// Build (from the repository root):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates bench/gpu/gemm_row_parts_test.cu -lcublas \
//        -o build/gpu/gemm_row_parts_test
// Run: build/gpu/gemm_row_parts_test [quick|small]   (quick: validation only; small: validation of the configs of
// at most 1M outputs, for compute-sanitizer). Exit 1 when a config fails, 2 on a CUDA or cuBLAS error.
#include <cublas_v2.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#define TSG90_WATCHDOG 1   // a deadlocked barrier traps (~4 s) instead of hanging
#include "gemm_sm90.cuh"
#include "gemm_reference.cuh"

static cublasHandle_t g_blas;
static void *g_flush;
static const size_t kFlushBytes = 256u << 20;
static bool g_timing = true, g_small = false;
static int g_failures = 0;


// out[b, row] = log Σ_n exp(C[row, n]) (max + log Σ exp(C − max)).
struct LseEp {
    float *out;
    int m;
    static constexpr int kRowParts = 2;
    __host__ __device__ static constexpr bool part_max(int j) { return j == 0; }
    __device__ float pre(int, int, int, float acc) const { return acc; }
    __device__ float part_term(int j, float v, const float *part) const { return j == 0 ? v : __expf(v - part[0]); }
    __device__ float merge_term(int j, const float *part, const float *whole) const {
        return j == 0 ? part[0] : part[1] * __expf(part[0] - whole[0]);
    }
    __device__ void row_out(int b, int row, const float *whole) const { out[(int64_t)b * m + row] = whole[0] + logf(whole[1]); }
};

// out[b, row] = Σ_n (C + bias) / N and out2[b, row] = max_n (C + bias): two reductions, neither reading the other.
template <typename T> struct MeanMaxEp {
    float *out, *out2;
    const T *bias;
    int m, n;
    static constexpr int kRowParts = 2;
    __host__ __device__ static constexpr bool part_max(int j) { return j == 1; }
    __device__ float pre(int, int, int col, float acc) const { return acc + tst::elem<T>::to_float(bias[col]); }
    __device__ float part_term(int, float v, const float *) const { return v; }
    __device__ float merge_term(int j, const float *part, const float *) const { return part[j]; }
    __device__ void row_out(int b, int row, const float *whole) const {
        out[(int64_t)b * m + row] = whole[0] / n;
        out2[(int64_t)b * m + row] = whole[1];
    }
};

// The reference in double over cuBLAS's fp32 product c (dense [batch, M, N]): kind 0 log-sum-exp, 1 mean and max.
template <typename T>
__global__ void ref_rows(double *r0, double *r1, const float *c, int kind, const T *bias, int M, int N, int batch) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < batch * M; i += gridDim.x * blockDim.x) {
        const float *row = c + (size_t)i * N;
        double mx = -INFINITY, s = 0;
        for (int n = 0; n < N; n++) mx = fmax(mx, (double)row[n] + (kind ? tst::elem<T>::to_float(bias[n]) : 0.));
        if (kind == 0) {
            for (int n = 0; n < N; n++) s += exp(row[n] - mx);
            r0[i] = mx + log(s);
        } else {
            for (int n = 0; n < N; n++) s += (double)row[n] + tst::elem<T>::to_float(bias[n]);
            r0[i] = s / N;
            r1[i] = mx;
        }
    }
}


struct Shape {
    const char *name;
    int M, N, K, batch;
    int kind;              // 0 log-sum-exp, 1 mean and max (+ bias)
    bool aligned = true;   // false: A starts one element in (TMA cannot describe it): the fallback must run
};

// ‖out − ref‖ / ‖ref‖ over n values (host); a NaN counts as bad.
static double rel_error(const float *d_out, const double *d_ref, size_t n, int *bad) {
    std::vector<float> o(n);
    std::vector<double> r(n);
    CK(cudaMemcpy(o.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(r.data(), d_ref, n * sizeof(double), cudaMemcpyDeviceToHost));
    double se = 0, sr = 0;
    *bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!std::isfinite(o[i])) {
            (*bad)++;
            continue;
        }
        se += (o[i] - r[i]) * (o[i] - r[i]);
        sr += r[i] * r[i];
    }
    return sqrt(se / (sr > 0 ? sr : 1));
}

template <typename T, int BM, int BN, bool PP = false> static void run(const Shape &s, uint64_t seed) {
    if (g_small && (int64_t)s.M * s.N * s.batch > (1 << 20)) return;
    const int M = s.M, N = s.N, K = s.K, batch = s.batch, off = s.aligned ? 0 : 1;
    const size_t a_n = (size_t)batch * M * K + off, b_n = (size_t)K * N, c_n = (size_t)batch * M * N, r_n = (size_t)batch * M;
    T *A, *B, *bias, *cstore;
    float *c, *out, *out2;
    double *ref0, *ref1;
    CK(cudaMalloc(&A, a_n * sizeof(T)));
    CK(cudaMalloc(&B, b_n * sizeof(T)));
    CK(cudaMalloc(&bias, N * sizeof(T)));
    CK(cudaMalloc(&cstore, c_n * sizeof(T)));
    CK(cudaMalloc(&c, c_n * sizeof(float)));
    CK(cudaMalloc(&out, r_n * sizeof(float)));
    CK(cudaMalloc(&out2, r_n * sizeof(float)));
    CK(cudaMalloc(&ref0, r_n * sizeof(double)));
    CK(cudaMalloc(&ref1, r_n * sizeof(double)));
    const int64_t scratch_bytes = tsg::row_parts_scratch_bytes(M, N, batch, 2, sizeof(T));
    void *scratch;
    CK(cudaMalloc(&scratch, scratch_bytes));
    CK(cudaMemset(scratch, 0x5A, scratch_bytes));   // any content: the launch zeroes the counters
    const float amp = 1.f / sqrtf((float)K);
    rand_fill(A, a_n, seed * 16 + 1, -1.f, 1.f);
    rand_fill(B, b_n, seed * 16 + 2, -4.f * amp, 4.f * amp);   // products of a few units: exp spreads them
    rand_fill(bias, N, seed * 16 + 3, -1.f, 1.f);
    CK(cudaMemset(out, 0xFF, r_n * sizeof(float)));
    CK(cudaMemset(out2, 0xFF, r_n * sizeof(float)));
    const T *Ad = A + off;

    auto common = [&](auto &p) {
        p.A = Ad, p.B0 = B, p.B1 = nullptr, p.M = M, p.N = N, p.K = K, p.batch = batch;
        p.lda = K, p.ldb = N, p.a_batch_stride = (int64_t)M * K, p.b_batch_stride = 0;
        p.b_ready = p.a_ready = false;
        p.rows_scratch = scratch, p.rows_scratch_bytes = scratch_bytes;
    };
    tsg::GemmParams<T, LseEp> pl{};
    tsg::GemmParams<T, MeanMaxEp<T>> pm{};
    common(pl);
    common(pm);
    pl.ep = LseEp{out, M};
    pm.ep = MeanMaxEp<T>{out, out2, bias, M, N};
    auto ours = [&]() -> cudaError_t {
        if (s.kind == 0) return tsg90::launch_gemm_sm90<T, BM, BN, 4, 1, true, false, LseEp, PP>(pl, 0);
        return tsg90::launch_gemm_sm90<T, BM, BN, 4, 1, true, false, MeanMaxEp<T>, PP>(pm, 0);
    };
    char label[160];
    snprintf(label, sizeof label, "%-36s %s %dx%d%s", s.name, TypeName<T>::s, BM, BN, PP ? " pp" : "");
    printf("%s ", label);
    fflush(stdout);
    CK(ours());
    CK(cudaDeviceSynchronize());
    const int path = tsg90::last_fallback_reason();
    blas_gemm(g_blas, true, false, Ad, K, (int64_t)M * K, B, N, 0, c, CUDA_R_32F, N, (int64_t)M * N, M, N, K, batch);
    ref_rows<T><<<(batch * M + 127) / 128, 128>>>(ref0, ref1, c, s.kind, bias, M, N, batch);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    int bad = 0, bad2 = 0;
    const double err = rel_error(out, ref0, r_n, &bad), err2 = s.kind ? rel_error(out2, ref1, r_n, &bad2) : 0;
    const bool path_ok = (path == 0) == s.aligned;
    bool ok = err <= 1e-3 && err2 <= 1e-3 && bad == 0 && bad2 == 0 && path_ok;
    printf("rel %.2e", err);
    if (s.kind) printf(" / %.2e", err2);
    printf(" bad %d path %s", bad + bad2, path == 0 ? "wgmma" : "fallback");
    if (g_timing && s.aligned) {
        const float t_ours = median_ms(g_flush, kFlushBytes, [&] { CK(ours()); });
        tsg::GemmParams<T, tsg::StoreEpilogue<T>> pp{};
        common(pp);
        pp.ep = tsg::StoreEpilogue<T>{cstore, N, (int64_t)M * N, N};
        const float t_store = median_ms(g_flush, kFlushBytes, [&] { CK((tsg90::launch_gemm_sm90<T, 128, 256, 4, 1, true, false, tsg::StoreEpilogue<T>>(pp, 0))); });
        const float t_blas = median_ms(g_flush, kFlushBytes, [&] {
            blas_gemm(g_blas, true, false, Ad, K, (int64_t)M * K, B, N, 0, cstore, TypeName<T>::cu, N, (int64_t)M * N, M, N, K, batch);
        });
        // again after the timed runs (a race shows as a changed error)
        CK(cudaMemset(out, 0xFF, r_n * sizeof(float)));
        CK(ours());
        CK(cudaDeviceSynchronize());
        int bad3 = 0;
        const double err3 = rel_error(out, ref0, r_n, &bad3);
        ok = ok && err3 <= 1e-3 && bad3 == 0;
        printf(" | ours %.4f ms  own GEMM storing C %.4f  cuBLAS storing C %.4f", t_ours, t_store, t_blas);
    }
    printf("  %s\n", ok ? "PASS" : "FAIL");
    if (!ok) g_failures++;
    for (void *q : {(void *)A, (void *)B, (void *)bias, (void *)cstore, (void *)c, (void *)out, (void *)out2, (void *)ref0, (void *)ref1, scratch})
        CK(cudaFree(q));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "quick") == 0) g_timing = false;
    if (argc > 1 && strcmp(argv[1], "small") == 0) g_timing = false, g_small = true;
    CKB(cublasCreate(&g_blas));
    CK(cudaMalloc(&g_flush, kFlushBytes));
    uint64_t seed = 1;
    run<__half, 128, 256>({"lse 4096x8192 k4096 (bench)", 4096, 8192, 4096, 1, 0}, seed++);
    run<__half, 128, 128, true>({"lse 4096x8192 k4096 (bench)", 4096, 8192, 4096, 1, 0}, seed++);
    run<__half, 64, 256, true>({"lse 4096x8192 k4096 (bench)", 4096, 8192, 4096, 1, 0}, seed++);
    run<__nv_bfloat16, 128, 256>({"lse bf16 4096x8192 k4096", 4096, 8192, 4096, 1, 0}, seed++);
    run<__half, 128, 128, true>({"lse 1024x50304 k1024 (vocabulary)", 1024, 50304, 1024, 1, 0}, seed++);
    run<__half, 128, 128, true>({"mean+max+bias 4096x4096 k2048", 4096, 4096, 2048, 1, 1}, seed++);
    run<__half, 64, 256, true>({"lse 1000x1000 k512 (edges)", 1000, 1000, 512, 1, 0}, seed++);
    run<__half, 128, 256>({"lse 1024x50304 k1024 (vocabulary)", 1024, 50304, 1024, 1, 0}, seed++);
    run<__half, 128, 256>({"lse 1000x1000 k512 (edges)", 1000, 1000, 512, 1, 0}, seed++);
    run<__half, 128, 128>({"lse batch 3 x 300x520 k256 BN128", 300, 520, 256, 3, 0}, seed++);
    run<__half, 128, 256>({"lse 256x4096 k1024 (A unaligned)", 256, 4096, 1024, 1, 0, false}, seed++);
    run<__half, 128, 256>({"lse 1x32000 k1024 (decode; A unaligned)", 1, 32000, 1024, 1, 0, false}, seed++);
    run<__half, 128, 256>({"lse 3x32000 k1024 (decode)", 3, 32000, 1024, 1, 0}, seed++);
    run<__half, 128, 256>({"mean+max+bias 4096x4096 k2048", 4096, 4096, 2048, 1, 1}, seed++);
    run<__half, 128, 256>({"mean+max+bias 777x520 k128 (edges)", 777, 520, 128, 1, 1}, seed++);
    printf("%d failure(s)\n", g_failures);
    return g_failures ? 1 : 0;
}
