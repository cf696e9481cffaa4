/* plan.h — kernel plans: what the saturated e-graph becomes before it becomes CUDA.
 *
 * A plan is a sequence of kernels over buffers (the graph's inputs and outputs, and temporaries in a
 * workspace). Each kernel is an instance of a template in templates/ — a tensor-core GEMM (optionally
 * dual), streaming attention, a generic fused reduction, or a generic fused elementwise map — with its
 * parameters and the fused expressions (epilogue, score, inner/finish, map) it computes per element.
 * Operands are read through accesses: a buffer and a stride per named axis, with strides, offsets and
 * extents as symbolic sizes (sym.h) so that dynamic axes stay run-time values.
 *
 * A plan is lowered (src/plan.c) from an extraction — one e-node per e-class of the saturated e-graph, plus
 * the kernel boundaries the search chose — by covering the extracted term with kernel patterns. Which
 * extraction is the search's (src/search.c), scored by the cost model (costmodel.h); the input graph
 * itself, one kernel per primitive op, is always the baseline. */
#ifndef TS_PLAN_H
#define TS_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "egir.h"
#include "hlir.h"
#include "sym.h"

typedef enum { TS_BUF_INPUT, TS_BUF_OUTPUT, TS_BUF_TEMP } ts_buf_kind;

typedef struct {
    ts_buf_kind kind;
    int index; /* input or output index; temps: their order in the workspace */
    ts_dtype dtype;
    int ndim;
    int32_t axis[TS_MAX_DIMS]; /* contiguous, row-major */
    int64_t pitch; /* elements between consecutive rows of the innermost axis when padded (src/pad.h: the innermost
                      axis's size rounded up to 8), 0 when dense */
    int64_t elems; /* a temporary of a fixed size and no axes (ndim 0: a ROW kernel's grid scratch): its elements */
} ts_buffer;

/* How a kernel reads or writes a buffer: element offset = offset + Σ idx[axis]·stride[axis]. */
typedef struct {
    int buf;
    int ndim;
    int32_t axis[TS_MAX_DIMS];
    ts_sym stride[TS_MAX_DIMS];
    ts_sym offset;
} ts_access;

/* Fused expressions: per-element trees over loads, accumulators, indices and constants. */
typedef enum { TS_X_OP, TS_X_CONST, TS_X_LOAD, TS_X_ACC, TS_X_INDEX } ts_xkind;

typedef struct {
    ts_xkind kind;
    ts_op op;       /* TS_X_OP: an elementwise primitive */
    ts_dtype dtype; /* TS_X_OP CAST: the target */
    int32_t kid[3];
    double value;   /* TS_X_CONST */
    int32_t slot;   /* TS_X_LOAD: access index; TS_X_ACC: accumulator 0 or 1; TS_X_INDEX: axis id */
} ts_xnode;

typedef struct {
    int n, cap;
    ts_xnode *node; /* kids before parents; the root is the last */
} ts_expr;

/* Every kernel kind, in ts_kernel_kind order: X(ENUM, "name"). The name is the kind's word everywhere:
 * plan descriptions, tune records ("kind"), the cost model's "<name>_efficiency" coefficient. */
#define TS_KERNEL_KINDS(X) X(MAP, "map") X(REDUCE, "reduce") X(GEMM, "gemm") X(ATTENTION, "attention") X(ROW, "row")
#define TS_KIND_ENUM_(e, n) TS_KERNEL_##e,
#define TS_KIND_NAME_(e, n) n,
#define TS_KIND_ONE_(e, n) +1
typedef enum { TS_KERNEL_KINDS(TS_KIND_ENUM_) } ts_kernel_kind;
#define TS_NKINDS (0 TS_KERNEL_KINDS(TS_KIND_ONE_)) /* kinds, for tables indexed by ts_kernel_kind */

/* "map", "reduce", "gemm", "attention", "row"; "?" for a value that is no kind. */
static inline const char *ts_kernel_kind_name(ts_kernel_kind k) {
    static const char *const names[] = {TS_KERNEL_KINDS(TS_KIND_NAME_)};
    return (unsigned)k < TS_NKINDS ? names[k] : "?";
}

/* ROW kernels: at most this many reductions per row, and outputs per kernel. */
#define TS_ROW_MAX_STAGES 4
/* A ROW kernel's grid scratch (row_grid): a partial per stage and block of a grid of up to 4096 blocks. */
#define TS_ROW_GRID_SCRATCH_FLOATS (TS_ROW_MAX_STAGES * 4096)
/* A GEMM's split-K through memory (ts_kernel_config sk_chunks): at most this many chunks. */
#define TS_GEMM_MAX_CHUNKS 8
#define TS_KERNEL_MAX_OUTS 4
typedef enum { TS_COMBINE_SUM, TS_COMBINE_MAX, TS_COMBINE_WSUM } ts_combine;

/* How one GEMM, attention or map kernel runs: the template arguments the emitter prints, the tiles the cost
 * model's wave estimate counts, what tune may vary. One module chooses it (src/config.c); 0 elsewhere.
 *   GEMM, sm_90a (wgmma + TMA): tile_m x tile_n CTA tile, `stages` K-slices of 64 in flight, cluster_m CTAs
 *     per cluster along M; pingpong: the two consumer warpgroups take turns, a tile_m x tile_n tile each, so
 *     that one's epilogue runs beside the other's main loop (else both share every tile). The mma.sync
 *     fallback (sm_80+): fb_tile_m x fb_tile_n x fb_tile_k, warps fb_warps_m x fb_warps_n, fb_stages.
 *   ATTENTION, sm_90a: tile_m query rows per CTA, tile_n keys per K/V tile, `stages` K/V tiles in flight,
 *     pingpong: two consumer warpgroups alternate softmax and wgmma. Fallback: fb_tile_m query rows, fb_tile_n keys per step,
 *     fb_tile_k the head-dim chunk of a K/V load, fb_warps_m warps.
 *   GEMM, skinny (decode or small) form: calls with M ≤ skinny_m (0: never) run the mma.sync template with
 *     sk_tile_m x sk_tile_n tiles (K-slices of 64, 4 warps along N) and sk_stages, a shallow pipeline that
 *     leaves room for several CTAs (and split-K clusters) an SM (config.c); skinny_only: M can never exceed skinny_m (a
 *     static size), so the other forms are not emitted. sk_split > 1: split-K, each tile's K tiles shared by
 *     a cluster of sk_split CTAs (gemm.cuh), when the column tiles alone would leave SMs idle.
 *   ATTENTION, decode form: calls with t_q ≤ dec_rows query rows a head run tsa::launch_attention_decode
 *     (attention.cuh: 16 rows a CTA, the keys split over its warps and a cluster, picked at run time);
 *     dec_only: t_q is static and within it.
 *   MAP: walk (map.cuh's transposed walk): neighbouring threads step along output dimension walk_dim rather
 *     than the innermost, where that leaves fewer bytes moved with a stride other than 0 or 1 (a transpose).
 *   GEMM, tf32x3: fp32 operands, run by templates/gemm_f32.cuh (3xTF32 on mma.sync, every GPU from sm_80) in
 *     fb_tile_m x fb_tile_n x fb_tile_k tiles, warps fb_warps_m x fb_warps_n, fb_stages; tile_m, tile_n and
 *     stages mirror them (the cost model's waves); no skinny or sm_90a form; sk_split > 1: split-K over clusters
 *     of that many CTAs, as the skinny form's; f32_wgmma: the 128×128 single form, unsplit, runs
 *     templates/gemm_f32_sm90.cuh (the products by wgmma on sm_90a; gemm_f32.cuh's kernel elsewhere).
 *   GEMM, library: cuBLASLt runs it (templates/cublaslt.cuh; only with --allow-cublas, only where libgemm.h
 *     matches it), the fields above then describing the own kernel it falls back to.
 *   ROW (along the contiguous axis): row_split, for rows longer than one block caches (ts_config_row_block_len)
 *     — fewer rows than SMs are always split over a cluster (ts_config_row_cluster); more take passes through
 *     L2 unless row_split, a variant tune times (bench/NOTES.md run 152: either may win). */
typedef struct {
    int tile_m, tile_n, stages, cluster_m;
    bool pingpong;
    int fb_tile_m, fb_tile_n, fb_tile_k, fb_warps_m, fb_warps_n, fb_stages;
    int skinny_m, sk_tile_m, sk_tile_n, sk_stages, sk_split;
    int sk_chunks; /* GEMM, skinny form: > 1: split-K through memory as well, the K tiles in that many chunks whose
                    * fp32 sums pass through the kernel's k_partials scratch (gemm.cuh k_chunks) */
    bool skinny_only;
    int dec_rows;  /* ATTENTION: calls with t_q ≤ dec_rows (0: never) run the split-key decode kernel */
    bool dec_only; /* t_q can never exceed dec_rows: the other attention kernels are not emitted */
    bool walk;     /* MAP: neighbouring threads step along output dimension walk_dim, not the innermost */
    int walk_dim;  /* (map.cuh's transposed walk: an operand whose unit stride is along that dimension) */
    bool tf32x3;   /* GEMM: fp32 operands, gemm_f32.cuh's kernel (above) */
    bool f32_wgmma; /* GEMM, tf32x3: gemm_f32_sm90.cuh's wgmma kernel (above) */
    bool row_split; /* ROW: rows longer than a block caches, more of them than SMs: each split over a cluster of
                     * blocks that cache their shares (row.cuh launch_row's `split`), not a pass a stage */
    bool library;  /* GEMM: run by cuBLASLt (libgemm.h) */
    bool tune_only; /* a variant tune times but the search never chooses by prediction (a form not yet measured on a
                     * GPU: config.c says which) */
} ts_kernel_config;

typedef struct {
    ts_kernel_kind kind;
    ts_kernel_config cfg; /* GEMM and ATTENTION (config.h) */
    ts_access out;  /* the buffer written, over the kernel's output axes */
    int nacc, cap_acc;
    ts_access *acc; /* operands, referenced by TS_X_LOAD slots and by the fields below */
    ts_expr expr;   /* MAP: the value; REDUCE: finish(ACC 0); GEMM: epilogue(ACC 0, ACC 1); ATTENTION: score(ACC 0) */
    /* REDUCE */
    ts_expr inner, inner_weighted; /* value (or score) and, for WSUM, the weighted value, per (output, k) */
    ts_combine combine;
    /* REDUCE, GEMM, ATTENTION: the contracted axis (attention: t_kv); GEMM/ATTENTION axes */
    int32_t red_axis;
    int32_t m_axis, n_axis, batch_axis; /* GEMM (batch_axis -1: none); ATTENTION: q axis in m_axis, head dim in n_axis */
    int32_t batch_outer; /* GEMM: a second batch axis merged with batch_axis (-1: none): batch index b runs over
                          * both, outer-major, at batch_axis's stride (it nests: outer stride = inner's × size) */
    int32_t m_outer;     /* GEMM: a second row axis merged with m_axis (-1: none): row index runs over both,
                          * outer-major, at m_axis's stride — every access that spans either spans both, nested
                          * (a Linear over [b, t, d] activations: b·t rows, not b batches of t) */
    int a, b0, b1;                      /* GEMM: operand accesses (b1 -1 unless dual); ATTENTION: q, k, v */
    /* GEMM over two operand pairs (contract_add: c + Σ_k a·b with c itself a contraction Σ_r a2·b2): the main
     * loop runs over red_axis's K tiles of (a, b0), then red_axis2's of (a2, b2) — A2 [batch, m, r] with r
     * contiguous, B2 in B's layout — accumulating one result, ACC 0 (a LoRA update beside its base weight). */
    bool two_k;
    int a2, b2;
    int32_t red_axis2;
    bool b_kn;                          /* GEMM: B is [k, n] with n contiguous (else [n, k], k contiguous) */
    bool causal;                        /* ATTENTION: the score masks keys after the query (tiles skipped) */
    bool windowed;                      /* ATTENTION: the score masks keys j < q − window (tiles skipped) */
    double window;
    double c;                           /* REDUCE WSUM / ATTENTION: weights are 2^(c·(s − max s)) */
    int heads_ndim;                     /* ATTENTION: head axes of Q (merged into one index) */
    int32_t head_axis[TS_MAX_DIMS];
    int64_t group;                      /* ATTENTION: query heads per kv head (GQA) */
    /* ROW: one row is every position along red_axis at one index of the other output axes. Per row, the
     * stages reduce in order — stage j combines stage[j] (evaluated at each position of the row; it may
     * read ACC i for i < j, the finished results of earlier stages) with stage_combine[j] (SUM or MAX) —
     * then every output is written at every position of the row: out ← expr, extra_out[o] ← extra_expr[o],
     * each of which may read ACC 0..nstage-1. Norms (RMSNorm, LayerNorm with its mean first), softmax and
     * residual + norm with both tensors kept are one ROW kernel each. Every output spans the same axes.
     * per_row: the outputs span the row's other axes only (not red_axis) and are written once per row from
     * the stage results — log-sum-exp (max, then Σ exp(x - max)), or a max and a mean of one row. */
    int nstage;
    bool per_row;
    bool columns; /* the row axis is strided and a neighbouring row is the next element (statistics down the
                   * columns of [b, f] over b): neighbouring threads take neighbouring rows (row.cuh's
                   * launch_row_columns) rather than a group of threads one row */
    ts_expr stage[TS_ROW_MAX_STAGES];
    ts_combine stage_combine[TS_ROW_MAX_STAGES];
    int nextra;                                    /* outputs besides out/expr */
    ts_access extra_out[TS_KERNEL_MAX_OUTS - 1];
    ts_expr extra_expr[TS_KERNEL_MAX_OUTS - 1];
    bool extra_per_row[TS_KERNEL_MAX_OUTS - 1]; /* ROW (not per_row): this output spans the row's other axes only
                                                 * and is written once per row from the stage results (a row's
                                                 * max or mean returned beside its normalised elements) */
    /* GEMM with row statistics of A (prologue fusion, src/rowstat.c): nstage reductions over red_axis of A's
     * rows — stage[j] a term of one element of A (LOAD slot a; no ACC), combined by stage_combine[j] (SUM or
     * MAX) while A's tiles stream through the kernel — then nrowstat values per row, rowstat[o] reading ACC j
     * (stage j's result), which the epilogue `expr` reads as ACC 2 + o. 0 for every other kernel. The wgmma
     * kernel has its grid publish value o of every row to temporary rowstat_buf[o] (fp32, over the GEMM's batch —
     * where A moves along it — and row axes) and reads it back in its epilogues; the mma.sync kernels fold the
     * values from their shared-memory A tiles and leave those buffers alone. */
    int nrowstat;
    ts_expr rowstat[TS_KERNEL_MAX_OUTS];
    int rowstat_buf[TS_KERNEL_MAX_OUTS];
    /* GEMM reducing the rows of its product instead of storing it (epilogue fusion, src/rowstat.c: the templates'
     * kRowParts; 0 for every other kernel): `pre` is the product's value at (row, column) (ACC 0: the accumulator;
     * the GEMM's own epilogue — what the per_row ROW kernel it replaces read), then nstage reductions along
     * n_axis: stage[j] reads ACC 0 = that value and ACC 2 + i = its tile's result of reduction i < j; merge[j] is
     * one tile's share of reduction j over the whole row (ACC 2 + i: the tile's result i; ACC 2 + TS_ROW_MAX_STAGES
     * + i: the row's result i < j; no loads), combined by stage_combine[j]; then `expr` (ACC j: the row's result
     * j) is written once per row to `out`, over the GEMM's batch and row axes. The tiles' results pass through
     * temporary `scratch` (a buffer the size of the product, which a fallback without wgmma stores whole). */
    bool row_parts;
    ts_expr pre;
    ts_expr merge[TS_ROW_MAX_STAGES];
    int scratch;
    /* ROW along the contiguous axis, rows that may be few and longer than a cluster caches: temporary `scratch`
     * (TS_ROW_GRID_SCRATCH_FLOATS fp32, no axes) for the partials of a cooperative grid that splits each row over
     * many blocks (row.cuh launch_row_grid, taken at run time where rows are at most half the SMs). */
    bool row_grid;
    /* GEMM whose configuration may split K through memory (config.h ts_config_gemm_chunks_wanted: a deep small
     * GEMM): temporary `scratch` (TS_GEMM_MAX_CHUNKS × its products' elements, fp32, no axes) for the chunks' sums. */
    bool k_partials;
    double predicted_s;                 /* set by the cost model */
} ts_kernel;

typedef struct {
    char *name;       /* which extraction produced it */
    int nbuf, cap_buf;
    ts_buffer *buf;
    int nk, cap_k;
    ts_kernel *k;
    double predicted_s;
} ts_plan;

/* Whether GEMM kernel k multiplies fp32 operands (templates/gemm_f32.cuh's 3xTF32 kernel runs it, or cuBLASLt's
 * SGEMM when configured `library`). */
static inline bool ts_gemm_fp32(const ts_plan *p, const ts_kernel *k) {
    return k->kind == TS_KERNEL_GEMM && p->buf[k->acc[k->a].buf].dtype == TS_FP32;
}

/* The kernels kernel k's template launches on the GPU: 2 for a GEMM reducing its product's rows (the GEMM, then
 * the merge of its tiles' results: templates/gemm.cuh) or splitting K through memory (then the chunks' sum), else 1. Tune's per-kernel profile adds them up. */
static inline int ts_kernel_launches(const ts_kernel *k) {
    return k->kind == TS_KERNEL_GEMM && (k->row_parts || k->cfg.sk_chunks > 1) ? 2 : 1;
}

/* Whether kernel k writes temporary `scratch` (a GEMM's row parts, a ROW kernel's grid partials). */
static inline bool ts_kernel_has_scratch(const ts_kernel *k) { return k->row_parts || k->row_grid || k->k_partials; }

/* GEMM: its rows at the typical sizes (m_axis × m_outer). */
static inline int64_t ts_gemm_rows(const ts_graph *g, const ts_kernel *k) {
    return g->axes[k->m_axis].size * (k->m_outer >= 0 ? g->axes[k->m_outer].size : 1);
}
/* GEMM: whether its row count is a run-time size (m_axis or m_outer dynamic). */
static inline bool ts_gemm_rows_dynamic(const ts_graph *g, const ts_kernel *k) {
    return g->axes[k->m_axis].dynamic || (k->m_outer >= 0 && g->axes[k->m_outer].dynamic);
}
/* GEMM: how many matrices it multiplies at the typical sizes (batch_axis × batch_outer). */
static inline int64_t ts_gemm_batch(const ts_graph *g, const ts_kernel *k) {
    return (k->batch_axis >= 0 ? g->axes[k->batch_axis].size : 1) *
           (k->batch_outer >= 0 ? g->axes[k->batch_outer].size : 1);
}

/* GEMM: the K-slices of 64 its main loop runs (both operand pairs' when two_k), at the typical sizes. */
static inline int64_t ts_gemm_k_slices(const ts_graph *g, const ts_kernel *k) {
    return (g->axes[k->red_axis].size + 63) / 64 + (k->two_k ? (g->axes[k->red_axis2].size + 63) / 64 : 0);
}

/* ATTENTION: the kernel's kv-head axis and its query-only head axis (GQA's group), -1 where there is none.
 * The kernel's head index runs over kv heads × group (query head = kv head · group + g), unless the two do
 * not nest in Q and O: then the kv heads are the kernel's batch (src/emit.c). */
static inline void ts_attention_head_axes(int heads_ndim, const int32_t *head_axis, int64_t group, int32_t *kvh,
                                          int32_t *qh) {
    *kvh = group == 1 ? (heads_ndim ? head_axis[0] : -1) : (heads_ndim == 2 ? head_axis[0] : -1);
    *qh = group > 1 ? head_axis[heads_ndim - 1] : -1;
}

/* A heap copy of e's nodes. */
ts_expr ts_expr_copy(const ts_expr *e);

/* Appends node n to e (its kids already in e); returns its index. */
int ts_expr_push(ts_expr *e, ts_xnode n);

/* x evaluated in float64 with the interpreter's op semantics (ts_interp_apply): ACC i reads acc[i], LOAD of
 * slot s load[s], INDEX of axis a index[a] (load or index NULL: NAN). round_casts false: a cast to a float type is
 * taken as exact (the value itself), as a kernel computing in fp32 registers nearly does. */
double ts_expr_eval(const ts_expr *x, const double *acc, const double *load, const double *index, bool round_casts);

/* Whether node i of x is tanh as the composite expands and the rules leave it, 1 + (−2)·1/(2^y + 1)
 * (operands of the adds and the multiply in either order): then it equals tanh(y·ln2/2) and the node index
 * of y is returned, else -1. Lets the score functor use the hardware tanh and the cost model count one
 * special-function op for it. */
int ts_expr_tanh_arg(const ts_expr *x, int i);

/* live[i] = whether node i of x is needed for its root when every tanh (ts_expr_tanh_arg) is computed from
 * its argument directly (fast_tanh), or when every node is evaluated as written (!fast_tanh: all live
 * that the root reaches). */
void ts_expr_live(const ts_expr *x, bool fast_tanh, bool *live);

/* An attention score where every key is at or before its query (k ≤ q along k_axis and q_axis): each
 * comparison q' < k' of the query index (cast, plus a constant ≥ 0) with the key index (cast, plus a constant
 * ≤ 0) is false there — the graph's causal mask — and the constants that follow are folded (a where of a known
 * condition, x + 0, x · 1). Returns false, out untouched, when x has no such comparison; else *out is a new
 * expression (free its node). The score functor's `unmasked` form (templates/attention.cuh). */
bool ts_expr_below_diagonal(const ts_expr *x, int32_t q_axis, int32_t k_axis, ts_expr *out);

/* Attention kernel k's score below the causal diagonal, when the graph masks every later key (k->causal) and
 * its comparisons fold (ts_expr_below_diagonal, into *below: free its node); false otherwise. *scale: the
 * positive constant a when that score is a·dot and ts_attention_masks_apart(head_dim) — the kernel then scores the dot product
 * alone and its softmax constant c becomes a·c (exp2(c·(a·s − max a·s)) = exp2(a·c·(s − max s))); else 1 (at
 * head dim 256 the kernel measured 8% slower with it, bench/NOTES.md run 97, as with every change to its
 * score loop). One fact for the emitter (the functor's masks_future form) and the cost model (its ops a score). */
bool ts_attention_unmasked(const ts_kernel *k, int64_t head_dim, ts_expr *below, double *scale);

/* Whether the attention kernels of this head dim set masked scores to −inf apart from the per-score path and
 * score a masks_future functor unmasked (templates/attention.cuh kMaskApart: D ≤ 128; at 256 every change to
 * the score loop measured slower, bench/NOTES.md runs 93-97). */
static inline bool ts_attention_masks_apart(int64_t head_dim) { return head_dim <= 128; }

/* k as an empty kernel of `kind`: no operands or expressions, no axes (-1), no dual B. */
void ts_kernel_init(ts_kernel *k, ts_kernel_kind kind);
/* Frees what kernel k owns: its operands and expressions (not k itself). */
void ts_kernel_free(ts_kernel *k);
void ts_plan_free(ts_plan *p);
/* The kernels in words, in launch order, separated by "; ", e.g. "reduce-sum [m] over d; gemm [m,n] over d".
 * (heap) */
char *ts_plan_describe(const ts_plan *p, const ts_graph *g);
/* Kernel i alone, e.g. "dual-gemm [m,n] over d". (heap) */
char *ts_kernel_describe(const ts_plan *p, const ts_graph *g, int i);

/* Lowers an extraction of x into plan p (initialised by the caller to zeros): best[cls] is the e-node that
 * computes e-class cls (every class reachable from the outputs needs one, and they must not form a cycle);
 * mark[cls] (mark may be NULL: no marks) holds the search's decisions at that class, TS_MARK_* bits:
 * TS_MARK_CUT puts a kernel boundary there (its value is computed into a buffer and loaded by its consumers
 * rather than inlined into them); TS_MARK_ROW lowers a lone reduction there along contiguous rows as a ROW
 * kernel (a block per row, 16-byte vectors, the finish written once per row) rather than a REDUCE kernel.
 * With fuse false every primitive op is a
 * kernel of its own (the baseline), Σ_k a·b read as a contraction. `views2` is the view table of the same
 * graph checked with every dynamic axis multiplied by its ts_sym_primes entry (NULL when the graph has no
 * dynamic axes). Returns 0, or -1 with *err when a construct has no kernel (p is then to be freed). */
enum { TS_MARK_CUT = 1, TS_MARK_ROW = 2 };
int ts_plan_lower(const ts_egir *x, const ts_egir_view *views2, const ts_enode **best, const uint8_t *mark, bool fuse,
                  ts_plan *p, char **err);
/* ts_plan_lower, and with library_gemms (--allow-cublas) GEMM kernels that only cuBLASLt runs
 * (ts_gemm_library_only; config.h `library` set for them unconditionally): an fp32 GEMM whose A is read
 * transposed (unit stride along m: `A.T @ B`), which would otherwise read a k-contiguous copy of A. (fp16 and
 * bf16 GEMMs read such an A as it is whatever the flag, ts_gemm_a_km, where it has more rows than a skinny
 * GEMM's.) */
int ts_plan_lower_with(const ts_egir *x, const ts_egir_view *views2, const ts_enode **best, const uint8_t *mark,
                       bool fuse, bool library_gemms, ts_plan *p, char **err);

/* Whether kernel k writes buffer buf (its output or an extra output). */
bool ts_kernel_writes(const ts_kernel *k, int buf);

/* Access a's stride along axis (0 where a does not span it). */
ts_sym ts_access_stride(const ts_access *a, int32_t axis);

/* Whether GEMM kernel k reads A M-major (unit stride along m, not along k: `A.T @ B` of an A stored [k, m]); the
 * 2-byte templates take it as it is (gemm.cuh / gemm_sm90.cuh A_KM), the fp32 one does not. */
static inline bool ts_gemm_a_km(const ts_kernel *k) {
    if (k->kind != TS_KERNEL_GEMM) return false;
    ts_sym s = ts_access_stride(&k->acc[k->a], k->red_axis);
    return !ts_sym_is_one(&s);
}
/* Whether no template of tsopt's own runs GEMM kernel k of plan p, only cuBLASLt (--allow-cublas): an fp32 A read
 * M-major (templates/gemm_f32.cuh reads A k-contiguous). */
static inline bool ts_gemm_library_only(const ts_plan *p, const ts_kernel *k) {
    return ts_gemm_a_km(k) && p->buf[k->acc[k->a].buf].dtype == TS_FP32;
}
/* Whether a and b read the same element at every index: one buffer, offset and stride per axis. */
bool ts_access_same_view(const ts_access *a, const ts_access *b);
/* Whether a ROW kernel keeps operand `slot` in registers for the whole row (row.cuh's cached operands): it
 * varies along the row and from row to row. The rest (gains and biases shared by every row, per-row
 * scalars) are re-read per span, from L1/L2, in every stage and output that reads them. */
bool ts_row_operand_cached(const ts_kernel *k, int slot);
/* Whether expression x reads access slot `slot` (a TS_X_LOAD of it). */
bool ts_expr_reads(const ts_expr *x, int slot);
/* Whether GEMM k's operand `slot` differs from one output element to the next along both rows and columns (a
 * residual [m, n]; not a bias [n] or a row scale [m], which L1 holds): the epilogue functor asks these operands'
 * lines into L2 ahead of its loads (emit.c, gemm.cuh's prefetch), and the cost model charges their loads
 * (epilogue_chunk_load_s). */
bool ts_gemm_operand_per_row(const ts_kernel *k, int slot);
/* Whether GEMM k's operand `slot` varies along the output's rows at all (a residual or a row scale; not a bias
 * [n]): an epilogue functor none of whose operands does loads them once per column (emit.c, gemm.cuh's
 * kLoadByColumn). */
bool ts_gemm_operand_by_row(const ts_kernel *k, int slot);
/* How many operands GEMM k's epilogue reads (per_row: only those that differ from row to row). */
int ts_gemm_epilogue_operands(const ts_kernel *k, bool per_row);
/* kVec of a MAP or ROW kernel's functor (span.cuh): 16 bytes of the narrowest element type it moves (8
 * halves, 4 floats). */
int ts_kernel_span_vec(const ts_plan *p, const ts_kernel *k);

/* The axis along which access a has unit stride (a constant 1), or -1. */
int32_t ts_access_unit_axis(const ts_access *a);
/* Distinct elements access a touches (its own dims, at the graph's current sizes), and their bytes in plan p. */
double ts_access_numel(const ts_graph *g, const ts_access *a);
double ts_access_bytes(const ts_graph *g, const ts_plan *p, const ts_access *a);
/* Whether access a steps along `axis` with a stride other than 0 or 1 (a dynamic stride counts as other):
 * neighbouring threads stepping along it each touch a memory sector of their own. */
bool ts_access_strided_along(const ts_access *a, int32_t axis);
/* GEMM k's operand access slots — A, B, its dual B, the second pair's A and B, those it has — into slots[0..5);
 * how many. */
int ts_gemm_operand_slots(const ts_kernel *k, int *slots);
/* Whether a GEMM reading access a moves it in 16-byte chunks (gemm.cuh `chunked`; TMA on Hopper): its offset
 * and every stride but the unit one multiples of 8 elements where they are constants (a dynamic stride is
 * taken to be; the pointer itself is the caller's and taken to be aligned). */
bool ts_access_chunked(const ts_access *a);
/* Whether it moves in 4-byte pairs (gemm.cuh `paired`: the mma.sync kernel's 4-byte cp.async loader): the same
 * with multiples of 2. */
bool ts_access_paired(const ts_access *a);

/* Numbers p's temporaries 0, 1, ... in buffer order (their workspace slots). */
void ts_plan_number_temps(ts_plan *p);

/* A deep copy of src (heap copies of its kernels, accesses and expressions); the name too. */
void ts_plan_copy(ts_plan *dst, const ts_plan *src);

/* Adds a buffer to p (a temporary takes the next workspace slot) and returns its index. */
int ts_plan_add_buffer(ts_plan *p, ts_buf_kind kind, int index, ts_dtype dtype, const int32_t *axes, int n);
/* Adds a buffer shaped like B (dtype, axes, pitch) of the given kind and index; its index in p. */
int ts_plan_add_buffer_like(ts_plan *p, ts_buf_kind kind, int index, const ts_buffer *B);
/* Gives ROW kernel ki a grid scratch (row_grid: a temporary of TS_ROW_GRID_SCRATCH_FLOATS fp32) where its rows may
 * take a cooperative grid (config.h ts_config_row_grid_wanted); lowering calls it for every kernel. */
void ts_plan_give_row_grid_scratch(const ts_graph *g, ts_plan *p, int ki);
/* Gives GEMM ki a scratch for split-K through memory (k_partials) where config.h ts_config_gemm_chunks_wanted. */
void ts_plan_give_gemm_chunk_scratch(const ts_graph *g, ts_plan *p, int ki);

/* Appends copies of src's kernels to dst, src's buffer b becoming dst's buffer map[b]: how the plan of one
 * chunk of a partitioned graph (a decoder layer) is laid into the whole graph's plan. */
void ts_plan_append(ts_plan *dst, const ts_plan *src, const int *map);

#endif
