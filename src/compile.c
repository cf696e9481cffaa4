/* compile.c — saturate, search plans (predicted by the cost model), rank (see compile.h); a graph that
 * partitions into chunks (a stack of layers) is searched once per group of identical chunks. */
#include "compile.h"

#include <stdlib.h>
#include <string.h>

#include "saturate.h"
#include "partition.h"
#include "search.h"
#include "sym.h"
#include "util.h"

/* The graph re-checked with each dynamic axis times its prime (sym.h), for symbolic strides; g2 and x2
 * are initialised here on success. */
static int second_binding(ts_spec *spec, const ts_binding *bind, const ts_graph *g, ts_graph *g2, ts_egir *x2,
                          char **err) {
    ts_binding b2 = {.scaled = true};
    ts_dyn dyn;
    if (ts_dyn_of(g, &dyn) != 0) {
        *err = ts_strfmt("more than %d dynamic axes", TS_SYM_MAX_DYN);
        return -1;
    }
    for (int i = 0; bind && i < bind->n; i++) { /* the caller's sizes, with the dynamic ones scaled */
        b2.name[b2.n] = ts_strdup(bind->name[i]);
        b2.size[b2.n++] = bind->size[i];
    }
    for (int d = 0; d < dyn.n; d++) {
        int i = 0;
        while (i < b2.n && strcmp(b2.name[i], g->axes[dyn.axis[d]].name) != 0) i++;
        if (i == b2.n) b2.name[b2.n++] = ts_strdup(g->axes[dyn.axis[d]].name);
        if (__builtin_mul_overflow(g->axes[dyn.axis[d]].size, ts_sym_primes[d], &b2.size[i])) {
            ts_binding_free(&b2); /* a typical size near 2^63 has no second size */
            *err = ts_strdup("the graph does not check at a second size of its dynamic axes");
            return -1;
        }
    }
    ts_diags dg;
    ts_diags_init(&dg, spec->path, NULL, 0);
    int rc = ts_check(spec, &b2, g2, &dg);
    ts_diags_free(&dg);
    ts_binding_free(&b2);
    if (rc != 0) {
        ts_graph_free(g2);
        *err = ts_strdup("the graph does not check at a second size of its dynamic axes");
        return -1;
    }
    if (ts_egir_init(x2, g2, err) != 0) {
        ts_graph_free(g2);
        return -1;
    }
    return 0;
}

/* Best predicted first; ties by fewer kernels, then by name (qsort is not stable: the order must not
 * depend on the C library). */
static int by_predicted(const void *a, const void *b) {
    const ts_plan *p = a, *q = b;
    if (p->predicted_s != q->predicted_s) return p->predicted_s < q->predicted_s ? -1 : 1;
    if (p->nk != q->nk) return p->nk < q->nk ? -1 : 1;
    return strcmp(p->name, q->name);
}

/* Saturates g and searches its plans (the baseline first); views2: see ts_plan_lower. */
static int search_graph(ts_graph *g, const ts_egir_view *views2, const ts_rules *rs, const ts_costmodel *cm,
                        const ts_search_opts *so, ts_plan **plans, int *n, ts_search_stats *st, char **err) {
    ts_runner_limits lim = ts_runner_default_limits();
    ts_saturation s;
    ts_egir plain = {0};
    int rc = ts_saturate(g, rs, ts_default_phases, ts_default_nphases, &lim, &s, err);
    if (rc == 0) rc = ts_egir_init(&plain, g, err);
    if (rc == 0) rc = ts_search_plans(&s.x, &plain, views2, g, cm, so, plans, n, st, err);
    ts_egir_free(&plain);
    ts_saturation_free(&s);
    return rc;
}

/* ---- partitioned graphs ------------------------------------------------------------------------ */

/* The plans of one group of identical chunks: the search over its representative. */
typedef struct {
    ts_plan *plans; /* best first, the chunk's baseline only when nothing else was found */
    int n;
} group_plans;

/* Searches the representative chunk of group `gi` (and its second binding for symbolic strides). */
static int search_group(ts_graph *g, ts_graph *g2, const ts_partition *part, const ts_partition *part2, int gi,
                        const ts_rules *rs, const ts_costmodel *cm, const ts_search_opts *so, group_plans *gp,
                        ts_search_stats *st, char **err) {
    ts_graph cg, cg2 = {0};
    ts_egir cx2 = {0};
    ts_partition_chunk_graph(g, part, part->groups[gi].rep, &cg);
    int rc = 0;
    if (g2) {
        ts_partition_chunk_graph(g2, part2, part2->groups[gi].rep, &cg2);
        rc = ts_egir_init(&cx2, &cg2, err);
    }
    ts_search_stats one = {0};
    if (rc == 0) rc = search_graph(&cg, g2 ? cx2.views : NULL, rs, cm, so, &gp->plans, &gp->n, &one, err);
    if (rc == 0 && gp->n > 1) { /* the chunk's own baseline is not needed: the whole graph has one */
        ts_plan_free(&gp->plans[0]);
        memmove(&gp->plans[0], &gp->plans[1], sizeof *gp->plans * (size_t)--gp->n);
    }
    if (rc == 0) qsort(gp->plans, (size_t)gp->n, sizeof *gp->plans, by_predicted);
    st->evals += one.evals, st->accepted += one.accepted, st->classes += one.classes;
    if (g2) {
        if (cx2.eg) ts_egir_free(&cx2);
        ts_graph_free(&cg2);
    }
    ts_graph_free(&cg);
    return rc;
}

/* The whole graph's buffer for value `node` read by a chunk: a graph input's (added on first use) or the
 * one an earlier chunk wrote it into. */
static int value_buffer(ts_plan *p, const ts_graph *g, int *value_buf, int32_t node) {
    const ts_node *v = &g->nodes[node];
    if (value_buf[node] < 0 && v->op == TS_OP_INPUT)
        value_buf[node] = ts_plan_add_buffer(p, TS_BUF_INPUT, v->input, v->dtype, v->axis, v->ndim);
    return value_buf[node];
}

/* The whole graph's plan with chunk c computed by plan cp (its group's): cp's inputs bound to the values
 * the chunk reads, its outputs to graph outputs or fresh temporaries, its temporaries fresh. */
static void stitch_chunk(ts_plan *p, const ts_graph *g, const ts_chunk *c, const ts_plan *cp, int *value_buf) {
    int *map = ts_xmalloc(sizeof(int) * (size_t)(cp->nbuf + 1));
    for (int b = 0; b < cp->nbuf; b++) {
        const ts_buffer *B = &cp->buf[b];
        if (B->kind == TS_BUF_INPUT) {
            map[b] = value_buffer(p, g, value_buf, c->in[B->index]);
        } else if (B->kind == TS_BUF_OUTPUT && c->out_output[B->index] >= 0) {
            map[b] = ts_plan_add_buffer(p, TS_BUF_OUTPUT, c->out_output[B->index], B->dtype, B->axis, B->ndim);
        } else {
            map[b] = ts_plan_add_buffer_like(p, TS_BUF_TEMP, 0, B);
            if (B->kind == TS_BUF_OUTPUT) value_buf[c->out[B->index]] = map[b];
        }
    }
    ts_plan_append(p, cp, map);
    free(map);
}

/* Whole-graph plan `rank`: every chunk computed by its group's plan of that rank (or its last). */
/* The group's plan of rank `rank`, or its last when it has fewer. */
static const ts_plan *group_plan(const group_plans *q, int rank) { return &q->plans[rank < q->n ? rank : q->n - 1]; }

static void stitch_plan(ts_plan *p, const ts_graph *g, const ts_partition *part, const group_plans *gp, int rank) {
    int *value_buf = ts_xmalloc(sizeof(int) * (size_t)(g->nnodes + 1));
    for (int i = 0; i < g->nnodes; i++) value_buf[i] = -1;
    for (int c = 0; c < part->nchunks; c++) {
        stitch_chunk(p, g, &part->chunks[c], group_plan(&gp[part->chunks[c].group], rank), value_buf);
    }
    free(value_buf);
    char *name = ts_strdup("per chunk:");
    for (int i = 0; i < part->ngroups; i++) {
        char *next = ts_strfmt("%s%s %s", name, i ? "," : "", group_plan(&gp[i], rank)->name);
        free(name);
        name = next;
    }
    p->name = name;
}

/* A graph of several chunks: each group's representative searched once, its plans laid into every chunk
 * of the group; the baseline is the whole graph's. Keeps the search's time and the predictions linear in
 * the depth of a stack of identical layers. */
static int compile_chunked(ts_graph *g, ts_graph *g2, const ts_egir *x2, const ts_partition *part,
                           const ts_partition *part2, const ts_rules *rs, const ts_costmodel *cm,
                           const ts_search_opts *so, ts_compiled *out, char **err) {
    group_plans *gp = ts_xcalloc((size_t)part->ngroups, sizeof *gp);
    ts_egir plain = {0};
    int rc = 0, ranks = 1;
    for (int i = 0; i < part->ngroups && rc == 0; i++) {
        rc = search_group(g, g2, part, part2, i, rs, cm, so, &gp[i], &out->search, err);
        if (rc == 0 && gp[i].n > ranks) ranks = gp[i].n;
    }
    if (rc == 0) rc = ts_egir_init(&plain, g, err);
    out->plans = ts_xcalloc((size_t)ranks + 1, sizeof *out->plans);
    if (rc == 0) rc = ts_search_baseline(&plain, g2 ? x2->views : NULL, g, cm, &out->plans[0], err);
    if (rc == 0) out->n = 1;
    for (int r = 0; rc == 0 && r < ranks; r++) {
        ts_plan *p = &out->plans[out->n++];
        stitch_plan(p, g, part, gp, r);
        ts_costmodel_predict(cm, g, p);
    }
    if (rc != 0 && !out->n) ts_plan_free(&out->plans[0]);
    for (int i = 0; i < part->ngroups; i++) {
        for (int j = 0; j < gp[i].n; j++) ts_plan_free(&gp[i].plans[j]);
        free(gp[i].plans);
    }
    free(gp);
    if (plain.eg) ts_egir_free(&plain);
    return rc;
}

/* Whether two partitions (of one graph at two bindings) chunk and group it alike. */
static bool same_partition(const ts_partition *a, const ts_partition *b) {
    if (a->nchunks != b->nchunks || a->ngroups != b->ngroups) return false;
    for (int i = 0; i < a->nchunks; i++)
        if (a->chunks[i].group != b->chunks[i].group || a->chunks[i].first != b->chunks[i].first) return false;
    return true;
}

/* ---- compile ----------------------------------------------------------------------------------- */

int ts_compile(ts_spec *spec, const ts_binding *bind, ts_graph *g, const ts_rules *rs, const ts_costmodel *cm,
               ts_compiled *out, char **err) {
    return ts_compile_with(spec, bind, g, rs, cm, false, out, err);
}

int ts_compile_with(ts_spec *spec, const ts_binding *bind, ts_graph *g, const ts_rules *rs, const ts_costmodel *cm,
                    bool allow_library, ts_compiled *out, char **err) {
    memset(out, 0, sizeof *out);
    ts_search_opts so = ts_search_default_opts();
    so.allow_library = allow_library;
    ts_egir x2 = {0};
    ts_graph g2 = {0};
    bool dynamic = false;
    for (int a = 0; a < g->naxes; a++) dynamic |= g->axes[a].dynamic;
    int rc = dynamic ? second_binding(spec, bind, g, &g2, &x2, err) : 0;
    ts_partition part = {0}, part2 = {0};
    bool chunked = false;
    if (rc == 0) {
        ts_partition_graph(g, &part);
        if (dynamic) ts_partition_graph(&g2, &part2);
        /* a graph that appends into inout inputs is searched whole: a chunk graph would see the cache as a plain
         * input and its update as a value to copy out (a limit: a decode stack is not split into layers) */
        chunked = part.nchunks > 1 && (!dynamic || same_partition(&part, &part2)) && ts_graph_abi_outputs(g) == g->noutputs;
    }
    if (rc == 0 && chunked) rc = compile_chunked(g, dynamic ? &g2 : NULL, &x2, &part, &part2, rs, cm, &so, out, err);
    else if (rc == 0) rc = search_graph(g, dynamic ? x2.views : NULL, rs, cm, &so, &out->plans, &out->n, &out->search, err);
    if (rc == 0) {
        out->baseline_s = out->plans[0].predicted_s; /* built first */
        qsort(out->plans, (size_t)out->n, sizeof *out->plans, by_predicted);
    }
    ts_partition_free(&part);
    ts_partition_free(&part2);
    if (dynamic && x2.eg) {
        ts_egir_free(&x2);
        ts_graph_free(&g2);
    }
    if (rc != 0) ts_compiled_free(out);
    return rc;
}

void ts_compiled_free(ts_compiled *c) {
    for (int i = 0; i < c->n; i++) ts_plan_free(&c->plans[i]);
    free(c->plans);
    memset(c, 0, sizeof *c);
}
