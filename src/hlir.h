/* hlir.h — the checked tensor graph (HLIR): primitive-op nodes over named axes, operands seen through views.
 *
 * A node's value is a dense row-major tensor over its own axes. An operand is a ts_ref: a node seen through
 * a ts_view (dims, strides, offset — Luminal's ShapeTracker idea), so permute, expand (broadcast), reshape
 * and slice never add a node. Elementwise nodes see every operand with exactly the node's dims, in the
 * node's order (broadcasting is done by zero strides). A reduce node's operand has the node's dims plus the
 * reduced axis. Sizes are concrete: a graph is built for one binding of its axes (a dynamic axis takes its
 * typical size unless --dims binds it), and the spec can be re-built for another binding.
 * This file does not parse or check anything: src/check.c builds ts_graphs from a spec. */
#ifndef TS_HLIR_H
#define TS_HLIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#define TS_MAX_DIMS 8

typedef enum { TS_FP16, TS_BF16, TS_FP32, TS_DTYPE_COUNT } ts_dtype;

const char *ts_dtype_name(ts_dtype t);
int ts_dtype_bytes(ts_dtype t);
int ts_dtype_lookup(const char *name); /* -1 when unknown */
/* x rounded to the nearest value representable in t (round to nearest even; overflow gives ±inf). */
double ts_dtype_round(ts_dtype t, double x);

/* A named axis. Every tensor dim names one; an axis has one size throughout the graph. */
typedef struct {
    char *name;
    int64_t size;    /* the size in this binding */
    bool dynamic;    /* a run-time size (launch helpers take it as an argument) */
    int64_t typical; /* dynamic axes: the representative size used for ranking */
    int32_t like;    /* the axis whose size this one always has ({like: t}), or -1 */
    int line, col;   /* where it is declared (1-based), 0 when implied */
} ts_axis;

typedef struct {
    int ndim;
    int32_t axis[TS_MAX_DIMS];  /* axis id of each dim */
    int64_t size[TS_MAX_DIMS];  /* its size (equal to the axis size) */
    int64_t stride[TS_MAX_DIMS]; /* in elements of the source buffer; 0 = broadcast, < 0 = reversed */
    int64_t offset;             /* element offset of index (0, ..., 0) */
} ts_view;

typedef struct {
    int32_t node;
    ts_view view;
} ts_ref;

typedef struct {
    ts_op op;
    ts_dtype dtype;
    int ndim;
    int32_t axis[TS_MAX_DIMS]; /* the node's dims, row-major */
    int nsrc;
    ts_ref src[3];
    int32_t reduce_axis; /* REDUCE_* and fused ops: the axis of the operands that is reduced; IOTA: the
                            counted axis. Fused ops see every operand with the same dims, which include
                            it; their own dims are those minus it (DUAL: with the pair axis first). */
    int64_t tile;        /* TILE_*, ONLINE_WSUM: the tile size along reduce_axis */
    int32_t at_axis;     /* UPDATE: the slice written is at index size(at_axis) - 1 of reduce_axis (the axis
                            written; src[1] has the node's dims without it) */
    int32_t rows_axis;   /* UPDATE: -1 (one slice, as above), or a block of rows: src[1] has this axis in
                            reduce_axis's place, its index i written at size(at_axis) - size(rows_axis) + i
                            (set by ts_t_update, the only maker of UPDATE nodes) */
    double value;        /* CONSTANT */
    int32_t input;       /* INPUT: index into ts_graph.inputs */
    int32_t origin;      /* the ts_graph.named entry (user tensor) whose op built it */
} ts_node;

typedef struct {
    char *name;
    int32_t node;
    int line, col;
    bool inout; /* declared `inout: true`: an `append` writes into it in place (its buffer is not const) */
} ts_input;

typedef struct {
    char *name;
    ts_ref ref; /* written contiguously in the order of ref.view's dims */
    ts_dtype dtype;
    bool inout;    /* the updated value of inout input `input` (an UPDATE node, seen whole): a hidden output,
                      listed after the user's, that lives in that input's buffer (the caller passes none) */
    int32_t input;
} ts_output;

/* A tensor the user named (an input or an op's result), as the graph computes it. */
typedef struct {
    char *name;
    char *op; /* "input", "matmul", ... as written */
    ts_ref ref;
    ts_dtype dtype;
    int line, col;
} ts_named;

typedef struct {
    char *name;
    int naxes, cap_axes;
    ts_axis *axes;
    int nnodes, cap_nodes;
    ts_node *nodes;
    int ninputs, cap_inputs;
    ts_input *inputs;
    int noutputs, cap_outputs;
    ts_output *outputs;
    int nnamed, cap_named;
    ts_named *named; /* index = ts_node.origin */
} ts_graph;

/* Outputs the caller passes buffers for: the user's, listed before the hidden in-place ones (ts_output.inout). */
static inline int ts_graph_abi_outputs(const ts_graph *g) {
    int n = g->noutputs;
    while (n > 0 && g->outputs[n - 1].inout) n--;
    return n;
}

void ts_graph_init(ts_graph *g, const char *name);
void ts_graph_free(ts_graph *g);
/* The id of axis `name`, or -1. */
int ts_graph_find_axis(const ts_graph *g, const char *name);
int ts_graph_add_axis(ts_graph *g, const char *name, int64_t size, bool dynamic, int64_t typical);
/* The axis that sizes `a` (following like: links). */
int32_t ts_axis_root(const ts_graph *g, int32_t a);
/* Appends a node (copied) and returns its id. */
int32_t ts_graph_add_node(ts_graph *g, const ts_node *n);
/* Number of elements of a node or view (sizes are checked against overflow when the graph is built). */
int64_t ts_node_numel(const ts_graph *g, const ts_node *n);
int64_t ts_view_numel(const ts_view *v);

/* ---- views ------------------------------------------------------------------------------------- */
/* The contiguous row-major view of node `id`. */
ts_view ts_view_of_node(const ts_graph *g, int32_t id);
/* Whether a and b see the same elements in the same order: dims, sizes, strides and offset. */
bool ts_view_equal(const ts_view *a, const ts_view *b);
/* The index of `axis` among v's dims, or -1. */
int ts_view_find(const ts_view *v, int32_t axis);
/* Reorders v's dims to `order` (axis ids, a permutation of v's). */
void ts_view_permute(ts_view *v, const int32_t *order, int n);
/* Inserts a broadcast dim `axis` of `size` at position `pos` (stride 0). */
void ts_view_expand(ts_view *v, int pos, int32_t axis, int64_t size);
/* Replaces dim `dim` by dims `axes[0..n)` of the given sizes (their product is the dim's size). */
void ts_view_split(ts_view *v, int dim, const int32_t *axes, const int64_t *sizes, int n);
/* Merges dims [dim, dim+n) into one dim `axis`; false (v unchanged) when their strides do not nest. */
bool ts_view_merge(ts_view *v, int dim, int n, int32_t axis);
/* Index i of dim `dim` becomes start + i*step, renamed `axis`, of `size` elements. */
void ts_view_slice(ts_view *v, int dim, int32_t axis, int64_t start, int64_t step, int64_t size);
/* Dim `dim` seen as sliding windows: two dims in its place, out_axis (window i starts at i·step) then tap_axis
 * (tap j of a window is j·dilation further on), so that index (i, j) reads element i·step + j·dilation of the
 * old dim. The windows overlap where step < taps·dilation: a view, as PyTorch's unfold, never a copy. */
void ts_view_window(ts_view *v, int dim, int32_t out_axis, int64_t out_size, int64_t step, int32_t tap_axis,
                    int64_t taps, int64_t dilation);
/* The element offset of multi-index idx[0..v->ndim). */
int64_t ts_view_offset(const ts_view *v, const int64_t *idx);
/* Whether r sees its node whole, un-re-indexed: the node's contiguous view (ts_view_of_node). */
bool ts_ref_is_whole(const ts_graph *g, const ts_ref *r);
/* How many node operands and graph outputs read each node: an array of g->nnodes counts (the caller frees it). */
int *ts_graph_reader_counts(const ts_graph *g);

/* ---- normalisation ------------------------------------------------------------------------------ */
/* Runs elementwise nodes after a merging reshape in the reshape's source axes: a node one of whose operands
 * is a node seen through a reshape that merges consecutive axes of it (group norm's normalised [m, g, c]
 * read as [m, f]) — every other operand a graph input, constant or iota, or the same merge — takes the
 * source's axes (f split back into g, c in every operand's view). Its row-major layout is unchanged (f is
 * g, c in order), so the views its readers already hold stay valid, and the nodes after it follow. The
 * values do not change; the work after a reduction then shares that reduction's axes, so that one row
 * kernel can compute the reduction and everything after it (a group norm's gain, bias and SiLU). */
void ts_graph_split_after_merges(ts_graph *g);
/* The converse: an elementwise node reading a computed node through a reshape that splits one of its axes (a
 * convolution's output positions p, computed as one axis, read back as [oh, ow]) works over that axis itself, its
 * other operands' views merged alike — so that the GEMM computing p takes the elementwise ops after it as its
 * epilogue. The node's bytes stay where they were: its readers' views are unchanged. */
void ts_graph_merge_after_splits(ts_graph *g);
/* Merges two axes that the graph reduces one after the other (an instance norm's mean over h then w, a
 * global average pool, a Frobenius norm): where a reduction (sum or max) over one axis reads, directly or
 * through scalings by constants (a mean's 1/n), only a reduction of the same kind over the next axis of one
 * view, and every other node either has both axes, adjacent, or neither, the graph is rewritten over one new
 * axis for the pair (named outer_inner): each such chain becomes one reduction over it, every node and
 * operand view takes it (views of inputs merge their nesting strides; outputs keep theirs), so that one row
 * kernel can compute the statistics and the work that reads them. Repeated while a pair merges (a norm over
 * three axes merges twice). The values are the graph's, up to the roundings of the dropped intermediates. */
void ts_graph_merge_reduced_axes(ts_graph *g);
/* Merges two free axes of one operand of a contraction (Σ_k a·b) — axes that operand has and the other lacks, adjacent
 * in its view with nesting strides (a channel-first activation's h and w in a pointwise convolution Σ_c W[o, c]·
 * x[b, c, h, w]) — into one new axis, under merge_reduced_axes's conditions (every node has both, adjacent, or neither;
 * no reduction, iota or update over either; every view sees them nesting): the GEMM then reads x[b] as a [c, h·w]
 * matrix in place, where its templates take one free axis a side. Static axes only, contractions without a batch axis
 * both operands share (attention's stay as they are); every output over the pair must see it as one nesting run of its
 * view (its kernel keeps writing the output's order). Repeated while a pair merges. */
void ts_graph_merge_free_axes(ts_graph *g);

/* ---- statistics (for `tsopt check`) ----------------------------------------------------------- */
typedef struct {
    double flops;             /* all primitive work: 1 per elementwise output, n per reduced n-vector */
    double contraction_flops; /* the part in reductions of products (matmul: 2·m·n·k) */
    double min_bytes;         /* inputs read once plus outputs written once, at their dtypes */
} ts_graph_stats;

ts_graph_stats ts_graph_measure(const ts_graph *g);

#endif
