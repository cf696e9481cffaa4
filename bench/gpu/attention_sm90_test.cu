// attention_sm90_test.cu — validates and times templates/attention_sm90.cuh (tsa90::launch_attention_sm90,
// the wgmma/TMA kernel) on one GPU and compares its time with tsa::launch_attention (mma.sync) on the same
// inputs. Same configs, reference and criteria as attention_test.cu.
// For each config: fresh U(-1,1) inputs, output poisoned with NaN, the sm90 launcher, then a simple fp32
// reference kernel (one block per query row, exact softmax with the same score) on all query rows or an
// evenly spread subset (big configs); relative L2 ≤ 1e-2 and every output element finite, else FAIL.
// Timing: 3 warm-ups, median of 30 CUDA-event runs, L2 flushed (256 MB memset) before each run.
// Prints one line per config: path taken (wgmma or which fallback), rel. L2 error, PASS/FAIL, sm90 time
// and TFLOP/s, the mma.sync kernel's time and TFLOP/s, and the speedup. Exits 1 if any config fails, 2 on a
// CUDA error (a watchdog-trapped deadlock shows as one). An argument runs only the configs whose name contains
// it (`./attention_sm90_test d256`). `quick` first (`./attention_sm90_test quick [name]`): validation only, no
// timing, the 4096-long configs at 512 (for compute-sanitizer). `decode` (`./attention_sm90_test decode [quick]
// [name]`, `decode sweep`: warps × stages × split variants at Llama-3-8B's shapes): the decode set — few query
// rows against a long cache — through tsa::launch_attention_decode (split keys), timed beside the sm90
// launcher, with the K/V stream's TB/s; each line names the variant (wWsS, w0s0 = the library's), the split
// that ran (kN; k-1: a variant's own choice) and how many clusters of that split fit at once (fit=, -1 for
// no cluster). A forced split or variant that does not launch is printed as skipped. The sweep's variants
// with 6 or 3 warps, more stages and split 16 exist only with the template's second decode kernel
// (kDecodeMaxSplit 16), so that this file also builds against the first, for side-by-side timing. Not part
// of tsopt's build.
//
// Build (H200):  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates \
//                     bench/gpu/attention_sm90_test.cu -o attention_sm90_test && ./attention_sm90_test
// Add -DTSG90_WATCHDOG=1 to turn a pipeline deadlock into a launch failure instead of a hang.
#include "attention_sm90.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// ---- error checking ------------------------------------------------------------------------------
static void cuda_check(cudaError_t e, const char *what, const char *file, int line) {
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: CUDA error %s (%s) in %s\n", file, line, cudaGetErrorName(e), cudaGetErrorString(e),
                what);
        exit(2);
    }
}
#define CK(...) cuda_check((__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)

// ---- scores used only by the reference ------------------------------------------------------------
struct SoftcapExact {  // same function as tsa::SoftcapScore, with the accurate tanhf
    static constexpr bool causal = false;
    float scale, cap;
    __device__ float operator()(float dot, int, int) const { return cap * tanhf(dot * scale / cap); }
};

// A sliding window as the emitter writes it (s = −inf for keys more than W before the query, and with
// CAUSAL for keys after it): `window` lets the kernel skip the K/V tiles before the window. The reference
// takes the same function without the promise (WindowRef), so it reads every key.
template <bool CAUSAL, int W> struct WindowScore {
    static constexpr bool causal = CAUSAL;
    static constexpr double window = W;
    float scale;
    __device__ float operator()(float dot, int q, int k) const {
        return (CAUSAL && k > q) || k < q - W ? -INFINITY : dot * scale;
    }
};
template <bool CAUSAL, int W> struct WindowRef {
    static constexpr bool causal = false;
    float scale;
    __device__ float operator()(float dot, int q, int k) const {
        return (CAUSAL && k > q) || k < q - W ? -INFINITY : dot * scale;
    }
};

// ---- device helpers ------------------------------------------------------------------------------
__device__ __forceinline__ uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
template <typename T> __global__ void fill_uniform(T *x, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float u = (float)(mix64(seed * 0x100000001B3ull + i) >> 40) * (1.f / 16777216.f);  // [0,1)
        x[i] = tst::elem<T>::from_float(2.f * u - 1.f);
    }
}

// out[(b·H + h)·n_rows + r][d] = exact attention for query row rows[r] of (b, h), fp32 throughout.
// One block of 256 threads per (row, head, batch); dynamic smem: d + t_kv floats.
template <typename T, class Score>
__global__ void reference_kernel(const tsa::AttnParams<T, Score> p, const int *rows, int n_rows, float *out) {
    extern __shared__ float sm[];
    float *q = sm, *w = sm + p.d;
    const int r = blockIdx.x, h = blockIdx.y, b = blockIdx.z, row = rows[r];
    const int hk = h / (p.n_q_heads / p.n_kv_heads);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    const T *gq = p.q + b * p.q_batch_stride + h * p.q_head_stride + (int64_t)row * p.q_seq_stride;
    const T *gk = p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const T *gv = p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    for (int d = threadIdx.x; d < p.d; d += blockDim.x) q[d] = tst::elem<T>::to_float(gq[d]);
    __syncthreads();
    for (int k = warp; k < p.t_kv; k += nwarps) {
        float dot = 0.f;
        for (int d = lane; d < p.d; d += 32) dot += q[d] * tst::elem<T>::to_float(gk[(int64_t)k * p.k_seq_stride + d]);
        dot = tst::warp_sum(dot);
        if (lane == 0) w[k] = p.score(dot, row, k);
    }
    __syncthreads();
    __shared__ float red[32];
    float mx = -INFINITY;
    for (int k = threadIdx.x; k < p.t_kv; k += blockDim.x) mx = fmaxf(mx, w[k]);
    mx = tst::warp_max(mx);
    if (lane == 0) red[warp] = mx;
    __syncthreads();
    mx = -INFINITY;
    for (int i = 0; i < nwarps; i++) mx = fmaxf(mx, red[i]);
    __syncthreads();
    float sum = 0.f;
    for (int k = threadIdx.x; k < p.t_kv; k += blockDim.x) {
        const float e = (mx == -INFINITY || w[k] == -INFINITY) ? 0.f : exp2f(p.c * (w[k] - mx));
        w[k] = e;
        sum += e;
    }
    sum = tst::warp_sum(sum);
    if (lane == 0) red[warp] = sum;
    __syncthreads();
    sum = 0.f;
    for (int i = 0; i < nwarps; i++) sum += red[i];
    float *o = out + (((int64_t)b * p.n_q_heads + h) * n_rows + r) * p.d;
    for (int d = threadIdx.x; d < p.d; d += blockDim.x) {
        float acc = 0.f;
        for (int k = 0; k < p.t_kv; k++) acc += w[k] * tst::elem<T>::to_float(gv[(int64_t)k * p.v_seq_stride + d]);
        o[d] = sum > 0.f ? acc / sum : 0.f;  // fully masked row → 0, as the kernel defines it
    }
}

// ---- one config ----------------------------------------------------------------------------------
static float *g_flush;  // 256 MB, written between timed runs to evict L2
static const size_t kFlushBytes = 256u << 20;
static uint64_t g_seed = 12345;

struct Config {
    const char *name;
    int batch, hq, hkv, t_q, t_kv;
    bool bshd;     // layout (batch, seq, head, d) instead of (batch, head, seq, d)
    int row_step;  // validate every row_step-th query row (jittered) plus the last; 1 = all rows
};

static float host_to_float(__half x) { return __half2float(x); }
static float host_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> static const char *type_name() { return tst::elem<T>::is_bf16 ? "bf16" : "fp16"; }

static void set_strides(int64_t &sb, int64_t &sh, int64_t &ss, const Config &c, int heads, int t, int d) {
    if (c.bshd) { ss = (int64_t)heads * d; sh = d; sb = (int64_t)t * heads * d; }
    else        { ss = d; sh = (int64_t)t * d; sb = (int64_t)heads * t * d; }
}

// Runs, validates and times one config through tsa90::launch_attention_sm90<D, STAGES, PINGPONG>, and times
// tsa::launch_attention<D> (default tiles) on the same inputs; returns true on PASS.
static const char *g_only;  // run only the configs whose name contains it (none: all)
static bool g_timing = true;  // false with `quick`
static bool g_decode = false;  // `decode`: validate tsa::launch_attention_decode, time it beside the sm90 launcher
// `decode sweep`: variant g_variant (warps × stages, 0: the library's) at split g_split (0: the helper's choice).
// Variants 7 to 12 and split 16 only where the template has them (kDecodeMaxSplit 16: its
// second form, whose warps share Q; the first asked 16 rows' output chunks to divide over the threads).
static int g_variant = 0, g_split = 0;
static const int kVariants[][2] = {{0, 0}, {4, 3}, {4, 4}, {4, 2}, {8, 2}, {8, 3}, {2, 4}, {6, 2}, {3, 4},
                                  {4, 5}, {4, 6}, {6, 4}, {2, 6}};
static constexpr bool kDecodeV2 = tsa::kDecodeMaxSplit > 8;
static int g_fit = -1;  // clusters of the split that ran that can be resident at once (-1: not asked)

template <typename T, int D, int W, int S, class Score> static cudaError_t cluster_fit(int split, int dev, int *fit) {
    switch (split) {
    case 2: return tsa::DecodeLaunch<T, D, W, S, 2, Score>::max_clusters(dev, fit);
    case 4: return tsa::DecodeLaunch<T, D, W, S, 4, Score>::max_clusters(dev, fit);
    case 8: return tsa::DecodeLaunch<T, D, W, S, 8, Score>::max_clusters(dev, fit);
    case 16:
        if constexpr (kDecodeV2) return tsa::DecodeLaunch<T, D, W, S, 16, Score>::max_clusters(dev, fit);
        else return cudaErrorInvalidValue;
    default: *fit = -1; return cudaSuccess;
    }
}
template <typename T, int D, int W, int S, class Score> static cudaError_t decode_at_split(const tsa::AttnParams<T, Score> &p) {
    tst::DeviceFacts f;
    if (cudaError_t e = tst::device_facts(&f); e != cudaSuccess) return e;
    int split = g_split;
    if (split == 0) {
        const int64_t units = (int64_t)p.n_q_heads * ((p.t_q + tsa::kDecodeRows - 1) / tsa::kDecodeRows) * p.batch;
        if (cudaError_t e = tsa::decode_split<T, D, W, S>(p, units, f, &split); e != cudaSuccess) return e;
    }
    if (cudaError_t e = cluster_fit<T, D, W, S, Score>(split, f.dev, &g_fit); e != cudaSuccess) return e;
    if (g_split == 0) return tsa::launch_attention_decode<D, W, S>(p, 0);
    bool empty;
    if (cudaError_t e = tsa::check_attention<D>(p, &empty); e != cudaSuccess || empty) return e;
    const int64_t q_tiles = (p.t_q + tsa::kDecodeRows - 1) / tsa::kDecodeRows;
    switch (g_split) {
    case 1: return tsa::launch_attention_decode_split<T, D, W, S, 1>(p, f.dev, q_tiles, 0);
    case 2: return tsa::launch_attention_decode_split<T, D, W, S, 2>(p, f.dev, q_tiles, 0);
    case 4: return tsa::launch_attention_decode_split<T, D, W, S, 4>(p, f.dev, q_tiles, 0);
    case 8: return tsa::launch_attention_decode_split<T, D, W, S, 8>(p, f.dev, q_tiles, 0);
    default:
        if constexpr (kDecodeV2) return tsa::launch_attention_decode_split<T, D, W, S, 16>(p, f.dev, q_tiles, 0);
        else return cudaErrorInvalidValue;
    }
}
template <int D, typename T, class Score> static cudaError_t decode_variant(const tsa::AttnParams<T, Score> &p) {
    if constexpr (D == 128) {
        switch (g_variant) {
        case 1: return decode_at_split<T, D, 4, 3>(p);
        case 2: return decode_at_split<T, D, 4, 4>(p);
        case 3: return decode_at_split<T, D, 4, 2>(p);
        case 4: return decode_at_split<T, D, 8, 2>(p);
        case 5: return decode_at_split<T, D, 8, 3>(p);
        case 6: return decode_at_split<T, D, 2, 4>(p);
        case 7:
            if constexpr (kDecodeV2) return decode_at_split<T, D, 6, 2>(p);
            else return cudaErrorNotSupported;
        case 8:
            if constexpr (kDecodeV2) return decode_at_split<T, D, 3, 4>(p);
            else return cudaErrorNotSupported;
        case 9:
            if constexpr (kDecodeV2) return decode_at_split<T, D, 4, 5>(p);
            else return cudaErrorNotSupported;
        case 10:
            if constexpr (kDecodeV2) return decode_at_split<T, D, 4, 6>(p);
            else return cudaErrorNotSupported;
        case 11:
            if constexpr (kDecodeV2) return decode_at_split<T, D, 6, 4>(p);
            else return cudaErrorNotSupported;
        case 12:
            if constexpr (kDecodeV2) return decode_at_split<T, D, 2, 6>(p);
            else return cudaErrorNotSupported;
        default: break;
        }
    }
    using DC = tsa::DecodeConfig<D>;
    return decode_at_split<T, D, DC::WARPS, DC::STAGES>(p);
}
// `quick` (validation only, for compute-sanitizer): the 4096-long configs run at this length, every other
// config as it is; the same tile paths (several K/V tiles, causal diagonal, GQA) at a sanitizer's pace.
static const int kQuickLength = 512;

template <typename T, int D, int STAGES = 2, bool PINGPONG = true, class Score, class RefScore>
static bool run_config(const Config &c, Score score, RefScore ref_score, double flop_fraction) {
    if (g_only && !strstr(c.name, g_only)) return true;
    const float kLog2e = 1.4426950408889634f;
    const int64_t nq = (int64_t)c.batch * c.hq * c.t_q * D, nkv = (int64_t)c.batch * c.hkv * c.t_kv * D;
    T *q, *k, *v, *o;
    CK(cudaMalloc(&q, std::max<int64_t>(nq, 8) * sizeof(T)));
    CK(cudaMalloc(&k, std::max<int64_t>(nkv, 8) * sizeof(T)));
    CK(cudaMalloc(&v, std::max<int64_t>(nkv, 8) * sizeof(T)));
    CK(cudaMalloc(&o, std::max<int64_t>(nq, 8) * sizeof(T)));
    fill_uniform<<<1024, 256>>>(q, nq, g_seed++);
    CK(cudaGetLastError());
    fill_uniform<<<1024, 256>>>(k, nkv, g_seed++);
    CK(cudaGetLastError());
    fill_uniform<<<1024, 256>>>(v, nkv, g_seed++);
    CK(cudaGetLastError());
    CK(cudaMemset(o, 0xFF, nq * sizeof(T)));  // 0xFFFF is NaN in fp16 and bf16

    tsa::AttnParams<T, Score> p{};
    p.q = q; p.k = k; p.v = v; p.o = o;
    set_strides(p.q_batch_stride, p.q_head_stride, p.q_seq_stride, c, c.hq, c.t_q, D);
    set_strides(p.k_batch_stride, p.k_head_stride, p.k_seq_stride, c, c.hkv, c.t_kv, D);
    set_strides(p.v_batch_stride, p.v_head_stride, p.v_seq_stride, c, c.hkv, c.t_kv, D);
    set_strides(p.o_batch_stride, p.o_head_stride, p.o_seq_stride, c, c.hq, c.t_q, D);
    p.batch = c.batch; p.n_q_heads = c.hq; p.n_kv_heads = c.hkv; p.t_q = c.t_q; p.t_kv = c.t_kv; p.d = D;
    p.c = kLog2e;
    p.score = score;
    auto sm90 = [&] { return tsa90::launch_attention_sm90<D, STAGES, PINGPONG>(p, 0); };
    auto ours = [&] {   // the decode form has no D = 192 (its copies need D/8 to divide a warp): the tiled kernel
        if constexpr (256 % D == 0) return g_decode ? decode_variant<D>(p) : sm90();
        else return sm90();
    };
    {
        const cudaError_t e = ours();
        if (g_decode && g_variant != 0 && e != cudaSuccess) {  // a forced split or variant this build lacks
            printf("%-24s b=%-2d w%ds%d k%d: launch %s, skipped\n", c.name, c.batch, kVariants[g_variant][0],
                   kVariants[g_variant][1], g_split, cudaGetErrorName(e));
            (void)cudaGetLastError();
            CK(cudaFree(q));
            CK(cudaFree(k));
            CK(cudaFree(v));
            CK(cudaFree(o));
            return true;
        }
        if (e == cudaErrorNotSupported) {
            printf("%-24s NOT SUPPORTED (launch_attention_sm90 needs a CC 9.0 device and an sm_90a build)\n", c.name);
            fflush(stdout);
            return false;
        }
        CK(e);
    }
    const int path = g_decode ? 0 : tsa90::last_path();
    CK(cudaDeviceSynchronize());

    // Reference on the chosen rows.
    std::vector<int> rows;
    for (int i = 0; i * c.row_step < c.t_q; i++)
        rows.push_back(std::min(c.t_q - 1, i * c.row_step + (c.row_step > 1 ? (i * 5) % c.row_step : 0)));
    if (rows.back() != c.t_q - 1) rows.push_back(c.t_q - 1);
    const int n_rows = (int)rows.size();
    int *d_rows;
    float *d_ref;
    const int64_t n_ref = (int64_t)c.batch * c.hq * n_rows * D;
    CK(cudaMalloc(&d_rows, n_rows * sizeof(int)));
    CK(cudaMalloc(&d_ref, n_ref * sizeof(float)));
    CK(cudaMemcpy(d_rows, rows.data(), n_rows * sizeof(int), cudaMemcpyHostToDevice));
    tsa::AttnParams<T, RefScore> rp{};
    rp.q = p.q; rp.k = p.k; rp.v = p.v; rp.o = p.o;
    rp.q_batch_stride = p.q_batch_stride; rp.q_head_stride = p.q_head_stride; rp.q_seq_stride = p.q_seq_stride;
    rp.k_batch_stride = p.k_batch_stride; rp.k_head_stride = p.k_head_stride; rp.k_seq_stride = p.k_seq_stride;
    rp.v_batch_stride = p.v_batch_stride; rp.v_head_stride = p.v_head_stride; rp.v_seq_stride = p.v_seq_stride;
    rp.batch = p.batch; rp.n_q_heads = p.n_q_heads; rp.n_kv_heads = p.n_kv_heads;
    rp.t_q = p.t_q; rp.t_kv = p.t_kv; rp.d = D; rp.c = p.c; rp.score = ref_score;
    const size_t ref_smem = (D + std::max(c.t_kv, 1)) * sizeof(float);
    CK(cudaFuncSetAttribute(reference_kernel<T, RefScore>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ref_smem));
    reference_kernel<T, RefScore><<<dim3(n_rows, c.hq, c.batch), 256, ref_smem>>>(rp, d_rows, n_rows, d_ref);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    std::vector<T> h_o(nq);
    std::vector<float> h_ref(n_ref);
    CK(cudaMemcpy(h_o.data(), o, nq * sizeof(T), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_ref.data(), d_ref, n_ref * sizeof(float), cudaMemcpyDeviceToHost));
    auto at = [&](int b, int h, int row, int d) {
        return c.bshd ? (((int64_t)b * c.t_q + row) * c.hq + h) * D + d : (((int64_t)b * c.hq + h) * c.t_q + row) * D + d;
    };
    int64_t non_finite = 0;
    for (int64_t i = 0; i < nq; i++)
        if (!std::isfinite(host_to_float(h_o[i]))) non_finite++;
    double err2 = 0, ref2 = 0;
    for (int b = 0; b < c.batch; b++)
        for (int h = 0; h < c.hq; h++)
            for (int r = 0; r < n_rows; r++)
                for (int d = 0; d < D; d++) {
                    const double x = host_to_float(h_o[at(b, h, rows[r], d)]);
                    const double y = h_ref[(((int64_t)b * c.hq + h) * n_rows + r) * D + d];
                    err2 += (x - y) * (x - y);
                    ref2 += y * y;
                }
    const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
    const bool pass = non_finite == 0 && std::isfinite(rel) && rel <= 1e-2;

    // Timing: the sm90 launcher, then the mma.sync kernel on the same inputs.
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    auto time_it = [&](auto launch) {   // nan with `quick`
        if (!g_timing) return (double)NAN;
        for (int i = 0; i < 3; i++) CK(launch());
        std::vector<float> ms;
        for (int i = 0; i < 30; i++) {
            CK(cudaMemsetAsync(g_flush, i & 0xFF, kFlushBytes, 0));
            CK(cudaEventRecord(e0, 0));
            CK(launch());
            CK(cudaEventRecord(e1, 0));
            CK(cudaEventSynchronize(e1));
            float t;
            CK(cudaEventElapsedTime(&t, e0, e1));
            ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        return (double)ms[ms.size() / 2];
    };
    const double med = time_it(ours);
    const double med_ref = time_it([&] { return g_decode ? sm90() : tsa::launch_attention<D>(p, 0); });
    const double flop = 4.0 * c.batch * c.hq * (double)c.t_q * c.t_kv * D * flop_fraction;
    char tag[48];
    if (g_decode) {
        int split = g_split;  // 0: the helper's choice (asked again here), for the variant that ran
        tst::DeviceFacts f;
        CK(tst::device_facts(&f));
        if (split == 0) {
            const int64_t units = (int64_t)c.hq * ((c.t_q + tsa::kDecodeRows - 1) / tsa::kDecodeRows) * c.batch;
            using DC = tsa::DecodeConfig<D>;
            if constexpr (256 % D == 0) {   // (no decode form at D = 192: ours ran the tiled kernel)
                if (g_variant == 0 || D != 128) CK((tsa::decode_split<T, D, DC::WARPS, DC::STAGES>(p, units, f, &split)));
                else split = -1;  // the variant's own choice; its fit below
            }
        }
        const double kv_bytes = 2.0 * c.batch * c.hkv * (double)c.t_kv * D * sizeof(T);
        printf("%-24s %s b=%-2d hq=%-2d hkv=%-2d tq=%-4d tkv=%-4d d=%-3d %s w%ds%d k%d fit=%-3d rel=%.2e nonfinite=%-4lld %s "
               "decode %8.4f ms %5.2f TB/s (K,V) | sm90 launcher %8.4f ms | x%.2f\n",
               c.name, type_name<T>(), c.batch, c.hq, c.hkv, c.t_q, c.t_kv, D, c.bshd ? "bshd" : "bhsd",
               kVariants[g_variant][0], kVariants[g_variant][1], split, g_fit, rel,
               (long long)non_finite, pass ? "PASS" : "FAIL", med, kv_bytes / (med * 1e-3) / 1e12, med_ref, med_ref / med);
    } else {
        snprintf(tag, sizeof tag, "%s s%d%s", tsa90::path_name(path), STAGES, PINGPONG ? " pp" : "");
        printf("%-24s %s b=%d hq=%-2d hkv=%-2d tq=%-4d tkv=%-4d d=%-3d %s [%-20s] rows=%-4d rel=%.2e nonfinite=%-4lld %s "
               "sm90 %8.4f ms %6.1f TFLOP/s | mma.sync %8.4f ms %6.1f TFLOP/s | x%.2f\n",
               c.name, type_name<T>(), c.batch, c.hq, c.hkv, c.t_q, c.t_kv, D, c.bshd ? "bshd" : "bhsd", tag, n_rows, rel,
               (long long)non_finite, pass ? "PASS" : "FAIL", med, flop / (med * 1e-3) / 1e12, med_ref,
               flop / (med_ref * 1e-3) / 1e12, med_ref / med);
    }
    fflush(stdout);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    CK(cudaFree(d_rows));
    CK(cudaFree(d_ref));
    CK(cudaFree(q));
    CK(cudaFree(k));
    CK(cudaFree(v));
    CK(cudaFree(o));
    return pass;
}

// The decode set: a few query rows (a new token; a GQA group's query heads as rows) against a long cache.
static int decode_configs() {
    using H = __half;
    using B = __nv_bfloat16;
    const float s128 = 1.f / std::sqrt(128.f), s64 = 0.125f, s256 = 0.0625f;
    auto causal = [](float scale, int t_q, int t_kv) { return tsa::CausalScaleScore::make(scale, t_q, t_kv); };
    const tsa::ScaleScore sc{s128};
    int fails = 0;
    // name, batch, hq, hkv, t_q, t_kv, bshd, row_step. Llama-3-8B at cache 4096: 8 kv heads, the 4 query heads
    // of each as rows (as tsopt's plan for bench/graphs/decoder_decode.yaml runs it), or 32 heads of one row.
    fails += !run_config<H, 128>({"llama grp rows b=1", 1, 8, 8, 4, 4096, false, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"llama grp rows b=16", 16, 8, 8, 4, 4096, false, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"llama grp rows b=4", 4, 8, 8, 4, 4096, false, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"llama heads b=1", 1, 32, 8, 1, 4096, false, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"llama heads b=16", 16, 32, 8, 1, 4096, true, 1}, sc, sc, 1.0);
    fails += !run_config<B, 128>({"bf16 b=2 cache 32768", 2, 8, 8, 4, 32768, false, 1}, sc, sc, 1.0);
    fails += !run_config<H, 64>({"d64 b=1 cache 8192", 1, 16, 16, 1, 8192, false, 1}, tsa::ScaleScore{s64},
                                tsa::ScaleScore{s64}, 1.0);
    fails += !run_config<H, 256>({"d256 b=1 grp 2", 1, 8, 4, 2, 4096, false, 1}, tsa::ScaleScore{s256},
                                 tsa::ScaleScore{s256}, 1.0);
    // Edges: odd cache lengths (a partial last step, warps with no keys), rows past 16 (two tiles), causal
    // bottom-right (a prefill chunk against the cache), soft-capping, an empty cache, bshd strides.
    fails += !run_config<H, 128>({"odd cache 77", 3, 8, 2, 4, 77, false, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"odd cache 1", 2, 4, 4, 1, 1, true, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"odd cache 1000 rows 17", 1, 4, 2, 17, 1000, true, 1}, sc, sc, 1.0);
    fails += !run_config<H, 128>({"causal 5x1000", 2, 8, 8, 5, 1000, false, 1}, causal(s128, 5, 1000),
                                 causal(s128, 5, 1000), 1.0);
    fails += !run_config<H, 128>({"causal 16x16", 1, 4, 4, 16, 16, false, 1}, causal(s128, 16, 16),
                                 causal(s128, 16, 16), 1.0);
    fails += !run_config<B, 64>({"d64 bf16 causal 3x333", 2, 6, 3, 3, 333, true, 1}, causal(s64, 3, 333),
                                causal(s64, 3, 333), 1.0);
    // A window whose masked keys are the cache's first 3000 (k < q + 3000): the decode form skips their steps.
    fails += !run_config<H, 128>({"window decode 4x4096", 2, 8, 8, 4, 4096, false, 1}, WindowScore<false, -3000>{s128},
                                 WindowRef<false, -3000>{s128}, 0.27);
    fails += !run_config<B, 128>({"window decode 1x1000 bshd", 1, 32, 8, 1, 1000, true, 1},
                                 WindowScore<false, -999>{s128}, WindowRef<false, -999>{s128}, 0.01);
    fails += !run_config<H, 256>({"d256 softcap 9x2049", 1, 4, 2, 9, 2049, false, 1},
                                 tsa::SoftcapScore::make(s256, 50.f), SoftcapExact{s256, 50.f}, 1.0);
    fails += !run_config<H, 128>({"empty cache", 2, 4, 4, 3, 0, false, 1}, sc, sc, 1.0);
    return fails;
}

// `decode sweep`: Llama-3-8B's decode attention at batch 1, 4 and 16 through every variant and split.
static int decode_sweep() {
    const tsa::ScaleScore sc{1.f / std::sqrt(128.f)};
    int fails = 0;
    for (int b : {1, 4, 16})
        for (g_variant = 1; g_variant < (int)(sizeof kVariants / sizeof *kVariants); g_variant++)
            for (int split : {0, 1, 2, 4, 8, 16}) {
                if (split == 16 && !kDecodeV2) continue;
                g_split = split;
                fails += !run_config<__half, 128>({"sweep llama grp rows", b, 8, 8, 4, 4096, false, 1}, sc, sc, 1.0);
            }
    g_variant = 0, g_split = 0;
    return fails;
}

int main(int argc, char **argv) {
    int arg = 1;
    g_decode = argc > arg && strcmp(argv[arg], "decode") == 0;
    arg += g_decode;
    const bool sweep = g_decode && argc > arg && strcmp(argv[arg], "sweep") == 0;
    arg += sweep;
    const bool quick = argc > arg && strcmp(argv[arg], "quick") == 0;
    arg += quick;
    g_timing = !quick;
    g_only = argc > arg ? argv[arg] : nullptr;
    int dev;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    printf("columns: path (wgmma = the sm90 kernel ran; fallback(...) = tsa::launch_attention ran inside the sm90 "
           "launcher) and K/V stages; error vs fp32 reference; sm90 launcher time; mma.sync time; speedup\n");
    CK(cudaMalloc(&g_flush, kFlushBytes));
    const int big = quick ? kQuickLength : 4096;  // the long configs' sequence length
    if (g_decode) {
        const int fails = sweep ? decode_sweep() : decode_configs();
        CK(cudaFree(g_flush));
        printf("%s: %d config(s) failed\n", fails ? "FAIL" : "PASS", fails);
        return fails ? 1 : 0;
    }

    using H = __half;
    using B = __nv_bfloat16;
    const float s128 = 1.f / std::sqrt(128.f), s64 = 1.f / std::sqrt(64.f);
    auto causal = [](float scale, int t_q, int t_kv) { return tsa::CausalScaleScore::make(scale, t_q, t_kv); };
    int fails = 0;
    // name, batch, hq, hkv, t_q, t_kv, bshd, row_step
    // The first line runs without the ping-pong schedule (named barriers), so that a hang in the default
    // (ping-pong) kernel still leaves one result printed.
    fails += !run_config<H, 128, 2, false>({"seed no pingpong", 1, 16, 16, big, big, false, 8},
                                           tsa::ScaleScore{1.f}, tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128>({"seed (unscaled)", 1, 16, 16, big, big, false, 8}, tsa::ScaleScore{1.f},
                                 tsa::ScaleScore{1.f}, 1.0);
    // The seed's queries against 1, 2 and 8 K of keys (3 stages, as tsopt's header): time against t_kv
    // separates a CTA's fixed cost (launch, fill, last P·V, epilogue) from its per-tile cost.
    fails += !run_config<H, 128, 3>({"kv sweep 1024", 1, 16, 16, big, big / 4, false, 64}, tsa::ScaleScore{1.f},
                                    tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128, 3>({"kv sweep 2048", 1, 16, 16, big, big / 2, false, 64}, tsa::ScaleScore{1.f},
                                    tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128, 3>({"kv sweep 8192", 1, 16, 16, big, big * 2, false, 64}, tsa::ScaleScore{1.f},
                                    tsa::ScaleScore{1.f}, 1.0);
    // Persistent schedule (non-causal): many items a CTA, each of one K/V tile (Q reloaded item after item,
    // the n_tiles == 1 path), and items of differing lengths (a window's far side skips a varying count).
    fails += !run_config<H, 128, 3>({"persist many short", 8, 16, 4, 1000, 77, true, 1}, tsa::ScaleScore{s128},
                                    tsa::ScaleScore{s128}, 1.0);
    fails += !run_config<B, 128>({"persist window only long", 2, 8, 4, big, big, false, 8}, WindowScore<false, 300>{s128},
                                 WindowRef<false, 300>{s128}, 0.57);
    // Pipeline-depth variant of the seed config (3 K/V stages: 225 KB of shared memory).
    fails += !run_config<H, 128, 3>({"seed 3 stages", 1, 16, 16, big, big, false, 64}, tsa::ScaleScore{1.f},
                                    tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128, 2, false>({"causal no pingpong", 1, 16, 16, big, big, false, 64},
                                           causal(s128, big, big), causal(s128, big, big), 0.5);
    fails += !run_config<H, 128, 3>({"causal 3 stages", 1, 16, 16, big, big, false, 64},
                                    causal(s128, big, big), causal(s128, big, big), 0.5);
    fails += !run_config<H, 128>({"causal scaled", 1, 16, 16, big, big, false, 8}, causal(s128, big, big),
                                 causal(s128, big, big), 0.5);
    fails += !run_config<H, 128>({"gqa causal 32/8", 1, 32, 8, big, big, false, 8}, causal(s128, big, big),
                                 causal(s128, big, big), 0.5);
    fails += !run_config<B, 128>({"bf16 (unscaled)", 1, 16, 16, big, big, false, 8}, tsa::ScaleScore{1.f},
                                 tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<B, 128>({"bf16 causal scaled", 1, 16, 16, big, big, false, 8}, causal(s128, big, big),
                                 causal(s128, big, big), 0.5);
    fails += !run_config<H, 64>({"d64 scaled", 1, 16, 16, big, big, false, 8}, tsa::ScaleScore{s64},
                                tsa::ScaleScore{s64}, 1.0);
    fails += !run_config<H, 64>({"d64 causal scaled", 1, 16, 16, big, big, false, 8}, causal(s64, big, big),
                                causal(s64, big, big), 0.5);
    // A functor promising masks_future (tsa::score_main: unmasked, then -inf past the diagonal, the form the emitter gives a
    // graph's causal score): top-left causal, t_kv >= t_q.
    auto top_left = [](float scale) { return tsa::CausalTopLeftScore{scale}; };
    fails += !run_config<H, 128>({"top-left causal scaled", 1, 16, 16, big, big, false, 8}, top_left(s128),
                                 top_left(s128), 0.5);
    fails += !run_config<H, 64>({"top-left d64 causal", 1, 16, 16, big, big, false, 8}, top_left(s64), top_left(s64),
                                0.5);
    fails += !run_config<H, 128>({"top-left gqa causal 32/8", 1, 32, 8, big, big, false, 8}, top_left(s128),
                                 top_left(s128), 0.5);
    fails += !run_config<B, 256>({"top-left d256 causal bf16", 1, 8, 8, big, big, false, 8}, top_left(0.0625f),
                                 top_left(0.0625f), 0.5);
    fails += !run_config<H, 128>({"top-left odd 77x1000 causal", 2, 4, 2, 77, 1000, true, 1}, top_left(s128),
                                 top_left(s128), 1.0);
    fails += !run_config<H, 128>({"softcap 30 (unscaled)", 1, 16, 16, big, big, false, 8},
                                 tsa::SoftcapScore::make(1.f, 30.f), SoftcapExact{1.f, 30.f}, 1.0);
    fails += !run_config<H, 128>({"softcap 5 scaled", 2, 8, 2, 1000, 1000, true, 1},
                                 tsa::SoftcapScore::make(4.f * s128, 5.f), SoftcapExact{4.f * s128, 5.f}, 1.0);
    // Sliding windows (the tiles before q0 − W skipped): with the causal side and without, a window not a
    // multiple of the key tile, t_q ≠ t_kv (the window in the functor's top-left coordinates), d = 256.
    fails += !run_config<H, 128>({"window 300 causal 1000", 2, 4, 2, 1000, 1000, false, 1},
                                 WindowScore<true, 300>{s128}, WindowRef<true, 300>{s128}, 0.35);
    fails += !run_config<B, 128>({"window 300 only 700x1500", 1, 4, 4, 700, 1500, true, 1},
                                 WindowScore<false, 300>{s128}, WindowRef<false, 300>{s128}, 0.8);
    fails += !run_config<H, 256>({"d256 window 129 causal 517", 1, 4, 2, 517, 517, false, 1},
                                 WindowScore<true, 129>{0.0625f}, WindowRef<true, 129>{0.0625f}, 0.4);
    // Odd sizes, all rows validated; (batch, seq, head, d) layout and batch 2 for stride coverage.
    fails += !run_config<H, 128>({"odd 1000", 2, 4, 2, 1000, 1000, true, 1}, tsa::ScaleScore{s128},
                                 tsa::ScaleScore{s128}, 1.0);
    fails += !run_config<H, 128>({"odd 1000 causal", 2, 4, 2, 1000, 1000, false, 1}, causal(s128, 1000, 1000),
                                 causal(s128, 1000, 1000), 0.5);
    fails += !run_config<H, 128>({"odd 77x1000", 2, 4, 4, 77, 1000, true, 1}, tsa::ScaleScore{s128},
                                 tsa::ScaleScore{s128}, 1.0);
    fails += !run_config<H, 128>({"odd 77x1000 causal(br)", 2, 4, 1, 77, 1000, false, 1}, causal(s128, 77, 1000),
                                 causal(s128, 77, 1000), 1.0);
    fails += !run_config<H, 128>({"odd 1000x77 causal(br)", 1, 4, 2, 1000, 77, true, 1}, causal(s128, 1000, 77),
                                 causal(s128, 1000, 77), 1.0);
    fails += !run_config<H, 128>({"odd t=1", 3, 4, 2, 1, 1, false, 1}, tsa::ScaleScore{s128}, tsa::ScaleScore{s128},
                                 1.0);
    fails += !run_config<H, 128>({"odd t=1 causal", 1, 4, 4, 1, 1, true, 1}, causal(s128, 1, 1), causal(s128, 1, 1),
                                 1.0);
    fails += !run_config<H, 128>({"odd 1x1000 (decode)", 4, 8, 2, 1, 1000, false, 1}, causal(s128, 1, 1000),
                                 causal(s128, 1, 1000), 1.0);
    fails += !run_config<B, 64>({"odd d64 bf16 77x1000 c", 2, 6, 3, 77, 1000, true, 1}, causal(s64, 77, 1000),
                                causal(s64, 77, 1000), 1.0);
    fails += !run_config<B, 64>({"odd d64 bf16 1000", 1, 4, 4, 1000, 1000, false, 1}, tsa::ScaleScore{s64},
                                tsa::ScaleScore{s64}, 1.0);
    fails += !run_config<H, 256>({"odd d256 333x517 causal", 2, 4, 2, 333, 517, false, 1}, causal(0.0625f, 333, 517),
                                 causal(0.0625f, 333, 517), 1.0);
    // Head dim 256 (64-key K/V tiles, 2 stages: tsa90::DefaultBN): the bench shape, bf16, GQA with odd sizes,
    // soft-capping, the schedule without ping-pong.
    const float s256 = 0.0625f;
    fails += !run_config<H, 256>({"d256 causal", 1, 8, 8, big, big, false, 8}, causal(s256, big, big),
                                 causal(s256, big, big), 0.5);
    fails += !run_config<H, 256, 2, false>({"d256 causal no pingpong", 1, 8, 8, big, big, false, 64},
                                           causal(s256, big, big), causal(s256, big, big), 0.5);
    fails += !run_config<B, 256>({"d256 bf16", 1, 8, 8, 2048, 2048, false, 8}, tsa::ScaleScore{s256},
                                 tsa::ScaleScore{s256}, 1.0);
    fails += !run_config<H, 256>({"odd d256 1000 gqa bshd", 2, 8, 2, 1000, 1000, true, 1}, tsa::ScaleScore{s256},
                                 tsa::ScaleScore{s256}, 1.0);
    fails += !run_config<B, 256>({"odd d256 bf16 77x1000 c", 2, 6, 3, 77, 1000, true, 1}, causal(s256, 77, 1000),
                                 causal(s256, 77, 1000), 1.0);
    fails += !run_config<H, 256>({"d256 softcap 50 scaled", 1, 8, 8, 2048, 2048, false, 8},
                                 tsa::SoftcapScore::make(s256, 50.f), SoftcapExact{s256, 50.f}, 1.0);
    // Head dim 192 (64-key K/V tiles as 256, 3 stages; P·V as m64n192k16): causal, bf16 GQA, odd sizes.
    const float s192 = 1.f / std::sqrt(192.f);
    fails += !run_config<H, 192, 3>({"d192 causal", 1, 8, 8, big, big, false, 8}, causal(s192, big, big),
                                    causal(s192, big, big), 0.5);
    fails += !run_config<B, 192, 3>({"d192 bf16 gqa", 1, 16, 4, 2048, 2048, false, 8}, tsa::ScaleScore{s192},
                                    tsa::ScaleScore{s192}, 1.0);
    fails += !run_config<H, 192, 3>({"odd d192 333x517 causal", 2, 4, 2, 333, 517, false, 1}, causal(s192, 333, 517),
                                    causal(s192, 333, 517), 1.0);
    fails += !run_config<B, 192, 3>({"odd d192 bf16 1000 bshd", 2, 6, 3, 1000, 1000, true, 1}, tsa::ScaleScore{s192},
                                    tsa::ScaleScore{s192}, 1.0);

    CK(cudaFree(g_flush));
    printf("%s: %d config(s) failed\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
