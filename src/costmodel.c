/* costmodel.c — loading cost-model files and predicting kernel times (see costmodel.h). */
#include "costmodel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "rowstat.h"
#include "spec.h"
#include "util.h"

/* ---- loading ----------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    size_t offset;
    double fallback;     /* > 0: optional, this value when absent (files written before it existed) */
    const char *same_as; /* optional: the value of this other coefficient when absent */
} coefficients[] = {
#define TS_X_COEF_ENTRY(name, same_as, fallback) {#name, offsetof(ts_costmodel, name), fallback, same_as},
    TS_COSTMODEL_COEFFICIENTS(TS_X_COEF_ENTRY)
#undef TS_X_COEF_ENTRY
};
#define NCOEF ((int)(sizeof coefficients / sizeof *coefficients))

static int read_coefficients(ts_costmodel *m, ts_spec *s, yaml_node_t *map, ts_diags *d) {
    bool seen[NCOEF] = {0};
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = ts_yaml_node(s, p->key), *v = ts_yaml_node(s, p->value);
        const char *key = ts_yaml_str(k), *val = ts_yaml_str(v);
        int i = 0;
        while (key && i < NCOEF && strcmp(key, coefficients[i].name) != 0) i++;
        if (key && i == NCOEF && strcmp(key, "epilogue_ops_per_s") == 0) { /* retired in run 141 */
            ts_diag_add(d, TS_WARNING, ts_yaml_line(k), ts_yaml_col(k), ts_yaml_len(k), "the GEMM epilogue is priced "
                        "per FMA-pipe slot and MUFU op at epilogue_efficiency now (costmodel.h)",
                        "coefficient 'epilogue_ops_per_s' is no longer used; ignored");
            continue;
        }
        if (!key || i == NCOEF) {
            ts_error(d, ts_yaml_line(k), ts_yaml_col(k), ts_yaml_len(k), NULL, "unknown coefficient '%s'", key ? key : "?");
            continue;
        }
        char *end;
        double x = val ? strtod(val, &end) : NAN;
        if (!val || *end || !(x > 0) || !isfinite(x)) {
            ts_error(d, ts_yaml_line(v), ts_yaml_col(v), ts_yaml_len(v), NULL, "%s must be a positive number", key);
            continue;
        }
        *(double *)((char *)m + coefficients[i].offset) = x;
        seen[i] = true;
    }
    for (int i = 0; i < NCOEF; i++)
        if (!seen[i] && coefficients[i].fallback > 0) *(double *)((char *)m + coefficients[i].offset) = coefficients[i].fallback;
        else if (!seen[i] && coefficients[i].same_as) continue; /* below, once every coefficient is read */
        else if (!seen[i]) ts_error(d, ts_yaml_line(map), ts_yaml_col(map), 1, NULL, "missing coefficient '%s'", coefficients[i].name);
    ts_costmodel_fill_absent(m);
    return d->nerrors ? -1 : 0;
}

#define COEF_AT(m, i) (*(double *)((char *)(m) + coefficients[i].offset))

int ts_costmodel_fill_absent(ts_costmodel *m) {
    int n = 0;
    for (int i = 0; i < NCOEF; i++) {
        for (int j = 0; COEF_AT(m, i) == 0 && coefficients[i].same_as && j < NCOEF; j++)
            if (!strcmp(coefficients[j].name, coefficients[i].same_as)) COEF_AT(m, i) = COEF_AT(m, j), n++;
        if (COEF_AT(m, i) == 0 && coefficients[i].fallback > 0) COEF_AT(m, i) = coefficients[i].fallback, n++;
    }
    return n;
}

int ts_costmodel_load(ts_costmodel *m, const char *path, ts_diags *d) {
    memset(m, 0, sizeof *m);
    ts_spec s;
    int loaded = ts_spec_load(&s, path, d);
    /* d points into s (path, text for excerpts), which is freed below: keep copies that live with m */
    m->path = ts_strdup(path);
    if (s.text) {
        m->text = ts_xmalloc(s.len + 1);
        memcpy(m->text, s.text, s.len + 1);
        m->text_len = s.len;
    }
    d->path = m->path;
    d->text = m->text;
    d->text_len = m->text_len;
    if (loaded != 0) {
        ts_spec_free(&s);
        return -1;
    }
    yaml_node_t *root = ts_yaml_root(&s), *coef = ts_yaml_get(&s, root, "coefficients");
    int rc = -1;
    if (!coef || coef->type != YAML_MAPPING_NODE) {
        yaml_node_t *at = coef ? coef : root;
        ts_error(d, ts_yaml_line(at), ts_yaml_col(at), 1, "see costmodel/h200.yaml", "a cost model needs a 'coefficients' mapping");
    } else {
        rc = read_coefficients(m, &s, coef, d);
        const char *gpu = ts_yaml_str(ts_yaml_get(&s, root, "gpu")), *src = ts_yaml_str(ts_yaml_get(&s, root, "source"));
        const char *cal = ts_yaml_str(ts_yaml_get(&s, root, "calibrated"));
        m->gpu = ts_strdup(gpu ? gpu : "unknown GPU");
        m->source = ts_strdup(src ? src : "");
        m->calibrated = cal && strcmp(cal, "true") == 0;
        const char *drv = ts_yaml_str(ts_yaml_get(&s, root, "driver")), *date = ts_yaml_str(ts_yaml_get(&s, root, "date"));
        m->driver = ts_strdup(drv ? drv : "");
        m->date = ts_strdup(date ? date : "");
        yaml_node_t *fit = ts_yaml_get(&s, root, "fit");
        if (fit && fit->type == YAML_MAPPING_NODE) {
            m->nfits = (int)(fit->data.mapping.pairs.top - fit->data.mapping.pairs.start);
        } else if (fit) {
            ts_error(d, ts_yaml_line(fit), ts_yaml_col(fit), 1, "see `tsopt calibrate --help`",
                     "'fit' must be a mapping from fit names to their results");
            rc = -1;
        }
    }
    ts_spec_free(&s);
    return rc;
}

void ts_costmodel_free(ts_costmodel *m) {
    free(m->path);
    free(m->gpu);
    free(m->source);
    free(m->driver);
    free(m->date);
    free(m->text);
    memset(m, 0, sizeof *m);
}

/* ---- work and bytes ---------------------------------------------------------------------------- */

static double size_of(const ts_graph *g, int32_t axis) { return (double)g->axes[axis].size; }


/* The axis a kernel's neighbouring threads step along: a map's innermost output axis (as a ROW kernel's
 * down columns, whose neighbouring threads take neighbouring rows), a reduction's reduced axis (its
 * threads cooperate along it); -1 for GEMM and attention (their tiles are loaded whole). */
static int32_t fast_axis(const ts_kernel *k) {
    if (k->kind == TS_KERNEL_REDUCE || (k->kind == TS_KERNEL_ROW && !k->columns)) return k->red_axis;
    if (k->kind != TS_KERNEL_MAP && k->kind != TS_KERNEL_ROW) return -1;
    int32_t unit = ts_access_unit_axis(&k->out);
    return unit >= 0 ? unit : k->out.ndim ? k->out.axis[k->out.ndim - 1] : -1;
}

/* Whether REDUCE kernel k is a matrix product: every operand its reduction reads along the reduced axis is read
 * again by other outputs (it does not vary along an output axis longer than 1: Σ_k a[m, k]·b[k, n] reads a row of
 * a for every n and a column of b for every m). Its work is then its (output, position) pairs, each a load of each
 * operand from L1/L2 (reduce.cuh has no tiles to share them), not its DRAM bytes. A plain reduction (a row's sum
 * of squares) reads each element once, and a matrix-vector product streams its matrix once beside a vector the
 * caches hold: their bytes bound them. */
static bool reduce_rereads(const ts_graph *g, const ts_kernel *k) {
    int along = 0;
    for (int i = 0; i < k->nacc; i++) {
        const ts_access *a = &k->acc[i];
        if (!(ts_expr_reads(&k->inner, i) || ts_expr_reads(&k->inner_weighted, i)) || ts_access_stride(a, k->red_axis).n == 0)
            continue;
        bool reread = false;
        for (int d = 0; d < k->out.ndim && !reread; d++)
            reread = g->axes[k->out.axis[d]].size > 1 && ts_access_stride(a, k->out.axis[d]).n == 0;
        if (!reread) return false;
        along++;
    }
    return along > 0;
}

/* Does kernel k read access a with a stride other than 0 or 1 along the fast axis (each thread of a warp in
 * its own memory sector: uncoalesced)? A map's transposed walk (config.h) steps along two axes, the
 * innermost in pairs of lanes and walk_dim in half-warps: strided only along both. */
static bool strided(const ts_kernel *k, const ts_access *a, int32_t fast) {
    if (k->kind == TS_KERNEL_MAP && k->cfg.walk && !ts_access_strided_along(a, k->out.axis[k->cfg.walk_dim]))
        return false;
    return ts_access_strided_along(a, fast);
}

/* What one elementwise primitive costs as emit.c writes it (sm_90a SASS, nvcc -O3, counted with cuobjdump):
 * issue slots of the FMA pipe (FP32 and integer instructions; an FMA, an add or a compare is one) and MUFU
 * operations (16 a clock an SM against 128 FMA-pipe lanes). recip is __fdividef(1, x): a range check,
 * rcp.approx and a multiply; sqrt and log2 are tile.cuh's fast_sqrt and fast_log2: a subnormal check, a
 * predicated scale before and after, and the MUFU op; exp2 is ex2.approx.ftz alone; sin is fast_sin: a
 * multiply, a round to integer (FRND, on the MUFU's quarter-rate pipe, counted there), two FMAs of the
 * reduction, MUFU.SIN's own range multiply and MUFU.SIN; erff is a polynomial on the FMA pipe with one ex2 in
 * its tail. A cast and a copy cost nothing here (the loads and stores convert). bench/NOTES.md runs 141-142. */
static void op_cost(ts_op op, double *slots, double *mufu) {
    *slots = 1, *mufu = 0;
    switch (op) {
    case TS_OP_CAST:
    case TS_OP_COPY: *slots = 0; break;
    case TS_OP_WHERE: *slots = 2; break; /* a compare and a select */
    case TS_OP_RECIP: *slots = 4, *mufu = 1; break;
    case TS_OP_SQRT: *slots = 3, *mufu = 1; break;
    case TS_OP_EXP2: *slots = 0, *mufu = 1; break;
    case TS_OP_LOG2: *slots = 3, *mufu = 1; break;
    case TS_OP_SIN: *slots = 4, *mufu = 2; break;
    case TS_OP_ERF: *slots = 28, *mufu = 1; break;
    default: break;
    }
}

/* Adds op's FMA-pipe slots to *fma and its MUFU ops to *sfu. */
static void add_op_cost(ts_op op, double *fma, double *sfu) {
    double slots, mufu;
    op_cost(op, &slots, &mufu);
    *fma += slots, *sfu += mufu;
}

/* Operations of an expression per evaluation: FMA-pipe slots and special-function (MUFU) ops (op_cost). */
static void expr_ops(const ts_expr *e, double *fma, double *sfu) {
    for (int i = 0; i < e->n; i++)
        if (e->node[i].kind == TS_X_OP) add_op_cost(e->node[i].op, fma, sfu);
}

/* The same for an attention score functor as emitted: a tanh is one tanh.approx of its argument times
 * ln2/2 (ts_expr_tanh_arg), and the nodes only it used are not evaluated. */
static void score_ops(const ts_expr *e, double *fma, double *sfu) {
    bool *live = ts_xmalloc(sizeof *live * (size_t)(e->n + 1));
    ts_expr_live(e, true, live);
    for (int i = 0; i < e->n; i++) {
        if (!live[i] || e->node[i].kind != TS_X_OP) continue;
        if (ts_expr_tanh_arg(e, i) >= 0) *sfu += 1, *fma += 1;
        else add_op_cost(e->node[i].op, fma, sfu);
    }
    free(live);
}

/* Operations of a score functor per score as the kernels run it: its live ops (a tanh as one) and the
 * positions it reads (each an int-to-float conversion). */
static double functor_ops(const ts_expr *e) {
    bool *live = ts_xmalloc(sizeof *live * (size_t)(e->n + 1));
    ts_expr_live(e, true, live);
    double n = 0;
    for (int i = 0; i < e->n; i++) n += live[i] && (e->node[i].kind == TS_X_OP || e->node[i].kind == TS_X_INDEX);
    free(live);
    return n;
}

/* The score functor's operations per score as the kernels run it: with a masks_future form (the graph's
 * causal comparisons folded away below the diagonal, ts_attention_unmasked), its unmasked ops (none when that
 * is a scaled dot product: the scale is folded into the softmax's constant) for every score plus an integer
 * compare and a select on the diagonal's tiles — about 2·BN/t_kv of a causal kernel's scores — at head dims
 * where the kernels set masks apart (ts_attention_masks_apart); else the whole functor. */
static double score_fn_ops_per_score(const ts_kernel *k, double tkv, double d) {
    ts_expr below = {0};
    double scale, n;
    if (!ts_attention_unmasked(k, (int64_t)d, &below, &scale) || !ts_attention_masks_apart((int64_t)d))
        n = functor_ops(&k->expr); /* the whole functor, a select a score */
    else n = (scale != 1 ? 0 : functor_ops(&below)) + 2 * (tkv > 0 ? fmin(1, 2 * k->cfg.tile_n / tkv) : 1);
    free(below.node);
    return n;
}

/* Tensors a score expression loads once per score: distinct operand slots among its live nodes that vary
 * along the keys (a mask, a bias), or (keys false) that are the same for every key of a query row but vary along
 * the queries (a per-row scale: run 166, score_row_loads_per_s). A load the same for every score of a head — a
 * per-head slope, a scalar — comes from L1 and costs next to nothing against the row's keys (run 65: a prefill
 * chunk's attention reading one scalar, counted per score, was predicted 158 µs and ran 84). */
static double score_loads_along(const ts_kernel *k, bool keys) {
    const ts_expr *e = &k->expr;
    bool *live = ts_xmalloc(sizeof *live * (size_t)(e->n + 1));
    ts_expr_live(e, true, live);
    double n = 0;
    for (int i = 0; i < e->n; i++) {
        if (!live[i] || e->node[i].kind != TS_X_LOAD) continue;
        const ts_access *a = &k->acc[e->node[i].slot];
        const bool along_keys = !ts_sym_equal(ts_access_stride(a, k->red_axis), ts_sym_const(0));
        const bool along_queries = !ts_sym_equal(ts_access_stride(a, k->m_axis), ts_sym_const(0));
        if (keys ? !along_keys : along_keys || !along_queries) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = live[j] && e->node[j].kind == TS_X_LOAD && e->node[j].slot == e->node[i].slot;
        n += !seen;
    }
    free(live);
    return n;
}

/* A causal attention kernel with a window (the Hopper kernel skips the K/V tiles before key q0 − window and
 * after the diagonal): the share of the t_q × t_kv scores its query tiles compute, and in *longest the
 * largest share one query tile's rows see. */
static double window_share(const ts_kernel *k, double tq, double tkv, double *longest) {
    const double bm = k->cfg.tile_m, bn = k->cfg.tile_n;
    double keys = 0, most = 0;
    for (double q0 = 0; q0 < tq; q0 += bm) {
        const double first = fmax(0, floor((q0 - k->window) / bn) * bn), end = fmin(tkv, q0 + bm);
        const double seen = fmax(0, end - first);
        keys += seen * fmin(bm, tq - q0), most = fmax(most, seen);
    }
    *longest = tkv > 0 ? most / tkv : 1;
    return tq > 0 && tkv > 0 ? fmin(0.5 + 0.5 * bm / tkv, keys / (tq * tkv)) : 0.5;
}

int ts_costmodel_gemm_unchunked_slot(const ts_kernel *k) {
    int slots[5], n = ts_gemm_operand_slots(k, slots);
    for (int i = 0; i < n; i++)
        if (!ts_access_chunked(&k->acc[slots[i]])) return slots[i];
    return -1;
}

/* The bytes GEMM k's loaders move at a time (gemm.cuh gemm_loader_bytes): 16 when every operand is chunked,
 * else 4 when every one is paired, else 0 (element-wise). */
static int gemm_loader_bytes(const ts_kernel *k) {
    int slots[5], n = ts_gemm_operand_slots(k, slots), bytes = 16;
    for (int i = 0; i < n; i++)
        if (!ts_access_chunked(&k->acc[slots[i]])) bytes = ts_access_paired(&k->acc[slots[i]]) && bytes ? 4 : 0;
    return bytes;
}

/* The same for a GEMM cuBLASLt runs (--allow-cublas), its output counting too: cuBLASLt slows down off 16-byte
 * alignment as the own loaders do (bench/NOTES.md run 121: K = 2500, rows 8-byte aligned, 146 TFLOP/s against
 * 742 aligned; an output row of 50257 elements, 94 TFLOP/s), so it is priced at the same efficiencies. */
static int library_alignment_bytes(const ts_kernel *k) {
    int bytes = gemm_loader_bytes(k);
    if (!ts_access_chunked(&k->out)) bytes = ts_access_paired(&k->out) && bytes ? 4 : 0;
    return bytes;
}

/* Chunks of columns a tile of wgmma GEMM k's epilogue loads its operands in, where one of them differs from row
 * to row (a residual; a bias alone comes from L1 without a wait worth counting), mirroring gemm_sm90.cuh's Cfg:
 * In holds 8 bytes a pair per operand, and LOAD_CC = 64, 32 or 16 columns, the most that keep a chunk's
 * operands, twice, within 64 registers (512 bytes over IN_BYTES · MI, MI = the m64 slices of a consumer
 * warpgroup); past 16 bytes a pair the staged epilogue runs, in chunks of 16 counted alike. */
static double epilogue_load_chunks(const ts_kernel *k) {
    const int loads = ts_gemm_epilogue_operands(k, false);
    if (ts_gemm_epilogue_operands(k, true) == 0) return 0;
    const int mi = (k->cfg.pingpong ? k->cfg.tile_m : k->cfg.tile_m / 2) / 64, per = 512 / (8 * loads * (mi > 0 ? mi : 1));
    const int cc = loads > 2 ? 16 : per >= 64 ? 64 : per >= 32 ? 32 : 16;
    return ceil((double)k->cfg.tile_n / cc);
}

/* Threads of a block of a ROW kernel down columns, and the longest rows (in spans) it gives a thread a column
 * (row.cuh kColumnThreads, kShortColumnSpans). */
enum { COLUMN_THREADS = 512, SHORT_COLUMN_SPANS = 8 };

/* The CTAs a group of rows of a ROW kernel down columns is split over (row.cuh row_columns_cluster, the same
 * rule): the fewest of 1, 2, 4, 8 whose CTAs give 90% of two an SM, each of the 32 threads along a group's
 * positions keeping two spans of vec positions. */
static double columns_cluster(double groups, double len, int vec, double sms) {
    const double want = floor(1.8 * fmax(sms, 1)), split = 32;
    double cl = 1;
    while (cl < 8 && groups * cl < want && len >= cl * 2 * 2 * split * vec) cl *= 2;
    return cl;
}

/* The stages of ROW kernel k that read an operand it does not cache (ts_row_operand_cached): each re-reads it
 * between two of the row's reductions (run 83). */
static int uncached_stages(const ts_kernel *k) {
    int n = 0;
    for (int j = 0; j < k->nstage; j++) {
        bool reads = false;
        for (int i = 0; i < k->stage[j].n && !reads; i++)
            reads = k->stage[j].node[i].kind == TS_X_LOAD && !ts_row_operand_cached(k, k->stage[j].node[i].slot);
        n += reads;
    }
    return n;
}

static double wave_efficiency(const ts_costmodel *m, double tiles) {
    double waves = ceil(tiles / m->sms);
    return waves > 0 ? tiles / (waves * m->sms) : 1;
}

/* The elements buffer `buf` holds (its axes' sizes; a grid scratch its own count). */
static double buffer_numel(const ts_graph *g, const ts_buffer *B) {
    double n = B->ndim == 0 ? (double)B->elems : 1;
    for (int d = 0; d < B->ndim; d++) n *= (double)g->axes[B->axis[d]].size;
    return n;
}

/* The share of access i's bytes that comes from DRAM: 1, unless several accesses of k read its buffer and together
 * more elements than it holds — overlapping views (a pool's taps, each window's tap j a strided slice; x beside a
 * view of itself) — whose reads beyond the buffer's own bytes hit the caches: each then counts the buffer's
 * elements over their sum, and none is charged as strided (together they use every line they fetch). */
static double shared_buffer_share(const ts_graph *g, const ts_plan *p, const ts_kernel *k, int i) {
    double sum = 0;
    int n = 0;
    for (int j = 0; j < k->nacc; j++)
        if (k->acc[j].buf == k->acc[i].buf) sum += ts_access_numel(g, &k->acc[j]), n++;
    const double have = buffer_numel(g, &p->buf[k->acc[i].buf]);
    return n > 1 && have > 0 && sum > have ? have / sum : 1;
}

void ts_costmodel_work(const ts_costmodel *m, const ts_graph *g, const ts_plan *p, const ts_kernel *k,
                       ts_kernel_work *w) {
    double out = ts_access_numel(g, &k->out); /* the output space (an append's MAP writes one slice of its buffer) */
    double bytes = out * ts_dtype_bytes(p->buf[k->out.buf].dtype), fma = 0, sfu = 0, tensor = 0, wave = 1, strided_b = 0,
           epilogue = 0, epilogue_sfu = 0, score_sfu = 0, score_loads = 0, score_row_loads = 0, tile_waves = 0, rowstat_stages = 0, publish = 0, scores_of = 0, fn_ops = 0,
           row_stage_loads = 0, row_grid_barriers = 0, simt = 0, epilogue_chunks = 0, reduce_pairs = 0, column_folds = 0, column_positions = 0;
    bool skinny = false, long_rows = false;
    const bool library = k->kind == TS_KERNEL_GEMM && k->cfg.library; /* cuBLASLt runs it */
    const bool tf32x3 = k->kind == TS_KERNEL_GEMM && k->cfg.tf32x3 && !library; /* gemm_f32.cuh: any layout, pipelined */
    const int loader = k->kind != TS_KERNEL_GEMM || tf32x3 ? 16 : library ? library_alignment_bytes(k)
                                                 : gemm_loader_bytes(k); /* < 16: the mma.sync fallback */
    int32_t fast = fast_axis(k);
    for (int i = 0; i < k->nacc; i++) {
        const double share = shared_buffer_share(g, p, k, i), b = ts_access_bytes(g, p, &k->acc[i]) * share;
        bytes += b;
        if (fast >= 0 && strided(k, &k->acc[i], fast) && share == 1) strided_b += b; /* overlapping views together
                                                                                      * use every line they fetch */
    }
    /* a ROW kernel's expressions as emitted: its cached operands' prologues taken out (no copies for the others) */
    const bool row = k->kind == TS_KERNEL_ROW;
    ts_row_hoisted hoisted = {0};
    if (row) ts_row_hoist(k, &hoisted);
    if (k->kind != TS_KERNEL_ATTENTION) expr_ops(row ? &hoisted.expr : &k->expr, &fma, &sfu); /* attention: per score, below */
    fma *= out, sfu *= out;
    if (k->kind == TS_KERNEL_ROW || k->kind == TS_KERNEL_MAP) { /* extra outputs: each written once, its
                                                                  * expression evaluated per element it writes */
        for (int o = 0; o < k->nextra; o++) {
            double f = 0, s = 0, n = ts_access_numel(g, &k->extra_out[o]);
            expr_ops(row ? &hoisted.extra_expr[o] : &k->extra_expr[o], &f, &s);
            fma += f * n, sfu += s * n;
            bytes += n * ts_dtype_bytes(p->buf[k->extra_out[o].buf].dtype);
        }
    }
    switch (k->kind) {
    case TS_KERNEL_MAP: break;
    case TS_KERNEL_ROW: { /* each stage evaluated at every element of the row space */
        double f = 0, s = 0, space = out * (k->per_row ? size_of(g, k->red_axis) : 1);
        for (int j = 0; j < k->nstage; j++) f += 1, expr_ops(&hoisted.stage[j], &f, &s);
        for (int i = 0; i < k->nacc; i++) expr_ops(&hoisted.prologue[i], &f, &s); /* once an element as it is loaded */
        fma += f * space, sfu += s * space;
        const double rows = k->per_row ? out : out / size_of(g, k->red_axis);
        if (k->columns) { /* down columns: nothing cached, a pass over the operands per stage and for the outputs */
            double in = 0;
            for (int i = 0; i < k->nacc; i++) in += ts_access_bytes(g, p, &k->acc[i]);
            bytes += in * (k->nstage + (k->per_row ? 0 : 1) - 1);
            /* launch_row_columns (row.cuh) wants two CTAs an SM: 32 rows a block where that fills them, else
             * 16 with the positions split over a cluster of up to 8 CTAs (row_columns_cluster, mirrored
             * here; sm_90+, as the calibrated GPU is). SMs without a CTA and the idle lanes of a block whose
             * group has fewer rows do not stream (run 40: 3 columns of 100,000 in one 8-column block, 116 us
             * for 600 KB; run 113: in a cluster of eight 16-column CTAs, 34 us) */
            const int vec = ts_kernel_span_vec(p, k);
            const double len = size_of(g, k->red_axis), spans = ceil(len / vec);
            /* short rows down columns enough for every SM (row.cuh short_column_cols): a thread a column for rows
             * of at most 8 spans where 512 columns a CTA fill the SMs, else for rows of at most 8 spans 1, 2, 4 or 8
             * threads a column (the fewest that cover its spans), the rest of the block's threads further columns.
             * Each column's fixed work and each position's scalar load are paid besides the bytes (run 165). */
            const double split_short = spans <= 1 ? 1 : spans <= 2 ? 2 : spans <= 4 ? 4 : spans <= 8 ? 8 : 0;
            const double short_cols = spans <= SHORT_COLUMN_SPANS && rows >= COLUMN_THREADS * m->sms ? COLUMN_THREADS
                                      : split_short > 0                                          ? COLUMN_THREADS / split_short
                                                                                                 : 0;
            if (short_cols > 0 && rows >= short_cols * m->sms) {
                const double groups = ceil(rows / short_cols);
                wave = fmin(1, groups / (2.0 * m->sms)) * rows / (groups * short_cols);
                column_folds = rows, column_positions = rows * len;
            } else {
                const double cols = rows >= 64.0 * m->sms ? 32 : 16, groups = ceil(rows / cols);
                const double cl = cols == 32 ? 1 : columns_cluster(groups, len, vec, m->sms);
                /* less a last group's idle lanes, and the threads of a column past its spans (a CTA's share of them:
                 * run 163, 16 threads a column over rows of one span, 19-24x the time of a full block) */
                const double split = COLUMN_THREADS / cols, busy = fmin(1, spans / (cl * split));
                wave = fmin(1, groups * cl / (2.0 * m->sms)) * rows / (groups * cols) * busy;
            }
        } else {
            row_stage_loads = uncached_stages(k) * ceil(rows / m->sms);
            /* rows longer than a block caches (templates/row.cuh launch_row): a pass over the cached operands
             * per stage (a maximum and the sum of exponentials after it in one: row.cuh kOnline) and one for the
             * outputs, re-read through L2 at about the DRAM rate — or, as row_split,
             * each row over a cluster of blocks, measured as fast or slower for many rows (run 152: its stages
             * wait on cluster barriers), so both are priced alike and tune times them. Fewer rows than SMs take
             * clusters (ts_config_row_cluster) and stream through rows × blocks SMs. */
            const double len = size_of(g, k->red_axis);
            const bool few = rows < m->sms && ts_config_row_cluster(g, p, k, m->sms) > 1; /* cached by a cluster */
            const bool passes = len > (double)ts_config_row_block_len(p, k) && !few;
            if (passes) {
                double cached = 0;
                for (int i = 0; i < k->nacc; i++)
                    if (ts_row_operand_cached(k, i)) cached += ts_access_bytes(g, p, &k->acc[i]);
                bytes += cached * (ts_row_uncached_passes(k) - 1);
            }
            wave = ts_config_row_sm_share(g, p, k, m->sms) * ts_config_row_lane_share(g, p, k);
            /* passes over however few rows (a block, a cluster or a cooperative grid's blocks a row) stream as over
             * many long rows (run 168: 16 rows of 4M over clusters of 4 in passes, 0.580 ms on an H100, 0.311
             * predicted without row_long_efficiency); a grid's stages each end at a grid barrier (row.cuh
             * launch_row_grid) */
            long_rows = passes || ts_config_row_long(g, p, k, m->sms);
            if (ts_config_row_grid_parts(g, p, k, m->sms) > 0) row_grid_barriers = k->nstage;
        }
        break;
    }
    case TS_KERNEL_REDUCE: {
        double len = size_of(g, k->red_axis), f = 1, s = 0;
        expr_ops(&k->inner, &f, &s);
        expr_ops(&k->inner_weighted, &f, &s);
        if (k->combine == TS_COMBINE_WSUM) s += 1, f += 4;
        fma += f * out * len, sfu += s * out * len;
        /* launch_reduce (reduce.cuh): a block per output for few long rows, else 8 outputs a block; as for
         * rows down columns, fewer than two blocks an SM leave SMs idle (not measured for this kernel) */
        double blocks = len >= 1024 && out <= 64.0 * m->sms ? out : ceil(out / 8);
        wave = fmin(1, blocks / (2.0 * m->sms));
        if (reduce_rereads(g, k)) reduce_pairs = out * len;
        break;
    }
    case TS_KERNEL_GEMM: {
        double M = (double)ts_gemm_rows(g, k), N = size_of(g, k->n_axis), K = size_of(g, k->red_axis);
        if (k->row_parts) { /* the product's rows reduced in the epilogue (rowstat.h): per element the value and
                             * each reduction's term; per tile and row its results out and back in (a merge kernel) */
            double f = 0, s = 0, elems = M * N * (double)ts_gemm_batch(g, k);
            expr_ops(&k->pre, &f, &s);
            for (int j = 0; j < k->nstage; j++) f += 1, expr_ops(&k->stage[j], &f, &s);
            fma += f * elems, sfu += s * elems;
            bytes += 2.0 * M * (double)ts_gemm_batch(g, k) * ceil(N / k->cfg.tile_n) * k->nstage * 4;
        }
        epilogue = fma, epilogue_sfu = sfu; /* the expression's work so far is the epilogue's (op_cost) */
        if (k->two_k) K += 64 * ceil(size_of(g, k->red_axis2) / 64); /* the second pair's K-slices, padded */
        double batch = (double)ts_gemm_batch(g, k);
        tensor = 2 * M * N * K * batch * (k->b1 >= 0 ? 2 : 1);
        if (library && ts_gemm_fp32(p, k)) simt = tensor, tensor = 0; /* cuBLASLt's SGEMM: the CUDA cores */
        /* operands and result move once: tiles are rasterised so that re-reads hit L2 (an L2-overflow
         * re-read factor predicted 5-20x too much for large GEMMs on the H200: bench/NOTES.md run 9) */
        skinny = ts_config_gemm_skinny(g, k); /* config.h */
        if (skinny) { /* bandwidth-bound: the share of SMs its CTAs keep streaming; MMAs over whole row tiles */
            double rows = ceil(M / k->cfg.sk_tile_m), chunks = fmax(1, k->cfg.sk_chunks);
            wave = fmin(1, rows * ceil(N / k->cfg.sk_tile_n) * batch * fmax(1, k->cfg.sk_split) * chunks / m->sms);
            /* split-K through memory: each chunk's fp32 sums written, then read back by the kernel that adds them
             * (gemm.cuh split_k_sum_kernel, one more launch) */
            if (chunks > 1) bytes += 2 * chunks * (k->b1 >= 0 ? 2 : 1) * M * N * batch * 4;
            tensor *= rows * k->cfg.sk_tile_m / fmax(M, 1);
        } else {
            /* operands not 16-byte chunked: the mma.sync kernel runs (no TMA), in its own tiles */
            bool fallback = loader < 16;
            double tiles = ceil(M / (fallback ? k->cfg.fb_tile_m : k->cfg.tile_m)) *
                           ceil(N / (fallback ? k->cfg.fb_tile_n : k->cfg.tile_n)) * batch;
            const double chunks = tf32x3 ? fmax(1, k->cfg.sk_chunks) : 1; /* split-K through memory too */
            const double ctas = tiles * (tf32x3 ? fmax(1, k->cfg.sk_split) : 1) * chunks; /* gemm_f32.cuh's split-K */
            if (chunks > 1) bytes += 2 * chunks * (k->b1 >= 0 ? 2 : 1) * M * N * batch * 4; /* the chunks' sums */
            wave = wave_efficiency(m, ctas) * (tf32x3 ? ts_config_f32_warp_share(k, ctas, m->sms) : 1);
            tile_waves = ceil(ctas / m->sms);
            /* gemm_f32.cuh's 3xTF32 MMAs run over whole tiles, padding included: a lone CTA an SM issues its
             * MMAs back to back (16 tiles of 64x64 at M = 16: 25.9 us, 11.2 predicted from the valid rows alone;
             * 8 tiles of 128x128 at N = 65: 57.1 us, 33.6 predicted; bench/NOTES.md run 137). The wgmma kernel's
             * lone CTAs wait on their loads instead, and its padding stays unpriced (256x65 over 2048 in 4 tiles
             * of 128x64: 10.1 us, 10.6 predicted). */
            if (tf32x3) tensor *= tiles * k->cfg.tile_m * k->cfg.tile_n / fmax(M * N * batch, 1);
            /* the epilogue's per-row loads: every tile's in the cooperative form, the last one's in ping-pong */
            if (!fallback && !library && !tf32x3) epilogue_chunks = epilogue_load_chunks(k) * (k->cfg.pingpong ? 1 : tile_waves);
        }
        if (k->nstage > 0 && !k->row_parts) { /* row statistics of A (rowstat.h) */
            /* the wgmma kernel's grid reads A's rows once more and publishes them (gemm_sm90.cuh); the mma.sync
             * kernels fold them from their tiles, every CTA along N its rows' terms */
            const bool published = !skinny && loader == 16;
            double terms = 0, s = 0, copies = published ? 1 : ceil(N / (skinny ? k->cfg.sk_tile_n : k->cfg.tile_n));
            for (int j = 0; j < k->nstage; j++) terms += 1, expr_ops(&k->stage[j], &terms, &s);
            fma += terms * M * K * batch * copies, sfu += s * M * K * batch * copies;
            if (published) { /* A read again, once over the grid (a broadcast A: its one copy) */
                publish = M * K * 2 * (k->batch_axis >= 0 && ts_access_stride(&k->acc[k->a], k->batch_axis).n ? batch : 1);
                bytes += publish;
            }
            if (!skinny && !published) rowstat_stages = ceil(K / 64) * tile_waves;
        }
        break;
    }
    case TS_KERNEL_ATTENTION: {
        double tq = size_of(g, k->m_axis), tkv = size_of(g, k->red_axis), heads = 1;
        const bool decode = ts_config_attention_decode(g, k);
        const int64_t head = (int64_t)size_of(g, k->n_axis);
        /* the head dim padded to its kernel's (its MMAs): the decode form's or the tiled kernel's */
        const double d = (double)(decode ? ts_config_attention_decode_dim(head) : ts_config_attention_kernel_dim(head));
        for (int h = 0; h < k->heads_ndim; h++) heads *= size_of(g, k->head_axis[h]);
        if (k->batch_axis >= 0) heads *= size_of(g, k->batch_axis); /* a batch of sequences */
        double longest = 1; /* the longest query tile's share of the keys (causal: all of them) */
        double frac = k->causal ? (!decode && k->windowed ? window_share(k, tq, tkv, &longest) : 0.5) : 1;
        /* the tiled kernel computes whole 128-row query tiles, padding rows included (a 4-row query: 32x its
         * rows' work, run 103); the decode form's 16-row tiles are counted below */
        const double rows = decode ? tq : ceil(tq / k->cfg.tile_m) * k->cfg.tile_m;
        double scores = heads * rows * tkv * frac, f = 0, s = 0;
        tensor = 4 * scores * d;
        score_ops(&k->expr, &f, &s);
        fma += f * scores, sfu += (1 + s) * scores; /* the score, then one exp2 of the online softmax */
        score_sfu = s * scores;
        score_loads = score_loads_along(k, true) * scores;
        score_row_loads = score_loads_along(k, false) * scores;
        scores_of = scores;
        fn_ops = decode ? 0 : scores * score_fn_ops_per_score(k, tkv, d);
        if (decode) { /* few rows a head: the cache streams through split CTAs */
            double units = ceil(tq / k->cfg.dec_rows) * heads;
            skinny = true; /* bandwidth-bound at a share of the SMs, MMAs over whole 16-row tiles */
            wave = fmin(1, units * ts_config_attention_split(units, tkv, (int)m->sms) / m->sms);
            tensor *= ceil(tq / k->cfg.dec_rows) * k->cfg.dec_rows / fmax(tq, 1);
        } else {
            /* a causal kernel's query tiles see 1 to all key tiles, the longest scheduled first: it lasts at
             * least as long as its longest tile (every key; a window's span), so under two waves of tiles the
             * skip saves little (run 78: 128 tiles of a sliding window without its skip ran 0.0476 ms, as long
             * as the same attention unmasked) */
            const double units = ceil(tq / k->cfg.tile_m) * heads;
            wave = wave_efficiency(m, units);
            if (k->causal) wave = fmin(wave, frac * units / (m->sms * longest));
        }
        break;
    }
    }
    *w = (ts_kernel_work){.kind = k->kind, .tensor_flops = tensor, .fma_flops = fma, .sfu_ops = sfu,
                          .bytes = bytes, .strided_bytes = strided_b, .wave_efficiency = wave, .epilogue_slots = epilogue,
                          .epilogue_sfu_ops = epilogue_sfu,
                          .score_sfu_ops = score_sfu, .score_loads = score_loads, .score_row_loads = score_row_loads, .tile_waves = tile_waves, .skinny = skinny,
                          .pingpong = k->kind == TS_KERNEL_GEMM && !skinny && !library && loader == 16 && k->cfg.pingpong,
                          .scores = scores_of, .score_fn_ops = fn_ops, .whole_tiles = k->kind == TS_KERNEL_ATTENTION && !skinny && !k->causal,
                          .key64 = k->kind == TS_KERNEL_ATTENTION && !skinny && k->cfg.tile_n == 64,
                          .tile64 = k->kind == TS_KERNEL_GEMM && !skinny && !library && !tf32x3 && loader == 16 && k->b1 < 0 &&
                                    k->cfg.tile_n == 64,
                          .tf32x3 = tf32x3, .f32_wgmma = tf32x3 && k->cfg.f32_wgmma, .library = library, .simt_gemm_flops = simt,
                          .columns = k->kind == TS_KERNEL_ROW && k->columns, .long_rows = long_rows,
                          .unchunked = loader == 0, .paired = loader == 4,
                          .rowstat_stages = rowstat_stages, .rowstat_publish_bytes = publish, .row_stage_loads = row_stage_loads, .row_grid_barriers = row_grid_barriers,
                          .column_folds = column_folds, .column_positions = column_positions,
                          .epilogue_chunks = epilogue_chunks, .reduce_pairs = reduce_pairs,
                          .extra_launches = ts_kernel_launches(k) - 1};
    ts_row_hoisted_free(&hoisted);
}

double ts_costmodel_efficiency(const ts_costmodel *m, ts_kernel_kind kind) {
    switch (kind) {
    case TS_KERNEL_GEMM: return m->gemm_efficiency;
    case TS_KERNEL_ATTENTION: return m->attention_efficiency;
    case TS_KERNEL_REDUCE: return m->reduce_efficiency;
    case TS_KERNEL_ROW: return m->row_efficiency;
    default: return m->map_efficiency;
    }
}

/* A GEMM epilogue's time: its FMA-pipe slots (an issue slot is one FMA, half of fma_flops_per_s's two FLOPs) or
 * its MUFU ops at sfu_ops_per_s, whichever pipe is busier, at epilogue_efficiency of that rate, on the SMs its
 * tiles occupy (with fewer tiles than SMs, that share of them; a last partial wave's SMs wait for the busiest). */
static double epilogue_time(const ts_costmodel *m, const ts_kernel_work *w) {
    if (!(w->epilogue_slots > 0) && !(w->epilogue_sfu_ops > 0)) return 0;
    const double busiest = fmax(w->epilogue_slots / (0.5 * m->fma_flops_per_s), w->epilogue_sfu_ops / m->sfu_ops_per_s);
    return busiest / (m->epilogue_efficiency * fmax(w->wave_efficiency, 1e-3));
}

double ts_costmodel_time(const ts_costmodel *m, const ts_kernel_work *w) {
    double eff = w->unchunked ? m->gemm_elementwise_efficiency
                 : w->paired  ? m->gemm_paired_efficiency
                 : w->skinny  ? m->skinny_tensor_efficiency
                 : w->columns ? m->columns_efficiency
                 : w->library ? m->cublas_efficiency
                 : w->tf32x3  ? m->gemm_tf32x3_efficiency
                              : ts_costmodel_efficiency(m, w->kind);
    bool matrix = w->kind == TS_KERNEL_GEMM || w->kind == TS_KERNEL_ATTENTION;
    double form = w->pingpong ? m->gemm_pingpong_efficiency : w->whole_tiles ? m->attention_whole_tiles_ratio : 1;
    if (w->key64) form *= m->attention_key64_ratio;
    if (w->tile64) form *= m->gemm_tile64_ratio;
    if (w->f32_wgmma) form *= m->gemm_f32_wgmma_ratio;
    double t = w->tensor_flops / (m->tensor_flops_per_s * eff * w->wave_efficiency * form);
    t = fmax(t, w->scores / m->attention_scores_per_s + w->score_fn_ops / m->attention_score_ops_per_s);
    t = fmax(t, w->fma_flops / (m->fma_flops_per_s * (w->kind == TS_KERNEL_GEMM ? 1 : eff)));
    t = fmax(t, w->sfu_ops / m->sfu_ops_per_s);
    t = fmax(t, w->simt_gemm_flops / (m->fma_flops_per_s * m->cublas_fp32_efficiency * w->wave_efficiency));
    double bytes = w->bytes - w->strided_bytes + w->strided_bytes / m->strided_efficiency;
    double bw_eff = w->skinny    ? m->skinny_gemm_efficiency * w->wave_efficiency
                    : w->long_rows ? eff * w->wave_efficiency * m->row_long_efficiency
                    : w->columns || w->kind == TS_KERNEL_REDUCE || w->kind == TS_KERNEL_ROW ? eff * w->wave_efficiency
                    : matrix     ? 1
                                 : eff;
    t = fmax(t, bytes / (m->dram_bytes_per_s * bw_eff));
    t = fmax(t, w->reduce_pairs / m->reduce_pairs_per_s);
    t = fmax(t, (w->column_folds * m->column_fold_s + w->column_positions * m->column_position_s) / m->sms);
    const double main_loop = t;
    double epilogue = epilogue_time(m, w);
    if (w->pingpong) /* each tile's epilogue beside the next tile's main loop, partly hidden; one pipeline fill */
        t = fmax(t, epilogue) + m->gemm_pingpong_epilogue_share * fmin(t, epilogue) + epilogue / fmax(w->tile_waves, 1) +
            m->gemm_wave_overhead_s;
    else if (w->library) /* cuBLASLt's bias + GELU epilogue ran at its plain GEMM's rate: hidden (run 121) */
        t = fmax(t, epilogue) + w->tile_waves * m->gemm_wave_overhead_s;
    else
        t += epilogue + w->tile_waves * m->gemm_wave_overhead_s;
    if (w->score_sfu_ops > 0) t += w->score_sfu_ops / m->sfu_ops_per_s;
    if (w->score_loads > 0) t += w->score_loads / m->score_loads_per_s;
    if (w->score_row_loads > 0) t += w->score_row_loads / m->score_row_loads_per_s;
    t += w->rowstat_stages * m->rowstat_stage_s + w->row_stage_loads * m->row_stage_load_s +
         w->row_grid_barriers * m->row_grid_barrier_s;
    if (w->rowstat_publish_bytes > 0) /* the first epilogue waits for the grid's published rows past its main loop */
        t += fmax(0, w->rowstat_publish_bytes / (m->dram_bytes_per_s * m->rowstat_publish_efficiency) - main_loop / fmax(w->tile_waves, 1));
    t += w->epilogue_chunks * m->epilogue_chunk_load_s;
    return m->launch_s * (1 + w->extra_launches) + t;
}

void ts_costmodel_predict(const ts_costmodel *m, const ts_graph *g, ts_plan *p) {
    p->predicted_s = 0;
    for (int i = 0; i < p->nk; i++) {
        ts_kernel_work w;
        ts_costmodel_work(m, g, p, &p->k[i], &w);
        p->k[i].predicted_s = ts_costmodel_time(m, &w);
        p->predicted_s += p->k[i].predicted_s;
    }
}
