/* egir.c — tensors in the e-graph: conversion from HLIR, the tensor analysis, guards, and building HLIR
 * back from terms (see egir.h for the semantics). */
#include "egir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "util.h"

/* ---- the fused ops as e-graph extras ----------------------------------------------------------- */

static const ts_eg_opinfo fused_info[] = {
#define TS_X_INFO(e, name, arity, nparams) {name, arity, nparams},
    TS_FUSED_OPS(TS_X_INFO)
#undef TS_X_INFO
};

static const ts_eg_ops egir_ops = {fused_info, (int32_t)(sizeof fused_info / sizeof *fused_info)};

const ts_eg_ops *ts_egir_ops(void) { return &egir_ops; }

/* ---- guards ------------------------------------------------------------------------------------ */

static const ts_egir_data *arg_data(const ts_rule_arg *a) { return a->data; }
/* Whether a guard argument is an operand variable with analysis data: a rule file may pass a param
 * variable or an integer where a guard expects an operand (`(positive ?k)` with ?k from `{?k}`); such a
 * guard does not hold, rather than reading data that is not there. */
static bool is_operand(const ts_rule_arg *a) { return !a->is_param && a->data; }
static uint64_t axis_bit(int64_t axis) { return axis >= 0 && axis < 64 ? 1ull << axis : 0; }

/* (lacks ?x ?k): x is constant along axis k, so it commutes with a reduction over k. */
static bool guard_lacks(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    return is_operand(&a[0]) && !(arg_data(&a[0])->axes & axis_bit(a[1].value));
}

/* (has ?x ?k): x varies along axis k. */
static bool guard_has(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    return is_operand(&a[0]) && !guard_lacks(ctx, eg, a, n);
}

/* (distinct ?a ?b): two different e-classes. */
static bool guard_distinct(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    return a[0].cls != a[1].cls;
}

/* (same-axes ?a ?b): a and b vary along the same axes. */
static bool guard_same_axes(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    return is_operand(&a[0]) && is_operand(&a[1]) && arg_data(&a[0])->axes == arg_data(&a[1])->axes;
}

/* Whether guard argument a is an operand the analysis knows to be a constant; *value gets it. */
static bool known_constant(const ts_rule_arg *a, double *value) {
    if (!is_operand(a) || !arg_data(a)->is_const) return false;
    *value = arg_data(a)->value;
    return true;
}

/* (positive ?c): a known constant > 0. */
static bool guard_positive(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    double v;
    return known_constant(&a[0], &v) && v > 0;
}

/* (constant ?c): a known constant. */
static bool guard_constant(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    double v;
    return known_constant(&a[0], &v);
}

/* (shrinks ?c): a known constant of magnitude at most 1: a value scaled by it stays as far within a 16-bit type's
 * range as it was (a rule moving it onto an operand stored in fp16 cannot overflow where the graph does not). */
static bool guard_shrinks(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    double v;
    return known_constant(&a[0], &v) && fabs(v) <= 1;
}

/* (rounding ?t): ?t, a cast's dtype, is fp16 or bf16 — a rule guarded so holds up to where a value is rounded to ?t
 * (the two sides round at different points, as a kernel that computes in fp32 and hands 16-bit operands to its
 * tensor cores does), not exactly: verify-rules checks it within eight units of ?t's rounding. */
static bool guard_rounding(void *ctx, const ts_egraph *eg, const ts_rule_arg *a, int n) {
    (void)ctx, (void)eg, (void)n;
    return a[0].is_param && (a[0].value == TS_FP16 || a[0].value == TS_BF16);
}

/* Eight units of ?t's rounding (its unit roundoff: 2^-11 for fp16, 2^-8 for bf16): each rounded term is off by at
 * most one unit, and a sum of terms of both signs can cancel some of its magnitude (verify-rules' worst over 1000
 * trials of softmax-rounded-weighted-sum: 3.9 units in fp16, 2.8 in bf16). */
static double rounding_tolerance(const ts_rule_arg *a, int n) {
    (void)n;
    return 8 * ldexp(1.0, a[0].value == TS_BF16 ? -8 : -11);
}

static const ts_rule_guard egir_guards[] = {
    {"lacks", 2, guard_lacks, NULL},       {"has", 2, guard_has, NULL},
    {"distinct", 2, guard_distinct, NULL}, {"positive", 1, guard_positive, NULL},
    {"constant", 1, guard_constant, NULL}, {"same-axes", 2, guard_same_axes, NULL},
    {"shrinks", 1, guard_shrinks, NULL},   {"rounding", 1, guard_rounding, rounding_tolerance},
};

ts_rule_env ts_egir_rule_env(void) {
    return (ts_rule_env){.ops = &egir_ops, .guards = egir_guards,
                         .nguards = (int)(sizeof egir_guards / sizeof *egir_guards)};
}

/* ---- the analysis ------------------------------------------------------------------------------ */

static double bits_to_double(int64_t bits) {
    double v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

static int64_t double_to_bits(double v) {
    int64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return bits;
}

static const ts_egir_data *kid_data(const ts_egraph *eg, const ts_enode *n, int i) {
    return ts_eg_data_const(eg, n->kid[i]);
}

/* The data of an elementwise node: axes joined, the first typed operand's dtype, constants folded. */
static void make_elementwise(const ts_egraph *eg, const ts_enode *n, int arity, ts_egir_data *out) {
    double vals[3];
    bool all_const = true;
    for (int i = 0; i < arity; i++) {
        const ts_egir_data *k = kid_data(eg, n, i);
        out->axes |= k->axes;
        if (out->dtype < 0 && k->dtype >= 0 && !(n->op == TS_OP_WHERE && i == 0)) out->dtype = k->dtype;
        all_const &= k->is_const;
        vals[i] = k->value;
    }
    if (n->op == TS_OP_CAST) out->dtype = (int8_t)n->param[0];
    if (all_const) {
        out->is_const = true;
        out->value = ts_interp_apply((ts_op)n->op, out->dtype < 0 ? TS_FP32 : (ts_dtype)out->dtype, vals);
    }
}

static void make_data(void *ctx, const ts_egraph *eg, const ts_enode *n, void *outp) {
    ts_egir *x = ctx;
    ts_egir_data *out = outp;
    *out = (ts_egir_data){.dtype = -1};
    ts_op op = (ts_op)n->op;
    switch (ts_op_kind_of(op)) {
    case TS_KIND_SOURCE:
        if (op == TS_OP_INPUT) {
            const ts_node *in = &x->g->nodes[x->g->inputs[n->param[0]].node];
            for (int d = 0; d < in->ndim; d++) out->axes |= axis_bit(in->axis[d]);
            out->dtype = (int8_t)in->dtype;
        } else if (op == TS_OP_IOTA) {
            out->axes = axis_bit(n->param[0]);
        } else {
            out->is_const = true;
            out->value = bits_to_double(n->param[0]);
        }
        return;
    case TS_KIND_UPDATE: /* the destination's axes and dtype; never a constant */
        out->axes = kid_data(eg, n, 0)->axes;
        out->dtype = kid_data(eg, n, 0)->dtype;
        return;
    case TS_KIND_REDUCE: {
        const ts_egir_data *k = kid_data(eg, n, 0);
        *out = *k;
        out->axes &= ~axis_bit(n->param[0]);
        /* a sum of a constant is the constant times the axis's size: a constant only when that size is fixed
         * (a dynamic axis's size is known at run time, its typical size only stands in for ranking) */
        if (k->is_const && op == TS_OP_REDUCE_SUM) {
            const ts_axis *ax = &x->g->axes[n->param[0]];
            if (ax->dynamic || x->g->axes[ts_axis_root(x->g, (int32_t)n->param[0])].dynamic) out->is_const = false;
            else out->value *= (double)ax->size;
        }
        return;
    }
    case TS_KIND_FUSED:
        for (int i = 0; i < ts_op_arity(op); i++) out->axes |= kid_data(eg, n, i)->axes;
        out->dtype = kid_data(eg, n, ts_op_arity(op) - (op == TS_OP_WSUM || op == TS_OP_ONLINE_WSUM ? 2 : 1))->dtype;
        if (op == TS_OP_VIEW) {
            const ts_view *v = &x->views[n->param[0]].view;
            out->axes = 0;
            for (int d = 0; d < v->ndim; d++) out->axes |= axis_bit(v->axis[d]);
        } else if (op == TS_OP_PICK) {
            out->axes &= ~axis_bit(ts_graph_find_axis(x->g, "_pair"));
        } else {
            out->axes &= ~axis_bit(n->param[0]);
            if (op == TS_OP_DUAL) out->axes |= axis_bit(ts_graph_find_axis(x->g, "_pair"));
        }
        return;
    default: make_elementwise(eg, n, ts_op_arity(op), out);
    }
}

static bool merge_data(void *ctx, void *intop, const void *fromp) {
    ts_egir *x = ctx;
    ts_egir_data *into = intop;
    const ts_egir_data *from = fromp;
    bool changed = false;
    if (into->axes != from->axes) x->axis_conflicts++;
    if (into->dtype < 0 && from->dtype >= 0) into->dtype = from->dtype, changed = true;
    if (!into->is_const && from->is_const) {
        into->is_const = true;
        into->value = from->value;
        changed = true;
    }
    return changed;
}

/* Constant folding: a class known to be constant gets the constant node. */
static void modify_class(void *ctx, ts_egraph *eg, uint32_t cls) {
    (void)ctx;
    const ts_egir_data *d = ts_eg_data_const(eg, cls);
    if (!d->is_const) return;
    ts_enode c = {.op = TS_OP_CONSTANT, .param = {double_to_bits(d->value)}};
    uint32_t k = ts_eg_add(eg, &c);
    ts_eg_union(eg, cls, k);
}

/* ---- HLIR → e-graph ---------------------------------------------------------------------------- */

/* Whether v shows node `id` whole and un-re-indexed: only permuted and broadcast. */
static bool is_plain_view(const ts_graph *g, int32_t id, const ts_view *v) {
    ts_view whole = ts_view_of_node(g, id);
    if (v->offset != 0) return false;
    int seen = 0;
    for (int d = 0; d < v->ndim; d++) {
        int p = ts_view_find(&whole, v->axis[d]);
        if (p < 0) {
            if (v->stride[d] != 0 && v->size[d] != 1) return false; /* a new axis must be a broadcast */
            continue;
        }
        if (v->size[d] != whole.size[p] || (v->stride[d] != whole.stride[p] && whole.size[p] != 1)) return false;
        seen++;
    }
    return seen == whole.ndim;
}

static uint32_t add_view(ts_egir *x, uint32_t kid, const ts_graph *g, const ts_ref *r) {
    TS_GROW(x->views, x->nviews, x->cap_views);
    ts_egir_view *tv = &x->views[x->nviews];
    const ts_node *src = &g->nodes[r->node];
    tv->src_ndim = src->ndim;
    memcpy(tv->src_axis, src->axis, sizeof(int32_t) * (size_t)src->ndim);
    tv->view = r->view;
    for (int d = tv->view.ndim - 1; d >= 0; d--) /* broadcast dims are implicit in the e-graph */
        if (tv->view.stride[d] == 0) {
            for (int j = d; j + 1 < tv->view.ndim; j++) {
                tv->view.axis[j] = tv->view.axis[j + 1];
                tv->view.size[j] = tv->view.size[j + 1];
                tv->view.stride[j] = tv->view.stride[j + 1];
            }
            tv->view.ndim--;
        }
    int64_t id = x->nviews; /* an equal view of the same node's layout is the same e-node: the same value */
    for (int64_t i = 0; i < x->nviews && id == x->nviews; i++)
        if (x->views[i].src_ndim == tv->src_ndim && ts_view_equal(&x->views[i].view, &tv->view) &&
            memcmp(x->views[i].src_axis, tv->src_axis, sizeof(int32_t) * (size_t)tv->src_ndim) == 0)
            id = i;
    if (id == x->nviews) x->nviews++;
    ts_enode n = {.op = TS_OP_VIEW, .kid = {kid}, .param = {id}};
    return ts_eg_add(x->eg, &n);
}

/* Where node `id` is an iota and view v reads it whole along another axis of its size (and broadcast along the
 * rest) — positions along that axis, as `arange(t)` read as `i[None, :]` against `i[:, None]` builds a mask: that
 * axis, else -1. */
static int32_t iota_read_along(const ts_graph *g, int32_t id, const ts_view *v) {
    const ts_node *n = &g->nodes[id];
    if (n->op != TS_OP_IOTA || n->ndim != 1 || v->offset != 0) return -1;
    int32_t along = -1;
    for (int d = 0; d < v->ndim; d++) {
        if (v->stride[d] == 0 || v->size[d] == 1) continue;
        if (along >= 0 || v->stride[d] != 1 || v->size[d] != g->axes[n->axis[0]].size || g->axes[v->axis[d]].dynamic ||
            g->axes[n->axis[0]].dynamic)
            return -1;
        along = v->axis[d];
    }
    return along;
}

/* Whether node id is an index table: a function of iotas and constants through elementwise ops whose operands are
 * read whole (permuted or broadcast) — a causal-mask buffer the importer computes, where(i < j, 0, 1), or a RoPE
 * table. depth bounds the walk. */
static bool index_table(const ts_graph *g, int32_t id, int depth) {
    const ts_node *n = &g->nodes[id];
    const ts_op_kind kind = ts_op_kind_of(n->op);
    if (n->op == TS_OP_IOTA) return n->ndim == 1;
    if (n->op == TS_OP_CONSTANT) return true;
    if (depth == 0 || (kind != TS_KIND_UNARY && kind != TS_KIND_BINARY && kind != TS_KIND_TERNARY)) return false;
    for (int s = 0; s < n->nsrc; s++)
        if (!is_plain_view(g, n->src[s].node, &n->src[s].view) || !index_table(g, n->src[s].node, depth - 1)) return false;
    return true;
}

/* A box of node id read by view v: along each of the node's axes a start, a step and the view's axis that steps
 * along it (-1: the index is fixed at start); every other dim of v broadcasts. */
typedef struct {
    int64_t start[TS_MAX_DIMS], step[TS_MAX_DIMS];
    int32_t along[TS_MAX_DIMS]; /* indexed by the node's dim */
} index_box;

static bool box_of_view(const ts_graph *g, int32_t id, const ts_view *v, index_box *b) {
    const ts_view whole = ts_view_of_node(g, id);
    int64_t rest = v->offset;
    if (rest < 0) return false;
    for (int p = 0; p < whole.ndim; p++) { /* the offset's index along each axis, outermost first */
        b->start[p] = rest / whole.stride[p], rest %= whole.stride[p];
        b->step[p] = 0, b->along[p] = -1;
        if (b->start[p] >= whole.size[p]) return false;
    }
    for (int d = 0; d < v->ndim; d++) {
        if (v->stride[d] == 0 || v->size[d] == 1) continue; /* broadcast */
        int p = 0; /* the outermost axis whose stride divides this dim's */
        while (p < whole.ndim && (whole.size[p] == 1 || v->stride[d] < whole.stride[p] || v->stride[d] % whole.stride[p]))
            p++;
        if (p == whole.ndim || b->along[p] >= 0) return false;
        b->along[p] = v->axis[d], b->step[p] = v->stride[d] / whole.stride[p];
        if (b->start[p] + (v->size[d] - 1) * b->step[p] >= whole.size[p]) return false;
    }
    return true;
}

static uint32_t constant_class(ts_egir *x, double value) {
    ts_enode c = {.op = TS_OP_CONSTANT, .param = {double_to_bits(value)}};
    return ts_eg_add(x->eg, &c);
}

/* Index table id (index_table) over the box: each iota of the node's axis p becomes the iota of the view's axis
 * along it, times its step, plus its start (or the constant start where the view fixes the index); the rest as it
 * is. */
static uint32_t rebuild_index_table(ts_egir *x, int32_t id, const int32_t *node_axis, const index_box *b, int nd) {
    const ts_node *n = &x->g->nodes[id];
    if (n->op == TS_OP_CONSTANT) return constant_class(x, n->value);
    if (n->op == TS_OP_IOTA) {
        int p = 0;
        while (p < nd && node_axis[p] != n->reduce_axis) p++;
        if (p == nd) return x->node_class[id]; /* an axis the table is broadcast along (not in the node) */
        if (b->along[p] < 0) return constant_class(x, (double)b->start[p]);
        ts_enode e = {.op = TS_OP_IOTA, .param = {b->along[p]}};
        uint32_t c = ts_eg_add(x->eg, &e);
        if (b->step[p] != 1) {
            ts_enode m = {.op = TS_OP_MUL, .kid = {c, constant_class(x, (double)b->step[p])}};
            c = ts_eg_add(x->eg, &m);
        }
        if (b->start[p] != 0) {
            ts_enode a = {.op = TS_OP_ADD, .kid = {c, constant_class(x, (double)b->start[p])}};
            c = ts_eg_add(x->eg, &a);
        }
        return c;
    }
    ts_enode e = {.op = n->op};
    for (int s = 0; s < n->nsrc; s++) e.kid[s] = rebuild_index_table(x, n->src[s].node, node_axis, b, nd);
    if (n->op == TS_OP_CAST) e.param[0] = n->dtype;
    return ts_eg_add(x->eg, &e);
}

/* Where ref r reads a box of an index table (a causal mask computed at the buffer's full length and sliced to the
 * sequence's, bias[:, :, :t, :t]; a RoPE table sliced to t): the same function of the iotas of r's axes, so that the
 * rules and the plans see the mask's comparison over the axes attention runs on (a causal tile skip, not a tensor
 * read), rather than a copy of the table. */
static bool index_table_view(ts_egir *x, const ts_ref *r, uint32_t *out) {
    const ts_node *n = &x->g->nodes[r->node];
    index_box b;
    if (n->op == TS_OP_IOTA || !index_table(x->g, r->node, 16) || !box_of_view(x->g, r->node, &r->view, &b)) return false;
    *out = rebuild_index_table(x, r->node, n->axis, &b, n->ndim);
    return true;
}

/* The class of node r->node seen through r's view: the node's own where the view only permutes or broadcasts it;
 * an iota read along another axis is the iota of that axis (the attention mask's positions: plan.c reads them). */
static uint32_t view_class(ts_egir *x, const ts_ref *r) {
    const uint32_t kid = x->node_class[r->node];
    if (is_plain_view(x->g, r->node, &r->view)) return kid;
    const int32_t along = iota_read_along(x->g, r->node, &r->view);
    if (along >= 0) {
        ts_enode n = {.op = TS_OP_IOTA, .param = {along}};
        return ts_eg_add(x->eg, &n);
    }
    uint32_t table;
    if (index_table_view(x, r, &table)) return table;
    return add_view(x, kid, x->g, r);
}

/* Where view v shows node `id` sliced along one of its axes and otherwise whole (every other axis at its
 * stride; dims that broadcast aside): that axis (*a), the slice's axis in v (*as), start and step; false for
 * any other view. */
static bool slice_of_node(const ts_graph *g, int32_t id, const ts_view *v, int32_t *a, int32_t *as, int64_t *start,
                          int64_t *step) {
    const ts_view whole = ts_view_of_node(g, id);
    int found = 0, slice_dim = -1;
    for (int d = 0; d < v->ndim; d++) {
        const int p = ts_view_find(&whole, v->axis[d]);
        if (p >= 0) {
            if (v->size[d] != whole.size[p] || (v->stride[d] != whole.stride[p] && whole.size[p] != 1)) return false;
            found++;
        } else if (v->stride[d] != 0) {
            if (slice_dim >= 0) return false;
            slice_dim = d;
        }
    }
    if (slice_dim < 0 || found != whole.ndim - 1) return false;
    int pa = -1; /* the one axis of the node that v does not show whole */
    for (int p = 0; p < whole.ndim; p++)
        if (ts_view_find(v, whole.axis[p]) < 0) pa = p;
    if (pa < 0) return false;
    const int64_t st = whole.stride[pa], s = v->stride[slice_dim];
    if (st <= 0 || s <= 0 || s % st != 0 || v->offset % st != 0) return false;
    *a = whole.axis[pa], *as = v->axis[slice_dim], *step = s / st, *start = v->offset / st;
    return *start >= 0 && *start + (v->size[slice_dim] - 1) * *step < whole.size[pa] && v->size[slice_dim] < whole.size[pa];
}

/* A slice of a contraction's result is the contraction of its operands' slices: where ref r shows a sum over k of
 * a product sliced along one of its other axes (a fused gate/up projection's two halves), its class `sliced` also
 * gets Σ_k of the product of the operands sliced alike — so that each half is a contraction of its own, which the
 * rules can pair into one dual contraction reading X once (shared-operand) and the search may choose instead of
 * writing the whole product and slicing it. */
static void add_sliced_contraction(ts_egir *x, const ts_ref *r, uint32_t sliced) {
    const ts_graph *g = x->g;
    const ts_node *sum = &g->nodes[r->node];
    if (sum->op != TS_OP_REDUCE_SUM || !is_plain_view(g, sum->src[0].node, &sum->src[0].view)) return;
    const ts_node *prod = &g->nodes[sum->src[0].node];
    int32_t a, as;
    int64_t start, step;
    if (prod->op != TS_OP_MUL || !slice_of_node(g, r->node, &r->view, &a, &as, &start, &step)) return;
    ts_enode m = {.op = TS_OP_MUL};
    for (int s = 0; s < 2; s++) {
        ts_ref o = prod->src[s];
        const int d = ts_view_find(&o.view, a);
        if (d < 0) return;
        ts_view_slice(&o.view, d, as, start, step, g->axes[as].size);
        m.kid[s] = view_class(x, &o);
    }
    ts_enode red = {.op = TS_OP_REDUCE_SUM, .kid = {ts_eg_add(x->eg, &m)}, .param = {sum->reduce_axis}};
    ts_eg_union(x->eg, sliced, ts_eg_add(x->eg, &red));
}

static uint32_t ref_class(ts_egir *x, const ts_ref *r) {
    const uint32_t v = view_class(x, r);
    if (v != x->node_class[r->node]) add_sliced_contraction(x, r, v);
    return v;
}

static uint32_t add_hlir_node(ts_egir *x, const ts_node *n) {
    if (n->op == TS_OP_COPY) return ref_class(x, &n->src[0]); /* layout only */
    ts_enode e = {.op = n->op};
    for (int s = 0; s < n->nsrc; s++) e.kid[s] = ref_class(x, &n->src[s]);
    switch (n->op) {
    case TS_OP_INPUT: e.param[0] = n->input; break;
    case TS_OP_CONSTANT: e.param[0] = double_to_bits(n->value); break;
    case TS_OP_IOTA: e.param[0] = n->reduce_axis; break;
    case TS_OP_CAST: e.param[0] = n->dtype; break;
    case TS_OP_REDUCE_SUM:
    case TS_OP_REDUCE_MAX: e.param[0] = n->reduce_axis; break;
    case TS_OP_UPDATE: e.param[0] = n->reduce_axis, e.param[1] = n->at_axis, e.param[2] = n->rows_axis; break;
    default: break;
    }
    return ts_eg_add(x->eg, &e);
}

int ts_egir_init(ts_egir *x, ts_graph *g, char **err) {
    memset(x, 0, sizeof *x);
    if (g->naxes >= TS_EGIR_MAX_AXES) {
        *err = ts_strfmt("the graph has %d axes; saturation supports at most %d", g->naxes, TS_EGIR_MAX_AXES - 1);
        return -1;
    }
    x->g = g;
    if (ts_graph_find_axis(g, "_pair") < 0) ts_graph_add_axis(g, "_pair", 2, false, 0); /* for dual */
    if (ts_graph_find_axis(g, "_one") < 0) ts_graph_add_axis(g, "_one", 1, false, 0);   /* a vector's GEMM rows (plan.c) */
    x->an = (ts_eg_analysis){.size = sizeof(ts_egir_data), .ctx = x, .make = make_data, .merge = merge_data,
                             .modify = modify_class};
    x->eg = ts_eg_new(&egir_ops, &x->an);
    x->node_class = ts_xmalloc(sizeof(uint32_t) * (size_t)(g->nnodes + 1));
    for (int i = 0; i < g->nnodes; i++) x->node_class[i] = add_hlir_node(x, &g->nodes[i]);
    x->output_class = ts_xmalloc(sizeof(uint32_t) * (size_t)(g->noutputs + 1));
    for (int i = 0; i < g->noutputs; i++) x->output_class[i] = ref_class(x, &g->outputs[i].ref);
    ts_eg_rebuild(x->eg);
    return 0;
}

void ts_egir_free(ts_egir *x) {
    if (x->eg) ts_eg_free(x->eg);
    free(x->views);
    free(x->node_class);
    free(x->output_class);
    memset(x, 0, sizeof *x);
}

/* ---- terms → HLIR ------------------------------------------------------------------------------ */

/* x materialised in the dim order `order` (a copy unless it already is contiguous in that order). */
static ts_tensor contiguous_in(ts_builder *b, ts_tensor x, const int32_t *order, int n) {
    ts_view_permute(&x.ref.view, order, n);
    ts_node probe = b->g->nodes[x.ref.node];
    bool whole = probe.ndim == n && memcmp(probe.axis, order, sizeof(int32_t) * (size_t)n) == 0;
    ts_view c = ts_view_of_node(b->g, x.ref.node);
    if (whole && x.ref.view.offset == 0 && memcmp(c.stride, x.ref.view.stride, sizeof(int64_t) * (size_t)n) == 0)
        return x;
    return ts_t_copy(b, x);
}

/* x with axis `axis` broadcast in when it lacks it. */
static ts_tensor with_axis(ts_builder *b, ts_tensor x, int32_t axis) {
    if (ts_view_find(&x.ref.view, axis) < 0) ts_view_expand(&x.ref.view, x.ref.view.ndim, axis, b->g->axes[axis].size);
    return x;
}

ts_tensor ts_egir_build_node(ts_builder *b, const ts_egir_view *views, int32_t op, const int64_t *param,
                             const ts_tensor *kids) {
    ts_op o = (ts_op)op;
    switch (o) {
    case TS_OP_CONSTANT: return ts_t_constant(b, bits_to_double(param[0]), TS_FP32);
    case TS_OP_IOTA: return ts_t_iota(b, (int32_t)param[0], TS_FP32);
    case TS_OP_CAST: return ts_t_cast(b, kids[0], (ts_dtype)param[0]);
    case TS_OP_WHERE: return ts_t_where(b, kids[0], kids[1], kids[2]);
    case TS_OP_REDUCE_SUM:
    case TS_OP_REDUCE_MAX: return ts_t_reduce(b, o, with_axis(b, kids[0], (int32_t)param[0]), (int32_t)param[0]);
    case TS_OP_PICK: return ts_t_pick(b, kids[0], param[0]);
    case TS_OP_UPDATE: return ts_t_update(b, kids[0], kids[1], (int32_t)param[0], (int32_t)param[1], (int32_t)param[2]);
    case TS_OP_VIEW: {
        const ts_egir_view *v = &views[param[0]];
        ts_tensor src = contiguous_in(b, kids[0], v->src_axis, v->src_ndim);
        src.ref.view = v->view;
        return src;
    }
    default: break;
    }
    switch (ts_op_kind_of(o)) {
    case TS_KIND_UNARY: return ts_t_unary(b, o, kids[0]);
    case TS_KIND_BINARY: return ts_t_binary(b, o, kids[0], kids[1]);
    case TS_KIND_FUSED:
        return ts_t_fused(b, o, kids, ts_op_arity(o), (int32_t)param[0], ts_fused_op_nparams(o) > 1 ? param[1] : 0);
    default: TS_ASSERT(!"a node the builder cannot build (inputs are the caller's)");
    }
    return kids[0];
}

/* Copies g's axes and inputs into out. Returns the input tensors (free with free()). */
static ts_tensor *copy_frame(const ts_graph *g, ts_graph *out, ts_builder *b) {
    ts_graph_init(out, g->name);
    for (int a = 0; a < g->naxes; a++) {
        const ts_axis *ax = &g->axes[a];
        int i = ts_graph_add_axis(out, ax->name, ax->size, ax->dynamic, ax->typical);
        out->axes[i].like = ax->like;
    }
    *b = (ts_builder){.g = out, .origin = -1};
    ts_tensor *ins = ts_xmalloc(sizeof *ins * (size_t)(g->ninputs + 1));
    for (int i = 0; i < g->ninputs; i++) {
        const ts_node *n = &g->nodes[g->inputs[i].node];
        TS_GROW(out->inputs, out->ninputs, out->cap_inputs);
        out->inputs[out->ninputs++] = (ts_input){.name = ts_strdup(g->inputs[i].name)};
        ins[i] = ts_t_input(b, i, n->axis, n->ndim, n->dtype);
        out->inputs[i].node = ins[i].ref.node;
    }
    return ins;
}

void ts_egir_term_graph(const ts_egir *x, const ts_eg_term *term, ts_graph *out) {
    ts_builder b;
    ts_tensor *ins = copy_frame(x->g, out, &b);
    ts_tensor *val = ts_xmalloc(sizeof *val * (size_t)(term->n + 1));
    for (uint32_t i = 0; i < term->n; i++) {
        const ts_enode *n = &term->node[i];
        ts_tensor kids[TS_EG_MAX_KIDS];
        for (int k = 0; k < ts_op_arity((ts_op)n->op); k++) kids[k] = val[n->kid[k]];
        val[i] = n->op == TS_OP_INPUT ? ins[n->param[0]] : ts_egir_build_node(&b, x->views, n->op, n->param, kids);
    }
    TS_GROW(out->outputs, out->noutputs, out->cap_outputs);
    out->outputs[out->noutputs++] =
        (ts_output){.name = ts_strdup("out"), .ref = val[term->n - 1].ref, .dtype = val[term->n - 1].dtype};
    free(val);
    free(ins);
}

/* ---- printing ---------------------------------------------------------------------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
} strbuf;

static void put(strbuf *b, const char *s) {
    size_t n = strlen(s);
    while (b->len + n + 1 > b->cap) b->buf = ts_xrealloc(b->buf, b->cap = b->cap ? 2 * b->cap : 256);
    memcpy(b->buf + b->len, s, n + 1);
    b->len += n;
}

/* Whether param i of op is an axis id (printed by name; an update's rows axis only when it has one). */
static bool param_is_axis(ts_op op, int i) {
    if (op == TS_OP_UPDATE) return i < 3;
    if (i != 0) return false;
    return op == TS_OP_IOTA || ts_op_kind_of(op) == TS_KIND_REDUCE ||
           (ts_op_kind_of(op) == TS_KIND_FUSED && op != TS_OP_PICK && op != TS_OP_VIEW);
}

static void put_node(const ts_egir *x, const ts_eg_term *t, uint32_t i, strbuf *b) {
    const ts_enode *n = &t->node[i];
    ts_op op = (ts_op)n->op;
    char tmp[64];
    if (op == TS_OP_INPUT || op == TS_OP_CONSTANT) {
        snprintf(tmp, sizeof tmp, "%.17g", bits_to_double(n->param[0]));
        put(b, op == TS_OP_INPUT ? x->g->inputs[n->param[0]].name : tmp);
        return;
    }
    int arity = ts_op_arity(op), np = ts_eg_op_info(&egir_ops, op)->nparams;
    if (arity) put(b, "(");
    put(b, ts_op_name(op));
    for (int p = 0; p < np; p++) {
        if (op == TS_OP_UPDATE && p == 2 && n->param[p] < 0) continue; /* a one-row append */
        put(b, p ? "," : "{");
        if (param_is_axis(op, p)) put(b, x->g->axes[n->param[p]].name);
        else if (op == TS_OP_CAST) put(b, ts_dtype_name((ts_dtype)n->param[p]));
        else snprintf(tmp, sizeof tmp, "%lld", (long long)n->param[p]), put(b, tmp);
    }
    if (np) put(b, "}");
    for (int k = 0; k < arity; k++) {
        put(b, " ");
        put_node(x, t, n->kid[k], b);
    }
    if (arity) put(b, ")");
}

char *ts_egir_term_str(const ts_egir *x, const ts_eg_term *term) {
    strbuf b = {0};
    put(&b, "");
    put_node(x, term, term->n - 1, &b);
    return b.buf;
}
