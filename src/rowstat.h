/* rowstat.h — row reductions moved into GEMMs: statistics of a GEMM's A rows computed inside the GEMM (prologue
 * fusion), and a GEMM reducing the rows of its product instead of storing it (epilogue fusion).
 *
 * A kernel that reduces each row of a GEMM's A operand along the contracted axis — RMSNorm's Σ_k x², a
 * LayerNorm's Σ x and Σ x², a row maximum — and whose per-row results only that GEMM's epilogue reads, costs a
 * pass over A and a launch of its own. The GEMM reads every element of those rows anyway: the templates can
 * fold the reductions from the tiles they load (templates/gemm.cuh, "row statistics"). This pass rewrites a
 * plan so that they do. Whether the rewritten plan is better is the cost model's call (src/search.c offers
 * both forms). */
#ifndef TS_ROWSTAT_H
#define TS_ROWSTAT_H

#include "plan.h"

/* p with every ROW (per row) or REDUCE kernel that qualifies moved into its GEMM, in *out (a new plan,
 * p untouched):
 *   - its stages (REDUCE: its inner value) are sums or maxima over the GEMM's contracted axis of a term of
 *     one element of the GEMM's A operand, read through the same view, and nothing else (no index, no other
 *     operand, no earlier stage);
 *   - its outputs are temporaries over the GEMM's batch and row axes that the GEMM alone reads, in its
 *     epilogue, through the view the kernel wrote them with; what it writes per row reads only its stage
 *     results and constants.
 * The kernel and its buffers leave the plan; the GEMM gets nstage / stage / nrowstat / rowstat (plan.h) and
 * its epilogue reads the values as ACC 2 + o. Returns false, writing nothing to *out, when none qualifies. */
bool ts_plan_with_row_stats(const ts_plan *p, ts_plan *out);

/* p with every GEMM whose product only a per-row ROW kernel reads, reducing each row along the GEMM's columns
 * (a log-sum-exp, a row's maximum or mean of a product), made to reduce the rows itself instead of storing the
 * product (epilogue fusion: plan.h `row_parts`; templates/gemm.cuh kRowParts), in *out (a new plan, p
 * untouched). The ROW kernel must read nothing but the product, through the view the GEMM wrote it with, and
 * write one output; each of its reductions must split over tiles of a row: independent of the earlier results,
 * or a sum reading one earlier maximum only through exponentials of the difference (Σ exp(x − max x): checked
 * on samples). The ROW kernel leaves the plan; the product's buffer stays as the GEMM's scratch, and the GEMM takes
 * its default configuration again (config.h: no cluster, no ping-pong). Returns false,
 * writing nothing to *out, when none qualifies. */
bool ts_plan_with_row_parts(const ts_plan *p, const ts_graph *g, ts_plan *out);

/* A ROW kernel's stage that a pass over an uncached row can fold together with the next (templates/row.cuh
 * kOnline: an online softmax): stage j a maximum, stage j + 1 a sum reading it only through exponentials of
 * the difference (Σ exp(x − max x)), so that a running (max, sum) rescales its sum when the max grows —
 * checked as for ts_plan_with_row_parts, on samples of independent operands. Returns j and sets *merge (the
 * factor's expression: ACC 2 + j + 1 the partial sum, 2 + j its maximum, 2 + TS_ROW_MAX_STAGES + j the new
 * maximum; the caller frees merge->node), or -1 (and an empty *merge) when no stage pair folds. */
int ts_row_online_stage(const ts_kernel *k, ts_expr *merge);

/* The stages of ROW kernel k that a pass over a row it does not cache folds into its first pass (templates/row.cuh
 * kJoinFirst, bit j for stage j): those after the first pass's own stage (stage 0, or the online pair at 0) that
 * read no other stage's result and are not the online pair, such as a cross-entropy's target logit beside its
 * log-sum-exp. `online`: k's online stage (ts_row_online_stage; -1 for none). */
unsigned ts_row_first_pass_joins(const ts_kernel *k, int online);

/* Passes over its cached operands a ROW kernel takes for a row it does not cache (templates/row.cuh
 * kUncachedPasses): one a stage (a folded pair one: ts_row_online_stage; a joined stage none:
 * ts_row_first_pass_joins) and one for the outputs unless they are per row. */
int ts_row_uncached_passes(const ts_kernel *k);

/* A ROW kernel's expressions with the elementwise work that every reader of a cached operand applies to it first
 * taken out of them (a GELU before a softmax, a SiLU before a GroupNorm: each stage and output evaluated it
 * again; bench/NOTES.md run 155): prologue[s] computes it from LOAD s, once per element as operand s is loaded
 * (templates/row.cuh load()), and stage[], expr and extra_expr[] read LOAD s for its result. prologue[s].n = 0
 * where operand s keeps its loaded value: it is not cached (ts_row_operand_cached), some reader uses the loaded
 * value or a different function of it, or the function is the load itself. What the emitter prints and the cost
 * model counts. */
typedef struct {
    int nacc;
    ts_expr *prologue; /* [nacc] */
    ts_expr stage[TS_ROW_MAX_STAGES], expr, extra_expr[TS_KERNEL_MAX_OUTS - 1];
} ts_row_hoisted;

/* Fills *h for ROW kernel k (copies of its expressions where nothing is taken out); whether any prologue is
 * non-empty. Free with ts_row_hoisted_free. */
bool ts_row_hoist(const ts_kernel *k, ts_row_hoisted *h);
void ts_row_hoisted_free(ts_row_hoisted *h);

#endif
