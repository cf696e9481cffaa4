/* partition.c — cut points, chunks, canonical chunk encodings and groups, and chunk graphs (partition.h). */
#include "partition.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool is_source(const ts_node *n) { return ts_op_kind_of(n->op) == TS_KIND_SOURCE; }

/* ---- order ------------------------------------------------------------------------------------- */

/* Appends the non-source nodes `root` depends on, then root, in depth-first post-order (iterative: a
 * stack of 32 layers is thousands of nodes deep). pos[v] >= 0 marks v placed; -2 marks it on the stack. */
static void visit(const ts_graph *g, int32_t root, ts_partition *p, int32_t *pos, int32_t *stack, int *next) {
    if (pos[root] != -1 || is_source(&g->nodes[root])) return;
    int top = 0;
    stack[top] = root;
    next[top] = 0;
    pos[root] = -2;
    while (top >= 0) {
        const ts_node *n = &g->nodes[stack[top]];
        if (next[top] < n->nsrc) {
            int32_t s = n->src[next[top]++].node;
            if (pos[s] != -1 || is_source(&g->nodes[s])) continue;
            pos[s] = -2;
            stack[++top] = s;
            next[top] = 0;
            continue;
        }
        pos[stack[top]] = p->norder;
        p->order[p->norder++] = stack[top--];
    }
}

/* p->order from the outputs, then nodes no output needs; pos[v] = v's index in it (-1: a source). */
static void make_order(const ts_graph *g, ts_partition *p, int32_t *pos) {
    size_t n = (size_t)g->nnodes + 1;
    int32_t *stack = ts_xmalloc(sizeof *stack * n);
    int *next = ts_xmalloc(sizeof *next * n);
    p->order = ts_xmalloc(sizeof *p->order * n);
    for (int i = 0; i < g->nnodes; i++) pos[i] = -1;
    for (int i = 0; i < g->noutputs; i++) visit(g, g->outputs[i].ref.node, p, pos, stack, next);
    for (int i = 0; i < g->nnodes; i++) visit(g, i, p, pos, stack, next);
    free(stack);
    free(next);
}

/* ---- cuts and chunks --------------------------------------------------------------------------- */

/* last[v]: the last position that uses node v (its own position when nothing does). */
static int32_t *last_uses(const ts_graph *g, const ts_partition *p, const int32_t *pos) {
    int32_t *last = ts_xmalloc(sizeof *last * ((size_t)g->nnodes + 1));
    for (int i = 0; i < g->nnodes; i++) last[i] = pos[i];
    for (int k = 0; k < p->norder; k++) {
        const ts_node *n = &g->nodes[p->order[k]];
        for (int s = 0; s < n->nsrc; s++)
            if (last[n->src[s].node] < k) last[n->src[s].node] = k;
    }
    return last;
}

/* cut[k] (k in 1..norder-1): exactly one value computed before position k is used at or after it. */
static bool *find_cuts(const ts_partition *p, const int32_t *last) {
    int *delta = ts_xcalloc((size_t)p->norder + 2, sizeof *delta);
    for (int k = 0; k < p->norder; k++) { /* the value at k is live across positions k+1 .. last */
        int32_t l = last[p->order[k]];
        if (l > k) delta[k + 1]++, delta[l + 1]--;
    }
    bool *cut = ts_xcalloc((size_t)p->norder + 1, sizeof *cut);
    for (int k = 1, live = delta[0]; k < p->norder; k++) cut[k] = (live += delta[k]) == 1;
    free(delta);
    return cut;
}

static void push_chunk(ts_partition *p, int *cap, int32_t first, int32_t last) {
    TS_GROW(p->chunks, p->nchunks, *cap);
    p->chunks[p->nchunks++] = (ts_chunk){.first = first, .last = last, .group = -1};
}

/* Whether node n sums a product of two different operands over its axis (a matmul's Σ_k a·b; not the
 * Σ x·x of a norm). */
static bool is_contraction(const ts_graph *g, const ts_node *n) {
    if (n->op != TS_OP_REDUCE_SUM) return false;
    const ts_node *m = &g->nodes[n->src[0].node];
    if (m->op != TS_OP_MUL) return false;
    const ts_ref *a = &m->src[0], *b = &m->src[1];
    return a->node != b->node || memcmp(&a->view, &b->view, sizeof a->view) != 0;
}

/* Whether order[first..last) holds a contraction. */
static bool has_contraction(const ts_graph *g, const ts_partition *p, int32_t first, int32_t last) {
    for (int32_t k = first; k < last; k++)
        if (is_contraction(g, &g->nodes[p->order[k]])) return true;
    return false;
}

/* Whether a chunk order[first..last) is too small to stand alone: fewer than TS_PARTITION_MIN_NODES nodes,
 * or no contraction. A cut forces its value to memory, so a chain of elementwise ops and norms stays with
 * its neighbour (the GEMM whose epilogue it can be), and cuts fall between blocks of work such as the
 * residual stream between decoder layers. */
static bool too_small(const ts_graph *g, const ts_partition *p, int32_t first, int32_t last) {
    return last - first < TS_PARTITION_MIN_NODES || !has_contraction(g, p, first, last);
}

/* Chunks between cuts; a small chunk joins the previous one, and a small previous one absorbs the next. */
static void make_chunks(const ts_graph *g, ts_partition *p, const bool *cut) {
    int cap = 0;
    for (int32_t start = 0, k = 1; k <= p->norder; k++) {
        if (k < p->norder && !cut[k]) continue;
        ts_chunk *prev = p->nchunks ? &p->chunks[p->nchunks - 1] : NULL;
        bool small = too_small(g, p, start, k);
        if (prev && (small || too_small(g, p, prev->first, prev->last))) prev->last = k;
        else push_chunk(p, &cap, start, k);
        start = k;
    }
}

/* ---- canonical encodings ----------------------------------------------------------------------- */

typedef struct {
    uint8_t *b;
    size_t n, cap;
} bytes;

static void put64(bytes *s, int64_t v) {
    while (s->n + sizeof v > s->cap) s->b = ts_xrealloc(s->b, s->cap = s->cap ? 2 * s->cap : 256);
    memcpy(s->b + s->n, &v, sizeof v);
    s->n += sizeof v;
}

static void put_double(bytes *s, double v) {
    int64_t bits;
    memcpy(&bits, &v, sizeof bits);
    put64(s, bits);
}

static void put_axes(bytes *s, int ndim, const int32_t *axis) {
    put64(s, ndim);
    for (int d = 0; d < ndim; d++) put64(s, axis[d]);
}

static void put_view(bytes *s, const ts_view *v) {
    put_axes(s, v->ndim, v->axis);
    for (int d = 0; d < v->ndim; d++) put64(s, v->size[d]), put64(s, v->stride[d]);
    put64(s, v->offset);
}

/* A boundary value at its first use: constants by value, iotas by axis, any other value (a graph input or
 * a node of an earlier chunk) by dtype and axes only. */
static void put_boundary(bytes *s, const ts_node *n) {
    put64(s, n->op == TS_OP_CONSTANT || n->op == TS_OP_IOTA ? n->op : TS_OP_INPUT);
    put64(s, n->dtype);
    put_axes(s, n->ndim, n->axis);
    if (n->op == TS_OP_CONSTANT) put_double(s, n->value);
    if (n->op == TS_OP_IOTA) put64(s, n->reduce_axis);
}

typedef struct {
    const ts_graph *g;
    const int32_t *pos;
    int32_t *ord;   /* boundary ordinal of a node in the chunk being encoded */
    int32_t *stamp; /* the chunk whose ordinal ord[] holds (+1; 0: none) */
    int32_t nbound; /* boundary values numbered so far in this chunk */
} enc_ctx;

/* An operand: chunk-local index, or boundary ordinal (numbered, and described, at first use). Boundary
 * values other than constants and iotas are recorded in c->in. */
static void put_operand(enc_ctx *e, int ci, ts_chunk *c, bytes *s, const ts_ref *r) {
    const ts_node *n = &e->g->nodes[r->node];
    int32_t k = e->pos[r->node];
    if (k >= c->first) {
        put64(s, 0), put64(s, k - c->first);
    } else if (e->stamp[r->node] == ci + 1) {
        put64(s, 1), put64(s, e->ord[r->node]);
    } else {
        e->stamp[r->node] = ci + 1;
        e->ord[r->node] = e->nbound++;
        put64(s, 2), put64(s, e->ord[r->node]);
        put_boundary(s, n);
        if (n->op != TS_OP_CONSTANT && n->op != TS_OP_IOTA) {
            c->in = ts_xrealloc(c->in, sizeof *c->in * ((size_t)c->nin + 1));
            c->in[c->nin++] = r->node;
        }
    }
    put_view(s, &r->view);
}

static void put_node(enc_ctx *e, int ci, ts_chunk *c, bytes *s, const ts_node *n) {
    put64(s, n->op);
    put64(s, n->dtype);
    put_axes(s, n->ndim, n->axis);
    put64(s, n->reduce_axis);
    put64(s, n->tile);
    put_double(s, n->op == TS_OP_CONSTANT ? n->value : 0.0);
    put64(s, n->nsrc);
    for (int i = 0; i < n->nsrc; i++) put_operand(e, ci, c, s, &n->src[i]);
}

static uint64_t fnv1a(const bytes *s) { return ts_fnv1a(TS_FNV_OFFSET, s->b, s->n); }

/* Encodes chunk ci into s (and fills its boundary inputs). */
static void encode_chunk(enc_ctx *e, const ts_partition *p, int ci, bytes *s) {
    ts_chunk *c = &p->chunks[ci];
    e->nbound = 0;
    for (int32_t k = c->first; k < c->last; k++) put_node(e, ci, c, s, &e->g->nodes[p->order[k]]);
}

static bool same_bytes(const bytes *a, const bytes *b) { return a->n == b->n && memcmp(a->b, b->b, a->n) == 0; }

/* Groups chunks whose encodings are identical (hash first, then the bytes). */
static void make_groups(const ts_graph *g, ts_partition *p, const int32_t *pos) {
    enc_ctx e = {.g = g, .pos = pos};
    e.ord = ts_xmalloc(sizeof *e.ord * ((size_t)g->nnodes + 1));
    e.stamp = ts_xcalloc((size_t)g->nnodes + 1, sizeof *e.stamp);
    bytes *enc = ts_xcalloc((size_t)p->nchunks + 1, sizeof *enc);
    uint64_t *hash = ts_xmalloc(sizeof *hash * ((size_t)p->nchunks + 1));
    p->groups = ts_xmalloc(sizeof *p->groups * ((size_t)p->nchunks + 1));
    for (int ci = 0; ci < p->nchunks; ci++) {
        encode_chunk(&e, p, ci, &enc[ci]);
        hash[ci] = fnv1a(&enc[ci]);
        int gi = 0;
        while (gi < p->ngroups && !(hash[p->groups[gi].rep] == hash[ci] && same_bytes(&enc[p->groups[gi].rep], &enc[ci])))
            gi++;
        if (gi == p->ngroups) p->groups[p->ngroups++] = (ts_group){.rep = ci};
        p->groups[gi].members++;
        p->chunks[ci].group = gi;
    }
    for (int ci = 0; ci < p->nchunks; ci++) free(enc[ci].b);
    free(enc);
    free(hash);
    free(e.ord);
    free(e.stamp);
}

/* ---- exports ----------------------------------------------------------------------------------- */

static void add_export(ts_chunk *c, int32_t node, int32_t output) {
    c->out = ts_xrealloc(c->out, sizeof *c->out * ((size_t)c->nout + 1));
    c->out_output = ts_xrealloc(c->out_output, sizeof *c->out_output * ((size_t)c->nout + 1));
    c->out[c->nout] = node;
    c->out_output[c->nout++] = output;
}

/* Per chunk: the graph outputs it computes (first, so that they keep their names), then its values used
 * by later chunks, in order. */
static void find_exports(const ts_graph *g, ts_partition *p, const int32_t *pos, const int32_t *last) {
    for (int ci = 0; ci < p->nchunks; ci++) {
        ts_chunk *c = &p->chunks[ci];
        for (int i = 0; i < g->noutputs; i++) {
            int32_t k = pos[g->outputs[i].ref.node];
            if (k >= c->first && k < c->last) add_export(c, g->outputs[i].ref.node, i);
        }
        for (int32_t k = c->first; k < c->last; k++)
            if (last[p->order[k]] >= c->last) add_export(c, p->order[k], -1);
    }
}

/* ---- the partition ----------------------------------------------------------------------------- */

int ts_partition_graph(const ts_graph *g, ts_partition *p) {
    memset(p, 0, sizeof *p);
    int32_t *pos = ts_xmalloc(sizeof *pos * ((size_t)g->nnodes + 1));
    make_order(g, p, pos);
    int32_t *last = last_uses(g, p, pos);
    bool *cut = find_cuts(p, last);
    make_chunks(g, p, cut);
    make_groups(g, p, pos);
    find_exports(g, p, pos, last);
    free(cut);
    free(last);
    free(pos);
    return 0;
}

void ts_partition_free(ts_partition *p) {
    for (int i = 0; i < p->nchunks; i++) {
        free(p->chunks[i].in);
        free(p->chunks[i].out);
        free(p->chunks[i].out_output);
    }
    free(p->chunks);
    free(p->groups);
    free(p->order);
    memset(p, 0, sizeof *p);
}

/* ---- chunk graphs ------------------------------------------------------------------------------ */

static bool name_taken(const ts_graph *out, const char *name) {
    for (int i = 0; i < out->ninputs; i++)
        if (strcmp(out->inputs[i].name, name) == 0) return true;
    for (int i = 0; i < out->noutputs; i++)
        if (strcmp(out->outputs[i].name, name) == 0) return true;
    return false;
}

/* `want` (a heap string, taken), or want_2, want_3, ... when an input or output already has it. */
static char *unique_name(const ts_graph *out, char *want) {
    if (!name_taken(out, want)) return want;
    char *s = NULL;
    for (int k = 2; !s || name_taken(out, s); k++) {
        free(s);
        s = ts_strfmt("%s_%d", want, k);
    }
    free(want);
    return s;
}

/* The user tensor that is node v itself (contiguous), or NULL. */
static const char *value_name(const ts_graph *g, int32_t v) {
    ts_view want = ts_view_of_node(g, v);
    for (int i = 0; i < g->nnamed; i++) {
        const ts_view *r = &g->named[i].ref.view;
        bool same = g->named[i].ref.node == v && r->ndim == want.ndim && r->offset == 0;
        for (int d = 0; same && d < r->ndim; d++)
            same = r->axis[d] == want.axis[d] && r->stride[d] == want.stride[d];
        if (same) return g->named[i].name;
    }
    return NULL;
}

static void add_named(ts_graph *out, const char *name, const char *op, ts_ref ref, ts_dtype dtype) {
    TS_GROW(out->named, out->nnamed, out->cap_named);
    out->named[out->nnamed++] = (ts_named){.name = ts_strdup(name), .op = ts_strdup(op), .ref = ref, .dtype = dtype};
}

static void copy_axes(const ts_graph *g, ts_graph *out) {
    for (int a = 0; a < g->naxes; a++) {
        int i = ts_graph_add_axis(out, g->axes[a].name, g->axes[a].size, g->axes[a].dynamic, g->axes[a].typical);
        out->axes[i].like = g->axes[a].like;
    }
}

/* The chunk's boundary values as inputs (input k is also named tensor k); map[old node] = new node. */
static void add_inputs(const ts_graph *g, const ts_chunk *c, ts_graph *out, int32_t *map) {
    for (int k = 0; k < c->nin; k++) {
        const ts_node *v = &g->nodes[c->in[k]];
        const char *name = v->op == TS_OP_INPUT ? g->inputs[v->input].name : value_name(g, c->in[k]);
        ts_node n = {.op = TS_OP_INPUT, .dtype = v->dtype, .ndim = v->ndim, .input = k, .origin = k};
        memcpy(n.axis, v->axis, sizeof n.axis);
        TS_GROW(out->inputs, out->ninputs, out->cap_inputs);
        char *unique = unique_name(out, name ? ts_strdup(name) : ts_strfmt("in%d", k));
        map[c->in[k]] = ts_graph_add_node(out, &n);
        out->inputs[out->ninputs++] = (ts_input){.name = unique, .node = map[c->in[k]]};
        add_named(out, unique, "input", (ts_ref){map[c->in[k]], ts_view_of_node(out, map[c->in[k]])}, v->dtype);
    }
}

/* Copies node v (its constants and iotas first, on first use), operands renumbered through map. */
static void copy_node(const ts_graph *g, int32_t v, ts_graph *out, int32_t *map) {
    ts_node n = g->nodes[v];
    for (int i = 0; i < n.nsrc; i++) {
        int32_t s = n.src[i].node;
        if (map[s] < 0) map[s] = ts_graph_add_node(out, &g->nodes[s]); /* a constant or an iota */
        n.src[i].node = map[s];
    }
    map[v] = ts_graph_add_node(out, &n);
}

static void add_outputs(const ts_graph *g, const ts_chunk *c, ts_graph *out, const int32_t *map) {
    for (int k = 0; k < c->nout; k++) {
        int32_t v = c->out[k], o = c->out_output[k];
        const char *name = o >= 0 ? g->outputs[o].name : value_name(g, v);
        ts_output x = {.ref = {map[v], ts_view_of_node(out, map[v])}, .dtype = g->nodes[v].dtype};
        if (o >= 0) x.ref.view = g->outputs[o].ref.view, x.dtype = g->outputs[o].dtype;
        x.name = unique_name(out, name ? ts_strdup(name) : ts_strfmt("out%d", k));
        TS_GROW(out->outputs, out->noutputs, out->cap_outputs);
        out->outputs[out->noutputs++] = x;
    }
}

/* Keeps g's named tensors computed in the chunk (not boundary values) and renumbers node origins. */
static void copy_named(const ts_graph *g, ts_graph *out, const int32_t *map) {
    int32_t *named_map = ts_xmalloc(sizeof *named_map * ((size_t)g->nnamed + 1));
    for (int i = 0; i < g->nnamed; i++) {
        const ts_named *t = &g->named[i];
        named_map[i] = -1;
        if (map[t->ref.node] < 0 || out->nodes[map[t->ref.node]].op == TS_OP_INPUT) continue;
        named_map[i] = out->nnamed;
        add_named(out, t->name, t->op, (ts_ref){map[t->ref.node], t->ref.view}, t->dtype);
    }
    for (int i = 0; i < out->nnodes; i++)
        if (out->nodes[i].op != TS_OP_INPUT && out->nodes[i].origin >= 0)
            out->nodes[i].origin = named_map[out->nodes[i].origin];
    free(named_map);
}

void ts_partition_chunk_graph(const ts_graph *g, const ts_partition *p, int chunk, ts_graph *out) {
    const ts_chunk *c = &p->chunks[chunk];
    char *name = ts_strfmt("%s.chunk%d", g->name, chunk);
    ts_graph_init(out, name);
    free(name);
    copy_axes(g, out);
    int32_t *map = ts_xmalloc(sizeof *map * ((size_t)g->nnodes + 1));
    for (int i = 0; i < g->nnodes; i++) map[i] = -1;
    add_inputs(g, c, out, map);
    for (int32_t k = c->first; k < c->last; k++) copy_node(g, p->order[k], out, map);
    add_outputs(g, c, out, map);
    copy_named(g, out, map);
    free(map);
}
