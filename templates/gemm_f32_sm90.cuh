// gemm_f32_sm90.cuh — the Hopper (sm_90a) form of gemm_f32.cuh's fp32 GEMM: the same GemmParams<float, Epilogue>,
// epilogue functors, operand layouts and 3xTF32 split (fp32 accuracy), with the three products by
// wgmma.mma_async m64n128k8 (tf32) from shared memory instead of mma.sync m16n8k8 from registers. Per batch b:
//   C[m, n] = epilogue(b, m, n, Σ_k A[m, k]·B[k, n])                              (single form only)
// Any M, N, K. Namespace tsg90; depends on gemm_f32.cuh (split_tf32, the loader test, its kernel as the fallback)
// and gemm_sm90.cuh (descriptors, wgmma fences).
//
//   tsg90::launch_gemm_f32_sm90<B_KN, Epilogue>(params, stream)
//
// Operands as gemm_f32.cuh: A (M, K) K contiguous; B_KN: B (K, N) N contiguous, else (N, K) K contiguous.
//
// The kernel, per 128 × 128 output tile, 256 threads = 2 warpgroups, warpgroup w owning rows 64w..64w+63:
//   * K-slices of 32 floats (one 128-byte swizzle row). RAW = 3 stages of the raw fp32 tiles, loaded by 16-byte
//     cp.async (zero-filled outside M, N, K): A and a (N, K) B straight into wgmma's K-major 128-byte-swizzle
//     layout (row r's 16-byte chunk c at chunk c ^ (r % 8)); a (K, N) B row-major as it is in memory.
//   * Conversion, by every thread, a stage ahead of the MMAs: each operand element x becomes its TF32 part big
//     (split_tf32) and the remainder small. A's big part is written over the raw tile (the layout stays), its small
//     part into one of 2 sets of small tiles; B likewise, a (K, N) B transposed on the way into K-major big and small
//     tiles. Then fence.proxy.async: the threads' writes become visible to wgmma.
//   * Per K-slice and k8 step, three wgmma m64n128k8 per warpgroup: small_a·big_b, big_a·small_b, big_a·big_b
//     (the small terms first), issued while the threads convert the next slice; then wgmma.wait_group 0.
//   * STEPWISE (a CTA's K over kF32ChainK, as gemm_f32.cuh): each slice's products go to a second accumulator that
//     its first wgmma overwrites (scale-d 0), added into the sums by FADDs after the wait — the wgmma chain's own
//     fp32 accumulation does not round to nearest.
//   * The epilogue straight from the accumulators (wgmma's m64nN layout: warp w4 of a warpgroup holds rows
//     16·w4 .. +15, lane l rows l/4 and l/4 + 8, columns 8j + 2(l % 4) and +1 of each n8 block j), calling
//     apply<float>(b, row, col, v0, v1) as gemm.cuh documents.
// Shared memory: 160 KB ((N, K) B: big B tiles are the raw ones) or 192 KB ((K, N) B), plus 1 KB to align the tiles to
// the swizzle atoms; one CTA an SM.
// The launcher falls back to tsg::launch_gemm_f32 (mma.sync, 128 × 128 tiles) where the 16-byte loader cannot read
// the operands (gemm_f32_loader_bytes), on a GPU that is not compute capability 9.0, or where the device code was
// not built for sm_90a (the kernel body is compiled only there; elsewhere it traps).
#pragma once
#include "gemm_f32.cuh"
#include "gemm_sm90.cuh"

namespace tsg90 {

#define TSG90_WGMMA_ASM_N128_TF32 \
    "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
    "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {" \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, " \
    "%64, %65, p, 1, 1;\n}\n"

// D = A·B (+ D where scale_d), m64n128k8, A and B K-major tf32 tiles in shared memory (descriptors da, db).
__device__ __forceinline__ void wgmma_tf32_n128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if TSG90_DEVICE_OK
    asm volatile(TSG90_WGMMA_ASM_N128_TF32 : TSG90_WGMMA_OUTS_N128(d) : "l"(da), "l"(db), "r"(scale_d));
#else
    (void)d, (void)da, (void)db, (void)scale_d;
#endif
}

// The writing thread's generic-proxy stores to shared memory become visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async_smem() {
#if TSG90_DEVICE_OK
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

struct F32Sm90 {
    static constexpr int BM = 128, BN = 128, BK = 32, THREADS = 256, RAW = 3, SETS = 2;
    static constexpr int TILE = BM * BK * 4;   // bytes of a 128-row K-major tile (also a (K, N) B's raw 32 × 128)
    static constexpr int RAW_A = 0, RAW_B = RAW_A + RAW * TILE, SMALL_A = RAW_B + RAW * TILE,
                         SMALL_B = SMALL_A + SETS * TILE, BIG_B = SMALL_B + SETS * TILE;
    // + 1024: the kernel aligns its tiles to the 1024-byte swizzle atoms (the XOR pattern is on absolute address bits)
    static constexpr int smem_bytes(bool b_kn) { return BIG_B + (b_kn ? SETS * TILE : 0) + 1024; }
};

// Byte offset of element (r, k) in a K-major tile of 32-float rows in the 128-byte-swizzle layout.
__device__ __forceinline__ int swz32(int r, int k) { return r * 128 + ((((k >> 2) ^ r) & 7) << 4) + (k & 3) * 4; }

// One K-slice (k0..k0+31) into raw stage s: A (and a (N, K) B) K-major swizzled; a (K, N) B row-major.
template <bool B_KN, class E>
__device__ __forceinline__ void f32_sm90_load(unsigned char *smem, const tsg::GemmParams<float, E> &p, const float *gA, const float *gB,
                                              int s, int m0, int n0, int k0) {
    using C = F32Sm90;
    const int t = static_cast<int>(threadIdx.x);
#pragma unroll
    for (int i = 0; i < 4; ++i) {   // A: 128 rows × 8 chunks
        const int c = i * C::THREADS + t, r = c >> 3, ch = c & 7, gr = m0 + r, gk = k0 + ch * 4;
        const int bytes = gr < p.M ? min(max(p.K - gk, 0), 4) * 4 : 0;
        tst::cp_async16_zfill(smem + C::RAW_A + s * C::TILE + swz32(r, ch * 4), bytes ? gA + (int64_t)gr * p.lda + gk : gA, bytes);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int c = i * C::THREADS + t;
        if constexpr (B_KN) {   // 32 k rows × 32 chunks of n
            const int r = c >> 5, ch = c & 31, gk = k0 + r, gn = n0 + ch * 4;
            const int bytes = gk < p.K ? min(max(p.N - gn, 0), 4) * 4 : 0;
            tst::cp_async16_zfill(smem + C::RAW_B + s * C::TILE + r * 512 + ch * 16, bytes ? gB + (int64_t)gk * p.ldb + gn : gB, bytes);
        } else {                // 128 n rows × 8 chunks of k
            const int r = c >> 3, ch = c & 7, gn = n0 + r, gk = k0 + ch * 4;
            const int bytes = gn < p.N ? min(max(p.K - gk, 0), 4) * 4 : 0;
            tst::cp_async16_zfill(smem + C::RAW_B + s * C::TILE + swz32(r, ch * 4), bytes ? gB + (int64_t)gn * p.ldb + gk : gB, bytes);
        }
    }
}

// x's TF32 part and remainder (gemm_f32.cuh split_tf32) as floats.
__device__ __forceinline__ float4 split4(float4 &x) {
    uint32_t b, s;
    float4 small;
    tsg::split_tf32(x.x, b, s), x.x = __uint_as_float(b), small.x = __uint_as_float(s);
    tsg::split_tf32(x.y, b, s), x.y = __uint_as_float(b), small.y = __uint_as_float(s);
    tsg::split_tf32(x.z, b, s), x.z = __uint_as_float(b), small.z = __uint_as_float(s);
    tsg::split_tf32(x.w, b, s), x.w = __uint_as_float(b), small.w = __uint_as_float(s);
    return small;
}

// Raw stage s → big parts in place (A; a (N, K) B) or into big set `set` (a (K, N) B, transposed), small parts into
// small set `set`.
template <bool B_KN> __device__ __forceinline__ void f32_sm90_convert(unsigned char *smem, int s, int set) {
    using C = F32Sm90;
    const int t = static_cast<int>(threadIdx.x);
    float4 *rawA = reinterpret_cast<float4 *>(smem + C::RAW_A + s * C::TILE);
    float4 *smallA = reinterpret_cast<float4 *>(smem + C::SMALL_A + set * C::TILE);
#pragma unroll
    for (int i = 0; i < 4; ++i) {   // elementwise: the swizzled layout is kept
        float4 x = rawA[i * C::THREADS + t];
        smallA[i * C::THREADS + t] = split4(x);
        rawA[i * C::THREADS + t] = x;
    }
    float4 *smallB = reinterpret_cast<float4 *>(smem + C::SMALL_B + set * C::TILE);
    if constexpr (B_KN) {   // thread: column n, k in [16h, 16h + 16), four 4-k chunks of row n of the K-major tiles
        const float *raw = reinterpret_cast<const float *>(smem + C::RAW_B + s * C::TILE);
        unsigned char *big = smem + C::BIG_B + set * C::TILE, *small = smem + C::SMALL_B + set * C::TILE;
        const int n = t & 127, h = t >> 7;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int k = h * 16 + q * 4;
            float4 x = make_float4(raw[k * 128 + n], raw[(k + 1) * 128 + n], raw[(k + 2) * 128 + n], raw[(k + 3) * 128 + n]);
            *reinterpret_cast<float4 *>(small + swz32(n, k)) = split4(x);
            *reinterpret_cast<float4 *>(big + swz32(n, k)) = x;
        }
    } else {
        float4 *rawB = reinterpret_cast<float4 *>(smem + C::RAW_B + s * C::TILE);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            float4 x = rawB[i * C::THREADS + t];
            smallB[i * C::THREADS + t] = split4(x);
            rawB[i * C::THREADS + t] = x;
        }
    }
    (void)smallB;
    fence_proxy_async_smem();
}

// One K-slice's 3xTF32 products for warpgroup wg (rows 64wg..) into d; scale_first 0 overwrites d.
template <bool B_KN>
__device__ __forceinline__ void f32_sm90_mma(float (&d)[64], const unsigned char *smem, int s, int set, int wg, int scale_first) {
    using C = F32Sm90;
    const uint32_t a_big = tst::smem_addr(smem + C::RAW_A + s * C::TILE) + wg * 64 * 128;
    const uint32_t a_small = tst::smem_addr(smem + C::SMALL_A + set * C::TILE) + wg * 64 * 128;
    const uint32_t b_big = tst::smem_addr(smem + (B_KN ? C::BIG_B + set * C::TILE : C::RAW_B + s * C::TILE));
    const uint32_t b_small = tst::smem_addr(smem + C::SMALL_B + set * C::TILE);
#pragma unroll
    for (int kk = 0; kk < C::BK / 8; ++kk) {   // k8 steps: 32 bytes along the swizzled rows
        const uint64_t dab = make_desc(a_big + kk * 32, 16, 1024), das = make_desc(a_small + kk * 32, 16, 1024);
        const uint64_t dbb = make_desc(b_big + kk * 32, 16, 1024), dbs = make_desc(b_small + kk * 32, 16, 1024);
        wgmma_tf32_n128(d, das, dbb, kk == 0 ? scale_first : 1);
        wgmma_tf32_n128(d, dab, dbs, 1);
        wgmma_tf32_n128(d, dab, dbb, 1);
    }
}

template <bool B_KN, class Epilogue, bool STEPWISE>
__global__ void __launch_bounds__(TST_SM90A_THREADS(256)) gemm_f32_sm90_kernel(const tsg::GemmParams<float, Epilogue> p) {
#if TSG90_DEVICE_OK
    using C = F32Sm90;
    extern __shared__ unsigned char smem_raw[];
    unsigned char *const smem = smem_raw + (((tst::smem_addr(smem_raw) + 1023u) & ~1023u) - tst::smem_addr(smem_raw));
    const int tiles_m = (p.M + C::BM - 1) / C::BM, tiles_n = (p.N + C::BN - 1) / C::BN;
    int m0, n0;
    tsg::grouped_tile<C::BM, C::BN>(static_cast<int>(blockIdx.x), tiles_m, tiles_n, m0, n0);
    const int b = blockIdx.z, t = static_cast<int>(threadIdx.x), wg = t >> 7;
    const float *gA = p.A + b * p.a_batch_stride, *gB = p.B0 + b * p.b_batch_stride;
    const int KT = (p.K + C::BK - 1) / C::BK;

    float acc[64], part[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.f, part[i] = 0.f;

    tst::pdl_wait();   // everything below reads operands earlier kernels may write
#pragma unroll
    for (int s = 0; s < C::RAW; ++s) {
        if (s < KT) f32_sm90_load<B_KN>(smem, p, gA, gB, s, m0, n0, s * C::BK);
        tst::cp_async_commit();
    }
    tst::cp_async_wait<C::RAW - 1>();   // slice 0 (this thread's copies) ...
    __syncthreads();                    // ... everyone's
    if (KT > 0) f32_sm90_convert<B_KN>(smem, 0, 0);
    __syncthreads();
    for (int kt = 0; kt < KT; ++kt) {
#pragma unroll
        for (int i = 0; i < 64; ++i) fence_operand(acc[i]), fence_operand(part[i]);
        wgmma_fence();
        if constexpr (STEPWISE) f32_sm90_mma<B_KN>(part, smem, kt % C::RAW, kt % C::SETS, wg, 0);
        else f32_sm90_mma<B_KN>(acc, smem, kt % C::RAW, kt % C::SETS, wg, 1);
        wgmma_commit();
        if (kt + 1 < KT) {   // the next slice, converted beside the MMAs
            tst::cp_async_wait<C::RAW - 2>();
            __syncthreads();
            f32_sm90_convert<B_KN>(smem, (kt + 1) % C::RAW, (kt + 1) % C::SETS);
        }
        wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < 64; ++i) fence_operand(acc[i]), fence_operand(part[i]);
        if constexpr (STEPWISE) {
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] += part[i];
        }
        __syncthreads();   // slice kt's stage is read; slice kt+1's conversion is everyone's
        if (kt + C::RAW < KT) f32_sm90_load<B_KN>(smem, p, gA, gB, kt % C::RAW, m0, n0, (kt + C::RAW) * C::BK);
        tst::cp_async_commit();
    }
    tst::cp_async_wait<0>();
    tst::pdl_trigger();

    const int lane = t & 31, w4 = (t >> 5) & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = m0 + wg * 64 + w4 * 16 + (lane >> 2) + h * 8;
        if (row >= p.M) continue;
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int col = n0 + j * 8 + (lane & 3) * 2;
            if (col < p.N) tsg::epi_apply<float>(p.ep, b, row, col, acc[j * 4 + 2 * h], acc[j * 4 + 2 * h + 1], nullptr);
        }
    }
#else
    (void)p;
    __trap();
#endif
}

// Launch C = epilogue(A·B) of fp32 operands with wgmma (above); the same contract as tsg::launch_gemm_f32, whose
// 128 × 128 kernel runs where this one cannot (the top).
template <bool B_KN = true, class Epilogue = tsg::StoreEpilogue<float>>
cudaError_t launch_gemm_f32_sm90(const tsg::GemmParams<float, Epilogue> &p, cudaStream_t stream) {
    auto fallback = [&] { return tsg::launch_gemm_f32<128, 128, 32, 2, 4, 4, B_KN, false, Epilogue>(p, stream); };
    if (p.M < 0 || p.N < 0 || p.K < 0 || p.batch < 1 || p.batch > 65535 || p.K2 != 0 || !p.A || !p.B0)
        return cudaErrorInvalidValue;
    if (p.M == 0 || p.N == 0) return cudaSuccess;
    tst::DeviceFacts f;
    cudaError_t e = tst::device_facts(&f);
    if (e != cudaSuccess) return e;
    if (f.cc_major != 9 || f.cc_minor != 0 || tsg::gemm_f32_loader_bytes<Epilogue, false>(p) != 16) return fallback();
    const bool stepwise = tsg::f32_stepwise(p.K, 1);
    auto kernel = stepwise ? gemm_f32_sm90_kernel<B_KN, Epilogue, true> : gemm_f32_sm90_kernel<B_KN, Epilogue, false>;
    static const bool sm90a = tst::built_for_sm90a(gemm_f32_sm90_kernel<B_KN, Epilogue, false>, 256);
    if (!sm90a) return fallback();
    constexpr int smem = F32Sm90::smem_bytes(B_KN);
    static std::atomic<unsigned long long> smem_set{0}, smem_set_step{0};
    e = tst::set_smem_once(kernel, smem, f.dev, stepwise ? smem_set_step : smem_set);
    if (e != cudaSuccess) return e;
    const int64_t tiles = (int64_t)((p.M + F32Sm90::BM - 1) / F32Sm90::BM) * ((p.N + F32Sm90::BN - 1) / F32Sm90::BN);
    if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
    return tst::launch(kernel, dim3((unsigned)tiles, 1, (unsigned)p.batch), dim3(F32Sm90::THREADS), static_cast<size_t>(smem),
                       stream, 1, p);
}

}  // namespace tsg90

// ---- self-test instantiation: `nvcc -DTSG_SELFTEST -c gemm_f32_sm90.cuh` compiles the default forms -----------
#ifdef TSG_SELFTEST
template cudaError_t tsg90::launch_gemm_f32_sm90<true>(const tsg::GemmParams<float, tsg::StoreEpilogue<float>> &, cudaStream_t);
template cudaError_t tsg90::launch_gemm_f32_sm90<false>(const tsg::GemmParams<float, tsg::StoreEpilogue<float>> &, cudaStream_t);
#endif
