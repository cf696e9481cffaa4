// tile.cuh — the shared tile helpers of tsopt's CUDA templates: async copies (cp.async), ldmatrix, the
// m16n8k16 tensor-core MMA (fp16/bf16 in, fp32 accumulate), fragment packing and warp reductions.
// It is what every template in this folder builds on; it is not a kernel. Header-only, depends only on
// the CUDA runtime headers, compiles for sm_80 and newer (sm_90 uses the same instructions here; the
// wgmma path lives in its own template). Names: tst_ prefix; everything is __device__ __forceinline__,
// except the host-side per-device cache at the end (device facts, kernel attributes set once per device).
#pragma once
#include <atomic>
#include <cstdlib>
#include <utility>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "tsopt templates need sm_80 or newer (cp.async, bf16 mma)"
#endif

namespace tst {

// ---- element types -------------------------------------------------------------------------------
template <typename T> struct elem;
template <> struct elem<__half> {
    using pair = __half2;
    static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
    static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ pair pack(float a, float b) { return __floats2half2_rn(a, b); }
    static constexpr bool is_bf16 = false;
};
template <> struct elem<__nv_bfloat16> {
    using pair = __nv_bfloat162;
    static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }
    static __device__ __forceinline__ pair pack(float a, float b) { return __floats2bfloat162_rn(a, b); }
    static constexpr bool is_bf16 = true;
};
template <> struct elem<float> {
    static __device__ __forceinline__ float to_float(float x) { return x; }
    static __device__ __forceinline__ float from_float(float x) { return x; }
    static constexpr bool is_bf16 = false;
};

// Two floats packed into the 32-bit register an MMA operand fragment holds.
template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b) {
    typename elem<T>::pair p = elem<T>::pack(a, b);
    return *reinterpret_cast<uint32_t *>(&p);
}

// ---- read-only loads -------------------------------------------------------------------------------
// A load of memory that no thread writes while the kernel runs (ld.global.nc). The compiler may then move it
// above the kernel's stores: a GEMM epilogue's residual or bias reads for several elements are in flight at
// once instead of each waiting out DRAM latency behind the previous element's store. The generated functors
// read an operand this way only when the kernel does not write that buffer.
template <typename T> __device__ __forceinline__ T load_ro(const T *p) { return __ldg(p); }
// Asks for the line holding p in L2, kept there ahead of lines marked normal (prefetch.global.L2::evict_last:
// no register written, no wait, no fault). Coherent whatever other kernels write: L2 is where every SM's
// accesses to global memory meet.
__device__ __forceinline__ void prefetch_l2(const void *p) {
    asm volatile("prefetch.global.L2::evict_last [%0];\n" ::"l"(p));
}
// p[0] and p[1] as floats in one read-only load; p must be aligned to two elements (no check here: the caller
// proves it, as a score functor's pair_ok does).
template <typename T> __device__ __forceinline__ float2 load2_ro(const T *p) {
    if constexpr (sizeof(T) == 4) {
        return __ldg(reinterpret_cast<const float2 *>(p));
    } else {
        const auto v = __ldg(reinterpret_cast<const typename elem<T>::pair *>(p));
        return make_float2(elem<T>::to_float(v.x), elem<T>::to_float(v.y));
    }
}

// ---- shared-memory addresses and async copies ----------------------------------------------------
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, bypassing L1; when !valid the destination is zero-filled (edge tiles).
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// ---- ldmatrix ------------------------------------------------------------------------------------
// Four 8x8 b16 matrices; lane l supplies the row address of matrix l/8, row l%8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void *smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void *smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void *smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(smem_row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void *smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(smem_row)));
}

// ---- tensor-core MMA -----------------------------------------------------------------------------
// D = A·B + D for one m16n8k16 tile: a[4] (row-major A fragment), b[2] (col-major B), d[4] fp32.
template <typename T> __device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
template <> __device__ __forceinline__ void mma16816<__half>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---- math and warp reductions --------------------------------------------------------------------
// The special functions the emitter writes (src/emit.c print_op), each a MUFU instruction with no slow path:
// the IEEE forms (sqrtf, log2f, sinf) carry a called subroutine or Payne-Hanek reduction through local
// memory, which in a GEMM epilogue with its accumulators live costs 3-7.5x their arithmetic (bench/NOTES.md run
// 141). Their errors against float64 over the fp32 range are what bench/gpu/math_test.cu measures and bounds;
// the FMA-pipe slots and MUFU ops of each, counted in sm_90a SASS, are src/costmodel.c op_cost's.
__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// sqrt.approx (subnormal inputs scaled, not flushed): MUFU.SQRT.
__device__ __forceinline__ float fast_sqrt(float x) {
    float y;
    asm("sqrt.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// lg2.approx (subnormal inputs scaled, not flushed): MUFU.LG2.
__device__ __forceinline__ float fast_log2(float x) {
    float y;
    asm("lg2.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// sin.approx after reducing x by the nearest multiple k of 2π (Cody-Waite: 2π as a float plus its remainder,
// each product exact inside an FMA), so that MUFU.SIN sees about [-π, π], where it is accurate. The reduction
// holds while x/(2π) rounded to a float stays within one of the nearest integer (|x| below about 2^24); past
// that an fp32 x is an even integer and the result, though in [-1, 1], is not sin(x) (math_test reports it).
__device__ __forceinline__ float fast_sin(float x) {
    const float k = rintf(x * 0.159154943f);          // 1/(2π)
    float r = fmaf(-k, 6.28318548f, x);                // 2π rounded to float
    r = fmaf(-k, -1.74845553e-7f, r);                  // 2π less that float
    float y;
    asm("sin.approx.f32 %0, %1;\n" : "=f"(y) : "f"(r));
    return y;
}
// Reductions over the 4 lanes of a quad (the lanes that share an MMA accumulator row).
__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

// An attention score functor for one (batch, query head): its at(b, h) where it has one (a generated
// functor whose operands vary with the batch or the heads keeps them), else the functor itself.
template <class S>
__device__ __forceinline__ auto score_at_(const S &s, int b, int h, int) -> decltype(s.at(b, h)) { return s.at(b, h); }
template <class S> __device__ __forceinline__ S score_at_(const S &s, int, int, long) { return s; }
template <class S> __device__ __forceinline__ S score_at(const S &s, int b, int h) { return score_at_(s, b, h, 0); }

}  // namespace tst

// ---- appended helpers ----------------------------------------------------------------------------
namespace tst {
// 16 bytes global → shared of which only the first src_bytes (0..16) are read; the rest of the 16
// destination bytes are zero-filled. gmem must be 16-byte aligned (and valid when src_bytes > 0).
__device__ __forceinline__ void cp_async16_zfill(void *smem, const void *gmem, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
                 "r"(src_bytes));
}
// 4 bytes global → shared (through L1) of which only the first src_bytes (0..4) are read, the rest zero-filled;
// both addresses 4-byte aligned (gmem valid when src_bytes > 0): the GEMM loader for operands whose rows are
// 4-byte but not 16-byte aligned (an even K that is not a multiple of 8).
__device__ __forceinline__ void cp_async4_zfill(void *smem, const void *gmem, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(src_bytes));
}
}  // namespace tst

// ---- appended helpers (attention.cuh) ------------------------------------------------------------
namespace tst {
// tanh with the hardware approximation (sm_75+; max relative error about 2^-10.7): enough for scores that
// are rounded to fp16/bf16 afterwards, e.g. the tanh soft-cap of attention logits.
__device__ __forceinline__ float fast_tanh(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
// Two packed 16-bit values as one 32-bit word stored to shared or global memory (4-byte aligned).
template <typename T> __device__ __forceinline__ void store_pair(T *dst, float a, float b) {
    *reinterpret_cast<uint32_t *>(dst) = pack2<T>(a, b);
}
}  // namespace tst
namespace tst {
// ldmatrix from a 32-bit shared-window address (from smem_addr), so that constant offsets fold into the
// instruction's immediate and address registers stay few in unrolled loops.
__device__ __forceinline__ void ldmatrix_x4_at(uint32_t (&r)[4], uint32_t saddr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr));
}
__device__ __forceinline__ void ldmatrix_x4_trans_at(uint32_t (&r)[4], uint32_t saddr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(saddr));
}
}  // namespace tst

// ---- thread-block clusters (sm_90+): split work whose CTAs merge partial results --------------------
// Used by split-K GEMMs (gemm.cuh) and split-key decode attention (attention.cuh). Never reached on older
// GPUs: their launch helpers run one CTA a cluster and skip these calls.
namespace tst {
// Every CTA of the cluster arrives; shared-memory writes before it are visible to the cluster after it.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
// The generic address of `local` (a shared-memory variable) in the shared memory of cluster rank r. Plain
// loads through it are ordinary C++ loads: the compiler may keep several in flight (distributed shared
// memory is a few hundred cycles away), but never moves them across cluster_sync.
template <typename V> __device__ __forceinline__ const V *cluster_map(const V *local, int r) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint64_t remote;
    asm("mapa.u64 %0, %1, %2;" : "=l"(remote) : "l"(reinterpret_cast<uint64_t>(local)), "r"(r));
    return reinterpret_cast<const V *>(remote);
#else
    (void)r;
    __trap();
    return local;
#endif
}
// Element i of the float array at `local` in the shared memory of cluster rank r.
__device__ __forceinline__ float cluster_load(const float *local, int r, int i) { return cluster_map(local, r)[i]; }
}  // namespace tst

// ---- programmatic dependent launch (sm_90+) ------------------------------------------------------
// The kernels of one emitted header's launch function run in one stream; from the second on they are
// launched with programmatic stream serialization (tst::launch under a PdlSequence, below), so that a
// kernel's CTAs become resident and start what depends on no earlier kernel (streaming a weight) while the
// kernel before it drains. Every kernel calls pdl_trigger() (its dependents may launch once all its CTAs have
// called it or exited: first thing in the short map, row and reduce kernels and the wgmma ones, after the
// main loop in the mma.sync GEMM and attention kernels — triggering those first made the decode step slower,
// bench/NOTES.md runs 58-59) and pdl_wait() before it reads anything an earlier kernel wrote and before it
// writes anything (griddepcontrol.wait returns once the preceding kernel has completed and its writes are visible;
// at once for a kernel launched without the attribute, and on GPUs before sm_90 both are no-ops). Because
// each kernel waits for its predecessor, which waited for its own, the order of the whole chain holds.
namespace tst {
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
}  // namespace tst

namespace tst {
// ---- which device code runs a kernel: sm_90a or another target ------------------------------------------
// The wgmma GEMM and attention kernels need sm_90a device code. Their launchers fall back to the mma.sync kernels
// in two ways that never meet: inside the wgmma launch, when TMA cannot take an operand (a misaligned pointer or
// stride), which happens only where the GPU runs sm_90a code; and after it, when the wgmma kernel cannot run (a GPU
// that is not sm_90, or device code built for another target: plain sm_90, sm_80). A kernel instantiated for one
// of them only says so (its Reach) and is compiled as a trap in the device code that never launches it, so that a
// fat binary assembles each fallback once, for the code that can run it (decoder_layer.cuh's sm_90a code compiles
// in 22 s instead of 36 on a 2-core machine, two compiles at once: bench/NOTES.md run 157).
enum Reach : int {
    kAnyCode = 0,     // launched by every device code (a plan's own mma.sync kernel)
    kSm90aCode = 1,   // only by sm_90a code (the fallback when TMA cannot take an operand)
    kOtherCode = 2,   // only by code that is not sm_90a (the fallback when the wgmma kernel cannot run)
};
// Whether the device code being compiled launches a kernel of reach r (host code: always).
__host__ __device__ constexpr bool reached_here(int r) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    return r != kOtherCode;
#elif defined(__CUDA_ARCH__)
    return r != kSm90aCode;
#else
    return true;
#endif
}
// A wgmma kernel declares __launch_bounds__(TST_SM90A_THREADS(its threads)): a warp in device code that is not
// sm_90a (where its body is a trap), so that its launcher can tell from the kernel's attributes which code the GPU
// runs (built_for_sm90a) — the PTX version cannot: plain sm_90 code reports 90 as sm_90a code does.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TST_SM90A_THREADS(threads) (threads)
#else
#define TST_SM90A_THREADS(threads) 32
#endif
}  // namespace tst

// ---- host side: per-device facts and kernel attributes, cached (thread-safe) ---------------------------
// Launch helpers need the current device's compute capability and SM count, and must raise a kernel's
// dynamic shared-memory limit once per device. Querying (and cudaFuncSetAttribute) on every launch costs
// driver calls; these caches answer from a lock-free table after the first launch on each device. Racing
// first calls query twice and store the same value, which is harmless. Devices past kMaxDevices are not
// cached (queried every time).
namespace tst {
constexpr int kMaxDevices = 64;

struct DeviceFacts {
    int dev, cc_major, cc_minor, sms;
};

// The current device's facts; packed per device as valid(1) | major(8) | minor(8) | sms(32).
inline cudaError_t device_facts(DeviceFacts *f) {
    static std::atomic<unsigned long long> cache[kMaxDevices];
    cudaError_t e = cudaGetDevice(&f->dev);
    if (e != cudaSuccess) return e;
    const bool cached = f->dev >= 0 && f->dev < kMaxDevices;
    unsigned long long v = cached ? cache[f->dev].load(std::memory_order_relaxed) : 0ull;
    if (!(v >> 63)) {
        e = cudaDeviceGetAttribute(&f->cc_major, cudaDevAttrComputeCapabilityMajor, f->dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&f->cc_minor, cudaDevAttrComputeCapabilityMinor, f->dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&f->sms, cudaDevAttrMultiProcessorCount, f->dev);
        if (e != cudaSuccess) return e;
        v = 1ull << 63 | (unsigned long long)(f->cc_major & 0xff) << 40 | (unsigned long long)(f->cc_minor & 0xff) << 32 |
            (unsigned)f->sms;
        if (cached) cache[f->dev].store(v, std::memory_order_relaxed);
    }
    f->cc_major = (int)(v >> 40 & 0xff), f->cc_minor = (int)(v >> 32 & 0xff), f->sms = (int)(v & 0xffffffffu);
    return cudaSuccess;
}

// cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, bytes) (and the shared-memory carveout, in
// percent, unless negative) once per device: `done` is the caller's per-kernel static bit set of devices
// where it succeeded.
template <class Kernel>
inline cudaError_t set_smem_once(Kernel kernel, int bytes, int dev, std::atomic<unsigned long long> &done,
                                 int carveout = -1) {
    const unsigned long long bit = dev >= 0 && dev < kMaxDevices ? 1ull << dev : 0ull;
    if (bit && (done.load(std::memory_order_acquire) & bit)) return cudaSuccess;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess && carveout >= 0)
        e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout);
    if (e == cudaSuccess && bit) done.fetch_or(bit, std::memory_order_release);
    return e;
}

// Where the calling thread is in an emitted launch function's kernel sequence: outside one (kernels launch
// as plain stream work: the templates' own tests, user code), before its first kernel, or past it (later
// kernels get programmatic stream serialization). Per thread: concurrent launch functions do not mix.
enum PdlState { kPdlOff = 0, kPdlFirst, kPdlOn };
inline PdlState &pdl_state() {
    static thread_local PdlState state = kPdlOff;
    return state;
}
// Whether programmatic dependent launch is wanted: yes unless the environment sets TSOPT_NO_PDL to a value
// other than "0" (every kernel then launches as plain stream work, so that a profiler's per-kernel
// durations are each kernel's own, with no wait for its predecessor inside: tsopt tune's per-kernel profile).
inline bool pdl_wanted() {
    const char *v = std::getenv("TSOPT_NO_PDL");
    return !v || !v[0] || (v[0] == '0' && !v[1]);
}
// Scope of one launch function's kernel sequence (the emitter declares one before the first launch). The
// first kernel is ordered after earlier stream work as usual: what the caller's kernels wrote (the
// weights too) is visible to every kernel of the sequence.
struct PdlSequence {
    PdlSequence() { pdl_state() = pdl_wanted() ? kPdlFirst : kPdlOff; }
    ~PdlSequence() { pdl_state() = kPdlOff; }
    PdlSequence(const PdlSequence &) = delete;
    PdlSequence &operator=(const PdlSequence &) = delete;
};

// The launch attribute that groups CTAs into clusters of `cluster` along x.
inline cudaLaunchAttribute cluster_attr(int cluster) {
    cudaLaunchAttribute a{};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = static_cast<unsigned>(cluster);
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    return a;
}

// Launch kernel(args...) with grid, block and dynamic shared memory on stream; cluster > 1: as clusters of
// that many CTAs along x (grid.x must be a multiple; compute capability 9.0+); cluster kCooperative: as a
// cooperative grid (every CTA resident at once, so that they may meet at grid barriers; the caller sizes the grid
// to what the SMs hold), never with programmatic serialization (it waits for the kernel before it as plain stream
// work); otherwise, inside a PdlSequence past its first kernel, on compute capability 9.0+, with programmatic
// stream serialization. Returns the launch's error.
constexpr int kCooperative = -1;
template <class... Params, class... Args>
inline cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                          int cluster, Args &&...args) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr[2];
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    if (cluster > 1) attr[cfg.numAttrs++] = cluster_attr(cluster);
    PdlState &pdl = pdl_state();
    if (cluster == kCooperative) {
        attr[cfg.numAttrs].id = cudaLaunchAttributeCooperative;
        attr[cfg.numAttrs].val.cooperative = 1;
        cfg.numAttrs++;
    } else if (pdl == kPdlOn) {
        DeviceFacts f;
        cudaError_t e = device_facts(&f);
        if (e != cudaSuccess) return e;
        if (f.cc_major >= 9) {
            attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            attr[cfg.numAttrs].val.programmaticStreamSerializationAllowed = 1;
            cfg.numAttrs++;
        }
    }
    cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
    if (e == cudaSuccess && pdl == kPdlFirst) pdl = kPdlOn;
    return e;
}

// How many clusters of `cluster` CTAs (threads, smem dynamic bytes each) of kernel can be resident at once.
template <class Kernel> inline cudaError_t max_active_clusters(Kernel kernel, int cluster, int threads, size_t smem, int *n) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr[1] = {cluster_attr(cluster)};
    cfg.gridDim = dim3(static_cast<unsigned>(cluster), 1, 1);
    cfg.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaOccupancyMaxActiveClusters(n, kernel, &cfg);
}

// Whether the code the current GPU runs for wgmma kernel `kernel` (declared with TST_SM90A_THREADS(threads))
// was built for sm_90a; false where its attributes cannot be read (the error is cleared, so that a later
// cudaGetLastError does not report it, and the launcher takes its fallback).
template <class Kernel> inline bool built_for_sm90a(Kernel kernel, int threads) {
    cudaFuncAttributes fa{};
    if (cudaFuncGetAttributes(&fa, kernel) == cudaSuccess) return fa.maxThreadsPerBlock >= threads;
    (void)cudaGetLastError();
    return false;
}
}  // namespace tst
