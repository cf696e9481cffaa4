// map.cuh — the generic fused elementwise kernel: out[i] = f(i) over an N-d index space (N ≤ 8), where f
// is a generated functor that reads its operands through arbitrary strided views (broadcasts, slices,
// reversed axes, permutations) and computes a fused expression. Each thread produces a span of kVec
// consecutive elements along the innermost dim: the functor loads each operand's span with one 16-byte
// vector load where the operand has unit stride there and is aligned, one broadcast load where its stride
// is 0, a gather otherwise (span.cuh); the output span is stored the same way. The index space is walked
// with 32-bit arithmetic when it has fewer than 2^31 spans (one division per span and outer dim, none per
// element), and a span's indices idx[] are indexed by constants only, so that they stay in registers (in local
// memory, a 64-byte stack a thread, the plain walk ran 10% slower: bench/NOTES.md run 154). Sizes need not be
// multiples of anything. Namespace tsm; depends on tile.cuh and span.cuh.
//
// The transposed walk (a functor with kWalk = w ≥ 0): where an operand's unit stride is along another
// dimension w of the index space (a transpose: Y[n, m] = A[m, n]), neighbouring threads of a half-warp take
// neighbouring positions along w instead — a block takes a tile of 16 positions along w × 16 spans along the
// innermost dimension at one index of the others, lane l of warp v position l % 16 and span 2v + l / 16 —
// so that such an operand is read in whole 32-byte sectors by each half-warp, and the output and the operands
// with unit stride along the innermost dimension are still moved in whole sectors, by pairs of lanes. The
// functor is the same; only which thread computes which span changes. src/config.c picks w.
//
// Functor interface (the emitter generates these):
//   struct Fn {
//     static constexpr int kVec;
//     static constexpr int kWalk;   // optional: the transposed walk's dimension (absent or -1: none)
//     static constexpr bool kHead;  // optional: the output's rows can start off 16 bytes (an odd row length):
//                                   // each row's head before its first aligned span is a span of its own
//     // y[j] = f(idx + j along the innermost dim) for j < n (n ≤ kVec; idx[0..ndim): the span's start)
//     __device__ void operator()(const int64_t *idx, int n, float (&y)[kVec]) const;
//   };
#pragma once
#include <type_traits>

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
__host__ __device__ __forceinline__ int64_t pick(const int64_t (&a)[kMaxDims], int i) {
    int64_t v = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; d++)
        if (d == i) v = a[d];
    return v;
}

// a[i] = v for a run-time i, with constant indices only (a dynamic one would put a[] in local memory).
__host__ __device__ __forceinline__ void put(int64_t (&a)[kMaxDims], int i, int64_t v) {
#pragma unroll
    for (int d = 0; d < kMaxDims; d++) a[d] = d == i ? v : a[d];
}

// Span t of the index space: its start idx[] (col along the innermost dim), and the output offset of its
// row (every dim but the innermost). I: the index type.
template <typename I, typename T, class Fn>
__device__ __forceinline__ int64_t span_start(const MapParams<T, Fn> &p, I t, I per_row, int64_t (&idx)[kMaxDims], int64_t &col) {
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
    put(idx, p.ndim - 1, col);
    return off;
}

// The transposed walk's dimension of functor Fn: Fn::kWalk where it declares one, else -1.
template <class Fn, class = void> struct WalkOf { static constexpr int value = -1; };
template <class Fn> struct WalkOf<Fn, std::void_t<decltype(Fn::kWalk)>> { static constexpr int value = Fn::kWalk; };
template <class Fn> constexpr int kWalkOf = WalkOf<Fn>::value;

// The transposed walk's tile: 16 positions along the walk dimension × 16 spans along the innermost.
constexpr int kWalkTile = 16;

// Tiles of the transposed walk along dimension W: (index-space size without W and the innermost) × tiles
// along W × tiles of spans along the innermost. I: the index type.
template <int W, typename I, typename T, class Fn> __host__ __device__ inline I walk_tiles(const MapParams<T, Fn> &p) {
    const int64_t inner = pick(p.size, p.ndim - 1), along = p.size[W];
    const I per_row = (I)((inner + Fn::kVec - 1) / Fn::kVec), outer = (I)(p.numel / (inner * along));
    return outer * (I)((along + kWalkTile - 1) / kWalkTile) * ((per_row + kWalkTile - 1) / kWalkTile);
}

// The span thread `thread` (0..255) of tile t computes in the transposed walk along dimension W: its start
// idx[] and output offset; false where the tile's edge leaves the thread none. Tiles are numbered with the
// span tiles fastest, then the tiles along W, then the other dimensions row-major.
template <int W, typename I, typename T, class Fn>
__host__ __device__ inline bool walk_span(const MapParams<T, Fn> &p, I t, int thread, int64_t (&idx)[kMaxDims], int64_t &off) {
    constexpr int VEC = Fn::kVec;
    const int64_t inner = pick(p.size, p.ndim - 1), along = p.size[W];
    const I per_row = (I)((inner + VEC - 1) / VEC);
    const I span_tiles = (per_row + kWalkTile - 1) / kWalkTile, along_tiles = (I)((along + kWalkTile - 1) / kWalkTile);
    I rest = t / span_tiles;
    const I span = (t - rest * span_tiles) * kWalkTile + (I)(thread / kWalkTile);
    const I at_w = (rest % along_tiles) * kWalkTile + (I)(thread % kWalkTile);
    rest /= along_tiles;
    if (span >= per_row || (int64_t)at_w >= along) return false;
    off = 0;
#pragma unroll
    for (int d = kMaxDims - 2; d >= 0; d--) {  // unrolled: constant indices keep the parameters in place
        if (d > p.ndim - 2) continue;
        if (d == W) {
            idx[d] = (int64_t)at_w;
        } else {
            const I q = rest / (I)p.size[d];
            idx[d] = (int64_t)(rest - q * (I)p.size[d]);
            rest = q;
        }
        off += idx[d] * p.out_stride[d];
    }
    put(idx, p.ndim - 1, (int64_t)span * VEC);
    return true;
}

template <typename T, class Fn, typename I>
__global__ void __launch_bounds__(256) map_walk_kernel(const MapParams<T, Fn> p) {
    constexpr int VEC = Fn::kVec, W = kWalkOf<Fn>;
    static_assert(W >= 0 && W < kMaxDims - 1, "the walk dimension is one of the index space's, not the innermost");
    tst::pdl_trigger();
    tst::pdl_wait();
    const int64_t inner = pick(p.size, p.ndim - 1), inner_stride = pick(p.out_stride, p.ndim - 1);
    const I tiles = walk_tiles<W, I>(p);
    for (I t = (I)blockIdx.x; t < tiles; t += (I)gridDim.x) {
        int64_t idx[kMaxDims] = {}, off;
        if (!walk_span<W>(p, t, (int)threadIdx.x, idx, off)) continue;
        const int64_t col = pick(idx, p.ndim - 1);
        const int n = tsv::span_len<VEC>(col, inner);
        float v[VEC];
        p.fn(idx, n, v);
        tsv::store_span<VEC, tsv::kPairsOf<Fn>>(p.out + off, inner_stride, col, n, v);
    }
}

// Spans a row of `inner` positions takes: one more where the functor declares kHead (the row's head, positions
// before its first aligned span: span 0 takes them, span j ≥ 1 starts at head + (j − 1)·kVec), so that the other
// spans of the output and of operands aligned alike move in 16-byte vectors (rows of an odd length: 2.6x on
// 8192 × 4096 at a 2-byte offset, bench/NOTES.md run 153). Rows shorter than tsv::kHeadMinSpans take no head.
template <class Fn> __host__ __device__ inline int64_t spans_per_row(int64_t inner) {
    return (inner + Fn::kVec - 1) / Fn::kVec + (tsv::kHeadOf<Fn> ? 1 : 0);
}

// Span t's start idx[], column, length n and output offset; false where it has no positions (an empty head).
template <typename I, typename T, class Fn>
__device__ __forceinline__ bool map_span(const MapParams<T, Fn> &p, I t, I per_row, int64_t inner, int64_t inner_stride,
                                         int64_t (&idx)[kMaxDims], int64_t &col, int &n, int64_t &off) {
    constexpr int VEC = Fn::kVec;
    off = span_start<I>(p, t, per_row, idx, col);
    if constexpr (tsv::kHeadOf<Fn>) {  // span 0 the head, the others after it
        const int head = inner >= tsv::kHeadMinSpans * VEC ? tsv::span_head<VEC>(p.out + off, inner_stride) : 0;
        const int64_t j = col / VEC;
        col = j == 0 ? 0 : head + (j - 1) * VEC;
        n = j == 0 ? head : tsv::span_len<VEC>(col, inner);
        put(idx, p.ndim - 1, col);
    } else {
        n = tsv::span_len<VEC>(col, inner);
    }
    return n > 0;
}

// One span a thread an iteration: two or four in flight (loaded before any is stored) ran 8-45% slower on the
// H100 at the registers they take, as did one span a thread with no grid-stride loop (bench/NOTES.md run 154).
template <typename T, class Fn, typename I>
__global__ void __launch_bounds__(256) map_kernel(const MapParams<T, Fn> p) {
    constexpr int VEC = Fn::kVec;
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();
    const int64_t inner = pick(p.size, p.ndim - 1), inner_stride = pick(p.out_stride, p.ndim - 1);
    const I per_row = (I)spans_per_row<Fn>(inner), spans = (I)(p.numel / inner) * per_row;
    for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < spans; t += (I)gridDim.x * blockDim.x) {
        int64_t idx[kMaxDims] = {}, col, off;
        int n;
        if (!map_span<I>(p, t, per_row, inner, inner_stride, idx, col, n, off)) continue;
        float v[VEC];
        p.fn(idx, n, v);
        tsv::store_span<VEC, tsv::kPairsOf<Fn>>(p.out + off, inner_stride, col, n, v);
    }
}

// Launches over the whole index space; returns the launch error. Never prints.
template <typename T, class Fn>
cudaError_t launch_map(const MapParams<T, Fn> &p, int sm_count, cudaStream_t stream) {
    if (p.numel == 0) return cudaSuccess;
    if (p.ndim < 1 || p.ndim > kMaxDims) return cudaErrorInvalidValue;
    constexpr int W = kWalkOf<Fn>;
    int64_t inner = p.size[p.ndim - 1];
    int64_t spans = (p.numel / inner) * spans_per_row<Fn>(inner);
    int64_t cap = (int64_t)sm_count * 16;
    if constexpr (W >= 0) {  // the transposed walk: a block a tile
        if (W >= p.ndim - 1) return cudaErrorInvalidValue;
        if (spans < ((int64_t)1 << 31)) {
            const int64_t tiles = walk_tiles<W, uint32_t>(p);
            return tst::launch(map_walk_kernel<T, Fn, uint32_t>, dim3((unsigned)(tiles < cap ? tiles : cap)), dim3(256), 0,
                               stream, 1, p);
        }
        const int64_t tiles = walk_tiles<W, int64_t>(p);
        return tst::launch(map_walk_kernel<T, Fn, int64_t>, dim3((unsigned)(tiles < cap ? tiles : cap)), dim3(256), 0,
                           stream, 1, p);
    } else {
        int64_t blocks = (spans + 255) / 256;
        unsigned grid = (unsigned)(blocks < cap ? blocks : cap);
        if (spans < ((int64_t)1 << 31)) return tst::launch(map_kernel<T, Fn, uint32_t>, dim3(grid), dim3(256), 0, stream, 1, p);
        return tst::launch(map_kernel<T, Fn, int64_t>, dim3(grid), dim3(256), 0, stream, 1, p);
    }
}

}  // namespace tsm
