/* gpu.h — the GPU libraries, opened at run time: the CUDA driver (libcuda.so.1), NVRTC (libnvrtc.so.13) and
 * CUPTI (libcupti.so.13) are never linked, so tsopt starts where they are absent and a command that needs
 * them says which one is missing. Also the CUPTI kernel-activity collector that `tsopt calibrate` and
 * `tsopt tune` time kernels with. Library paths can be overridden with $TSOPT_LIBCUDA, $TSOPT_LIBNVRTC and
 * $TSOPT_LIBCUPTI (the tests point them at a mock). */
#ifndef TS_GPU_H
#define TS_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;

enum {
    CU_ATTR_CLOCK_RATE = 13, CU_ATTR_SMS = 16, CU_ATTR_L2 = 38, CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76,
    CU_ATTR_SMEM_PER_SM = 81, CU_ATTR_SMEM_OPTIN = 97, CU_FUNC_MAX_DYNAMIC_SMEM = 8,
};

typedef struct {
    void *lib;
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemsetD32)(CUdeviceptr, unsigned, size_t);
    CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                               void **, void **);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuGetErrorString)(CUresult, const char **);
} ts_cuda;

typedef int nvrtcResult;
typedef struct nvrtc_program *nvrtcProgram;
typedef struct {
    void *lib;
    nvrtcResult (*nvrtcVersion)(int *, int *);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                                      const char *const *);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
    const char *(*nvrtcGetErrorString)(nvrtcResult);
} ts_nvrtc;

typedef int CUptiResult;
enum { CUPTI_KIND_KERNEL = 3, CUPTI_KIND_CONCURRENT_KERNEL = 10, CUPTI_FLUSH_FORCED = 1 };
typedef void (*cupti_request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*cupti_complete_fn)(CUcontext, uint32_t, uint8_t *, size_t, size_t);
typedef struct {
    void *lib;
    CUptiResult (*cuptiActivityRegisterCallbacks)(cupti_request_fn, cupti_complete_fn);
    CUptiResult (*cuptiActivityEnable)(int);
    CUptiResult (*cuptiActivityDisable)(int);
    CUptiResult (*cuptiActivityFlushAll)(uint32_t);
    CUptiResult (*cuptiActivityGetNextRecord)(uint8_t *, size_t, void **);
    CUptiResult (*cuptiGetResultString)(CUptiResult, const char **);
} ts_cupti;

/* Each loads its library and resolves every symbol: 0, or -1 with the reason in *why (free it). */
int ts_gpu_load_cuda(ts_cuda *cu, char **why);
int ts_gpu_load_nvrtc(ts_nvrtc *nv, char **why);
int ts_gpu_load_cupti(ts_cupti *cp, char **why);

/* CUPTI kernel activity: one process-wide collector of (start, end) timestamps in ns.
 * ts_cupti_start registers the callbacks and enables concurrent-kernel records (0, or -1 with *why);
 * ts_cupti_clear flushes and forgets what was collected; ts_cupti_collect flushes until at least `want`
 * records are in (or a timeout), then returns how many there are and, when start/end are given, copies of
 * them sorted by start (free them); ts_cupti_stop disables tracing and frees the collector. */
int ts_cupti_start(ts_cupti *cp, char **why);
void ts_cupti_clear(void);
size_t ts_cupti_collect(size_t want, uint64_t **start, uint64_t **end);
void ts_cupti_stop(void);

#endif
