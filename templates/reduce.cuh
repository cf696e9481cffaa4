// reduce.cuh — the generic fused reduction kernel: for every index i of the output space (N ≤ 8 dims),
//   out[i] = finish(i, combine_k inner(i, k))
// where inner and finish are generated functors reading operands through strided views, and combine is a
// sum, a max, or the online softmax-weighted sum (inner yields a score s and a value v; the kernel keeps a
// running max, running sum and rescaled accumulator — the same state FlashAttention keeps). One warp per
// output element, lanes striding over k — or, for a few long rows, a block of 8 warps per output element.
// Any sizes. Namespace tsr; depends on tile.cuh.
//
// Functor interface (the emitter generates these):
//   struct Inner  { __device__ float2 operator()(const int64_t *idx, int64_t k) const; };  // .x = value
//                                                                  // (or score), .y = weighted value
//   struct Finish { __device__ float operator()(const int64_t *idx, float acc) const; };
#pragma once
#include "tile.cuh"

namespace tsr {

constexpr int kMaxDims = 8;
enum Combine { kSum = 0, kMax = 1, kWeightedSum = 2 };

template <typename T, class Inner, class Finish> struct ReduceParams {
    int ndim;                      // output dims (0 for a scalar)
    int64_t size[kMaxDims];
    T *out;
    int64_t out_stride[kMaxDims];
    int64_t numel;                 // output elements
    int64_t len;                   // length of the reduced axis
    float c;                       // kWeightedSum: weights are 2^(c·(s − max s))
    Inner inner;
    Finish finish;
};

// The running state of the online softmax-weighted sum, and its merge (associative).
struct WState {
    float m, l, acc;
};
__device__ __forceinline__ WState wmerge(WState a, WState b, float c) {
    float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.f, 0.f};
    float sa = a.m == -INFINITY ? 0.f : exp2f(c * (a.m - m)), sb = b.m == -INFINITY ? 0.f : exp2f(c * (b.m - m));
    return {m, a.l * sa + b.l * sb, a.acc * sa + b.acc * sb};
}

// The multi-index of output element o, and its offset in the output.
template <typename T, class Inner, class Finish>
__device__ __forceinline__ int64_t unravel(const ReduceParams<T, Inner, Finish> &p, int64_t o, int64_t *idx) {
    int64_t off = 0;
    for (int d = p.ndim - 1; d >= 0; d--) {
        idx[d] = o % p.size[d];
        o /= p.size[d];
        off += idx[d] * p.out_stride[d];
    }
    return off;
}

template <typename T, class Inner, class Finish, int COMBINE>
__global__ void __launch_bounds__(256) reduce_kernel(const ReduceParams<T, Inner, Finish> p) {
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();
    const int lane = threadIdx.x % 32;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t o = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; o < p.numel; o += warps) {
        int64_t idx[kMaxDims];
        const int64_t off = unravel(p, o, idx);
        float acc = COMBINE == kMax ? -INFINITY : 0.f;
        WState w = {-INFINITY, 0.f, 0.f};
#pragma unroll 4  // four loads in flight per lane before the first is combined
        for (int64_t k = lane; k < p.len; k += 32) {
            float2 x = p.inner(idx, k);
            if (COMBINE == kSum) acc += x.x;
            else if (COMBINE == kMax) acc = fmaxf(acc, x.x);
            else w = wmerge(w, WState{x.x, 1.f, x.y}, p.c);
        }
        if (COMBINE == kSum) acc = tst::warp_sum(acc);
        else if (COMBINE == kMax) acc = tst::warp_max(acc);
        else {
            for (int s = 16; s > 0; s >>= 1) {
                WState other = {__shfl_xor_sync(0xffffffffu, w.m, s), __shfl_xor_sync(0xffffffffu, w.l, s),
                                __shfl_xor_sync(0xffffffffu, w.acc, s)};
                w = wmerge(w, other, p.c);
            }
            acc = w.acc / w.l;
        }
        if (lane == 0) p.out[off] = tst::elem<T>::from_float(p.finish(idx, acc));
    }
}

// Long reductions with few outputs (a norm over the model width): one block of 8 warps per output
// element; each warp folds a strided share of k, then the warps' partial states are combined through
// shared memory, so a row of thousands of elements is read by 256 threads at once.
template <typename T, class Inner, class Finish, int COMBINE>
__global__ void __launch_bounds__(256) reduce_rows_kernel(const ReduceParams<T, Inner, Finish> p) {
    __shared__ WState part[8];
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int64_t o = blockIdx.x; o < p.numel; o += gridDim.x) {
        int64_t idx[kMaxDims];
        const int64_t off = unravel(p, o, idx);
        float acc = COMBINE == kMax ? -INFINITY : 0.f;
        WState w = {-INFINITY, 0.f, 0.f};
#pragma unroll 4
        for (int64_t k = threadIdx.x; k < p.len; k += blockDim.x) {
            float2 x = p.inner(idx, k);
            if (COMBINE == kSum) acc += x.x;
            else if (COMBINE == kMax) acc = fmaxf(acc, x.x);
            else w = wmerge(w, WState{x.x, 1.f, x.y}, p.c);
        }
        if (COMBINE == kSum) w = WState{0.f, 0.f, tst::warp_sum(acc)};
        else if (COMBINE == kMax) w = WState{0.f, 0.f, tst::warp_max(acc)};
        else
            for (int s = 16; s > 0; s >>= 1) {
                WState other = {__shfl_xor_sync(0xffffffffu, w.m, s), __shfl_xor_sync(0xffffffffu, w.l, s),
                                __shfl_xor_sync(0xffffffffu, w.acc, s)};
                w = wmerge(w, other, p.c);
            }
        if (lane == 0) part[warp] = w;
        __syncthreads();
        if (threadIdx.x == 0) {
            WState t = part[0];
            for (int i = 1; i < (int)(blockDim.x / 32); i++) {
                if (COMBINE == kSum) t.acc += part[i].acc;
                else if (COMBINE == kMax) t.acc = fmaxf(t.acc, part[i].acc);
                else t = wmerge(t, part[i], p.c);
            }
            const float v = COMBINE == kWeightedSum ? t.acc / t.l : t.acc;
            p.out[off] = tst::elem<T>::from_float(p.finish(idx, v));
        }
        __syncthreads();
    }
}

template <typename T, class Inner, class Finish, int COMBINE>
cudaError_t launch_reduce(const ReduceParams<T, Inner, Finish> &p, int sm_count, cudaStream_t stream) {
    if (p.numel == 0) return cudaSuccess;
    if (p.ndim < 0 || p.ndim > kMaxDims || p.len < 1) return cudaErrorInvalidValue;
    const int64_t cap = (int64_t)sm_count * 16;
    if (p.len >= 1024 && p.numel <= (int64_t)sm_count * 64) { /* few long rows: a block per row */
        return tst::launch(reduce_rows_kernel<T, Inner, Finish, COMBINE>, dim3((unsigned)(p.numel < cap ? p.numel : cap)),
                           dim3(256), 0, stream, 1, p);
    }
    int64_t blocks = (p.numel + 7) / 8;
    return tst::launch(reduce_kernel<T, Inner, Finish, COMBINE>, dim3((unsigned)(blocks < cap ? blocks : cap)), dim3(256), 0,
                       stream, 1, p);
}

}  // namespace tsr
