// gemm.cuh — the tensor-core GEMM template with a fused epilogue and a dual-B form (gated MLPs). Per
// batch b (grid z):
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B[k, n])                              (single)
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B0[k, n], Σ_k A[m, k]·B1[k, n])       (DUAL: one A tile, two B)
// fp16 or bf16 in, fp32 accumulate (mma.sync m16n8k16, sm_80+; the wgmma form is a later template). Any
// M, N, K. It is not a library GEMM: no alpha/beta. Namespace tsg; depends only on tile.cuh.
// Split-K (SPLIT > 1, Hopper and later: a decode-size GEMM with few column tiles streams its weight with
// SPLIT times as many CTAs): the SPLIT CTAs of a tile form a cluster, each multiplies a contiguous share of
// the K tiles, the others leave their fp32 accumulators in their shared memory, and rank 0 adds them through
// distributed shared memory and runs the epilogue — no workspace, the epilogue unchanged (row statistics
// of A, below, are merged the same way: each rank folds its share of k). On an older GPU the launch runs
// SPLIT = 1.
//
// Operands (element strides, int64):
//   A  (M, K), K contiguous:  A + b*a_batch_stride + m*lda + k
//      A_KM=true: (K, M), M contiguous (Aᵀ stored, a weight gradient's Xᵀ):  A + b*a_batch_stride + k*lda + m
//      (BM a multiple of 64; no second pair, no row statistics)
//   B  B_KN=true : (K, N), N contiguous, a weight [d, n]:  B + b*b_batch_stride + k*ldb + n
//      B_KN=false: (N, K), K contiguous, like K in Q·Kᵀ:   B + b*b_batch_stride + n*ldb + k
//   B1 (DUAL) has B0's layout, shape, ldb and batch stride.
//
// The kernel, per block: a grouped tile order for L2 reuse → STAGES-deep cp.async pipeline of swizzled
// shared-memory tiles (A: BM×BK, or BK×BM for A_KM; B: BK×BN) → ldmatrix (.trans for B_KN and A_KM) → mma →
// epilogue from registers.
// The launch helper picks the 16-byte cp.async loader when every pointer is 16-byte aligned and every
// leading dimension and batch stride is a multiple of 8 elements (edges in M, N and K are then handled by
// zero-filling cp.async); else the 4-byte cp.async loader when they are 4-byte aligned and even (a K of 2500:
// still asynchronous and pipelined, four copies a 16-byte chunk); otherwise an element-wise loader (correct
// for any layout, synchronous: bench/NOTES.md run 117 measured it 10x slower than the pipelined loaders).
//
// ---- Epilogue interface (the emitter generates functors of this shape) ----------------------------
//   struct Ep {
//       // fields: the output pointer, its ldc and batch stride, n (the output's column count) and any
//       // operands (row scales, residual); the functor is passed by value in the kernel parameters.
//       template <typename T>   // T: the GEMM's input element type (__half or __nv_bfloat16)
//       __device__ void apply(int batch, int row, int col, float v0, float v1) const;                 // single
//       template <typename T>
//       __device__ void apply(int batch, int row, int col, float v0, float v1, float w0, float w1) const; // DUAL
//   };
// The kernel calls apply once per pair of adjacent output columns it owns, from every thread, with
//   0 ≤ row < M, 0 ≤ col < N, col even; v0, v1 = acc[row, col], acc[row, col+1] (w: the B1 accumulators).
// Column col+1 may be past the edge: the FUNCTOR checks `col + 1 < n` itself (v1/w1 are 0 there) and must
// not write it. Each output element is visited exactly once; no two threads visit the same pair.
// Optionally, a functor whose value reads memory comes in two phases as well (single form):
//       struct In { ... };                                   // the operands of one pair
//       __device__ In load(int batch, int row, int col) const;
//       template <typename T>
//       __device__ void apply_loaded(int batch, int row, int col, const In &in, float v0, float v1) const;
// with apply(b, row, col, v0, v1) ≡ apply_loaded(b, row, col, load(b, row, col), v0, v1); a kernel may then
// load several pairs before storing any (gemm_sm90.cuh's staged epilogue), so `load` must not read what
// apply_loaded of another pair writes.
// Optionally, with the two-phase form, loads by pairs (an operand whose two elements sit side by side):
//       __device__ bool pair_ok() const;                     // the pair loads are aligned (the same on every thread)
//       __device__ In load_pair(int batch, int row, int col) const;   // load's result where col + 1 < n, pair_ok()
// gemm_sm90.cuh's packed epilogue, on whole tiles, calls load_pair where pair_ok() (one test a tile, instead of
// a branch beside each load: a load inside a branch exposes its latency where the branches meet).
// Optionally, with the two-phase form, a functor whose load reads nothing that varies along the rows (a bias [n]):
//       static constexpr bool kLoadByColumn = true;   // load(batch, row, col) is the same for every row
// gemm_sm90.cuh's packed epilogue then loads a column pair's operands once for all the rows a thread holds.
// Optionally, with the two-phase form, the lines its load(batch, row, col) reads from operands that differ along
// both rows and columns (a residual; not a bias [n] or a row scale [m], which L1 holds) asked into L2 ahead:
//       static constexpr int kPrefetchStep;                                // columns a 128-byte line holds
//       __device__ void prefetch(int batch, int row, int col) const;       // 0 ≤ row < M, 0 ≤ col < N
// gemm_sm90.cuh calls it near the end of each tile's main loop for every kPrefetchStep-th column of the
// tile's rows, so that the epilogue's loads hit L2 rather than DRAM (bench/NOTES.md runs 127-128: a residual
// read in a one-wave GEMM's epilogue cost 6-8 us over the bias alone).
// Optionally, the value form — the functor computes, the kernel stores (gemm_sm90.cuh then converts a tile's
// outputs in registers, parks them in shared memory as TOut and stores whole 16-byte row segments, where the
// pair-by-pair stores of apply cost more instructions than the rest of the epilogue):
//       __device__ TOut *row_ptr(int batch, int row) const;   // where output row (batch, row) starts
//       __device__ float2 value(int batch, int row, int col, float v0, float v1) const;    // (+ w0, w1: DUAL)
//       __device__ float2 value_loaded(int batch, int row, int col, const In &in, float v0, float v1) const; // two-phase
// with apply(...) ≡ store2(row_ptr(b, row) + col, value(...), col + 1 < n): one output, columns contiguous;
// value is called for both columns of the pair whether or not col + 1 < n.
// Optionally, statistics of A's rows (prologue fusion: an RMSNorm's Σ_k x² computed while the kernel reads
// A for the contraction anyway, instead of by a kernel of its own):
//       static constexpr int kRowStats = S;     // 1..4 reductions over k of a term of one element A[m, k]
//       static constexpr int kRowOuts = O;      // 1..4 values per row, from the S results
//       static constexpr bool row_max(int j);   // reduction j is a maximum (else a sum)
//       __device__ float row_term(int j, float a) const;                       // a = A[m, k] (k < K only)
//       __device__ void row_finish(const float (&s)[S], float (&o)[O]) const;  // once per row
// and then apply, apply_loaded, value and value_loaded take this row's O values as a last parameter `const float *rs`. Both
// kernels fold them from the shared-memory A tiles of their main loop (RowFold below): no extra read of A.
// Instead of storing C, a functor may reduce each row of C (epilogue fusion: the log-sum-exp, maximum or sum of
// a product's rows — a per-row reduction over N that would otherwise read C back). S reductions in order; each
// tile of a row reduces its columns (the tile's results, `part`), then the tiles' results meet:
//       static constexpr int kRowParts = S;      // 1..4
//       static constexpr bool part_max(int j);   // reduction j is a maximum (else a sum)
//       __device__ float pre(int batch, int row, int col, float acc) const;     // the value v = C[row, col]
//       __device__ float part_term(int j, float v, const float *part) const;    // part[0..j): this tile's results
//       __device__ float merge_term(int j, const float *part, const float *whole) const;
//                   // a tile's share of reduction j over the whole row, from its S results and the whole row's
//                   // results whole[0..j) (a sum of exp(v − max): part[j]·exp(part[k] − whole[k]))
//       __device__ void row_out(int batch, int row, const float *whole) const;  // writes the row's outputs
// gemm_sm90.cuh's kernel writes each tile's results to GemmParams::rows_scratch and a second kernel merges each
// row's (row_parts_merge_kernel; launch_gemm_row_parts below, without wgmma: a warp a row over C stored in the
// scratch).
#pragma once
#include <type_traits>

#include "tile.cuh"

namespace tsg {

// Whether epilogue functor E has the two-phase form (a nested In, load, apply_loaded).
template <class E, class = void> struct TwoPhaseEpilogue : std::false_type {};
template <class E> struct TwoPhaseEpilogue<E, std::void_t<typename E::In>> : std::true_type {};
template <class E> constexpr bool kTwoPhaseEpilogue = TwoPhaseEpilogue<E>::value;

// Whether E loads by pairs (pair_ok, load_pair).
template <class E, class = void> struct PairLoads : std::false_type {};
template <class E> struct PairLoads<E, std::void_t<decltype(&E::load_pair)>> : std::true_type {};
template <class E> constexpr bool kPairLoads = PairLoads<E>::value;

// Whether E's load(batch, row, col) is the same for every row (kLoadByColumn).
template <class E, class = void> struct LoadByColumn : std::false_type {};
template <class E> struct LoadByColumn<E, std::void_t<decltype(E::kLoadByColumn)>> : std::bool_constant<E::kLoadByColumn> {};
template <class E> constexpr bool kLoadByColumn = LoadByColumn<E>::value;

// Whether E asks its residual operands' lines into L2 ahead of the epilogue (prefetch, kPrefetchStep).
template <class E, class = void> struct PrefetchEpilogue : std::false_type {};
template <class E> struct PrefetchEpilogue<E, std::void_t<decltype(E::kPrefetchStep)>> : std::true_type {};
template <class E> constexpr bool kPrefetchEpilogue = PrefetchEpilogue<E>::value;

// Whether E has the value form (row_ptr, value or value_loaded), and the element type of its output.
template <class E, class = void> struct ValueEpilogue : std::false_type {};
template <class E> struct ValueEpilogue<E, std::void_t<decltype(&E::row_ptr)>> : std::true_type {};
template <class E> constexpr bool kValueEpilogue = ValueEpilogue<E>::value;
template <class E> using EpilogueOut = std::remove_pointer_t<decltype(std::declval<const E &>().row_ptr(0, 0))>;

// Row statistics of A an epilogue functor asks for (S reductions, O values per row; 0 and 0: none).
template <class E, class = void> struct RowStatsOf {
    static constexpr int S = 0, O = 0;
};
template <class E> struct RowStatsOf<E, std::void_t<decltype(E::kRowStats)>> {
    static constexpr int S = E::kRowStats, O = E::kRowOuts;
    static_assert(S >= 1 && S <= 4 && O >= 1 && O <= 4, "kRowStats and kRowOuts must be 1..4");
};
template <class E> constexpr int kRowStats = RowStatsOf<E>::S;
// Row reductions of C instead of C itself (kRowParts; 0: none).
template <class E, class = void> struct RowPartsOf {
    static constexpr int S = 0;
};
template <class E> struct RowPartsOf<E, std::void_t<decltype(E::kRowParts)>> {
    static constexpr int S = E::kRowParts;
    static_assert(S >= 1 && S <= 4, "kRowParts must be 1..4");
};
template <class E> constexpr int kRowParts = RowPartsOf<E>::S;
template <class E> constexpr int kRowOuts = RowStatsOf<E>::O;

// The epilogue call, with this row's statistics when the functor has them (rs: its O values).
template <typename T, class E>
__device__ __forceinline__ void epi_apply(const E &ep, int b, int row, int col, float v0, float v1, const float *rs) {
    if constexpr (kRowStats<E> > 0) ep.template apply<T>(b, row, col, v0, v1, rs);
    else (void)rs, ep.template apply<T>(b, row, col, v0, v1);
}
template <typename T, class E>
__device__ __forceinline__ void epi_apply(const E &ep, int b, int row, int col, float v0, float v1, float w0, float w1,
                                          const float *rs) {
    if constexpr (kRowStats<E> > 0) ep.template apply<T>(b, row, col, v0, v1, w0, w1, rs);
    else (void)rs, ep.template apply<T>(b, row, col, v0, v1, w0, w1);
}
template <typename T, class E, class In>
__device__ __forceinline__ void epi_apply_loaded(const E &ep, int b, int row, int col, const In &in, float v0, float v1,
                                                 const float *rs) {
    if constexpr (kRowStats<E> > 0) ep.template apply_loaded<T>(b, row, col, in, v0, v1, rs);
    else (void)rs, ep.template apply_loaded<T>(b, row, col, in, v0, v1);
}

// The value-form calls (kValueEpilogue), with this row's statistics when the functor has them; w: the B1
// accumulators of the DUAL form's pair (unused when single). in: a two-phase functor's operands of the pair.
template <bool DUAL, class E>
__device__ __forceinline__ float2 epi_value(const E &ep, int b, int row, int col, float v0, float v1, float2 w, const float *rs) {
    if constexpr (DUAL) {
        if constexpr (kRowStats<E> > 0) return ep.value(b, row, col, v0, v1, w.x, w.y, rs);
        else return (void)rs, ep.value(b, row, col, v0, v1, w.x, w.y);
    } else {
        if constexpr (kRowStats<E> > 0) return (void)w, ep.value(b, row, col, v0, v1, rs);
        else return (void)w, (void)rs, ep.value(b, row, col, v0, v1);
    }
}
template <bool DUAL, class E, class In>
__device__ __forceinline__ float2 epi_value_loaded(const E &ep, int b, int row, int col, const In &in, float v0, float v1,
                                                   float2 w, const float *rs) {
    if constexpr (DUAL) {
        if constexpr (kRowStats<E> > 0) return ep.value_loaded(b, row, col, in, v0, v1, w.x, w.y, rs);
        else return (void)rs, ep.value_loaded(b, row, col, in, v0, v1, w.x, w.y);
    } else {
        if constexpr (kRowStats<E> > 0) return (void)w, ep.value_loaded(b, row, col, in, v0, v1, rs);
        else return (void)w, (void)rs, ep.value_loaded(b, row, col, in, v0, v1);
    }
}

// Row-statistic accumulators: start, fold one element of A in, merge two partial results.
template <class E, int S> __device__ __forceinline__ void row_start(float (&s)[S]) {
#pragma unroll
    for (int j = 0; j < S; ++j) s[j] = E::row_max(j) ? -INFINITY : 0.f;
}
template <class E> __device__ __forceinline__ float row_merge(int j, float a, float b) {
    return E::row_max(j) ? fmaxf(a, b) : a + b;
}
template <class E, int S> __device__ __forceinline__ void row_fold(const E &ep, float (&s)[S], float a) {
#pragma unroll
    for (int j = 0; j < S; ++j) s[j] = row_merge<E>(j, s[j], ep.row_term(j, a));
}
// A 16-byte chunk of A (8 elements), all folded in.
template <typename T, class E, int S> __device__ __forceinline__ void row_fold8(const E &ep, float (&s)[S], const uint4 &w) {
    const T *e = reinterpret_cast<const T *>(&w);
#pragma unroll
    for (int q = 0; q < 8; ++q) row_fold(ep, s, tst::elem<T>::to_float(e[q]));
}
// Partial result s of reduction j merged over each group of WIDTH lanes (a power of two ≤ 32) by shuffles.
template <class E, int WIDTH> __device__ __forceinline__ float row_merge_lanes(int j, float s) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o /= 2) s = row_merge<E>(j, s, __shfl_xor_sync(0xffffffffu, s, o));
    return s;
}
// The finished values of one row → rs[0..O).
template <class E, int S> __device__ __forceinline__ void row_store(const E &ep, const float (&s)[S], float *rs) {
    float o[kRowOuts<E>];
    ep.row_finish(s, o);
#pragma unroll
    for (int i = 0; i < kRowOuts<E>; ++i) rs[i] = o[i];
}

// ---- output helpers for functors ------------------------------------------------------------------
// Store (v0, v1) at p[0], p[1]; p[1] only when has2. One 4-byte store when both fit and p is aligned.
template <typename TOut> __device__ __forceinline__ void store2(TOut *p, float v0, float v1, bool has2) {
    if (has2 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
        *reinterpret_cast<typename tst::elem<TOut>::pair *>(p) = tst::elem<TOut>::pack(v0, v1);
    } else {
        p[0] = tst::elem<TOut>::from_float(v0);
        if (has2) p[1] = tst::elem<TOut>::from_float(v1);
    }
}
template <> __device__ __forceinline__ void store2<float>(float *p, float v0, float v1, bool has2) {
    if (has2 && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
        *reinterpret_cast<float2 *>(p) = make_float2(v0, v1);
    } else {
        p[0] = v0;
        if (has2) p[1] = v1;
    }
}
__device__ __forceinline__ float silu(float x) { return x / (1.f + __expf(-x)); }

// ---- ready epilogues ------------------------------------------------------------------------------
// out = acc
template <typename TOut> struct StoreEpilogue {
    TOut *out;             // (batch, M, n) with row stride ldc
    int64_t ldc, batch_stride;
    int n;
    __device__ __forceinline__ TOut *row_ptr(int b, int row) const { return out + b * batch_stride + row * ldc; }
    __device__ __forceinline__ float2 value(int, int, int, float v0, float v1) const { return make_float2(v0, v1); }
    template <typename T> __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1) const {
        store2(row_ptr(b, row) + col, v0, v1, col + 1 < n);
    }
};

// out = acc · scale[row] (FlashNorm: rmsnorm's 1/rms applied after the contraction)
template <typename TOut> struct RowScaleEpilogue {
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    const float *scale;    // (batch, M): scale + b*scale_batch_stride + row
    int64_t scale_batch_stride;
    template <typename T> __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1) const {
        float s = scale[b * scale_batch_stride + row];
        store2(out + b * batch_stride + row * ldc + col, v0 * s, v1 * s, col + 1 < n);
    }
};

// DUAL: out = v · silu(w)   (v = X·W_up, w = X·W_gate)
template <typename TOut> struct SwigluEpilogue {
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    __device__ __forceinline__ TOut *row_ptr(int b, int row) const { return out + b * batch_stride + row * ldc; }
    __device__ __forceinline__ float2 value(int, int, int, float v0, float v1, float w0, float w1) const {
        return make_float2(v0 * silu(w0), v1 * silu(w1));
    }
    template <typename T>
    __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1, float w0, float w1) const {
        const float2 r = value(b, row, col, v0, v1, w0, w1);
        store2(row_ptr(b, row) + col, r.x, r.y, col + 1 < n);
    }
};

// DUAL: out = (v · rs[row]) · (w · rs[row]); rs == nullptr means no row scale (rmsnorm_mlp)
template <typename TOut> struct GatedEpilogue {
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    const float *rs;       // (batch, M) or nullptr
    int64_t rs_batch_stride;
    template <typename T>
    __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1, float w0, float w1) const {
        float s = rs ? rs[b * rs_batch_stride + row] : 1.f;
        store2(out + b * batch_stride + row * ldc + col, (v0 * s) * (w0 * s), (v1 * s) * (w1 * s), col + 1 < n);
    }
};

// out = acc · rsqrt(mean_k A[row, k]² + eps) + max_k A[row, k], both statistics of A's row folded inside the
// GEMM (kRowStats: a sum and a maximum, two values per row) — RMSNorm's scale without a kernel of its own
template <typename TOut> struct RowStatEpilogue {
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    float inv_k, eps;
    static constexpr int kRowStats = 2, kRowOuts = 2;
    __host__ __device__ static constexpr bool row_max(int j) { return j == 1; }
    __device__ __forceinline__ float row_term(int j, float a) const { return j == 0 ? a * a : a; }
    __device__ __forceinline__ void row_finish(const float (&s)[2], float (&o)[2]) const {
        o[0] = rsqrtf(s[0] * inv_k + eps);
        o[1] = s[1];
    }
    template <typename T>
    __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1, const float *rs) const {
        store2(out + b * batch_stride + row * ldc + col, v0 * rs[0] + rs[1], v1 * rs[0] + rs[1], col + 1 < n);
    }
};

// DUAL: out = (v · r) · (w · r), r = rsqrt(mean_k A[row, k]² + eps) folded inside the GEMM (rmsnorm_mlp)
template <typename TOut> struct GatedStatEpilogue {
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    float inv_k, eps;
    static constexpr int kRowStats = 1, kRowOuts = 1;
    __host__ __device__ static constexpr bool row_max(int) { return false; }
    __device__ __forceinline__ float row_term(int, float a) const { return a * a; }
    __device__ __forceinline__ void row_finish(const float (&s)[1], float (&o)[1]) const { o[0] = rsqrtf(s[0] * inv_k + eps); }
    template <typename T>
    __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1, float w0, float w1, const float *rs) const {
        const float r = rs[0];
        store2(out + b * batch_stride + row * ldc + col, (v0 * r) * (w0 * r), (v1 * r) * (w1 * r), col + 1 < n);
    }
};

// out = acc + R[row, col]   (R may be the output itself: each element is read before it is written). Two-phase
// and in the value form, as the emitter's functors with loads are.
template <typename TOut> struct ResidualEpilogue {
    TOut *out;
    int64_t ldc, batch_stride;
    int n;
    const TOut *res;       // (batch, M, n) with row stride ldr
    int64_t ldr, res_batch_stride;
    struct In { float r0, r1; };
    __device__ __forceinline__ In load(int b, int row, int col) const {
        const TOut *r = res + b * res_batch_stride + row * ldr + col;
        return In{tst::elem<TOut>::to_float(r[0]), col + 1 < n ? tst::elem<TOut>::to_float(r[1]) : 0.f};
    }
    __device__ __forceinline__ TOut *row_ptr(int b, int row) const { return out + b * batch_stride + row * ldc; }
    __device__ __forceinline__ float2 value_loaded(int, int, int, const In &in, float v0, float v1) const {
        return make_float2(v0 + in.r0, v1 + in.r1);
    }
    template <typename T>
    __device__ __forceinline__ void apply_loaded(int b, int row, int col, const In &in, float v0, float v1) const {
        const float2 r = value_loaded(b, row, col, in, v0, v1);
        store2(row_ptr(b, row) + col, r.x, r.y, col + 1 < n);
    }
    template <typename T> __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1) const {
        apply_loaded<T>(b, row, col, load(b, row, col), v0, v1);
    }
};

// ---- parameters -----------------------------------------------------------------------------------
template <typename T, class Epilogue> struct GemmParams {
    const T *A;            // (batch, M, K)
    const T *B0;           // (batch, K, N) if B_KN else (batch, N, K)
    const T *B1;           // DUAL only, B0's layout and strides; ignored otherwise
    int M, N, K, batch;
    int64_t lda, ldb;
    int64_t a_batch_stride, b_batch_stride;   // 0 broadcasts an operand over the batch
    Epilogue ep;
    // B (and B1) are written by no earlier kernel of the launch sequence (weights, read-only inputs): the
    // mma.sync kernel starts streaming them before it waits for the previous kernel (tile.cuh, PDL).
    bool b_ready;
    // A too (with b_ready; and A2, B2 of a second pair): the main loop depends on no earlier kernel, so both
    // kernels run it before they wait for the previous kernel, which only their epilogue needs — a GEMM
    // whose row scales a row kernel computes just before (FlashNorm's RMSNorm·W) overlaps that kernel's tail.
    bool a_ready;
    // A second operand pair, K2 > 0 (launched with TWO; not with DUAL or row statistics): C = epilogue(A·B0 +
    // A2·B2), the main loop running over A/B0's K tiles, then A2/B2's — one contraction over the concatenated
    // K, as a LoRA update beside its base weight. A2 is (batch, M, K2) with lda2; B2 has B0's layout, ldb2.
    const T *A2, *B2;
    int K2;
    int64_t lda2, ldb2, a2_batch_stride, b2_batch_stride;
    // Row reductions of C (kRowParts): scratch memory of rows_scratch_bytes bytes, 16-byte aligned, any content,
    // at least row_parts_scratch_bytes(M, N, batch, kRowParts, sizeof(T)) (below).
    void *rows_scratch;
    int64_t rows_scratch_bytes;
    // Row statistics of A (kRowStats) in gemm_sm90.cuh's kernel: kRowOuts arrays of batch × M floats, any
    // content, 4-byte aligned (not aliasing each other or an operand), which the kernel fills with each row's
    // finished values (at b·M + m; at m alone when A is broadcast over the batch) and reads back in its
    // epilogues. The mma.sync kernels fold the statistics in shared memory and ignore them.
    float *row_stats[4];
    // Split-K through memory (k_chunks > 1; single or DUAL, no second pair, no row statistics or reductions): the K
    // tiles in k_chunks contiguous chunks, each multiplied by its own CTAs (a cluster of SPLIT), which store their fp32
    // sums to k_partials — k_chunks × (DUAL ? 2 : 1) × batch × M × N floats, any content, k_partials_floats of them —
    // and split_k_sum_kernel adds the chunks in order and runs the epilogue (launch_gemm_chunks). For GEMMs of few
    // output tiles over a long K (256×256 over K = 524288), which a cluster of 8 a tile leaves on a quarter of the SMs.
    float *k_partials;
    int64_t k_partials_floats;
    int k_chunks;
};

// ---- shared-memory tiles --------------------------------------------------------------------------
// A ROWS×COLS tile of 2-byte elements, rows of COLS/8 16-byte chunks; chunk c of row r is stored at chunk
// c ^ (r & 7), so the 8 rows an ldmatrix phase (or a cp.async phase) touches fall in 8 distinct bank
// groups: no bank conflicts without padding. Needs COLS ≥ 64 (rows of at least 128 bytes).
template <int COLS> __device__ __forceinline__ int swz(int r, int chunk) {
    return r * COLS + ((chunk ^ (r & 7)) << 3);
}

// Global (row0.., col0..) of a row-major view g (row stride ld) → the swizzled ROWS×COLS tile s;
// elements at row ≥ row_lim or col ≥ col_lim read as zero.
// VEC: the loader's copy width in bytes — 16: 16-byte cp.async (g, ld 16-byte aligned); 4: 4-byte cp.async
// (g 4-byte aligned, ld even); 0: element-wise loads and 16-byte shared stores.
template <typename T, int ROWS, int COLS, int THREADS, int VEC>
__device__ __forceinline__ void load_tile(T *s, const T *g, int64_t ld, int row0, int row_lim, int col0, int col_lim) {
    constexpr int CPR = COLS / 8, CHUNKS = ROWS * CPR;
    static_assert(CHUNKS % THREADS == 0, "tile chunks (ROWS*COLS/8) must be a multiple of the block's threads");
    static_assert(VEC == 16 || VEC == 4 || VEC == 0, "a loader copies 16 or 4 bytes at a time, or elements");
    if constexpr (VEC == 4) {
#pragma unroll
        for (int i = 0; i < CHUNKS / THREADS; ++i) {
            const int c = i * THREADS + static_cast<int>(threadIdx.x), r = c / CPR, ch = c % CPR;
            const int gr = row0 + r, gc = col0 + ch * 8;
            const bool in = gr < row_lim;
            T *dst = s + swz<COLS>(r, ch);
#pragma unroll
            for (int e = 0; e < 4; ++e) {   // elements gc + 2e, gc + 2e + 1: 4, 2 or 0 bytes at the edge
                const int col = gc + 2 * e, left = col_lim - col;
                const int bytes = in && left > 0 ? (left >= 2 ? 4 : 2) : 0;
                tst::cp_async4_zfill(dst + 2 * e, bytes > 0 ? g + gr * ld + col : g, bytes);
            }
        }
    } else if constexpr (VEC == 16) {
#pragma unroll
        for (int i = 0; i < CHUNKS / THREADS; ++i) {
            const int c = i * THREADS + static_cast<int>(threadIdx.x), r = c / CPR, ch = c % CPR;
            const int gr = row0 + r, gc = col0 + ch * 8;
            const bool in = gr < row_lim && gc < col_lim;
            const int bytes = in ? min(8, col_lim - gc) * 2 : 0;   // partial chunk at the column edge
            tst::cp_async16_zfill(s + swz<COLS>(r, ch), in ? g + gr * ld + gc : g, bytes);
        }
    } else {
#pragma unroll 1   // the slow path: keep its registers out of the accumulators' way
        for (int i = 0; i < CHUNKS / THREADS; ++i) {
            const int c = i * THREADS + static_cast<int>(threadIdx.x), r = c / CPR, ch = c % CPR;
            const int gr = row0 + r, gc = col0 + ch * 8;
            const bool in = gr < row_lim;
            const uint16_t *src = reinterpret_cast<const uint16_t *>(g) + (in ? gr * ld + gc : 0);
            uint32_t w[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                uint32_t lo = in && gc + 2 * e < col_lim ? src[2 * e] : 0u;
                uint32_t hi = in && gc + 2 * e + 1 < col_lim ? src[2 * e + 1] : 0u;
                w[e] = lo | (hi << 16);
            }
            *reinterpret_cast<uint4 *>(s + swz<COLS>(r, ch)) = make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
}

// B fragments for NI n8-tiles of one k16 step (stage tile sB), pairs of n8 tiles per ldmatrix.x4.
// B_KN: sB is BK×BN (rows k, ldmatrix.trans); else BN×BK (rows n, plain ldmatrix).
template <typename T, int BK, int BN, int NI, bool B_KN>
__device__ __forceinline__ void load_b_frags(uint32_t (&bf)[NI][2], const T *sB, int kk, int n_warp, int lane) {
#pragma unroll
    for (int p = 0; p < NI / 2; ++p) {
        uint32_t r[4];
        if constexpr (B_KN) {
            const int k = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
            tst::ldmatrix_x4_trans(r, sB + swz<BN>(k, (n_warp + p * 16) / 8 + (lane >> 4)));
        } else {
            const int n = n_warp + p * 16 + (lane & 7) + (lane >> 4) * 8;
            tst::ldmatrix_x4(r, sB + swz<BK>(n, kk * 2 + ((lane >> 3) & 1)));
        }
        bf[2 * p][0] = r[0];
        bf[2 * p][1] = r[1];
        bf[2 * p + 1][0] = r[2];
        bf[2 * p + 1][1] = r[3];
    }
}

// A fragments for MI m16-tiles of one k16 step (stage tile sA). A_KM: sA is BK×BM (rows k, ldmatrix.trans; its
// four 8×8 matrices (m0-7, k0-7), (m8-15, k0-7), (m0-7, k8-15), (m8-15, k8-15), as mma's a0..a3); else BM×BK.
template <typename T, int BM, int BK, int MI, bool A_KM>
__device__ __forceinline__ void load_a_frags(uint32_t (&af)[MI][4], const T *sA, int kk, int m_warp, int lane) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        if constexpr (A_KM) {
            const int k = kk * 16 + (lane & 7) + (lane >> 4) * 8;
            tst::ldmatrix_x4_trans(af[mi], sA + swz<BM>(k, (m_warp + mi * 16) / 8 + ((lane >> 3) & 1)));
        } else {
            tst::ldmatrix_x4(af[mi], sA + swz<BK>(m_warp + mi * 16 + (lane & 15), kk * 2 + (lane >> 4)));
        }
    }
}

template <typename T, int MI, int NI>
__device__ __forceinline__ void mma_tile(float (&acc)[MI][NI][4], const uint32_t (&af)[MI][4], const uint32_t (&bf)[NI][2]) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) tst::mma16816<T>(acc[mi][ni], af[mi], bf[ni]);
}

// Shared memory one block needs (bytes).
// (+ the row statistics' values and scratch: BM·O and BM·8·S floats, with O values and S reductions)
template <typename T, int BM, int BN, int BK, int STAGES, bool DUAL, int ROW_OUTS = 0, int ROW_STATS = 0>
constexpr int gemm_smem_bytes() {
    return STAGES * (BM * BK + (DUAL ? 2 : 1) * BK * BN) * static_cast<int>(sizeof(T)) + BM * ROW_OUTS * 4 +
           BM * 8 * ROW_STATS * 4;
}

// Row statistics folded from the shared-memory A tiles as a main loop passes them (both kernels): each of
// THREADS threads keeps the partial results of ROWS = BM·8/THREADS rows of the tile — rows t/8 + (THREADS/8)·i,
// always the same 16-byte chunk t % 8 of the row's 64 k — so a stage costs it ROWS 16-byte shared loads,
// and the 8 lanes of one row (a quarter warp: 8 different bank groups whatever the swizzle) merge at the
// end. The partials live in shared memory (SCRATCH floats, each thread its own), not in registers, so that
// the wgmma kernel's consumers keep no more registers live across the main loop than before.
// Only k < K is folded: tiles are zero-filled past K, and a term of 0 need not be 0.
template <class E, int BM, int THREADS> struct RowFold {
    static constexpr int S = kRowStats<E> > 0 ? kRowStats<E> : 1, ROWS = kRowStats<E> > 0 ? BM * 8 / THREADS : 1;
    static constexpr int SCRATCH = kRowStats<E> > 0 ? ROWS * S * THREADS : 0;   // floats
    static_assert(kRowStats<E> == 0 || (BM * 8) % THREADS == 0, "row statistics need BM·8 a multiple of the threads");
    float *part;   // part[(i·S + j)·THREADS + t]: thread t's partial of statistic j for its row i
    // scratch: SCRATCH floats of shared memory, or nullptr for a thread that folds nothing
    __device__ __forceinline__ RowFold(float *scratch, int t) : part(scratch) {
        if constexpr (kRowStats<E> > 0)
            if (scratch)
#pragma unroll
            for (int i = 0; i < ROWS; ++i)
#pragma unroll
                for (int j = 0; j < S; ++j) part[(i * S + j) * THREADS + t] = E::row_max(j) ? -INFINITY : 0.f;
    }
    __device__ __forceinline__ static int row(int t, int i) { return t / 8 + (THREADS / 8) * i; }
    // One stage: the tile's row r chunk (t % 8) at chunk_at(r, t % 8) (a 16-byte aligned address), k0 the
    // tile's first k.
    template <typename T, class At>
    __device__ __forceinline__ void fold(const E &ep, int t, int k0, int K, At chunk_at) {
        const int ch = t % 8, k = k0 + 8 * ch;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            const uint4 w = *reinterpret_cast<const uint4 *>(chunk_at(row(t, i), ch));
            float s[S];
            row_start<E>(s);
            if (k + 8 <= K) {
                row_fold8<T>(ep, s, w);
            } else {
                const T *e = reinterpret_cast<const T *>(&w);
#pragma unroll
                for (int q = 0; q < 8; ++q)
                    if (k + q < K) row_fold(ep, s, tst::elem<T>::to_float(e[q]));
            }
#pragma unroll
            for (int j = 0; j < S; ++j) {
                float &pj = part[(i * S + j) * THREADS + t];
                pj = row_merge<E>(j, pj, s[j]);
            }
        }
    }
    // After the last stage: merge the 8 lanes of each row; lane t % 8 == 0 leaves the row's results in its
    // own partials (where merge_rank and store read them).
    __device__ __forceinline__ void merge(int t) {
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
            for (int j = 0; j < S; ++j) {
                float &pj = part[(i * S + j) * THREADS + t];
                pj = row_merge_lanes<E, 8>(j, pj);
            }
    }
    __device__ __forceinline__ void finish(const E &ep, int t, float *rs) { merge(t), store(ep, t, rs); }
    // Split-K: adds in the merged results of cluster rank r's share of k (after a cluster barrier).
    __device__ __forceinline__ void merge_rank(int t, int r) {
        if (t % 8 != 0) return;
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
            for (int j = 0; j < S; ++j) {
                float &pj = part[(i * S + j) * THREADS + t];
                pj = row_merge<E>(j, pj, tst::cluster_load(part, r, (i * S + j) * THREADS + t));
            }
    }
    // Finishes each row and writes its O values to rs[row·O + o] (tile rows; the caller syncs before the
    // epilogue reads them).
    __device__ __forceinline__ void store(const E &ep, int t, float *rs) {
        if (t % 8 != 0) return;
#pragma unroll
        for (int i = 0; i < ROWS; ++i) {
            float s[S];
#pragma unroll
            for (int j = 0; j < S; ++j) s[j] = part[(i * S + j) * THREADS + t];
            row_store(ep, s, rs + row(t, i) * kRowOuts<E>);
        }
    }
};

// ---- pieces of both mma.sync GEMM kernels (this one and gemm_f32.cuh's) ---------------------------------
template <int NB, int MI, int NI> __device__ __forceinline__ void zero_acc(float (&acc)[NB][MI][NI][4]) {
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[j][mi][ni][e] = 0.f;
}

// The cp.async pipeline's first STAGES-1 K tiles (of KT, from tile kt0 on): load_a(s, kt) and load_b(s, kt) load
// tile kt into stage s. Launched after another kernel (tile.cuh, PDL), a weight's first tiles (b_ready) stream before
// the wait, as commit groups of their own ahead of the A tiles' (the main loop's wait counts still cover tile kt's A
// and B); everything else after it. Returns whether the main loop needs no earlier kernel (a_ready and b_ready): the
// caller then waits before its epilogue instead.
template <int STAGES, class LoadA, class LoadB>
__device__ __forceinline__ bool start_pipeline(bool a_ready, bool b_ready, int KT, int kt0, const LoadA &load_a,
                                               const LoadB &load_b) {
    const bool ready = a_ready && b_ready;
    if (b_ready) {
#pragma unroll
        for (int s = 0; s < STAGES - 1; ++s) {
            if (s < KT) load_b(s, kt0 + s);
            tst::cp_async_commit();
        }
    }
    if (!ready) tst::pdl_wait();
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) {
            load_a(s, kt0 + s);
            if (!b_ready) load_b(s, kt0 + s);
        }
        tst::cp_async_commit();
    }
    return ready;
}

// Split-K: the K tiles [kt0, kt0 + kt) of share `split` of `parts` among KT_ALL — contiguous shares.
__device__ __forceinline__ void k_share(int KT_ALL, int split, int parts, int &kt0, int &kt) {
    const int share = (KT_ALL + parts - 1) / parts;
    kt0 = min(split * share, KT_ALL), kt = min(share, KT_ALL - kt0);
}
template <int SPLIT> __device__ __forceinline__ void split_k_share(int KT_ALL, int split, int &kt0, int &kt) {
    k_share(KT_ALL, split, SPLIT, kt0, kt);
}

// Block `blockIdx.x` of a grid of chunks × tiles × SPLIT (split-K through memory: GemmParams::k_chunks chunks, 1
// without) → its tile's index among `tiles`, its chunk, and its rank in the tile's cluster; and the K tiles
// [kt0, kt0 + kt) it multiplies among KT_ALL: its chunk's, then its rank's share of those.
template <int SPLIT> struct KSlot {
    int id, chunk, split, kt0, kt;
    __device__ __forceinline__ KSlot(int tiles, int chunks, int KT_ALL) {
        const int slot = static_cast<int>(blockIdx.x) / SPLIT;
        split = static_cast<int>(blockIdx.x) % SPLIT, chunk = slot / tiles, id = slot % tiles;
        int c0, ct;
        k_share(KT_ALL, chunk, chunks > 1 ? chunks : 1, c0, ct);
        split_k_share<SPLIT>(ct, split, kt0, kt);
        kt0 += c0;
    }
};

// f(row, col, mi, h, ni) for each column pair of C held by a thread's MI × NI accumulator tiles of m16n8 (rows
// lane/4 (+8), columns 2·(lane%4) (+1) of each, from (row0, col0)) that lies inside C (row < M, col < N).
template <int MI, int NI, class F>
__device__ __forceinline__ void each_acc_pair(int row0, int col0, int M, int N, int lane, F &&f) {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + mi * 16 + (lane >> 2) + h * 8;
            if (row >= M) continue;
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const int col = col0 + ni * 8 + (lane & 3) * 2;
                if (col < N) f(row, col, mi, h, ni);
            }
        }
}

// Split-K through memory: a CTA's sums of chunk `chunk` (batch b; its accumulators from (row0, col0)) stored to
// p.k_partials, each product's plane apart (the DUAL form's B1 sums in the second).
template <int NB, int MI, int NI, class P>
__device__ __forceinline__ void store_k_partials(const P &p, const float (&acc)[NB][MI][NI][4], int chunk, int b, int row0,
                                                 int col0, int lane) {
    const int64_t plane = static_cast<int64_t>(p.batch) * p.M * p.N;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        float *out = p.k_partials + (static_cast<int64_t>(chunk) * NB + j) * plane + static_cast<int64_t>(b) * p.M * p.N;
        each_acc_pair<MI, NI>(row0, col0, p.M, p.N, lane, [&](int row, int col, int mi, int h, int ni) {
            const float *v = &acc[j][mi][ni][2 * h];
            out[static_cast<int64_t>(row) * p.N + col] = v[0];
            if (col + 1 < p.N) out[static_cast<int64_t>(row) * p.N + col + 1] = v[1];
        });
    }
}

// Split-K's merge, after the main loop (the cp.async stages drained): ranks 1.. of the cluster park their fp32
// accumulators in their own shared memory (`park`, PARK_FLOATS floats of it), rank 0 adds them in through
// distributed shared memory and then calls also(r) for each other rank r (row statistics merged alike), and the
// others wait until it has read them (their shared memory goes when they exit). Returns whether this CTA goes on
// to the epilogue (rank 0).
template <int SPLIT, int THREADS, int PARK_FLOATS, class Acc, class Also>
__device__ __forceinline__ bool split_k_merge(Acc &acc, float *park, int split, const Also &also) {
    constexpr int N_ACC = static_cast<int>(sizeof(Acc) / sizeof(float));
    static_assert(N_ACC * THREADS <= PARK_FLOATS, "split-K parks the accumulators in the stages' shared memory");
    float *a = reinterpret_cast<float *>(&acc);
    const int t = static_cast<int>(threadIdx.x);
    __syncthreads();
    if (split != 0) {
#pragma unroll
        for (int i = 0; i < N_ACC; ++i) park[i * THREADS + t] = a[i];
    }
    tst::cluster_sync();   // every rank's sums are parked
    if (split == 0) {
        for (int r = 1; r < SPLIT; ++r)
#pragma unroll
            for (int i = 0; i < N_ACC; ++i) a[i] += tst::cluster_load(park, r, i * THREADS + t);
        for (int r = 1; r < SPLIT; ++r) also(r);
    }
    tst::cluster_sync();   // rank 0 has read them: the others may exit
    return split == 0;
}

// ---- the kernel ---------------------------------------------------------------------------------
constexpr int kGroupM = 8;   // tile rows per group in the block order (L2 reuse of B across M tiles)

// Block `id` of a grid over tiles_m × tiles_n output tiles → the origin (m0, n0) of its BM × BN tile, in groups of
// kGroupM tile rows that sweep the tile columns together (the order of every non-persistent GEMM kernel here).
template <int BM, int BN> __device__ __forceinline__ void grouped_tile(int id, int tiles_m, int tiles_n, int &m0, int &n0) {
    const int per_group = kGroupM * tiles_n, first_m = id / per_group * kGroupM, group_m = min(tiles_m - first_m, kGroupM);
    m0 = (first_m + (id % per_group) % group_m) * BM, n0 = (id % per_group) / group_m * BN;
}

// One CTA's tile (gemm_kernel, below, runs it).
template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, bool DUAL,
          class Epilogue, int VEC, int SPLIT, bool TWO, bool A_KM>
__device__ __forceinline__ void gemm_block(const GemmParams<T, Epilogue> &p) {
    constexpr int THREADS = WARPS_M * WARPS_N * 32;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;   // warp tile
    constexpr int MI = WM / 16, NI = WN / 8;              // m16 and n8 MMA tiles per warp
    constexpr int NB = DUAL ? 2 : 1;
    constexpr int A_ELEMS = BM * BK, B_ELEMS = BK * BN, STAGE_ELEMS = A_ELEMS + NB * B_ELEMS;
    static_assert(sizeof(T) == 2, "T must be __half or __nv_bfloat16");
    static_assert(BM % (16 * WARPS_M) == 0, "BM must be a multiple of 16*WARPS_M (m16 MMA tiles per warp)");
    static_assert(BN % (16 * WARPS_N) == 0, "BN must be a multiple of 16*WARPS_N (pairs of n8 MMA tiles per warp)");
    static_assert(BK % 64 == 0, "BK must be a multiple of 64 (128-byte swizzled shared-memory rows)");
    static_assert(!B_KN || BN % 64 == 0, "B_KN needs BN a multiple of 64 (128-byte swizzled rows of B)");
    static_assert(!A_KM || BM % 64 == 0, "A_KM needs BM a multiple of 64 (128-byte swizzled rows of A)");
    static_assert(!A_KM || (!TWO && kRowStats<Epilogue> == 0), "an M-major A: no second pair, no row statistics");
    static_assert(STAGES >= 2, "the cp.async pipeline needs at least 2 stages");
    static_assert(kRowStats<Epilogue> == 0 || BK == 64, "row statistics of A need BK = 64 (RowFold)");
    static_assert(SPLIT >= 1 && SPLIT <= 8, "split-K: 1 to 8 CTAs a tile (a portable cluster)");
    static_assert(kRowParts<Epilogue> == 0, "row reductions of C: launch_gemm runs launch_gemm_row_parts");

    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *smem = reinterpret_cast<T *>(smem_raw);

    // Block → its tile (grouped_tile), split-K through memory its chunk of K (chunk-major), split-K its rank in the
    // tile's cluster, and the K tiles those leave it (KSlot).
    const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    static_assert(!(TWO && DUAL), "a second operand pair is not a DUAL form");
    const int KT1 = (p.K + BK - 1) / BK, KT_ALL = KT1 + (TWO ? (p.K2 + BK - 1) / BK : 0);
    const KSlot<SPLIT> slot(tiles_m * tiles_n, p.k_chunks, KT_ALL);
    const int split = slot.split, kt0 = slot.kt0, KT = slot.kt;
    int m0, n0;
    grouped_tile<BM, BN>(slot.id, tiles_m, tiles_n, m0, n0);
    const int b = blockIdx.z;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;

    const T *gA = p.A + b * p.a_batch_stride;
    const T *gB[NB];
    gB[0] = p.B0 + b * p.b_batch_stride;
    if constexpr (DUAL) gB[NB - 1] = p.B1 + b * p.b_batch_stride;
    // K tiles [0, KT1) are A·B0's; with TWO (a second pair, never DUAL) A2·B2's follow, tile KT1 + i being its
    // i-th. TWO is a template argument: a run-time test of the pair for every tile cost the decode GEMMs 1-8%
    // (bench/NOTES.md run 74), so the kernels without a second pair compile as they did before it.

    // Load K-tile kt into stage s: A (m0.., kt*BK..) and each B.
    auto load_a = [&](int s, int kt) {
        if constexpr (A_KM) {   // BK rows of k, BM columns of m
            load_tile<T, BK, BM, THREADS, VEC>(smem + s * STAGE_ELEMS, gA, p.lda, kt * BK, p.K, m0, p.M);
        } else if (!TWO || kt < KT1) {
            load_tile<T, BM, BK, THREADS, VEC>(smem + s * STAGE_ELEMS, gA, p.lda, m0, p.M, kt * BK, p.K);
        } else {
            const T *gA2 = p.A2 + b * p.a2_batch_stride;
            load_tile<T, BM, BK, THREADS, VEC>(smem + s * STAGE_ELEMS, gA2, p.lda2, m0, p.M, (kt - KT1) * BK, p.K2);
        }
    };
    auto load_b = [&](int s, int kt) {
        if (TWO && kt >= KT1) {   // the second pair's B2
            T *sB = smem + s * STAGE_ELEMS + A_ELEMS;
            const T *gB2 = p.B2 + b * p.b2_batch_stride;
            if constexpr (B_KN) load_tile<T, BK, BN, THREADS, VEC>(sB, gB2, p.ldb2, (kt - KT1) * BK, p.K2, n0, p.N);
            else load_tile<T, BN, BK, THREADS, VEC>(sB, gB2, p.ldb2, n0, p.N, (kt - KT1) * BK, p.K2);
            return;
        }
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            T *sB = smem + s * STAGE_ELEMS + A_ELEMS + j * B_ELEMS;
            if constexpr (B_KN) load_tile<T, BK, BN, THREADS, VEC>(sB, gB[j], p.ldb, kt * BK, p.K, n0, p.N);
            else load_tile<T, BN, BK, THREADS, VEC>(sB, gB[j], p.ldb, n0, p.N, kt * BK, p.K);
        }
    };

    float acc[NB][MI][NI][4];
    zero_acc(acc);

    // Pipeline: STAGES-1 tiles in flight ahead of the one being multiplied. Split-K: this CTA's K tiles are
    // [kt0, kt0 + KT) (tile indices kt below are relative to kt0).
    auto load_k = [&](int s, int kt) { load_a(s, kt0 + kt), load_b(s, kt0 + kt); };
    const bool ready = start_pipeline<STAGES>(p.a_ready, p.b_ready, KT, kt0, load_a, load_b);
    float *const rs = reinterpret_cast<float *>(smem + STAGES * STAGE_ELEMS);   // row statistics, if any
    RowFold<Epilogue, BM, THREADS> rows(rs + BM * kRowOuts<Epilogue>, static_cast<int>(threadIdx.x));
    for (int kt = 0; kt < KT; ++kt) {
        tst::cp_async_wait<STAGES - 2>();   // tile kt has landed (this thread's part)
        __syncthreads();                    // ... everyone's part; stage (kt-1)%STAGES is free again
        if (kt + STAGES - 1 < KT) load_k((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        tst::cp_async_commit();

        const T *st = smem + (kt % STAGES) * STAGE_ELEMS;
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            uint32_t af[MI][4];
            load_a_frags<T, BM, BK, MI, A_KM>(af, st, kk, wm, lane);
#pragma unroll
            for (int j = 0; j < NB; ++j) {
                uint32_t bf[NI][2];
                load_b_frags<T, BK, BN, NI, B_KN>(bf, st + A_ELEMS + j * B_ELEMS, kk, wn, lane);
                mma_tile<T>(acc[j], af, bf);
            }
        }
        if constexpr (kRowStats<Epilogue> > 0)   // from the A tile just multiplied (BK = 64: one chunk a lane)
            rows.template fold<T>(p.ep, static_cast<int>(threadIdx.x), (kt0 + kt) * BK, p.K,
                                  [&](int r, int ch) { return st + swz<BK>(r, ch); });
    }
    tst::cp_async_wait<0>();
    if (ready) tst::pdl_wait();   // the epilogue reads and writes what earlier kernels may still touch
    tst::pdl_trigger();   // the main loop is done: the next kernel may launch and start its own loads
    if constexpr (kRowStats<Epilogue> > 0) rows.merge(static_cast<int>(threadIdx.x));
    if constexpr (SPLIT > 1) {   // ranks 1.. park their sums, rank 0 adds them in (and each rank's row statistics)
        const bool first = split_k_merge<SPLIT, THREADS, STAGES * STAGE_ELEMS * static_cast<int>(sizeof(T)) / 4>(
            acc, reinterpret_cast<float *>(smem_raw), split, [&](int r) {
                if constexpr (kRowStats<Epilogue> > 0) rows.merge_rank(static_cast<int>(threadIdx.x), r);
            });
        if (!first) return;
    }
    if constexpr (kRowStats<Epilogue> > 0) {
        rows.store(p.ep, static_cast<int>(threadIdx.x), rs);
        __syncthreads();
    }

    // Epilogue straight from the accumulators: thread owns rows lane/4 (+8), columns 2*(lane%4) (+1). Split-K through
    // memory: this chunk's sums, stored (split_k_sum_kernel runs the epilogue).
    if (p.k_chunks > 1) return store_k_partials(p, acc, slot.chunk, b, m0 + wm, n0 + wn, lane);
    each_acc_pair<MI, NI>(m0 + wm, n0 + wn, p.M, p.N, lane, [&](int row, int col, int mi, int h, int ni) {
        const float *v = &acc[0][mi][ni][2 * h], *r = rs + (row - m0) * kRowOuts<Epilogue>;
        if constexpr (DUAL) {
            const float *w = &acc[NB - 1][mi][ni][2 * h];
            epi_apply<T>(p.ep, b, row, col, v[0], v[1], w[0], w[1], r);
        } else {
            epi_apply<T>(p.ep, b, row, col, v[0], v[1], r);
        }
    });
}
// REACH (tst::Reach): a fallback's kernel is compiled as a trap in the device code that never launches it.
template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, bool DUAL,
          class Epilogue, int VEC, int SPLIT = 1, bool TWO = false, bool A_KM = false, int REACH = tst::kAnyCode>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32) gemm_kernel(const GemmParams<T, Epilogue> p) {
    if constexpr (tst::reached_here(REACH))
        gemm_block<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, VEC, SPLIT, TWO, A_KM>(p);
    else __trap();
}

// ---- launch -------------------------------------------------------------------------------------
template <typename T> inline bool aligned16(const T *ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15) == 0; }

// Whether an operand at ptr (rows ld elements apart, batches bs apart over `batch` batches) moves in 16-byte
// chunks: the pointer 16-byte aligned, the strides whole chunks of 8 elements.
template <typename T> inline bool chunked(const T *ptr, int64_t ld, int64_t bs, int batch) {
    return aligned16(ptr) && ld % 8 == 0 && (batch <= 1 || bs % 8 == 0);
}

// Whether it moves in 4-byte pairs: the pointer 4-byte aligned, the strides even.
template <typename T> inline bool paired(const T *ptr, int64_t ld, int64_t bs, int batch) {
    return (reinterpret_cast<uintptr_t>(ptr) & 3) == 0 && ld % 2 == 0 && (batch <= 1 || bs % 2 == 0);
}

// Whether ok(ptr, ld, batch stride, batch) holds for every operand of p, a second pair's too.
template <typename T, class Epilogue, bool DUAL, class Ok> inline bool every_operand(const GemmParams<T, Epilogue> &p, Ok ok) {
    bool all = ok(p.A, p.lda, p.a_batch_stride, p.batch) && ok(p.B0, p.ldb, p.b_batch_stride, p.batch) &&
               (!DUAL || ok(p.B1, p.ldb, p.b_batch_stride, p.batch));
    return all && (p.K2 <= 0 || (ok(p.A2, p.lda2, p.a2_batch_stride, p.batch) && ok(p.B2, p.ldb2, p.b2_batch_stride, p.batch)));
}

// The loader p's operands allow (load_tile's VEC): 16-byte cp.async, 4-byte cp.async, else element-wise (0).
template <typename T, class Epilogue, bool DUAL> inline int gemm_loader_bytes(const GemmParams<T, Epilogue> &p) {
    if (every_operand<T, Epilogue, DUAL>(p, [](const T *q, int64_t ld, int64_t bs, int b) { return chunked(q, ld, bs, b); }))
        return 16;
    if (every_operand<T, Epilogue, DUAL>(p, [](const T *q, int64_t ld, int64_t bs, int b) { return paired(q, ld, bs, b); }))
        return 4;
    return 0;
}

template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, bool DUAL,
          class Epilogue, int VEC, int SPLIT = 1, bool TWO = false, bool A_KM = false, int REACH = tst::kAnyCode>
cudaError_t launch_gemm_path(const GemmParams<T, Epilogue> &p, cudaStream_t stream) {
    auto kernel = gemm_kernel<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, VEC, SPLIT, TWO, A_KM, REACH>;
    constexpr int smem = gemm_smem_bytes<T, BM, BN, BK, STAGES, DUAL, kRowOuts<Epilogue>, kRowStats<Epilogue>>();
    static std::atomic<unsigned long long> smem_set{0};  // devices where the limit is raised
    tst::DeviceFacts f;
    cudaError_t e = tst::device_facts(&f);
    if (e == cudaSuccess) e = tst::set_smem_once(kernel, smem, f.dev, smem_set);
    if (e != cudaSuccess) return e;
    const int64_t tiles = (int64_t)((p.M + BM - 1) / BM) * ((p.N + BN - 1) / BN) * (p.k_chunks > 1 ? p.k_chunks : 1);
    if (tiles * SPLIT > 0x7fffffff) return cudaErrorInvalidValue;
    const dim3 grid((unsigned)(tiles * SPLIT), 1, (unsigned)p.batch);
    return tst::launch(kernel, grid, dim3(WARPS_M * WARPS_N * 32), static_cast<size_t>(smem), stream, SPLIT, p);
}

// ---- row reductions of C (kRowParts, see the top) -------------------------------------------------------
// GemmParams::rows_scratch in the wgmma kernel: per batch, row (padded to bands of 128) and tile along N (at most
// ceil(N/64) tiles) the tile's S results, floats. row_parts_at: where row (b, row)'s start (tile tn's at + tn·S);
// row_parts_partials: how many floats for `batch` batches.
__host__ __device__ constexpr int64_t row_parts_at(int M, int N, int S, int b, int row) {
    return (static_cast<int64_t>(b) * ((M + 127) / 128 * 128) + row) * ((N + 63) / 64) * S;
}
__host__ __device__ constexpr int64_t row_parts_partials(int M, int N, int batch, int S) { return row_parts_at(M, N, S, batch, 0); }

// One step of a reduction that is a maximum (mx) or a sum, and the same over the aligned group of W lanes (a power
// of two up to 32) a value's lane belongs to: every lane of the group gets the group's result.
__device__ __forceinline__ float fold(bool mx, float a, float u) { return mx ? fmaxf(a, u) : a + u; }
template <int W> __device__ __forceinline__ float fold_lanes(bool mx, float a) {
#pragma unroll
    for (int o = 1; o < W; o *= 2) a = fold(mx, a, __shfl_xor_sync(0xffffffffu, a, o));
    return a;
}
// The scratch either form needs: the wgmma kernel's tile results, or the fallback's copy of C (T elements).
__host__ __device__ constexpr int64_t row_parts_scratch_bytes(int M, int N, int batch, int S, int elem_bytes) {
    const int64_t wg = 4 * row_parts_partials(M, N, batch, S);
    const int64_t fb = static_cast<int64_t>(batch) * M * N * elem_bytes;
    return wg > fb ? wg : fb;
}

// The fallback's GEMM pass: C's values v = pre(...) into the scratch, rows of N elements of T.
template <typename T, class E> struct PreStore {
    E ep;
    T *c;
    int m, n;
    __device__ __forceinline__ T *row_ptr(int b, int row) const { return c + (static_cast<int64_t>(b) * m + row) * n; }
    __device__ __forceinline__ float2 value(int b, int row, int col, float v0, float v1) const {
        return make_float2(ep.pre(b, row, col, v0), col + 1 < n ? ep.pre(b, row, col + 1, v1) : 0.f);
    }
    template <typename TT> __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1) const {
        const float2 v = value(b, row, col, v0, v1);
        store2(row_ptr(b, row) + col, v.x, v.y, col + 1 < n);
    }
};

// The fallback's row pass: a group of TPR threads (a warp, or a whole block of 256 for long rows: decode sizes,
// where a vocabulary-wide row is the only one) reduces row (g / M, g % M) of the stored C — one "tile" of N columns,
// its results the row's — and writes the row's outputs. Groups of more than a warp meet in shared memory.
template <typename T, class E, int TPR>
__global__ void __launch_bounds__(256) row_parts_kernel(const E ep, const T *c, int M, int N, int batch) {
    constexpr int S = kRowParts<E>, W = TPR / 32;
    __shared__ float meet[W > 1 ? W : 1];
    tst::pdl_trigger();
    tst::pdl_wait();   // the GEMM pass wrote C
    const int t = static_cast<int>(threadIdx.x) % TPR, lane = t % 32;
    const long long g = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / TPR;
    if (g >= static_cast<long long>(M) * batch) return;   // (TPR = 256: the whole block, so no barrier is left)
    const T *row = c + g * N;
    float s[S];
#pragma unroll
    for (int j = 0; j < S; ++j) {
        const bool mx = E::part_max(j);
        float a = mx ? -INFINITY : 0.f;
        for (int col = t; col < N; col += TPR) a = fold(mx, a, ep.part_term(j, tst::elem<T>::to_float(row[col]), s));
        a = fold_lanes<32>(mx, a);
        if constexpr (W > 1) {
            if (lane == 0) meet[t / 32] = a;
            __syncthreads();
            a = meet[0];
#pragma unroll
            for (int i = 1; i < W; ++i) a = fold(mx, a, meet[i]);
            __syncthreads();   // meet is written again by the next reduction
        }
        s[j] = a;
    }
    if (t == 0) ep.row_out(static_cast<int>(g / M), static_cast<int>(g % M), s);
}

// The wgmma kernel's second step: warp w meets row (w / M, w % M)'s tile results (tiles_n tiles of BN columns,
// lane l taking tiles l, l + 32, ...; merged over the warp, so that every lane has each whole-row result before
// the next reduction's terms) and writes the row's outputs.
template <class E> __global__ void __launch_bounds__(256) row_parts_merge_kernel(const E ep, const float *parts, int M, int N,
                                                                                 int batch, int tiles_n) {
    constexpr int S = kRowParts<E>;
    tst::pdl_trigger();
    tst::pdl_wait();   // the GEMM wrote the results
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const long long w = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
    if (w >= static_cast<long long>(M) * batch) return;
    const int b = static_cast<int>(w / M), row = static_cast<int>(w % M);
    const float *q = parts + row_parts_at(M, N, S, b, row);
    float whole[S];
#pragma unroll
    for (int j = 0; j < S; ++j) {
        const bool mx = E::part_max(j);
        float a = mx ? -INFINITY : 0.f;
        for (int tn = lane; tn < tiles_n; tn += 32) {
            float part[S];
#pragma unroll
            for (int i = 0; i < S; ++i) part[i] = q[tn * S + i];
            a = fold(mx, a, ep.merge_term(j, part, whole));
        }
        whole[j] = fold_lanes<32>(mx, a);
    }
    if (lane == 0) ep.row_out(b, row, whole);
}
template <int BN, typename T, class E> cudaError_t launch_row_parts_merge(const GemmParams<T, E> &p, cudaStream_t stream) {
    const long long blocks = (static_cast<long long>(p.M) * p.batch + 7) / 8;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    return tst::launch(row_parts_merge_kernel<E>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, 1, p.ep,
                       static_cast<const float *>(p.rows_scratch), p.M, p.N, p.batch, (p.N + BN - 1) / BN);
}

template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, class E, int SPLIT,
          bool TWO, bool A_KM, int REACH>
cudaError_t launch_gemm_row_parts(const GemmParams<T, E> &p, cudaStream_t stream);   // below launch_gemm

// Split-K through memory, second kernel: a thread a column pair of C adds the k_chunks chunks' sums in chunk order
// (deterministic) and runs the epilogue on them (the DUAL form's B1 sums beside).
template <typename T, class E, bool DUAL> __global__ void __launch_bounds__(256) split_k_sum_kernel(const GemmParams<T, E> p) {
    tst::pdl_trigger();
    tst::pdl_wait();   // the chunks' sums are the kernel before this one's
    const int pairs = (p.N + 1) / 2;
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= static_cast<int64_t>(p.batch) * p.M * pairs) return;
    const int col = static_cast<int>(i % pairs) * 2, row = static_cast<int>(i / pairs % p.M), b = static_cast<int>(i / pairs / p.M);
    const int64_t plane = static_cast<int64_t>(p.batch) * p.M * p.N, at = (static_cast<int64_t>(b) * p.M + row) * p.N + col;
    constexpr int NB = DUAL ? 2 : 1;
    const bool two = col + 1 < p.N;
    float v[NB][2] = {};
    for (int c = 0; c < p.k_chunks; ++c)
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            const float *q = p.k_partials + (static_cast<int64_t>(c) * NB + j) * plane + at;
            v[j][0] += q[0];
            if (two) v[j][1] += q[1];
        }
    if constexpr (DUAL) epi_apply<T>(p.ep, b, row, col, v[0][0], v[0][1], v[1][0], v[1][1], nullptr);
    else epi_apply<T>(p.ep, b, row, col, v[0][0], v[0][1], nullptr);
}

// Whether p asks for split-K through memory (k_chunks > 1) and gives it room (k_partials of k_partials_floats).
template <typename T, class E, bool DUAL> inline bool chunked_split_ok(const GemmParams<T, E> &p) {
    return p.k_partials && p.k_partials_floats >= static_cast<int64_t>(p.k_chunks) * (DUAL ? 2 : 1) * p.batch * p.M * p.N;
}

// Split-K through memory's second kernel (split_k_sum_kernel) for p, after the chunks' kernel on the same stream.
template <typename T, class E, bool DUAL> inline cudaError_t launch_split_k_sum(const GemmParams<T, E> &p, cudaStream_t stream) {
    const int64_t blocks = (static_cast<int64_t>(p.batch) * p.M * ((p.N + 1) / 2) + 255) / 256;
    if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
    return tst::launch(split_k_sum_kernel<T, E, DUAL>, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, 1, p);
}

// Launch C = epilogue(A·B) (or the DUAL form) for p on stream. Returns an error, never prints or exits:
// cudaErrorInvalidValue for negative sizes, batch outside 1..65535 or a missing pointer; whatever the
// runtime reports otherwise (e.g. shared memory above the device's limit).
// SPLIT > 1: split-K over clusters of SPLIT CTAs (see the top), on compute capability 9.0 and later; on an
// older GPU the same call runs SPLIT = 1.
template <typename T, int BM = 128, int BN = 128, int BK = 64, int WARPS_M = 2, int WARPS_N = 4, int STAGES = 4,
          bool B_KN = true, bool DUAL = false, class Epilogue = StoreEpilogue<T>, int SPLIT = 1, bool TWO = false,
          bool A_KM = false, int REACH = tst::kAnyCode>
cudaError_t launch_gemm(const GemmParams<T, Epilogue> &p, cudaStream_t stream) {
    if (p.M < 0 || p.N < 0 || p.K < 0 || p.K2 < 0 || p.batch < 1 || p.batch > 65535) return cudaErrorInvalidValue;
    if (!p.A || !p.B0 || (DUAL && !p.B1)) return cudaErrorInvalidValue;
    if ((p.K2 > 0) != TWO || (TWO && (DUAL || kRowStats<Epilogue> > 0 || !p.A2 || !p.B2))) return cudaErrorInvalidValue;
    if (p.M == 0 || p.N == 0) return cudaSuccess;
    if constexpr (kRowParts<Epilogue> > 0) {
        static_assert(!DUAL, "row reductions of C: a single product");
        return launch_gemm_row_parts<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, Epilogue, SPLIT, TWO, A_KM, REACH>(p, stream);
    } else {
        if constexpr (SPLIT > 1) {
            tst::DeviceFacts f;
            cudaError_t e = tst::device_facts(&f);
            if (e != cudaSuccess) return e;
            if (f.cc_major < 9) return launch_gemm<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 1, TWO, A_KM, REACH>(p, stream);
        }
        if (p.k_chunks > 1) {   // split-K through memory: the chunks' sums, then their sum and the epilogue
            if (TWO || kRowStats<Epilogue> > 0 || !chunked_split_ok<T, Epilogue, DUAL>(p)) return cudaErrorInvalidValue;
            cudaError_t e = cudaSuccess;
            switch (gemm_loader_bytes<T, Epilogue, DUAL>(p)) {
            case 16: e = launch_gemm_path<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 16, SPLIT, TWO, A_KM, REACH>(p, stream); break;
            case 4: e = launch_gemm_path<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 4, SPLIT, TWO, A_KM, REACH>(p, stream); break;
            default: e = launch_gemm_path<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 0, SPLIT, TWO, A_KM, REACH>(p, stream);
            }
            return e != cudaSuccess ? e : launch_split_k_sum<T, Epilogue, DUAL>(p, stream);
        }
        switch (gemm_loader_bytes<T, Epilogue, DUAL>(p)) {
        case 16: return launch_gemm_path<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 16, SPLIT, TWO, A_KM, REACH>(p, stream);
        case 4: return launch_gemm_path<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 4, SPLIT, TWO, A_KM, REACH>(p, stream);
        default: return launch_gemm_path<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 0, SPLIT, TWO, A_KM, REACH>(p, stream);
        }
    }
}

// C's rows reduced without wgmma (a GPU before Hopper, operands TMA cannot describe, or decode sizes): the
// mma.sync GEMM storing C's values into the scratch, then row_parts_kernel. Not DUAL.
template <typename T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, class E, int SPLIT,
          bool TWO, bool A_KM, int REACH>
cudaError_t launch_gemm_row_parts(const GemmParams<T, E> &p, cudaStream_t stream) {
    if (!p.rows_scratch || p.rows_scratch_bytes < static_cast<int64_t>(p.batch) * p.M * p.N * static_cast<int64_t>(sizeof(T)))
        return cudaErrorInvalidValue;
    GemmParams<T, PreStore<T, E>> q;
    q.A = p.A, q.B0 = p.B0, q.B1 = p.B1, q.M = p.M, q.N = p.N, q.K = p.K, q.batch = p.batch;
    q.lda = p.lda, q.ldb = p.ldb, q.a_batch_stride = p.a_batch_stride, q.b_batch_stride = p.b_batch_stride;
    q.ep = PreStore<T, E>{p.ep, static_cast<T *>(p.rows_scratch), p.M, p.N};
    q.b_ready = p.b_ready, q.a_ready = p.a_ready;
    q.A2 = p.A2, q.B2 = p.B2, q.K2 = p.K2, q.lda2 = p.lda2, q.ldb2 = p.ldb2;
    q.a2_batch_stride = p.a2_batch_stride, q.b2_batch_stride = p.b2_batch_stride;
    q.rows_scratch = nullptr, q.rows_scratch_bytes = 0;
    q.k_partials = nullptr, q.k_partials_floats = 0, q.k_chunks = 0;
    cudaError_t e = launch_gemm<T, BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, false, PreStore<T, E>, SPLIT, TWO, A_KM, REACH>(q, stream);
    if (e != cudaSuccess) return e;
    const long long rows = static_cast<long long>(p.M) * p.batch;
    if (rows > 0x7fffffff) return cudaErrorInvalidValue;
    tst::DeviceFacts f;
    e = tst::device_facts(&f);
    if (e != cudaSuccess) return e;
    if (p.N >= 4096 && rows < 8LL * f.sms)   // few long rows (a decode step's vocabulary): a block a row
        return tst::launch(row_parts_kernel<T, E, 256>, dim3(static_cast<unsigned>(rows)), dim3(256), 0, stream, 1, p.ep,
                           static_cast<const T *>(p.rows_scratch), p.M, p.N, p.batch);
    return tst::launch(row_parts_kernel<T, E, 32>, dim3(static_cast<unsigned>((rows + 7) / 8)), dim3(256), 0, stream, 1, p.ep,
                       static_cast<const T *>(p.rows_scratch), p.M, p.N, p.batch);
}

}  // namespace tsg

// ---- self-test instantiation: `nvcc -DTSG_SELFTEST -c gemm.cuh` compiles the default forms -----------
#ifdef TSG_SELFTEST
template cudaError_t tsg::launch_gemm<__half>(const tsg::GemmParams<__half, tsg::StoreEpilogue<__half>> &, cudaStream_t);
template cudaError_t tsg::launch_gemm<__nv_bfloat16, 128, 128, 64, 2, 4, 3, false, true, tsg::SwigluEpilogue<__nv_bfloat16>>(
    const tsg::GemmParams<__nv_bfloat16, tsg::SwigluEpilogue<__nv_bfloat16>> &, cudaStream_t);
#endif
