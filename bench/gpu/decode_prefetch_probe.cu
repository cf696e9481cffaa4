// decode_prefetch_probe.cu — an experiment (bench/NOTES.md run 107): does prefetching a decode step's next
// weight into L2 while latency-bound kernels run (a small kernel in the programmatic-dependent-launch chain
// issuing cp.async.bulk.prefetch.L2 over the weight, then waiting for its predecessor) shorten the step?
// Built by bench/gpu/decode_prefetch.sh against decoder_decode's header with its launch function edited so that
// PF_HOOK(i) runs before kernel i's launch. Variants on argv: "base" or "i=buf:off_MiB:len_MiB[,...]" (buf: qkv,
// o, gate, up, down); PB=batch. Every variant's output must equal the first variant's bit for bit (the inputs
// are fixed, so a broken dependency chain shows as a mismatch); step times are medians over interleaved rounds.
#include <cuda_fp16.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <algorithm>

static cudaError_t pf_hook(int i, const void *const *bufs, cudaStream_t stream);
#define PF_HOOK(i) do { const void *pfb[5] = {W_qkv, W_o, W_gate, W_up, W_down}; err = pf_hook(i, pfb, stream); if (err != cudaSuccess) return err; } while (0)
#define TSOPT_DD_IMPLEMENTATION
#include "dd_probe.cuh"

struct Pf { int before; int buf; size_t off, len; };
static std::vector<Pf> g_pf;

__global__ void __launch_bounds__(128) l2_prefetch_kernel(const char *base, size_t bytes) {
    tsopt_dd::tst::pdl_trigger();
    const size_t chunk = 8192;
    const size_t n = (bytes + chunk - 1) / chunk;
    for (size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x; c < n; c += (size_t)gridDim.x * blockDim.x) {
        size_t len = (bytes - c * chunk < chunk ? bytes - c * chunk : chunk) & ~(size_t)15;
        if (len) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(base + c * chunk), "r"((unsigned)len) : "memory");
    }
    tsopt_dd::tst::pdl_wait();
}

static cudaError_t pf_hook(int i, const void *const *bufs, cudaStream_t stream) {
    for (const Pf &p : g_pf)
        if (p.before == i) {
            cudaError_t e = tsopt_dd::tst::launch(l2_prefetch_kernel, dim3(132), dim3(128), 0, stream, 1,
                                        static_cast<const char *>(bufs[p.buf]) + p.off, p.len);
            if (e != cudaSuccess) return e;
        }
    return cudaSuccess;
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); exit(1); } } while (0)

__global__ void fill(__half *p, size_t n, unsigned seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed * 40503u;
        h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
        p[i] = __float2half(((h & 0xffffff) / 16777216.f * 2.f - 1.f) * scale);
    }
}

static const char *names[5] = {"qkv", "o", "gate", "up", "down"};
static size_t wbytes[5];

static bool parse(const char *s) {
    g_pf.clear();
    if (!strcmp(s, "base")) return true;
    std::string str(s);
    size_t pos = 0;
    while (pos < str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        std::string t = str.substr(pos, end - pos);
        pos = end + 1;
        int before; char nm[16]; double off, len;
        if (sscanf(t.c_str(), "%d=%15[a-z]:%lf:%lf", &before, nm, &off, &len) != 4) return false;
        int b = -1;
        for (int k = 0; k < 5; ++k) if (!strcmp(nm, names[k])) b = k;
        if (b < 0) return false;
        size_t o = (size_t)(off * 1048576.0), l = (size_t)(len * 1048576.0);
        if (o >= wbytes[b]) return false;
        l = std::min(l, wbytes[b] - o) & ~(size_t)15;
        g_pf.push_back({before, b, o, l});
    }
    return true;
}

int main(int argc, char **argv) {
    const int64_t B = atoi(getenv("PB") ? getenv("PB") : "1"), S = 4096, SMAX = 4096, D = 4096, QKV = 6144, F = 14336, KVH = 8, DH = 128;
    size_t n_x = B * D, n_qkv = D * QKV, n_o = D * D, n_g = D * F, n_down = F * D, n_cache = B * KVH * SMAX * DH;
    __half *x, *ga, *Wqkv, *Wo, *gm, *Wg, *Wu, *Wd, *cs, *sn, *Kc, *Vc, *out, *out_ref;
    CK(cudaMalloc(&x, n_x * 2)); CK(cudaMalloc(&ga, D * 2)); CK(cudaMalloc(&Wqkv, n_qkv * 2)); CK(cudaMalloc(&Wo, n_o * 2));
    CK(cudaMalloc(&gm, D * 2)); CK(cudaMalloc(&Wg, n_g * 2)); CK(cudaMalloc(&Wu, n_g * 2)); CK(cudaMalloc(&Wd, n_down * 2));
    CK(cudaMalloc(&cs, 64 * 2)); CK(cudaMalloc(&sn, 64 * 2)); CK(cudaMalloc(&Kc, n_cache * 2)); CK(cudaMalloc(&Vc, n_cache * 2));
    CK(cudaMalloc(&out, n_x * 2)); CK(cudaMalloc(&out_ref, n_x * 2));
    wbytes[0] = n_qkv * 2, wbytes[1] = n_o * 2, wbytes[2] = n_g * 2, wbytes[3] = n_g * 2, wbytes[4] = n_down * 2;
    fill<<<1024, 256>>>(x, n_x, 1, 1.f); fill<<<1024, 256>>>(ga, D, 2, 1.f); fill<<<1024, 256>>>(Wqkv, n_qkv, 3, 1.f / 64);
    fill<<<1024, 256>>>(Wo, n_o, 4, 1.f / 64); fill<<<1024, 256>>>(gm, D, 5, 1.f); fill<<<1024, 256>>>(Wg, n_g, 6, 1.f / 64);
    fill<<<1024, 256>>>(Wu, n_g, 7, 1.f / 64); fill<<<1024, 256>>>(Wd, n_down, 8, 1.f / 120); fill<<<1, 64>>>(cs, 64, 9, 1.f);
    fill<<<1, 64>>>(sn, 64, 10, 1.f); fill<<<1024, 256>>>(Kc, n_cache, 11, 1.f); fill<<<1024, 256>>>(Vc, n_cache, 12, 1.f);
    CK(cudaGetLastError());
    void *ws; CK(cudaMalloc(&ws, dd_workspace_bytes(B, S) + 256));
    char *flush; const size_t FL = 256u << 20; CK(cudaMalloc(&flush, FL));
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    const int REPS = 41, ROUNDS = 3;
    int nv = argc - 1;
    std::vector<std::vector<float>> times(nv);
    bool have_ref = false;
    for (int round = 0; round < ROUNDS; ++round)
        for (int v = 0; v < nv; ++v) {
            if (!parse(argv[1 + v])) { printf("bad variant %s\n", argv[1 + v]); return 2; }
            CK(cudaMemsetAsync(out, 0xff, n_x * 2, st));   // poisoned
            for (int w = 0; w < 3; ++w) CK(dd_launch(x, ga, Wqkv, Wo, gm, Wg, Wu, Wd, cs, sn, Kc, Vc, out, B, S, ws, st));
            CK(cudaStreamSynchronize(st));
            if (!have_ref) { CK(cudaMemcpy(out_ref, out, n_x * 2, cudaMemcpyDeviceToDevice)); have_ref = true; }
            std::vector<__half> a(n_x), r(n_x);
            CK(cudaMemcpy(a.data(), out, n_x * 2, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(r.data(), out_ref, n_x * 2, cudaMemcpyDeviceToHost));
            if (memcmp(a.data(), r.data(), n_x * 2)) { printf("MISMATCH variant %s\n", argv[1 + v]); return 3; }
            for (int i = 0; i < REPS; ++i) {
                CK(cudaMemsetAsync(flush, i, FL, st));
                CK(cudaEventRecord(e0, st));
                CK(dd_launch(x, ga, Wqkv, Wo, gm, Wg, Wu, Wd, cs, sn, Kc, Vc, out, B, S, ws, st));
                CK(cudaEventRecord(e1, st));
                CK(cudaEventSynchronize(e1));
                float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
                times[v].push_back(ms * 1000.f);
            }
        }
    printf("batch %lld, cache %lld: step time in us (median of %d, min; %d rounds interleaved); outputs bit-equal to the first variant's\n",
           (long long)B, (long long)S, REPS * ROUNDS, ROUNDS);
    float base = 0;
    for (int v = 0; v < nv; ++v) {
        std::vector<float> t = times[v];
        std::sort(t.begin(), t.end());
        float med = t[t.size() / 2];
        if (v == 0) base = med;
        printf("%-48s %8.2f  min %8.2f  %+6.1f%%\n", argv[1 + v], med, t[0], 100.f * (med - base) / base);
    }
    return 0;
}
