/* egraph.h — the e-graph: e-classes of equivalent e-nodes, in egg's design.
 *
 * What it is: a union-find over 32-bit e-class ids (a bare parent array with path halving), a hashcons
 * from canonical e-node to e-class, per-class node and parent lists, egg's deferred rebuild (ts_eg_union
 * only records; ts_eg_rebuild merges, restores congruence and the hashcons with a worklist), an e-class
 * analysis hook (make / merge / modify over a fixed-size per-class struct the client owns), per-node
 * provenance (which rule application, in which iteration, first added each node: for explanations), an
 * op index (the classes holding each op, for matching), and the smallest-term extraction that tests use.
 * What it is not: it knows nothing about tensors. An e-node is an op id, up to 4 int64 params and up to 4
 * child classes; all it knows of an op is its name, arity and number of params (ts_eg_opinfo). Rules,
 * matching and the saturation loop live in rules.h and runner.h.
 *
 * Usage:
 *     ts_egraph *eg = ts_eg_new(NULL, NULL);          // primitive ops only, no analysis
 *     uint32_t a = ts_eg_add(eg, &(ts_enode){.op = TS_OP_INPUT, .param = {0}});
 *     uint32_t b = ts_eg_add(eg, &(ts_enode){.op = TS_OP_RECIP, .kid = {a}});
 *     ts_eg_union(eg, a, b); ts_eg_rebuild(eg);       // queries below assume a rebuilt (clean) graph
 *     ts_eg_free(eg);
 * Memory comes from ts_xmalloc (util.h); nothing here prints or reports user errors. */
#ifndef TS_EGRAPH_H
#define TS_EGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_EG_MAX_KIDS 4
#define TS_EG_MAX_PARAMS 4
#define TS_EG_NONE UINT32_MAX /* "no class" / "no node" */

/* ---- ops ---------------------------------------------------------------------------------------- */

/* All the e-graph and the rule reader know of an op. */
typedef struct {
    const char *name;
    int arity;   /* child classes, 0..TS_EG_MAX_KIDS */
    int nparams; /* int64 params, 0..TS_EG_MAX_PARAMS */
} ts_eg_opinfo;

/* The op ids in use: the primitives of ops.h (ids 0..TS_OP_COUNT-1), then extra[i] with id TS_OP_COUNT+i
 * (view ops, fused ops, test leaves, ...). The primitives' params: input {index}, constant {bit pattern},
 * iota {axis}, reduce_sum / reduce_max {axis}, cast {target dtype}, update {written axis, position axis, rows
 * axis or -1}; the others take none. */
typedef struct {
    const ts_eg_opinfo *extra;
    int32_t nextra;
} ts_eg_ops;

/* The info of `op` in `ops` (NULL: primitives only), or NULL when there is no such op. */
const ts_eg_opinfo *ts_eg_op_info(const ts_eg_ops *ops, int32_t op);
/* The op named `name`, or -1. Extra ops are searched after the primitives. */
int32_t ts_eg_op_lookup(const ts_eg_ops *ops, const char *name);

/* ---- e-nodes ------------------------------------------------------------------------------------ */

/* An e-node. Its identity is op, the op's params and its kids (those past the op's arity and nparams are
 * ignored: ts_eg_add zeroes them). In a term (ts_eg_term) kid[] holds term-node indices instead. */
typedef struct {
    int32_t op;
    uint32_t kid[TS_EG_MAX_KIDS];     /* child e-class ids */
    int64_t param[TS_EG_MAX_PARAMS]; /* axis ids, constant bit patterns, tile sizes, ... */
} ts_enode;

/* ---- e-class analysis --------------------------------------------------------------------------- */

typedef struct ts_egraph ts_egraph;

/* Per-class data of `size` bytes, kept in a flat array by the e-graph (pointers to it die at the next
 * ts_eg_add). make and merge must not change the e-graph; modify may add nodes and record unions. */
typedef struct {
    size_t size;
    void *ctx;
    /* Write into `out` the data of a class holding only `n` (its kids are canonical). */
    void (*make)(void *ctx, const ts_egraph *eg, const ts_enode *n, void *out);
    /* Join `from` into `into`; return true when `into` changed. */
    bool (*merge)(void *ctx, void *into, const void *from);
    /* Called after class `cls` is made or its data may have changed. May be NULL. */
    void (*modify)(void *ctx, ts_egraph *eg, uint32_t cls);
} ts_eg_analysis;

/* ---- the e-graph -------------------------------------------------------------------------------- */

/* A new empty e-graph. `ops` (NULL: primitives only) and `an` (NULL: no analysis) are borrowed and must
 * outlive it; an->make and an->merge are required when an->size > 0. */
ts_egraph *ts_eg_new(const ts_eg_ops *ops, const ts_eg_analysis *an);
void ts_eg_free(ts_egraph *eg);
const ts_eg_ops *ts_eg_ops_of(const ts_egraph *eg);

/* The class of node `n` (kids may be non-canonical ids): the existing one when the canonical node is
 * already present, else a new class. */
uint32_t ts_eg_add(ts_egraph *eg, const ts_enode *n);
/* The node's class if the canonical node is present, else TS_EG_NONE. Adds nothing. */
uint32_t ts_eg_lookup(ts_egraph *eg, const ts_enode *n);
/* Records that classes a and b are equal; takes effect at ts_eg_rebuild. Returns whether they were
 * different classes when called (so a change is pending). */
bool ts_eg_union(ts_egraph *eg, uint32_t a, uint32_t b);
/* Applies recorded unions and restores congruence, the hashcons and the analysis (a worklist, as egg). */
void ts_eg_rebuild(ts_egraph *eg);
/* The canonical id of class `id` (compresses paths by halving). */
uint32_t ts_eg_find(ts_egraph *eg, uint32_t id);
/* Whether unions are recorded but not yet rebuilt. */
bool ts_eg_is_dirty(const ts_egraph *eg);

/* Sizes of a rebuilt graph: distinct canonical e-nodes and canonical e-classes. */
uint32_t ts_eg_node_count(const ts_egraph *eg);
uint32_t ts_eg_class_count(const ts_egraph *eg);
/* Class ids are below ts_eg_id_bound; the canonical ones (ts_eg_is_root) are the classes. */
uint32_t ts_eg_id_bound(const ts_egraph *eg);
bool ts_eg_is_root(const ts_egraph *eg, uint32_t id);

/* The nodes of canonical class `cls` of a rebuilt graph: ts_eg_class_node(eg, cls, i), i < size. */
uint32_t ts_eg_class_size(const ts_egraph *eg, uint32_t cls);
const ts_enode *ts_eg_class_node(const ts_egraph *eg, uint32_t cls, uint32_t i);

/* The analysis data of canonical class `cls` (NULL without an analysis). */
void *ts_eg_data(ts_egraph *eg, uint32_t cls);
const void *ts_eg_data_const(const ts_egraph *eg, uint32_t cls);

/* ---- provenance --------------------------------------------------------------------------------- */

/* Every e-node remembers the origin that was current when it was first added: a tag (the runner uses
 * the rule index; -1, the initial value, means "from the input") and an iteration number (-1 initially).
 * Re-adding an existing node, or merging it with another, keeps its first origin. */
void ts_eg_set_origin(ts_egraph *eg, int32_t tag, int32_t iter);
/* The origin of node `n` (kids may be non-canonical ids): false, with -1 in both, when it is not in the
 * graph. tag or iter may be NULL. */
bool ts_eg_node_origin(const ts_egraph *eg, const ts_enode *n, int32_t *tag, int32_t *iter);
int32_t ts_eg_node_tag(const ts_egraph *eg, const ts_enode *n);  /* -1: from the input, or absent */
int32_t ts_eg_node_iter(const ts_egraph *eg, const ts_enode *n); /* -1: set no iteration, or absent */

/* ---- op index ----------------------------------------------------------------------------------- */

/* Builds the op index of a rebuilt graph: for each op, the canonical classes holding a node with that
 * op, in increasing id order; and sorts the nodes of each large class by (op, node index), so
 * ts_eg_class_op_span can give each op's nodes as one span. Any later change (a new node, a merge) makes it stale until built
 * again. */
void ts_eg_index_ops(ts_egraph *eg);
/* Frees the index (matching then scans every class, as with a stale index). */
void ts_eg_drop_op_index(ts_egraph *eg);
/* The classes holding op `op` (*n of them) from an up-to-date index, or NULL (*n = 0) when there is no
 * index or it is stale. Valid until the graph or the index changes. */
const uint32_t *ts_eg_classes_with_op(const ts_egraph *eg, int32_t op, uint32_t *n);

/* Positions [*first, *end) of class `cls` (canonical) that hold every node of op `op`: exactly those
 * nodes while the op index is up to date and the class is large, else the whole class (0, size). */
void ts_eg_class_op_span(const ts_egraph *eg, uint32_t cls, int32_t op, uint32_t *first, uint32_t *end);

/* Checks every invariant of a rebuilt graph (canonical nodes, hashcons, congruence, class lists). For
 * tests; O(nodes). Returns false on the first violation. */
bool ts_eg_check_invariants(ts_egraph *eg);

/* ---- terms and extraction ----------------------------------------------------------------------- */

/* A term: nodes whose kid[] are indices of earlier nodes; the root is node[n-1]. Shared subterms may
 * appear once. */
typedef struct {
    ts_enode *node;
    uint32_t n;
} ts_eg_term;

/* The term of least AST size (node count, shared subterms counted each time) represented by class `cls`
 * of a rebuilt graph, by a bottom-up fixed point. Ties go to the earliest-added node. Returns false (out
 * empty) when the class has no finite term. */
bool ts_eg_extract_smallest(ts_egraph *eg, uint32_t cls, ts_eg_term *out);
void ts_eg_term_free(ts_eg_term *t);
/* The term as an s-expression in the rule syntax, e.g. "(add (mul a c) (reduce_sum{2} b))"; nodes of arity
 * 0 print bare ("a", "input{0}"). Returns malloc'd text the caller frees. */
char *ts_eg_term_str(const ts_eg_ops *ops, const ts_eg_term *t);

#endif
