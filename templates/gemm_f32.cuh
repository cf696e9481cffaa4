// gemm_f32.cuh — the GEMM template for fp32 operands: fp32 accuracy on the tensor cores by 3xTF32. Per batch
// b (grid z):
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B[k, n])                              (single)
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B0[k, n], Σ_k A[m, k]·B1[k, n])       (DUAL: one A tile, two B)
// Each fp32 operand x is split into a TF32 part and its remainder, read as TF32 (x = big + small with
// |small| ≤ 2^-11 |x|); the product is big_a·big_b + big_a·small_b + small_a·big_b, accumulated in fp32 by
// mma.sync m16n8k8 (sm_80+), the small terms first. The dropped small_a·small_b is below fp32 rounding, so the
// result matches an fp32 FMA GEMM (relative error ~1e-6, where a plain TF32 product is ~1e-3) at three
// tensor-core MMAs a product instead of CUDA-core FMAs. Any M, N, K; namespace tsg; depends on gemm.cuh
// (GemmParams, the epilogue interface and its helpers) and tile.cuh.
//
// Operands (element strides, int64; as gemm.cuh): A (M, K) K contiguous; B (K, N) N contiguous when B_KN,
// else (N, K) K contiguous; B1 (DUAL) with B0's layout, ldb and batch stride. No second operand pair and no
// row statistics of A (the plan gives neither to an fp32 GEMM).
//
// The kernel, per block: the grouped tile order of gemm.cuh → a STAGES-deep cp.async pipeline of fp32
// tiles kept in their global layout, rows padded so that the fragment loads below hit 32 distinct banks
// (A: BM×(BK+4); B_KN: BK×(BN+8); B (N, K): BN×(BK+4)) → 32-bit shared loads of the m16n8k8 fragments
// (A: rows g and g+8, k t and t+4; B: k t and t+4, column g; g = lane/4, t = lane%4) → split → 3 MMAs →
// the epilogue from registers, pair by pair (apply, as gemm.cuh's mma.sync kernel calls it). The tensor cores' fp32
// accumulation does not round to nearest: chained over all of K, its error grows with K itself (9.2e-4 at K = 131072,
// 2.9e-5 at 4096; cuBLAS SGEMM 8e-7 and 1.1e-6; bench/NOTES.md run 169). A CTA whose share of K exceeds kF32ChainK
// therefore sums each k8 step's three MMAs into a fresh fragment that an FADD adds to the accumulator (STEPWISE:
// 2.3e-6 at K = 131072, run 170); shorter ones keep the chain, as the FADDs cost 13% at 4096³ (run 170). Split-K (SPLIT > 1,
// Hopper and later: few output tiles over a long K) shares each tile's K tiles among a cluster, as gemm.cuh's.
// Loaders: 16-byte cp.async when every pointer is 16-byte aligned and every leading dimension and batch
// stride a multiple of 4 elements; else 4-byte cp.async of each element (any fp32 layout; still pipelined).
#pragma once
#include "gemm.cuh"

namespace tsg {

// ---- shared-memory tiles --------------------------------------------------------------------------
// Global (row0.., col0..) of a row-major fp32 view g (row stride ld) → the ROWS×COLS tile s, rows SP floats
// apart; elements at row ≥ row_lim or col ≥ col_lim read as zero. VEC 16: 4 floats a copy (g and ld 16-byte
// aligned, SP a multiple of 4); VEC 4: one float a copy.
template <int ROWS, int COLS, int SP, int THREADS, int VEC>
__device__ __forceinline__ void load_tile_f32(float *s, const float *g, int64_t ld, int row0, int row_lim, int col0,
                                              int col_lim) {
    static_assert(VEC == 16 || VEC == 4, "the fp32 loaders copy 16 or 4 bytes at a time");
    constexpr int PER = VEC / 4, CPR = COLS / PER, CHUNKS = ROWS * CPR;
    static_assert(COLS % PER == 0 && CHUNKS % THREADS == 0, "tile copies must be a multiple of the block's threads");
    static_assert(VEC == 4 || SP % 4 == 0, "16-byte copies need rows padded to a multiple of 4 floats");
#pragma unroll
    for (int i = 0; i < CHUNKS / THREADS; ++i) {
        const int c = i * THREADS + static_cast<int>(threadIdx.x), r = c / CPR, ch = c % CPR;
        const int gr = row0 + r, gc = col0 + ch * PER;
        const int left = gr < row_lim ? min(max(col_lim - gc, 0), PER) : 0;   // elements to read
        const float *src = left > 0 ? g + gr * ld + gc : g;
        if constexpr (VEC == 16) tst::cp_async16_zfill(s + r * SP + ch * PER, src, left * 4);
        else tst::cp_async4_zfill(s + r * SP + ch * PER, src, left * 4);
    }
}

// ---- 3xTF32 -----------------------------------------------------------------------------------------
// x as TF32 rounded to nearest, ties away (what cvt.rna gives: half a TF32 unit added to the magnitude bits,
// the 13 bits below TF32's mantissa cleared), and the exact remainder, which the MMA reads as TF32 by dropping
// its low bits (|error| ≤ 2^-21 |x|: a few fp32 roundings a product, below the fp32 accumulation's √K growth
// from K ≈ 64 on). Two integer operations and a subtraction where two cvt.rna cost more: 1.18-1.23x on the large shapes, errors unchanged (bench/NOTES.md run 125).
// Inf and NaN stay what they were with cvt.rna: big inf or NaN, the remainder NaN, the result NaN.
__device__ __forceinline__ void split_tf32(float x, uint32_t &big, uint32_t &small) {
    big = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    small = __float_as_uint(x - __uint_as_float(big));
}

// D = A·B + D for one m16n8k8 TF32 tile: a[4] (row-major A fragment), b[2] (col-major B), d[4] fp32.
__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Padded row lengths (floats) of the tiles: 32 distinct banks for the fragment loads (the top comment).
constexpr int kF32PadK = 4, kF32PadN = 8;
// The longest share of K a CTA accumulates in the MMAs' own chain (above: 2.9e-5 at 4096, against a bound of
// 6e-7·√K = 3.8e-5 in bench/gpu/gemm_f32_test.cu).
constexpr int kF32ChainK = 4096;
// Whether the CTAs of a GEMM over K, split among `split` of them, sum stepwise (the top).
inline bool f32_stepwise(int K, int split) { return (K + split - 1) / split > kF32ChainK; }

template <int BM, int BN, int BK, int STAGES, bool B_KN, bool DUAL> constexpr int gemm_f32_smem_bytes() {
    return STAGES * (BM * (BK + kF32PadK) + (DUAL ? 2 : 1) * (B_KN ? BK * (BN + kF32PadN) : BN * (BK + kF32PadK))) * 4;
}

// ---- the kernel ---------------------------------------------------------------------------------
template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, bool DUAL, class Epilogue, int VEC,
          int SPLIT, bool STEPWISE>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32) gemm_f32_kernel(const GemmParams<float, Epilogue> p) {
    constexpr int THREADS = WARPS_M * WARPS_N * 32;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;   // warp tile
    constexpr int MI = WM / 16, NI = WN / 8;              // m16 and n8 MMA tiles per warp
    constexpr int NB = DUAL ? 2 : 1;
    constexpr int SPA = BK + kF32PadK, SPB = B_KN ? BN + kF32PadN : BK + kF32PadK;
    constexpr int A_ELEMS = BM * SPA, B_ELEMS = B_KN ? BK * SPB : BN * SPB, STAGE_ELEMS = A_ELEMS + NB * B_ELEMS;
    static_assert(BM % (16 * WARPS_M) == 0 && BN % (8 * WARPS_N) == 0, "warp tiles of whole m16n8 MMA tiles");
    static_assert(BK % 8 == 0 && BK % 4 == 0, "BK must be a multiple of 8 (k8 MMA steps)");
    static_assert(BN % 32 == 0, "BN a multiple of 32 (the B_KN tile's bank pattern)");
    static_assert(STAGES >= 2, "the cp.async pipeline needs at least 2 stages");
    static_assert(kRowStats<Epilogue> == 0, "the fp32 GEMM folds no row statistics of A");
    static_assert(SPLIT >= 1 && SPLIT <= 8, "split-K: 1 to 8 CTAs a tile (a portable cluster)");

    extern __shared__ __align__(128) unsigned char smem_raw[];
    float *smem = reinterpret_cast<float *>(smem_raw);

    // Block → its tile (gemm.cuh grouped_tile), its chunk of K (split-K through memory), its rank in the tile's
    // cluster (split-K) and the K tiles those leave it (gemm.cuh KSlot).
    const int tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    const KSlot<SPLIT> slot(tiles_m * tiles_n, p.k_chunks, (p.K + BK - 1) / BK);
    const int split = slot.split, kt0 = slot.kt0, KT = slot.kt;
    int m0, n0;
    grouped_tile<BM, BN>(slot.id, tiles_m, tiles_n, m0, n0);
    const int b = blockIdx.z;

    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane >> 2, t = lane & 3;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;

    const float *gA = p.A + b * p.a_batch_stride;
    const float *gB[NB];
    gB[0] = p.B0 + b * p.b_batch_stride;
    if constexpr (DUAL) gB[NB - 1] = p.B1 + b * p.b_batch_stride;

    auto load_a = [&](int s, int kt) {
        load_tile_f32<BM, BK, SPA, THREADS, VEC>(smem + s * STAGE_ELEMS, gA, p.lda, m0, p.M, kt * BK, p.K);
    };
    auto load_b = [&](int s, int kt) {
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            float *sB = smem + s * STAGE_ELEMS + A_ELEMS + j * B_ELEMS;
            if constexpr (B_KN) load_tile_f32<BK, BN, SPB, THREADS, VEC>(sB, gB[j], p.ldb, kt * BK, p.K, n0, p.N);
            else load_tile_f32<BN, BK, SPB, THREADS, VEC>(sB, gB[j], p.ldb, n0, p.N, kt * BK, p.K);
        }
    };

    float acc[NB][MI][NI][4];
    zero_acc(acc);

    // Pipeline as gemm.cuh's: STAGES-1 tiles in flight ahead of the one being multiplied. Split-K: this CTA's
    // K tiles are [kt0, kt0 + KT) (kt below counts from kt0).
    const bool ready = start_pipeline<STAGES>(p.a_ready, p.b_ready, KT, kt0, load_a, load_b);
    for (int kt = 0; kt < KT; ++kt) {
        tst::cp_async_wait<STAGES - 2>();   // tile kt has landed (this thread's part)
        __syncthreads();                    // ... everyone's part; stage (kt-1)%STAGES is free again
        if (kt + STAGES - 1 < KT) {
            const int s = (kt + STAGES - 1) % STAGES;
            load_a(s, kt0 + kt + STAGES - 1), load_b(s, kt0 + kt + STAGES - 1);
        }
        tst::cp_async_commit();

        const float *sA = smem + (kt % STAGES) * STAGE_ELEMS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            uint32_t ab[MI][4], as[MI][4];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const float *r0 = sA + (wm + mi * 16 + g) * SPA + kk + t, *r8 = r0 + 8 * SPA;
                split_tf32(r0[0], ab[mi][0], as[mi][0]);
                split_tf32(r8[0], ab[mi][1], as[mi][1]);
                split_tf32(r0[4], ab[mi][2], as[mi][2]);
                split_tf32(r8[4], ab[mi][3], as[mi][3]);
            }
#pragma unroll
            for (int j = 0; j < NB; ++j) {
                const float *sB = sA + A_ELEMS + j * B_ELEMS;
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) {
                    const int n = wn + ni * 8 + g;
                    const float x0 = B_KN ? sB[(kk + t) * SPB + n] : sB[n * SPB + kk + t];
                    const float x1 = B_KN ? sB[(kk + t + 4) * SPB + n] : sB[n * SPB + kk + t + 4];
                    uint32_t bb[2], bs[2];
                    split_tf32(x0, bb[0], bs[0]);
                    split_tf32(x1, bb[1], bs[1]);
#pragma unroll
                    for (int mi = 0; mi < MI; ++mi) {
                        if constexpr (STEPWISE) {   // this k8 step's three products, then added in (above)
                            float step[4] = {0.f, 0.f, 0.f, 0.f};
                            mma1688_tf32(step, as[mi], bb);
                            mma1688_tf32(step, ab[mi], bs);
                            mma1688_tf32(step, ab[mi], bb);
#pragma unroll
                            for (int e = 0; e < 4; ++e) acc[j][mi][ni][e] += step[e];
                        } else {
                            mma1688_tf32(acc[j][mi][ni], as[mi], bb);
                            mma1688_tf32(acc[j][mi][ni], ab[mi], bs);
                            mma1688_tf32(acc[j][mi][ni], ab[mi], bb);
                        }
                    }
                }
            }
        }
    }
    tst::cp_async_wait<0>();
    if (ready) tst::pdl_wait();   // the epilogue reads and writes what earlier kernels may still touch
    tst::pdl_trigger();
    if constexpr (SPLIT > 1) {   // gemm.cuh's merge: rank 0 adds the others' sums in
        if (!split_k_merge<SPLIT, THREADS, STAGES * STAGE_ELEMS>(acc, smem, split, [](int) {})) return;
    }

    // Epilogue straight from the accumulators (gemm.cuh's layout): rows g (+8), columns 2t (+1) of each tile; split-K
    // through memory: this chunk's sums, stored (gemm.cuh split_k_sum_kernel runs the epilogue).
    if (p.k_chunks > 1) return store_k_partials(p, acc, slot.chunk, b, m0 + wm, n0 + wn, lane);
    each_acc_pair<MI, NI>(m0 + wm, n0 + wn, p.M, p.N, lane, [&](int row, int col, int mi, int h, int ni) {
        const float *v = &acc[0][mi][ni][2 * h];
        if constexpr (DUAL) {
            const float *w = &acc[NB - 1][mi][ni][2 * h];
            epi_apply<float>(p.ep, b, row, col, v[0], v[1], w[0], w[1], nullptr);
        } else {
            epi_apply<float>(p.ep, b, row, col, v[0], v[1], nullptr);
        }
    });
}

// ---- launch -------------------------------------------------------------------------------------
// The loader p's operands allow: 16-byte cp.async when every operand is 16-byte aligned with strides of whole
// 4-float chunks, else 4 (one float a copy).
template <class Epilogue, bool DUAL> inline int gemm_f32_loader_bytes(const GemmParams<float, Epilogue> &p) {
    auto chunked4 = [](const float *q, int64_t ld, int64_t bs, int batch) {
        return (reinterpret_cast<uintptr_t>(q) & 15) == 0 && ld % 4 == 0 && (batch <= 1 || bs % 4 == 0);
    };
    return every_operand<float, Epilogue, DUAL>(p, chunked4) ? 16 : 4;
}

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool B_KN, bool DUAL, class Epilogue, int VEC,
          int SPLIT, bool STEPWISE>
cudaError_t launch_gemm_f32_path(const GemmParams<float, Epilogue> &p, cudaStream_t stream) {
    auto kernel = gemm_f32_kernel<BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, VEC, SPLIT, STEPWISE>;
    constexpr int smem = gemm_f32_smem_bytes<BM, BN, BK, STAGES, B_KN, DUAL>();
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

// Launch C = epilogue(A·B) (or the DUAL form) of fp32 operands for p on stream. Returns an error, never prints
// or exits: cudaErrorInvalidValue for negative sizes, batch outside 1..65535, a missing or misaligned pointer
// or a second operand pair; whatever the runtime reports otherwise.
// SPLIT > 1: split-K over clusters of SPLIT CTAs (gemm.cuh's: each multiplies a contiguous share of the K tiles,
// rank 0 adds the others' sums through distributed shared memory and runs the epilogue), on compute capability
// 9.0 and later; on an older GPU the same call runs SPLIT = 1. p.k_chunks > 1: split-K through memory as well
// (gemm.cuh GemmParams::k_chunks; any GPU). A CTA whose share of K exceeds kF32ChainK adds each
// k8 step's products in by an FADD (STEPWISE, above).
template <int BM = 128, int BN = 128, int BK = 32, int WARPS_M = 2, int WARPS_N = 4, int STAGES = 4, bool B_KN = true,
          bool DUAL = false, class Epilogue = StoreEpilogue<float>, int SPLIT = 1>
cudaError_t launch_gemm_f32(const GemmParams<float, Epilogue> &p, cudaStream_t stream) {
    if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 1 || p.batch > 65535 || p.K2 != 0) return cudaErrorInvalidValue;
    if (!p.A || !p.B0 || (DUAL && !p.B1)) return cudaErrorInvalidValue;
    auto misaligned = [](const float *q) { return (reinterpret_cast<uintptr_t>(q) & 3) != 0; };
    if (misaligned(p.A) || misaligned(p.B0) || (DUAL && misaligned(p.B1))) return cudaErrorInvalidValue;
    if (p.M == 0 || p.N == 0) return cudaSuccess;
    if constexpr (SPLIT > 1) {
        tst::DeviceFacts f;
        cudaError_t e = tst::device_facts(&f);
        if (e != cudaSuccess) return e;
        if (f.cc_major < 9) return launch_gemm_f32<BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 1>(p, stream);
    }
    const int chunks = p.k_chunks > 1 ? p.k_chunks : 1;
    if (chunks > 1 && !chunked_split_ok<float, Epilogue, DUAL>(p)) return cudaErrorInvalidValue;
    const bool vec16 = gemm_f32_loader_bytes<Epilogue, DUAL>(p) == 16, stepwise = f32_stepwise(p.K, SPLIT * chunks);
    cudaError_t e;
    if (stepwise)
        e = vec16 ? launch_gemm_f32_path<BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 16, SPLIT, true>(p, stream)
                  : launch_gemm_f32_path<BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 4, SPLIT, true>(p, stream);
    else
        e = vec16 ? launch_gemm_f32_path<BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 16, SPLIT, false>(p, stream)
                  : launch_gemm_f32_path<BM, BN, BK, WARPS_M, WARPS_N, STAGES, B_KN, DUAL, Epilogue, 4, SPLIT, false>(p, stream);
    return e != cudaSuccess || chunks == 1 ? e : launch_split_k_sum<float, Epilogue, DUAL>(p, stream);
}

}  // namespace tsg

// ---- self-test instantiation: `nvcc -DTSG_SELFTEST -c gemm_f32.cuh` compiles the default forms -----------
#ifdef TSG_SELFTEST
template cudaError_t tsg::launch_gemm_f32<>(const tsg::GemmParams<float, tsg::StoreEpilogue<float>> &, cudaStream_t);
template cudaError_t tsg::launch_gemm_f32<64, 64, 32, 2, 2, 4, false, false, tsg::StoreEpilogue<float>>(
    const tsg::GemmParams<float, tsg::StoreEpilogue<float>> &, cudaStream_t);
template cudaError_t tsg::launch_gemm_f32<64, 64, 32, 2, 2, 4, true, false, tsg::StoreEpilogue<float>, 4>(
    const tsg::GemmParams<float, tsg::StoreEpilogue<float>> &, cudaStream_t);
#endif
