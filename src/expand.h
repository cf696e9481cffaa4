/* expand.h — building HLIR from tensor-level operations: named-axis broadcasting, reductions, and the
 * composites users write (matmul, softmax, rmsnorm, silu, gelu, ...) expanded into primitive nodes.
 *
 * A ts_tensor is a value in the graph under construction: a node seen through a view, with its dtype.
 * Operands are aligned by axis *name*: a binary op's result has the first operand's axes followed by the
 * second's extra axes, and each operand is broadcast (zero strides) to that order. These functions assume
 * their arguments are valid (src/check.c checks user input first); they do not report errors. */
#ifndef TS_EXPAND_H
#define TS_EXPAND_H

#include "hlir.h"

typedef struct {
    ts_ref ref;
    ts_dtype dtype;
} ts_tensor;

typedef struct {
    ts_graph *g;
    int32_t origin; /* spec op index recorded in every node built */
} ts_builder;

ts_tensor ts_t_input(ts_builder *b, int32_t input_index, const int32_t *axes, int ndim, ts_dtype dtype);
ts_tensor ts_t_constant(ts_builder *b, double value, ts_dtype dtype);
ts_tensor ts_t_iota(ts_builder *b, int32_t axis, ts_dtype dtype);
ts_tensor ts_t_unary(ts_builder *b, ts_op op, ts_tensor x);
ts_tensor ts_t_cast(ts_builder *b, ts_tensor x, ts_dtype to);
ts_tensor ts_t_copy(ts_builder *b, ts_tensor x);
ts_tensor ts_t_binary(ts_builder *b, ts_op op, ts_tensor x, ts_tensor y);
ts_tensor ts_t_where(ts_builder *b, ts_tensor c, ts_tensor x, ts_tensor y);
ts_tensor ts_t_reduce(ts_builder *b, ts_op op, ts_tensor x, int32_t axis);
/* dest with v written along `axis` (aligned by name): one row at index size(at) - 1 (rows = -1; v has dest's
 * dims without axis), or the block of v's axis `rows`, its index i at size(at) - size(rows) + i (v has dest's
 * dims with rows in axis's place). dest is an inout input (src/check.c checks the rest). */
ts_tensor ts_t_update(ts_builder *b, ts_tensor dest, ts_tensor v, int32_t axis, int32_t at, int32_t rows);

/* A fused op (ops.h TS_FUSED_OPS, not PICK or VIEW) reducing `axis` of xs[0..n), aligned by name; an
 * operand without `axis` is broadcast along it. DUAL needs the graph's pair axis (ts_t_pair_axis). */
ts_tensor ts_t_fused(ts_builder *b, ts_op op, const ts_tensor *xs, int n, int32_t axis, int64_t tile);
/* Element i (0 or 1) of a DUAL's pair axis: a view, no node. */
ts_tensor ts_t_pick(ts_builder *b, ts_tensor pair, int64_t i);
/* The axis "_pair" of size 2 that DUAL stacks its results on (added to the graph on first use). */
int32_t ts_t_pair_axis(ts_builder *b);

/* Composites. */
ts_tensor ts_t_sub(ts_builder *b, ts_tensor x, ts_tensor y);
ts_tensor ts_t_div(ts_builder *b, ts_tensor x, ts_tensor y);
ts_tensor ts_t_scale(ts_builder *b, ts_tensor x, double c);
ts_tensor ts_t_exp(ts_builder *b, ts_tensor x);
ts_tensor ts_t_rsqrt(ts_builder *b, ts_tensor x);
ts_tensor ts_t_tanh(ts_builder *b, ts_tensor x);
ts_tensor ts_t_silu(ts_builder *b, ts_tensor x);
ts_tensor ts_t_sigmoid(ts_builder *b, ts_tensor x);
ts_tensor ts_t_gelu(ts_builder *b, ts_tensor x);      /* exact: 0.5·x·(1 + erf(x/√2)) */
ts_tensor ts_t_gelu_tanh(ts_builder *b, ts_tensor x); /* tanh approximation */
ts_tensor ts_t_mean(ts_builder *b, ts_tensor x, int32_t axis);
ts_tensor ts_t_softmax(ts_builder *b, ts_tensor x, int32_t axis);
/* x * rsqrt(mean(x², axis) + eps) [* gain]; gain may be NULL. */
ts_tensor ts_t_rmsnorm(ts_builder *b, ts_tensor x, const ts_tensor *gain, int32_t axis, double eps);
/* The PyTorch vocabulary (each function's comment in expand.c states its identity). */
ts_tensor ts_t_relu(ts_builder *b, ts_tensor x);
ts_tensor ts_t_leaky_relu(ts_builder *b, ts_tensor x, double slope);
ts_tensor ts_t_min(ts_builder *b, ts_tensor x, ts_tensor y);
ts_tensor ts_t_abs(ts_builder *b, ts_tensor x);
ts_tensor ts_t_log(ts_builder *b, ts_tensor x);
ts_tensor ts_t_softplus(ts_builder *b, ts_tensor x, double beta, double threshold);
/* tanh(softplus(x)) with β = 1, in one exponential and one reciprocal (expand.c states the identity and why it
 * cannot overflow); equal to ts_t_tanh of ts_t_softplus wherever softplus's threshold is 10 or more (beyond it
 * softplus(x) = x, and tanh(x) and tanh(ln(1 + e^x)) agree to 1e-13 there). */
ts_tensor ts_t_tanh_softplus(ts_builder *b, ts_tensor x);
ts_tensor ts_t_logsumexp(ts_builder *b, ts_tensor x, int32_t axis);
/* lo, hi: the bounds, NULL for none */
ts_tensor ts_t_clamp(ts_builder *b, ts_tensor x, const double *lo, const double *hi);
/* the variance over `axis`, divided by n - correction (correction < n) */
ts_tensor ts_t_var(ts_builder *b, ts_tensor x, int32_t axis, double correction);
/* x^n for a non-zero integer n, or n = ±0.5 */
ts_tensor ts_t_pow(ts_builder *b, ts_tensor x, double n);
/* gain and bias may be NULL */
ts_tensor ts_t_layernorm(ts_builder *b, ts_tensor x, const ts_tensor *gain, const ts_tensor *bias, int32_t axis,
                         double eps);
/* sum over `axis` of x*y: both have `axis`; other axes broadcast by name (batched matmul). */
ts_tensor ts_t_matmul(ts_builder *b, ts_tensor x, ts_tensor y, int32_t axis);

#endif
