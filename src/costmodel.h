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
    double row_efficiency;     /* optional (map_efficiency when absent): ROW kernels */
    double strided_efficiency; /* optional (1 when absent): the rate of uncoalesced reads, see ts_kernel_work */
} ts_costmodel;

/* Loads a cost-model file; errors (file:line:col) into d, initialised here. Returns 0 or -1. Besides
 * `coefficients`, `gpu`, `source` and `calibrated`, a calibrated file (`tsopt calibrate`) has `driver`,
 * `date`, `timer`, `fit` (a mapping: one entry per least-squares fit) and `measured`; they are accepted,
 * `driver`, `date` and the number of fits recorded, the rest ignored. */
int ts_costmodel_load(ts_costmodel *m, const char *path, ts_diags *d);
void ts_costmodel_free(ts_costmodel *m);

/* A kernel's work at the graph's current sizes, as the model sees it. */
typedef struct {
    ts_kernel_kind kind;
    double tensor_flops;    /* tensor-core FLOPs (GEMM, attention) */
    double fma_flops;       /* FMA-pipe operations */
    double sfu_ops;         /* special-function operations (exp2, rsqrt, ...) */
    double bytes;           /* DRAM bytes: every operand read once, the result written once */
    double strided_bytes;   /* the part of bytes read with a stride other than 0 or 1 along the axis that
                               neighbouring threads step along (map: innermost output axis; reduce: the
                               reduced axis): uncoalesced, moved at strided_efficiency of the rate */
    double wave_efficiency; /* tiles / (waves × SMs): the last wave's idle share (1 for map and reduce) */
} ts_kernel_work;

void ts_costmodel_work(const ts_costmodel *m, const ts_graph *g, const ts_plan *p, const ts_kernel *k,
                       ts_kernel_work *w);
/* The efficiency coefficient that applies to kernels of this kind. */
double ts_costmodel_efficiency(const ts_costmodel *m, ts_kernel_kind kind);
/* The predicted time of a kernel with this work:
 *   launch_s + max(tensor / (tensor rate · eff · wave), FMA / (FMA rate · eff'), SFU / SFU rate,
 *                  (bytes − strided + strided / strided_efficiency) / (DRAM rate · eff''))
 * eff = the kind's efficiency; eff' = 1 for GEMM (its FMA work is the epilogue) else eff; eff'' = 1 for GEMM
 * and attention (their bytes are streamed by TMA/cp.async at the copy rate) else eff. */
double ts_costmodel_time(const ts_costmodel *m, const ts_kernel_work *w);

/* Predicts every kernel of p (at the graph's current sizes: dynamic axes at their typical size) and the
 * plan's total, stored in the plan. */
void ts_costmodel_predict(const ts_costmodel *m, const ts_graph *g, ts_plan *p);

#endif
