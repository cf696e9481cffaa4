/* workspace.c — temporaries placed by liveness (see workspace.h). */
#include "workspace.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

ts_sym ts_workspace_buffer_bytes(const ts_plan *p, const ts_graph *g, const ts_dyn *dyn, int b) {
    const ts_buffer *B = &p->buf[b];
    ts_sym n = ts_sym_const(ts_dtype_bytes(B->dtype));
    if (B->ndim == 0 && B->elems > 0) return ts_sym_mul(n, ts_sym_const(B->elems));
    for (int d = 0; d < B->ndim; d++)
        n = ts_sym_mul(n, d == B->ndim - 1 && B->pitch ? ts_sym_const(B->pitch) : ts_sym_axis(g, dyn, B->axis[d]));
    return n;
}

/* A single term c·Π size^e (or 0), the form every buffer's size has: *m is it. */
static bool one_term(const ts_sym *s, ts_monomial *m) {
    if (s->n > 1) return false;
    *m = s->n ? s->t[0] : (ts_monomial){0};
    return true;
}

/* c1·Π x^e1 ≥ c2·Π x^e2 for every x ≥ 1 when c1 ≥ c2 ≥ 0 and e1 ≥ e2 axis by axis; for other forms only
 * equal sizes are known to fit. */
bool ts_workspace_fits(const ts_sym *have, const ts_sym *need) {
    ts_monomial h, n;
    if (!one_term(have, &h) || !one_term(need, &n)) {
        ts_sym d = ts_sym_add(*have, ts_sym_mul(*need, ts_sym_const(-1)));
        return d.n == 0;
    }
    if (n.coef == 0) return true;
    if (n.coef < 0 || h.coef < n.coef) return false;
    for (int i = 0; i < TS_SYM_MAX_DYN; i++)
        if (h.exp[i] < n.exp[i]) return false;
    return true;
}

static void touch(ts_workspace *w, int b, int k) {
    if (w->first[b] < 0) w->first[b] = k;
    w->last[b] = k;
}

/* first[] and last[]: the kernels that touch each buffer, in launch order. */
static void lifetimes(const ts_plan *p, ts_workspace *w) {
    for (int b = 0; b < p->nbuf; b++) w->first[b] = w->last[b] = -1;
    for (int i = 0; i < p->nk; i++) {
        const ts_kernel *k = &p->k[i];
        touch(w, k->out.buf, i);
        for (int s = 0; s < k->nacc; s++) touch(w, k->acc[s].buf, i);
        for (int o = 0; o < k->nextra && o < TS_KERNEL_MAX_OUTS - 1; o++) touch(w, k->extra_out[o].buf, i);
        if (ts_kernel_has_scratch(k)) touch(w, k->scratch, i);
        for (int o = 0; o < k->nrowstat; o++) touch(w, k->rowstat_buf[o], i);
    }
}

static bool live_together(const ts_workspace *w, int a, int b) { return w->first[a] <= w->last[b] && w->first[b] <= w->last[a]; }

/* Whether temporary b may join slot s: the slot is large enough and none of its temporaries is live with b. */
static bool slot_takes(const ts_plan *p, const ts_workspace *w, int s, int b, const ts_sym *bytes) {
    if (!ts_workspace_fits(&w->slot_bytes[s], bytes)) return false;
    for (int o = 0; o < p->nbuf; o++)
        if (w->slot_of[o] == s && live_together(w, o, b)) return false;
    return true;
}

typedef struct {
    int buf;
    int64_t typical; /* bytes at the typical sizes */
} sized_buffer;

/* Largest first; ties by buffer index (qsort is not stable, and the header must not depend on libc). */
static int by_size_descending(const void *a, const void *b) {
    const sized_buffer *x = a, *y = b;
    if (x->typical != y->typical) return x->typical > y->typical ? -1 : 1;
    return x->buf - y->buf;
}

void ts_workspace_plan(const ts_plan *p, const ts_graph *g, const ts_dyn *dyn, ts_workspace *w) {
    size_t nb = (size_t)p->nbuf + 1;
    w->nslot = 0;
    w->slot_bytes = ts_xcalloc(nb, sizeof *w->slot_bytes);
    w->slot_of = ts_xmalloc(nb * sizeof *w->slot_of);
    w->first = ts_xmalloc(nb * sizeof *w->first);
    w->last = ts_xmalloc(nb * sizeof *w->last);
    lifetimes(p, w);
    int64_t typical[TS_SYM_MAX_DYN];
    for (int d = 0; d < dyn->n; d++) typical[d] = g->axes[dyn->axis[d]].size;
    sized_buffer *order = ts_xmalloc(nb * sizeof *order);
    int n = 0;
    for (int b = 0; b < p->nbuf; b++) {
        w->slot_of[b] = -1;
        if (p->buf[b].kind != TS_BUF_TEMP || w->first[b] < 0) continue;
        ts_sym bytes = ts_workspace_buffer_bytes(p, g, dyn, b);
        order[n++] = (sized_buffer){b, ts_sym_eval(&bytes, typical)};
    }
    qsort(order, (size_t)n, sizeof *order, by_size_descending);
    for (int i = 0; i < n; i++) {
        int b = order[i].buf, s = 0;
        ts_sym bytes = ts_workspace_buffer_bytes(p, g, dyn, b);
        while (s < w->nslot && !slot_takes(p, w, s, b, &bytes)) s++;
        if (s == w->nslot) w->slot_bytes[w->nslot++] = bytes;
        w->slot_of[b] = s;
    }
    free(order);
}

void ts_workspace_free(ts_workspace *w) {
    free(w->slot_bytes);
    free(w->slot_of);
    free(w->first);
    free(w->last);
    memset(w, 0, sizeof *w);
}

static int64_t round256(int64_t v) { return (v + 255) & ~(int64_t)255; }

int64_t ts_workspace_offset(const ts_workspace *w, int s, const int64_t *sizes) {
    int64_t off = 0;
    for (int i = 0; i < s; i++) off += round256(ts_sym_eval(&w->slot_bytes[i], sizes));
    return off;
}

int64_t ts_workspace_total(const ts_workspace *w, const int64_t *sizes) { return ts_workspace_offset(w, w->nslot, sizes); }
