// map.cuh — the generic fused elementwise kernel: out[i] = f(i) over an N-d index space (N ≤ 8), where f
// is a generated functor that reads its operands through arbitrary strided views (broadcasts, slices,
// reversed axes, permutations) and computes a fused expression. Each thread produces a span of kVec
// consecutive elements along the innermost dim: the functor loads each operand's span with one 16-byte
// vector load where the operand has unit stride there and is aligned, one broadcast load where its stride
// is 0, a gather otherwise (span.cuh); the output span is stored the same way. The index space is walked
// with 32-bit arithmetic when it has fewer than 2^31 spans (one division per span and outer dim, none per
// element). Sizes need not be multiples of anything. Namespace tsm; depends on tile.cuh and span.cuh.
//
// Functor interface (the emitter generates these):
//   struct Fn {
//     static constexpr int kVec;
//     // y[j] = f(idx + j along the innermost dim) for j < n (n ≤ kVec; idx[0..ndim): the span's start)
//     __device__ void operator()(const int64_t *idx, int n, float (&y)[kVec]) const;
//   };
#pragma once
#include "span.cuh"
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

// a[i] for a run-time i without indexing dynamically (which would copy the parameters to local memory).
__device__ __forceinline__ int64_t pick(const int64_t (&a)[kMaxDims], int i) {
    int64_t v = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; d++)
        if (d == i) v = a[d];
    return v;
}

// Span t of the index space: its start idx[] (col along the innermost dim), and the output offset of its
// row (every dim but the innermost). I: the index type.
template <typename I, typename T, class Fn>
__device__ __forceinline__ int64_t span_start(const MapParams<T, Fn> &p, I t, I per_row, int64_t *idx, int64_t &col) {
    I row = t / per_row;
    col = (int64_t)(t - row * per_row) * Fn::kVec;
    int64_t off = 0;
#pragma unroll
    for (int d = kMaxDims - 2; d > 0; d--) {  // unrolled: constant indices keep the parameters in place
        if (d > p.ndim - 2) continue;
        const I q = row / (I)p.size[d];
        idx[d] = (int64_t)(row - q * (I)p.size[d]);
        row = q;
        off += idx[d] * p.out_stride[d];
    }
    if (p.ndim > 1) idx[0] = (int64_t)row, off += idx[0] * p.out_stride[0];  // the outermost: no division
#pragma unroll
    for (int d = 0; d < kMaxDims; d++)
        if (d == p.ndim - 1) idx[d] = col;
    return off;
}

template <typename T, class Fn, typename I>
__global__ void __launch_bounds__(256) map_kernel(const MapParams<T, Fn> p) {
    constexpr int VEC = Fn::kVec;
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();
    const int64_t inner = pick(p.size, p.ndim - 1), inner_stride = pick(p.out_stride, p.ndim - 1);
    const I per_row = ((I)inner + VEC - 1) / VEC, spans = (I)(p.numel / inner) * per_row;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < spans; t += (I)gridDim.x * blockDim.x) {
        int64_t idx[kMaxDims];
        int64_t col;
        const int64_t off = span_start<I>(p, t, per_row, idx, col);
        const int n = tsv::span_len<VEC>(col, inner);
        float v[VEC];
        p.fn(idx, n, v);
        tsv::store_span<VEC>(p.out + off, inner_stride, col, n, v);
    }
}

// Launches over the whole index space; returns the launch error. Never prints.
template <typename T, class Fn>
cudaError_t launch_map(const MapParams<T, Fn> &p, int sm_count, cudaStream_t stream) {
    if (p.numel == 0) return cudaSuccess;
    if (p.ndim < 1 || p.ndim > kMaxDims) return cudaErrorInvalidValue;
    constexpr int VEC = Fn::kVec;
    int64_t inner = p.size[p.ndim - 1];
    int64_t spans = (p.numel / inner) * ((inner + VEC - 1) / VEC);
    int64_t blocks = (spans + 255) / 256;
    int64_t cap = (int64_t)sm_count * 16;
    unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
    if (spans < ((int64_t)1 << 31)) return tst::launch(map_kernel<T, Fn, uint32_t>, dim3(grid), dim3(256), 0, stream, 1, p);
    return tst::launch(map_kernel<T, Fn, int64_t>, dim3(grid), dim3(256), 0, stream, 1, p);
}

}  // namespace tsm
