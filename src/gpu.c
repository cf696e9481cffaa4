/* gpu.c — the GPU libraries opened with dlopen, and the CUPTI kernel-activity collector (see gpu.h). */
#include "gpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* A symbol table: the first name that resolves is stored at the field's offset. */
typedef struct {
    const char *name, *alt;
    size_t offset;
} sym;

#define SYM(api, field, name, alt) {name, alt, offsetof(api, field)}
static const sym cuda_syms[] = {
    SYM(ts_cuda, cuInit, "cuInit", NULL),
    SYM(ts_cuda, cuDriverGetVersion, "cuDriverGetVersion", NULL),
    SYM(ts_cuda, cuDeviceGetCount, "cuDeviceGetCount", NULL),
    SYM(ts_cuda, cuDeviceGet, "cuDeviceGet", NULL),
    SYM(ts_cuda, cuDeviceGetName, "cuDeviceGetName", NULL),
    SYM(ts_cuda, cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL),
    SYM(ts_cuda, cuDeviceTotalMem, "cuDeviceTotalMem_v2", NULL),
    SYM(ts_cuda, cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL),
    SYM(ts_cuda, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    SYM(ts_cuda, cuCtxSetCurrent, "cuCtxSetCurrent", NULL),
    SYM(ts_cuda, cuCtxSynchronize, "cuCtxSynchronize", NULL),
    SYM(ts_cuda, cuModuleLoadData, "cuModuleLoadData", NULL),
    SYM(ts_cuda, cuModuleUnload, "cuModuleUnload", NULL),
    SYM(ts_cuda, cuModuleGetFunction, "cuModuleGetFunction", NULL),
    SYM(ts_cuda, cuFuncSetAttribute, "cuFuncSetAttribute", NULL),
    SYM(ts_cuda, cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL),
    SYM(ts_cuda, cuMemAlloc, "cuMemAlloc_v2", NULL),
    SYM(ts_cuda, cuMemFree, "cuMemFree_v2", NULL),
    SYM(ts_cuda, cuMemsetD32, "cuMemsetD32_v2", NULL),
    SYM(ts_cuda, cuMemsetD8, "cuMemsetD8_v2", NULL),
    SYM(ts_cuda, cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL),
    SYM(ts_cuda, cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL),
    SYM(ts_cuda, cuMemGetInfo, "cuMemGetInfo_v2", NULL),
    SYM(ts_cuda, cuLaunchKernel, "cuLaunchKernel", NULL),
    SYM(ts_cuda, cuEventCreate, "cuEventCreate", NULL),
    SYM(ts_cuda, cuEventRecord, "cuEventRecord", NULL),
    SYM(ts_cuda, cuEventSynchronize, "cuEventSynchronize", NULL),
    SYM(ts_cuda, cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    SYM(ts_cuda, cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy"),
    SYM(ts_cuda, cuGetErrorString, "cuGetErrorString", NULL),
};
static const sym nvrtc_syms[] = {
    SYM(ts_nvrtc, nvrtcVersion, "nvrtcVersion", NULL),
    SYM(ts_nvrtc, nvrtcCreateProgram, "nvrtcCreateProgram", NULL),
    SYM(ts_nvrtc, nvrtcCompileProgram, "nvrtcCompileProgram", NULL),
    SYM(ts_nvrtc, nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", NULL),
    SYM(ts_nvrtc, nvrtcGetProgramLog, "nvrtcGetProgramLog", NULL),
    SYM(ts_nvrtc, nvrtcGetCUBINSize, "nvrtcGetCUBINSize", NULL),
    SYM(ts_nvrtc, nvrtcGetCUBIN, "nvrtcGetCUBIN", NULL),
    SYM(ts_nvrtc, nvrtcDestroyProgram, "nvrtcDestroyProgram", NULL),
    SYM(ts_nvrtc, nvrtcGetErrorString, "nvrtcGetErrorString", NULL),
};
static const sym cupti_syms[] = {
    SYM(ts_cupti, cuptiActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks", NULL),
    SYM(ts_cupti, cuptiActivityEnable, "cuptiActivityEnable", NULL),
    SYM(ts_cupti, cuptiActivityDisable, "cuptiActivityDisable", NULL),
    SYM(ts_cupti, cuptiActivityFlushAll, "cuptiActivityFlushAll", NULL),
    SYM(ts_cupti, cuptiActivityGetNextRecord, "cuptiActivityGetNextRecord", NULL),
    SYM(ts_cupti, cuptiGetResultString, "cuptiGetResultString", NULL),
};
#define NSYMS(t) (sizeof(t) / sizeof *(t))

/* Opens the library `soname` (or $env when set: then only that) and resolves every symbol into api (a
 * struct whose first member is the handle). Returns 0, or -1 with a reason in *why (free it). */
static int load_library(void *api, const char *env, const char *soname, const char *const *dirs, const sym *syms,
                        size_t nsyms, char **why) {
    const char *over = getenv(env);
    void *h = NULL;
    char *first_error = NULL;
    if (over && *over) {
        h = dlopen(over, RTLD_NOW | RTLD_GLOBAL);
        if (!h) first_error = ts_strdup(dlerror());
    } else {
        h = dlopen(soname, RTLD_NOW | RTLD_GLOBAL);
        if (!h) first_error = ts_strdup(dlerror());
        for (int i = 0; !h && dirs && dirs[i]; i++) {
            char *path = ts_strfmt("%s/%s", dirs[i], soname);
            h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
            free(path);
        }
    }
    if (!h) {
        *why = ts_strfmt("cannot load %s (%s)", over && *over ? over : soname, first_error ? first_error : "not found");
        free(first_error);
        return -1;
    }
    free(first_error);
    for (size_t i = 0; i < nsyms; i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p && syms[i].alt) p = dlsym(h, syms[i].alt);
        if (!p) {
            *why = ts_strfmt("%s lacks the symbol %s (too old?)", over && *over ? over : soname, syms[i].name);
            dlclose(h);
            return -1;
        }
        memcpy((char *)api + syms[i].offset, &p, sizeof p);
    }
    memcpy(api, &h, sizeof h);
    return 0;
}

static const char *const cuda_dirs[] = {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                                        "/usr/local/cuda/extras/CUPTI/lib64", NULL};

int ts_gpu_load_cuda(ts_cuda *cu, char **why) {
    return load_library(cu, "TSOPT_LIBCUDA", "libcuda.so.1", NULL, cuda_syms, NSYMS(cuda_syms), why);
}

int ts_gpu_load_nvrtc(ts_nvrtc *nv, char **why) {
    return load_library(nv, "TSOPT_LIBNVRTC", "libnvrtc.so.13", cuda_dirs, nvrtc_syms, NSYMS(nvrtc_syms), why);
}

int ts_gpu_load_cupti(ts_cupti *cp, char **why) {
    return load_library(cp, "TSOPT_LIBCUPTI", "libcupti.so.13", cuda_dirs, cupti_syms, NSYMS(cupti_syms), why);
}


/* ---- CUPTI activity records -------------------------------------------------------------------- */

/* Kernel records as CUPTI hands them over (any thread): start and end in ns. Every CUpti_ActivityKernel
 * version (4 to 10 in CUDA 13's headers) has kind at offset 0 and start, end at offsets 16, 24. */
static struct {
    pthread_mutex_t mu;
    uint64_t *start, *end;
    size_t n, cap;
    ts_cupti *api;
} recs = {.mu = PTHREAD_MUTEX_INITIALIZER};

enum { CUPTI_BUFFER_BYTES = 8 << 20 };

static void cupti_request(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, CUPTI_BUFFER_BYTES);
    *size = *buffer ? CUPTI_BUFFER_BYTES : 0;
    *max_records = 0;
}

static void cupti_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx, (void)stream, (void)size;
    void *rec = NULL;
    pthread_mutex_lock(&recs.mu);
    while (recs.api && recs.api->cuptiActivityGetNextRecord(buffer, valid, &rec) == 0) {
        uint32_t kind;
        memcpy(&kind, rec, sizeof kind);
        if (kind != CUPTI_KIND_CONCURRENT_KERNEL && kind != CUPTI_KIND_KERNEL) continue;
        if (recs.n == recs.cap) {
            recs.cap = recs.cap ? 2 * recs.cap : 4096;
            recs.start = ts_xrealloc(recs.start, recs.cap * sizeof *recs.start);
            recs.end = ts_xrealloc(recs.end, recs.cap * sizeof *recs.end);
        }
        memcpy(&recs.start[recs.n], (const char *)rec + 16, sizeof(uint64_t));
        memcpy(&recs.end[recs.n], (const char *)rec + 24, sizeof(uint64_t));
        recs.n++;
    }
    pthread_mutex_unlock(&recs.mu);
    free(buffer);
}

int ts_cupti_start(ts_cupti *cp, char **why) {
    pthread_mutex_lock(&recs.mu);
    recs.api = cp;
    pthread_mutex_unlock(&recs.mu);
    CUptiResult r = cp->cuptiActivityRegisterCallbacks(cupti_request, cupti_complete);
    if (r == 0) r = cp->cuptiActivityEnable(CUPTI_KIND_CONCURRENT_KERNEL);
    if (r != 0) {
        const char *s = NULL;
        cp->cuptiGetResultString(r, &s);
        *why = ts_strfmt("CUPTI activity tracing could not be enabled: %s", s ? s : "unknown error");
        return -1;
    }
    return 0;
}

static size_t records_now(void) {
    pthread_mutex_lock(&recs.mu);
    size_t n = recs.n;
    pthread_mutex_unlock(&recs.mu);
    return n;
}

void ts_cupti_clear(void) {
    if (recs.api) recs.api->cuptiActivityFlushAll(CUPTI_FLUSH_FORCED);
    pthread_mutex_lock(&recs.mu);
    recs.n = 0;
    pthread_mutex_unlock(&recs.mu);
}

static int cmp_u64_pair(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

size_t ts_cupti_collect(size_t want, uint64_t **start, uint64_t **end) {
    /* records of finished kernels can lag the synchronisation a little: flush until all are in */
    for (int tries = 0; recs.api && tries < 50; tries++) {
        recs.api->cuptiActivityFlushAll(CUPTI_FLUSH_FORCED);
        if (records_now() >= want) break;
        usleep(10000);
    }
    pthread_mutex_lock(&recs.mu);
    size_t n = recs.n;
    if (start && end) {
        uint64_t *pairs = ts_xmalloc(sizeof *pairs * 2 * (n ? n : 1));
        for (size_t i = 0; i < n; i++) pairs[2 * i] = recs.start[i], pairs[2 * i + 1] = recs.end[i];
        qsort(pairs, n, 2 * sizeof *pairs, cmp_u64_pair);
        *start = ts_xmalloc(sizeof **start * (n ? n : 1));
        *end = ts_xmalloc(sizeof **end * (n ? n : 1));
        for (size_t i = 0; i < n; i++) (*start)[i] = pairs[2 * i], (*end)[i] = pairs[2 * i + 1];
        free(pairs);
    }
    pthread_mutex_unlock(&recs.mu);
    return n;
}

void ts_cupti_stop(void) {
    ts_cupti *cp = recs.api;
    if (cp) {
        cp->cuptiActivityFlushAll(CUPTI_FLUSH_FORCED);
        cp->cuptiActivityDisable(CUPTI_KIND_CONCURRENT_KERNEL);
    }
    pthread_mutex_lock(&recs.mu);
    recs.api = NULL;
    free(recs.start);
    free(recs.end);
    recs.start = recs.end = NULL;
    recs.n = recs.cap = 0;
    pthread_mutex_unlock(&recs.mu);
}
