/* fake_candidate.c — a CPU stand-in for a compiled rmsnorm candidate (bench/graphs/rmsnorm.yaml:
 * Y = rmsnorm(X)·W, fp16), with the C ABI of a tsopt header, so that tests/test_tune.c can run `tsopt tune`
 * end to end on the simulated driver (calibrate/mock_cuda.c, where device pointers are host pointers).
 * tests/tune/fake_nvcc.sh builds it in place of nvcc with:
 *   NK      the plan's kernel count: that many simulated kernels of KUS microseconds each are "launched"
 *   WRONG   1: a wrong result (the tuner must mark the candidate invalid and never emit it)
 *   FAULT   1: its kernel faults (the simulated context is poisoned, like an illegal address on a GPU)
 *   HANG    1: its kernel never ends (the tuner's watchdog must kill it)
 *   CRASH   1: its host code aborts (a failed assertion in a launch helper; SIGABRT, which the
 *           sanitizers leave alone, unlike SIGSEGV)
 * Sizes are read from the buffers' implied shapes: M, D, N below must match the test's --dims. */
#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef NK
#define NK 1
#endif
#ifndef KUS
#define KUS 10
#endif
#ifndef WRONG
#define WRONG 0
#endif
#ifndef FAULT
#define FAULT 0
#endif
#ifndef HANG
#define HANG 0
#endif
#ifndef CRASH
#define CRASH 0
#endif
enum { M = 16, D = 32, N = 24 };

void mock_kernel(double seconds); /* from the mock driver, loaded before this library */
void mock_fault(void);
void mock_hang(void);

static float half_to_float(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t float_to_half(float f) { /* round to nearest (ties away: enough for a stand-in) */
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    float a = fabsf(f);
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < 0x1p-14f) return sign | (uint16_t)lrintf(a * 0x1p24f);
    int e;
    float m = frexpf(a, &e);
    long q = lrintf(m * 2048.0f);
    if (q == 2048) q = 1024, e++;
    return sign | (uint16_t)((e + 14) << 10) | (uint16_t)(q - 1024);
}

size_t rmsnorm_workspace(const int64_t *dims) {
    (void)dims;
    return 0;
}

int rmsnorm_run(void *const *buffers, const int64_t *dims, void *workspace, void *stream) {
    (void)dims, (void)workspace, (void)stream;
    if (CRASH) abort();
    if (FAULT) mock_fault();
    if (HANG) mock_hang();
    const uint16_t *X = buffers[0], *W = buffers[1];
    uint16_t *Y = buffers[2];
    for (int i = 0; i < M; i++) {
        double ss = 0;
        for (int k = 0; k < D; k++) ss += (double)half_to_float(X[i * D + k]) * half_to_float(X[i * D + k]);
        double r = 1 / sqrt(ss / D + 1e-6);
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < D; k++) acc += half_to_float(X[i * D + k]) * r * half_to_float(W[k * N + j]);
            Y[i * N + j] = float_to_half((float)(WRONG ? acc + 0.25 : acc));
        }
    }
    for (int k = 0; k < NK; k++) mock_kernel(KUS * 1e-6);
    return 0;
}
