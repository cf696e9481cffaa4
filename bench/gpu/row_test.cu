// row_test.cu — validates and times templates/row.cuh (the row-fused kernel) and the span-vectorised
// templates/map.cuh on the GPU: RMSNorm with a gain, LayerNorm (gain and bias), softmax, and a residual
// sum with its RMSNorm (two outputs) at 8192x4096 fp16, at odd sizes (37x4099), with misaligned pointers
// (scalar fallback), with short rows (a warp per row) and with rows too long to cache (several passes),
// plus an elementwise map with a broadcast gain and a per-row bias, a map reading a transposed operand (the
// transposed walk against the plain one), and statistics down columns
// (launch_row_columns: a column LayerNorm as BatchNorm computes it, column sums). Each case: fresh random inputs,
// outputs poisoned with NaN, a float64 CPU reference over every element, then the median of 20 runs timed
// with CUDA events with L2 flushed before each, as GB/s (bytes read + written once) and % of 4.3 TB/s.
// The functors are written the way src/emit.c writes them. Every CUDA call is checked. Exit status 1 when
// any case fails. Build: make gpu-build (build/gpu/row_test); run on the GPU: build/gpu/row_test, or
// build/gpu/row_test sweep for the launch shapes compared on the bandwidth-bound cases only, `long` for rows
// longer than a block caches (launch_row, its `split` and the passes side by side), `cluster` for the rows
// clusters split, at sizes compute-sanitizer finishes, `map` for the elementwise maps alone (bench/gpu/map_ab.sh
// puts builds side by side), `short` for many short rows (a global average pool's per-row mean, norms over 512-1024)
// under several launch shapes, `grid` for few rows too long for a cluster over a cooperative grid (launch_row_grid,
// given a scratch buffer) beside the clusters without one, and captured in a CUDA graph, `passes` for rows about as
// many as the SMs taking passes in blocks of 256, 512 or 1024 threads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "map.cuh"
#include "row.cuh"

#define CK(x) check((x), #x, __FILE__, __LINE__)
static void check(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: %s failed: %s\n", file, line, what, cudaGetErrorString(e));
        exit(2);
    }
}

constexpr double kPeakBytesPerS = 4.3e12;  // H200 DRAM, read + write
// Built twice (make gpu-build): row_test with the functors' span path as the emitter prints it for aligned
// rows, row_test_pairs (-DROW_TEST_PAIRS=1) as it prints it for rows that can start off 16 bytes: span.cuh's
// 4-byte pair path (kPairs) and row.cuh's head (kHead: the positions before a row's first aligned span taken
// apart) in every functor; its misaligned, odd-length and +1/+2-element cases test both, the aligned ones show
// what the paths cost.
#ifndef ROW_TEST_PAIRS
#define ROW_TEST_PAIRS 0
#endif
constexpr bool kTestPairs = ROW_TEST_PAIRS;
// The row functors declare kCache16 = 1 (their fp16 operands cached two to a register, row.cuh CachedSpan) as the
// emitter writes them where every cached operand is fp16; -DROW_TEST_PACK=0 builds them caching floats (run 161's A/B).
#ifndef ROW_TEST_PACK
#define ROW_TEST_PACK 1
#endif
constexpr int kTestCache16 = ROW_TEST_PACK;
constexpr float kEps = 1e-5f;
constexpr float kLog2e = 1.4426950408889634f;

// ---- functors, in the emitter's form (see row.cuh and map.cuh) ----------------------------------------

// What the one-operand functors share: x cached, rows ld elements apart in x and the output.
struct OneOperandRows {
    static constexpr int kVec = 8, kIn = 1;
    const __half *x;
    int64_t ld;
    struct Base {
        int64_t off;
    };
    __device__ void bind(const int64_t *idx, Base &b) const { b.off = idx[0] * ld; }
    __device__ void load(const Base &b, int64_t k0, int n, float (&v)[kIn][kVec]) const {
        tsv::load_span<kVec, kTestPairs>(v[0], x + b.off, 1, k0, n);
    }
    static constexpr bool kHead = kTestPairs;
    static constexpr int kCache16 = kTestCache16;
    __device__ int head(const Base &b) const { return tsv::span_head<kVec>(x + b.off, 1); }
};

// y[row] = mean of the row (kPerRow): a global average pool over a merged [h, w]
struct MeanRows : OneOperandRows {
    static constexpr int kStages = 1;
    static constexpr bool kPerRow = true, kPerRowOuts = false;
    __half *y;  // [rows]
    float inv_len;
    __device__ static constexpr int combine(int) { return tsw::kSum; }
    __device__ void stage(int, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *, float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++) s[i] = v[0][i];
    }
    __device__ void store(const Base &b, int64_t, int, const float (&)[kIn][kVec], const float *acc) const {
        y[b.off / ld] = __float2half(acc[0] * inv_len);
    }
};

// y = x · rsqrt(mean(x²) + eps) · g
struct RmsNormGain : OneOperandRows {
    static constexpr int kStages = 1;
    static constexpr bool kPerRow = false, kPerRowOuts = false;
    const __half *g;
    __half *y;
    float inv_len;
    __device__ static constexpr int combine(int) { return tsw::kSum; }
    __device__ void stage(int, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *, float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++) s[i] = v[0][i] * v[0][i];
    }
    __device__ void store(const Base &b, int64_t k0, int n, const float (&v)[kIn][kVec], const float *acc) const {
        float gv[kVec], o[kVec];
        tsv::load_span<kVec, kTestPairs>(gv, g, 1, k0, n);
        const float r = 1.f / sqrtf(acc[0] * inv_len + kEps);
#pragma unroll
        for (int i = 0; i < kVec; i++) o[i] = v[0][i] * r * gv[i];
        tsv::store_span<kVec, kTestPairs>(y + b.off, 1, k0, n, o);
    }
};

// LayerNorm's two stages over a span: stage 0 Σx, stage 1 Σ(x − acc0/n)².
template <int VEC>
__device__ __forceinline__ void mean_then_centred_squares(int j, const float (&x)[VEC], const float *acc, float inv_len,
                                                          float (&s)[VEC]) {
#pragma unroll
    for (int i = 0; i < VEC; i++) {
        const float c = x[i] - acc[0] * inv_len;
        s[i] = j == 0 ? x[i] : c * c;
    }
}

// y = (x − mean) · rsqrt(var + eps) · g + beta; stage 0 Σx, stage 1 Σ(x − acc0/n)²
struct LayerNorm : OneOperandRows {
    static constexpr int kStages = 2;
    static constexpr bool kPerRow = false, kPerRowOuts = false;
    const __half *g, *beta;
    __half *y;
    float inv_len;
    __device__ static constexpr int combine(int) { return tsw::kSum; }
    __device__ void stage(int j, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *acc,
                          float (&s)[kVec]) const {
        mean_then_centred_squares(j, v[0], acc, inv_len, s);
    }
    __device__ void store(const Base &b, int64_t k0, int n, const float (&v)[kIn][kVec], const float *acc) const {
        float gv[kVec], bv[kVec], o[kVec];
        tsv::load_span<kVec, kTestPairs>(gv, g, 1, k0, n);
        tsv::load_span<kVec, kTestPairs>(bv, beta, 1, k0, n);
        const float r = 1.f / sqrtf(acc[1] * inv_len + kEps);
#pragma unroll
        for (int i = 0; i < kVec; i++) o[i] = (v[0][i] - acc[0] * inv_len) * r * gv[i] + bv[i];
        tsv::store_span<kVec, kTestPairs>(y + b.off, 1, k0, n, o);
    }
};

// Stage 1's partial sum Σ 2^(c(x − m)) rescaled from maximum m to M (row.cuh kOnline: both in one pass).
struct ExpSumMerge {
    static constexpr int kOnline = 0;
    __device__ float merge(float part_sum, float part_max, float new_max) const {
        return part_sum * exp2f(kLog2e * (part_max - new_max));
    }
};

// y = 2^(c(x − max)) / Σ 2^(c(x − max)); stage 0 max x, stage 1 Σ 2^(c(x − acc0))
struct Softmax : OneOperandRows, ExpSumMerge {
    static constexpr int kStages = 2;
    static constexpr bool kPerRow = false, kPerRowOuts = false;
    __half *y;
    __device__ static constexpr int combine(int j) { return j == 0 ? tsw::kMax : tsw::kSum; }
    __device__ void stage(int j, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *acc,
                          float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++) s[i] = j == 0 ? v[0][i] : exp2f(kLog2e * (v[0][i] - acc[0]));
    }
    __device__ void store(const Base &b, int64_t k0, int n, const float (&v)[kIn][kVec], const float *acc) const {
        float o[kVec];
#pragma unroll
        for (int i = 0; i < kVec; i++) o[i] = exp2f(kLog2e * (v[0][i] - acc[0])) / acc[1];
        tsv::store_span<kVec, kTestPairs>(y + b.off, 1, k0, n, o);
    }
};

// A row's log-sum-exp, once per row (kPerRow): max + ln Σ e^(x − max); stage 0 max x, stage 1 Σ 2^(c(x − acc0))
struct LogSumExp : OneOperandRows, ExpSumMerge {
    static constexpr int kStages = 2;
    static constexpr bool kPerRow = true, kPerRowOuts = false;
    float *y;  // [rows]
    __device__ static constexpr int combine(int j) { return j == 0 ? tsw::kMax : tsw::kSum; }
    __device__ void stage(int j, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *acc,
                          float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++) s[i] = j == 0 ? v[0][i] : exp2f(kLog2e * (v[0][i] - acc[0]));
    }
    __device__ void store(const Base &b, int64_t, int, const float (&)[kIn][kVec], const float *acc) const {
        y[b.off / ld] = acc[0] + logf(acc[1]);
    }
};

// A row's cross-entropy against a target position (kPerRow): max + ln Σ e^(x − max) − x[target]; stage 0 max x,
// stage 1 Σ 2^(c(x − acc0)), stage 2 Σ x where the position is the row's target (it reads neither earlier
// stage: JOIN folds it into an uncached row's first pass, row.cuh kJoinFirst).
template <bool JOIN> struct CrossEntropyRows : OneOperandRows, ExpSumMerge {
    static constexpr int kStages = 3;
    static constexpr bool kPerRow = true, kPerRowOuts = false;
    static constexpr unsigned kJoinFirst = JOIN ? 4u : 0u;
    const int *target;  // [rows]
    float *y;           // [rows]
    struct Base : OneOperandRows::Base {
        int target;
    };
    __device__ void bind(const int64_t *idx, Base &b) const { b.off = idx[0] * ld, b.target = target[idx[0]]; }
    __device__ static constexpr int combine(int j) { return j == 0 ? tsw::kMax : tsw::kSum; }
    __device__ void stage(int j, const Base &b, int64_t k0, int, const float (&v)[kIn][kVec], const float *acc,
                          float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++)
            s[i] = j == 0 ? v[0][i] : j == 1 ? exp2f(kLog2e * (v[0][i] - acc[0])) : k0 + i == b.target ? v[0][i] : 0.f;
    }
    __device__ void store(const Base &b, int64_t, int, const float (&)[kIn][kVec], const float *acc) const {
        y[b.off / ld] = acc[0] + logf(acc[1]) - acc[2];
    }
};

// h = x + r; y = h · rsqrt(mean(h²) + eps) · g (both written)
struct ResidualRmsNorm {
    static constexpr int kVec = 8, kIn = 2, kStages = 1;
    static constexpr bool kPerRow = false, kPerRowOuts = false;
    const __half *x, *r, *g;
    __half *h, *y;
    int64_t ld;
    float inv_len;
    struct Base {
        int64_t off;
    };
    __device__ void bind(const int64_t *idx, Base &b) const { b.off = idx[0] * ld; }
    __device__ static constexpr int combine(int) { return tsw::kSum; }
    __device__ void load(const Base &b, int64_t k0, int n, float (&v)[kIn][kVec]) const {
        tsv::load_span<kVec, kTestPairs>(v[0], x + b.off, 1, k0, n);
        tsv::load_span<kVec, kTestPairs>(v[1], r + b.off, 1, k0, n);
    }
    static constexpr bool kHead = kTestPairs;
    static constexpr int kCache16 = kTestCache16;
    __device__ int head(const Base &b) const { return tsv::span_head<kVec>(x + b.off, 1); }
    __device__ void stage(int, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *, float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++) s[i] = (v[0][i] + v[1][i]) * (v[0][i] + v[1][i]);
    }
    __device__ void store(const Base &b, int64_t k0, int n, const float (&v)[kIn][kVec], const float *acc) const {
        float gv[kVec], o0[kVec], o1[kVec];
        tsv::load_span<kVec, kTestPairs>(gv, g, 1, k0, n);
        const float s = 1.f / sqrtf(acc[0] * inv_len + kEps);
#pragma unroll
        for (int i = 0; i < kVec; i++) o0[i] = v[0][i] + v[1][i], o1[i] = o0[i] * s * gv[i];
        tsv::store_span<kVec, kTestPairs>(h + b.off, 1, k0, n, o0);
        tsv::store_span<kVec, kTestPairs>(y + b.off, 1, k0, n, o1);
    }
};

// Down the columns of x [n, f] (rows of the functor are the columns f, positions along n, f apart): BatchNorm's
// statistics. y = (x − mean) · rsqrt(var + eps) · g[f] + beta[f] (per_row false), or the column sums
// (kPerRow: s[f] = Σ_n x[n, f]).
template <bool PER_ROW> struct ColumnNorm {
    static constexpr int kVec = 8, kIn = 1, kStages = PER_ROW ? 1 : 2;
    static constexpr bool kPerRow = PER_ROW, kPerRowOuts = false;
    const __half *x, *g, *beta;
    __half *y;
    int64_t ld;  // f: the stride along the row axis
    float inv_len;
    struct Base {
        int64_t off;
    };
    __device__ void bind(const int64_t *idx, Base &b) const { b.off = idx[0]; }
    __device__ static constexpr int combine(int) { return tsw::kSum; }
    __device__ void load(const Base &b, int64_t k0, int n, float (&v)[kIn][kVec]) const {
        tsv::load_span<kVec, kTestPairs>(v[0], x + b.off, ld, k0, n);
    }
    __device__ void stage(int j, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *acc,
                          float (&s)[kVec]) const {
        mean_then_centred_squares(j, v[0], acc, inv_len, s);
    }
    __device__ void store(const Base &b, int64_t k0, int n, const float (&v)[kIn][kVec], const float *acc) const {
        if constexpr (PER_ROW) {
            y[b.off] = __float2half(acc[0]);
        } else {
            float gv[kVec], bv[kVec], o[kVec];
            tsv::load_span<kVec, kTestPairs>(gv, g + b.off, 0, k0, n);
            tsv::load_span<kVec, kTestPairs>(bv, beta + b.off, 0, k0, n);
            const float r = 1.f / sqrtf(acc[1] * inv_len + kEps);
#pragma unroll
            for (int i = 0; i < kVec; i++) o[i] = (v[0][i] - acc[0] * inv_len) * r * gv[i] + bv[i];
            tsv::store_span<kVec, kTestPairs>(y + b.off, ld, k0, n, o);
        }
    }
};

// Σ over a short strided axis of x [n, c0, c1, c2] plus a bias over c2, per column (c0, c1, c2): an einsum's sum
// over heads after a per-head projection (n 12) or over experts (n 8), its columns three axes as the emitter binds
// them (two divisions a column).
struct ShortColumnSum {
    static constexpr int kVec = 8, kIn = 1, kStages = 1;
    static constexpr bool kPerRow = true, kPerRowOuts = false;
    const __half *x, *bias;
    __half *y;
    int64_t ld, s0, s1;  // ld: the stride along n (every column); s0, s1: c0's and c1's
    struct Base {
        int64_t off, c2;
    };
    __device__ void bind(const int64_t *idx, Base &b) const { b.off = idx[0] * s0 + idx[1] * s1 + idx[2], b.c2 = idx[2]; }
    __device__ static constexpr int combine(int) { return tsw::kSum; }
    __device__ void load(const Base &b, int64_t k0, int n, float (&v)[kIn][kVec]) const {
        tsv::load_span<kVec>(v[0], x + b.off, ld, k0, n);
    }
    __device__ void stage(int, const Base &, int64_t, int, const float (&v)[kIn][kVec], const float *, float (&s)[kVec]) const {
#pragma unroll
        for (int i = 0; i < kVec; i++) s[i] = v[0][i];
    }
    __device__ void store(const Base &b, int64_t, int, const float (&)[kIn][kVec], const float *acc) const {
        y[b.off] = __float2half(acc[0] + __half2float(bias[b.c2]));
    }
};

// Elementwise: y[t, d] = x[t, d] · g[d] + bias[t] (unit stride, a broadcast row vector, a per-row scalar)
struct ScaleBiasMap {
    static constexpr int kVec = 8;
    static constexpr bool kPairs = kTestPairs, kHead = kTestPairs; /* map.cuh's stores follow them */
    const __half *x, *g, *bias;
    int64_t ld;
    __device__ void operator()(const int64_t *idx, int n, float (&y)[kVec]) const {
        float a[kVec], gv[kVec], bv[kVec];
        tsv::load_span<kVec, kTestPairs>(a, x + idx[0] * ld, 1, idx[1], n);
        tsv::load_span<kVec, kTestPairs>(gv, g, 1, idx[1], n);
        tsv::load_span<kVec, kTestPairs>(bv, bias + idx[0], 0, idx[1], n);
#pragma unroll
        for (int i = 0; i < kVec; i++) y[i] = a[i] * gv[i] + bv[i];
    }
};

// y[r, c] = x[c, r] + b[r, c]: x stored transposed ([len, rows], unit stride along the rows), b and y
// row-major; WALK 0: map.cuh's transposed walk (neighbouring threads down the rows), -1: the plain walk.
template <int WALK> struct TransposeAddMap {
    static constexpr int kVec = 8, kWalk = WALK;
    static constexpr bool kHead = kTestPairs; /* the plain walk takes each row's head apart */
    const __half *x, *b;
    int64_t rows, len;
    __device__ void operator()(const int64_t *idx, int n, float (&y)[kVec]) const {
        float a[kVec], bv[kVec];
        tsv::load_span<kVec, kTestPairs>(a, x + idx[0], rows, idx[1], n);
        tsv::load_span<kVec, kTestPairs>(bv, b + idx[0] * len, 1, idx[1], n);
#pragma unroll
        for (int i = 0; i < kVec; i++) y[i] = a[i] + bv[i];
    }
};

// ---- host side -------------------------------------------------------------------------------------

static uint64_t g_seed = 0x9E3779B97F4A7C15ull;
static float uniform(float lo, float hi) {
    g_seed ^= g_seed << 13, g_seed ^= g_seed >> 7, g_seed ^= g_seed << 17;
    return lo + (hi - lo) * (float)((g_seed >> 11) * (1.0 / 9007199254740992.0));
}

// A device fp16 tensor of n elements at `shift` elements past a 256-byte aligned allocation, and its host copy.
struct Tensor {
    __half *base = nullptr, *d = nullptr;
    std::vector<float> h;  // the values as rounded to fp16
    int64_t n = 0;
    Tensor(int64_t n_, int shift, bool random) : n(n_) {
        CK(cudaMalloc(&base, (size_t)(n + 16) * sizeof(__half)));
        d = base + shift;
        h.assign((size_t)n, 0.f);
        std::vector<__half> tmp((size_t)n);
        for (int64_t i = 0; i < n; i++) {
            tmp[i] = __float2half(random ? uniform(-2.f, 2.f) : NAN);
            h[i] = __half2float(tmp[i]);
        }
        CK(cudaMemcpy(d, tmp.data(), (size_t)n * sizeof(__half), cudaMemcpyHostToDevice));
    }
    std::vector<float> fetch() const {
        std::vector<__half> tmp((size_t)n);
        CK(cudaMemcpy(tmp.data(), d, (size_t)n * sizeof(__half), cudaMemcpyDeviceToHost));
        std::vector<float> out((size_t)n);
        for (int64_t i = 0; i < n; i++) out[i] = __half2float(tmp[i]);
        return out;
    }
    ~Tensor() { cudaFree(base); }
    Tensor(const Tensor &) = delete;
    Tensor &operator=(const Tensor &) = delete;
};

struct Result {
    std::string name, shape;
    double us, gbs;
    double max_err;
    bool ok;
};
static std::vector<Result> g_results;

// Largest |got − want| / (atol + rtol·|want|) (≤ 1 passes); NaN anywhere fails.
static double score(const std::vector<float> &got, const std::vector<double> &want, double atol, double rtol) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (!std::isfinite(got[i])) return INFINITY;
        worst = std::max(worst, std::fabs(got[i] - want[i]) / (atol + rtol * std::fabs(want[i])));
    }
    return worst;
}

// Median time of launch() over 20 runs, L2 flushed before each (a 256 MiB memset).
static double time_us(const std::function<cudaError_t()> &launch) {
    static void *flush = nullptr;
    const size_t flush_bytes = (size_t)256 << 20;
    if (!flush) CK(cudaMalloc(&flush, flush_bytes));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> ms;
    CK(launch()); // warm-up
    for (int rep = 0; rep < 20; rep++) {
        CK(cudaMemsetAsync(flush, rep, flush_bytes));
        CK(cudaEventRecord(a));
        CK(launch());
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float t;
        CK(cudaEventElapsedTime(&t, a, b));
        ms.push_back(t);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(ms.begin(), ms.end());
    return 1e3 * ms[ms.size() / 2];
}

static std::string g_label;  // `sweep`: the launch shape, appended to each case's name

static void record(const char *case_name, int64_t rows, int64_t len, int shift, double bytes, double us, double err) {
    char shape[64], off[16] = "";
    if (shift) snprintf(off, sizeof off, " +%d elem", shift);
    snprintf(shape, sizeof shape, "%lldx%lld%s", (long long)rows, (long long)len, off);
    const std::string full = case_name + g_label;
    const char *name = full.c_str();
    Result r{name, shape, us, bytes / (us * 1e-6) / 1e9, err, err <= 1};
    printf("%-36s %-18s %9.2f us %8.1f GB/s %6.1f%% of 4.3 TB/s  max err %.3f (<= 1)  %s\n", name, shape, us, r.gbs,
           100 * r.gbs * 1e9 / kPeakBytesPerS, err, r.ok ? "ok" : "FAILED");
    fflush(stdout);
    g_results.push_back(r);
}

// `row_test sweep`: launch shapes (threads per row, cached spans per thread, blocks per SM the registers
// must allow) timed against each other on the bandwidth-bound cases; tpr 0 is launch_row's own choice. Run
// 34 timed 17 shapes (bench/results/row-sweep-34.log); these are the best of them and the default's
// neighbours.
template <int TPR, int ITEMS, int MINB> struct LaunchShape {
    static constexpr int tpr = TPR, items = ITEMS, minb = MINB;
};
using SweptShapes = std::tuple<LaunchShape<0, 0, 0>, LaunchShape<128, 4, 1>, LaunchShape<256, 2, 3>, LaunchShape<256, 2, 4>,
                               LaunchShape<128, 0, 4>, LaunchShape<32, 4, 1>, LaunchShape<32, 4, 4>, LaunchShape<64, 2, 4>,
                               LaunchShape<128, 4, 4>, LaunchShape<256, 0, 4>, LaunchShape<-1, 0, 0>, LaunchShape<-2, 0, 0>,
                               LaunchShape<32, 2, 4>,   // `short`: rows of 33-64 spans without idle spans
                               LaunchShape<512, 0, 2>, LaunchShape<1024, 0, 1>>;  // `passes`: wider blocks over few rows
constexpr size_t kShapes = std::tuple_size_v<SweptShapes>;
static size_t g_shape = 0;  // the shape `launch` uses: an index into SweptShapes

template <class Fn, class S> static cudaError_t launch_as(const tsw::RowParams<Fn> &p, int sms) {
    if constexpr (S::tpr == 0) return tsw::launch_row(p, sms, 0);
    else if constexpr (S::tpr == -1) return tsw::launch_row(p, sms, 0, true);  // long rows split over clusters
    else if constexpr (S::tpr == -2) {  // clusters of 256-thread blocks wherever they cache the row, else passes
        bool launched;
        const cudaError_t e = tsw::launch_row_clusters(p, sms, 0, &launched);
        return e != cudaSuccess || launched ? e : tsw::launch_row_as<Fn, 256, 0>(p, 0);
    } else return tsw::launch_row_as<Fn, S::tpr, S::items, S::minb>(p, 0);
}

template <class Fn, size_t... I>
static cudaError_t launch_shape(const tsw::RowParams<Fn> &p, int sms, std::index_sequence<I...>) {
    cudaError_t err = cudaErrorInvalidValue;
    (void)((g_shape == I && (err = launch_as<Fn, std::tuple_element_t<I, SweptShapes>>(p, sms), true)) || ...);
    return err;
}

// While set (`grid` cases), every launch gives row.cuh this scratch for a cooperative grid's partials (launch_row_grid).
static float *g_grid_scratch = nullptr;
constexpr int64_t kGridScratchFloats = 4 * 4096;  // as src/plan.h's TS_ROW_GRID_SCRATCH_FLOATS

template <class Fn> static cudaError_t launch(const Fn &fn, int64_t rows, int64_t len, int sms) {
    tsw::RowParams<Fn> p{};
    if (g_grid_scratch) p.grid_scratch = g_grid_scratch, p.grid_scratch_floats = kGridScratchFloats;
    p.nrowdim = 1;
    p.rsize[0] = rows;
    p.rows = rows;
    p.len = len;
    p.fn = fn;
    return launch_shape(p, sms, std::make_index_sequence<kShapes>{});
}

// ---- the cases -------------------------------------------------------------------------------------

static void rmsnorm_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true), g(len, 0, true), y(rows * len, shift, false);
    RmsNormGain fn{{x.d, len}, g.d, y.d, 1.f / (float)len};
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)(rows * len));
    for (int64_t r = 0; r < rows; r++) {
        double ss = 0;
        for (int64_t k = 0; k < len; k++) ss += (double)x.h[r * len + k] * x.h[r * len + k];
        double s = 1 / std::sqrt(ss / len + kEps);
        for (int64_t k = 0; k < len; k++) want[r * len + k] = x.h[r * len + k] * s * g.h[k];
    }
    double err = score(y.fetch(), want, 2e-3, 4e-3);
    record("rmsnorm+gain", rows, len, shift, 2.0 * rows * len * 2 + len * 2, time_us([&] { return launch(fn, rows, len, sms); }), err);
}

static void layernorm_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true), g(len, 0, true), beta(len, 0, true), y(rows * len, shift, false);
    LayerNorm fn{{x.d, len}, g.d, beta.d, y.d, 1.f / (float)len};
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)(rows * len));
    for (int64_t r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int64_t k = 0; k < len; k++) m += x.h[r * len + k];
        m /= len;
        for (int64_t k = 0; k < len; k++) v += (x.h[r * len + k] - m) * (x.h[r * len + k] - m);
        double s = 1 / std::sqrt(v / len + kEps);
        for (int64_t k = 0; k < len; k++) want[r * len + k] = (x.h[r * len + k] - m) * s * g.h[k] + beta.h[k];
    }
    double err = score(y.fetch(), want, 4e-3, 4e-3);
    record("layernorm", rows, len, shift, 2.0 * rows * len * 2 + len * 4, time_us([&] { return launch(fn, rows, len, sms); }), err);
}

static void softmax_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true), y(rows * len, shift, false);
    Softmax fn{{x.d, len}, {}, y.d};
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)(rows * len));
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t k = 0; k < len; k++) m = std::max(m, (double)x.h[r * len + k]);
        for (int64_t k = 0; k < len; k++) s += std::exp(x.h[r * len + k] - m);
        for (int64_t k = 0; k < len; k++) want[r * len + k] = std::exp(x.h[r * len + k] - m) / s;
    }
    double err = score(y.fetch(), want, 1e-6, 4e-3);
    record("softmax", rows, len, shift, 2.0 * rows * len * 2, time_us([&] { return launch(fn, rows, len, sms); }), err);
}

static void mean_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true), y(rows, 0, false);
    MeanRows fn{{x.d, len}, y.d, 1.f / (float)len};
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0;
        for (int64_t k = 0; k < len; k++) sum += x.h[r * len + k];
        want[r] = sum / len;
    }
    double err = score(y.fetch(), want, 2e-3, 4e-3);
    record("mean (per row)", rows, len, shift, 2.0 * rows * len + 2.0 * rows, time_us([&] { return launch(fn, rows, len, sms); }), err);
}

// Row r's log-sum-exp in float64, and a device vector of floats fetched.
static double log_sum_exp(const std::vector<float> &x, int64_t r, int64_t len) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < len; k++) m = std::max(m, (double)x[r * len + k]);
    for (int64_t k = 0; k < len; k++) s += std::exp(x[r * len + k] - m);
    return m + std::log(s);
}
static std::vector<float> fetch_floats(const float *d, int64_t n) {
    std::vector<float> got((size_t)n);
    CK(cudaMemcpy(got.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return got;
}

static void lse_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true);
    float *y = nullptr;
    CK(cudaMalloc(&y, rows * sizeof(float)));
    CK(cudaMemset(y, 0xff, rows * sizeof(float)));  // NaN
    LogSumExp fn{{x.d, len}, {}, y};
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)rows);
    for (int64_t r = 0; r < rows; r++) want[r] = log_sum_exp(x.h, r, len);
    double err = score(fetch_floats(y, rows), want, 1e-4, 1e-5);
    record("logsumexp (per row)", rows, len, shift, 2.0 * rows * len + 4.0 * rows,
           time_us([&] { return launch(fn, rows, len, sms); }), err);
    CK(cudaFree(y));
}

template <bool JOIN> static void xent_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true);
    std::vector<int> target((size_t)rows);
    for (int64_t r = 0; r < rows; r++) target[r] = (int)((r * 7919 + 13) % len);
    int *t = nullptr;
    float *y = nullptr;
    CK(cudaMalloc(&t, rows * sizeof(int)));
    CK(cudaMemcpy(t, target.data(), rows * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc(&y, rows * sizeof(float)));
    CK(cudaMemset(y, 0xff, rows * sizeof(float)));  // NaN
    CrossEntropyRows<JOIN> fn{};
    fn.x = x.d, fn.ld = len, fn.target = t, fn.y = y;
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)rows);
    for (int64_t r = 0; r < rows; r++) want[r] = log_sum_exp(x.h, r, len) - x.h[r * len + target[r]];
    double err = score(fetch_floats(y, rows), want, 1e-4, 1e-5);
    record(JOIN ? "cross-entropy (joined)" : "cross-entropy (a pass a stage)", rows, len, shift,
           2.0 * rows * len + 8.0 * rows, time_us([&] { return launch(fn, rows, len, sms); }), err);
    CK(cudaFree(t));
    CK(cudaFree(y));
}

static void residual_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true), r(rows * len, shift, true), g(len, 0, true);
    Tensor h(rows * len, shift, false), y(rows * len, shift, false);
    ResidualRmsNorm fn{x.d, r.d, g.d, h.d, y.d, len, 1.f / (float)len};
    CK(launch(fn, rows, len, sms));
    CK(cudaDeviceSynchronize());
    std::vector<double> want_h((size_t)(rows * len)), want_y((size_t)(rows * len));
    for (int64_t i = 0; i < rows; i++) {
        double ss = 0;
        for (int64_t k = 0; k < len; k++) {
            double v = (double)x.h[i * len + k] + r.h[i * len + k];
            want_h[i * len + k] = v;
            ss += v * v;
        }
        double s = 1 / std::sqrt(ss / len + kEps);
        for (int64_t k = 0; k < len; k++) want_y[i * len + k] = want_h[i * len + k] * s * g.h[k];
    }
    double err = std::max(score(h.fetch(), want_h, 2e-3, 4e-3), score(y.fetch(), want_y, 2e-3, 4e-3));
    record("residual+rmsnorm (2 out)", rows, len, shift, 4.0 * rows * len * 2 + len * 2,
           time_us([&] { return launch(fn, rows, len, sms); }), err);
}

static void map_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(rows * len, shift, true), g(len, 0, true), bias(rows, 0, true), y(rows * len, shift, false);
    tsm::MapParams<__half, ScaleBiasMap> p{};
    p.ndim = 2;
    p.size[0] = rows, p.size[1] = len;
    p.out = y.d;
    p.out_stride[0] = len, p.out_stride[1] = 1;
    p.numel = rows * len;
    p.fn = ScaleBiasMap{x.d, g.d, bias.d, len};
    CK(tsm::launch_map(p, sms, 0));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)(rows * len));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < len; k++) want[r * len + k] = (double)x.h[r * len + k] * g.h[k] + bias.h[r];
    double err = score(y.fetch(), want, 2e-3, 4e-3);
    record("map x*g[d]+b[t]", rows, len, shift, 2.0 * rows * len * 2 + len * 2 + rows * 2,
           time_us([&] { return tsm::launch_map(p, sms, 0); }), err);
}

template <int WALK> static void transpose_case(int64_t rows, int64_t len, int shift, int sms) {
    Tensor x(len * rows, shift, true), b(rows * len, shift, true), y(rows * len, shift, false);
    tsm::MapParams<__half, TransposeAddMap<WALK>> p{};
    p.ndim = 2;
    p.size[0] = rows, p.size[1] = len;
    p.out = y.d;
    p.out_stride[0] = len, p.out_stride[1] = 1;
    p.numel = rows * len;
    p.fn = TransposeAddMap<WALK>{x.d, b.d, rows, len};
    CK(tsm::launch_map(p, sms, 0));
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)(rows * len));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < len; c++) want[r * len + c] = (double)x.h[c * rows + r] + b.h[r * len + c];
    double err = score(y.fetch(), want, 2e-3, 4e-3);
    record(WALK >= 0 ? "map x^T+b, transposed walk" : "map x^T+b, plain walk", rows, len, shift,
           3.0 * rows * len * 2, time_us([&] { return tsm::launch_map(p, sms, 0); }), err);
}

// Statistics down the columns of x [n, f]: a column LayerNorm (BatchNorm in training) or the column sums,
// through launch_row_columns (neighbouring threads on neighbouring columns).
// Through launch_row_columns, or where given, launch(p) (the column sweep: one launch shape, labelled).
template <bool PER_ROW> using ColumnLaunch = cudaError_t (*)(const tsw::RowParams<ColumnNorm<PER_ROW>> &, cudaStream_t);
template <bool PER_ROW>
static void column_case(int64_t n, int64_t f, int shift, int sms, ColumnLaunch<PER_ROW> launch = nullptr,
                        const char *label = "") {
    Tensor x(n * f, shift, true), g(f, 0, true), beta(f, 0, true), y(PER_ROW ? f : n * f, shift, false);
    ColumnNorm<PER_ROW> fn{x.d, g.d, beta.d, y.d, f, 1.f / (float)n};
    tsw::RowParams<ColumnNorm<PER_ROW>> p{};
    p.nrowdim = 1;
    p.rsize[0] = p.rows = f;
    p.len = n;
    p.fn = fn;
    auto run = [&] { return launch ? launch(p, 0) : tsw::launch_row_columns(p, sms, 0); };
    CK(run());
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)(PER_ROW ? f : n * f));
    for (int64_t c = 0; c < f; c++) {
        double m = 0, v = 0;
        for (int64_t k = 0; k < n; k++) m += x.h[k * f + c];
        if (PER_ROW) {
            want[c] = m;
            continue;
        }
        m /= n;
        for (int64_t k = 0; k < n; k++) v += (x.h[k * f + c] - m) * (x.h[k * f + c] - m);
        double s = 1 / std::sqrt(v / n + kEps);
        for (int64_t k = 0; k < n; k++) want[k * f + c] = (x.h[k * f + c] - m) * s * g.h[c] + beta.h[c];
    }
    double err = score(y.fetch(), want, PER_ROW ? 2e-2 : 4e-3, 4e-3);
    record((std::string(PER_ROW ? "column sums" : "column layernorm (batchnorm)") + label).c_str(), n, f, shift,
           PER_ROW ? 2.0 * n * f + f * 2 : 2.0 * n * f * 2 + f * 4, time_us(run), err);
}

// `row_test colshort`: sums over n ≤ 256 positions down c0·c1·c2 columns (three row axes), through
// launch_row_columns and through each block shape (COLS columns a block, 512 / COLS threads a column).
using ShortColumnLaunch = cudaError_t (*)(const tsw::RowParams<ShortColumnSum> &, cudaStream_t);
static void short_column_case(int64_t n, int64_t c0, int64_t c1, int64_t c2, int sms, ShortColumnLaunch launch,
                              const char *label) {
    const int64_t f = c0 * c1 * c2;
    Tensor x(n * f, 0, true), bias(c2, 0, true), y(f, 0, false);
    ShortColumnSum fn{x.d, bias.d, y.d, f, c1 * c2, c2};
    tsw::RowParams<ShortColumnSum> p{};
    p.nrowdim = 3;
    p.rsize[0] = c0, p.rsize[1] = c1, p.rsize[2] = c2;
    p.rows = f;
    p.len = n;
    p.fn = fn;
    auto run = [&] { return launch ? launch(p, 0) : tsw::launch_row_columns(p, sms, 0); };
    CK(run());
    CK(cudaDeviceSynchronize());
    std::vector<double> want((size_t)f);
    for (int64_t c = 0; c < f; c++) {
        double sum = bias.h[c % c2];
        for (int64_t k = 0; k < n; k++) sum += x.h[k * f + c];
        want[c] = sum;
    }
    double err = score(y.fetch(), want, 2e-2, 4e-3);
    record((std::string("short column sums") + label).c_str(), n, f, 0, 2.0 * n * f + 2.0 * f + 2.0 * c2, time_us(run), err);
}
static void short_column_sweep(int sms) {
    const int64_t shapes[][4] = {{12, 8, 512, 768}, {8, 4, 1024, 256}, {16, 4, 1024, 256}, {4, 16, 1024, 256},
                                 {2, 16, 1024, 256}, {32, 2, 1024, 256}, {256, 64, 1, 4096}};
    const struct {
        ShortColumnLaunch launch;
        const char *label;
    } launches[] = {{nullptr, " [launch_row_columns]"},
                    {tsw::launch_row_columns_as<ShortColumnSum, 512, 1>, " [512 cols]"},
                    {tsw::launch_row_columns_as<ShortColumnSum, 256, 1>, " [256 cols]"},
                    {tsw::launch_row_columns_as<ShortColumnSum, 128, 1>, " [128 cols]"},
                    {tsw::launch_row_columns_as<ShortColumnSum, 64, 1>, " [64 cols]"},
                    {tsw::launch_row_columns_as<ShortColumnSum, 32, 1>, " [32 cols]"},
                    {tsw::launch_row_columns_as<ShortColumnSum, 512, 1, 4>, " [512 cols d4]"}};
    for (const auto &sh : shapes)
        for (const auto &l : launches) short_column_case(sh[0], sh[1], sh[2], sh[3], sms, l.launch, l.label);
}

static void copy_case(int64_t rows, int64_t len, int sms) {
    (void)sms;
    Tensor x(rows * len, 0, true), y(rows * len, 0, false);
    CK(cudaMemcpy(y.d, x.d, (size_t)(rows * len) * 2, cudaMemcpyDeviceToDevice));
    double err = score(y.fetch(), std::vector<double>(x.h.begin(), x.h.end()), 1e-12, 0);
    record("cudaMemcpy (reference)", rows, len, 0, 2.0 * rows * len * 2, time_us([&] {
               return cudaMemcpyAsync(y.d, x.d, (size_t)(rows * len) * 2, cudaMemcpyDeviceToDevice);
           }), err);
}

struct ShapeInfo {
    int tpr, items, minb;
};
template <size_t... I> static std::vector<ShapeInfo> shape_infos(std::index_sequence<I...>) {
    using S = SweptShapes;
    return {ShapeInfo{std::tuple_element_t<I, S>::tpr, std::tuple_element_t<I, S>::items, std::tuple_element_t<I, S>::minb}...};
}

// The column kernel's launch shapes (rows a block × CTAs a cluster × spans in flight) on the bandwidth cases.
template <bool PER_ROW> static void column_sweep_shape(int64_t n, int64_t f, int sms) {
    using Fn = ColumnNorm<PER_ROW>;
    const struct {
        ColumnLaunch<PER_ROW> launch;
        const char *label;
    } shapes[] = {
        {tsw::launch_row_columns_as<Fn, 16, 2, 2>, " [16x2 d2]"}, {tsw::launch_row_columns_as<Fn, 16, 4, 2>, " [16x4 d2]"},
        {tsw::launch_row_columns_as<Fn, 16, 2, 4>, " [16x2 d4]"}, {tsw::launch_row_columns_as<Fn, 32, 4, 2>, " [32x4 d2]"},
        {tsw::launch_row_columns_as<Fn, 32, 4, 4>, " [32x4 d4]"}, {tsw::launch_row_columns_as<Fn, 64, 8, 2>, " [64x8 d2]"},
        {tsw::launch_row_columns_as<Fn, 64, 8, 4>, " [64x8 d4]"}, {tsw::launch_row_columns_as<Fn, 32, 8, 2>, " [32x8 d2]"},
    };
    for (const auto &sh : shapes) column_case<PER_ROW>(n, f, 0, sms, sh.launch, sh.label);
}
static void column_sweep(int sms) {
    const int64_t sizes[][2] = {{4096, 2048}, {8192, 4096}, {2048, 1024}};
    for (const auto &sz : sizes) {
        column_sweep_shape<false>(sz[0], sz[1], sms);
        column_sweep_shape<true>(sz[0], sz[1], sms);
    }
}

struct SweepCase {
    void (*run)(int64_t, int64_t, int, int);
    int64_t rows, len;
};

// Each case under every launch shape that caches its rows (at most 4x over) or passes over them, launch_row's first.
static void sweep_cases(const std::vector<SweepCase> &cases, int sms) {
    const std::vector<ShapeInfo> shapes = shape_infos(std::make_index_sequence<kShapes>{});
    for (const auto &c : cases)
        for (size_t v = 0; v < kShapes; v++) {
            const ShapeInfo &sh = shapes[v];
            const int64_t cached = (int64_t)sh.tpr * sh.items * 8;  // kVec 8
            if (sh.tpr < 0) continue;
            if (sh.tpr > 0 && sh.items > 0 && (cached < c.len || cached >= 4 * c.len)) continue;
            if (sh.tpr > 0 && sh.items == 0 && sh.tpr * 8 > c.len) continue;
            char label[48];
            if (sh.tpr == 0) snprintf(label, sizeof label, " [launch_row]");
            else if (sh.minb > 1) snprintf(label, sizeof label, " [%dx%d min%d]", sh.tpr, sh.items, sh.minb);
            else snprintf(label, sizeof label, " [%dx%d]", sh.tpr, sh.items);
            g_shape = v;
            g_label = label;
            c.run(c.rows, c.len, 0, sms);
        }
    g_shape = 0;
    g_label.clear();
}

static void sweep(int sms) {
    sweep_cases({{residual_case, 4096, 4096}, {residual_case, 8192, 4096}, {rmsnorm_case, 8192, 4096},
                 {softmax_case, 8192, 4096}, {layernorm_case, 8192, 4096}, {layernorm_case, 4096, 1024},
                 {rmsnorm_case, 16384, 1024}, {residual_case, 16384, 1024}},
                sms);
}

// `row_test short`: rows a warp or less caches, many of them (a global average pool over 28x28 and 14x14, norms
// over 512 and 784), where a block lives for one load's latency, and the bandwidth cases beside them (run 161: a
// pipelined persistent form and 8 blocks an SM were no faster there; bench/NOTES.md).
static void short_sweep(int sms) {
    sweep_cases({{mean_case, 32768, 784}, {mean_case, 65536, 196}, {rmsnorm_case, 16384, 512},
                 {residual_case, 16384, 512}, {layernorm_case, 32768, 784}, {softmax_case, 16384, 1024},
                 {residual_case, 4096, 4096}, {rmsnorm_case, 8192, 4096}},
                sms);
}

// `row_test long`: rows longer than a 256-thread block caches — launch_row's choice (a 512- or 1024-thread
// block a row where that caches it; fewer rows than SMs: a cluster's blocks caching shares of the row, on
// sm_90+), its `split` (clusters for rows longer than the widest block caches) and a pass per stage and one for
// the outputs (256 threads a row, nothing cached). bench/NOTES.md runs 152-153 have what else was timed.
static void long_sweep(int sms) {
    const struct {
        void (*run)(int64_t, int64_t, int, int);
        int64_t rows, len;
    } cases[] = {{residual_case, 4096, 4096},   // cached a block a row by launch_row: its passes beside it
                 {softmax_case, 2048, 32000},   {lse_case, 2048, 32000},       {lse_case, 16, 128256},
                 {xent_case<true>, 2048, 32000}, {xent_case<false>, 2048, 32000}, {xent_case<true>, 4096, 128256},
                 {xent_case<true>, 37, 20011},  {xent_case<false>, 37, 20011},
                 {residual_case, 4096, 8192},   {residual_case, 2048, 16384},  {layernorm_case, 1024, 32768},
                 {rmsnorm_case, 4096, 16384},   {layernorm_case, 2048, 16384}, {softmax_case, 2048, 16384},
                 {rmsnorm_case, 512, 65536},    {softmax_case, 512, 128256},
                 // fewer rows than SMs: a cluster a row
                 {softmax_case, 16, 16384},     {rmsnorm_case, 16, 16384},     {layernorm_case, 16, 16384},
                 {lse_case, 8, 32000},          {softmax_case, 1, 32000},      {residual_case, 64, 8192},
                 {rmsnorm_case, 32, 4096},      {softmax_case, 4, 65536}};
    const std::vector<ShapeInfo> shapes = shape_infos(std::make_index_sequence<kShapes>{});
    for (const auto &c : cases)
        for (size_t v = 0; v < kShapes; v++) {
            const ShapeInfo &sh = shapes[v];
            const bool passes = sh.tpr == 256 && sh.items == 0 && sh.minb == 4;
            if (sh.tpr > 0 && !passes) continue;
            g_shape = v;
            g_label = passes ? " [passes]" : sh.tpr == -1 ? " [launch_row split]" : sh.tpr == -2 ? " [clusters]" : " [launch_row]";
            c.run(c.rows, c.len, 0, sms);
        }
    g_shape = 0;
    g_label.clear();
}

// `row_test passes`: rows too long for a block's registers, about as many as the SMs or a few times more (a GroupNorm's
// 128 rows of 512K, a matrix-vector product's 256 rows of 131072): a pass a stage by blocks of 256, 512 or 1024 threads
// a row (8, 16 or 32 warps an SM where there is a row for each) beside launch_row's choice.
static void passes_sweep(int sms) {
    const struct {
        void (*run)(int64_t, int64_t, int, int);
        int64_t rows, len;
    } cases[] = {{mean_case, 128, 262144},     {rmsnorm_case, 128, 262144}, {layernorm_case, 128, 262144},
                 {mean_case, 256, 131072},     {residual_case, 256, 131072}, {rmsnorm_case, 264, 65536},
                 {layernorm_case, 400, 65536}, {softmax_case, 200, 100000},  {mean_case, 1000, 65536}};
    const std::vector<ShapeInfo> shapes = shape_infos(std::make_index_sequence<kShapes>{});
    for (const auto &c : cases)
        for (size_t v = 0; v < kShapes; v++) {
            const ShapeInfo &sh = shapes[v];
            if (sh.tpr != 0 && !(sh.items == 0 && sh.tpr >= 256 && sh.minb * sh.tpr == 1024)) continue;
            char label[48];
            if (sh.tpr == 0) snprintf(label, sizeof label, " [launch_row]");
            else snprintf(label, sizeof label, " [passes %d min%d]", sh.tpr, sh.minb);
            g_shape = v;
            g_label = label;
            c.run(c.rows, c.len, 0, sms);
        }
    g_shape = 0;
    g_label.clear();
}

// The split index of SweptShapes: launch_row with `split` (long rows over clusters whatever their count).
static size_t split_shape() {
    const std::vector<ShapeInfo> shapes = shape_infos(std::make_index_sequence<kShapes>{});
    for (size_t v = 0; v < shapes.size(); v++)
        if (shapes[v].tpr == -1) return v;
    return 0;
}

// Every row functor over rows a cluster splits: few rows (launch_row's own clusters) and, with `split`, many
// longer than the widest block caches; and over rows a 512- or 1024-thread block caches alone; small enough for
// compute-sanitizer (`row_test cluster`).
static void cluster_cases(int sms) {
    const struct {
        int64_t rows, len;
        int shift;
        bool split;
    } cases[] = {{16, 16384, 0, false}, {8, 32000, 0, false}, {37, 20011, 1, false}, {3, 40000, 2, false},
                 {200, 12000, 0, false}, {150, 40000, 0, true}, {150, 20011, 1, true}};
    for (const auto &c : cases) {
        g_shape = c.split ? split_shape() : 0;
        g_label = c.split ? " [split]" : "";
        rmsnorm_case(c.rows, c.len, c.shift, sms);
        layernorm_case(c.rows, c.len, c.shift, sms);
        softmax_case(c.rows, c.len, c.shift, sms);
        lse_case(c.rows, c.len, c.shift, sms);
        residual_case(c.rows, c.len, c.shift, sms);
    }
    g_shape = 0;
    g_label.clear();
}

// Few rows too long for a cluster's registers (a whole tensor's sum, a LayerNorm over [c, h, w] of a small batch):
// every row functor over a cooperative grid (the scratch given: " [grid]") and over clusters (none: " [clusters]"),
// then a mean over one long row captured in a CUDA graph and replayed, validated after each replay (`row_test grid`).
static void grid_graph_case(int64_t len, int sms) {
    Tensor x(len, 0, true), y(1, 0, false);
    MeanRows fn{{x.d, len}, y.d, 1.f / (float)len};
    double sum = 0;
    for (int64_t k = 0; k < len; k++) sum += x.h[k];
    const std::vector<double> want{sum / len};
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    tsw::RowParams<MeanRows> p{};
    p.nrowdim = 1, p.rsize[0] = 1, p.rows = 1, p.len = len, p.fn = fn;
    p.grid_scratch = g_grid_scratch, p.grid_scratch_floats = kGridScratchFloats;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CK(tsw::launch_row(p, sms, s));
    CK(cudaStreamEndCapture(s, &graph));
    CK(cudaGraphInstantiate(&exec, graph, 0));
    double err = 0;
    for (int rep = 0; rep < 3; rep++) {
        CK(cudaMemset(y.d, 0xff, sizeof(__half)));  // NaN
        CK(cudaGraphLaunch(exec, s));
        CK(cudaStreamSynchronize(s));
        err = std::max(err, score(y.fetch(), want, 2e-3, 4e-3));
    }
    record("mean, CUDA graph (3 replays)", 1, len, 0, 2.0 * len, time_us([&] { return cudaGraphLaunch(exec, 0); }), err);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
    CK(cudaStreamDestroy(s));
}

static void grid_cases(int sms) {
    const struct {
        int64_t rows, len;
        int shift;
    } cases[] = {{1, 16777216, 0}, {1, 4194304, 0}, {16, 1048576, 0}, {3, 3000017, 1}, {8, 80000, 2}, {1, 70001, 1}, {40, 300000, 0},
                 {128, 262144, 0}};  // a GroupNorm's 128 rows: a 1024-thread block each, grid or not
    CK(cudaMalloc(&g_grid_scratch, kGridScratchFloats * sizeof(float)));
    for (int grid = 1; grid >= 0; grid--) {
        float *scratch = g_grid_scratch;
        if (!grid) g_grid_scratch = nullptr;
        g_label = grid ? " [grid]" : " [clusters]";
        for (const auto &c : cases) {
            mean_case(c.rows, c.len, c.shift, sms);
            rmsnorm_case(c.rows, c.len, c.shift, sms);
            layernorm_case(c.rows, c.len, c.shift, sms);
            softmax_case(c.rows, c.len, c.shift, sms);
            lse_case(c.rows, c.len, c.shift, sms);
            xent_case<true>(c.rows, c.len, c.shift, sms);
            residual_case(c.rows, c.len, c.shift, sms);
        }
        g_grid_scratch = scratch;
    }
    g_label.clear();
    grid_graph_case(16777216, sms);
    CK(cudaFree(g_grid_scratch));
    g_grid_scratch = nullptr;
}

// `row_test map`: the elementwise maps alone, plain and transposed walks, at the sizes the bench's maps take
// (a 4096-wide activation, a vocabulary of logits, rows one element off 16 bytes), beside the copy.
static void map_cases(int sms) {
    const struct {
        int64_t rows, len;
        int shift;
    } maps[] = {{8192, 4096, 0}, {8192, 4096, 1}, {8192, 4096, 2}, {4096, 14336, 0}, {1024, 50257, 0},
                {37, 4099, 0},   {1000, 2500, 0}, {65536, 64, 0},  {4096, 20, 1},    {64, 40000, 0}};
    for (const auto &m : maps) map_case(m.rows, m.len, m.shift, sms);
    transpose_case<0>(8192, 4096, 0, sms);
    transpose_case<0>(37, 4099, 1, sms);
    transpose_case<-1>(1000, 100, 0, sms);
}

int main(int argc, char **argv) {
    const bool column_sweep_only = argc > 1 && std::string(argv[1]) == "colsweep";
    const bool long_only = argc > 1 && std::string(argv[1]) == "long";
    const bool cluster_only = argc > 1 && std::string(argv[1]) == "cluster";
    const bool map_only = argc > 1 && std::string(argv[1]) == "map";
    const bool short_only = argc > 1 && std::string(argv[1]) == "short";
    const bool colshort_only = argc > 1 && std::string(argv[1]) == "colshort";
    const bool grid_only = argc > 1 && std::string(argv[1]) == "grid";
    const bool passes_only = argc > 1 && std::string(argv[1]) == "passes";
    const bool sweep_only = column_sweep_only || long_only || cluster_only || map_only || short_only || colshort_only || grid_only ||
                            passes_only ||
                            (argc > 1 && std::string(argv[1]) == "sweep");
    int dev = 0, sms = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("row_test on %s (%d SMs)\n", prop.name, sms);
    const struct {
        int64_t rows, len;
        int shift;
    } shapes[] = {
        {8192, 4096, 0},   // the bandwidth target: cached, 128 threads per row
        {37, 4099, 0},     // odd sizes: every row but the first misaligned, partial spans
        {8192, 4096, 1},   // misaligned pointers: the scalar fallback
        {8192, 4096, 2},   // pointers 4 bytes off 16: 4-byte pairs
        {1000, 2500, 0},   // rows 5000 bytes apart: every other row 4-byte pairs (a K of 2500)
        {16384, 512, 0},   // short rows: a warp per row
        {1000, 100, 0},    // very short rows: one span per lane, 16 lanes per row
        {65536, 64, 0},    // a group norm's 64 channels: 8 lanes per row
        {65536, 16, 0},    // a group norm's 16 channels: 2 lanes per row
        {65536, 8, 0},     // 8 channels: a lane per row
        {4097, 12, 1},     // 2 spans, misaligned, the second partial
        {4096, 20, 1},     // 3 spans of 8 lanes, misaligned: partial spans on the scalar path
        {64, 40000, 0},    // rows too long for a block: a cluster of 8 caches them (sm_90+)
        {300, 32000, 0},   // a vocabulary: a cluster of 4 (sm_90+)
        {37, 20011, 1},    // odd, misaligned: a cluster of 4 with partial shares
        {16, 80000, 0},    // too long for 8 blocks: a pass per stage, each row over a cluster of 8 (sm_90+)
        {16, 1048576, 0},  // a LayerNorm over [c, h, w] of a small batch: passes over clusters of 8 (sm_90+)
        {1, 4194304, 0},   // one long row (a whole tensor's sum): 8 blocks
        {100, 200003, 1},  // odd, misaligned: clusters of 2 with partial shares, passes
        {4096, 16384, 0},  // long rows: a 512-thread block a row caches one operand, 1024 threads two
        {300, 12007, 1},   // odd, misaligned: 512 or 1024 threads a row, partial spans
    };
    if (column_sweep_only) column_sweep(sms);
    else if (long_only) long_sweep(sms);
    else if (cluster_only) cluster_cases(sms);
    else if (map_only) map_cases(sms);
    else if (short_only) short_sweep(sms);
    else if (colshort_only) short_column_sweep(sms);
    else if (grid_only) grid_cases(sms);
    else if (passes_only) passes_sweep(sms);
    else if (sweep_only) sweep(sms);
    if (!sweep_only) cluster_cases(sms), grid_cases(sms);
    for (const auto &s : shapes) {
        if (sweep_only) break;
        rmsnorm_case(s.rows, s.len, s.shift, sms);
        layernorm_case(s.rows, s.len, s.shift, sms);
        softmax_case(s.rows, s.len, s.shift, sms);
        lse_case(s.rows, s.len, s.shift, sms);
        mean_case(s.rows, s.len, s.shift, sms);
        residual_case(s.rows, s.len, s.shift, sms);
        map_case(s.rows, s.len, s.shift, sms);
    }
    const struct {
        int64_t n, f;
        int shift;
    } columns[] = {
        {1024, 2048, 0},  // a GEMM's [b, f] output: 16 columns a block
        {4096, 2048, 0},  // gemm_batchnorm's: 16 columns a block, two CTAs a cluster on Hopper
        {8192, 4096, 0},  // the bandwidth target: 32 columns a block
        {128, 512, 0},    // KernelBench's batch of 128: 8 columns a block
        {37, 4099, 1},    // odd sizes, misaligned
        {1, 1000, 0},     // a single position per column
        {100000, 3, 0},   // long and few columns: most threads of a block idle
        {4100, 2050, 1},  // odd sizes, misaligned, over a cluster: each CTA's chunk cached (ColumnCache)
        {1024, 65536, 0}, // a softmax-like channel axis: 1024 positions down 65536 columns, cached without a cluster
        {16384, 1024, 0}, // too long for 8 CTAs' registers: a pass a stage
    };
    for (const auto &c : columns) {
        if (sweep_only) break;
        column_case<false>(c.n, c.f, c.shift, sms);
        column_case<true>(c.n, c.f, c.shift, sms);
    }
    const struct {
        int64_t rows, len;
        int shift;
    } transposes[] = {{8192, 4096, 0}, {4096, 8192, 0}, {37, 4099, 1}, {4096, 20, 1}, {1000, 100, 0}, {5, 3000, 0}};
    for (const auto &t : transposes) {
        if (sweep_only) break;
        transpose_case<0>(t.rows, t.len, t.shift, sms);
        transpose_case<-1>(t.rows, t.len, t.shift, sms);
    }
    if (!cluster_only && !grid_only) copy_case(8192, 4096, sms);
    if (sweep_only && !long_only && !cluster_only && !map_only && !grid_only && !passes_only) copy_case(4096, 4096 * 2, sms);

    printf("\n%-40s %-18s %10s %10s %8s  %s\n", "case", "shape", "time us", "GB/s", "% peak", "valid");
    int failed = 0;
    for (const auto &r : g_results) {
        printf("%-40s %-18s %10.2f %10.1f %7.1f%%  %s\n", r.name.c_str(), r.shape.c_str(), r.us, r.gbs,
               100 * r.gbs * 1e9 / kPeakBytesPerS, r.ok ? "ok" : "FAILED");
        failed += !r.ok;
    }
    printf("%s: %d of %zu cases valid\n", failed ? "FAILED" : "ok", (int)g_results.size() - failed, g_results.size());
    return failed ? 1 : 0;
}
