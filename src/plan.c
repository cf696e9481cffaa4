/* plan.c — from an extraction of the saturated e-graph to a kernel plan: the extracted term covered with
 * kernel patterns (GEMM with a fused epilogue, dual GEMM, streaming attention, row kernels with staged
 * reductions and several outputs, fused reduction with inner and finish expressions, fused elementwise
 * map). Which extraction is decided by the search (src/search.c). See plan.h. */
#include "plan.h"

#include "config.h"
#include "interp.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* ---- the extracted term -------------------------------------------------------------------------- */

typedef struct {
    ts_enode e;
    uint64_t axes;
    int8_t dtype;
    bool cut;    /* the search put a kernel boundary here: computed into a buffer, never inlined */
    bool as_row; /* the search asks for a lone reduction here as a ROW kernel (TS_MARK_ROW) */
    bool output; /* the root of a graph output */
    int8_t output_index; /* which output (when output: the first whose root it is) */
    int uses;
} tnode;

typedef struct {
    const ts_egir *x;
    const ts_egir_view *views2;
    const uint8_t *mark; /* per e-class: the search's TS_MARK_* bits (NULL: none) */
    ts_dyn dyn;
    int64_t b1[TS_SYM_MAX_DYN];
    bool fuse;
    bool library_gemms; /* GEMMs only cuBLASLt can run are allowed (--allow-cublas): A read transposed (unit
                         * stride along m) without a copy */
    tnode *t;
    int nt, cap_t;
    ts_plan *p;
    bool *has_mat;
    ts_access *mat;
    int (*dual_buf)[2]; /* per dual term node materialised as two GEMM results: their buffers */
    int *input_buf;     /* per graph input: its buffer, or -1 */
    struct layout_copy *copies; /* contiguous copies made so far (contiguous_as), shared by later readers */
    int ncopies, cap_copies;
    char *err;
} builder;

/* Node `node` copied contiguous in dim order `order` and dtype `dtype`: the access later readers of that
 * layout share (a value never changes once computed, so one copy serves them all: q, k and v sliced out of a
 * projection read in another order need one copy of it, not three). */
struct layout_copy {
    int node, n;
    int32_t order[TS_MAX_DIMS];
    ts_dtype dtype;
    ts_access acc;
};

static const ts_egir_data *cdata(const ts_egir *x, uint32_t cls) { return ts_eg_data_const(x->eg, cls); }

static int add_tnode(builder *b, const ts_enode *e, uint64_t axes, int8_t dtype) {
    TS_GROW(b->t, b->nt, b->cap_t);
    b->t[b->nt] = (tnode){.e = *e, .axes = axes, .dtype = dtype};
    return b->nt++;
}

/* The term rooted at class cls, shared subterms once (memo per class). */
static int build_term(builder *b, const ts_enode **best, int *memo, uint32_t cls) {
    const ts_egir *x = b->x;
    cls = ts_eg_find(x->eg, cls);
    if (memo[cls] >= 0) return memo[cls];
    TS_ASSERT(best[cls]);
    ts_enode e = *best[cls];
    for (int k = 0; k < ts_op_arity((ts_op)e.op); k++) {
        int kid = build_term(b, best, memo, e.kid[k]);
        e.kid[k] = (uint32_t)kid;
        b->t[kid].uses++;
    }
    const ts_egir_data *d = cdata(x, cls);
    memo[cls] = add_tnode(b, &e, d->axes, d->dtype);
    b->t[memo[cls]].cut = b->mark && (b->mark[cls] & TS_MARK_CUT);
    b->t[memo[cls]].as_row = b->mark && (b->mark[cls] & TS_MARK_ROW);
    return memo[cls];
}

/* ---- symbolic accesses ------------------------------------------------------------------------- */

static ts_sym sym_axis(const builder *b, int32_t axis) { return ts_sym_axis(b->x->g, &b->dyn, axis); }

static int find_dim(const ts_access *a, int32_t axis) {
    for (int d = 0; d < a->ndim; d++)
        if (a->axis[d] == axis) return d;
    return -1;
}

/* Access a over its own axes, contiguous row-major from offset 0 over buffer `buf`. */
static ts_access contiguous_over(const builder *b, int buf, const int32_t *axes, int n) {
    ts_access a = {.buf = buf, .ndim = n, .offset = ts_sym_const(0)};
    ts_sym stride = ts_sym_const(1);
    for (int d = n - 1; d >= 0; d--) {
        a.axis[d] = axes[d];
        a.stride[d] = stride;
        stride = ts_sym_mul(stride, sym_axis(b, axes[d]));
    }
    return a;
}

/* The contiguous row-major access of buffer `buf`. */
static ts_access contiguous_access(const builder *b, int buf) {
    const ts_buffer *B = &b->p->buf[buf];
    return contiguous_over(b, buf, B->axis, B->ndim);
}

/* Sym of one view stride: concrete in both bindings, recovered as a monomial. */
static bool sym_sample(const builder *b, int64_t v1, int64_t v2, ts_sym *out) {
    if (b->dyn.n == 0) {
        *out = ts_sym_const(v1);
        return true;
    }
    return ts_sym_from_samples(v1, v2, b->b1, b->dyn.n, out);
}

/* ---- kernels ----------------------------------------------------------------------------------- */

void ts_kernel_init(ts_kernel *k, ts_kernel_kind kind) {
    memset(k, 0, sizeof *k);
    k->kind = kind;
    k->batch_axis = k->batch_outer = k->m_outer = k->m_axis = k->n_axis = k->red_axis = -1;
    k->b1 = -1;
}

static ts_kernel *new_kernel(builder *b, ts_kernel_kind kind) {
    TS_GROW(b->p->k, b->p->nk, b->p->cap_k);
    ts_kernel *k = &b->p->k[b->p->nk++];
    ts_kernel_init(k, kind);
    return k;
}

static int kernel_access(ts_kernel *k, const ts_access *a) {
    for (int i = 0; i < k->nacc; i++)
        if (memcmp(&k->acc[i], a, sizeof *a) == 0) return i;
    TS_GROW(k->acc, k->nacc, k->cap_acc);
    k->acc[k->nacc] = *a;
    return k->nacc++;
}

int ts_expr_push(ts_expr *e, ts_xnode n) {
    TS_GROW(e->node, e->n, e->cap);
    e->node[e->n] = n;
    return e->n++;
}

static bool is_elementwise(ts_op op) {
    ts_op_kind k = ts_op_kind_of(op);
    return k == TS_KIND_UNARY || k == TS_KIND_BINARY || k == TS_KIND_TERNARY;
}

static ts_access materialize(builder *b, int i);

/* Output axes of a kernel: the node's axes, ordered like `like` (its dims first, outer to inner), then
 * the rest in id order. */
static int order_axes(uint64_t axes, const ts_access *like, int32_t *out) {
    int n = 0;
    if (like)
        for (int d = 0; d < like->ndim; d++)
            if (axes & (1ull << like->axis[d])) out[n++] = like->axis[d], axes &= ~(1ull << like->axis[d]);
    for (int a = 0; a < 64; a++)
        if (axes & (1ull << a)) out[n++] = a;
    return n;
}

/* The operand whose layout a kernel's output over `axes` copies: the one spanning most of those axes (the
 * first of them on a tie), so that a broadcast operand loaded first (a [t, s] mask added to [b, h, t, s]
 * scores) does not make the result [t, s, b, h], strided for every reader. NULL when there is none. */
static const ts_access *widest_operand(const ts_access *acc, int nacc, uint64_t axes) {
    const ts_access *best = NULL;
    int most = 0;
    for (int i = 0; i < nacc; i++) {
        int n = 0;
        for (int d = 0; d < acc[i].ndim; d++) n += (int)((axes >> acc[i].axis[d]) & 1);
        if (n > most) best = &acc[i], most = n;
    }
    return best;
}

bool ts_kernel_writes(const ts_kernel *k, int buf) {
    if (k->out.buf == buf || (ts_kernel_has_scratch(k) && k->scratch == buf)) return true;
    for (int o = 0; o < k->nextra; o++)
        if (k->extra_out[o].buf == buf) return true;
    for (int o = 0; o < k->nrowstat; o++)
        if (k->rowstat_buf[o] == buf) return true;
    return false;
}

ts_sym ts_access_stride(const ts_access *a, int32_t axis) {
    for (int d = 0; d < a->ndim; d++)
        if (a->axis[d] == axis) return a->stride[d];
    return ts_sym_const(0);
}

bool ts_row_operand_cached(const ts_kernel *k, int slot) {
    const ts_access *a = &k->acc[slot];
    bool along = false, per_row = false;
    for (int d = 0; d < a->ndim; d++) {
        along |= a->axis[d] == k->red_axis && a->stride[d].n != 0;
        per_row |= a->axis[d] != k->red_axis && a->stride[d].n != 0;
    }
    return along && per_row;
}

/* Whether GEMM k's operand at slot varies along the output's rows (m_axis, m_outer) and along its columns. */
static void gemm_operand_varies(const ts_kernel *k, int slot, bool *rows, bool *columns) {
    const ts_access *a = &k->acc[slot];
    *rows = *columns = false;
    for (int d = 0; d < a->ndim; d++) {
        if (a->stride[d].n == 0) continue;
        *rows |= a->axis[d] == k->m_axis || (k->m_outer >= 0 && a->axis[d] == k->m_outer);
        *columns |= a->axis[d] == k->n_axis;
    }
}

bool ts_gemm_operand_per_row(const ts_kernel *k, int slot) {
    bool rows, columns;
    gemm_operand_varies(k, slot, &rows, &columns);
    return rows && columns;
}

bool ts_gemm_operand_by_row(const ts_kernel *k, int slot) {
    bool rows, columns;
    gemm_operand_varies(k, slot, &rows, &columns);
    return rows;
}

bool ts_expr_reads(const ts_expr *x, int slot) {
    for (int i = 0; i < x->n; i++)
        if (x->node[i].kind == TS_X_LOAD && x->node[i].slot == slot) return true;
    return false;
}

int ts_gemm_epilogue_operands(const ts_kernel *k, bool per_row) {
    int n = 0;
    for (int s = 0; s < k->nacc; s++) n += ts_expr_reads(&k->expr, s) && (!per_row || ts_gemm_operand_per_row(k, s));
    return n;
}

int ts_kernel_span_vec(const ts_plan *p, const ts_kernel *k) {
    bool narrow = ts_dtype_bytes(p->buf[k->out.buf].dtype) <= 2;
    for (int s = 0; s < k->nacc; s++) narrow |= ts_dtype_bytes(p->buf[k->acc[s].buf].dtype) <= 2;
    for (int o = 0; o < k->nextra; o++) narrow |= ts_dtype_bytes(p->buf[k->extra_out[o].buf].dtype) <= 2;
    return narrow ? 8 : 4;
}

bool ts_access_same_view(const ts_access *a, const ts_access *b) {
    if (a->buf != b->buf || !ts_sym_equal(a->offset, b->offset)) return false;
    for (int d = 0; d < a->ndim; d++)
        if (!ts_sym_equal(a->stride[d], ts_access_stride(b, a->axis[d]))) return false;
    for (int d = 0; d < b->ndim; d++)
        if (!ts_sym_equal(b->stride[d], ts_access_stride(a, b->axis[d]))) return false;
    return true;
}

int32_t ts_access_unit_axis(const ts_access *a) {
    for (int d = 0; d < a->ndim; d++)
        if (ts_sym_is_one(&a->stride[d])) return a->axis[d];
    return -1;
}

double ts_access_numel(const ts_graph *g, const ts_access *a) {
    double n = 1;
    for (int d = 0; d < a->ndim; d++) n *= (double)g->axes[a->axis[d]].size;
    return n;
}

double ts_access_bytes(const ts_graph *g, const ts_plan *p, const ts_access *a) {
    return ts_access_numel(g, a) * ts_dtype_bytes(p->buf[a->buf].dtype);
}

bool ts_access_strided_along(const ts_access *a, int32_t axis) {
    for (int d = 0; d < a->ndim; d++)
        if (a->axis[d] == axis) {
            int64_t v;
            return !(ts_sym_const_value(&a->stride[d], &v) && (v == 0 || v == 1));
        }
    return false;
}

int ts_gemm_operand_slots(const ts_kernel *k, int *slots) {
    const int all[] = {k->a, k->b0, k->b1, k->two_k ? k->a2 : -1, k->two_k ? k->b2 : -1};
    int n = 0;
    for (int i = 0; i < 5; i++)
        if (all[i] >= 0) slots[n++] = all[i];
    return n;
}

/* Whether a's constant offset and non-unit strides are multiples of `elems`. */
static bool access_steps_of(const ts_access *a, int64_t elems) {
    int64_t v;
    if (ts_sym_const_value(&a->offset, &v) && v % elems != 0) return false;
    for (int d = 0; d < a->ndim; d++)
        if (!ts_sym_is_one(&a->stride[d]) && ts_sym_const_value(&a->stride[d], &v) && v % elems != 0) return false;
    return true;
}

bool ts_access_chunked(const ts_access *a) { return access_steps_of(a, 8); }

bool ts_access_paired(const ts_access *a) { return access_steps_of(a, 2); }

/* Whether a ROW kernel over rows along axis k reads its widest operand down columns: k strided, and the
 * unit-stride axis another of the row space's axes (the innermost, as the output copies its order). */
static bool rows_are_columns(const ts_kernel *kr, uint64_t axes, int32_t k) {
    const ts_access *w = widest_operand(kr->acc, kr->nacc, axes | (1ull << k));
    if (!w) return false;
    int32_t unit = ts_access_unit_axis(w);
    return unit >= 0 && unit != k && ((axes >> unit) & 1);
}

/* Expression of term node i inside a kernel: elementwise nodes are inlined (when fusing, or when i is the
 * root), constants and iotas become constants and indices, `cores` (accumulators) map to ACC slots, and
 * anything else is materialized and loaded. memo: term node → expression node (-1). */
typedef struct {
    int root;
    bool operand; /* the root is a reduction's operand, not the kernel's output (reduce_root) */
    int ncore;
    int core[TS_ROW_MAX_STAGES]; /* term nodes computed by the kernel itself: core[j] is ACC j */
} region;

static region region_of(int root, int c0, int c1) {
    region r = {.root = root};
    if (c0 >= 0) r.core[r.ncore++] = c0;
    if (c1 >= 0) r.core[r.ncore++] = c1;
    return r;
}

/* The ACC slot of term node i in region r, or -1. */
static int core_slot(const region *r, int i) {
    for (int j = 0; j < r->ncore; j++)
        if (r->core[j] == i) return j;
    return -1;
}

static void region_cores(builder *b, int i, int *cores, int *n, bool root);
static bool is_reduction(ts_op op);

/* Whether elementwise node i is computed inside the kernel whose region reaches it, rather than
 * materialised and loaded: always at the region's root; elsewhere when fusing, unless the search cut
 * the graph there. */
static bool inlined(const builder *b, int i, bool root) { return root || (b->fuse && !b->t[i].cut); }

/* Whether the operand `kid` of a reduction is inlined into the reducing kernel as the root of its own region
 * (computed there, even unfused: Σ x² squares in the reduction), which it is unless the search cut the graph
 * there: then it is computed into a buffer and loaded (a row kernel reading a GEMM's result with its bias and
 * residual added in the GEMM's epilogue, rather than recomputing that sum from two tensors). */
static bool reduce_root(const builder *b, int kid) { return !b->t[kid].cut; }

/* Whether elementwise node i varies along fewer axes than the region's root and is computed from exactly
 * one reduction (plus constants and indices) that is not the region's own accumulator. */
static bool finishes_a_reduction(builder *b, const region *r, int i) {
    const tnode *t = &b->t[i];
    if (!is_elementwise((ts_op)t->e.op) || (t->axes & ~b->t[r->root].axes) || t->axes == b->t[r->root].axes)
        return false;
    int cores[16], nc = 0;
    region_cores(b, i, cores, &nc, true);
    return nc == 1 && core_slot(r, cores[0]) < 0 && is_reduction((ts_op)b->t[cores[0]].e.op) &&
           !(b->t[cores[0]].axes & ~t->axes);
}

/* Whether node i is a constant; its value in *v. */
static bool constant_of(const builder *b, int i, double *v) {
    if (b->t[i].e.op != TS_OP_CONSTANT) return false;
    memcpy(v, &b->t[i].e.param[0], sizeof *v);
    return true;
}

static int region_expr(builder *b, ts_kernel *k, ts_expr *e, const region *r, int *memo, int i) {
    if (memo[i] >= 0) return memo[i];
    const tnode node = b->t[i], *t = &node; /* a copy: materialising leaves may grow b->t */
    ts_op op = (ts_op)t->e.op;
    int out;
    if (core_slot(r, i) >= 0) {
        out = ts_expr_push(e, (ts_xnode){.kind = TS_X_ACC, .slot = core_slot(r, i)});
    } else if (op == TS_OP_CONSTANT) {
        double v;
        constant_of(b, i, &v);
        out = ts_expr_push(e, (ts_xnode){.kind = TS_X_CONST, .value = v});
    } else if (op == TS_OP_IOTA) {
        out = ts_expr_push(e, (ts_xnode){.kind = TS_X_INDEX, .slot = (int32_t)t->e.param[0]});
    } else if (b->fuse && i != r->root && finishes_a_reduction(b, r, i)) {
        /* a smaller tensor (a row scale) that only a reduction feeds: the reduction's finish computes it
         * once per element of its own, instead of this kernel once per element of the larger output */
        ts_access a = materialize(b, i);
        out = ts_expr_push(e, (ts_xnode){.kind = TS_X_LOAD, .slot = kernel_access(k, &a)});
    } else if (is_elementwise(op) && inlined(b, i, i == r->root && (!r->operand || reduce_root(b, i)))) {
        ts_xnode n = {.kind = TS_X_OP, .op = op, .dtype = op == TS_OP_CAST ? (ts_dtype)t->e.param[0] : TS_FP32};
        for (int c = 0; c < ts_op_arity(op); c++) n.kid[c] = region_expr(b, k, e, r, memo, (int)t->e.kid[c]);
        out = ts_expr_push(e, n);
    } else {
        ts_access a = materialize(b, i);
        out = ts_expr_push(e, (ts_xnode){.kind = TS_X_LOAD, .slot = kernel_access(k, &a)});
    }
    return memo[i] = out;
}

static int *fresh_memo(builder *b) {
    int *m = ts_xmalloc(sizeof(int) * (size_t)(b->nt + 1));
    for (int i = 0; i < b->nt; i++) m[i] = -1;
    return m;
}

/* Leaves of the elementwise region rooted at i that are neither constants, iotas nor elementwise. */
static void region_cores(builder *b, int i, int *cores, int *n, bool root) {
    ts_op op = (ts_op)b->t[i].e.op;
    if (op == TS_OP_CONSTANT || op == TS_OP_IOTA) return;
    if (is_elementwise(op) && inlined(b, i, root)) {
        for (int c = 0; c < ts_op_arity(op); c++) region_cores(b, (int)b->t[i].e.kid[c], cores, n, false);
        return;
    }
    for (int j = 0; j < *n; j++)
        if (cores[j] == i) return;
    if (*n < 16) cores[(*n)++] = i;
}

static int new_output(builder *b, int i, const int32_t *axes, int n, ts_dtype dtype, ts_kernel *k) {
    int buf = ts_plan_add_buffer(b->p, TS_BUF_TEMP, 0, dtype, axes, n);
    k->out = contiguous_access(b, buf);
    b->has_mat[i] = true;
    b->mat[i] = k->out;
    return buf;
}

/* Extra output o of the kernel just added (the plan's last) writes node i into a fresh contiguous temporary
 * of `dtype` over axes[0..n), where later kernels read it. */
static void add_extra_output(builder *b, int o, int i, ts_dtype dtype, const int32_t *axes, int n) {
    int buf = ts_plan_add_buffer(b->p, TS_BUF_TEMP, 0, dtype, axes, n);
    ts_kernel *k = &b->p->k[b->p->nk - 1];
    k->extra_out[o] = contiguous_access(b, buf);
    b->has_mat[i] = true;
    b->mat[i] = k->extra_out[o];
}

static ts_dtype dtype_of(const builder *b, int i) { return b->t[i].dtype < 0 ? TS_FP32 : (ts_dtype)b->t[i].dtype; }

/* The order of graph output o when node i is that output in its own dtype over exactly the axes out[0..n)
 * (in any order), else NULL. */
static const int32_t *own_output_order(const builder *b, int i, const int32_t *out, int n) {
    if (!b->t[i].output) return NULL;
    const ts_output *o = &b->x->g->outputs[b->t[i].output_index];
    if (o->inout || o->dtype != dtype_of(b, i) || o->ref.view.ndim != n) return NULL;
    uint64_t have = 0, wanted = 0;
    for (int j = 0; j < n; j++) have |= 1ull << out[j], wanted |= 1ull << o->ref.view.axis[j];
    return have == wanted ? o->ref.view.axis : NULL;
}

/* S[0..src_ndim): the strides of view v's source laid out contiguously in its src_axis order. */
static void natural_strides(const ts_graph *g, const ts_egir_view *v, int64_t *S) {
    int64_t run = 1;
    for (int e = v->src_ndim - 1; e >= 0; e--) S[e] = run, run *= g->axes[v->src_axis[e]].size;
}

/* The source axis of view v's dim d (v's source laid out contiguously in its src_axis order, whose strides are
 * S[0..src_ndim)): the one whose stride range holds d's stride; -1 for none. */
static int source_dim_of(const ts_egir_view *v, const int64_t *S, const ts_graph *g, int d) {
    int64_t s = v->view.stride[d];
    for (int e = 0; e < v->src_ndim; e++)
        if (s >= S[e] && s % S[e] == 0 && s / S[e] < g->axes[v->src_axis[e]].size) return e;
    return -1;
}

/* Whether view v reads its whole source as a permutation of the source's axes, each split into nesting dims
 * that follow each other (a permute, then a reshape splitting axes: a convolution's output positions [o, b, p]
 * read as [b, o, oh, ow]); then order[0..src_ndim) is the source axes in the view's order, the layout in which
 * the view is one contiguous read — a graph output that the producing kernel can write in place. */
static bool view_walk_order(const builder *b, const ts_egir_view *v, int32_t *order) {
    const ts_graph *g = b->x->g;
    int64_t S[TS_MAX_DIMS];
    natural_strides(g, v, S);
    if (v->view.offset != 0) return false;
    int n = 0, last = -1;
    int64_t left = 1, next_stride = 0; /* elements of the current source axis still to walk; the stride due */
    uint64_t seen = 0;
    for (int d = 0; d < v->view.ndim; d++) {
        if (v->view.size[d] == 1) continue;
        int e = source_dim_of(v, S, g, d);
        if (e < 0) return false;
        if (e != last) { /* a new source axis: the previous one walked whole */
            if (left != 1 || (seen >> e & 1)) return false;
            seen |= 1ull << e, last = e, order[n++] = v->src_axis[e];
            left = g->axes[v->src_axis[e]].size, next_stride = S[e] * left;
        }
        if (left % v->view.size[d] != 0) return false;
        left /= v->view.size[d], next_stride /= v->view.size[d];
        if (v->view.stride[d] != next_stride) return false;
    }
    return left == 1 && n == v->src_ndim;
}

/* The order a reader of node i (its result over the axes out[0..no), in any order) expects, where one does:
 * the graph output's own; the order in which a view of i that is a graph output reads it (view_walk_order: the
 * producing kernel then writes the output in place); or the source order of a view of i (the q, k and v of a
 * projection split and permuted into heads; attention's output transposed back to [b, t, h, d] and its heads
 * merged). A kernel writing that order spares the reader a copy. NULL: none. (order: storage for the second
 * case, TS_MAX_DIMS long.) */
static const int32_t *reader_order_into(const builder *b, int i, const int32_t *out, int no, int32_t *order) {
    const int32_t *want = own_output_order(b, i, out, no);
    uint64_t have = 0;
    for (int j = 0; j < no; j++) have |= 1ull << out[j];
    for (int j = 0; j < b->nt && !want; j++) {
        if (b->t[j].e.op != TS_OP_VIEW || (int)b->t[j].e.kid[0] != i) continue;
        const ts_egir_view *v = &b->x->views[b->t[j].e.param[0]];
        uint64_t src = 0;
        for (int d = 0; d < v->src_ndim; d++) src |= 1ull << v->src_axis[d];
        if (v->src_ndim != no || src != have) continue;
        want = b->t[j].output && view_walk_order(b, v, order) ? order : v->src_axis;
    }
    return want;
}

/* out[0..no) becomes reader_order_of's order where there is one; last >= 0: only an order ending in that axis
 * (a GEMM writes rows and batch in either order, its columns last). */
static void reader_order(const builder *b, int i, int32_t last, int32_t *out, int no) {
    int32_t walk[TS_MAX_DIMS];
    const int32_t *want = reader_order_into(b, i, out, no, walk);
    if (want && (last < 0 || want[no - 1] == last)) memcpy(out, want, sizeof(int32_t) * (size_t)no);
}

/* A MAP kernel (its output not set yet) computing the elementwise region rooted at i; its operands are
 * materialised first (which may add kernels before it). With extra, nx: the region's nodes extra[0..nx)
 * too, as the kernel's extra outputs (their buffers not set yet). */
static ts_kernel *map_of_region(builder *b, int i, const int *extra, int nx) {
    ts_kernel tmp = {0};
    region r = region_of(i, -1, -1);
    int *memo = fresh_memo(b);
    region_expr(b, &tmp, &tmp.expr, &r, memo, i);
    free(memo);
    for (int o = 0; o < nx; o++) { /* an expression of its own (the compiler shares what it has in common) */
        memo = fresh_memo(b);
        region_expr(b, &tmp, &tmp.extra_expr[o], &r, memo, extra[o]);
        free(memo);
    }
    ts_kernel *k = new_kernel(b, TS_KERNEL_MAP);
    k->acc = tmp.acc, k->nacc = tmp.nacc, k->cap_acc = tmp.cap_acc, k->expr = tmp.expr;
    k->nextra = nx;
    memcpy(k->extra_expr, tmp.extra_expr, sizeof tmp.extra_expr);
    return k;
}

static bool row_extra_outputs(builder *b, int root, int32_t k, bool per_row, const int *stage, int ns, int *extra,
                              int *nx, int *rowout, int *nr);

/* A MAP kernel computing the elementwise region rooted at i, into a new temporary; the region's nodes that
 * are needed outside it (a graph output, or read by other kernels: an LSTM cell's new cell state, inside
 * its new hidden state's expression) are written by the same kernel, over the same axes. */
static void emit_map(builder *b, int i) {
    int extra[TS_KERNEL_MAX_OUTS - 1], nx = 0, nr = 0;
    if (!b->fuse || !row_extra_outputs(b, i, -1, true, NULL, 0, extra, &nx, NULL, &nr)) nx = 0;
    ts_kernel *k = map_of_region(b, i, extra, nx);
    int32_t axes[TS_MAX_DIMS];
    const ts_access *like = k->nacc ? widest_operand(k->acc, k->nacc, b->t[i].axes) : NULL;
    int n = order_axes(b->t[i].axes, like, axes);
    reader_order(b, i, -1, axes, n); /* no copy after it (an operand in another layout: config.c's walk) */
    for (int o = 0; o < nx; o++) add_extra_output(b, o, extra[o], dtype_of(b, extra[o]), axes, n);
    new_output(b, i, axes, n, dtype_of(b, i), &b->p->k[b->p->nk - 1]);
}

/* ---- REDUCE ------------------------------------------------------------------------------------ */

static bool is_reduction(ts_op op) {
    return op == TS_OP_REDUCE_SUM || op == TS_OP_REDUCE_MAX || op == TS_OP_CONTRACT || op == TS_OP_TILE_SUM ||
           op == TS_OP_TILE_MAX || op == TS_OP_WSUM || op == TS_OP_ONLINE_WSUM;
}

/* The type a REDUCE kernel writes its result (node i) in, and a ROW kernel a reduction it ends with: fp32
 * (norms, row scales: their consumers normalise with them), except a graph output that nothing else reads,
 * written in its own type (else a MAP kernel would only cast it). */
static ts_dtype reduction_dtype(const builder *b, int i) {
    const tnode *t = &b->t[i];
    return t->output && t->uses == 0 ? dtype_of(b, i) : TS_FP32;
}

/* A REDUCE kernel computing `core` (a reduction) with the region rooted at `root` as its finish. */
static void emit_reduce(builder *b, int core, int root) {
    const tnode node = b->t[core], *t = &node; /* a copy: materialising operands may grow b->t */
    ts_op op = (ts_op)t->e.op;
    ts_kernel tmp = {0};
    region inner_r = region_of((int)t->e.kid[0], -1, -1);
    inner_r.operand = true;
    int *memo = fresh_memo(b);
    if (op == TS_OP_CONTRACT) { /* Σ_k a·b: the product is the inner expression */
        int a = region_expr(b, &tmp, &tmp.inner, &inner_r, memo, (int)t->e.kid[0]);
        inner_r.root = (int)t->e.kid[1];
        int c = region_expr(b, &tmp, &tmp.inner, &inner_r, memo, (int)t->e.kid[1]);
        ts_expr_push(&tmp.inner, (ts_xnode){.kind = TS_X_OP, .op = TS_OP_MUL, .kid = {a, c}});
    } else {
        region_expr(b, &tmp, &tmp.inner, &inner_r, memo, (int)t->e.kid[0]);
    }
    if (op == TS_OP_WSUM || op == TS_OP_ONLINE_WSUM) {
        free(memo);
        memo = fresh_memo(b);
        inner_r.root = (int)t->e.kid[1];
        region_expr(b, &tmp, &tmp.inner_weighted, &inner_r, memo, (int)t->e.kid[1]);
        const tnode *c = &b->t[t->e.kid[2]];
        memcpy(&tmp.c, &c->e.param[0], sizeof tmp.c);
    }
    free(memo);
    memo = fresh_memo(b);
    region fin = region_of(root, core, -1);
    region_expr(b, &tmp, &tmp.expr, &fin, memo, root);
    free(memo);
    ts_kernel *k = new_kernel(b, TS_KERNEL_REDUCE);
    k->acc = tmp.acc, k->nacc = tmp.nacc, k->cap_acc = tmp.cap_acc;
    k->expr = tmp.expr, k->inner = tmp.inner, k->inner_weighted = tmp.inner_weighted, k->c = tmp.c;
    k->red_axis = (int32_t)t->e.param[0];
    k->combine = op == TS_OP_REDUCE_MAX || op == TS_OP_TILE_MAX ? TS_COMBINE_MAX
                 : op == TS_OP_WSUM || op == TS_OP_ONLINE_WSUM  ? TS_COMBINE_WSUM
                                                                : TS_COMBINE_SUM;
    int32_t axes[TS_MAX_DIMS];
    int n = order_axes(b->t[root].axes, widest_operand(k->acc, k->nacc, b->t[root].axes), axes);
    new_output(b, root, axes, n, reduction_dtype(b, root), k);
}

/* References to term node `target` from the distinct nodes of the elementwise region rooted at i. */
static int refs_in_region(const builder *b, int i, int target, bool root, bool *seen) {
    ts_op op = (ts_op)b->t[i].e.op;
    if (seen[i] || !is_elementwise(op) || !inlined(b, i, root)) return 0;
    seen[i] = true;
    int n = 0;
    for (int c = 0; c < ts_op_arity(op); c++) {
        int kid = (int)b->t[i].e.kid[c];
        n += kid == target ? 1 : refs_in_region(b, kid, target, false, seen);
    }
    return n;
}

/* Whether every use of term node c is inside the region rooted at i (x·σ(x) reads the GEMM's result twice,
 * both in its epilogue), so that the region may compute c itself rather than load it. */
static bool used_only_in_region(const builder *b, int i, int c) {
    if (c == i) return true;
    bool *seen = ts_xcalloc((size_t)b->nt + 1, sizeof *seen);
    int n = refs_in_region(b, i, c, true, seen);
    free(seen);
    return n >= b->t[c].uses;
}

/* Whether term node i needs node c computed: c itself, or c among its operands, transitively, short of
 * values already in buffers. seen: the nodes explored without finding c. */
static bool needs_node(const builder *b, int i, int c, bool *seen) {
    if (i == c) return true;
    if (seen[i] || b->has_mat[i]) return false;
    seen[i] = true;
    for (int k = 0; k < ts_op_arity((ts_op)b->t[i].e.op); k++)
        if (needs_node(b, (int)b->t[i].e.kid[k], c, seen)) return true;
    return false;
}

/* Whether a core of a region other than c (a reduction it loads) needs c: then c cannot be computed in the
 * region's own kernel — the kernel reads that core, which must be computed before it from c (LayerNorm over
 * the batch of 2·(X·W): the column means read the GEMM's result, so the GEMM cannot have the normalisation
 * as its epilogue; it is computed first and the row kernel reads it). */
static bool another_core_needs(const builder *b, const int *cores, int nc, int c) {
    bool *seen = ts_xcalloc((size_t)b->nt + 1, sizeof *seen), needs = false;
    for (int j = 0; j < nc && !needs; j++) needs = cores[j] != c && needs_node(b, cores[j], c, seen);
    free(seen);
    return needs;
}

/* ---- ROW --------------------------------------------------------------------------------------- */

/* Whether term node c can be a stage of a ROW kernel over `axes` along axis k: a sum, max or row dot
 * product over k (not cut off by the search, unless `own`: a leaf of the kernel's own region, whose boundary
 * is the kernel's output) whose result varies only along the row's other axes. */
static bool row_stage(const builder *b, int c, bool own, uint64_t axes, int32_t k) {
    const tnode *t = &b->t[c];
    ts_op op = (ts_op)t->e.op;
    bool kind = op == TS_OP_REDUCE_SUM || op == TS_OP_REDUCE_MAX || op == TS_OP_TILE_SUM || op == TS_OP_TILE_MAX ||
                op == TS_OP_CONTRACT;
    if (!kind || (t->cut && !own) || (int32_t)t->e.param[0] != k || (t->axes & ~axes & ~(1ull << k))) return false;
    for (int a = 0; a < ts_op_arity(op); a++) /* operands within the row space */
        if (b->t[t->e.kid[a]].axes & ~axes) return false;
    return true;
}

/* Stages sorted by term index: operands before their users, so that a stage may read earlier ones. */
static void sort_stages(int *stage, int n) {
    for (int x = 1; x < n; x++)
        for (int y = x; y > 0 && stage[y - 1] > stage[y]; y--) {
            int t = stage[y];
            stage[y] = stage[y - 1], stage[y - 1] = t;
        }
}

/* The stages of a ROW kernel computing region `root`: reductions along k among the region's leaves and,
 * transitively, among their operands' leaves, each used only there (a reduction also read elsewhere is
 * computed once by its own kernel and loaded). Sorted kids first, so a stage may read earlier ones. */
static int row_stages(builder *b, int root, int32_t k, uint64_t axes, int *stage) {
    int n = 0, cores[16], nc = 0;
    region_cores(b, root, cores, &nc, true);
    const int nc0 = nc; /* the root's own: a boundary there is the kernel's output */
    for (int q = 0; q < nc; q++) { /* cores grows as stages contribute their operands' leaves */
        int c = cores[q];
        if (!row_stage(b, c, q < nc0, axes, k)) continue;
        bool dup = false;
        for (int j = 0; j < n; j++) dup |= stage[j] == c;
        if (dup) continue;
        if (n == TS_ROW_MAX_STAGES) return -1;
        stage[n++] = c;
        for (int a = 0; a < ts_op_arity((ts_op)b->t[c].e.op); a++) {
            int before = nc;
            region_cores(b, (int)b->t[c].e.kid[a], cores, &nc, reduce_root(b, (int)b->t[c].e.kid[a]));
            if (nc == 16 && before == 16) return -1;
        }
    }
    sort_stages(stage, n);
    return n;
}

/* References to term node c from the elementwise regions of the ROW kernel: the root's, each stage's
 * operands' and those of the per-row values sib[0..nsib) it writes from its stages (row_per_row_siblings). */
static int refs_in_row(const builder *b, int root, const int *stage, int n, const int *sib, int nsib, int c) {
    bool *seen = ts_xcalloc((size_t)b->nt + 1, sizeof *seen);
    int refs = refs_in_region(b, root, c, true, seen);
    for (int s = 0; s < nsib; s++) refs += sib[s] == c ? 0 : refs_in_region(b, sib[s], c, true, seen);
    for (int j = 0; j < n; j++)
        for (int a = 0; a < ts_op_arity((ts_op)b->t[stage[j]].e.op); a++) {
            int kid = (int)b->t[stage[j]].e.kid[a];
            refs += kid == c ? 1 : refs_in_region(b, kid, c, reduce_root(b, kid), seen);
        }
    free(seen);
    return refs;
}

/* The stage expression of reduction c: its operand, or the product of a row dot product's operands. */
static void row_stage_expr(builder *b, ts_kernel *tmp, int j, const region *stages, int c) {
    const tnode node = b->t[c], *t = &node; /* a copy: materialising operands may grow b->t */
    int *memo = fresh_memo(b);
    region r = *stages;
    r.root = (int)t->e.kid[0], r.operand = true;
    int v = region_expr(b, tmp, &tmp->stage[j], &r, memo, r.root);
    if (t->e.op == TS_OP_CONTRACT) {
        r.root = (int)t->e.kid[1];
        int w = region_expr(b, tmp, &tmp->stage[j], &r, memo, r.root);
        ts_expr_push(&tmp->stage[j], (ts_xnode){.kind = TS_X_OP, .op = TS_OP_MUL, .kid = {v, w}});
    }
    free(memo);
    ts_op op = (ts_op)t->e.op;
    tmp->stage_combine[j] = op == TS_OP_REDUCE_MAX || op == TS_OP_TILE_MAX ? TS_COMBINE_MAX : TS_COMBINE_SUM;
}

/* Marks in[] the nodes of the elementwise region rooted at i (the root included). */
static void mark_region(const builder *b, int i, bool root, bool *in) {
    ts_op op = (ts_op)b->t[i].e.op;
    if (in[i] || !is_elementwise(op) || !inlined(b, i, root)) return;
    in[i] = true;
    for (int c = 0; c < ts_op_arity(op); c++) mark_region(b, (int)b->t[i].e.kid[c], false, in);
}

/* Whether term node i is needed outside the ROW kernel: a graph output, or read by other kernels. */
static bool needed_outside_row(const builder *b, int root, const int *stage, int ns, const int *sib, int nsib, int i) {
    return b->t[i].output || refs_in_row(b, root, stage, ns, sib, nsib, i) < b->t[i].uses;
}

/* Whether the elementwise region rooted at i reads nothing but the stages (and constants and indices): what a
 * value written once per row may be computed from. */
static bool reads_only_stages(builder *b, int i, const int *stage, int ns) {
    int cores[16], nc = 0;
    region_cores(b, i, cores, &nc, true);
    for (int q = 0; q < nc; q++) {
        bool is_stage = false;
        for (int j = 0; j < ns; j++) is_stage |= cores[q] == stage[j];
        if (!is_stage) return false;
    }
    return nc < 16;
}

/* Graph outputs outside the region of `root`, once per row of the ROW kernel (over `row`, the other axes),
 * computed from its stages alone and not yet in a buffer — a log-sum-exp beside the softmax of the same
 * rows, max + log Σ exp — into sib; returns how many, at most max. */
static int row_per_row_siblings(builder *b, const bool *in, uint64_t row, const int *stage, int ns, int *sib, int max) {
    int n = 0;
    for (int i = 0; i < b->nt && n < max; i++) {
        const tnode *t = &b->t[i];
        if (in[i] || !t->output || b->has_mat[i] || t->axes != row || !is_elementwise((ts_op)t->e.op)) continue;
        bool is_stage = false;
        for (int j = 0; j < ns; j++) is_stage |= stage[j] == i;
        if (!is_stage && reads_only_stages(b, i, stage, ns)) sib[n++] = i;
    }
    return n;
}

/* Nodes the ROW kernel writes besides its root, needed outside it and not yet in a buffer: elementwise nodes
 * of the root's region spanning the whole row space (extra[0..*nx)), then, unless per_row, values once per
 * row — its stages and elementwise nodes over the row's other axes, of the root's region or, while the outputs
 * have room, graph outputs computed from the stages alone (rowout[0..*nr)). False when they are more than the
 * kernel's outputs hold,
 * or a stage that other kernels read cannot be written (a per-row kernel's, or one already in a buffer): that
 * stage is computed once, by its own kernel (the root's readers read this kernel's output: Σ_o w[o,i] before
 * a GEMV). */
static bool row_extra_outputs(builder *b, int root, int32_t k, bool per_row, const int *stage, int ns, int *extra,
                              int *nx, int *rowout, int *nr) {
    bool *in = ts_xcalloc((size_t)b->nt + 1, sizeof *in), ok = true;
    mark_region(b, root, true, in);
    const uint64_t whole = b->t[root].axes, row = k >= 0 ? whole & ~(1ull << k) : 0;
    int sib[TS_KERNEL_MAX_OUTS - 1], nsib = k < 0 ? 0 : row_per_row_siblings(b, in, row, stage, ns, sib, TS_KERNEL_MAX_OUTS - 1);
    *nx = *nr = 0;
    for (int i = root - 1; i >= 0 && ok; i--) {
        const tnode *t = &b->t[i];
        bool span = t->axes == whole, per = !per_row && t->axes == row && reads_only_stages(b, i, stage, ns);
        if (!in[i] || !(span || per) || b->has_mat[i] || !needed_outside_row(b, root, stage, ns, sib, nsib, i)) continue;
        if (*nx + *nr == TS_KERNEL_MAX_OUTS - 1) ok = false;
        else if (span) extra[(*nx)++] = i;
        else rowout[(*nr)++] = i;
    }
    /* A per-row kernel's outputs all span the row's other axes: what it writes once per row is written as its root
     * is (extra), not beside per-position outputs (rowout). */
    int *per_row_outs = per_row ? extra : rowout, *nper = per_row ? nx : nr;
    int taken = 0; /* siblings the outputs have room for; the others are left to kernels of their own */
    while (taken < nsib && *nx + *nr < TS_KERNEL_MAX_OUTS - 1) per_row_outs[(*nper)++] = sib[taken++];
    nsib = taken;
    for (int j = 0; j < ns && ok; j++) { /* a stage needed elsewhere too (the root's readers read the output) */
        const int c = stage[j];
        if (c == root || !needed_outside_row(b, root, stage, ns, sib, nsib, c)) continue;
        bool read_elsewhere = refs_in_row(b, root, stage, ns, sib, nsib, c) < b->t[c].uses;
        if (b->has_mat[c]) ok = !read_elsewhere; /* a returned one is computed by its own kernel */
        else if (*nx + *nr == TS_KERNEL_MAX_OUTS - 1) ok = false;
        else per_row_outs[(*nper)++] = c;
    }
    free(in);
    return ok;
}

/* Row reductions along k over the rows of `space` that the region does not need but the graph returns (a
 * row's max beside its normalised elements), appended to stage[0..ns) while there is room and sorted
 * operands first: the kernel computes them in stages of their own and writes them once per row, rather
 * than another kernel re-reading the rows. Returns the new count. */
static int row_siblings(builder *b, int root, int32_t k, uint64_t space, int *stage, int ns) {
    for (int c = 0; c < b->nt && ns < TS_ROW_MAX_STAGES; c++) {
        const tnode *t = &b->t[c];
        if (!t->output || b->has_mat[c] || t->axes != (space & ~(1ull << k)) || !row_stage(b, c, false, space, k)) continue;
        bool dup = false;
        for (int j = 0; j < ns; j++) dup |= stage[j] == c;
        bool *seen = ts_xcalloc((size_t)b->nt + 1, sizeof *seen);
        bool after_root = needs_node(b, c, root, seen);
        free(seen);
        if (!dup && !after_root) stage[ns++] = c;
    }
    sort_stages(stage, ns);
    return ns;
}

/* The axes of mask m less those of static size 1, which index nothing ([k, 1]: a vector written as a matrix). */
static uint64_t sized_axes(const builder *b, uint64_t m) {
    for (uint64_t r = m; r; r &= r - 1) {
        const ts_axis *ax = &b->x->g->axes[__builtin_ctzll(r)];
        if (!ax->dynamic && ax->size == 1) m &= ~(r & -r);
    }
    return m;
}

/* Whether every value the elementwise region rooted at i reads along axis k spans all of `space` — a row
 * of one tensor, not a product of operands broadcast along different axes (Σ_d x[m,d]·w[d,n] as rows over
 * (m, n) would recompute a GEMM on CUDA cores) — or is one vector along k alone, the same for every row (a
 * bias or a gain: Σ_o σ(h[b,o] + bias[o])). Stages of per-row ROW kernels must read such values. */
static bool reads_whole_rows(const builder *b, int i, bool root, uint64_t space, int32_t k) {
    const tnode *t = &b->t[i];
    if (!is_elementwise((ts_op)t->e.op) || !inlined(b, i, root)) {
        const uint64_t ax = sized_axes(b, t->axes);
        return !((t->axes >> k) & 1) || ax == sized_axes(b, space) || ax == (1ull << k);
    }
    for (int c = 0; c < ts_op_arity((ts_op)t->e.op); c++)
        if (!reads_whole_rows(b, (int)t->e.kid[c], false, space, k)) return false;
    return true;
}

/* Whether the elementwise region rooted at i reads, among values within `space`, one that spans all of it (*full)
 * — and nothing outside it (the return). */
static bool reads_within_space(const builder *b, int i, bool root, uint64_t space, bool *full) {
    const tnode *t = &b->t[i];
    if (!is_elementwise((ts_op)t->e.op) || !inlined(b, i, root)) {
        *full |= sized_axes(b, t->axes) == sized_axes(b, space);
        return !(t->axes & ~space);
    }
    for (int c = 0; c < ts_op_arity((ts_op)t->e.op); c++)
        if (!reads_within_space(b, (int)t->e.kid[c], false, space, full)) return false;
    return true;
}

/* Whether stage c of a per-row ROW kernel over `space` along k reads whole rows (reads_whole_rows), or reads one
 * tensor that spans the space weighted by smaller ones within it (Σ_e h[e, n, t]·g[t, e], a gated sum over
 * experts; Σ_j t[o, j, b]·x[b, j]): each element of the space is read once either way — only a product of operands
 * that are all smaller than the space (a GEMM's) would do more work than reading them. */
static bool stage_reads_rows(const builder *b, int c, uint64_t space, int32_t k) {
    const tnode *t = &b->t[c];
    bool whole = true, within = true, full = false;
    for (int a = 0; a < ts_op_arity((ts_op)t->e.op); a++) {
        const int kid = (int)t->e.kid[a];
        whole &= reads_whole_rows(b, kid, reduce_root(b, kid), space, k);
        within &= reads_within_space(b, kid, reduce_root(b, kid), space, &full);
    }
    return whole || (within && full);
}

/* Whether reduction c is a sum or max whose operand reads whole rows of one tensor along its axis (not a
 * contraction, nor a sum of products broadcast as a GEMM's). */
static bool reduces_whole_rows(const builder *b, int c) {
    const tnode *t = &b->t[c];
    if (t->e.op != TS_OP_REDUCE_SUM && t->e.op != TS_OP_REDUCE_MAX) return false;
    const int32_t k = (int32_t)t->e.param[0];
    return reads_whole_rows(b, (int)t->e.kid[0], reduce_root(b, (int)t->e.kid[0]), t->axes | (1ull << k), k);
}

/* Tries to cover region `root` with a ROW kernel: per row along the innermost axis of the region that its
 * reductions reduce over, the reductions in stages, then the region (and the nodes others need) written
 * over the whole row. per_row: the region does not span the reductions' axis (log-sum-exp: [m] from rows
 * along n; or the root is the last stage, as Σ (x - max x)²), and is written once per row; it needs
 * min_stages stages at least (a lone reduction is a REDUCE kernel unless the search marks it TS_MARK_ROW).
 * False, building nothing, when the region has no such reductions. */
static bool try_row(builder *b, int root, bool per_row, int min_stages) {
    int cores[16], nc = 0, stage[TS_ROW_MAX_STAGES], ns = -1;
    int32_t k = -1;
    region_cores(b, root, cores, &nc, true);
    for (int q = 0; q < nc && ns <= 0; q++) { /* the first reduction along an axis of the region picks k */
        const tnode *t = &b->t[cores[q]];
        if (!is_reduction((ts_op)t->e.op) || (((b->t[root].axes >> t->e.param[0]) & 1) != 0) == per_row) continue;
        k = (int32_t)t->e.param[0];
        ns = row_stages(b, root, k, b->t[root].axes | (1ull << k), stage);
    }
    if (ns <= 0 || ns < min_stages) return false;
    for (int j = 0; per_row && j < ns; j++) /* Σ x·x of one row, never a product broadcast as a GEMM's */
        if (!stage_reads_rows(b, stage[j], b->t[root].axes | (1ull << k), k)) return false;
    if (!per_row) ns = row_siblings(b, root, k, b->t[root].axes | (1ull << k), stage, ns);
    int extra[TS_KERNEL_MAX_OUTS - 1], rowout[TS_KERNEL_MAX_OUTS - 1], nx, nr;
    if (!row_extra_outputs(b, root, k, per_row, stage, ns, extra, &nx, rowout, &nr)) return false;
    for (int o = 0; o < nr; o++) extra[nx + o] = rowout[o];
    ts_kernel tmp = {0};
    region stages = {.root = root, .ncore = ns};
    memcpy(stages.core, stage, sizeof(int) * (size_t)ns);
    for (int j = 0; j < ns; j++) row_stage_expr(b, &tmp, j, &stages, stage[j]);
    int *memo = fresh_memo(b);
    region_expr(b, &tmp, &tmp.expr, &stages, memo, root);
    free(memo);
    for (int o = 0; o < nx + nr; o++) {
        memo = fresh_memo(b);
        region r = stages;
        r.root = extra[o];
        region_expr(b, &tmp, &tmp.extra_expr[o], &r, memo, extra[o]);
        free(memo);
    }
    ts_kernel *kr = new_kernel(b, TS_KERNEL_ROW);
    kr->acc = tmp.acc, kr->nacc = tmp.nacc, kr->cap_acc = tmp.cap_acc, kr->expr = tmp.expr;
    kr->nstage = ns, kr->nextra = nx + nr, kr->red_axis = k, kr->per_row = per_row;
    kr->columns = rows_are_columns(kr, b->t[root].axes & ~(1ull << k), k);
    memcpy(kr->stage, tmp.stage, sizeof tmp.stage);
    memcpy(kr->stage_combine, tmp.stage_combine, sizeof tmp.stage_combine);
    memcpy(kr->extra_expr, tmp.extra_expr, sizeof tmp.extra_expr);
    int32_t axes[TS_MAX_DIMS];
    int n = order_axes(b->t[root].axes, widest_operand(kr->acc, kr->nacc, b->t[root].axes), axes), nrow = 0;
    if (n > 0 && axes[n - 1] == k) reader_order(b, root, k, axes, n); /* the row still innermost */
    int32_t row_axes[TS_MAX_DIMS]; /* a per-row output's: the row's other axes, in the same order */
    for (int d = 0; d < n; d++)
        if (axes[d] != k) row_axes[nrow++] = axes[d];
    for (int o = 0; o < nx + nr; o++) {
        const int x = extra[o];
        const ts_dtype dt = is_reduction((ts_op)b->t[x].e.op) ? reduction_dtype(b, x) : dtype_of(b, x);
        if (o < nx) add_extra_output(b, o, x, dt, axes, n);
        else add_extra_output(b, o, x, dt, row_axes, nrow);
        kr = &b->p->k[b->p->nk - 1];
        kr->extra_per_row[o] = o >= nx;
    }
    bool ends_reduced = is_reduction((ts_op)b->t[root].e.op); /* the root is the last stage itself */
    new_output(b, root, axes, n, ends_reduced ? reduction_dtype(b, root) : dtype_of(b, root), kr);
    return true;
}

/* ---- GEMM -------------------------------------------------------------------------------------- */

/* The tensor-core templates take fp16 and bf16 operands. */
static bool half_types(const builder *b, int i) { return b->t[i].dtype == TS_FP16 || b->t[i].dtype == TS_BF16; }
static bool fp32_type(const builder *b, int i) { return b->t[i].dtype == TS_FP32; }

/* The dtype x is read in: its node's for fp16/bf16 nodes (a reduction's fp32 result that feeds a
 * tensor-core operand is rounded to the node's type), else its buffer's. */
static ts_dtype operand_dtype(const builder *b, int i, const ts_access *a) {
    return half_types(b, i) ? (ts_dtype)b->t[i].dtype : b->p->buf[a->buf].dtype;
}

/* A MAP kernel copying access a into a fresh contiguous temp of `dtype` with dims `order`. */
static ts_access copy_as(builder *b, const ts_access *a, ts_dtype dtype, const int32_t *order, int n) {
    ts_kernel *k = new_kernel(b, TS_KERNEL_MAP);
    int slot = kernel_access(k, a);
    ts_expr_push(&k->expr, (ts_xnode){.kind = TS_X_LOAD, .slot = slot});
    int buf = ts_plan_add_buffer(b->p, TS_BUF_TEMP, 0, dtype, order, n);
    k->out = contiguous_access(b, buf);
    return k->out;
}

/* x materialised in its operand dtype (see operand_dtype), in whatever layout it has. */
static ts_access typed_operand(builder *b, int i) {
    ts_access a = materialize(b, i);
    ts_dtype want = operand_dtype(b, i, &a);
    if (b->p->buf[a.buf].dtype == want) return a;
    int32_t order[TS_MAX_DIMS];
    memcpy(order, a.axis, sizeof(int32_t) * (size_t)a.ndim);
    return copy_as(b, &a, want, order, a.ndim);
}

/* x materialised with exactly the given dim order, contiguous, in its operand dtype (a MAP copy unless it
 * already is). */
static ts_access contiguous_as(builder *b, int i, const int32_t *order, int n) {
    ts_access a = materialize(b, i);
    const ts_buffer *B = &b->p->buf[a.buf];
    ts_access c = contiguous_access(b, a.buf);
    ts_dtype want = operand_dtype(b, i, &a);
    if (B->dtype == want && B->ndim == n && memcmp(B->axis, order, sizeof(int32_t) * (size_t)n) == 0 &&
        memcmp(&c, &a, sizeof a) == 0)
        return a;
    for (int j = 0; j < b->ncopies; j++) {
        const struct layout_copy *l = &b->copies[j];
        if (l->node == i && l->n == n && l->dtype == want && memcmp(l->order, order, sizeof(int32_t) * (size_t)n) == 0)
            return l->acc;
    }
    TS_GROW(b->copies, b->ncopies, b->cap_copies);
    struct layout_copy *l = &b->copies[b->ncopies++];
    *l = (struct layout_copy){.node = i, .n = n, .dtype = want};
    memcpy(l->order, order, sizeof(int32_t) * (size_t)n);
    l->acc = copy_as(b, &a, want, order, n);
    return l->acc;
}

/* x materialised so that `axis` has stride 1: as it is when it already does, else copied contiguous in
 * `order` (which ends with `axis`). */
static ts_access unit_stride(builder *b, int i, int32_t axis, const int32_t *order, int n) {
    ts_access a = typed_operand(b, i);
    int d = find_dim(&a, axis);
    if (d >= 0 && ts_sym_is_one(&a.stride[d])) return a;
    return contiguous_as(b, i, order, n);
}

/* The single axis in mask m, or -1. */
static int32_t only_axis(uint64_t m) {
    if (m == 0 || (m & (m - 1))) return -1;
    return (int32_t)__builtin_ctzll(m);
}

/* Whether x is read in place with stride 1 along axis (along the contracted one: as the own GEMMs' A operand
 * needs; along m: Aᵀ stored, which cuBLASLt reads as it is). */
static bool unit_along(builder *b, int i, int32_t axis) {
    ts_access a = materialize(b, i); /* every operand is materialised anyway */
    int d = find_dim(&a, axis);
    return d >= 0 && ts_sym_is_one(&a.stride[d]);
}

/* Whether the own GEMM templates read operand i as A with unit stride along its rows m (A_KM: 2-byte elements,
 * and more rows than a skinny GEMM's, whose narrow tiles need A k-contiguous). */
static bool own_reads_m_major(builder *b, int i, int32_t m) {
    const ts_axis *ax = &b->x->g->axes[m];
    return dtype_of(b, i) != TS_FP32 && (ax->dynamic || ax->size > TS_CONFIG_SKINNY_MAX_M) && unit_along(b, i, m);
}

/* Whether the GEMM result i over (batch bt, rows m, columns n) is read in an order with its rows m last
 * (reader_order_of: the graph output's own order, or a view's). */
static bool rows_read_last(const builder *b, int i, int32_t bt, int32_t m, int32_t n) {
    int32_t out[3];
    int no = 0;
    if (bt >= 0) out[no++] = bt;
    out[no++] = m, out[no++] = n;
    int32_t walk[TS_MAX_DIMS];
    const int32_t *want = reader_order_into(b, i, out, no, walk);
    return want && want[no - 1] == m;
}

/* Whether axes `outer` and `inner` nest into one index in access a (outer's stride is inner's times its
 * size): attention's kv heads over the group, a GEMM's two batch axes. */
static bool axes_nest(const builder *b, const ts_access *a, int32_t outer, int32_t inner) {
    int o = find_dim(a, outer), i = find_dim(a, inner);
    if (o < 0 || i < 0) return false;
    ts_sym d = ts_sym_add(a->stride[o], ts_sym_mul(ts_sym_mul(a->stride[i], sym_axis(b, inner)), ts_sym_const(-1)));
    return d.n == 0;
}

/* The two axes of mask two, outer (earlier in access a's layout) first. */
static void split_by_layout(const ts_access *a, uint64_t two, int32_t *outer, int32_t *inner) {
    int32_t x = (int32_t)__builtin_ctzll(two), y = (int32_t)(63 - __builtin_clzll(two));
    *outer = find_dim(a, x) < find_dim(a, y) ? x : y;
    *inner = *outer == x ? y : x;
}

/* Of the axes in mask m, the one of largest typical size; ties go to the one innermost in access a. */
static int32_t largest_axis(const ts_graph *g, uint64_t m, const ts_access *a) {
    int32_t best = -1;
    for (uint64_t r = m; r; r &= r - 1) {
        int32_t x = (int32_t)__builtin_ctzll(r);
        if (best < 0 || g->axes[x].size > g->axes[best].size ||
            (g->axes[x].size == g->axes[best].size && find_dim(a, x) > find_dim(a, best)))
            best = x;
    }
    return best;
}

static void grow_marks(builder *b);

/* contract_add node c (x + Σ_r c·d): whether x is a contraction this GEMM may run as its first operand pair —
 * nothing else reads it, the search put no boundary there, and it is no graph output. */
static bool base_contraction_inlinable(const builder *b, const tnode *c) {
    const tnode *x = &b->t[c->e.kid[2]];
    return x->e.op == TS_OP_CONTRACT && !b->has_mat[c->e.kid[2]] && !x->cut && !x->output && x->uses == 1;
}

/* The second operand pair of a two-pair GEMM (contract_add's Σ_r c·d) in the roles of the first: *a2 the one
 * over (batch, m, r), *b2 over (batch, r, n). False when the pair's axes do not line up with the first's. */
static bool second_pair_roles(const builder *b, const tnode *c, uint64_t batch, int32_t m, int32_t n, int *a2, int *b2) {
    int p = (int)c->e.kid[0], q = (int)c->e.kid[1];
    uint64_t P = b->t[p].axes, Q = b->t[q].axes, R = 1ull << c->e.param[0];
    if (!(P & R) || !(Q & R) || ((P & Q) & ~R) != batch) return false;
    uint64_t PM = P & ~Q & ~R, QN = Q & ~P & ~R;
    if (PM == 1ull << m && QN == 1ull << n) *a2 = p, *b2 = q;
    else if (PM == 1ull << n && QN == 1ull << m) *a2 = q, *b2 = p;
    else return false;
    return half_types(b, p) && half_types(b, q);
}

/* contract_add node i that will not be one two-pair GEMM: rewritten as add(contract(c, d), x), so that the
 * contraction takes x in its epilogue (or x's GEMM takes the contraction's result). */
static void split_contract_add(builder *b, int i) {
    ts_enode e = {.op = TS_OP_CONTRACT, .kid = {b->t[i].e.kid[0], b->t[i].e.kid[1]}, .param = {b->t[i].e.param[0]}};
    int c = add_tnode(b, &e, b->t[i].axes, b->t[i].dtype);
    grow_marks(b);
    b->t[c].uses = 1;
    b->t[i].e = (ts_enode){.op = TS_OP_ADD, .kid = {(uint32_t)c, b->t[i].e.kid[2]}};
}

/* A GEMM over activations with two free axes against a shared weight ([b, t, d]·[d, n]) is one GEMM of b·t rows
 * where every access spanning either axis spans both with `outer` outside `inner` (A, the output, a residual;
 * a bias spans neither): no batch of b GEMMs of t rows each, whose last row tile is mostly padding when t is not a
 * multiple of the tile (ViT's 197 tokens: 2 tiles of 128 for 197 rows; bench/NOTES.md run 124). Which of the two
 * is outside is read from the strides (an access may list its dims in another order than they nest). */
static bool rows_nest(const builder *b, const ts_kernel *k, int32_t outer, int32_t inner) {
    for (int s = -1; s < k->nacc; s++) {
        const ts_access *a = s < 0 ? &k->out : &k->acc[s];
        bool has_o = find_dim(a, outer) >= 0, has_i = find_dim(a, inner) >= 0;
        if (has_o != has_i || (has_o && !axes_nest(b, a, outer, inner))) return false;
    }
    return true;
}

static void merge_rows(const builder *b, ts_kernel *k, int32_t x, int32_t y) {
    const ts_graph *g = b->x->g;
    if ((double)g->axes[x].size * (double)g->axes[y].size > INT32_MAX) return; /* M is a 32-bit size */
    if (rows_nest(b, k, x, y)) k->m_axis = y, k->m_outer = x, k->batch_axis = -1;
    else if (rows_nest(b, k, y, x)) k->m_axis = x, k->m_outer = y, k->batch_axis = -1;
}

/* Tries to cover region `root` with a GEMM whose accumulator(s) are the contraction(s) `c0` (and the dual
 * picks; or a contract_add's two operand pairs). Returns false, building nothing, when the shapes do not fit
 * the template. */
static bool try_gemm(builder *b, int root, int c0, int c1) {
    const tnode cn = b->t[c0], *c = &cn; /* a copy: materialising operands may grow b->t */
    int dual = -1;
    int32_t kax;
    int opa, opb, opb1 = -1;
    bool two_k = c->e.op == TS_OP_CONTRACT_ADD;
    if (c->as_row && c->e.op == TS_OP_CONTRACT) return false; /* the search asks for a ROW kernel: a dot a row */
    if (two_k) { /* x + Σ_r c·d with x = Σ_k a·b: (a, b) is the first pair, (c, d) the second */
        if (!base_contraction_inlinable(b, c)) return false;
        const tnode *x = &b->t[c->e.kid[2]];
        kax = (int32_t)x->e.param[0], opa = (int)x->e.kid[0], opb = (int)x->e.kid[1];
    } else if (c->e.op == TS_OP_CONTRACT) {
        kax = (int32_t)c->e.param[0], opa = (int)c->e.kid[0], opb = (int)c->e.kid[1];
    } else { /* pick of a dual */
        dual = (int)c->e.kid[0];
        const tnode *d = &b->t[dual];
        kax = (int32_t)d->e.param[0], opa = (int)d->e.kid[0], opb = (int)d->e.kid[1], opb1 = (int)d->e.kid[2];
        if (b->t[opb].axes != b->t[opb1].axes) return false;
    }
    /* fp16/bf16 operands (the tensor-core templates), or fp32 ones (gemm_f32.cuh's 3xTF32 kernel, or cuBLASLt's
     * SGEMM under --allow-cublas; one operand pair) */
    bool fp32 = fp32_type(b, opa) && fp32_type(b, opb) && (opb1 < 0 || fp32_type(b, opb1)) && !two_k;
    if (!fp32 && (!half_types(b, opa) || !half_types(b, opb) || (opb1 >= 0 && !half_types(b, opb1)))) return false;
    uint64_t A = b->t[opa].axes, B = b->t[opb].axes, K = 1ull << kax;
    if (!(A & K) || !(B & K)) return false;
    uint64_t batch = (A & B) & ~K, M = A & ~B & ~K, N = B & ~A & ~K;
    /* activations with leading axes against a weight ([b, t, k]·[k, n], as every Linear over a batch of
     * sequences; [b, h, t, k]·[k, n] per head): a GEMM batched over the activations' other free axes (two
     * merge into one batch index when they nest), the weight broadcast (batch stride 0). The operand with
     * the several free axes is A. */
    int nfree_a = __builtin_popcountll(A & ~B & ~K), nfree_b = __builtin_popcountll(B & ~A & ~K);
    /* a vector against a matrix (x[k]·W[k, n]: a decode step written without its token axis; X[b, t, d]·w[d]; the
     * softmax-weighted sum p[b, t]·X[b, t, d] of attention pooling): the vector is A, its rows the size-1 axis
     * "_one" it does not span (stride 0), so that the GEMM runs in its skinny form, streaming the matrix at the
     * DRAM rate, where a row or column kernel reads it at 50-70% (bench/NOTES.md run 168: 1.39x on x[4096]·W) —
     * unless the search marks the contraction TS_MARK_ROW (declined above: small products, where a GEMM's launch and
     * fill cost more than the row kernel), or K is shorter than one 64-wide K-slice (a sum over 8 experts: most of
     * each tile's loads and MMAs would be empty) */
    const int32_t one = ts_graph_find_axis(b->x->g, "_one");
    bool vector_a = false;
    if (one >= 0 && b->x->g->axes[kax].size >= 64 && !fp32 && (dual < 0 || nfree_a == 0) && !two_k &&
        (nfree_a == 0) != (nfree_b == 0) && nfree_a + nfree_b <= 2) { /* a dual's vector is its A already */
        if (nfree_b == 0) {
            int t = opa;
            opa = opb, opb = t;
            uint64_t tm = M;
            M = N, N = tm;
            nfree_b = nfree_a, nfree_a = 0;
        }
        vector_a = true, M = 1ull << one;
    }
    if (!batch && dual < 0 && (nfree_b == 2 || nfree_b == 3) && nfree_a == 1) {
        int t = opa;
        opa = opb, opb = t;
        uint64_t tm = M;
        M = N, N = tm;
    }
    /* no shared axis and two free axes each side (X[b, t, d]·W[two, d, f]: a fused gate/up weight sliced after its
     * product): B's outer free axis is the batch, A broadcast along it (batch stride 0), A's two free axes the rows */
    if (!batch && dual < 0 && !two_k && (nfree_a == 2 || vector_a) && nfree_b == 2) {
        ts_access b0 = materialize(b, opb);
        int32_t outer_n, inner_n;
        split_by_layout(&b0, N, &outer_n, &inner_n);
        batch = 1ull << outer_n, N &= ~batch;
    }
    int nfree = __builtin_popcountll(M);
    bool broadcast_b = !batch && (nfree == 2 || nfree == 3) && only_axis(N) >= 0;
    /* one batch axis and two free axes of A that B is broadcast along ([b, h, t, k]·[h, k, n] per head, an einsum's
     * output projection): a GEMM batched over the shared axis whose rows run over both free axes, merged (A and the
     * result laid out [batch, outer, inner, ·] so that they nest) */
    bool merged_rows = only_axis(batch) >= 0 && nfree == 2 && only_axis(N) >= 0 && dual < 0 && !two_k;
    if (two_k && (broadcast_b || __builtin_popcountll(batch) > 1)) return false; /* one plain (batched) GEMM */
    int32_t m = broadcast_b || merged_rows ? (int32_t)__builtin_ctzll(M) : only_axis(M), n = only_axis(N);
    /* two batch axes (Q·Kᵀ over a batch of sequences and their heads) are one batch index when they nest */
    bool two_batches = __builtin_popcountll(batch) == 2 && dual < 0;
    int32_t bt = batch ? (two_batches ? (int32_t)__builtin_ctzll(batch) : only_axis(batch)) : -1, bo = -1;
    if (m < 0 || n < 0 || (batch && bt < 0)) return false;
    /* epilogue operands must be indexable by (batch, m, n) */
    int cores[16], nc = 0;
    region_cores(b, root, cores, &nc, true);
    for (int j = 0; j < nc; j++)
        if (cores[j] != c0 && cores[j] != c1 && (b->t[cores[j]].axes & ~(batch | M | N))) return false;
    if (two_batches) { /* the outer one in A's layout is the merged batch's outer axis */
        ts_access a0 = materialize(b, opa);
        split_by_layout(&a0, batch, &bo, &bt);
    }
    int32_t outer = -1, inner = -1; /* broadcast_b or merged_rows, two free axes: A's in its layout's order */
    int32_t a_order[3] = {-1, -1, -1}; /* broadcast_b, three free axes: the result's order when A's nests */
    if (merged_rows) {
        ts_access a0 = materialize(b, opa);
        split_by_layout(&a0, M, &outer, &inner);
        m = inner;
        const ts_graph *g = b->x->g;
        if ((double)g->axes[outer].size * (double)g->axes[inner].size > INT32_MAX) return false; /* M: 32 bits */
    } else if (broadcast_b && nfree == 2) {
        ts_access a0 = materialize(b, opa);
        split_by_layout(&a0, M, &outer, &inner);
        /* the GEMM's rows run along the larger of the two (typical sizes): a batch of one-token sequences is
         * one GEMM over the sequences, not a batch of one-row GEMMs; strides stay A's (no copy) */
        const ts_graph *g = b->x->g;
        m = g->axes[inner].size >= g->axes[outer].size ? inner : outer;
        bt = m == inner ? outer : inner;
    } else if (broadcast_b) { /* three: rows along the largest, the other two the merged batch */
        ts_access a0 = materialize(b, opa);
        m = largest_axis(b->x->g, M, &a0);
        split_by_layout(&a0, M & ~(1ull << m), &bo, &bt); /* A is copied so that they nest if they do not */
        if (axes_nest(b, &a0, bo, bt)) order_axes(M, &a0, a_order); /* then the result keeps A's order */
    }
    /* a contraction commutes: when the result is read with its rows last (a graph output or view stored
     * [n, m]: Y = (X·W)ᵀ), the GEMM computes Yᵀ = Wᵀ·Xᵀ — writing that order itself, with no transposing copy
     * after it — where neither operand then needs a copy (A k-contiguous or, 2-byte, read M-major; B either
     * way); a weight broadcast over a batch then becomes the A shared by every batch (a pointwise convolution
     * channel-first in and out, Y[b, n, t] = Σ_c W[n, c]·X[b, c, t]: A = W, B = X[b] n-contiguous). Else it takes as
     * A the operand that needs no transposing copy (a weight stored [k, n] is a B operand as it is; as A it would
     * be copied to [n, k] on every call). Decided only now: every check that can refuse the region has passed,
     * so the operands are materialised anyway. */
    bool swapped = false;
    if (dual < 0 && !vector_a && (!broadcast_b || nfree == 2) && !merged_rows && bo < 0 && !two_k && rows_read_last(b, root, bt, m, n) &&
        (unit_along(b, opb, kax) || own_reads_m_major(b, opb, n)) && (unit_along(b, opa, kax) || unit_along(b, opa, m))) {
        int t = opa;
        opa = opb, opb = t;
        int32_t tm = m;
        m = n, n = tm;
        swapped = true, broadcast_b = false; /* A is the one shared by the batch now: stride 0 along bt */
    }
    if (!swapped && dual < 0 && !broadcast_b && !merged_rows && !unit_along(b, opa, kax) && unit_along(b, opb, kax)) {
        int t = opa;
        opa = opb, opb = t;
        int32_t tm = m;
        m = n, n = tm;
    }
    int opa2 = -1, opb2 = -1;
    int32_t rax = two_k ? (int32_t)c->e.param[0] : -1;
    if (two_k && !second_pair_roles(b, c, batch, m, n, &opa2, &opb2)) return false;
    int32_t aorder[4], border[4];
    int na = 0, nb = 0;
    if (bo >= 0) aorder[na++] = bo, border[nb++] = bo;
    const bool a_broadcast = merged_rows && !((b->t[opa].axes >> bt) & 1); /* A read by every batch (stride 0) */
    if (bt >= 0 && !a_broadcast && ((b->t[opa].axes >> bt) & 1)) aorder[na++] = bt;
    if (bt >= 0) border[nb++] = bt;
    if (merged_rows) aorder[na++] = outer;
    if (!vector_a) aorder[na++] = m;
    aorder[na++] = kax;
    /* A with unit stride along m (Aᵀ stored) is read as it is — by the 2-byte templates (A_KM: imm-trans-a,
     * ldmatrix.trans) where the GEMM has more rows than a skinny one (whose narrow tiles need A k-contiguous), by
     * cuBLASLt (its op T) for fp32 when allowed — else through a k-contiguous copy */
    /* (the own templates also under a weight broadcast over a batch of A's: a pointwise convolution over
     * channel-first activations, A = X[b] [c, t] read M-major) */
    bool a_transposed = bo < 0 && dual < 0 && !two_k && !merged_rows && !unit_along(b, opa, kax) &&
                        (own_reads_m_major(b, opa, m) ? !broadcast_b || nfree == 2
                                                      : b->library_gemms && !broadcast_b && unit_along(b, opa, m));
    ts_access a = a_transposed ? typed_operand(b, opa) : unit_stride(b, opa, kax, aorder, na);
    if ((bo >= 0 && !axes_nest(b, &a, bo, bt)) || (merged_rows && !axes_nest(b, &a, outer, inner)))
        a = contiguous_as(b, opa, aorder, na);
    ts_access bacc = typed_operand(b, opb);
    if (bo >= 0 && !broadcast_b && !axes_nest(b, &bacc, bo, bt)) { /* [outer, inner, k, n]: nests */
        border[nb++] = kax, border[nb++] = n;
        bacc = contiguous_as(b, opb, border, nb);
        nb -= 2;
    }
    int kd = find_dim(&bacc, kax), nd = find_dim(&bacc, n);
    bool kn = ts_sym_is_one(&bacc.stride[nd]), nk = ts_sym_is_one(&bacc.stride[kd]);
    if (!kn && !nk) {
        border[nb++] = kax, border[nb++] = n;
        bacc = contiguous_as(b, opb, border, nb);
        kn = true;
    }
    ts_access bacc1 = {0};
    if (opb1 >= 0) { /* the second B with the first's strides */
        bacc1 = typed_operand(b, opb1);
        if (memcmp(bacc1.stride, bacc.stride, sizeof bacc.stride) != 0 || bacc1.ndim != bacc.ndim ||
            memcmp(bacc1.axis, bacc.axis, sizeof bacc.axis) != 0) {
            int32_t o[3];
            int no = 0;
            if (bt >= 0) o[no++] = bt;
            o[no++] = kn ? kax : n, o[no++] = kn ? n : kax;
            bacc = contiguous_as(b, opb, o, no);
            bacc1 = contiguous_as(b, opb1, o, no);
        }
    }
    ts_kernel tmp = {0};
    int ia = kernel_access(&tmp, &a), ib = kernel_access(&tmp, &bacc), ib1 = opb1 >= 0 ? kernel_access(&tmp, &bacc1) : -1;
    int ia2 = -1, ib2 = -1;
    if (two_k) { /* the second pair in the first's layouts: A2 r-contiguous, B2 as B (n or r contiguous) */
        int32_t o[3];
        int no = 0;
        if (bt >= 0) o[no++] = bt;
        o[no++] = m, o[no++] = rax;
        ts_access a2 = unit_stride(b, opa2, rax, o, no);
        ts_access b2 = typed_operand(b, opb2);
        int unit = find_dim(&b2, kn ? n : rax);
        if (unit < 0 || !ts_sym_is_one(&b2.stride[unit])) {
            no = 0;
            if (bt >= 0) o[no++] = bt;
            o[no++] = kn ? rax : n, o[no++] = kn ? n : rax;
            b2 = contiguous_as(b, opb2, o, no);
        }
        ia2 = kernel_access(&tmp, &a2), ib2 = kernel_access(&tmp, &b2);
    }
    region r = region_of(root, c0, c1);
    int *memo = fresh_memo(b);
    region_expr(b, &tmp, &tmp.expr, &r, memo, root);
    free(memo);
    bool unmerged = false; /* a merged batch or rows: epilogue operands index them by the inner axis's stride alone */
    for (int s = 0; (bo >= 0 || merged_rows) && s < tmp.nacc; s++) {
        const int32_t x = bo >= 0 ? bo : outer, y = bo >= 0 ? bt : inner;
        bool has_o = find_dim(&tmp.acc[s], x) >= 0, has_i = find_dim(&tmp.acc[s], y) >= 0;
        unmerged |= has_o != has_i || (has_o && !axes_nest(b, &tmp.acc[s], x, y));
    }
    if (unmerged || b->has_mat[c0] || (c1 >= 0 && b->has_mat[c1])) {
        /* an epilogue operand needed the contraction itself (rmsnorm of a residual): it is in a buffer
         * now, so the region reads it instead of computing it again */
        free(tmp.acc);
        free(tmp.expr.node);
        return false;
    }
    ts_kernel *k = new_kernel(b, TS_KERNEL_GEMM);
    k->acc = tmp.acc, k->nacc = tmp.nacc, k->cap_acc = tmp.cap_acc, k->expr = tmp.expr;
    k->a = ia, k->b0 = ib, k->b1 = ib1, k->b_kn = kn;
    k->two_k = two_k, k->a2 = ia2, k->b2 = ib2, k->red_axis2 = rax;
    k->m_axis = m, k->n_axis = n, k->batch_axis = bt, k->batch_outer = bo, k->red_axis = kax;
    int32_t out[4];
    int no = 0;
    if (broadcast_b && nfree == 2) out[no++] = outer, out[no++] = inner; /* A's order, whichever is the batch */
    else if (broadcast_b && a_order[0] >= 0) memcpy(out, a_order, sizeof a_order), no = 3;
    else if (bt >= 0) {
        if (bo >= 0) out[no++] = bo;
        out[no++] = bt;
    }
    if (merged_rows) out[no++] = outer;
    if (!vector_a && (!broadcast_b || (nfree == 3 && a_order[0] < 0))) out[no++] = m;
    out[no++] = n;
    if (bo < 0 && a_order[0] < 0 && !merged_rows) reader_order(b, root, n, out, no);
    new_output(b, root, out, no, dtype_of(b, root), k);
    if (broadcast_b && nfree == 2) merge_rows(b, k, outer, inner);
    if (merged_rows) {
        TS_ASSERT(rows_nest(b, k, outer, inner));
        k->m_outer = outer; /* the batch stays */
    }
    return true;
}

/* ---- ATTENTION --------------------------------------------------------------------------------- */

/* The score region's leaves: exactly one contraction over the head dim, iotas, constants, and tensors that
 * are no reductions (a [t_q, t_kv] mask, ALiBi's slope per head, a padding mask per sequence); *tensor_axes:
 * the axes those tensors vary along (try_attention checks that the score functor can index them all). */
static bool score_fits(builder *b, int s, int *dot, uint64_t *tensor_axes) {
    int cores[16], nc = 0, ndot = 0;
    region_cores(b, s, cores, &nc, true);
    *tensor_axes = 0;
    for (int j = 0; j < nc; j++) {
        if (b->t[cores[j]].e.op == TS_OP_CONTRACT) *dot = cores[j], ndot++;
        else if (is_reduction((ts_op)b->t[cores[j]].e.op)) return false;
        else *tensor_axes |= b->t[cores[j]].axes;
    }
    return ndot == 1;
}

/* Whether node i is a constant that masks a score out: −inf, or a finite one at or below −65504 — finfo(fp16).min, as
 * Hugging Face's eager attention masks with its dtype's finfo.min — whose exponential the softmax of a row with any
 * key kept rounds to 0 (e^x underflows past x = −104 below the row's maximum), so a tile of only such keys adds
 * nothing and may be skipped; the functor still computes the value written wherever it runs. */
static bool masks_score_out(const builder *b, int i) {
    double v;
    return constant_of(b, i, &v) && v <= -65504.0;
}

/* Keys a score expression is −inf for, whatever Q, K and the inputs hold (what lets the kernel skip key
 * tiles; the functor masks them either way): every key after the query (future), and every key more than
 * `window` before it (j < i − window, where has_window). */
typedef struct {
    bool future, has_window;
    double window;
} mask_bounds;

/* Keys masked where either of a or b masks them (an add of two masks, a condition's "or"). */
static mask_bounds masks_union(mask_bounds a, mask_bounds b) {
    mask_bounds u = {a.future || b.future, a.has_window || b.has_window, 0};
    u.window = !a.has_window ? b.window : !b.has_window ? a.window : fmin(a.window, b.window);
    return u;
}

/* Keys masked where both a and b mask them (a where's two branches). */
static mask_bounds masks_both(mask_bounds a, mask_bounds b) {
    return (mask_bounds){a.future && b.future, a.has_window && b.has_window, fmax(a.window, b.window)};
}

/* Node i is iota along axis ax plus a constant (returned in *plus): iota, or an add of iota and a constant. */
static bool iota_plus(const builder *b, int i, int32_t ax, double *plus) {
    const tnode *t = &b->t[i];
    *plus = 0;
    if (t->e.op == TS_OP_IOTA) return t->e.param[0] == ax;
    if (t->e.op != TS_OP_ADD) return false;
    for (int side = 0; side < 2; side++) {
        const tnode *x = &b->t[t->e.kid[!side]];
        if (x->e.op == TS_OP_IOTA && x->e.param[0] == ax && constant_of(b, (int)t->e.kid[side], plus))
            return isfinite(*plus);
    }
    return false;
}

static mask_bounds cond_marks(const builder *b, int i, int32_t q, int32_t k);
static mask_bounds cond_zeros(const builder *b, int i, int32_t q, int32_t k);

/* A 0/1 where(c, 1, 0) or where(c, 0, 1) at i (a boolean mask buffer, tril(ones) as the importer computes it): the keys
 * it marks (marks) or is zero for (!marks), as c's — the same keys, or the other ones. */
static mask_bounds where01(const builder *b, int i, int32_t q, int32_t k, bool marks) {
    const tnode *t = &b->t[i];
    double a, z;
    mask_bounds none = {0};
    if (!constant_of(b, (int)t->e.kid[1], &a) || !constant_of(b, (int)t->e.kid[2], &z)) return none;
    if (a == 1 && z == 0) return marks ? cond_marks(b, (int)t->e.kid[0], q, k) : cond_zeros(b, (int)t->e.kid[0], q, k);
    if (a == 0 && z == 1) return marks ? cond_zeros(b, (int)t->e.kid[0], q, k) : cond_marks(b, (int)t->e.kid[0], q, k);
    return none;
}

/* The keys a condition at i marks (nonzero) for query q: less_than(iota q, iota k) the future keys,
 * less_than(iota k + w, iota q) those before q − w (a sliding window's far side); a max (an "or" of 0/1
 * conditions) what either side marks. */
static mask_bounds cond_marks(const builder *b, int i, int32_t q, int32_t k) {
    const tnode *t = &b->t[i];
    mask_bounds none = {0};
    if (t->e.op == TS_OP_LESS_THAN) {
        const int l = (int)t->e.kid[0], r = (int)t->e.kid[1];
        double w, zero;
        if (iota_plus(b, l, q, &zero) && zero == 0 && b->t[r].e.op == TS_OP_IOTA && b->t[r].e.param[0] == k)
            return (mask_bounds){.future = true};
        if (iota_plus(b, l, k, &w) && b->t[r].e.op == TS_OP_IOTA && b->t[r].e.param[0] == q)
            return (mask_bounds){.has_window = true, .window = w};
        return none;
    }
    if (t->e.op == TS_OP_MAX)
        return masks_union(cond_marks(b, (int)t->e.kid[0], q, k), cond_marks(b, (int)t->e.kid[1], q, k));
    if (t->e.op == TS_OP_WHERE) return where01(b, i, q, k, true);
    return none;
}

/* Node i is iota q less iota k (add(iota q, neg(iota k)), either order): a query's distance back to a key. */
static bool query_minus_key(const builder *b, int i, int32_t q, int32_t k) {
    const tnode *t = &b->t[i];
    if (t->e.op != TS_OP_ADD) return false;
    for (int side = 0; side < 2; side++) {
        const tnode *x = &b->t[t->e.kid[side]], *y = &b->t[t->e.kid[!side]];
        if (x->e.op == TS_OP_IOTA && x->e.param[0] == q && y->e.op == TS_OP_NEG && b->t[y->e.kid[0]].e.op == TS_OP_IOTA &&
            b->t[y->e.kid[0]].e.param[0] == k)
            return true;
    }
    return false;
}

/* The keys a 0/1 condition at i is zero for (a keep-mask: where(c, score, −inf) masks them, as a boolean attn_mask
 * reads): 1 − x where x marks them (cond_marks: 1 − (q < k) keeps the past); a product (an "and") where either side
 * is zero; a max (an "or") where both are; less_than(q − k, w) from k ≤ q − w on — a sliding window's far side,
 * window ⌈w⌉ − 1 (positions are integers: k < q − (⌈w⌉ − 1)). */
static mask_bounds cond_zeros(const builder *b, int i, int32_t q, int32_t k) {
    const tnode *t = &b->t[i];
    const int x = (int)t->e.kid[0], y = (int)t->e.kid[1];
    mask_bounds none = {0};
    double v;
    switch ((ts_op)t->e.op) {
    case TS_OP_ADD:
        for (int side = 0; side < 2; side++) {
            const tnode *n = &b->t[side ? x : y];
            if (constant_of(b, side ? y : x, &v) && v == 1 && n->e.op == TS_OP_NEG) return cond_marks(b, (int)n->e.kid[0], q, k);
        }
        return none;
    case TS_OP_MUL: return masks_union(cond_zeros(b, x, q, k), cond_zeros(b, y, q, k));
    case TS_OP_MAX: return masks_both(cond_zeros(b, x, q, k), cond_zeros(b, y, q, k));
    case TS_OP_LESS_THAN:
        if (query_minus_key(b, x, q, k) && constant_of(b, y, &v) && isfinite(v) && v >= 1)
            return (mask_bounds){.has_window = true, .window = ceil(v) - 1};
        /* k < q + 1 keeps the past: zero for the future keys (triu(full(−inf), 1) as torch writes it in forward) */
        if (b->t[x].e.op == TS_OP_IOTA && b->t[x].e.param[0] == k && iota_plus(b, y, q, &v) && v == 1)
            return (mask_bounds){.future = true};
        return none;
    case TS_OP_WHERE: return where01(b, i, q, k, false);
    default: return none;
    }
}

/* The keys the score expression at i is −inf for: a where(c, −inf, ·) masks what c marks, a where(c, ·, −inf)
 * what c is zero for (cond_zeros), reached from the score only through operations that keep −inf: an addend of an
 * add, a cast, a product with a positive constant, the branches of a where (what both mask). Anything else may bring a masked score back
 * (tanh(−inf) = −1, max(−inf, x) = x, exp(−inf) = 0): nothing is skipped then, the functor alone masks. */
static mask_bounds score_masks(const builder *b, int i, int32_t q, int32_t k) {
    const tnode *t = &b->t[i];
    const int a = (int)t->e.kid[0], c = (int)t->e.kid[1];
    mask_bounds none = {0};
    switch ((ts_op)t->e.op) {
    case TS_OP_CAST: return score_masks(b, a, q, k);
    case TS_OP_ADD: return masks_union(score_masks(b, a, q, k), score_masks(b, c, q, k));
    case TS_OP_MUL: {
        double v;
        for (int side = 0; side < 2; side++)
            if (constant_of(b, side ? a : c, &v) && v > 0 && isfinite(v)) return score_masks(b, side ? c : a, q, k);
        return none;
    }
    case TS_OP_WHERE: {
        const int y = (int)t->e.kid[2];
        if (masks_score_out(b, c)) return masks_union(cond_marks(b, a, q, k), score_masks(b, y, q, k));
        if (masks_score_out(b, y)) return masks_union(cond_zeros(b, a, q, k), score_masks(b, c, q, k)); /* a keep-mask */
        return masks_both(score_masks(b, c, q, k), score_masks(b, y, q, k));
    }
    default: return none;
    }
}

/* Whether every term of s is a multiple of 8 (16-byte steps of 2-byte elements). */
static bool sym_multiple_of_8(const ts_sym *s) {
    for (int i = 0; i < s->n; i++)
        if (s->t[i].coef % 8 != 0) return false;
    return true;
}

/* An attention operand as the kernel reads it: the head dim contiguous, every other stride and the
 * offset in 16-byte steps, its dims ordered outer to inner; otherwise a contiguous copy in `order`. */
static ts_access attention_operand(builder *b, int i, int32_t dim, const int32_t *order, int n) {
    ts_access a = typed_operand(b, i);
    bool ok = a.ndim == n && sym_multiple_of_8(&a.offset);
    for (int d = 0; ok && d < a.ndim; d++)
        ok = a.axis[d] == dim ? ts_sym_is_one(&a.stride[d]) : sym_multiple_of_8(&a.stride[d]);
    return ok ? a : contiguous_as(b, i, order, n);
}

/* The query position axis among Q's axes that K lacks: the one an iota of the score pairs with the key
 * axis (a mask), else the innermost in Q's layout; the others are query-only heads (GQA groups). */
static int32_t iota_axis_in(const builder *b, int i, uint64_t candidates) {
    const tnode *t = &b->t[i];
    if (t->e.op == TS_OP_IOTA && (candidates & (1ull << t->e.param[0]))) return (int32_t)t->e.param[0];
    if (!is_elementwise((ts_op)t->e.op)) return -1;
    for (int c = 0; c < ts_op_arity((ts_op)t->e.op); c++) {
        int32_t a = iota_axis_in(b, (int)t->e.kid[c], candidates);
        if (a >= 0) return a;
    }
    return -1;
}

static int32_t query_axis(builder *b, int score, int q, uint64_t candidates, int32_t kax) {
    (void)kax;
    if (!candidates) return -1;
    int32_t a = only_axis(candidates);
    if (a >= 0) return a;
    a = iota_axis_in(b, score, candidates);
    if (a >= 0) return a;
    ts_access qa = materialize(b, q);
    for (int d = qa.ndim - 1; d >= 0; d--)
        if (candidates & (1ull << qa.axis[d])) return qa.axis[d];
    return -1;
}

/* An attention kernel writes O with its value dim contiguous and any strides along the other axes. When a
 * reader of O expects an order (reader_order_of: the graph output in the kernel's dtype, or a view) that ends
 * in the value dim (with kv head `outer` just before query-only head `inner` when they must nest; -1: no
 * constraint), out becomes that order, so the reader needs no copy: [b, t, h, d] after [b, h, t, d] operands. */
static void attention_output_order(const builder *b, int i, int32_t dvax, int32_t outer, int32_t inner, int32_t *out,
                                   int n) {
    int32_t walk[TS_MAX_DIMS];
    const int32_t *want = reader_order_into(b, i, out, n, walk);
    if (!want || want[n - 1] != dvax) return;
    int at_outer = -1, at_inner = -1;
    for (int j = 0; j < n; j++) {
        if (want[j] == outer) at_outer = j;
        if (want[j] == inner) at_inner = j;
    }
    if (outer >= 0 && at_inner != at_outer + 1) return;
    memcpy(out, want, sizeof(int32_t) * (size_t)n);
}

static bool try_attention(builder *b, int i) {
    const tnode node = b->t[i], *t = &node; /* a copy: materialising operands may grow b->t */
    int32_t kax = (int32_t)t->e.param[0];
    int s = (int)t->e.kid[0], v = (int)t->e.kid[1], cnode = (int)t->e.kid[2], dot = -1;
    uint64_t tensor_axes;
    if (b->t[cnode].e.op != TS_OP_CONSTANT || !score_fits(b, s, &dot, &tensor_axes)) return false;
    const tnode *d = &b->t[dot];
    int32_t dax = (int32_t)d->e.param[0];
    int q = (int)d->e.kid[0], kk = (int)d->e.kid[1];
    if (b->t[q].axes & (1ull << kax)) q = (int)d->e.kid[1], kk = (int)d->e.kid[0];
    uint64_t Q = b->t[q].axes, K = b->t[kk].axes, V = b->t[v].axes, KB = 1ull << kax, DB = 1ull << dax;
    if (!(K & KB) || (Q & KB) || !(Q & DB) || !(K & DB)) return false;
    uint64_t kvheads = K & ~KB & ~DB;
    int32_t qax = query_axis(b, s, q, Q & ~K & ~DB, kax);
    if (qax < 0) return false;
    uint64_t qheads = Q & ~(1ull << qax) & ~DB;
    if ((kvheads & ~qheads) || !(V & KB)) return false;
    int32_t dvax = only_axis(V & ~KB & ~kvheads);
    if (dvax < 0 || (V & ~KB & ~(1ull << dvax)) != kvheads) return false;
    if (!half_types(b, q) || b->t[q].dtype != b->t[kk].dtype || b->t[q].dtype != b->t[v].dtype) return false;
    if (__builtin_popcountll(qheads & ~kvheads) > 1 || __builtin_popcountll(kvheads) > 2) return false;
    int64_t D = b->x->g->axes[dax].size;
    if (D != b->x->g->axes[dvax].size || !ts_config_attention_head_dim_ok(D)) return false;
    /* two axes shared by Q, K and V (a batch of sequences, each with its kv heads): the outer one in Q's
     * layout is the kernel's batch, the other its kv heads */
    int32_t bat = -1;
    if (__builtin_popcountll(kvheads) == 2) {
        ts_access q0 = typed_operand(b, q);
        int32_t kv;
        split_by_layout(&q0, kvheads, &bat, &kv);
        kvheads &= ~(1ull << bat), qheads &= ~(1ull << bat);
    }
    /* layouts: Q [batch, heads..., t_q, d], K [batch, kvheads..., t_kv, d], V [batch, kvheads..., t_kv, dv],
     * contiguous (when they must be copied) */
    int32_t qo[TS_MAX_DIMS], ko[TS_MAX_DIMS], vo[TS_MAX_DIMS], hq[TS_MAX_DIMS];
    int nh = order_axes(qheads, NULL, hq), nb = bat >= 0, nkv = nb;
    if (bat >= 0) qo[0] = ko[0] = vo[0] = bat;
    for (int h = 0; h < nh; h++) /* kv heads first, in Q's order, then the query-only heads (the group) */
        if (kvheads & (1ull << hq[h])) ko[nkv] = vo[nkv] = hq[h], nkv++;
    int32_t heads[TS_MAX_DIMS];
    int nq = 0;
    for (int h = nb; h < nkv; h++) heads[nq++] = ko[h];
    int64_t group = 1;
    for (int h = 0; h < nh; h++)
        if (!(kvheads & (1ull << hq[h]))) heads[nq++] = hq[h], group *= b->x->g->axes[hq[h]].size;
    int32_t kvh, qh; /* the axes the kernel's (batch, head) index: what the score functor can read along */
    ts_attention_head_axes(nq, heads, group, &kvh, &qh);
    uint64_t indexed = (1ull << qax) | KB | (bat >= 0 ? 1ull << bat : 0) | (kvh >= 0 ? 1ull << kvh : 0) |
                       (qh >= 0 ? 1ull << qh : 0);
    if (tensor_axes & ~indexed) return false;
    memcpy(qo + nb, heads, sizeof(int32_t) * (size_t)nq);
    qo[nb + nq] = qax, qo[nb + nq + 1] = dax;
    ko[nkv] = kax, ko[nkv + 1] = dax;
    vo[nkv] = kax, vo[nkv + 1] = dvax;
    ts_kernel tmp = {0};
    ts_access qa = attention_operand(b, q, dax, qo, nb + nq + 2), ka = attention_operand(b, kk, dax, ko, nkv + 2),
              va = attention_operand(b, v, dvax, vo, nkv + 2);
    if (bat >= 0 && group > 1 && !axes_nest(b, &qa, heads[0], heads[1])) {
        /* with a batch, GQA's heads must form one head index (the kernel's batch is taken) */
        qa = contiguous_as(b, q, qo, nb + nq + 2);
    }
    region r = region_of(s, dot, -1);
    int *memo = fresh_memo(b);
    region_expr(b, &tmp, &tmp.expr, &r, memo, s); /* a mask the score reads: its first access slots */
    free(memo);
    ts_kernel *k = new_kernel(b, TS_KERNEL_ATTENTION);
    k->acc = tmp.acc, k->nacc = tmp.nacc, k->cap_acc = tmp.cap_acc, k->expr = tmp.expr;
    k->a = kernel_access(k, &qa), k->b0 = kernel_access(k, &ka), k->b1 = kernel_access(k, &va);
    memcpy(&k->c, &b->t[cnode].e.param[0], sizeof k->c);
    k->red_axis = kax, k->m_axis = qax, k->n_axis = dvax, k->batch_axis = bat;
    k->heads_ndim = nq;
    memcpy(k->head_axis, heads, sizeof(int32_t) * (size_t)nq);
    k->group = group;
    const mask_bounds mb = score_masks(b, s, qax, kax);
    k->causal = mb.future;
    k->windowed = mb.has_window, k->window = mb.window;
    int32_t out[TS_MAX_DIMS]; /* O in Q's layout, with the value dim for the head dim */
    for (int j = 0; j < qa.ndim; j++) out[j] = qa.axis[j] == dax ? dvax : qa.axis[j];
    bool nest = bat >= 0 && group > 1; /* the kernel's batch is taken: GQA's heads must form one head index */
    attention_output_order(b, i, dvax, nest ? heads[0] : -1, nest ? heads[1] : -1, out, qa.ndim);
    new_output(b, i, out, qa.ndim, dtype_of(b, i), k);
    return true;
}

/* ---- covering ---------------------------------------------------------------------------------- */

static void emit_region(builder *b, int i) {
    ts_op op = (ts_op)b->t[i].e.op;
    if ((op == TS_OP_ONLINE_WSUM || op == TS_OP_WSUM) && try_attention(b, i)) return;
    int cores[16], nc = 0;
    region_cores(b, i, cores, &nc, true);
    /* x + Σ_r c·d (contract_add) that only this region reads: one GEMM over both contractions' K when x is one
     * (the two-pair form); otherwise the sum as written, x added in the contraction's epilogue */
    for (int j = 0; j < nc; j++) {
        int c = cores[j];
        if (b->t[c].e.op != TS_OP_CONTRACT_ADD || b->has_mat[c] || !used_only_in_region(b, i, c) ||
            another_core_needs(b, cores, nc, c))
            continue;
        if (b->fuse && try_gemm(b, i, c, -1)) return;
        split_contract_add(b, c);
        emit_region(b, i);
        return;
    }
    /* a contraction with several users is computed once, into a buffer, rather than in each epilogue */
    for (int j = nc - 1; j >= 0; j--) /* the last single-use contraction accumulates; others are loaded */
        if (b->t[cores[j]].e.op == TS_OP_CONTRACT && !b->has_mat[cores[j]] && used_only_in_region(b, i, cores[j]) &&
            !another_core_needs(b, cores, nc, cores[j]) && (nc == 1 || b->fuse) && try_gemm(b, i, cores[j], -1))
            return;
    for (int x = 0; b->fuse && x < nc; x++) /* both halves of a dual contraction: one dual GEMM */
        for (int y = 0; y < nc; y++) {
            const tnode *p = &b->t[cores[x]], *q = &b->t[cores[y]];
            if (p->e.op == TS_OP_PICK && q->e.op == TS_OP_PICK && p->e.param[0] == 0 && q->e.param[0] == 1 &&
                p->e.kid[0] == q->e.kid[0] && try_gemm(b, i, cores[x], cores[y]))
                return;
        }
    /* reductions in stages along one row, written once per row (the search may cut a stage off instead):
     * several reductions in the region, or one whose operand holds the earlier stages, as Σ (x - max x)² */
    if (b->fuse && try_row(b, i, true, 2)) return;
    /* one reduction whose finish reads only tensors over the reduction's output axes; preferably one that
     * nothing else reads (a max that a sum also needs is computed once, into a buffer, and loaded). When
     * fusing, the finish of a sum or max of whole rows of one tensor may read other values but not other
     * reductions (a per-row bias added to a row's max: one kernel; two reductions are the row kernels'
     * business, a contraction or a sum of broadcast products with a bias a GEMM's) */
    for (int q = 0; q < 2 * nc; q++) {
        int j = q % nc;
        if (!is_reduction((ts_op)b->t[cores[j]].e.op) || (q < nc && !used_only_in_region(b, i, cores[j]))) continue;
        bool fits = nc == 1 || !b->fuse || reduces_whole_rows(b, cores[j]);
        for (int o = 0; o < nc && fits; o++)
            fits = o == j || (!(b->t[cores[o]].axes & ~b->t[cores[j]].axes) &&
                              (!b->fuse || !is_reduction((ts_op)b->t[cores[o]].e.op)));
        if (fits && (i == cores[j] || b->fuse)) {
            if (i == cores[j] && b->t[i].e.op == TS_OP_CONTRACT && try_gemm(b, i, i, -1)) return;
            if (b->fuse && b->t[cores[j]].as_row && try_row(b, i, true, 1)) return;
            emit_reduce(b, cores[j], i);
            return;
        }
    }
    if (b->fuse && try_row(b, i, false, 1)) return;
    emit_map(b, i);
}

/* A dual contraction used other than by one region: its two contractions as two GEMMs; pick reads one. */
static void grow_marks(builder *b) {
    b->has_mat = ts_xrealloc(b->has_mat, sizeof(bool) * (size_t)b->nt);
    b->mat = ts_xrealloc(b->mat, sizeof(ts_access) * (size_t)b->nt);
    b->dual_buf = ts_xrealloc(b->dual_buf, sizeof *b->dual_buf * (size_t)b->nt);
    b->has_mat[b->nt - 1] = false;
}

static void emit_dual(builder *b, int i) {
    const tnode *d = &b->t[i];
    uint64_t axes = d->axes & ~(1ull << ts_graph_find_axis(b->x->g, "_pair"));
    int8_t dtype = d->dtype;
    int c[2];
    for (int w = 0; w < 2; w++) {
        ts_enode e = {.op = TS_OP_CONTRACT, .kid = {b->t[i].e.kid[0], b->t[i].e.kid[1 + w]}, .param = {b->t[i].e.param[0]}};
        c[w] = add_tnode(b, &e, axes, dtype);
        grow_marks(b);
    }
    for (int w = 0; w < 2; w++) b->dual_buf[i][w] = materialize(b, c[w]).buf;
    b->has_mat[i] = true;
}

/* View vid as an access over its axes into its source's contiguous layout (buf unset): offset and strides
 * recovered as monomials of the dynamic sizes; false when they are not. */
static bool view_access(const builder *b, int vid, ts_access *out) {
    const ts_egir_view *v = &b->x->views[vid], *v2 = b->views2 ? &b->views2[vid] : v;
    *out = (ts_access){.ndim = v->view.ndim};
    if (!sym_sample(b, v->view.offset, v2->view.offset, &out->offset)) return false;
    for (int d = 0; d < v->view.ndim; d++) {
        out->axis[d] = v->view.axis[d];
        if (!sym_sample(b, v->view.stride[d], v2->view.stride[d], &out->stride[d])) return false;
    }
    return true;
}

/* View v (static sizes) read straight from its source's access `have`, whatever that layout: each view dim
 * steps within one source axis (source_dim_of; a permute, a split, a slice, a window, a broadcast), so its
 * stride in the natural layout is a multiple of that axis's and becomes the same multiple of the axis's stride
 * in `have`; the offset likewise, axis by axis. A GEMM that wrote its result [b, o, p] for the output view that
 * reads it so is then read in place, where a copy to the natural [o, b, p] came first. false where a dim spans
 * two source axes (a merge), a stride is negative, or a size is dynamic. */
static bool view_through_layout(const builder *b, const ts_egir_view *v, const ts_access *have, ts_access *out) {
    const ts_graph *g = b->x->g;
    int64_t S[TS_MAX_DIMS], reach[TS_MAX_DIMS], off = v->view.offset;
    int at[TS_MAX_DIMS]; /* the dim of `have` over each source axis */
    if (have->ndim != v->src_ndim || off < 0) return false;
    for (int e = 0; e < v->src_ndim; e++)
        if (g->axes[v->src_axis[e]].dynamic || (at[e] = find_dim(have, v->src_axis[e])) < 0) return false;
    natural_strides(g, v, S);
    *out = (ts_access){.buf = have->buf, .ndim = v->view.ndim, .offset = have->offset};
    for (int e = 0; e < v->src_ndim; e++) { /* the offset's index along each source axis */
        reach[e] = off / S[e], off %= S[e];
        out->offset = ts_sym_add(out->offset, ts_sym_mul(have->stride[at[e]], ts_sym_const(reach[e])));
    }
    for (int d = 0; d < v->view.ndim; d++) {
        out->axis[d] = v->view.axis[d];
        out->stride[d] = ts_sym_const(0);
        if (g->axes[v->view.axis[d]].dynamic) return false;
        if (v->view.size[d] == 1 || v->view.stride[d] == 0) continue;
        int e = source_dim_of(v, S, g, d);
        if (e < 0) return false;
        int64_t step = v->view.stride[d] / S[e];
        reach[e] += step * (v->view.size[d] - 1);
        out->stride[d] = ts_sym_mul(have->stride[at[e]], ts_sym_const(step));
    }
    for (int e = 0; e < v->src_ndim; e++)
        if (reach[e] >= g->axes[v->src_axis[e]].size) return false;
    for (int d = v->view.ndim - 1; d >= 0; d--) /* size-1 dims: the stride a contiguous layout gives them */
        if (v->view.size[d] == 1)
            out->stride[d] = d + 1 < v->view.ndim ? ts_sym_mul(out->stride[d + 1], sym_axis(b, v->view.axis[d + 1]))
                                                  : ts_sym_const(1);
    return true;
}

static ts_access materialize_view(builder *b, int i) {
    const tnode node = b->t[i], *t = &node; /* a copy: materialising the source may grow b->t */
    int vid = (int)t->e.param[0];
    const ts_egir_view *v = &b->x->views[vid];
    ts_access have = materialize(b, (int)t->e.kid[0]), out;
    const ts_buffer *B = &b->p->buf[have.buf];
    ts_access natural = contiguous_over(b, have.buf, v->src_axis, v->src_ndim);
    bool in_natural_layout = B->ndim == v->src_ndim && memcmp(&natural, &have, sizeof have) == 0;
    if (!in_natural_layout && B->dtype == operand_dtype(b, (int)t->e.kid[0], &have) && view_through_layout(b, v, &have, &out))
        return out;
    ts_access src = contiguous_as(b, (int)t->e.kid[0], v->src_axis, v->src_ndim);
    if (!view_access(b, vid, &out)) {
        if (!b->err) b->err = ts_strdup("a view whose strides are not monomials of the dynamic sizes");
        return src;
    }
    out.buf = src.buf;
    out.offset = ts_sym_add(src.offset, out.offset);
    return out;
}

static bool unit_axis(const builder *b, int32_t axis) { return ts_sym_equal(sym_axis(b, axis), ts_sym_const(1)); }

/* `over` (an access indexed by view i's axes) re-expressed over the axes of the view's source, when every
 * axis of the view is a run of consecutive source axes merged (RoPE's [.., two, d_half] read as [.., d_h]),
 * the runs in any order (a permutation of them as well): each source axis then lands in one view axis at a
 * fixed multiple of that axis's stride. false for any other view (an offset, a slice, a split, a broadcast). */
static bool access_through_merge(const builder *b, int i, const ts_access *over, ts_access *out) {
    int vid = (int)b->t[i].e.param[0];
    const ts_egir_view *v = &b->x->views[vid];
    ts_access va;
    int64_t off0;
    if (!view_access(b, vid, &va) || !ts_sym_const_value(&va.offset, &off0) || off0 != 0) return false;
    const ts_sym *stride = va.stride;
    *out = (ts_access){.buf = over->buf, .offset = over->offset, .ndim = v->src_ndim};
    bool used[TS_MAX_DIMS] = {false};
    ts_sym inner = ts_sym_const(1); /* the contiguous stride of the next source axis to place */
    for (int j = v->src_ndim - 1; j >= 0;) {
        int d = 0; /* the view axis whose run starts at source axis j: its stride is j's contiguous stride */
        while (d < v->view.ndim && (used[d] || unit_axis(b, v->view.axis[d]) || !ts_sym_equal(stride[d], inner))) d++;
        if (d == v->view.ndim) return false;
        used[d] = true;
        ts_sym end = ts_sym_mul(inner, sym_axis(b, v->view.axis[d]));
        ts_sym step = ts_access_stride(over, v->view.axis[d]), mult = ts_sym_const(1);
        do { /* the source axes that make up view axis d */
            if (j < 0) return false;
            out->axis[j] = v->src_axis[j];
            out->stride[j] = ts_sym_mul(step, mult);
            mult = ts_sym_mul(mult, sym_axis(b, v->src_axis[j]));
            inner = ts_sym_mul(inner, sym_axis(b, v->src_axis[j]));
            j--;
        } while (!ts_sym_equal(inner, end));
    }
    for (int d = 0; d < v->view.ndim; d++) /* every view axis placed, or of size 1 */
        if (!used[d] && !unit_axis(b, v->view.axis[d])) return false;
    return true;
}

/* UPDATE (an append): a MAP kernel computes the appended value — the region rooted at it, inlined — straight
 * into the inout input's own buffer, at index size(p) - 1 of the written axis (a block of rows from
 * size(p) - size(rows) on, its rows axis stepping along the written one); the update's value is then
 * that buffer, which its readers load after this kernel (they reach the buffer through this term, and the
 * checker lets nothing else read the input). A value that is a merging reshape of an elementwise result
 * nothing else reads (RoPE's rotated key, [.., two, d_half] appended as [.., d_h]) is computed in the same
 * kernel, over the source's axes, rather than by a kernel of its own before the copy. */
static void emit_update(builder *b, int i) {
    const tnode node = b->t[i], *t = &node; /* a copy: materialising the value may grow b->t */
    int32_t w = (int32_t)t->e.param[0], at = (int32_t)t->e.param[1], rows = (int32_t)t->e.param[2];
    int value = (int)t->e.kid[1];
    ts_access dest = materialize(b, (int)t->e.kid[0]);
    if (b->p->buf[dest.buf].kind != TS_BUF_INPUT && !b->err)
        b->err = ts_strdup("an append whose destination is not an inout input");
    ts_access out = {.buf = dest.buf, .offset = dest.offset};
    for (int d = 0; d < dest.ndim; d++) {
        if (dest.axis[d] != w) {
            out.axis[out.ndim] = dest.axis[d];
            out.stride[out.ndim++] = dest.stride[d];
            continue;
        }
        /* the first row written: size(at) - 1, or size(at) - size(rows) for a block whose rows step along w */
        ts_sym first = ts_sym_add(sym_axis(b, at), rows >= 0 ? ts_sym_mul(ts_sym_const(-1), sym_axis(b, rows))
                                                              : ts_sym_const(-1));
        out.offset = ts_sym_add(out.offset, ts_sym_mul(first, dest.stride[d]));
        if (rows >= 0) out.axis[out.ndim] = rows, out.stride[out.ndim++] = dest.stride[d];
    }
    int src = b->t[value].e.op == TS_OP_VIEW ? (int)b->t[value].e.kid[0] : -1;
    ts_access through;
    if (b->fuse && src >= 0 && b->t[value].uses == 1 && b->t[src].uses == 1 && !b->has_mat[src] &&
        !b->t[src].cut && is_elementwise((ts_op)b->t[src].e.op) && access_through_merge(b, value, &out, &through))
        value = src, out = through;
    ts_kernel *k = map_of_region(b, value, NULL, 0);
    k->out = out;
    b->has_mat[i] = true;
    b->mat[i] = dest;
}

static ts_access materialize(builder *b, int i) {
    if (b->has_mat[i]) return b->mat[i];
    const tnode node = b->t[i], *t = &node; /* a copy: emitting kernels may grow b->t */
    ts_op op = (ts_op)t->e.op;
    if (op == TS_OP_INPUT) {
        int in = (int)t->e.param[0];
        if (b->input_buf[in] < 0) {
            const ts_node *n = &b->x->g->nodes[b->x->g->inputs[in].node];
            b->input_buf[in] = ts_plan_add_buffer(b->p, TS_BUF_INPUT, in, n->dtype, n->axis, n->ndim);
        }
        b->mat[i] = contiguous_access(b, b->input_buf[in]);
    } else if (op == TS_OP_VIEW) {
        ts_access v = materialize_view(b, i); /* may grow b->mat: assign after the call */
        b->mat[i] = v;
    } else if (op == TS_OP_UPDATE) {
        emit_update(b, i);
        return b->mat[i];
    } else if (op == TS_OP_PICK) {
        int dual = (int)t->e.kid[0], which = (int)t->e.param[0]; /* read before emit_dual grows b->t */
        if (!b->has_mat[dual]) emit_dual(b, dual);
        ts_access a = contiguous_access(b, b->dual_buf[dual][which]);
        b->mat[i] = a;
    } else {
        emit_region(b, i);
        return b->mat[i];
    }
    b->has_mat[i] = true;
    return b->mat[i];
}

/* Writes term node `root` into output o in the output's dim order and dtype. */
static ts_sym numel_of(const builder *b, const int32_t *axes, int n) {
    ts_sym s = ts_sym_const(1);
    for (int d = 0; d < n; d++) s = ts_sym_mul(s, sym_axis(b, axes[d]));
    return s;
}

/* Whether access a reads all of its buffer, contiguously in a's own axis order: the buffer read through
 * a reshape that merges or splits its axes (group norm's [b, g, c] read as [b, f]). */
static bool covers_contiguously(const builder *b, const ts_access *a) {
    const ts_buffer *B = &b->p->buf[a->buf];
    ts_access c = contiguous_over(b, a->buf, a->axis, a->ndim);
    ts_sym na = numel_of(b, a->axis, a->ndim), nb = numel_of(b, B->axis, B->ndim);
    return memcmp(a, &c, sizeof *a) == 0 && memcmp(&na, &nb, sizeof na) == 0;
}

static void emit_output(builder *b, int o, int root) {
    const ts_output *out = &b->x->g->outputs[o];
    ts_access a = materialize(b, root);
    if (out->inout) { /* an updated inout input: already in its own buffer */
        if ((b->p->buf[a.buf].kind != TS_BUF_INPUT || b->p->buf[a.buf].index != out->input) && !b->err)
            b->err = ts_strfmt("the updated '%s' is not computed in its own buffer", out->name);
        return;
    }
    ts_buffer *B = &b->p->buf[a.buf];
    ts_access c = contiguous_access(b, a.buf);
    bool in_order = a.ndim == out->ref.view.ndim &&
                    memcmp(a.axis, out->ref.view.axis, sizeof(int32_t) * (size_t)a.ndim) == 0;
    bool same = B->kind == TS_BUF_TEMP && B->dtype == out->dtype && in_order &&
                (memcmp(&a, &c, sizeof a) == 0 || covers_contiguously(b, &a));
    if (same) { /* the producing kernel writes the output directly (when the output is a reshape of it, B
                   keeps the kernel's axes: the same bytes in the same order) */
        B->kind = TS_BUF_OUTPUT;
        B->index = o;
        return;
    }
    ts_kernel *k = new_kernel(b, TS_KERNEL_MAP);
    ts_expr_push(&k->expr, (ts_xnode){.kind = TS_X_LOAD, .slot = kernel_access(k, &a)});
    int buf = ts_plan_add_buffer(b->p, TS_BUF_OUTPUT, o, out->dtype, out->ref.view.axis, out->ref.view.ndim);
    k->out = contiguous_access(b, buf);
}

/* Renumbers temporaries after outputs took some of them over. */
void ts_plan_number_temps(ts_plan *p) {
    int n = 0;
    for (int i = 0; i < p->nbuf; i++)
        if (p->buf[i].kind == TS_BUF_TEMP) p->buf[i].index = n++;
}

/* The baseline reads Σ_k a·b (a product used only by the sum) as one contraction, as eager frameworks do. */
static void contractions_of_products(builder *b) {
    for (int i = 0; i < b->nt; i++) {
        tnode *t = &b->t[i];
        if (t->e.op != TS_OP_REDUCE_SUM) continue;
        const tnode *m = &b->t[t->e.kid[0]];
        if (m->e.op != TS_OP_MUL || m->uses != 1) continue;
        t->e = (ts_enode){.op = TS_OP_CONTRACT, .kid = {m->e.kid[0], m->e.kid[1]}, .param = {t->e.param[0]}};
    }
}

/* Whether output root a is lowered before output root c: outputs that others are computed from last (the
 * kernel of `norm(x + r)` also writes `x + r`); of two independent ones, the one over more axes first (the
 * row kernel of a normalised row also computes the row's max that the graph returns: row_siblings); else
 * the later term first. */
static bool lowered_before(builder *b, int a, int c) {
    bool *seen = ts_xcalloc((size_t)b->nt + 1, sizeof *seen);
    bool a_needs_c = needs_node(b, a, c, seen);
    memset(seen, 0, sizeof *seen * ((size_t)b->nt + 1));
    bool c_needs_a = needs_node(b, c, a, seen);
    free(seen);
    if (a_needs_c != c_needs_a) return a_needs_c;
    int na = __builtin_popcountll(b->t[a].axes), nc = __builtin_popcountll(b->t[c].axes);
    return na != nc ? na > nc : a > c;
}

int ts_plan_lower(const ts_egir *x, const ts_egir_view *views2, const ts_enode **best, const uint8_t *mark, bool fuse,
                  ts_plan *p, char **err) {
    return ts_plan_lower_with(x, views2, best, mark, fuse, false, p, err);
}

int ts_plan_lower_with(const ts_egir *x, const ts_egir_view *views2, const ts_enode **best, const uint8_t *mark,
                       bool fuse, bool library_gemms, ts_plan *p, char **err) {
    builder b = {.x = x, .views2 = views2, .mark = mark, .fuse = fuse, .library_gemms = library_gemms, .p = p};
    if (ts_dyn_of(x->g, &b.dyn) != 0) {
        *err = ts_strfmt("more than %d dynamic axes", TS_SYM_MAX_DYN);
        return -1;
    }
    for (int d = 0; d < b.dyn.n; d++) b.b1[d] = x->g->axes[b.dyn.axis[d]].size;
    uint32_t bound = ts_eg_id_bound(x->eg);
    int *memo = ts_xmalloc(sizeof(int) * (bound + 1));
    for (uint32_t i = 0; i < bound; i++) memo[i] = -1;
    int roots[64];
    for (int o = 0; o < x->g->noutputs && o < 64; o++) roots[o] = build_term(&b, best, memo, x->output_class[o]);
    free(memo);
    if (!fuse) contractions_of_products(&b);
    b.has_mat = ts_xcalloc((size_t)b.nt + 1, sizeof(bool));
    b.mat = ts_xcalloc((size_t)b.nt + 1, sizeof(ts_access));
    b.dual_buf = ts_xcalloc((size_t)b.nt + 1, sizeof *b.dual_buf);
    b.input_buf = ts_xmalloc(sizeof(int) * (size_t)(x->g->ninputs + 1));
    for (int i = 0; i < x->g->ninputs; i++) b.input_buf[i] = -1;
    int order[64], nout = x->g->noutputs < 64 ? x->g->noutputs : 64;
    for (int o = nout - 1; o >= 0; o--) b.t[roots[o]].output = true, b.t[roots[o]].output_index = (int8_t)o, order[o] = o;
    for (int i = 1; i < nout; i++)
        for (int j = i; j > 0 && lowered_before(&b, roots[order[j]], roots[order[j - 1]]); j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int o = 0; o < nout; o++) emit_output(&b, order[o], roots[order[o]]);
    ts_plan_number_temps(p);
    for (int i = 0; i < p->nk; i++) ts_config_choose(x->g, p, &p->k[i]);
    for (int i = 0; i < p->nk; i++) ts_plan_give_row_grid_scratch(x->g, p, i), ts_plan_give_gemm_chunk_scratch(x->g, p, i);
    free(b.has_mat);
    free(b.mat);
    free(b.dual_buf);
    free(b.copies);
    free(b.input_buf);
    free(b.t);
    if (b.err) {
        *err = b.err;
        return -1;
    }
    return 0;
}

void ts_kernel_free(ts_kernel *k) {
    free(k->acc);
    free(k->expr.node);
    free(k->inner.node);
    free(k->inner_weighted.node);
    for (int j = 0; j < k->nstage; j++) free(k->stage[j].node);
    for (int j = 0; j < k->nextra; j++) free(k->extra_expr[j].node);
    for (int j = 0; j < k->nrowstat; j++) free(k->rowstat[j].node);
    free(k->pre.node);
    for (int j = 0; j < TS_ROW_MAX_STAGES; j++) free(k->merge[j].node);
}

void ts_plan_free(ts_plan *p) {
    for (int i = 0; i < p->nk; i++) ts_kernel_free(&p->k[i]);
    free(p->k);
    free(p->buf);
    free(p->name);
    memset(p, 0, sizeof *p);
}

/* ---- description ------------------------------------------------------------------------------- */

static const char *kind_name(const ts_kernel *k) {
    if (k->kind == TS_KERNEL_REDUCE)
        return k->combine == TS_COMBINE_MAX ? "reduce-max" : k->combine == TS_COMBINE_WSUM ? "reduce-online-softmax" : "reduce-sum";
    if (k->kind == TS_KERNEL_GEMM) return k->b1 >= 0 ? (k->nrowstat ? "dual-gemm+rowstats" : "dual-gemm")
                                                     : k->nrowstat ? "gemm+rowstats" : k->row_parts ? "gemm+rows" : "gemm";
    if (k->kind == TS_KERNEL_ROW && k->columns) return "row-columns";
    return ts_kernel_kind_name(k->kind);
}

char *ts_kernel_describe(const ts_plan *p, const ts_graph *g, int i) {
    const ts_kernel *k = &p->k[i];
    const ts_buffer *B = &p->buf[k->out.buf];
    char dims[256] = "";
    size_t len = 0;
    for (int d = 0; d < k->out.ndim && len < sizeof dims - 32; d++) /* the output space (an append: one slice) */
        len += (size_t)snprintf(dims + len, sizeof dims - len, "%s%s", d ? "," : "", g->axes[k->out.axis[d]].name);
    const char *into = B->kind == TS_BUF_INPUT ? g->inputs[B->index].name : NULL; /* an append, in place */
    return ts_strfmt("%s [%s]%s%s%s%s%s%s", kind_name(k), dims, k->red_axis >= 0 ? " over " : "",
                     k->red_axis >= 0 ? g->axes[k->red_axis].name : "", k->two_k ? "+" : "",
                     k->two_k ? g->axes[k->red_axis2].name : "", into ? " into " : "", into ? into : "");
}

char *ts_plan_describe(const ts_plan *p, const ts_graph *g) {
    char *s = ts_strdup("");
    for (int i = 0; i < p->nk; i++) {
        char *k = ts_kernel_describe(p, g, i);
        char *line = ts_strfmt("%s%s%s", s, *s ? "; " : "", k);
        free(s), free(k);
        s = line;
    }
    return s;
}

/* ---- stitching --------------------------------------------------------------------------------- */

int ts_plan_add_buffer(ts_plan *p, ts_buf_kind kind, int index, ts_dtype dtype, const int32_t *axes, int n) {
    if (kind == TS_BUF_TEMP) {
        index = 0;
        for (int i = 0; i < p->nbuf; i++) index += p->buf[i].kind == TS_BUF_TEMP;
    }
    TS_GROW(p->buf, p->nbuf, p->cap_buf);
    ts_buffer *B = &p->buf[p->nbuf];
    *B = (ts_buffer){.kind = kind, .index = index, .dtype = dtype, .ndim = n};
    if (n) memcpy(B->axis, axes, sizeof(int32_t) * (size_t)n);
    return p->nbuf++;
}

/* Kernel ki's scratch: a new fp32 temporary of `elems` floats (no axes). */
static void give_scratch(ts_plan *p, int ki, int64_t elems) {
    const int buf = ts_plan_add_buffer(p, TS_BUF_TEMP, 0, TS_FP32, NULL, 0);
    p->buf[buf].elems = elems;
    p->k[ki].scratch = buf;
}

void ts_plan_give_row_grid_scratch(const ts_graph *g, ts_plan *p, int ki) {
    if (!ts_config_row_grid_wanted(g, p, &p->k[ki])) return;
    give_scratch(p, ki, TS_ROW_GRID_SCRATCH_FLOATS);
    p->k[ki].row_grid = true;
}

void ts_plan_give_gemm_chunk_scratch(const ts_graph *g, ts_plan *p, int ki) {
    const ts_kernel *k = &p->k[ki];
    if (!ts_config_gemm_chunks_wanted(g, k)) return;
    give_scratch(p, ki, TS_GEMM_MAX_CHUNKS * (k->b1 >= 0 ? 2 : 1) * ts_gemm_rows(g, k) * g->axes[k->n_axis].size *
                            ts_gemm_batch(g, k));
    p->k[ki].k_partials = true;
}

int ts_plan_add_buffer_like(ts_plan *p, ts_buf_kind kind, int index, const ts_buffer *B) {
    int b = ts_plan_add_buffer(p, kind, index, B->dtype, B->axis, B->ndim);
    p->buf[b].pitch = B->pitch, p->buf[b].elems = B->elems;
    return b;
}

ts_expr ts_expr_copy(const ts_expr *e) {
    ts_expr c = {.n = e->n, .cap = e->n};
    if (e->n) {
        c.node = ts_xmalloc(sizeof *c.node * (size_t)e->n);
        memcpy(c.node, e->node, sizeof *c.node * (size_t)e->n);
    }
    return c;
}

void ts_plan_append(ts_plan *dst, const ts_plan *src, const int *map) {
    for (int i = 0; i < src->nk; i++) {
        TS_GROW(dst->k, dst->nk, dst->cap_k);
        ts_kernel *k = &dst->k[dst->nk++];
        *k = src->k[i];
        k->acc = ts_xmalloc(sizeof *k->acc * (size_t)(k->nacc + 1));
        if (k->nacc) memcpy(k->acc, src->k[i].acc, sizeof *k->acc * (size_t)k->nacc);
        k->cap_acc = k->nacc;
        for (int a = 0; a < k->nacc; a++) k->acc[a].buf = map[k->acc[a].buf];
        k->out.buf = map[k->out.buf];
        k->expr = ts_expr_copy(&k->expr), k->inner = ts_expr_copy(&k->inner), k->inner_weighted = ts_expr_copy(&k->inner_weighted);
        for (int j = 0; j < k->nstage; j++) k->stage[j] = ts_expr_copy(&k->stage[j]);
        for (int o = 0; o < k->nextra; o++) {
            k->extra_expr[o] = ts_expr_copy(&k->extra_expr[o]);
            k->extra_out[o].buf = map[k->extra_out[o].buf];
        }
        for (int o = 0; o < k->nrowstat; o++) k->rowstat[o] = ts_expr_copy(&k->rowstat[o]), k->rowstat_buf[o] = map[k->rowstat_buf[o]];
        k->pre = ts_expr_copy(&k->pre);
        for (int j = 0; j < TS_ROW_MAX_STAGES; j++) k->merge[j] = ts_expr_copy(&k->merge[j]);
        if (ts_kernel_has_scratch(k)) k->scratch = map[k->scratch];
    }
}

void ts_plan_copy(ts_plan *dst, const ts_plan *src) {
    *dst = (ts_plan){.name = src->name ? ts_strdup(src->name) : NULL, .predicted_s = src->predicted_s};
    int *map = ts_xmalloc(sizeof(int) * (size_t)(src->nbuf + 1));
    for (int b = 0; b < src->nbuf; b++) {
        const ts_buffer *B = &src->buf[b];
        map[b] = ts_plan_add_buffer_like(dst, B->kind, B->index, B);
    }
    ts_plan_number_temps(dst);
    ts_plan_append(dst, src, map);
    free(map);
}

/* ---- expression queries -------------------------------------------------------------------------- */

static bool xconst_is(const ts_expr *x, int i, double v) { return x->node[i].kind == TS_X_CONST && x->node[i].value == v; }
static bool xop_is(const ts_expr *x, int i, ts_op op) { return x->node[i].kind == TS_X_OP && x->node[i].op == op; }

/* The operand of binary node i that is not the constant v; -1 when neither is. */
static int other_than_const(const ts_expr *x, int i, double v) {
    const ts_xnode *n = &x->node[i];
    if (xconst_is(x, n->kid[0], v)) return n->kid[1];
    if (xconst_is(x, n->kid[1], v)) return n->kid[0];
    return -1;
}

double ts_expr_eval(const ts_expr *x, const double *acc, const double *load, const double *index, bool round_casts) {
    if (x->n == 0) return NAN;
    double *v = ts_xmalloc(sizeof *v * (size_t)x->n);
    for (int i = 0; i < x->n; i++) {
        const ts_xnode *n = &x->node[i];
        double a[3] = {0};
        switch (n->kind) {
        case TS_X_CONST: v[i] = n->value; break;
        case TS_X_ACC: v[i] = acc[n->slot]; break;
        case TS_X_LOAD: v[i] = load ? load[n->slot] : NAN; break;
        case TS_X_INDEX: v[i] = index ? index[n->slot] : NAN; break;
        case TS_X_OP:
            for (int c = 0; c < ts_op_arity(n->op); c++) a[c] = v[n->kid[c]];
            v[i] = n->op == TS_OP_CAST && !round_casts ? a[0] : ts_interp_apply(n->op, n->dtype, a);
            break;
        }
    }
    double r = v[x->n - 1];
    free(v);
    return r;
}

int ts_expr_tanh_arg(const ts_expr *x, int i) {
    if (!xop_is(x, i, TS_OP_ADD)) return -1;
    int m = other_than_const(x, i, 1.0);
    if (m < 0 || !xop_is(x, m, TS_OP_MUL)) return -1;
    int r = other_than_const(x, m, -2.0);
    if (r < 0 || !xop_is(x, r, TS_OP_RECIP)) return -1;
    int a = x->node[r].kid[0];
    if (!xop_is(x, a, TS_OP_ADD)) return -1;
    int ex = other_than_const(x, a, 1.0);
    if (ex < 0 || !xop_is(x, ex, TS_OP_EXP2)) return -1;
    return x->node[ex].kid[0];
}

void ts_expr_live(const ts_expr *x, bool fast_tanh, bool *live) {
    for (int i = 0; i < x->n; i++) live[i] = false;
    if (x->n) live[x->n - 1] = true;
    for (int i = x->n - 1; i >= 0; i--) { /* kids before parents: a node's users are all later */
        if (!live[i]) continue;
        int y = fast_tanh ? ts_expr_tanh_arg(x, i) : -1;
        if (y >= 0) {
            live[y] = true;
            continue;
        }
        if (x->node[i].kind != TS_X_OP) continue;
        for (int c = 0; c < ts_op_arity(x->node[i].op); c++) live[x->node[i].kid[c]] = true;
    }
}

/* ---- a score below the causal diagonal ---------------------------------------------------------- */

/* Whether node i is the index along `axis` moved by monotone steps only (casts; adding a finite constant of
 * sign `sign` or 0): then it is ≥ the index (sign +1) or ≤ it (sign −1), rounding included. */
static bool monotone_index(const ts_expr *x, int i, int32_t axis, int sign) {
    const ts_xnode *n = &x->node[i];
    if (n->kind == TS_X_INDEX) return n->slot == axis;
    if (xop_is(x, i, TS_OP_CAST)) return monotone_index(x, n->kid[0], axis, sign);
    if (!xop_is(x, i, TS_OP_ADD)) return false;
    for (int side = 0; side < 2; side++) {
        const ts_xnode *c = &x->node[n->kid[side]];
        if (c->kind == TS_X_CONST && isfinite(c->value) && c->value * sign >= 0 &&
            monotone_index(x, n->kid[!side], axis, sign))
            return true;
    }
    return false;
}

/* Node i folded as far as known values allow: known/val when its value is a constant, else alias[i], the
 * node it equals (itself when nothing folds). Kids are read through alias. */
static void fold_node(const ts_expr *x, int i, bool *known, double *val, int *alias) {
    const ts_xnode *n = &x->node[i];
    alias[i] = i, known[i] = n->kind == TS_X_CONST, val[i] = n->value;
    if (n->kind != TS_X_OP) return;
    int k[3], arity = ts_op_arity(n->op), nknown = 0;
    double v[3] = {0};
    for (int c = 0; c < arity; c++) {
        k[c] = alias[n->kid[c]];
        if (known[k[c]]) v[c] = val[k[c]], nknown++;
    }
    if (nknown == arity) {
        known[i] = true, val[i] = ts_interp_apply(n->op, n->dtype, v);
    } else if (n->op == TS_OP_WHERE && known[k[0]]) {
        alias[i] = v[0] != 0 ? k[1] : k[2];
    } else if ((n->op == TS_OP_ADD || n->op == TS_OP_MUL) && (known[k[0]] || known[k[1]])) {
        const int side = known[k[0]] ? 0 : 1;
        if (v[side] == (n->op == TS_OP_ADD ? 0.0 : 1.0)) alias[i] = k[!side];
    }
    if (alias[i] != i) known[i] = known[alias[i]], val[i] = val[alias[i]];
}

/* The nodes the root reaches through alias, as a new expression (a known node becomes a constant). */
static ts_expr rebuild_folded(const ts_expr *x, const bool *known, const double *val, const int *alias) {
    int n = x->n, *map = ts_xmalloc(sizeof(int) * (size_t)(n + 1));
    bool *live = ts_xcalloc((size_t)n + 1, sizeof *live);
    live[alias[n - 1]] = true;
    for (int i = n - 1; i >= 0; i--)
        if (live[i] && !known[i] && x->node[i].kind == TS_X_OP)
            for (int c = 0; c < ts_op_arity(x->node[i].op); c++) live[alias[x->node[i].kid[c]]] = true;
    ts_expr out = {.cap = n, .node = ts_xmalloc(sizeof(ts_xnode) * (size_t)n)};
    for (int i = 0; i < n; i++) {
        if (!live[i]) continue;
        ts_xnode m = x->node[i];
        if (known[i]) m = (ts_xnode){.kind = TS_X_CONST, .dtype = m.dtype, .value = val[i]};
        else if (m.kind == TS_X_OP)
            for (int c = 0; c < ts_op_arity(m.op); c++) m.kid[c] = map[alias[m.kid[c]]];
        map[i] = out.n;
        out.node[out.n++] = m;
    }
    free(map), free(live);
    return out;
}

bool ts_expr_below_diagonal(const ts_expr *x, int32_t q_axis, int32_t k_axis, ts_expr *out) {
    int n = x->n, folded = 0;
    if (n == 0) return false;
    bool *known = ts_xmalloc(sizeof *known * (size_t)n);
    double *val = ts_xmalloc(sizeof *val * (size_t)n);
    int *alias = ts_xmalloc(sizeof *alias * (size_t)n);
    for (int i = 0; i < n; i++) {
        const ts_xnode *d = &x->node[i];
        if (xop_is(x, i, TS_OP_LESS_THAN) && monotone_index(x, alias[d->kid[0]], q_axis, 1) &&
            monotone_index(x, alias[d->kid[1]], k_axis, -1)) { /* q' ≥ q ≥ k ≥ k': q' < k' is false */
            alias[i] = i, known[i] = true, val[i] = 0, folded++;
            continue;
        }
        fold_node(x, i, known, val, alias);
    }
    if (folded) *out = rebuild_folded(x, known, val, alias);
    free(known), free(val), free(alias);
    return folded > 0;
}

bool ts_attention_unmasked(const ts_kernel *k, int64_t head_dim, ts_expr *below, double *scale) {
    *scale = 1;
    if (k->kind != TS_KERNEL_ATTENTION || !k->causal || !ts_expr_below_diagonal(&k->expr, k->m_axis, k->red_axis, below))
        return false;
    const int r = below->n - 1; /* the root: a positive constant times the dot product? */
    if (ts_attention_masks_apart(head_dim) && xop_is(below, r, TS_OP_MUL)) {
        const ts_xnode *a = &below->node[below->node[r].kid[0]], *b = &below->node[below->node[r].kid[1]];
        const ts_xnode *c = a->kind == TS_X_CONST ? a : b, *dot = a->kind == TS_X_CONST ? b : a;
        if (c->kind == TS_X_CONST && dot->kind == TS_X_ACC && dot->slot == 0 && c->value > 0 && isfinite(c->value))
            *scale = c->value;
    }
    return true;
}
