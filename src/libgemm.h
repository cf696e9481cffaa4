/* libgemm.h — which GEMM kernels of a plan cuBLASLt can run (`--allow-cublas`), and with which epilogue.
 *
 * A header compiled with --allow-cublas may run a GEMM through cuBLASLt (templates/cublaslt.cuh) instead
 * of tsopt's own kernels, when cuBLASLt computes the same thing: one operand pair (no dual B, no second pair,
 * no row statistics, one output), fp16, bf16 or fp32 operands of one type (fp32: exact fp32 arithmetic, no TF32;
 * such GEMMs exist only under --allow-cublas, plan.h ts_plan_lower_with), an output of that type or fp32, each
 * operand with a unit stride along one of its two matrix axes, and an epilogue of the form
 *     D = act(alpha·acc + bias[n] + beta·C)      act: none, ReLU or GELU (tanh form); C only when act is none
 * with the bias a vector along n (unit stride, the output's type) and C a tensor of the output's shape and
 * type with n contiguous. The epilogue expression is recognised by evaluating it (float64, the interpreter's
 * op semantics, casts between float types taken as exact) at probe points, not by its shape: any rewrite of
 * GELU's tanh form that the rules produced still matches, and a near miss (GELU's erf form) does not.
 * The cost model (costmodel.c) prices such a kernel with the library's rate, the search and tune offer it
 * as a configuration (config.h ts_config_variants), and the emitter (emit.c) prints the call. */
#ifndef TS_LIBGEMM_H
#define TS_LIBGEMM_H

#include <stdbool.h>

#include "hlir.h"
#include "plan.h"

typedef enum { TS_LT_ACT_NONE, TS_LT_ACT_RELU, TS_LT_ACT_GELU } ts_lt_act;

typedef struct {
    ts_lt_act act;
    double alpha, beta;
    int bias;     /* the kernel's operand slot of the bias along n, -1: none */
    int residual; /* its slot of C, -1: none */
} ts_lt_epilogue;

/* The bytes of workspace a header gives cuBLASLt (after its temporaries' slots), for split-K algorithms. */
enum { TS_LT_WORKSPACE_BYTES = 4 << 20 };

/* Whether cuBLASLt can run GEMM kernel k of plan p (see above); *e is its epilogue when it can. *why (may be
 * NULL) says why not, for notes and tests. */
bool ts_libgemm_match(const ts_graph *g, const ts_plan *p, const ts_kernel *k, ts_lt_epilogue *e, const char **why);

/* Whether plan p runs any kernel through cuBLASLt (a kernel whose configuration says library). */
bool ts_plan_uses_cublas(const ts_plan *p);

/* "" or ", ReLU" / ", GELU" and the bias and C terms, for descriptions: e.g. "bias, GELU". (static buffer) */
const char *ts_lt_epilogue_describe(const ts_lt_epilogue *e);

#endif
