// map.cuh — the generic fused elementwise kernel: out[i] = f(i) over an N-d index space (N ≤ 8), where f
// is a generated functor that reads its operands through arbitrary strided views (broadcasts, slices,
// reversed axes, permutations) and computes a fused expression. Each thread produces VEC consecutive
// elements along the innermost dim; when the output's innermost stride is 1 and the address is aligned,
// they are stored with one vector store (16 bytes for VEC=8 halves). Sizes need not be multiples of
// anything. Namespace tsm; depends on tile.cuh.
//
// Functor interface (the emitter generates these):
//   struct Fn { __device__ float operator()(const int64_t *idx) const; };   // idx[0..ndim)
#pragma once
#include "tile.cuh"

namespace tsm {

constexpr int kMaxDims = 8;

template <typename T, class Fn> struct MapParams {
    int ndim;
    int64_t size[kMaxDims];       // iteration space, row-major
    T *out;
    int64_t out_stride[kMaxDims]; // in elements
    int64_t numel;
    Fn fn;
};

template <typename T, class Fn, int VEC>
__global__ void __launch_bounds__(256) map_kernel(const MapParams<T, Fn> p) {
    const int64_t inner = p.size[p.ndim - 1];
    const int64_t rows = p.numel / inner;
    const int64_t per_row = (inner + VEC - 1) / VEC;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < rows * per_row;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = t / per_row, col0 = (t % per_row) * VEC;
        int64_t idx[kMaxDims];
        int64_t r = row, off = 0;
        for (int d = p.ndim - 2; d >= 0; d--) {
            idx[d] = r % p.size[d];
            r /= p.size[d];
            off += idx[d] * p.out_stride[d];
        }
        float v[VEC];
#pragma unroll
        for (int j = 0; j < VEC; j++) {
            idx[p.ndim - 1] = col0 + j;
            v[j] = col0 + j < inner ? p.fn(idx) : 0.f;
        }
        T *dst = p.out + off + col0 * p.out_stride[p.ndim - 1];
        bool vector_ok = sizeof(T) * VEC <= 16 && p.out_stride[p.ndim - 1] == 1 && col0 + VEC <= inner &&
                         (reinterpret_cast<uintptr_t>(dst) % (sizeof(T) * VEC)) == 0;
        if (vector_ok && VEC > 1) {
            T packed[VEC];
#pragma unroll
            for (int j = 0; j < VEC; j++) packed[j] = tst::elem<T>::from_float(v[j]);
            if constexpr (sizeof(T) * VEC == 16) *reinterpret_cast<int4 *>(dst) = *reinterpret_cast<int4 *>(packed);
            else if constexpr (sizeof(T) * VEC == 8) *reinterpret_cast<int2 *>(dst) = *reinterpret_cast<int2 *>(packed);
            else for (int j = 0; j < VEC; j++) dst[j] = packed[j];
        } else {
            for (int j = 0; j < VEC && col0 + j < inner; j++)
                dst[j * p.out_stride[p.ndim - 1]] = tst::elem<T>::from_float(v[j]);
        }
    }
}

// Launches over the whole index space; returns the launch error. Never prints.
template <typename T, class Fn>
cudaError_t launch_map(const MapParams<T, Fn> &p, int sm_count, cudaStream_t stream) {
    if (p.numel == 0) return cudaSuccess;
    if (p.ndim < 1 || p.ndim > kMaxDims) return cudaErrorInvalidValue;
    constexpr int VEC = 16 / sizeof(T) > 8 ? 8 : 16 / sizeof(T);
    int64_t inner = p.size[p.ndim - 1];
    int64_t work = (p.numel / inner) * ((inner + VEC - 1) / VEC);
    int64_t blocks = (work + 255) / 256;
    int64_t cap = (int64_t)sm_count * 16;
    map_kernel<T, Fn, VEC><<<(unsigned)(blocks < cap ? blocks : cap), 256, 0, stream>>>(p);
    return cudaGetLastError();
}

// Offset of idx in a strided view (a helper for generated functors).
__device__ __forceinline__ int64_t offset_of(const int64_t *idx, const int64_t *stride, int ndim, int64_t base) {
    int64_t off = base;
    for (int d = 0; d < ndim; d++) off += idx[d] * stride[d];
    return off;
}

}  // namespace tsm
