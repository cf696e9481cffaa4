/* sample.h — the float64 reference of a graph at sizes too large for the interpreter, by sampling.
 *
 * `tsopt tune` validates every candidate kernel plan on the GPU against the float64 interpreter. At the
 * sizes users tune for (attention: 137 GFLOP) the interpreter would take minutes, so the reference is
 * computed on a sample: an axis is *separable* when no operation reduces over it, every view reads it
 * position for position (no reshape, slice or merge touches it) and every output has it; then output rows
 * at indices S along it depend only on input rows at S, and the graph checked with that axis of size |S|,
 * fed the gathered input rows, computes exactly those output rows (iota along the axis counts S, not
 * 0..|S|-1: see ts_interp_opts). Sampling more than one separable axis multiplies the saving.
 * Dynamic axes that are not separable are validated at a smaller size instead (the header takes them at
 * run time, so the same compiled code runs). Nothing here needs a GPU. */
#ifndef TS_SAMPLE_H
#define TS_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "hlir.h"
#include "spec.h"

#define TS_SAMPLE_MAX_AXES 4

/* sep[a] (for every axis id a of g; only root axes are ever true) says whether a is separable. */
void ts_separable_axes(const ts_graph *g, bool *sep);

typedef struct {
    int n;                                   /* sampled axes */
    int32_t axis[TS_SAMPLE_MAX_AXES];        /* their root axis ids (the same in both graphs) */
    int64_t count[TS_SAMPLE_MAX_AXES];       /* rows kept */
    int64_t *index[TS_SAMPLE_MAX_AXES];      /* the kept indices, ascending, first and last included */
} ts_sample_plan;

/* Picks axes of g to sample (largest separable first, `rows` indices each, drawn from `seed`) until the
 * estimated float64 work is under `budget_flops` or nothing separable is left. */
void ts_sample_choose(const ts_graph *g, int64_t rows, double budget_flops, uint64_t seed, ts_sample_plan *p);
void ts_sample_free(ts_sample_plan *p);
/* FLOPs of g once p's axes are cut to their counts (an estimate: work scales with each sampled axis). */
double ts_sample_flops(const ts_graph *g, const ts_sample_plan *p);

/* Copies the elements of a contiguous tensor over axes[0..ndim) of `full` sizes (graph g) at the sampled
 * indices: dims over a sampled axis keep only p's rows. Returns the count written to out (sized by the
 * caller with ts_sample_numel). */
int64_t ts_sample_numel(const ts_graph *g, const int32_t *axes, int ndim, const ts_sample_plan *p);
void ts_sample_gather(const ts_graph *g, const int32_t *axes, int ndim, const ts_sample_plan *p, const double *full,
                      double *out);

/* The reference outputs at the sampled rows: checks spec at `bind` with each sampled axis bound to its
 * count, gathers `inputs` (full, of graph g checked at `bind`) and runs the interpreter with the sampled
 * indices. *outs receives g->noutputs arrays, each ordered like ts_sample_gather of that output. Returns 0,
 * or -1 with *err (heap). */
int ts_sample_reference(ts_spec *spec, const ts_binding *bind, const ts_graph *g, double *const *inputs,
                        const ts_sample_plan *p, double ***outs, char **err);

#endif
