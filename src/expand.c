/* expand.c — tensor-level graph building and the expansion of composites into primitives (expand.h). */
#include "expand.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- primitives -------------------------------------------------------------------------------- */

static ts_tensor add_node(ts_builder *b, ts_node *n) {
    n->origin = b->origin;
    int32_t id = ts_graph_add_node(b->g, n);
    return (ts_tensor){.ref = {.node = id, .view = ts_view_of_node(b->g, id)}, .dtype = n->dtype};
}

static void set_dims_from_view(ts_node *n, const ts_view *v) {
    n->ndim = v->ndim;
    memcpy(n->axis, v->axis, sizeof(int32_t) * (size_t)v->ndim);
}

ts_tensor ts_t_input(ts_builder *b, int32_t input_index, const int32_t *axes, int ndim, ts_dtype dtype) {
    ts_node n = {.op = TS_OP_INPUT, .dtype = dtype, .ndim = ndim, .input = input_index};
    memcpy(n.axis, axes, sizeof(int32_t) * (size_t)ndim);
    return add_node(b, &n);
}

ts_tensor ts_t_constant(ts_builder *b, double value, ts_dtype dtype) {
    ts_node n = {.op = TS_OP_CONSTANT, .dtype = dtype, .value = value};
    return add_node(b, &n);
}

ts_tensor ts_t_iota(ts_builder *b, int32_t axis, ts_dtype dtype) {
    ts_node n = {.op = TS_OP_IOTA, .dtype = dtype, .ndim = 1, .axis = {axis}, .reduce_axis = axis};
    return add_node(b, &n);
}

ts_tensor ts_t_unary(ts_builder *b, ts_op op, ts_tensor x) {
    ts_node n = {.op = op, .dtype = x.dtype, .nsrc = 1, .src = {x.ref}};
    set_dims_from_view(&n, &x.ref.view);
    return add_node(b, &n);
}

ts_tensor ts_t_cast(ts_builder *b, ts_tensor x, ts_dtype to) {
    ts_tensor r = ts_t_unary(b, TS_OP_CAST, x);
    b->g->nodes[r.ref.node].dtype = to;
    r.dtype = to;
    return r;
}

ts_tensor ts_t_copy(ts_builder *b, ts_tensor x) { return ts_t_unary(b, TS_OP_COPY, x); }

/* The union of the operands' axes: x's order, then the others' new axes in order of appearance. */
static ts_view union_dims(const ts_tensor *xs, int n) {
    ts_view u = {0};
    for (int i = 0; i < n; i++)
        for (int d = 0; d < xs[i].ref.view.ndim; d++)
            if (ts_view_find(&u, xs[i].ref.view.axis[d]) < 0)
                ts_view_expand(&u, u.ndim, xs[i].ref.view.axis[d], xs[i].ref.view.size[d]);
    return u;
}

/* x's view broadcast (zero strides) and permuted to the dims of u. */
static ts_ref align(const ts_tensor *x, const ts_view *u) {
    ts_ref r = x->ref;
    for (int d = 0; d < u->ndim; d++)
        if (ts_view_find(&r.view, u->axis[d]) < 0) ts_view_expand(&r.view, r.view.ndim, u->axis[d], u->size[d]);
    ts_view_permute(&r.view, u->axis, u->ndim);
    return r;
}

static ts_tensor elementwise(ts_builder *b, ts_op op, const ts_tensor *xs, int n, ts_dtype dtype) {
    ts_view u = union_dims(xs, n);
    ts_node node = {.op = op, .dtype = dtype, .nsrc = n};
    set_dims_from_view(&node, &u);
    for (int i = 0; i < n; i++) node.src[i] = align(&xs[i], &u);
    return add_node(b, &node);
}

ts_tensor ts_t_binary(ts_builder *b, ts_op op, ts_tensor x, ts_tensor y) {
    ts_tensor xs[2] = {x, y};
    return elementwise(b, op, xs, 2, x.ref.view.ndim ? x.dtype : y.dtype);
}

/* Typed like a binary op's result: a 0-dim value (a number written in the graph) takes the tensor's dtype,
 * as in PyTorch (torch.where(c, 0.0, h) with h fp16 is fp16). */
ts_tensor ts_t_where(ts_builder *b, ts_tensor c, ts_tensor x, ts_tensor y) {
    ts_tensor xs[3] = {c, x, y};
    return elementwise(b, TS_OP_WHERE, xs, 3, x.ref.view.ndim || !y.ref.view.ndim ? x.dtype : y.dtype);
}

ts_tensor ts_t_reduce(ts_builder *b, ts_op op, ts_tensor x, int32_t axis) {
    ts_node n = {.op = op, .dtype = x.dtype, .nsrc = 1, .src = {x.ref}, .reduce_axis = axis};
    for (int d = 0; d < x.ref.view.ndim; d++)
        if (x.ref.view.axis[d] != axis) n.axis[n.ndim++] = x.ref.view.axis[d];
    return add_node(b, &n);
}

ts_tensor ts_t_update(ts_builder *b, ts_tensor dest, ts_tensor v, int32_t axis, int32_t at, int32_t rows) {
    ts_node n = {.op = TS_OP_UPDATE, .dtype = dest.dtype, .nsrc = 2, .src = {dest.ref, v.ref}, .reduce_axis = axis,
                 .at_axis = at, .rows_axis = rows};
    set_dims_from_view(&n, &dest.ref.view);
    int32_t order[TS_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < dest.ref.view.ndim; d++)
        if (dest.ref.view.axis[d] != axis) order[k++] = dest.ref.view.axis[d];
        else if (rows >= 0) order[k++] = rows;
    ts_view_permute(&n.src[1].view, order, k);
    return add_node(b, &n);
}

int32_t ts_t_pair_axis(ts_builder *b) {
    int a = ts_graph_find_axis(b->g, "_pair");
    return a >= 0 ? a : ts_graph_add_axis(b->g, "_pair", 2, false, 0);
}

ts_tensor ts_t_fused(ts_builder *b, ts_op op, const ts_tensor *xs, int n, int32_t axis, int64_t tile) {
    ts_view u = union_dims(xs, n);
    if (ts_view_find(&u, axis) < 0) ts_view_expand(&u, u.ndim, axis, b->g->axes[axis].size);
    int32_t order[TS_MAX_DIMS]; /* the reduced axis last */
    int k = 0;
    for (int d = 0; d < u.ndim; d++)
        if (u.axis[d] != axis) order[k++] = u.axis[d];
    order[k++] = axis;
    ts_view_permute(&u, order, k);
    ts_node node = {.op = op, .dtype = xs[n - (op == TS_OP_WSUM || op == TS_OP_ONLINE_WSUM ? 2 : 1)].dtype,
                    .nsrc = n, .reduce_axis = axis, .tile = tile};
    if (op == TS_OP_DUAL) node.axis[node.ndim++] = ts_t_pair_axis(b);
    for (int d = 0; d + 1 < u.ndim; d++) node.axis[node.ndim++] = u.axis[d];
    for (int i = 0; i < n; i++) node.src[i] = align(&xs[i], &u);
    return add_node(b, &node);
}

ts_tensor ts_t_pick(ts_builder *b, ts_tensor pair, int64_t i) {
    int d = ts_view_find(&pair.ref.view, ts_t_pair_axis(b));
    TS_ASSERT(d >= 0);
    ts_view *v = &pair.ref.view;
    v->offset += i * v->stride[d];
    for (int j = d; j + 1 < v->ndim; j++) {
        v->axis[j] = v->axis[j + 1];
        v->size[j] = v->size[j + 1];
        v->stride[j] = v->stride[j + 1];
    }
    v->ndim--;
    return pair;
}

/* ---- composites -------------------------------------------------------------------------------- */

static ts_tensor constant_like(ts_builder *b, double v, ts_tensor like) { return ts_t_constant(b, v, like.dtype); }

ts_tensor ts_t_sub(ts_builder *b, ts_tensor x, ts_tensor y) {
    return ts_t_binary(b, TS_OP_ADD, x, ts_t_unary(b, TS_OP_NEG, y));
}

ts_tensor ts_t_div(ts_builder *b, ts_tensor x, ts_tensor y) {
    return ts_t_binary(b, TS_OP_MUL, x, ts_t_unary(b, TS_OP_RECIP, y));
}

ts_tensor ts_t_scale(ts_builder *b, ts_tensor x, double c) {
    return ts_t_binary(b, TS_OP_MUL, x, constant_like(b, c, x));
}

/* e^x = 2^(x·log2 e) */
ts_tensor ts_t_exp(ts_builder *b, ts_tensor x) { return ts_t_unary(b, TS_OP_EXP2, ts_t_scale(b, x, M_LOG2E)); }

ts_tensor ts_t_rsqrt(ts_builder *b, ts_tensor x) {
    return ts_t_unary(b, TS_OP_RECIP, ts_t_unary(b, TS_OP_SQRT, x));
}

/* tanh(x) = 1 - 2/(e^{2x} + 1) */
ts_tensor ts_t_tanh(ts_builder *b, ts_tensor x) {
    ts_tensor e2x = ts_t_exp(b, ts_t_scale(b, x, 2.0));
    ts_tensor frac = ts_t_unary(b, TS_OP_RECIP, ts_t_binary(b, TS_OP_ADD, e2x, constant_like(b, 1.0, x)));
    return ts_t_binary(b, TS_OP_ADD, constant_like(b, 1.0, x), ts_t_scale(b, frac, -2.0));
}

/* σ(x) = 1/(1 + e^{-x}) */
ts_tensor ts_t_sigmoid(ts_builder *b, ts_tensor x) {
    ts_tensor en = ts_t_exp(b, ts_t_unary(b, TS_OP_NEG, x));
    return ts_t_unary(b, TS_OP_RECIP, ts_t_binary(b, TS_OP_ADD, en, constant_like(b, 1.0, x)));
}

/* silu(x) = x · σ(x) */
ts_tensor ts_t_silu(ts_builder *b, ts_tensor x) { return ts_t_binary(b, TS_OP_MUL, x, ts_t_sigmoid(b, x)); }

/* gelu(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) */
ts_tensor ts_t_gelu_tanh(ts_builder *b, ts_tensor x) {
    ts_tensor x3 = ts_t_binary(b, TS_OP_MUL, x, ts_t_binary(b, TS_OP_MUL, x, x));
    ts_tensor inner = ts_t_binary(b, TS_OP_ADD, x, ts_t_scale(b, x3, 0.044715));
    ts_tensor t = ts_t_tanh(b, ts_t_scale(b, inner, sqrt(2.0 / M_PI)));
    ts_tensor one_plus = ts_t_binary(b, TS_OP_ADD, t, constant_like(b, 1.0, x));
    return ts_t_binary(b, TS_OP_MUL, ts_t_scale(b, x, 0.5), one_plus);
}

ts_tensor ts_t_mean(ts_builder *b, ts_tensor x, int32_t axis) {
    double n = (double)b->g->axes[axis].size;
    return ts_t_scale(b, ts_t_reduce(b, TS_OP_REDUCE_SUM, x, axis), 1.0 / n);
}

/* softmax(x) = e^{x - max x} / Σ e^{x - max x} */
ts_tensor ts_t_softmax(ts_builder *b, ts_tensor x, int32_t axis) {
    ts_tensor m = ts_t_reduce(b, TS_OP_REDUCE_MAX, x, axis);
    ts_tensor e = ts_t_exp(b, ts_t_sub(b, x, m));
    return ts_t_div(b, e, ts_t_reduce(b, TS_OP_REDUCE_SUM, e, axis));
}

ts_tensor ts_t_rmsnorm(ts_builder *b, ts_tensor x, const ts_tensor *gain, int32_t axis, double eps) {
    ts_tensor ms = ts_t_mean(b, ts_t_binary(b, TS_OP_MUL, x, x), axis);
    ts_tensor inv = ts_t_rsqrt(b, ts_t_binary(b, TS_OP_ADD, ms, constant_like(b, eps, x)));
    ts_tensor y = ts_t_binary(b, TS_OP_MUL, x, inv);
    return gain ? ts_t_binary(b, TS_OP_MUL, y, *gain) : y;
}

ts_tensor ts_t_matmul(ts_builder *b, ts_tensor x, ts_tensor y, int32_t axis) {
    return ts_t_reduce(b, TS_OP_REDUCE_SUM, ts_t_binary(b, TS_OP_MUL, x, y), axis);
}

/* ---- activations, norms and reductions of the PyTorch vocabulary -------------------------------- */

/* gelu(x) = 0.5·x·(1 + erf(x/√2)) — PyTorch's default, exact form */
ts_tensor ts_t_gelu(ts_builder *b, ts_tensor x) {
    ts_tensor e = ts_t_unary(b, TS_OP_ERF, ts_t_scale(b, x, M_SQRT1_2));
    ts_tensor one_plus = ts_t_binary(b, TS_OP_ADD, e, constant_like(b, 1.0, x));
    return ts_t_binary(b, TS_OP_MUL, ts_t_scale(b, x, 0.5), one_plus);
}

/* relu(x) = max(x, 0) */
ts_tensor ts_t_relu(ts_builder *b, ts_tensor x) { return ts_t_binary(b, TS_OP_MAX, x, constant_like(b, 0.0, x)); }

/* leaky_relu(x) = x > 0 ? x : s·x, which is max(x, s·x) when 0 ≤ s ≤ 1 */
ts_tensor ts_t_leaky_relu(ts_builder *b, ts_tensor x, double slope) {
    ts_tensor sx = ts_t_scale(b, x, slope);
    if (slope >= 0 && slope <= 1) return ts_t_binary(b, TS_OP_MAX, x, sx);
    return ts_t_where(b, ts_t_binary(b, TS_OP_LESS_THAN, constant_like(b, 0.0, x), x), x, sx);
}

/* min(a, b) = -max(-a, -b) */
ts_tensor ts_t_min(ts_builder *b, ts_tensor x, ts_tensor y) {
    ts_tensor m = ts_t_binary(b, TS_OP_MAX, ts_t_unary(b, TS_OP_NEG, x), ts_t_unary(b, TS_OP_NEG, y));
    return ts_t_unary(b, TS_OP_NEG, m);
}

/* |x| = x < 0 ? -x : x (not max(x, -x), which may give -0 for +0, and 1/|0| = -inf) */
ts_tensor ts_t_abs(ts_builder *b, ts_tensor x) {
    ts_tensor negative = ts_t_binary(b, TS_OP_LESS_THAN, x, constant_like(b, 0.0, x));
    return ts_t_where(b, negative, ts_t_unary(b, TS_OP_NEG, x), x);
}

/* ln x = log2(x)·ln 2 */
ts_tensor ts_t_log(ts_builder *b, ts_tensor x) { return ts_t_scale(b, ts_t_unary(b, TS_OP_LOG2, x), M_LN2); }

/* softplus(x) = x when β·x > threshold, else (max(βx, 0) + ln(1 + e^{-|βx|}))/β (PyTorch's definition,
 * in the form that cannot overflow) */
ts_tensor ts_t_softplus(ts_builder *b, ts_tensor x, double beta, double threshold) {
    ts_tensor bx = ts_t_scale(b, x, beta);
    ts_tensor tail = ts_t_exp(b, ts_t_unary(b, TS_OP_NEG, ts_t_abs(b, bx)));
    ts_tensor lg = ts_t_log(b, ts_t_binary(b, TS_OP_ADD, tail, constant_like(b, 1.0, x)));
    ts_tensor soft = ts_t_scale(b, ts_t_binary(b, TS_OP_ADD, ts_t_relu(b, bx), lg), 1.0 / beta);
    return ts_t_where(b, ts_t_binary(b, TS_OP_LESS_THAN, constant_like(b, threshold, x), bx), x, soft);
}

/* tanh(softplus(x)) for softplus with β = 1 (Mish's factor: mish(x) = x·tanh(softplus(x))). With n = e^x,
 * e^{2·softplus(x)} = (1 + n)², so tanh(softplus(x)) = ((1+n)² − 1)/((1+n)² + 1) = 1 − 2/(m + 2), m = n(n + 2): one
 * exponential and one reciprocal where the two composites take three exponentials or logarithms and a
 * reciprocal. Written as ts_t_tanh is, so that it overflows as safely: where n or m is infinite (x > 44 in fp32,
 * or an fp16 intermediate past 65504) it gives 2/∞ = 0 and tanh = 1, as tanh(softplus(x)) is there in either
 * type (m/(m + 2) would give ∞/∞); for x → −∞ it loses what 1 − 2/(e^{2y} + 1) loses, an absolute 6e-8. */
ts_tensor ts_t_tanh_softplus(ts_builder *b, ts_tensor x) {
    ts_tensor n = ts_t_exp(b, x);
    ts_tensor m = ts_t_binary(b, TS_OP_MUL, n, ts_t_binary(b, TS_OP_ADD, n, constant_like(b, 2.0, x)));
    ts_tensor frac = ts_t_unary(b, TS_OP_RECIP, ts_t_binary(b, TS_OP_ADD, m, constant_like(b, 2.0, x)));
    return ts_t_binary(b, TS_OP_ADD, constant_like(b, 1.0, x), ts_t_scale(b, frac, -2.0));
}

/* logsumexp(x) = m + ln Σ e^{x - m}, m = max x — where m = -inf (a row of -inf, whose terms would be NaN), m
 * itself. The maximum and the sum of exponentials are softmax's (ts_t_softmax), so that a graph wanting both
 * shares them. */
ts_tensor ts_t_logsumexp(ts_builder *b, ts_tensor x, int32_t axis) {
    ts_tensor m = ts_t_reduce(b, TS_OP_REDUCE_MAX, x, axis);
    ts_tensor s = ts_t_reduce(b, TS_OP_REDUCE_SUM, ts_t_exp(b, ts_t_sub(b, x, m)), axis);
    ts_tensor empty = ts_t_binary(b, TS_OP_LESS_THAN, m, constant_like(b, -FLT_MAX, x));
    return ts_t_where(b, empty, m, ts_t_binary(b, TS_OP_ADD, ts_t_log(b, s), m));
}

/* clamp(x, lo, hi) = min(max(x, lo), hi); either bound may be absent (NULL) */
ts_tensor ts_t_clamp(ts_builder *b, ts_tensor x, const double *lo, const double *hi) {
    if (lo) x = ts_t_binary(b, TS_OP_MAX, x, constant_like(b, *lo, x));
    return hi ? ts_t_min(b, x, constant_like(b, *hi, x)) : x;
}

/* var(x) = Σ (x - mean x)² / (n - correction) */
ts_tensor ts_t_var(ts_builder *b, ts_tensor x, int32_t axis, double correction) {
    ts_tensor d = ts_t_sub(b, x, ts_t_mean(b, x, axis));
    ts_tensor ss = ts_t_reduce(b, TS_OP_REDUCE_SUM, ts_t_binary(b, TS_OP_MUL, d, d), axis);
    return ts_t_scale(b, ss, 1.0 / ((double)b->g->axes[axis].size - correction));
}

/* x^n by repeated squaring (n a non-zero integer; negative: 1/x^|n|); n = ±0.5: sqrt x, 1/sqrt x */
ts_tensor ts_t_pow(ts_builder *b, ts_tensor x, double n) {
    if (fabs(n) == 0.5) return n > 0 ? ts_t_unary(b, TS_OP_SQRT, x) : ts_t_rsqrt(b, x);
    long k = labs((long)n);
    ts_tensor r = x, sq = x;
    bool have = false;
    for (; k; k >>= 1) {
        if (k & 1) r = have ? ts_t_binary(b, TS_OP_MUL, r, sq) : sq, have = true;
        if (k > 1) sq = ts_t_binary(b, TS_OP_MUL, sq, sq);
    }
    return n < 0 ? ts_t_unary(b, TS_OP_RECIP, r) : r;
}

/* (x - mean x) · rsqrt(var₀(x) + eps) [· gain] [+ bias], var₀ the biased variance */
ts_tensor ts_t_layernorm(ts_builder *b, ts_tensor x, const ts_tensor *gain, const ts_tensor *bias, int32_t axis,
                         double eps) {
    ts_tensor d = ts_t_sub(b, x, ts_t_mean(b, x, axis));
    ts_tensor v = ts_t_mean(b, ts_t_binary(b, TS_OP_MUL, d, d), axis);
    ts_tensor y = ts_t_binary(b, TS_OP_MUL, d, ts_t_rsqrt(b, ts_t_binary(b, TS_OP_ADD, v, constant_like(b, eps, x))));
    if (gain) y = ts_t_binary(b, TS_OP_MUL, y, *gain);
    return bias ? ts_t_binary(b, TS_OP_ADD, y, *bias) : y;
}
