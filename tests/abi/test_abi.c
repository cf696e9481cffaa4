/* test_abi.c — generated headers' launch helpers refuse misuse before launching anything, checked through
 * their C ABI on the stub CUDA runtime (stub_cudart.c: no GPU; kernels never run, memory never touched).
 * Linked with the nvcc objects of generated/matmul.cuh (static sizes, one GEMM), attention.cuh (static,
 * one attention kernel) and decoder_layer.cuh (dynamic t: GEMMs, attention, reductions, maps) by
 * `make abi-check`. What it proves, per case below: null buffers and dims are cudaErrorInvalidValue;
 * buffers off their element alignment are cudaErrorMisalignedAddress; offsets of 2, 4 and 8 bytes run a
 * GEMM on its unvectorised path and are refused for attention, whose kernels need 16 bytes; dynamic sizes
 * of 0 (every output empty) succeed with no launch, negative sizes, sizes past 2^40 and past a kernel's
 * 32-bit parameters are refused with no launch; device facts and kernel attributes are queried once per
 * device, not on every launch. The CUDA-graph helper (<name>_graph_run): the first call runs the graph and
 * captures it, an identical call replays it without launching, a call with other sizes, pointers or device
 * captures again and updates the executable graph in place (or instantiates a new one when the update is
 * refused), misuse is refused before anything is launched or captured, a NULL stream is refused, inside
 * the caller's own capture it runs as _run, _graph_reset destroys it, and no captured graph is leaked.
 * Exit status 0 when every check holds; each failure is printed. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stub_cudart.h"

int matmul_run(void *const *buffers, const int64_t *dims, void *workspace, void *stream);
int attention_run(void *const *buffers, const int64_t *dims, void *workspace, void *stream);
int decoder_layer_run(void *const *buffers, const int64_t *dims, void *workspace, void *stream);
size_t decoder_layer_workspace(const int64_t *dims);
int decoder_layer_graph_run(void *const *buffers, const int64_t *dims, void *workspace, void *stream);
int decoder_layer_graph_reset(void);
int matmul_graph_run(void *const *buffers, const int64_t *dims, void *workspace, void *stream);
int matmul_graph_reset(void);

enum { OK = 0, INVALID_VALUE = 1, MISALIGNED = 716, CAPTURE_UNSUPPORTED = 900 };

static int failures, checks;

static void expect(int cond, const char *what, int got, int want) {
    checks++;
    if (cond) return;
    failures++;
    printf("FAIL: %s: got %d, expected %d\n", what, got, want);
}

/* Fake device addresses: 256-byte aligned, distinct, never dereferenced by the stub. */
static char *dev(int i) { return (char *)(uintptr_t)(0x100000000ull * (uintptr_t)(i + 1)); }

typedef int (*run_fn)(void *const *, const int64_t *, void *, void *);

/* Calls run with buffer `which` moved by `offset` bytes (or NULL when offset < 0); checks the return
 * value and the number of launches. */
static void call(const char *what, run_fn run, int nbuf, int which, long offset, const int64_t *dims, void *ws,
                 int want_rc, int want_launches) {
    void *bufs[16];
    for (int i = 0; i < nbuf; i++) bufs[i] = dev(i);
    if (which >= 0) bufs[which] = offset < 0 ? NULL : dev(which) + offset;
    stub_reset();
    int rc = run(bufs, dims, ws, NULL);
    char msg[200];
    snprintf(msg, sizeof msg, "%s: return value", what);
    expect(rc == want_rc, msg, rc, want_rc);
    snprintf(msg, sizeof msg, "%s: kernels launched", what);
    if (want_launches >= 0) expect(stub.launches == want_launches, msg, stub.launches, want_launches);
    else expect(stub.launches > 0, msg, stub.launches, 1);
}

static void matmul_cases(void) {
    call("matmul, well-formed", matmul_run, 3, -1, 0, NULL, NULL, OK, 1);
    expect(stub.last_kernel && strstr(stub.last_kernel, "gemm_kernel") && strstr(stub.last_kernel, "ELi16ELi1ELb0ELb0ELi2EEEv"),
           "matmul, aligned: the 16-byte cp.async loader (gemm_kernel<..., VEC=16, SPLIT=1, TWO=false, A_KM=false, "
           "REACH=kOtherCode>: the stub is no sm_90a GPU)", 0, 1);
    stub_reset();
    void *bufs[3] = {dev(0), dev(1), dev(2)};
    int rc = matmul_run(bufs, NULL, NULL, NULL);
    expect(rc == OK && stub.attribute_queries == 0, "matmul, second launch: device attribute queries (cached)",
           stub.attribute_queries, 0);
    expect(stub.func_attribute_sets == 0, "matmul, second launch: cudaFuncSetAttribute calls (once per device)",
           stub.func_attribute_sets, 0);
    call("matmul, X null", matmul_run, 3, 0, -1, NULL, NULL, INVALID_VALUE, 0);
    call("matmul, Y null", matmul_run, 3, 2, -1, NULL, NULL, INVALID_VALUE, 0);
    call("matmul, X one byte off (fp16)", matmul_run, 3, 0, 1, NULL, NULL, MISALIGNED, 0);
    call("matmul, Y three bytes off", matmul_run, 3, 2, 3, NULL, NULL, MISALIGNED, 0);
    /* off 16 bytes: 2 bytes (an odd element) the element-wise loader, 4 and 8 the 4-byte one */
    const long offsets[] = {2, 4, 8};
    const char *const loader[] = {"ELi0ELi1ELb0ELb0ELi2EEEv", "ELi4ELi1ELb0ELb0ELi2EEEv", "ELi4ELi1ELb0ELb0ELi2EEEv"};
    for (int i = 0; i < 3; i++) {
        char what[80], which[120];
        snprintf(what, sizeof what, "matmul, X %ld bytes off (a slower path)", offsets[i]);
        call(what, matmul_run, 3, 0, offsets[i], NULL, NULL, OK, 1);
        snprintf(which, sizeof which, "matmul, X %ld bytes off: the %s loader (gemm_kernel<..., VEC=%s, SPLIT=1, TWO=false, A_KM=false, REACH=2>)",
                 offsets[i], i ? "4-byte" : "element-wise", i ? "4" : "0");
        expect(stub.last_kernel && strstr(stub.last_kernel, "gemm_kernel") && strstr(stub.last_kernel, loader[i]), which, 0, 1);
    }
    call("matmul, W 8 bytes off", matmul_run, 3, 1, 8, NULL, NULL, OK, 1);
    stub_reset();
    expect(matmul_run(NULL, NULL, NULL, NULL) == INVALID_VALUE, "matmul, buffers NULL", 0, INVALID_VALUE);
}

static void attention_cases(void) {
    call("attention, well-formed", attention_run, 4, -1, 0, NULL, NULL, OK, 1);
    call("attention, O null", attention_run, 4, 3, -1, NULL, NULL, INVALID_VALUE, 0);
    const long offsets[] = {2, 4, 8};
    for (int i = 0; i < 3; i++) {
        char what[80];
        snprintf(what, sizeof what, "attention, K %ld bytes off (refused: 16-byte loads)", offsets[i]);
        call(what, attention_run, 4, 1, offsets[i], NULL, NULL, MISALIGNED, 0);
    }
    call("attention, Q 16 bytes off", attention_run, 4, 0, 16, NULL, NULL, OK, 1);
}

static void decoder_cases(void) {
    int64_t t = 7;
    void *ws = dev(15);
    call("decoder_layer, t = 7", decoder_layer_run, 9, -1, 0, &t, ws, OK, -1);
    call("decoder_layer, t = 7, workspace NULL", decoder_layer_run, 9, -1, 0, &t, NULL, INVALID_VALUE, 0);
    call("decoder_layer, t = 7, workspace 8 bytes off", decoder_layer_run, 9, -1, 0, &t, (char *)ws + 8, MISALIGNED, 0);
    call("decoder_layer, dims NULL", decoder_layer_run, 9, -1, 0, NULL, ws, INVALID_VALUE, 0);
    call("decoder_layer, W_o null", decoder_layer_run, 9, 3, -1, &t, ws, INVALID_VALUE, 0);
    t = 0;
    call("decoder_layer, t = 0 (every output empty)", decoder_layer_run, 9, -1, 0, &t, ws, OK, 0);
    t = 0;
    call("decoder_layer, t = 0, buffers null (nothing to touch)", decoder_layer_run, 9, 0, -1, &t, ws, OK, 0);
    t = -1;
    call("decoder_layer, t = -1", decoder_layer_run, 9, -1, 0, &t, ws, INVALID_VALUE, 0);
    t = (int64_t)1 << 31;
    call("decoder_layer, t = 2^31 (past the GEMM's int M)", decoder_layer_run, 9, -1, 0, &t, ws, INVALID_VALUE, 0);
    t = ((int64_t)1 << 40) + 1;
    call("decoder_layer, t = 2^40 + 1", decoder_layer_run, 9, -1, 0, &t, ws, INVALID_VALUE, 0);
    /* Programmatic dependent launch: every kernel after the first of a call, on a Hopper device; none before */
    t = 7;
    call("decoder_layer, t = 7 (sm_90)", decoder_layer_run, 9, -1, 0, &t, ws, OK, -1);
    expect(stub.launches > 1 && stub.pdl_launches == stub.launches - 1 && !stub.first_pdl,
           "decoder_layer, sm_90: launches after the first with programmatic stream serialization", stub.pdl_launches,
           stub.launches - 1);
    call("decoder_layer, second call (sm_90)", decoder_layer_run, 9, -1, 0, &t, ws, OK, -1);
    expect(!stub.first_pdl, "decoder_layer, second call: its first kernel waits for earlier stream work", stub.first_pdl, 0);
    call("matmul, one kernel (sm_90)", matmul_run, 3, -1, 0, NULL, NULL, OK, 1);
    expect(stub.pdl_launches == 0, "matmul, one kernel: no programmatic launch", stub.pdl_launches, 0);
    stub.cc_major = 8, stub.device = 2; /* a device no other case uses (facts are cached): an sm_80 GPU */
    call("decoder_layer, t = 7 (sm_80)", decoder_layer_run, 9, -1, 0, &t, ws, OK, -1);
    expect(stub.pdl_launches == 0, "decoder_layer, sm_80: no programmatic launch", stub.pdl_launches, 0);
    stub.cc_major = 9, stub.device = 0;
    expect(decoder_layer_workspace(&t) > 0, "decoder_layer, workspace bytes at t = 7", 0, 1);
    expect(decoder_layer_workspace(NULL) == 0, "decoder_layer, workspace bytes with dims NULL", 1, 0);
}

/* One decoder_layer_graph_run call at size t with buffer `which` NULL (-1: none) on `stream`; checks its
 * return value and what it did: kernels launched directly, stream captures, executable graphs
 * instantiated and updated, graph replays (-1: more than zero kernels). */
typedef struct {
    int rc, launches, captures, instantiations, updates, replays;
} graph_outcome;

static void graph_call(const char *what, int64_t t, int which, void *stream, graph_outcome want) {
    void *bufs[9];
    for (int i = 0; i < 9; i++) bufs[i] = i == which ? NULL : dev(i);
    stub_reset();
    int rc = decoder_layer_graph_run(bufs, &t, dev(15), stream);
    const int got[] = {rc, stub.launches, stub.captures, stub.instantiations, stub.updates, stub.graph_launches};
    const int wanted[] = {want.rc, want.launches, want.captures, want.instantiations, want.updates, want.replays};
    const char *names[] = {"return value", "kernels launched", "captures", "instantiations", "updates", "replays"};
    for (int i = 0; i < 6; i++) {
        char msg[200];
        snprintf(msg, sizeof msg, "decoder_layer_graph_run, %s: %s", what, names[i]);
        if (wanted[i] < 0) expect(got[i] > 0, msg, got[i], 1);
        else expect(got[i] == wanted[i], msg, got[i], wanted[i]);
    }
    if (want.captures) expect(stub.captured_launches == stub.launches, "the capture records what the run launched",
                              stub.captured_launches, stub.launches);
}

static void graph_cases(void) {
    void *s1 = (void *)(uintptr_t)0x5000, *s2 = (void *)(uintptr_t)0x6000;
    graph_call("first call (runs, then captures)", 7, -1, s1, (graph_outcome){OK, -1, 1, 1, 0, 0});
    graph_call("the same call (replays)", 7, -1, s1, (graph_outcome){OK, 0, 0, 0, 0, 1});
    graph_call("t = 9 (captured again, updated in place)", 9, -1, s1, (graph_outcome){OK, -1, 1, 0, 1, 0});
    graph_call("t = 9 again (replays)", 9, -1, s1, (graph_outcome){OK, 0, 0, 0, 0, 1});
    graph_call("another stream", 9, -1, s2, (graph_outcome){OK, -1, 1, 0, 1, 0});
    stub.device = 1;
    graph_call("another device", 9, -1, s2, (graph_outcome){OK, -1, 1, 0, 1, 0});
    stub.device = 0;
    stub.update_fails = 1;
    graph_call("update refused (instantiated anew)", 11, -1, s2, (graph_outcome){OK, -1, 1, 1, 1, 0});
    stub.update_fails = 0;
    expect(stub.live_execs == 1, "one executable graph alive", stub.live_execs, 1);
    graph_call("W_o null (refused, nothing captured)", 11, 3, s2, (graph_outcome){INVALID_VALUE, 0, 0, 0, 0, 0});
    graph_call("t = -1 (refused)", -1, -1, s2, (graph_outcome){INVALID_VALUE, 0, 0, 0, 0, 0});
    graph_call("after a refused call, the last good one replays", 11, -1, s2, (graph_outcome){OK, 0, 0, 0, 0, 1});
    graph_call("stream NULL (no capture on the legacy stream)", 11, -1, NULL, (graph_outcome){CAPTURE_UNSUPPORTED, 0, 0, 0, 0, 0});
    stub.caller_capturing = 1;
    graph_call("inside the caller's capture (runs as _run)", 11, -1, s2, (graph_outcome){OK, -1, 0, 0, 0, 0});
    stub.caller_capturing = 0;
    expect(decoder_layer_graph_reset() == OK && stub.live_execs == 0, "decoder_layer_graph_reset destroys the graph",
           stub.live_execs, 0);
    expect(decoder_layer_graph_reset() == OK, "decoder_layer_graph_reset twice", 1, 0);
    graph_call("after the reset (instantiated anew)", 11, -1, s2, (graph_outcome){OK, -1, 1, 1, 0, 0});
    stub_reset();
    expect(decoder_layer_graph_run(NULL, NULL, dev(15), s1) == INVALID_VALUE, "decoder_layer_graph_run, buffers NULL", 0, 1);
    void *bufs[3] = {dev(0), dev(1), dev(2)};
    expect(matmul_graph_run(bufs, NULL, NULL, s1) == OK && stub.captures == 1, "matmul_graph_run, static sizes, dims NULL",
           stub.captures, 1);
    expect(matmul_graph_reset() == OK && decoder_layer_graph_reset() == OK, "both graphs reset", 0, 0);
    expect(stub.live_graphs == 0 && stub.live_execs == 0, "no captured or executable graph left", stub.live_graphs, 0);
}

int main(void) {
    matmul_cases();
    attention_cases();
    decoder_cases();
    graph_cases();
    printf("launch helpers through the C ABI on the stub runtime: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
