/* test_inplace.c — inputs updated in place (`inout` inputs written by `append`, a KV cache's new row): what
 * the checker refuses, what the interpreter computes (the appended view and the updated cache, a hidden
 * output), and what the planner and emitter make of it (one slice written into the input's own buffer at a
 * run-time position; the cache never copied; the header's parameter writable and the position checked). */
#include <stdio.h>

#include "compile.h"
#include "egir.h"
#include "emit.h"
#include "saturate.h"
#include "testutil.h"

/* A decode-attention graph: one query per kv head and group over a cache of s_max positions, of which the
 * first s are valid after the new key and value are appended at s - 1. */
#define CACHE_AXES                                                                                     \
    "axes:\n  b: 2\n  kv_h: 2\n  grp: 2\n  s_max: 8\n  s: {dynamic: true, typical: 5}\n  d_h: 4\n"
#define CACHE_INPUTS                                                                                   \
    "inputs:\n"                                                                                        \
    "  Q: {dtype: fp16, shape: [b, kv_h, grp, d_h]}\n"                                                 \
    "  K_new: {dtype: fp16, shape: [b, kv_h, d_h]}\n"                                                  \
    "  V_new: {dtype: fp16, shape: [b, kv_h, d_h]}\n"                                                  \
    "  K_cache: {dtype: fp16, shape: [b, kv_h, s_max, d_h], inout: true}\n"                            \
    "  V_cache: {dtype: fp16, shape: [b, kv_h, s_max, d_h], inout: true}\n"
/* K_new and V_new appended, then Q attends over the caches' first s positions. */
#define APPEND_AND_ATTEND                                                                              \
    "  - {name: K, op: append, args: [K_cache, K_new], axis: s_max, as: s}\n"                          \
    "  - {name: V, op: append, args: [V_cache, V_new], axis: s_max, as: s}\n"                          \
    "  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"                                             \
    "  - {name: P, op: softmax, args: [S], axis: s}\n"                                                 \
    "  - {name: O, op: matmul, args: [P, V], over: s}\n"                                               \
    "outputs: [O]\n"
static const char *const decode_attention = CACHE_AXES CACHE_INPUTS "ops:\n" APPEND_AND_ATTEND;

/* ---- the checker ------------------------------------------------------------------------------- */

Test(inplace, a_decode_step_checks_and_lists_the_updated_caches_as_hidden_outputs) {
    checked c;
    check_ok(&c, decode_attention);
    cr_assert_eq(c.g.noutputs, 3);
    cr_assert_eq(ts_graph_abi_outputs(&c.g), 1, "only O is passed by the caller");
    cr_assert(c.g.outputs[1].inout && c.g.outputs[2].inout);
    cr_assert_str_eq(c.g.outputs[1].name, "K_cache");
    cr_assert_eq(c.g.outputs[1].input, 3);
    cr_assert(c.g.inputs[3].inout && !c.g.inputs[0].inout);
    /* minimum bytes: Q, the new rows, the caches' first s - 1 rows read; O and the two new rows written */
    ts_graph_stats st = ts_graph_measure(&c.g);
    double row = 2 * 2 * 4 * 2; /* b·kv_h·d_h fp16 */
    double want = 2 * 2 * 2 * 4 * 2 + 2 * row + 2 * 4 * row + 2 * 2 * 2 * 4 * 2 + 2 * row;
    cr_assert_float_eq(st.min_bytes, want, 1e-9, "min bytes %g, want %g", st.min_bytes, want);
    free_checked(&c);
}

Test(inplace, the_checker_refuses_what_would_make_the_write_order_matter) {
    assert_error(CACHE_AXES CACHE_INPUTS "ops:\n"
                 "  - {name: K, op: append, args: [K_cache, K_new], axis: s_max, as: s}\n"
                 "  - {name: V, op: append, args: [V_cache, V_new], axis: s_max, as: s}\n"
                 "  - {name: old, op: reduce_sum, args: [K_cache], axis: s_max}\n"
                 "outputs: [K, V, old]\n",
                 "g.yaml:17:40: error: 'K_cache' is inout: only the append that writes it may read it");
    assert_error(CACHE_AXES CACHE_INPUTS "ops:\n"
                 "  - {name: K, op: append, args: [K_cache, K_new], axis: s_max, as: s}\n"
                 "  - {name: K2, op: append, args: [K_cache, K_new], axis: s_max, as: s}\n"
                 "  - {name: V, op: append, args: [V_cache, V_new], axis: s_max, as: s}\n"
                 "outputs: [K, K2, V]\n",
                 "g.yaml:16:35: error: 'K_cache' is appended to twice");
    assert_error(CACHE_AXES CACHE_INPUTS "ops:\n"
                 "  - {name: K, op: append, args: [K_cache, K_new], axis: s_max, as: s}\n"
                 "outputs: [K]\n",
                 "g.yaml:13:3: error: input 'V_cache' is inout but nothing appends to it");
    assert_error(CACHE_AXES CACHE_INPUTS "ops:\n"
                 "  - {name: K, op: append, args: [K_cache, K_new], axis: s_max, as: s}\n"
                 "  - {name: V, op: append, args: [Q, V_new], axis: grp, as: s}\n"
                 "outputs: [K, V]\n",
                 "g.yaml:16:34: error: append writes into 'Q' in place, which must be an input declared inout");
    assert_error(CACHE_AXES CACHE_INPUTS "ops:\n"
                 "  - {name: K, op: append, args: [K_cache, Q], axis: s_max, as: s}\n"
                 "  - {name: V, op: append, args: [V_cache, V_new], axis: s_max, as: s}\n"
                 "outputs: [K, V]\n",
                 "g.yaml:15:43: error: the appended value must have the axes of [b, kv_h, s_max, d_h] without "
                 "'s_max', got [b, kv_h, grp, d_h]");
    assert_error(CACHE_AXES CACHE_INPUTS "ops:\n"
                 "  - {name: K, op: append, args: [K_cache, K_new], axis: s_max, as: d_h}\n"
                 "  - {name: V, op: append, args: [V_cache, V_new], axis: s_max, as: s}\n"
                 "outputs: [K, V]\n",
                 "g.yaml:15:68: error: 'K_cache' already has an axis 'd_h'");
    assert_error("axes: {b: 2, s_max: 8, d_h: 4}\ninputs:\n  C: {dtype: fp16, shape: [b, s_max, d_h], inout: yes}\n"
                 "ops: []\noutputs: []\n",
                 "g.yaml:3:51: error: inout must be true or false");
}

Test(inplace, the_valid_length_may_not_exceed_the_cache) {
    char *msg = first_error_for(decode_attention, strlen(decode_attention), "s=9");
    cr_assert_str_eq(msg, "g.yaml:15:68: error: the valid length 's' (9) exceeds the cache's axis 's_max' (8)");
    free(msg);
    msg = first_error_for(decode_attention, strlen(decode_attention), "s=8");
    cr_assert_str_eq(msg, "");
    free(msg);
}

/* ---- the interpreter ---------------------------------------------------------------------------- */

Test(inplace, the_interpreter_writes_the_new_row_and_reads_the_prefix) {
    checked c;
    check_ok(&c, "axes:\n  b: 2\n  s_max: 6\n  s: {dynamic: true, typical: 4}\n  d: 3\n"
                 "inputs:\n  C: {dtype: fp32, shape: [b, s_max, d], inout: true}\n  n: {dtype: fp32, shape: [d, b]}\n"
                 "ops:\n  - {name: A, op: append, args: [C, n], axis: s_max, as: s}\n"
                 "  - {name: T, op: reduce_sum, args: [A], axis: s}\n"
                 "outputs: [T]\n");
    double cache[2 * 6 * 3], nv[3 * 2];
    for (int i = 0; i < 36; i++) cache[i] = i + 1;
    for (int i = 0; i < 6; i++) nv[i] = 1000 * (i + 1); /* n[d][b] */
    double *ins[2] = {cache, nv}, **outs;
    char *err = NULL;
    cr_assert_eq(ts_interp_run(&c.g, ins, &outs, NULL, &err), 0, "%s", err);
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 3; d++) {
            double want = nv[d * 2 + b]; /* position 3 = s - 1 */
            for (int j = 0; j < 3; j++) want += cache[(b * 6 + j) * 3 + d];
            cr_assert_float_eq(outs[0][b * 3 + d], want, 1e-9, "T[%d][%d]", b, d);
            for (int j = 0; j < 6; j++) /* the updated cache: row 3 replaced, the rest as it was */
                cr_assert_float_eq(outs[1][(b * 6 + j) * 3 + d], j == 3 ? nv[d * 2 + b] : cache[(b * 6 + j) * 3 + d],
                                   1e-9, "C[%d][%d][%d]", b, j, d);
        }
    cr_assert_float_eq(cache[3 * 3], 10, 1e-9, "the caller's input array is not modified");
    ts_free_buffers(outs, c.g.noutputs);
    free_checked(&c);
}

/* A block of rows (a prefill chunk): v's axis n in the cache's s_max place, its rows written at s - n .. s - 1,
 * in any order of v's axes. */
static const char *const block_append =
    "axes:\n  b: 2\n  s_max: 6\n  s: {dynamic: true, typical: 5}\n  n: 2\n  d: 3\n"
    "inputs:\n  C: {dtype: fp32, shape: [b, s_max, d], inout: true}\n  v: {dtype: fp32, shape: [n, d, b]}\n"
    "ops:\n  - {name: A, op: append, args: [C, v], axis: s_max, as: s, rows: n}\n"
    "  - {name: T, op: reduce_sum, args: [A], axis: s}\n"
    "outputs: [T]\n";

Test(inplace, the_interpreter_writes_a_block_of_rows_ending_at_the_valid_length) {
    checked c;
    check_ok(&c, block_append);
    double cache[2 * 6 * 3], nv[2 * 3 * 2];
    for (int i = 0; i < 36; i++) cache[i] = i + 1;
    for (int i = 0; i < 12; i++) nv[i] = 1000 * (i + 1); /* v[n][d][b] */
    double *ins[2] = {cache, nv}, **outs;
    char *err = NULL;
    cr_assert_eq(ts_interp_run(&c.g, ins, &outs, NULL, &err), 0, "%s", err);
    for (int b = 0; b < 2; b++)
        for (int d = 0; d < 3; d++) {
            double want = 0; /* positions 0-2 from the cache, 3 and 4 = s - 2, s - 1 from v */
            for (int j = 0; j < 3; j++) want += cache[(b * 6 + j) * 3 + d];
            want += nv[(0 * 3 + d) * 2 + b] + nv[(1 * 3 + d) * 2 + b];
            cr_assert_float_eq(outs[0][b * 3 + d], want, 1e-9, "T[%d][%d]", b, d);
            for (int j = 0; j < 6; j++) {
                double w = j == 3 || j == 4 ? nv[((j - 3) * 3 + d) * 2 + b] : cache[(b * 6 + j) * 3 + d];
                cr_assert_float_eq(outs[1][(b * 6 + j) * 3 + d], w, 1e-9, "C[%d][%d][%d]", b, j, d);
            }
        }
    ts_free_buffers(outs, c.g.noutputs);
    free_checked(&c);
}

Test(inplace, a_block_append_names_an_axis_of_the_value_no_longer_than_the_valid_length) {
    char *msg = first_error_for(block_append, strlen(block_append), "s=1");
    cr_assert_str_eq(msg, "g.yaml:11:67: error: the block of 2 rows ('n') is longer than the valid length 's' (1)");
    free(msg);
    assert_error("axes: {b: 2, s_max: 6, s: 5, n: 2, d: 3}\n"
                 "inputs:\n  C: {dtype: fp32, shape: [b, s_max, d], inout: true}\n  v: {dtype: fp32, shape: [b, d]}\n"
                 "ops:\n  - {name: A, op: append, args: [C, v], axis: s_max, as: s, rows: n}\noutputs: [A]\n",
                 "g.yaml:6:67: error: 'n' is not an axis of the appended value alone");
    assert_error("axes: {b: 2, s_max: 6, s: 5, n: 2, d: 3}\n"
                 "inputs:\n  C: {dtype: fp32, shape: [b, s_max, d], inout: true}\n  v: {dtype: fp32, shape: [b, n, d]}\n"
                 "ops:\n  - {name: A, op: append, args: [C, v], axis: s_max, as: s}\noutputs: [A]\n",
                 "g.yaml:6:37: error: the appended value must have the axes of [b, s_max, d] without 's_max', got [b, n, d]");
}

/* ---- plans and headers ------------------------------------------------------------------------------ */

typedef struct {
    checked c;
    ts_rules rs;
    ts_costmodel cm;
    ts_compiled comp;
} compiled;

static void compile_text(compiled *x, const char *yaml) {
    check_ok(&x->c, yaml);
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&x->rs, &env);
    const char *dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&x->rs, &dir, 1, stderr), 0);
    ts_diags d;
    cr_assert_eq(ts_costmodel_load(&x->cm, "costmodel/h200.yaml", &d), 0);
    ts_diags_free(&d);
    char *err = NULL;
    cr_assert_eq(ts_compile(&x->c.spec, NULL, &x->c.g, &x->rs, &x->cm, &x->comp, &err), 0, "%s", err);
}

static void compiled_free(compiled *x) {
    ts_compiled_free(&x->comp);
    ts_costmodel_free(&x->cm);
    ts_rule_free(&x->rs);
    free_checked(&x->c);
}

Test(inplace, every_plan_writes_one_row_into_each_cache_and_never_copies_it, .timeout = 60) {
    compiled x;
    compile_text(&x, decode_attention);
    int32_t smax = ts_graph_find_axis(&x.c.g, "s_max");
    for (int pi = 0; pi < x.comp.n; pi++) {
        const ts_plan *p = &x.comp.plans[pi];
        int writes[5] = {0};
        for (int i = 0; i < p->nk; i++) {
            const ts_kernel *k = &p->k[i];
            for (int d = 0; d < k->out.ndim; d++)
                cr_assert_neq(k->out.axis[d], smax, "%s: kernel %d writes along the cache's capacity", p->name, i);
            const ts_buffer *B = &p->buf[k->out.buf];
            if (B->kind != TS_BUF_INPUT) continue;
            writes[B->index]++;
            cr_assert_eq(k->kind, TS_KERNEL_MAP);
            /* at position s - 1: offset 32·s - 32 elements (d_h · 1 per position, s_max·d_h per head) */
            int64_t s3 = 3, s7 = 7;
            cr_assert_eq(ts_sym_eval(&k->out.offset, &s3), 8, "%s: the row of s = 3", p->name);
            cr_assert_eq(ts_sym_eval(&k->out.offset, &s7), 24, "%s: the row of s = 7", p->name);
        }
        cr_assert(writes[3] == 1 && writes[4] == 1 && !writes[0] && !writes[1] && !writes[2],
                  "%s: each cache written once, nothing else", p->name);
    }
    compiled_free(&x);
}

Test(inplace, the_header_takes_the_caches_writable_and_checks_the_position, .timeout = 60) {
    compiled x;
    compile_text(&x, decode_attention);
    ts_emit_opts eo = {.source_path = "g.yaml", .source_text = x.c.spec.text, .source_len = x.c.spec.len,
                       .templates_dir = "templates", .cost_model = &x.cm, .baseline_s = x.comp.baseline_s};
    char *buf = NULL, *err = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ts_emit_header(f, &x.c.g, &x.comp.plans[0], &eo, &err), 0, "%s", err);
    fclose(f);
    cr_assert_not_null(strstr(buf, "//   inout K_cache    fp16 [b, kv_h, s_max, d_h]\n"));
    cr_assert_not_null(strstr(buf, "const __half *V_new, __half *K_cache, __half *V_cache, __half *O, int64_t s, "
                                   "void *workspace, cudaStream_t stream)"));
    cr_assert_not_null(strstr(buf, "if ((s) < 1 || (s) > ((int64_t)8)) return cudaErrorInvalidValue;"));
    cr_assert_null(strstr(buf, "__half *K_cache_"), "the hidden outputs are no parameters");
    cr_assert_not_null(strstr(buf, "static_cast<__half *>(buffers[3])"), "the C ABI passes the cache writable");
    free(buf);
    compiled_free(&x);
}

/* A rotated key appended as the model writes it: RoPE over [b, kv_h, two, d_half] (rotate-half pairs), the
 * result reshaped to [b, kv_h, d_h] and appended. The reshape only merges axes, so the append's kernel
 * computes the rotation itself and writes it through the cache's strides split the same way: one kernel,
 * no temporary, where it took a rotation kernel and a copy. */
static const char *const rope_append =
    "axes:\n  b: 2\n  kv_h: 2\n  grp: 2\n  s_max: 8\n  s: {dynamic: true, typical: 5}\n  d_h: 4\n"
    "  two: 2\n  d_half: 2\n"
    "inputs:\n"
    "  Q: {dtype: fp16, shape: [b, kv_h, grp, d_h]}\n"
    "  k: {dtype: fp16, shape: [b, kv_h, two, d_half]}\n"
    "  cos_t: {dtype: fp16, shape: [d_half]}\n"
    "  sin_t: {dtype: fp16, shape: [d_half]}\n"
    "  V_new: {dtype: fp16, shape: [b, kv_h, d_h]}\n"
    "  K_cache: {dtype: fp16, shape: [b, kv_h, s_max, d_h], inout: true}\n"
    "  V_cache: {dtype: fp16, shape: [b, kv_h, s_max, d_h], inout: true}\n"
    "ops:\n"
    "  - {name: j, op: iota, axis: two, dtype: fp16}\n"
    "  - {name: j2, op: scale, args: [j], by: 2}\n"
    "  - {name: sign, op: add, args: [j2, -1]}\n"
    "  - {name: k_flip, op: slice, args: [k], axis: two, start: 1, step: -1, as: two}\n"
    "  - {name: k_rot, op: mul, args: [k_flip, sign]}\n"
    "  - {name: k_cos, op: mul, args: [k, cos_t]}\n"
    "  - {name: k_sin, op: mul, args: [k_rot, sin_t]}\n"
    "  - {name: k_pe, op: add, args: [k_cos, k_sin]}\n"
    "  - {name: K_new, op: reshape, args: [k_pe], shape: [b, kv_h, d_h]}\n" APPEND_AND_ATTEND;

Test(inplace, a_rotated_key_is_computed_by_its_append_through_the_merged_axes, .timeout = 60) {
    compiled x;
    compile_text(&x, rope_append);
    const ts_plan *p = &x.comp.plans[0];
    int32_t two = ts_graph_find_axis(&x.c.g, "two"), half = ts_graph_find_axis(&x.c.g, "d_half");
    int into_k = -1;
    for (int i = 0; i < p->nk; i++) {
        const ts_buffer *B = &p->buf[p->k[i].out.buf];
        if (B->kind == TS_BUF_INPUT && B->index == 5) into_k = i;
    }
    cr_assert_geq(into_k, 0, "a kernel writes K_cache");
    const ts_kernel *k = &p->k[into_k];
    cr_assert_eq(k->kind, TS_KERNEL_MAP);
    cr_assert_eq(k->out.ndim, 4, "over the rotation's own axes [b, kv_h, two, d_half]");
    int64_t s5 = 5, stride_two = -1, stride_half = -1;
    for (int d = 0; d < 4; d++) {
        if (k->out.axis[d] == two) stride_two = ts_sym_eval(&k->out.stride[d], &s5);
        if (k->out.axis[d] == half) stride_half = ts_sym_eval(&k->out.stride[d], &s5);
    }
    cr_assert(stride_two == 2 && stride_half == 1, "d_h = two · d_half: strides %lld, %lld", (long long)stride_two,
              (long long)stride_half);
    cr_assert_eq(ts_sym_eval(&k->out.offset, &s5), 16, "the row of s = 5: 4 · (s - 1)");
    for (int s = 0; s < k->nacc; s++)
        cr_assert_neq(p->buf[k->acc[s].buf].kind, TS_BUF_TEMP, "it reads the key itself, not a rotated copy");
    for (int b = 0; b < p->nbuf; b++) /* no kernel of its own computes the rotation */
        for (int d = 0; d < p->buf[b].ndim && p->buf[b].kind == TS_BUF_TEMP; d++)
            cr_assert_neq(p->buf[b].axis[d], two, "temporary %d holds the rotated key", b);
    compiled_free(&x);
}

Test(inplace, a_block_is_written_from_s_minus_n_and_the_header_checks_it_fits, .timeout = 60) {
    compiled x;
    compile_text(&x, block_append);
    const ts_plan *p = &x.comp.plans[0];
    int32_t n = ts_graph_find_axis(&x.c.g, "n");
    int writers = 0;
    for (int i = 0; i < p->nk; i++) {
        const ts_kernel *k = &p->k[i];
        if (p->buf[k->out.buf].kind != TS_BUF_INPUT) continue;
        writers++;
        int64_t s5 = 5;
        cr_assert_eq(ts_sym_eval(&k->out.offset, &s5), 9, "row s - n = 3 of 6, 3 elements a row");
        int64_t stride_n = -1;
        for (int d = 0; d < k->out.ndim; d++)
            if (k->out.axis[d] == n) stride_n = ts_sym_eval(&k->out.stride[d], &s5);
        cr_assert_eq(stride_n, 3, "the block's rows step along the cache's positions");
    }
    cr_assert_eq(writers, 1);
    ts_emit_opts eo = {.source_path = "g.yaml", .source_text = x.c.spec.text, .source_len = x.c.spec.len,
                       .templates_dir = "templates", .cost_model = &x.cm, .baseline_s = x.comp.baseline_s};
    char *buf = NULL, *err = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ts_emit_header(f, &x.c.g, p, &eo, &err), 0, "%s", err);
    fclose(f);
    cr_assert_not_null(strstr(buf, "indices s - n .. s - 1 of s_max, the appended rows; nothing else; needs n <= s <= s_max"));
    cr_assert_not_null(strstr(buf, "if ((s) < ((int64_t)2) || (s) > ((int64_t)6)) return cudaErrorInvalidValue;"),
                       "%s", strstr(buf, "if ((s)") ? strstr(buf, "if ((s)") : "no check");
    free(buf);
    compiled_free(&x);
}

static int find_dim_of(const ts_buffer *B, int32_t axis) {
    for (int d = 0; d < B->ndim; d++)
        if (B->axis[d] == axis) return d;
    return -1;
}

/* bench/graphs/decoder_prefill.yaml: a chunk of n tokens' rotated keys appended as [b, n, kv_h, d_h] into a
 * [b, kv_h, s_max, d_h] cache (a merge and a permutation of the rotation's axes): one kernel computes the
 * rotation and writes it at rows s - n .., through the cache's strides; the positions s - n + i are counted
 * at run time (reductions over s and n), not folded at the typical sizes. */
Test(inplace, a_prefill_chunk_rotates_and_appends_its_keys_in_one_kernel_at_the_run_time_position, .timeout = 60) {
    FILE *f = fopen("bench/graphs/decoder_prefill.yaml", "rb");
    cr_assert_not_null(f);
    char *text = ts_xmalloc(1 << 16);
    size_t len = fread(text, 1, (1 << 16) - 1, f);
    text[len] = '\0';
    fclose(f);
    compiled x;
    compile_text(&x, text);
    const ts_plan *p = &x.comp.plans[0];
    ts_dyn dyn;
    cr_assert_eq(ts_dyn_of(&x.c.g, &dyn), 0);
    int64_t sizes[TS_SYM_MAX_DYN] = {0}; /* b = 2, n = 3, s = 7 */
    for (int d = 0; d < dyn.n; d++) {
        const char *name = x.c.g.axes[dyn.axis[d]].name;
        sizes[d] = !strcmp(name, "b") ? 2 : !strcmp(name, "n") ? 3 : 7;
    }
    int32_t two = ts_graph_find_axis(&x.c.g, "two"), n = ts_graph_find_axis(&x.c.g, "n"),
            s_axis = ts_graph_find_axis(&x.c.g, "s");
    int into_k = -1, counts = 0;
    for (int i = 0; i < p->nk; i++) {
        const ts_kernel *k = &p->k[i];
        const ts_buffer *B = &p->buf[k->out.buf];
        if (B->kind == TS_BUF_INPUT && !strcmp(x.c.g.inputs[B->index].name, "K_cache")) into_k = i;
        /* a sum of ones over s or n: a REDUCE kernel, or a ROW kernel (the search's pick, run 114; or with the
         * positions s - n + i it gives, broadcast back over n) */
        counts += (k->kind == TS_KERNEL_REDUCE || k->kind == TS_KERNEL_ROW) && (k->red_axis == n || k->red_axis == s_axis);
    }
    cr_assert_geq(into_k, 0);
    const ts_kernel *k = &p->k[into_k];
    int64_t stride_two = -1, stride_n = -1;
    for (int d = 0; d < k->out.ndim; d++) {
        if (k->out.axis[d] == two) stride_two = ts_sym_eval(&k->out.stride[d], sizes);
        if (k->out.axis[d] == n) stride_n = ts_sym_eval(&k->out.stride[d], sizes);
    }
    cr_assert(stride_two == 64 && stride_n == 128, "two · d_half = d_h, n along the positions: %lld, %lld",
              (long long)stride_two, (long long)stride_n);
    cr_assert_eq(ts_sym_eval(&k->out.offset, sizes), 128 * (7 - 3), "rows s - n .. s - 1");
    for (int s = 0; s < k->nacc; s++) /* it reads the projection itself, not a rotated copy */
        cr_assert(p->buf[k->acc[s].buf].kind != TS_BUF_TEMP || find_dim_of(&p->buf[k->acc[s].buf], two) < 0);
    cr_assert_eq(counts, 2, "s and n counted at run time");
    free(text);
    compiled_free(&x);
}
