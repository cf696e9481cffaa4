/* costmodel.h — the analytic cost model: predicted time of each kernel of a plan from its work (tensor,
 * FMA and special-function operations), its DRAM bytes (with tile re-reads once the working set exceeds
 * L2), waves and tail, and launch overhead, with coefficients read from costmodel/<gpu>.yaml. */
#ifndef TS_COSTMODEL_H
#define TS_COSTMODEL_H

#include <stdbool.h>

#include "diag.h"
#include "hlir.h"
#include "plan.h"

typedef struct {
    char *path, *gpu, *source;
    char *driver, *date; /* written by `tsopt calibrate` ("" when absent) */
    int nfits;           /* entries of its `fit:` section (recorded, not used by the predictions) */
    bool calibrated;
    char *text;      /* the file's text: the diagnostics of ts_costmodel_load point into path and text, */
    size_t text_len; /* so they stay printable until ts_costmodel_free */
    double launch_s, dram_bytes_per_s, tensor_flops_per_s, fma_flops_per_s, sfu_ops_per_s, sms, l2_bytes;
    double gemm_efficiency, attention_efficiency, reduce_efficiency, map_efficiency;
} ts_costmodel;

/* Loads a cost-model file; errors (file:line:col) into d, initialised here. Returns 0 or -1. Besides
 * `coefficients`, `gpu`, `source` and `calibrated`, a calibrated file (`tsopt calibrate`) has `driver`,
 * `date`, `timer`, `fit` (a mapping: one entry per least-squares fit) and `measured`; they are accepted,
 * `driver`, `date` and the number of fits recorded, the rest ignored. */
int ts_costmodel_load(ts_costmodel *m, const char *path, ts_diags *d);
void ts_costmodel_free(ts_costmodel *m);

/* Predicts every kernel of p (at the graph's current sizes: dynamic axes at their typical size) and the
 * plan's total, stored in the plan. */
void ts_costmodel_predict(const ts_costmodel *m, const ts_graph *g, ts_plan *p);

#endif
