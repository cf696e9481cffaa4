// attention_sm90.cuh — the Hopper (sm_90a) form of attention.cuh (FlashAttention-3 shape): the same
// tsa::AttnParams<T, Score>, the same Score functors and the same semantics (bottom-right causal, fully
// masked rows → 0, rows ≥ t_q not written, GQA by h / (n_q_heads / n_kv_heads)), computed with TMA loads
// and wgmma.mma_async. Namespace tsa90; includes attention.cuh (params, functors, the mma.sync kernel it
// falls back to) and gemm_sm90.cuh (wgmma / mbarrier / TMA helpers and the tensor-map encoder).
//
//   tsa90::launch_attention_sm90<D, STAGES = 2, PINGPONG = true, BN = DefaultBN<D>, PERSIST = -1>(params, stream)
//   D ∈ {64, 128, 192, 256}; BN keys per K/V tile ∈ {64, 128} (128 for D ≤ 128, 64 for D = 192 and 256, as FA3);
//   PERSIST: 1 persistent, 0 a block per item, −1 persistent unless the score is causal or windowed.
//
// Work items: BM = 128 query rows of one (batch, query head), heads fastest, then query tiles (reversed under
// causal: the longest rows first), then the batch. A block per item (the hardware starts the next wherever one
// ends: balanced for causal items of differing lengths), or persistent (a block per resident slot taking items
// blockIdx.x, + gridDim.x, …: the producer loads the next item's first K/V tile and each consumer's half of Q
// while this item's last tiles and epilogue run; the ring and the ping-pong turns run on across items).
// Per block:
//   * 384 threads = 3 warpgroups. Warpgroup 0 is the producer (setmaxnreg.dec 40; one thread issues
//     every TMA load): per item, each consumer's 64 rows of Q (q[half] full; for a later item, once that
//     consumer is done with the last one's: qfree[half], one arrival per warp of it, and after the item's
//     first K/V tile, so that the ring is not held up) and the K and V tiles of BN keys into a STAGES-deep
//     ring (full[s]: transaction bytes of K + V; empty[s]: one arrival per consumer warp).
//     Warpgroups 1 and 2 are consumers (setmaxnreg.inc 232; for D = 192 and 256, 240 with the producer at 24),
//     each owning 64 query rows: O is D/2 fp32 registers a thread, S BN/2, P BN/4.
//   * Shared memory: every tile is D/64 slabs of [128 or BN rows][64 elements] (128 bytes a row) in the
//     128-byte-swizzle layout that TMA writes (box 64 × rows, CU_TENSOR_MAP_SWIZZLE_128B); Q and K are read
//     K-major by wgmma (as gemm_sm90's A and B_NK), V N-major (as gemm_sm90's B_KN, imm-trans-b = 1, LBO =
//     the K/V slab stride BN·128 bytes).
//   * Consumer loop (FA3's order): for key tile j: S_j = Q·K_jᵀ (wgmma m64n{BN}k16, Q and K from smem) is
//     issued, then O += P_{j-1}·V_{j-1} (wgmma m64nDk16, P from registers); wait for S_j; score functor +
//     out-of-range keys → −inf; wait for P·V (ptxas places this wait before the softmax's exp2s, so the
//     softmax does not overlap this warpgroup's P·V: bench/NOTES.md run 100); online softmax of S_j (exp2,
//     running max m and sum l), release stage j-1, rescale O by
//     2^(c·(m_old − m_new)) and pack P_j to fp16/bf16 (the accumulator layout of S is the register-A
//     layout of the next wgmma: keys 16kk..16kk+15 are S column blocks 2kk, 2kk+1).
//   * PINGPONG (FA3's inter-warpgroup schedule): the two consumers take turns issuing their wgmma batches
//     (named barriers 1 and 2), so that one warpgroup's softmax overlaps the other's GEMMs.
//   * Scores: the functor's for every key (a masks_future functor's unmasked form at D ≤ 128, kSplitMask), then
//     at D ≤ 128 (kMaskApart) −inf set apart on the tiles that need it: keys ≥ t_kv on the last tile, and for a
//     masks_future functor the keys after the warp's rows on the diagonal's tiles (bench/NOTES.md runs 92, 95).
//   * Causal: tiles wholly past the diagonal (for the tile's last row) are never loaded or computed; with
//     a window (attention.cuh), neither are the tiles before the first key the tile's first row may see.
//   * Edges: TMA reads zeros outside (t_q, t_kv); keys ≥ t_kv are set to −inf after the score functor;
//     rows ≥ t_q are not written. Epilogue: O / l straight from the accumulators (4-byte stores).
// Fragment (wgmma accumulator): warp w of a consumer owns rows 16w..16w+15 of its 64; lane l holds rows
// l/4 and l/4 + 8 (h = 0, 1) and columns 8j + 2(l%4) + e: element acc[4j + 2h + e].
//
// Falls back to tsa::launch_attention (mma.sync) when: D is not 64, 128, 192 or 256, t_kv == 0, a pointer is not
// 16-byte aligned or a stride not a multiple of 8 elements (TMA needs 16-byte strides), or the driver's
// cuTensorMapEncodeTiled refuses a layout. last_path() tells which path the last call took. Returns
// cudaErrorNotSupported on a device that is not compute capability 9.0 or when this translation unit was
// not compiled for sm_90a (the kernel body exists only for sm_90a; elsewhere it traps).
// Shared memory: 1 KB alignment slack + 128·D·2 (Q) + STAGES · 2 · BN·D·2 (K, V) + barriers:
// D = 128, BN = 128: 161 KB (STAGES = 2), 225 KB (STAGES = 3); D = 192, BN = 64: 193 KB (STAGES = 3); D = 256,
// BN = 64: 193 KB (STAGES = 2); one CTA
// per SM. ptxas (CUDA 13.0, sm_90a): no spills for D = 64, 128 (BN 128) and 256 (BN 64), fp16 and bf16.
#pragma once
#include "attention.cuh"
#include "gemm_sm90.cuh"

namespace tsa90 {

// ---- wgmma with A from registers (P), B from shared memory (V, N-major: imm-trans-b = 1) ------------------
#define TSA90_RS_N128(TY)                                                                                      \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                                               \
    "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " {"                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                   \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                         \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                         \
    "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
#define TSA90_RS_N256(TY)                                                                                      \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                                              \
    "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {"                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
    "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
#define TSA90_RS_N192(TY)                                                                                      \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %101, 0;\n"                                                              \
    "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " {"                                              \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, " \
    "{%96, %97, %98, %99}, %100, p, 1, 1, 1;\n}\n"
#define TSA90_RS_N64(TY)                                                                                       \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                               \
    "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {"                                               \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                   \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                        \
    "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"

// d (N/2 fp32 per thread) += A (4 packed registers: the m16n8k16 A fragment of this warp's 16 rows) · B.
template <typename T, int N>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db) {
#if TSG90_DEVICE_OK
    if constexpr (N == 256) {
        if constexpr (tst::elem<T>::is_bf16)
            asm volatile(TSA90_RS_N256("bf16")
                         : TSG90_WGMMA_OUTS_N256(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
        else
            asm volatile(TSA90_RS_N256("f16")
                         : TSG90_WGMMA_OUTS_N256(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    } else if constexpr (N == 192) {
        if constexpr (tst::elem<T>::is_bf16)
            asm volatile(TSA90_RS_N192("bf16")
                         : TSG90_WGMMA_OUTS_N192(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
        else
            asm volatile(TSA90_RS_N192("f16")
                         : TSG90_WGMMA_OUTS_N192(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    } else if constexpr (N == 128) {
        if constexpr (tst::elem<T>::is_bf16)
            asm volatile(TSA90_RS_N128("bf16")
                         : TSG90_WGMMA_OUTS_N128(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
        else
            asm volatile(TSA90_RS_N128("f16")
                         : TSG90_WGMMA_OUTS_N128(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    } else {
        static_assert(N == 64, "wgmma_rs: N must be 64, 128, 192 or 256");
        if constexpr (tst::elem<T>::is_bf16)
            asm volatile(TSA90_RS_N64("bf16")
                         : TSG90_WGMMA_OUTS_N64(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
        else
            asm volatile(TSA90_RS_N64("f16")
                         : TSG90_WGMMA_OUTS_N64(d)
                         : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
    }
#else
    (void)d, (void)a, (void)db;
#endif
}

__device__ __forceinline__ void fence_reg(uint32_t &x) { asm volatile("" : "+r"(x)::"memory"); }

// Named barriers over the two consumer warpgroups (256 threads): one warpgroup waits (bar.sync), the other
// signals (bar.arrive). Barrier 0 is __syncthreads'.
__device__ __forceinline__ void named_sync256(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive256(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

// TMA: box at (c0, c1, c2, c3) of a 4-D tensor map → shared dst, completing bar's transaction bytes.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, int c3,
                                            uint32_t bar) {
#if TSG90_DEVICE_OK
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
#else
    (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)c3, (void)bar;
#endif
}

// ---- configuration ------------------------------------------------------------------------------------
// BN (keys per K/V tile) is a parameter: 128 for D ≤ 128; D = 192 and 256 need 64 so that O (96 or 128 fp32
// registers a thread) and S (BN/2) fit the consumers' registers, and 3 (192) or 2 (256) stages of K + V fit
// shared memory.
template <int D> struct DefaultBN { static constexpr int value = D > 128 ? 64 : 128; };
template <int D, int STAGES, int BN_> struct Cfg {
    static constexpr int BM = 128, BN = BN_;          // query rows per CTA, keys per K/V tile
    static constexpr int NSLAB = D / 64;              // 64-element (128-byte) column slabs per row
    static constexpr int Q_SLAB = BM * 128;           // [128 rows][128 bytes]
    static constexpr int KV_SLAB = BN * 128;          // [BN rows][128 bytes]
    static constexpr int Q_BYTES = NSLAB * Q_SLAB;    // the Q tile
    static constexpr int KV_BYTES = NSLAB * KV_SLAB;  // one K or V tile
    static constexpr int STAGE_BYTES = 2 * KV_BYTES;  // K then V
    static constexpr int THREADS = 384;
    // Register split (setmaxnreg; 128·PRODUCER_REGS + 256·CONSUMER_REGS ≤ 64 K): D = 192 and 256 need the most a
    // consumer can have (O alone is 96 or 128 registers a thread), so their producer keeps only 24.
    static constexpr int PRODUCER_REGS = D > 128 ? 24 : 40, CONSUMER_REGS = D > 128 ? 240 : 232;
    static constexpr int SMEM = 1024 + Q_BYTES + STAGES * STAGE_BYTES + 8 * (2 * STAGES + 4);
    static_assert(D == 64 || D == 128 || D == 192 || D == 256, "attention_sm90: D must be 64, 128, 192 or 256");
    static_assert(BN == 64 || BN == 128, "attention_sm90: BN (keys per tile) must be 64 or 128");
    static_assert(D / 2 + BN / 2 + BN / 4 <= 192, "attention_sm90: O, S and P would not fit the consumer registers");
    static_assert(STAGES >= 2, "attention_sm90: at least 2 stages");
    static_assert(SMEM <= 232448, "attention_sm90: shared memory above the 227 KB per-block limit");
};

// ---- the kernel -----------------------------------------------------------------------------------------
template <typename T, int D, int STAGES, bool PINGPONG, int BN_, class Score, bool PERSISTENT>
__global__ void __launch_bounds__(TST_SM90A_THREADS(384), 1)
    attention_sm90_kernel(const __grid_constant__ tsa::AttnParams<T, Score> p, const __grid_constant__ CUtensorMap tma_q,
                          const __grid_constant__ CUtensorMap tma_k, const __grid_constant__ CUtensorMap tma_v) {
#if TSG90_DEVICE_OK
    using C = Cfg<D, STAGES, BN_>;
    using namespace tsg90;
    static_assert(sizeof(T) == 2, "T must be __half or __nv_bfloat16");
    constexpr int BM = C::BM, BN = C::BN;
    extern __shared__ unsigned char smem_raw[];
    const uint32_t base = (tst::smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t sQ = base, sKV = base + C::Q_BYTES;
    // Barriers: Q's two halves (one per consumer) loaded, and free again; the K/V ring's full and empty.
    const uint32_t bar_q = sKV + STAGES * C::STAGE_BYTES, bar_qfree = bar_q + 16, bar_full = bar_qfree + 16,
                   bar_empty = bar_full + 8 * STAGES;
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one
    tst::pdl_wait();

    // Work items: one (head, query tile, batch) each, heads fastest.
    const int q_tiles = (p.t_q + BM - 1) / BM, n_heads = p.n_q_heads;
    const int n_items = n_heads * q_tiles * p.batch;
    struct Item {
        int h, b, q0, hk, first, n_tiles;
    };
    auto item_at = [&](int w) {
        Item it;
        it.h = w % n_heads;
        const int rest = w / n_heads, qt = rest % q_tiles;
        it.b = rest / q_tiles;
        it.q0 = (Score::causal ? q_tiles - 1 - qt : qt) * BM;  // causal: longest rows first
        it.hk = it.h / (p.n_q_heads / p.n_kv_heads);
        int kv_end = p.t_kv;  // keys this tile can see: K/V tiles [first, first + n_tiles)
        if (Score::causal) kv_end = min(kv_end, max(0, min(it.q0 + BM, p.t_q) + p.t_kv - p.t_q));
        const int all_tiles = (kv_end + BN - 1) / BN;
        it.first = min(tsa::Window<Score>::first_tile(it.q0, BN), all_tiles);
        it.n_tiles = all_tiles - it.first;
        return it;
    };

    if (threadIdx.x == 0) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            mbar_init(bar_q + 8 * half, 1);
            mbar_init(bar_qfree + 8 * half, 4);  // one arrival per warp of the half's consumer
        }
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bar_full + 8 * s, 1);
            mbar_init(bar_empty + 8 * s, 8);  // one arrival per consumer warp
        }
        fence_mbar_init();
    }
    __syncthreads();

    const int wg = static_cast<int>(threadIdx.x) / 128;
    if (wg == 0) {
        // ---- producer: one thread issues every TMA load, item after item ----
        setmaxnreg_dec<C::PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_desc(&tma_q);
            tma_prefetch_desc(&tma_k);
            tma_prefetch_desc(&tma_v);
            int g = 0, n_loaded = 0;  // K/V tiles loaded (the ring position); items whose Q was loaded
            auto load_kv = [&](const Item &it, int j) {
                const int s = g % STAGES;
                mbar_wait(bar_empty + 8 * s, ((g / STAGES) & 1) ^ 1);  // first pass: passes at once
                const uint32_t full = bar_full + 8 * s, sK = sKV + s * C::STAGE_BYTES, sV = sK + C::KV_BYTES;
                mbar_arrive_expect_tx(full, C::STAGE_BYTES);
#pragma unroll
                for (int sl = 0; sl < C::NSLAB; ++sl) tma_load_4d(sK + sl * C::KV_SLAB, &tma_k, sl * 64, (it.first + j) * BN, it.hk, it.b, full);
#pragma unroll
                for (int sl = 0; sl < C::NSLAB; ++sl) tma_load_4d(sV + sl * C::KV_SLAB, &tma_v, sl * 64, (it.first + j) * BN, it.hk, it.b, full);
                ++g;
            };
            auto load_q = [&](const Item &it) {
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    if (n_loaded > 0) mbar_wait(bar_qfree + 8 * half, (n_loaded - 1) & 1);
                    mbar_arrive_expect_tx(bar_q + 8 * half, C::Q_BYTES / 2);
#pragma unroll
                    for (int sl = 0; sl < C::NSLAB; ++sl)
                        tma_load_4d(sQ + sl * C::Q_SLAB + half * 64 * 128, &tma_q, sl * 64, it.q0 + 64 * half, it.h, it.b,
                                    bar_q + 8 * half);
                }
            };
            for (int w = blockIdx.x; w < n_items; w += gridDim.x) {
                const Item it = item_at(w);
                if (it.n_tiles > 0) {
                    if (n_loaded == 0) load_q(it), load_kv(it, 0);  // the first item: Q first, nothing to wait for
                    else load_kv(it, 0), load_q(it);                // later: the K/V ring is not held up by Q
                    ++n_loaded;
                    for (int j = 1; j < it.n_tiles; ++j) load_kv(it, j);
                }
                if constexpr (!PERSISTENT) break;
            }
        }
    } else {
        // ---- consumers: 64 query rows each ----
        setmaxnreg_inc<C::CONSUMER_REGS>();
        const int cw = wg - 1, t = static_cast<int>(threadIdx.x) % 128, wq = t / 32, lane = t % 32;
        const int col0 = 2 * (lane & 3);
        const float c = p.c;
        float o[D / 2], s[BN / 2];
        uint32_t pa[BN / 16][4];
        float m[2], l[2], alpha[2];
        int row0 = 0;  // this thread's rows in the item: row0 (h = 0) and row0 + 8 (h = 1)

        // S = Q·K_tileᵀ for stage st (issued, not waited for).
        auto issue_qk = [&](int st) {
            const uint32_t sK = sKV + st * C::STAGE_BYTES;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
                const uint32_t in_slab = (kk % 4) * 32;  // 16 elements = 32 bytes along the row
                const uint64_t da = make_desc(sQ + (kk / 4) * C::Q_SLAB + in_slab + cw * 64 * 128, 16, 1024);
                const uint64_t db = make_desc(sK + (kk / 4) * C::KV_SLAB + in_slab, 16, 1024);
                if constexpr (BN == 128) wgmma_n128<T, 0>(s, da, db, kk > 0 ? 1 : 0);
                else wgmma_n64<T, 0>(s, da, db, kk > 0 ? 1 : 0);
            }
        };
        // O += P·V_tile for stage st (issued, not waited for).
        auto issue_pv = [&](int st) {
            const uint32_t sV = sKV + st * C::STAGE_BYTES + C::KV_BYTES;
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) wgmma_rs<T, D>(o, pa[kk], make_desc(sV + kk * 2048, C::KV_SLAB, 1024));
        };
        // s ← score(s, q, k), keys ≥ t_kv → −inf; then the online-softmax step (m, l, alpha; s → weights).
        auto softmax = [&](const Score &score, int k0) {
            const bool check_kv = k0 + BN > p.t_kv;
            if (tsa::pairs_now(score, check_kv)) {   // keys k and k + 1 of row row0 + 8·hh at once
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh) {
                        const float2 x = tsa::score_main2<Score, D>(score, s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1],
                                                                    row0 + 8 * hh, k0 + 8 * j + col0);
                        s[4 * j + 2 * hh] = x.x, s[4 * j + 2 * hh + 1] = x.y;
                    }
            } else {
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int k = k0 + 8 * j + col0 + e;
                            float x = tsa::score_main<Score, D>(score, s[4 * j + 2 * hh + e], row0 + 8 * hh, k);
                            if (!tsa::kMaskApart<D> && check_kv && k >= p.t_kv) x = -INFINITY;
                            s[4 * j + 2 * hh + e] = x;
                        }
            }
            // Masked apart (tsa::kMaskApart), on the tiles that need it: the last tile's keys ≥ t_kv, and the
            // diagonal's keys after the row for a masks_future functor (attention.cuh).
            const bool diagonal = tsa::keys_after<Score, D>(k0, BN, row0 - (lane >> 2));
            if (tsa::kMaskApart<D> && (check_kv || diagonal))
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
                        for (int e = 0; e < 2; ++e) {
                            const int k = k0 + 8 * j + col0 + e;
                            if (k >= p.t_kv || (diagonal && k > row0 + 8 * hh)) s[4 * j + 2 * hh + e] = -INFINITY;
                        }
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                float mx = m[hh];
#pragma unroll
                for (int j = 0; j < BN / 8; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * hh], s[4 * j + 2 * hh + 1]));
                mx = tst::quad_max(mx);
                // Nothing unmasked yet: subtract 0, so weights and alpha are exp2(−inf) = 0, not NaN.
                const float ms = mx == -INFINITY ? 0.f : mx * c;
                alpha[hh] = tst::fast_exp2(fmaf(m[hh], c, -ms));
                m[hh] = mx;
                float sum = 0.f;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float w = tst::fast_exp2(fmaf(s[4 * j + 2 * hh + e], c, -ms));
                        s[4 * j + 2 * hh + e] = w;
                        sum += w;
                    }
                l[hh] = l[hh] * alpha[hh] + sum;  // per-lane partial; the quad is summed in the epilogue
            }
        };
        auto pack_p = [&]() {
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk) {
                pa[kk][0] = tst::pack2<T>(s[8 * kk + 0], s[8 * kk + 1]);
                pa[kk][1] = tst::pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
                pa[kk][2] = tst::pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
                pa[kk][3] = tst::pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
            }
        };
        auto fence_s = [&]() {
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) fence_operand(s[i]);
        };
        auto fence_o = [&]() {
#pragma unroll
            for (int i = 0; i < D / 2; ++i) fence_operand(o[i]);
        };
        auto fence_pa = [&]() {
#pragma unroll
            for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
                for (int i = 0; i < 4; ++i) fence_reg(pa[kk][i]);
        };
        auto release = [&](int st) {
            if (lane == 0) mbar_arrive_local(bar_empty + 8 * st);
        };
        auto release_q = [&]() {  // this consumer's last Q·Kᵀ of the item is complete: its half of Q may be reloaded
            if (lane == 0) mbar_arrive_local(bar_qfree + 8 * cw);
        };
        // Ping-pong (FA3): the two consumers take turns issuing their wgmmas (named barriers 1 + cw), so
        // that one's softmax runs while the other's GEMMs occupy the tensor cores. Every issue step is
        // bracketed by turn_begin / turn_end; warpgroup 1 gives warpgroup 0 the first turn. Persistent, the
        // turns run on item after item (a consumer starts the next item while the other finishes this one)
        // and warpgroup 0 takes warpgroup 1's last hand-over after its last item; a block per item, warpgroup
        // 1 skips its last hand-over instead (taking it cost the head-dim-256 kernel 6%: bench/NOTES.md run
        // 101). Either way no arrival is left pending.
        int turns_left = 0;  // this item's issue steps still to take (n_tiles + 1 a consumer)
        auto turn_begin = [&]() {
            if constexpr (PINGPONG) named_sync256(1 + cw);
        };
        auto turn_end = [&]() {
            if constexpr (PINGPONG) {
                --turns_left;
                if (PERSISTENT || cw == 0 || turns_left > 0) named_arrive256(2 - cw);
            }
        };
        if constexpr (PINGPONG && PERSISTENT)
            if (cw == 1) named_arrive256(1);  // warpgroup 0 takes the first turn

        int g = 0, n_used = 0;  // K/V tiles consumed (the ring position); items whose Q was used
        for (int w = blockIdx.x; w < n_items; w += gridDim.x) {
            const Item it = item_at(w);
            const Score score = tst::score_at(p.score, it.b, it.h);
            row0 = it.q0 + cw * 64 + wq * 16 + (lane >> 2);
            m[0] = m[1] = -INFINITY, l[0] = l[1] = 0.f;
#pragma unroll
            for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
            const int n_tiles = it.n_tiles;
            turns_left = n_tiles + 1;
            if (n_tiles > 0) {
                if constexpr (PINGPONG && !PERSISTENT)
                    if (cw == 1) named_arrive256(1);  // warpgroup 0 takes the first turn
                mbar_wait(bar_q + 8 * cw, n_used & 1);
                mbar_wait(bar_full + 8 * (g % STAGES), (g / STAGES) & 1);
                // Tile 0: S, softmax (O is still 0: no rescale), P.
                fence_s();
                turn_begin();
                wgmma_fence();
                issue_qk(g % STAGES);
                wgmma_commit();
                turn_end();
                wgmma_wait<0>();
                fence_s();
                if (n_tiles == 1) release_q();
                softmax(score, it.first * BN);
                pack_p();
                for (int j = 1; j < n_tiles; ++j) {
                    const int st = (g + j) % STAGES, prev = (g + j - 1) % STAGES;
                    mbar_wait(bar_full + 8 * st, ((g + j) / STAGES) & 1);
                    fence_s();
                    fence_o();
                    fence_pa();
                    turn_begin();
                    wgmma_fence();
                    issue_qk(st);
                    wgmma_commit();
                    issue_pv(prev);
                    wgmma_commit();
                    turn_end();
                    wgmma_wait<1>();  // S_j complete; P_{j-1}·V_{j-1} may still run
                    fence_s();
                    if (j == n_tiles - 1) release_q();
                    softmax(score, (it.first + j) * BN);
                    // ptxas schedules this wait at the head of its basic block, before the softmax's exp2s: the
                    // softmax runs after P·V, and the two warpgroups' ping-pong is what overlaps it. Forcing it
                    // beside P·V (a block boundary here) did not pay robustly (bench/NOTES.md run 100).
                    wgmma_wait<0>();
                    fence_o();
                    fence_pa();
                    release(prev);
#pragma unroll
                    for (int j2 = 0; j2 < D / 8; ++j2)
#pragma unroll
                        for (int hh = 0; hh < 2; ++hh) {
                            o[4 * j2 + 2 * hh] *= alpha[hh];
                            o[4 * j2 + 2 * hh + 1] *= alpha[hh];
                        }
                    pack_p();
                }
                const int last = (g + n_tiles - 1) % STAGES;
                fence_o();
                fence_pa();
                turn_begin();
                wgmma_fence();
                issue_pv(last);
                wgmma_commit();
                turn_end();
                wgmma_wait<0>();
                fence_o();
                fence_pa();
                release(last);
                g += n_tiles;
                ++n_used;
            }

            // Epilogue: O / l → rows < t_q (fully masked or t_kv-less rows → 0).
            T *gO = p.o + static_cast<int64_t>(it.b) * p.o_batch_stride + static_cast<int64_t>(it.h) * p.o_head_stride;
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const float sum = tst::quad_sum(l[hh]);
                const float inv = sum > 0.f ? 1.f / sum : 0.f;
                const int row = row0 + 8 * hh;
                if (row < p.t_q) {
                    T *dst = gO + static_cast<int64_t>(row) * p.o_seq_stride + col0;
#pragma unroll
                    for (int j = 0; j < D / 8; ++j)
                        if (8 * j < p.d)   // a head dim below D: its padding columns are not stored
                            tst::store_pair<T>(dst + 8 * j, o[4 * j + 2 * hh] * inv, o[4 * j + 2 * hh + 1] * inv);
                }
            }
            if constexpr (!PERSISTENT) break;  // a block per item
        }
        if constexpr (PINGPONG)
            if (cw == 0 && PERSISTENT) named_sync256(1);  // warpgroup 1's last hand-over
    }
#else
    (void)p, (void)tma_q, (void)tma_k, (void)tma_v;
    __trap();  // compiled for a target without wgmma: the launcher refuses to launch this
#endif
}

// ---- host side --------------------------------------------------------------------------------------
// Which path the last launch_attention_sm90 call on this thread took (for tests and logs; per thread, so
// that concurrent launches neither race on it nor overwrite each other's answer):
// 0 = wgmma kernel; 1 = fallback, D not 64/128/192/256 (or t_kv == 0); 2 = fallback, pointers/strides not
// TMA-describable; 3 = fallback, cuTensorMapEncodeTiled refused a layout; -1 = nothing launched (error or
// empty problem).
inline int &last_path() {
    static thread_local int r = -1;
    return r;
}
inline const char *path_name(int r) {
    switch (r) {
    case 0: return "wgmma";
    case 1: return "fallback(D/t_kv)";
    case 2: return "fallback(align)";
    case 3: return "fallback(tmap)";
    default: return "none";
    }
}

// 4-D tiled map over (d contiguous, seq, head, batch) with a box of 64 × 128 × 1 × 1, 128-byte swizzle.
// A dimension of extent 1 gets a harmless stride (it is never stepped). False when the driver refuses.
template <typename T>
inline bool make_map_4d(CUtensorMap *map, const T *ptr, int d, int seq, int heads, int batch, int64_t seq_stride,
                        int64_t head_stride, int64_t batch_stride, int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = tsg90::encode_tiled_fn();
    if (!enc) return false;
    const CUtensorMapDataType dt = tst::elem<T>::is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    const int64_t ss = seq_stride > 0 ? seq_stride : d;
    const int64_t hs = (heads > 1 && head_stride > 0) ? head_stride : ss * seq;
    const int64_t bs = (batch > 1 && batch_stride > 0) ? batch_stride : hs * heads;
    if ((heads > 1 && head_stride <= 0) || (batch > 1 && batch_stride <= 0) || seq_stride <= 0) return false;
    cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(seq), static_cast<cuuint64_t>(heads),
                          static_cast<cuuint64_t>(batch)};
    cuuint64_t strides[3] = {static_cast<cuuint64_t>(ss) * 2, static_cast<cuuint64_t>(hs) * 2, static_cast<cuuint64_t>(bs) * 2};
    cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
    cuuint32_t estr[4] = {1, 1, 1, 1};
    CUresult r = enc(map, dt, 4, const_cast<T *>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

// The mma.sync kernel for what TMA cannot take, launched only once this (sm_90a) code runs (tst::Reach).
template <int D, typename T, class Score>
cudaError_t launch_tma_fallback(const tsa::AttnParams<T, Score> &p, cudaStream_t stream) {
    using A = tsa::AttnConfig<D>;
    return tsa::launch_attention<D, A::BM, A::BN, A::WARPS, tsa::kDefaultKC<D, A::BN>, tst::kSm90aCode>(p, stream);
}

// Launch the attention forward for p on stream. Same contract as tsa::launch_attention (same validation,
// same errors), plus cudaErrorNotSupported on a device that is not compute capability 9.0 or a translation
// unit compiled without sm_90a. Never prints or exits.
template <int D, int STAGES = 2, bool PINGPONG = true, int BN = DefaultBN<D>::value, int PERSIST = -1, typename T,
          class Score>
cudaError_t launch_attention_sm90(const tsa::AttnParams<T, Score> &p, cudaStream_t stream) {
    last_path() = -1;
    // p.d below D: the head dim zero-padded to D (the tensor maps read zeros past p.d; O's padding is not stored)
    if (!tsa::head_dim_fits<D>(p.d) || p.batch < 0 || p.t_q < 0 || p.t_kv < 0 || p.n_q_heads <= 0 || p.n_kv_heads <= 0 ||
        p.n_q_heads % p.n_kv_heads != 0 || !(p.c > 0.f))
        return cudaErrorInvalidValue;
    tst::DeviceFacts f;
    cudaError_t e = tst::device_facts(&f);
    if (e != cudaSuccess) return e;
    if (f.cc_major != 9 || f.cc_minor != 0) return cudaErrorNotSupported;
    if (p.batch == 0 || p.t_q == 0) return cudaSuccess;
    if (!p.q || !p.k || !p.v || !p.o) return cudaErrorInvalidValue;

    if constexpr (D != 64 && D != 128 && D != 192 && D != 256) {
        last_path() = 1;
        return tsa::launch_attention<D>(p, stream);
    } else {
        using C = Cfg<D, STAGES, BN>;
        // Persistent (a CTA per resident slot, each taking items in turn): the next item's loads overlap this
        // one's last tiles and epilogue (bench/NOTES.md run 99: −3% at 4 K keys, −7% at 2 K). Causal and
        // windowed items differ in length, so there the hardware's block scheduler, which starts a block
        // wherever one ends, balances them instead (a window's items taken in turn ran 7% slower).
        constexpr bool persistent = PERSIST == 1 || (PERSIST < 0 && !Score::causal && !tsa::Window<Score>::windowed);
        auto kernel = attention_sm90_kernel<T, D, STAGES, PINGPONG, BN, Score, persistent>;
        static const bool sm90a = tst::built_for_sm90a(kernel, 384);  // per instantiation, initialised once
        if (!sm90a) return cudaErrorNotSupported;

        if (p.t_kv == 0) {
            last_path() = 1;
            return launch_tma_fallback<D>(p, stream);
        }
        auto misaligned = [](const void *ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 != 0; };
        const int64_t strides[12] = {p.q_batch_stride, p.q_head_stride, p.q_seq_stride, p.k_batch_stride,
                                     p.k_head_stride,  p.k_seq_stride,  p.v_batch_stride, p.v_head_stride,
                                     p.v_seq_stride,   p.o_batch_stride, p.o_head_stride, p.o_seq_stride};
        bool ok = !(misaligned(p.q) || misaligned(p.k) || misaligned(p.v) || misaligned(p.o));
        for (int64_t s : strides) ok = ok && s % 8 == 0 && s >= 0 && s < (int64_t(1) << 36);
        if (!ok) {
            last_path() = 2;
            return launch_tma_fallback<D>(p, stream);  // reports the misalignment itself where it must
        }
        CUtensorMap tq, tk, tv;
        ok = make_map_4d(&tq, p.q, p.d, p.t_q, p.n_q_heads, p.batch, p.q_seq_stride, p.q_head_stride, p.q_batch_stride, C::BM / 2) &&
             make_map_4d(&tk, p.k, p.d, p.t_kv, p.n_kv_heads, p.batch, p.k_seq_stride, p.k_head_stride, p.k_batch_stride, C::BN) &&
             make_map_4d(&tv, p.v, p.d, p.t_kv, p.n_kv_heads, p.batch, p.v_seq_stride, p.v_head_stride, p.v_batch_stride, C::BN);
        if (!ok) {
            last_path() = 3;
            return launch_tma_fallback<D>(p, stream);
        }
        const int64_t q_tiles = ((int64_t)p.t_q + C::BM - 1) / C::BM;
        const int64_t n_items = q_tiles * p.n_q_heads * p.batch;
        if (n_items > INT32_MAX) return cudaErrorInvalidConfiguration;
        static std::atomic<unsigned long long> smem_set{0};  // devices where the limit is raised
        e = tst::set_smem_once(kernel, C::SMEM, f.dev, smem_set);
        if (e != cudaSuccess) return e;
        int64_t grid = n_items;
        if constexpr (persistent) {
            static const int per_sm = [&] {
                int n = 0;
                return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, C::THREADS, C::SMEM) == cudaSuccess && n > 0 ? n : 1;
            }();
            grid = std::min<int64_t>(n_items, (int64_t)f.sms * per_sm);
        }
        last_path() = 0;
        return tst::launch(kernel, dim3((unsigned)grid), dim3(C::THREADS), C::SMEM, stream, 1, p,
                           tq, tk, tv);
    }
}

}  // namespace tsa90
