/* rowstat.c — row reductions moved into GEMMs (rowstat.h): a reduction of a GEMM's A rows (prologue fusion), a
 * per-row reduction of its product (epilogue fusion). */
#include "rowstat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

/* A per-row reduction as the GEMM takes it: its stages, and what it writes once per row where. */
typedef struct {
    int nstage;
    const ts_expr *stage[TS_ROW_MAX_STAGES];
    ts_combine combine[TS_ROW_MAX_STAGES];
    int nout;
    const ts_access *out[TS_KERNEL_MAX_OUTS];
    const ts_expr *value[TS_KERNEL_MAX_OUTS];
} row_reduction;

/* Kernel r as a row reduction; false when it is none (whole rows written, rows down columns, an online
 * softmax's weighted sum). */
static bool as_row_reduction(const ts_kernel *r, row_reduction *rr) {
    memset(rr, 0, sizeof *rr);
    if (r->kind == TS_KERNEL_REDUCE) {
        if (r->combine == TS_COMBINE_WSUM) return false;
        rr->nstage = 1, rr->stage[0] = &r->inner, rr->combine[0] = r->combine;
        rr->nout = 1, rr->out[0] = &r->out, rr->value[0] = &r->expr;
        return true;
    }
    if (r->kind != TS_KERNEL_ROW || !r->per_row || r->columns || r->nstage < 1) return false;
    rr->nstage = r->nstage;
    for (int j = 0; j < r->nstage; j++) {
        if (r->stage_combine[j] == TS_COMBINE_WSUM) return false;
        rr->stage[j] = &r->stage[j], rr->combine[j] = r->stage_combine[j];
    }
    rr->nout = 1 + r->nextra;
    rr->out[0] = &r->out, rr->value[0] = &r->expr;
    for (int o = 0; o < r->nextra; o++) rr->out[1 + o] = &r->extra_out[o], rr->value[1 + o] = &r->extra_expr[o];
    return true;
}

/* Whether x is a term of one element of A: constants, and loads of r's operands that are A's view. */
static bool term_of_a(const ts_expr *x, const ts_kernel *r, const ts_access *a) {
    for (int i = 0; i < x->n; i++) {
        const ts_xnode *n = &x->node[i];
        if (n->kind == TS_X_ACC || n->kind == TS_X_INDEX) return false;
        if (n->kind == TS_X_LOAD && !ts_access_same_view(&r->acc[n->slot], a)) return false;
    }
    return x->n > 0;
}

/* Whether x reads only stage results (ACC j < nstage) and constants. */
static bool from_stages(const ts_expr *x, int nstage) {
    for (int i = 0; i < x->n; i++) {
        const ts_xnode *n = &x->node[i];
        if (n->kind == TS_X_LOAD || n->kind == TS_X_INDEX || (n->kind == TS_X_ACC && n->slot >= nstage)) return false;
    }
    return x->n > 0;
}

static bool kernel_reads(const ts_kernel *k, int buf) {
    for (int s = 0; s < k->nacc; s++)
        if (k->acc[s].buf == buf) return true;
    return false;
}

/* Whether buffer buf is a temporary that kernel w alone writes and kernel r alone reads. */
static bool private_between(const ts_plan *p, int buf, int w, int r) {
    if (p->buf[buf].kind != TS_BUF_TEMP) return false;
    for (int i = 0; i < p->nk; i++) {
        if (i != w && ts_kernel_writes(&p->k[i], buf)) return false;
        if (i != r && kernel_reads(&p->k[i], buf)) return false;
    }
    return true;
}

static bool spans(const ts_access *a, int32_t axis) {
    ts_sym s = ts_access_stride(a, axis);
    return !ts_sym_equal(s, ts_sym_const(0));
}

/* Whether a view moves along nothing but the given axes (an axis at stride 0 is no move). */
static bool moves_only_along(const ts_access *a, const int32_t *axes, int n) {
    for (int d = 0; d < a->ndim; d++) {
        bool listed = false;
        for (int i = 0; i < n; i++) listed |= a->axis[d] == axes[i];
        if (!listed && spans(a, a->axis[d])) return false;
    }
    return true;
}

/* Whether the reduction's rows are the GEMM's: its outputs are indexed by the GEMM's batch and row axes only,
 * and by every one of them along which A moves, so that the value a row's epilogue reads is that row's. */
static bool same_rows(const ts_kernel *gk, const row_reduction *rr) {
    if (gk->batch_outer >= 0 || (gk->batch_axis >= 0 && gk->m_outer >= 0)) return false;
    const ts_access *a = &gk->acc[gk->a];
    /* the second row-like axis: the batch's, or the rows merged outside m (never both) */
    const int32_t second = gk->batch_axis >= 0 ? gk->batch_axis : gk->m_outer;
    int32_t rows[2] = {gk->m_axis, second}, with_k[3] = {gk->m_axis, gk->red_axis, second};
    int nrows = second >= 0 ? 2 : 1;
    if (!moves_only_along(a, with_k, second >= 0 ? 3 : 2)) return false;
    for (int o = 0; o < rr->nout; o++) {
        if (!moves_only_along(rr->out[o], rows, nrows)) return false;
        for (int i = 0; i < nrows; i++)
            if (spans(a, rows[i]) && !spans(rr->out[o], rows[i])) return false;
    }
    return true;
}

/* Whether the GEMM reads each of the reduction's outputs in its epilogue only, through the view the
 * reduction wrote it with (so that the value at a row's index is that row's). */
static bool read_as_written(const ts_kernel *gk, const row_reduction *rr) {
    for (int s = 0; s < gk->nacc; s++)
        for (int o = 0; o < rr->nout; o++) {
            if (gk->acc[s].buf != rr->out[o]->buf) continue;
            if (s == gk->a || s == gk->b0 || s == gk->b1 || !ts_access_same_view(&gk->acc[s], rr->out[o])) return false;
        }
    return true;
}

/* Whether kernel ri's reduction can move into GEMM gi (see rowstat.h). */
static bool fusable(const ts_plan *p, int ri, int gi, row_reduction *rr) {
    const ts_kernel *r = &p->k[ri], *gk = &p->k[gi];
    if (!as_row_reduction(r, rr) || r->red_axis != gk->red_axis) return false;
    for (int j = 0; j < rr->nstage; j++)
        if (!term_of_a(rr->stage[j], r, &gk->acc[gk->a])) return false;
    for (int o = 0; o < rr->nout; o++)
        if (!from_stages(rr->value[o], rr->nstage) || !private_between(p, rr->out[o]->buf, ri, gi)) return false;
    return read_as_written(gk, rr) && same_rows(gk, rr);
}

/* Every expression of k, for slot renumbering. */
static int kernel_exprs(ts_kernel *k, ts_expr **x) {
    int n = 0;
    x[n++] = &k->expr, x[n++] = &k->inner, x[n++] = &k->inner_weighted;
    for (int j = 0; j < k->nstage; j++) x[n++] = &k->stage[j];
    for (int o = 0; o < k->nextra; o++) x[n++] = &k->extra_expr[o];
    for (int o = 0; o < k->nrowstat; o++) x[n++] = &k->rowstat[o];
    x[n++] = &k->pre;
    return n;
}

/* Removes the operands of k that no expression loads and no operand role (a, b0, b1) names. */
static void drop_unused_operands(ts_kernel *k) {
    ts_expr *x[4 + TS_ROW_MAX_STAGES + TS_KERNEL_MAX_OUTS * 2];
    int nx = kernel_exprs(k, x);
    bool *used = ts_xcalloc((size_t)k->nacc + 1, sizeof *used);
    int *to = ts_xmalloc(sizeof *to * ((size_t)k->nacc + 1));
    if (k->kind == TS_KERNEL_GEMM || k->kind == TS_KERNEL_ATTENTION) {
        if (k->a >= 0) used[k->a] = true;
        if (k->b0 >= 0) used[k->b0] = true;
        if (k->b1 >= 0) used[k->b1] = true;
        if (k->two_k) used[k->a2] = used[k->b2] = true;
    }
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < x[i]->n; j++)
            if (x[i]->node[j].kind == TS_X_LOAD) used[x[i]->node[j].slot] = true;
    int n = 0;
    for (int s = 0; s < k->nacc; s++) {
        to[s] = used[s] ? n : -1;
        if (used[s]) k->acc[n++] = k->acc[s];
    }
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < x[i]->n; j++)
            if (x[i]->node[j].kind == TS_X_LOAD) x[i]->node[j].slot = to[x[i]->node[j].slot];
    if (k->kind == TS_KERNEL_GEMM || k->kind == TS_KERNEL_ATTENTION) {
        if (k->a >= 0) k->a = to[k->a];
        if (k->b0 >= 0) k->b0 = to[k->b0];
        if (k->b1 >= 0) k->b1 = to[k->b1];
        if (k->two_k) k->a2 = to[k->a2], k->b2 = to[k->b2];
    }
    k->nacc = n;
    free(used);
    free(to);
}

/* Removes buffer b from p (no kernel may still touch it); later buffers move down one. */
static void remove_buffer(ts_plan *p, int b) {
    for (int i = 0; i < p->nk; i++) {
        ts_kernel *k = &p->k[i];
        for (int s = 0; s < k->nacc; s++) k->acc[s].buf -= k->acc[s].buf > b;
        k->out.buf -= k->out.buf > b;
        for (int o = 0; o < k->nextra; o++) k->extra_out[o].buf -= k->extra_out[o].buf > b;
        if (ts_kernel_has_scratch(k)) k->scratch -= k->scratch > b;
        for (int o = 0; o < k->nrowstat; o++) k->rowstat_buf[o] -= k->rowstat_buf[o] > b;
    }
    memmove(&p->buf[b], &p->buf[b + 1], sizeof *p->buf * (size_t)(p->nbuf - b - 1));
    p->nbuf--;
}

static void remove_kernel(ts_plan *p, int i) {
    ts_kernel_free(&p->k[i]);
    memmove(&p->k[i], &p->k[i + 1], sizeof *p->k * (size_t)(p->nk - i - 1));
    p->nk--;
}

/* Moves reduction ri into GEMM gi (fusable). */
static void fuse(ts_plan *p, int ri, int gi, const row_reduction *rr) {
    ts_kernel *gk = &p->k[gi];
    gk->nstage = rr->nstage;
    for (int j = 0; j < rr->nstage; j++) {
        gk->stage[j] = ts_expr_copy(rr->stage[j]);
        gk->stage_combine[j] = rr->combine[j];
        for (int i = 0; i < gk->stage[j].n; i++)
            if (gk->stage[j].node[i].kind == TS_X_LOAD) gk->stage[j].node[i].slot = gk->a;
    }
    gk->nrowstat = rr->nout; /* under split-K each rank folds its share of k (gemm.cuh): the split stays */
    gk->cfg.library = false; /* the own kernel folds them; cuBLASLt cannot (--allow-cublas) */
    for (int o = 0; o < rr->nout; o++) gk->rowstat[o] = ts_expr_copy(rr->value[o]);
    for (int i = 0; i < gk->expr.n; i++) { /* the epilogue's loads of the row values: ACC 2 + o */
        ts_xnode *n = &gk->expr.node[i];
        for (int o = 0; o < rr->nout && n->kind == TS_X_LOAD; o++)
            if (gk->acc[n->slot].buf == rr->out[o]->buf) n->kind = TS_X_ACC, n->slot = 2 + o;
    }
    drop_unused_operands(gk);
    int32_t axes[2], na = 0; /* the published values' buffers: [batch or rows merged outside m, m] */
    const int32_t second = gk->batch_axis >= 0 ? gk->batch_axis : gk->m_outer;
    if (second >= 0 && (second == gk->m_outer || spans(&gk->acc[gk->a], second))) axes[na++] = second; /* as the kernel indexes */
    axes[na++] = gk->m_axis;
    for (int o = 0; o < rr->nout; o++) p->k[gi].rowstat_buf[o] = ts_plan_add_buffer(p, TS_BUF_TEMP, 0, TS_FP32, axes, na);
    int bufs[TS_KERNEL_MAX_OUTS], nb = rr->nout;
    for (int o = 0; o < nb; o++) bufs[o] = rr->out[o]->buf;
    remove_kernel(p, ri); /* rr points into it: not used below */
    for (int o = 0; o < nb; o++) { /* highest first, so that the others keep their numbers */
        int hi = o;
        for (int q = o + 1; q < nb; q++)
            if (bufs[q] > bufs[hi]) hi = q;
        int t = bufs[o];
        bufs[o] = bufs[hi], bufs[hi] = t;
        remove_buffer(p, bufs[o]);
    }
    ts_plan_number_temps(p);
}

/* The kernel before `before` that writes buffer buf, or -1. */
static int writer_of(const ts_plan *p, int buf, int before) {
    for (int i = before - 1; i >= 0; i--)
        if (ts_kernel_writes(&p->k[i], buf)) return i;
    return -1;
}

/* The reduction kernel (before gi) that can move into GEMM gi, its form in *rr; -1 when there is none. */
static int fusable_into(const ts_plan *p, int gi, row_reduction *rr) {
    const ts_kernel *gk = &p->k[gi];
    if (gk->kind != TS_KERNEL_GEMM || gk->nstage || gk->nrowstat || gk->two_k) return -1; /* one A: its rows */
    if (ts_gemm_a_km(gk)) return -1; /* A M-major: the templates fold rows of a K-major tile; cuBLASLt none */
    if (ts_gemm_fp32(p, gk)) return -1;         /* gemm_f32.cuh folds none either */
    for (int s = 0; s < gk->nacc; s++) {
        if (s == gk->a || s == gk->b0 || s == gk->b1 || p->buf[gk->acc[s].buf].kind != TS_BUF_TEMP) continue;
        int ri = writer_of(p, gk->acc[s].buf, gi);
        if (ri >= 0 && fusable(p, ri, gi, rr)) return ri;
    }
    return -1;
}

bool ts_plan_with_row_stats(const ts_plan *p, ts_plan *out) {
    row_reduction rr;
    int gi = 0;
    while (gi < p->nk && fusable_into(p, gi, &rr) < 0) gi++;
    if (gi == p->nk) return false; /* the common case: no copy */
    ts_plan_copy(out, p);
    for (; gi < out->nk; gi++) {
        int ri = fusable_into(out, gi, &rr);
        if (ri < 0) continue;
        fuse(out, ri, gi, &rr);
        gi--; /* the GEMM moved down one: look at what is now at gi again */
    }
    return true;
}

/* ---- row reductions of a GEMM's product (ts_plan_with_row_parts) -------------------------------------- */

/* Whether subtrees a (root i of x) and b (root j of y) compute the same: the same nodes, kid by kid. */
static bool same_subtree(const ts_expr *x, int i, const ts_expr *y, int j) {
    const ts_xnode *a = &x->node[i], *b = &y->node[j];
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case TS_X_CONST: return a->value == b->value;
    case TS_X_ACC:
    case TS_X_LOAD:
    case TS_X_INDEX: return a->slot == b->slot;
    case TS_X_OP:
        if (a->op != b->op || a->dtype != b->dtype) return false;
        for (int c = 0; c < ts_op_arity(a->op); c++)
            if (!same_subtree(x, a->kid[c], y, b->kid[c])) return false;
        return true;
    }
    return false;
}

/* x without the nodes its root does not reach (x's nodes freed). */
static ts_expr pruned(ts_expr *x) {
    bool *live = ts_xcalloc((size_t)x->n + 1, sizeof *live);
    int *map = ts_xmalloc(sizeof(int) * ((size_t)x->n + 1));
    ts_expr_live(x, false, live);
    ts_expr out = {0};
    for (int i = 0; i < x->n; i++) {
        if (!live[i]) continue;
        ts_xnode n = x->node[i];
        if (n.kind == TS_X_OP)
            for (int c = 0; c < ts_op_arity(n.op); c++) n.kid[c] = map[n.kid[c]];
        map[i] = ts_expr_push(&out, n);
    }
    free(live), free(map), free(x->node);
    return out;
}

/* x with every subtree equal to the whole of `pattern` (when given) replaced by node `with`, and with ACC
 * slots renumbered by acc_to (slot → new slot; -1: keep), as a new expression (free its node). */
static ts_expr substituted(const ts_expr *x, const ts_expr *pattern, ts_xnode with, const int *acc_to) {
    ts_expr out = {0};
    int *map = ts_xmalloc(sizeof(int) * ((size_t)x->n + 1));
    for (int i = 0; i < x->n; i++) {
        ts_xnode n = x->node[i];
        if (pattern && pattern->n && same_subtree(x, i, pattern, pattern->n - 1)) {
            map[i] = ts_expr_push(&out, with);
            continue;
        }
        if (n.kind == TS_X_ACC && acc_to && acc_to[n.slot] >= 0) n.slot = acc_to[n.slot];
        if (n.kind == TS_X_OP)
            for (int c = 0; c < ts_op_arity(n.op); c++) n.kid[c] = map[n.kid[c]];
        map[i] = ts_expr_push(&out, n);
    }
    free(map);
    return pruned(&out);
}

static bool reads_kind(const ts_expr *x, ts_xkind kind) {
    for (int i = 0; i < x->n; i++)
        if (x->node[i].kind == kind) return true;
    return false;
}

/* The one earlier stage result (ACC slot) x reads, -1 when none, -2 when several. */
static int acc_read(const ts_expr *x) {
    int k = -1;
    for (int i = 0; i < x->n; i++)
        if (x->node[i].kind == TS_X_ACC) {
            if (k >= 0 && k != x->node[i].slot) return -2;
            k = x->node[i].slot;
        }
    return k;
}

/* Reduction j of a per-row ROW kernel (stage[j]: LOAD t is the row's element, ACC i an earlier result) as one
 * tile's share of the whole row's (k->merge's convention): independent of the earlier results, the tile's own
 * result (it sums or maximizes alone); a sum reading one earlier maximum k of a term X (stage[k]) only through
 * exponentials of X − ACC k, such as Σ exp(x − max x), the tile's sum times that term at X = the tile's maximum
 * and ACC k = the row's: exp(x − M) = exp(x − m)·exp(m − M). The second form is checked on samples against the
 * identity (term(x, M) = term(x, m)·term(m, M) for x ≤ m ≤ M) before it is accepted, its operands sampled as
 * one value (one_value: a GEMM's product, every slot) or each its own. False when neither holds. */
static bool merge_of(const ts_kernel *r, int j, bool one_value, ts_expr *merge) {
    const ts_expr *x = &r->stage[j];
    const int k = acc_read(x), part = 2 + j;
    if (k == -1) { /* the tile's result itself */
        *merge = (ts_expr){0};
        ts_expr_push(merge, (ts_xnode){.kind = TS_X_ACC, .slot = part});
        return true;
    }
    if (k < 0 || k >= j || r->stage_combine[k] != TS_COMBINE_MAX || r->stage_combine[j] != TS_COMBINE_SUM) return false;
    const ts_expr *X = &r->stage[k];
    if (reads_kind(X, TS_X_ACC)) return false;
    int acc_to[TS_ROW_MAX_STAGES + 1];
    for (int i = 0; i <= TS_ROW_MAX_STAGES; i++) acc_to[i] = -1;
    acc_to[k] = 2 + TS_ROW_MAX_STAGES + k; /* the row's maximum */
    ts_expr shift = substituted(x, X, (ts_xnode){.kind = TS_X_ACC, .slot = 2 + k}, acc_to);
    bool ok = !reads_kind(&shift, TS_X_LOAD) && !reads_kind(&shift, TS_X_INDEX);
    unsigned long long s = 0x9e3779b97f4a7c15ull; /* deterministic samples (util.h ts_uniform) */
    for (int n = 0; ok && n < 32; n++) {
        double load[64] = {0}, acc[2 + 2 * TS_ROW_MAX_STAGES] = {0};
        if (r->nacc > 64) return free(shift.node), false;
        load[0] = 16 * ts_uniform(&s) - 8;
        for (int i = 1; i < r->nacc; i++) /* one_value: every slot is the product's element */
            load[i] = one_value ? load[0] : 16 * ts_uniform(&s) - 8;
        const double xv = ts_expr_eval(X, NULL, load, NULL, false);
        const double m = xv + 4 * ts_uniform(&s), M = m + 4 * ts_uniform(&s);
        acc[k] = M;
        const double whole = ts_expr_eval(x, acc, load, NULL, false);
        acc[k] = m;
        const double tile = ts_expr_eval(x, acc, load, NULL, false);
        acc[2 + k] = m, acc[2 + TS_ROW_MAX_STAGES + k] = M;
        const double factor = ts_expr_eval(&shift, acc, NULL, NULL, false);
        ok = isfinite(whole) && fabs(tile * factor - whole) <= 1e-9 * (fabs(whole) + 1e-300);
    }
    if (!ok) return free(shift.node), false;
    const int fac = shift.n - 1, tsum = ts_expr_push(&shift, (ts_xnode){.kind = TS_X_ACC, .slot = part});
    ts_expr_push(&shift, (ts_xnode){.kind = TS_X_OP, .op = TS_OP_MUL, .kid = {tsum, fac}});
    *merge = shift;
    return true;
}

/* Whether axes outer and inner of access a form one index, outer's stride inner's times its size (both
 * absent: true) — the GEMM's merged rows or batches, which its functor addresses as one index. */
static bool nested(const ts_graph *g, const ts_access *a, int32_t outer, int32_t inner) {
    if (outer < 0) return true;
    ts_dyn dyn;
    if (ts_dyn_of(g, &dyn) != 0) return false;
    ts_sym d = ts_sym_add(ts_access_stride(a, outer),
                          ts_sym_mul(ts_sym_mul(ts_access_stride(a, inner), ts_sym_axis(g, &dyn, inner)), ts_sym_const(-1)));
    return d.n == 0;
}

/* Whether the ROW kernel's per-row output can be the GEMM's: over the GEMM's rows (nothing along the reduced
 * columns), at offset 0, merged rows and batches nested as the functor's row and batch indices address them;
 * its value from the reductions' results alone. */
static bool per_row_output(const ts_graph *g, const ts_kernel *gk, const ts_access *out, const ts_expr *value) {
    return !spans(out, gk->n_axis) && ts_sym_equal(out->offset, ts_sym_const(0)) &&
           nested(g, out, gk->m_outer, gk->m_axis) && nested(g, out, gk->batch_outer, gk->batch_axis) &&
           !reads_kind(value, TS_X_LOAD) && !reads_kind(value, TS_X_INDEX);
}

/* Whether GEMM gi's product goes to ROW kernel ri alone, which reduces each of its rows along the GEMM's
 * columns to one per-row output (see rowstat.h). */
static bool row_parts_fusable(const ts_plan *p, const ts_graph *g, int gi, int ri) {
    const ts_kernel *gk = &p->k[gi], *r = &p->k[ri];
    if (r->kind != TS_KERNEL_ROW || !r->per_row || r->columns || r->nextra > 0 || r->red_axis != gk->n_axis) return false;
    if (r->nstage < 1 || r->nstage > TS_ROW_MAX_STAGES) return false;
    if (!private_between(p, gk->out.buf, gi, ri)) return false;
    for (int s = 0; s < r->nacc; s++) /* it reads the product alone, as the GEMM wrote it */
        if (!ts_access_same_view(&r->acc[s], &gk->out)) return false;
    for (int j = 0; j < r->nstage; j++)
        if (r->stage_combine[j] == TS_COMBINE_WSUM || reads_kind(&r->stage[j], TS_X_INDEX)) return false;
    return per_row_output(g, gk, &r->out, &r->expr);
}

static bool row_parts_gemm(const ts_plan *p, const ts_kernel *gk) {
    return gk->kind == TS_KERNEL_GEMM && gk->b1 < 0 && !gk->nstage && !gk->nrowstat && !gk->row_parts && !gk->k_partials &&
           !(gk->batch_axis >= 0 && gk->m_outer >= 0) && /* rows merged beside a batch: not the row kernels' */
           !ts_gemm_fp32(p, gk) && p->buf[gk->out.buf].kind == TS_BUF_TEMP;
}

/* The reader of GEMM gi's product when row_parts_fusable, else -1. */
static int row_parts_reader(const ts_plan *p, const ts_graph *g, int gi) {
    if (!row_parts_gemm(p, &p->k[gi])) return -1;
    for (int ri = gi + 1; ri < p->nk; ri++)
        if (kernel_reads(&p->k[ri], p->k[gi].out.buf)) return row_parts_fusable(p, g, gi, ri) ? ri : -1;
    return -1;
}

/* Moves ROW kernel ri's reductions into GEMM gi; false (the plan untouched) when a merge does not hold. */
static bool fuse_row_parts(ts_plan *p, const ts_graph *g, int gi, int ri) {
    ts_kernel *gk = &p->k[gi];
    const ts_kernel *r = &p->k[ri];
    ts_expr merge[TS_ROW_MAX_STAGES] = {{0}};
    for (int j = 0; j < r->nstage; j++)
        if (!merge_of(r, j, true, &merge[j])) {
            for (int i = 0; i < j; i++) free(merge[i].node);
            return false;
        }
    int acc_to[TS_ROW_MAX_STAGES + 1];
    for (int i = 0; i < TS_ROW_MAX_STAGES; i++) acc_to[i] = 2 + i; /* the tile's earlier results */
    acc_to[TS_ROW_MAX_STAGES] = -1;
    for (int j = 0; j < r->nstage; j++) {
        ts_expr y = substituted(&r->stage[j], NULL, (ts_xnode){0}, acc_to);
        for (int i = 0; i < y.n; i++) /* the product's element: ACC 0 */
            if (y.node[i].kind == TS_X_LOAD) y.node[i] = (ts_xnode){.kind = TS_X_ACC, .slot = 0};
        gk->stage[j] = y;
        gk->stage_combine[j] = r->stage_combine[j];
        gk->merge[j] = merge[j];
    }
    gk->nstage = r->nstage;
    gk->pre = gk->expr;
    gk->expr = ts_expr_copy(&r->expr);
    gk->row_parts = true;
    gk->scratch = gk->out.buf;
    gk->out = r->out;
    remove_kernel(p, ri);
    ts_config_choose(g, p, gk); /* its default form: no cluster, no ping-pong (config.c), no cuBLASLt */
    ts_plan_number_temps(p);
    return true;
}

bool ts_plan_with_row_parts(const ts_plan *p, const ts_graph *g, ts_plan *out) {
    int gi = 0;
    while (gi < p->nk && row_parts_reader(p, g, gi) < 0) gi++;
    if (gi == p->nk) return false;
    ts_plan_copy(out, p);
    bool any = false;
    for (; gi < out->nk; gi++) {
        int ri = row_parts_reader(out, g, gi);
        if (ri >= 0) any |= fuse_row_parts(out, g, gi, ri);
    }
    if (!any) ts_plan_free(out);
    return any;
}

int ts_row_online_stage(const ts_kernel *k, ts_expr *merge) {
    *merge = (ts_expr){0};
    if (k->kind != TS_KERNEL_ROW || k->columns) return -1;
    for (int j = 0; j + 1 < k->nstage; j++) {
        if (k->stage_combine[j] != TS_COMBINE_MAX || acc_read(&k->stage[j + 1]) != j) continue;
        if (merge_of(k, j + 1, false, merge)) return j;
        free(merge->node);
        *merge = (ts_expr){0};
    }
    return -1;
}

unsigned ts_row_first_pass_joins(const ts_kernel *k, int online) {
    unsigned joins = 0;
    for (int j = online == 0 ? 2 : 1; j < k->nstage; j++)
        if (j != online && j != online + 1 && acc_read(&k->stage[j]) == -1) joins |= 1u << j;
    return joins;
}

/* Kernel k's online stage (ts_row_online_stage) without its merge. */
static int online_stage(const ts_kernel *k) {
    ts_expr merge;
    const int online = ts_row_online_stage(k, &merge);
    free(merge.node);
    return online;
}

int ts_row_uncached_passes(const ts_kernel *k) {
    const int online = online_stage(k);
    return k->nstage - (online >= 0) - __builtin_popcount(ts_row_first_pass_joins(k, online)) + (k->per_row ? 0 : 1);
}

/* ---- prologues of cached operands -------------------------------------------------------------- */

/* Per node of x: 2 where it is a function of LOAD `slot` and constants that reads the load, 1 a constant term,
 * 0 otherwise (heap). */
static uint8_t *pure_in(const ts_expr *x, int slot) {
    uint8_t *pure = ts_xcalloc((size_t)x->n + 1, 1);
    for (int i = 0; i < x->n; i++) {
        const ts_xnode *n = &x->node[i];
        if (n->kind == TS_X_CONST) pure[i] = 1;
        else if (n->kind == TS_X_LOAD) pure[i] = n->slot == slot ? 2 : 0;
        else if (n->kind == TS_X_OP) {
            uint8_t v = 1;
            for (int c = 0; c < ts_op_arity(n->op) && v; c++) v = pure[n->kid[c]] ? (pure[n->kid[c]] > v ? 2 : v) : 0;
            pure[i] = v;
        }
    }
    return pure;
}

/* The node of x that every reader of LOAD `slot` reads it through — the widest function of the load alone that
 * x uses; -1 if x does not read the load, -2 where x uses two different ones. */
static int frontier_of(const ts_expr *x, int slot) {
    uint8_t *pure = pure_in(x, slot);
    bool *outer = ts_xcalloc((size_t)x->n + 1, sizeof *outer); /* read by a node that is no function of the load */
    if (x->n) outer[x->n - 1] = true;                             /* the root */
    for (int i = 0; i < x->n; i++)
        if (x->node[i].kind == TS_X_OP && pure[i] != 2)
            for (int c = 0; c < ts_op_arity(x->node[i].op); c++) outer[x->node[i].kid[c]] = true;
    int found = -1;
    for (int i = 0; i < x->n && found != -2; i++) {
        if (pure[i] != 2 || !outer[i]) continue;
        if (found < 0) found = i;
        else if (!same_subtree(x, found, x, i)) found = -2;
    }
    free(pure);
    free(outer);
    return found;
}

/* The subexpression of x rooted at node i, as an expression of its own. */
static ts_expr subtree(const ts_expr *x, int i) {
    ts_expr upto = {0};
    for (int j = 0; j <= i; j++) ts_expr_push(&upto, x->node[j]);
    return pruned(&upto);
}

/* x with every node that computes prologue[s] (s < nacc, n > 0) replaced by LOAD s, its unused nodes dropped. */
static ts_expr rebuilt(const ts_expr *x, const ts_expr *prologue, int nacc) {
    ts_expr y = ts_expr_copy(x);
    for (int s = 0; s < nacc; s++) { /* one prologue reads one slot: replacing one makes no match for another */
        if (!prologue[s].n) continue;
        ts_expr z = substituted(&y, &prologue[s], (ts_xnode){.kind = TS_X_LOAD, .slot = s}, NULL);
        free(y.node);
        y = z;
    }
    return y;
}

/* The expressions of ROW kernel k, in one list: its stages, expr, its extra outputs'. */
static int row_exprs(const ts_kernel *k, const ts_expr **x) {
    int n = 0;
    for (int j = 0; j < k->nstage; j++) x[n++] = &k->stage[j];
    x[n++] = &k->expr;
    for (int o = 0; o < k->nextra; o++) x[n++] = &k->extra_expr[o];
    return n;
}

/* The prologue of cached operand `slot` of k (n = 0: none): the one function of the load every expression reads
 * it through, an operation at least. */
static ts_expr prologue_of(const ts_kernel *k, int slot) {
    const ts_expr *x[TS_ROW_MAX_STAGES + TS_KERNEL_MAX_OUTS];
    const int nx = row_exprs(k, x);
    int first = -1, at = -1;
    for (int e = 0; e < nx; e++) {
        const int f = frontier_of(x[e], slot);
        if (f == -1) continue;
        if (f == -2 || x[e]->node[f].kind != TS_X_OP) return (ts_expr){0};
        if (first < 0) first = e, at = f;
        else if (!same_subtree(x[first], at, x[e], f)) return (ts_expr){0};
    }
    return first < 0 ? (ts_expr){0} : subtree(x[first], at);
}

bool ts_row_hoist(const ts_kernel *k, ts_row_hoisted *h) {
    memset(h, 0, sizeof *h);
    h->nacc = k->nacc;
    h->prologue = ts_xcalloc((size_t)k->nacc + 1, sizeof *h->prologue);
    bool any = false;
    if (k->kind == TS_KERNEL_ROW)
        for (int s = 0; s < k->nacc; s++)
            if (ts_row_operand_cached(k, s)) h->prologue[s] = prologue_of(k, s), any |= h->prologue[s].n > 0;
    /* rebuilt() copies an expression as it is where every prologue is empty */
    for (int j = 0; j < k->nstage; j++) h->stage[j] = rebuilt(&k->stage[j], h->prologue, k->nacc);
    h->expr = rebuilt(&k->expr, h->prologue, k->nacc);
    for (int o = 0; o < k->nextra; o++) h->extra_expr[o] = rebuilt(&k->extra_expr[o], h->prologue, k->nacc);
    return any;
}

void ts_row_hoisted_free(ts_row_hoisted *h) {
    for (int s = 0; s < h->nacc; s++) free(h->prologue[s].node);
    free(h->prologue);
    for (int j = 0; j < TS_ROW_MAX_STAGES; j++) free(h->stage[j].node);
    free(h->expr.node);
    for (int o = 0; o < TS_KERNEL_MAX_OUTS - 1; o++) free(h->extra_expr[o].node);
    memset(h, 0, sizeof *h);
}
