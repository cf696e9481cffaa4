/* pad.h — GEMM operands copied into row-padded temporaries, so that they move in 16-byte chunks.
 *
 * A GEMM operand whose rows are not a multiple of 16 bytes apart (an odd or 4-aligned K: a [1000, 2500]
 * fp16 activation, an nn.Linear weight [3000, 2500]), or that starts off a 16-byte boundary, can move by
 * neither TMA nor 16-byte cp.async: the templates fall back to 4-byte or element-wise loaders, a fraction of
 * the tensor rate (costmodel.h gemm_elementwise_efficiency). One pass over the operand — a MAP copy into a
 * temporary whose rows start every round_up(row length, 8) elements (ts_buffer.pitch) — lets the GEMM run
 * its fast path; the GEMM still reads only the operand's real extent (its loaders zero-fill past K, M and
 * N), so the pad is never read. The copy costs a read and a write of the operand: whether it pays is the
 * cost model's call (src/search.c offers both forms). */
#ifndef TS_PAD_H
#define TS_PAD_H

#include "plan.h"

/* p with every GEMM operand access that is not chunked (plan.h ts_access_chunked) read from a padded copy,
 * in *out (a new plan, p untouched). An operand qualifies when its unit-stride axis has a static size and
 * none of its strides is negative; the copy is a MAP kernel placed just before the first GEMM that reads
 * it, and GEMMs reading the same access share it. Returns false, writing nothing to *out, when no operand
 * qualifies. */
bool ts_plan_with_padded_operands(const ts_plan *p, const ts_graph *g, ts_plan *out);

#endif
