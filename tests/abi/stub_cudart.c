/* stub_cudart.c — a CUDA runtime that launches nothing, for testing generated headers' launch helpers
 * through their C ABI on a machine without a GPU (tests/abi/test_abi.c; `make abi-check`). It is not a
 * simulator: kernels never run and memory is never touched. It answers the runtime calls a header makes
 * (device facts, kernel attributes, the driver entry point), records every kernel launch by its device
 * name (from nvcc's registration calls) and counts the queries, so that a test can check which calls
 * were refused before launching, which launched what, and that device facts are cached per device.
 * CUDA graphs: a stream capture records launches (counted, not run) until it ends; instantiations,
 * updates, graph launches and destructions are counted, so a test can check what the graph helper did.
 *
 * Link: nvcc -cudart none HEADER_TU.o test_abi.o stub_cudart.o (objects compiled with nvcc -c). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "stub_cudart.h"

enum { MAX_FUNCS = 512 };
static struct {
    const void *host;
    const char *name;
} funcs[MAX_FUNCS];
static int nfuncs;
static int pending; /* a <<<>>> configuration pushed and not yet popped */

stub_state stub = {.cc_major = 9, .cc_minor = 0, .sms = 132, .ptx_version = 80};

void stub_reset(void) {
    stub.launches = stub.attribute_queries = stub.func_attribute_sets = stub.pdl_launches = stub.first_pdl = 0;
    stub.last_kernel = NULL;
    stub.captures = stub.captured_launches = stub.instantiations = stub.updates = stub.graph_launches = 0;
}

/* A kernel launch: recorded into the capture when one is under way, else counted as launched. */
static void launched(const char *name) {
    if (stub.capturing) stub.captured_launches++;
    else stub.launches++;
    stub.last_kernel = name;
}

/* ---- registration (emitted by nvcc into every translation unit with kernels) --------------------- */
void **__cudaRegisterFatBinary(void *fat) {
    static void *handle;
    (void)fat;
    return &handle;
}
void __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void __cudaUnregisterFatBinary(void **h) { (void)h; }
void __cudaRegisterFunction(void **h, const char *host, char *dev_fun, const char *dev_name, int tl, void *tid,
                            void *bid, void *bdim, void *gdim, int *wsize) {
    (void)h, (void)dev_fun, (void)tl, (void)tid, (void)bid, (void)bdim, (void)gdim, (void)wsize;
    if (nfuncs < MAX_FUNCS) funcs[nfuncs].host = host, funcs[nfuncs++].name = dev_name;
}
void __cudaRegisterVar(void **h, char *hv, char *dd, const char *dn, int ext, size_t size, int c, int g) {
    (void)h, (void)hv, (void)dd, (void)dn, (void)ext, (void)size, (void)c, (void)g;
}

typedef struct { unsigned x, y, z; } dim3_c;
unsigned __cudaPushCallConfiguration(dim3_c grid, dim3_c block, size_t shmem, void *stream) {
    (void)grid, (void)block, (void)shmem, (void)stream;
    pending = 1;
    return 0;
}
int __cudaPopCallConfiguration(dim3_c *grid, dim3_c *block, size_t *shmem, void *stream) {
    (void)grid, (void)block, (void)shmem, (void)stream;
    pending = 0;
    return 0;
}

static const char *name_of(const void *host) {
    for (int i = 0; i < nfuncs; i++)
        if (funcs[i].host == host) return funcs[i].name;
    return "unregistered kernel";
}

/* ---- the runtime API a header uses --------------------------------------------------------------- */
int cudaLaunchKernel(const void *func, dim3_c grid, dim3_c block, void **args, size_t shmem, void *stream) {
    (void)grid, (void)block, (void)args, (void)shmem, (void)stream;
    launched(name_of(func));
    return 0;
}
/* CUDA 13's launch path: the kernel handle is the host stub itself. */
int __cudaGetKernel(const void **kernel, const void *host) {
    *kernel = host;
    return 0;
}
char __cudaInitModule(void **h) {
    (void)h;
    return 1;
}
int __cudaLaunchKernel(const void *kernel, dim3_c grid, dim3_c block, void **args, size_t shmem, void *stream) {
    return cudaLaunchKernel(kernel, grid, block, args, shmem, stream);
}
/* cudaLaunchConfig_t and cudaLaunchAttribute as driver_types.h lays them out (CUDA 12-13). */
typedef struct {
    int id;
    char pad[4];
    union {
        char pad[64];
        int flag;
    } val;
} launch_attr_c;
typedef struct {
    dim3_c grid, block;
    size_t smem;
    void *stream;
    const launch_attr_c *attrs;
    unsigned nattrs;
} launch_config_c;
enum { ATTR_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };

int cudaLaunchKernelExC(const void *config, const void *func, void **args) {
    (void)args;
    const launch_config_c *c = config;
    int pdl = 0;
    for (unsigned i = 0; i < c->nattrs; i++)
        if (c->attrs[i].id == ATTR_PROGRAMMATIC_STREAM_SERIALIZATION && c->attrs[i].val.flag) pdl = 1;
    if (pdl && stub.launches + stub.captured_launches == 0) stub.first_pdl = 1;
    stub.pdl_launches += pdl;
    launched(name_of(func));
    return 0;
}
int cudaGetDevice(int *dev) {
    *dev = stub.device;
    return 0;
}
int cudaDeviceGetAttribute(int *v, int attr, int dev) {
    (void)dev;
    stub.attribute_queries++;
    switch (attr) {
    case 75: *v = stub.cc_major; break; /* cudaDevAttrComputeCapabilityMajor */
    case 76: *v = stub.cc_minor; break;
    case 16: *v = stub.sms; break;      /* cudaDevAttrMultiProcessorCount */
    default: *v = 0;
    }
    return 0;
}
int cudaFuncSetAttribute(const void *func, int attr, int value) {
    (void)func, (void)attr, (void)value;
    stub.func_attribute_sets++;
    return 0;
}
int cudaFuncGetAttributes(void *attr, const void *func) {
    (void)func;
    /* cudaFuncAttributes: sharedSizeBytes, constSizeBytes, localSizeBytes (size_t), maxThreadsPerBlock,
     * numRegs, ptxVersion, binaryVersion (int), ... */
    char *p = attr;
    int ptx = stub.ptx_version;
    memcpy(p + 3 * sizeof(size_t) + 2 * sizeof(int), &ptx, sizeof ptx);
    return 0;
}
/* The persistent wgmma GEMM sizes its grid by the CTAs resident at once: one an SM, clusters of 2 on half. */
int cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func, int threads, size_t smem,
                                                           unsigned flags) {
    (void)func, (void)threads, (void)smem, (void)flags;
    *n = 1;
    return 0;
}
int cudaOccupancyMaxActiveClusters(int *n, const void *func, const void *config) {
    (void)func, (void)config;
    *n = stub.sms / 2;
    return 0;
}
int cudaGetLastError(void) { return pending ? 9 /* cudaErrorInvalidConfiguration */ : 0; }
int cudaGetDriverEntryPointByVersion(const char *sym, void **fn, unsigned ver, unsigned long long flags, int *status) {
    (void)sym, (void)ver, (void)flags;
    *fn = NULL;
    if (status) *status = 1; /* cudaDriverEntryPointSymbolNotFound: no TMA here */
    return 0;
}
int cudaGetDriverEntryPoint(const char *sym, void **fn, unsigned long long flags, int *status) {
    return cudaGetDriverEntryPointByVersion(sym, fn, 0, flags, status);
}

/* ---- CUDA graphs (the graph helper) --------------------------------------------------------------- */
static int graph_token, exec_token; /* what the handles point at; never dereferenced */

int cudaStreamBeginCapture(void *stream, int mode) {
    (void)mode;
    if (!stream || stub.capturing) return 900; /* cudaErrorStreamCaptureUnsupported */
    stub.capturing = 1;
    stub.captures++;
    return 0;
}
int cudaStreamEndCapture(void *stream, void **graph) {
    (void)stream;
    if (!stub.capturing) return 901; /* cudaErrorStreamCaptureInvalidated */
    stub.capturing = 0;
    stub.live_graphs++;
    *graph = &graph_token;
    return 0;
}
int cudaStreamIsCapturing(void *stream, int *status) {
    (void)stream;
    *status = stub.capturing || stub.caller_capturing; /* cudaStreamCaptureStatusActive = 1 */
    return 0;
}
int cudaGraphInstantiate(void **exec, void *graph, unsigned long long flags) {
    (void)flags;
    if (graph != &graph_token) return 1;
    stub.instantiations++;
    stub.live_execs++;
    *exec = &exec_token;
    return 0;
}
int cudaGraphExecUpdate(void *exec, void *graph, void *info) {
    (void)info;
    if (exec != &exec_token || graph != &graph_token) return 1;
    stub.updates++;
    return stub.update_fails ? 910 : 0; /* cudaErrorGraphExecUpdateFailure */
}
int cudaGraphLaunch(void *exec, void *stream) {
    (void)stream;
    if (exec != &exec_token) return 1;
    stub.graph_launches++;
    return 0;
}
int cudaGraphExecDestroy(void *exec) {
    if (exec != &exec_token) return 1;
    stub.live_execs--;
    return 0;
}
int cudaGraphDestroy(void *graph) {
    if (graph != &graph_token) return 1;
    stub.live_graphs--;
    return 0;
}
