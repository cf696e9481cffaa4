// main.cu — a host program that holds one graph (bench/graphs/swiglu.yaml: Y = (X·W_up) ⊙ silu(X·W_gate))
// compiled at two sizes under two names (tsopt compile --name swiglu_small / swiglu_large), calls each
// through its typed launch helper, checks sampled rows against a float CPU reference and says whether the
// Hopper kernels ran. Exit status 0 only when both agree with the reference.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_fp16.h>  // the headers declare __half; the program that makes halves includes its header

#include "swiglu_large.cuh"
#include "swiglu_small.cuh"

#define CHECK(x)                                                                                         \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            std::exit(1);                                                                                \
        }                                                                                                \
    } while (0)

typedef cudaError_t (*swiglu_fn)(const __half *, const __half *, const __half *, __half *, void *, cudaStream_t);

// Runs one size (m, d, n) and returns the largest error relative to the reference's largest magnitude.
static double run_size(const char *name, swiglu_fn launch, size_t ws_bytes, const char *(*fallback)(void), int m,
                       int d, int n) {
    std::vector<__half> x((size_t)m * d), wu((size_t)d * n), wg((size_t)d * n), y((size_t)m * n);
    srand(1);
    auto rnd = [] { return __float2half((float)rand() / RAND_MAX - 0.5f); };
    for (auto &v : x) v = rnd();
    for (auto &v : wu) v = rnd();
    for (auto &v : wg) v = rnd();
    __half *dx, *dwu, *dwg, *dy;
    void *ws = nullptr;
    CHECK(cudaMalloc(&dx, x.size() * 2));
    CHECK(cudaMalloc(&dwu, wu.size() * 2));
    CHECK(cudaMalloc(&dwg, wg.size() * 2));
    CHECK(cudaMalloc(&dy, y.size() * 2));
    if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes));
    CHECK(cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dwu, wu.data(), wu.size() * 2, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dwg, wg.data(), wg.size() * 2, cudaMemcpyHostToDevice));
    CHECK(launch(dx, dwu, dwg, dy, ws, 0));
    CHECK(cudaMemcpy(y.data(), dy, y.size() * 2, cudaMemcpyDeviceToHost));
    double err = 0, scale = 0;
    for (int r = 0; r < m; r += m > 16 ? m / 16 : 1)
        for (int c = 0; c < n; c++) {
            double u = 0, g = 0;
            for (int k = 0; k < d; k++) {
                u += (double)__half2float(x[(size_t)r * d + k]) * __half2float(wu[(size_t)k * n + c]);
                g += (double)__half2float(x[(size_t)r * d + k]) * __half2float(wg[(size_t)k * n + c]);
            }
            double want = u * g / (1 + std::exp(-g));
            err = std::fmax(err, std::fabs(want - __half2float(y[(size_t)r * n + c])));
            scale = std::fmax(scale, std::fabs(want));
        }
    const char *fb = fallback();
    std::printf("%s (m=%d, d=%d, n=%d): max error %.2e of max |y| %.3f; %s\n", name, m, d, n, err, scale,
                fb ? fb : "every kernel on its fast path");
    cudaFree(dx), cudaFree(dwu), cudaFree(dwg), cudaFree(dy), cudaFree(ws);
    return err / (scale > 0 ? scale : 1);
}

int main() {
    double small = run_size("swiglu_small", swiglu_small_launch, swiglu_small_workspace_bytes(), swiglu_small_fallback,
                            SMALL_M, SMALL_D, SMALL_N);
    double large = run_size("swiglu_large", swiglu_large_launch, swiglu_large_workspace_bytes(), swiglu_large_fallback,
                            LARGE_M, LARGE_D, LARGE_N);
    bool ok = small < 1e-2 && large < 1e-2;
    std::printf("%s\n", ok ? "host example: ok" : "host example: FAILED");
    return ok ? 0 : 1;
}
