/* egir.h — tsopt's tensors in the e-graph: HLIR → e-graph, the tensor e-class analysis, the guards rules
 * may call, and e-graph terms (or rule patterns) → HLIR again, so that the float64 interpreter can
 * evaluate anything the e-graph holds.
 *
 * Semantics. An e-class is a tensor as a function of its named axes: dim order is layout, not meaning, so
 * permute and broadcast views vanish (elementwise ops broadcast by name; `(mul a b)` = `(mul b a)`), and
 * `copy` is the identity. A reduction over an axis its operand lacks reduces the broadcast (a sum
 * multiplies by the size). Views that re-index (slice, split, merge, rename) become `(view{v} x)` nodes,
 * v indexing a table of views kept here. Nodes carry params: input{i}, constant{double bits}, iota{axis},
 * cast{dtype}, reduce_*{axis}, and the fused ops' {axis[, tile]} (ops.h).
 *
 * The analysis (per e-class): the set of axes the value varies along (a bit mask, so at most 63 axes), the
 * dtype (-1 where it adapts: constants, iota), and a known constant value, folded into a constant node. */
#ifndef TS_EGIR_H
#define TS_EGIR_H

#include <stdbool.h>
#include <stdint.h>

#include "egraph.h"
#include "expand.h"
#include "hlir.h"
#include "rules.h"

#define TS_EGIR_MAX_AXES 63

typedef struct {
    uint64_t axes; /* bit a: varies along axis a */
    int8_t dtype;  /* a ts_dtype, or -1: adapts to its use */
    bool is_const;
    double value;  /* when is_const */
} ts_egir_data;

/* A re-indexing view: `view`'s strides address a contiguous buffer whose dims are src_axis[0..src_ndim). */
typedef struct {
    int src_ndim;
    int32_t src_axis[TS_MAX_DIMS];
    ts_view view;
} ts_egir_view;

typedef struct {
    ts_graph *g; /* axes and inputs (borrowed; the pair axis of `dual` may be added to it) */
    ts_egraph *eg;
    ts_eg_analysis an;
    int nviews, cap_views;
    ts_egir_view *views;
    uint32_t *node_class;   /* HLIR node → its e-class when converted */
    uint32_t *output_class; /* per graph output */
    uint64_t axis_conflicts; /* merges of classes with different axes: a rule is unsound if this grows */
} ts_egir;

/* The extra (fused) ops of ops.h as the e-graph sees them, and the rule environment (ops + guards). */
const ts_eg_ops *ts_egir_ops(void);
ts_rule_env ts_egir_rule_env(void);

/* Builds the e-graph of g (checked). Returns 0, or -1 with a message in *err (heap) when g has too many
 * axes. */
int ts_egir_init(ts_egir *x, ts_graph *g, char **err);
void ts_egir_free(ts_egir *x);

/* The tensor that node (op, param, kids) computes, built with b (views for `view` nodes from `views`). */
ts_tensor ts_egir_build_node(ts_builder *b, const ts_egir_view *views, int32_t op, const int64_t *param,
                             const ts_tensor *kids);

/* A graph that computes `term` from g's inputs (same axes and inputs), with the root as its one output
 * named "out". out is initialised here; free it with ts_graph_free. */
void ts_egir_term_graph(const ts_egir *x, const ts_eg_term *term, ts_graph *out);

/* The term in rule syntax with names: inputs by name, axes by name, constants as numbers, e.g.
 * "(online_wsum{t_kv,64} (reduce_sum{d_h} (mul Q K)) V 1.4426950408889634)". Heap string. */
char *ts_egir_term_str(const ts_egir *x, const ts_eg_term *term);

#endif
