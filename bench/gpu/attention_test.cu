// attention_test.cu — validates and times templates/attention.cuh (tsa::launch_attention) on one GPU.
// For each config: fresh U(-1,1) inputs, output poisoned with NaN, our kernel, then a simple fp32
// reference kernel (one block per query row, exact softmax with the same score) on all query rows or an
// evenly spread subset (big configs); relative L2 ≤ 1e-2 and every output element finite, else FAIL.
// Timing: 3 warm-ups, median of 30 CUDA-event runs, L2 flushed (256 MB memset) before each run.
// Prints one line per config; exits 1 if any config fails, 2 on a CUDA error. Not part of tsopt's build.
// `./attention_test quick`: validation only, no timing, the 4096-long configs at 512 (for compute-sanitizer).
//
// Build (H200):  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates \
//                     bench/gpu/attention_test.cu -o attention_test && ./attention_test
// (sm_80:        nvcc -O3 -std=c++17 -arch=sm_80 -I templates bench/gpu/attention_test.cu -o attention_test)
#include "attention.cuh"

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
static bool g_timing = true;  // false with `quick`
// `quick` (validation only, for compute-sanitizer): the 4096-long configs run at this length, every other
// config as it is; the same tile paths (several K/V tiles, causal diagonal, GQA) at a sanitizer's pace.
static const int kQuickLength = 512;
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

// Runs, validates and times one config with tiles BM×BN (KC-key chunks, WARPS warps); returns true on PASS.
template <typename T, int D, int BM = tsa::AttnConfig<D>::BM, int BN = tsa::AttnConfig<D>::BN,
          int WARPS = tsa::AttnConfig<D>::WARPS, int KC = (BN < tsa::AttnConfig<D>::KC ? BN : tsa::AttnConfig<D>::KC),
          class Score, class RefScore>
static bool run_config(const Config &c, Score score, RefScore ref_score, double flop_fraction) {
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
    CK(tsa::launch_attention<D, BM, BN, WARPS, KC>(p, 0));
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

    // Timing (not with `quick`: printed as nan).
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3 && g_timing; i++) CK(tsa::launch_attention<D, BM, BN, WARPS, KC>(p, 0));
    std::vector<float> ms;
    for (int i = 0; i < 30 && g_timing; i++) {
        CK(cudaMemsetAsync(g_flush, i & 0xFF, kFlushBytes, 0));
        CK(cudaEventRecord(e0, 0));
        CK(tsa::launch_attention<D, BM, BN, WARPS, KC>(p, 0));
        CK(cudaEventRecord(e1, 0));
        CK(cudaEventSynchronize(e1));
        float t;
        CK(cudaEventElapsedTime(&t, e0, e1));
        ms.push_back(t);
    }
    if (ms.empty()) ms.push_back(NAN);
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double flop = 4.0 * c.batch * c.hq * (double)c.t_q * c.t_kv * D * flop_fraction;
    char tiles[32];
    snprintf(tiles, sizeof tiles, "%dx%d/%d w%d", BM, BN, KC, WARPS);
    printf("%-24s %s b=%d hq=%-2d hkv=%-2d tq=%-4d tkv=%-4d d=%-3d %s [%-14s] rows=%-4d rel=%.2e nonfinite=%-4lld %s "
           "%8.4f ms %6.1f TFLOP/s\n",
           c.name, type_name<T>(), c.batch, c.hq, c.hkv, c.t_q, c.t_kv, D, c.bshd ? "bshd" : "bhsd", tiles, n_rows, rel,
           (long long)non_finite, pass ? "PASS" : "FAIL", med, flop / (med * 1e-3) / 1e12);
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

int main(int argc, char **argv) {
    int dev;
    cudaDeviceProp prop;
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&prop, dev));
    printf("device: %s, %d SMs, sm_%d%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    CK(cudaMalloc(&g_flush, kFlushBytes));
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    g_timing = !quick;
    const int big = quick ? kQuickLength : 4096;  // the long configs' sequence length

    using H = __half;
    using B = __nv_bfloat16;
    const float s128 = 1.f / std::sqrt(128.f), s64 = 1.f / std::sqrt(64.f);
    auto causal = [](float scale, int t_q, int t_kv) { return tsa::CausalScaleScore::make(scale, t_q, t_kv); };
    int fails = 0;
    // name, batch, hq, hkv, t_q, t_kv, bshd, row_step
    fails += !run_config<H, 128>({"seed (unscaled)", 1, 16, 16, big, big, false, 8}, tsa::ScaleScore{1.f},
                                 tsa::ScaleScore{1.f}, 1.0);
    // Tile variants of the seed config, for choosing defaults on the H200 (the first line is the default).
    fails += !run_config<H, 128, 128, 64, 4, 32>({"seed variant", 1, 16, 16, big, big, false, 64},
                                                 tsa::ScaleScore{1.f}, tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128, 128, 64, 8, 64>({"seed variant", 1, 16, 16, big, big, false, 64},
                                                 tsa::ScaleScore{1.f}, tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128, 64, 64, 4, 64>({"seed variant", 1, 16, 16, big, big, false, 64},
                                                tsa::ScaleScore{1.f}, tsa::ScaleScore{1.f}, 1.0);
    fails += !run_config<H, 128, 128, 64, 8, 32>({"seed variant", 1, 16, 16, big, big, false, 64},
                                                 tsa::ScaleScore{1.f}, tsa::ScaleScore{1.f}, 1.0);
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
    // masks_future (tsa::score_main: unmasked, then -inf past the diagonal): top-left causal, as the emitter's causal scores
    fails += !run_config<H, 128>({"top-left causal scaled", 1, 16, 16, big, big, false, 8},
                                 tsa::CausalTopLeftScore{s128}, tsa::CausalTopLeftScore{s128}, 0.5);
    fails += !run_config<H, 64>({"top-left odd d64 77x1000", 2, 4, 2, 77, 1000, true, 1},
                                tsa::CausalTopLeftScore{s64}, tsa::CausalTopLeftScore{s64}, 1.0);
    fails += !run_config<H, 128>({"softcap 30 (unscaled)", 1, 16, 16, big, big, false, 8},
                                 tsa::SoftcapScore::make(1.f, 30.f), SoftcapExact{1.f, 30.f}, 1.0);
    fails += !run_config<H, 128>({"softcap 5 scaled", 2, 8, 2, 1000, 1000, true, 1},
                                 tsa::SoftcapScore::make(4.f * s128, 5.f), SoftcapExact{4.f * s128, 5.f}, 1.0);
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
    fails += !run_config<B, 192>({"odd d192 bf16 333x517 c", 2, 4, 2, 333, 517, false, 1}, causal(0.0722f, 333, 517),
                                 causal(0.0722f, 333, 517), 1.0);
    fails += !run_config<H, 192>({"odd 3x1000 d192 (decode)", 2, 8, 2, 3, 1000, false, 1}, causal(0.0722f, 3, 1000),
                                 causal(0.0722f, 3, 1000), 1.0);

    CK(cudaFree(g_flush));
    printf("%s: %d config(s) failed\n", fails ? "FAIL" : "PASS", fails);
    return fails ? 1 : 0;
}
