// attention.cuh — the streaming attention forward kernel (FlashAttention-2 schedule) that tsopt emits for
// the e-graph form online_wsum{k}(s, V, c):
//   O[b, h, q, :] = Σ_k e_k · V[b, h/group, k, :] / Σ_k e_k,   e_k = 2^(c·(s_k − max_k s_k)),
//   s_k = score(Q[b, h, q, :] · K[b, h/group, k, :], q, k)
// where score is a generated functor (scale, causal or additive mask, tanh soft-cap, …) and c > 0 folds
// log2(e) and any constant factor (c = log2(e) is the ordinary softmax). fp16 or bf16 in and out, fp32
// accumulation, mma.sync m16n8k16 (sm_80 and newer; on sm_90a a wgmma variant would be faster, see the
// note at the end). Any t_q, t_kv ≥ 0; GQA by index mapping. Namespace tsa; depends on tile.cuh. It is a
// template, not an emitted header: the emitter instantiates it with a Score functor and tile parameters.
//
// Score functor interface (the emitter generates these; three stock ones below):
//   struct Score {
//       static constexpr bool causal;   // true: promises s = −inf whenever k > q + (t_kv − t_q)
//       static constexpr double window;  // optional: promises s = −inf whenever k < q − window
//       __device__ float operator()(float dot, int q, int k) const;   // dot = Q[q]·K[k] in fp32
//       __device__ Score at(int b, int h) const;   // optional: the functor for batch b, query head h
//       static constexpr bool masks_future;          // optional, with unmasked: true promises exactly
//       __device__ float unmasked(float dot, int q, int k) const;   // s = k > q ? −inf : unmasked(dot, q, k)
//       __device__ float2 pair(float dot0, float dot1, int q, int k) const;  // optional: keys k and k + 1 at
//       __device__ float2 unmasked_pair(float dot0, float dot1, int q, int k) const;  // once (with unmasked)
//   };                                             // (tst::score_at; without it the functor serves all)
// The kernels compute a masks_future functor's scores in that form (score_main, keys_after): unmasked for every
// key, then −inf for the keys after the query on the tiles that hold any (the diagonal's). The emitter gives a
// graph's causal score one when its comparisons of positions fold away below the diagonal, so that a score
// costs only the graph's arithmetic on the dot product (bench/NOTES.md runs 89-92).
// q and k are positions in [0, t_q) and [0, t_kv) (the kernel also calls it for padding positions past the
// ends and discards those results). Causal convention: BOTTOM-RIGHT alignment, as FlashAttention ≥ 2.1
// and PyTorch's causal_lower_right: query q sees keys k ≤ q + t_kv − t_q, so the last query sees every key;
// with t_q = t_kv it is the ordinary lower-triangular mask. When causal is true the kernel skips K/V tiles
// that lie wholly past that diagonal (for the query tile's last row); the functor itself masks inside the
// diagonal tile (and may mask more: windows, padding). A functor that masks without promising the
// diagonal sets causal = false and costs only the skipped tiles.
// Rows whose every key is masked (s = −inf everywhere, e.g. q < t_q − t_kv under causal) are written as 0.
// A window (a sliding window's far side, as the emitter reads it from the graph's mask) lets the Hopper
// kernel (attention_sm90.cuh) and the decode form start each query tile at the first K/V tile holding a key
// ≥ q0 − window (q0: the tile's first row); the tiles before it are masked for every row. The mma.sync
// kernel below does not skip them (its functor masks them all the same).
//
// Layout: Q, K, V, O are (batch, head, seq, d) with arbitrary int64 strides in elements for batch, head
// and seq and a contiguous head dim; base pointers and those strides must be 16-byte aligned (strides
// multiples of 8 elements) because tiles move with 16-byte cp.async. K and V have n_kv_heads heads;
// query head h reads kv head h / (n_q_heads / n_kv_heads).
//
// Schedule (one CTA = BM query rows of one (batch, head)): WARPS warps each own BM/WARPS rows (MT = rows/16
// MMA row tiles; the defaults give 32 rows per warp, as FlashAttention-2 does). The Q tile stays in shared
// memory and is re-read by ldmatrix for every key chunk (32 rows per warp at d = 128 leave no registers to
// hold it). K and V tiles of BN keys are double-buffered: at the top of tile j one __syncthreads, then the
// 16-byte cp.async copies of tile j+1 are issued and overlap all of tile j's compute. Each tile is computed
// in chunks of KC keys: S = Q·Kᵀ (mma m16n8k16), s = score(S, q, k), out-of-range keys → −inf, online
// softmax in registers (running max m, running sum l, O rescaled by 2^(c·(m_old − m_new))), P packed to
// fp16/bf16 in registers as the A operand of O += P·V (V by ldmatrix.trans). Shared-memory rows are
// XOR-swizzled in 16-byte chunks (chunk ^= row % 8): every ldmatrix, cp.async and epilogue access is
// bank-conflict-free without padding. The epilogue divides by l, stages the warp's rows through its own part
// of the Q buffer and writes them with coalesced 16-byte stores; rows ≥ t_q are not written.
// Shared memory: (BM + 4·BN)·D·2 bytes (D = 128 defaults: 64 KB, two CTAs per SM on H100/H200 and A100).
#pragma once
#include <type_traits>

#include "tile.cuh"

namespace tsa {

// The first key a query tile starting at row q0 must read: 0, or for a Score promising a window, the first
// key of the BN-key tile holding key q0 − window (every key before it is −inf for rows ≥ q0).
template <class Score, class = void> struct Window {
    static constexpr bool windowed = false;
    static __host__ __device__ int first_tile(int, int) { return 0; }
};
template <class Score> struct Window<Score, decltype((void)Score::window)> {
    static constexpr bool windowed = true;
    static __host__ __device__ int first_tile(int q0, int bn) {
        const double lo = static_cast<double>(q0) - Score::window;   // keys < lo are masked
        const double tiles = lo / bn;                                 // a huge negative window: every tile
        return lo > 0 ? (tiles < 2147483647.0 ? static_cast<int>(tiles) : 2147483647) : 0;
    }
};

// ---- stock score functors ------------------------------------------------------------------------
struct ScaleScore {  // s = dot · scale
    static constexpr bool causal = false;
    float scale;
    __device__ __forceinline__ float operator()(float dot, int, int) const { return dot * scale; }
};
struct CausalScaleScore {  // s = dot · scale, −inf where k > q + offset; offset = t_kv − t_q (bottom-right)
    static constexpr bool causal = true;
    float scale;
    int offset;
    static CausalScaleScore make(float scale, int t_q, int t_kv) { return {scale, t_kv - t_q}; }
    __device__ __forceinline__ float operator()(float dot, int q, int k) const {
        return k > q + offset ? -INFINITY : dot * scale;
    }
};
struct CausalTopLeftScore {  // s = dot · scale, −inf where k > q (top-left: t_kv ≥ t_q for the tile skip)
    static constexpr bool causal = true, masks_future = true;
    float scale;
    __device__ __forceinline__ float operator()(float dot, int q, int k) const { return k > q ? -INFINITY : dot * scale; }
    __device__ __forceinline__ float unmasked(float dot, int, int) const { return dot * scale; }
};
struct SoftcapScore {  // s = cap · tanh(dot · scale / cap)   (Gemma-2 style logit soft-capping)
    static constexpr bool causal = false;
    float scale_over_cap;  // scale / cap
    float cap;
    static SoftcapScore make(float scale, float cap) { return {scale / cap, cap}; }
    __device__ __forceinline__ float operator()(float dot, int, int) const {
        return cap * tst::fast_tanh(dot * scale_over_cap);
    }
};

// ---- parameters ----------------------------------------------------------------------------------
template <typename T, class Score> struct AttnParams {
    const T *q;  // (batch, n_q_heads, t_q, d)
    const T *k;  // (batch, n_kv_heads, t_kv, d)
    const T *v;  // (batch, n_kv_heads, t_kv, d)
    T *o;        // (batch, n_q_heads, t_q, d)
    int64_t q_batch_stride, q_head_stride, q_seq_stride;  // in elements; head dim is contiguous
    int64_t k_batch_stride, k_head_stride, k_seq_stride;
    int64_t v_batch_stride, v_head_stride, v_seq_stride;
    int64_t o_batch_stride, o_head_stride, o_seq_stride;
    int batch, n_q_heads, n_kv_heads;
    int t_q, t_kv;
    int d;    // the head dim: the template's D, or for the tiled kernels a multiple of 8 below it (zero-padded)
    float c;  // weights are 2^(c·(s − max s)); c > 0 (log2(e) for softmax)
    Score score;
};

// Default tiles per head dim (4 warps, 32 rows per warp; registers allow two CTAs per SM).
template <int D> struct AttnConfig;
// BN keys per smem tile (one __syncthreads per tile), computed in chunks of KC keys. D = 128 with BN = 64
// (KC = 32) spills a few loop-invariant registers (ptxas, CUDA 13.0), so the default is BN = KC = 32; so does
// D = 256 with BN = 64 on sm_80 (28 bytes; KC = 16 no better), hence BN = KC = 32 there too (98 KB of smem).
template <> struct AttnConfig<64> { static constexpr int BM = 128, BN = 128, KC = 64, WARPS = 4; };
template <> struct AttnConfig<128> { static constexpr int BM = 128, BN = 32, KC = 32, WARPS = 4; };
template <> struct AttnConfig<192> { static constexpr int BM = 64, BN = 32, KC = 32, WARPS = 4; };
template <> struct AttnConfig<256> { static constexpr int BM = 64, BN = 32, KC = 32, WARPS = 4; };

template <typename T, int D, int BM, int BN, int KC, int WARPS> struct AttnTile {
    static constexpr int THREADS = WARPS * 32;
    static constexpr int ROWS = BM / WARPS;  // query rows per warp
    static constexpr int MT = ROWS / 16;     // 16-row MMA tiles per warp
    static constexpr int NC = KC / 8;        // 8-key MMA column tiles of S (one chunk of KC keys)
    static constexpr int DT = D / 8;         // 8-wide MMA column tiles of O
    static constexpr int CPR = D / 8;        // 16-byte chunks per row
    static constexpr int Q_ELEMS = BM * D, KV_ELEMS = BN * D;
    static constexpr size_t SMEM_BYTES = (size_t)(Q_ELEMS + 4 * KV_ELEMS) * sizeof(T);
    static_assert(sizeof(T) == 2, "attention: T must be __half or __nv_bfloat16");
    static_assert(D % 64 == 0, "attention: head dim D must be a multiple of 64 (8 swizzled 16-byte chunks)");
    static_assert(BM % (16 * WARPS) == 0, "attention: BM must be a multiple of 16 * WARPS");
    static_assert(KC % 16 == 0 && BN % KC == 0, "attention: chunk KC must be a multiple of 16 dividing BN");
    static_assert((BM * CPR) % THREADS == 0 && (BN * CPR) % THREADS == 0, "attention: tile rows vs threads");
    static_assert(MT * (DT + NC) * 4 <= 200, "attention: O and S accumulators would not fit in registers");
};

// ---- tile helpers --------------------------------------------------------------------------------
// Element offset of 16-byte chunk `chunk` of row `row` in a swizzled [rows][D] tile.
template <int D> __device__ __forceinline__ int swz(int row, int chunk) {
    return row * D + ((chunk ^ (row & 7)) << 3);
}

// ROWS×D tile global → shared (swizzled) with 16-byte cp.async; rows ≥ rows_valid and 16-byte chunks ≥
// chunks_valid (a head dim below D: the padding) are zero-filled.
template <int ROWS, int D, int THREADS, typename T>
__device__ __forceinline__ void load_tile(T *s, const T *g, int64_t stride, int rows_valid, int chunks_valid, int tid) {
    constexpr int CPR = D / 8;
#pragma unroll
    for (int it = 0; it < ROWS * CPR / THREADS; it++) {
        const int i = tid + it * THREADS, r = i / CPR, c = i % CPR;
        const bool ok = r < rows_valid && c < chunks_valid;
        tst::cp_async16(s + swz<D>(r, c), ok ? g + (int64_t)r * stride + c * 8 : g, ok);
    }
}

// Byte offset in a swizzled [rows][D] tile of chunk c0 + 2a + 8b of row `row` (c0 ∈ {0,1}, a ∈ [0,4)):
// the swizzle only touches bits 4–6 of the offset, so it is row·2D + ((c0 ^ row%8)·16 ^ 32a) + 128b,
// and with row, c0 fixed per lane there are four such values per lane; b and whole-16-row steps become
// ldmatrix immediates. Used for every ldmatrix below.
template <int D> __device__ __forceinline__ uint32_t swz_bytes(int row, int c0, int a) {
    return (uint32_t)(row * D * 2) + ((uint32_t)((c0 ^ (row & 7)) << 4) ^ (uint32_t)(a << 5));
}

// S[MT][NT] (this warp's rows × BN keys) = Q_warp · K_tileᵀ; q_s, k_s are shared-window addresses.
template <typename T, int D, int MT, int NT>
__device__ __forceinline__ void qk_tile(float (&s)[MT][NT][4], uint32_t q_s, uint32_t k_s, int lane) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[mt][nt][i] = 0.f;
    const int rq = lane % 16, cq = lane / 16;                       // A: rows 0–15, chunk pairs
    const int rk = lane % 8 + (lane / 16) * 8, ck = (lane / 8) % 2;  // B: two 8-key tiles × k 0–7, 8–15
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            tst::ldmatrix_x4_at(a[mt], q_s + swz_bytes<D>(rq, cq, kk % 4) + mt * 16 * D * 2 + (kk / 4) * 128);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t kb[4];
            tst::ldmatrix_x4_at(kb, k_s + swz_bytes<D>(rk, ck, kk % 4) + np * 16 * D * 2 + (kk / 4) * 128);
            const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                tst::mma16816<T>(s[mt][2 * np], a[mt], b0);
                tst::mma16816<T>(s[mt][2 * np + 1], a[mt], b1);
            }
        }
    }
}

// Whether Score promises s = k > q ? −inf : unmasked(dot, q, k) (masks_future, above).
template <class S, class = void> struct MasksFuture : std::false_type {};
template <class S> struct MasksFuture<S, std::void_t<decltype(S::masks_future)>> : std::bool_constant<S::masks_future> {};
// Whether a kernel of head dim D sets its masked scores to −inf apart, in a uniform branch on the tiles that
// need it (the last tile's keys ≥ t_kv; the diagonal's keys after the query for a masks_future functor,
// computed unmasked everywhere else), rather than by a select a score: where the softmax's work per score is a
// large share (D ≤ 128: 6-12% faster at d = 128 and 64, bench/NOTES.md runs 93 and 95); at D = 256 the MMAs
// dominate and the branch cost 5-9%.
template <int D> constexpr bool kMaskApart = D <= 128;
template <class S, int D> constexpr bool kSplitMask = MasksFuture<S>::value && kMaskApart<D>;
// A score as the kernels compute it for every key: unmasked under kSplitMask (the keys after the query are
// then set to −inf apart, on the tiles that have any: keys_after), else operator().
template <class S, int D> __device__ __forceinline__ float score_main(const S &score, float dot, int q, int k) {
    if constexpr (kSplitMask<S, D>) return score.unmasked(dot, q, k);
    else return score(dot, q, k);
}
// Whether Score also scores two adjacent keys in one call (optional: bool pair_ok() and float2 pair(float dot0,
// float dot1, int q, int k) for keys k and k + 1, both < t_kv, when pair_ok(); unmasked_pair likewise when it has
// unmasked). The emitter writes them for functors that read a score tensor: two keys' elements in one load,
// where pair_ok() proves them aligned. The kernels take the pairs on tiles without keys past t_kv (a uniform
// branch around the whole tile, so that the loads stay free to be scheduled early: a branch per pair inside
// the unrolled loop made them wait one by one, 2-3x slower, bench/NOTES.md run 103).
template <class S, class = void> struct ScoresPairs : std::false_type {};
template <class S> struct ScoresPairs<S, std::void_t<decltype(&S::pair)>> : std::true_type {};
template <class S> __device__ __forceinline__ bool pairs_now(const S &score, bool keys_past_end) {
    if constexpr (ScoresPairs<S>::value) return !keys_past_end && score.pair_ok();
    else return (void)score, (void)keys_past_end, false;
}
// score_main for keys k and k + 1 (under pairs_now; two calls for a functor without the pair form).
template <class S, int D>
__device__ __forceinline__ float2 score_main2(const S &score, float dot0, float dot1, int q, int k) {
    if constexpr (!ScoresPairs<S>::value)
        return make_float2(score_main<S, D>(score, dot0, q, k), score_main<S, D>(score, dot1, q, k + 1));
    else if constexpr (kSplitMask<S, D>) return score.unmasked_pair(dot0, dot1, q, k);
    else return score.pair(dot0, dot1, q, k);
}
// Whether keys [k0, k0 + keys) hold one after a row from q_first on that score_main left unmasked.
template <class S, int D> __device__ __forceinline__ bool keys_after(int k0, int keys, int q_first) {
    return kSplitMask<S, D> && k0 + keys - 1 > q_first;
}

// s ← score(s, q, k); with CHECK_KV also −inf for keys k ≥ t_kv (the partial last tile).
template <bool CHECK_KV, int D, class Score, int MT, int NT>
__device__ __forceinline__ void score_tile(float (&s)[MT][NT][4], const Score &score, int q0, int k0, int t_kv,
                                           int lane) {
    if (pairs_now(score, CHECK_KV)) {   // elements i and i + 1: keys k and k + 1 of row q
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i += 2) {
                    const int q = q0 + mt * 16 + lane / 4 + (i / 2) * 8, k = k0 + nt * 8 + (lane % 4) * 2;
                    const float2 x = score_main2<Score, D>(score, s[mt][nt][i], s[mt][nt][i + 1], q, k);
                    s[mt][nt][i] = x.x, s[mt][nt][i + 1] = x.y;
                }
    } else {
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int q = q0 + mt * 16 + lane / 4 + (i / 2) * 8, k = k0 + nt * 8 + (lane % 4) * 2 + i % 2;
                    float x = score_main<Score, D>(score, s[mt][nt][i], q, k);
                    if (CHECK_KV && k >= t_kv) x = -INFINITY;
                    s[mt][nt][i] = x;
                }
    }
    if (keys_after<Score, D>(k0, NT * 8, q0))   // the diagonal: a masks_future functor's later keys
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const int q = q0 + mt * 16 + lane / 4 + (i / 2) * 8, k = k0 + nt * 8 + (lane % 4) * 2 + i % 2;
                    if (k > q) s[mt][nt][i] = -INFINITY;
                }
}

// Online softmax step: update the running max m and sum l of each row, rescale O, turn s into weights p.
// Row r of MMA tile mt is accumulator elements 2r, 2r+1; the four lanes of a quad share a row.
template <int MT, int NT, int DT>
__device__ __forceinline__ void softmax_tile(float (&s)[MT][NT][4], float (&o)[MT][DT][4], float (&m)[MT][2],
                                             float (&l)[MT][2], float c) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = m[mt][r];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
            mx = tst::quad_max(mx);
            // A row with nothing unmasked yet keeps m = −inf: subtract 0 instead, so that every weight and
            // the rescale factor come out as exp2(−inf) = 0 rather than NaN.
            const float ms = mx == -INFINITY ? 0.f : mx * c;
            const float alpha = tst::fast_exp2(fmaf(m[mt][r], c, -ms));
            m[mt][r] = mx;
#pragma unroll
            for (int dt = 0; dt < DT; dt++) {
                o[mt][dt][2 * r] *= alpha;
                o[mt][dt][2 * r + 1] *= alpha;
            }
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int j = 0; j < 2; j++) {
                    const float p = tst::fast_exp2(fmaf(s[mt][nt][2 * r + j], c, -ms));
                    s[mt][nt][2 * r + j] = p;
                    sum += p;
                }
            l[mt][r] = l[mt][r] * alpha + sum;  // per-lane partial sum; the quad is summed once at the end
        }
}

// P (weights in the score registers) → fp16/bf16 A fragments of P·V: keys 16kk..16kk+15 are S column
// tiles 2kk and 2kk+1. Packing before the next loads halves the registers P holds across them.
template <typename T, int MT, int NT>
__device__ __forceinline__ void pack_p(uint32_t (&pa)[MT][NT / 2][4], const float (&p)[MT][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int kk = 0; kk < NT / 2; kk++) {
            pa[mt][kk][0] = tst::pack2<T>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
            pa[mt][kk][1] = tst::pack2<T>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
            pa[mt][kk][2] = tst::pack2<T>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
            pa[mt][kk][3] = tst::pack2<T>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
        }
}

// O[MT][DT] += P · V_tile, V by ldmatrix.trans from the shared-window address v_s.
template <typename T, int D, int MT, int NT, int DT>
__device__ __forceinline__ void pv_tile(float (&o)[MT][DT][4], const uint32_t (&pa)[MT][NT / 2][4], uint32_t v_s,
                                        int lane) {
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
#pragma unroll
        for (int np = 0; np < DT / 2; np++) {
            uint32_t vb[4];
            tst::ldmatrix_x4_trans_at(vb, v_s + swz_bytes<D>(lane % 16, lane / 16, np % 4) + kk * 16 * D * 2 + (np / 4) * 128);
            const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                tst::mma16816<T>(o[mt][2 * np], pa[mt][kk], b0);
                tst::mma16816<T>(o[mt][2 * np + 1], pa[mt][kk], b1);
            }
        }
    }
}

// ---- the kernel ----------------------------------------------------------------------------------
// Grid: x = query head, y = query tile (reversed under causal: the longest rows start first), z = batch. One
// CTA's work (attention_kernel, below, runs it).
template <typename T, int D, int BM, int BN, int KC, int WARPS, class Score>
__device__ __forceinline__ void attention_block(const AttnParams<T, Score> &p) {
    using C = AttnTile<T, D, BM, BN, KC, WARPS>;
    constexpr int MT = C::MT, NC = C::NC, DT = C::DT;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *sQ = reinterpret_cast<T *>(smem_raw);  // [BM][D]
    T *sK = sQ + C::Q_ELEMS;                  // [2][BN][D]
    T *sV = sK + 2 * C::KV_ELEMS;             // [2][BN][D]
    tst::pdl_wait();                          // tile.cuh: the kernel before this one is done

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int h = blockIdx.x, b = blockIdx.z;
    const int q0 = (Score::causal ? gridDim.y - 1 - blockIdx.y : blockIdx.y) * BM;
    const int hk = h / (p.n_q_heads / p.n_kv_heads);
    const Score score = tst::score_at(p.score, b, h);
    const T *gQ = p.q + b * p.q_batch_stride + h * p.q_head_stride + q0 * p.q_seq_stride;
    const T *gK = p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const T *gV = p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    T *gO = p.o + b * p.o_batch_stride + h * p.o_head_stride;

    int kv_end = p.t_kv;  // keys this tile can see
    if (Score::causal) kv_end = min(kv_end, max(0, min(q0 + BM, p.t_q) + p.t_kv - p.t_q));
    const int n_tiles = (kv_end + BN - 1) / BN;

    auto load_kv = [&](int j) {  // tile j → buffer j % 2
        if (j < n_tiles) {
            load_tile<BN, D, C::THREADS>(sK + (j % 2) * C::KV_ELEMS, gK + (int64_t)j * BN * p.k_seq_stride,
                                         p.k_seq_stride, p.t_kv - j * BN, p.d / 8, tid);
            load_tile<BN, D, C::THREADS>(sV + (j % 2) * C::KV_ELEMS, gV + (int64_t)j * BN * p.v_seq_stride,
                                         p.v_seq_stride, p.t_kv - j * BN, p.d / 8, tid);
        }
        tst::cp_async_commit();
    };
    if (n_tiles > 0) load_tile<BM, D, C::THREADS>(sQ, gQ, p.q_seq_stride, p.t_q - q0, p.d / 8, tid);
    load_kv(0);  // one commit group: Q, K_0, V_0

    float o[MT][DT][4], m[MT][2], l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int i = 0; i < 4; i++) o[mt][dt][i] = 0.f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.f;
    }
    // Shared-window addresses: this warp's Q rows (row & 7 unchanged: ROWS % 8 == 0), K and V buffer 0.
    const uint32_t q_s = tst::smem_addr(sQ + warp * C::ROWS * D), k_s = tst::smem_addr(sK), v_s = tst::smem_addr(sV);
    const int qw0 = q0 + warp * C::ROWS;

    for (int j = 0; j < n_tiles; j++) {
        tst::cp_async_wait<0>();  // tile j (and Q) landed for this thread …
        __syncthreads();          // … and for all; every warp is done with tile j-1, whose buffer is refilled:
        load_kv(j + 1);           // the copy overlaps all of tile j's compute
        const uint32_t k_t = k_s + (j % 2) * C::KV_ELEMS * 2, v_t = v_s + (j % 2) * C::KV_ELEMS * 2;
        // KC-key chunks (S of a whole tile need not fit in registers); chunks past kv_end are skipped.
        const int n_ch = BN == KC ? 1 : min(BN / KC, (kv_end - j * BN + KC - 1) / KC);
#pragma unroll 1
        for (int ch = 0; ch < n_ch; ch++) {
            const int k0 = j * BN + ch * KC;
            float s[MT][NC][4];
            qk_tile<T, D, MT, NC>(s, q_s, k_t + ch * KC * D * 2, lane);
            if (k0 + KC > p.t_kv) score_tile<true, D>(s, score, qw0, k0, p.t_kv, lane);
            else score_tile<false, D>(s, score, qw0, k0, p.t_kv, lane);
            softmax_tile(s, o, m, l, p.c);
            uint32_t pa[MT][NC / 2][4];
            pack_p<T>(pa, s);
            pv_tile<T, D, MT, NC, DT>(o, pa, v_t + ch * KC * D * 2, lane);
        }
    }
    tst::cp_async_wait<0>();  // nothing may land in sQ after the epilogue starts writing it
    tst::pdl_trigger();       // the keys are streamed: the next kernel may launch
    __syncthreads();

    // Epilogue: O / l → this warp's rows of sQ (swizzled) → 16-byte coalesced stores of rows < t_q.
    T *sOw = sQ + warp * C::ROWS * D;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float sum = tst::quad_sum(l[mt][r]);
            const float inv = sum > 0.f ? 1.f / sum : 0.f;  // fully masked row → 0
            const int row = mt * 16 + lane / 4 + r * 8;
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
                tst::store_pair<T>(sOw + swz<D>(row, dt) + (lane % 4) * 2, o[mt][dt][2 * r] * inv,
                                   o[mt][dt][2 * r + 1] * inv);
        }
    __syncwarp();
#pragma unroll
    for (int it = 0; it < C::ROWS * C::CPR / 32; it++) {
        const int i = lane + it * 32, r = i / C::CPR, c = i % C::CPR;
        if (qw0 + r < p.t_q && c * 8 < p.d)   // the padding columns of a head dim below D are not stored
            *reinterpret_cast<int4 *>(gO + (int64_t)(qw0 + r) * p.o_seq_stride + c * 8) =
                *reinterpret_cast<const int4 *>(sOw + swz<D>(r, c));
    }
}
// REACH (tst::Reach): a fallback's kernel is compiled as a trap in the device code that never launches it.
template <typename T, int D, int BM, int BN, int KC, int WARPS, class Score, int REACH = tst::kAnyCode>
__global__ void __launch_bounds__(WARPS * 32) attention_kernel(const AttnParams<T, Score> p) {
    if constexpr (tst::reached_here(REACH)) attention_block<T, D, BM, BN, KC, WARPS, Score>(p);
    else __trap();
}

// ---- host launch helper --------------------------------------------------------------------------
template <typename T, int D, int BM, int BN, int KC, int WARPS> constexpr size_t attention_smem_bytes() {
    return AttnTile<T, D, BM, BN, KC, WARPS>::SMEM_BYTES;
}

// Whether a kernel of head dim D takes head dim d: D itself, or a multiple of 8 below it — every kernel here (and
// attention_sm90.cuh's) zero-pads the columns to D and stores only d of O's.
template <int D> constexpr bool head_dim_fits(int d) { return d >= 8 && d <= D && d % 8 == 0; }

// The checks every attention launch makes (both kernels here and attention_sm90.cuh's): cudaSuccess with
// *empty set when there is nothing to compute; cudaErrorInvalidValue for a bad size (a head dim head_dim_fits
// refuses), head count, scale or missing pointer; cudaErrorMisalignedAddress when a pointer or stride breaks the
// 16-byte copies.
template <int D, typename T, class Score>
cudaError_t check_attention(const AttnParams<T, Score> &p, bool *empty) {
    *empty = false;
    if (!head_dim_fits<D>(p.d) || p.batch < 0 || p.t_q < 0 || p.t_kv < 0 || p.n_q_heads <= 0 || p.n_kv_heads <= 0 ||
        p.n_q_heads % p.n_kv_heads != 0 || !(p.c > 0.f))
        return cudaErrorInvalidValue;
    if (p.batch == 0 || p.t_q == 0) return *empty = true, cudaSuccess;
    if (!p.q || !p.k || !p.v || !p.o) return cudaErrorInvalidValue;
    auto misaligned = [](const void *ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
    const int64_t strides[12] = {p.q_batch_stride, p.q_head_stride, p.q_seq_stride, p.k_batch_stride,
                                 p.k_head_stride,  p.k_seq_stride,  p.v_batch_stride, p.v_head_stride,
                                 p.v_seq_stride,   p.o_batch_stride, p.o_head_stride, p.o_seq_stride};
    for (int64_t s : strides)
        if (s % 8 != 0) return cudaErrorMisalignedAddress;
    if (misaligned(p.q) || misaligned(p.k) || misaligned(p.v) || misaligned(p.o)) return cudaErrorMisalignedAddress;
    return cudaSuccess;
}

// Checks the parameters, raises the kernel's shared-memory limit, launches; returns cudaGetLastError().
// Never prints or exits. D: the head dim p.d, or a larger one whose padding columns are zero (p.d a multiple of
// 8); tiles default to AttnConfig<D>.
// REACH: which device code launches this instantiation (tst::Reach; a fallback's kernel is a trap elsewhere).
template <int D, int BN> constexpr int kDefaultKC = BN < AttnConfig<D>::KC ? BN : AttnConfig<D>::KC;
template <int D, int BM = AttnConfig<D>::BM, int BN = AttnConfig<D>::BN, int WARPS = AttnConfig<D>::WARPS,
          int KC = kDefaultKC<D, BN>, int REACH = tst::kAnyCode, typename T, class Score>
cudaError_t launch_attention(const AttnParams<T, Score> &p, cudaStream_t stream) {
    using C = AttnTile<T, D, BM, BN, KC, WARPS>;
    bool empty;
    if (cudaError_t e = check_attention<D>(p, &empty); e != cudaSuccess || empty) return e;
    const int64_t q_tiles = ((int64_t)p.t_q + BM - 1) / BM;
    if (q_tiles > 65535 || p.batch > 65535 || p.n_q_heads > (1 << 30)) return cudaErrorInvalidConfiguration;

    auto kernel = attention_kernel<T, D, BM, BN, KC, WARPS, Score, REACH>;
    static std::atomic<unsigned long long> smem_set{0};  // devices where the limits are set
    tst::DeviceFacts f;
    cudaError_t err = tst::device_facts(&f);
    if (err == cudaSuccess) err = tst::set_smem_once(kernel, (int)C::SMEM_BYTES, f.dev, smem_set, 100);
    if (err != cudaSuccess) return err;
    return tst::launch(kernel, dim3(p.n_q_heads, (unsigned)q_tiles, p.batch), dim3(C::THREADS), C::SMEM_BYTES, stream, 1, p);
}

// ---- decode: few query rows, the keys split over warps and a cluster (flash-decoding) --------------
// For t_q ≤ kDecodeRows query rows a (batch, head) — a decode step: one new token, or the query heads of a
// GQA group as rows — the kernel above would run one CTA a head, each streaming the whole cache, which
// leaves most SMs idle at small batch (8 CTAs for one Llama-3-8B sequence: 54 µs for 17 MB on the H200,
// bench/NOTES.md run 53). Here one CTA owns the 16 rows of a (batch, head, query tile); each of its WARPS
// warps, and each of the SPLIT CTAs of its cluster, takes a contiguous share of the keys and streams it
// through a cp.async ring of its own (STAGES steps of 16 keys of K and V, swizzled as above), keeping an
// online-softmax partial per row: O unnormalised, running max m, sum l. The CTA's warps share one copy of
// Q, held in registers at D ≤ 128. The partials of the valid rows (< t_q) are merged in shared memory
// across the warps; each CTA then stores every 8-column chunk of its merged partial into the shared memory
// of the cluster rank that owns the chunk (distributed shared memory: chunk i is rank i % SPLIT's), and
// after one cluster barrier each rank merges, normalises and writes its chunks from its own shared memory:
// no workspace, one launch. (Pushing costs no round trip and needs no barrier before exiting; the ranks
// reading each other's partials, then a second barrier, took ~2.4 µs of a 10.8 µs kernel at Llama-3-8B's
// batch 1, bench/results/decode-attn-helper.md.)
// What a step costs is what bounds this kernel (each warp is one dependent chain, bench/NOTES.md run 73), so
// a step is kept short: the copies' addresses are set up once per lane, Q is not re-read, the two halves of
// Q·Kᵀ accumulate apart (two chains of D/32 MMAs, not one of D/16), and O is rescaled only when a row's
// running max grew (rare past the first steps).
// The launch helper picks SPLIT (1, 2, 4, 8 or 16 — a non-portable cluster size; 1 before Hopper) so that
// the CTAs cover the SMs while every warp keeps at least kDecodeMinSteps steps of keys and every cluster is
// resident at once. Same functors, masks, layouts, edges and fully-masked rule (rows written as 0) as the
// kernel above. D is 64, 128 or 256 (a key row's D/8 16-byte chunks divide a warp); a head dim p.d below D
// (any multiple of 8: 96, 80, 192, ...) runs in the next of them, the lanes of its padding chunks zero-filling
// without reading (no extra bytes streamed) and O's padding columns not stored.
// Shared memory: the chunks received from the cluster (SPLIT × (16·D·4 / SPLIT + 128) bytes: o, m, l) + Q
// (16·D·2 bytes) + WARPS × STAGES·2·16·D·2 bytes (the warps' K/V rings; after its loop a warp's ring holds
// its fp32 partial, 16·(D + 8)·4 + 128 bytes). D = 128 with the defaults (4 warps, 3 stages): 108–110 KB,
// two CTAs an SM, so that clusters of 16 are resident.
constexpr int kDecodeRows = 16, kDecodeKeys = 16, kDecodeMinSteps = 4, kDecodeMaxSplit = 16;
constexpr int kDecodePortableSplit = 8;  // larger clusters need cudaFuncAttributeNonPortableClusterSizeAllowed
// 4 warps of 3 stages at D ≤ 128 (two CTAs an SM at D = 128), 2 stages at D = 256 (one CTA an SM). Of 12
// warps × stages variants at Llama-3-8B's batch 1, 4 and 16, 4 × 4 and 8 × 3 were 0.7 µs faster at batch 1
// but take one CTA an SM, which 32 heads of one row at batch 16 lose 35% by (bench/results/decode-attn-helper.md).
template <int D> struct DecodeConfig {
    static constexpr int WARPS = 4, STAGES = D <= 128 ? 3 : 2;
};
template <int D, int WARPS, int STAGES, int SPLIT = 1> struct DecodeTile {
    static constexpr int CPR = D / 8;                                   // 16-byte chunks a row
    static constexpr int STEP_BYTES = kDecodeKeys * D * 2;              // K (or V) of one step
    static constexpr int STAGE_BYTES = 2 * STEP_BYTES;                  // K then V
    static constexpr int WARP_BYTES = STAGES * STAGE_BYTES;             // a warp's ring
    static constexpr int Q_BYTES = kDecodeRows * D * 2;                 // the CTA's Q tile
    static constexpr int PART_STRIDE = D + 8;                           // floats a partial's row (8: no bank conflicts)
    static constexpr int PART_BYTES = kDecodeRows * PART_STRIDE * 4 + 2 * kDecodeRows * 4;  // o, m[16], l[16]
    // What a rank receives: m[16], l[16] from each rank, then slot s of each rank (8 floats of chunk s·SPLIT + rank).
    static constexpr int SLOTS = (kDecodeRows * CPR + SPLIT - 1) / SPLIT;
    static constexpr int RECV_ML_BYTES = SPLIT * 2 * kDecodeRows * 4, RECV_BYTES = RECV_ML_BYTES + SPLIT * SLOTS * 32;
    static constexpr size_t SMEM_BYTES = RECV_BYTES + Q_BYTES + (size_t)WARPS * WARP_BYTES;
    static constexpr bool Q_IN_REGS = D <= 128;  // 2·D/4 registers a lane; at D = 256 O alone takes 128
    static_assert(D % 64 == 0 && 256 % D == 0 && STAGES >= 2, "decode attention: D 64, 128 or 256 (a row's 16-byte chunks divide a warp), at least 2 stages");
    static_assert(WARP_BYTES >= PART_BYTES, "decode attention: a warp's partial must fit its ring's bytes");
    static_assert(RECV_BYTES % 128 == 0, "decode attention: Q and the rings start 128-byte aligned (the swizzle)");
};

// Weight 2^(c·(m − top)) of a partial whose running max is m, in a merge whose max is top (0 if all masked).
__device__ __forceinline__ float merge_weight(float m, float top, float c) {
    return top == -INFINITY ? 0.f : tst::fast_exp2(c * (m - top));
}

// 16 bytes global → shared (a shared-window address); with zfill, only when ok, else 16 zero bytes.
__device__ __forceinline__ void decode_cp16(uint32_t dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void decode_cp16_zfill(uint32_t dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
}

// The generic address of `local` (this CTA's shared memory) in cluster rank r's shared memory, for stores
// (tst::cluster_map is for loads); the CTA's own address without a cluster.
template <int SPLIT> __device__ __forceinline__ float *decode_at_rank(float *local, int r) {
    if constexpr (SPLIT == 1) {
        (void)r;
        return local;
    } else {
        return const_cast<float *>(tst::cluster_map(local, r));
    }
}

// The cluster barrier in halves (sm_90+), for the stores above: a CTA may reach another's shared memory only
// once that CTA is running, which every CTA says by arriving at the kernel's start (relaxed: nothing to
// publish) and the pushing CTA checks by waiting before its first store (long since true by then).
__device__ __forceinline__ void decode_cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
__device__ __forceinline__ void decode_cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}

// One warp's K/V stream: step j (16 keys from key k0) → stage j % STAGES of its ring, one commit group a
// step. A warp-wide copy covers RPI rows (rows r0 + RPI·i, chunk c of each: lane = r0·CPR + c), so the
// lane's source offsets and swizzled destination are computed once: the swizzle only XORs bits 4–6 of the
// destination with (row & 7), and (r0 + RPI·i) & 7 = (r0 & 7) ^ (RPI·i & 7) (r0 < RPI, both powers of 2),
// a constant per i. A step is then a 64-bit add and one 16-byte cp.async per copy (zero-filling rows past
// the warp's last key only in its last step).
template <typename T, int D, int STAGES> struct DecodeStream {
    static constexpr int CPR = D / 8, RPI = 32 / CPR, COPIES = kDecodeKeys / RPI;  // copies a tile a lane
    static constexpr int STEP_BYTES = kDecodeKeys * D * 2;
    const T *k, *v;      // this lane's element of key 0
    int64_t ks, vs;      // RPI rows of K, V
    int64_t k_seq, v_seq;
    uint32_t ring, off;  // the ring's shared address; the lane's swizzled byte offset in a tile (row r0)
    int r0;
    bool col_ok;         // the lane's chunk is a column of the head (< d): else its copies zero-fill, reading nothing

    __device__ __forceinline__ DecodeStream(const T *gK, const T *gV, int64_t k_stride, int64_t v_stride,
                                            uint32_t ring, int lane, int d) {
        r0 = lane / CPR;
        const int c = lane % CPR;
        col_ok = c * 8 < d;
        const int col = col_ok ? c * 8 : 0;   // a padding chunk's address stays inside the row (never read)
        k = gK + r0 * k_stride + col, v = gV + r0 * v_stride + col;
        ks = RPI * k_stride, vs = RPI * v_stride, k_seq = k_stride, v_seq = v_stride;
        this->ring = ring, off = (uint32_t)(r0 * D * 2) + ((uint32_t)(c ^ (r0 & 7)) << 4);
    }
    // Byte offset in a tile of the lane's copy i: rows RPI·i further, its chunk XORed with (RPI·i) & 7.
    __device__ __forceinline__ uint32_t at(int i) const {
        return (uint32_t)(i * RPI * D * 2) + (off ^ (uint32_t)(((i * RPI) & 7) << 4));
    }
    // Step j, keys [k0, k0 + rows) of the warp's range (rows < 16 only in its last step).
    __device__ __forceinline__ void load(int j, int k0, int rows) const {
        const uint32_t st = ring + (uint32_t)((j % STAGES) * 2 * STEP_BYTES);
        const T *pk = k + k0 * k_seq, *pv = v + k0 * v_seq;
        if (rows >= kDecodeKeys && col_ok) {
#pragma unroll
            for (int i = 0; i < COPIES; i++) {
                decode_cp16(st + at(i), pk + i * ks);
                decode_cp16(st + STEP_BYTES + at(i), pv + i * vs);
            }
        } else {  // rows past the last key and padding columns read nothing; their address is row k0's (in the tensor)
            const T *k_row0 = pk - r0 * k_seq, *v_row0 = pv - r0 * v_seq;
#pragma unroll
            for (int i = 0; i < COPIES; i++) {
                const bool ok = col_ok && r0 + i * RPI < rows;
                decode_cp16_zfill(st + at(i), ok ? pk + i * ks : k_row0, ok);
                decode_cp16_zfill(st + STEP_BYTES + at(i), ok ? pv + i * vs : v_row0, ok);
            }
        }
    }
};

// S (16 rows × 16 keys) = Q·Kᵀ for one step: Q's A fragments from registers (qa, D ≤ 128) or from the
// swizzled Q tile at q_s, K from the tile at k_s. The k-steps alternate between two accumulator sets, so that
// the MMAs form two dependent chains, not one.
template <typename T, int D, bool Q_IN_REGS>
__device__ __forceinline__ void decode_qk(float (&s)[1][2][4], const uint32_t (&qa)[Q_IN_REGS ? D / 16 : 1][4],
                                          uint32_t q_s, uint32_t k_s, int lane) {
    float acc[2][2][4];
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[h][nt][i] = 0.f;
    const int rk = lane % 8 + (lane / 16) * 8, ck = (lane / 8) % 2;  // B: two 8-key tiles × k 0–7, 8–15
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a[4], kb[4];
        if constexpr (Q_IN_REGS) {
#pragma unroll
            for (int i = 0; i < 4; i++) a[i] = qa[kk][i];
        } else {
            tst::ldmatrix_x4_at(a, q_s + swz_bytes<D>(lane % 16, lane / 16, kk % 4) + (kk / 4) * 128);
        }
        tst::ldmatrix_x4_at(kb, k_s + swz_bytes<D>(rk, ck, kk % 4) + (kk / 4) * 128);
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        tst::mma16816<T>(acc[kk % 2][0], a, b0);
        tst::mma16816<T>(acc[kk % 2][1], a, b1);
    }
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) s[0][nt][i] = acc[0][nt][i] + acc[1][nt][i];
}

// softmax_tile for one warp's 16 rows, except that O is rescaled only when some row's running max grew (a
// warp-uniform branch; a row whose max did not grow keeps alpha = 1 exactly, in l too). Past a warp's first
// steps the max rarely grows, and the rescale is D/2 multiplies a lane, the most of a step's non-MMA work.
template <int DT>
__device__ __forceinline__ void decode_softmax(float (&s)[1][2][4], float (&o)[1][DT][4], float (&m)[1][2],
                                               float (&l)[1][2], float c) {
    float alpha[2];
    bool grew = false;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mx = m[0][r];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) mx = fmaxf(mx, fmaxf(s[0][nt][2 * r], s[0][nt][2 * r + 1]));
        mx = tst::quad_max(mx);
        const float ms = mx == -INFINITY ? 0.f : mx * c;  // as softmax_tile: never −inf − (−inf)
        const bool up = mx > m[0][r];
        alpha[r] = up ? tst::fast_exp2(fmaf(m[0][r], c, -ms)) : 1.f;
        grew |= up;
        m[0][r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const float e = tst::fast_exp2(fmaf(s[0][nt][2 * r + j], c, -ms));
                s[0][nt][2 * r + j] = e;
                sum += e;
            }
        l[0][r] = l[0][r] * alpha[r] + sum;
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
        for (int dt = 0; dt < DT; dt++)
#pragma unroll
            for (int i = 0; i < 4; i++) o[0][dt][i] *= alpha[i / 2];
    }
}

// Grid: x = query head × SPLIT (a cluster: the SPLIT CTAs of one head), y = 16-row query tile, z = batch.
template <typename T, int D, int WARPS, int STAGES, int SPLIT, class Score>
__global__ void __launch_bounds__(WARPS * 32) attention_decode_kernel(const AttnParams<T, Score> p) {
    using C = DecodeTile<D, WARPS, STAGES, SPLIT>;
    constexpr int DT = D / 8, CPR = D / 8, THREADS = WARPS * 32, PS = C::PART_STRIDE;
    extern __shared__ __align__(128) unsigned char smem_raw[];
    float *recv_ml = reinterpret_cast<float *>(smem_raw), *recv_o = recv_ml + SPLIT * 2 * kDecodeRows;
    T *sQ = reinterpret_cast<T *>(smem_raw + C::RECV_BYTES);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    unsigned char *wbase = smem_raw + C::RECV_BYTES + C::Q_BYTES + warp * C::WARP_BYTES;
    if constexpr (SPLIT > 1) decode_cluster_arrive();  // this CTA runs: the others may store into it
    tst::pdl_wait();  // tile.cuh: the kernel before this one is done

    const int h = blockIdx.x / SPLIT, rank = blockIdx.x % SPLIT, b = blockIdx.z, q0 = blockIdx.y * kDecodeRows;
    const int hk = h / (p.n_q_heads / p.n_kv_heads), rows = min(kDecodeRows, p.t_q - q0);  // rows < t_q
    const Score score = tst::score_at(p.score, b, h);
    const T *gQ = p.q + b * p.q_batch_stride + h * p.q_head_stride + q0 * p.q_seq_stride;
    const T *gK = p.k + b * p.k_batch_stride + hk * p.k_head_stride;
    const T *gV = p.v + b * p.v_batch_stride + hk * p.v_head_stride;
    T *gO = p.o + b * p.o_batch_stride + h * p.o_head_stride;

    int kv_end = p.t_kv;
    if (Score::causal) kv_end = min(kv_end, max(0, min(q0 + kDecodeRows, p.t_q) + p.t_kv - p.t_q));
    // This warp's steps [s0, s1) of 16 keys: keys [s0·16, k_hi); a window's masked steps [0, first) skipped.
    const int all_steps = (kv_end + kDecodeKeys - 1) / kDecodeKeys, parts = SPLIT * WARPS;
    const int first = min(Window<Score>::first_tile(q0, kDecodeKeys), all_steps), steps = all_steps - first;
    const int per = (steps + parts - 1) / parts, part = rank * WARPS + warp;
    const int s0 = first + min(part * per, steps), s1 = min(s0 + per, all_steps), n = s1 - s0;
    const int k_hi = min(s1 * kDecodeKeys, kv_end);

    // Q (rows ≥ t_q zero-filled) by the whole CTA: commit group 0; then the warp's first STAGES − 1 steps.
    for (int i = threadIdx.x; i < kDecodeRows * CPR; i += THREADS) {
        const int r = i / CPR, c = i % CPR;
        const bool ok = r < rows && c * 8 < p.d;   // padding columns (p.d < D) zero
        decode_cp16_zfill(tst::smem_addr(sQ + swz<D>(r, c)), ok ? gQ + (int64_t)r * p.q_seq_stride + c * 8 : gQ, ok);
    }
    tst::cp_async_commit();
    const DecodeStream<T, D, STAGES> kv(gK, gV, p.k_seq_stride, p.v_seq_stride, tst::smem_addr(wbase), lane, p.d);
    auto load_step = [&](int j) {  // one commit group either way
        if (j < n) kv.load(j, (s0 + j) * kDecodeKeys, k_hi - (s0 + j) * kDecodeKeys);
        tst::cp_async_commit();
    };
#pragma unroll
    for (int j = 0; j < STAGES - 1; j++) load_step(j);

    constexpr bool QR = C::Q_IN_REGS;
    const uint32_t q_s = tst::smem_addr(sQ), kv_s = tst::smem_addr(wbase);
    uint32_t qa[QR ? D / 16 : 1][4];
    tst::cp_async_wait<STAGES - 1>();  // this thread's part of Q landed …
    __syncthreads();                   // … and everyone's
    if constexpr (QR) {
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++)
            tst::ldmatrix_x4_at(qa[kk], q_s + swz_bytes<D>(lane % 16, lane / 16, kk % 4) + (kk / 4) * 128);
    }

    float o[1][DT][4], m[1][2] = {{-INFINITY, -INFINITY}}, l[1][2] = {{0.f, 0.f}};
#pragma unroll
    for (int dt = 0; dt < DT; dt++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[0][dt][i] = 0.f;
    for (int j = 0; j < n; j++) {
        tst::cp_async_wait<STAGES - 2>();  // step j landed for this lane …
        __syncwarp();                      // … and for the warp, which is done with step j − 1's stage:
        load_step(j + STAGES - 1);         // refilled, overlapping this step's compute
        const uint32_t k_t = kv_s + (j % STAGES) * C::STAGE_BYTES, v_t = k_t + C::STEP_BYTES;
        const int k0 = (s0 + j) * kDecodeKeys;
        float sc[1][2][4];
        decode_qk<T, D, QR>(sc, qa, q_s, k_t, lane);
        if (k0 + kDecodeKeys > k_hi) score_tile<true, D>(sc, score, q0, k0, k_hi, lane);
        else score_tile<false, D>(sc, score, q0, k0, k_hi, lane);
        decode_softmax(sc, o, m, l, p.c);
        uint32_t pa[1][1][4];
        pack_p<T>(pa, sc);
        pv_tile<T, D, 1, 2, DT>(o, pa, v_t, lane);
    }
    tst::cp_async_wait<0>();  // nothing lands in the ring any more: it becomes the warp's partial
    tst::pdl_trigger();       // the keys are streamed: the next kernel may launch
    __syncwarp();

    // This warp's partial of the valid rows → its ring: o[16][PS] fp32, then m[16], l[16].
    float *po = reinterpret_cast<float *>(wbase), *pm = po + kDecodeRows * PS, *pl = pm + kDecodeRows;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = lane / 4 + r * 8;
        const float sum = tst::quad_sum(l[0][r]);
        if (row < rows) {
#pragma unroll
            for (int dt = 0; dt < DT; dt++)
                *reinterpret_cast<float2 *>(po + row * PS + dt * 8 + (lane % 4) * 2) = make_float2(o[0][dt][2 * r], o[0][dt][2 * r + 1]);
            if (lane % 4 == 0) pm[row] = m[0][r], pl[row] = sum;
        }
    }
    __syncthreads();
    // The CTA's partial: 8-column chunks of the valid rows merged over the warps, each stored into its owner's
    // slot for this rank (chunk i: rank i % SPLIT, slot i / SPLIT), with the row's max and sum for the owner
    // (once a row an owner: by its first chunk there, the one at column chunk < SPLIT).
    auto part_of = [&](int w) {
        return reinterpret_cast<const float *>(smem_raw + C::RECV_BYTES + C::Q_BYTES + w * C::WARP_BYTES);
    };
    if constexpr (SPLIT > 1) decode_cluster_wait();  // every CTA of the cluster runs
    for (int i = threadIdx.x; i < rows * CPR; i += THREADS) {
        const int row = i / CPR, cc = i % CPR;
        float top = -INFINITY;
#pragma unroll
        for (int w = 0; w < WARPS; w++) top = fmaxf(top, part_of(w)[kDecodeRows * PS + row]);
        float4 a = make_float4(0.f, 0.f, 0.f, 0.f), z = a;
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            const float *pw = part_of(w);
            const float wt = merge_weight(pw[kDecodeRows * PS + row], top, p.c);
            const float4 *src = reinterpret_cast<const float4 *>(pw + row * PS + cc * 8);
            const float4 x = src[0], y = src[1];
            sum += pw[kDecodeRows * PS + kDecodeRows + row] * wt;
            a.x += x.x * wt, a.y += x.y * wt, a.z += x.z * wt, a.w += x.w * wt;
            z.x += y.x * wt, z.y += y.y * wt, z.z += y.z * wt, z.w += y.w * wt;
        }
        const int owner = i % SPLIT;
        float *slot = decode_at_rank<SPLIT>(recv_o, owner) + (rank * C::SLOTS + i / SPLIT) * 8;
        reinterpret_cast<float4 *>(slot)[0] = a, reinterpret_cast<float4 *>(slot)[1] = z;
        if (cc < SPLIT) {
            float *ml = decode_at_rank<SPLIT>(recv_ml, owner) + rank * 2 * kDecodeRows;
            ml[row] = top, ml[kDecodeRows + row] = sum;
        }
    }
    if constexpr (SPLIT > 1) tst::cluster_sync();  // every rank's chunks have landed where they are merged
    else __syncthreads();
    // This rank's chunks: merged over the cluster's ranks from its own shared memory, normalised, stored.
    // Nothing reads another CTA's shared memory past the barrier, so no second one is needed before exiting.
    for (int i = rank + SPLIT * (int)threadIdx.x; i < rows * CPR; i += SPLIT * THREADS) {
        const int row = i / CPR, col = (i % CPR) * 8, slot = i / SPLIT;
        float top = -INFINITY;
#pragma unroll
        for (int r = 0; r < SPLIT; r++) top = fmaxf(top, recv_ml[r * 2 * kDecodeRows + row]);
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f}, sum = 0.f;
#pragma unroll
        for (int r = 0; r < SPLIT; r++) {
            const float *src = recv_o + (r * C::SLOTS + slot) * 8;
            const float4 a = reinterpret_cast<const float4 *>(src)[0], z = reinterpret_cast<const float4 *>(src)[1];
            const float wt = merge_weight(recv_ml[r * 2 * kDecodeRows + row], top, p.c);
            sum += recv_ml[r * 2 * kDecodeRows + kDecodeRows + row] * wt;
            acc[0] += a.x * wt, acc[1] += a.y * wt, acc[2] += a.z * wt, acc[3] += a.w * wt;
            acc[4] += z.x * wt, acc[5] += z.y * wt, acc[6] += z.z * wt, acc[7] += z.w * wt;
        }
        if (col >= p.d) continue;  // a padding column (p.d < D): zero, not stored
        const float inv = sum > 0.f ? 1.f / sum : 0.f;  // fully masked row → 0
        uint32_t w4[4];
#pragma unroll
        for (int e = 0; e < 4; e++) w4[e] = tst::pack2<T>(acc[2 * e] * inv, acc[2 * e + 1] * inv);
        *reinterpret_cast<uint4 *>(gO + (int64_t)(q0 + row) * p.o_seq_stride + col) = make_uint4(w4[0], w4[1], w4[2], w4[3]);
    }
}

template <typename T, int D, int WARPS, int STAGES, int SPLIT, class Score> struct DecodeLaunch {
    static constexpr auto kernel = attention_decode_kernel<T, D, WARPS, STAGES, SPLIT, Score>;
    static constexpr size_t smem = DecodeTile<D, WARPS, STAGES, SPLIT>::SMEM_BYTES;
    // The shared-memory limit, and for clusters past the portable 8 the non-portable size, once per device.
    static cudaError_t prepare(int dev) {
        static std::atomic<unsigned long long> smem_set{0};
        if (cudaError_t e = tst::set_smem_once(kernel, (int)smem, dev, smem_set); e != cudaSuccess) return e;
        if constexpr (SPLIT > kDecodePortableSplit) {
            static std::atomic<unsigned long long> wide_set{0};
            const unsigned long long bit = dev >= 0 && dev < tst::kMaxDevices ? 1ull << dev : 0ull;
            if (bit && (wide_set.load(std::memory_order_acquire) & bit)) return cudaSuccess;
            cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
            if (e == cudaSuccess && bit) wide_set.fetch_or(bit, std::memory_order_release);
            return e;
        }
        return cudaSuccess;
    }
    static dim3 grid(const AttnParams<T, Score> &p, int64_t q_tiles) {
        return dim3((unsigned)((int64_t)p.n_q_heads * SPLIT), (unsigned)q_tiles, (unsigned)p.batch);
    }
    // How many clusters of SPLIT CTAs can be resident at once (the runtime's answer, cached per device).
    static cudaError_t max_clusters(int dev, int *n) {
        static std::atomic<int> cache[tst::kMaxDevices];
        const bool cached = dev >= 0 && dev < tst::kMaxDevices;
        if (cached && (*n = cache[dev].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
        cudaError_t e = prepare(dev);
        if (e != cudaSuccess) return e;
        if ((e = tst::max_active_clusters(kernel, SPLIT, WARPS * 32, smem, n)) != cudaSuccess) return e;
        if (cached && *n > 0) cache[dev].store(*n, std::memory_order_relaxed);
        return cudaSuccess;
    }
    static cudaError_t launch(const AttnParams<T, Score> &p, int dev, int64_t q_tiles, cudaStream_t stream) {
        if (cudaError_t e = prepare(dev); e != cudaSuccess) return e;
        return tst::launch(kernel, grid(p, q_tiles), dim3(WARPS * 32), smem, stream, SPLIT, p);
    }
};

// The split launch_attention_decode takes: 1 when the (batch, head, query tile) units alone cover the SMs;
// else the smallest of 2, 4, 8, 16 whose CTAs cover them, skipping a split whose clusters would not all be
// resident at once (a second wave of clusters costs more than the split gains: at batch 4, 144 KB CTAs in
// clusters of 4 ran 39 µs against 30 in clusters of 2, run 57; clusters of 16 of one-CTA-an-SM size never
// were, run 61), as long as each warp keeps kDecodeMinSteps steps of 16 keys. 1 before compute capability
// 9.0 (no clusters).
template <typename T, int D, int WARPS, int STAGES, class Score>
cudaError_t decode_split(const AttnParams<T, Score> &p, int64_t units, const tst::DeviceFacts &f, int *split) {
    const int64_t steps = ((int64_t)p.t_kv + kDecodeKeys - 1) / kDecodeKeys, cover = f.sms * 9 / 10;
    *split = 1;
    if (f.cc_major < 9 || units >= cover) return cudaSuccess;
    for (int s = 2; s <= kDecodeMaxSplit; s *= 2) {
        if (steps / ((int64_t)s * WARPS) < kDecodeMinSteps) break;
        int fit = 0;
        cudaError_t e = s == 2 ? DecodeLaunch<T, D, WARPS, STAGES, 2, Score>::max_clusters(f.dev, &fit)
                        : s == 4 ? DecodeLaunch<T, D, WARPS, STAGES, 4, Score>::max_clusters(f.dev, &fit)
                        : s == 8 ? DecodeLaunch<T, D, WARPS, STAGES, 8, Score>::max_clusters(f.dev, &fit)
                                 : DecodeLaunch<T, D, WARPS, STAGES, 16, Score>::max_clusters(f.dev, &fit);
        if (e != cudaSuccess) return e;
        if (units > fit) continue;
        *split = s;
        if (units * s >= cover) break;
    }
    return cudaSuccess;
}

template <typename T, int D, int WARPS, int STAGES, int SPLIT, class Score>
cudaError_t launch_attention_decode_split(const AttnParams<T, Score> &p, int dev, int64_t q_tiles, cudaStream_t stream) {
    return DecodeLaunch<T, D, WARPS, STAGES, SPLIT, Score>::launch(p, dev, q_tiles, stream);
}

// Attention for t_q ≤ kDecodeRows (any t_q works; more rows run several 16-row tiles, which the kernel
// above does better). Same contract as launch_attention.
template <int D, int WARPS = DecodeConfig<D>::WARPS, int STAGES = DecodeConfig<D>::STAGES, typename T, class Score>
cudaError_t launch_attention_decode(const AttnParams<T, Score> &p, cudaStream_t stream) {
    bool empty;
    if (cudaError_t e = check_attention<D>(p, &empty); e != cudaSuccess || empty) return e;
    const int64_t q_tiles = ((int64_t)p.t_q + kDecodeRows - 1) / kDecodeRows;
    if (q_tiles > 65535 || p.batch > 65535 || (int64_t)p.n_q_heads * kDecodeMaxSplit > 0x7fffffff)
        return cudaErrorInvalidConfiguration;
    tst::DeviceFacts f;
    if (cudaError_t e = tst::device_facts(&f); e != cudaSuccess) return e;
    int split;
    if (cudaError_t e = decode_split<T, D, WARPS, STAGES>(p, (int64_t)p.n_q_heads * q_tiles * p.batch, f, &split);
        e != cudaSuccess)
        return e;
    switch (split) {
    case 1: return launch_attention_decode_split<T, D, WARPS, STAGES, 1>(p, f.dev, q_tiles, stream);
    case 2: return launch_attention_decode_split<T, D, WARPS, STAGES, 2>(p, f.dev, q_tiles, stream);
    case 4: return launch_attention_decode_split<T, D, WARPS, STAGES, 4>(p, f.dev, q_tiles, stream);
    case 8: return launch_attention_decode_split<T, D, WARPS, STAGES, 8>(p, f.dev, q_tiles, stream);
    default: return launch_attention_decode_split<T, D, WARPS, STAGES, 16>(p, f.dev, q_tiles, stream);
    }
}

// ---- toward sm_90a (not implemented) -------------------------------------------------------------
// A wgmma variant (FlashAttention-3 shape) would: load Q/K/V tiles with cp.async.bulk.tensor (TMA, tensor
// maps passed as __grid_constant__) into 128-byte-swizzled smem completing on mbarriers, 2–3 stages; use
// one producer warp(group) (setmaxnreg down) and two consumer warpgroups of 64 query rows each (setmaxnreg
// up, __launch_bounds__(384, 1)); S = Q·Kᵀ as wgmma.m64n{BN}k16 with Q and K from smem, P·V as wgmma with
// P from registers (the accumulator layout of wgmma matches the A-from-register layout after packing to
// fp16) and V from smem (V is K-major there, so the V tile needs the transposed smem descriptor, which
// wgmma supports for 16-bit types); ping-pong the two warpgroups so one's softmax overlaps the other's
// GEMMs; and the epilogue through stmatrix + TMA store. The Score functor and the masking/online-softmax
// code above carry over unchanged (they only see accumulator registers and their (q, k) positions).

}  // namespace tsa
