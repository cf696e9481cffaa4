/* config.c — the one place kernel configurations are chosen (config.h). */
#include "config.h"

#include "libgemm.h"
#include "rowstat.h"

#include <math.h>
#include <stdio.h>

/* Decode-size GEMMs (M ≤ 64 rows: a few tokens against a weight) are bound by streaming B once: a 128-row
 * wgmma tile would waste ≥ 87% of its MMA work and leave most SMs idle. They run the mma.sync template with
 * the fewest rows that hold M (16, 32 or 64) and 64 columns per CTA (n/64 CTAs: 224 for n = 14336), with a
 * shallow pipeline: ≤ 56 KB of shared memory a CTA (4-5 K-slices of a 16-row tile, 3 of the dual form) keeps
 * three to five CTAs' worth of room on an SM, so that split-K clusters are all resident at once. Deeper
 * stages lose: at 80 KB a CTA only 62 clusters of 4 fit, and the O projection of Llama-3-8B at 16 tokens
 * ran 18.5 µs against 13.3 with 4 stages; its down projection 52.8 against 35.0 (ncu on the H200,
 * `gemm_test decode`, bench/NOTES.md run 56). A dynamic M gets the skinny form as a run-time branch beside
 * the large-tile one. Small static GEMMs with more rows take narrower wgmma tiles instead (below). */
enum { SKINNY_MAX_M = TS_CONFIG_SKINNY_MAX_M, SKINNY_SMEM_BUDGET = 56 * 1024, NARROW_SMEM_BUDGET = 100 * 1024, SKINNY_MAX_STAGES = 8 };

/* Split-K for them: with fewer CTAs than SKINNY_MIN_CTAS (one per SM of the H200) the weight streams through
 * too few SMs (a 4096-column weight: 64 CTAs, 1.4-1.8 TB/s; bench/NOTES.md run 53), so the K tiles of each
 * tile are shared by 2 or 4 CTAs of a cluster, as long as each keeps SKINNY_MIN_SPLIT_KT K-slices to pipeline. */
enum { SKINNY_MIN_CTAS = 132, SKINNY_MIN_SPLIT_KT = 8, SKINNY_MAX_SPLIT = 4 };

/* Small static GEMMs (1024 rows against a 1024×512 weight, as in GEMM-fusion suites) give fewer 128×256 wgmma
 * tiles than half a Hopper's 132 SMs: they take 128×64 tiles (6 stages; the dual form 64 columns of each
 * operand), for 4x the CTAs. Measured against the mma.sync small-tile form they took before (64×64 tiles,
 * 1×4 warps, split-K; run 25: 0.0205 ms against 0.0995 for 128×256 wgmma tiles on GEMM + two Mish), plain
 * stores, five shapes (bench/NOTES.md run 83, `gemm_sm90_test small`, `gemm_test small`): 1024×512×1024
 * 9.7 µs against 13.1, 1024×1024×4096 22.7 against 41-51, 4096×256×1024 10.9 against 16.0-22.9,
 * 256×4096×1024 10.7 against 15.6-22.9, 128×512×1024 9.3 against 9.8 (cuBLAS 7.2-17.8 µs); 64-row ping-pong
 * tiles were within 5% of it on the two smallest and up to 1.5x slower on the others. Narrow ones (fewer than
 * 64 columns: LoRA's X·A at rank 16) keep the mma.sync small-tile form, 64-row tiles over M with split-K
 * (bench/NOTES.md run 74, `gemm_test narrow`): a 64-column wgmma tile would be mostly empty. */
enum { SMALL_GEMM_TILES = 64, NARROW_N = 64 };

/* GEMM k's output tiles of tile_m × tile_n over every batch (at the typical sizes of dynamic axes). */
static int64_t gemm_tiles(const ts_graph *g, const ts_kernel *k, int tile_m, int tile_n) {
    return (ts_gemm_rows(g, k) + tile_m - 1) / tile_m * ((g->axes[k->n_axis].size + tile_n - 1) / tile_n) *
           ts_gemm_batch(g, k);
}

/* Whether GEMM k's output (rows, columns and batch) has static sizes. */
static bool static_output(const ts_graph *g, const ts_kernel *k) {
    return !ts_gemm_rows_dynamic(g, k) && !g->axes[k->n_axis].dynamic &&
           !(k->batch_axis >= 0 && g->axes[k->batch_axis].dynamic) &&
           !(k->batch_outer >= 0 && g->axes[k->batch_outer].dynamic);
}

static bool small_static_gemm(const ts_graph *g, const ts_kernel *k, const ts_kernel_config *c) {
    return static_output(g, k) && gemm_tiles(g, k, c->tile_m, c->tile_n) < SMALL_GEMM_TILES;
}

/* Split-K's cluster size for `ctas` CTAs over kt K-slices of 64: doubled, up to most_split, while the CTAs do not
 * yet fill the SMs (SKINNY_MIN_CTAS) and each keeps at least min_kt K-slices to pipeline. */
static int split_k(int64_t ctas, int64_t kt, int most_split, int min_kt) {
    int split = 1;
    while (split < most_split && ctas * split < SKINNY_MIN_CTAS && kt / (2 * split) >= min_kt) split *= 2;
    return split;
}

static bool narrow_small_gemm(const ts_graph *g, const ts_kernel *k, const ts_kernel_config *c) {
    return small_static_gemm(g, k, c) && g->axes[k->n_axis].size < NARROW_N;
}

/* The skinny form's tiles (mma.sync, tile_m rows × 64 columns; 64 K a stage within `budget` bytes of shared
 * memory) and its split-K: clusters of up to `most_split` CTAs a tile while the CTAs do not yet fill the SMs and
 * each keeps at least min_kt K-slices. */
static void set_skinny_tiles(const ts_graph *g, const ts_kernel *k, ts_kernel_config *c, int tile_m, int budget,
                             int most_split, int min_kt) {
    c->sk_tile_m = tile_m, c->sk_tile_n = 64;
    int nb = k->b1 >= 0 ? 2 : 1, stage_bytes = (c->sk_tile_m * 64 + nb * 64 * c->sk_tile_n) * 2;
    c->sk_stages = budget / stage_bytes;
    if (c->sk_stages > SKINNY_MAX_STAGES) c->sk_stages = SKINNY_MAX_STAGES;
    if (c->sk_stages < 2) c->sk_stages = 2;
    c->sk_split = split_k(gemm_tiles(g, k, c->sk_tile_m, c->sk_tile_n), ts_gemm_k_slices(g, k), most_split, min_kt);
}

static void skinny_config(const ts_graph *g, const ts_kernel *k, ts_kernel_config *c) {
    if (ts_gemm_a_km(k)) return; /* its 16-64-row tiles are too narrow for an M-major A (gemm.cuh A_KM: BM % 64) */
    const bool dynamic = ts_gemm_rows_dynamic(g, k);
    const int64_t m = ts_gemm_rows(g, k); /* a dynamic axis: its typical size */
    bool narrow = narrow_small_gemm(g, k, c);
    if (!dynamic && m > SKINNY_MAX_M && !narrow) return;
    c->skinny_m = narrow && m > SKINNY_MAX_M ? (int)m : SKINNY_MAX_M, c->skinny_only = !dynamic;
    set_skinny_tiles(g, k, c, m <= 16 ? 16 : m <= 32 ? 32 : 64,
                     narrow && m > SKINNY_MAX_M ? NARROW_SMEM_BUDGET : SKINNY_SMEM_BUDGET, SKINNY_MAX_SPLIT,
                     SKINNY_MIN_SPLIT_KT);
}

/* A deep small GEMM: few output tiles over a long K (KernelBench's 256×256 over K = 524288): its 128×256 wgmma
 * tiles put 2 CTAs on the GPU, the small GEMMs' 128×64 ones 8. A configuration variant (the cost model chooses,
 * tune times it): the mma.sync small-tile form, 64×64 tiles, with split-K over clusters of up to 8 CTAs (gemm.cuh
 * SPLIT), each CTA keeping DEEP_MIN_KT K-slices at least: 16 tiles × 8 = 128 CTAs. Static sizes, more rows than a
 * skinny GEMM's, fewer than DEEP_MAX_TILES tiles of 128×64. */
enum { DEEP_MIN_KT = 64, DEEP_MAX_SPLIT = 8, DEEP_MAX_TILES = SKINNY_MIN_CTAS / 4 };

static bool deep_gemm(const ts_graph *g, const ts_kernel *k) {
    return !ts_gemm_a_km(k) && ts_gemm_rows(g, k) > SKINNY_MAX_M && small_static_gemm(g, k, &k->cfg) &&
           gemm_tiles(g, k, 128, 64) < DEEP_MAX_TILES && ts_gemm_k_slices(g, k) >= 2 * DEEP_MIN_KT;
}

/* ... and where that leaves each CTA of its clusters at least 2 × DEEP_CHUNK_KT K-slices, the K tiles in up to
 * TS_GEMM_MAX_CHUNKS chunks (split-K through memory: sk_chunks, gemm.cuh k_chunks), doubled while each CTA keeps
 * DEEP_CHUNK_KT (256×256 over 524288: 8192 K-slices, 16 tiles × 8 CTAs, 4 chunks: 512 CTAs of 256 slices each,
 * where the clusters alone put 128 CTAs of 1024 on the GPU: 0.604 ms on an H100, cuBLAS 0.211, run 169). The plan
 * gives such a GEMM the scratch for the chunks' sums at lowering (plan.h k_partials). */
enum { DEEP_CHUNK_KT = 128 };
/* The chunked form is offered as a second deep variant. fp16/bf16 (gemm.cuh): measured (bench/NOTES.md run 171,
 * H200: 256×256 over 524288 in 8 chunks 0.421 ms against 0.612 for the clusters alone), the search's to choose;
 * fp32 (gemm_f32.cuh): only tune times it until a GPU has measured it. */
enum { F32_CHUNKS_TUNE_ONLY = 1 };

/* The chunks config c's clusters (sk_split CTAs a tile) take over K: doubled up to TS_GEMM_MAX_CHUNKS while each
 * CTA keeps DEEP_CHUNK_KT K-slices. */
static int k_chunks(const ts_graph *g, const ts_kernel *k, const ts_kernel_config *c) {
    const int split = c->sk_split > 1 ? c->sk_split : 1;
    int chunks = 1;
    while (chunks < TS_GEMM_MAX_CHUNKS && ts_gemm_k_slices(g, k) / (split * chunks * 2) >= DEEP_CHUNK_KT) chunks *= 2;
    return chunks;
}


/* The deep variants of GEMM k other than its own configuration: the clusters alone, and (with a scratch) the
 * chunked form. */
static int deep_variant(const ts_graph *g, const ts_kernel *k, ts_kernel_config *out, int max) {
    if (max < 1 || !deep_gemm(g, k)) return 0;
    ts_kernel_config c = k->cfg;
    c.skinny_m = (int)ts_gemm_rows(g, k), c.skinny_only = true, c.library = false, c.sk_chunks = 0, c.tune_only = false;
    set_skinny_tiles(g, k, &c, 64, NARROW_SMEM_BUDGET, DEEP_MAX_SPLIT, DEEP_MIN_KT);
    const bool deep = k->cfg.skinny_only, chunked = deep && k->cfg.sk_chunks > 1;
    int n = 0;
    if (!deep || chunked) out[n++] = c;
    if (!k->k_partials || chunked || n >= max) return n;
    c.sk_chunks = k_chunks(g, k, &c);
    if (c.sk_chunks > 1) out[n++] = c;
    return n;
}

/* Whether kernel k runs its skinny form at the graph's current sizes (the cost model's question). */
bool ts_config_gemm_skinny(const ts_graph *g, const ts_kernel *k) {
    return k->kind == TS_KERNEL_GEMM && k->cfg.skinny_m > 0 && ts_gemm_rows(g, k) <= k->cfg.skinny_m;
}

/* fp32 operands: templates/gemm_f32.cuh (3xTF32 on mma.sync, every GPU from sm_80), its tiles in the fb_*
 * fields (an mma.sync kernel, as the fallback), mirrored in tile_m/tile_n/stages for the cost model's waves:
 * 128×128 with 8 warps, or 64×64 with 4 where the larger tiles would leave half the SMs idle (F32_MIN_TILES: at
 * 128 tiles of 128×128 the larger tiles ran 1.22x faster, bench/NOTES.md run 124's fp32 SwiGLU). Static sizes
 * whose tiles still leave SMs idle split K over clusters (sk_split, gemm_f32.cuh SPLIT; Hopper and later) while
 * each CTA keeps F32_MIN_SPLIT_KT K-slices of 64: the 3xTF32 MMAs are compute-bound, so the CTAs' share of the
 * SMs is the speed (KernelBench's 256×256 over K = 524288: 16 tiles, 8.9 ms predicted unsplit). */
enum { F32_MIN_TILES = 66, F32_MIN_SPLIT_KT = 4, F32_MAX_SPLIT = 8 };
static const int f32_variants[][6] = {{128, 128, 32, 2, 4, 4}, {64, 64, 32, 2, 2, 4}}; /* BM BN BK WM WN STAGES */

/* gemm_f32_sm90.cuh's wgmma kernel takes the 128×128 tiles of the single form, unsplit (its own tiles): valid on
 * every gemm_f32_test case and 1.14-1.17x the mma.sync kernel's rate on the H200 (bench/NOTES.md run 171), so the
 * default there; the mma.sync kernel a variant tune times. */
enum { F32_WGMMA_DEFAULT = 1 };
static bool f32_wgmma_fits(const ts_kernel *k, const ts_kernel_config *c) {
    return c->fb_tile_m == 128 && c->fb_tile_n == 128 && k->b1 < 0 && c->sk_split <= 1;
}

static void set_f32_tiles(const ts_graph *g, const ts_kernel *k, ts_kernel_config *c, const int *v) {
    c->fb_tile_m = c->tile_m = v[0], c->fb_tile_n = c->tile_n = v[1], c->fb_tile_k = v[2];
    c->fb_warps_m = v[3], c->fb_warps_n = v[4], c->fb_stages = c->stages = v[5];
    c->sk_split = static_output(g, k) ? split_k(gemm_tiles(g, k, v[0], v[1]), ts_gemm_k_slices(g, k), F32_MAX_SPLIT,
                                                F32_MIN_SPLIT_KT)
                                      : 1;
    c->f32_wgmma = F32_WGMMA_DEFAULT && f32_wgmma_fits(k, c);
}

bool ts_config_gemm_chunks_wanted(const ts_graph *g, const ts_kernel *k) {
    if (k->kind != TS_KERNEL_GEMM || k->two_k || k->nstage || k->nrowstat || k->row_parts ||
        ts_gemm_k_slices(g, k) / DEEP_MAX_SPLIT < 2 * DEEP_CHUNK_KT)
        return false;
    /* fp32 (gemm_f32.cuh): static tiles whose clusters already take the most split-K they may */
    return k->cfg.tf32x3 ? static_output(g, k) && k->cfg.sk_split >= F32_MAX_SPLIT : deep_gemm(g, k);
}

/* gemm_f32.cuh's shared memory a CTA (gemm_f32_smem_bytes) and the SM's, for the CTAs resident at once. */
enum { F32_PAD_K = 4, F32_PAD_N = 8, SM_SMEM_BYTES = 228 * 1024, F32_FULL_RATE_WARPS = 8 };

double ts_config_f32_warp_share(const ts_kernel *k, double ctas, double sms) {
    const ts_kernel_config *c = &k->cfg;
    const int nb = k->b1 >= 0 ? 2 : 1, bk = c->fb_tile_k;
    const int b_floats = k->b_kn ? bk * (c->fb_tile_n + F32_PAD_N) : c->fb_tile_n * (bk + F32_PAD_K);
    const double smem = (double)c->fb_stages * (c->fb_tile_m * (bk + F32_PAD_K) + nb * b_floats) * 4;
    const double resident = fmax(1, fmin(ceil(ctas / fmax(sms, 1)), floor(SM_SMEM_BYTES / smem)));
    const double warps = resident * c->fb_warps_m * c->fb_warps_n;
    return fmin(1, warps / F32_FULL_RATE_WARPS);
}

static ts_kernel_config gemm_f32_config(const ts_graph *g, const ts_kernel *k) {
    ts_kernel_config c = {.cluster_m = 1, .tf32x3 = true};
    set_f32_tiles(g, k, &c, f32_variants[gemm_tiles(g, k, f32_variants[0][0], f32_variants[0][1]) < F32_MIN_TILES ? 1 : 0]);
    return c;
}

/* Hopper: the wgmma kernel, 128x256 with 4 stages; the dual form 128x128 per operand, or 128x64 with 6
 * stages for outputs narrower than 2048 (more tiles). The mma.sync fallback: 128x256 with 3 stages for
 * wide outputs, else 128x128 (4 stages; 3 for the dual form). Measured: bench/NOTES.md. */
static ts_kernel_config gemm_config(const ts_graph *g, const ts_plan *p, const ts_kernel *k) {
    if (ts_gemm_fp32(p, k) && !ts_gemm_library_only(p, k)) return gemm_f32_config(g, k);
    const ts_axis *nax = &g->axes[k->n_axis];
    bool wide = !nax->dynamic && nax->size >= 2048, dual = k->b1 >= 0;
    ts_kernel_config c = {.tile_m = 128, .tile_n = dual ? (wide ? 128 : 64) : 256, .stages = dual && !wide ? 6 : 4,
                          .cluster_m = 1};
    c.fb_tile_m = 128, c.fb_tile_n = wide && !dual ? 256 : 128, c.fb_tile_k = 64;
    c.fb_warps_m = 2, c.fb_warps_n = 4, c.fb_stages = (wide && !dual) || dual ? 3 : 4;
    skinny_config(g, k, &c);
    if (c.skinny_m == 0 && small_static_gemm(g, k, &c)) c.tile_n = 64, c.stages = 6;
    c.library = ts_gemm_library_only(p, k); /* an fp32 A read transposed: cuBLASLt runs it (plan.h) */
    return c;
}

/* Attention with few query rows a head (a decode step; a GQA group's query heads as rows) runs the split-key
 * kernel (templates/attention.cuh, tsa::kDecodeRows): 5.5x the FlashAttention-3 kernel at one Llama-3-8B
 * sequence (8 kv heads, cache 4096), 1.27x at 16 (bench/NOTES.md run 57). A dynamic t_q branches at run time.
 * The constants are the template's (kDecodeRows, kDecodeKeys, DecodeConfig's WARPS, kDecodeMinSteps,
 * kDecodeMaxSplit); the split follows its decode_split, with "every cluster resident" taken as two CTAs an SM
 * (the template asks cudaOccupancyMaxActiveClusters: 14 clusters of 16 at head dim 128 on the H200). */
enum { ATTN_DECODE_ROWS = 16, ATTN_DECODE_KEYS = 16, ATTN_DECODE_WARPS = 4, ATTN_DECODE_MIN_STEPS = 4,
       ATTN_DECODE_MAX_SPLIT = 16, ATTN_DECODE_CTAS_AN_SM = 2 };

int ts_config_attention_split(double units, double t_kv, int sms) {
    double steps = ceil(t_kv / ATTN_DECODE_KEYS), cover = sms * 0.9;
    int split = 1;
    if (units >= cover) return split;
    for (int s = 2; s <= ATTN_DECODE_MAX_SPLIT; s *= 2) {
        if (steps / (s * (double)ATTN_DECODE_WARPS) < ATTN_DECODE_MIN_STEPS) break;
        if (units * s > (double)ATTN_DECODE_CTAS_AN_SM * sms) continue; /* its clusters would not all be resident */
        split = s;
        if (units * s >= cover) break;
    }
    return split;
}

bool ts_config_attention_decode(const ts_graph *g, const ts_kernel *k) {
    return k->kind == TS_KERNEL_ATTENTION && k->cfg.dec_rows > 0 && g->axes[k->m_axis].size <= k->cfg.dec_rows;
}

/* Hopper: the FlashAttention-3 schedule, 128 query rows, ping-pong warpgroups (1.66x the mma.sync kernel on
 * the seed attention); 128 keys per K/V tile and 3 stages up to head dim 128; at 192, 64 keys and 3 stages; at 256, 64 keys and 2 stages
 * (O is 128 fp32 registers a thread, leaving room for a 64-key S only; 2 stages of K + V fill 192 KB of
 * shared memory), as FlashAttention-3 does. The fallback's tiles per head dim: register and shared-memory
 * budgets of templates/attention.cuh. */
static ts_kernel_config attention_config(const ts_graph *g, const ts_kernel *k) {
    int64_t head = g->axes[k->n_axis].size, d = ts_config_attention_kernel_dim(head);
    const ts_axis *tq = &g->axes[k->m_axis];
    ts_kernel_config c = {.tile_m = 128, .tile_n = 128, .stages = 3, .cluster_m = 1, .pingpong = true};
    /* the decode form, for few query rows: any head dim (ts_config_attention_decode_dim) */
    if (tq->dynamic || tq->size <= ATTN_DECODE_ROWS) c.dec_rows = ATTN_DECODE_ROWS, c.dec_only = !tq->dynamic;
    if (d == 192) c.tile_n = 64; /* 3 stages: 193 KB */
    if (d == 256) c.tile_n = 64, c.stages = 2;
    c.fb_warps_m = 4, c.fb_warps_n = 1;
    if (d == 64) c.fb_tile_m = 128, c.fb_tile_n = 128, c.fb_tile_k = 64;
    else if (d == 128) c.fb_tile_m = 128, c.fb_tile_n = 32, c.fb_tile_k = 32;
    else c.fb_tile_m = 64, c.fb_tile_n = 32, c.fb_tile_k = 32; /* 192, 256: 64 keys a step spill on sm_80 */
    return c;
}

/* The sm_90a GEMM configurations worth timing (templates/gemm_sm90.cuh: wgmma N = NB·BN ≤ 256,
 * STAGES·(BM + NB·BN)·128 bytes ≤ 225 KB; CM = 2: a cluster of two tile rows sharing each B tile; the last
 * column: ping-pong, a 128×128 tile a consumer warpgroup — 0.89-0.94x the cooperative 128×256 form's speed
 * with a plain store epilogue, but the epilogue runs beside the other warpgroup's main loop, so it pays for
 * heavy epilogues (bench/NOTES.md runs 49-50: GEMM + GELU 0.549 → 0.449 ms; the dual form's light
 * epilogues did not gain: 0.0357 against 0.0320 ms). */
static const int single_variants[][5] = {
    {128, 256, 4, 1, 0}, {128, 128, 5, 1, 0}, {128, 64, 6, 1, 0}, {128, 256, 4, 2, 0}, {128, 128, 5, 1, 1}};
static const int dual_variants[][5] = {{128, 128, 4, 1, 0}, {128, 64, 6, 1, 0}, {128, 128, 4, 2, 0}};
_Static_assert(sizeof single_variants / sizeof *single_variants < TS_CONFIG_MAX_VARIANTS &&
                   sizeof dual_variants / sizeof *dual_variants < TS_CONFIG_MAX_VARIANTS,
               "TS_CONFIG_MAX_VARIANTS (config.h) holds every variant and the library's");

/* GEMM k run by cuBLASLt as one more variant (into out[0], room for max), where allowed, not already k's
 * configuration and libgemm.h matches the kernel; how many (0 or 1). */
static int library_variant(const ts_graph *g, const ts_plan *p, const ts_kernel *k, bool allow_library,
                           ts_kernel_config *out, int max) {
    ts_lt_epilogue e;
    if (!allow_library || k->cfg.library || max < 1 || !ts_libgemm_match(g, p, k, &e, NULL)) return 0;
    out[0] = k->cfg;
    out[0].library = true;
    return 1;
}

/* templates/row.cuh's launch_row, mirrored: kCacheFloats registers a thread for the cached operands, kThreads
 * threads a block (kWideThreads for a row alone), up to 8 blocks a cluster. */
enum { ROW_CACHE_FLOATS = 32, ROW_THREADS = 256, ROW_WIDE_THREADS = 1024, ROW_MAX_CLUSTER = 8, ROW_GRID_MAX_ROWS = 128 };

static int row_cached_operands(const ts_kernel *k) {
    int n = 0;
    for (int s = 0; s < k->nacc; s++) n += ts_row_operand_cached(k, s);
    return n > 0 ? n : 1;
}

/* Spans of the row a thread of ROW kernel k may cache (row.cuh kCacheSpans). */
static int row_cache_spans(const ts_plan *p, const ts_kernel *k) {
    return ROW_CACHE_FLOATS / (row_cached_operands(k) * ts_kernel_span_vec(p, k));
}

/* Spans a thread of launch_row caches: the largest power of two up to `most` that the registers hold (0 or 1
 * where they hold fewer than two). */
static int row_items(const ts_plan *p, const ts_kernel *k, int most) {
    const int cap = row_cache_spans(p, k);
    int items = 2;
    while (items * 2 <= most && items * 2 <= cap) items *= 2;
    return cap >= 2 ? items : cap;
}

/* Positions of a row that one block of a cluster caches (launch_row's IC spans a thread). */
static int64_t row_cluster_block_len(const ts_plan *p, const ts_kernel *k) {
    return (int64_t)ROW_THREADS * row_items(p, k, 8) * ts_kernel_span_vec(p, k);
}

/* A 512- or 1024-thread block a row where that caches it and the row would take more than one pass uncached. */
int64_t ts_config_row_block_len(const ts_plan *p, const ts_kernel *k) {
    const int items = row_items(p, k, 4); /* launch_row's I */
    const int64_t wide = ts_row_uncached_passes(k) > 1 ? (int64_t)ROW_WIDE_THREADS * items * ts_kernel_span_vec(p, k) : 0;
    const int64_t block = row_cluster_block_len(p, k);
    return wide > block ? wide : block;
}

/* Whether ROW kernel k's rows each take a whole block of row.cuh (more than half of what one caches). */
static bool row_whole_blocks(const ts_graph *g, const ts_plan *p, const ts_kernel *k) {
    const int items = row_items(p, k, 4);
    return g->axes[k->red_axis].size > (int64_t)ROW_THREADS / 2 * (items > 1 ? items : 1) * ts_kernel_span_vec(p, k);
}

static double row_count(const ts_graph *g, const ts_kernel *k) {
    return ts_access_numel(g, &k->out) / (k->per_row ? 1 : (double)g->axes[k->red_axis].size);
}

/* row.cuh row_cluster: rows needing a whole block, fewer than the SMs, or longer than a block caches with
 * row_split: the fewest blocks a row, 2 to 8, that give every SM a block (few rows) and cache the row; 1
 * otherwise. */
int ts_config_row_cluster(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms) {
    if (k->kind != TS_KERNEL_ROW || k->columns || !row_whole_blocks(g, p, k)) return 1;
    const int64_t len = g->axes[k->red_axis].size, block = row_cluster_block_len(p, k);
    const double rows = row_count(g, k);
    if (block == 0 || !(rows < sms || (k->cfg.row_split && len > ts_config_row_block_len(p, k)))) return 1;
    int cl = 1;
    while (cl < ROW_MAX_CLUSTER && (rows * cl < sms || len > cl * block)) cl *= 2;
    return cl > 1 && len <= cl * block ? cl : 1;
}

/* Whether ROW kernel k's rows may be few (at most ROW_GRID_MAX_ROWS, or a run-time count) and longer than
 * a block or a cluster of 8 caches (a run-time length may be): rows launch_row gives passes, which a cooperative
 * grid splits over every SM where they are at most half the SMs (row.cuh launch_row_grid), given a scratch. */
bool ts_config_row_grid_wanted(const ts_graph *g, const ts_plan *p, const ts_kernel *k) {
    if (k->kind != TS_KERNEL_ROW || k->columns) return false;
    const ts_axis *len = &g->axes[k->red_axis];
    const int64_t cached = ROW_MAX_CLUSTER * row_cluster_block_len(p, k), block = ts_config_row_block_len(p, k);
    if (!len->dynamic && (len->size <= block || len->size <= cached)) return false;
    for (int d = 0; d < k->out.ndim; d++)
        if (k->out.axis[d] != k->red_axis && g->axes[k->out.axis[d]].dynamic) return true;
    return row_count(g, k) <= ROW_GRID_MAX_ROWS;
}

/* row.cuh launch_row_grid / row_grid_parts at the typical sizes: the blocks a row of ROW kernel k takes in a
 * cooperative grid on `sms` SMs (one 1024-thread block an SM: its registers allow no more), 2 or more; 0 where it
 * takes none (no scratch, more rows than half the SMs, or too short for two blocks' shares). */
int ts_config_row_grid_parts(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms) {
    if (k->kind != TS_KERNEL_ROW || !k->row_grid || g->axes[k->red_axis].size <= ts_config_row_block_len(p, k) ||
        ts_config_row_cluster(g, p, k, sms) > 1)
        return 0;
    const double rows = row_count(g, k), spans = ceil((double)g->axes[k->red_axis].size / ts_kernel_span_vec(p, k));
    if (rows * 2 > sms) return 0;
    const double parts = fmin(floor(sms / rows), fmin(floor(TS_ROW_GRID_SCRATCH_FLOATS / (k->nstage * rows)),
                                                      floor(spans / (2 * ROW_WIDE_THREADS))));
    return parts >= 2 ? (int)parts : 0;
}

/* row.cuh row_pass_cluster: at most half as many rows as SMs that neither a block nor a cluster caches
 * (launch_row_passes) are each split over a cluster of 1024-thread blocks taking their shares in passes: the most
 * blocks a row, 2 to 8, whose rows × blocks fit one wave; 1 otherwise (and where a cooperative grid takes them). */
int ts_config_row_pass_cluster(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms) {
    if (k->kind != TS_KERNEL_ROW || k->columns || g->axes[k->red_axis].size <= ts_config_row_block_len(p, k) ||
        ts_config_row_cluster(g, p, k, sms) > 1 || ts_config_row_grid_parts(g, p, k, sms) > 0)
        return 1;
    const double rows = row_count(g, k);
    int cl = 1;
    while (cl < ROW_MAX_CLUSTER && rows * cl * 2 <= sms) cl *= 2;
    return cl;
}

double ts_config_row_sm_share(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms) {
    if (k->kind != TS_KERNEL_ROW || k->columns || !row_whole_blocks(g, p, k)) return 1;
    const int grid = ts_config_row_grid_parts(g, p, k, sms);
    const int cl = grid ? grid : ts_config_row_cluster(g, p, k, sms) * ts_config_row_pass_cluster(g, p, k, sms);
    return fmin(1, row_count(g, k) * cl / sms);
}

double ts_config_row_lane_share(const ts_graph *g, const ts_plan *p, const ts_kernel *k) {
    if (k->kind != TS_KERNEL_ROW || k->columns || row_cache_spans(p, k) < 1) return 1;
    const int vec = ts_kernel_span_vec(p, k);
    const int64_t spans = (g->axes[k->red_axis].size + vec - 1) / vec;
    if (spans > 32) return 1;
    int64_t lanes = 1;
    while (lanes < spans) lanes *= 2;
    return (double)spans / (double)lanes;
}

bool ts_config_row_long(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms) {
    if (k->kind != TS_KERNEL_ROW || k->columns || row_count(g, k) < sms) return false;
    const int64_t block = row_cluster_block_len(p, k);
    return block == 0 || g->axes[k->red_axis].size > block;
}

/* ROW kernel k's variant over rows longer than a block caches (up to a cluster's worth), at least as many as
 * SMs: row_split toggled — split over clusters, or passes through L2 (fewer rows are split either way, the
 * variant's code would run the same). */
static int row_variants(const ts_graph *g, const ts_plan *p, const ts_kernel *k, double sms, ts_kernel_config *out,
                        int max) {
    if (k->columns || max < 1 || row_count(g, k) < sms) return 0;
    const int64_t len = g->axes[k->red_axis].size, block = row_cluster_block_len(p, k);
    if (block == 0 || len <= ts_config_row_block_len(p, k) || len > ROW_MAX_CLUSTER * block) return 0;
    out[0] = k->cfg;
    out[0].row_split = !k->cfg.row_split;
    return 1;
}

int ts_config_variants(const ts_graph *g, const ts_plan *p, const ts_kernel *k, bool allow_library, double sms,
                       ts_kernel_config *out, int max) {
    if (k->kind == TS_KERNEL_ROW) return row_variants(g, p, k, sms, out, max);
    if (k->kind != TS_KERNEL_GEMM || ts_gemm_library_only(p, k)) return 0; /* cuBLASLt's alone */
    int n = 0;
    if (ts_gemm_fp32(p, k)) { /* the other fp32 tile */
        for (int i = 0; i < (int)(sizeof f32_variants / sizeof *f32_variants) && n < max - 1; i++) {
            ts_kernel_config c = k->cfg;
            set_f32_tiles(g, k, &c, f32_variants[i]);
            c.library = false;
            if (k->cfg.library || c.tile_m != k->cfg.tile_m || c.tile_n != k->cfg.tile_n) out[n++] = c;
        }
        if (!k->cfg.library && f32_wgmma_fits(k, &k->cfg) && n < max - 1) { /* the 128×128 mma.sync kernel, or wgmma */
            out[n] = k->cfg;
            out[n++].f32_wgmma = !k->cfg.f32_wgmma;
        }
        if (k->k_partials && !k->cfg.library && k->cfg.sk_split > 1 && n < max - 1) { /* split K through memory too, or not */
            out[n] = k->cfg;
            out[n].sk_chunks = k->cfg.sk_chunks > 1 ? 0 : k_chunks(g, k, &k->cfg);
            out[n].tune_only = out[n].sk_chunks > 1 && F32_CHUNKS_TUNE_ONLY;
            n += out[n].sk_chunks != k->cfg.sk_chunks;
        }
        return n + library_variant(g, p, k, allow_library, out + n, max - n);
    }
    bool dual = k->b1 >= 0;
    const int(*v)[5] = dual ? dual_variants : single_variants;
    int nv = dual ? (int)(sizeof dual_variants / sizeof *v) : (int)(sizeof single_variants / sizeof *v);
    for (int i = 0; i < nv && n < max - 1 && !k->cfg.skinny_only; i++) { /* room kept for the library's */
        ts_kernel_config c = k->cfg;
        c.tile_m = v[i][0], c.tile_n = v[i][1], c.stages = v[i][2], c.cluster_m = v[i][3], c.pingpong = v[i][4];
        c.library = false;
        bool same = c.tile_m == k->cfg.tile_m && c.tile_n == k->cfg.tile_n && c.stages == k->cfg.stages &&
                    c.cluster_m == k->cfg.cluster_m && c.pingpong == k->cfg.pingpong && !k->cfg.library;
        /* a product's rows reduced (plan.h row_parts): no cluster (gemm_sm90.cuh); ping-pong measured slower
         * (bench/NOTES.md run 151: 0.4225 against 0.3651 ms at 4096×8192×4096) */
        if (k->row_parts && (c.cluster_m > 1 || c.pingpong)) continue;
        if (!same) out[n++] = c;
    }
    if (!dual && !k->two_k && !k->row_parts) n += deep_variant(g, k, out + n, max - 1 - n);
    return n + library_variant(g, p, k, allow_library, out + n, max - n);
}

int64_t ts_config_attention_kernel_dim(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 128 : d <= 192 ? 192 : 256; }

int64_t ts_config_attention_decode_dim(int64_t d) { return d <= 64 ? 64 : d <= 128 ? 128 : 256; }

bool ts_config_attention_head_dim_ok(int64_t d) { return d >= 8 && d <= 256 && d % 8 == 0; }

/* A map whose operand is transposed (Y[n, m] = A[m, n]: its unit stride is along another output dimension)
 * walks neighbouring threads along that dimension (map.cuh): 16 of them take neighbouring positions there and
 * read such an operand in whole sectors, while the output and the operands that have unit stride along the
 * innermost dimension are still moved in whole sectors, by pairs of lanes. The walk that leaves the fewest
 * bytes strided along what neighbouring threads step over wins; the innermost one on a tie. A dimension
 * shorter than the walk's tile (16) would leave lanes idle and is not walked. */
enum { WALK_MIN_SIZE = 16 };

/* Bytes of map k's operands and outputs moved with a stride other than 0 or 1 along the innermost output
 * axis and, where walk ≥ 0, along that axis too (what neighbouring threads step over in that walk). */
static double map_strided_bytes(const ts_graph *g, const ts_plan *p, const ts_kernel *k, int32_t walk) {
    const int32_t inner = k->out.axis[k->out.ndim - 1];
    double b = 0;
    for (int i = -1 - k->nextra; i < k->nacc; i++) {
        const ts_access *a = i >= 0 ? &k->acc[i] : i == -1 ? &k->out : &k->extra_out[-2 - i];
        if (ts_access_strided_along(a, inner) && (walk < 0 || ts_access_strided_along(a, walk))) b += ts_access_bytes(g, p, a);
    }
    return b;
}

static ts_kernel_config map_config(const ts_graph *g, const ts_plan *p, const ts_kernel *k) {
    ts_kernel_config c = {0};
    if (k->out.ndim < 2) return c;
    double best = map_strided_bytes(g, p, k, -1);
    for (int d = 0; d + 1 < k->out.ndim; d++) {
        if (g->axes[k->out.axis[d]].size < WALK_MIN_SIZE) continue;
        double b = map_strided_bytes(g, p, k, k->out.axis[d]);
        if (b < best) best = b, c.walk = true, c.walk_dim = d;
    }
    return c;
}

void ts_config_choose(const ts_graph *g, const ts_plan *p, ts_kernel *k) {
    if (k->kind == TS_KERNEL_GEMM) k->cfg = gemm_config(g, p, k);
    else if (k->kind == TS_KERNEL_ATTENTION) k->cfg = attention_config(g, k);
    else if (k->kind == TS_KERNEL_MAP) k->cfg = map_config(g, p, k);
    else k->cfg = (ts_kernel_config){0};
}

const char *ts_config_describe(const ts_kernel *k, char *buf, size_t n) {
    char split[48] = "";
    if (k->cfg.sk_split > 1 && k->cfg.sk_chunks > 1)
        snprintf(split, sizeof split, ", split-K %d x %d chunks", k->cfg.sk_split, k->cfg.sk_chunks);
    else if (k->cfg.sk_split > 1) snprintf(split, sizeof split, ", split-K %d", k->cfg.sk_split);
    if (k->kind == TS_KERNEL_GEMM && k->cfg.library)
        snprintf(buf, n, "cuBLASLt");
    else if (k->kind == TS_KERNEL_GEMM && k->cfg.tf32x3)
        snprintf(buf, n, "%dx%d, %d stages, 3xTF32%s%s", k->cfg.tile_m, k->cfg.tile_n, k->cfg.stages, split,
                 k->cfg.f32_wgmma ? ", wgmma" : "");
    else if (k->kind == TS_KERNEL_ATTENTION && k->cfg.dec_only)
        snprintf(buf, n, "decode: %d query rows a CTA, keys split over warps and a cluster", k->cfg.dec_rows);
    else if (k->kind == TS_KERNEL_GEMM && k->cfg.skinny_only)
        snprintf(buf, n, "skinny %dx%d, %d stages%s", k->cfg.sk_tile_m, k->cfg.sk_tile_n, k->cfg.sk_stages, split);
    else if (k->kind == TS_KERNEL_GEMM && k->cfg.skinny_m > 0)
        snprintf(buf, n, "%dx%d, %d stages%s%s; M <= %d: skinny %dx%d, %d stages%s", k->cfg.tile_m, k->cfg.tile_n,
                 k->cfg.stages, k->cfg.cluster_m > 1 ? ", cluster" : "", k->cfg.pingpong ? ", ping-pong" : "",
                 k->cfg.skinny_m, k->cfg.sk_tile_m, k->cfg.sk_tile_n, k->cfg.sk_stages, split);
    else if (k->kind == TS_KERNEL_GEMM || k->kind == TS_KERNEL_ATTENTION) {
        char dec[40] = "";
        if (k->kind == TS_KERNEL_ATTENTION && k->cfg.dec_rows > 0)
            snprintf(dec, sizeof dec, "; t_q <= %d: decode", k->cfg.dec_rows);
        snprintf(buf, n, "%dx%d, %d stages%s%s%s", k->cfg.tile_m, k->cfg.tile_n, k->cfg.stages,
                 k->cfg.cluster_m > 1 ? ", cluster" : "", k->cfg.pingpong ? ", ping-pong" : "", dec);
    }
    else if (k->kind == TS_KERNEL_ROW && k->cfg.row_split)
        snprintf(buf, n, "long rows split over clusters");
    else if (n) buf[0] = 0;
    return buf;
}
