/* hlir.c — the HLIR containers: axes, nodes, inputs/outputs, view arithmetic, the checked graph's normalisation
 * (elementwise work after a merging reshape moved into its source axes) and graph statistics. Checking and
 * lowering from YAML live in src/check.c; evaluation in src/interp.c. */
#include "hlir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- dtypes ------------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int bytes;
    int mantissa_bits; /* explicit fraction bits */
    int min_exp;       /* exponent of the smallest normal */
    double max;        /* largest finite value */
} dtype_table[TS_DTYPE_COUNT] = {
    [TS_FP16] = {"fp16", 2, 10, -14, 65504.0},
    [TS_BF16] = {"bf16", 2, 7, -126, 3.3895313892515355e38},
    [TS_FP32] = {"fp32", 4, 23, -126, 3.4028234663852886e38},
};

const char *ts_dtype_name(ts_dtype t) { return dtype_table[t].name; }
int ts_dtype_bytes(ts_dtype t) { return dtype_table[t].bytes; }

int ts_dtype_lookup(const char *name) {
    for (int i = 0; i < TS_DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0) return i;
    return -1;
}

double ts_dtype_round(ts_dtype t, double x) {
    if (!isfinite(x) || x == 0.0) return x;
    int e;
    frexp(x, &e); /* x = f * 2^e, 0.5 <= |f| < 1, so the leading bit has exponent e-1 */
    int lead = e - 1;
    if (lead < dtype_table[t].min_exp) lead = dtype_table[t].min_exp; /* subnormal spacing */
    double ulp = ldexp(1.0, lead - dtype_table[t].mantissa_bits);
    double r = nearbyint(x / ulp) * ulp; /* default rounding mode: to nearest, ties to even */
    if (fabs(r) > dtype_table[t].max) return copysign(INFINITY, x);
    return r;
}

/* ---- the graph --------------------------------------------------------------------------------- */

void ts_graph_init(ts_graph *g, const char *name) {
    memset(g, 0, sizeof *g);
    g->name = ts_strdup(name ? name : "graph");
}

void ts_graph_free(ts_graph *g) {
    for (int i = 0; i < g->naxes; i++) free(g->axes[i].name);
    for (int i = 0; i < g->ninputs; i++) free(g->inputs[i].name);
    for (int i = 0; i < g->noutputs; i++) free(g->outputs[i].name);
    for (int i = 0; i < g->nnamed; i++) {
        free(g->named[i].name);
        free(g->named[i].op);
    }
    free(g->named);
    free(g->axes);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->name);
    memset(g, 0, sizeof *g);
}

int ts_graph_find_axis(const ts_graph *g, const char *name) {
    for (int i = 0; i < g->naxes; i++)
        if (strcmp(g->axes[i].name, name) == 0) return i;
    return -1;
}

int ts_graph_add_axis(ts_graph *g, const char *name, int64_t size, bool dynamic, int64_t typical) {
    TS_GROW(g->axes, g->naxes, g->cap_axes);
    ts_axis *a = &g->axes[g->naxes];
    memset(a, 0, sizeof *a);
    a->name = ts_strdup(name);
    a->size = size;
    a->dynamic = dynamic;
    a->typical = typical;
    a->like = -1;
    return g->naxes++;
}

int32_t ts_axis_root(const ts_graph *g, int32_t a) {
    while (g->axes[a].like >= 0) a = g->axes[a].like;
    return a;
}

int32_t ts_graph_add_node(ts_graph *g, const ts_node *n) {
    TS_GROW(g->nodes, g->nnodes, g->cap_nodes);
    g->nodes[g->nnodes] = *n;
    return g->nnodes++;
}

int64_t ts_node_numel(const ts_graph *g, const ts_node *n) {
    int64_t e = 1;
    for (int i = 0; i < n->ndim; i++) e *= g->axes[n->axis[i]].size;
    return e;
}

int64_t ts_view_numel(const ts_view *v) {
    int64_t e = 1;
    for (int i = 0; i < v->ndim; i++) e *= v->size[i];
    return e;
}

/* ---- views ------------------------------------------------------------------------------------- */

bool ts_view_equal(const ts_view *a, const ts_view *b) {
    if (a->ndim != b->ndim || a->offset != b->offset) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->axis[i] != b->axis[i] || a->size[i] != b->size[i] || a->stride[i] != b->stride[i]) return false;
    return true;
}

ts_view ts_view_of_node(const ts_graph *g, int32_t id) {
    const ts_node *n = &g->nodes[id];
    ts_view v = {.ndim = n->ndim};
    int64_t stride = 1;
    for (int i = n->ndim - 1; i >= 0; i--) {
        v.axis[i] = n->axis[i];
        v.size[i] = g->axes[n->axis[i]].size;
        v.stride[i] = stride;
        if (__builtin_mul_overflow(stride, v.size[i], &stride)) stride = INT64_MAX; /* rejected by the checker */
    }
    return v;
}

int ts_view_find(const ts_view *v, int32_t axis) {
    for (int i = 0; i < v->ndim; i++)
        if (v->axis[i] == axis) return i;
    return -1;
}

void ts_view_permute(ts_view *v, const int32_t *order, int n) {
    ts_view p = *v;
    TS_ASSERT(n == v->ndim);
    for (int i = 0; i < n; i++) {
        int j = ts_view_find(v, order[i]);
        TS_ASSERT(j >= 0);
        p.axis[i] = v->axis[j];
        p.size[i] = v->size[j];
        p.stride[i] = v->stride[j];
    }
    *v = p;
}

static void view_insert(ts_view *v, int pos, int32_t axis, int64_t size, int64_t stride) {
    TS_ASSERT(v->ndim < TS_MAX_DIMS && pos >= 0 && pos <= v->ndim);
    for (int i = v->ndim; i > pos; i--) {
        v->axis[i] = v->axis[i - 1];
        v->size[i] = v->size[i - 1];
        v->stride[i] = v->stride[i - 1];
    }
    v->axis[pos] = axis;
    v->size[pos] = size;
    v->stride[pos] = stride;
    v->ndim++;
}

static void view_remove(ts_view *v, int pos) {
    for (int i = pos; i + 1 < v->ndim; i++) {
        v->axis[i] = v->axis[i + 1];
        v->size[i] = v->size[i + 1];
        v->stride[i] = v->stride[i + 1];
    }
    v->ndim--;
}

void ts_view_expand(ts_view *v, int pos, int32_t axis, int64_t size) { view_insert(v, pos, axis, size, 0); }

void ts_view_split(ts_view *v, int dim, const int32_t *axes, const int64_t *sizes, int n) {
    int64_t stride = v->stride[dim];
    TS_ASSERT(v->ndim - 1 + n <= TS_MAX_DIMS);
    view_remove(v, dim);
    for (int i = n - 1; i >= 0; i--) {
        view_insert(v, dim, axes[i], sizes[i], stride);
        stride *= sizes[i];
    }
}

void ts_view_window(ts_view *v, int dim, int32_t out_axis, int64_t out_size, int64_t step, int32_t tap_axis,
                    int64_t taps, int64_t dilation) {
    const int64_t stride = v->stride[dim];
    view_remove(v, dim);
    view_insert(v, dim, tap_axis, taps, stride * dilation);
    view_insert(v, dim, out_axis, out_size, stride * step);
}

bool ts_view_merge(ts_view *v, int dim, int n, int32_t axis) {
    /* The dims nest when each non-trivial dim steps exactly over the next non-trivial one. */
    int64_t size = 1, stride = 0;
    int inner = -1; /* the previous (inner) non-trivial dim, walking outwards */
    for (int i = dim + n - 1; i >= dim; i--) {
        size *= v->size[i];
        if (v->size[i] == 1) continue;
        if (inner < 0)
            stride = v->stride[i];
        else if (v->stride[i] != v->stride[inner] * v->size[inner])
            return false;
        inner = i;
    }
    for (int i = 1; i < n; i++) view_remove(v, dim + 1);
    v->axis[dim] = axis;
    v->size[dim] = size;
    v->stride[dim] = stride;
    return true;
}

void ts_view_slice(ts_view *v, int dim, int32_t axis, int64_t start, int64_t step, int64_t size) {
    v->offset += start * v->stride[dim];
    v->stride[dim] *= step;
    v->size[dim] = size;
    v->axis[dim] = axis;
}

bool ts_ref_is_whole(const ts_graph *g, const ts_ref *r) {
    ts_view whole = ts_view_of_node(g, r->node);
    return ts_view_equal(&whole, &r->view);
}

int *ts_graph_reader_counts(const ts_graph *g) {
    int *n = ts_xcalloc((size_t)g->nnodes + 1, sizeof *n);
    for (int i = 0; i < g->nnodes; i++)
        for (int s = 0; s < g->nodes[i].nsrc; s++) n[g->nodes[i].src[s].node]++;
    for (int i = 0; i < g->noutputs; i++) n[g->outputs[i].ref.node]++;
    return n;
}

int64_t ts_view_offset(const ts_view *v, const int64_t *idx) {
    int64_t off = v->offset;
    for (int i = 0; i < v->ndim; i++) off += idx[i] * v->stride[i];
    return off;
}

/* ---- normalisation ------------------------------------------------------------------------------ */

static int node_dim(const ts_node *n, int32_t axis);
static void remove_dim(ts_node *n, int d);

/* Whether r sees its node through a reshape that merges the node's consecutive dims [dim, dim + n) into
 * r's dim `dim` (the node's other dims unchanged, in order, contiguous): then *dim and *n are set. */
static bool merged_reshape(const ts_graph *g, const ts_ref *r, int *dim, int *n) {
    const ts_node *src = &g->nodes[r->node];
    int merged = src->ndim - r->view.ndim + 1;
    if (merged < 2) return false;
    int d = 0;
    while (d < r->view.ndim && d < src->ndim && r->view.axis[d] == src->axis[d]) d++;
    if (d == r->view.ndim) return false;
    ts_view v = ts_view_of_node(g, r->node);
    if (!ts_view_merge(&v, d, merged, r->view.axis[d]) || !ts_view_equal(&v, &r->view)) return false;
    *dim = d, *n = merged;
    return true;
}

/* Whether operand r of an elementwise node may be split at dim `dim` into the axes of `like` (a node whose
 * dims [dim, dim + n) were merged there): a source (input, constant, iota) seen through any view, or a node
 * seen through the same merge. */
static bool splittable_operand(const ts_graph *g, const ts_ref *r, int dim, int n, const ts_node *like) {
    if (ts_op_kind_of(g->nodes[r->node].op) == TS_KIND_SOURCE) return true;
    int d2, n2;
    if (!merged_reshape(g, r, &d2, &n2) || d2 != dim || n2 != n) return false;
    return memcmp(g->nodes[r->node].axis + dim, like->axis + dim, sizeof(int32_t) * (size_t)n) == 0;
}

void ts_graph_split_after_merges(ts_graph *g) {
    for (int32_t i = 0; i < g->nnodes; i++) { /* operands precede their readers: splits propagate forwards */
        ts_node *e = &g->nodes[i];
        ts_op_kind kind = ts_op_kind_of(e->op);
        if (kind != TS_KIND_UNARY && kind != TS_KIND_BINARY && kind != TS_KIND_TERNARY) continue;
        int dim = -1, n = 0, s0 = -1;
        for (int s = 0; s < e->nsrc && s0 < 0; s++) /* a computed node (inputs are read merged on purpose:
                                                       ts_graph_merge_reduced_axes) */
            if (ts_op_kind_of(g->nodes[e->src[s].node].op) != TS_KIND_SOURCE && merged_reshape(g, &e->src[s], &dim, &n))
                s0 = s;
        if (s0 < 0 || e->ndim - 1 + n > TS_MAX_DIMS) continue;
        const ts_node *like = &g->nodes[e->src[s0].node];
        bool ok = true;
        for (int s = 0; s < e->nsrc && ok; s++) ok = splittable_operand(g, &e->src[s], dim, n, like);
        if (!ok) continue;
        int32_t axes[TS_MAX_DIMS];
        int64_t sizes[TS_MAX_DIMS];
        for (int j = 0; j < n; j++) axes[j] = like->axis[dim + j], sizes[j] = g->axes[like->axis[dim + j]].size;
        for (int s = 0; s < e->nsrc; s++) ts_view_split(&e->src[s].view, dim, axes, sizes, n);
        memmove(e->axis + dim + n, e->axis + dim + 1, sizeof(int32_t) * (size_t)(e->ndim - dim - 1));
        memcpy(e->axis + dim, axes, sizeof(int32_t) * (size_t)n);
        e->ndim += n - 1;
    }
}

/* Whether r sees its node whole with one of the node's dims (*e) split into the consecutive dims [*d, *d + *n)
 * of r's view, nesting (a reshape that splits an axis, after a permute or not), every other node dim seen as
 * one dim of r's view (in any order) and nothing else but broadcast dims. */
static bool split_read(const ts_graph *g, const ts_ref *r, int *e, int *d, int *n) {
    const ts_node *src = &g->nodes[r->node];
    const ts_view nv = ts_view_of_node(g, r->node), *v = &r->view;
    if (v->offset != 0) return false;
    int count[TS_MAX_DIMS] = {0}, first[TS_MAX_DIMS];
    *e = -1;
    for (int k = 0; k < v->ndim; k++) {
        if (v->stride[k] == 0 || v->size[k] == 1) continue; /* a broadcast dim, or one of size 1 */
        int f = -1;
        for (int j = 0; j < src->ndim && f < 0; j++)
            if (v->stride[k] >= nv.stride[j] && v->stride[k] % nv.stride[j] == 0 && v->stride[k] / nv.stride[j] < nv.size[j])
                f = j;
        if (f < 0 || (count[f] > 0 && first[f] + count[f] != k)) return false; /* apart */
        if (count[f]++ == 0) first[f] = k;
    }
    for (int j = 0; j < src->ndim; j++) {
        if (count[j] == 0) {
            if (nv.size[j] == 1) continue; /* a size-1 dim needs no view dim */
            return false;
        }
        if (count[j] == 1) { /* whole, not split */
            if (v->stride[first[j]] != nv.stride[j] || v->size[first[j]] != nv.size[j]) return false;
            continue;
        }
        if (*e >= 0) return false; /* one split at a time */
        *e = j, *d = first[j], *n = count[j];
    }
    if (*e < 0) return false;
    ts_view t = *v;
    return ts_view_merge(&t, *d, *n, src->axis[*e]) && t.stride[*d] == nv.stride[*e] && t.size[*d] == nv.size[*e];
}

/* Whether elementwise node x can take axes[0..n) (consecutive in it) merged: every operand view has them all,
 * consecutive and nesting, or none of them. */
static bool operands_merge(const ts_node *x, const int32_t *axes, int n) {
    for (int s = 0; s < x->nsrc; s++) {
        const ts_view *v = &x->src[s].view;
        int p = ts_view_find(v, axes[0]), have = 0;
        for (int i = 0; i < n; i++) have += ts_view_find(v, axes[i]) >= 0;
        if (have == 0) continue;
        if (have != n || p < 0 || p + n > v->ndim) return false;
        for (int i = 1; i < n; i++)
            if (v->axis[p + i] != axes[i]) return false;
        ts_view t = *v;
        if (!ts_view_merge(&t, p, n, axes[0])) return false;
    }
    return true;
}

void ts_graph_merge_after_splits(ts_graph *g) {
    for (int32_t i = 0; i < g->nnodes; i++) { /* operands precede their readers: merges propagate forwards */
        ts_node *x = &g->nodes[i];
        ts_op_kind kind = ts_op_kind_of(x->op);
        if (kind != TS_KIND_UNARY && kind != TS_KIND_BINARY && kind != TS_KIND_TERNARY) continue;
        int e = -1, d = 0, n = 0, s0 = -1;
        for (int s = 0; s < x->nsrc && s0 < 0; s++)
            if (ts_op_kind_of(g->nodes[x->src[s].node].op) != TS_KIND_SOURCE && split_read(g, &x->src[s], &e, &d, &n))
                s0 = s;
        if (s0 < 0) continue;
        const int32_t whole = g->nodes[x->src[s0].node].axis[e];
        int32_t axes[TS_MAX_DIMS];
        memcpy(axes, x->src[s0].view.axis + d, sizeof(int32_t) * (size_t)n);
        int q = node_dim(x, axes[0]);
        bool ok = q >= 0 && q + n <= x->ndim && node_dim(x, whole) < 0 && operands_merge(x, axes, n);
        for (int k = 1; k < n && ok; k++) ok = x->axis[q + k] == axes[k];
        if (!ok) continue;
        for (int s = 0; s < x->nsrc; s++) {
            int p = ts_view_find(&x->src[s].view, axes[0]);
            if (p >= 0) TS_ASSERT(ts_view_merge(&x->src[s].view, p, n, whole));
        }
        x->axis[q] = whole;
        for (int k = 1; k < n; k++) remove_dim(x, q + 1);
    }
}

/* ---- two axes reduced one after the other, merged ------------------------------------------------ */

static int node_dim(const ts_node *n, int32_t axis) {
    for (int d = 0; d < n->ndim; d++)
        if (n->axis[d] == axis) return d;
    return -1;
}

/* A scaling that commutes with the reduction `op`: m = x · c with c a constant (≥ 0 under a maximum); the
 * index of x among m's operands, or -1. */
static int scaled_operand(const ts_graph *g, const ts_node *m, ts_op op) {
    if (m->op != TS_OP_MUL) return -1;
    for (int k = 0; k < 2; k++) {
        const ts_node *c = &g->nodes[m->src[1 - k].node];
        if (c->op == TS_OP_CONSTANT && (op == TS_OP_REDUCE_SUM || c->value >= 0)) return k;
    }
    return -1;
}

/* A reduction over one axis of a reduction over its neighbour: `end` reduces (sum or max) the result of
 * `first`, which reduces the same way over the next axis of x's view (the two adjacent there, their strides
 * nesting), maybe through scalings by constants (a mean's 1/n) from `first` to `last`; nothing else reads
 * `first` or the scalings. Then Σ_a Σ_b x = Σ_(a,b) x over the two merged (the same for max). */
typedef struct {
    int32_t first, last, end;
    int32_t outer, inner; /* the two axes, in x's view's order */
} reduce_chain;

static bool static_axis(const ts_graph *g, int32_t a) {
    int32_t r = ts_axis_root(g, a);
    return !g->axes[a].dynamic && !g->axes[r].dynamic;
}

/* The fewest values a merged reduction may leave: each is a row of the row kernel that computes it, and a
 * kernel of fewer rows than about the GPU's SMs leaves most idle unless a cluster caches each row (a
 * Frobenius norm merged down to 16 rows of 4M elements ran as 16 blocks): below this the chain stays split,
 * its first reduction over many rows. */
enum { kMinMergedRows = 64 };

static bool find_chain(const ts_graph *g, const int *readers, int32_t end, reduce_chain *c) {
    const ts_node *e = &g->nodes[end];
    if ((e->op != TS_OP_REDUCE_SUM && e->op != TS_OP_REDUCE_MAX) || !ts_ref_is_whole(g, &e->src[0])) return false;
    if (ts_node_numel(g, e) < kMinMergedRows) return false;
    int32_t cur = e->src[0].node;
    const int32_t last = cur;
    for (int k; (k = scaled_operand(g, &g->nodes[cur], e->op)) >= 0; cur = g->nodes[cur].src[k].node)
        if (readers[cur] != 1 || !ts_ref_is_whole(g, &g->nodes[cur].src[k])) return false;
    const ts_node *first = &g->nodes[cur];
    if (first->op != e->op || readers[cur] != 1 || first->reduce_axis == e->reduce_axis) return false;
    const ts_view *v = &first->src[0].view;
    int da = ts_view_find(v, e->reduce_axis), db = ts_view_find(v, first->reduce_axis);
    if (da < 0 || db < 0 || (da - db != 1 && db - da != 1)) return false;
    int lo = da < db ? da : db;
    ts_view t = *v;
    if (!ts_view_merge(&t, lo, 2, v->axis[lo])) return false;
    *c = (reduce_chain){.first = cur, .last = last, .end = end, .outer = v->axis[lo], .inner = v->axis[lo + 1]};
    return static_axis(g, c->outer) && static_axis(g, c->inner);
}

/* Whether dims/view positions of outer and inner (-1: absent) allow the merge: both absent, or inner right
 * after outer. */
static bool adjacent_or_absent(int po, int pi) { return (po < 0 && pi < 0) || (po >= 0 && pi == po + 1); }

/* Whether every node but the chains' own (role 1: first and its scalings; 2: end) can take outer and inner
 * merged: each has both, inner right after outer, or neither; no reduction, iota or update over either; and
 * every operand view that sees them sees them adjacent with nesting strides. */
static bool merge_allowed(const ts_graph *g, const char *role, int32_t outer, int32_t inner) {
    for (int32_t i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        ts_op_kind kind = ts_op_kind_of(n->op);
        if (role[i]) continue;
        if (kind == TS_KIND_SOURCE) {
            if (n->op == TS_OP_IOTA && (n->reduce_axis == outer || n->reduce_axis == inner)) return false;
            continue;
        }
        if (!adjacent_or_absent(node_dim(n, outer), node_dim(n, inner))) return false;
        if (kind == TS_KIND_UPDATE && (node_dim(n, outer) >= 0 || n->reduce_axis == outer || n->reduce_axis == inner))
            return false;
        if (kind != TS_KIND_UNARY && kind != TS_KIND_BINARY && kind != TS_KIND_TERNARY &&
            (n->reduce_axis == outer || n->reduce_axis == inner))
            return false;
        for (int s = 0; s < n->nsrc; s++) {
            const ts_view *v = &n->src[s].view;
            int po = ts_view_find(v, outer), pi = ts_view_find(v, inner);
            if (!adjacent_or_absent(po, pi)) return false;
            ts_view t = *v;
            if (po >= 0 && !ts_view_merge(&t, po, 2, outer)) return false;
        }
    }
    return true;
}

static void remove_dim(ts_node *n, int d) {
    memmove(n->axis + d, n->axis + d + 1, sizeof(int32_t) * (size_t)(n->ndim - d - 1));
    n->ndim--;
}

/* Views of v at axis (outer, inner) merged into `m`, where v sees both. */
static void merge_view_axes(ts_view *v, int32_t outer, int32_t inner, int32_t m) {
    int po = ts_view_find(v, outer);
    if (po >= 0 && ts_view_find(v, inner) == po + 1) TS_ASSERT(ts_view_merge(v, po, 2, m));
}

/* Chain c over the merged axis m: `first` reduces m of x's merged view, its scalings follow without the axis
 * it had kept, and every reader of `end` reads `last` instead (the same dims and value); `end`, read by no one,
 * becomes a constant. */
static void collapse_chain(ts_graph *g, const reduce_chain *c, int32_t m) {
    ts_node *first = &g->nodes[c->first];
    const int32_t kept = first->reduce_axis == c->inner ? c->outer : c->inner;
    merge_view_axes(&first->src[0].view, c->outer, c->inner, m);
    first->reduce_axis = m;
    remove_dim(first, node_dim(first, kept));
    int32_t prev = c->first;
    for (int32_t i = c->first + 1; i <= c->last; i++) { /* the scalings: each reads the one before it */
        ts_node *s = &g->nodes[i];
        int k = s->nsrc == 2 && s->src[0].node == prev ? 0 : s->nsrc == 2 && s->src[1].node == prev ? 1 : -1;
        if (k < 0) continue;
        ts_view *cv = &s->src[1 - k].view;
        int d = ts_view_find(cv, kept);
        if (d >= 0) view_remove(cv, d); /* the constant's broadcast dim */
        remove_dim(s, node_dim(s, kept));
        s->src[k].view = ts_view_of_node(g, prev);
        prev = i;
    }
    TS_ASSERT(prev == c->last);
    for (int32_t i = 0; i < g->nnodes; i++)
        for (int s = 0; s < g->nodes[i].nsrc; s++)
            if (g->nodes[i].src[s].node == c->end) g->nodes[i].src[s].node = c->last;
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i].ref.node == c->end) g->outputs[i].ref.node = c->last;
    for (int i = 0; i < g->nnamed; i++)
        if (g->named[i].ref.node == c->end) g->named[i].ref.node = c->last;
    ts_node *e = &g->nodes[c->end];
    *e = (ts_node){.op = TS_OP_CONSTANT, .dtype = e->dtype, .origin = e->origin, .reduce_axis = -1, .at_axis = -1,
                   .rows_axis = -1, .input = -1};
}

/* A new axis for outer and inner merged, named after both. */
static int32_t merged_axis(ts_graph *g, int32_t outer, int32_t inner) {
    char *name = ts_strfmt("%s_%s", g->axes[outer].name, g->axes[inner].name);
    for (int k = 2; ts_graph_find_axis(g, name) >= 0; k++) {
        free(name);
        name = ts_strfmt("%s_%s_%d", g->axes[outer].name, g->axes[inner].name, k);
    }
    int64_t size = g->axes[outer].size * g->axes[inner].size;
    int32_t m = ts_graph_add_axis(g, name, size, false, size);
    free(name);
    return m;
}

/* Every computed node but the chains' own (role) over m where it had outer and inner, and every operand view that
 * sees them over m (inputs keep their dims: their readers' views merge the nesting strides; outputs keep theirs). */
static void merge_pair_in_nodes(ts_graph *g, const char *role, int32_t outer, int32_t inner, int32_t m) {
    for (int32_t j = 0; j < g->nnodes; j++) {
        ts_node *n = &g->nodes[j];
        if (role[j] || ts_op_kind_of(n->op) == TS_KIND_SOURCE) continue;
        int d = node_dim(n, outer);
        if (d >= 0) {
            n->axis[d] = m;
            remove_dim(n, d + 1);
        }
        for (int s = 0; s < n->nsrc; s++) merge_view_axes(&n->src[s].view, outer, inner, m);
    }
}

/* Merges the axes of one reduction chain's pair everywhere, if every node allows it; whether it did. */
static bool merge_one_pair(ts_graph *g) {
    int *readers = ts_graph_reader_counts(g);
    char *role = ts_xcalloc((size_t)g->nnodes + 1, 1);
    reduce_chain *chains = ts_xmalloc(sizeof *chains * ((size_t)g->nnodes + 1));
    bool merged = false;
    for (int32_t i = 0; i < g->nnodes && !merged; i++) {
        reduce_chain c;
        if (!find_chain(g, readers, i, &c)) continue;
        int nc = 0; /* every chain over the same pair */
        memset(role, 0, (size_t)g->nnodes + 1);
        for (int32_t j = i; j < g->nnodes; j++) {
            reduce_chain d;
            if (!find_chain(g, readers, j, &d) || d.outer != c.outer || d.inner != c.inner) continue;
            chains[nc++] = d;
            for (int32_t k = d.last, x; k != d.first; k = g->nodes[k].src[x].node) { /* the scalings, back */
                role[k] = 1;
                x = scaled_operand(g, &g->nodes[k], g->nodes[d.end].op);
            }
            role[d.first] = 1;
            role[d.end] = 2;
        }
        if (!merge_allowed(g, role, c.outer, c.inner)) continue;
        const int32_t m = merged_axis(g, c.outer, c.inner);
        for (int k = 0; k < nc; k++) collapse_chain(g, &chains[k], m);
        merge_pair_in_nodes(g, role, c.outer, c.inner, m);
        merged = true;
    }
    free(chains);
    free(role);
    free(readers);
    return merged;
}

void ts_graph_merge_reduced_axes(ts_graph *g) {
    for (int round = 0; round < TS_MAX_DIMS && merge_one_pair(g); round++) {
    }
}

/* ---- two free axes of a contraction's operand, merged ---------------------------------------------- */

/* Whether view v (of a product's operand, in the product's dims) has the two dims at d and d + 1 — neither the
 * contraction's axis `k` — with nesting strides, and `other` (the product's other operand) is broadcast along both. */
static bool free_pair_at(const ts_graph *g, const ts_view *v, const ts_view *other, int d, int32_t k) {
    const int32_t a = v->axis[d], b = v->axis[d + 1];
    if (a == k || b == k || !static_axis(g, a) || !static_axis(g, b) || v->size[d] < 2 || v->size[d + 1] < 2) return false;
    if (v->stride[d] == 0 || v->stride[d + 1] == 0) return false;
    int oa = ts_view_find(other, a), ob = ts_view_find(other, b);
    if ((oa >= 0 && other->stride[oa] != 0) || (ob >= 0 && other->stride[ob] != 0)) return false;
    ts_view t = *v;
    return ts_view_merge(&t, d, 2, a);
}

/* Whether the product's operands (views x and y in its dims, broadcast along the other's axes by stride 0) share an
 * axis other than the contraction's k: a batch — one of size 1 too (a single kv head written as an axis). */
static bool batched_product(const ts_view *x, const ts_view *y, int32_t k) {
    for (int j = 0; j < x->ndim; j++) {
        int o = ts_view_find(y, x->axis[j]);
        if (x->axis[j] != k && x->stride[j] != 0 && o >= 0 && y->stride[o] != 0) return true;
    }
    return false;
}

/* The pairs merge_allowed refused, which find_free_pair skips. */
typedef struct {
    int32_t outer[4 * TS_MAX_DIMS], inner[4 * TS_MAX_DIMS];
    int n;
} pair_list;

static bool listed(const pair_list *l, int32_t outer, int32_t inner) {
    for (int i = 0; i < l->n; i++)
        if (l->outer[i] == outer && l->inner[i] == inner) return true;
    return false;
}

/* The first pair of free axes of one operand of a contraction (a sum over k of a product) not yet refused: adjacent
 * in that operand's view with nesting strides (a channel-first activation's h and w in Σ_c W[o, c]·x[b, c, h, w]),
 * the other operand broadcast along both. Contractions batched over an axis both operands have are left as they are:
 * attention's Q·Kᵀ over kv heads, whose group and query axes merged would take a decode step's few query rows past
 * the split-key kernel's 16 (config.c ATTN_DECODE_ROWS; random GQA graphs at t_q 7 went from it to three kernels,
 * 2.2-2.6x slower predicted). */
static bool find_free_pair(const ts_graph *g, const pair_list *refused, int32_t *outer, int32_t *inner) {
    for (int32_t i = 0; i < g->nnodes; i++) {
        const ts_node *e = &g->nodes[i];
        if (e->op != TS_OP_REDUCE_SUM) continue;
        const ts_node *p = &g->nodes[e->src[0].node];
        if (p->op != TS_OP_MUL || p->nsrc != 2 || batched_product(&p->src[0].view, &p->src[1].view, e->reduce_axis)) continue;
        for (int s = 0; s < 2; s++) {
            const ts_view *v = &p->src[s].view;
            for (int d = 0; d + 1 < v->ndim; d++) {
                if (!free_pair_at(g, v, &p->src[1 - s].view, d, e->reduce_axis) ||
                    listed(refused, v->axis[d], v->axis[d + 1]))
                    continue;
                *outer = v->axis[d], *inner = v->axis[d + 1];
                return true;
            }
        }
    }
    return false;
}

/* Whether every graph output computed over outer and inner (its node has them adjacent: merge_allowed) reads the
 * pair's positions as consecutive dims of its view that nest — the pair itself, or the runs earlier merges left there —
 * so that the kernel computing it still writes it in the output's own order (attention's output permuted to [b, t,
 * grp, kv_h, d] keeps grp and t apart). Checked by strides: in the node's row-major layout the pair spans strides
 * [stride(inner), stride(outer)·size(outer)). */
static bool outputs_keep_pair(const ts_graph *g, int32_t outer, int32_t inner) {
    for (int i = 0; i < g->noutputs; i++) {
        const ts_ref *r = &g->outputs[i].ref;
        const ts_node *n = &g->nodes[r->node];
        const int po = node_dim(n, outer), pi = node_dim(n, inner);
        if ((po < 0 && pi < 0) || ts_op_kind_of(n->op) == TS_KIND_SOURCE) continue; /* inputs keep their dims */
        const ts_view nv = ts_view_of_node(g, r->node), *v = &r->view;
        const int64_t lo = nv.stride[pi], hi = nv.stride[po] * nv.size[po];
        int64_t next = lo; /* the stride the next dim outwards must have */
        bool inside = false, done = false;
        for (int d = v->ndim - 1; d >= 0; d--) {
            if (v->size[d] == 1) continue;
            const bool in = v->stride[d] >= lo && v->stride[d] < hi;
            if (in && (done || v->stride[d] != next)) return false; /* apart, out of order or not nesting */
            if (in) next = v->stride[d] * v->size[d], inside = true;
            else if (inside) done = true;
        }
        if (next != hi) return false;
    }
    return true;
}

void ts_graph_merge_free_axes(ts_graph *g) {
    char *role = ts_xcalloc((size_t)g->nnodes + 1, 1); /* no chains: every node takes the merge */
    pair_list refused = {.n = 0};
    int32_t outer, inner;
    while (refused.n < 4 * TS_MAX_DIMS && find_free_pair(g, &refused, &outer, &inner)) {
        if (!merge_allowed(g, role, outer, inner) || !outputs_keep_pair(g, outer, inner)) {
            refused.outer[refused.n] = outer, refused.inner[refused.n++] = inner;
            continue;
        }
        merge_pair_in_nodes(g, role, outer, inner, merged_axis(g, outer, inner));
    }
    free(role);
}

/* ---- statistics -------------------------------------------------------------------------------- */

static bool is_product(const ts_graph *g, const ts_ref *r) { return g->nodes[r->node].op == TS_OP_MUL; }

ts_graph_stats ts_graph_measure(const ts_graph *g) {
    ts_graph_stats s = {0};
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        ts_op_kind k = ts_op_kind_of(n->op);
        if (k == TS_KIND_SOURCE || k == TS_KIND_UPDATE || n->op == TS_OP_COPY || n->op == TS_OP_CAST) continue;
        double work = k == TS_KIND_REDUCE ? (double)ts_view_numel(&n->src[0].view)
                                          : (double)ts_node_numel(g, n);
        s.flops += work;
        if (n->op == TS_OP_REDUCE_SUM && is_product(g, &n->src[0])) s.contraction_flops += 2 * work;
    }
    for (int i = 0; i < g->ninputs; i++) {
        const ts_node *n = &g->nodes[g->inputs[i].node];
        s.min_bytes += (double)ts_node_numel(g, n) * ts_dtype_bytes(n->dtype);
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ts_output *o = &g->outputs[i];
        if (!o->inout) {
            s.min_bytes += (double)ts_view_numel(&o->ref.view) * ts_dtype_bytes(o->dtype);
            continue;
        }
        /* an updated cache: its rows before the new ones are read, the new ones written; the rest untouched */
        const ts_node *u = &g->nodes[o->ref.node], *in = &g->nodes[g->inputs[o->input].node];
        double row = (double)ts_node_numel(g, in) / (double)g->axes[u->reduce_axis].size;
        double added = u->rows_axis >= 0 ? (double)g->axes[u->rows_axis].size : 1;
        s.min_bytes -= row * ((double)(g->axes[u->reduce_axis].size - g->axes[u->at_axis].size) + added) *
                       ts_dtype_bytes(o->dtype);
        s.min_bytes += (double)ts_view_numel(&u->src[1].view) * ts_dtype_bytes(o->dtype);
    }
    return s;
}
