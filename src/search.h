/* search.h — extraction as search, guided by the cost model.
 *
 * A plan is decided by two kinds of choice over the saturated e-graph: which e-node computes each e-class
 * (the algebra: a contraction before or after a row scale, a dual GEMM or two GEMMs, an online softmax),
 * and where kernels begin (an activation in the GEMM's epilogue or in a pass of its own, a norm's
 * reduction in the row kernel or in a kernel of its own). The search scores every candidate with the
 * cost model itself — each candidate is lowered to a plan (plan.h) and predicted (costmodel.h), the
 * formula `compile` reports — and improves it by local moves (switch one class's e-node, put or remove one
 * kernel boundary), first improvement first, from a few seeds: extractions under hand-weighted presets
 * that favour different fused forms. Seeds only start the search; the cost model decides.
 *
 * It is deterministic (the moves are tried in a fixed order and budgeted by count, never by time) and
 * returns the K best distinct plans it met, for `tune` to time. */
#ifndef TS_SEARCH_H
#define TS_SEARCH_H

#include "costmodel.h"
#include "egir.h"
#include "plan.h"

typedef struct {
    int keep;      /* how many distinct plans to return (the baseline comes on top) */
    int max_evals; /* plans lowered and predicted at most (0: the default, scaled to the graph's size) */
    bool allow_library; /* GEMMs may be configured to run by cuBLASLt (--allow-cublas; libgemm.h) */
} ts_search_opts;

typedef struct {
    int evals;    /* plans lowered and predicted */
    int accepted; /* moves that improved the prediction */
    int classes;  /* e-classes reachable from the outputs in the best extraction */
} ts_search_stats;

/* The default options: keep 8 plans, budget scaled to the graph. */
ts_search_opts ts_search_default_opts(void);

/* The baseline (one kernel per primitive op of the unsaturated graph) first, then up to opts->keep distinct
 * plans found by the search over the saturated x, each predicted by cm for graph g (predicted_s set).
 * *plans receives *n plans. Returns 0, or -1 with *err when not even the baseline can be built. */
int ts_search_plans(const ts_egir *x, const ts_egir *unsaturated, const ts_egir_view *views2, const ts_graph *g,
                    const ts_costmodel *cm, const ts_search_opts *opts, ts_plan **plans, int *n,
                    ts_search_stats *stats, char **err);

/* The baseline alone: one kernel per primitive op of the unsaturated graph u, predicted. */
int ts_search_baseline(const ts_egir *u, const ts_egir_view *views2, const ts_graph *g, const ts_costmodel *cm,
                       ts_plan *p, char **err);

/* The term of class cls under the first seed of the search (the "fused" preset), shared subterms once;
 * free with ts_eg_term_free. False when the class has no finite term. */
bool ts_search_seed_term(const ts_egir *x, uint32_t cls, ts_eg_term *out);

#endif
