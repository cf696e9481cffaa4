/* config.c — the one place kernel configurations are chosen (config.h). */
#include "config.h"

#include <stdio.h>

/* Hopper: the wgmma kernel, 128x256 with 4 stages; the dual form 128x128 per operand, or 128x64 with 6
 * stages for outputs narrower than 2048 (more tiles). The mma.sync fallback: 128x256 with 3 stages for
 * wide outputs, else 128x128 (4 stages; 3 for the dual form). Measured: bench/NOTES.md. */
static ts_kernel_config gemm_config(const ts_graph *g, const ts_kernel *k) {
    const ts_axis *nax = &g->axes[k->n_axis];
    bool wide = !nax->dynamic && nax->size >= 2048, dual = k->b1 >= 0;
    ts_kernel_config c = {.tile_m = 128, .tile_n = dual ? (wide ? 128 : 64) : 256, .stages = dual && !wide ? 6 : 4,
                          .cluster_m = 1};
    c.fb_tile_m = 128, c.fb_tile_n = wide && !dual ? 256 : 128, c.fb_tile_k = 64;
    c.fb_warps_m = 2, c.fb_warps_n = 4, c.fb_stages = (wide && !dual) || dual ? 3 : 4;
    return c;
}

/* Hopper: the FlashAttention-3 schedule, 128 query rows, ping-pong warpgroups (1.66x the mma.sync kernel on
 * the seed attention); 128 keys per K/V tile and 3 stages up to head dim 128; at 256, 64 keys and 2 stages
 * (O is 128 fp32 registers a thread, leaving room for a 64-key S only; 2 stages of K + V fill 192 KB of
 * shared memory), as FlashAttention-3 does. The fallback's tiles per head dim: register and shared-memory
 * budgets of templates/attention.cuh. */
static ts_kernel_config attention_config(const ts_graph *g, const ts_kernel *k) {
    int64_t d = g->axes[k->n_axis].size;
    ts_kernel_config c = {.tile_m = 128, .tile_n = 128, .stages = 3, .cluster_m = 1, .pingpong = true};
    if (d == 256) c.tile_n = 64, c.stages = 2;
    c.fb_warps_m = 4, c.fb_warps_n = 1;
    if (d == 64) c.fb_tile_m = 128, c.fb_tile_n = 128, c.fb_tile_k = 64;
    else if (d == 128) c.fb_tile_m = 128, c.fb_tile_n = 32, c.fb_tile_k = 32;
    else c.fb_tile_m = 64, c.fb_tile_n = 32, c.fb_tile_k = 32; /* 256: 64 keys a step spill on sm_80 */
    return c;
}

bool ts_config_attention_head_dim_ok(int64_t d) { return d == 64 || d == 128 || d == 256; }

void ts_config_choose(const ts_graph *g, ts_kernel *k) {
    if (k->kind == TS_KERNEL_GEMM) k->cfg = gemm_config(g, k);
    else if (k->kind == TS_KERNEL_ATTENTION) k->cfg = attention_config(g, k);
    else k->cfg = (ts_kernel_config){0};
}

const char *ts_config_describe(const ts_kernel *k, char *buf, size_t n) {
    if (k->kind == TS_KERNEL_GEMM || k->kind == TS_KERNEL_ATTENTION)
        snprintf(buf, n, "%dx%d, %d stages%s%s", k->cfg.tile_m, k->cfg.tile_n, k->cfg.stages,
                 k->cfg.cluster_m > 1 ? ", cluster" : "", k->kind == TS_KERNEL_ATTENTION && k->cfg.pingpong ? ", ping-pong" : "");
    else if (n) buf[0] = 0;
    return buf;
}
