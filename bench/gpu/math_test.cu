// math_test.cu — measures and bounds the error of the special functions the emitter writes (templates/tile.cuh:
// fast_exp2, fast_sqrt, fast_log2, fast_sin; src/emit.c print_op) against float64 on the GPU. Each function is
// evaluated on every 16th fp32 bit pattern of its domain (every one of log2's [0.5, 2]; sin also densely on
// [-4π, 4π]), the float64 value of the same input computed beside it; the worst error is kept with atomicMax on
// its bits (with the input's, in one 64-bit atomicMax). Errors are relative except where the function's value nears zero: log2 on [0.5, 2] and sin
// everywhere, absolute. Each line prints the worst error, the input that gave it and the bound; exit status 1
// when a bound is broken or a CUDA call fails. The bounds are what the tune's validation relies on (relative L2
// 2e-3 for fp32 outputs, 1e-2 for fp16/bf16) with a wide margin. Build: make gpu-build (build/gpu/math_test).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "checks.cuh"
#include "tile.cuh"

enum Fn { kExp2, kSqrt, kLog2, kSin };

// The worst error and an input that gave it, packed for one 64-bit atomicMax: the error's float bits high
// (non-negative floats order as their bits), the input's bits low.
__host__ __device__ inline unsigned long long pack_worst(float err, float at) {
    unsigned e, a;
    memcpy(&e, &err, 4), memcpy(&a, &at, 4);
    return (unsigned long long)e << 32 | a;
}

__device__ float evaluate(Fn fn, float x, double *ref) {
    switch (fn) {
    case kExp2: *ref = exp2((double)x); return tst::fast_exp2(x);
    case kSqrt: *ref = sqrt((double)x); return tst::fast_sqrt(x);
    case kLog2: *ref = log2((double)x); return tst::fast_log2(x);
    default: *ref = sin((double)x); return tst::fast_sin(x);
    }
}

// Error of got against ref: absolute where `absolute`, else relative to |ref|; NaN or a wrong infinity is +inf.
__device__ float error_of(float got, double ref, bool absolute) {
    if (isnan(ref)) return isnan(got) ? 0.f : INFINITY;
    if (isinf(ref)) return got == (float)ref ? 0.f : INFINITY;
    if (isnan(got) || isinf(got)) return INFINITY;
    double e = fabs((double)got - ref);
    if (!absolute) e /= fmax(fabs(ref), 1e-300);
    return (float)e;
}

// Inputs: bit patterns first, first + step, ... below last (as floats, sign applied), or n evenly spaced values
// on [lo, hi] when n > 0. Errors are absolute where all_absolute, else relative.
struct Sweep {
    uint32_t first, last, step;
    float sign;
    long long n;
    float lo, hi;
    bool all_absolute;
};

__global__ void sweep_kernel(Fn fn, Sweep s, unsigned long long *worst) {
    const long long count = s.n > 0 ? s.n : (long long)(s.last - s.first) / s.step;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
         i += (long long)gridDim.x * blockDim.x) {
        float x;
        if (s.n > 0) x = s.lo + (s.hi - s.lo) * (float)((double)i / (double)(s.n - 1));
        else x = s.sign * __uint_as_float(s.first + (uint32_t)i * s.step);
        double ref;
        const float got = evaluate(fn, x, &ref);
        const unsigned long long packed = pack_worst(error_of(got, ref, s.all_absolute), x);
        if (packed > *worst) atomicMax(worst, packed);  // a cheap pre-check; the atomic settles races
    }
}

static int failures = 0;

static void run(const char *name, Fn fn, Sweep s, double bound, const char *unit) {
    unsigned long long *d = nullptr, h = 0;
    CK(cudaMalloc(&d, sizeof *d));
    CK(cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice));
    sweep_kernel<<<132 * 8, 256>>>(fn, s, d);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(d));
    const unsigned e_bits = (unsigned)(h >> 32), at_bits = (unsigned)h;
    float e, at;
    memcpy(&e, &e_bits, 4), memcpy(&at, &at_bits, 4);
    const bool ok = e <= bound;
    failures += !ok;
    printf("%-34s worst %.3g %s at x = %.9g (bound %.3g)  %s\n", name, (double)e, unit, (double)at, bound,
           ok ? "ok" : "FAIL");
}

static Sweep bits(float lo, float hi, float sign, uint32_t step = 16) {
    Sweep s{};
    uint32_t a, b;
    memcpy(&a, &lo, 4), memcpy(&b, &hi, 4);
    s.first = a, s.last = b, s.step = step, s.sign = sign;
    return s;
}

int main() {
    const double ulp = std::ldexp(1.0, -23);
    // exp2 kept inside the normal range of its result: ex2.approx.ftz flushes subnormal results to zero
    run("exp2  x in (0, 127.9)", kExp2, bits(0x1p-30f, 127.9f, 1.f), 4 * ulp, "rel");
    run("exp2  x in (-125.9, 0)", kExp2, bits(0x1p-30f, 125.9f, -1.f), 4 * ulp, "rel");
    run("sqrt  every positive float", kSqrt, bits(0x1p-149f, 3.4e38f, 1.f), 2 * ulp, "rel");
    Sweep lg = bits(0.5f, 2.f, 1.f, 1);
    lg.all_absolute = true;
    run("log2  x in [0.5, 2], every float", kLog2, lg, std::ldexp(1.0, -21), "abs");
    run("log2  x in (0, 0.5)", kLog2, bits(0x1p-149f, 0.5f, 1.f), 8 * ulp, "rel");
    run("log2  x in (2, max]", kLog2, bits(2.f, 3.4e38f, 1.f), 8 * ulp, "rel");
    Sweep sn = bits(0x1p-40f, 0x1p20f, 1.f);
    sn.all_absolute = true;
    run("sin   |x| in (0, 2^20], x > 0", kSin, sn, std::ldexp(1.0, -20), "abs");
    sn.sign = -1.f;
    run("sin   |x| in (0, 2^20], x < 0", kSin, sn, std::ldexp(1.0, -20), "abs");
    Sweep dense{};
    dense.n = 1ll << 26, dense.lo = -12.566371f, dense.hi = 12.566371f, dense.all_absolute = true;
    run("sin   x in [-4π, 4π], dense", kSin, dense, std::ldexp(1.0, -20), "abs");
    Sweep big = bits(0x1p20f, 0x1p24f, 1.f);
    big.all_absolute = true;
    run("sin   |x| in (2^20, 2^24]", kSin, big, std::ldexp(1.0, -16), "abs");
    big = bits(0x1p24f, 3.4e38f, 1.f, 64);  // reported, not bounded: an fp32 x there is an even integer
    big.all_absolute = true;
    run("sin   |x| > 2^24 (reported only)", kSin, big, 2.0, "abs");
    CK(cudaDeviceSynchronize());
    printf("%s\n", failures ? "math_test: FAILED" : "math_test: all bounds hold");
    return failures ? 1 : 0;
}
