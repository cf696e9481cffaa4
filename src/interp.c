/* interp.c — the float64 reference interpreter (see interp.h for what it promises). */
#include "interp.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* ---- random inputs ----------------------------------------------------------------------------- */

int64_t ts_input_numel(const ts_graph *g, int i) { return ts_node_numel(g, &g->nodes[g->inputs[i].node]); }
int64_t ts_output_numel(const ts_graph *g, int i) { return ts_view_numel(&g->outputs[i].ref.view); }

/* One input's values: element k is draw `first + k` of the stream, rounded to the input's type. */
typedef struct {
    double *out;
    ts_dtype dtype;
    unsigned long long seed, first;
} random_fill;

static void fill_random(void *ctx, long long begin, long long end) {
    const random_fill *f = ctx;
    unsigned long long state = ts_splitmix64_skip(f->seed, f->first + (unsigned long long)begin);
    for (long long k = begin; k < end; k++) f->out[k] = ts_dtype_round(f->dtype, 2.0 * ts_uniform(&state) - 1.0);
}

/* One stream over all the inputs in order; large inputs are filled by several threads (the values do not
 * depend on how many: a 32-layer stack's 7·10^9 weights, first touched in parallel). */
double **ts_random_inputs(const ts_graph *g, uint64_t seed) {
    double **bufs = ts_xcalloc((size_t)g->ninputs + 1, sizeof *bufs);
    unsigned long long first = 0;
    for (int i = 0; i < g->ninputs; i++) {
        int64_t n = ts_input_numel(g, i);
        bufs[i] = ts_xmalloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        random_fill f = {bufs[i], g->nodes[g->inputs[i].node].dtype, seed, first};
        ts_parallel_ranges(n, TS_PARALLEL_MIN_PART, fill_random, &f);
        first += (unsigned long long)n;
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

/* inlined[i]: node i is elementwise, used once, by a reduction that sees it whole, and not an output. */
static bool *plan_inlining(const ts_graph *g) {
    int *uses = ts_graph_reader_counts(g); /* an output counts as a reader: an output is never inlined */
    bool *inl = ts_xcalloc((size_t)g->nnodes + 1, sizeof *inl);
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (ts_op_kind_of(n->op) != TS_KIND_REDUCE) continue;
        int32_t p = n->src[0].node;
        if (is_elementwise(g->nodes[p].op) && uses[p] == 1 && ts_ref_is_whole(g, &n->src[0])) inl[p] = true;
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

/* ---- contractions through BLAS ------------------------------------------------------------------ */

/* A sum over k of the product of two stored operands (a matmul, as the checker expands it) is computed by
 * OpenBLAS's dgemm whenever the layout allows: the output's innermost dim varies along one operand only
 * (B: "col"), another dim along the other only (A: "row"), and each operand is row- or column-major in
 * (row|col, k). Every other output dim is a batch. The library is the serial one, called from one thread
 * (its work buffer is a static: concurrent calls corrupt each other). Where the layout
 * does not allow it, eval_reduce folds element by element. dgemm sums in its own order (blocked, with
 * FMA), so results can differ from the fold, and between a graph and its sampled rows, in the last bits. */

typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int64_t N, K, lda, ldb, ldc;
} gemm_shape;

typedef struct {
    const double *A, *B;
    double *C;
    int64_t rows;
} gemm_job;

/* The jobs one after another (see above: the serial library is not reentrant). */
static void run_gemms(const gemm_shape *s, const gemm_job *jobs, int64_t njobs) {
    for (int64_t j = 0; j < njobs; j++) {
        const gemm_job *b = &jobs[j];
        cblas_dgemm(CblasRowMajor, s->ta, s->tb, (int)b->rows, (int)s->N, (int)s->K, 1.0, b->A, (int)s->lda, b->B,
                    (int)s->ldb, 0.0, b->C, (int)s->ldc);
    }
}

/* The operands' layout as one dgemm per batch: row, col and k dims of view v, and *s; false if none fits. */
static bool gemm_layout(const ts_view *v, int r, const ts_view *a, const ts_view *b, int *row, int *col, gemm_shape *s) {
    *col = -1, *row = -1;
    for (int d = v->ndim - 1; d >= 0 && *col < 0; d--)
        if (d != r) *col = d;
    if (*col < 0 || a->stride[*col] != 0 || b->stride[*col] == 0) return false;
    for (int d = 0; d < v->ndim; d++)
        if (d != r && a->stride[d] != 0 && b->stride[d] == 0 && (*row < 0 || v->size[d] > v->size[*row])) *row = d;
    if (*row < 0) return false;
    int64_t M = v->size[*row], N = v->size[*col], K = v->size[r], sam = a->stride[*row], sak = a->stride[r];
    int64_t sbk = b->stride[r], sbn = b->stride[*col];
    s->N = N, s->K = K;
    if (sak == 1 && sam >= K) s->ta = CblasNoTrans, s->lda = sam;
    else if (sam == 1 && sak >= M) s->ta = CblasTrans, s->lda = sak;
    else return false;
    if (sbn == 1 && sbk >= N) s->tb = CblasNoTrans, s->ldb = sbk;
    else if (sbk == 1 && sbn >= K) s->tb = CblasTrans, s->ldb = sbn;
    else return false;
    return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && s->lda <= INT_MAX && s->ldb <= INT_MAX;
}

/* Evaluates reduction `id` as dgemms when it is a contraction with a BLAS layout; false: not done. */
static bool eval_contraction(machine *m, int32_t id, double *out) {
    const ts_node *n = &m->g->nodes[id];
    if (n->op != TS_OP_REDUCE_SUM || !m->inlined[n->src[0].node] || m->g->nodes[n->src[0].node].op != TS_OP_MUL) return false;
    const ts_node *p = &m->g->nodes[n->src[0].node];
    const ts_view *v = &n->src[0].view, *a = &p->src[0].view, *b = &p->src[1].view;
    const double *va = m->val[p->src[0].node], *vb = m->val[p->src[1].node];
    int r = ts_view_find(v, n->reduce_axis), row, col;
    gemm_shape s;
    if (!gemm_layout(v, r, a, b, &row, &col, &s)) { /* A and B the other way round? */
        const ts_view *t = a;
        const double *vt = va;
        a = b, b = t, va = vb, vb = vt;
        if (!gemm_layout(v, r, a, b, &row, &col, &s)) return false;
    }
    int64_t ostride[TS_MAX_DIMS], st = 1, nbatch = 1;
    for (int d = v->ndim - 1; d >= 0; d--) {
        ostride[d] = d == r ? 0 : st;
        if (d != r) st *= v->size[d];
        if (d != r && d != row && d != col) nbatch *= v->size[d];
    }
    s.ldc = ostride[row];
    if (s.ldc > INT_MAX) return false;
    int64_t M = v->size[row];
    /* blocks of a fixed number of rows: the same bits on any machine with the same BLAS kernels. One
     * thread: the serial OpenBLAS keeps its work buffer in a static, so concurrent dgemm calls corrupt each
     * other's results (seen: attention_gqa's sampled reference 1.4% off, all its candidates "invalid") */
    const int64_t per = 128, chunks = (M + per - 1) / per;
    gemm_job *jobs = ts_xmalloc(sizeof *jobs * (size_t)(nbatch * chunks));
    int64_t idx[TS_MAX_DIMS] = {0}, nj = 0;
    for (int64_t e = 0; e < nbatch; e++) {
        int64_t oa = ts_view_offset(a, idx), ob = ts_view_offset(b, idx), oc = 0;
        for (int d = 0; d < v->ndim; d++) oc += idx[d] * ostride[d];
        for (int64_t r0 = 0; r0 < M; r0 += per)
            jobs[nj++] = (gemm_job){va + oa + r0 * a->stride[row], vb + ob, out + oc + r0 * s.ldc, M - r0 < per ? M - r0 : per};
        for (int d = v->ndim - 1; d >= 0; d--) { /* the next batch index */
            if (d == r || d == row || d == col) continue;
            if (++idx[d] < v->size[d]) break;
            idx[d] = 0;
        }
    }
    run_gemms(&s, jobs, nj);
    free(jobs);
    return true;
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
        case TS_OP_CONTRACT_ADD: /* c is broadcast along k: its value at any k */
            out[e] = m->val[n->src[2].node][ts_view_offset(&n->src[2].view, idx)] + dot(line[0], line[1], len);
            break;
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

/* UPDATE: dest, with v written over its slice at index size(at_axis) - 1 of the written axis (a block of
 * rows: v's rows_axis over indices size(at_axis) - size(rows_axis) ..). */
static void eval_update(machine *m, int32_t id, double *out) {
    const ts_node *n = &m->g->nodes[id];
    ts_node part = {.nsrc = 1, .src = {n->src[0]}};
    walker w;
    walker_init(&w, &part);
    const double *dest = m->val[n->src[0].node], *v = m->val[n->src[1].node];
    for (int64_t e = 0, count = ts_node_numel(m->g, n); e < count; e++, walker_next(&w)) out[e] = dest[w.off[0]];
    int64_t stride[TS_MAX_DIMS], at = 0, s = 1;
    for (int d = n->ndim - 1; d >= 0; d--) { /* out's stride along each of v's dims (v: out's dims without w) */
        if (n->axis[d] == n->reduce_axis) {
            int64_t rows = n->rows_axis >= 0 ? m->g->axes[n->rows_axis].size : 1;
            at = (m->g->axes[n->at_axis].size - rows) * s;
            if (n->rows_axis >= 0) stride[ts_view_find(&n->src[1].view, n->rows_axis)] = s;
        } else {
            int j = ts_view_find(&n->src[1].view, n->axis[d]);
            stride[j] = s;
        }
        s *= m->g->axes[n->axis[d]].size;
    }
    part.src[0] = n->src[1];
    walker_init(&w, &part);
    for (int64_t e = 0, count = ts_view_numel(&n->src[1].view); e < count; e++, walker_next(&w)) {
        int64_t o = at;
        for (int d = 0; d < w.nd; d++) o += w.idx[d] * stride[d];
        out[o] = v[w.off[0]];
    }
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
    case TS_KIND_REDUCE:
        if (!eval_contraction(m, id, out)) eval_reduce(m, id, out);
        break;
    case TS_KIND_FUSED: eval_fused(m, id, out); break;
    case TS_KIND_UPDATE: eval_update(m, id, out); break;
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
