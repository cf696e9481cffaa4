// row.cuh — the row-fused kernel: per row (every position along one axis, the row axis, at one index of
// the other axes), a few reductions in stages, then every elementwise output of the row:
//   acc[j] = combine_j over the row of stage_j(position, acc[0..j))      j < kStages (SUM or MAX)
//   out_o[position] = f_o(position, acc[0..kStages))                     for every output o
// Norms (RMSNorm, LayerNorm with its mean first), softmax and a residual sum with its norm (two outputs)
// are one kernel each, reading every input once from DRAM and writing every output once.
//
// Work split (rows along the contiguous axis; launch_row_columns below for rows along a strided one): a
// group of TPR threads per row (1 to 16 lanes of a warp for short rows, a lane a span, a warp, up to a
// 1024-thread block); each thread owns spans of kVec consecutive positions. Rows that fit (ITEMS spans per
// thread) are cached in registers, so later stages and the outputs never re-read memory; longer rows take
// one pass per stage and one for the outputs, re-reading through L2 (ITEMS = 0; a maximum and the sum of
// exponentials after it in one pass where the functor declares kOnline: an online softmax; stages that read no
// other's result in the first pass: kJoinFirst), or, with launch_row's
// `split` (a configuration tune times), each over a cluster of up to 8 blocks that cache its shares (sm_90+).
// Fewer rows than SMs, each needing a whole block (a decode step's vocabulary, a small batch of long rows),
// always take such clusters, so that every SM streams; those too long for a cluster's registers (at most half as
// many as SMs) take clusters of 1024-thread blocks, each its share of the row in passes (launch_row_passes) — or,
// where the caller gives a scratch buffer (RowParams::grid_scratch), a cooperative grid filling every SM, the
// row's blocks meeting at grid barriers through the scratch (launch_row_grid: a whole tensor's sum or norm).
// Operands and outputs move through span.cuh: 16-byte vectors where the row axis has unit stride and the row is
// aligned (a row starting off 16 bytes, as rows of an odd length do, has its head before the first aligned position
// taken apart: kHead), scalars otherwise. Positions inside a row are 32-bit where the cached path runs. Any sizes.
// Namespace tsw; depends on tile.cuh and span.cuh.
//
// Functor interface (the emitter generates it; kIn ≥ 1 cached operands, kStages ≤ 4):
//   struct Fn {
//     static constexpr int kVec, kIn, kStages;
//     struct Base;  // per row: where it starts in every operand and output, and its indices
//     __device__ void bind(const int64_t *idx, Base &b) const;           // idx: the row's other axes
//     __device__ static constexpr int combine(int j);                    // tsw::kSum or tsw::kMax
//     __device__ void load(const Base &b, int64_t k0, int n, float (&x)[kIn][kVec]) const;  // the cached
//                                     //   operands' spans, each with the work every reader applies to it first
//     __device__ void stage(int j, const Base &b, int64_t k0, int n, const float (&x)[kIn][kVec],
//                           const float *acc, float (&y)[kVec]) const;   // stage j at k0..k0+kVec
//     __device__ void store(const Base &b, int64_t k0, int n, const float (&x)[kIn][kVec],
//                           const float *acc) const;                     // every output at k0..k0+n
//     static constexpr bool kPerRow;  // outputs per row, not per position: store(b, 0, 1, x, acc) once per
//                                     //   row (x unused), e.g. log-sum-exp's max + log Σ exp(x - max)
//     static constexpr bool kPerRowOuts; // besides per-position outputs, some once per row (a row's max
//     __device__ void store_per_row(const Base &b, const float *acc) const;  // returned beside the
//                                     //   normalised row): once per row, after the stages; only if true
//     static constexpr int kOnline;   // optional (-1: none): stage j = kOnline a maximum whose next stage
//     __device__ float merge(float part_sum, float part_max, float new_max) const;  // is a sum of exponentials
//                                     //   of the difference (below)
//     static constexpr unsigned kJoinFirst;  // optional: bit j for a stage j > 0 that reads no other stage's
//                                     //   result: an uncached row's first pass folds it (no pass of its own)
//     static constexpr bool kHead;    // optional: rows can start off 16 bytes (rows of an odd length); then
//     __device__ int head(const Base &b) const;  // the positions before the row's first aligned span, which the
//                                     //   row's first thread takes apart (row_head)
//     static constexpr int64_t kLen;  // optional: every row's length, where it is static (launch_row then
//                                     //   compiles only the launch such rows take; p.len must equal it)
//     static constexpr int kCache16;  // optional: 1 (2) where every cached operand is fp16 (bf16) and load()
//   };                                //   returns it as loaded: cached rows keep two values to a register
//   (kOnline's merge: part_sum rescaled from part_max to new_max, so that a pass over an uncached row folds
//   both stages: an online softmax)
#pragma once
#include <type_traits>

// The cooperative grid (launch_row_grid) needs cooperative_groups.h, which adds ~2.7 s to every nvcc build: an emitted
// header defines TSW_ROW_GRID 0 (and includes nothing more) unless one of its ROW kernels may take such a grid.
#ifndef TSW_ROW_GRID
#define TSW_ROW_GRID 1
#endif
#if TSW_ROW_GRID
#include <cooperative_groups.h>
#endif

#include "span.cuh"
#include "tile.cuh"

namespace tsw {

constexpr int kMaxDims = 8;
constexpr int kThreads = 256;     // threads per block (of groups of up to 256 threads a row)
constexpr int kCacheFloats = 32;  // registers per thread a row's cached operands may take
constexpr int kMinBlocks = 4;     // blocks per SM the registers must allow: 64 registers a thread
constexpr int kWideThreads = 1024;  // the widest block a row may take alone (rows a 256-thread block cannot cache)
// Threads of a block whose rows take TPR threads each, and the blocks an SM its registers must allow (64 a thread).
template <int TPR> constexpr int kBlockThreads = TPR > kThreads ? TPR : kThreads;
template <int TPR> constexpr int kBlockMinBlocks = kMinBlocks * kThreads / kBlockThreads<TPR>;
enum Combine { kSum = 0, kMax = 1 };

template <class Fn> struct RowParams {
    int nrowdim;              // the axes besides the row axis (0: a single row)
    int64_t rsize[kMaxDims];  // their sizes, row-major
    int64_t rows;             // Π rsize
    int64_t len;              // positions along the row axis
    Fn fn;
    float *grid_scratch;          // optional (nullptr: none): launch_row_grid's partials, kStages × its grid's blocks
    int64_t grid_scratch_floats;  //   floats (the launcher sizes the grid to it), 16-byte aligned
    int grid_parts;               // set by launch_row_grid: blocks a row (the grid is rows × grid_parts blocks)
};

// ---- steps -----------------------------------------------------------------------------------------

__device__ __forceinline__ float identity(int combine) { return combine == kMax ? -INFINITY : 0.f; }
__device__ __forceinline__ float combine2(int combine, float a, float b) { return combine == kMax ? fmaxf(a, b) : a + b; }

// A row's index along each of the other axes, innermost first, by divisions in Index (unrolled: constant indices
// keep the parameters in place); the outermost axis takes what is left.
template <class Index>
__device__ __forceinline__ void row_indices(const int64_t (&rsize)[kMaxDims], int nrowdim, Index row, int64_t (&idx)[kMaxDims]) {
#pragma unroll
    for (int d = kMaxDims - 1; d > 0; d--) {
        if (d >= nrowdim) continue;
        const Index size = (Index)rsize[d], q = row / size;
        idx[d] = (int64_t)(row - q * size);
        row = q;
    }
    idx[0] = (int64_t)row;
}

// Row `row`'s indices along the other axes, and its Base. Where the rows number at most 2^32, the indices come
// from 32-bit divisions: a 64-bit one is a software routine several times as long, which a column kernel pays at
// every column it folds a few positions of (run 165: 3-10%).
template <class Fn> __device__ __forceinline__ void bind_row(const RowParams<Fn> &p, int64_t row, typename Fn::Base &b) {
    int64_t idx[kMaxDims];
    if (p.rows <= (int64_t)UINT32_MAX) row_indices<uint32_t>(p.rsize, p.nrowdim, (uint32_t)row, idx);
    else row_indices<int64_t>(p.rsize, p.nrowdim, row, idx);
    p.fn.bind(idx, b);
}

// Folds stage j over the n valid positions of the span at k0 into part.
template <class Fn>
__device__ __forceinline__ float fold_span(const Fn &fn, int j, const typename Fn::Base &b, int64_t k0, int n,
                                           const float (&x)[Fn::kIn][Fn::kVec], const float *acc, float part) {
    float y[Fn::kVec];
    fn.stage(j, b, k0, n, x, acc, y);
#pragma unroll
    for (int v = 0; v < Fn::kVec; v++)
        if (v < n) part = combine2(Fn::combine(j), part, y[v]);
    return part;
}

// Combines part over the TPR threads of a row's group; every thread of the block calls it (live or not).
// Groups of more than a warp meet in shared memory: slots[warp] for the block's warps.
template <int TPR> __device__ __forceinline__ float group_reduce(float part, int combine, float *slots) {
    constexpr int W = TPR < 32 ? TPR : 32;
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1) part = combine2(combine, part, __shfl_xor_sync(0xffffffffu, part, o));
    if constexpr (TPR > 32) {
        const int warp = threadIdx.x / 32, first = (threadIdx.x / TPR) * (TPR / 32);
        if (threadIdx.x % 32 == 0) slots[warp] = part;
        __syncthreads();
        part = slots[first];
#pragma unroll
        for (int w = 1; w < TPR / 32; w++) part = combine2(combine, part, slots[first + w]);
    }
    return part;
}

// ---- the kernel ------------------------------------------------------------------------------------
// ITEMS > 0: the row is cached, span i of a thread at position (i·TPR + lane)·kVec; ITEMS = 0: a pass
// over the row per stage and one for the outputs, spans TPR·kVec apart, several in flight a thread.
// A row too long for one block's registers (CL > 1, sm_90+) is split over a cluster of CL blocks: each
// caches its share, positions [begin, end), and the blocks' partials of a stage meet through distributed
// shared memory, combined in rank order by every block (all get the same result; deterministic).
// Spans a thread loads before using them, on the passes over uncached rows: two where the registers a
// cached row may take hold them, four for a kernel with no output pass (per-row outputs only). Measured
// (bench/NOTES.md run 152, `row_test long`, H100) against one: residual + RMSNorm over 8192 and 16384 7-8%
// faster, LayerNorm over 32768 10%; four spilled beside an output pass (LayerNorm +20%, the two-operand residual
// 2x slower) but made log-sum-exp over 32000 6% faster.
// Spans a thread may cache: counted as floats also where kCache16 packs them (run 161, H100: the same launch shapes
// with half the registers up to 12% faster; twice the spans a thread — 128 threads of 4 spans for a residual + RMSNorm
// over 4096 rather than 256 of 2 — spilled and ran 1.6x slower).
template <class Fn> constexpr int kCacheSpans = kCacheFloats / (Fn::kIn * Fn::kVec);
template <class Fn> constexpr int kPassDepth = kCacheSpans<Fn> >= 4 && Fn::kPerRow ? 4 : kCacheSpans<Fn> >= 2 ? 2 : 1;

// A row's head: the positions before its first span aligned for vector moves (Fn::head, where the functor
// declares kHead: rows that can start off 16 bytes, as rows of an odd length do); 0 otherwise, and for rows of
// fewer than tsv::kHeadMinSpans spans, where the head's extra step (a load each stage by one thread) outweighs
// what it saves. The row's first thread takes the head apart, so that every other span of an aligned operand
// moves in 16-byte vectors rather than element by element.
template <class Fn> __device__ __forceinline__ int row_head(const Fn &fn, const typename Fn::Base &b, int64_t len) {
    if constexpr (tsv::kHeadOf<Fn>) {
        return len >= tsv::kHeadMinSpans * Fn::kVec ? fn.head(b) : 0;
    } else {
        return 0;
    }
}

// The positions of a row that block `rank` of the PARTS blocks sharing it (a cluster's, or a cooperative grid's
// row) takes: [begin, end), whole spans after the row's head (row_head), and the head [0, head) in rank 0 (head 0
// elsewhere).
template <class Fn> struct RowShare {
    int64_t begin, end;
    int head;
    __device__ __forceinline__ RowShare(int64_t len, int rank, int parts, int row_head) {
        head = rank == 0 ? row_head : 0;
        if (parts == 1) {
            begin = row_head, end = len;
        } else {
            const int64_t spans = (len - row_head + Fn::kVec - 1) / Fn::kVec, share = (spans + parts - 1) / parts * Fn::kVec;
            begin = row_head + rank * share < len ? row_head + rank * share : len;
            end = begin + share < len ? begin + share : len;
        }
    }
};

// use(0, head, x) on the row's head where this thread takes it (head > 0: lane 0 of rank 0), loaded anew each
// time (at most kVec - 1 positions).
template <class Fn, class Use>
__device__ __forceinline__ void head_span(const RowParams<Fn> &p, const typename Fn::Base &b, int head, Use &&use) {
    if (head > 0) {
        float x[Fn::kIn][Fn::kVec];
        p.fn.load(b, 0, head, x);
        use(0, head, x);
    }
}

// Fn::kCache16 where the functor declares it (1 fp16, 2 bf16: every cached operand that type), else 0 (floats).
template <class Fn, class = void> struct Cache16Of { static constexpr int value = 0; };
template <class Fn> struct Cache16Of<Fn, std::void_t<decltype(Fn::kCache16)>> { static constexpr int value = Fn::kCache16; };

// A cached span of the kIn operands: floats, or where the functor declares kCache16 their 16-bit values two to a
// register — exact, since load() returned them as loaded from 16-bit memory, and half the registers (the row
// kernel of a residual + RMSNorm no longer spills).
template <class Fn, int KIND = Cache16Of<Fn>::value> struct CachedSpan {
    float v[Fn::kIn][Fn::kVec];
    __device__ __forceinline__ void put(const float (&x)[Fn::kIn][Fn::kVec]) {
#pragma unroll
        for (int o = 0; o < Fn::kIn; o++)
#pragma unroll
            for (int i = 0; i < Fn::kVec; i++) v[o][i] = x[o][i];
    }
    __device__ __forceinline__ void get(float (&x)[Fn::kIn][Fn::kVec]) const {
#pragma unroll
        for (int o = 0; o < Fn::kIn; o++)
#pragma unroll
            for (int i = 0; i < Fn::kVec; i++) x[o][i] = v[o][i];
    }
};
template <class Fn, int KIND> struct CachedSpan16 {
    using T = std::conditional_t<KIND == 1, __half, __nv_bfloat16>;
    static_assert(Fn::kVec % 2 == 0, "16-bit values are cached in pairs");
    typename tst::elem<T>::pair v[Fn::kIn][Fn::kVec / 2];
    __device__ __forceinline__ void put(const float (&x)[Fn::kIn][Fn::kVec]) {
#pragma unroll
        for (int o = 0; o < Fn::kIn; o++)
#pragma unroll
            for (int i = 0; i < Fn::kVec / 2; i++) v[o][i] = tst::elem<T>::pack(x[o][2 * i], x[o][2 * i + 1]);
    }
    __device__ __forceinline__ void get(float (&x)[Fn::kIn][Fn::kVec]) const {
#pragma unroll
        for (int o = 0; o < Fn::kIn; o++)
#pragma unroll
            for (int i = 0; i < Fn::kVec / 2; i++) {
                x[o][2 * i] = tst::elem<T>::to_float(v[o][i].x);
                x[o][2 * i + 1] = tst::elem<T>::to_float(v[o][i].y);
            }
    }
};
template <class Fn> struct CachedSpan<Fn, 1> : CachedSpan16<Fn, 1> {};
template <class Fn> struct CachedSpan<Fn, 2> : CachedSpan16<Fn, 2> {};
template <class Fn, int ITEMS> using RowCache = CachedSpan<Fn>[ITEMS > 0 ? ITEMS : 1];

// Step 1 (cached rows): this thread's spans of the block's share of the row into registers.
template <class Fn, int TPR, int ITEMS>
__device__ __forceinline__ void load_row(const RowParams<Fn> &p, const typename Fn::Base &b, int lane,
                                         const RowShare<Fn> &sh, RowCache<Fn, ITEMS> &x) {
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
        const int k0 = (int)sh.begin + (i * TPR + lane) * Fn::kVec;
        float v[Fn::kIn][Fn::kVec];
        p.fn.load(b, k0, tsv::span_len<Fn::kVec>(k0, sh.end), v);
        x[i].put(v);
    }
}

// One pass of a thread over its positions of a row in [first, end): spans first, first + step, ..., DEPTH at
// a time (all loaded, then use(k0, n, x) on each), so that DEPTH·kVec loads are in flight; a whole span (every
// one but a row's last) reaches the functor with its length a constant, so that the inlined gathers have no
// per-element bounds checks. The passes over uncached rows and the column kernel's passes.
template <int DEPTH, class Fn, class Use>
__device__ __forceinline__ void span_pass(const RowParams<Fn> &p, const typename Fn::Base &b, int64_t first, int64_t end,
                                          int64_t step, Use &&use) {
    float x[DEPTH][Fn::kIn][Fn::kVec];
    for (int64_t k0 = first; k0 < end; k0 += DEPTH * step) {
        int n[DEPTH];
#pragma unroll
        for (int d = 0; d < DEPTH; d++) {  // whole spans with n a constant: no per-element bounds checks
            n[d] = tsv::span_len<Fn::kVec>(k0 + d * step, end);
            if (n[d] == Fn::kVec) p.fn.load(b, k0 + d * step, Fn::kVec, x[d]);
            else if (n[d] > 0) p.fn.load(b, k0 + d * step, n[d], x[d]);
        }
#pragma unroll
        for (int d = 0; d < DEPTH; d++) {
            if (n[d] == Fn::kVec) use(k0 + d * step, Fn::kVec, x[d]);
            else if (n[d] > 0) use(k0 + d * step, n[d], x[d]);
        }
    }
}

// Fn::kOnline where the functor declares it, else -1.
template <class Fn, class = void> struct OnlineStage {
    static constexpr int value = -1;
};
template <class Fn> struct OnlineStage<Fn, std::void_t<decltype(Fn::kOnline)>> {
    static constexpr int value = Fn::kOnline;
};

// Stages j (a maximum) and j + 1 (a sum of exponentials of the difference) in one pass over an uncached row:
// this thread's running maximum m and its sum s, rescaled by Fn::merge whenever the maximum grows (an online
// softmax). Spans while the maximum is -inf add nothing: their terms vanish against any later finite maximum.
template <class Fn, int TPR, class Join>
__device__ __forceinline__ void online_part(const RowParams<Fn> &p, int j, const typename Fn::Base &b, int lane,
                                            const RowShare<Fn> &sh, const float *acc, float &m, float &s,
                                            Join &&join) {
    constexpr int VEC = Fn::kVec;
    float now[Fn::kStages];  // the earlier stages' results, stage j's the running maximum
#pragma unroll
    for (int i = 0; i < Fn::kStages; i++) now[i] = i < j ? acc[i] : 0.f;
    m = -INFINITY, s = 0.f;
    const auto use = [&](int64_t k0, int n, const float (&v)[Fn::kIn][VEC]) {
        join(k0, n, v);
        float y[VEC];
        p.fn.stage(j, b, k0, n, v, now, y);
        float top = m;
#pragma unroll
        for (int i = 0; i < VEC; i++)
            if (i < n) top = fmaxf(top, y[i]);
        if (top == -INFINITY) return;
        if (top > m) s = s != 0.f ? p.fn.merge(s, m, top) : 0.f, m = top;
        now[j] = m;
        p.fn.stage(j + 1, b, k0, n, v, now, y);
#pragma unroll
        for (int i = 0; i < VEC; i++)
            if (i < n) s += y[i];
    };
    head_span(p, b, lane == 0 ? sh.head : 0, use);
    span_pass<kPassDepth<Fn>>(p, b, sh.begin + (int64_t)lane * VEC, sh.end, (int64_t)TPR * VEC, use);
}

// Fn::kJoinFirst where the functor declares it, else 0: a bit a stage that reads no other stage's result and
// that a pass over an uncached row folds into its first pass (stage 0's, or the online pair's at 0), such as a
// cross-entropy's target logit beside the log-sum-exp (rowstat.h ts_row_first_pass_joins).
template <class Fn, class = void> struct JoinFirstOf { static constexpr unsigned value = 0; };
template <class Fn> struct JoinFirstOf<Fn, std::void_t<decltype(Fn::kJoinFirst)>> {
    static constexpr unsigned value = Fn::kJoinFirst;
};

// Passes an uncached row takes over the cached operands: one a stage (a maximum and the sum of exponentials
// after it one: kOnline; a stage joined to the first pass none: kJoinFirst) and one for the outputs unless they
// are per row. Where that is one, caching the row saves nothing: launch_row gives it passes rather than a wider
// block (run 153: log-sum-exp over 32000, passes 74 us, a 1024-thread block caching the row 85 us; run 164: a
// cross-entropy's three stages over 32000 bf16 in a 1024-thread block caching the row, 139 us for 131 MB).
template <class Fn>
constexpr int kUncachedPasses = Fn::kStages - (OnlineStage<Fn>::value >= 0 ? 1 : 0) -
                                __builtin_popcount(JoinFirstOf<Fn>::value) + (Fn::kPerRow ? 0 : 1);

// The part of each stage that joins the first pass over an uncached row (JOIN: the stages' bits), folded at
// every span that pass reads.
template <class Fn, unsigned JOIN> struct JoinedParts {
    float part[Fn::kStages];
    __device__ __forceinline__ JoinedParts() {
#pragma unroll
        for (int j = 0; j < Fn::kStages; j++) part[j] = identity(Fn::combine(j));
    }
    __device__ __forceinline__ void fold(const Fn &fn, const typename Fn::Base &b, int64_t k0, int n,
                                         const float (&v)[Fn::kIn][Fn::kVec], const float *acc) {
#pragma unroll
        for (int j = 0; j < Fn::kStages; j++)
            if constexpr (JOIN != 0)
                if (JOIN >> j & 1u) part[j] = fold_span(fn, j, b, k0, n, v, acc, part[j]);
    }
};

// Step 2: this thread's share of stage j over the row (acc[0..j) are the earlier stages' results).
// join(k0, n, v): what else the pass computes at each span (the stages joined to an uncached row's first pass).
template <class Fn, int TPR, int ITEMS, class Join>
__device__ __forceinline__ float stage_part(const RowParams<Fn> &p, int j, const typename Fn::Base &b, int lane,
                                            const RowShare<Fn> &sh, RowCache<Fn, ITEMS> &x, const float *acc,
                                            Join &&join) {
    constexpr int VEC = Fn::kVec;
    float part = identity(Fn::combine(j));
    const auto fold = [&](int64_t k0, int n, const float (&v)[Fn::kIn][VEC]) {
        join(k0, n, v);
        part = fold_span(p.fn, j, b, k0, n, v, acc, part);
    };
    head_span(p, b, lane == 0 ? sh.head : 0, fold);
    if constexpr (ITEMS > 0) {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const int k0 = (int)sh.begin + (i * TPR + lane) * VEC;
            float v[Fn::kIn][VEC];
            x[i].get(v);
            part = fold_span(p.fn, j, b, k0, tsv::span_len<VEC>(k0, sh.end), v, acc, part);
        }
    } else {
        span_pass<kPassDepth<Fn>>(p, b, sh.begin + (int64_t)lane * VEC, sh.end, (int64_t)TPR * VEC, fold);
    }
    return part;
}

// Step 3: every output at this thread's spans.
template <class Fn, int TPR, int ITEMS>
__device__ __forceinline__ void store_row(const RowParams<Fn> &p, const typename Fn::Base &b, int lane,
                                          const RowShare<Fn> &sh, RowCache<Fn, ITEMS> &x, const float *acc) {
    constexpr int VEC = Fn::kVec;
    const auto store = [&](int64_t k0, int n, const float (&v)[Fn::kIn][VEC]) { p.fn.store(b, k0, n, v, acc); };
    head_span(p, b, lane == 0 ? sh.head : 0, store);
    if constexpr (ITEMS > 0) {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
            const int k0 = (int)sh.begin + (i * TPR + lane) * VEC;
            float v[Fn::kIn][VEC];
            x[i].get(v);
            p.fn.store(b, k0, tsv::span_len<VEC>(k0, sh.end), v, acc);
        }
    } else {
        span_pass<kPassDepth<Fn>>(p, b, sh.begin + (int64_t)lane * VEC, sh.end, (int64_t)TPR * VEC, store);
    }
}

// A block's result a combined over the cluster's CL blocks in rank order: the writers store it at
// cta_part[i], read there by the others; every thread of every block calls it and gets the cluster's result.
// The caller syncs the cluster before cta_part is written again.
template <int CL>
__device__ __forceinline__ float cluster_combine(int combine, float a, float *cta_part, bool writer = threadIdx.x == 0,
                                                 int i = 0) {
    if constexpr (CL > 1) {
        if (writer) cta_part[i] = a;
        tst::cluster_sync();  // every block's partial is in its shared memory
        a = tst::cluster_load(cta_part, 0, i);
#pragma unroll
        for (int r = 1; r < CL; r++) a = combine2(combine, a, tst::cluster_load(cta_part, r, i));
    }
    return a;
}

// A block's result a combined over the PARTS blocks of its row in a cooperative grid (launch_row_grid): thread 0
// stores it at scratch[blockIdx.x] (a region of the grid's size per stage, so that no stage's partials overwrite
// another's while they are read), the grid meets at a barrier, then the first warp folds the row's partials,
// a lane every 32nd in rank order and the lanes by a butterfly (deterministic), and hands the result to the block
// through `out` (a shared slot of this stage's own). Every thread of every block calls it and gets the row's result.
__device__ __forceinline__ float grid_combine(int combine, float a, float *scratch, int parts, float *out) {
    if (threadIdx.x == 0) scratch[blockIdx.x] = a;
#if TSW_ROW_GRID
    cooperative_groups::this_grid().sync();  // every block's partial is in the scratch (and visible: a grid fence)
#else
    __trap();  // never launched: launch_row_passes takes no grid in such a build
#endif
    if (threadIdx.x < 32) {
        const float *row = scratch + (blockIdx.x / parts) * parts;
        float v = identity(combine);
        for (int r = threadIdx.x; r < parts; r += 32) v = combine2(combine, v, __ldcg(row + r));
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v = combine2(combine, v, __shfl_xor_sync(0xffffffffu, v, o));
        if (threadIdx.x == 0) *out = v;
    }
    __syncthreads();
    return *out;
}

// A block is kThreads threads, or TPR (up to kWideThreads) where a row takes more. MINB: blocks per SM the
// register allocation must allow (__launch_bounds__'s second argument); CL > 1: a row a cluster of CL blocks
// (TPR = kThreads, ITEMS > 0; the grid's x a multiple of CL); GRID: a row p.grid_parts blocks of a cooperative
// grid of exactly rows × p.grid_parts (TPR = the block, ITEMS = 0, CL = 1), meeting at grid barriers (none where
// grid_parts is 1: a block a row, launched as plain stream work).
template <class Fn, int TPR, int ITEMS, int MINB = kBlockMinBlocks<TPR>, int CL = 1, bool GRID = false>
__global__ void __launch_bounds__(kBlockThreads<TPR>, MINB) row_kernel(const RowParams<Fn> p) {
    constexpr int NS = Fn::kStages, BLOCK = kBlockThreads<TPR>, GROUPS = BLOCK / TPR;
    static_assert(NS >= 1 && NS <= 4, "a ROW kernel has 1 to 4 stages");
    static_assert(BLOCK % TPR == 0 && BLOCK <= kWideThreads && (TPR % 32 == 0 || 32 % TPR == 0),
                  "a row's group is whole warps of one block, or an aligned part of one warp");
    static_assert(CL == 1 || (CL <= 8 && (ITEMS > 0 ? TPR == kThreads : TPR == BLOCK)),
                  "a cluster splits a row, a block a share (cached by 256 threads, or passes by a whole block)");
    static_assert(!GRID || (CL == 1 && ITEMS == 0 && TPR == BLOCK), "a grid's row: blocks taking their shares in passes");
    __shared__ float slots[NS][BLOCK / 32];
    __shared__ float cta_part[NS];  // CL > 1: this block's result of each stage, read by the cluster; GRID: the row's
                                    // result of each stage (grid_combine's)
    const int parts = GRID ? p.grid_parts : CL;
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();
    const int lane = threadIdx.x % TPR, rank = GRID || CL > 1 ? (int)(blockIdx.x % parts) : 0;
    const int64_t first = (int64_t)(blockIdx.x / parts) * GROUPS, step = (int64_t)(gridDim.x / parts) * GROUPS;
    // this block's result of stage j combined over the blocks sharing its row (none where a block has it whole)
    const auto meet = [&](int combine, float a, int j) {
        if constexpr (GRID)
            return parts == 1 ? a : grid_combine(combine, a, p.grid_scratch + (int64_t)j * gridDim.x, parts, &cta_part[j]);
        else return cluster_combine<CL>(combine, a, &cta_part[j]);
    };
    for (int64_t r0 = first; r0 < p.rows; r0 += step) {
        const int64_t row = r0 + threadIdx.x / TPR;
        const bool live = row < p.rows;  // every thread takes part in the group reductions
        typename Fn::Base b;
        RowCache<Fn, ITEMS> x;
        if (live) bind_row(p, row, b);
        const RowShare<Fn> share(p.len, rank, parts, live ? row_head(p.fn, b, p.len) : 0);
        if (live && ITEMS > 0) load_row<Fn, TPR, ITEMS>(p, b, lane, share, x);
        float acc[NS] = {};
        // stages reading no other's result, folded into an uncached row's first pass (kJoinFirst)
        constexpr unsigned JOIN = ITEMS == 0 ? JoinFirstOf<Fn>::value : 0u;
        static_assert((JOIN & 1u) == 0 && JOIN < (1u << NS), "kJoinFirst: stages after the first");
        JoinedParts<Fn, JOIN> joined;
        const auto join = [&](int64_t k0, int n, const float (&v)[Fn::kIn][Fn::kVec]) { joined.fold(p.fn, b, k0, n, v, acc); };
        const auto alone = [](int64_t, int, const float (&)[Fn::kIn][Fn::kVec]) {};
#pragma unroll
        for (int j = 0; j < NS; j++) {
            if constexpr (ITEMS == 0 && OnlineStage<Fn>::value >= 0) {  // stage j + 1 folded into j's pass
                constexpr int J = OnlineStage<Fn>::value;
                static_assert(J + 1 < NS, "kOnline: a maximum followed by a sum");
                static_assert((JOIN >> J & 3u) == 0, "kJoinFirst: not the online pair");
                if (j == J + 1) continue;
                if (j == J) {
                    float m = -INFINITY, s = 0.f;
                    if (live) {
                        if constexpr (J == 0) online_part<Fn, TPR>(p, J, b, lane, share, acc, m, s, join);
                        else online_part<Fn, TPR>(p, J, b, lane, share, acc, m, s, alone);
                    }
                    acc[J] = meet(kMax, group_reduce<TPR>(m, kMax, slots[J]), J);
                    s = s != 0.f ? p.fn.merge(s, m, acc[J]) : 0.f;
                    acc[J + 1] = meet(kSum, group_reduce<TPR>(s, kSum, slots[J + 1]), J + 1);
                    continue;
                }
            }
            if (JOIN >> j & 1u) {  // folded in the first pass: only its group reduction is left
                acc[j] = meet(Fn::combine(j),
                              group_reduce<TPR>(live ? joined.part[j] : identity(Fn::combine(j)), Fn::combine(j), slots[j]),
                              j);
                continue;
            }
            const float part = !live ? identity(Fn::combine(j))
                               : j == 0 ? stage_part<Fn, TPR, ITEMS>(p, j, b, lane, share, x, acc, join)
                                        : stage_part<Fn, TPR, ITEMS>(p, j, b, lane, share, x, acc, alone);
            acc[j] = meet(Fn::combine(j), group_reduce<TPR>(part, Fn::combine(j), slots[j]), j);
        }
        if constexpr (Fn::kPerRow) {
            if (live && lane == 0 && rank == 0) {
                const float unused[Fn::kIn][Fn::kVec] = {};
                p.fn.store(b, 0, 1, unused, acc);
            }
        } else if (live) {
            if constexpr (Fn::kPerRowOuts)
                if (lane == 0 && rank == 0) p.fn.store_per_row(b, acc);
            store_row<Fn, TPR, ITEMS>(p, b, lane, share, x, acc);
        }
        if constexpr (CL > 1) tst::cluster_sync();  // no block leaves (or rewrites cta_part) while others read it
        else if constexpr (TPR > 32) __syncthreads();  // slots are reused by the next row
    }
}

// ---- what both launchers share -----------------------------------------------------------------------

// Fn::kLen where the functor declares its rows' length a constant (the emitter does where it is static), else 0.
template <class Fn, class = void> struct LenOf { static constexpr int64_t value = 0; };
template <class Fn> struct LenOf<Fn, std::void_t<decltype(Fn::kLen)>> { static constexpr int64_t value = Fn::kLen; };

constexpr int64_t kNoSpans = (int64_t)1 << 62;  // above any row's spans

// Whether rows of the functor's length (any, where it declares none) may have more than lo and at most hi spans:
// launch_row compiles only the launches such rows can take (a header's row kernels are each instantiated once,
// not for every group size).
template <class Fn> constexpr bool row_spans_in(int64_t lo, int64_t hi) {
    constexpr int64_t len = LenOf<Fn>::value, spans = (len + Fn::kVec - 1) / Fn::kVec;
    return len == 0 || (spans > lo && spans <= hi);
}

// Whether p's row description is one the kernels accept (its row count may be 0: nothing is launched): a row
// length the functor's kLen, where it declares one.
template <class Fn> inline bool row_params_ok(const RowParams<Fn> &p) {
    return p.nrowdim >= 0 && p.nrowdim <= kMaxDims && p.len >= 1 && p.len <= ((int64_t)1 << 40) &&
           (LenOf<Fn>::value == 0 || p.len == LenOf<Fn>::value);
}

// A grid of `blocks` blocks, capped at 2^30 (the kernels stride over the rows past it).
inline unsigned row_grid(int64_t blocks) {
    constexpr int64_t kMaxBlocks = (int64_t)1 << 30;
    return (unsigned)(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

// ---- rows along a strided axis (columns) ---------------------------------------------------------------
// When the row axis is not the contiguous one (statistics down the columns of [b, f] over b: BatchNorm's),
// a group per row would read one element per memory sector. Here neighbouring threads take neighbouring
// rows instead (the innermost of the other axes, contiguous in memory): a block is COLS rows × SPLIT
// threads along each, thread t on row r0 + t % COLS, positions from span t / COLS on, SPLIT spans apart, so
// that a warp's loads of one position are COLS consecutive elements (16 on Hopper: a whole 32-byte sector
// of fp16). On sm_90+ the positions of a group of rows are split over the CL CTAs of a cluster (CL = 1, 2,
// 4 or 8, the fewest that give two CTAs an SM), so that a [4096, 2048] GEMM output (128 groups of 16
// columns) fills every SM: each CTA folds its share of the positions, the partials meet in shared memory,
// then across the cluster through distributed shared memory, combined in rank order by every CTA (all get
// the same result; deterministic); then each CTA writes the outputs of its positions. Each stage is a pass
// over the CTA's positions (re-read through L2), two spans a step so that a thread has 2·kVec loads in
// flight; a whole span (every one but a row's last) reaches the functor with its length a constant, so that
// the inlined gathers have no per-element bounds checks (the kernel is instruction-bound: ncu, run 115).
// Measured (bench/NOTES.md): 8-column blocks without clusters 12-40% of DRAM bandwidth (run 38); this form,
// gemm_batchnorm's column kernel ~0.8 of the DRAM rate with its input in L2, 1.1-1.3 TB/s from DRAM (runs
// 113, 115).
constexpr int kColumnThreads = 512;
constexpr int kColumnMaxCluster = 8;  // the portable cluster size

// The block's partials of one stage (part_of[split][col]) combined over its SPLIT threads, then over the
// cluster's CL CTAs in rank order (cta_part: this CTA's, read by the others); every thread of every CTA
// calls it and gets its row's result.
template <int COLS, int SPLIT, int CL>
__device__ __forceinline__ float column_combine(int combine, float (&part_of)[SPLIT][COLS], float *cta_part, int col) {
    __syncthreads();
    float a = part_of[0][col];
#pragma unroll 4
    for (int s = 1; s < SPLIT; s++) a = combine2(combine, a, part_of[s][col]);
    a = cluster_combine<CL>(combine, a, cta_part, threadIdx.x < COLS, col);
    __syncthreads();  // part_of is reused by the next stage
    return a;
}

// chunk: positions a CTA of the cluster takes (the whole row when CL = 1).
template <class Fn, int COLS, int CL, int DEPTH>
__global__ void __launch_bounds__(kColumnThreads, 2) row_columns_kernel(const RowParams<Fn> p, const int64_t chunk) {
    constexpr int NS = Fn::kStages, SPLIT = kColumnThreads / COLS, VEC = Fn::kVec;
    constexpr int64_t STEP = (int64_t)SPLIT * VEC;  // positions between a thread's spans
    static_assert(NS >= 1 && NS <= 4, "a ROW kernel has 1 to 4 stages");
    static_assert(kColumnThreads % COLS == 0, "a block is COLS rows by SPLIT threads");
    static_assert(CL >= 1 && CL <= kColumnMaxCluster, "a cluster of 1 to 8 CTAs");
    __shared__ float part_of[SPLIT][COLS];
    __shared__ float cta_part[NS][COLS];  // this CTA's partial of each stage, read by the cluster
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();
    const int col = threadIdx.x % COLS, split = threadIdx.x / COLS;
    const int rank = CL > 1 ? (int)(blockIdx.x % CL) : 0;
    const int64_t begin = (int64_t)rank * chunk, end = begin + chunk < p.len ? begin + chunk : p.len;
    const int64_t first = begin + (int64_t)split * VEC, groups = gridDim.x / CL;
    for (int64_t r0 = (int64_t)(blockIdx.x / CL) * COLS; r0 < p.rows; r0 += groups * COLS) {
        const int64_t row = r0 + col;
        const bool live = row < p.rows;
        typename Fn::Base b;
        if (live) bind_row(p, row, b);
        float acc[NS];
#pragma unroll
        for (int j = 0; j < NS; j++) {
            float part = identity(Fn::combine(j));
            if (live)
                span_pass<DEPTH>(p, b, first, end, STEP, [&](int64_t k0, int n, const float (&v)[Fn::kIn][VEC]) {
                    part = fold_span(p.fn, j, b, k0, n, v, acc, part);
                });
            part_of[split][col] = part;
            acc[j] = column_combine<COLS, SPLIT, CL>(Fn::combine(j), part_of, cta_part[j], col);
        }
        if constexpr (Fn::kPerRow) {
            if (live && split == 0 && rank == 0) {
                const float unused[Fn::kIn][VEC] = {};
                p.fn.store(b, 0, 1, unused, acc);
            }
        } else if (live) {
            if constexpr (Fn::kPerRowOuts)
                if (split == 0 && rank == 0) p.fn.store_per_row(b, acc);
            span_pass<DEPTH>(p, b, first, end, STEP, [&](int64_t k0, int n, const float (&v)[Fn::kIn][VEC]) {
                p.fn.store(b, k0, n, v, acc);
            });
        }
        if constexpr (CL > 1) tst::cluster_sync();  // no CTA leaves (or reuses cta_part) while others read it
    }
}

template <class Fn, int COLS, int CL, int DEPTH = 2> cudaError_t launch_row_columns_as(const RowParams<Fn> &p, cudaStream_t stream) {
    constexpr int64_t kMaxGroups = ((int64_t)1 << 30) / CL;  // the kernel strides over the groups past it
    const int64_t groups = (p.rows + COLS - 1) / COLS;
    int64_t chunk = (p.len + CL - 1) / CL;
    chunk = (chunk + Fn::kVec - 1) / Fn::kVec * Fn::kVec;
    const unsigned grid = (unsigned)((groups < kMaxGroups ? groups : kMaxGroups) * CL);
    return tst::launch(row_columns_kernel<Fn, COLS, CL, DEPTH>, dim3(grid), dim3(kColumnThreads), 0, stream, CL, p, chunk);
}

// The cluster size for g groups of rows of len positions (SPLIT threads along each, kVec positions a span):
// the fewest CTAs a group, 1 to 8, that give the SMs 90% of two CTAs each, while every thread keeps at least
// two spans of positions. The cost model (src/costmodel.c, ROW down columns) mirrors this choice.
inline int row_columns_cluster(int64_t g, int64_t len, int split, int vec, int sm_count) {
    const int64_t want = (int64_t)(1.8 * (sm_count > 0 ? sm_count : 1));
    int cl = 1;
    while (cl < kColumnMaxCluster && g * cl < want && len >= (int64_t)cl * 2 * 2 * split * vec) cl *= 2;
    return cl;
}

// Rows along a strided axis: 32 neighbouring rows a block where that gives every SM two blocks; else 16 (on
// sm_90+ with the positions split over a cluster: row_columns_cluster), else (before Hopper) 16 or 8 rows,
// so that more threads share each row.
// Threads a column takes where its rows are short: the fewest (1, 2, 4 or 8) that cover a row's spans, or 0 for
// rows of more than 8 spans (the ladder below, 16 or 32 threads a column).
constexpr int short_column_split(int64_t spans) {
    return spans <= 1 ? 1 : spans <= 2 ? 2 : spans <= 4 ? 4 : spans <= 8 ? 8 : 0;
}

// Rows of at most this many spans take one thread a column wherever the columns give every SM a CTA of
// kColumnThreads of them. Up to 32 spans it was the fastest launch of the kernel alone (run 165), but rows of 32
// spans (a bilinear layer's 256 positions down 262144 columns of a GEMM's output) made their graph 45 us slower
// than the ladder there, ~67 us over its kernels' own times and launches: left to the ladder until that is
// understood (bench/NOTES.md run 165).
inline constexpr int64_t kShortColumnSpans = 8;

// Columns a block takes where each row is short (a sum over 8 experts or 12 heads down millions of columns):
// kColumnThreads, a thread a column folding all its positions, where a row is at most kShortColumnSpans spans and
// the columns give every SM such a CTA; else, for rows of at most 8 spans, kColumnThreads / short_column_split
// where those columns give every SM a CTA; else 0 (the ladder below). One thread a column was the fastest launch of
// every shape timed (run 165, H100, row_test colshort: 12 × 3.1M columns 79 us against 103 at two threads a
// column, an einsum's sum over heads 0.177 → 0.152 ms; 256 × 262144 70 against 107 on the ladder's 32 columns a
// block): a column's fixed work (its indices, the combine of its threads' parts, its store) is paid once. The
// ladder's 16 threads a column there would leave all but one or two idle: 8 positions × 1M columns took 0.225 ms
// on an H100 with 16 threads a column, against 0.012 predicted at the DRAM rate (bench/NOTES.md run 163).
template <class Fn> constexpr int short_column_cols(int64_t rows, int64_t len, int sm_count) {
    const int64_t spans = (len + Fn::kVec - 1) / Fn::kVec, sms = sm_count > 0 ? sm_count : 1;
    if (spans <= kShortColumnSpans && rows >= (int64_t)kColumnThreads * sms) return kColumnThreads;
    const int split = short_column_split(spans);
    return split > 0 && rows >= (int64_t)(kColumnThreads / split) * sms ? kColumnThreads / split : 0;
}

// Whether launch_row_columns compiles the short-row launch of `split` threads a column: where the rows' static
// length takes it, or any where the length is a run-time size.
template <class Fn> constexpr bool short_columns_compiled(int split) {
    constexpr int64_t len = LenOf<Fn>::value, spans = (len + Fn::kVec - 1) / Fn::kVec;
    return len == 0 || short_column_split(spans) == split || (split == 1 && spans <= kShortColumnSpans);
}

template <class Fn> cudaError_t launch_row_columns(const RowParams<Fn> &p, int sm_count, cudaStream_t stream) {
    if (p.rows == 0) return cudaSuccess;
    if (!row_params_ok(p)) return cudaErrorInvalidValue;
    switch (short_column_cols<Fn>(p.rows, p.len, sm_count)) {
    case kColumnThreads:
        if constexpr (short_columns_compiled<Fn>(1)) return launch_row_columns_as<Fn, kColumnThreads, 1>(p, stream);
        break;
    case kColumnThreads / 2:
        if constexpr (short_columns_compiled<Fn>(2)) return launch_row_columns_as<Fn, kColumnThreads / 2, 1>(p, stream);
        break;
    case kColumnThreads / 4:
        if constexpr (short_columns_compiled<Fn>(4)) return launch_row_columns_as<Fn, kColumnThreads / 4, 1>(p, stream);
        break;
    case kColumnThreads / 8:
        if constexpr (short_columns_compiled<Fn>(8)) return launch_row_columns_as<Fn, kColumnThreads / 8, 1>(p, stream);
        break;
    default: break;
    }
    const int64_t blocks = 2 * (int64_t)(sm_count > 0 ? sm_count : 1);
    if (p.rows >= 32 * blocks) return launch_row_columns_as<Fn, 32, 1>(p, stream);
    tst::DeviceFacts f;
    cudaError_t e = tst::device_facts(&f);
    if (e != cudaSuccess) return e;
    if (f.cc_major >= 9) {
        switch (row_columns_cluster((p.rows + 15) / 16, p.len, kColumnThreads / 16, Fn::kVec, sm_count)) {
        case 1: return launch_row_columns_as<Fn, 16, 1>(p, stream);
        case 2: return launch_row_columns_as<Fn, 16, 2>(p, stream);
        case 4: return launch_row_columns_as<Fn, 16, 4>(p, stream);
        default: return launch_row_columns_as<Fn, 16, 8>(p, stream);
        }
    }
    if (p.rows >= 16 * blocks) return launch_row_columns_as<Fn, 16, 1>(p, stream);
    return launch_row_columns_as<Fn, 8, 1>(p, stream);
}

// ---- launch ----------------------------------------------------------------------------------------

template <class Fn, int TPR, int ITEMS, int MINB = kBlockMinBlocks<TPR>>
cudaError_t launch_row_as(const RowParams<Fn> &p, cudaStream_t stream) {
    constexpr int BLOCK = kBlockThreads<TPR>, GROUPS = BLOCK / TPR;
    return tst::launch(row_kernel<Fn, TPR, ITEMS, MINB>, row_grid((p.rows + GROUPS - 1) / GROUPS), dim3(BLOCK), 0, stream,
                       1, p);
}

// A row a cluster of CL blocks of TPR threads, each taking its share: caching ITEMS spans a thread of it, or in
// passes (ITEMS 0).
template <class Fn, int TPR, int ITEMS, int MINB, int CL>
cudaError_t launch_row_cluster_as(const RowParams<Fn> &p, cudaStream_t stream) {
    constexpr int64_t kMaxRows = ((int64_t)1 << 30) / CL;  // the kernel strides over the rows past it
    const unsigned grid = (unsigned)((p.rows < kMaxRows ? p.rows : kMaxRows) * CL);
    return tst::launch(row_kernel<Fn, TPR, ITEMS, MINB, CL>, dim3(grid), dim3(TPR), 0, stream, CL, p);
}

// launch_row_cluster_as for a cluster size cl known at run time (2, 4 or 8).
template <class Fn, int TPR, int ITEMS, int MINB>
cudaError_t launch_row_cluster_of(const RowParams<Fn> &p, int cl, cudaStream_t stream) {
    if (cl == 2) return launch_row_cluster_as<Fn, TPR, ITEMS, MINB, 2>(p, stream);
    if (cl == 4) return launch_row_cluster_as<Fn, TPR, ITEMS, MINB, 4>(p, stream);
    return launch_row_cluster_as<Fn, TPR, ITEMS, MINB, 8>(p, stream);
}

// The cluster of blocks a row takes on sm_90+ when each row needs a whole block and there are fewer rows
// than SMs (a decode step's vocabulary, a small batch of long rows), or, with launch_row's `split`, more rows
// each longer than the widest block caches: the fewest blocks a row, 2 to 8, that give every SM a block and cache the
// row (block_spans spans each); 1 (no cluster) otherwise. Without `split`, many long rows take passes through
// L2: which of the two is faster varies (bench/NOTES.md run 152), so tune times both (src/config.c, the
// variant row_split, which mirrors this choice).
inline int row_cluster(int64_t rows, int64_t spans, int64_t block_spans, int sm_count) {
    int cl = 1;
    while (cl < 8 && (rows * cl < sm_count || spans > cl * block_spans)) cl *= 2;
    return cl > 1 && spans <= cl * block_spans ? cl : 1;
}

// Spans a thread of a cluster's block caches (up to 8).
template <class Fn>
constexpr int kClusterItems = kCacheSpans<Fn> >= 8 ? 8 : kCacheSpans<Fn> >= 4 ? 4 : kCacheSpans<Fn> >= 2 ? 2 : kCacheSpans<Fn>;

// Each row over a cluster of 256-thread blocks (row_cluster's size, kClusterItems spans a thread cached) on
// sm_90+; *launched false (nothing launched) where no cluster of 2-8 caches it or the GPU has none.
template <class Fn> cudaError_t launch_row_clusters(const RowParams<Fn> &p, int sm_count, cudaStream_t stream, bool *launched) {
    constexpr int IC = kClusterItems<Fn>;
    *launched = false;
    if constexpr (IC >= 1) {
        const int cl = row_cluster(p.rows, (p.len + Fn::kVec - 1) / Fn::kVec, (int64_t)kThreads * IC, sm_count);
        tst::DeviceFacts f;
        const cudaError_t e = cl > 1 ? tst::device_facts(&f) : cudaSuccess;
        if (e != cudaSuccess || cl == 1 || f.cc_major < 9) return e;
        *launched = true;
        return launch_row_cluster_of<Fn, kThreads, IC, kMinBlocks>(p, cl, stream);
    }
    return cudaSuccess;
}

// At most half as many rows as SMs, each longer than a cluster caches (a LayerNorm over [c, h, w] of a small batch:
// 16 rows of 4M; a sum of one long vector): each row over a cluster of CL 1024-thread blocks, each taking its share
// of the row in passes (a pass a stage, one for the outputs), the blocks' partials of each stage combined through
// distributed shared memory — rows × CL SMs stream, where a 256-thread block a row left all but `rows` SMs idle.
// CL: the largest, 2 to 8, whose rows × CL blocks still fit one wave; 1 from SMs / 2 rows on, where a second block a
// row only adds a second, partial wave. Measured (bench/NOTES.md run 168, row_test, H100): 16 rows of 1M 6.9-9.9x
// faster, one row of 4M 20-25x; 100 rows of 200003 (clusters of 2 in 1.5 waves) from 0.70x (residual + RMSNorm) to
// 1.9x (a row's mean), so such rows keep a block each.
inline int row_pass_cluster(int64_t rows, int sm_count) {
    int cl = 1;
    while (cl < 8 && rows * cl * 2 <= sm_count) cl *= 2;
    return cl;
}

// Blocks a row takes in a cooperative grid (launch_row_grid) of `resident` blocks at once: as many as fill it, at
// most as many as the scratch holds partials for (ns stages) and as leave each block two spans a thread at least.
inline int row_grid_parts(int64_t rows, int64_t spans, int ns, int64_t scratch_floats, int64_t resident) {
    int64_t parts = resident / rows;
    const int64_t room = scratch_floats / (ns * rows), work = spans / (2 * kWideThreads);
    parts = parts < room ? parts : room;
    return (int)(parts < work ? parts : work);
}

// At most half as many rows as SMs, too long for a cluster's registers, where the caller gave a scratch buffer: each
// row over grid_parts 1024-thread blocks of a cooperative grid that fills every SM (row_grid_parts), each taking its
// share in passes, their partials of each stage meeting through the scratch at a grid barrier (grid_combine).
// Where clusters of 8 leave SMs idle (a whole tensor's sum: one row), every SM streams. *launched false (nothing
// launched) where fewer than 2 blocks a row would (or the GPU refuses a grid that large: clusters then).
template <class Fn> cudaError_t launch_row_grid(const RowParams<Fn> &p, int sm_count, cudaStream_t stream, bool *launched) {
    constexpr auto kernel = row_kernel<Fn, kWideThreads, 0, 1, 1, true>;
    static std::atomic<int> resident_cache[tst::kMaxDevices];  // blocks an SM holds, per device (0: not known yet)
    *launched = false;
    tst::DeviceFacts f;
    cudaError_t e = tst::device_facts(&f);
    if (e != cudaSuccess) return e;
    const int dev = f.dev;
    int per_sm = 0;
    if (dev >= 0 && dev < tst::kMaxDevices) per_sm = resident_cache[dev].load(std::memory_order_relaxed);
    if (per_sm == 0) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWideThreads, 0);
        if (e != cudaSuccess) return e;
        if (dev >= 0 && dev < tst::kMaxDevices && per_sm > 0) resident_cache[dev].store(per_sm, std::memory_order_relaxed);
    }
    const int parts = row_grid_parts(p.rows, (p.len + Fn::kVec - 1) / Fn::kVec, Fn::kStages, p.grid_scratch_floats,
                                     (int64_t)per_sm * sm_count);
    if (parts < 2) return cudaSuccess;
    RowParams<Fn> q = p;
    q.grid_parts = parts;
    e = tst::launch(kernel, dim3((unsigned)(p.rows * parts)), dim3(kWideThreads), 0, stream, tst::kCooperative, q);
    if (e == cudaErrorCooperativeLaunchTooLarge) return (void)cudaGetLastError(), cudaSuccess;
    *launched = true;
    return e;
}

// launch_row's passes over uncached rows: at most half as many rows as SMs over a cooperative grid where the caller
// gave a scratch buffer (launch_row_grid), else over clusters (row_pass_cluster) on sm_90+; otherwise up to twice as
// many rows as SMs a 1024-thread block each (the grid's kernel, one block a row: no barrier), up to four times as
// many a 512-thread block each, more a 256-thread block each. Measured (bench/NOTES.md run 171, row_test passes,
// H200): over 128 rows of 262144 a 1024-thread block a row 2.3-2.8x faster than 256 threads (8 warps an SM), over
// 256 rows of 131072 and 264 of 65536 1.3-1.6x; over 400 rows of 65536 (LayerNorm) 512 threads 1.19x faster than 256.
template <class Fn> cudaError_t launch_row_passes(const RowParams<Fn> &p, int sm_count, cudaStream_t stream) {
    if (TSW_ROW_GRID && p.grid_scratch && p.rows * 2 <= sm_count) {
        bool launched;
        const cudaError_t e = launch_row_grid(p, sm_count, stream, &launched);
        if (e != cudaSuccess || launched) return e;
    }
    const int cl = row_pass_cluster(p.rows, sm_count);
    if (cl > 1) {
        tst::DeviceFacts f;
        const cudaError_t e = tst::device_facts(&f);
        if (e != cudaSuccess) return e;
        if (f.cc_major >= 9) return launch_row_cluster_of<Fn, kWideThreads, 0, 1>(p, cl, stream);
    }
    if (p.rows <= 2 * (int64_t)sm_count) {
        RowParams<Fn> q = p;
        q.grid_parts = 1;
        return tst::launch(row_kernel<Fn, kWideThreads, 0, 1, 1, true>, dim3((unsigned)p.rows), dim3(kWideThreads), 0,
                           stream, 1, q);
    }
    if (p.rows <= 4 * (int64_t)sm_count) return launch_row_as<Fn, 512, 0>(p, stream);
    return launch_row_as<Fn, 256, 0>(p, stream);
}

// The smallest group whose threads cache the row within kCacheFloats registers each (ITEMS spans a thread,
// 4 where that fits), so that no thread idles; 1 to 16 lanes (a lane a span) or a warp for short rows; rows a 256-thread
// block cannot cache a block of 512 or 1024 threads of their own (the same registers a thread, fewer blocks
// an SM); rows longer than that several passes (over clusters where at most half as many as SMs:
// launch_row_passes). Measured (bench/NOTES.md run 34, row_test sweep): a cache of at most 32 floats a thread and
// registers for 4 blocks an SM beat 64 floats at fewer blocks by 9-16% (residual + RMSNorm over 4096, RMSNorm over
// 1024). Fewer rows than SMs, each a block's, or with `split` rows longer
// than the widest block caches: split over a cluster (row_cluster). Returns the launch error.
template <class Fn> cudaError_t launch_row(const RowParams<Fn> &p, int sm_count, cudaStream_t stream, bool split = false) {
    if (p.rows == 0) return cudaSuccess;
    if (!row_params_ok(p)) return cudaErrorInvalidValue;
    constexpr int cap = kCacheSpans<Fn>;
    constexpr int64_t I = cap >= 4 ? 4 : cap >= 2 ? 2 : 1;  // spans a thread caches as the row's group
    constexpr bool wide = cap >= 1 && kUncachedPasses<Fn> > 1;  // a wider block a row: 2 or 1 an SM (run 153)
    constexpr int64_t cached = wide ? kWideThreads * I : cap >= 8 ? 256 * 8 : cap >= 1 ? 256 * I : 0;  // the longest
    const int64_t spans = (p.len + Fn::kVec - 1) / Fn::kVec;
    if constexpr (row_spans_in<Fn>(128 * I, kNoSpans))
        if (spans > 128 * I && (p.rows < sm_count || (split && spans > kWideThreads * I))) {
            bool launched;
            const cudaError_t e = launch_row_clusters(p, sm_count, stream, &launched);
            if (e != cudaSuccess || launched) return e;
        }
    // each case below compiled only where the functor's static length (kLen) may take it
#define TSW_ROW_CASE(lo, hi, TPR, ITEMS)                                          \
    if constexpr (row_spans_in<Fn>(lo, hi))                                       \
        if (spans <= (hi)) return launch_row_as<Fn, TPR, ITEMS>(p, stream);
    if constexpr (cap >= 1) {
        // a group norm's 16 channels: as many lanes as spans (8 lanes left 6 idle: 4.5x slower, bench/NOTES.md run 155)
        TSW_ROW_CASE(0, 1, 1, 1)
        TSW_ROW_CASE(1, 2, 2, 1)
        TSW_ROW_CASE(2, 4, 4, 1)
        TSW_ROW_CASE(4, 8, 8, 1)  // a group norm's 64 channels: not a warp
        TSW_ROW_CASE(8, 16, 16, 1)
        TSW_ROW_CASE(16, 32, 32, 1)
        TSW_ROW_CASE(32, 32 * I, 32, I)
        TSW_ROW_CASE(32 * I, 64 * I, 64, I)
        TSW_ROW_CASE(64 * I, 128 * I, 128, I)
        TSW_ROW_CASE(128 * I, 256 * I, 256, I)
    }
    if constexpr (cap >= 8) {
        TSW_ROW_CASE(256 * I, 256 * 8, 256, 8)
    }
    if constexpr (wide) {
        TSW_ROW_CASE(cap >= 8 ? 256 * 8 : 256 * I, 512 * I, 512, I)
        TSW_ROW_CASE(512 * I, kWideThreads * I, kWideThreads, I)
    }
#undef TSW_ROW_CASE
    if constexpr (row_spans_in<Fn>(cached, kNoSpans)) return launch_row_passes(p, sm_count, stream);
    return cudaErrorInvalidValue;  // unreachable: the cases above take every length (row_params_ok checks kLen)
}

}  // namespace tsw
