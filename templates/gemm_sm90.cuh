// gemm_sm90.cuh — the Hopper (sm_90a) form of gemm.cuh: the same GemmParams<T, Epilogue>, the same epilogue
// functors and the same operand layouts, computed with TMA loads and wgmma.mma_async. Per batch b:
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B[k, n])                              (single)
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B0[k, n], Σ_k A[m, k]·B1[k, n])       (DUAL: one A tile, two B)
// fp16 or bf16 in, fp32 accumulate. Any M, N, K. Namespace tsg90; includes gemm.cuh (params, epilogues and
// the mma.sync kernel it falls back to).
//
//   tsg90::launch_gemm_sm90<T, BM, BN, STAGES, CM, B_KN, DUAL, Epilogue, PP, TWO, A_KM>(params, stream)
//
// Operands exactly as gemm.cuh (element strides, int64): A (M, K) K contiguous, or with A_KM (K, M) M contiguous
// (`Aᵀ·B` of an A stored [k, m], as a weight gradient Xᵀ·dY reads X); B_KN: B (K, N) N contiguous (a weight),
// else B (N, K) K contiguous; B1 (DUAL) has B0's layout, shape, ldb and batch stride.
//
// The kernel, per output tile BM × BN (DUAL: BM × BN of each of the two products). Persistent: the grid holds
// as many CTAs (clusters) as are resident at once, each taking tiles (over every batch) in a grouped order
// (L2 reuse of B); the stage ring runs on across tiles, so the producer loads the next tile while the
// consumers run the last one's epilogue.
//   * 384 threads = 3 warpgroups. Warpgroup 0 is the producer (setmaxnreg.dec 40; one thread issues TMA);
//     warpgroups 1 and 2 are the consumers (setmaxnreg.inc 232), each owning BM/2 rows of the tile.
//   * STAGES-deep ring of shared-memory stages, each = A tile (BM rows × 64 k; K-major, or with A_KM M-major in
//     BM/64 slabs of 64 k rows × 64 m as B_KN's B, read by wgmma with imm-trans-a) + B tile (NB·BN
//     columns × 64 k; K-major for B_NK, N-major for B_KN), all in the 128-byte-swizzle layout that
//     cp.async.bulk.tensor writes (CU_TENSOR_MAP_SWIZZLE_128B) and wgmma reads through its descriptors.
//     full[s] (TMA transaction bytes) and empty[s] (one arrival per consumer warp of every CTA of the
//     cluster) mbarriers hand the stages back and forth.
//   * Consumers: per stage, 4 k16 steps of wgmma m64nNk16 (N = NB·BN ≤ 256: in DUAL, B0's and B1's tiles
//     sit side by side in shared memory, so one wgmma computes both products from one read of A), one
//     commit group per stage, wgmma.wait_group 1 (the previous stage's group is complete → release it).
//   * Edges: the TMA box reads zeros outside (M, N, K) — no predication in the main loop.
//   * CM = 2: clusters of 2 CTAs on adjacent tile rows that share a B tile; each CTA loads half of the
//     B boxes and multicasts them to both (halves the L2→SM traffic of B).
//   * Row statistics of A (a functor with kRowStats, gemm.cuh: an RMSNorm's Σ_k x² of the rows it multiplies) are
//     published, not folded: warps 1-3 of every CTA's producer warpgroup, idle beside the one thread issuing TMA,
//     read an interleaved share of A's rows from global memory (one read of A over the whole grid, beside the
//     main loops), finish them and store them to GemmParams::row_stats; the CTA's arrival is counted in a
//     grid counter (grid_sync below). Before its first epilogue a consumer warpgroup waits for every CTA's
//     arrival, and before each epilogue copies its rows' values to shared memory. The grid is persistent (every
//     CTA resident at once), so the wait always ends; the last CTA to leave resets the counter. The wait is for
//     every row: in a GEMM of several waves whose A is large it outlasts the first wave's main loops (bench/NOTES.md
//     run 159: +11% at 4096³), which the cost model charges. Folding the
//     rows' terms from each stage's shared-memory A tile instead cost 0.09-0.41 us a K-tile (bench/NOTES.md
//     runs 43-49: its reads compete with wgmma's for shared memory). When no counter is free
//     (kSyncSlots workspaces in use), the launcher runs row_stats_kernel first and the GEMM only reads.
//   * Row reductions of C (a functor with kRowParts, gemm.cuh: a log-sum-exp or maximum over each row of the
//     product, the per-row kernel that would read C back): no tile is stored; each consumer thread turns its
//     accumulators into pre(...) and reduces its columns, the 4 lanes of a row meet by shuffles, and a lane a
//     row writes the tile's results to GemmParams::rows_scratch; tsg::row_parts_merge_kernel, launched next,
//     meets a row's tiles (a warp a row). Cooperative and single only (no cluster: config.c); ping-pong compiles
//     but measured slower (bench/NOTES.md run 151). A whole tile skips the bounds checks: the epilogue is
//     instruction-bound (every element's terms, and a CTA's next main loop waits for it).
//   * Epilogue, value-form functors (gemm.cuh: row_ptr + value / value_loaded; every functor the emitter writes)
//     with 2-byte outputs, on a whole tile whose rows start 16-byte aligned: each consumer warp computes its
//     fragment pairs' values in registers (a two-phase functor's operands loaded a chunk ahead; once per column
//     pair for all the lane's rows when they do not vary along the rows, kLoadByColumn: a bias), parks them
//     converted (4 bytes a pair) in its own slot, 64 columns at a time (32/MI with loads), and stores each row
//     segment as 16-byte vectors. Against the staged form below: a quarter of the stores, half the parked bytes,
//     no per-pair address arithmetic — the epilogue had been instruction-bound, ~2 us a tile (bench/NOTES.md
//     run 102: 4096^3 0.190 → 0.182 ms, cuBLAS 0.179; K = 1024 over 4096^2 −18%).
//   * Epilogue otherwise (single form, when a parking slot fits beside the stages): each consumer warp parks 16-64
//     columns of its fp32 accumulators at a time in its own shared-memory slot (not the stages: those are
//     refilling) and reads them back a row segment per half-warp or warp, calling
//     ep.apply<T>(b, row, col, v0, v1) so that a warp's stores are whole row segments; with a two-phase
//     functor (gemm.cuh: load / apply_loaded) an interior tile issues four row segments' loads before the
//     first store. DUAL: straight from the wgmma fragments (warp w of a consumer owns rows 16w..16w+15 of its
//     m64 slice; lane l holds rows l/4 and l/4+8, columns 8j + 2(l%4) and +1 for each n8 block j), calling
//     ep.apply<T>(b, row, col, v0, v1, w0, w1). Either way as gemm.cuh documents (col even; the functor
//     checks col + 1 < n).
// The launch helper falls back to tsg::launch_gemm (mma.sync) when TMA cannot describe the operands: a
// pointer not 16-byte aligned, lda/ldb or a batch stride (batch > 1) not a multiple of 8 elements, K == 0,
// or cuTensorMapEncodeTiled refusing the layout. It returns cudaErrorNotSupported on a device that is not
// compute capability 9.0, or when this file was compiled without an sm_90a target (the kernel body is
// compiled only for sm_90a; elsewhere it traps).
//
// Template knobs: BM ∈ {128, 256} (two consumer warpgroups of BM/2 rows), BN a multiple of 64 with
// NB·BN ≤ 256, STAGES ≥ 2 with STAGES·(BM + NB·BN)·128 bytes ≤ ~225 KB, CM ∈ {1, 2}, PP (ping-pong: the two
// consumer warpgroups take turns, a whole BM × BN tile each with BM ∈ {64, 128}, so that one's epilogue runs
// beside the other's main loop; its 128×128 tiles move more operand bytes per FLOP, so it pays only for
// heavy epilogues: bench/NOTES.md run 49), TWO (a second operand pair, A2·B2 over K2), A_KM (A M-major; not with
// TWO or row statistics, which read A's tile K-major).
// Define TSG90_WATCHDOG=1 before including to make a barrier wait that exceeds ~4 s trap (turns a protocol
// deadlock into a reported launch failure — cudaErrorLaunchFailure / illegal instruction — instead of a hang).
// Never put a function call (printf) in the consumer path: ptxas then serializes the wgmmas (info C7510).
#pragma once
#include <cuda.h>   // CUtensorMap and the cuTensorMapEncodeTiled types (no -lcuda: resolved at run time)
#include <cudaTypedefs.h>

#include "gemm.cuh"

#ifndef TSG90_WATCHDOG
#define TSG90_WATCHDOG 0
#endif

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TSG90_DEVICE_OK 1
#else
#define TSG90_DEVICE_OK 0
#endif

namespace tsg90 {

// ---- wgmma m64nNk16 (fp32 accumulate; A and B from shared memory through descriptors) --------------------
// d: this thread's N/2 accumulators; da, db: descriptors; scale_d = 0 overwrites d; TB (imm-trans-b) = 1 for
// an N-major B (B_KN), 0 for a K-major B (B_NK); TA (imm-trans-a) = 1 for an M-major A (A_KM), 0 for K-major.
#define TSG90_WGMMA_OUTS_N64(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),  \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define TSG90_WGMMA_ASM_N64_F16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
    "%32, %33, p, 1, 1, %36, %35;\n}\n"

#define TSG90_WGMMA_ASM_N64_BF16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
    "%32, %33, p, 1, 1, %36, %35;\n}\n"

#define TSG90_WGMMA_OUTS_N128(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),  \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),  \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),  \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),  \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),  \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

#define TSG90_WGMMA_ASM_N128_F16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
    "%64, %65, p, 1, 1, %68, %67;\n}\n"

#define TSG90_WGMMA_ASM_N128_BF16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
    "%64, %65, p, 1, 1, %68, %67;\n}\n"

#define TSG90_WGMMA_OUTS_N192(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),  \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),  \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),  \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),  \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),  \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),  \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),  \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),  \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),  \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

#define TSG90_WGMMA_ASM_N192_F16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, " \
    "%96, %97, p, 1, 1, %100, %99;\n}\n"

#define TSG90_WGMMA_ASM_N192_BF16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, " \
    "%96, %97, p, 1, 1, %100, %99;\n}\n"

#define TSG90_WGMMA_OUTS_N256(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),  \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),  \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),  \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),  \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),  \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),  \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),  \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),  \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),  \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),  \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),  \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),  \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),  \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),  \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

#define TSG90_WGMMA_ASM_N256_F16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
    "%128, %129, p, 1, 1, %132, %131;\n}\n"

#define TSG90_WGMMA_ASM_N256_BF16 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, " \
    "%128, %129, p, 1, 1, %132, %131;\n}\n"

template <typename T, int TB, int TA = 0>
__device__ __forceinline__ void wgmma_n64(float (&d)[32], uint64_t da, uint64_t db, int scale_d) {
#if TSG90_DEVICE_OK
    if constexpr (tst::elem<T>::is_bf16)
        asm volatile(TSG90_WGMMA_ASM_N64_BF16 : TSG90_WGMMA_OUTS_N64(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
    else
        asm volatile(TSG90_WGMMA_ASM_N64_F16 : TSG90_WGMMA_OUTS_N64(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
#else
    (void)d, (void)da, (void)db, (void)scale_d;
#endif
}

template <typename T, int TB, int TA = 0>
__device__ __forceinline__ void wgmma_n128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if TSG90_DEVICE_OK
    if constexpr (tst::elem<T>::is_bf16)
        asm volatile(TSG90_WGMMA_ASM_N128_BF16 : TSG90_WGMMA_OUTS_N128(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
    else
        asm volatile(TSG90_WGMMA_ASM_N128_F16 : TSG90_WGMMA_OUTS_N128(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
#else
    (void)d, (void)da, (void)db, (void)scale_d;
#endif
}

template <typename T, int TB, int TA = 0>
__device__ __forceinline__ void wgmma_n192(float (&d)[96], uint64_t da, uint64_t db, int scale_d) {
#if TSG90_DEVICE_OK
    if constexpr (tst::elem<T>::is_bf16)
        asm volatile(TSG90_WGMMA_ASM_N192_BF16 : TSG90_WGMMA_OUTS_N192(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
    else
        asm volatile(TSG90_WGMMA_ASM_N192_F16 : TSG90_WGMMA_OUTS_N192(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
#else
    (void)d, (void)da, (void)db, (void)scale_d;
#endif
}

template <typename T, int TB, int TA = 0>
__device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t da, uint64_t db, int scale_d) {
#if TSG90_DEVICE_OK
    if constexpr (tst::elem<T>::is_bf16)
        asm volatile(TSG90_WGMMA_ASM_N256_BF16 : TSG90_WGMMA_OUTS_N256(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
    else
        asm volatile(TSG90_WGMMA_ASM_N256_F16 : TSG90_WGMMA_OUTS_N256(d) : "l"(da), "l"(db), "r"(scale_d), "n"(TB), "n"(TA));
#else
    (void)d, (void)da, (void)db, (void)scale_d;
#endif
}

// ---- PTX helpers (sm_90a; empty elsewhere) ---------------------------------------------------------------
__device__ __forceinline__ void fence_operand(float &x) { asm volatile("" : "+f"(x)::"memory"); }

__device__ __forceinline__ void wgmma_fence() {
#if TSG90_DEVICE_OK
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if TSG90_DEVICE_OK
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
#if TSG90_DEVICE_OK
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
template <int R> __device__ __forceinline__ void setmaxnreg_inc() {
#if TSG90_DEVICE_OK
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}
template <int R> __device__ __forceinline__ void setmaxnreg_dec() {
#if TSG90_DEVICE_OK
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if TSG90_DEVICE_OK
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialized barriers visible to the async proxy (TMA) and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_mbar_init() {
#if TSG90_DEVICE_OK
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if TSG90_DEVICE_OK
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_local(uint32_t bar) {
#if TSG90_DEVICE_OK
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// Arrive on the barrier at the same shared-memory offset in CTA `cta` of this cluster (may be this CTA).
// Release at CTA scope (the default), as the consumers only read the stage: `.release.cluster` here made
// every stage wait for the fence, and CM=2 ran at 0.58x of CM=1 (0.0834 vs 0.0543 ms; now 0.0510 vs 0.0504).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t cta) {
#if TSG90_DEVICE_OK
    asm volatile(
        "{\n.reg .b32 ra;\n"
        "mapa.shared::cluster.u32 ra, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [ra];\n}\n" ::"r"(bar),
        "r"(cta)
        : "memory");
#endif
}
// Wait until the phase of parity `parity` of barrier `bar` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if TSG90_DEVICE_OK
#if TSG90_WATCHDOG
    const long long t0 = clock64();
#endif
    uint32_t done;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
#if TSG90_WATCHDOG
        // No printf here: a call inside the wgmma pipeline makes ptxas serialize every wgmma (C7510).
        if (!done && clock64() - t0 > (1ll << 33)) __trap();
#endif
    } while (!done);
#else
    (void)bar, (void)parity;
#endif
}

// TMA: the box at coordinates (c0, c1, c2) of tensor map `map` → shared memory dst; completes `bar`'s
// transaction bytes. The multicast form writes the box (and signals the barrier at the same offset) in every
// CTA of the cluster whose bit is set in mask.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, uint32_t bar) {
#if TSG90_DEVICE_OK
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
        : "memory");
#else
    (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)bar;
#endif
}
__device__ __forceinline__ void tma_load_mc(uint32_t dst, const CUtensorMap *map, int c0, int c1, int c2, uint32_t bar,
                                            uint16_t mask) {
#if TSG90_DEVICE_OK
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, "
        "%4}], [%5], %6;\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask)
        : "memory");
#else
    (void)dst, (void)map, (void)c0, (void)c1, (void)c2, (void)bar, (void)mask;
#endif
}
__device__ __forceinline__ void tma_prefetch_desc(const CUtensorMap *map) {
#if TSG90_DEVICE_OK
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#else
    (void)map;
#endif
}
// bar.sync on named barrier `id` (1..15; 0 is __syncthreads) by `count` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
#if TSG90_DEVICE_OK
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#else
    (void)id, (void)count;
#endif
}
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
#if TSG90_DEVICE_OK
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#else
    (void)id, (void)count;
#endif
}
__device__ __forceinline__ void cluster_sync() {
#if TSG90_DEVICE_OK
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

// wgmma shared-memory descriptor, 128-byte swizzle (layout type 1 in bits 62-63), base offset 0 (every
// swizzle atom of 8 rows × 128 bytes starts 1024-byte aligned; k16 steps inside an atom only move the start
// address, the hardware applies the XOR pattern to the absolute address bits as TMA did).
//   K-major (A, B_NK): LBO unused (16), SBO = 1024 (next 8 rows of M/N).
//   N-major (B_KN):    LBO = byte stride between 64-column slabs, SBO = 1024 (next 8 rows of K).
__device__ __forceinline__ uint64_t make_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
    return static_cast<uint64_t>((saddr & 0x3FFFFu) >> 4) | (static_cast<uint64_t>((lbo >> 4) & 0x3FFFu) << 16) |
           (static_cast<uint64_t>((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

// ---- configuration ------------------------------------------------------------------------------------
template <int BM, int BN, int STAGES, int CM, bool DUAL, int ROW_OUTS = 0, bool PP = false, int VALUE = 0, int IN_BYTES = 16>
struct Cfg {
    static constexpr int NB = DUAL ? 2 : 1;
    static constexpr int NT = NB * BN;                  // wgmma N: B0's columns then B1's
    static constexpr int WG_ROWS = PP ? BM : BM / 2;    // tile rows a consumer warpgroup owns
    static constexpr int MI = WG_ROWS / 64;             // m64 slices per consumer warpgroup
    static constexpr int BK = 64;                       // one 128-byte swizzle row of 2-byte elements
    static constexpr int A_BYTES = BM * BK * 2;
    static constexpr int BOX_BYTES = 64 * BK * 2;       // a 64 × 64 B box (8 KB)
    static constexpr int NBOX = NT / 64;                // B boxes per stage
    static constexpr int B_BYTES = NBOX * BOX_BYTES;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int THREADS = 384;
    static constexpr int CONSUMER_WARPS = PP ? 4 : 8;   // consumer warps reading each stage
    static constexpr int SMEM_LIMIT = 232448;           // 227 KB per block (opt-in)
    // Shared memory: the stages | their full and empty barriers | row statistics of A (both warpgroups' rows ×
    // ROW_OUTS finished values) | the epilogue's parking.
    static constexpr int STATS_OFFSET = STAGES * STAGE_BYTES + 2 * STAGES * 8;
    static constexpr int PARK_OFFSET = STATS_OFFSET + 2 * WG_ROWS * ROW_OUTS * 4;
    // Staged epilogue: each consumer warp parks EPI_CC columns of its fp32 accumulators at a time (its 16·MI
    // rows, rows padded by 8 floats: the fragment writes are conflict-free) in its own shared-memory slot and
    // reads them back a row segment per half-warp or warp, so that a warp's stores (and residual reads) are
    // whole row segments. The slot is the warp's alone (only __syncwarp between writing and reading) and apart
    // from the stages, which the producer is already refilling with the next tile's operands. The widest of
    // 64/32/16 columns that fits beside the stages; DUAL (which parks both products but stores one: 2-10%
    // slower staged, bench/gpu/gemm_cluster.sh) and no room: straight from the fragments.
    // A CTA's last tile has no successor to load: when the whole tile fits the drained stages (WIDE_PARK), its
    // warps park all BN columns there at once (one write, one read back: 3% faster on a single wave of tiles
    // than 32-column chunks, bench/NOTES.md run 49).
    __host__ __device__ static constexpr int slot_floats(int cc) { return 16 * MI * (cc + 8); }   // a warp's slot
    static constexpr int park_bytes(int cc) { return cc > 0 ? 8 * slot_floats(cc) * 4 : 0; }   // 8 consumer warps
    static constexpr bool park_fits(int cc) { return 1024 + PARK_OFFSET + park_bytes(cc) <= SMEM_LIMIT; }
    static constexpr int EPI_CC = DUAL ? 0 : park_fits(64) ? 64 : park_fits(32) ? 32 : park_fits(16) ? 16 : 0;
    static constexpr bool STAGED_EPILOGUE = EPI_CC > 0;
    static constexpr bool WIDE_PARK = !PP && STAGED_EPILOGUE && BN > EPI_CC && park_bytes(BN) <= STAGES * STAGE_BYTES;
    // Packed epilogue (VALUE: 1 a value-form functor, 2 a two-phase one; gemm.cuh): each consumer warp parks PACK_CC
    // columns of converted outputs at a time (a pair in 4 bytes; rows padded by 16 bytes: the fragment writes
    // are conflict-free) in its slot, and stores 16-byte vectors. 64 columns (a 128-byte row segment)
    // when nothing is loaded; for a two-phase functor as many as keep a chunk's operands (IN_BYTES a pair, twice:
    // this chunk's and the next one's) within 64 registers — 64/MI columns for a residual alone, 32/MI for a
    // residual and a bias (and for a bias alone: value_in_bytes). Each chunk's residual loads wait out a load
    // latency (~0.7 us in a GEMM of one wave of tiles, every CTA in its epilogue at once: bench/NOTES.md runs
    // 129-132), so the fewer chunks the better there.
    __host__ __device__ static constexpr int pack_words(int cc) { return cc > 0 ? 16 * MI * (cc / 2 + 4) : 0; }
    static constexpr bool pack_fits(int cc) { return 1024 + PARK_OFFSET + 8 * pack_words(cc) * 4 <= SMEM_LIMIT; }
    static constexpr int LOAD_CC = 512 / (IN_BYTES * MI) >= 64 ? 64 : 512 / (IN_BYTES * MI) >= 32 ? 32 : 16;
    static constexpr int PACK_WANT = VALUE == 1 ? 64 : VALUE == 2 ? LOAD_CC : 0;
    static constexpr int PACK_CC = PACK_WANT == 0 ? 0 : pack_fits(PACK_WANT) ? PACK_WANT : pack_fits(16) ? 16 : 0;
    // A warp's slot holds either form (a warp may run one tile's epilogue while another warp still runs the
    // previous tile's in the other form: the slots must not overlap).
    static constexpr int PARK_WORDS = EPI_CC > 0 ? slot_floats(EPI_CC) : 0;
    static constexpr int SLOT_WORDS = PARK_WORDS > pack_words(PACK_CC) ? PARK_WORDS : pack_words(PACK_CC);
    static constexpr int SMEM = 1024 /* alignment slack */ + PARK_OFFSET + 8 * SLOT_WORDS * 4;
    static_assert(PP ? (BM == 64 || BM == 128) : (BM == 128 || BM == 256),
                  "BM must be 128 or 256 (two consumer warpgroups of BM/2 rows); ping-pong: 64 or 128 (a tile a warpgroup)");
    static_assert(BN % 64 == 0 && NT <= 256, "BN must be a multiple of 64 and NB*BN <= 256 (wgmma N)");
    static_assert(NT == 64 || NT == 128 || NT == 192 || NT == 256, "wgmma N must be 64, 128, 192 or 256");
    static_assert(STAGES >= 2, "at least 2 stages");
    static_assert(CM == 1 || CM == 2, "CM (cluster size along M) must be 1 or 2");
    static_assert(NBOX % CM == 0, "the B boxes must split evenly over the cluster");
    static_assert(SMEM <= SMEM_LIMIT, "shared memory above the 227 KB per-block limit: fewer STAGES");
};

// Tile order. Work items are clusters of CM tiles on adjacent tile rows of one tile column ("pairs"),
// numbered batch by batch; inside a batch, in groups of kGroupM tile rows that sweep the tile columns
// together (L2 reuse of B, as in gemm.cuh). A persistent CTA takes items q, q + stride, ...
template <int BM, int BN, int CM> struct TileOrder {
    static constexpr int G = tsg::kGroupM / CM > 0 ? tsg::kGroupM / CM : 1;
    int tiles_n, pairs_m, per_batch;
    __host__ __device__ TileOrder(int M, int N) {
        const int tiles_m = (M + BM - 1) / BM;
        tiles_n = (N + BN - 1) / BN, pairs_m = (tiles_m + CM - 1) / CM, per_batch = pairs_m * tiles_n;
    }
    __device__ __forceinline__ void at(int q, int rank, int &m0, int &n0, int &b) const {
        b = q / per_batch;
        const int id = q - b * per_batch, per_group = G * tiles_n, group = id / per_group;
        const int first = group * G, gm = min(pairs_m - first, G);
        const int pm = first + (id % per_group) % gm, tn = (id % per_group) / gm;
        m0 = (pm * CM + rank) * BM, n0 = tn * BN;
    }
};

// A position in the stage ring that runs on across tiles: stage s, phase bit ph.
template <int STAGES> struct Ring {
    int s = 0;
    uint32_t ph = 0;
    __device__ __forceinline__ void next() {
        if (++s == STAGES) s = 0, ph ^= 1u;
    }
    __device__ __forceinline__ void seek(long long it) {   // the it-th use of the ring (from 0)
        s = static_cast<int>(it % STAGES), ph = static_cast<uint32_t>((it / STAGES) & 1);
    }
};

// ---- epilogues (consumer warps, after a tile's last wgmma) -----------------------------------------------
// Fragment layout: acc[mi][4j + 2h + e] is (row wq·16 + lane/4 + 8h, column 8j + 2(lane%4) + e) of m64 slice mi
// of the warpgroup's rows. row0: the warpgroup's first row; rs0: its rows' statistics (O values a row).

// The values a two-phase functor (gemm.cuh) loads for a column pair, or nothing for other functors.
template <class E, bool = tsg::kTwoPhaseEpilogue<E>> struct LoadedOf {
    struct type {};
};
template <class E> struct LoadedOf<E, true> {
    using type = typename E::In;
};

// Through the warp's parking slot (16·MI rows of CC + 8 floats), CC columns at a time: a half-warp or warp
// then reads a row segment (≤ 64 columns) back and applies the functor to column pairs, so stores and functor
// loads are whole segments.
template <class C, int BN, int CC, typename T, class Epilogue>
__device__ __forceinline__ void epilogue_staged(const tsg::GemmParams<T, Epilogue> &p, float (&acc)[C::MI][C::NT / 2],
                                                float *park, int b, int row0, int n0, int wq, int lane, const float *rs0) {
    constexpr int LD = CC + 8, RO = tsg::kRowOuts<Epilogue>, SEG = CC < 64 ? CC : 64;
    constexpr int LPR = SEG / 2, RPI = 32 / LPR;   // lanes a row (a column pair each), rows a warp instruction
    constexpr int ITERS = 16 * C::MI / RPI;        // warp instructions to cover the warp's 16·MI rows
    static_assert(BN % CC == 0 && CC % SEG == 0, "chunks of whole segments");
    const int rl = lane / LPR, cl = 2 * (lane % LPR);
    // warpgroup row of parked row lr = 16·mi + r (r < 16): slice mi, the warp's rows wq·16 + r
    auto row_of = [&](int i) {
        const int lr = i * RPI + rl;
        return (lr / 16) * 64 + wq * 16 + lr % 16;
    };
    const bool edge = row0 + C::MI * 64 > p.M || n0 + BN > p.N;
    // Chunks with a two-phase functor (a bias, a residual): the next chunk's loads are issued before this
    // chunk's stores, as many in flight as the wide form's four rows of four segments.
    constexpr int NCH = BN / CC;
    constexpr bool PIPE = tsg::kTwoPhaseEpilogue<Epilogue> && NCH > 1;
    static_assert(!PIPE || CC <= 64, "a chunk of one segment a row");
    typename LoadedOf<Epilogue>::type pre[PIPE ? ITERS : 1];
    auto load_chunk = [&](int c) {
        if constexpr (PIPE)
#pragma unroll
            for (int i = 0; i < ITERS; ++i) pre[i] = p.ep.load(b, row0 + row_of(i), n0 + c * CC + cl);
    };
    if (PIPE && !edge) load_chunk(0);
#pragma unroll
    for (int c = 0; c < NCH; ++c) {
        __syncwarp();   // the previous chunk's reads are done
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int lr = mi * 16 + (lane >> 2) + 8 * h;
#pragma unroll
                for (int jj = 0; jj < CC / 8; ++jj) {
                    const int j = c * (CC / 8) + jj;
                    *reinterpret_cast<float2 *>(park + lr * LD + 8 * jj + 2 * (lane & 3)) =
                        make_float2(acc[mi][4 * j + 2 * h], acc[mi][4 * j + 2 * h + 1]);
                }
            }
        __syncwarp();
        // Row by row, the chunk's NS segments of a row side by side (independent stores in flight).
        constexpr int NS = CC / SEG;
        const int col0 = n0 + c * CC + cl;   // this lane's column in segment 0
        auto parked = [&](int i, int sg) { return *reinterpret_cast<const float2 *>(park + (i * RPI + rl) * LD + sg * SEG + cl); };
        if (edge) {
            for (int i = 0; i < ITERS; ++i) {
                const int r = row_of(i);
                if (row0 + r >= p.M) continue;
#pragma unroll
                for (int sg = 0; sg < NS; ++sg) {
                    if (col0 + sg * SEG >= p.N) break;
                    const float2 v = parked(i, sg);
                    tsg::epi_apply<T>(p.ep, b, row0 + r, col0 + sg * SEG, v.x, v.y, rs0 + r * RO);
                }
            }
        } else if constexpr (PIPE) {
            typename Epilogue::In cur[ITERS];
#pragma unroll
            for (int i = 0; i < ITERS; ++i) cur[i] = pre[i];
            if (c + 1 < NCH) load_chunk(c + 1);
#pragma unroll
            for (int i = 0; i < ITERS; ++i) {
                const int r = row_of(i);
                const float2 v = parked(i, 0);
                tsg::epi_apply_loaded<T>(p.ep, b, row0 + r, col0, cur[i], v.x, v.y, rs0 + r * RO);
            }
        } else if constexpr (tsg::kTwoPhaseEpilogue<Epilogue>) {
            // The functor reads memory (a bias, a residual): U rows' reads are issued before the first store,
            // instead of each pair waiting out DRAM latency behind the previous pair's store.
            constexpr int U = 4;
            static_assert(ITERS % U == 0, "whole row groups");
#pragma unroll 1
            for (int i0 = 0; i0 < ITERS; i0 += U) {
                typename Epilogue::In in[U][NS];
#pragma unroll
                for (int u = 0; u < U; ++u)
#pragma unroll
                    for (int sg = 0; sg < NS; ++sg) in[u][sg] = p.ep.load(b, row0 + row_of(i0 + u), col0 + sg * SEG);
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    const int r = row_of(i0 + u);
#pragma unroll
                    for (int sg = 0; sg < NS; ++sg) {
                        const float2 v = parked(i0 + u, sg);
                        tsg::epi_apply_loaded<T>(p.ep, b, row0 + r, col0 + sg * SEG, in[u][sg], v.x, v.y, rs0 + r * RO);
                    }
                }
            }
        } else {
#pragma unroll 2
            for (int i = 0; i < ITERS; ++i) {
                const int r = row_of(i);
#pragma unroll
                for (int sg = 0; sg < NS; ++sg) {
                    const float2 v = parked(i, sg);
                    tsg::epi_apply<T>(p.ep, b, row0 + r, col0 + sg * SEG, v.x, v.y, rs0 + r * RO);
                }
            }
        }
    }
}

// Which packed form functor E takes (Cfg's VALUE): 1 the value form, 2 the two-phase value form with operands
// of at most 16 bytes a pair, or any number of operands that do not vary along the rows (kLoadByColumn: loaded
// once a column pair; a bias and an eval BatchNorm's four vectors, whose staged form loaded every operand at every
// element and spilled, 24% slower: bench/NOTES.md run 155), 0 neither (or an output that is not 2 bytes an element).
template <class E> __host__ __device__ constexpr int value_kind() {
    if constexpr (!tsg::kValueEpilogue<E>) return 0;
    else if constexpr (sizeof(tsg::EpilogueOut<E>) != 2) return 0;
    else if constexpr (!tsg::kTwoPhaseEpilogue<E>) return 1;
    else return sizeof(typename E::In) <= 16 || tsg::kLoadByColumn<E> ? 2 : 0;
}

// Cfg's IN_BYTES: the bytes of a pair's loaded operands of a two-phase functor that loads an operand differing
// from row to row (a residual: it has a prefetch); 16 otherwise, which keeps a bias-only epilogue's chunks at
// 32/MI columns (64/MI measured 1.6-1.7% slower on GEMM + bias + GELU and GEMM + bias, bench/NOTES.md run 132),
// and column operands of more than 16 bytes a pair at 32/MI too (at 16/MI the accumulators went to local memory).
template <class E> __host__ __device__ constexpr int value_in_bytes() {
    if constexpr (tsg::kTwoPhaseEpilogue<E> && tsg::kPrefetchEpilogue<E>)
        return static_cast<int>(sizeof(typename E::In));
    else return 16;
}

// Whether the tile at (b, m0, n0) takes the packed epilogue: whole (no edge in M or N), its output rows start
// 16-byte aligned, and a functor that loads by pairs finds them aligned (pair_ok). The same answer for both
// consumer warpgroups of a tile.
template <int BM, int BN, typename T, class Epilogue>
__device__ __forceinline__ bool packed_tile(const tsg::GemmParams<T, Epilogue> &p, int b, int m0, int n0) {
    if (m0 + BM > p.M || n0 + BN > p.N) return false;
    if constexpr (tsg::kPairLoads<Epilogue>)
        if (!p.ep.pair_ok()) return false;
    const uintptr_t r0 = reinterpret_cast<uintptr_t>(p.ep.row_ptr(b, m0)), r1 = reinterpret_cast<uintptr_t>(p.ep.row_ptr(b, m0 + 1));
    return ((r0 | (r1 - r0)) & 15) == 0;
}

// A two-phase functor's operands at (b, row, col) of a whole packed tile (col + 1 < n; pair_ok() where it loads by
// pairs: packed_tile).
template <class E> __device__ __forceinline__ typename LoadedOf<E>::type load_whole(const E &ep, int b, int row, int col) {
    if constexpr (tsg::kPairLoads<E>) return ep.load_pair(b, row, col);
    else return ep.load(b, row, col);
}

// The packed epilogue (value-form functors, a whole tile): per chunk of CC columns, each lane computes its
// fragment pairs' values (a two-phase functor's operands loaded a chunk ahead), parks them converted to the
// output type, and the warp then stores each row segment as 16-byte vectors (CC/8 lanes a row).
template <class C, int BN, int CC, bool DUAL, typename T, class Epilogue>
__device__ __forceinline__ void epilogue_packed(const tsg::GemmParams<T, Epilogue> &p, float (&acc)[C::MI][C::NT / 2],
                                                uint32_t *park, int b, int row0, int n0, int wq, int lane, const float *rs0) {
    using Out = tsg::EpilogueOut<Epilogue>;
    constexpr int LDW = CC / 2 + 4, RO = tsg::kRowOuts<Epilogue>, NCH = BN / CC, JJ = CC / 8;
    constexpr int LPR = CC / 8, RPI = 32 / LPR, READS = 16 * C::MI / RPI;   // lanes a row, rows a read, reads a chunk
    constexpr bool LOADS = tsg::kTwoPhaseEpilogue<Epilogue>;
    // a lane's loaded pairs in a chunk: one per fragment pair, or one per column pair when the functor's loads do
    // not vary along the rows (a bias: kLoadByColumn), shared by the lane's 2·MI rows
    constexpr bool BY_COLUMN = tsg::kLoadByColumn<Epilogue>;
    constexpr int PAIRS = BY_COLUMN ? JJ : C::MI * 2 * JJ;
    static_assert(BN % CC == 0 && CC >= 16 && (16 * C::MI) % RPI == 0, "chunks of whole row segments");
    using In = typename LoadedOf<Epilogue>::type;
    const int fr = lane >> 2, fc = 2 * (lane & 3);   // this lane's fragment row (+ 8h) and column (+ 8j)
    auto wg_row = [&](int mi, int h) { return mi * 64 + wq * 16 + fr + 8 * h; };
    auto pair_of = [&](int mi, int h, int jj) { return BY_COLUMN ? jj : (mi * 2 + h) * JJ + jj; };
    In pre[LOADS ? PAIRS : 1];
    auto load_chunk = [&](int c) {
        if constexpr (LOADS)
#pragma unroll
            for (int mi = 0; mi < (BY_COLUMN ? 1 : C::MI); ++mi)
#pragma unroll
                for (int h = 0; h < (BY_COLUMN ? 1 : 2); ++h)
#pragma unroll
                    for (int jj = 0; jj < JJ; ++jj)
                        pre[pair_of(mi, h, jj)] = load_whole(p.ep, b, row0 + wg_row(mi, h), n0 + c * CC + 8 * jj + fc);
    };
    load_chunk(0);
#pragma unroll   // whole: the accumulators are indexed by the chunk
    for (int c = 0; c < NCH; ++c) {
        In cur[LOADS ? PAIRS : 1];
        if constexpr (LOADS) {
#pragma unroll
            for (int i = 0; i < PAIRS; ++i) cur[i] = pre[i];
            if (c + 1 < NCH) load_chunk(c + 1);
        }
        __syncwarp();   // the previous chunk's reads of the slot are done
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = wg_row(mi, h), lr = mi * 16 + fr + 8 * h;
#pragma unroll
                for (int jj = 0; jj < JJ; ++jj) {
                    const int j = c * JJ + jj, col = n0 + 8 * j + fc;
                    const float v0 = acc[mi][4 * j + 2 * h], v1 = acc[mi][4 * j + 2 * h + 1];
                    float2 w = make_float2(0.f, 0.f);
                    if constexpr (DUAL) w = make_float2(acc[mi][4 * (j + BN / 8) + 2 * h], acc[mi][4 * (j + BN / 8) + 2 * h + 1]);
                    float2 o;
                    if constexpr (LOADS) o = tsg::epi_value_loaded<DUAL>(p.ep, b, row0 + r, col, cur[pair_of(mi, h, jj)], v0, v1, w, rs0 + r * RO);
                    else o = tsg::epi_value<DUAL>(p.ep, b, row0 + r, col, v0, v1, w, rs0 + r * RO);
                    park[lr * LDW + 4 * jj + (lane & 3)] = tst::pack2<Out>(o.x, o.y);
                }
            }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < READS; ++i) {
            const int lr = i * RPI + lane / LPR, sg = lane % LPR;
            const uint4 v = *reinterpret_cast<const uint4 *>(park + lr * LDW + 4 * sg);
            const int r = (lr / 16) * 64 + wq * 16 + lr % 16;   // the warpgroup row of parked row lr
            *reinterpret_cast<uint4 *>(p.ep.row_ptr(b, row0 + r) + n0 + c * CC + 8 * sg) = v;
        }
    }
}

// Straight from the fragments (DUAL, or no room to park): ep.apply<T>(b, row, col, v0, v1[, w0, w1]).
template <class C, int BN, bool DUAL, typename T, class Epilogue>
__device__ __forceinline__ void epilogue_direct(const tsg::GemmParams<T, Epilogue> &p, float (&acc)[C::MI][C::NT / 2],
                                                int b, int row0, int n0, int wq, int lane, const float *rs0) {
    constexpr int RO = tsg::kRowOuts<Epilogue>;
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mi * 64 + wq * 16 + (lane >> 2) + 8 * h;
            if (row0 + r >= p.M) continue;
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
                const int col = n0 + 8 * j + 2 * (lane & 3);
                if (col >= p.N) continue;
                const float v0 = acc[mi][4 * j + 2 * h], v1 = acc[mi][4 * j + 2 * h + 1];
                if constexpr (DUAL) {
                    const float w0 = acc[mi][4 * (j + BN / 8) + 2 * h], w1 = acc[mi][4 * (j + BN / 8) + 2 * h + 1];
                    tsg::epi_apply<T>(p.ep, b, row0 + r, col, v0, v1, w0, w1, rs0 + r * RO);
                } else {
                    tsg::epi_apply<T>(p.ep, b, row0 + r, col, v0, v1, rs0 + r * RO);
                }
            }
        }
}

// The lines the epilogue of rows [row0, row0 + ROWS) × columns [n0, n0 + BN) will read from per-row operands
// (a residual), asked into L2 by the warpgroup's 128 threads (t) kPrefetchLead K-tiles before the end of the
// tile's main loop (earlier, the A and B tiles streaming through L2 evict them again: asked at the start of
// the main loop they saved nothing, bench/NOTES.md run 128): in a GEMM of one wave of tiles every CTA runs its
// epilogue at once, and the residual's DRAM reads would otherwise be a phase of their own after the main loop.
constexpr int kPrefetchLead = 8;
template <int ROWS, int BN, typename T, class Epilogue>
__device__ __forceinline__ void prefetch_epilogue(const tsg::GemmParams<T, Epilogue> &p, int b, int row0, int n0, int t) {
    if constexpr (tsg::kPrefetchEpilogue<Epilogue>) {
        constexpr int STEP = Epilogue::kPrefetchStep, LINES = (BN + STEP - 1) / STEP;
        for (int i = t; i < ROWS * LINES; i += 128) {
            const int row = row0 + i / LINES, col = n0 + (i % LINES) * STEP;
            if (row < p.M && col < p.N) p.ep.prefetch(b, row, col);
        }
    } else {
        (void)p, (void)b, (void)row0, (void)n0, (void)t;
    }
}


// Row reductions of C (gemm.cuh: kRowParts), this warpgroup's rows of the tile: the accumulators become
// v = pre(...) (PC 8-column blocks at a time: the empty asm keeps the compiler from moving a block's loads above
// the one before, which keeps them in flight beside the accumulators within the registers), then each reduction
// in turn over the thread's columns and the 4 lanes of a row; a lane of each row writes the tile's S results to
// p.rows_scratch (gemm.cuh: row_parts_partials, [b][row (bands of 128)][tile (≤ ceil(N/64))][S]), where
// tsg::row_parts_merge_kernel, launched next, meets them. The epilogue is instruction-bound (every CTA waits on
// it before its next main loop): WHOLE, a tile inside M and N, runs without a bounds check an element.
template <bool WHOLE, class C, int BN, int PC, typename T, class Epilogue>
__device__ __forceinline__ void row_parts_body(const tsg::GemmParams<T, Epilogue> &p, float (&acc)[C::MI][C::NT / 2], int b,
                                               int row0, int n0, int wq, int lane) {
    constexpr int S = tsg::kRowParts<Epilogue>;
    const Epilogue &ep = p.ep;
#pragma unroll
    for (int j0 = 0; j0 < BN / 8; j0 += PC) {
        asm volatile("" ::: "memory");
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + mi * 64 + wq * 16 + (lane >> 2) + 8 * h;
#pragma unroll
                for (int j = j0; j < j0 + PC && j < BN / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int col = n0 + 8 * j + 2 * (lane & 3) + e;
                        float &v = acc[mi][4 * j + 2 * h + e];
                        if (WHOLE || (row < p.M && col < p.N)) v = ep.pre(b, row, col, v);
                    }
            }
    }
    float *parts = static_cast<float *>(p.rows_scratch);
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + mi * 64 + wq * 16 + (lane >> 2) + 8 * h;
            float part[S];
#pragma unroll
            for (int st = 0; st < S; ++st) {
                constexpr int L = 4;   // independent partial chains a thread keeps (the adds' latency)
                const bool mx = Epilogue::part_max(st);
                float x[L];
#pragma unroll
                for (int l = 0; l < L; ++l) x[l] = mx ? -INFINITY : 0.f;
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e)
                        if (WHOLE || n0 + 8 * j + 2 * (lane & 3) + e < p.N) {
                            float &y = x[(2 * j + e) % L];
                            y = tsg::fold(mx, y, ep.part_term(st, acc[mi][4 * j + 2 * h + e], part));
                        }
#pragma unroll
                for (int l = 1; l < L; ++l) x[0] = tsg::fold(mx, x[0], x[l]);
                part[st] = tsg::fold_lanes<4>(mx, x[0]);   // the quad's lanes hold the row's other columns
            }
            if ((lane & 3) == 0 && (WHOLE || row < p.M))
#pragma unroll
                for (int st = 0; st < S; ++st) parts[tsg::row_parts_at(p.M, p.N, S, b, row) + n0 / BN * S + st] = part[st];
        }
}
template <class C, int BN, int PC = 8, typename T, class Epilogue>
__device__ __forceinline__ void row_parts_tile(const tsg::GemmParams<T, Epilogue> &p, float (&acc)[C::MI][C::NT / 2], int b,
                                               int row0, int n0, int wq, int lane) {
    if (n0 + BN <= p.N && row0 + C::WG_ROWS <= p.M) row_parts_body<true, C, BN, PC>(p, acc, b, row0, n0, wq, lane);
    else row_parts_body<false, C, BN, PC>(p, acc, b, row0, n0, wq, lane);
}

// ---- row statistics of A, published (a functor with kRowStats) -----------------------------------------
// Grid counters: per slot, the CTAs that have published their rows' statistics and the CTAs that have left.
// Device memory starts zeroed and the last CTA to leave zeroes its slot again, so a slot is always ready for
// the next launch that uses it. A slot belongs to one row_stats address (a workspace's buffer: the header
// contract lets no two calls share a workspace at once, so no two launches on one slot ever overlap; under
// programmatic dependent launch each kernel waits for the one before it to finish before it touches the
// slot). Per translation unit (static), with the slot map that hands the slots out.
constexpr int kSyncSlots = 1024;
static __device__ unsigned int g_grid_sync[kSyncSlots][2];   // [slot][0]: arrived, [1]: left

// The slot of key (a device address) on this translation unit's counters, or -1 when all are taken.
// Lock-free: a slot is claimed by swapping its key in from 0, never given back.
static inline int grid_sync_slot(const void *key) {
    static std::atomic<uintptr_t> keys[kSyncSlots];
    const uintptr_t k = reinterpret_cast<uintptr_t>(key);
    const unsigned h = static_cast<unsigned>((k >> 4) * 0x9E3779B97F4A7C15ull >> 40) % kSyncSlots;
    for (int i = 0; i < kSyncSlots; ++i) {
        const int s = static_cast<int>((h + i) % kSyncSlots);
        uintptr_t have = keys[s].load(std::memory_order_acquire);
        if (have == 0 && keys[s].compare_exchange_strong(have, k, std::memory_order_acq_rel)) return s;
        if (have == k) return s;
    }
    return -1;
}

__device__ __forceinline__ unsigned load_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// The rows of A whose statistics are kept: batch × M, or M when A is broadcast over the batch.
template <typename T, class Epilogue> __device__ __forceinline__ int64_t stat_rows(const tsg::GemmParams<T, Epilogue> &p) {
    return static_cast<int64_t>(p.M) * (p.a_batch_stride != 0 ? p.batch : 1);
}

// Statistics of rows first, first + step, ... of A, a warp a row: the row's 16-byte chunks spread over the
// lanes (four loads in flight a lane), a warp reduction, and lane 0 stores the row's finished values.
// A and lda are 16-byte chunked (the TMA path's condition).
template <typename T, class Epilogue>
__device__ __forceinline__ void publish_rows(const tsg::GemmParams<T, Epilogue> &p, int64_t first, int64_t step, int lane) {
    constexpr int S = tsg::kRowStats<Epilogue>, O = tsg::kRowOuts<Epilogue>;
    const int64_t rows = stat_rows(p);
    const int chunks = p.K / 8;
    for (int64_t r = first; r < rows; r += step) {
        const int64_t b = r / p.M, m = r - b * p.M;
        const T *row = p.A + b * p.a_batch_stride + m * p.lda;
        const uint4 *v = reinterpret_cast<const uint4 *>(row);
        float s[S];
        tsg::row_start<Epilogue>(s);
        int c = lane;
        for (; c + 96 < chunks; c += 128) {
            const uint4 w0 = __ldg(v + c), w1 = __ldg(v + c + 32), w2 = __ldg(v + c + 64), w3 = __ldg(v + c + 96);
            tsg::row_fold8<T>(p.ep, s, w0), tsg::row_fold8<T>(p.ep, s, w1), tsg::row_fold8<T>(p.ep, s, w2), tsg::row_fold8<T>(p.ep, s, w3);
        }
        for (; c < chunks; c += 32) tsg::row_fold8<T>(p.ep, s, __ldg(v + c));
        for (int k = 8 * chunks + lane; k < p.K; k += 32) tsg::row_fold(p.ep, s, tst::elem<T>::to_float(row[k]));
#pragma unroll
        for (int j = 0; j < S; ++j) s[j] = tsg::row_merge_lanes<Epilogue, 32>(j, s[j]);
        if (lane == 0) {
            float out[O];
            p.ep.row_finish(s, out);
#pragma unroll
            for (int o = 0; o < O; ++o) p.row_stats[o][r] = out[o];
        }
    }
}

// The launcher's fallback when no grid counter is free: every row's statistics, a warp a row, before the GEMM
// (which then only reads them).
template <typename T, class Epilogue> __global__ void __launch_bounds__(256) row_stats_kernel(const tsg::GemmParams<T, Epilogue> p) {
    tst::pdl_trigger();
    tst::pdl_wait();
    const int warps = static_cast<int>(blockDim.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
    publish_rows(p, static_cast<int64_t>(blockIdx.x) * warps + static_cast<int>(threadIdx.x) / 32,
                 static_cast<int64_t>(gridDim.x) * warps, lane);
}

// Producer warps 1-3 (threads 32..127): this CTA's share of the rows (interleaved over the grid, so that the
// grid finishes them in row order), then its arrival.
template <typename T, class Epilogue> __device__ __forceinline__ void publish_row_stats(const tsg::GemmParams<T, Epilogue> &p, int slot) {
    const int w = static_cast<int>(threadIdx.x) / 32 - 1, lane = static_cast<int>(threadIdx.x) % 32;
    tst::pdl_wait();   // A, and the statistics' buffer, may belong to the kernel before this one
    publish_rows(p, static_cast<int64_t>(blockIdx.x) * 3 + w, static_cast<int64_t>(gridDim.x) * 3, lane);
    named_barrier_sync(6, 96);
    if (threadIdx.x == 32) {
        __threadfence();
        atomicAdd(&g_grid_sync[slot][0], 1u);
    }
}

// A consumer warpgroup before its first epilogue: thread t == 0 waits until every CTA has published; the
// caller's barrier that follows lets the group read the values.
__device__ __forceinline__ void wait_published(int slot, int t) {
    if (t != 0) return;
#if TSG90_WATCHDOG
    const long long t0 = clock64();
#endif
    while (load_acquire(&g_grid_sync[slot][0]) < gridDim.x) {
        __nanosleep(256);
#if TSG90_WATCHDOG
        if (clock64() - t0 > (1ll << 33)) __trap();
#endif
    }
}

// A consumer warpgroup's rows' finished values (WG_ROWS × O) → rs, for the tile of batch b from row row0.
template <int WG_ROWS, typename T, class Epilogue>
__device__ __forceinline__ void load_row_stats(const tsg::GemmParams<T, Epilogue> &p, int b, int row0, int t, float *rs) {
    constexpr int O = tsg::kRowOuts<Epilogue>;
    const int64_t base = static_cast<int64_t>(p.a_batch_stride != 0 ? b : 0) * p.M;
    for (int i = t; i < WG_ROWS * O; i += 128) {
        const int r = row0 + i / O;
        rs[i] = r < p.M ? __ldcg(p.row_stats[i % O] + base + r) : 0.f;
    }
}

// Every thread of the CTA is past its last read of the statistics: this CTA leaves; the last one zeroes the slot.
__device__ __forceinline__ void leave_grid_sync(int slot) {
    __threadfence();
    if (atomicAdd(&g_grid_sync[slot][1], 1u) == gridDim.x - 1) {
        g_grid_sync[slot][0] = 0;
        g_grid_sync[slot][1] = 0;
        __threadfence();
    }
}

// ---- the kernel -----------------------------------------------------------------------------------------
// Persistent: the grid holds at most as many CTAs (clusters) as are resident at once, and each takes work
// items q = blockIdx.x / CM, + gridDim.x / CM, ... over items = batch × pairs (launch_gemm_sm90). The stage
// ring runs on from one tile to the next, so the producer loads the next tile's first stages while the
// consumers run the previous tile's epilogue. batch_flags: bit 0 → A's tensor map has a batch dimension,
// bit 1 → the B maps do; bits 2 and 3 the same for a second operand pair's A2 and B2.
// TWO, a second operand pair (p.K2 > 0, never with DUAL): tma_a2 and tma_b1 describe A2 and B2, whose K tiles
// follow A/B0's in the main loop (one contraction over the concatenated K); the consumers see K tiles only.
template <typename T, int BM, int BN, int STAGES, int CM, bool B_KN, bool DUAL, class Epilogue, bool PP, bool TWO,
          bool A_KM = false>
__global__ void __launch_bounds__(TST_SM90A_THREADS(384), 1)
    gemm_sm90_kernel(const __grid_constant__ tsg::GemmParams<T, Epilogue> p, const __grid_constant__ CUtensorMap tma_a,
                     const __grid_constant__ CUtensorMap tma_b0, const __grid_constant__ CUtensorMap tma_b1,
                     const __grid_constant__ CUtensorMap tma_a2, const int batch_flags, const int stats_slot) {
#if TSG90_DEVICE_OK
    using C = Cfg<BM, BN, STAGES, CM, DUAL, tsg::kRowOuts<Epilogue>, PP, value_kind<Epilogue>(), value_in_bytes<Epilogue>()>;
    constexpr int RP = tsg::kRowParts<Epilogue>;   // row reductions of C instead of C
    constexpr bool STATS = tsg::kRowStats<Epilogue> > 0;   // row statistics of A, published (stats_slot ≥ 0) or read
    static_assert(sizeof(T) == 2, "T must be __half or __nv_bfloat16");
    static_assert(RP == 0 || (!DUAL && CM == 1), "row reductions of C: a single product, no cluster");
    static_assert(!A_KM || (!TWO && tsg::kRowStats<Epilogue> == 0), "an M-major A: no second pair, no row statistics");
    extern __shared__ unsigned char smem_raw[];
    const uint32_t base = (tst::smem_addr(smem_raw) + 1023u) & ~1023u;
    unsigned char *const stage0 = smem_raw + (base - tst::smem_addr(smem_raw));   // generic address of base
    float *const rs = reinterpret_cast<float *>(stage0 + C::STATS_OFFSET);          // row statistics, if any
    const uint32_t bar_full = base + STAGES * C::STAGE_BYTES, bar_empty = bar_full + 8 * STAGES;
    tst::pdl_trigger();  // tile.cuh: dependents may launch; wait for the kernel before this one ...
    const bool ready = p.a_ready && p.b_ready;   // ... unless the operands need none: then only the epilogue waits
    if (!ready) tst::pdl_wait();

    const TileOrder<BM, BN, CM> order(p.M, p.N);
    const int items = order.per_batch * p.batch, stride = static_cast<int>(gridDim.x) / CM;
    const int first_item = static_cast<int>(blockIdx.x) / CM, rank = static_cast<int>(blockIdx.x) % CM;
    const int KT1 = (p.K + C::BK - 1) / C::BK, KT = KT1 + (TWO ? (p.K2 + C::BK - 1) / C::BK : 0);   // A/B0's, A2/B2's

    if (threadIdx.x == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bar_full + 8 * s, 1);
            mbar_init(bar_empty + 8 * s, C::CONSUMER_WARPS * CM);
        }
        fence_mbar_init();
    }
    if constexpr (CM > 1) cluster_sync();
    else __syncthreads();

    const int wg = static_cast<int>(threadIdx.x) / 128;
    if (wg == 0) {
        // ---- producer warpgroup: one thread issues every TMA load, tile after tile ----
        setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {
            tma_prefetch_desc(&tma_a);
            tma_prefetch_desc(&tma_b0);
            if constexpr (DUAL || TWO) tma_prefetch_desc(&tma_b1);
            if constexpr (TWO) tma_prefetch_desc(&tma_a2);
            Ring<STAGES> ring;
            for (int q = first_item; q < items; q += stride) {
                int m0, n0, b;
                order.at(q, rank, m0, n0, b);
                for (int kt = 0; kt < KT; ++kt, ring.next()) {
                    mbar_wait(bar_empty + 8 * ring.s, ring.ph ^ 1);   // first pass: the "previous" phase counts as done
                    const uint32_t full = bar_full + 8 * ring.s;
                    mbar_arrive_expect_tx(full, C::STAGE_BYTES);   // A + all B boxes (ours and the peer's multicast)
                    const uint32_t sA = base + ring.s * C::STAGE_BYTES, sB = sA + C::A_BYTES;
                    const bool second = TWO && kt >= KT1;   // a K tile of the second pair (zero-filled past K2)
                    const int k0 = (second ? kt - KT1 : kt) * C::BK, flags = second ? batch_flags >> 2 : batch_flags;
                    const int ba = (flags & 1) ? b : 0, bb = (flags & 2) ? b : 0;
                    if constexpr (A_KM)   // BM/64 boxes of 64 k rows × 64 m columns, as B_KN's B
#pragma unroll
                        for (int i = 0; i < BM / 64; ++i) tma_load(sA + i * C::BOX_BYTES, &tma_a, m0 + 64 * i, k0, ba, full);
                    else tma_load(sA, second ? &tma_a2 : &tma_a, k0, m0, ba, full);
#pragma unroll
                    for (int i = 0; i < C::NBOX; ++i) {
                        if (i % CM != rank) continue;
                        const CUtensorMap *map = ((DUAL && i >= BN / 64) || second) ? &tma_b1 : &tma_b0;
                        const int nn = n0 + 64 * (i % (BN / 64));
                        const int c0 = B_KN ? nn : k0, c1 = B_KN ? k0 : nn;
                        if constexpr (CM == 1) tma_load(sB + i * C::BOX_BYTES, map, c0, c1, bb, full);
                        else tma_load_mc(sB + i * C::BOX_BYTES, map, c0, c1, bb, full, static_cast<uint16_t>((1u << CM) - 1));
                    }
                }
            }
        } else if constexpr (STATS) {
            if (threadIdx.x >= 32 && stats_slot >= 0) publish_row_stats(p, stats_slot);   // warps 1-3
        }
    } else {
        // ---- consumer warpgroups: per tile, wgmma over the stages, then the epilogue ----
        setmaxnreg_inc<232>();
        const int cw = wg - 1, t = static_cast<int>(threadIdx.x) % 128, wq = t / 32, lane = t % 32;
        constexpr int RO = tsg::kRowOuts<Epilogue>;
        // Cooperative: both warpgroups take every tile, rows [cw·WG_ROWS, +WG_ROWS) of it. Ping-pong (PP): the
        // warpgroups take turns, each a whole tile, so one's epilogue runs beside the other's main loop; a
        // warpgroup's ring position skips the other's tiles. Their main loops also take turns (named barriers
        // 4 + cw: "warpgroup cw may start its main loop"), so the full barriers are waited on in ring order: a
        // warpgroup running a lap ahead would take a phase still in progress for the one before it (mbarrier
        // waits go by phase parity).
        const int a_row0 = PP ? 0 : cw * C::WG_ROWS, turn = PP ? 2 : 1;
        auto release = [&](int s) {   // every consumer warp of the cluster is done with stage s
            if (lane != 0) return;
            const uint32_t e = bar_empty + 8 * s;
            if constexpr (CM == 1) mbar_arrive_local(e);
            else
#pragma unroll
                for (int r = 0; r < CM; ++r) mbar_arrive_cluster(e, static_cast<uint32_t>(r));
        };
        float acc[C::MI][C::NT / 2];
        Ring<STAGES> ring;
        long long j = PP ? cw : 0;   // this CTA's tiles before this one
        for (int q = first_item + (PP ? cw * stride : 0); q < items; q += turn * stride, j += turn) {
            int m0, n0, b;
            order.at(q, rank, m0, n0, b);
            if constexpr (PP) {
                ring.seek(j * KT);
                if (j > 0) named_barrier_sync(4 + cw, 2 * 128);   // the other warpgroup's main loop is done
            }
#pragma unroll
            for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
                for (int i = 0; i < C::NT / 2; ++i) acc[mi][i] = 0.f;
            int prev = -1;
            const int prefetch_kt = KT > kPrefetchLead ? KT - kPrefetchLead : 0;
            for (int kt = 0; kt < KT; ++kt, ring.next()) {
                const int s = ring.s;
                if (kt == prefetch_kt) prefetch_epilogue<C::WG_ROWS, BN>(p, b, m0 + a_row0, n0, t);
                mbar_wait(bar_full + 8 * s, ring.ph);
                const uint32_t sA = base + s * C::STAGE_BYTES, sB = sA + C::A_BYTES;
#pragma unroll
                for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
                    for (int i = 0; i < C::NT / 2; ++i) fence_operand(acc[mi][i]);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < C::BK / 16; ++kk) {
                    // B_KN: a k16 step is 16 rows of 128 bytes inside each 64-column slab (slabs 8 KB apart).
                    // B_NK: a k16 step is 32 bytes along the swizzled 128-byte rows.
                    const uint64_t db = B_KN ? make_desc(sB + kk * 2048, C::BOX_BYTES, 1024) : make_desc(sB + kk * 32, 16, 1024);
#pragma unroll
                    for (int mi = 0; mi < C::MI; ++mi) {
                        // A_KM: the m64 slice is one 64-column slab, its k16 step 16 rows of 128 bytes
                        const uint64_t da = A_KM ? make_desc(sA + (a_row0 + mi * 64) / 64 * C::BOX_BYTES + kk * 2048, C::BOX_BYTES, 1024)
                                                 : make_desc(sA + (a_row0 + mi * 64) * 128 + kk * 32, 16, 1024);
                        constexpr int TB = B_KN ? 1 : 0, TA = A_KM ? 1 : 0;
                        if constexpr (C::NT == 256) wgmma_n256<T, TB, TA>(acc[mi], da, db, 1);
                        else if constexpr (C::NT == 192) wgmma_n192<T, TB, TA>(acc[mi], da, db, 1);
                        else if constexpr (C::NT == 128) wgmma_n128<T, TB, TA>(acc[mi], da, db, 1);
                        else wgmma_n64<T, TB, TA>(acc[mi], da, db, 1);
                    }
                }
                wgmma_commit();
                wgmma_wait<1>();   // the group of the previous stage is complete: its shared memory may be refilled
#pragma unroll
                for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
                    for (int i = 0; i < C::NT / 2; ++i) fence_operand(acc[mi][i]);
                if (prev >= 0) release(prev);
                prev = s;
            }
            if constexpr (PP)   // the other warpgroup may start its main loop (when it has a tile left)
                if (q + stride < items) named_barrier_arrive(4 + (cw ^ 1), 2 * 128);
            wgmma_wait<0>();
#pragma unroll
            for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
                for (int i = 0; i < C::NT / 2; ++i) fence_operand(acc[mi][i]);
            if (prev >= 0) release(prev);   // the producer may refill it with the next tile's operands
            const bool first = PP ? j == cw : j == 0;   // this warpgroup's first epilogue
            if (ready && first) tst::pdl_wait();
            if constexpr (RP > 0) {   // C's rows reduced, not stored
                row_parts_tile<C, BN>(p, acc, b, m0 + a_row0, n0, wq, lane);
            } else {
                if constexpr (STATS) {   // this warpgroup's rows (the previous tile's epilogue is done reading them)
                    if (first && stats_slot >= 0) wait_published(stats_slot, t);
                    named_barrier_sync(2 + cw, 128);   // (also: every CTA has published, for a first epilogue)
                    load_row_stats<C::WG_ROWS>(p, b, m0 + a_row0, t, rs + cw * C::WG_ROWS * RO);
                    named_barrier_sync(2 + cw, 128);
                }
                const int row0 = m0 + a_row0;   // this warpgroup's first row
                const float *rs0 = rs + cw * C::WG_ROWS * RO;
                const int slot = cw * 4 + wq;   // this warp's parking slot
                if constexpr (C::PACK_CC > 0) {
                    if (packed_tile<BM, BN>(p, b, m0, n0)) {
                        epilogue_packed<C, BN, C::PACK_CC, DUAL>(p, acc, reinterpret_cast<uint32_t *>(stage0 + C::PARK_OFFSET) + slot * C::SLOT_WORDS,
                                                                 b, row0, n0, wq, lane, rs0);
                        continue;
                    }
                }
                if constexpr (C::WIDE_PARK) {
                    if (q + stride >= items) {   // the last tile: nothing more is loaded into the stages
                        // Both consumer warpgroups are past their last wgmma and every load has landed (each full
                        // barrier completed): after this barrier no one reads or writes the stage buffers.
                        named_barrier_sync(1, 2 * 128);
                        epilogue_staged<C, BN, BN>(p, acc, reinterpret_cast<float *>(stage0) + slot * C::slot_floats(BN), b,
                                                   row0, n0, wq, lane, rs0);
                        continue;
                    }
                }
                if constexpr (C::STAGED_EPILOGUE)
                    epilogue_staged<C, BN, C::EPI_CC>(p, acc, reinterpret_cast<float *>(stage0 + C::PARK_OFFSET) + slot * C::SLOT_WORDS,
                                                      b, row0, n0, wq, lane, rs0);
                else
                    epilogue_direct<C, BN, DUAL>(p, acc, b, row0, n0, wq, lane, rs0);
            }
        }
    }
    // With a cluster, no CTA may exit while its peer can still arrive on its barriers.
    if constexpr (CM > 1) cluster_sync();
    if constexpr (STATS) {   // published: every thread is past its last read of the statistics, then leave
        if (stats_slot >= 0) {
            if constexpr (CM == 1) __syncthreads();
            if (threadIdx.x == 0) leave_grid_sync(stats_slot);
        }
    }
#else
    (void)p, (void)tma_a, (void)tma_b0, (void)tma_b1, (void)batch_flags, (void)stats_slot;
    __trap();   // compiled for a target without wgmma: the launcher refuses to launch this
#endif
}

// ---- host side --------------------------------------------------------------------------------------
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void *f = nullptr;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q);
#else
        cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
            (void)cudaGetLastError();
            f = nullptr;
        }
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
    }();
    return fn;
}

// A 3-D tiled map over (d0 contiguous, d1 rows of ld elements, d2 batches of bs elements) with a box of
// box0 × box1 × 1 and the 128-byte swizzle. d2 == 1 needs no real batch stride (a stride consistent with the
// rows is written instead). Returns false when the driver refuses the layout.
template <typename T>
inline bool make_map(CUtensorMap *map, const T *ptr, uint64_t d0, uint64_t d1, uint64_t d2, int64_t ld, int64_t bs,
                     uint32_t box0, uint32_t box1) {
    PFN_cuTensorMapEncodeTiled_v12000 enc = encode_tiled_fn();
    if (!enc) return false;
    const CUtensorMapDataType dt = tst::elem<T>::is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    cuuint64_t dims[3] = {d0, d1, d2};
    cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld) * 2,
                             d2 > 1 ? static_cast<cuuint64_t>(bs) * 2 : static_cast<cuuint64_t>(ld) * 2 * d1};
    cuuint32_t box[3] = {box0, box1, 1};
    cuuint32_t estr[3] = {1, 1, 1};
    CUresult r = enc(map, dt, 3, const_cast<T *>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS;
}

// Whether a tensor map can describe an operand: chunked (tsg::chunked), a positive row stride, a batch stride
// that is not negative.
template <typename T> inline bool tma_operand_ok(const T *ptr, int64_t ld, int64_t bs, int batch) {
    return tsg::chunked(ptr, ld, bs, batch) && ld > 0 && (batch <= 1 || bs >= 0);
}

// True when the TMA path can describe p (else launch_gemm_sm90 runs tsg::launch_gemm).
template <typename T, class Epilogue, bool DUAL> inline bool sm90_tma_ok(const tsg::GemmParams<T, Epilogue> &p) {
    if (p.K < 1) return false;
    bool ok = tma_operand_ok(p.A, p.lda, p.a_batch_stride, p.batch) && tma_operand_ok(p.B0, p.ldb, p.b_batch_stride, p.batch) &&
              (!DUAL || tma_operand_ok(p.B1, p.ldb, p.b_batch_stride, p.batch));
    return ok && (p.K2 <= 0 || (tma_operand_ok(p.A2, p.lda2, p.a2_batch_stride, p.batch) &&
                                tma_operand_ok(p.B2, p.ldb2, p.b2_batch_stride, p.batch)));
}

// Why the last launch_gemm_sm90 call on this thread did not take the wgmma path (for tests and logs):
// 0 = it did; 1 = operands not TMA-describable (alignment / strides / K == 0); 2 = tensor-map encode refused.
// Per thread, so that launches from several threads neither race on it nor overwrite each other's answer.
inline int &last_fallback_reason() {
    static thread_local int r = 0;
    return r;
}

// How many CTAs of kernel (threads, smem bytes, clusters of CM) the device holds at once: sms × blocks an SM,
// or CM × the clusters cudaOccupancyMaxActiveClusters reports; at least CM.
template <int CM, class Kernel> inline cudaError_t resident_ctas(Kernel kernel, int threads, int smem, int sms, int *out) {
    int n = 0;
    cudaError_t e;
    if constexpr (CM == 1) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem);
        n *= sms;
    } else {
        e = tst::max_active_clusters(kernel, CM, threads, static_cast<size_t>(smem), &n);
        n *= CM;
    }
    if (e != cudaSuccess) return e;
    *out = n >= CM ? n : CM;
    return cudaSuccess;
}

// Launch C = epilogue(A·B) (or the DUAL form) for p on stream. Returns an error, never prints or exits:
// cudaErrorInvalidValue for negative sizes, batch outside 1..65535 or a missing pointer;
// cudaErrorNotSupported on a device that is not compute capability 9.0, or when this translation unit was
// not compiled for sm_90a; whatever the runtime reports otherwise.
template <typename T, int BM = 128, int BN = 256, int STAGES = 4, int CM = 1, bool B_KN = true, bool DUAL = false,
          class Epilogue = tsg::StoreEpilogue<T>, bool PP = false, bool TWO = false, bool A_KM = false>
cudaError_t launch_gemm_sm90(const tsg::GemmParams<T, Epilogue> &p, cudaStream_t stream) {
    using C = Cfg<BM, BN, STAGES, CM, DUAL, tsg::kRowOuts<Epilogue>, PP, value_kind<Epilogue>(), value_in_bytes<Epilogue>()>;
    static_assert(!(TWO && DUAL), "a second operand pair is not a DUAL form");
    constexpr int RP = tsg::kRowParts<Epilogue>;
    if (RP > 0 && (!p.rows_scratch || (reinterpret_cast<uintptr_t>(p.rows_scratch) & 15) != 0)) return cudaErrorInvalidValue;
    if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 1 || p.batch > 65535) return cudaErrorInvalidValue;
    if (!p.A || !p.B0 || (DUAL && !p.B1)) return cudaErrorInvalidValue;
    if (p.K2 < 0 || (p.K2 > 0) != TWO || (TWO && (tsg::kRowStats<Epilogue> > 0 || !p.A2 || !p.B2))) return cudaErrorInvalidValue;
    for (int o = 0; o < tsg::kRowOuts<Epilogue>; ++o)   // the statistics' arrays (row_stats)
        if (!p.row_stats[o] || (reinterpret_cast<uintptr_t>(p.row_stats[o]) & 3) != 0) return cudaErrorInvalidValue;
    tst::DeviceFacts f;
    cudaError_t e = tst::device_facts(&f);
    if (e != cudaSuccess) return e;
    if (f.cc_major != 9 || f.cc_minor != 0) return cudaErrorNotSupported;
    if (p.M == 0 || p.N == 0) return cudaSuccess;

    auto kernel = gemm_sm90_kernel<T, BM, BN, STAGES, CM, B_KN, DUAL, Epilogue, PP, TWO, A_KM>;
    static const bool sm90a = tst::built_for_sm90a(kernel, 384);  // per instantiation, initialised once (thread-safe)
    if (!sm90a) return cudaErrorNotSupported;

    constexpr int FB_STAGES = DUAL ? 3 : 4;
    // the tiles' results of a row reduction need room in the scratch (a small M: fewer rows than its tile's)
    const bool room = RP == 0 || p.rows_scratch_bytes >= 4 * tsg::row_parts_partials(p.M, p.N, p.batch, RP);
    if (!sm90_tma_ok<T, Epilogue, DUAL>(p) || !room) {
        last_fallback_reason() = 1;
        return tsg::launch_gemm<T, 128, 128, 64, 2, 4, FB_STAGES, B_KN, DUAL, Epilogue, 1, TWO, A_KM, tst::kSm90aCode>(p, stream);
    }
    const bool a_batched = p.batch > 1 && p.a_batch_stride != 0, b_batched = p.batch > 1 && p.b_batch_stride != 0;
    const uint64_t ab = a_batched ? p.batch : 1, bbn = b_batched ? p.batch : 1;
    CUtensorMap ta, tb0, tb1, ta2;
    bool ok = A_KM ? make_map(&ta, p.A, p.M, p.K, ab, p.lda, p.a_batch_stride, 64, 64)
                   : make_map(&ta, p.A, p.K, p.M, ab, p.lda, p.a_batch_stride, 64, BM);
    if (B_KN) ok = ok && make_map(&tb0, p.B0, p.N, p.K, bbn, p.ldb, p.b_batch_stride, 64, 64);
    else ok = ok && make_map(&tb0, p.B0, p.K, p.N, bbn, p.ldb, p.b_batch_stride, 64, 64);
    if (DUAL) {
        if (B_KN) ok = ok && make_map(&tb1, p.B1, p.N, p.K, bbn, p.ldb, p.b_batch_stride, 64, 64);
        else ok = ok && make_map(&tb1, p.B1, p.K, p.N, bbn, p.ldb, p.b_batch_stride, 64, 64);
    } else {
        tb1 = tb0;
    }
    ta2 = ta;
    bool a2_batched = false, b2_batched = false;
    if constexpr (TWO) {   // the second pair: A2's map, and B2's in tb1's place (no DUAL here)
        a2_batched = p.batch > 1 && p.a2_batch_stride != 0, b2_batched = p.batch > 1 && p.b2_batch_stride != 0;
        const uint64_t ab2 = a2_batched ? p.batch : 1, bbn2 = b2_batched ? p.batch : 1;
        ok = ok && make_map(&ta2, p.A2, p.K2, p.M, ab2, p.lda2, p.a2_batch_stride, 64, BM);
        if (B_KN) ok = ok && make_map(&tb1, p.B2, p.N, p.K2, bbn2, p.ldb2, p.b2_batch_stride, 64, 64);
        else ok = ok && make_map(&tb1, p.B2, p.K2, p.N, bbn2, p.ldb2, p.b2_batch_stride, 64, 64);
    }
    if (!ok) {
        last_fallback_reason() = 2;
        return tsg::launch_gemm<T, 128, 128, 64, 2, 4, FB_STAGES, B_KN, DUAL, Epilogue, 1, TWO, A_KM, tst::kSm90aCode>(p, stream);
    }
    last_fallback_reason() = 0;
    const int flags = (a_batched ? 1 : 0) | (b_batched ? 2 : 0) | (a2_batched ? 4 : 0) | (b2_batched ? 8 : 0);

    static std::atomic<unsigned long long> smem_set{0};  // devices where the limit is raised
    e = tst::set_smem_once(kernel, C::SMEM, f.dev, smem_set);
    if (e != cudaSuccess) return e;
    // Persistent: at most as many CTAs as are resident at once (one an SM; clusters as the GPCs hold them).
    const int64_t tiles_m = (p.M + BM - 1) / BM, tiles_n = (p.N + BN - 1) / BN;
    const int64_t items = (tiles_m + CM - 1) / CM * tiles_n * p.batch;
    if (items * CM > 0x7fffffff) return cudaErrorInvalidValue;
    static std::atomic<int> resident[tst::kMaxDevices];   // CTAs resident at once, per device (0: not yet known)
    int cap = f.dev >= 0 && f.dev < tst::kMaxDevices ? resident[f.dev].load(std::memory_order_relaxed) : 0;
    if (cap == 0) {
        e = resident_ctas<CM>(kernel, C::THREADS, C::SMEM, f.sms, &cap);
        if (e != cudaSuccess) return e;
        if (f.dev >= 0 && f.dev < tst::kMaxDevices) resident[f.dev].store(cap, std::memory_order_relaxed);
    }
    const dim3 grid(static_cast<unsigned>((items < cap / CM ? items : cap / CM) * CM), 1, 1);
    int slot = -1;   // row statistics: published by the GEMM's own grid, or (no counter free) by a kernel before it
    if constexpr (tsg::kRowStats<Epilogue> > 0) {
        slot = grid_sync_slot(p.row_stats[0]);
        if (slot < 0) {
            const int64_t blocks = (stat_rows(p) + 7) / 8;   // 8 warps a block, a warp a row
            e = tst::launch(row_stats_kernel<T, Epilogue>, dim3(static_cast<unsigned>(blocks < 4096 ? blocks : 4096)), dim3(256), 0,
                            stream, 1, p);
            if (e != cudaSuccess) return e;
        }
    }
    e = tst::launch(kernel, grid, dim3(C::THREADS), C::SMEM, stream, CM, p, ta, tb0, tb1, ta2, flags, slot);
    if constexpr (RP > 0)   // the tiles' results of each row merged
        if (e == cudaSuccess) e = tsg::launch_row_parts_merge<BN>(p, stream);
    return e;
}

}  // namespace tsg90

// ---- self-test instantiation: `nvcc -DTSG90_SELFTEST -c` on a file including this header -------------------
#ifdef TSG90_SELFTEST
template cudaError_t tsg90::launch_gemm_sm90<__half>(const tsg::GemmParams<__half, tsg::StoreEpilogue<__half>> &, cudaStream_t);
template cudaError_t tsg90::launch_gemm_sm90<__nv_bfloat16, 128, 128, 4, 1, false, true, tsg::SwigluEpilogue<__nv_bfloat16>>(
    const tsg::GemmParams<__nv_bfloat16, tsg::SwigluEpilogue<__nv_bfloat16>> &, cudaStream_t);
#endif
