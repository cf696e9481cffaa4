/* ops.h — the one list of tsopt's primitive ops (an X-macro).
 *
 * Every table keyed by op — the enum, the YAML names, the rule lexer, the interpreter's dispatch, the
 * e-graph's arity checks and later the emitter — is generated from TS_OPS, so an op missing from one of
 * them fails at compile time. Composite ops users write (matmul, softmax, rmsnorm, ...) are not here: they
 * expand to these in src/expand.c. View ops (permute, expand, reshape, slice) are not nodes either: they
 * change a ts_view (src/hlir.h). */
#ifndef TS_OPS_H
#define TS_OPS_H

typedef enum {
    TS_KIND_SOURCE,  /* no operands: input, constant, iota */
    TS_KIND_UNARY,   /* elementwise, one operand */
    TS_KIND_BINARY,  /* elementwise, two operands of identical dims */
    TS_KIND_TERNARY, /* elementwise, three operands of identical dims */
    TS_KIND_REDUCE,  /* one operand, reduced over one named axis */
    TS_KIND_UPDATE,  /* an in-place write into a graph input (src/check.c's `append`): see UPDATE */
    TS_KIND_FUSED,   /* introduced by rules: see TS_FUSED_OPS */
} ts_op_kind;

/* X(ENUM, "name", arity, kind)   — the identity each computes, elementwise over float64 values.
 * UPDATE (dest, v) {w, p} is dest (a graph input declared `inout`) with its slice at index size(p) - 1 of
 * axis w replaced by v (dest's axes without w); the plan writes that slice into dest's own buffer (a
 * KV cache's new row), and the updated input is a hidden graph output (ts_output.inout). */
#define TS_OPS(X)                                                                                      \
    X(INPUT, "input", 0, TS_KIND_SOURCE)             /* a graph input                          */     \
    X(CONSTANT, "constant", 0, TS_KIND_SOURCE)       /* c (scalar, broadcast by views)          */     \
    X(IOTA, "iota", 0, TS_KIND_SOURCE)               /* i along one axis: 0, 1, ..., n-1        */     \
    X(NEG, "neg", 1, TS_KIND_UNARY)                  /* -x                                      */     \
    X(RECIP, "recip", 1, TS_KIND_UNARY)              /* 1/x                                     */     \
    X(SQRT, "sqrt", 1, TS_KIND_UNARY)                /* sqrt(x)                                 */     \
    X(EXP2, "exp2", 1, TS_KIND_UNARY)                /* 2^x                                     */     \
    X(LOG2, "log2", 1, TS_KIND_UNARY)                /* log2(x)                                 */     \
    X(SIN, "sin", 1, TS_KIND_UNARY)                  /* sin(x)                                  */     \
    X(ERF, "erf", 1, TS_KIND_UNARY)                  /* erf(x) = 2/√π ∫_0^x e^{-t²} dt           */     \
    X(CAST, "cast", 1, TS_KIND_UNARY)                /* x rounded to the node's dtype           */     \
    X(COPY, "copy", 1, TS_KIND_UNARY)                /* x, materialised contiguous              */     \
    X(ADD, "add", 2, TS_KIND_BINARY)                 /* a + b                                   */     \
    X(MUL, "mul", 2, TS_KIND_BINARY)                 /* a * b                                   */     \
    X(MAX, "max", 2, TS_KIND_BINARY)                 /* max(a, b)                               */     \
    X(LESS_THAN, "less_than", 2, TS_KIND_BINARY)     /* a < b ? 1 : 0                           */     \
    X(WHERE, "where", 3, TS_KIND_TERNARY)            /* c != 0 ? a : b                          */     \
    X(REDUCE_SUM, "reduce_sum", 1, TS_KIND_REDUCE)   /* sum of x over the axis                  */     \
    X(REDUCE_MAX, "reduce_max", 1, TS_KIND_REDUCE)   /* max of x over the axis                  */     \
    X(UPDATE, "update", 2, TS_KIND_UPDATE)           /* {w, p}: dest, index size(p)-1 of w := v */

/* Ops that rewrite rules introduce (they never appear in YAML). Each is a reduction over one named axis
 * (param 0) of several operands aligned by name, except pick and view, which only change a view.
 * X(ENUM, "name", arity, nparams)   — reference semantics in src/interp.c */
#define TS_FUSED_OPS(X)                                                                                \
    X(CONTRACT, "contract", 2, 1)        /* {k}: Σ_k a·b                                          */     \
    X(CONTRACT_ADD, "contract_add", 3, 1) /* {k}: c + Σ_k a·b (c lacks k): a GEMM accumulating onto c  */ \
    X(TILE_SUM, "tile_sum", 1, 2)        /* {k, T}: Σ_k x, as partial sums over tiles of T, combined */  \
    X(TILE_MAX, "tile_max", 1, 2)        /* {k, T}: max_k x, tile by tile                          */     \
    X(WSUM, "wsum", 3, 1)                /* {k}: Σ_k e_k·v_k / Σ_k e_k, e = 2^(c·(s - max_k s))     */     \
    X(ONLINE_WSUM, "online_wsum", 3, 2)  /* {k, T}: wsum streamed over tiles of T with a running max,  \
                                            running sum and rescaled accumulator (FlashAttention)   */     \
    X(DUAL, "dual", 3, 1)                /* {k}: [Σ_k x·a, Σ_k x·b] stacked on the pair axis           */ \
    X(PICK, "pick", 1, 1)                /* {i}: element i of a dual's pair axis (a view)             */ \
    X(VIEW, "view", 1, 1)                /* {v}: x re-indexed through view v of the graph's view table */

typedef enum {
#define TS_X_ENUM(e, name, arity, kind) TS_OP_##e,
    TS_OPS(TS_X_ENUM)
#undef TS_X_ENUM
        TS_OP_COUNT, /* the primitives end here; fused ops follow, numbered from TS_OP_COUNT */
    TS_OP_FUSED_BEFORE_ = TS_OP_COUNT - 1,
#define TS_X_FENUM(e, name, arity, nparams) TS_OP_##e,
    TS_FUSED_OPS(TS_X_FENUM)
#undef TS_X_FENUM
        TS_OP_ALL
} ts_op;

const char *ts_op_name(ts_op op);
int ts_op_arity(ts_op op);
ts_op_kind ts_op_kind_of(ts_op op);
/* Params of a fused op (primitives: see egraph.h). */
int ts_fused_op_nparams(ts_op op);
/* The primitive op named `name`, or -1 (fused ops are not looked up here: they are e-graph extras). */
int ts_op_lookup(const char *name);

#endif
