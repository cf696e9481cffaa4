/* interp.c — the float64 reference interpreter (see interp.h for what it promises). */
#include "interp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---- random inputs ----------------------------------------------------------------------------- */

int64_t ts_input_numel(const ts_graph *g, int i) { return ts_node_numel(g, &g->nodes[g->inputs[i].node]); }
int64_t ts_output_numel(const ts_graph *g, int i) { return ts_view_numel(&g->outputs[i].ref.view); }

double **ts_random_inputs(const ts_graph *g, uint64_t seed) {
    double **bufs = ts_xcalloc((size_t)g->ninputs + 1, sizeof *bufs);
    unsigned long long state = seed;
    for (int i = 0; i < g->ninputs; i++) {
        int64_t n = ts_input_numel(g, i);
        ts_dtype t = g->nodes[g->inputs[i].node].dtype;
        bufs[i] = ts_xmalloc(sizeof(double) * (size_t)n);
        for (int64_t k = 0; k < n; k++) {
            bufs[i][k] = ts_dtype_round(t, 2.0 * ts_uniform(&state) - 1.0);
        }
    }
    return bufs;
}

void ts_free_buffers(double **bufs, int n) {
    if (!bufs) return;
    for (int i = 0; i < n; i++) free(bufs[i]);
    free(bufs);
}

/* ---- planning: which nodes are stored ---------------------------------------------------------- */

static bool is_elementwise(ts_op op) {
    ts_op_kind k = ts_op_kind_of(op);
    return k == TS_KIND_UNARY || k == TS_KIND_BINARY || k == TS_KIND_TERNARY;
}

static bool same_view(const ts_view *a, const ts_view *b) {
    if (a->ndim != b->ndim || a->offset != b->offset) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->axis[i] != b->axis[i] || a->size[i] != b->size[i] || a->stride[i] != b->stride[i]) return false;
    return true;
}

/* inlined[i]: node i is elementwise, used once, by a reduction that sees it whole, and not an output. */
static bool *plan_inlining(const ts_graph *g) {
    int *uses = ts_xcalloc((size_t)g->nnodes + 1, sizeof *uses);
    bool *inl = ts_xcalloc((size_t)g->nnodes + 1, sizeof *inl);
    for (int i = 0; i < g->nnodes; i++)
        for (int s = 0; s < g->nodes[i].nsrc; s++) uses[g->nodes[i].src[s].node]++;
    for (int i = 0; i < g->noutputs; i++) uses[g->outputs[i].ref.node] += 2;
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (ts_op_kind_of(n->op) != TS_KIND_REDUCE) continue;
        int32_t p = n->src[0].node;
        ts_view whole = ts_view_of_node(g, p);
        if (is_elementwise(g->nodes[p].op) && uses[p] == 1 && same_view(&n->src[0].view, &whole)) inl[p] = true;
    }
    free(uses);
    return inl;
}

double ts_interp_bytes(const ts_graph *g) {
    bool *inl = plan_inlining(g);
    double bytes = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (!inl[i] && g->nodes[i].op != TS_OP_INPUT) bytes += 8.0 * (double)ts_node_numel(g, &g->nodes[i]);
    free(inl);
    return bytes;
}

/* ---- elementwise semantics (the X-macro's comments, in code) ----------------------------------- */

double ts_interp_apply(ts_op op, ts_dtype dtype, const double *x) {
    switch (op) {
    case TS_OP_NEG: return -x[0];
    case TS_OP_RECIP: return 1.0 / x[0];
    case TS_OP_SQRT: return sqrt(x[0]);
    case TS_OP_EXP2: return exp2(x[0]);
    case TS_OP_LOG2: return log2(x[0]);
    case TS_OP_SIN: return sin(x[0]);
    case TS_OP_ERF: return erf(x[0]);
    case TS_OP_CAST: return ts_dtype_round(dtype, x[0]);
    case TS_OP_COPY: return x[0];
    case TS_OP_ADD: return x[0] + x[1];
    case TS_OP_MUL: return x[0] * x[1];
    case TS_OP_MAX: return isnan(x[0]) || isnan(x[1]) ? NAN : fmax(x[0], x[1]);
    case TS_OP_LESS_THAN: return x[0] < x[1] ? 1.0 : 0.0;
    case TS_OP_WHERE: return x[0] != 0.0 ? x[1] : x[2];
    default: break; /* sources, reductions and fused ops are not elementwise */
    }
    TS_ASSERT(!"not an elementwise op");
    return 0;
}

/* ---- evaluation -------------------------------------------------------------------------------- */

typedef struct {
    const ts_graph *g;
    double **val; /* per node; NULL for inlined nodes */
    bool *inlined;
    const int64_t *const *index_of_axis; /* ts_interp_opts' */
} machine;

/* Multi-index walk over dims[0..nd) with per-operand offsets kept incrementally. */
typedef struct {
    int nd, nops;
    int64_t size[TS_MAX_DIMS], idx[TS_MAX_DIMS];
    int64_t stride[3][TS_MAX_DIMS];
    int64_t off[3];
} walker;

static void walker_init(walker *w, const ts_node *n) {
    memset(w, 0, sizeof *w);
    w->nops = n->nsrc;
    w->nd = n->src[0].view.ndim;
    for (int d = 0; d < w->nd; d++) w->size[d] = n->src[0].view.size[d];
    for (int s = 0; s < n->nsrc; s++) {
        w->off[s] = n->src[s].view.offset;
        for (int d = 0; d < w->nd; d++) w->stride[s][d] = n->src[s].view.stride[d];
    }
}

static void walker_next(walker *w) {
    for (int d = w->nd - 1; d >= 0; d--) {
        for (int s = 0; s < w->nops; s++) w->off[s] += w->stride[s][d];
        if (++w->idx[d] < w->size[d]) return;
        for (int s = 0; s < w->nops; s++) w->off[s] -= w->stride[s][d] * w->size[d];
        w->idx[d] = 0;
    }
}

static void eval_elementwise(machine *m, int32_t id, double *out) {
    const ts_node *n = &m->g->nodes[id];
    int64_t count = ts_node_numel(m->g, n);
    walker w;
    walker_init(&w, n);
    double x[3];
    for (int64_t e = 0; e < count; e++) {
        for (int s = 0; s < n->nsrc; s++) x[s] = m->val[n->src[s].node][w.off[s]];
        out[e] = ts_interp_apply(n->op, n->dtype, x);
        walker_next(&w);
    }
}

/* One output element of a reduction: folds the operand along dim r, starting at multi-index idx. */
static double reduce_line(machine *m, const ts_node *n, int64_t *idx, int r) {
    const ts_ref *src = &n->src[0];
    int64_t len = src->view.size[r];
    double acc = n->op == TS_OP_REDUCE_SUM ? 0.0 : -INFINITY;
    const ts_node *p = &m->g->nodes[src->node];
    const double *ops[3];
    int64_t off[3], step[3];
    int nops;
    idx[r] = 0;
    if (m->inlined[src->node]) { /* the operand is elementwise over the same dims: compute it here */
        nops = p->nsrc;
        for (int s = 0; s < nops; s++) {
            ops[s] = m->val[p->src[s].node];
            off[s] = ts_view_offset(&p->src[s].view, idx);
            step[s] = p->src[s].view.stride[r];
        }
    } else {
        nops = 1;
        ops[0] = m->val[src->node];
        off[0] = ts_view_offset(&src->view, idx);
        step[0] = src->view.stride[r];
    }
    double x[3];
    for (int64_t k = 0; k < len; k++) {
        for (int s = 0; s < nops; s++) x[s] = ops[s][off[s] + k * step[s]];
        double v = m->inlined[src->node] ? ts_interp_apply(p->op, p->dtype, x) : x[0];
        if (n->op == TS_OP_REDUCE_SUM) acc += v;
        else if (isnan(v) || isnan(acc)) acc = NAN;
        else acc = fmax(acc, v);
    }
    return acc;
}

static void eval_reduce(machine *m, int32_t id, double *out) {
    const ts_node *n = &m->g->nodes[id];
    const ts_view *v = &n->src[0].view;
    int r = ts_view_find(v, n->reduce_axis);
    int64_t idx[TS_MAX_DIMS] = {0};
    int64_t count = ts_node_numel(m->g, n);
    for (int64_t e = 0; e < count; e++) {
        out[e] = reduce_line(m, n, idx, r);
        for (int d = v->ndim - 1; d >= 0; d--) { /* next index, skipping the reduced dim */
            if (d == r) continue;
            if (++idx[d] < v->size[d]) break;
            idx[d] = 0;
        }
    }
}

/* ---- fused ops: reductions over one axis of several operands ----------------------------------- */

static double fold_tiles(const double *x, int64_t n, int64_t tile, bool is_max) {
    double total = is_max ? -INFINITY : 0.0;
    if (tile <= 0) tile = n;
    for (int64_t t0 = 0; t0 < n; t0 += tile) { /* a partial result per tile, then the combine */
        double part = is_max ? -INFINITY : 0.0;
        for (int64_t k = t0; k < n && k < t0 + tile; k++) part = is_max ? fmax(part, x[k]) : part + x[k];
        total = is_max ? fmax(total, part) : total + part;
    }
    return total;
}

/* softmax(c·s)-weighted sum of v, computed directly: max first, then the two sums. */
static double weighted_sum(const double *s, const double *v, const double *c, int64_t n) {
    double mx = -INFINITY, num = 0, den = 0;
    for (int64_t k = 0; k < n; k++) mx = fmax(mx, s[k]);
    for (int64_t k = 0; k < n; k++) {
        double e = exp2(c[k] * (s[k] - mx));
        num += e * v[k];
        den += e;
    }
    return num / den;
}

/* The same, streamed over tiles as FlashAttention does: a running max, a running sum of exponentials and
 * an accumulator, both rescaled by 2^(c·(old max - new max)) whenever the max grows. */
static double online_weighted_sum(const double *s, const double *v, const double *c, int64_t n, int64_t tile) {
    double run_max = -INFINITY, run_sum = 0, acc = 0;
    if (tile <= 0) tile = n;
    for (int64_t t0 = 0; t0 < n; t0 += tile) {
        int64_t t1 = t0 + tile < n ? t0 + tile : n;
        double tile_max = run_max;
        for (int64_t k = t0; k < t1; k++) tile_max = fmax(tile_max, s[k]);
        if (tile_max == -INFINITY) continue; /* nothing but -inf so far: every weight is 0 */
        double rescale = run_max == -INFINITY ? 0.0 : exp2(c[t0] * (run_max - tile_max));
        run_sum *= rescale;
        acc *= rescale;
        for (int64_t k = t0; k < t1; k++) {
            double e = exp2(c[k] * (s[k] - tile_max));
            run_sum += e;
            acc += e * v[k];
        }
        run_max = tile_max;
    }
    return acc / run_sum;
}

static double dot(const double *a, const double *b, int64_t n) {
    double acc = 0;
    for (int64_t k = 0; k < n; k++) acc += a[k] * b[k];
    return acc;
}

static void eval_fused(machine *m, int32_t id, double *out) {
    const ts_node *n = &m->g->nodes[id];
    const ts_view *v = &n->src[0].view;
    int r = ts_view_find(v, n->reduce_axis);
    int64_t len = v->size[r], idx[TS_MAX_DIMS] = {0};
    int64_t count = 1;
    for (int d = 0; d < v->ndim; d++)
        if (d != r) count *= v->size[d];
    double *line[3];
    for (int s = 0; s < n->nsrc; s++) line[s] = ts_xmalloc(sizeof(double) * (size_t)(len ? len : 1));
    for (int64_t e = 0; e < count; e++) {
        for (int s = 0; s < n->nsrc; s++) { /* gather each operand along the reduced axis */
            int64_t off = ts_view_offset(&n->src[s].view, idx), step = n->src[s].view.stride[r];
            for (int64_t k = 0; k < len; k++) line[s][k] = m->val[n->src[s].node][off + k * step];
        }
        switch (n->op) {
        case TS_OP_CONTRACT: out[e] = dot(line[0], line[1], len); break;
        case TS_OP_TILE_SUM: out[e] = fold_tiles(line[0], len, n->tile, false); break;
        case TS_OP_TILE_MAX: out[e] = fold_tiles(line[0], len, n->tile, true); break;
        case TS_OP_WSUM: out[e] = weighted_sum(line[0], line[1], line[2], len); break;
        case TS_OP_ONLINE_WSUM: out[e] = online_weighted_sum(line[0], line[1], line[2], len, n->tile); break;
        case TS_OP_DUAL:
            out[e] = dot(line[0], line[1], len);
            out[count + e] = dot(line[0], line[2], len);
            break;
        default: TS_ASSERT(!"not a fused op with a node");
        }
        for (int d = v->ndim - 1; d >= 0; d--) { /* next index, skipping the reduced dim */
            if (d == r) continue;
            if (++idx[d] < v->size[d]) break;
            idx[d] = 0;
        }
    }
    for (int s = 0; s < n->nsrc; s++) free(line[s]);
}

static void eval_node(machine *m, int32_t id, double *const *inputs) {
    const ts_node *n = &m->g->nodes[id];
    if (n->op == TS_OP_INPUT) {
        m->val[id] = inputs[n->input];
        return;
    }
    if (m->inlined[id]) return;
    int64_t count = ts_node_numel(m->g, n);
    double *out = ts_xmalloc(sizeof(double) * (size_t)count);
    m->val[id] = out;
    switch (ts_op_kind_of(n->op)) {
    case TS_KIND_SOURCE:
        if (n->op == TS_OP_IOTA) {
            const int64_t *index = m->index_of_axis ? m->index_of_axis[ts_axis_root(m->g, n->reduce_axis)] : NULL;
            for (int64_t e = 0; e < count; e++) out[e] = index ? (double)index[e] : (double)e;
        } else {
            for (int64_t e = 0; e < count; e++) out[e] = n->value;
        }
        break;
    case TS_KIND_REDUCE: eval_reduce(m, id, out); break;
    case TS_KIND_FUSED: eval_fused(m, id, out); break;
    default: eval_elementwise(m, id, out);
    }
}

static double *gather_output(const machine *m, const ts_output *o) {
    int64_t count = ts_view_numel(&o->ref.view);
    double *out = ts_xmalloc(sizeof(double) * (size_t)(count ? count : 1));
    ts_node fake = {.nsrc = 1, .src = {o->ref}};
    walker w;
    walker_init(&w, &fake);
    const double *src = m->val[o->ref.node];
    for (int64_t e = 0; e < count; e++) {
        out[e] = src[w.off[0]];
        walker_next(&w);
    }
    return out;
}

static const char *format_bytes(char buf[32], double bytes) {
    if (bytes >= (double)(1u << 30)) snprintf(buf, 32, "%.2f GiB", bytes / (double)(1u << 30));
    else snprintf(buf, 32, "%.2f MiB", bytes / (double)(1u << 20));
    return buf;
}

int ts_interp_run(const ts_graph *g, double *const *inputs, double ***outputs, const ts_interp_opts *opts,
                  char **err) {
    size_t budget = opts && opts->max_bytes ? opts->max_bytes : (size_t)8 << 30;
    double need = ts_interp_bytes(g);
    for (int i = 0; i < g->noutputs; i++) { /* an output gathered from an expand view can be far larger than */
        const ts_output *o = &g->outputs[i]; /* its node (one constant as 2^60 elements): count the excess */
        double excess = (double)ts_view_numel(&o->ref.view) - (double)ts_node_numel(g, &g->nodes[o->ref.node]);
        if (excess > 0) need += 8.0 * excess;
    }
    if (need > (double)budget) {
        char a[32], b[32];
        *err = ts_strfmt("evaluating needs %s of float64 buffers, over the interpreter's budget of %s; "
                         "evaluate at smaller sizes with --dims",
                         format_bytes(a, need), format_bytes(b, (double)budget));
        return -1;
    }
    machine m = {.g = g, .val = ts_xcalloc((size_t)g->nnodes + 1, sizeof(double *)), .inlined = plan_inlining(g),
                 .index_of_axis = opts ? opts->index_of_axis : NULL};
    for (int32_t i = 0; i < g->nnodes; i++) eval_node(&m, i, inputs);
    double **outs = ts_xcalloc((size_t)g->noutputs + 1, sizeof *outs);
    for (int i = 0; i < g->noutputs; i++) outs[i] = gather_output(&m, &g->outputs[i]);
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op != TS_OP_INPUT) free(m.val[i]);
    free(m.val);
    free(m.inlined);
    *outputs = outs;
    return 0;
}
