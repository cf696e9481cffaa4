// cublaslt.cuh — a plan's GEMM run by cuBLASLt instead of tsopt's own kernels, for headers compiled with
// `--allow-cublas` (they link -lcublasLt): D = act(alpha·A·B + beta·C + bias[n]) over row-major operands,
// act none, ReLU or GELU (tanh form), with a strided batch. src/libgemm.c decides which GEMMs this can run
// and with which epilogue; the emitter fills a tslt::Gemm and calls tslt::matmul, and runs the plan's own
// GEMM kernel when this answers cudaErrorNotSupported (no cuBLASLt algorithm for the call).
//
// cuBLASLt is column-major: the row-major D[m, n] (n contiguous, rows ldd apart) is its n × m matrix with
// leading dimension ldd, so D = A·B is computed as Dᵀ = Bᵀ·Aᵀ: B is cuBLASLt's A operand and A its B. The
// bias is a vector along cuBLASLt's rows of D — our n — which is what CUBLASLT_EPILOGUE_BIAS broadcasts.
//
// One handle per device, created on first use and kept for the process (as PyTorch keeps its own). Each GEMM
// call site has a Cache: the matmul and layout descriptors and the algorithm the heuristic picked, per
// shape, strides and pointer alignment, so that a repeated call costs cublasLtMatmul alone; a lock serialises
// a call's bias-pointer update with its launch. Both the descriptors and the heuristic are host work:
// nothing here synchronises the stream, and a call inside a CUDA graph capture is captured as a kernel.
// Namespace tslt; needs <cublasLt.h> (the emitter includes it).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <mutex>
#include <stdint.h>

namespace tslt {

enum Act { kNone = 0, kRelu = 1, kGelu = 2 };

// Row-major operands: A[m, k] (a_kcontig: k unit stride, rows lda apart; else m unit stride, k steps lda),
// B[k, n] (b_ncontig: n unit stride, k steps ldb; else k unit stride, n steps ldb), C and D [m, n] with n
// unit stride. Batch strides in elements (0: shared by every batch).
struct Gemm {
    cudaDataType_t ab_type, d_type;
    int64_t M, N, K, batch;
    const void *A;
    int64_t lda, a_batch;
    bool a_kcontig;
    const void *B;
    int64_t ldb, b_batch;
    bool b_ncontig;
    const void *C; // nullptr: no C term (beta unused)
    int64_t ldc, c_batch;
    float alpha, beta;
    void *D;
    int64_t ldd, d_batch;
    const void *bias; // nullptr: no bias; else N elements of d_type
    Act act;
};

inline cudaError_t status_error(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_ARCH_MISMATCH: return cudaErrorNotSupported;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    default: return cudaErrorUnknown;
    }
}

// The handle of the current device (created once per device; kept for the process).
inline cudaError_t handle(cublasLtHandle_t *out) {
    enum { kMaxDevices = 64 };
    static std::mutex lock;
    static cublasLtHandle_t handles[kMaxDevices] = {};
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return err;
    if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
    std::lock_guard<std::mutex> hold(lock);
    if (!handles[dev]) {
        cudaError_t e = status_error(cublasLtCreate(&handles[dev]));
        if (e != cudaSuccess) {
            handles[dev] = nullptr;
            return e;
        }
    }
    *out = handles[dev];
    return cudaSuccess;
}

// The largest power of two ≤ 256 that divides the address (cuBLASLt's alignment preferences).
inline uint32_t alignment_of(const void *p) {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    uint32_t al = 256;
    while (al > 1 && a % al) al /= 2;
    return al;
}

// What a cached entry was made for: everything but the pointers themselves (their alignment counts).
struct Key {
    int device;
    int64_t M, N, K, batch, lda, ldb, ldc, ldd, a_batch, b_batch, c_batch, d_batch;
    uint32_t align_a, align_b, align_c, align_d, align_bias;
    bool has_c, has_bias;
    bool operator==(const Key &o) const {
        return device == o.device && M == o.M && N == o.N && K == o.K && batch == o.batch && lda == o.lda &&
               ldb == o.ldb && ldc == o.ldc && ldd == o.ldd && a_batch == o.a_batch && b_batch == o.b_batch &&
               c_batch == o.c_batch && d_batch == o.d_batch && align_a == o.align_a && align_b == o.align_b &&
               align_c == o.align_c && align_d == o.align_d && align_bias == o.align_bias && has_c == o.has_c &&
               has_bias == o.has_bias;
    }
};

struct Entry {
    bool used = false;
    Key key{};
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
    unsigned long long last = 0;
    void release() {
        if (desc) cublasLtMatmulDescDestroy(desc);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (d) cublasLtMatrixLayoutDestroy(d);
        desc = nullptr, a = b = c = d = nullptr, used = false;
    }
};

// A call site's descriptors and algorithms, the least recently used replaced when full. Kept for the process.
struct Cache {
    enum { kEntries = 8 };
    std::mutex lock;
    Entry entry[kEntries];
    unsigned long long clock = 0;
};

inline cudaError_t layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld,
                          int64_t batch, int64_t stride) {
    cudaError_t e = status_error(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld));
    if (e != cudaSuccess || batch == 1) return e;
    int32_t count = (int32_t)batch;
    e = status_error(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    if (e != cudaSuccess) return e;
    return status_error(
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}

inline cublasLtEpilogue_t epilogue_of(const Gemm &g) {
    const bool bias = g.bias != nullptr;
    switch (g.act) {
    case kRelu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case kGelu: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    }
}

// Builds entry x for g (in cuBLASLt's column-major terms: Dᵀ[n, m] = Bᵀ[n, k]·Aᵀ[k, m]) and asks the
// heuristic for the best algorithm within `workspace` bytes; cudaErrorNotSupported when it has none.
inline cudaError_t build(Entry &x, const Gemm &g, cublasLtHandle_t h, size_t workspace) {
    cudaError_t e = status_error(cublasLtMatmulDescCreate(&x.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op_b = g.b_ncontig ? CUBLAS_OP_N : CUBLAS_OP_T, op_a = g.a_kcontig ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasLtEpilogue_t epi = epilogue_of(g);
    if (e == cudaSuccess)
        e = status_error(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
    if (e == cudaSuccess)
        e = status_error(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
    if (e == cudaSuccess)
        e = status_error(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (e == cudaSuccess && g.bias) {
        int32_t bt = (int32_t)g.d_type;
        e = status_error(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
        if (e == cudaSuccess)
            e = status_error(cublasLtMatmulDescSetAttribute(x.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
    }
    /* cuBLASLt's A is our B: n × k when n is contiguous (op N), else k × n (op T) */
    if (e == cudaSuccess)
        e = g.b_ncontig ? layout(&x.a, g.ab_type, g.N, g.K, g.ldb, g.batch, g.b_batch)
                        : layout(&x.a, g.ab_type, g.K, g.N, g.ldb, g.batch, g.b_batch);
    /* its B is our A: k × m when k is contiguous (op N), else m × k (op T) */
    if (e == cudaSuccess)
        e = g.a_kcontig ? layout(&x.b, g.ab_type, g.K, g.M, g.lda, g.batch, g.a_batch)
                        : layout(&x.b, g.ab_type, g.M, g.K, g.lda, g.batch, g.a_batch);
    if (e == cudaSuccess) e = layout(&x.d, g.d_type, g.N, g.M, g.ldd, g.batch, g.d_batch);
    if (e == cudaSuccess)
        e = g.C ? layout(&x.c, g.d_type, g.N, g.M, g.ldc, g.batch, g.c_batch)
                : layout(&x.c, g.d_type, g.N, g.M, g.ldd, g.batch, g.d_batch);
    cublasLtMatmulPreference_t pref = nullptr;
    if (e == cudaSuccess) e = status_error(cublasLtMatmulPreferenceCreate(&pref));
    if (e == cudaSuccess)
        e = status_error(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                              &workspace, sizeof workspace));
    const uint32_t align[4] = {x.key.align_b, x.key.align_a, x.key.align_c, x.key.align_d};
    const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && e == cudaSuccess; i++)
        e = status_error(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &align[i], sizeof align[i]));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (e == cudaSuccess)
        e = status_error(cublasLtMatmulAlgoGetHeuristic(h, x.desc, x.a, x.b, x.c, x.d, pref, 1, &result, &found));
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (e == cudaSuccess && (found == 0 || result.state != CUBLAS_STATUS_SUCCESS)) e = cudaErrorNotSupported;
    if (e != cudaSuccess) {
        x.release();
        return e;
    }
    x.algo = result.algo, x.workspace = result.workspaceSize, x.used = true;
    return cudaSuccess;
}

// Runs g on the stream with up to `workspace_bytes` of workspace (16-byte aligned; may be 0).
inline cudaError_t matmul(const Gemm &g, Cache &cache, void *workspace, size_t workspace_bytes, cudaStream_t stream) {
    if (g.M == 0 || g.N == 0 || g.batch == 0) return cudaSuccess;
    if (g.batch > INT32_MAX) return cudaErrorNotSupported;
    cublasLtHandle_t h;
    cudaError_t e = handle(&h);
    if (e != cudaSuccess) return e;
    Key key{};
    e = cudaGetDevice(&key.device);
    if (e != cudaSuccess) return e;
    key.M = g.M, key.N = g.N, key.K = g.K, key.batch = g.batch, key.lda = g.lda, key.ldb = g.ldb;
    key.ldc = g.C ? g.ldc : 0, key.ldd = g.ldd, key.a_batch = g.a_batch, key.b_batch = g.b_batch;
    key.c_batch = g.C ? g.c_batch : 0, key.d_batch = g.d_batch;
    key.align_a = alignment_of(g.A), key.align_b = alignment_of(g.B), key.align_d = alignment_of(g.D);
    key.align_c = g.C ? alignment_of(g.C) : key.align_d, key.align_bias = g.bias ? alignment_of(g.bias) : 0;
    key.has_c = g.C != nullptr, key.has_bias = g.bias != nullptr;
    std::lock_guard<std::mutex> hold(cache.lock);
    Entry *x = nullptr, *victim = &cache.entry[0];
    for (Entry &c : cache.entry) {
        if (c.used && c.key == key) x = &c;
        if (!c.used || (victim->used && c.last < victim->last)) victim = &c;
    }
    if (!x) {
        victim->release();
        victim->key = key;
        e = build(*victim, g, h, workspace ? workspace_bytes : 0);
        if (e != cudaSuccess) return e;
        x = victim;
    }
    x->last = ++cache.clock;
    if (g.bias) { /* the pointer is the call's; its alignment is the entry's */
        e = status_error(cublasLtMatmulDescSetAttribute(x->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias));
        if (e != cudaSuccess) return e;
    }
    const float beta = g.C ? g.beta : 0.f;
    return status_error(cublasLtMatmul(h, x->desc, &g.alpha, g.B, x->a, g.A, x->b, &beta, g.C ? g.C : g.D, x->c, g.D,
                                       x->d, &x->algo, x->workspace ? workspace : nullptr, x->workspace, stream));
}

}  // namespace tslt
