/* rowstat.c — prologue fusion: a row reduction of a GEMM's A operand moved into the GEMM (rowstat.h). */
#include "rowstat.h"

#include <stdlib.h>
#include <string.h>

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
    if (gk->batch_outer >= 0) return false;
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
    return n;
}

/* Removes the operands of k that no expression loads and no operand role (a, b0, b1) names. */
static void drop_unused_operands(ts_kernel *k) {
    ts_expr *x[3 + TS_ROW_MAX_STAGES + TS_KERNEL_MAX_OUTS * 2];
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
