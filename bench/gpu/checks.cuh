// checks.cuh — the error checks of the test programs (bench/gpu/gemm*_test.cu, math_test.cu): CK(x) for a CUDA runtime
// call, CKB(x) for a cuBLAS one (defined when cublas_v2.h was included first). A failed call prints where and
// what, and exits with status 2 (a CUDA/cuBLAS error, as the programs' headers say).
#pragma once
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                        \
    do {                                                                                             \
        cudaError_t e_ = (x);                                                                        \
        if (e_ != cudaSuccess) {                                                                     \
            fprintf(stderr, "%s:%d: CUDA error %s: %s\n  in %s\n", __FILE__, __LINE__, cudaGetErrorName(e_), \
                    cudaGetErrorString(e_), #x);                                                     \
            exit(2);                                                                                 \
        }                                                                                            \
    } while (0)
#if defined(CUBLAS_V2_H_)
#define CKB(x)                                                                                       \
    do {                                                                                             \
        cublasStatus_t s_ = (x);                                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                           \
            fprintf(stderr, "%s:%d: cuBLAS error %d in %s\n", __FILE__, __LINE__, (int)s_, #x);      \
            exit(2);                                                                                 \
        }                                                                                            \
    } while (0)
#endif
