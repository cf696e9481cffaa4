/* interp.h — the float64 reference interpreter: evaluates a checked HLIR graph on the CPU.
 *
 * It is the ground truth for rule verification, tests and kernel validation, so it is deliberately plain:
 * every node is computed into a dense float64 buffer over its own axes, reading its operands through their
 * views. One economy keeps contractions in memory: an elementwise node whose only user is a reduction (the
 * product inside a matmul) is computed inside that reduction, one value at a time, instead of being stored.
 * Values are exact float64 arithmetic on inputs that are representable in their dtypes; only `cast`
 * rounds. */
#ifndef TS_INTERP_H
#define TS_INTERP_H

#include <stddef.h>
#include <stdint.h>

#include "hlir.h"

typedef struct {
    size_t max_bytes; /* refuse graphs whose buffers would need more than this (0: 8 GiB) */
    /* Sampled evaluation (tsopt tune's reference): when set, index_of_axis[a] (for an axis id a of the
     * graph; NULL entries mean none) maps position i along a root axis to the index it stands for in the
     * full graph, so `iota` along a sampled axis counts the sampled indices, not 0, 1, ... */
    const int64_t *const *index_of_axis;
} ts_interp_opts;

/* Elements of input i / output i. */
int64_t ts_input_numel(const ts_graph *g, int i);
int64_t ts_output_numel(const ts_graph *g, int i);

/* Fresh inputs: uniform in [-1, 1), rounded to each input's dtype, from a splitmix64/xoshiro stream
 * seeded by `seed`. Returns an array of g->ninputs buffers (free with ts_free_buffers). */
double **ts_random_inputs(const ts_graph *g, uint64_t seed);
void ts_free_buffers(double **bufs, int n);

/* The value of elementwise op `op` (unary, binary or ternary; CAST rounds to `dtype`) at operands x. */
double ts_interp_apply(ts_op op, ts_dtype dtype, const double *x);

/* Bytes the interpreter would allocate for intermediate values. */
double ts_interp_bytes(const ts_graph *g);

/* Evaluates g. inputs[i] is contiguous over input i's axes; the outputs are allocated and returned in
 * *outputs (contiguous in each output's dim order; free with ts_free_buffers(out, g->noutputs)).
 * Returns 0, or -1 with a message in *err (heap string) when the graph exceeds opts' budget. */
int ts_interp_run(const ts_graph *g, double *const *inputs, double ***outputs, const ts_interp_opts *opts,
                  char **err);

#endif
