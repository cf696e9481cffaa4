/* rowstat.c — prologue fusion: a row reduction of a GEMM's A operand moved into the GEMM (rowstat.h). */
#include "rowstat.h"

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
    if (gk->batch_outer >= 0) return false;
    const ts_access *a = &gk->acc[gk->a];
    int32_t rows[2] = {gk->m_axis, gk->batch_axis}, with_k[3] = {gk->m_axis, gk->red_axis, gk->batch_axis};
    int nrows = gk->batch_axis >= 0 ? 2 : 1;
    if (!moves_only_along(a, with_k, gk->batch_axis >= 0 ? 3 : 2)) return false;
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
        if (k->a_scale >= 0) used[k->a_scale] = true;
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
        if (k->a_scale >= 0) k->a_scale = to[k->a_scale];
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

/* Removes kernel i and its nb output buffers bufs (which no other kernel touches any more) from p. */
static void remove_kernel_and_outputs(ts_plan *p, int i, int *bufs, int nb) {
    remove_kernel(p, i);
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
    gk->nrowstat = rr->nout;
    for (int o = 0; o < rr->nout; o++) gk->rowstat[o] = ts_expr_copy(rr->value[o]);
    for (int i = 0; i < gk->expr.n; i++) { /* the epilogue's loads of the row values: ACC 2 + o */
        ts_xnode *n = &gk->expr.node[i];
        for (int o = 0; o < rr->nout && n->kind == TS_X_LOAD; o++)
            if (gk->acc[n->slot].buf == rr->out[o]->buf) n->kind = TS_X_ACC, n->slot = 2 + o;
    }
    drop_unused_operands(gk);
    int bufs[TS_KERNEL_MAX_OUTS], nb = rr->nout;
    for (int o = 0; o < nb; o++) bufs[o] = rr->out[o]->buf;
    remove_kernel_and_outputs(p, ri, bufs, nb); /* rr points into the kernel: not used below */
}

/* ---- a normalised A operand: A[m, k] = f(row m's statistics of x) · x[m, k] · g[k] --------------- */

/* The factors of a ROW kernel's output as a product: x (the one operand that moves along the row and
 * across rows), the gain g (an operand along the row only, or -1) and the subtrees that read nothing but
 * stage results and constants (node indices). */
typedef struct {
    int x, gain, nrow;
    int row[TS_ROW_MAX_STAGES * 2];
} norm_factors;

/* Whether the subtree at node i reads only stage results (ACC j < nstage) and constants. */
static bool only_stages_below(const ts_expr *x, int i, int nstage) {
    const ts_xnode *n = &x->node[i];
    if (n->kind == TS_X_LOAD || n->kind == TS_X_INDEX) return false;
    if (n->kind == TS_X_ACC) return n->slot < nstage;
    if (n->kind == TS_X_CONST) return true;
    for (int c = 0; c < ts_op_arity(n->op); c++)
        if (!only_stages_below(x, n->kid[c], nstage)) return false;
    return true;
}

static bool factor(const ts_kernel *r, int i, norm_factors *f) {
    const ts_xnode *n = &r->expr.node[i];
    if (n->kind == TS_X_OP && n->op == TS_OP_MUL) return factor(r, n->kid[0], f) && factor(r, n->kid[1], f);
    if (only_stages_below(&r->expr, i, r->nstage)) {
        if (f->nrow == (int)(sizeof f->row / sizeof f->row[0])) return false;
        f->row[f->nrow++] = i;
        return true;
    }
    if (n->kind != TS_X_LOAD) return false;
    const ts_access *a = &r->acc[n->slot];
    int32_t along = r->red_axis;
    if (moves_only_along(a, &along, 1)) { /* a vector along the row: the gain, contiguous */
        if (f->gain >= 0 || ts_access_unit_axis(a) != r->red_axis) return false;
        f->gain = n->slot;
        return true;
    }
    if (f->x >= 0) return false;
    f->x = n->slot;
    return true;
}

/* Whether no kernel strictly between w and r writes buffer buf. */
static bool unwritten_between(const ts_plan *p, int buf, int w, int r) {
    for (int i = w + 1; i < r; i++)
        if (ts_kernel_writes(&p->k[i], buf)) return false;
    return true;
}

/* Whether GEMM gk reads buffer buf as its A operand and nowhere else. */
static bool read_only_as_a(const ts_kernel *gk, int buf) {
    for (int s = 0; s < gk->nacc; s++)
        if (gk->acc[s].buf == buf && s != gk->a) return false;
    return true;
}

/* Whether ROW kernel ri writes GEMM gi's A operand as a normalised x (the factors in *f): see
 * ts_plan_with_row_stats. */
static bool normalises_a(const ts_graph *g, const ts_plan *p, int ri, int gi, norm_factors *f) {
    const ts_kernel *r = &p->k[ri], *gk = &p->k[gi];
    if (r->kind != TS_KERNEL_ROW || r->per_row || r->columns || r->nextra || r->nstage < 1 || r->red_axis != gk->red_axis)
        return false;
    if (!ts_access_same_view(&gk->acc[gk->a], &r->out) || !private_between(p, r->out.buf, ri, gi) ||
        !read_only_as_a(gk, r->out.buf) || gk->batch_outer >= 0 || !ts_config_gemm_skinny(g, gk))
        return false;
    *f = (norm_factors){.x = -1, .gain = -1};
    if (!factor(r, r->expr.n - 1, f) || f->x < 0) return false;
    const ts_access *x = &r->acc[f->x];
    ts_dtype t = p->buf[r->out.buf].dtype;
    if (p->buf[x->buf].dtype != t || (f->gain >= 0 && p->buf[r->acc[f->gain].buf].dtype != t)) return false;
    if (!unwritten_between(p, x->buf, ri, gi) || (f->gain >= 0 && !unwritten_between(p, r->acc[f->gain].buf, ri, gi)))
        return false;
    int32_t with_k[3] = {gk->m_axis, gk->red_axis, gk->batch_axis};
    if (!moves_only_along(x, with_k, gk->batch_axis >= 0 ? 3 : 2)) return false;
    for (int j = 0; j < r->nstage; j++)
        if (r->stage_combine[j] == TS_COMBINE_WSUM || !term_of_a(&r->stage[j], r, x)) return false;
    return true;
}

/* Copies the subtree of src at node i into dst (memo[i]: its index there, -1 before); returns it. */
static int copy_subtree(const ts_expr *src, int i, ts_expr *dst, int *memo) {
    if (memo[i] >= 0) return memo[i];
    ts_xnode n = src->node[i];
    if (n.kind == TS_X_OP)
        for (int c = 0; c < ts_op_arity(n.op); c++) n.kid[c] = copy_subtree(src, n.kid[c], dst, memo);
    return memo[i] = ts_expr_push(dst, n);
}

/* The product of r's row factors (1 when there are none), as the GEMM's row value 0. */
static ts_expr row_value(const ts_kernel *r, const norm_factors *f) {
    ts_expr v = {0};
    int *memo = ts_xmalloc(sizeof *memo * (size_t)r->expr.n);
    for (int i = 0; i < r->expr.n; i++) memo[i] = -1;
    int prod = -1;
    for (int j = 0; j < f->nrow; j++) {
        int t = copy_subtree(&r->expr, f->row[j], &v, memo);
        prod = prod < 0 ? t : ts_expr_push(&v, (ts_xnode){.kind = TS_X_OP, .op = TS_OP_MUL, .kid = {prod, t}});
    }
    if (prod < 0) ts_expr_push(&v, (ts_xnode){.kind = TS_X_CONST, .value = 1});
    free(memo);
    return v;
}

/* The epilogue e with every accumulator (ACC 0, ACC 1) multiplied by the row value (ACC 2). */
static ts_expr scale_accumulators(const ts_expr *e) {
    ts_expr out = {0};
    int *to = ts_xmalloc(sizeof *to * (size_t)(e->n ? e->n : 1));
    for (int i = 0; i < e->n; i++) {
        ts_xnode n = e->node[i];
        if (n.kind == TS_X_ACC && n.slot < 2) {
            int acc = ts_expr_push(&out, n), row = ts_expr_push(&out, (ts_xnode){.kind = TS_X_ACC, .slot = 2});
            to[i] = ts_expr_push(&out, (ts_xnode){.kind = TS_X_OP, .op = TS_OP_MUL, .kid = {acc, row}});
            continue;
        }
        if (n.kind == TS_X_OP)
            for (int c = 0; c < ts_op_arity(n.op); c++) n.kid[c] = to[n.kid[c]];
        to[i] = ts_expr_push(&out, n);
    }
    free(to);
    return out;
}

static int add_operand(ts_kernel *k, const ts_access *a) {
    TS_GROW(k->acc, k->nacc, k->cap_acc);
    k->acc[k->nacc] = *a;
    return k->nacc++;
}

/* Moves ROW kernel ri, which normalises GEMM gi's A operand (normalises_a), into the GEMM. */
static void fuse_normalised(ts_plan *p, int ri, int gi, const norm_factors *f) {
    ts_kernel *gk = &p->k[gi];
    const ts_kernel *r = &p->k[ri];
    gk->a = add_operand(gk, &r->acc[f->x]);
    if (f->gain >= 0) gk->a_scale = add_operand(gk, &r->acc[f->gain]);
    gk->nstage = r->nstage;
    for (int j = 0; j < r->nstage; j++) {
        gk->stage[j] = ts_expr_copy(&r->stage[j]);
        gk->stage_combine[j] = r->stage_combine[j];
        for (int i = 0; i < gk->stage[j].n; i++)
            if (gk->stage[j].node[i].kind == TS_X_LOAD) gk->stage[j].node[i].slot = gk->a;
    }
    gk->nrowstat = 1;
    gk->rowstat[0] = row_value(r, f);
    ts_expr e = scale_accumulators(&gk->expr);
    free(gk->expr.node);
    gk->expr = e;
    drop_unused_operands(gk); /* the normalised tensor's view */
    int buf = r->out.buf;
    remove_kernel_and_outputs(p, ri, &buf, 1);
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
    if (gk->kind != TS_KERNEL_GEMM || gk->nstage || gk->nrowstat) return -1;
    for (int s = 0; s < gk->nacc; s++) {
        if (s == gk->a || s == gk->b0 || s == gk->b1 || p->buf[gk->acc[s].buf].kind != TS_BUF_TEMP) continue;
        int ri = writer_of(p, gk->acc[s].buf, gi);
        if (ri >= 0 && fusable(p, ri, gi, rr)) return ri;
    }
    return -1;
}

/* The ROW kernel (before gi) that normalises GEMM gi's A operand (normalises_a), its factors in *f; -1 when
 * there is none. */
static int normalising_a(const ts_graph *g, const ts_plan *p, int gi, norm_factors *f) {
    const ts_kernel *gk = &p->k[gi];
    if (gk->kind != TS_KERNEL_GEMM || gk->nstage || gk->nrowstat || gk->a_scale >= 0) return -1;
    const ts_access *a = &gk->acc[gk->a];
    if (p->buf[a->buf].kind != TS_BUF_TEMP) return -1;
    int ri = writer_of(p, a->buf, gi);
    return ri >= 0 && normalises_a(g, p, ri, gi, f) ? ri : -1;
}

/* Whether p has a kernel that moves into a GEMM (either form). */
static bool any_fusable(const ts_graph *g, const ts_plan *p) {
    row_reduction rr;
    norm_factors f;
    for (int gi = 0; gi < p->nk; gi++)
        if (fusable_into(p, gi, &rr) >= 0 || normalising_a(g, p, gi, &f) >= 0) return true;
    return false;
}

bool ts_plan_with_row_stats(const ts_graph *g, const ts_plan *p, ts_plan *out) {
    if (!any_fusable(g, p)) return false; /* the common case: no copy */
    ts_plan_copy(out, p);
    for (int gi = 0; gi < out->nk; gi++) {
        row_reduction rr;
        norm_factors f;
        int ri = fusable_into(out, gi, &rr);
        if (ri >= 0) fuse(out, ri, gi, &rr);
        else if ((ri = normalising_a(g, out, gi, &f)) >= 0) fuse_normalised(out, ri, gi, &f);
        else continue;
        gi--; /* the GEMM moved down one: look at what is now at gi again */
    }
    return true;
}
