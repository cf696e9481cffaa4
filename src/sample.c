/* sample.c — sampled float64 references (see sample.h): which axes are separable, which rows to keep,
 * gathering rows, and the interpreter run on the graph cut down to them. */
#include "sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"
#include "util.h"

/* ---- separability ------------------------------------------------------------------------------ */

/* The dim of node s over root axis a, or -1. */
static int node_dim_of(const ts_graph *g, const ts_node *s, int32_t a) {
    for (int d = 0; d < s->ndim; d++)
        if (ts_axis_root(g, s->axis[d]) == a) return d;
    return -1;
}

/* Row-major stride of dim d of node s. */
static int64_t node_stride(const ts_graph *g, const ts_node *s, int d) {
    int64_t st = 1;
    for (int i = s->ndim - 1; i > d; i--) st *= g->axes[s->axis[i]].size;
    return st;
}

/* Does view v of node `src` read root axis a position for position (or not at all, when src lacks it)? */
static bool view_keeps_axis(const ts_graph *g, const ts_ref *r, int32_t a) {
    const ts_node *s = &g->nodes[r->node];
    int k = node_dim_of(g, s, a), seen = 0;
    for (int j = 0; j < r->view.ndim; j++) {
        if (ts_axis_root(g, r->view.axis[j]) != a) continue;
        seen++;
        if (k < 0) {
            if (r->view.stride[j] != 0) return false; /* a made from other axes (reshape, slice) */
        } else if (r->view.stride[j] != node_stride(g, s, k) || r->view.size[j] != g->axes[s->axis[k]].size) {
            return false;
        }
    }
    return k < 0 ? true : seen == 1; /* src has a: the view must read it exactly once, unmerged */
}

static bool reduces_over(const ts_graph *g, const ts_node *n, int32_t a) {
    ts_op_kind kind = ts_op_kind_of(n->op);
    if (kind == TS_KIND_UPDATE) /* the position written depends on the whole of both */
        return ts_axis_root(g, n->reduce_axis) == a || ts_axis_root(g, n->at_axis) == a ||
               (n->rows_axis >= 0 && ts_axis_root(g, n->rows_axis) == a);
    return (kind == TS_KIND_REDUCE || kind == TS_KIND_FUSED) && ts_axis_root(g, n->reduce_axis) == a;
}

static bool axis_separable(const ts_graph *g, int32_t a) {
    for (int i = 0; i < g->nnodes; i++) {
        const ts_node *n = &g->nodes[i];
        if (reduces_over(g, n, a)) return false;
        for (int s = 0; s < n->nsrc; s++)
            if (!view_keeps_axis(g, &n->src[s], a)) return false;
    }
    for (int i = 0; i < g->noutputs; i++) {
        const ts_ref *r = &g->outputs[i].ref;
        bool has = false;
        for (int j = 0; j < r->view.ndim; j++) has |= ts_axis_root(g, r->view.axis[j]) == a && r->view.stride[j] != 0;
        if (!has || !view_keeps_axis(g, r, a)) return false;
    }
    return true;
}

void ts_separable_axes(const ts_graph *g, bool *sep) {
    for (int a = 0; a < g->naxes; a++) sep[a] = ts_axis_root(g, a) == a && g->axes[a].size > 1 && axis_separable(g, a);
}

/* ---- choosing rows ----------------------------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* `rows` distinct indices of [0, size): first and last, the rest uniformly drawn. */
static int64_t *draw_rows(int64_t size, int64_t rows, unsigned long long *state) {
    int64_t *idx = ts_xmalloc(sizeof *idx * (size_t)rows);
    bool *taken = ts_xcalloc((size_t)size, 1);
    int64_t n = 0;
    idx[n++] = 0, taken[0] = true;
    if (rows > 1) idx[n++] = size - 1, taken[size - 1] = true;
    while (n < rows) {
        int64_t i = (int64_t)(ts_splitmix64(state) % (uint64_t)size);
        if (!taken[i]) taken[i] = true, idx[n++] = i;
    }
    free(taken);
    qsort(idx, (size_t)n, sizeof *idx, cmp_i64);
    return idx;
}

double ts_sample_flops(const ts_graph *g, const ts_sample_plan *p) {
    double f = ts_graph_measure(g).flops;
    for (int i = 0; i < p->n; i++) f *= (double)p->count[i] / (double)g->axes[p->axis[i]].size;
    return f;
}

void ts_sample_choose(const ts_graph *g, int64_t rows, double budget_flops, uint64_t seed, ts_sample_plan *p) {
    memset(p, 0, sizeof *p);
    bool *sep = ts_xcalloc((size_t)g->naxes + 1, sizeof *sep);
    ts_separable_axes(g, sep);
    unsigned long long state = seed ^ 0x5A3D1E0F2B4C6987ull;
    while (p->n < TS_SAMPLE_MAX_AXES && ts_sample_flops(g, p) > budget_flops) {
        int32_t best = -1;
        for (int32_t a = 0; a < g->naxes; a++)
            if (sep[a] && g->axes[a].size > rows && (best < 0 || g->axes[a].size > g->axes[best].size)) best = a;
        if (best < 0) break;
        sep[best] = false;
        p->axis[p->n] = best;
        p->count[p->n] = rows;
        p->index[p->n] = draw_rows(g->axes[best].size, rows, &state);
        p->n++;
    }
    free(sep);
}

void ts_sample_free(ts_sample_plan *p) {
    for (int i = 0; i < p->n; i++) free(p->index[i]);
    memset(p, 0, sizeof *p);
}

/* ---- gathering --------------------------------------------------------------------------------- */

/* The sample's index table for root axis a, or NULL. */
static const ts_sample_plan *sample_for(const ts_sample_plan *p, int32_t a, int *which) {
    for (int i = 0; p && i < p->n; i++)
        if (p->axis[i] == a) {
            *which = i;
            return p;
        }
    return NULL;
}

int64_t ts_sample_numel(const ts_graph *g, const int32_t *axes, int ndim, const ts_sample_plan *p) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        int w;
        n *= sample_for(p, ts_axis_root(g, axes[d]), &w) ? p->count[w] : g->axes[axes[d]].size;
    }
    return n;
}

void ts_sample_gather(const ts_graph *g, const int32_t *axes, int ndim, const ts_sample_plan *p, const double *full,
                      double *out) {
    int64_t size[TS_MAX_DIMS], stride[TS_MAX_DIMS], idx[TS_MAX_DIMS] = {0};
    const int64_t *map[TS_MAX_DIMS];
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        int w;
        bool sampled = sample_for(p, ts_axis_root(g, axes[d]), &w) != NULL;
        size[d] = sampled ? p->count[w] : g->axes[axes[d]].size;
        map[d] = sampled ? p->index[w] : NULL;
        stride[d] = st;
        st *= g->axes[axes[d]].size;
    }
    int64_t total = ts_sample_numel(g, axes, ndim, p);
    for (int64_t e = 0; e < total; e++) {
        int64_t off = 0;
        for (int d = 0; d < ndim; d++) off += (map[d] ? map[d][idx[d]] : idx[d]) * stride[d];
        out[e] = full[off];
        for (int d = ndim - 1; d >= 0 && ++idx[d] == size[d]; d--) idx[d] = 0;
    }
}

/* ---- the sampled reference --------------------------------------------------------------------- */

/* bind with every sampled axis bound to its row count. */
static void sampled_binding(const ts_graph *g, const ts_binding *bind, const ts_sample_plan *p, ts_binding *out) {
    ts_binding_copy(out, bind);
    for (int s = 0; s < p->n; s++) ts_binding_set(out, g->axes[p->axis[s]].name, p->count[s]);
}

static bool same_axes(const ts_graph *a, const ts_graph *b) {
    if (a->naxes != b->naxes || a->ninputs != b->ninputs || a->noutputs != b->noutputs) return false;
    for (int i = 0; i < a->naxes; i++)
        if (strcmp(a->axes[i].name, b->axes[i].name) != 0) return false;
    return true;
}

int ts_sample_reference(ts_spec *spec, const ts_binding *bind, const ts_graph *g, double *const *inputs,
                        const ts_sample_plan *p, double ***outs, char **err) {
    ts_binding sb;
    sampled_binding(g, bind, p, &sb);
    ts_graph gs;
    ts_diags d;
    ts_diags_init(&d, spec->path, spec->text, spec->len);
    int rc = ts_check(spec, &sb, &gs, &d);
    ts_diags_free(&d);
    ts_binding_free(&sb);
    if (rc != 0 || !same_axes(g, &gs)) {
        *err = ts_strdup(rc != 0 ? "the graph does not check at the sampled sizes" : "the sampled graph's axes differ");
        ts_graph_free(&gs);
        return -1;
    }
    /* the sampled inputs: a gathered copy where a sampled axis cuts the input, else the input itself (a
     * weight matrix: no second copy of the largest inputs, 56 GB for a 32-layer stack's) */
    double **sin = ts_xcalloc((size_t)g->ninputs + 1, sizeof *sin);
    bool *copied = ts_xcalloc((size_t)g->ninputs + 1, sizeof *copied);
    for (int i = 0; i < g->ninputs; i++) {
        const ts_node *n = &g->nodes[g->inputs[i].node];
        int64_t m = ts_sample_numel(g, n->axis, n->ndim, p);
        if (m == ts_input_numel(g, i)) {
            sin[i] = (double *)inputs[i];
            continue;
        }
        sin[i] = ts_xmalloc(sizeof(double) * (size_t)m);
        copied[i] = true;
        ts_sample_gather(g, n->axis, n->ndim, p, inputs[i], sin[i]);
    }
    const int64_t **index = ts_xcalloc((size_t)gs.naxes + 1, sizeof *index);
    for (int s = 0; s < p->n; s++) index[p->axis[s]] = p->index[s];
    ts_interp_opts io = {.index_of_axis = index};
    rc = ts_interp_run(&gs, sin, outs, &io, err);
    free(index);
    for (int i = 0; i < g->ninputs; i++)
        if (copied[i]) free(sin[i]);
    free(sin);
    free(copied);
    ts_graph_free(&gs);
    return rc;
}
