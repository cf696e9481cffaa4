// abi_driver.cu — calls one generated header's C ABI entry from a shared library (built by
// bench/gpu_build.sh), so that bench/robust.py can run it under compute-sanitizer without Python or
// PyTorch in the sanitized process. Inputs are filled with hash-random values of their dtype (never
// zeros); outputs and the workspace are left as cudaMalloc returns them (uninitialised), so that
// initcheck reports a kernel that reads an output or workspace byte before writing it. The call runs
// twice; it prints the return values, whether the two runs' outputs are bitwise equal and an FNV-1a
// hash of the outputs. Never a reference check: bench/robust.py validates answers in-process.
//
// Usage: abi_driver LIB GRAPH DIMS IN... -- OUT...
//   DIMS: the dynamic sizes, comma-separated, or "-"; IN/OUT: BYTES:DTYPE (fp16, bf16, fp32)
// Exit: 0 when both calls return 0 and the device synchronises cleanly; 1 on a refused call (its
// cudaError name printed); 2 on a CUDA error or bad usage.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90a bench/robust/abi_driver.cu -o build/robust/abi_driver -ldl
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

typedef int (*run_fn)(void *const *, const int64_t *, void *, cudaStream_t);
typedef size_t (*workspace_fn)(const int64_t *);

struct Buffer {
    size_t bytes;
    std::string dtype;
    void *dev = nullptr;
};

static bool parse_buffer(const char *arg, Buffer *b) {
    const char *colon = strchr(arg, ':');
    if (!colon) return false;
    b->bytes = strtoull(arg, nullptr, 10);
    b->dtype = colon + 1;
    return b->dtype == "fp16" || b->dtype == "bf16" || b->dtype == "fp32";
}

// Uniform in [-1, 1) from a hash of the index, rounded to the dtype.
static void fill(std::vector<unsigned char> &host, const std::string &dtype, uint64_t seed) {
    size_t es = dtype == "fp32" ? 4 : 2, n = host.size() / es;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
        h ^= h >> 31, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 29;
        float v = (float)((double)(h >> 11) / 9007199254740992.0 * 2 - 1);
        if (dtype == "fp32") memcpy(&host[i * 4], &v, 4);
        else if (dtype == "fp16") {
            __half x = __float2half_rn(v);
            memcpy(&host[i * 2], &x, 2);
        } else {
            __nv_bfloat16 x = __float2bfloat16_rn(v);
            memcpy(&host[i * 2], &x, 2);
        }
    }
}

static uint64_t fnv(uint64_t h, const std::vector<unsigned char> &v) {
    for (unsigned char c : v) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("cuda error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #x);    \
            return 2;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: abi_driver LIB GRAPH DIMS IN... -- OUT...\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        printf("cannot load %s: %s\n", argv[1], dlerror());
        return 2;
    }
    std::string g = argv[2];
    run_fn run = (run_fn)dlsym(lib, (g + "_run").c_str());
    workspace_fn ws = (workspace_fn)dlsym(lib, (g + "_workspace").c_str());
    if (!run || !ws) {
        printf("%s lacks %s_run or %s_workspace\n", argv[1], g.c_str(), g.c_str());
        return 2;
    }
    std::vector<int64_t> dims;
    for (char *s = argv[3]; strcmp(argv[3], "-") != 0 && *s;) {
        dims.push_back(strtoll(s, &s, 10));
        if (*s == ',') s++;
    }
    std::vector<Buffer> ins, outs;
    bool out_side = false;
    for (int i = 4; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            out_side = true;
            continue;
        }
        Buffer b;
        if (!parse_buffer(argv[i], &b)) {
            fprintf(stderr, "bad buffer %s (want BYTES:fp16|bf16|fp32)\n", argv[i]);
            return 2;
        }
        (out_side ? outs : ins).push_back(b);
    }
    std::vector<void *> ptrs;
    uint64_t seed = 1;
    for (Buffer &b : ins) {
        CK(cudaMalloc(&b.dev, b.bytes ? b.bytes : 1));
        std::vector<unsigned char> host(b.bytes);
        fill(host, b.dtype, seed++);
        CK(cudaMemcpy(b.dev, host.data(), b.bytes, cudaMemcpyHostToDevice));
        ptrs.push_back(b.dev);
    }
    for (Buffer &b : outs) {
        CK(cudaMalloc(&b.dev, b.bytes ? b.bytes : 1));
        ptrs.push_back(b.dev);
    }
    const int64_t *d = dims.empty() ? nullptr : dims.data();
    size_t wbytes = ws(d);
    void *w = nullptr;
    if (wbytes) CK(cudaMalloc(&w, wbytes));
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));
    uint64_t hash[2] = {0xcbf29ce484222325ull, 0xcbf29ce484222325ull};
    for (int r = 0; r < 2; r++) {
        int rc = run(ptrs.data(), d, w, stream);
        printf("call %d: %d (%s)\n", r + 1, rc, cudaGetErrorName((cudaError_t)rc));
        if (rc != 0) return 1;
        CK(cudaStreamSynchronize(stream));
        for (Buffer &b : outs) {
            std::vector<unsigned char> host(b.bytes);
            CK(cudaMemcpy(host.data(), b.dev, b.bytes, cudaMemcpyDeviceToHost));
            hash[r] = fnv(hash[r], host);
        }
    }
    printf("outputs %016llx, second run %s\n", (unsigned long long)hash[0],
           hash[0] == hash[1] ? "bitwise equal" : "DIFFERS");
    for (Buffer &b : ins) CK(cudaFree(b.dev));
    for (Buffer &b : outs) CK(cudaFree(b.dev));
    if (w) CK(cudaFree(w));
    CK(cudaStreamDestroy(stream));
    return 0;
}
