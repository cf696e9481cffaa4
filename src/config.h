/* config.h — kernel configurations: which tile shape, pipeline depth and schedule each GEMM and attention
 * kernel of a plan runs with, and which way a map's threads walk (ts_kernel_config, plan.h).
 *
 * One module holds every tile choice: the emitter only prints a kernel's configuration as template
 * arguments, the cost model counts its tiles, and tune may time a kernel's variants. The choices follow
 * the templates' constraints (templates/gemm*.cuh, attention*.cuh) and the measurements in bench/NOTES.md. */
#ifndef TS_CONFIG_H
#define TS_CONFIG_H

#include "hlir.h"
#include "plan.h"

/* Sets k->cfg (k a kernel of plan p) to the default configuration for its kind and sizes (GEMM, ATTENTION,
 * MAP's walk; others: zeros). */
void ts_config_choose(const ts_graph *g, const ts_plan *p, ts_kernel *k);

/* Whether GEMM kernel k runs its skinny (decode) form at the graph's current sizes: M ≤ cfg.skinny_m. */
bool ts_config_gemm_skinny(const ts_graph *g, const ts_kernel *k);

/* The configurations tune may time for kernel k of plan p besides k->cfg (GEMMs on sm_90a: other tile
 * shapes, pipeline depths and a cluster of 2; with allow_library, cuBLASLt where libgemm.h matches the
 * kernel, the last; a ROW kernel over more rows than the GPU's `sms` SMs, longer than a block caches:
 * row_split — fewer rows take clusters either way), at most max into out;
 * returns how many (0 for other kinds; a GEMM that runs only its skinny form has only the library one). Each
 * is k->cfg with the sm_90a fields, `library` or `row_split` replaced. */
int ts_config_variants(const ts_graph *g, const ts_plan *p, const ts_kernel *k, bool allow_library, double sms,
                       ts_kernel_config *out, int max);
/* ROW kernel k of plan p (along the contiguous axis): the longest row one block of templates/row.cuh caches in
 * registers (launch_row: 32 floats a thread over its cached operands, up to 1024 threads), and the blocks of the
 * cluster each row takes (row_cluster: 1 for none) at the graph's typical sizes on a GPU of `sms` SMs. */
int64_t ts_config_row_block_len(const ts_plan *p, const ts_kernel *k);
int ts_config_row_cluster(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms);
/* ... and the share of the SMs its launch streams through: 1 unless fewer rows than SMs each take a block
 * (or a cluster of blocks that still leaves SMs idle). */
/* row.cuh row_pass_cluster: blocks a row of ROW kernel k takes in passes (at most half as many rows as SMs, longer
 * than a block or a cluster caches), 2 to 8; 1 otherwise. */
int ts_config_row_pass_cluster(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms);
/* Whether ROW kernel k may take a cooperative grid (row.cuh launch_row_grid: at most half as many rows as SMs, longer
 * than a cluster caches), so that its plan gives it a grid scratch (plan.h row_grid); and, given one, the blocks a
 * row takes at the typical sizes on `sms` SMs (0: none). */
bool ts_config_row_grid_wanted(const ts_graph *g, const ts_plan *p, const ts_kernel *k);
int ts_config_row_grid_parts(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms);
/* Whether GEMM k may split K through memory (a deep small GEMM's variant, config.c deep_variant), so that its plan
 * gives it a scratch for the chunks' sums (plan.h k_partials). */
bool ts_config_gemm_chunks_wanted(const ts_graph *g, const ts_kernel *k);
double ts_config_row_sm_share(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms);
/* ... and the share of a row's lanes that hold a span of it: launch_row gives rows of up to 32 spans a power of
 * two of lanes, one span each, so that 9 spans leave 7 of 16 lanes idle (bench/NOTES.md run 155); 1 otherwise. */
double ts_config_row_lane_share(const ts_graph *g, const ts_plan *p, const ts_kernel *k);
/* ... and whether its rows are longer than a 256-thread block caches while they number at least the SMs: a
 * 512- or 1024-thread block each, or passes through L2, or (row_split) a cluster each. */
bool ts_config_row_long(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms);
/* fp32 GEMM k (tf32x3) run as `ctas` CTAs on `sms` SMs: the share of its SMs' 3xTF32 rate that the warps resident on
 * each reach — 1 from 8 warps an SM (a 128×128 tile's), less below (run 169: 4-warp 64×64 CTAs, one an SM, ran at
 * 25 TFLOP/s against the 128×128 tiles' 61; two such CTAs an SM at 0.73 of it, run 170; 8 warps in one 64×64 CTA,
 * two groups sharing each stage's k8 steps, were no faster: run 170). */
double ts_config_f32_warp_share(const ts_kernel *k, double ctas, double sms);
/* The most variants ts_config_variants returns for any kernel (room enough for all of them). */
enum { TS_CONFIG_MAX_VARIANTS = 8 };
/* GEMMs of at most this many rows run the skinny (decode-size) form. */
enum { TS_CONFIG_SKINNY_MAX_M = 64 };

/* Whether the attention templates have a kernel for head dimension d: 64, 128, 192 and 256, and any multiple of 8
 * below 256 in the next of them, zero-padded (ts_config_attention_kernel_dim). */
bool ts_config_attention_head_dim_ok(int64_t d);
/* The head dimension of the attention kernel that runs head dimension d (d itself, or the next of 64, 128, 192
 * and 256 above it: the padding columns read as zeros and are not stored). */
int64_t ts_config_attention_kernel_dim(int64_t d);
/* The head dimension of the decode form's kernel that runs head dimension d: the next of 64, 128 and 256 (its
 * key rows' 16-byte chunks divide a warp; 192 runs at 256, zero-padded with no extra bytes read). */
int64_t ts_config_attention_decode_dim(int64_t d);

/* Whether attention kernel k runs its decode form at the graph's current sizes: t_q ≤ cfg.dec_rows. */
bool ts_config_attention_decode(const ts_graph *g, const ts_kernel *k);

/* The key split the decode form's launch helper would pick for `units` 16-row CTAs (batch × heads × query
 * tiles) over t_kv keys on `sms` SMs, assuming one CTA an SM (the helper asks the runtime which cluster
 * sizes are resident at once; this estimate cannot). */
int ts_config_attention_split(double units, double t_kv, int sms);

/* The configuration in words, e.g. "128x256, 4 stages" (buf of n bytes; "" for kinds without one). */
const char *ts_config_describe(const ts_kernel *k, char *buf, size_t n);

#endif
