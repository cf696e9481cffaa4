/* egraph.c — union-find, hashcons, deferred rebuild, e-class analysis and smallest-term extraction
 * (see egraph.h). It is not a pattern matcher or a rewrite engine: those are rules.c and runner.c.
 *
 * Storage. Every e-node ever added lives in node[] at a fixed index; node_cls[i] is the class it was
 * added to (find() gives its current class). A node is live until rebuild finds it congruent to another
 * live node (same canonical content): it is then dead, dropped from its class and from the hashcons.
 * Invariants after ts_eg_rebuild: every live node's kids are canonical; the hashcons holds exactly the
 * live nodes, keyed by their content; no two live nodes are equal; cnodes[c] of each canonical class c
 * lists its live nodes; cparents[c] lists (at least) every live node with a kid in class c. */
#include "egraph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "util.h"

/* ======== ops ===================================================================================== */

#define TS_PRIM_NPARAMS(e, kind)                                                                       \
    ((kind) == TS_KIND_UPDATE ? 3 : (kind) == TS_KIND_SOURCE || (kind) == TS_KIND_REDUCE || TS_OP_##e == TS_OP_CAST ? 1 : 0)

static const ts_eg_opinfo prim_info[TS_OP_COUNT] = {
#define TS_X_INFO(e, name, arity, kind) [TS_OP_##e] = {name, arity, TS_PRIM_NPARAMS(e, kind)},
    TS_OPS(TS_X_INFO)
#undef TS_X_INFO
};

const ts_eg_opinfo *ts_eg_op_info(const ts_eg_ops *ops, int32_t op) {
    if (op >= 0 && op < TS_OP_COUNT) return &prim_info[op];
    if (!ops || op < TS_OP_COUNT || op - TS_OP_COUNT >= ops->nextra) return NULL;
    const ts_eg_opinfo *info = &ops->extra[op - TS_OP_COUNT];
    TS_ASSERT(info->arity >= 0 && info->arity <= TS_EG_MAX_KIDS);
    TS_ASSERT(info->nparams >= 0 && info->nparams <= TS_EG_MAX_PARAMS);
    return info;
}

int32_t ts_eg_op_lookup(const ts_eg_ops *ops, const char *name) {
    int prim = ts_op_lookup(name);
    if (prim >= 0) return prim;
    for (int32_t i = 0; ops && i < ops->nextra; i++)
        if (strcmp(ops->extra[i].name, name) == 0) return TS_OP_COUNT + i;
    return -1;
}

/* ======== the structure =========================================================================== */

typedef struct {
    uint32_t *v;
    uint32_t n, cap;
} idvec;

typedef struct {
    uint32_t node; /* TS_EG_NONE: empty slot */
    uint32_t hash;
} hc_slot;

typedef struct {
    uint32_t a, b;
} id_pair;

struct ts_egraph {
    const ts_eg_ops *ops;
    ts_eg_analysis an; /* an.size == 0: none */
    void *scratch;     /* an.size bytes for make() during repair */

    /* classes, indexed by class id */
    uint32_t *uf; /* union-find parent; uf[c] == c for canonical classes */
    idvec *cnodes, *cparents;
    unsigned char *data; /* an.size bytes per id */
    uint32_t nids, cap_ids, nclasses;

    /* nodes, indexed by node index */
    ts_enode *node;
    uint32_t *node_cls;
    unsigned char *dead;
    int32_t *node_tag, *node_iter; /* provenance: the origin current when the node was added */
    uint32_t nnodes, cap_nodes, nlive;
    int32_t cur_tag, cur_iter;

    /* op index (ts_eg_index_ops): the classes holding op o are ix_cls[ix_start[o] .. ix_start[o+1]) */
    uint32_t *ix_start, *ix_cls;
    uint32_t ix_nops;
    uint64_t version, ix_version; /* version: bumped by every new node and merge; the index's snapshot */

    /* hashcons: open addressing, linear probing, power-of-two capacity, load <= 1/2 */
    hc_slot *hc;
    uint32_t hc_cap, hc_n;

    /* deferred work */
    id_pair *pending;
    uint32_t npending, cap_pending;
    idvec worklist, modlist, sweep;
};

static void vec_push(idvec *v, uint32_t x) {
    TS_GROW(v->v, v->n, v->cap);
    v->v[v->n++] = x;
}

static void vec_free(idvec *v) {
    free(v->v);
    memset(v, 0, sizeof *v);
}

/* Appends src's elements to dst and empties src. */
static void vec_take_all(idvec *dst, idvec *src) {
    for (uint32_t i = 0; i < src->n; i++) vec_push(dst, src->v[i]);
    vec_free(src);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void vec_sort_unique(idvec *v) {
    if (v->n < 2) return;
    qsort(v->v, v->n, sizeof *v->v, cmp_u32);
    uint32_t k = 1;
    for (uint32_t i = 1; i < v->n; i++)
        if (v->v[i] != v->v[k - 1]) v->v[k++] = v->v[i];
    v->n = k;
}

static const ts_eg_opinfo *info_of(const ts_egraph *eg, int32_t op) {
    const ts_eg_opinfo *info = ts_eg_op_info(eg->ops, op);
    TS_ASSERT(info != NULL);
    return info;
}

static int arity_of(const ts_egraph *eg, int32_t op) { return info_of(eg, op)->arity; }

ts_egraph *ts_eg_new(const ts_eg_ops *ops, const ts_eg_analysis *an) {
    ts_egraph *eg = ts_xcalloc(1, sizeof *eg);
    eg->ops = ops;
    eg->cur_tag = eg->cur_iter = -1;
    if (an && an->size > 0) {
        TS_ASSERT(an->make != NULL && an->merge != NULL);
        eg->an = *an;
        eg->scratch = ts_xmalloc(an->size);
    }
    eg->hc_cap = 64;
    eg->hc = ts_xmalloc(eg->hc_cap * sizeof *eg->hc);
    for (uint32_t i = 0; i < eg->hc_cap; i++) eg->hc[i].node = TS_EG_NONE;
    return eg;
}

void ts_eg_free(ts_egraph *eg) {
    if (!eg) return;
    for (uint32_t c = 0; c < eg->nids; c++) {
        vec_free(&eg->cnodes[c]);
        vec_free(&eg->cparents[c]);
    }
    free(eg->uf);
    free(eg->cnodes);
    free(eg->cparents);
    free(eg->data);
    free(eg->node);
    free(eg->node_cls);
    free(eg->dead);
    free(eg->node_tag);
    free(eg->node_iter);
    free(eg->ix_start);
    free(eg->ix_cls);
    free(eg->hc);
    free(eg->pending);
    vec_free(&eg->worklist);
    vec_free(&eg->modlist);
    vec_free(&eg->sweep);
    free(eg->scratch);
    free(eg);
}

const ts_eg_ops *ts_eg_ops_of(const ts_egraph *eg) { return eg->ops; }

/* ======== union-find ============================================================================== */

uint32_t ts_eg_find(ts_egraph *eg, uint32_t id) {
    TS_ASSERT(id < eg->nids);
    uint32_t *uf = eg->uf;
    while (uf[id] != id) {
        uf[id] = uf[uf[id]]; /* path halving */
        id = uf[id];
    }
    return id;
}

/* find without compression, for const queries */
static uint32_t find_const(const ts_egraph *eg, uint32_t id) {
    TS_ASSERT(id < eg->nids);
    while (eg->uf[id] != id) id = eg->uf[id];
    return id;
}

static uint32_t new_class(ts_egraph *eg) {
    if (eg->nids == eg->cap_ids) {
        uint32_t cap = eg->cap_ids ? 2 * eg->cap_ids : 64;
        eg->uf = ts_xrealloc(eg->uf, cap * sizeof *eg->uf);
        eg->cnodes = ts_xrealloc(eg->cnodes, cap * sizeof *eg->cnodes);
        eg->cparents = ts_xrealloc(eg->cparents, cap * sizeof *eg->cparents);
        if (eg->an.size) eg->data = ts_xrealloc(eg->data, cap * eg->an.size);
        eg->cap_ids = cap;
    }
    TS_ASSERT(eg->nids < TS_EG_NONE);
    uint32_t id = eg->nids++;
    eg->uf[id] = id;
    memset(&eg->cnodes[id], 0, sizeof(idvec));
    memset(&eg->cparents[id], 0, sizeof(idvec));
    eg->nclasses++;
    return id;
}

static uint32_t new_node(ts_egraph *eg, const ts_enode *n, uint32_t cls) {
    if (eg->nnodes == eg->cap_nodes) {
        uint32_t cap = eg->cap_nodes ? 2 * eg->cap_nodes : 64;
        eg->node = ts_xrealloc(eg->node, cap * sizeof *eg->node);
        eg->node_cls = ts_xrealloc(eg->node_cls, cap * sizeof *eg->node_cls);
        eg->dead = ts_xrealloc(eg->dead, cap);
        eg->node_tag = ts_xrealloc(eg->node_tag, cap * sizeof *eg->node_tag);
        eg->node_iter = ts_xrealloc(eg->node_iter, cap * sizeof *eg->node_iter);
        eg->cap_nodes = cap;
    }
    uint32_t i = eg->nnodes++;
    eg->node[i] = *n;
    eg->node_cls[i] = cls;
    eg->dead[i] = 0;
    eg->node_tag[i] = eg->cur_tag;
    eg->node_iter[i] = eg->cur_iter;
    eg->nlive++;
    eg->version++;
    return i;
}

/* ======== hashcons ================================================================================ */

static uint64_t mix64(uint64_t h, uint64_t x) {
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 29);
}

static uint32_t node_hash(const ts_enode *n) {
    uint64_t h = mix64(0x243f6a8885a308d3ull, (uint64_t)(uint32_t)n->op);
    for (int i = 0; i < TS_EG_MAX_PARAMS; i++) h = mix64(h, (uint64_t)n->param[i]);
    for (int i = 0; i < TS_EG_MAX_KIDS; i++) h = mix64(h, n->kid[i]);
    return (uint32_t)(h ^ (h >> 32));
}

/* Nodes are kept with unused kids and params zeroed, so whole-struct comparison is identity. */
static bool node_eq(const ts_enode *a, const ts_enode *b) {
    if (a->op != b->op) return false;
    for (int i = 0; i < TS_EG_MAX_PARAMS; i++)
        if (a->param[i] != b->param[i]) return false;
    for (int i = 0; i < TS_EG_MAX_KIDS; i++)
        if (a->kid[i] != b->kid[i]) return false;
    return true;
}

/* The live node equal to `n`, or TS_EG_NONE. */
static uint32_t hc_find(const ts_egraph *eg, const ts_enode *n, uint32_t h) {
    uint32_t mask = eg->hc_cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        const hc_slot *s = &eg->hc[i];
        if (s->node == TS_EG_NONE) return TS_EG_NONE;
        if (s->hash == h && node_eq(&eg->node[s->node], n)) return s->node;
    }
}

static void hc_put(hc_slot *tab, uint32_t cap, uint32_t node, uint32_t h) {
    uint32_t i = h & (cap - 1);
    while (tab[i].node != TS_EG_NONE) i = (i + 1) & (cap - 1);
    tab[i] = (hc_slot){node, h};
}

static void hc_insert(ts_egraph *eg, uint32_t node) {
    if (2 * (eg->hc_n + 1) > eg->hc_cap) {
        uint32_t cap = 2 * eg->hc_cap;
        hc_slot *tab = ts_xmalloc(cap * sizeof *tab);
        for (uint32_t i = 0; i < cap; i++) tab[i].node = TS_EG_NONE;
        for (uint32_t i = 0; i < eg->hc_cap; i++)
            if (eg->hc[i].node != TS_EG_NONE) hc_put(tab, cap, eg->hc[i].node, eg->hc[i].hash);
        free(eg->hc);
        eg->hc = tab;
        eg->hc_cap = cap;
    }
    hc_put(eg->hc, eg->hc_cap, node, node_hash(&eg->node[node]));
    eg->hc_n++;
}

/* Removes live node `node` (keyed by its current content) with backward-shift deletion. */
static void hc_remove(ts_egraph *eg, uint32_t node) {
    uint32_t mask = eg->hc_cap - 1;
    uint32_t i = node_hash(&eg->node[node]) & mask;
    while (eg->hc[i].node != node) {
        TS_ASSERT(eg->hc[i].node != TS_EG_NONE);
        i = (i + 1) & mask;
    }
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (eg->hc[j].node == TS_EG_NONE) break;
        uint32_t home = eg->hc[j].hash & mask;
        /* slot j may move to the hole i unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        eg->hc[i] = eg->hc[j];
        i = j;
    }
    eg->hc[i].node = TS_EG_NONE;
    eg->hc_n--;
}

/* ======== adding nodes ============================================================================ */

/* `n` with canonical kids and unused fields zeroed, without compressing paths. */
static ts_enode canonical_const(const ts_egraph *eg, const ts_enode *n) {
    const ts_eg_opinfo *info = info_of(eg, n->op);
    ts_enode c;
    memset(&c, 0, sizeof c);
    c.op = n->op;
    for (int i = 0; i < info->arity; i++) c.kid[i] = find_const(eg, n->kid[i]);
    for (int i = 0; i < info->nparams; i++) c.param[i] = n->param[i];
    return c;
}

/* The same, compressing the kids' paths (the hot path of adding and rebuilding). */
static ts_enode canonical(ts_egraph *eg, const ts_enode *n) {
    const ts_eg_opinfo *info = info_of(eg, n->op);
    ts_enode c;
    memset(&c, 0, sizeof c);
    c.op = n->op;
    for (int i = 0; i < info->arity; i++) c.kid[i] = ts_eg_find(eg, n->kid[i]);
    for (int i = 0; i < info->nparams; i++) c.param[i] = n->param[i];
    return c;
}

uint32_t ts_eg_lookup(ts_egraph *eg, const ts_enode *n) {
    ts_enode c = canonical(eg, n);
    uint32_t q = hc_find(eg, &c, node_hash(&c));
    return q == TS_EG_NONE ? TS_EG_NONE : ts_eg_find(eg, eg->node_cls[q]);
}

static void call_modify(ts_egraph *eg, uint32_t cls) {
    if (eg->an.modify) eg->an.modify(eg->an.ctx, eg, cls);
}

uint32_t ts_eg_add(ts_egraph *eg, const ts_enode *n) {
    ts_enode c = canonical(eg, n);
    uint32_t q = hc_find(eg, &c, node_hash(&c));
    if (q != TS_EG_NONE) return ts_eg_find(eg, eg->node_cls[q]);
    uint32_t cls = new_class(eg);
    uint32_t idx = new_node(eg, &c, cls);
    hc_insert(eg, idx);
    vec_push(&eg->cnodes[cls], idx);
    int arity = arity_of(eg, c.op);
    for (int i = 0; i < arity; i++) vec_push(&eg->cparents[c.kid[i]], idx);
    if (eg->an.size) eg->an.make(eg->an.ctx, eg, &c, eg->data + (size_t)cls * eg->an.size);
    call_modify(eg, cls);
    return cls;
}

/* ======== union and rebuild ======================================================================= */

bool ts_eg_union(ts_egraph *eg, uint32_t a, uint32_t b) {
    a = ts_eg_find(eg, a);
    b = ts_eg_find(eg, b);
    if (a == b) return false;
    TS_GROW(eg->pending, eg->npending, eg->cap_pending);
    eg->pending[eg->npending++] = (id_pair){a, b};
    return true;
}

bool ts_eg_is_dirty(const ts_egraph *eg) {
    return eg->npending > 0 || eg->worklist.n > 0 || eg->modlist.n > 0;
}

/* Merges the classes of a and b now: the larger keeps its id. */
static void merge_classes(ts_egraph *eg, uint32_t a, uint32_t b) {
    a = ts_eg_find(eg, a);
    b = ts_eg_find(eg, b);
    if (a == b) return;
    uint32_t size_a = eg->cnodes[a].n + eg->cparents[a].n, size_b = eg->cnodes[b].n + eg->cparents[b].n;
    uint32_t root = size_a >= size_b ? a : b, gone = root == a ? b : a;
    eg->uf[gone] = root;
    eg->nclasses--;
    eg->version++;
    vec_take_all(&eg->cnodes[root], &eg->cnodes[gone]);
    vec_take_all(&eg->cparents[root], &eg->cparents[gone]);
    if (eg->an.size)
        eg->an.merge(eg->an.ctx, eg->data + (size_t)root * eg->an.size, eg->data + (size_t)gone * eg->an.size);
    vec_push(&eg->worklist, root); /* its parents may now be congruent, their data may change */
    vec_push(&eg->modlist, root);
}

static void apply_pending(ts_egraph *eg) {
    for (uint32_t i = 0; i < eg->npending; i++) merge_classes(eg, eg->pending[i].a, eg->pending[i].b);
    eg->npending = 0;
}

static void kill_node(ts_egraph *eg, uint32_t p) {
    eg->dead[p] = 1;
    eg->nlive--;
    vec_push(&eg->sweep, eg->node_cls[p]);
}

/* Re-canonicalizes live parent p in the hashcons; returns false when p turned out equal to another live
 * node (p dies and the two classes are recorded for union). */
static bool recanon_parent(ts_egraph *eg, uint32_t p) {
    hc_remove(eg, p);
    eg->node[p] = canonical(eg, &eg->node[p]);
    uint32_t q = hc_find(eg, &eg->node[p], node_hash(&eg->node[p]));
    if (q == TS_EG_NONE) {
        hc_insert(eg, p);
        return true;
    }
    ts_eg_union(eg, eg->node_cls[p], eg->node_cls[q]);
    kill_node(eg, p);
    return false;
}

/* Re-makes parent p's data and joins it into p's class; a change propagates to that class's parents. */
static void repair_parent_data(ts_egraph *eg, uint32_t p) {
    uint32_t cls = ts_eg_find(eg, eg->node_cls[p]);
    eg->an.make(eg->an.ctx, eg, &eg->node[p], eg->scratch);
    if (eg->an.merge(eg->an.ctx, eg->data + (size_t)cls * eg->an.size, eg->scratch)) {
        vec_push(&eg->worklist, cls);
        vec_push(&eg->modlist, cls);
    }
}

/* Restores the invariants for the parents of class c (egg's repair). */
static void repair(ts_egraph *eg, uint32_t c) {
    c = ts_eg_find(eg, c);
    idvec parents = eg->cparents[c];
    memset(&eg->cparents[c], 0, sizeof(idvec));
    vec_sort_unique(&parents);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < parents.n; i++) {
        uint32_t p = parents.v[i];
        if (eg->dead[p] || !recanon_parent(eg, p)) continue;
        parents.v[kept++] = p;
    }
    parents.n = kept;
    for (uint32_t i = 0; eg->an.size && i < parents.n; i++) repair_parent_data(eg, parents.v[i]);
    TS_ASSERT(eg->cparents[c].n == 0);
    free(eg->cparents[c].v);
    eg->cparents[c] = parents;
}

/* Takes v's contents (the caller frees them) and leaves v empty. */
static idvec vec_detach(idvec *v) {
    idvec out = *v;
    memset(v, 0, sizeof *v);
    return out;
}

static void run_worklist(ts_egraph *eg) {
    while (eg->worklist.n > 0) {
        idvec todo = vec_detach(&eg->worklist);
        for (uint32_t i = 0; i < todo.n; i++) todo.v[i] = ts_eg_find(eg, todo.v[i]);
        vec_sort_unique(&todo);
        for (uint32_t i = 0; i < todo.n; i++) repair(eg, todo.v[i]);
        vec_free(&todo);
    }
}

static void run_modify(ts_egraph *eg) {
    idvec todo = vec_detach(&eg->modlist);
    if (eg->an.modify) {
        for (uint32_t i = 0; i < todo.n; i++) todo.v[i] = ts_eg_find(eg, todo.v[i]);
        vec_sort_unique(&todo);
        for (uint32_t i = 0; i < todo.n; i++) call_modify(eg, ts_eg_find(eg, todo.v[i]));
    }
    vec_free(&todo);
}

/* Drops dead nodes from the node lists of the classes that held them. */
static void sweep_dead(ts_egraph *eg) {
    idvec todo = vec_detach(&eg->sweep);
    for (uint32_t i = 0; i < todo.n; i++) todo.v[i] = ts_eg_find(eg, todo.v[i]);
    vec_sort_unique(&todo);
    for (uint32_t i = 0; i < todo.n; i++) {
        idvec *v = &eg->cnodes[todo.v[i]];
        uint32_t k = 0;
        for (uint32_t j = 0; j < v->n; j++)
            if (!eg->dead[v->v[j]]) v->v[k++] = v->v[j];
        v->n = k;
    }
    vec_free(&todo);
}

void ts_eg_rebuild(ts_egraph *eg) {
    while (ts_eg_is_dirty(eg)) {
        apply_pending(eg);
        run_worklist(eg); /* may record more unions: the loop applies them */
        if (eg->npending == 0) run_modify(eg);
    }
    sweep_dead(eg);
}

/* ======== queries ================================================================================= */

uint32_t ts_eg_node_count(const ts_egraph *eg) { return eg->nlive; }
uint32_t ts_eg_class_count(const ts_egraph *eg) { return eg->nclasses; }
uint32_t ts_eg_id_bound(const ts_egraph *eg) { return eg->nids; }
bool ts_eg_is_root(const ts_egraph *eg, uint32_t id) { return id < eg->nids && eg->uf[id] == id; }

uint32_t ts_eg_class_size(const ts_egraph *eg, uint32_t cls) {
    TS_ASSERT(ts_eg_is_root(eg, cls));
    return eg->cnodes[cls].n;
}

const ts_enode *ts_eg_class_node(const ts_egraph *eg, uint32_t cls, uint32_t i) {
    TS_ASSERT(ts_eg_is_root(eg, cls) && i < eg->cnodes[cls].n);
    return &eg->node[eg->cnodes[cls].v[i]];
}

void *ts_eg_data(ts_egraph *eg, uint32_t cls) {
    if (!eg->an.size) return NULL;
    return eg->data + (size_t)ts_eg_find(eg, cls) * eg->an.size;
}

const void *ts_eg_data_const(const ts_egraph *eg, uint32_t cls) {
    if (!eg->an.size) return NULL;
    return eg->data + (size_t)find_const(eg, cls) * eg->an.size;
}

/* ======== provenance ============================================================================== */

void ts_eg_set_origin(ts_egraph *eg, int32_t tag, int32_t iter) {
    eg->cur_tag = tag;
    eg->cur_iter = iter;
}

bool ts_eg_node_origin(const ts_egraph *eg, const ts_enode *n, int32_t *tag, int32_t *iter) {
    ts_enode c = canonical_const(eg, n);
    uint32_t q = hc_find(eg, &c, node_hash(&c));
    if (tag) *tag = q == TS_EG_NONE ? -1 : eg->node_tag[q];
    if (iter) *iter = q == TS_EG_NONE ? -1 : eg->node_iter[q];
    return q != TS_EG_NONE;
}

int32_t ts_eg_node_tag(const ts_egraph *eg, const ts_enode *n) {
    int32_t tag;
    ts_eg_node_origin(eg, n, &tag, NULL);
    return tag;
}

int32_t ts_eg_node_iter(const ts_egraph *eg, const ts_enode *n) {
    int32_t iter;
    ts_eg_node_origin(eg, n, NULL, &iter);
    return iter;
}

/* ======== op index ================================================================================ */

static uint32_t op_count(const ts_egraph *eg) {
    return (uint32_t)TS_OP_COUNT + (eg->ops ? (uint32_t)eg->ops->nextra : 0);
}

/* One pass over the classes: counts (fill false: into ix_start[op + 1]) or places (fill true: at the
 * cursor pos[op]) each class once per distinct op among its nodes. last[op] is the class seen last. */
static void index_pass(ts_egraph *eg, uint32_t *last, uint32_t *pos, bool fill) {
    for (uint32_t o = 0; o < eg->ix_nops; o++) last[o] = TS_EG_NONE;
    for (uint32_t c = 0; c < eg->nids; c++) {
        if (eg->uf[c] != c) continue;
        for (uint32_t j = 0; j < eg->cnodes[c].n; j++) {
            uint32_t op = (uint32_t)eg->node[eg->cnodes[c].v[j]].op;
            if (last[op] == c) continue;
            last[op] = c;
            if (fill)
                eg->ix_cls[pos[op]++] = c;
            else
                eg->ix_start[op + 1]++;
        }
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

#define SPAN_MIN 9 /* a class of fewer nodes is scanned whole: faster than searching it */

/* Sorts the node list of every canonical class of SPAN_MIN nodes or more by (op, node index), so each
 * op's nodes are contiguous. */
static void sort_class_nodes(ts_egraph *eg) {
    uint64_t *key = NULL;
    uint32_t cap = 0;
    for (uint32_t c = 0; c < eg->nids; c++) {
        idvec *v = &eg->cnodes[c];
        if (eg->uf[c] != c || v->n < SPAN_MIN) continue;
        if (v->n > cap) key = ts_xrealloc(key, (cap = v->n) * sizeof *key);
        for (uint32_t j = 0; j < v->n; j++) key[j] = (uint64_t)(uint32_t)eg->node[v->v[j]].op << 32 | v->v[j];
        qsort(key, v->n, sizeof *key, cmp_u64);
        for (uint32_t j = 0; j < v->n; j++) v->v[j] = (uint32_t)key[j];
    }
    free(key);
}

void ts_eg_index_ops(ts_egraph *eg) {
    TS_ASSERT(!ts_eg_is_dirty(eg));
    sort_class_nodes(eg);
    eg->ix_nops = op_count(eg);
    free(eg->ix_start);
    free(eg->ix_cls);
    eg->ix_start = ts_xcalloc(eg->ix_nops + 1, sizeof *eg->ix_start);
    uint32_t *last = ts_xmalloc(eg->ix_nops * sizeof *last);
    index_pass(eg, last, NULL, false);
    for (uint32_t o = 0; o < eg->ix_nops; o++) eg->ix_start[o + 1] += eg->ix_start[o];
    eg->ix_cls = ts_xmalloc((eg->ix_start[eg->ix_nops] + 1) * sizeof *eg->ix_cls);
    uint32_t *pos = ts_xmalloc(eg->ix_nops * sizeof *pos);
    memcpy(pos, eg->ix_start, eg->ix_nops * sizeof *pos);
    index_pass(eg, last, pos, true);
    free(pos);
    free(last);
    eg->ix_version = eg->version;
}

static bool index_fresh(const ts_egraph *eg) {
    return eg->ix_start && eg->ix_version == eg->version && !ts_eg_is_dirty(eg);
}

void ts_eg_drop_op_index(ts_egraph *eg) {
    free(eg->ix_start);
    free(eg->ix_cls);
    eg->ix_start = eg->ix_cls = NULL;
    eg->ix_nops = 0;
}

const uint32_t *ts_eg_classes_with_op(const ts_egraph *eg, int32_t op, uint32_t *n) {
    *n = 0;
    if (!index_fresh(eg)) return NULL;
    if (op < 0 || (uint32_t)op >= eg->ix_nops) return eg->ix_cls; /* no such op: no class */
    *n = eg->ix_start[op + 1] - eg->ix_start[op];
    return eg->ix_cls + eg->ix_start[op];
}

/* The first position from lo in class list v whose node's op is >= op (v sorted by op). */
static uint32_t lower_bound_op(const ts_egraph *eg, const idvec *v, uint32_t lo, int32_t op) {
    uint32_t hi = v->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (eg->node[v->v[mid]].op < op)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void ts_eg_class_op_span(const ts_egraph *eg, uint32_t cls, int32_t op, uint32_t *first, uint32_t *end) {
    TS_ASSERT(ts_eg_is_root(eg, cls));
    const idvec *v = &eg->cnodes[cls];
    *first = 0;
    *end = v->n;
    if (v->n < SPAN_MIN || !index_fresh(eg)) return;
    *first = lower_bound_op(eg, v, 0, op);
    *end = lower_bound_op(eg, v, *first, op + 1);
}

/* ======== invariant check (tests) ================================================================= */

static bool check_node(ts_egraph *eg, uint32_t i, uint32_t *seen_in_class) {
    const ts_enode *n = &eg->node[i];
    int arity = arity_of(eg, n->op);
    for (int k = 0; k < arity; k++)
        if (!ts_eg_is_root(eg, n->kid[k])) return false; /* kids canonical */
    uint32_t q = hc_find(eg, n, node_hash(n));
    if (q != i) return false; /* in the hashcons, and no other live node equals it */
    uint32_t c = ts_eg_find(eg, eg->node_cls[i]);
    if (seen_in_class[i] != c) return false; /* listed in exactly its class */
    for (int k = 0; k < arity; k++) { /* listed among each kid's parents */
        const idvec *ps = &eg->cparents[n->kid[k]];
        bool found = false;
        for (uint32_t j = 0; j < ps->n && !found; j++) found = ps->v[j] == i;
        if (!found) return false;
    }
    return true;
}

bool ts_eg_check_invariants(ts_egraph *eg) {
    if (ts_eg_is_dirty(eg)) return false;
    uint32_t *seen = ts_xmalloc((eg->nnodes + 1) * sizeof *seen);
    for (uint32_t i = 0; i < eg->nnodes; i++) seen[i] = TS_EG_NONE;
    bool ok = true;
    uint32_t classes = 0, listed = 0;
    for (uint32_t c = 0; c < eg->nids && ok; c++) {
        if (!ts_eg_is_root(eg, c)) continue;
        classes++;
        for (uint32_t j = 0; j < eg->cnodes[c].n && ok; j++) {
            uint32_t i = eg->cnodes[c].v[j];
            ok = !eg->dead[i] && seen[i] == TS_EG_NONE;
            seen[i] = c;
            listed++;
        }
    }
    ok = ok && classes == eg->nclasses && listed == eg->nlive && eg->hc_n == eg->nlive;
    for (uint32_t i = 0; i < eg->nnodes && ok; i++)
        if (!eg->dead[i]) ok = check_node(eg, i, seen);
    free(seen);
    return ok;
}

/* ======== extraction ============================================================================== */

#define COST_INF UINT64_MAX

static uint64_t node_cost(const ts_egraph *eg, const ts_enode *n, const uint64_t *cost) {
    uint64_t sum = 1;
    int arity = arity_of(eg, n->op);
    for (int k = 0; k < arity; k++) {
        uint64_t c = cost[n->kid[k]];
        if (c == COST_INF || sum > COST_INF - c) return COST_INF;
        sum += c;
    }
    return sum;
}

/* One pass of the fixed point over every class; returns whether a cost improved. */
static bool improve_costs(const ts_egraph *eg, uint64_t *cost, uint32_t *best) {
    bool changed = false;
    for (uint32_t c = 0; c < eg->nids; c++) {
        if (!ts_eg_is_root(eg, c)) continue;
        for (uint32_t j = 0; j < eg->cnodes[c].n; j++) {
            uint32_t i = eg->cnodes[c].v[j];
            uint64_t k = node_cost(eg, &eg->node[i], cost);
            if (k < cost[c] || (k == cost[c] && k != COST_INF && i < best[c])) {
                changed |= k < cost[c];
                cost[c] = k;
                best[c] = i;
            }
        }
    }
    return changed;
}

/* Appends the term of class c (memoised per class in at[]) and returns its index. */
static uint32_t build_term(const ts_egraph *eg, uint32_t c, const uint32_t *best, uint32_t *at, ts_eg_term *t,
                           uint32_t *cap) {
    if (at[c] != TS_EG_NONE) return at[c];
    ts_enode n = eg->node[best[c]];
    int arity = arity_of(eg, n.op);
    for (int k = 0; k < arity; k++) n.kid[k] = build_term(eg, n.kid[k], best, at, t, cap);
    TS_GROW(t->node, t->n, *cap);
    t->node[t->n] = n;
    return at[c] = t->n++;
}

bool ts_eg_extract_smallest(ts_egraph *eg, uint32_t cls, ts_eg_term *out) {
    memset(out, 0, sizeof *out);
    TS_ASSERT(!ts_eg_is_dirty(eg));
    cls = ts_eg_find(eg, cls);
    uint64_t *cost = ts_xmalloc(eg->nids * sizeof *cost);
    uint32_t *best = ts_xmalloc(eg->nids * sizeof *best);
    uint32_t *at = ts_xmalloc(eg->nids * sizeof *at);
    for (uint32_t c = 0; c < eg->nids; c++) {
        cost[c] = COST_INF;
        best[c] = at[c] = TS_EG_NONE;
    }
    while (improve_costs(eg, cost, best)) {
    }
    bool ok = cost[cls] != COST_INF;
    uint32_t cap = 0;
    if (ok) build_term(eg, cls, best, at, out, &cap);
    free(cost);
    free(best);
    free(at);
    return ok;
}

void ts_eg_term_free(ts_eg_term *t) {
    free(t->node);
    t->node = NULL;
    t->n = 0;
}

typedef struct {
    char *s;
    size_t n, cap;
} strbuf;

static void sb_put(strbuf *b, const char *s) {
    size_t len = strlen(s);
    if (b->n + len + 1 > b->cap) {
        b->cap = 2 * (b->n + len + 1);
        b->s = ts_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, len + 1);
    b->n += len;
}

static void term_put(strbuf *b, const ts_eg_ops *ops, const ts_eg_term *t, uint32_t i) {
    const ts_enode *n = &t->node[i];
    const ts_eg_opinfo *info = ts_eg_op_info(ops, n->op);
    TS_ASSERT(info != NULL);
    if (info->arity > 0) sb_put(b, "(");
    sb_put(b, info->name);
    for (int k = 0; k < info->nparams; k++) {
        char num[32];
        snprintf(num, sizeof num, "%s%lld", k == 0 ? "{" : ",", (long long)n->param[k]);
        sb_put(b, num);
    }
    if (info->nparams > 0) sb_put(b, "}");
    for (int k = 0; k < info->arity; k++) {
        sb_put(b, " ");
        term_put(b, ops, t, n->kid[k]);
    }
    if (info->arity > 0) sb_put(b, ")");
}

char *ts_eg_term_str(const ts_eg_ops *ops, const ts_eg_term *t) {
    strbuf b = {0};
    sb_put(&b, "");
    if (t->n > 0) term_put(&b, ops, t, t->n - 1);
    return b.s;
}
