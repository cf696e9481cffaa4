/* costmodel.h — the analytic cost model: predicted time of each kernel of a plan from its work (tensor,
 * FMA and special-function operations), its DRAM bytes (with tile re-reads once the working set exceeds
 * L2), waves and tail, and launch overhead, with coefficients read from costmodel/<gpu>.yaml. */
#ifndef TS_COSTMODEL_H
#define TS_COSTMODEL_H

#include <stdbool.h>

#include "diag.h"
#include "hlir.h"
#include "plan.h"

/* The cost model's coefficients, its one list (an X-macro): X(name, same_as, fallback). A coefficient a
 * file may lack (it came after files were written) takes the value of coefficient `same_as`, or `fallback`
 * when that is > 0; the others are required.
 *   launch_s             start-to-start spacing of back-to-back kernels (s)
 *   dram_bytes_per_s     DRAM bytes moved (read + written) per second
 *   tensor_flops_per_s   tensor-core FLOPs per second; fma_flops_per_s FMA-pipe FLOPs (an FMA is 2)
 *   sfu_ops_per_s        special-function operations (exp2, rsqrt, ...) per second
 *   sms, l2_bytes        the device's multiprocessors and L2 size
 *   *_efficiency         the fraction of those rates each template reaches (fitted to tune records)
 *   strided_efficiency   the rate of uncoalesced reads relative to coalesced ones
 *   epilogue_efficiency  the fraction of the FMA-pipe slot rate (fma_flops_per_s / 2) or of sfu_ops_per_s,
 *                        whichever pipe its ops fill more (costmodel.c op_cost), a GEMM's epilogue reaches: it runs
 *                        after the main loop, on the consumer warps alone, so its time adds to the GEMM's
 *                        (bench/NOTES.md run 141)
 *   skinny_gemm_efficiency  the fraction of dram_bytes_per_s a skinny (decode-size, M ≤ 64) GEMM streams
 *                        its operands at (config.h); assumed 0.85 until fitted to tune records
 *   gemm_wave_overhead_s the wgmma GEMM's fixed time per wave of output tiles: a CTA's pipeline fill and
 *                        its epilogue, which do not overlap its main loop (one CTA per SM), added per wave;
 *                        measured on the H200 as the intercept of a K sweep over one wave of 128×256 tiles
 *                        less launch_s (bench/gpu/gemm_cluster.sh): 2.6e-6 with the packed epilogue (bench/NOTES.md
 *                        run 102; 4.6e-6 with the staged fp32 one, run 26)
 *   skinny_tensor_efficiency  the fraction of tensor_flops_per_s the skinny form's mma.sync tiles reach (its
 *                        1×4 warps stream B; gemm_efficiency is the wgmma form's): 0.3, from run 27's
 *                        1024³ GEMMs in that form (14–17 us each)
 *   gemm_elementwise_efficiency  the fraction of tensor_flops_per_s a GEMM reaches, waves of its mma.sync
 *                        fallback tiles counted, when an operand's offset or row stride is odd: no TMA,
 *                        gemm.cuh's element-wise loader, synchronous loads (0.098 from bench/NOTES.md run 117's
 *                        1000×2500 → 3000 linear layer on that loader, before the 4-byte one existed: 0.34 ms;
 *                        0.069 when waves of wgmma tiles were counted)
 *   gemm_paired_efficiency  the same when every operand's offset and row strides are even but one is not a
 *                        multiple of 8 (a K of 2500): gemm.cuh's 4-byte cp.async loader (0.205 from run 118:
 *                        the same layer at K = 2500, 0.1609 ms). Where the sizes are static the search also offers
 *                        the GEMM reading padded copies of such operands (src/pad.h), which usually wins
 *   columns_efficiency   the fraction of dram_bytes_per_s a ROW kernel down columns (row.cuh's
 *                        launch_row_columns: scalar loads, a pass over its operands per stage, the later ones
 *                        from L2) moves its bytes at, each pass counted: 0.64 from runs 113 and 115 (the cluster
 *                        form; 0.50-0.76), 0.35 for run 38's 8-column form
 *   score_loads_per_s    elements of score tensors (a mask, a bias per head) an attention kernel's score
 *                        functor loads per second, each score loading its own: the loads sit in the consumer
 *                        warps' softmax, between their two GEMMs of a tile, so their time adds. 1.09e12 from
 *                        run 103's masked bench kernel with the functors' pair form (two keys' elements in
 *                        one load); 9e11 from runs 39–40's four kernels loading one element a score
 *   score_row_loads_per_s  loads a second of score operands that are the same for every key of a query row
 *                        but vary along the queries (a per-row scale of the scores: QK-norm's Q norm folded into
 *                        the attention): the functor loads them at every score, from L1, in the same place as
 *                        the loads above. 4.7e12 from run 166 (H100: the per-row score scale made a causal
 *                        16 × 4096² head-dim-128 kernel 28.6 us slower than the plain one, 1.34e8 scores)
 *   rowstat_stage_s      the time a wgmma GEMM folding row statistics of A (rowstat.h) from its shared-
 *                        memory tiles adds per K-tile of 64 and wave of output tiles: measured as a fixed
 *                        cost per stage, not a share of the MMA work (bench/NOTES.md run 49, the persistent
 *                        kernel: 0.09-0.27 us per stage over three kernels from 1024×1024×1024 dual to
 *                        1024×4096×4096; 0.30-0.41 before, runs 43-44). Since run 159 the wgmma kernel publishes
 *                        them instead (below); this stays for the mma.sync kernels' fold, unmeasured there
 *   rowstat_publish_efficiency  the share of dram_bytes_per_s at which the wgmma GEMM's producer warps read A's rows
 *                        again to publish their statistics beside the main loops (gemm_sm90.cuh); only what
 *                        outlasts one wave's main loop is paid. 0.12: the H100's 0.47 TB/s in run 159 (4096³:
 *                        32 MB, +21 us past a 47 us wave; latency-bound, three warps an SM with four 16-byte loads
 *                        in flight a lane, so taken as the same absolute rate on the H200)
 *   row_stage_load_s     the time a row kernel (row.cuh) adds per row an SM runs and per stage that reads an
 *                        operand it does not cache (a bias shared by every row, re-read from L1/L2 in the
 *                        stage, between two of the row's reductions): 6.5e-8 from two same-call pairs on the
 *                        H200 (bench/NOTES.md run 83: LayerNorm over 4096 rows of X + b + R with two such
 *                        stages against the same norm with none, +4.9 and +3.1 us)
 *   row_grid_barrier_s   the time a ROW kernel over a cooperative grid (row.cuh launch_row_grid: few rows, each
 *                        split over many blocks) adds per stage, where its blocks meet at a grid barrier and fold
 *                        the row's partials: 2 us assumed (a grid barrier over an SM's worth of blocks each), until
 *                        measured
 *   row_long_efficiency  the share of the ROW rate (row_efficiency × DRAM) that row kernels over rows longer than
 *                        a 256-thread block caches reach (a 512- or 1024-thread block a row, one or two an SM, or a
 *                        pass per stage through L2): 0.72 from eleven such kernels on H100s (bench/NOTES.md runs 152,
 *                        153, 165: measured / predicted 1.39-1.99, geometric mean 1.63) divided by the H100's slower
 *                        DRAM (3.35 against 3.91 TB/s); no H200 measurement yet
 *   column_fold_s, column_position_s  the time a ROW kernel down short columns (row.cuh short_column_cols: a thread
 *                        or a few a column, a scalar load a position) spends an SM per column (its indices, the
 *                        combine and store) and per position: its floor beside the bytes. 1.65e-9 and 1.3e-10: run
 *                        165 (H100, row_test colshort, a thread a column): 12.5 us per million columns and 1.0 us per
 *                        million positions over the 132 SMs fit seven shapes from 2 × 4.2M to 256 × 262144 columns
 *                        within 20% (the same SM count and clock as the H200)
 *   gemm_pingpong_efficiency  the share of gemm_efficiency's tensor rate the wgmma GEMM's ping-pong form
 *                        (config.h: a 128×128 tile a consumer warpgroup) reaches, its per-tile costs folded
 *                        in (it pays gemm_wave_overhead_s once, not per wave): 0.79-0.84 over four store-epilogue
 *                        GEMMs from 1024×4096×4096 to 8192³ (bench/NOTES.md run 102; 0.74-0.79 in run 49)
 *   gemm_pingpong_epilogue_share  the share of the shorter of a ping-pong GEMM's main loop and epilogue that
 *                        the other does not hide (the warpgroups share the SM's issue slots and registers):
 *                        0.25, the median over runs 82 and 85's ping-pong kernels with heavy epilogues (GEMM +
 *                        GELU 0.19-0.28, the bf16 linear + GELU 0.17-0.21, the LayerNorm MLP's first GEMM at
 *                        K = 1024 0.53-0.55; bench/NOTES.md run 86); 0 hid it whole and predicted them 6-23% low
 *   gemm_f32_wgmma_ratio the 3xTF32 rate of gemm_f32_sm90.cuh's wgmma kernel over gemm_f32.cuh's mma.sync one in
 *                        the same 128×128 tiles (config f32_wgmma): 1.15 measured on the H200 (bench/NOTES.md run
 *                        171: 1.17x at 4096³, 1.14x at 2048×1024×4096 and 1000×3000×2500)
 *   gemm_tile64_ratio    the tensor rate of a single-B wgmma GEMM in 128×64 tiles (config.h: small GEMMs, a
 *                        variant elsewhere) relative to gemm_efficiency's: N = 64 wgmmas and twice the A-tile
 *                        loads a FLOP of the 128×128 form. 0.79 from same-call pairs: matmul 1024×4096×4096
 *                        (128×64 1.27x its prediction where 128×128 ran 0.94x; bench/NOTES.md run 116's records)
 *                        and the padded 1000×3000×2500 linear (0.0651 ms against 0.0431 for 128×256 at 0.73 of the
 *                        waves; run 119); dual-B 128×64 tiles (N = 128 wgmmas) ran at their prediction
 *   attention_whole_tiles_ratio  the tensor rate of an attention kernel without a causal mask relative to
 *                        attention_efficiency's (fitted mostly on causal kernels, whose diagonal tiles and
 *                        row imbalance cost): 1.26 from run 62's ten attention graphs (bench/NOTES.md run 66)
 *   attention_key64_ratio  the tensor rate of an attention kernel with 64-key K/V tiles (head dim 256's
 *                        configuration: half-width QKᵀ wgmmas, 2 stages, its masks a select a score) relative to
 *                        attention_efficiency's (bench/NOTES.md run 95)
 *   attention_scores_per_s  scores per second an attention kernel's softmax sustains (its FP32 and exp work a
 *                        score, in the consumer warps beside the other warpgroup's MMAs): a floor under the
 *                        MMA time that binds at small head dims (absent: no floor); with
 *   attention_score_ops_per_s  the rate of the score functor's own operations (each op and each position it
 *                        reads) in that floor: per score, 1/attention_scores_per_s + ops/attention_score_ops_per_s,
 *                        the ops of the functor as the kernel runs it (its unmasked form, plus the diagonal's
 *                        compare and select; fitted on head dim 64 before and after that form, bench/NOTES.md
 *                        runs 93 and 95)
 *   cublas_efficiency    the fraction of tensor_flops_per_s a GEMM run by cuBLASLt reaches (--allow-cublas,
 *                        libgemm.h), as gemm_efficiency is the own wgmma kernel's (gemm_efficiency where a model
 *                        file lacks it); its epilogue (bias, ReLU, GELU) is hidden behind its main loop
 *   cublas_fp32_efficiency  the fraction of fma_flops_per_s cuBLASLt's fp32 GEMMs (exact fp32 on the CUDA cores,
 *                        no TF32; --allow-cublas) reach: 0.8 where a model file lacks it (0.77 measured, run 123)
 *   gemm_tf32x3_efficiency  the fraction of tensor_flops_per_s (the fp16 mma.sync rate) an fp32 GEMM reaches in
 *                        templates/gemm_f32.cuh (3xTF32: three TF32 MMAs a product at half the fp16 rate, so 1/6
 *                        at most, less the split and the 32-bit fragment loads): 0.10 measured (runs 124-125: ~61 TFLOP/s at large sizes,
 *                        1.16x cuBLAS SGEMM; mma.sync's TF32 rate on Hopper bounds it)
 *   epilogue_chunk_load_s  the time a wgmma GEMM's epilogue adds per chunk of columns whose per-row operands (a
 *                        residual) it loads a chunk ahead of its stores (gemm_sm90.cuh's packed epilogue, Cfg's
 *                        LOAD_CC): each chunk waits out a load latency, and in a cooperative kernel every tile's
 *                        epilogue is exposed (in a GEMM of one wave of tiles every CTA loads at once). Per wave of
 *                        tiles (a ping-pong kernel: once, the last tile's); 7e-7 from runs 127-131's same-call pairs
 *                        (bench/NOTES.md: GEMM + bias + residual against GEMM + bias, 4096×1024×4096, 8 chunks
 *                        of 32 columns: +5.5 us)
 *   reduce_pairs_per_s   the rate at which a REDUCE kernel that is a matrix product (every operand of its reduction
 *                        read again by other outputs: Σ_k a[m, k]·b[k, n] into [m, n]) folds its (output, position) pairs:
 *                        each pair is a load of each operand from L1/L2, not a DRAM byte; 2.49e11 on the H200, the
 *                        geometric mean of the six such kernels tune timed there (bench/NOTES.md run 135: 199-331e9
 *                        over matmul, a batched fp32 matmul and attention's two contractions; before this term they
 *                        ran 21-40x slower than predicted)
 *   tensor_peak_flops_per_s  the physical dense fp16/bf16 tensor rate (wgmma), for roofline floors only —
 *                        predictions use tensor_flops_per_s, the rate our kernels' mma.sync reaches;
 *                        the H200 datasheet's 989e12 until `tsopt calibrate` measures it */
#define TS_COSTMODEL_COEFFICIENTS(X)                                                                   \
    X(launch_s, NULL, 0)                                                                               \
    X(dram_bytes_per_s, NULL, 0)                                                                       \
    X(tensor_flops_per_s, NULL, 0)                                                                     \
    X(fma_flops_per_s, NULL, 0)                                                                        \
    X(sfu_ops_per_s, NULL, 0)                                                                          \
    X(sms, NULL, 0)                                                                                    \
    X(l2_bytes, NULL, 0)                                                                               \
    X(gemm_efficiency, NULL, 0)                                                                        \
    X(attention_efficiency, NULL, 0)                                                                   \
    X(reduce_efficiency, NULL, 0)                                                                      \
    X(map_efficiency, NULL, 0)                                                                         \
    X(row_efficiency, "map_efficiency", 0)                                                             \
    X(strided_efficiency, NULL, 1.0)                                                                   \
    X(epilogue_efficiency, NULL, 0.8)                                                                  \
    X(skinny_gemm_efficiency, NULL, 0.85)                                                              \
    X(gemm_wave_overhead_s, NULL, 2.6e-6)                                                              \
    X(skinny_tensor_efficiency, NULL, 0.3)                                                             \
    X(gemm_elementwise_efficiency, NULL, 0.098)                                                        \
    X(gemm_paired_efficiency, NULL, 0.205)                                                             \
    X(score_loads_per_s, NULL, 1.09e12)                                                                \
    X(score_row_loads_per_s, NULL, 4.7e12)                                                             \
    X(columns_efficiency, NULL, 0.35)                                                                  \
    X(rowstat_stage_s, NULL, 1.7e-7)                                                                   \
    X(rowstat_publish_efficiency, NULL, 0.12)                                                          \
    X(row_stage_load_s, NULL, 6.5e-8)                                                                  \
    X(column_fold_s, NULL, 1.65e-9)                                                                    \
    X(row_long_efficiency, NULL, 1.0)                                                                  \
    X(row_grid_barrier_s, NULL, 2.0e-6)                                                                \
    X(column_position_s, NULL, 1.3e-10)                                                                \
    X(gemm_pingpong_efficiency, NULL, 0.82)                                                            \
    X(gemm_pingpong_epilogue_share, NULL, 0.25)                                                        \
    X(gemm_tile64_ratio, NULL, 1.0)                                                                    \
    X(gemm_f32_wgmma_ratio, NULL, 1.0)                                                                 \
    X(attention_whole_tiles_ratio, NULL, 1.0)                                                          \
    X(attention_key64_ratio, NULL, 1.0)                                                                \
    X(attention_scores_per_s, NULL, 1e30)                                                              \
    X(attention_score_ops_per_s, NULL, 1e30)                                                           \
    X(tensor_peak_flops_per_s, "tensor_flops_per_s", 0)                                               \
    X(cublas_efficiency, "gemm_efficiency", 0)                                                         \
    X(cublas_fp32_efficiency, NULL, 0.8)                                                               \
    X(gemm_tf32x3_efficiency, NULL, 0.10)                                                             \
    X(epilogue_chunk_load_s, NULL, 7e-7)                                                               \
    X(reduce_pairs_per_s, NULL, 1e30)

typedef struct {
    char *path, *gpu, *source;
    char *driver, *date; /* written by `tsopt calibrate` ("" when absent) */
    int nfits;           /* entries of its `fit:` section (recorded, not used by the predictions) */
    bool calibrated;
    char *text;      /* the file's text: the diagnostics of ts_costmodel_load point into path and text, */
    size_t text_len; /* so they stay printable until ts_costmodel_free */
#define TS_X_COEF_FIELD(name, same_as, fallback) double name;
    TS_COSTMODEL_COEFFICIENTS(TS_X_COEF_FIELD)
#undef TS_X_COEF_FIELD
} ts_costmodel;

/* Coefficients m lacks (0) take the value of the one they stand for (same_as) or their fallback; returns
 * how many were filled. */
int ts_costmodel_fill_absent(ts_costmodel *m);

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
    double wave_efficiency; /* GEMM, attention: tiles / (waves × SMs), the last wave's idle share; REDUCE and ROW
                               down columns: the share of two blocks an SM their launch fills; 1 otherwise */
    double epilogue_slots;  /* GEMM: FMA-pipe issue slots of its epilogue over the whole output (costmodel.c
                               op_cost; also counted in fma_flops) */
    double epilogue_sfu_ops; /* GEMM: MUFU ops of its epilogue over the whole output (also in sfu_ops): the busier
                               pipe's time at epilogue_efficiency, on the share of SMs its tiles occupy
                               (wave_efficiency), added */
    double score_sfu_ops;   /* attention: special-function ops of the score functor over every score (a tanh
                               soft-cap: one tanh.approx each; also counted in sfu_ops), at sfu_ops_per_s,
                               added: the consumer warps evaluate them between their two GEMMs of a tile,
                               where the plain softmax's one exp2 a score is already in the fitted efficiency */
    double score_loads;     /* attention: elements of score tensors loaded, one per tensor the score reads per
                               score computed, at score_loads_per_s, added */
    double score_row_loads; /* attention: loads of per-query-row score operands, one per such tensor per score,
                               at score_row_loads_per_s, added */
    double tile_waves;      /* GEMM in its wgmma tile form: waves of output tiles over the SMs, each paying
                               gemm_wave_overhead_s (0 for other kernels and the skinny form) */
    bool skinny;            /* GEMM in its skinny form, or attention in its decode form (config.h): its bytes
                               move at skinny_gemm_efficiency of the DRAM rate, scaled by the share of SMs its
                               CTAs occupy (wave_efficiency) */
    double rowstat_stages;  /* GEMM folding row statistics of A (rowstat.h) in the mma.sync kernel's tiles (operands
                               TMA cannot take): K-tiles × waves of output tiles, each paying rowstat_stage_s, added
                               (0 otherwise; the skinny form folds them beside a bandwidth-bound loop: counted in
                               fma_flops only) */
    double rowstat_publish_bytes; /* wgmma GEMM with row statistics of A: the bytes of A its grid reads again to
                               publish them (also in bytes); what that read takes at rowstat_publish_efficiency of
                               the DRAM rate past one wave's main loop (the first epilogue waits for it) is added */
    bool pingpong;          /* GEMM in its ping-pong wgmma form (config.h): the main loop at gemm_pingpong_efficiency
                               of the rate, each tile's epilogue beside the next tile's main loop */
    double scores;          /* attention: scores computed (heads × rows × keys, halved under a causal mask): the
                               consumer warps' softmax work, at most attention_scores_per_s */
    double score_fn_ops;    /* attention: the score functor's operations over those scores (its unmasked form's
                               below the causal diagonal), at attention_score_ops_per_s in the same floor */
    bool whole_tiles;       /* attention (not the decode form) without a causal diagonal: every K/V tile of every
                               row computed whole, at attention_whole_tiles_ratio × attention_efficiency */
    bool key64;             /* attention (not the decode form) in 64-key K/V tiles, at attention_key64_ratio (× the
                               whole-tiles ratio where that applies) */
    bool tile64;            /* single-B GEMM (not skinny) in 128×64 wgmma tiles, at gemm_tile64_ratio */
    bool f32_wgmma;         /* fp32 GEMM by gemm_f32_sm90.cuh's wgmma kernel, at gemm_f32_wgmma_ratio */
    double column_folds;    /* ROW down short columns (row.cuh short_column_cols): its columns, each folded by its
                               own thread(s), at column_fold_s an SM each ... */
    double column_positions; /* ... and their positions (columns × row length), at column_position_s an SM each;
                               together a floor beside the bytes */
    double row_stage_loads; /* ROW along contiguous rows: rows an SM runs × stages that read an operand the kernel
                               does not cache (ts_row_operand_cached), each paying row_stage_load_s, added */
    double row_grid_barriers; /* ROW over a cooperative grid (config.h ts_config_row_grid_parts): its stages, each
                               ending at a grid barrier that pays row_grid_barrier_s, added */
    bool unchunked;         /* GEMM with an operand whose offset or row stride is odd: the mma.sync kernel's
                               element-wise loader (no TMA), its tensor work at gemm_elementwise_efficiency */
    bool paired;            /* GEMM with an operand whose offset or row stride is even but not a multiple of 8 elements
                               (16 bytes): the mma.sync kernel's 4-byte loader, at gemm_paired_efficiency */
    bool long_rows;         /* ROW along rows longer than a 256-thread block caches (config.h ts_config_row_long),
                               as many as the SMs or more: its bytes at row_long_efficiency of the ROW rate */
    bool columns;           /* ROW down columns (plan.h): bytes counts its operands once per pass (each stage,
                               then the outputs' pass unless per_row) and moves at columns_efficiency, scaled
                               by wave_efficiency: the share of two blocks an SM its rows fill */
    double simt_gemm_flops; /* GEMM of fp32 operands (cuBLASLt's, exact fp32): its FLOPs, on the CUDA cores at
                               cublas_fp32_efficiency of fma_flops_per_s (its tensor_flops are 0) */
    bool tf32x3;            /* GEMM of fp32 operands in gemm_f32.cuh (config.h tf32x3): its tensor work at
                               gemm_tf32x3_efficiency, its epilogue added as the mma.sync kernels' */
    double reduce_pairs;    /* REDUCE that is a matrix product (every operand read by several outputs: costmodel.c
                               reduce_rereads): outputs × positions reduced, at most reduce_pairs_per_s */
    int extra_launches;     /* kernels its template launches besides the first (a GEMM reducing its product's rows:
                               the merge of the tiles' results, gemm.cuh row_parts_merge_kernel), launch_s each */
    double epilogue_chunks; /* wgmma GEMM whose epilogue loads per-row operands: chunks of columns a tile × the
                               tiles' waves whose epilogues are exposed, each paying epilogue_chunk_load_s, added */
    bool library;           /* GEMM run by cuBLASLt (--allow-cublas, libgemm.h): its tensor work at cublas_efficiency
                               in the own kernel's default tiles (the library's own are not known here), no ping-pong
                               form, its epilogue hidden behind the main loop; off 16-byte alignment (the output's
                               too) unchunked or paired, at those efficiencies, as the own kernels */
} ts_kernel_work;

void ts_costmodel_work(const ts_costmodel *m, const ts_graph *g, const ts_plan *p, const ts_kernel *k,
                       ts_kernel_work *w);
/* GEMM k's first operand access (A, B, its dual B, the second pair's) whose constant offset or row stride is not a
 * multiple of 8 elements — what keeps it from TMA and 16-byte loads (gemm.cuh's 4-byte or element-wise loader,
 * plan.h ts_access_chunked) — or -1. */
int ts_costmodel_gemm_unchunked_slot(const ts_kernel *k);
/* The efficiency coefficient that applies to kernels of this kind. */
double ts_costmodel_efficiency(const ts_costmodel *m, ts_kernel_kind kind);
/* The predicted time of a kernel with this work:
 *   launch_s + max(tensor / (tensor rate · eff · wave), FMA / (FMA rate · eff'), SFU / SFU rate,
 *                  (bytes − strided + strided / strided_efficiency) / (DRAM rate · eff''),
 *                  reduce_pairs / reduce_pairs_per_s,
 *                  (column_folds · column_fold_s + column_positions · column_position_s) / SMs)
 *            + E + score_sfu_ops / sfu_ops_per_s
 *            + score_loads / score_loads_per_s + score_row_loads / score_row_loads_per_s
 *            + tile_waves · gemm_wave_overhead_s
 *            + rowstat_stages · rowstat_stage_s + row_stage_loads · row_stage_load_s
 *            + row_grid_barriers · row_grid_barrier_s
 *            + max(0, rowstat_publish_bytes / (DRAM rate · rowstat_publish_efficiency) − main loop / tile_waves)
 *            + epilogue_chunks · epilogue_chunk_load_s
 * where a GEMM's epilogue E = max(epilogue_slots / (fma_flops_per_s / 2), epilogue_sfu_ops / sfu_ops_per_s) /
 * (epilogue_efficiency · wave).
 * A ping-pong GEMM: the tensor term divided by gemm_pingpong_efficiency; its epilogue E runs beside the main
 * loop: max(that, E) + gemm_pingpong_epilogue_share · min(that, E) + E / tile_waves (the last tiles' epilogues) + one gemm_wave_overhead_s (the first fill) in
 * place of the sum.
 * eff = the kind's efficiency (a skinny GEMM: skinny_tensor_efficiency; an fp32 one gemm_tf32x3_efficiency; an unchunked GEMM:
 * gemm_elementwise_efficiency, a paired one gemm_paired_efficiency; a ROW kernel down columns:
 * columns_efficiency); eff' = 1 for GEMM (its FMA work is the epilogue) else eff; eff'' = 1 for GEMM
 * and attention (their bytes are streamed by TMA/cp.async at the copy rate) else eff; a skinny GEMM:
 * eff'' = skinny_gemm_efficiency · wave (a decode-size GEMM is bound by streaming its weight); a ROW kernel
 * down columns and a REDUCE kernel: eff'' = eff · wave, wave the share of two blocks an SM their launch fills;
 * any other ROW kernel: eff · wave (× row_long_efficiency over rows longer than a 256-thread block caches, as many as
 * the SMs or split over a cooperative grid), wave
 * the share of the SMs its rows' clusters fill (1 unless fewer rows than
 * SMs need a block each: ts_config_row_cluster); its bytes count the cached operands again for each pass a row
 * too long for a block's registers takes. */
double ts_costmodel_time(const ts_costmodel *m, const ts_kernel_work *w);

/* Predicts every kernel of p (at the graph's current sizes: dynamic axes at their typical size) and the
 * plan's total, stored in the plan. */
void ts_costmodel_predict(const ts_costmodel *m, const ts_graph *g, ts_plan *p);

#endif
