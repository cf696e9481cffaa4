/* main.c — a plain C program (gcc, no C++) that calls a generated header through its C ABI: the
 * rmsnorm·W graph (bench/graphs/rmsnorm.yaml: Y = rmsnorm(X) · W) compiled at M x D x N, buffers made
 * with the CUDA runtime's C API, rmsnorm_run called with the inputs then the outputs in the banner's
 * order, every row checked against a double CPU reference. Exit status 0 only when they agree. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rmsnorm.cuh"

/* IEEE half from float, round to nearest even (normal range; the inputs here are in [-1, 1]). */
static unsigned short to_half(float f) {
    unsigned int x;
    memcpy(&x, &f, 4);
    unsigned int sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (exp <= 0) return (unsigned short)sign; /* tiny: zero */
    unsigned int h = sign | ((unsigned int)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
    return (unsigned short)h;
}

static float from_half(unsigned short h) {
    unsigned int sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    if (exp == 0) x = sign; /* zero (subnormals flushed: not produced here) */
    else if (exp == 31) x = sign | 0x7f800000u | (mant << 13);
    else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

#define CHECK(call)                                                                                       \
    do {                                                                                                  \
        int rc_ = (int)(call);                                                                            \
        if (rc_ != 0) {                                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString((cudaError_t)rc_)); \
            return 1;                                                                                     \
        }                                                                                                 \
    } while (0)

int main(void) {
    enum { M_ = M, D_ = D, N_ = N };
    unsigned short *x = malloc(sizeof *x * M_ * D_), *w = malloc(sizeof *w * D_ * N_), *y = malloc(sizeof *y * M_ * N_);
    srand(1);
    for (int i = 0; i < M_ * D_; i++) x[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
    for (int i = 0; i < D_ * N_; i++) w[i] = to_half((float)rand() / RAND_MAX * 2 - 1);
    void *dx, *dw, *dy, *ws = NULL;
    size_t ws_bytes = rmsnorm_workspace_bytes();
    CHECK(cudaMalloc(&dx, sizeof *x * M_ * D_));
    CHECK(cudaMalloc(&dw, sizeof *w * D_ * N_));
    CHECK(cudaMalloc(&dy, sizeof *y * M_ * N_));
    if (ws_bytes) CHECK(cudaMalloc(&ws, ws_bytes));
    CHECK(cudaMemcpy(dx, x, sizeof *x * M_ * D_, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dw, w, sizeof *w * D_ * N_, cudaMemcpyHostToDevice));
    void *buffers[] = {dx, dw, dy}; /* inputs X, W, then the output Y */
    CHECK(rmsnorm_run(buffers, NULL, ws, NULL));
    CHECK(cudaMemcpy(y, dy, sizeof *y * M_ * N_, cudaMemcpyDeviceToHost));
    double err = 0, scale = 0;
    for (int r = 0; r < M_; r++) {
        double ss = 0;
        for (int k = 0; k < D_; k++) ss += (double)from_half(x[r * D_ + k]) * from_half(x[r * D_ + k]);
        double inv = 1 / sqrt(ss / D_ + 1e-6);
        for (int c = 0; c < N_; c++) {
            double want = 0;
            for (int k = 0; k < D_; k++) want += from_half(x[r * D_ + k]) * inv * from_half(w[k * N_ + c]);
            err = fmax(err, fabs(want - from_half(y[r * N_ + c])));
            scale = fmax(scale, fabs(want));
        }
    }
    const char *fb = rmsnorm_fallback();
    printf("rmsnorm_run (m=%d, d=%d, n=%d): max error %.2e of max |y| %.3f; %s\n", M_, D_, N_, err, scale,
           fb ? fb : "every kernel on its fast path");
    cudaFree(dx), cudaFree(dw), cudaFree(dy), cudaFree(ws);
    free(x), free(w), free(y);
    int ok = err <= 1e-2 * scale;
    printf("%s\n", ok ? "C example: ok" : "C example: FAILED");
    return ok ? 0 : 1;
}
