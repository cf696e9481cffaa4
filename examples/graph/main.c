/* main.c — the CUDA-graph helper of a generated header, from plain C: the decoder layer
 * (bench/graphs/decoder_layer.yaml, t dynamic) run on random inputs through decoder_layer_run and
 * through decoder_layer_graph_run (captured on its first call for a size, replayed after), the outputs
 * compared bit for bit, and both timed per call with CUDA events, for each size t given on the command
 * line (default 16 and 1024). Exit status 0 only when every output agrees.
 *
 * usage: graph [T...] */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder_layer.cuh"

/* The layer's static sizes (the YAML's): model width, q+k+v width, query width, MLP width. */
enum { D = 4096, QKV = 6144, Q_DIM = 4096, F = 14336, MAX_T = 4096, REPS = 50 };
enum { X, G_ATTN, W_QKV, W_O, G_MLP, W_GATE, W_UP, W_DOWN, OUT, NBUF };

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        int rc_ = (int)(call);                                                                            \
        if (rc_ != 0) {                                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString((cudaError_t)rc_)); \
            exit(1);                                                                                      \
        }                                                                                                 \
    } while (0)

/* IEEE half from float, round to nearest even (values here are within [-1, 1]; tiny ones become 0). */
static uint16_t to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (exp <= 0) return (uint16_t)sign;
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (uint16_t)h;
}

/* A device buffer of n halves, uniform in [-scale, scale) (scale 0: all ones, for the norms' gains). */
static void *random_halves(size_t n, float scale, uint64_t *seed) {
    uint16_t *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
        float u = (float)(*seed >> 40) / (float)(1u << 24) * 2.f - 1.f;
        h[i] = to_half(scale > 0 ? u * scale : 1.f);
    }
    void *d;
    CHECK(cudaMalloc(&d, n * sizeof *h));
    CHECK(cudaMemcpy(d, h, n * sizeof *h, cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* Microseconds per call of `run` (the header's _run or _graph_run), over REPS calls after one warm-up. */
static double time_per_call(int (*run)(void *const *, const int64_t *, void *, struct CUstream_st *), void **bufs,
                            const int64_t *t, void *ws, cudaStream_t stream) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(run(bufs, t, ws, stream));
    CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < REPS; i++) CHECK(run(bufs, t, ws, stream));
    CHECK(cudaEventRecord(b, stream));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a), cudaEventDestroy(b);
    return ms * 1e3 / REPS;
}

/* The output after `run`, the buffer poisoned (0xff: NaN halves) first. */
static void output_after(int (*run)(void *const *, const int64_t *, void *, struct CUstream_st *), void **bufs,
                         const int64_t *t, void *ws, cudaStream_t stream, uint16_t *host) {
    size_t bytes = (size_t)*t * D * sizeof *host;
    CHECK(cudaMemsetAsync(bufs[OUT], 0xff, bytes, stream));
    CHECK(run(bufs, t, ws, stream));
    CHECK(cudaMemcpyAsync(host, bufs[OUT], bytes, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
}

/* One size: the outputs of _run, of _graph_run's first call (run and captured) and of its replay, compared
 * bit for bit; both timed. Returns whether they agree. */
static int check_size(int64_t t, void **bufs, void *ws, cudaStream_t stream) {
    size_t n = (size_t)t * D;
    uint16_t *plain = malloc(n * 2), *first = malloc(n * 2), *replay = malloc(n * 2);
    output_after(decoder_layer_run, bufs, &t, ws, stream, plain);
    output_after(decoder_layer_graph_run, bufs, &t, ws, stream, first);
    output_after(decoder_layer_graph_run, bufs, &t, ws, stream, replay);
    int same = !memcmp(plain, first, n * 2) && !memcmp(plain, replay, n * 2);
    double run_us = time_per_call(decoder_layer_run, bufs, &t, ws, stream);
    double graph_us = time_per_call(decoder_layer_graph_run, bufs, &t, ws, stream);
    printf("%6lld  %12.1f  %12.1f  %7.2fx  %s\n", (long long)t, run_us, graph_us, run_us / graph_us,
           same ? "identical" : "DIFFERENT");
    free(plain), free(first), free(replay);
    return same;
}

int main(int argc, char **argv) {
    int64_t sizes[16] = {16, 1024};
    int nsizes = argc > 1 ? argc - 1 : 2;
    for (int i = 1; i < argc && i <= 16; i++) {
        sizes[i - 1] = atoll(argv[i]);
        if (sizes[i - 1] < 1 || sizes[i - 1] > MAX_T) {
            fprintf(stderr, "usage: graph [T...]  (each 1 to %d)\n", MAX_T);
            return 2;
        }
    }
    if (nsizes > 16) nsizes = 16;
    uint64_t seed = 1;
    const size_t elems[NBUF] = {(size_t)MAX_T * D, D, (size_t)D * QKV, (size_t)Q_DIM * D, D, (size_t)D * F,
                                (size_t)D * F, (size_t)F * D, (size_t)MAX_T * D};
    const float scale[NBUF] = {1.f, 0.f, 1.f / 64, 1.f / 64, 0.f, 1.f / 64, 1.f / 64, 1.f / 120, 1.f};
    void *bufs[NBUF], *ws = NULL;
    for (int i = 0; i < NBUF; i++) bufs[i] = random_halves(elems[i], scale[i], &seed);
    size_t ws_bytes = decoder_layer_workspace_bytes(MAX_T);
    if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes));
    cudaStream_t stream;
    CHECK(cudaStreamCreate(&stream)); /* a capturable stream: not the legacy default stream */
    printf("decoder_layer: _run vs _graph_run, microseconds per call (mean of %d back-to-back calls), workspace "
           "%.1f MiB at t = %d\n", REPS, ws_bytes / 1048576.0, MAX_T);
    printf("%6s  %12s  %12s  %8s  %s\n", "t", "run_us", "graph_us", "speedup", "outputs");
    int ok = 1;
    for (int i = 0; i < nsizes; i++) ok &= check_size(sizes[i], bufs, ws, stream);
    CHECK(decoder_layer_graph_reset());
    const char *fb = decoder_layer_fallback();
    printf("%s\n", fb ? fb : "every kernel on its fast path");
    for (int i = 0; i < NBUF; i++) cudaFree(bufs[i]);
    cudaFree(ws);
    cudaStreamDestroy(stream);
    printf("%s\n", ok ? "graph example: ok" : "graph example: FAILED");
    return ok ? 0 : 1;
}
