/* test_row.c — ROW kernels outside the planner: a hand-built plan of one ROW kernel (a residual sum and
 * its LayerNorm with a gain: 2 stages, 2 outputs) emitted against stub templates and compared with a golden
 * header, malformed ROW kernels refused with exact messages, the cost model's work and efficiency for it,
 * and the header emitted with the real templates compiled by nvcc for sm_80 and sm_90a. Regenerate the
 * golden file with TSOPT_REGEN_GOLDEN=1. */
#include <stdio.h>
#include <unistd.h>

#include "config.h"
#include "costmodel.h"
#include "emit.h"
#include "plan.h"
#include "rowstat.h"
#include "testutil.h"
#include "workspace.h"

#define ROW_YAML "tests/golden/row_plan.yaml"
#define ROW_CUH "tests/golden/row_plan.cuh"

/* ---- building the plan ----------------------------------------------------------------------------- */

static int32_t push(ts_expr *x, ts_xnode n) {
    if (x->n == x->cap) {
        x->cap = x->cap ? 2 * x->cap : 16;
        x->node = realloc(x->node, sizeof *x->node * (size_t)x->cap);
    }
    x->node[x->n] = n;
    return x->n++;
}
static int32_t load(ts_expr *x, int slot) { return push(x, (ts_xnode){.kind = TS_X_LOAD, .slot = slot}); }
static int32_t acc(ts_expr *x, int slot) { return push(x, (ts_xnode){.kind = TS_X_ACC, .slot = slot}); }
static int32_t cst(ts_expr *x, double v) { return push(x, (ts_xnode){.kind = TS_X_CONST, .value = v}); }
static int32_t op1(ts_expr *x, ts_op op, int32_t a) { return push(x, (ts_xnode){.kind = TS_X_OP, .op = op, .kid = {a}}); }
static int32_t op2(ts_expr *x, ts_op op, int32_t a, int32_t b) {
    return push(x, (ts_xnode){.kind = TS_X_OP, .op = op, .kid = {a, b}});
}

/* (x + r) − acc0 / d: the centred residual sum. */
static int32_t centred(ts_expr *x, double d) {
    int32_t xs = load(x, 0), rs = load(x, 1), h = op2(x, TS_OP_ADD, xs, rs);
    int32_t m = acc(x, 0), c = cst(x, -1 / d);
    return op2(x, TS_OP_ADD, h, op2(x, TS_OP_MUL, m, c));
}

static int32_t axis_named(const ts_graph *g, const char *name) {
    for (int a = 0; a < g->naxes; a++)
        if (!strcmp(g->axes[a].name, name)) return a;
    cr_assert_fail("no axis %s", name);
    return -1;
}

/* An access over [t, d] (row-major) or [d] of buffer b. */
static ts_access access_of(int buf, int32_t t, int32_t d, int64_t dlen, bool rows) {
    ts_access a = {.buf = buf, .offset = ts_sym_const(0)};
    if (rows) a.axis[a.ndim] = t, a.stride[a.ndim++] = ts_sym_const(dlen);
    a.axis[a.ndim] = d, a.stride[a.ndim++] = ts_sym_const(1);
    return a;
}

/* H = X + R; Y = (H − mean) · rsqrt(var + eps) · g over d, as one ROW kernel: stage 0 Σ (x + r),
 * stage 1 Σ ((x + r) − acc0/d)², outputs H and Y. */
static void row_plan(const ts_graph *g, ts_plan *p) {
    int32_t t = axis_named(g, "t"), d = axis_named(g, "d");
    double n = (double)g->axes[d].size;
    memset(p, 0, sizeof *p);
    p->name = ts_strdup("hand-built row");
    p->nbuf = p->cap_buf = 5;
    p->buf = calloc(5, sizeof *p->buf);
    const ts_buf_kind kinds[5] = {TS_BUF_INPUT, TS_BUF_INPUT, TS_BUF_INPUT, TS_BUF_OUTPUT, TS_BUF_OUTPUT};
    const int index[5] = {0, 1, 2, 0, 1};
    for (int b = 0; b < 5; b++) {
        bool rows = b != 2;
        p->buf[b] = (ts_buffer){.kind = kinds[b], .index = index[b], .dtype = TS_FP16, .ndim = rows ? 2 : 1};
        p->buf[b].axis[0] = rows ? t : d, p->buf[b].axis[1] = d;
    }
    p->nk = p->cap_k = 1;
    p->k = calloc(1, sizeof *p->k);
    ts_kernel *k = &p->k[0];
    k->kind = TS_KERNEL_ROW;
    k->red_axis = d, k->m_axis = k->n_axis = k->batch_axis = -1;
    k->a = k->b0 = k->b1 = -1;
    k->nacc = k->cap_acc = 3;
    k->acc = calloc(3, sizeof *k->acc);
    for (int s = 0; s < 3; s++) k->acc[s] = access_of(s, t, d, (int64_t)n, s != 2);
    k->out = access_of(3, t, d, (int64_t)n, true);
    k->nextra = 1;
    k->extra_out[0] = access_of(4, t, d, (int64_t)n, true);
    k->nstage = 2;
    k->stage_combine[0] = k->stage_combine[1] = TS_COMBINE_SUM;
    int32_t xs = load(&k->stage[0], 0), rs = load(&k->stage[0], 1);
    op2(&k->stage[0], TS_OP_ADD, xs, rs);
    int32_t c = centred(&k->stage[1], n);
    op2(&k->stage[1], TS_OP_MUL, c, c);
    xs = load(&k->expr, 0), rs = load(&k->expr, 1);
    op2(&k->expr, TS_OP_ADD, xs, rs);
    ts_expr *y = &k->extra_expr[0];
    c = centred(y, n);
    int32_t sq = acc(y, 1), inv_n = cst(y, 1 / n), mean_sq = op2(y, TS_OP_MUL, sq, inv_n), eps = cst(y, 1e-5);
    int32_t scale = op1(y, TS_OP_RECIP, op1(y, TS_OP_SQRT, op2(y, TS_OP_ADD, mean_sq, eps)));
    int32_t normed = op2(y, TS_OP_MUL, c, scale), gain = load(y, 2);
    op2(y, TS_OP_MUL, normed, gain);
}

typedef struct {
    ts_spec spec;
    ts_graph g;
    ts_costmodel cm;
    ts_plan p;
} fixture;

/* f's graph with t (typical) and d at the given sizes (0: the YAML's), its hand-built plan, predicted. */
static void fixture_load_sized(fixture *f, int64_t t, int64_t d_len) {
    ts_diags d;
    cr_assert_eq(ts_spec_load(&f->spec, ROW_YAML, &d), 0);
    cr_assert_eq(ts_check(&f->spec, NULL, &f->g, &d), 0);
    ts_diags_free(&d);
    cr_assert_eq(ts_costmodel_load(&f->cm, "costmodel/h200.yaml", &d), 0);
    ts_diags_free(&d);
    if (t) f->g.axes[axis_named(&f->g, "t")].size = t;
    if (d_len) f->g.axes[axis_named(&f->g, "d")].size = d_len;
    row_plan(&f->g, &f->p);
    ts_costmodel_predict(&f->cm, &f->g, &f->p);
}

static void fixture_load(fixture *f) { fixture_load_sized(f, 0, 0); }

static void fixture_free(fixture *f) {
    ts_plan_free(&f->p);
    ts_costmodel_free(&f->cm);
    ts_graph_free(&f->g);
    ts_spec_free(&f->spec);
}

/* The header of f's plan with the templates in `templates`; NULL and *err when the emitter refuses. */
static char *emit(fixture *f, const char *templates, char **err) {
    ts_emit_opts eo = {.source_path = ROW_YAML, .source_text = f->spec.text, .source_len = f->spec.len,
                       .templates_dir = templates, .cost_model = &f->cm, .baseline_s = f->p.predicted_s};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    int rc = ts_emit_header(out, &f->g, &f->p, &eo, err);
    fclose(out);
    if (rc == 0) return buf;
    free(buf);
    return NULL;
}

/* ---- the emitter ----------------------------------------------------------------------------------- */

Test(row, two_stage_two_output_header_matches_the_golden_file) {
    fixture f;
    fixture_load(&f);
    char *err = NULL, *got = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(got, "%s", err);
    assert_matches_golden(got, ROW_CUH);
    /* what the golden file must show: X and R cached (they vary per row), g re-read per span */
    cr_assert_not_null(strstr(got, "static constexpr int kVec = 8, kIn = 2, kStages = 2;"));
    cr_assert_not_null(strstr(got, "tsv::load_span<kVec>(u2, p2 + b.in[2], (int64_t)1, k0, n);"));
    cr_assert_not_null(strstr(got, "tsv::store_span<kVec>(q1 + b.out[1], (int64_t)1, k0, n, y1);"));
    cr_assert_not_null(strstr(got, "err = tsw::launch_row(p, sms, stream);"));
    free(got);
    fixture_free(&f);
}

Test(row, a_run_time_stride_along_the_row_is_read_from_its_field) {
    fixture f;
    fixture_load(&f);
    ts_dyn dyn;
    cr_assert_eq(ts_dyn_of(&f.g, &dyn), 0);
    f.p.k[0].acc[0].stride[1] = ts_sym_axis(&f.g, &dyn, f.p.k[0].acc[0].axis[0]); /* X read down a [d, t] column */
    char *err = NULL, *got = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(got, "%s", err);
    cr_assert_not_null(strstr(got, "tsv::load_span<kVec>(x[0], p0 + b.in[0], s0[1], k0, n);"), "%s", got);
    cr_assert_not_null(strstr(got, "tsv::load_span<kVec>(x[1], p1 + b.in[1], (int64_t)1, k0, n);"));
    cr_assert_not_null(strstr(got, "p.fn.s0[1] = t;"), "%s", got);
    free(got);
    fixture_free(&f);
}

static void softmax_of_fn(fixture *f, bool direct);

/* The header of f's plan with its cached operands X and R (buffers 0 and 1) of dtypes dx and dr. */
static char *header_with_cached_dtypes(ts_dtype dx, ts_dtype dr) {
    fixture f;
    fixture_load(&f);
    f.p.buf[f.p.k[0].acc[0].buf].dtype = dx;
    f.p.buf[f.p.k[0].acc[1].buf].dtype = dr;
    char *err = NULL, *got = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(got, "%s", err);
    fixture_free(&f);
    return got;
}

Test(row, cached_16_bit_operands_are_kept_two_to_a_register_where_all_share_a_type_and_keep_their_loaded_value) {
    const struct {
        ts_dtype x, r;
        const char *want; /* NULL: no kCache16 line */
    } cases[] = {{TS_FP16, TS_FP16, "static constexpr int kCache16 = 1; /* its fp16 operands"},
                 {TS_BF16, TS_BF16, "static constexpr int kCache16 = 2; /* its bf16 operands"},
                 {TS_FP16, TS_BF16, NULL},
                 {TS_FP32, TS_FP16, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = header_with_cached_dtypes(cases[i].x, cases[i].r);
        if (cases[i].want) cr_assert_not_null(strstr(got, cases[i].want), "case %zu", i);
        else cr_assert_null(strstr(got, "kCache16"), "case %zu: mixed or fp32 operands stay floats", i);
        free(got);
    }
    /* a prologue (work every reader does as X is loaded) changes the cached values: floats */
    fixture f;
    fixture_load(&f);
    softmax_of_fn(&f, false);
    char *err = NULL, *got = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(got, "%s", err);
    cr_assert_not_null(strstr(got, "/* its prologue, once an element */"));
    cr_assert_null(strstr(got, "kCache16"));
    free(got);
    fixture_free(&f);
}

/* Emits f's plan after `change` and returns the emitter's error. */
static char *refusal(void (*change)(ts_kernel *)) {
    fixture f;
    fixture_load(&f);
    ts_kernel saved = f.p.k[0]; /* the changes touch fields only, never what the plan owns */
    change(&f.p.k[0]);
    char *err = NULL, *h = emit(&f, "tests/golden/templates", &err);
    cr_assert_null(h, "emitted a malformed ROW kernel");
    f.p.k[0] = saved; /* so that ts_plan_free sees a well-formed kernel */
    fixture_free(&f);
    return err;
}
static void no_stages(ts_kernel *k) { k->nstage = 0; }
static void five_outputs(ts_kernel *k) { k->nextra = 4; }
static void wsum_stage(ts_kernel *k) { k->stage_combine[1] = TS_COMBINE_WSUM; }
static void row_axis_not_out(ts_kernel *k) { k->red_axis = k->acc[0].axis[0] + 100; }
static void extra_other_axes(ts_kernel *k) { k->extra_out[0].buf = 2; }

Test(row, malformed_row_kernels_are_refused_with_the_reason) {
    const struct {
        void (*change)(ts_kernel *);
        const char *want;
    } cases[] = {
        {no_stages, "kernel 0: a ROW kernel needs 1 to 4 stages, not 0"},
        {five_outputs, "kernel 0: a ROW kernel writes 1 to 4 outputs, not 5"},
        {wsum_stage, "kernel 0: stage 1 of a ROW kernel combines by sum or max only"},
        {row_axis_not_out, "kernel 0: the row axis is not an axis of the ROW kernel's output"},
        {extra_other_axes, "kernel 0: output 1 of a ROW kernel spans other axes than its first"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *err = refusal(cases[i].change);
        cr_assert_str_eq(err, cases[i].want);
        free(err);
    }
}

/* ---- the cost model -------------------------------------------------------------------------------- */

Test(row, cost_model_counts_each_output_once_and_each_stage_per_element) {
    fixture f;
    fixture_load(&f);
    ts_kernel_work w;
    ts_costmodel_work(&f.cm, &f.g, &f.p, &f.p.k[0], &w);
    const double out = 512.0 * 1024; /* t at its typical size */
    cr_assert_eq(w.kind, TS_KERNEL_ROW);
    /* X, R and both outputs at 2 bytes an element, g once */
    cr_assert_float_eq(w.bytes, 4 * out * 2 + 1024 * 2, 0);
    cr_assert_float_eq(w.strided_bytes, 0, 0);
    /* per element: H (1 add), Y (7 add/mul), stage 0 (1 + 1 add), stage 1 (1 + 4 add/mul), and the FMA-pipe
     * slots of fast_sqrt's subnormal scaling (3) and of the reciprocal's range check (4) (costmodel.c op_cost) */
    cr_assert_float_eq(w.fma_flops, (15 + 3 + 4) * out, 0);
    cr_assert_float_eq(w.sfu_ops, 2 * out, 0); /* sqrt, recip: one MUFU op each */
    cr_assert_float_eq(ts_costmodel_efficiency(&f.cm, TS_KERNEL_ROW), f.cm.row_efficiency, 0);
    cr_assert(!w.long_rows, "rows of 1024 a 256-thread block caches");
    double t = f.cm.launch_s + w.bytes / (f.cm.dram_bytes_per_s * f.cm.row_efficiency);
    cr_assert_float_eq(f.p.k[0].predicted_s, t, 1e-12 * t, "DRAM-bound at row_efficiency");
    fixture_free(&f);
}

/* Rows longer than one block of row.cuh caches (X and R: 2 operands of 8-element spans, 32 floats a thread
 * over 256 threads: 4096 positions): many rows take passes through L2 — priced as re-reading the cached
 * operands once per later stage and for the outputs — or, as the variant tune times, clusters of blocks;
 * fewer rows than SMs take clusters that fill the SMs, and stream through those SMs only. */
Test(row, long_rows_are_priced_with_their_passes_and_offered_split_over_clusters) {
    fixture f;
    /* two operands of 8192 positions: a 512-thread block a row caches them, read once; no variant */
    fixture_load_sized(&f, 512, 8192);
    ts_kernel *k = &f.p.k[0];
    ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
    cr_assert_eq(ts_config_row_block_len(&f.p, k), 16384, "1024 threads, 2 spans of 8 a thread");
    cr_assert_eq(ts_config_row_cluster(&f.g, &f.p, k, 132), 1);
    cr_assert_eq(ts_config_variants(&f.g, &f.p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS), 0);
    ts_kernel_work w;
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &w);
    cr_assert_float_eq(w.bytes, 2 * (2.0 * 512 * 8192 * 2) + 8192 * 2, 1e-6 * w.bytes, "X, R, H and Y once, g once");
    /* longer than a 256-thread block caches: at row_long_efficiency of the ROW rate (H100s, runs 152-165) */
    cr_assert(w.long_rows);
    const double t = f.cm.launch_s + w.bytes / (f.cm.dram_bytes_per_s * f.cm.row_efficiency * f.cm.row_long_efficiency);
    cr_assert_float_eq(ts_costmodel_time(&f.cm, &w), t, 1e-9 * t);
    cr_assert_lt(f.cm.row_long_efficiency, 1);
    fixture_free(&f);

    fixture_load_sized(&f, 512, 32768);
    k = &f.p.k[0];
    cr_assert_eq(ts_config_row_cluster(&f.g, &f.p, k, 132), 1, "512 rows: passes, no cluster");
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &w);
    const double in = 2.0 * 512 * 32768 * 2; /* X and R */
    /* X, R, H and Y once, g once; then X and R again for stage 1 and again for the outputs */
    cr_assert_float_eq(w.bytes, 2 * in + 32768 * 2 + 2 * in, 1e-6 * w.bytes);
    cr_assert_float_eq(w.wave_efficiency, 1, 0);

    cr_assert_eq(ts_config_variants(&f.g, &f.p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS), 1);
    cr_assert(alt[0].row_split, "the variant splits the rows over clusters");
    k->cfg = alt[0];
    cr_assert_eq(ts_config_row_cluster(&f.g, &f.p, k, 132), 8, "eight 256-thread blocks cache 32768 positions");
    ts_kernel_work split;
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &split);
    cr_assert_float_eq(split.bytes, w.bytes, 0, "priced alike: tune tells them apart");
    char *err = NULL, *hdr = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(hdr, "%s", err);
    cr_assert_not_null(strstr(hdr, "err = tsw::launch_row(p, sms, stream, true /* long rows split over clusters */);"));
    free(hdr);
    cr_assert_eq(ts_config_variants(&f.g, &f.p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS), 1);
    cr_assert(!alt[0].row_split, "and back");
    fixture_free(&f);

    /* 16 rows of 8192: 8 blocks a row (16 · 8 = 128 of 132 SMs), each row in registers: no re-read, and no
     * variant (fewer rows than SMs are split with or without row_split) */
    fixture_load_sized(&f, 16, 8192);
    k = &f.p.k[0];
    cr_assert_eq(ts_config_row_cluster(&f.g, &f.p, k, 132), 8);
    cr_assert_eq(ts_config_variants(&f.g, &f.p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS), 0);
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &w);
    cr_assert_float_eq(w.wave_efficiency, 16.0 * 8 / 132, 1e-12);
    cr_assert_float_eq(w.bytes, 2 * 2.0 * 16 * 8192 * 2 + 8192 * 2, 1e-6 * w.bytes, "read once: the clusters cache it");
    fixture_free(&f);

    /* rows a block caches get no variant; 1024 positions over 512 rows need no cluster */
    fixture_load(&f);
    cr_assert_eq(ts_config_variants(&f.g, &f.p, &f.p.k[0], false, 132, alt, TS_CONFIG_MAX_VARIANTS), 0);
    cr_assert_eq(ts_config_row_cluster(&f.g, &f.p, &f.p.k[0], 132), 1);
    fixture_free(&f);
}

/* Few rows too long for a cluster's registers (a LayerNorm over [c, h, w] of a small batch, a whole tensor's sum)
 * get a scratch for a cooperative grid (row.cuh launch_row_grid) that splits each row over every SM: priced as
 * passes over all the SMs, with a grid barrier a stage; many rows, or rows a cluster caches, get none. */
Test(row, few_rows_too_long_for_a_cluster_take_a_cooperative_grid) {
    fixture f;
    fixture_load_sized(&f, 4, 1 << 20);
    ts_kernel *k = &f.p.k[0];
    const int nbuf = f.p.nbuf;
    cr_assert(ts_config_row_grid_wanted(&f.g, &f.p, k));
    ts_plan_give_row_grid_scratch(&f.g, &f.p, 0);
    k = &f.p.k[0];
    cr_assert(k->row_grid);
    cr_assert_eq(f.p.nbuf, nbuf + 1);
    const ts_buffer *S = &f.p.buf[k->scratch];
    cr_assert(S->kind == TS_BUF_TEMP && S->dtype == TS_FP32 && S->ndim == 0 && S->elems == TS_ROW_GRID_SCRATCH_FLOATS);
    ts_dyn dyn;
    cr_assert_eq(ts_dyn_of(&f.g, &dyn), 0);
    ts_sym bytes = ts_workspace_buffer_bytes(&f.p, &f.g, &dyn, k->scratch);
    cr_assert(bytes.n == 1 && bytes.t[0].coef == 4.0 * TS_ROW_GRID_SCRATCH_FLOATS, "a fixed 64 KiB");
    cr_assert(ts_kernel_writes(k, k->scratch));
    /* 132 SMs: 33 blocks a row (4 · 33 = 132), no cluster */
    cr_assert_eq(ts_config_row_grid_parts(&f.g, &f.p, k, 132), 33);
    cr_assert_eq(ts_config_row_pass_cluster(&f.g, &f.p, k, 132), 1);
    ts_costmodel_predict(&f.cm, &f.g, &f.p);
    ts_kernel_work w;
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &w);
    cr_assert_float_eq(w.wave_efficiency, 1, 1e-12, "every SM streams");
    cr_assert(w.long_rows);
    cr_assert_float_eq(w.row_grid_barriers, k->nstage, 0);
    const double in = 2.0 * 4 * (1 << 20) * 2; /* X and R, read again for stage 1 and for the outputs */
    cr_assert_float_eq(w.bytes, 2 * in + (1 << 20) * 2 + 2 * in, 1e-6 * w.bytes);
    char *err = NULL, *hdr = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(hdr, "%s", err);
    cr_assert_not_null(strstr(hdr, "p.grid_scratch = static_cast<float *>("));
    cr_assert_not_null(strstr(hdr, "p.grid_scratch_floats = 16384;"));
    free(hdr);
    /* on 6 SMs, 4 rows are more than half: passes a block a row, as before */
    cr_assert_eq(ts_config_row_grid_parts(&f.g, &f.p, k, 6), 0);
    fixture_free(&f);

    /* t is a run-time size (its typical 512 aside): rows may be few, so any length past a cluster's gets a scratch;
     * a static t of 512 gets none (every SM has rows of its own), nor do 16 rows a cluster of 8 caches */
    fixture_load_sized(&f, 512, 1 << 20);
    cr_assert(ts_config_row_grid_wanted(&f.g, &f.p, &f.p.k[0]));
    f.g.axes[axis_named(&f.g, "t")].dynamic = false;
    cr_assert(!ts_config_row_grid_wanted(&f.g, &f.p, &f.p.k[0]));
    fixture_free(&f);
    fixture_load_sized(&f, 16, 8192);
    cr_assert(!ts_config_row_grid_wanted(&f.g, &f.p, &f.p.k[0]));
    fixture_free(&f);
}

/* ---- prologues of cached operands ------------------------------------------------------------------ */

/* f(x) = x · 1/(1 + x·x) of LOAD 0, built afresh in x (as lowering writes it into every expression). */
static int32_t prologue_fn(ts_expr *x) {
    int32_t v = load(x, 0), sq = op2(x, TS_OP_MUL, v, v), one = cst(x, 1);
    return op2(x, TS_OP_MUL, v, op1(x, TS_OP_RECIP, op2(x, TS_OP_ADD, one, sq)));
}

/* f's kernel rewritten as a softmax of f(X) scaled by g: stage 0 max f(x), stage 1 Σ (f(x) − acc0), output
 * (f(x) − acc0) / acc1 · g; `direct`: the output also reads x itself, so that no prologue may replace it. */
static void softmax_of_fn(fixture *f, bool direct) {
    ts_kernel *k = &f->p.k[0];
    for (int j = 0; j < k->nstage; j++) k->stage[j].n = 0;
    k->expr.n = 0;
    free(k->extra_expr[0].node);
    k->extra_expr[0] = (ts_expr){0};
    k->nextra = 0;
    k->stage_combine[0] = TS_COMBINE_MAX;
    prologue_fn(&k->stage[0]);
    ts_expr *s1 = &k->stage[1], *y = &k->expr;
    op2(s1, TS_OP_ADD, prologue_fn(s1), op2(s1, TS_OP_MUL, acc(s1, 0), cst(s1, -1)));
    int32_t c = op2(y, TS_OP_ADD, prologue_fn(y), op2(y, TS_OP_MUL, acc(y, 0), cst(y, -1)));
    int32_t v = op2(y, TS_OP_MUL, op2(y, TS_OP_MUL, c, op1(y, TS_OP_RECIP, acc(y, 1))), load(y, 2));
    if (direct) op2(y, TS_OP_ADD, v, load(y, 0));
}

static int ops_in(const ts_expr *x) {
    int n = 0;
    for (int i = 0; i < x->n; i++) n += x->node[i].kind == TS_X_OP;
    return n;
}

Test(row, work_every_reader_does_to_a_cached_operand_is_done_once_as_it_is_loaded) {
    fixture f;
    fixture_load(&f);
    softmax_of_fn(&f, false);
    ts_kernel *k = &f.p.k[0];
    ts_kernel_work once, thrice;
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &once);
    ts_row_hoisted h;
    cr_assert(ts_row_hoist(k, &h));
    cr_assert_eq(ops_in(&h.prologue[0]), 4, "f: two products, a sum and a reciprocal");
    cr_assert_eq(h.prologue[1].n, 0, "R is not read");
    cr_assert_eq(h.prologue[2].n, 0, "g is not cached: re-read per span");
    cr_assert_eq(ops_in(&h.stage[0]), 0, "stage 0 reads f(x) as loaded");
    cr_assert_eq(ops_in(&h.stage[1]), ops_in(&k->stage[1]) - 4);
    cr_assert_eq(ops_in(&h.expr), ops_in(&k->expr) - 4);
    /* the same values: each expression of f(x) as loaded against the original of x, at random points */
    srand(7);
    for (int t = 0; t < 100; t++) {
        const double x[3] = {4.0 * rand() / RAND_MAX - 2, 0, 1.0 * rand() / RAND_MAX + 0.5};
        const double a[2] = {1.0 * rand() / RAND_MAX, 1.0 * rand() / RAND_MAX + 1};
        const double fx[3] = {ts_expr_eval(&h.prologue[0], a, x, NULL, false), 0, x[2]};
        for (int j = 0; j < 2; j++)
            cr_assert_float_eq(ts_expr_eval(&h.stage[j], a, fx, NULL, false), ts_expr_eval(&k->stage[j], a, x, NULL, false), 1e-12);
        cr_assert_float_eq(ts_expr_eval(&h.expr, a, fx, NULL, false), ts_expr_eval(&k->expr, a, x, NULL, false), 1e-12);
    }
    ts_row_hoisted_free(&h);
    /* what the header computes, and what the model counts: f's 4 ops once an element, not 3 times */
    char *err = NULL, *hdr = emit(&f, "tests/golden/templates", &err);
    cr_assert_not_null(hdr, "%s", err);
    const char *at = strstr(hdr, "for (int i = 0; i < kVec; i++) { /* its prologue, once an element */");
    cr_assert_not_null(at, "%s", hdr);
    cr_assert(strstr(hdr, "__device__ void load(") < at && strstr(at, "x[0][i] = v") != NULL);
    free(hdr);
    fixture_free(&f);

    fixture_load(&f);
    softmax_of_fn(&f, true); /* the output reads x too: f stays in every expression */
    k = &f.p.k[0];
    cr_assert(!ts_row_hoist(k, &h));
    cr_assert_eq(h.prologue[0].n, 0);
    cr_assert_eq(ops_in(&h.stage[1]), ops_in(&k->stage[1]), "copies, unchanged");
    ts_row_hoisted_free(&h);
    ts_costmodel_work(&f.cm, &f.g, &f.p, k, &thrice);
    /* f twice more an element (3 FMA-pipe ops, a reciprocal: 1 MUFU op and 4 FMA-pipe slots), and the add */
    const double out = 512.0 * 1024;
    cr_assert_float_eq(thrice.fma_flops - once.fma_flops, (2 * 7 + 1) * out, 0);
    cr_assert_float_eq(thrice.sfu_ops - once.sfu_ops, 2 * out, 0);
    fixture_free(&f);
}

/* Rows of up to 32 spans take a power of two of lanes, a span each (row.cuh launch_row): the lanes without one
 * stream nothing, and the cost model streams the kernel at the share that hold one. */
Test(row, short_rows_are_priced_at_the_share_of_their_lanes_that_hold_a_span) {
    const struct {
        int64_t len;
        double share;
    } cases[] = {{16, 1}, {72, 9.0 / 16}, {200, 25.0 / 32}, {1024, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fixture f;
        fixture_load_sized(&f, 4096, cases[i].len);
        cr_assert_float_eq(ts_config_row_lane_share(&f.g, &f.p, &f.p.k[0]), cases[i].share, 1e-12, "rows of %lld",
                           (long long)cases[i].len);
        ts_kernel_work w;
        ts_costmodel_work(&f.cm, &f.g, &f.p, &f.p.k[0], &w);
        cr_assert_float_eq(w.wave_efficiency, cases[i].share, 1e-12);
        fixture_free(&f);
    }
}

static ts_costmodel model_text(const char *text) {
    char path[] = "/tmp/ts_row_cm_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ts_costmodel m;
    ts_diags d;
    int rc = ts_costmodel_load(&m, path, &d);
    cr_assert_eq(rc, 0, "%s", d.n ? d.items[0].message : "");
    ts_diags_free(&d);
    unlink(path);
    return m;
}

Test(row, row_efficiency_is_optional_and_defaults_to_map_efficiency) {
    const char *base = "gpu: X\ncoefficients:\n  launch_s: 3.0e-6\n  dram_bytes_per_s: 4.3e12\n  tensor_flops_per_s: 9.9e14\n"
                       "  fma_flops_per_s: 6.7e13\n  sfu_ops_per_s: 1.7e13\n  sms: 132\n  l2_bytes: 6.0e7\n"
                       "  gemm_efficiency: 0.75\n  attention_efficiency: 0.5\n  reduce_efficiency: 0.6\n"
                       "  map_efficiency: 0.4\n";
    ts_costmodel m = model_text(base);
    cr_assert_float_eq(ts_costmodel_efficiency(&m, TS_KERNEL_ROW), 0.4, 0);
    ts_costmodel_free(&m);
    char *with = ts_strfmt("%s  row_efficiency: 0.85\n", base);
    m = model_text(with);
    cr_assert_float_eq(ts_costmodel_efficiency(&m, TS_KERNEL_ROW), 0.85, 0);
    cr_assert_float_eq(ts_costmodel_efficiency(&m, TS_KERNEL_MAP), 0.4, 0);
    ts_costmodel_free(&m);
    free(with);
}

Test(row, kind_names_come_from_one_list) {
    cr_assert_eq(TS_NKINDS, 5);
    cr_assert_str_eq(ts_kernel_kind_name(TS_KERNEL_MAP), "map");
    cr_assert_str_eq(ts_kernel_kind_name(TS_KERNEL_ROW), "row");
    cr_assert_str_eq(ts_kernel_kind_name((ts_kernel_kind)TS_NKINDS), "?");
}

/* ---- the real templates ---------------------------------------------------------------------------- */

Test(row, header_with_the_real_templates_compiles_for_sm80_and_sm90a, .timeout = 300) {
    cr_assert_eq(system("command -v nvcc > /dev/null"), 0, "nvcc is needed (the CUDA toolkit)");
    fixture f;
    fixture_load(&f);
    char *err = NULL, *h = emit(&f, "templates", &err);
    cr_assert_not_null(h, "%s", err);
    char dir[] = "/tmp/ts_row_nvcc_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *cu = ts_strfmt("%s/row.cu", dir);
    FILE *o = fopen(cu, "w");
    fprintf(o, "#define TSOPT_RESIDUAL_NORM_IMPLEMENTATION\n%s", h);
    fclose(o);
    char *cmd = ts_strfmt("nvcc -std=c++17 -Werror all-warnings -arch=sm_80 -c %s -o %s/a.o && "
                          "nvcc -std=c++17 -Werror all-warnings -gencode=arch=compute_90a,code=sm_90a -c %s -o %s/b.o",
                          cu, dir, cu, dir);
    int rc = system(cmd);
    char *rm = ts_strfmt("rm -rf %s", dir);
    cr_assert_eq(system(rm), 0);
    cr_assert_eq(rc, 0, "nvcc rejected the emitted ROW header");
    free(rm);
    free(cmd);
    free(cu);
    free(h);
    fixture_free(&f);
}
