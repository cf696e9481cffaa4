/* test_search.c — the cost-model-guided search (search.h) through ts_compile: the shapes of the plans it
 * finds for graphs nobody tuned it for (a GEMM with any elementwise chain after it is one GEMM with the
 * chain in its epilogue; norms and softmax are one row kernel; a LayerNorm MLP keeps its centring in the
 * row kernel rather than distributing it through the contraction; a decode-size GEMM takes the skinny form
 * and is predicted from its bytes), that it only improves on its seeds,
 * that the plans it returns are distinct, and that it is deterministic. */
#include <math.h>

#include "compile.h"
#include "interp.h"
#include "config.h"
#include "egir.h"
#include "saturate.h"
#include "workspace.h"
#include "testutil.h"

/* The best plan's kernels in words. */
static char *best_plan(const compiled_graph *cg) { return ts_plan_describe(&cg->out.plans[0], &cg->c.g); }
static const ts_plan *plan_described(const compiled_graph *cg, const char *want);

/* The best plan's one kernel, which must be of `kind`. */
static const ts_kernel *the_one_kernel(const compiled_graph *cg, ts_kernel_kind kind) {
    char *best = best_plan(cg);
    cr_assert_eq(cg->out.plans[0].nk, 1, "%s", best);
    cr_assert_eq(cg->out.plans[0].k[0].kind, kind, "%s", best);
    free(best);
    return &cg->out.plans[0].k[0];
}

/* The name of axis a of the compiled graph. */
static const char *axis_name(const compiled_graph *cg, int32_t a) { return cg->c.g.axes[a].name; }

/* ---- GEMM epilogues ------------------------------------------------------------------------------ */

#define GEMM_HEAD                                                                                      \
    "graph: g\naxes: {m: 1024, d: 2048, n: 4096}\n"                                                    \
    "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"                 \
    "  b: {dtype: fp16, shape: [n]}\n  R: {dtype: fp16, shape: [m, n]}\n"                              \
    "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n"

/* Each chain reads H (the GEMM's result) and may read the bias b [n] and the residual R [m, n]; its last
 * op is named Y. */
static const char *const chains[] = {
    "  - {name: Y, op: silu, args: [H]}\n",
    "  - {name: Y, op: gelu, args: [H]}\n",
    "  - {name: Hb, op: add, args: [H, b]}\n  - {name: z, op: constant, value: 0, dtype: fp16}\n"
    "  - {name: Y, op: max, args: [Hb, z]}\n", /* bias + ReLU */
    "  - {name: Hs, op: scale, args: [H], by: 0.5}\n  - {name: Y, op: add, args: [Hs, R]}\n", /* scale + residual */
    "  - {name: Y, op: tanh, args: [H]}\n",
    "  - {name: Hb, op: add, args: [H, b]}\n  - {name: Y, op: gelu, args: [Hb]}\n",
    "  - {name: Y, op: mul, args: [H, H]}\n", /* the result read twice */
    "  - {name: Hs, op: scale, args: [H], by: 1.702}\n  - {name: S, op: silu, args: [Hs]}\n"
    "  - {name: Y, op: div, args: [S, Hs]}\n", /* x·σ(1.702x) as a sigmoid */
    "  - {name: T, op: tanh, args: [H]}\n  - {name: Y, op: mul, args: [H, T]}\n",
    "  - {name: E, op: exp, args: [H]}\n  - {name: Y, op: add, args: [E, R]}\n",
    "  - {name: G, op: gelu, args: [H]}\n  - {name: T, op: tanh, args: [G]}\n  - {name: Y, op: silu, args: [T]}\n",
    "  - {name: Hb, op: add, args: [H, b]}\n  - {name: S, op: silu, args: [Hb]}\n  - {name: Y, op: mul, args: [S, R]}\n",
    "  - {name: z, op: constant, value: 0.0}\n  - {name: L, op: less_than, args: [H, z]}\n"
    "  - {name: Y, op: where, args: [L, z, H]}\n", /* ReLU as a where over an fp32 zero: fp16 like H */
    "  - {name: im, op: iota, axis: m}\n  - {name: in, op: iota, axis: n}\n  - {name: inx, op: expand, args: [in], shape: [m, n]}\n"
    "  - {name: L, op: less_than, args: [inx, im]}\n  - {name: z, op: constant, value: 0.0}\n"
    "  - {name: Y, op: where, args: [L, z, H]}\n", /* torch.triu of the product */
    "  - {name: Hb, op: add, args: [H, b]}\n  - {name: A1, op: gelu, args: [Hb], approximate: tanh}\n"
    "  - {name: A2, op: scale, args: [A1], by: 1.5}\n  - {name: A3, op: silu, args: [A2]}\n"
    "  - {name: A4, op: clamp, args: [A3], lo: -1.0, hi: 1.0}\n  - {name: SP, op: softplus, args: [A4]}\n"
    "  - {name: T, op: tanh, args: [SP]}\n  - {name: Y, op: mul, args: [A4, T]}\n", /* a long chain: GELU, SiLU, Mish
                                           * (bench/probes/epilogue_long_chain.yaml; a map after the GEMM when the
                                           * epilogue priced every op as an erf, run 141) */
    "  - {name: Hb, op: add, args: [H, b]}\n  - {name: A, op: abs, args: [Hb]}\n  - {name: A1, op: add, args: [A, b]}\n"
    "  - {name: L, op: log, args: [A1]}\n  - {name: Y, op: sin, args: [L]}\n", /* the FMA pipe's polynomials */
};

Test(search, a_gemm_with_an_elementwise_chain_is_one_gemm_with_the_chain_in_its_epilogue) {
    for (size_t i = 0; i < sizeof chains / sizeof *chains; i++) {
        char *yaml = ts_strfmt("%s%soutputs: [Y]\n", GEMM_HEAD, chains[i]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        cr_expect_str_eq(best, "gemm [m,n] over d", "chain %zu:\n%s", i, chains[i]);
        free(best);
        free_compiled(&cg);
        free(yaml);
    }
}

/* ---- row kernels --------------------------------------------------------------------------------- */

static const char residual_rmsnorm[] = "graph: g\naxes: {t: 4096, d: 4096}\n"
                                       "inputs:\n  X: {dtype: fp16, shape: [t, d]}\n  R: {dtype: fp16, shape: [t, d]}\n"
                                       "  g: {dtype: fp16, shape: [d]}\n"
                                       "ops:\n  - {name: H, op: add, args: [X, R]}\n"
                                       "  - {name: Y, op: rmsnorm, args: [H, g], axis: d, eps: 1e-6}\n"
                                       "outputs: [H, Y]\n";

Test(search, residual_plus_rmsnorm_with_both_outputs_is_one_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, residual_rmsnorm);
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [t,d] over d");
    cr_assert_eq(p->k[0].nstage, 1);
    cr_assert_eq(p->k[0].nextra, 1, "the residual sum is the kernel's second output");
    int outputs = 0;
    for (int b = 0; b < p->nbuf; b++) outputs += p->buf[b].kind == TS_BUF_OUTPUT;
    cr_assert_eq(outputs, 2);
    free(best);
    free_compiled(&cg);
}

Test(search, softmax_is_one_row_kernel_with_max_then_sum) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {r: 8192, c: 1024}\ninputs:\n  X: {dtype: fp16, shape: [r, c]}\n"
                      "ops:\n  - {name: Y, op: softmax, args: [X], axis: c}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [r,c] over c");
    const ts_kernel *k = &cg.out.plans[0].k[0];
    cr_assert_eq(k->nstage, 2);
    cr_assert_eq(k->stage_combine[0], TS_COMBINE_MAX);
    cr_assert_eq(k->stage_combine[1], TS_COMBINE_SUM);
    free(best);
    free_compiled(&cg);
}

/* Log-sum-exp of a projection: lowered, the max and the sum of exponentials are stages of one ROW kernel whose
 * output is one value per row (per_row), reading the GEMM's result once; the GEMM reducing its rows itself
 * (`gemm+rows`, below) is the form chosen since run 151. */
Test(search, a_logsumexp_after_a_gemm_is_a_gemm_and_one_per_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {m: 4096, d: 4096, n: 8192}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
                      "  - {name: Y, op: logsumexp, args: [H], axis: n}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm+rows [m] over d");
    const ts_plan *two = plan_described(&cg, "gemm [m,n] over d; row [m] over n");
    cr_assert_not_null(two, "the lowered form is among the candidates");
    const ts_kernel *k = &two->k[1];
    cr_assert(k->per_row);
    cr_assert_eq(k->stage_combine[0], TS_COMBINE_MAX);
    cr_assert_eq(k->stage_combine[k->nstage - 1], TS_COMBINE_SUM);
    free(best);
    free_compiled(&cg);
}

/* The softmax and the log-sum-exp of the same logits share the maximum and the sum of exponentials: one ROW
 * kernel writes the softmax and, once per row, max + log Σ — the logits read once, no kernel for the rest. */
Test(search, a_softmax_and_the_logsumexp_of_its_rows_are_one_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {t: 1024, v: 50257}\ninputs:\n  Z: {dtype: bf16, shape: [t, v]}\n"
                      "ops:\n  - {name: P, op: softmax, args: [Z], axis: v}\n"
                      "  - {name: L, op: logsumexp, args: [Z], axis: v}\noutputs: [P, L]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [t,v] over v");
    const ts_kernel *k = &cg.out.plans[0].k[0];
    cr_assert_eq(k->nstage, 2, "the maximum and the sum of exponentials");
    cr_assert_eq(k->nextra, 1, "the log-sum-exp beside the softmax, not the stages");
    cr_assert(k->extra_per_row[0]);
    free(best);
    free_compiled(&cg);
}

/* The presets all pull the mean through the GEMM (Σ_n X·W = X·Σ_n W: a pass over W and a GEMV first); the
 * seed as written finds the GEMM and one two-stage row kernel over its result. */
Test(search, a_layernorm_after_a_gemm_is_the_gemm_and_one_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {m: 4096, k: 1024, n: 1024}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, k]}\n  W: {dtype: fp16, shape: [k, n]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: k}\n"
                      "  - {name: Y, op: layernorm, args: [H], axis: n}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [m,n] over k; row [m,n] over n");
    cr_assert_eq(cg.out.plans[0].k[1].nstage, 2, "the mean, then the centred sum of squares");
    for (int i = 1; i < cg.out.n; i++) /* the pulled-through form is still a candidate, predicted slower */
        cr_assert_geq(cg.out.plans[i].predicted_s, cg.out.plans[0].predicted_s);
    free(best);
    free_compiled(&cg);
}

/* A GEMM + bias + residual feeding a LayerNorm (BERT's output block, bench/graphs/gemm_layernorm.yaml). Two
 * plans of the same shape: the residual added in the GEMM's epilogue (the row kernel then reads one [m, n]
 * tensor), or in the row kernel (it reads the GEMM's result and the residual). Reaching the first takes the
 * search's boundary shift (the cut after the bias moves up past the residual add) and a cut at a reduction's
 * operand that the row kernel honours. Which one wins is the cost model's call: with the epilogue's load
 * chunks free the first (one [m, n] read less), with them charged as measured (epilogue_chunk_load_s, 8
 * chunks of 32 columns in a GEMM of one wave: bench/NOTES.md runs 127-131) the second. */
#define GEMM_LAYERNORM_YAML                                                                                   \
    "graph: g\naxes: {m: 4096, k: 4096, n: 1024}\n"                                                           \
    "inputs:\n  X: {dtype: fp16, shape: [m, k]}\n  W: {dtype: fp16, shape: [k, n]}\n"                          \
    "  b: {dtype: fp16, shape: [n]}\n  R: {dtype: fp16, shape: [m, n]}\n"                                       \
    "  g: {dtype: fp16, shape: [n]}\n  be: {dtype: fp16, shape: [n]}\n"                                        \
    "ops:\n  - {name: H, op: matmul, args: [X, W], over: k}\n  - {name: Hb, op: add, args: [H, b]}\n"         \
    "  - {name: S, op: add, args: [Hb, R]}\n"                                                                   \
    "  - {name: Y, op: layernorm, args: [S, g, be], axis: n, eps: 1e-12}\noutputs: [Y]\n"

/* The [m, n] tensors the best plan's row kernel (its second kernel) reads. */
static int row_kernel_matrices(const compiled_graph *cg) {
    const ts_plan *p = &cg->out.plans[0];
    int rows = 0;
    for (int a = 0; a < p->k[1].nacc; a++) rows += p->k[1].acc[a].ndim == 2;
    return rows;
}

static void free_epilogue_loads(ts_costmodel *cm) { cm->epilogue_chunk_load_s = 0; }

Test(search, a_residual_before_a_layernorm_goes_into_the_gemm_epilogue_where_the_model_says_it_pays) {
    compiled_graph cg;
    compile_yaml_adjusted(&cg, GEMM_LAYERNORM_YAML, free_epilogue_loads);
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [m,n] over k; row [m,n] over n");
    const ts_plan *p = &cg.out.plans[0];
    cr_assert_eq(p->k[0].nacc, 4, "X, W, the bias and the residual");
    cr_assert_eq(row_kernel_matrices(&cg), 1, "the row kernel reads one [m, n] tensor");
    cr_assert_eq(p->k[1].acc[0].buf, p->k[0].out.buf, "the GEMM's result");
    const double free_loads = p->predicted_s;
    free(best);
    free_compiled(&cg);

    compile_yaml(&cg, GEMM_LAYERNORM_YAML); /* the model as measured */
    best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [m,n] over k; row [m,n] over n");
    cr_assert_eq(cg.out.plans[0].k[0].nacc, 3, "X, W and the bias");
    cr_assert_eq(row_kernel_matrices(&cg), 2, "the GEMM's result and the residual");
    cr_assert_gt(cg.out.plans[0].predicted_s, free_loads);
    free(best);
    free_compiled(&cg);
}

/* Per-row values the graph returns beside the normalised rows — a row max it does not otherwise need, a row
 * mean it subtracts — are written once per row by the same row kernel (extra_per_row), not by a second
 * kernel re-reading every row (held-out gemm_max_sub_gelu: GEMM, a row kernel for the max, another for
 * the rest; bench/NOTES.md run 114, 0.93x torch.compile). */
Test(search, per_row_values_returned_beside_a_normalised_row_are_written_by_its_row_kernel) {
    const char *ops[] = {"  - {name: R, op: reduce_max, args: [Hb], axis: n}\n  - {name: Mu, op: mean, args: [Hb], axis: n}\n"
                         "  - {name: D, op: sub, args: [Hb, Mu]}\n  - {name: Y, op: gelu, args: [D]}\noutputs: [Y, R]\n",
                         "  - {name: Mu, op: mean, args: [Hb], axis: n}\n  - {name: D, op: sub, args: [Hb, Mu]}\n"
                         "  - {name: Y, op: relu, args: [D]}\noutputs: [Mu, Y]\n"};
    for (int g = 0; g < 2; g++) {
        compiled_graph cg;
        char *yaml = ts_strfmt("graph: g\naxes: {m: 2048, k: 4096, n: 2048}\n"
                               "inputs:\n  X: {dtype: fp16, shape: [m, k]}\n  W: {dtype: fp16, shape: [k, n]}\n"
                               "  b: {dtype: fp16, shape: [n]}\n"
                               "ops:\n  - {name: H, op: matmul, args: [X, W], over: k}\n  - {name: Hb, op: add, args: [H, b]}\n%s",
                               ops[g]);
        compile_yaml(&cg, yaml);
        free(yaml);
        char *best = best_plan(&cg);
        cr_assert_str_eq(best, "gemm [m,n] over k; row [m,n] over n", "graph %d", g);
        const ts_plan *p = &cg.out.plans[0];
        const ts_kernel *r = &p->k[1];
        cr_assert_eq(r->nextra, 1, "graph %d", g);
        cr_assert(r->extra_per_row[0], "graph %d: the per-row value is written once per row", g);
        const ts_buffer *B = &p->buf[r->extra_out[0].buf];
        cr_assert_eq(B->kind, TS_BUF_OUTPUT, "graph %d: written straight into the graph's output", g);
        cr_assert_eq(B->ndim, 1);
        cr_assert_str_eq(axis_name(&cg, B->axis[0]), "m");
        free(best);
        free_compiled(&cg);
    }
}

/* A per-row kernel writes every statistic of its rows the graph returns — a row's mean beside its variance
 * (torch.var_mean), the mean both an output and the variance's first stage — as outputs of its own, once per row
 * (it was two per-row kernels, each reading every row: 0.0446 ms predicted against 0.0223). */
Test(search, a_rows_mean_and_variance_returned_alone_are_one_per_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {t: 8192, d: 4096}\ninputs:\n  X: {dtype: fp16, shape: [t, d]}\n"
                      "ops:\n  - {name: Mu, op: mean, args: [X], axis: d}\n  - {name: C, op: sub, args: [X, Mu]}\n"
                      "  - {name: Q, op: mul, args: [C, C]}\n  - {name: V, op: mean, args: [Q], axis: d}\n"
                      "outputs: [Mu, V]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [t] over d");
    const ts_plan *p = &cg.out.plans[0];
    const ts_kernel *k = &p->k[0];
    cr_assert(k->per_row);
    cr_assert_eq(k->nstage, 2);
    cr_assert_eq(k->nextra, 1);
    cr_assert(!k->extra_per_row[0], "a per-row kernel's outputs all span the row's other axes");
    cr_assert_eq(p->buf[k->out.buf].kind, TS_BUF_OUTPUT);
    cr_assert_eq(p->buf[k->extra_out[0].buf].kind, TS_BUF_OUTPUT);
    free(best);
    free_compiled(&cg);
}

/* A fused gate/up projection (one Linear to 2f, chunked in two halves along its features: Phi-3's gate_up_proj) is one
 * dual GEMM reading X once, its B operands the two halves of W in place, with the SiLU product in its epilogue — the
 * product was written whole (67 MB), then sliced by a map. The e-graph learns at conversion that a slice of a
 * contraction's result is the contraction of the operands' slices (egir.c add_sliced_contraction); the same holds
 * written with W sliced first. */
Test(search, a_fused_gate_up_projection_chunked_in_two_is_one_dual_gemm) {
    const char *halves[] = {
        "  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: G, op: slice, args: [H], axis: f2, start: 0, as: f}\n"
        "  - {name: U, op: slice, args: [H], axis: f2, start: 1024, as: f}\n",
        "  - {name: Wg, op: slice, args: [W], axis: f2, start: 0, as: f}\n  - {name: Wu, op: slice, args: [W], axis: f2, start: 1024, as: f}\n"
        "  - {name: G, op: matmul, args: [X, Wg], over: d}\n  - {name: U, op: matmul, args: [X, Wu], over: d}\n"};
    for (int i = 0; i < 2; i++) {
        compiled_graph cg;
        char *yaml = ts_strfmt("graph: g\naxes: {t: 2048, d: 1024, f2: 2048, f: 1024}\n"
                               "inputs:\n  X: {dtype: bf16, shape: [t, d]}\n  W: {dtype: bf16, shape: [d, f2]}\n"
                               "ops:\n%s  - {name: A, op: silu, args: [G]}\n  - {name: Y, op: mul, args: [A, U]}\noutputs: [Y]\n",
                               halves[i]);
        compile_yaml(&cg, yaml);
        free(yaml);
        char *best = best_plan(&cg);
        cr_assert_str_eq(best, "dual-gemm [t,f] over d", "graph %d", i);
        const ts_kernel *k = &cg.out.plans[0].k[0];
        cr_assert_eq(k->acc[k->b0].buf, k->acc[k->b1].buf, "both halves read from W itself");
        free(best);
        free_compiled(&cg);
    }
}

/* A score operand the same for every key of a query row is loaded at every score (score_row_loads_per_s, run 166):
 * bench/graphs/qknorm_attention.yaml keeps Q and K normalised by row kernels and a plain attention kernel (0.1648 ms
 * on an H100), not Q's norm as a per-row scale of the scores (0.1888 ms there; 0.1603 predicted without the term,
 * which chose it). */
Test(search, a_per_row_score_operand_is_priced_per_score) {
    const char *path = "bench/graphs/qknorm_attention.yaml";
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    size_t len = 0;
    char *yaml = ts_read_text_file(path, &len, &d);
    cr_assert_not_null(yaml);
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    free(yaml);
    ts_diags_free(&d);
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [h,t_q,d_h] over d_h; row [h,t_kv,d_h] over d_h; attention [h,t_q,d_h] over t_kv");
    free(best);
    free_compiled(&cg);
}

/* An elementwise value the graph returns that another returned value is computed from — an LSTM cell's new
 * cell state inside its new hidden state — is written by the same MAP kernel as an extra output, not
 * recomputed by a second one (bench/heldout/lstm.yaml: GEMM, then one map, not two). */
Test(search, an_elementwise_output_inside_another_is_written_by_the_same_map) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 512, d: 1024}\n"
                      "inputs:\n  A: {dtype: fp16, shape: [b, d]}\n  B: {dtype: fp16, shape: [b, d]}\n"
                      "  C: {dtype: fp16, shape: [b, d]}\n"
                      "ops:\n  - {name: SA, op: sigmoid, args: [A]}\n  - {name: TB, op: tanh, args: [B]}\n"
                      "  - {name: C2, op: add, args: [C, SA]}\n  - {name: C3, op: mul, args: [C2, TB]}\n"
                      "  - {name: T, op: tanh, args: [C3]}\n  - {name: H, op: mul, args: [SA, T]}\noutputs: [H, C3]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "map [b,d]");
    const ts_plan *p = &cg.out.plans[0];
    cr_assert_eq(p->k[0].nextra, 1);
    cr_assert_eq(p->buf[p->k[0].out.buf].kind, TS_BUF_OUTPUT);
    cr_assert_eq(p->buf[p->k[0].extra_out[0].buf].kind, TS_BUF_OUTPUT, "the cell state goes straight to its output");
    free(best);
    free_compiled(&cg);
}

/* A row's minimum plus a per-row bias (KernelBench's GroupNorm + min + bias tail) is one kernel: the finish
 * of a reduction may read per-row tensors (it was a reduction, then a map over [b] for the add). */
Test(search, a_row_reduction_finished_with_a_per_row_tensor_is_one_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 2048, f: 4096}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, f]}\n  c: {dtype: fp16, shape: [b]}\n"
                      "ops:\n  - {name: Nn, op: neg, args: [X]}\n  - {name: Mx, op: reduce_max, args: [Nn], axis: f}\n"
                      "  - {name: Mn, op: neg, args: [Mx]}\n  - {name: Y, op: add, args: [Mn, c]}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_eq(cg.out.plans[0].nk, 1, "%s", best);
    free(best);
    free_compiled(&cg);
}

/* A reduction whose operand holds an earlier reduction along the same rows is the last stage of one
 * per-row kernel (it was a REDUCE kernel reading the max from a second one: two passes over X). */
Test(search, a_sum_over_rows_of_a_max_shifted_square_is_one_per_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 4096, o: 1024}\ninputs:\n  X: {dtype: fp16, shape: [b, o]}\n"
                      "ops:\n  - {name: M, op: reduce_max, args: [X], axis: o}\n  - {name: D, op: sub, args: [X, M]}\n"
                      "  - {name: Q, op: mul, args: [D, D]}\n  - {name: Y, op: reduce_sum, args: [Q], axis: o}\n"
                      "outputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [b] over o");
    const ts_kernel *k = &cg.out.plans[0].k[0];
    cr_assert(k->per_row);
    cr_assert_eq(k->nstage, 2);
    cr_assert_eq(k->stage_combine[0], TS_COMBINE_MAX);
    cr_assert_eq(k->stage_combine[1], TS_COMBINE_SUM);
    cr_assert_eq(cg.out.plans[0].buf[k->out.buf].dtype, TS_FP16, "a graph output nothing else reads: its own type");
    free(best);
    free_compiled(&cg);
}

/* The first candidate plan of cg described as `want`, or NULL. */
static const ts_plan *plan_described(const compiled_graph *cg, const char *want) {
    for (int i = 0; i < cg->out.n; i++) {
        char *d = ts_plan_describe(&cg->out.plans[i], &cg->c.g);
        bool same = strcmp(d, want) == 0;
        free(d);
        if (same) return &cg->out.plans[i];
    }
    return NULL;
}

static const char *const rmsnorm_matmul =
    "graph: g\naxes: {m: 1024, d: 4096, n: 4096}\n"
    "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
    "ops:\n  - {name: N, op: rmsnorm, args: [X], axis: d, eps: 1e-6}\n"
    "  - {name: Y, op: matmul, args: [N, W], over: d}\noutputs: [Y]\n";

/* A lone reduction along contiguous rows: the search may mark it TS_MARK_ROW and lower it as a one-stage
 * per-row ROW kernel (16-byte vectors, 60-77% of DRAM bandwidth measured) rather than a REDUCE kernel (a
 * warp per output, scalar loads). RMSNorm before a projection: the sum of squares per row, then the GEMM
 * with the row scale in its epilogue. */
Test(search, a_lone_reduction_along_rows_is_a_one_stage_per_row_kernel_when_predicted_faster) {
    compiled_graph cg;
    compile_yaml(&cg, rmsnorm_matmul);
    const ts_plan *row = plan_described(&cg, "row [m] over d; gemm [m,n] over d");
    cr_assert_not_null(row, "the per-row form is among the candidates");
    const ts_kernel *k = &row->k[0];
    cr_assert(k->per_row);
    cr_assert_eq(k->nstage, 1);
    cr_assert_eq(k->stage_combine[0], TS_COMBINE_SUM);
    const ts_plan *reduce = plan_described(&cg, "reduce-sum [m] over d; gemm [m,n] over d");
    if (reduce) cr_assert_gt(reduce->predicted_s, row->predicted_s); /* the REDUCE lowering, when kept, is slower */
    free_compiled(&cg);
}

/* A row sum after a GEMM whose terms read a bias along the row (Σ_o σ(h[b,o] + bias[o]), a GEMM-fusion
 * suite's Gemm_Sigmoid_Sum): the bias is one vector for every row, not an operand broadcast as in a GEMM, so
 * the sum is a per-row ROW kernel (16-byte rows) rather than a REDUCE kernel (a warp per output). */
Test(search, a_row_sum_reading_a_bias_vector_is_a_per_row_kernel_after_a_gemm_in_tiles_that_fill_the_gpu) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 1024, i: 1024, o: 2048}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, i]}\n  W: {dtype: fp16, shape: [i, o]}\n"
                      "  bias: {dtype: fp16, shape: [o]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: i}\n  - {name: Hb, op: add, args: [H, bias]}\n"
                      "  - {name: S, op: sigmoid, args: [Hb]}\n  - {name: Y, op: reduce_sum, args: [S], axis: o}\n"
                      "outputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [b,o] over i; row [b] over o");
    cr_assert(cg.out.plans[0].k[1].per_row);
    /* the GEMM's configuration is the model's choice too: 1024×2048 in 128×256 tiles is 64 tiles on 132 SMs,
     * 128×128 tiles fill them (run 47: 0.0187 against 0.0233 ms) */
    cr_assert_eq(cg.out.plans[0].k[0].cfg.tile_n, 128);
    free(best);
    free_compiled(&cg);
    /* where the default fills the SMs (1024×4096: 128 tiles of 128×256), it stays */
    compile_yaml(&cg, rmsnorm_matmul);
    const ts_plan *p = plan_described(&cg, "row [m] over d; gemm [m,n] over d");
    cr_assert_not_null(p);
    cr_assert_eq(p->k[1].cfg.tile_n, 256);
    free_compiled(&cg);
}

/* Prologue fusion (src/rowstat.c): RMSNorm's Σ_k x² computed inside the GEMM, the epilogue reading the finished
 * scale as ACC 2 — one kernel, no pass over X of its own. Both forms are offered and the cost model decides. The
 * wgmma kernel's grid publishes the values to an fp32 temporary over the rows (rowstat_buf) beside its main loops
 * (gemm_sm90.cuh); at 1024×4096×4096, one wave of tiles whose main loops outlast that extra read of X, the folded
 * form wins (bench/NOTES.md run 159: 0.0515 against 0.0547 ms, H100). */
Test(search, a_gemm_folds_the_row_statistics_of_its_operand_where_the_model_says_it_pays) {
    compiled_graph cg;
    compile_yaml(&cg, rmsnorm_matmul);
    const ts_plan *one = plan_described(&cg, "gemm+rowstats [m,n] over d");
    cr_assert_not_null(one, "the folded form is among the candidates");
    const ts_kernel *k = &one->k[0];
    cr_assert_eq(k->nstage, 1);
    cr_assert_eq(k->stage_combine[0], TS_COMBINE_SUM);
    cr_assert_eq(k->nrowstat, 1);
    cr_assert_eq(k->nacc, 2, "X and W only: the scale's buffer is gone");
    cr_assert_eq(one->nbuf, 4, "X, W, Y and the published scales");
    const ts_buffer *published = &one->buf[k->rowstat_buf[0]];
    cr_assert_eq(published->kind, TS_BUF_TEMP);
    cr_assert_eq(published->dtype, TS_FP32);
    cr_assert_eq(published->ndim, 1);
    cr_assert_eq(published->axis[0], k->m_axis);
    cr_assert(ts_kernel_writes(k, k->rowstat_buf[0]), "the workspace keeps it live while the GEMM runs");
    bool reads_scale = false, loads_x = false;
    for (int i = 0; i < k->expr.n; i++) reads_scale |= k->expr.node[i].kind == TS_X_ACC && k->expr.node[i].slot == 2;
    for (int i = 0; i < k->stage[0].n; i++) loads_x |= k->stage[0].node[i].kind == TS_X_LOAD && k->stage[0].node[i].slot == k->a;
    cr_assert(reads_scale && loads_x);
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm+rowstats [m,n] over d");
    const ts_plan *two = plan_described(&cg, "row [m] over d; gemm [m,n] over d");
    cr_assert_not_null(two, "the row kernel + GEMM form is still offered");
    cr_assert_lt(one->predicted_s, two->predicted_s);
    free(best);
    free_compiled(&cg);
    /* an RMSNorm before a gated MLP at decode size: the dual skinny GEMM folds it */
    compile_yaml(&cg, "graph: g\naxes: {m: 16, d: 4096, n: 14336}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W1: {dtype: fp16, shape: [d, n]}\n"
                      "  W2: {dtype: fp16, shape: [d, n]}\n"
                      "ops:\n  - {name: N, op: rmsnorm, args: [X], axis: d, eps: 1e-6}\n"
                      "  - {name: A, op: matmul, args: [N, W1], over: d}\n  - {name: B, op: matmul, args: [N, W2], over: d}\n"
                      "  - {name: Y, op: mul, args: [A, B]}\noutputs: [Y]\n");
    best = best_plan(&cg);
    cr_assert_str_eq(best, "dual-gemm+rowstats [m,n] over d");
    free(best);
    free_compiled(&cg);
    /* one token against a 4096×6144 weight: 96 column tiles leave SMs idle, so the skinny GEMM splits K over
     * a cluster, and the folded form keeps that split (each rank folds its share; gemm.cuh merges them) */
    compile_yaml(&cg, "graph: g\naxes: {m: 1, d: 4096, n: 6144}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                      "ops:\n  - {name: N, op: rmsnorm, args: [X], axis: d, eps: 1e-6}\n"
                      "  - {name: Y, op: matmul, args: [N, W], over: d}\noutputs: [Y]\n");
    one = plan_described(&cg, "gemm+rowstats [m,n] over d");
    cr_assert_not_null(one);
    cr_assert_gt(one->k[0].cfg.sk_split, 1, "split-K %d", one->k[0].cfg.sk_split);
    free_compiled(&cg);
}

/* Epilogue fusion (src/rowstat.c ts_plan_with_row_parts): a log-sum-exp over a product's rows reduced by the
 * GEMM itself — per tile its maximum and Σ exp(x − max), merged over the row as Σ s·exp(m − M) — instead of
 * storing the product and reading it back (a classifier's log-partition: 4096 × 8192 fp32 logits, 128 MB each
 * way). The merge of the second reduction is checked on samples; the product's buffer stays as the scratch. */
Test(search, a_gemm_reduces_the_rows_of_its_product_itself_when_a_log_sum_exp_is_all_that_reads_it) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {m: 4096, d: 4096, n: 8192}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: Hf, op: cast, args: [H], dtype: fp32}\n"
                      "  - {name: Mx, op: reduce_max, args: [Hf], axis: n}\n  - {name: D, op: sub, args: [Hf, Mx]}\n"
                      "  - {name: E, op: exp, args: [D]}\n  - {name: S, op: reduce_sum, args: [E], axis: n}\n"
                      "  - {name: L, op: log, args: [S]}\n  - {name: Y, op: add, args: [L, Mx]}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm+rows [m] over d");
    const ts_kernel *k = &cg.out.plans[0].k[0];
    cr_assert(k->row_parts);
    cr_assert_eq(k->nstage, 2);
    cr_assert_eq(k->stage_combine[0], TS_COMBINE_MAX);
    cr_assert_eq(k->stage_combine[1], TS_COMBINE_SUM);
    cr_assert_eq(k->cfg.cluster_m, 1);
    cr_assert(!k->cfg.pingpong);
    const ts_buffer *scratch = &cg.out.plans[0].buf[k->scratch];
    cr_assert_eq(scratch->kind, TS_BUF_TEMP, "the product's buffer, kept as scratch");
    cr_assert_eq(scratch->ndim, 2);
    /* merge[1] = the tile's sum × exp(tile max − row max): at tile (m, s) = (1, 2) and row max 3, 2·e^-2 */
    double acc[2 + 2 * TS_ROW_MAX_STAGES] = {0};
    acc[2] = 1, acc[3] = 2, acc[2 + TS_ROW_MAX_STAGES] = 3;
    cr_assert_float_eq(ts_expr_eval(&k->merge[1], acc, NULL, NULL, false), 2 * exp(-2.0), 1e-9);
    cr_assert_float_eq(ts_expr_eval(&k->merge[0], acc, NULL, NULL, false), 1.0, 1e-12);
    /* and the per-tile term of the second reduction: exp(v − tile max) */
    acc[0] = 0.5;
    cr_assert_float_eq(ts_expr_eval(&k->stage[1], acc, NULL, NULL, false), exp(-0.5), 1e-9);
    free(best);
    free_compiled(&cg);
}

/* A reduction whose terms read an earlier result other than through exponentials does not split over tiles
 * that way — a LayerNorm-like Σ (x − mean)² after a GEMM, reduced once per row: the row kernel stays. */
Test(search, a_row_reduction_that_does_not_split_over_tiles_stays_a_kernel_of_its_own) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {m: 4096, d: 1024, n: 4096}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: Hf, op: cast, args: [H], dtype: fp32}\n"
                      "  - {name: Mu, op: mean, args: [Hf], axis: n}\n  - {name: C, op: sub, args: [Hf, Mu]}\n"
                      "  - {name: Q, op: mul, args: [C, C]}\n  - {name: V, op: mean, args: [Q], axis: n}\noutputs: [V]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [m,n] over d; row [m] over n", "the per-row kernel the pass looked at");
    for (int i = 0; i < cg.out.n; i++)
        for (int j = 0; j < cg.out.plans[i].nk; j++) cr_assert(!cg.out.plans[i].k[j].row_parts, "plan %d kernel %d", i, j);
    free(best);
    free_compiled(&cg);
}

/* What must stay a kernel of its own: a statistic the graph also returns, one over another tensor's rows,
 * one over the weight's columns. (A log-sum-exp of A's rows may fold its max into the GEMM: the second pass,
 * Σ exp(x − max), stays a row kernel that computes its own max.) */
Test(search, row_statistics_stay_outside_the_gemm_when_they_cannot_fold) {
    static const char *const graphs[] = {
        /* the scale is an output too */
        "graph: g\naxes: {m: 512, d: 1024, n: 1024}\n"
        "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
        "ops:\n  - {name: S, op: reduce_sum, args: [X], axis: d}\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
        "  - {name: Y, op: mul, args: [H, S]}\noutputs: [Y, S]\n",
        /* Σ over the rows of another tensor than A */
        "graph: g\naxes: {m: 512, d: 1024, n: 1024}\n"
        "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  Z: {dtype: fp16, shape: [m, d]}\n"
        "  W: {dtype: fp16, shape: [d, n]}\n"
        "ops:\n  - {name: S, op: reduce_sum, args: [Z], axis: d}\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
        "  - {name: Y, op: mul, args: [H, S]}\noutputs: [Y]\n",
        /* Σ down the columns of B (a statistic of the weight, not of A's rows) */
        "graph: g\naxes: {m: 512, d: 1024, n: 1024}\n"
        "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
        "ops:\n  - {name: S, op: reduce_sum, args: [W], axis: d}\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
        "  - {name: Y, op: mul, args: [H, S]}\noutputs: [Y]\n",
    };
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        compiled_graph cg;
        compile_yaml(&cg, graphs[i]);
        for (int p = 0; p < cg.out.n; p++)
            for (int j = 0; j < cg.out.plans[p].nk; j++) cr_assert_eq(cg.out.plans[p].k[j].nrowstat, 0, "graph %zu", i);
        free_compiled(&cg);
    }
}

/* Statistics down columns — BatchNorm in training after a GEMM, over the batch b of its [b, f] result —
 * are one ROW kernel whose neighbouring threads take neighbouring columns (row-columns: coalesced), not a
 * group of threads per column reading one element per memory sector. A lone column sum is one too. */
Test(search, statistics_down_columns_are_a_row_columns_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 4096, k: 1024, f: 2048}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, k]}\n  W: {dtype: fp16, shape: [k, f]}\n"
                      "  g: {dtype: fp16, shape: [f]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: k}\n"
                      "  - {name: N, op: layernorm, args: [H], axis: b}\n  - {name: Y, op: mul, args: [N, g]}\n"
                      "outputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [b,f] over k; row-columns [b,f] over b");
    const ts_kernel *k = &cg.out.plans[0].k[1];
    cr_assert(k->columns && !k->per_row);
    cr_assert_eq(k->nstage, 2, "the mean, then the centred sum of squares");
    free(best);
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {m: 8192, d: 4096}\ninputs:\n  X: {dtype: fp16, shape: [m, d]}\n"
                      "ops:\n  - {name: Y, op: reduce_sum, args: [X], axis: m}\noutputs: [Y]\n");
    best = best_plan(&cg);
    cr_assert_str_eq(best, "row-columns [d] over m");
    cr_assert(cg.out.plans[0].k[0].per_row && cg.out.plans[0].k[0].columns);
    free(best);
    free_compiled(&cg);
    /* three columns of 100,000: one cluster of eight 16-column CTAs of launch_row_columns, 3 of each block's
     * 16 columns live, the rest of the GPU idle (run 113: 34 us for 600 KB; 116 us in one block, run 40); the
     * model scales the bandwidth by the share of two CTAs an SM the launch fills and of the lanes live */
    compile_yaml(&cg, "graph: g\naxes: {m: 100000, d: 3}\ninputs:\n  X: {dtype: fp16, shape: [m, d]}\n"
                      "ops:\n  - {name: Y, op: reduce_sum, args: [X], axis: m}\noutputs: [Y]\n");
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &cg.out.plans[0].k[0], &w);
    cr_assert(w.columns);
    cr_assert_float_eq(w.wave_efficiency, 8.0 / (2 * cg.cm.sms) * 3 / 16, 1e-12, "a cluster of 8, 3 of 16 lanes live");
    cr_assert_gt(cg.out.plans[0].predicted_s, 20e-6, "the cluster streams 600 KB at a 176th of the rate");
    free_compiled(&cg);
}

/* A sum over a linear layer's outputs, the weight stored [out, in] as nn.Linear keeps it: Σ_o Σ_i x·w[o,i] =
 * Σ_i x·(Σ_o w[o,i]), the weight's column sums (a ROW kernel down its columns) then a matrix-vector product
 * (a ROW kernel along x's rows). A lone reduction that a later kernel reads was never a ROW kernel: the check
 * that a stage read elsewhere is computed by its own kernel counted the root's own readers, so the search kept
 * the GEMM and a row sum (0.1877 ms predicted against 0.0335). */
Test(search, a_sum_after_a_linear_layer_is_the_weights_column_sums_then_a_matrix_vector_product) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 4096, i: 4096, o: 4096}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, i]}\n  W: {dtype: fp16, shape: [o, i]}\n"
                      "ops:\n  - {name: Wt, op: permute, args: [W], order: [i, o]}\n"
                      "  - {name: H, op: matmul, args: [X, Wt], over: i}\n  - {name: D, op: scale, args: [H], by: 0.5}\n"
                      "  - {name: Y, op: reduce_sum, args: [D], axis: o}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row-columns [i] over o; row [b] over i");
    cr_assert(cg.out.plans[0].k[0].per_row && cg.out.plans[0].k[1].per_row);
    free(best);
    free_compiled(&cg);
}

/* A GEMM whose result is scaled before a norm (2·(X·W), then LayerNorm over the batch or along the rows):
 * the scale used once by the norm's whole region made that region look like the GEMM's epilogue, though
 * its mean reads the GEMM's result; lowering it so split the norm into three kernels, and the search kept a
 * pass scaling X before the GEMM instead (0.2311 ms predicted against 0.2062). The GEMM and one row
 * kernel, the scale inside either, and nothing before the GEMM. */
Test(search, a_scaled_gemm_result_before_a_norm_is_the_gemm_and_one_row_kernel) {
    const char *axes[] = {"m", "n"}, *want[] = {"gemm [m,n] over d; row-columns [m,n] over m",
                                                "gemm [m,n] over d; row [m,n] over n"};
    for (int i = 0; i < 2; i++) {
        compiled_graph cg;
        char yaml[640];
        snprintf(yaml, sizeof yaml,
                 "graph: g\naxes: {m: 4096, d: 2048, n: 4096}\n"
                 "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                 "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: S, op: scale, args: [H], by: 2.0}\n"
                 "  - {name: Y, op: layernorm, args: [S], axis: %s}\noutputs: [Y]\n", axes[i]);
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        cr_assert_str_eq(best, want[i], "norm along %s", axes[i]);
        free(best);
        free_compiled(&cg);
    }
}

/* ---- unaligned GEMM operands ----------------------------------------------------------------------- */

/* nn.Linear over rows of `i` features (weight [o, i]) + bias + ReLU, sizes from the caller. */
static char *odd_linear(int64_t b, const char *i, int64_t o) {
    return ts_strfmt("graph: g\naxes: {b: %lld, i: %s, o: %lld}\n"
                     "inputs:\n  X: {dtype: fp16, shape: [b, i]}\n  W: {dtype: fp16, shape: [o, i]}\n"
                     "  bias: {dtype: fp16, shape: [o]}\n"
                     "ops:\n  - {name: Wt, op: permute, args: [W], order: [i, o]}\n"
                     "  - {name: H, op: matmul, args: [X, Wt], over: i}\n  - {name: Hb, op: add, args: [H, bias]}\n"
                     "  - {name: Y, op: relu, args: [Hb]}\noutputs: [Y]\n",
                     (long long)b, i, (long long)o);
}

/* Rows of 2500 halves (5000 bytes) keep a GEMM from TMA and 16-byte loads (0.34 ms on the element-wise
 * loader, 0.16 on the 4-byte one; bench/NOTES.md runs 117-118): the plan copies X and W into temporaries
 * whose rows start every 2504 elements, and the GEMM reads those (0.055 ms, run 119). The copies write
 * within the real extent; the workspace holds the pitch. */
Test(search, a_gemm_over_rows_not_16_byte_aligned_reads_padded_copies) {
    compiled_graph cg;
    char *yaml = odd_linear(1000, "2500", 3000);
    compile_yaml(&cg, yaml);
    free(yaml);
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "map [b,i]; map [o,i]; gemm [b,o] over i", "%s", p->name);
    cr_assert(strstr(p->name, "+padded"), "%s", p->name);
    const ts_kernel *g = &p->k[2];
    cr_assert_eq(ts_costmodel_gemm_unchunked_slot(g), -1, "the GEMM reads only 16-byte rows");
    for (int c = 0; c < 2; c++) {
        const ts_kernel *copy = &p->k[c];
        const ts_buffer *to = &p->buf[copy->out.buf], *from = &p->buf[copy->acc[0].buf];
        cr_assert_eq(from->kind, TS_BUF_INPUT);
        cr_assert_eq(to->kind, TS_BUF_TEMP);
        cr_assert_eq(to->pitch, 2504);
        int64_t v;
        cr_assert(ts_sym_const_value(&copy->out.stride[0], &v) && v == 2504);
        cr_assert(ts_sym_is_one(&copy->out.stride[1]));
        ts_sym bytes = ts_workspace_buffer_bytes(p, &cg.c.g, &(ts_dyn){0}, copy->out.buf);
        cr_assert(ts_sym_const_value(&bytes, &v) && v == (c ? 3000 : 1000) * 2504 * 2, "%lld bytes", (long long)v);
        bool read = false; /* the GEMM reads the copy, rows 2504 apart */
        for (int s = 0; s < g->nacc; s++)
            if (g->acc[s].buf == copy->out.buf) {
                ts_sym rows = ts_access_stride(&g->acc[s], g->acc[s].axis[0]);
                cr_assert(ts_sym_const_value(&rows, &v) && v == 2504, "%lld", (long long)v);
                read = true;
            }
        cr_assert(read, "copy %d is read by the GEMM", c);
    }
    free(best);
    free_compiled(&cg);
}

/* A run-time batch with rows of a static 2500: still copied, the copy's workspace a multiple of the batch
 * (2504 · 2 bytes a row). */
Test(search, a_gemm_over_a_runtime_batch_of_unaligned_rows_reads_a_padded_copy) {
    compiled_graph cg;
    char *yaml = ts_strfmt("graph: g\naxes: {b: {dynamic: true, typical: 1000}, i: 2500, o: 3000}\n"
                           "inputs:\n  X: {dtype: fp16, shape: [b, i]}\n  W: {dtype: fp16, shape: [i, o]}\n"
                           "ops:\n  - {name: Y, op: matmul, args: [X, W], over: i}\noutputs: [Y]\n");
    compile_yaml(&cg, yaml);
    free(yaml);
    const ts_plan *p = &cg.out.plans[0];
    cr_assert(strstr(p->name, "+padded"), "%s", p->name);
    cr_assert_eq(p->k[0].kind, TS_KERNEL_MAP);
    ts_dyn dyn;
    cr_assert_eq(ts_dyn_of(&cg.c.g, &dyn), 0);
    ts_sym bytes = ts_workspace_buffer_bytes(p, &cg.c.g, &dyn, p->k[0].out.buf);
    int64_t at[TS_SYM_MAX_DYN] = {7};
    cr_assert_eq(ts_sym_eval(&bytes, at), 7 * 2504 * 2, "%lld", (long long)ts_sym_eval(&bytes, at));
    free_compiled(&cg);
}

/* Where the rows are aligned (2496 = 312·8) or the width is a run-time size, nothing is copied. */
Test(search, aligned_or_dynamic_gemm_operands_are_not_copied) {
    const char *widths[] = {"2496", "{dynamic: true, typical: 2500}"};
    for (int w = 0; w < 2; w++) {
        compiled_graph cg;
        char *yaml = odd_linear(1000, widths[w], 3000);
        compile_yaml(&cg, yaml);
        free(yaml);
        for (int i = 0; i < cg.out.n; i++) {
            cr_assert_null(strstr(cg.out.plans[i].name, "+padded"), "%s: %s", widths[w], cg.out.plans[i].name);
            for (int b = 0; b < cg.out.plans[i].nbuf; b++) cr_assert_eq(cg.out.plans[i].buf[b].pitch, 0);
        }
        free_compiled(&cg);
    }
}

/* A GEMM too small for two copies to pay (8 rows): the plan reads the operands as they are. */
Test(search, a_small_gemm_over_unaligned_rows_is_not_worth_copying) {
    compiled_graph cg;
    char *yaml = odd_linear(8, "2500", 64);
    compile_yaml(&cg, yaml);
    free(yaml);
    cr_assert_null(strstr(cg.out.plans[0].name, "+padded"), "%s", cg.out.plans[0].name);
    free_compiled(&cg);
}

/* A Linear over a batch of sequences, [b, t, d]·[d, n] (+ bias, GELU): one GEMM over the b·t rows with the weight
 * shared. It was a CUDA-core REDUCE kernel (predicted 2.4 ms against 0.079): the GEMM needed exactly one free axis per
 * operand. The checker merges b and t (hlir.h ts_graph_merge_free_axes: free axes of X that W lacks, nesting in every
 * access) into one axis b_t; with the weight first in the matmul the result is [n, b_t], the weight the A read
 * M-major. With t dynamic the checker leaves the axes apart and the planner merges the rows itself (m_outer: X, the
 * result and every epilogue operand nest b outside t), or, weight first, runs a GEMM per sequence with the weight as the
 * A shared by all of them (before run 149: the [b, t, n] GEMM and a transposing copy). */
Test(search, a_linear_over_a_batch_of_sequences_is_one_gemm_over_all_rows) {
    const char *orders[] = {"args: [X, W]", "args: [W, X]"};
    const char *sizes[] = {"t: 512", "t: {dynamic: true, typical: 512}"};
    for (int dyn = 0; dyn < 2; dyn++)
        for (int o = 0; o < 2; o++) {
            char *yaml = ts_strfmt("graph: g\naxes: {b: 8, %s, d: 1024, n: 4096}\n"
                                   "inputs:\n  X: {dtype: fp16, shape: [b, t, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                                   "  c: {dtype: fp16, shape: [n]}\n"
                                   "ops:\n  - {name: H, op: matmul, %s, over: d}\n  - {name: Hb, op: add, args: [H, c]}\n"
                                   "  - {name: Y, op: gelu, args: [Hb]}\noutputs: [Y]\n", sizes[dyn], orders[o]);
            compiled_graph cg;
            compile_yaml(&cg, yaml);
            char *best = best_plan(&cg);
            const ts_kernel *k = &cg.out.plans[0].k[0];
            cr_assert_eq(cg.out.plans[0].nk, 1, "%s: %s", orders[o], best);
            cr_assert_eq(k->kind, TS_KERNEL_GEMM, "%s", best);
            const char *rows = o == 0 ? "b_t" : "n", *cols = o == 0 ? "n" : "b_t";
            if (dyn == 0) {
                cr_assert_eq(k->batch_axis, -1, "%s", best);
                cr_assert_eq(k->m_outer, -1, "%s", best);
                cr_assert_str_eq(axis_name(&cg, k->m_axis), rows, "%s", best);
                cr_assert_str_eq(axis_name(&cg, k->n_axis), cols, "%s", best);
                if (o == 1) cr_assert(ts_gemm_a_km(k), "W [d, n] read M-major");
            } else if (o == 0) {
                cr_assert_eq(k->batch_axis, -1, "%s", best);
                cr_assert_str_eq(axis_name(&cg, k->m_outer), "b");
                cr_assert_str_eq(axis_name(&cg, k->m_axis), "t");
                cr_assert_str_eq(axis_name(&cg, k->n_axis), "n");
                cr_assert_eq(ts_gemm_rows(&cg.c.g, k), 8 * 512);
            } else {
                cr_assert_str_eq(axis_name(&cg, k->batch_axis), "b", "%s", best);
                cr_assert_str_eq(axis_name(&cg, k->m_axis), "n");
                cr_assert_str_eq(axis_name(&cg, k->n_axis), "t");
                cr_assert(ts_gemm_a_km(k), "W [d, n] read M-major");
                cr_assert(ts_sym_equal(ts_access_stride(&k->acc[k->a], k->batch_axis), ts_sym_const(0)), "W shared");
            }
            cr_assert_lt(k->predicted_s, 0.2e-3, "%s: %g s", best, k->predicted_s);
            free(best);
            free(yaml);
            free_compiled(&cg);
        }
}

/* A projection applied per head, [b, h, t, d]·[d, n] (+ bias, ReLU): three free axes on one side. It was a CUDA-core
 * REDUCE kernel (predicted 0.041 ms against 0.011). In any layout the checker merges the three (hlir.h
 * ts_graph_merge_free_axes, a pair at a time) into one axis of rows: one plain GEMM, X read in place (laid out
 * [b, t, h, d] it was copied before, so that b and h nested as a batch). With t dynamic (never merged) the planner
 * takes the three itself: rows along t and the batch index over b and h together, X copied so that they nest. */
Test(search, a_linear_over_three_free_axes_is_one_gemm_with_a_merged_broadcast_batch) {
    const char *layouts[] = {"[b, h, t, d]", "[t, b, h, d]", "[b, t, h, d]", "[b, t, h, d]"};
    const char *rows[] = {"b_h_t", "t_b_h", "b_t_h", "t"};
    for (int l = 0; l < 4; l++) {
        char *yaml = ts_strfmt("graph: g\naxes: {b: 2, h: 8, t: %s, d: 128, n: 256}\n"
                               "inputs:\n  X: {dtype: fp16, shape: %s}\n  W: {dtype: fp16, shape: [d, n]}\n"
                               "  c: {dtype: fp16, shape: [n]}\n"
                               "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: Hb, op: add, args: [H, c]}\n"
                               "  - {name: Y, op: relu, args: [Hb]}\noutputs: [Y]\n",
                               l < 3 ? "512" : "{dynamic: true, typical: 512}", layouts[l]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        const ts_plan *p = &cg.out.plans[0];
        int gemms = 0, gi = -1;
        for (int i = 0; i < p->nk; i++)
            if (p->k[i].kind == TS_KERNEL_GEMM) gemms++, gi = i;
            else cr_assert_neq(p->k[i].kind, TS_KERNEL_REDUCE, "%s: %s", layouts[l], best);
        cr_assert_eq(gemms, 1, "%s: %s", layouts[l], best);
        const ts_kernel *k = &p->k[gi];
        cr_assert_str_eq(axis_name(&cg, k->m_axis), rows[l], "%s: %s", layouts[l], best);
        cr_assert_str_eq(axis_name(&cg, k->n_axis), "n");
        if (l < 3) {
            cr_assert_eq(p->nk, 1, "%s: X read in place: %s", layouts[l], best);
            cr_assert_eq(k->batch_axis, -1, "%s", best);
        } else {
            cr_assert_str_eq(axis_name(&cg, k->batch_outer), "b");
            cr_assert_str_eq(axis_name(&cg, k->batch_axis), "h");
        }
        cr_assert_lt(k->predicted_s, 0.015e-3, "%s: %s, %g s", layouts[l], best, k->predicted_s);
        free(best);
        free(yaml);
        free_compiled(&cg);
    }
}

/* Causal GQA over a batch of sequences (Q [b, kv_h, grp, t, d], K and V [b, kv_h, s, d], as a model
 * exported with batch > 1 has it): one attention kernel whose batch is b and whose heads are kv_h × grp.
 * Two axes shared by Q, K and V were refused: the scores went to CUDA cores. */
Test(search, batched_gqa_attention_is_one_attention_kernel_with_a_batch) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 3, kv_h: 2, grp: 4, t: 512, s: 512, d_h: 128}\n"
                      "inputs:\n  Q: {dtype: fp16, shape: [b, kv_h, grp, t, d_h]}\n"
                      "  K: {dtype: fp16, shape: [b, kv_h, s, d_h]}\n  V: {dtype: fp16, shape: [b, kv_h, s, d_h]}\n"
                      "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                      "  - {name: Ss, op: scale, args: [S], by: 0.08838834764831845}\n"
                      "  - {name: i, op: iota, axis: t, dtype: fp32}\n  - {name: j, op: iota, axis: s, dtype: fp32}\n"
                      "  - {name: i2, op: expand, args: [i], shape: [t, s]}\n"
                      "  - {name: future, op: less_than, args: [i2, j]}\n"
                      "  - {name: ninf, op: constant, value: -inf, dtype: fp16}\n"
                      "  - {name: zero, op: constant, value: 0, dtype: fp16}\n"
                      "  - {name: M, op: where, args: [future, ninf, zero]}\n  - {name: Sm, op: add, args: [Ss, M]}\n"
                      "  - {name: P, op: softmax, args: [Sm], axis: s}\n  - {name: O, op: matmul, args: [P, V], over: s}\n"
                      "outputs: [O]\n");
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
    cr_assert_str_eq(axis_name(&cg, k->batch_axis), "b");
    cr_assert_eq(k->heads_ndim, 2);
    cr_assert_str_eq(axis_name(&cg, k->head_axis[0]), "kv_h");
    cr_assert_str_eq(axis_name(&cg, k->head_axis[1]), "grp");
    cr_assert_eq(k->group, 4);
    cr_assert(k->causal);
    free_compiled(&cg);
}

/* Attention whose output is permuted as a PyTorch model's is before its output projection (O [b, h, t, d] →
 * [b, t, h, d]): the kernel writes O in the output's order (its value dim stays contiguous), so the plan is one
 * attention kernel and no copy; GQA's heads are kept nested where a batch takes the kernel's batch index, so an
 * order that splits them ([b, t, grp, kv_h, d]) keeps Q's layout and a copy kernel after. */
Test(search, attention_writes_a_permuted_output_in_the_outputs_order) {
    const struct {
        const char *q, *kv, *order, *kernel;
        int kernels;
    } cases[] = {
        {"[b, h, t, d_h]", "[b, h, s, d_h]", "[b, t, h, d_h]", "attention [b,t,h,d_h] over s", 1},
        {"[b, t, h, d_h]", "[b, s, h, d_h]", "[b, h, t, d_h]", "attention [b,h,t,d_h] over s", 1},
        {"[b, kv_h, grp, t, d_h]", "[b, kv_h, s, d_h]", "[b, t, kv_h, grp, d_h]", "attention [b,t,kv_h,grp,d_h] over s", 1},
        {"[b, kv_h, grp, t, d_h]", "[b, kv_h, s, d_h]", "[b, t, grp, kv_h, d_h]", "attention [b,kv_h,grp,t,d_h] over s", 2},
    };
    for (int c = 0; c < 4; c++) {
        bool gqa = strstr(cases[c].q, "grp") != NULL;
        char *yaml = ts_strfmt("graph: g\naxes: {b: 2, %s, t: 512, s: 512, d_h: 128}\n"
                               "inputs:\n  Q: {dtype: fp16, shape: %s}\n"
                               "  K: {dtype: fp16, shape: %s}\n  V: {dtype: fp16, shape: %s}\n"
                               "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                               "  - {name: Ss, op: scale, args: [S], by: 0.08838834764831845}\n"
                               "  - {name: P, op: softmax, args: [Ss], axis: s}\n"
                               "  - {name: O, op: matmul, args: [P, V], over: s}\n"
                               "  - {name: Ot, op: permute, args: [O], order: %s}\noutputs: [Ot]\n",
                               gqa ? "kv_h: 2, grp: 4" : "h: 8", cases[c].q, cases[c].kv, cases[c].kv, cases[c].order);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        const ts_plan *p = &cg.out.plans[0];
        cr_expect_eq(p->nk, cases[c].kernels, "case %d: %s", c, best);
        cr_expect(strstr(best, cases[c].kernel) != NULL, "case %d: %s", c, best);
        free(best), free(yaml);
        free_compiled(&cg);
    }
}

/* The tile skips need the score to be −inf wherever the key is after the query (causal) or more than a
 * window before it. A sliding window's mask (future or older than the window: a max of two conditions)
 * promises both, so the kernel skips the tiles past the diagonal and before the window; a mask that tanh bends back to −1 after it was added
 * does not, and skipping those tiles would drop keys the softmax weighs (the skip was taken for any mask
 * found anywhere inside the score). (The where with the [t, s] condition first orders the scores, and so O,
 * [t, s, h]: the permute keeps the output in Q's layout, one kernel.) */
Test(search, tile_skips_need_a_mask_that_reaches_the_softmax) {
    const char *masks[] = {"  - {name: Mk, op: where, args: [bad, ninf, zero]}\n  - {name: Sm, op: add, args: [Ss, Mk]}\n",
                           "  - {name: Mk, op: where, args: [future, ninf, zero]}\n  - {name: Mt, op: tanh, args: [Mk]}\n"
                           "  - {name: Sm, op: add, args: [Ss, Mt]}\n",
                           "  - {name: Sm, op: where, args: [future, ninf, Ss]}\n  - {name: Sn, op: scale, args: [Sm], by: 2}\n"};
    const bool causal[] = {true, false, true};
    for (int m = 0; m < 3; m++) {
        char *yaml = ts_strfmt("graph: g\naxes: {h: 4, t: 512, s: 512, d_h: 64}\n"
                               "inputs:\n  Q: {dtype: bf16, shape: [h, t, d_h]}\n"
                               "  K: {dtype: bf16, shape: [h, s, d_h]}\n  V: {dtype: bf16, shape: [h, s, d_h]}\n"
                               "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                               "  - {name: Ss, op: scale, args: [S], by: 0.125}\n"
                               "  - {name: i, op: iota, axis: t, dtype: fp32}\n  - {name: j, op: iota, axis: s, dtype: fp32}\n"
                               "  - {name: i2, op: expand, args: [i], shape: [t, s]}\n"
                               "  - {name: future, op: less_than, args: [i2, j]}\n"
                               "  - {name: jw, op: add, args: [j, 128.0]}\n  - {name: old, op: less_than, args: [jw, i2]}\n"
                               "  - {name: bad, op: max, args: [future, old]}\n"
                               "  - {name: ninf, op: constant, value: -inf, dtype: bf16}\n"
                               "  - {name: zero, op: constant, value: 0, dtype: bf16}\n%s"
                               "  - {name: P, op: softmax, args: [%s], axis: s}\n"
                               "  - {name: O, op: matmul, args: [P, V], over: s}\n"
                               "  - {name: Ob, op: permute, args: [O], order: [h, t, d_h]}\noutputs: [Ob]\n",
                               masks[m], m == 2 ? "Sn" : "Sm");
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
        cr_assert_eq(k->causal, causal[m], "mask %d", m);
        cr_assert_eq(k->windowed, m == 0, "mask %d", m); /* the window's far side: keys j < q - 128 */
        if (m == 0) cr_assert_float_eq(k->window, 128.0, 0);
        free(yaml);
        free_compiled(&cg);
    }
}

/* A keep-mask, as a boolean attn_mask reads (where(keep, score, −inf)), built the way the exporter writes a sliding
 * window: one arange read along both position axes (views of one iota), keep = (k <= q) · (q − k < 256). The
 * iota read along the key axis is the key axis's own (egir.c iota_read_along), so the mask is an expression of the
 * kernel's positions, and its zeros promise the tile skips: causal, and keys j <= q − 256 (window 255). Without
 * them it was a [t, s] mask materialised by a map and read by an attention kernel that skipped nothing (0.98 ms
 * predicted against 0.053). */
Test(search, a_keep_mask_of_position_comparisons_is_a_sliding_window) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {h: 4, t: 1024, s: {like: t}, d: 64}\n"
                      "inputs:\n  Q: {dtype: fp16, shape: [h, t, d]}\n  K: {dtype: fp16, shape: [h, s, d]}\n"
                      "  V: {dtype: fp16, shape: [h, s, d]}\n"
                      "ops:\n  - {name: i, op: iota, axis: t, dtype: fp32}\n"
                      "  - {name: ib, op: expand, args: [i], shape: [t, s]}\n"
                      "  - {name: j, op: reshape, args: [i], shape: [s]}\n"
                      "  - {name: fut, op: less_than, args: [ib, j]}\n  - {name: past, op: sub, args: [1, fut]}\n"
                      "  - {name: dist, op: sub, args: [ib, j]}\n  - {name: near, op: less_than, args: [dist, 256]}\n"
                      "  - {name: keep, op: mul, args: [past, near]}\n"
                      "  - {name: S, op: matmul, args: [Q, K], over: d}\n  - {name: Ss, op: scale, args: [S], by: 0.125}\n"
                      "  - {name: Sm, op: where, args: [keep, Ss, -inf]}\n"
                      "  - {name: P, op: softmax, args: [Sm], axis: s}\n"
                      "  - {name: O, op: matmul, args: [P, V], over: s}\noutputs: [O]\n");
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_expect_eq(p->nk, 1, "one attention kernel, the mask computed in it: %s", best);
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
    cr_expect(k->causal && k->windowed, "%s", best);
    cr_expect_float_eq(k->window, 255.0, 0, "keys j <= q - 256 masked");
    free(best);
    free_compiled(&cg);
}

/* softmax(Q·Kᵀ/8 masked)·V over [h, t, d] fp16 with these axes: mask_ops build the mask, score_ops make Sm of Ss. */
static char *attention_with_scores_yaml(const char *axes, const char *mask_ops, const char *score_ops) {
    return ts_strfmt("graph: g\naxes: {%s}\ninputs:\n  Q: {dtype: fp16, shape: [h, t, d]}\n"
                     "  K: {dtype: fp16, shape: [h, s, d]}\n  V: {dtype: fp16, shape: [h, s, d]}\nops:\n%s"
                     "  - {name: S, op: matmul, args: [Q, K], over: d}\n  - {name: Ss, op: scale, args: [S], by: 0.125}\n%s"
                     "  - {name: P, op: softmax, args: [Sm], axis: s}\n  - {name: O, op: matmul, args: [P, V], over: s}\n"
                     "outputs: [O]\n", axes, mask_ops, score_ops);
}

/* Compiles `yaml` (freeing it) and expects one attention kernel, its mask computed in it, causal (tiles skipped) or
 * not; c names the case. */
static void expect_one_attention_kernel(char *yaml, bool causal, size_t c) {
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    char *best = best_plan(&cg);
    cr_expect_eq(cg.out.plans[0].nk, 1, "case %zu: one attention kernel, no table: %s", c, best);
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
    cr_expect_eq(k->causal, causal, "case %zu: %s", c, best);
    free(best);
    free(yaml);
    free_compiled(&cg);
}

/* A causal mask buffer computed at the model's longest sequence and sliced to this one (nanoGPT's
 * bias[:, :, :T, :T] == 0, as the exporter writes it: the comparison over [m, m2] sliced to [t, s]; HF GPT-2 slices
 * from key_length − query_length): the slices of the index table are the same comparison of the iotas of t and s
 * (egir.c index_table_view), so the attention kernel computes the mask from its positions and skips the tiles past
 * the diagonal — where it was a [1024, 1024] table materialised by a map and read, nothing skipped. A slice that
 * starts further along reads the comparison shifted (t + 8 < s): still one attention kernel, computed in it. Hugging
 * Face's eager form keeps the past of a boolean tril buffer (where(future, 0, 1)) and masks with finfo(dtype).min:
 * that constant masks as −inf does (plan.c is_minus_inf: at or below −65504), a larger one (−1000) does not. */
Test(search, a_sliced_causal_buffer_is_the_causal_mask_of_the_sequence) {
    const struct {
        long long start;
        const char *mask, *score;
        bool causal;
    } cases[] = {{0, "fut", "[f2, -inf, Ss]", true},
                 {8, "fut", "[f2, -inf, Ss]", false},
                 {0, "keep", "[f2, Ss, -65504]", true},
                 {0, "keep", "[f2, Ss, -3.4028234663852886e+38]", true},
                 {0, "keep", "[f2, Ss, -1000]", false}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *table = ts_strfmt("  - {name: i, op: iota, axis: m}\n  - {name: j, op: iota, axis: m2}\n"
                                "  - {name: ib, op: expand, args: [i], shape: [m, m2]}\n"
                                "  - {name: fut, op: less_than, args: [ib, j]}\n"
                                "  - {name: keep, op: where, args: [fut, 0, 1]}\n"
                                "  - {name: f1, op: slice, args: [%s], axis: m, start: %lld, as: t}\n"
                                "  - {name: f2, op: slice, args: [f1], axis: m2, start: 0, as: s}\n",
                                cases[c].mask, cases[c].start);
        char *score = ts_strfmt("  - {name: Sm, op: where, args: %s}\n", cases[c].score);
        char *yaml = attention_with_scores_yaml("h: 4, t: 512, s: 512, d: 64, m: 1024, m2: 1024", table, score);
        free(table);
        free(score);
        expect_one_attention_kernel(yaml, cases[c].causal, c);
    }
}

/* An additive causal mask as torch writes it in forward, torch.full((t, t), v).triu(1): where(j < i + 1, 0, v), added to
 * the scores. Its zeros keep the past (plan.c cond_zeros: k < q + 1), so with v = −inf or finfo(fp16).min the kernel
 * skips the future's tiles; with j < i + 2 (triu(2): the next key kept too) it does not. */
Test(search, a_triu_mask_written_in_forward_is_causal) {
    const struct {
        const char *value, *plus;
        bool causal;
    } cases[] = {{"-inf", "1", true}, {"-65504", "1", true}, {"-inf", "2", false}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *mask = ts_strfmt("  - {name: i, op: iota, axis: t}\n  - {name: j, op: iota, axis: s}\n"
                               "  - {name: i1, op: add, args: [i, %s]}\n  - {name: jb, op: expand, args: [j], shape: [t, s]}\n"
                               "  - {name: cut, op: less_than, args: [jb, i1]}\n"
                               "  - {name: M, op: where, args: [cut, 0, %s]}\n  - {name: Mh, op: cast, args: [M], dtype: fp16}\n",
                               cases[c].plus, cases[c].value);
        char *yaml = attention_with_scores_yaml("h: 4, t: 512, s: {like: t}, d: 64", mask, "  - {name: Sm, op: add, args: [Ss, Mh]}\n");
        free(mask);
        expect_one_attention_kernel(yaml, cases[c].causal, c);
    }
}

/* Scores over a batch of sequences and their heads, Q [b, h, t, d]·K [b, h, s, d], plus an additive mask
 * [t, s] (attention with an explicit mask, which the attention kernel does not read): one GEMM whose batch
 * index runs over b and h together (they nest), the mask in its epilogue. It was a CUDA-core REDUCE kernel. */
Test(search, scores_over_two_batch_axes_are_one_gemm_with_a_merged_batch) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 2, h: 12, t: 1024, s: 512, d: 64}\n"
                      "inputs:\n  Q: {dtype: fp16, shape: [b, h, t, d]}\n  K: {dtype: fp16, shape: [b, h, s, d]}\n"
                      "  Mask: {dtype: fp16, shape: [t, s]}\n"
                      "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d}\n  - {name: Y, op: add, args: [S, Mask]}\n"
                      "outputs: [Y]\n");
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_GEMM);
    cr_assert_str_eq(axis_name(&cg, k->batch_outer), "b");
    cr_assert_str_eq(axis_name(&cg, k->batch_axis), "h");
    free_compiled(&cg);
}

/* SDPA with a boolean mask argument over a batch of sequences: the softmax of where(mask > 0, S, -inf)
 * reads the [t, s] mask before the [b, h, t, s] scores. Its output takes the scores' layout (the widest
 * operand's), not the mask's: it was written [t, s, b, h] — strided along the row for the softmax and
 * for the next GEMM, which needed a transposing copy (run 33: 0.37 + 0.23 ms against 0.04 + 0.06
 * predicted). */
Test(search, a_masked_softmax_is_laid_out_like_its_scores_not_its_mask) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 2, h: 12, t: 1024, s: 1000, e: 64}\n"
                      "inputs:\n  Q: {dtype: fp16, shape: [b, h, t, e]}\n  K: {dtype: fp16, shape: [b, h, s, e]}\n"
                      "  V: {dtype: fp16, shape: [b, h, s, e]}\n  Mask: {dtype: fp16, shape: [t, s]}\n"
                      "ops:\n  - {name: S, op: matmul, args: [Q, K], over: e}\n"
                      "  - {name: Keep, op: less_than, args: [0, Mask]}\n"
                      "  - {name: Sm, op: where, args: [Keep, S, -inf]}\n"
                      "  - {name: P, op: softmax, args: [Sm], axis: s}\n  - {name: O, op: matmul, args: [P, V], over: s}\n"
                      "  - {name: Ob, op: permute, args: [O], order: [b, h, t, e]}\n" /* where's order is Keep's */
                      "outputs: [Ob]\n");
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    for (int i = 0; i < p->nk; i++) {
        const ts_buffer *o = &p->buf[p->k[i].out.buf];
        cr_assert(o->ndim < 4 || (!strcmp(axis_name(&cg, o->axis[0]), "b") && !strcmp(axis_name(&cg, o->axis[1]), "h")),
                  "kernel %d of %s", i + 1, best);
        cr_assert(p->k[i].kind != TS_KERNEL_MAP || o->ndim < 4, "a layout copy: %s", best);
    }
    free(best);
    free_compiled(&cg);
}

/* Attention with a mask argument [t, s] (boolean, as where(mask > 0, S, -inf), or additive), broadcast over
 * the batch and the heads: the score functor loads it at (q, k), so each SDPA is one attention kernel. It was
 * the scores' GEMM, a softmax ROW kernel and the P·V GEMM each (run 36: 0.203 ms, half torch.compile's
 * speed). A mask that varies with the heads is not read by the functor (it sees only q and k). */
Test(search, attention_with_a_query_by_key_mask_is_one_attention_kernel) {
    const char *masks[] = {"  - {name: Keep, op: less_than, args: [0, Mask]}\n"
                           "  - {name: Sm, op: where, args: [Keep, Ss, -inf]}\n",
                           "  - {name: Sm, op: add, args: [Ss, Mask]}\n"};
    for (int m = 0; m < 2; m++) {
        char *yaml = ts_strfmt("graph: g\naxes: {b: 2, h: 12, t: 1024, s: 1000, e: 64}\n"
                               "inputs:\n  Q: {dtype: fp16, shape: [b, h, t, e]}\n  K: {dtype: fp16, shape: [b, h, s, e]}\n"
                               "  V: {dtype: fp16, shape: [b, h, s, e]}\n  Mask: {dtype: fp16, shape: [t, s]}\n"
                               "ops:\n  - {name: S, op: matmul, args: [Q, K], over: e}\n"
                               "  - {name: Ss, op: scale, args: [S], by: 0.125}\n%s"
                               "  - {name: P, op: softmax, args: [Sm], axis: s}\n"
                               "  - {name: O, op: matmul, args: [P, V], over: s}\n"
                               "  - {name: Ob, op: permute, args: [O], order: [b, h, t, e]}\noutputs: [Ob]\n", masks[m]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
        int mask_slots = 0;
        for (int i = 0; i < k->nacc; i++)
            if (i != k->a && i != k->b0 && i != k->b1) {
                mask_slots++;
                cr_assert_eq(k->acc[i].ndim, 2, "the mask is read over [t, s]");
            }
        cr_assert_eq(mask_slots, 1, "mask %d", m);
        cr_assert(!k->causal);
        /* the cost model charges the functor's load of the mask once per score (run 38: masked kernels ran
         * 2-3x their prediction without it) */
        ts_kernel_work w;
        ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
        cr_assert_float_eq(w.score_loads, 2.0 * 12 * 1024 * 1000, 1, "one mask element a score");
        free(yaml);
        free_compiled(&cg);
    }
}

/* Scores that read tensors over the batch or the heads — ALiBi's slope per head times (k - q), a padding
 * mask per sequence [b, s] — through the functor's at(b, h): one attention kernel each (ALiBi was the
 * scores' GEMM, a row softmax and the P·V GEMM: 0.255 ms predicted against 0.084). */
Test(search, scores_reading_per_head_or_per_sequence_tensors_are_one_attention_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {h: 16, t: 2048, s: 2048, d: 128}\n"
                      "inputs:\n  Q: {dtype: fp16, shape: [h, t, d]}\n  K: {dtype: fp16, shape: [h, s, d]}\n"
                      "  V: {dtype: fp16, shape: [h, s, d]}\n  slope: {dtype: fp16, shape: [h]}\n"
                      "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d}\n"
                      "  - {name: i, op: iota, axis: t, dtype: fp16}\n  - {name: j, op: iota, axis: s, dtype: fp16}\n"
                      "  - {name: i2, op: expand, args: [i], shape: [t, s]}\n  - {name: D, op: sub, args: [j, i2]}\n"
                      "  - {name: D3, op: expand, args: [D], shape: [h, t, s]}\n  - {name: B, op: mul, args: [D3, slope]}\n"
                      "  - {name: Sb, op: add, args: [S, B]}\n  - {name: P, op: softmax, args: [Sb], axis: s}\n"
                      "  - {name: O, op: matmul, args: [P, V], over: s}\noutputs: [O]\n");
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
    cr_assert_eq(k->nacc, 4, "Q, K, V and the slope");
    /* the slope is the same for every key of a row: no load a score in the cost model (run 65) */
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
    cr_assert_float_eq(w.score_loads, 0, 1e-9, "a per-head slope is no load a score");
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {b: 4, h: 8, t: 512, s: 512, d: 64}\n"
                      "inputs:\n  Q: {dtype: fp16, shape: [b, h, t, d]}\n  K: {dtype: fp16, shape: [b, h, s, d]}\n"
                      "  V: {dtype: fp16, shape: [b, h, s, d]}\n  Pad: {dtype: fp16, shape: [b, s]}\n"
                      "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d}\n  - {name: Sb, op: add, args: [S, Pad]}\n"
                      "  - {name: P, op: softmax, args: [Sb], axis: s}\n  - {name: O, op: matmul, args: [P, V], over: s}\n"
                      "outputs: [O]\n");
    k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
    cr_assert_str_eq(axis_name(&cg, k->batch_axis), "b");
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
    cr_assert_float_eq(w.score_loads, 4.0 * 8 * 512 * 512, 1, "the padding mask varies along the keys");
    free_compiled(&cg);
}

static const char layernorm_mlp[] = "graph: g\naxes: {m: 4096, d: 1024, f: 4096, e: 1024}\n"
                                    "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W1: {dtype: fp16, shape: [d, f]}\n"
                                    "  W2: {dtype: fp16, shape: [f, e]}\n"
                                    "ops:\n  - {name: Mu, op: mean, args: [X], axis: d}\n"
                                    "  - {name: Xc, op: sub, args: [X, Mu]}\n"
                                    "  - {name: Sq, op: mul, args: [Xc, Xc]}\n"
                                    "  - {name: V, op: mean, args: [Sq], axis: d}\n"
                                    "  - {name: R, op: rsqrt, args: [V]}\n"
                                    "  - {name: N, op: mul, args: [Xc, R]}\n"
                                    "  - {name: H, op: matmul, args: [N, W1], over: d}\n"
                                    "  - {name: G, op: gelu, args: [H]}\n"
                                    "  - {name: Y, op: matmul, args: [G, W2], over: f}\n"
                                    "outputs: [Y]\n";

Test(search, a_layernorm_mlp_is_a_row_kernel_and_two_gemms_not_four) {
    compiled_graph cg;
    compile_yaml(&cg, layernorm_mlp);
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [m,d] over d; gemm [m,f] over d; gemm [m,e] over f");
    cr_assert_eq(cg.out.plans[0].k[0].nstage, 2, "the mean, then the centred sum of squares");
    free(best);
    free_compiled(&cg);
}

/* A Gemma-style MLP: RMSNorm with a (1 + g) gain, a tanh-GELU gate times the up projection, the down projection and
 * the residual. The GELU's 0.5·x·(1 + tanh(...)) lets the e-graph write the down projection as one half of a dual
 * contraction, P·(0.5·Wd) beside an unread P·Wd, which the fused seed's tree cost preferred (two GEMMs over f and a
 * scaled copy of Wd), and from which no single move of the climb leads back: the best plan had separate gate and up
 * GEMMs (0.427 ms predicted). Seeds are extracted again without the picks of duals read through one pick alone
 * (search.c drop_lone_picks): the row kernel, one dual GEMM with the GELU product in its epilogue, one GEMM. */
static const char gemma_mlp[] = "graph: g\naxes: {t: 2048, d: 2304, f: 9216}\n"
                                "inputs:\n  X: {dtype: bf16, shape: [t, d]}\n  g: {dtype: bf16, shape: [d]}\n"
                                "  Wg: {dtype: bf16, shape: [d, f]}\n  Wu: {dtype: bf16, shape: [d, f]}\n"
                                "  Wd: {dtype: bf16, shape: [f, d]}\n"
                                "ops:\n  - {name: X2, op: mul, args: [X, X]}\n  - {name: ms, op: mean, args: [X2], axis: d}\n"
                                "  - {name: mse, op: add, args: [ms, 1e-6]}\n  - {name: r, op: rsqrt, args: [mse]}\n"
                                "  - {name: Xn, op: mul, args: [X, r]}\n  - {name: g1, op: add, args: [g, 1.0]}\n"
                                "  - {name: Xg, op: mul, args: [Xn, g1]}\n"
                                "  - {name: G, op: matmul, args: [Xg, Wg], over: d}\n  - {name: U, op: matmul, args: [Xg, Wu], over: d}\n"
                                "  - {name: A, op: gelu, args: [G], approximate: tanh}\n  - {name: M, op: mul, args: [A, U]}\n"
                                "  - {name: Y, op: matmul, args: [M, Wd], over: f}\n  - {name: O, op: add, args: [X, Y]}\n"
                                "outputs: [O]\n";

Test(search, a_tanh_gelu_gated_mlp_is_a_row_kernel_a_dual_gemm_and_a_gemm) {
    compiled_graph cg;
    compile_yaml(&cg, gemma_mlp);
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "row [t,d] over d; dual-gemm [t,f] over d; gemm [t,d] over f");
    cr_expect_lt(cg.out.plans[0].predicted_s, 0.415e-3, "below the separate GEMMs' 0.427 ms");
    free(best);
    free_compiled(&cg);
}

/* Attention pooling: scores s = X·w per position, a softmax over the sequence, then y[b, d] = Σ_t p[b, t]·X[b, t, d].
 * The climb folded the softmax's maximum and sum into the weighted sum's region before that sum's own ROW toggle came
 * (a REDUCE kernel reading X down t, strided: 1.56 ms predicted); the seed with each reduction a ROW kernel of its
 * own (search.c rows_alone_seed) keeps them cut. Both products then have a vector operand (w; p[b] per batch): skinny
 * GEMMs over the rows "_one" (0.081 ms; as a row kernel and one down the columns of X, 0.135). */
Test(search, a_softmax_weighted_sum_over_a_sequence_runs_as_two_vector_gemms) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 64, t: 1024, d: 1024}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, t, d]}\n  w: {dtype: fp16, shape: [d]}\n"
                      "ops:\n  - {name: s, op: matmul, args: [X, w], over: d}\n"
                      "  - {name: p, op: softmax, args: [s], axis: t}\n"
                      "  - {name: y, op: matmul, args: [p, X], over: t}\noutputs: [y]\n");
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "gemm [b,t] over d; row [b,t] over t; gemm [b,d] over t");
    const ts_plan *p = &cg.out.plans[0];
    for (int k = 0; k < p->nk; k++)
        cr_expect(p->k[k].kind != TS_KERNEL_GEMM || ts_config_gemm_skinny(&cg.c.g, &p->k[k]), "%s", best);
    cr_expect_lt(p->predicted_s, 0.1e-3, "X read twice at the skinny GEMM's DRAM rate, not down t");
    free(best);
    free_compiled(&cg);
}

/* ---- two contractions added: one GEMM over both K ------------------------------------------------ */

/* A low-rank adapter on a linear layer (weights stored [out, in]), its update scaled: Y = X·Wᵀ + s·(X·Aᵀ)·Bᵀ.
 * `extra` adds outputs. */
static char *adapter(const char *extra) {
    return ts_strfmt("graph: g\naxes: {t: 2048, k: 3072, o: 1024, r: 8}\n"
                     "inputs:\n  X: {dtype: bf16, shape: [t, k]}\n  W: {dtype: bf16, shape: [o, k]}\n"
                     "  A: {dtype: bf16, shape: [r, k]}\n  B: {dtype: bf16, shape: [o, r]}\n"
                     "ops:\n  - {name: Base, op: matmul, args: [X, W], over: k}\n"
                     "  - {name: XA, op: matmul, args: [X, A], over: k}\n  - {name: Up, op: matmul, args: [XA, B], over: r}\n"
                     "  - {name: Upd, op: scale, args: [Up], by: 0.5}\n  - {name: Y, op: add, args: [Base, Upd]}\n"
                     "outputs: [Y%s]\n", extra);
}

Test(search, an_added_low_rank_update_is_one_gemm_over_both_contractions) {
    char *yaml = adapter("");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_assert_eq(p->nk, 2, "%s", best);
    const ts_kernel *down = &p->k[0], *k = &p->k[1];
    cr_assert(k->kind == TS_KERNEL_GEMM && k->two_k && !down->two_k, "%s", best);
    /* one pair is X·W over k, the other the rank-8 product (its scale applied where X·A is computed) over r */
    uint32_t axes = (1u << k->red_axis) | (1u << k->red_axis2);
    cr_assert_eq(axes, (1u << ts_graph_find_axis(&cg.c.g, "k")) | (1u << ts_graph_find_axis(&cg.c.g, "r")), "%s", best);
    int low_rank_a = k->red_axis == ts_graph_find_axis(&cg.c.g, "r") ? k->a : k->a2;
    cr_assert_eq(k->acc[low_rank_a].buf, down->out.buf, "the rank-8 pair's A is the first GEMM's result");
    cr_assert_eq(ts_gemm_k_slices(&cg.c.g, k), 3072 / 64 + 1, "K tiles of both pairs, the rank-8 one padded");
    free(best);
    free_compiled(&cg);
    free(yaml);
}

Test(search, a_base_projection_that_is_also_an_output_stays_its_own_gemm) {
    char *yaml = adapter(", Base");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    for (int i = 0; i < p->nk; i++) cr_assert(!p->k[i].two_k, "Base is written anyway, not recomputed: %s", best);
    cr_assert_eq(p->nk, 3, "%s", best);
    free(best);
    free_compiled(&cg);
    free(yaml);
}

/* ---- decode-size GEMMs ---------------------------------------------------------------------------- */

/* SwiGLU against 4096×14336 weights with M rows (a size, or `{dynamic: true, typical: N}`). */
static char *swiglu_at(const char *m) {
    return ts_strfmt("graph: g\naxes: {m: %s, d: 4096, n: 14336}\n"
                     "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  U: {dtype: fp16, shape: [d, n]}\n"
                     "  V: {dtype: fp16, shape: [d, n]}\n"
                     "ops:\n  - {name: A, op: matmul, args: [X, U], over: d}\n  - {name: B, op: matmul, args: [X, V], over: d}\n"
                     "  - {name: S, op: silu, args: [B]}\n  - {name: Y, op: mul, args: [A, S]}\noutputs: [Y]\n", m);
}

/* The best plan's single dual GEMM. */
static const ts_kernel *only_gemm(const compiled_graph *cg) {
    const ts_plan *p = &cg->out.plans[0];
    cr_assert_eq(p->nk, 1);
    cr_assert_eq(p->k[0].kind, TS_KERNEL_GEMM);
    return &p->k[0];
}

Test(search, a_decode_size_gemm_runs_skinny_and_is_predicted_from_its_weight_bytes) {
    char *yaml = swiglu_at("16");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_kernel *k = only_gemm(&cg);
    cr_assert(k->cfg.skinny_only && k->cfg.sk_tile_m == 16, "static m = 16: the skinny form alone, 16-row tiles");
    cr_assert(ts_config_gemm_skinny(&cg.c.g, k));
    double bytes = 2.0 * 4096 * 14336 * 2, floor_s = bytes / cg.cm.dram_bytes_per_s;
    double want = cg.cm.launch_s + floor_s / cg.cm.skinny_gemm_efficiency;
    cr_assert_float_eq(cg.out.plans[0].predicted_s, want, want * 0.01, "predicted %g s, the weights at %g of DRAM: %g s",
                       cg.out.plans[0].predicted_s, cg.cm.skinny_gemm_efficiency, want);
    free_compiled(&cg);
    free(yaml);
}

Test(search, a_dynamic_m_gemm_keeps_a_skinny_branch_and_a_large_m_gemm_has_none) {
    char *yaml = swiglu_at("{dynamic: true, typical: 1024}");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_kernel *k = only_gemm(&cg);
    cr_assert(k->cfg.skinny_m == 64 && !k->cfg.skinny_only, "a run-time M ≤ 64 takes the skinny branch");
    cr_assert(!ts_config_gemm_skinny(&cg.c.g, k), "predicted at the typical 1024 rows: the large-tile form");
    free_compiled(&cg);
    free(yaml);
    yaml = swiglu_at("1024");
    compile_yaml(&cg, yaml);
    cr_assert_eq(only_gemm(&cg)->cfg.skinny_m, 0, "a static M of 1024 never runs skinny");
    free_compiled(&cg);
    free(yaml);
}

/* A small static GEMM (1024×1024×512: 16 tiles of 128×256 on 132 SMs) takes 128×64 wgmma tiles, 4x the
 * CTAs (bench/NOTES.md run 83); a narrow one (16 columns) keeps the mma.sync form's 64-row tiles over M. */
Test(search, a_small_static_gemm_takes_narrow_wgmma_tiles_and_a_narrow_one_the_small_mma_form) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 1024, k: 1024, f: 512}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, k]}\n  W: {dtype: fp16, shape: [k, f]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: k}\n  - {name: Y, op: silu, args: [H]}\n"
                      "outputs: [Y]\n");
    const ts_kernel *k = only_gemm(&cg);
    cr_assert(k->cfg.skinny_m == 0 && k->cfg.tile_m == 128 && k->cfg.tile_n == 64 && k->cfg.stages == 6,
              "%dx%d, %d stages, skinny up to %d rows", k->cfg.tile_m, k->cfg.tile_n, k->cfg.stages, k->cfg.skinny_m);
    cr_assert(!ts_config_gemm_skinny(&cg.c.g, k));
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {b: 1024, k: 1024, f: 16}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, k]}\n  W: {dtype: fp16, shape: [k, f]}\n"
                      "ops:\n  - {name: Y, op: matmul, args: [X, W], over: k}\noutputs: [Y]\n");
    k = only_gemm(&cg);
    cr_assert(k->cfg.skinny_only && k->cfg.sk_tile_m == 64 && k->cfg.skinny_m >= 1024);
    cr_assert(ts_config_gemm_skinny(&cg.c.g, k));
    free_compiled(&cg);
}

/* A GEMM epilogue is priced by pipe, each op as the emitter writes it (costmodel.c op_cost): e^x is a multiply and one
 * MUFU ex2 an element, so its time is the MUFU's; erf's polynomial fills the FMA pipe (28 slots and one MUFU ex2 an
 * element), so its time is the FMA pipe's — whichever pipe is busier, at epilogue_efficiency, on the tiles' share of SMs. */
Test(search, a_gemm_epilogue_is_priced_by_its_busier_pipe) {
    static const struct {
        const char *chain;
        double slots, mufu; /* per output element */
        bool mufu_bound;
    } cases[] = {
        {"  - {name: Y, op: exp, args: [H]}\n", 1, 1, true},
        {"  - {name: Y, op: erf, args: [H]}\n", 28, 1, false},
    };
    for (int i = 0; i < 2; i++) {
        char *yaml = ts_strfmt("%s%soutputs: [Y]\n", GEMM_HEAD, cases[i].chain);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        const ts_kernel *k = only_gemm(&cg);
        ts_kernel_work w;
        ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
        const double out = 1024.0 * 4096;
        cr_expect_float_eq(w.epilogue_slots / out, cases[i].slots, 1e-9, "case %d: %g slots", i, w.epilogue_slots / out);
        cr_expect_float_eq(w.epilogue_sfu_ops / out, cases[i].mufu, 1e-9, "case %d: %g MUFU", i, w.epilogue_sfu_ops / out);
        w.pingpong = false, w.library = false; /* the cooperative form: the epilogue adds */
        ts_costmodel m = cg.cm;
        const double with = ts_costmodel_time(&m, &w);
        const double busier = cases[i].mufu_bound ? w.epilogue_sfu_ops / m.sfu_ops_per_s
                                                  : w.epilogue_slots / (0.5 * m.fma_flops_per_s);
        ts_kernel_work none = w;
        none.epilogue_slots = none.epilogue_sfu_ops = 0;
        cr_expect_float_eq(with - ts_costmodel_time(&m, &none), busier / (m.epilogue_efficiency * w.wave_efficiency),
                           1e-12, "case %d", i);
        m.epilogue_efficiency /= 2;
        cr_expect_float_eq(ts_costmodel_time(&m, &w) - with, with - ts_costmodel_time(&cg.cm, &none), 1e-12,
                           "case %d: half the efficiency, twice the epilogue", i);
        free_compiled(&cg);
        free(yaml);
    }
}

/* The wgmma tile form pays gemm_wave_overhead_s per wave of output tiles (pipeline fill and epilogue, not
 * overlapped with the main loop); the skinny form has no such term and runs its MMAs at
 * skinny_tensor_efficiency of the tensor rate instead of gemm_efficiency. */
Test(search, a_tile_gemm_pays_an_overhead_per_wave_and_a_skinny_gemm_its_own_mma_rate) {
    char *yaml = swiglu_at("4096");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_kernel *k = only_gemm(&cg);
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
    double tiles = ceil(4096.0 / k->cfg.tile_m) * ceil(14336.0 / k->cfg.tile_n);
    cr_assert(!w.skinny);
    cr_assert_float_eq(w.tile_waves, ceil(tiles / cg.cm.sms), 1e-9, "%g waves of %g tiles", w.tile_waves, tiles);
    ts_costmodel m = cg.cm;
    double with = ts_costmodel_time(&m, &w);
    m.gemm_wave_overhead_s = 0;
    cr_assert_float_eq(with - ts_costmodel_time(&m, &w), w.tile_waves * cg.cm.gemm_wave_overhead_s, 1e-12);
    m.skinny_tensor_efficiency = cg.cm.gemm_efficiency / 4;
    cr_assert_float_eq(ts_costmodel_time(&m, &w), with - w.tile_waves * cg.cm.gemm_wave_overhead_s, 1e-12,
                       "the tile form ignores skinny_tensor_efficiency");
    free_compiled(&cg);
    free(yaml);

    compile_yaml(&cg, "graph: g\naxes: {b: 1024, k: 1024, f: 16}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [b, k]}\n  W: {dtype: fp16, shape: [k, f]}\n"
                      "ops:\n  - {name: Y, op: matmul, args: [X, W], over: k}\noutputs: [Y]\n");
    k = only_gemm(&cg);
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
    cr_assert(w.skinny && w.tile_waves == 0, "the narrow static GEMM runs skinny, without the per-wave term");
    m = cg.cm;
    m.skinny_gemm_efficiency = 1e6; /* its weight stream out of the way: the MMA term decides */
    double t = ts_costmodel_time(&m, &w);
    m.skinny_tensor_efficiency /= 2;
    cr_assert_gt(ts_costmodel_time(&m, &w), t, "its MMAs at skinny_tensor_efficiency");
    m = cg.cm;
    m.skinny_gemm_efficiency = 1e6;
    m.gemm_efficiency /= 2;
    cr_assert_float_eq(ts_costmodel_time(&m, &w), t, 1e-12, "not at gemm_efficiency");
    free_compiled(&cg);
}

/* A contraction run as a REDUCE kernel (no tiles: each output reloads its operands' rows from L1/L2) is
 * predicted from its (output, position) pairs at reduce_pairs_per_s, not from its DRAM bytes, which predicted
 * such kernels 21-40x too fast (bench/NOTES.md run 135); a plain reduction along rows and a matrix-vector
 * product (its matrix streamed once) pay no such term. So
 * a small GEMM with a short K (1024×512 over 64, then −x, GELU and tanh) is a GEMM with the chain in its
 * epilogue, where without the term the search chose a reduce kernel for the contraction — when the epilogue is
 * priced dear (at 0.3 of its rate, about as it was before run 141 weighed its ops by pipe). */
static void dear_epilogue(ts_costmodel *m) { m->epilogue_efficiency = 0.3; }
static void pairs_free(ts_costmodel *m) { dear_epilogue(m), m->reduce_pairs_per_s = 1e30; }
Test(search, a_contraction_as_a_reduce_kernel_is_predicted_from_its_pairs) {
    static const char *yaml = "graph: g\naxes: {b: 1024, i: 64, o: 512}\n"
                              "inputs:\n  X: {dtype: fp16, shape: [b, i]}\n  W: {dtype: fp16, shape: [o, i]}\n"
                              "ops:\n  - {name: Wt, op: permute, args: [W], order: [i, o]}\n"
                              "  - {name: H, op: matmul, args: [X, Wt], over: i}\n"
                              "  - {name: N, op: scale, args: [H], by: -1.0}\n"
                              "  - {name: G, op: gelu, args: [N], approximate: tanh}\n"
                              "  - {name: Y, op: tanh, args: [G]}\noutputs: [Y]\n";
    compiled_graph cg;
    compile_yaml_adjusted(&cg, yaml, dear_epilogue);
    const double gemm_s = the_one_kernel(&cg, TS_KERNEL_GEMM)->predicted_s;
    const double rate = cg.cm.reduce_pairs_per_s; /* the term as measured */
    cr_assert_lt(rate, 1e13, "costmodel/h200.yaml sets reduce_pairs_per_s");
    free_compiled(&cg);

    compile_yaml_adjusted(&cg, yaml, pairs_free); /* without the term: the contraction as one reduce kernel */
    const ts_kernel *r = the_one_kernel(&cg, TS_KERNEL_REDUCE);
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], r, &w);
    cr_assert_float_eq(w.reduce_pairs, 1024.0 * 512 * 64, 1e-3, "b·o outputs of 64 positions");
    ts_costmodel m = cg.cm;
    m.reduce_pairs_per_s = rate;
    cr_assert_geq(ts_costmodel_time(&m, &w), w.reduce_pairs / rate);
    cr_assert_gt(ts_costmodel_time(&m, &w), gemm_s, "with the term the reduce kernel loses to the GEMM");
    free_compiled(&cg);

    /* a sum of squares along rows reads each element once; a matrix-vector product streams its matrix once */
    static const char *const byte_bound[] = {
        "graph: g\naxes: {t: 1024, d: 4096}\ninputs:\n  X: {dtype: fp16, shape: [t, d]}\n"
        "ops:\n  - {name: Q, op: mul, args: [X, X]}\n  - {name: S, op: reduce_sum, args: [Q], axis: d}\noutputs: [S]\n",
        "graph: g\naxes: {t: 1024, d: 4096}\ninputs:\n  X: {dtype: fp16, shape: [t, d]}\n  v: {dtype: fp16, shape: [d]}\n"
        "ops:\n  - {name: Q, op: mul, args: [X, v]}\n  - {name: S, op: reduce_sum, args: [Q], axis: d}\noutputs: [S]\n"};
    for (int y = 0; y < 2; y++) {
        compile_yaml(&cg, byte_bound[y]);
        for (int i = 0; i < cg.out.n; i++)
            for (int j = 0; j < cg.out.plans[i].nk; j++) {
                ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[i], &cg.out.plans[i].k[j], &w);
                cr_assert_float_eq(w.reduce_pairs, 0, 1e-12, "%s", byte_bound[y]);
            }
        free_compiled(&cg);
    }
}

/* Attention: a kernel without a causal diagonal runs its MMAs at attention_whole_tiles_ratio × the fitted rate
 * (a causal one at the rate); the softmax's attention_scores_per_s is a floor under the MMA time, binding at
 * head dim 64 (bench/NOTES.md run 66). */
Test(search, attention_time_knows_whole_tiles_and_the_softmax_floor) {
#define ATTENTION_D64(mask, scores)                                                                     \
    "graph: g\naxes: {h: 32, t: 4096, s: 4096, d: 64}\n"                                                     \
    "inputs:\n  Q: {dtype: fp16, shape: [h, t, d]}\n  K: {dtype: fp16, shape: [h, s, d]}\n"                  \
    "  V: {dtype: fp16, shape: [h, s, d]}\n"                                                                 \
    "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d}\n" mask                                         \
    "  - {name: P, op: softmax, args: [" scores "], axis: s}\n"                                              \
    "  - {name: O, op: matmul, args: [P, V], over: s}\n"                                                     \
    "  - {name: Ob, op: permute, args: [O], order: [h, t, d]}\noutputs: [Ob]\n"
    const char *const yamls[2] = {
        ATTENTION_D64("", "S"),
        ATTENTION_D64("  - {name: i, op: iota, axis: t}\n  - {name: j, op: iota, axis: s}\n"
                      "  - {name: i2, op: expand, args: [i], shape: [t, s]}\n"
                      "  - {name: F, op: less_than, args: [i2, j]}\n  - {name: Sm, op: where, args: [F, -inf, S]}\n",
                      "Sm")};
    for (int causal = 0; causal < 2; causal++) {
        const char *yaml = yamls[causal];
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_ATTENTION);
        ts_kernel_work w;
        ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
        cr_assert_eq(w.whole_tiles, !causal);
        cr_assert_float_eq(w.scores, 32.0 * 4096 * 4096 * (causal ? 0.5 : 1), 1);
        ts_costmodel m = cg.cm;
        m.attention_scores_per_s = m.attention_score_ops_per_s = 1e30; /* no floor: the MMAs alone */
        double mma = ts_costmodel_time(&m, &w);
        m.attention_whole_tiles_ratio *= 1.25; /* (not so far that the exp2 rate binds instead) */
        double faster = ts_costmodel_time(&m, &w) - m.launch_s, base = mma - m.launch_s;
        if (causal) cr_assert_float_eq(faster, base, 1e-12, "a causal kernel is at the fitted rate");
        else cr_assert_float_eq(faster, base / 1.25, 1e-12, "whole tiles at the ratio");
        m = cg.cm;
        m.attention_scores_per_s = w.scores / 1e-3, m.attention_score_ops_per_s = 1e30; /* a floor of 1 ms */
        cr_assert_float_eq(ts_costmodel_time(&m, &w), m.launch_s + 1e-3, 1e-9, "the softmax floor binds");
        /* the causal score's ops as the kernel runs them: the dot alone, a compare and a select on the
         * diagonal's 2·BN/t share of the scores (BN = 128 keys at d = 64) */
        cr_assert_float_eq(w.score_fn_ops, causal ? w.scores * 2 * (2 * 128.0 / 4096) : 0, 1e-3);
        if (causal) {
            m = cg.cm;
            m.attention_scores_per_s = 1e30, m.attention_score_ops_per_s = w.score_fn_ops / 2e-3;
            cr_assert_float_eq(ts_costmodel_time(&m, &w), m.launch_s + 2e-3, 1e-9, "the functor's ops in the floor");
        }
        free_compiled(&cg);
    }
}
#undef ATTENTION_D64

Test(search, tune_may_time_other_gemm_configurations_but_none_for_a_skinny_only_gemm) {
    char *yaml = swiglu_at("1024");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_kernel *k = only_gemm(&cg);
    ts_kernel_config v[8];
    int n = ts_config_variants(&cg.c.g, &cg.out.plans[0], k, true, 132, v, 8); /* a dual GEMM: no library one */
    cr_assert_gt(n, 1);
    for (int i = 0; i < n; i++) {
        cr_expect(v[i].tile_n != k->cfg.tile_n || v[i].stages != k->cfg.stages || v[i].cluster_m != k->cfg.cluster_m ||
                      v[i].pingpong != k->cfg.pingpong,
                  "variant %d is the default", i);
        cr_expect(!v[i].pingpong, "variant %d: the dual form has no ping-pong variant (it did not pay)", i);
        cr_expect_leq(v[i].stages * (v[i].tile_m + 2 * v[i].tile_n) * 128, 225 * 1024, "dual: within shared memory");
    }
    free_compiled(&cg);
    free(yaml);
    yaml = swiglu_at("16");
    compile_yaml(&cg, yaml);
    cr_assert_eq(ts_config_variants(&cg.c.g, &cg.out.plans[0], only_gemm(&cg), false, 132, v, 8), 0);
    free_compiled(&cg);
    free(yaml);
}

/* The ping-pong GEMM (config.h) hides its epilogue behind the other warpgroup's main loop at a lower MMA
 * rate: the model, and so the configuration compile picks, takes it for a GEMM + GELU (erf's polynomial: some 30
 * FMA-pipe slots an element) and not for a plain GEMM of the same size. (GELU's tanh form, an exponential and a
 * reciprocal an element, is near the balance: 408 against 410 us on the H100, bench/NOTES.md run 136.) */
Test(search, ping_pong_gemm_is_chosen_for_a_heavy_epilogue_only) {
    const char *shapes = "axes: {m: 8192, d: 2048, n: 8192}\n"
                         "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n";
    char *gelu = ts_strfmt("graph: g\n%sops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
                           "  - {name: Y, op: gelu, args: [H]}\noutputs: [Y]\n", shapes);
    char *plain = ts_strfmt("graph: g\n%sops:\n  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Y]\n", shapes);
    const char *yaml[2] = {gelu, plain};
    for (int i = 0; i < 2; i++) {
        compiled_graph cg;
        compile_yaml(&cg, yaml[i]);
        ts_kernel k = *only_gemm(&cg);
        cr_assert_eq(k.cfg.pingpong, i == 0, "%s: ping-pong %d", i == 0 ? "GEMM + GELU" : "plain GEMM", k.cfg.pingpong);
        double t[2];
        for (int pp = 0; pp < 2; pp++) {
            ts_kernel_work w;
            k.cfg = (ts_kernel_config){.tile_m = 128, .tile_n = pp ? 128 : 256, .stages = pp ? 5 : 4, .cluster_m = 1,
                                       .pingpong = pp};
            ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &k, &w);
            cr_assert_eq(w.pingpong, pp);
            t[pp] = ts_costmodel_time(&cg.cm, &w);
        }
        if (i == 0) cr_assert_lt(t[1], t[0], "GEMM + GELU: ping-pong %g s, cooperative %g s", t[1], t[0]);
        else cr_assert_gt(t[1], t[0], "plain GEMM: ping-pong %g s, cooperative %g s", t[1], t[0]);
        free_compiled(&cg);
    }
    free(gelu), free(plain);
}

/* ---- the search itself ------------------------------------------------------------------------- */

Test(search, returns_distinct_plans_best_first_with_the_baseline_among_them) {
    compiled_graph cg;
    compile_yaml(&cg, layernorm_mlp);
    cr_assert_gt(cg.out.n, 2);
    bool baseline = false;
    for (int i = 0; i < cg.out.n; i++) {
        baseline |= strncmp(cg.out.plans[i].name, "baseline", 8) == 0;
        if (i) cr_assert_leq(cg.out.plans[i - 1].predicted_s, cg.out.plans[i].predicted_s);
        char *a = ts_plan_describe(&cg.out.plans[i], &cg.c.g);
        for (int j = 0; j < i; j++) {
            char *b = ts_plan_describe(&cg.out.plans[j], &cg.c.g);
            cr_assert(strcmp(a, b) != 0 || cg.out.plans[i].predicted_s != cg.out.plans[j].predicted_s,
                      "plans %d and %d are the same: %s", j, i, a);
            free(b);
        }
        free(a);
    }
    cr_assert(baseline);
    cr_assert_gt(cg.out.search.evals, 3, "the search went past its seeds");
    cr_assert_gt(cg.out.search.accepted, 0, "some move improved on the seeds");
    free_compiled(&cg);
}

Test(search, is_deterministic) {
    compiled_graph a, b;
    compile_yaml(&a, layernorm_mlp);
    compile_yaml(&b, layernorm_mlp);
    cr_assert_eq(a.out.n, b.out.n);
    for (int i = 0; i < a.out.n; i++) {
        cr_assert_str_eq(a.out.plans[i].name, b.out.plans[i].name);
        cr_assert_eq(a.out.plans[i].predicted_s, b.out.plans[i].predicted_s);
    }
    cr_assert_eq(a.out.search.evals, b.out.search.evals);
    free_compiled(&a);
    free_compiled(&b);
}

/* ---- attention ----------------------------------------------------------------------------------- */

/* Scaled attention over h heads at head dim d, its scores soft-capped at 50 (cap·tanh(s/cap)) when capped. */
static char *attention_yaml(int d, bool capped) {
    return ts_strfmt("graph: g\naxes: {h: 16, t_q: 2048, t_kv: 2048, d_h: %d}\n"
                     "inputs:\n  Q: {dtype: fp16, shape: [h, t_q, d_h]}\n  K: {dtype: fp16, shape: [h, t_kv, d_h]}\n"
                     "  V: {dtype: fp16, shape: [h, t_kv, d_h]}\n"
                     "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                     "  - {name: S1, op: scale, args: [S], by: 0.0625}\n%s"
                     "  - {name: P, op: softmax, args: [%s], axis: t_kv}\n"
                     "  - {name: O, op: matmul, args: [P, V], over: t_kv}\noutputs: [O]\n",
                     d,
                     capped ? "  - {name: S2, op: scale, args: [S1], by: 0.02}\n  - {name: S3, op: tanh, args: [S2]}\n"
                              "  - {name: S4, op: scale, args: [S3], by: 50.0}\n"
                            : "",
                     capped ? "S4" : "S1");
}

Test(search, head_dim_256_attention_is_one_attention_kernel_with_64_key_tiles_and_2_stages) {
    const int dims[] = {64, 128, 256}, tile_n[] = {128, 128, 64}, stages[] = {3, 3, 2};
    for (int i = 0; i < 3; i++) {
        compiled_graph cg;
        char *yaml = attention_yaml(dims[i], false);
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        cr_expect_str_eq(best, "attention [h,t_q,d_h] over t_kv", "head dim %d", dims[i]);
        const ts_kernel *k = &cg.out.plans[0].k[0];
        cr_expect_eq(k->cfg.tile_n, tile_n[i], "head dim %d", dims[i]);
        cr_expect_eq(k->cfg.stages, stages[i], "head dim %d", dims[i]);
        ts_kernel_work w;
        ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
        cr_expect_eq(w.key64, tile_n[i] == 64, "head dim %d: 64-key tiles at attention_key64_ratio", dims[i]);
        free(best);
        free(yaml);
        free_compiled(&cg);
    }
}

Test(search, a_soft_capped_attention_is_one_kernel_predicted_slower_than_the_plain_one) {
    double predicted[2];
    for (int capped = 0; capped < 2; capped++) {
        compiled_graph cg;
        char *yaml = attention_yaml(128, capped);
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        cr_assert_str_eq(best, "attention [h,t_q,d_h] over t_kv");
        const ts_expr *score = &cg.out.plans[0].k[0].expr;
        bool tanh = false;
        for (int n = 0; n < score->n; n++) tanh |= ts_expr_tanh_arg(score, n) >= 0;
        cr_expect_eq(tanh, capped, "the score's tanh is recognised exactly when there is one");
        predicted[capped] = cg.out.plans[0].predicted_s;
        free(best);
        free(yaml);
        free_compiled(&cg);
    }
    cr_expect_gt(predicted[1], 1.1 * predicted[0], "soft-capped %g s vs plain %g s", predicted[1], predicted[0]);
}

/* Split-K for decode-size GEMMs (config.h): a 4096-column weight gives 64 CTAs of 64 columns, so its K tiles
 * are shared by 4 CTAs (256); a 14336-column one has 224 CTAs already and is not split; a short K (8 K tiles
 * per CTA at least) is not split; the model counts the CTAs of a split GEMM. */
Test(search, a_decode_gemm_with_few_column_tiles_is_split_along_k) {
    const char *cases[][3] = {{"4096", "4096", "4"}, {"14336", "4096", "1"}, {"4096", "256", "1"}, {"6144", "4096", "2"}};
    for (int i = 0; i < 4; i++) {
        char *yaml = ts_strfmt("graph: g\naxes: {m: {dynamic: true, typical: 16}, k: %s, n: %s}\n"
                               "inputs:\n  X: {dtype: fp16, shape: [m, k]}\n  W: {dtype: fp16, shape: [k, n]}\n"
                               "ops:\n  - {name: Y, op: matmul, args: [X, W], over: k}\noutputs: [Y]\n",
                               cases[i][1], cases[i][0]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        ts_kernel k = *only_gemm(&cg);
        cr_assert_eq(k.cfg.sk_split, atoi(cases[i][2]), "n=%s k=%s: split %d", cases[i][0], cases[i][1], k.cfg.sk_split);
        if (k.cfg.sk_split > 1) {
            ts_kernel_work w1, w;
            ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &k, &w);
            k.cfg.sk_split = 1;
            ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &k, &w1);
            cr_assert_gt(w.wave_efficiency, w1.wave_efficiency, "the split GEMM keeps more SMs streaming");
        }
        free_compiled(&cg);
        free(yaml);
    }
}

/* An attention graph over t = 512 whose score is S/8 with `mask_ops` (YAML op lines defining M from iotas i
 * (queries) and j (keys)) added. */
static char *masked_attention_yaml(const char *mask_ops) {
    return ts_strfmt("graph: g\naxes: {h: 4, t_q: 512, t_kv: 512, d_h: 64}\n"
                     "inputs:\n  Q: {dtype: fp16, shape: [h, t_q, d_h]}\n  K: {dtype: fp16, shape: [h, t_kv, d_h]}\n"
                     "  V: {dtype: fp16, shape: [h, t_kv, d_h]}\n"
                     "ops:\n  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                     "  - {name: S1, op: scale, args: [S], by: 0.125}\n"
                     "  - {name: i, op: iota, axis: t_q, dtype: fp32}\n  - {name: j, op: iota, axis: t_kv, dtype: fp32}\n"
                     "  - {name: i2, op: expand, args: [i], shape: [t_q, t_kv]}\n"
                     "  - {name: ninf, op: constant, value: -inf, dtype: fp16}\n"
                     "  - {name: zero, op: constant, value: 0, dtype: fp16}\n%s"
                     "  - {name: S2, op: add, args: [S1, M]}\n"
                     "  - {name: P, op: softmax, args: [S2], axis: t_kv}\n"
                     "  - {name: O, op: matmul, args: [P, V], over: t_kv}\noutputs: [O]\n",
                     mask_ops);
}

/* x at (dot, q, k), in float64 (the interpreter's op semantics); other indices NAN. */
static double eval_score(const ts_expr *x, const ts_kernel *k, double dot, double q, double kk) {
    int32_t naxes = (k->m_axis > k->red_axis ? k->m_axis : k->red_axis) + 1;
    for (int i = 0; i < x->n; i++)
        if (x->node[i].kind == TS_X_INDEX && x->node[i].slot >= naxes) naxes = x->node[i].slot + 1;
    double *index = ts_xmalloc(sizeof *index * (size_t)naxes), acc[2] = {dot, 0};
    for (int a = 0; a < naxes; a++) index[a] = a == k->m_axis ? q : a == k->red_axis ? kk : NAN;
    double r = ts_expr_eval(x, acc, NULL, index, true);
    free(index);
    return r;
}

/* The score functor's unmasked form (ts_expr_below_diagonal): the graph's causal comparison (top-left, or
 * bottom-right through a constant offset) folds away below the diagonal, leaving the scaled dot, equal to the
 * score wherever k ≤ q; a mask that is not a causal comparison (keys before the query masked, a window's far
 * side) gives no unmasked form. */
Test(search, a_causal_score_below_the_diagonal_is_the_scaled_dot_alone) {
    const struct {
        const char *ops;
        bool folds;
    } cases[] = {
        {"  - {name: F, op: less_than, args: [i2, j]}\n  - {name: M, op: where, args: [F, ninf, zero]}\n", true},
        {"  - {name: three, op: constant, value: 3, dtype: fp32}\n  - {name: i3, op: add, args: [i2, three]}\n  - {name: F, op: less_than, args: [i3, j]}\n"
         "  - {name: M, op: where, args: [F, ninf, zero]}\n", true},
        {"  - {name: F, op: less_than, args: [j, i2]}\n  - {name: M, op: where, args: [F, ninf, zero]}\n", false},
        {"  - {name: hundred, op: constant, value: 100, dtype: fp32}\n  - {name: j4, op: add, args: [j, hundred]}\n  - {name: F, op: less_than, args: [j4, i2]}\n"
         "  - {name: M, op: where, args: [F, ninf, zero]}\n", false},
    };
    for (int c = 0; c < 4; c++) {
        compiled_graph cg;
        char *yaml = masked_attention_yaml(cases[c].ops);
        compile_yaml(&cg, yaml);
        char *best = best_plan(&cg);
        cr_assert_str_eq(best, "attention [h,t_q,d_h] over t_kv", "case %d", c);
        const ts_kernel *k = &cg.out.plans[0].k[0];
        ts_expr below = {0};
        bool folded = ts_expr_below_diagonal(&k->expr, k->m_axis, k->red_axis, &below);
        cr_expect_eq(folded, cases[c].folds, "case %d", c);
        if (folded) {
            for (int n = 0; n < below.n; n++)
                cr_expect(below.node[n].kind != TS_X_INDEX, "case %d: no position is read below the diagonal", c);
            const double pts[][3] = {{0.7, 5, 5}, {-3.25, 100, 2}, {12.5, 511, 0}, {-0.0625, 300, 299}};
            for (int p = 0; p < 4; p++) {
                const double want = eval_score(&k->expr, k, pts[p][0], pts[p][1], pts[p][2]);
                cr_expect_eq(eval_score(&below, k, pts[p][0], pts[p][1], pts[p][2]), want, "case %d point %d", c, p);
                cr_expect_eq(want, pts[p][0] * 0.125, "case %d point %d: unmasked below the diagonal", c, p);
            }
            cr_expect(isinf(eval_score(&k->expr, k, 1.0, 5, 9)), "case %d: the full score still masks k > q", c);
            free(below.node);
            /* the functor's masks_future form needs the graph to mask every later key (plan.c's causal): the
             * top-left mask does; q + 3 < k leaves keys q+1..q+3 unmasked. The kernel then scores the dot alone
             * and folds 0.125 into the softmax's constant. */
            below = (ts_expr){0};
            double scale = 0;
            cr_expect_eq(ts_attention_unmasked(k, 64, &below, &scale), c == 0, "case %d", c);
            if (c == 0) cr_expect_eq(scale, 0.125, "case %d", c);
            free(below.node);
        }
        free(best), free(yaml);
        free_compiled(&cg);
    }
}

/* A group norm after a GEMM, with its gain, bias and SiLU written after the reshape back to [m, f] (as
 * PyTorch's GroupNorm is): the work after the reshape runs in the groups' axes (hlir.h), so one row kernel
 * computes each group's statistics and writes the activation — the GEMM (bias in its epilogue) and that
 * kernel, no pass of its own for the gain and SiLU (three kernels before). */
Test(search, a_group_norm_with_gain_and_silu_after_a_gemm_is_one_row_kernel_after_it) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {m: 2048, d: 1024, f: 2048, g: 32, c: 64}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, f]}\n"
                      "  b: {dtype: fp16, shape: [f]}\n  w: {dtype: fp16, shape: [f]}\n  s: {dtype: fp16, shape: [f]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n  - {name: Hb, op: add, args: [H, b]}\n"
                      "  - {name: G, op: reshape, args: [Hb], shape: [m, g, c]}\n"
                      "  - {name: N, op: layernorm, args: [G], axis: c, eps: 1e-5}\n"
                      "  - {name: Nf, op: reshape, args: [N], shape: [m, f]}\n  - {name: Nw, op: mul, args: [Nf, w]}\n"
                      "  - {name: Ns, op: add, args: [Nw, s]}\n  - {name: Y, op: silu, args: [Ns]}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "gemm [m,f] over d; row [m,g,c] over c");
    free(best);
    free_compiled(&cg);
}

/* An instance norm over [h, w] written as chains of means (hlir.h, ts_graph_merge_reduced_axes): one row kernel
 * over h_w computes both statistics and writes Y (five kernels before: a row kernel and a reduction for each
 * statistic, then a map); a global average pool before a projection: one row kernel, then the GEMM. */
Test(search, an_instance_norm_over_two_axes_is_one_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 16, c: 64, h: 128, w: 128}\ninputs:\n  X: {dtype: fp16, shape: [b, c, h, w]}\n"
                      "ops:\n  - {name: S1, op: mean, args: [X], axis: w}\n  - {name: Mu, op: mean, args: [S1], axis: h}\n"
                      "  - {name: D, op: sub, args: [X, Mu]}\n  - {name: D2, op: mul, args: [D, D]}\n"
                      "  - {name: V1, op: mean, args: [D2], axis: w}\n  - {name: V, op: mean, args: [V1], axis: h}\n"
                      "  - {name: Ve, op: add, args: [V, 1e-5]}\n  - {name: R, op: rsqrt, args: [Ve]}\n"
                      "  - {name: Y, op: mul, args: [D, R]}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "row [b,c,h_w] over h_w");
    free(best);
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {b: 64, c: 512, h: 28, w: 28, n: 1000}\ninputs:\n  X: {dtype: fp16, shape: [b, c, h, w]}\n"
                      "  W: {dtype: fp16, shape: [c, n]}\nops:\n  - {name: S1, op: mean, args: [X], axis: w}\n"
                      "  - {name: P, op: mean, args: [S1], axis: h}\n  - {name: Y, op: matmul, args: [P, W], over: c}\n"
                      "outputs: [Y]\n");
    best = best_plan(&cg);
    cr_expect_str_eq(best, "row [b,c] over h_w; gemm [b,n] over c");
    free(best);
    free_compiled(&cg);
}

/* A pointwise convolution written channel-first, Σ_c W[o, c]·X[b, c, h, w] + bias (hlir.h, ts_graph_merge_free_axes):
 * h and w, free axes of X that W lacks, merge into h_w, and one GEMM batched over b reads X[b] as a [c, h·w] matrix in
 * place and writes Y[b] as [o, h·w] (three kernels before: X copied channels-last, the GEMM, the result copied back);
 * a reduction over h keeps the axes apart. */
Test(search, a_channel_first_pointwise_convolution_is_one_gemm) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 16, c: 256, h: 64, w: 64, o: 512}\ninputs:\n  X: {dtype: fp16, shape: [b, c, h, w]}\n"
                      "  W: {dtype: fp16, shape: [o, c]}\n  bias: {dtype: fp16, shape: [o]}\n"
                      "ops:\n  - {name: H, op: matmul, args: [W, X], over: c}\n"
                      "  - {name: Hp, op: permute, args: [H], order: [b, o, h, w]}\n"
                      "  - {name: Y, op: add, args: [Hp, bias]}\noutputs: [Y]\n");
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "gemm [b,o,h_w] over c");
    free(best);
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {b: 16, c: 256, h: 64, w: 64, o: 512}\ninputs:\n  X: {dtype: fp16, shape: [b, c, h, w]}\n"
                      "  W: {dtype: fp16, shape: [o, c]}\nops:\n  - {name: H, op: matmul, args: [W, X], over: c}\n"
                      "  - {name: S, op: reduce_sum, args: [H], axis: h}\noutputs: [S]\n");
    cr_expect_eq(ts_graph_find_axis(&cg.c.g, "h_w"), -1, "a reduction over h: not merged");
    free_compiled(&cg);
}

/* Compiles `yaml` (freeing it) and expects its best plan to be `want`; `what` names the case in a failure. */
static void expect_best_plan_of(char *yaml, const char *want, const char *what) {
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, want, "%s", what);
    free(best);
    free_compiled(&cg);
    free(yaml);
}

/* (A·B)·C over [m, k]·[k, n]·[n, p] at the given sizes. */
static char *matrix_chain_at(const char *sizes) {
    return ts_strfmt("graph: chain\naxes: {%s}\ninputs:\n  A: {dtype: fp16, shape: [m, k]}\n  B: {dtype: fp16, shape: [k, n]}\n"
                     "  C: {dtype: fp16, shape: [n, p]}\nops:\n  - {name: AB, op: matmul, args: [A, B], over: k}\n"
                     "  - {name: O, op: matmul, args: [AB, C], over: n}\noutputs: [O]\n",
                     sizes);
}

/* rules/algebra.rules contraction-assoc: a chain of contractions is computed in the order the cost model prefers —
 * through the narrow axis (A·(B·C) when k and p are narrow: 4.3 GFLOP as written, 67 MFLOP so), as written when
 * that is already the cheap order. */
Test(search, a_chain_of_contractions_is_reassociated_where_that_is_cheaper) {
    const struct {
        const char *sizes, *want;
    } cases[] = {{"m: 4096, k: 64, n: 4096, p: 64", "gemm [k,p] over n; gemm [m,p] over k"},
                 {"m: 4096, k: 4096, n: 64, p: 4096", "gemm [m,n] over k; gemm [m,p] over n"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_best_plan_of(matrix_chain_at(cases[i].sizes), cases[i].want, cases[i].sizes);
}

/* rules/algebra.rules sum-broadcast and scale-into-contraction: a mean over tokens after a linear layer with a bias
 * pools X first (Σ_t X·W = (Σ_t X)·W), takes the bias's Σ_t as 512·bias rather than a reduction kernel of its own,
 * and the pool stores the mean (the 1/512 moved onto the contraction's operand), in fp16 and in range — not the sum,
 * cast by a map of its own. */
Test(search, a_broadcast_summed_over_an_axis_is_scaled_by_its_size) {
    expect_best_plan_of(ts_strdup("graph: g\naxes: {b: 32, t: 512, d: 1024, n: 1024}\ninputs:\n"
                                  "  X: {dtype: fp16, shape: [b, t, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                                  "  bias: {dtype: fp16, shape: [n]}\nops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
                                  "  - {name: Hb, op: add, args: [H, bias]}\n  - {name: P, op: mean, args: [Hb], axis: t}\n"
                                  "outputs: [P]\n"),
                        "row-columns [b,d] over t; gemm [b,n] over d", "the mean over tokens");
}

/* scale-into-contraction moves only a scale of magnitude ≤ 1 onto the operand (guard `shrinks`): 0.25·Σ_t (X·W + b)
 * pools 0.25·X in one kernel; 4·Σ_t (X·W + b) keeps the 4 after the GEMM (the pool's sum cast by a map). */
Test(search, only_a_shrinking_scale_moves_onto_a_contractions_operand) {
    const struct {
        const char *by, *want;
    } cases[] = {{"0.25", "row-columns [b,d] over t; gemm [b,n] over d"},
                 {"4.0", "row-columns [b,d] over t; map [b,d]; gemm [b,n] over d"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_best_plan_of(ts_strfmt("graph: g\naxes: {b: 32, t: 512, d: 1024, n: 1024}\ninputs:\n"
                               "  X: {dtype: fp16, shape: [b, t, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"
                               "  bias: {dtype: fp16, shape: [n]}\nops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
                               "  - {name: Hb, op: add, args: [H, bias]}\n  - {name: S, op: reduce_sum, args: [Hb], axis: t}\n"
                               "  - {name: P, op: scale, args: [S], by: %s}\noutputs: [P]\n",
                               cases[i].by),
                            cases[i].want, cases[i].by);
}

/* rules/fusion.rules softmax-rounded-weighted-sum: attention whose softmax runs in fp32 (an fp32 ALiBi bias added to
 * the scores) and is rounded to the 16-bit type of V before P·V is one attention kernel, as when the graph never
 * widens — not a score GEMM, a softmax row kernel and a second GEMM. */
Test(search, a_softmax_rounded_before_it_weights_v_is_one_attention_kernel) {
    const char *types[] = {"fp16", "bf16"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        expect_best_plan_of(
            ts_strfmt("graph: alibi\naxes: {h: 16, t_q: 2048, t_kv: 2048, d_h: 128}\ninputs:\n"
                      "  Q: {dtype: %s, shape: [h, t_q, d_h]}\n  K: {dtype: %s, shape: [h, t_kv, d_h]}\n"
                      "  V: {dtype: %s, shape: [h, t_kv, d_h]}\n  slope: {dtype: fp32, shape: [h]}\nops:\n"
                      "  - {name: S, op: matmul, args: [Q, K], over: d_h}\n  - {name: S2, op: cast, args: [S], dtype: fp32}\n"
                      "  - {name: i, op: iota, axis: t_q}\n  - {name: j, op: iota, axis: t_kv}\n"
                      "  - {name: i2, op: expand, args: [i], shape: [t_q, t_kv]}\n  - {name: ji, op: sub, args: [j, i2]}\n"
                      "  - {name: ji3, op: expand, args: [ji], shape: [h, t_q, t_kv]}\n"
                      "  - {name: bias, op: mul, args: [ji3, slope]}\n  - {name: S3, op: add, args: [S2, bias]}\n"
                      "  - {name: P, op: softmax, args: [S3], axis: t_kv}\n  - {name: Pt, op: cast, args: [P], dtype: %s}\n"
                      "  - {name: O, op: matmul, args: [Pt, V], over: t_kv}\noutputs: [O]\n",
                      types[i], types[i], types[i], types[i]),
            "attention [h,t_q,d_h] over t_kv", types[i]);
}

/* A token's loss, log-sum-exp of its logits less its target's logit, averaged over the tokens (cross-entropy): the
 * three reductions of a row in one row kernel, then the mean — also when the per-token loss is an output too. The
 * search reaches it only by moving several boundaries at once (try_absorb): each reduction cut off into a kernel of
 * its own is where single toggles stop (two row kernels over the logits, or, with both outputs, a map and a
 * reduction beside them: 0.084 and 0.279 ms predicted against 0.045). */
Test(search, a_rows_reductions_feeding_a_mean_are_one_row_kernel) {
    const char *outputs[] = {"[loss]", "[loss, nll]"};
    for (size_t i = 0; i < sizeof outputs / sizeof outputs[0]; i++)
        expect_best_plan_of(
            ts_strfmt("graph: ce\naxes: {t: 2048, v: 32000}\ninputs:\n  L: {dtype: bf16, shape: [t, v]}\n"
                      "  label: {dtype: fp32, shape: [t]}\nops:\n  - {name: Lf, op: cast, args: [L], dtype: fp32}\n"
                      "  - {name: lse, op: logsumexp, args: [Lf], axis: v}\n  - {name: j, op: iota, axis: v}\n"
                      "  - {name: l2, op: expand, args: [label], shape: [t, v]}\n  - {name: dj, op: sub, args: [j, l2]}\n"
                      "  - {name: adj, op: abs, args: [dj]}\n  - {name: hit, op: less_than, args: [adj, 0.5]}\n"
                      "  - {name: picked, op: where, args: [hit, Lf, 0.0]}\n"
                      "  - {name: tgt, op: reduce_sum, args: [picked], axis: v}\n  - {name: nll, op: sub, args: [lse, tgt]}\n"
                      "  - {name: loss, op: mean, args: [nll], axis: t}\noutputs: %s\n",
                      outputs[i]),
            "row [t] over v; row [] over t", outputs[i]);
}

/* The (last) GEMM of plan p, asserting there is one and no REDUCE kernel (no contraction on CUDA cores); `best` is p
 * described, for the messages. */
static const ts_kernel *gemm_not_reduce(const ts_plan *p, const char *best) {
    const ts_kernel *gemm = NULL;
    for (int i = 0; i < p->nk; i++) {
        cr_expect_neq(p->k[i].kind, TS_KERNEL_REDUCE, "no contraction on CUDA cores: %s", best);
        if (p->k[i].kind == TS_KERNEL_GEMM) gemm = &p->k[i];
    }
    cr_assert_not_null(gemm, "%s", best);
    return gemm;
}

/* An einsum's per-head output projection, Σ_{d_h} O[b, h, t, d_h]·Wo[h, d_h, d] then Σ_h: one batched GEMM over the
 * heads whose rows run over b and t merged (O laid out [h, b, t, d_h] so that they nest, the result likewise), not a
 * reduction over d_h on CUDA cores (9.8 ms predicted before, 0.073 now). */
Test(search, a_per_head_projection_is_a_gemm_batched_over_heads_with_rows_over_both_free_axes) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup("graph: g\naxes: {b: 8, h: 12, t: 512, d_h: 64, d: 768}\ninputs:\n"
                                "  O: {dtype: fp16, shape: [b, h, t, d_h]}\n  Wo: {dtype: fp16, shape: [h, d_h, d]}\nops:\n"
                                "  - {name: Oh, op: matmul, args: [O, Wo], over: d_h}\n"
                                "  - {name: A, op: reduce_sum, args: [Oh], axis: h}\noutputs: [A]\n"));
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    const ts_kernel *gemm = gemm_not_reduce(p, best);
    const ts_graph *g = &cg.c.g;
    const int32_t b = ts_graph_find_axis(g, "b"), h = ts_graph_find_axis(g, "h"), t = ts_graph_find_axis(g, "t");
    cr_expect_eq(gemm->batch_axis, h, "%s", best);
    cr_expect(gemm->m_outer == b && gemm->m_axis == t, "rows over b and t merged: %s", best);
    cr_expect_eq(ts_gemm_rows(g, gemm), 8 * 512);
    int64_t sizes[TS_SYM_MAX_DYN] = {0};
    for (int s = -1; s < gemm->nacc; s++) { /* every access with the rows nests b over t */
        const ts_access *a = s < 0 ? &gemm->out : &gemm->acc[s];
        int db = -1, dt = -1;
        for (int d = 0; d < a->ndim; d++) db = a->axis[d] == b ? d : db, dt = a->axis[d] == t ? d : dt;
        cr_assert_eq(db < 0, dt < 0, "%s", best);
        if (db >= 0)
            cr_expect_eq(ts_sym_eval(&a->stride[db], sizes), 512 * ts_sym_eval(&a->stride[dt], sizes), "%s", best);
    }
    cr_expect_lt(p->predicted_s, 0.5e-3, "%s", best);
    free(best);
    free_compiled(&cg);
}

/* A sum over an axis of one tensor weighted by a smaller one (experts' outputs gated per token, Σ_e H[e, n, t]·g[t, e];
 * a bilinear form's Σ_j T[o, j, b]·x2[b, j]) is a row kernel down the GEMM's columns, reading each element once — not a
 * REDUCE kernel striding across the GEMM's output (0.19 and 1.49 ms predicted before, for 16 and 134 MB). */
Test(search, a_sum_weighted_by_a_smaller_tensor_is_a_row_kernel) {
    const struct {
        const char *yaml, *what;
    } cases[] = {
        {"graph: moe\naxes: {t: 1024, k: 2048, e: 8, n: 1024}\ninputs:\n  X: {dtype: fp16, shape: [t, k]}\n"
         "  W: {dtype: fp16, shape: [e, k, n]}\n  g: {dtype: fp16, shape: [t, e]}\nops:\n"
         "  - {name: H, op: matmul, args: [X, W], over: k}\n  - {name: Hg, op: mul, args: [H, g]}\n"
         "  - {name: Y, op: reduce_sum, args: [Hg], axis: e}\noutputs: [Y]\n",
         "gated experts"},
        {"graph: bilinear\naxes: {b: 4096, i: 256, j: 256, o: 64}\ninputs:\n  X1: {dtype: fp16, shape: [b, i]}\n"
         "  X2: {dtype: fp16, shape: [b, j]}\n  W: {dtype: fp16, shape: [o, i, j]}\nops:\n"
         "  - {name: T, op: matmul, args: [X1, W], over: i}\n  - {name: Y, op: matmul, args: [T, X2], over: j}\noutputs: [Y]\n",
         "bilinear"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        compiled_graph cg;
        compile_yaml(&cg, ts_strdup(cases[i].yaml));
        char *best = best_plan(&cg);
        const ts_plan *p = &cg.out.plans[0];
        int gemms = 0, rows = 0;
        for (int k = 0; k < p->nk; k++) {
            gemms += p->k[k].kind == TS_KERNEL_GEMM;
            rows += p->k[k].kind == TS_KERNEL_ROW;
            cr_expect_neq(p->k[k].kind, TS_KERNEL_REDUCE, "%s: %s", cases[i].what, best);
        }
        cr_expect(gemms == 1 && rows == 1, "%s: %s", cases[i].what, best);
        free(best);
        free_compiled(&cg);
    }
}

/* A fused gate/up weight, X[b, t, d]·W[two, d, f], sliced after the product: each half is a contraction of its own
 * (egir.c add_sliced_contraction: a slice of a product is the product of the sliced operands), each a GEMM whose
 * rows run over b and t merged, reading its half of W in place — not a reduction on CUDA cores (190 ms predicted
 * once), nor the whole product written and then sliced by transposing maps (0.29 ms for the probe with its down
 * projection, bench/probes/swiglu_fused_weight.yaml; 0.23 now; this graph 0.200 → 0.171 ms). */
Test(search, a_weight_with_two_free_axes_sliced_after_the_product_is_a_gemm_a_half) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup("graph: g\naxes: {b: 4, t: 512, d: 2048, f: 5632, two: 2, one: 1}\ninputs:\n"
                                "  X: {dtype: bf16, shape: [b, t, d]}\n  W: {dtype: bf16, shape: [two, d, f]}\nops:\n"
                                "  - {name: H, op: matmul, args: [X, W], over: d}\n"
                                "  - {name: G, op: slice, args: [H], axis: two, start: 0, as: one}\n"
                                "  - {name: U, op: slice, args: [H], axis: two, start: 1, as: one}\n"
                                "  - {name: A, op: silu, args: [G]}\n  - {name: Y, op: mul, args: [A, U]}\noutputs: [Y]\n"));
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    const ts_graph *g = &cg.c.g;
    int gemms = 0;
    for (int k = 0; k < p->nk; k++) {
        cr_expect_neq(p->k[k].kind, TS_KERNEL_REDUCE, "%s", best);
        if (p->k[k].kind != TS_KERNEL_GEMM) continue;
        gemms++;
        const int32_t bt = ts_graph_find_axis(g, "b_t"); /* b and t merged by the checker: one axis of rows or columns */
        cr_expect(p->k[k].m_axis == bt || p->k[k].n_axis == bt, "%s", best);
        cr_expect_eq(p->buf[p->k[k].acc[p->k[k].b0].buf].kind, TS_BUF_INPUT, "W's half read in place: %s", best);
    }
    cr_expect_eq(gemms, 2, "%s", best);
    cr_expect_eq(p->nk, 2, "the SiLU product in the second GEMM's epilogue, no map: %s", best);
    cr_expect_lt(p->predicted_s, 0.2e-3, "%s", best);
    free(best);
    free_compiled(&cg);
}

/* A vector against a matrix is a GEMM whose rows are the size-1 axis "_one" (plan.c try_gemm), run in its skinny
 * form: the matrix streamed once at the skinny GEMM's DRAM rate, not read by a row or column kernel (at 50-70% of
 * it). `shapes`: x's and W's shapes over d: 4096, n: 14336 (b: 64, t: 1024 for X). */
static void expect_vector_gemm(const char *xs, const char *ws, int64_t batch, const char *n_axis) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strfmt("graph: g\naxes: {d: 4096, n: 14336, b: 64, t: 1024}\ninputs:\n"
                                "  x: {dtype: fp16, shape: %s}\n  W: {dtype: fp16, shape: %s}\nops:\n"
                                "  - {name: Y, op: matmul, args: [x, W], over: d}\noutputs: [Y]\n", xs, ws));
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    const ts_graph *g = &cg.c.g;
    cr_assert_eq(p->nk, 1, "%s", best);
    const ts_kernel *k = &p->k[0];
    cr_assert_eq(k->kind, TS_KERNEL_GEMM, "%s: %s", xs, best);
    cr_expect_eq(k->m_axis, ts_graph_find_axis(g, "_one"), "%s", best);
    cr_expect_eq(k->n_axis, ts_graph_find_axis(g, n_axis), "%s", best);
    cr_expect(ts_config_gemm_skinny(g, k), "%s", best);
    cr_expect_eq(ts_gemm_batch(g, k), batch, "%s", best);
    cr_expect_eq(p->buf[k->acc[k->a].buf].kind, TS_BUF_INPUT, "the vector read in place: %s", best);
    cr_expect_eq(p->buf[k->acc[k->b0].buf].kind, TS_BUF_INPUT, "the matrix read in place: %s", best);
    free(best);
    free_compiled(&cg);
}

Test(search, a_vector_against_a_matrix_is_a_skinny_gemm) {
    expect_vector_gemm("[d]", "[d, n]", 1, "n"); /* x·W, W stored [k, n] */
    expect_vector_gemm("[d]", "[n, d]", 1, "n"); /* PyTorch's [out, in] weight */
    expect_vector_gemm("[d, n]", "[d]", 1, "n"); /* the vector on the right: W·x */
    expect_vector_gemm("[b, t, d]", "[d]", 1, "b_t"); /* a score per position: b and t one axis (hlir.h merge_free_axes) */
}

/* A decode MLP written with vectors plans as the one with a size-1 token axis: the gate and up products one dual GEMM
 * (the vector the A of both), the down projection a skinny GEMM. */
Test(search, a_vector_mlp_pairs_its_gate_and_up_products) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup("graph: g\naxes: {d: 4096, f: 14336}\ninputs:\n  x: {dtype: bf16, shape: [d]}\n"
                                "  g: {dtype: bf16, shape: [d]}\n  Wg: {dtype: bf16, shape: [f, d]}\n"
                                "  Wu: {dtype: bf16, shape: [f, d]}\n  Wd: {dtype: bf16, shape: [d, f]}\nops:\n"
                                "  - {name: xn, op: rmsnorm, args: [x, g], axis: d}\n"
                                "  - {name: G, op: matmul, args: [xn, Wg], over: d}\n"
                                "  - {name: U, op: matmul, args: [xn, Wu], over: d}\n  - {name: A, op: silu, args: [G]}\n"
                                "  - {name: H, op: mul, args: [A, U]}\n  - {name: Y, op: matmul, args: [H, Wd], over: f}\n"
                                "  - {name: R, op: add, args: [Y, x]}\noutputs: [R]\n"));
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "row [d] over d; dual-gemm [f] over d; gemm [d] over f");
    free(best);
    free_compiled(&cg);
}

/* A Frobenius norm as torch.export writes it (x / ‖x‖ with the sum over every axis, outermost first): the sums over
 * b, c and h merge into one over a strided axis, which a column kernel reads down 256 columns (0.407 ms predicted).
 * The search swaps the two sums and marks both ROW in one move (search.c try_node_with_rows): each contiguous row
 * of w summed first, then one row of the 262144 partial sums (a row kernel whose own region holds the cut sum). */
Test(search, a_sum_over_every_axis_reads_the_contiguous_rows_first) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup("graph: g\naxes: {b: 16, c: 64, h: 256, w: 256}\ninputs:\n"
                                "  x: {dtype: fp32, shape: [b, c, h, w]}\nops:\n  - {name: x2, op: mul, args: [x, x]}\n"
                                "  - {name: s1, op: reduce_sum, args: [x2], axis: b}\n"
                                "  - {name: s2, op: reduce_sum, args: [s1], axis: c}\n"
                                "  - {name: s3, op: reduce_sum, args: [s2], axis: h}\n"
                                "  - {name: s4, op: reduce_sum, args: [s3], axis: w}\n  - {name: n, op: sqrt, args: [s4]}\n"
                                "  - {name: y, op: div, args: [x, n]}\noutputs: [y]\n"));
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_assert_gt(p->nk, 0);
    cr_expect(p->k[0].kind == TS_KERNEL_ROW && !p->k[0].columns &&
                  p->k[0].red_axis == ts_graph_find_axis(&cg.c.g, "w"), "%s", best);
    cr_expect_lt(p->predicted_s, 0.3e-3, "%s", best);
    free(best);
    free_compiled(&cg);
}

/* A vector written as a one-column matrix (KernelBench's A[256, 131072]·B[131072, 1]): the size-1 axis indexes nothing,
 * so B is a vector along k that every row of A reads, and the product a ROW kernel over A's rows (a REDUCE kernel with
 * a block an output before: 0.0812 ms predicted). */
Test(search, a_one_column_matrix_is_a_vector_to_the_row_kernel) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup("graph: g\naxes: {m: 256, k: 131072, one: 1}\ninputs:\n"
                                "  A: {dtype: fp16, shape: [m, k]}\n  B: {dtype: fp16, shape: [k, one]}\nops:\n"
                                "  - {name: C, op: matmul, args: [A, B], over: k}\noutputs: [C]\n"));
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "row [m,one] over k");
    cr_expect_lt(cg.out.plans[0].predicted_s, 0.04e-3, "%s", best);
    free(best);
    free_compiled(&cg);
}

/* ---- maps over transposed operands ------------------------------------------------------------------ */

/* Y[r, c] = A[c, r] + B[r, c], with `sizes` giving r and c. */
static char *transpose_add_at(const char *sizes) {
    return ts_strfmt("graph: tadd\naxes: {%s}\ninputs:\n  A: {dtype: fp16, shape: [c, r]}\n"
                     "  B: {dtype: fp16, shape: [r, c]}\nops:\n  - {name: At, op: permute, args: [A], order: [r, c]}\n"
                     "  - {name: Y, op: add, args: [At, B]}\noutputs: [Y]\n",
                     sizes);
}

/* A map reading an operand transposed walks its threads down the output's rows (map.cuh's transposed walk,
 * config.c): the cost model counts no byte as strided, and the prediction is the
 * coalesced one; where the rows are fewer than the walk's tile, or no operand is transposed, it keeps the
 * plain walk and the transposed operand is counted strided. */
Test(search, a_map_over_a_transposed_operand_walks_down_the_rows) {
    char *yaml = transpose_add_at("r: 4096, c: 2048");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_MAP);
    cr_assert(k->cfg.walk, "the transposed operand picks the transposed walk");
    cr_assert_str_eq(axis_name(&cg, k->out.axis[k->cfg.walk_dim]), "r");
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
    cr_assert_float_eq(w.strided_bytes, 0, 1e-9, "no byte strided in the transposed walk");
    cr_assert_float_eq(w.bytes, 3.0 * 4096 * 2048 * 2, 1, "A, B read and Y written once");
    ts_kernel plain = *k;
    plain.cfg.walk = false;
    ts_kernel_work wp;
    ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &plain, &wp);
    cr_assert_float_eq(wp.strided_bytes, 4096.0 * 2048 * 2, 1, "the plain walk reads A strided");
    cr_assert_lt(ts_costmodel_time(&cg.cm, &w), ts_costmodel_time(&cg.cm, &wp) / 2);
    free_compiled(&cg);
    free(yaml);

    yaml = transpose_add_at("r: 8, c: 2048"); /* rows fewer than the tile: the plain walk */
    compile_yaml(&cg, yaml);
    cr_assert(!the_one_kernel(&cg, TS_KERNEL_MAP)->cfg.walk);
    free_compiled(&cg);
    free(yaml);
}

/* Y = (X·W)ᵀ stored [n, m]: one GEMM computing Wᵀ·Xᵀ, writing [n, m] itself — W read M-major as A (A_KM), X as a
 * k-contiguous B — where it used to write [m, n] and copy it transposed; fp32 (no M-major A of its own) keeps
 * X·W then the copy. */
Test(search, a_gemm_read_transposed_computes_the_transposed_product) {
#define YT_YAML(T)                                                                                           \
    "graph: yt\naxes: {m: 4096, k: 4096, n: 2048}\ninputs:\n  X: {dtype: " T ", shape: [m, k]}\n"               \
    "  W: {dtype: " T ", shape: [k, n]}\nops:\n  - {name: H, op: matmul, args: [X, W], over: k}\n"                \
    "  - {name: Y, op: permute, args: [H], order: [n, m]}\noutputs: [Y]\n"
    compiled_graph cg;
    compile_yaml(&cg, YT_YAML("fp16"));
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_GEMM);
    cr_expect_str_eq(axis_name(&cg, k->m_axis), "n", "the GEMM's rows are the result's outer axis");
    cr_expect_str_eq(axis_name(&cg, k->n_axis), "m");
    cr_expect(ts_gemm_a_km(k), "A = W, read M-major");
    cr_expect(!k->b_kn, "B = X, k contiguous");
    cr_expect(ts_sym_is_one(&k->out.stride[k->out.ndim - 1]) && k->out.axis[k->out.ndim - 1] == k->n_axis,
              "Y written [n, m] directly");
    free_compiled(&cg);
    compile_yaml(&cg, YT_YAML("fp32"));
    char *best = best_plan(&cg);
    cr_expect_str_eq(best, "gemm [m,n] over k; map [n,m]", "fp32: the product, then the transposing copy");
    free(best);
    free_compiled(&cg);
}

/* A pointwise convolution over channel-first activations X [b, c, t], fp16: into channels-last Y [b, t, n] a GEMM
 * per batch reading X[b] M-major (A_KM) against the broadcast weight; channel-first in and out, Y[b, n, t], the
 * weight becomes the A shared by every batch (stride 0) and X[b] an n-contiguous B — one kernel each, no copy. */
Test(search, a_pointwise_convolution_over_channel_first_activations_needs_no_copy) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: c\naxes: {b: 8, c: 1024, t: 4096, n: 1024}\ninputs:\n  X: {dtype: fp16, shape: [b, c, t]}\n"
                      "  W: {dtype: fp16, shape: [c, n]}\nops:\n  - {name: Y, op: matmul, args: [X, W], over: c}\n"
                      "outputs: [Y]\n");
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_GEMM);
    cr_expect_str_eq(axis_name(&cg, k->batch_axis), "b");
    cr_expect_str_eq(axis_name(&cg, k->m_axis), "t");
    cr_expect(ts_gemm_a_km(k) && k->b_kn, "X[b] M-major, W [c, n] as it is");
    cr_expect(ts_sym_equal(ts_access_stride(&k->acc[k->b0], k->batch_axis), ts_sym_const(0)), "W shared by the batch");
    free_compiled(&cg);
    compile_yaml(&cg, "graph: c\naxes: {b: 8, c: 1024, t: 4096, n: 1024}\ninputs:\n  X: {dtype: fp16, shape: [b, c, t]}\n"
                      "  W: {dtype: fp16, shape: [n, c]}\nops:\n  - {name: H, op: matmul, args: [W, X], over: c}\n"
                      "  - {name: Y, op: permute, args: [H], order: [b, n, t]}\noutputs: [Y]\n");
    k = the_one_kernel(&cg, TS_KERNEL_GEMM);
    cr_expect_str_eq(axis_name(&cg, k->batch_axis), "b");
    cr_expect_str_eq(axis_name(&cg, k->m_axis), "n", "the weight's rows are the GEMM's");
    cr_expect(!ts_gemm_a_km(k) && k->b_kn, "W [n, c] k-contiguous, X[b] [c, t] n-contiguous");
    cr_expect(ts_sym_equal(ts_access_stride(&k->acc[k->a], k->batch_axis), ts_sym_const(0)), "W is the A shared by the batch");
    cr_expect(k->out.axis[k->out.ndim - 1] == k->n_axis && ts_sym_is_one(&k->out.stride[k->out.ndim - 1]),
              "Y written [b, n, t] directly");
    free_compiled(&cg);
}

/* Y = A·g + B with nothing transposed: the plain walk. */
Test(search, a_map_over_row_major_operands_keeps_the_plain_walk) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: m\naxes: {r: 4096, c: 2048}\ninputs:\n  A: {dtype: fp16, shape: [r, c]}\n"
                      "  g: {dtype: fp16, shape: [r]}\n  B: {dtype: fp16, shape: [r, c]}\nops:\n"
                      "  - {name: S, op: mul, args: [A, g]}\n  - {name: Y, op: add, args: [S, B]}\noutputs: [Y]\n");
    cr_assert(!the_one_kernel(&cg, TS_KERNEL_MAP)->cfg.walk);
    free_compiled(&cg);
}

/* ---- layouts between kernels ----------------------------------------------------------------------- */

/* nn.MultiheadAttention as torch.export gives it: x read as [t, b, d] for the projection, q, k and v sliced
 * out of its result and split into heads. The projection writes its result in the order the slices read
 * (a GEMM takes rows and batch in either order), so no copy sits between it and the attention kernel, and the
 * output projection writes the graph output's [b, t, d] itself: three kernels. */
Test(search, a_projection_writes_the_order_its_readers_view_it_in) {
    char *yaml = read_text("tests/fixtures/mha_export.yaml");
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "gemm [t,b,n768] over d; attention [b,t,n4,n64] over t_2; gemm [b,t,d] over d_3");
    free(best);
    free_compiled(&cg);
    free(yaml);
}

/* Three readers of one result that all need it copied into the same layout share one copy (a value never
 * changes): a softmax written in the order of the graph output that transposes it, whose three slices read
 * it in the input's [t, b, ·] order. */
Test(search, readers_needing_the_same_layout_share_one_copy) {
    compiled_graph cg;
    compile_yaml(&cg, "graph: g\naxes: {b: 4, t: 256, n3: 3, e: 512, one: 1, one_2: 1, one_3: 1, tb: 1024}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [t, b, n3, e]}\nops:\n"
                      "  - {name: H, op: softmax, args: [X], axis: e}\n"
                      "  - {name: Ho, op: permute, args: [H], order: [b, t, n3, e]}\n"
                      "  - {name: S0, op: slice, args: [H], axis: n3, start: 0, as: one}\n"
                      "  - {name: S1, op: slice, args: [H], axis: n3, start: 1, as: one_2}\n"
                      "  - {name: S2, op: slice, args: [H], axis: n3, start: 2, as: one_3}\n"
                      "  - {name: R0, op: reshape, args: [S0], shape: [tb, e]}\n"
                      "  - {name: R1, op: reshape, args: [S1], shape: [tb, e]}\n"
                      "  - {name: R2, op: reshape, args: [S2], shape: [tb, e]}\n"
                      "  - {name: A, op: mul, args: [R0, R1]}\n  - {name: Y, op: mul, args: [A, R2]}\noutputs: [Ho, Y]\n");
    char *best = best_plan(&cg);
    cr_assert_str_eq(best, "row [b,t,n3,e] over e; map [t,b,n3,e]; map [tb,e]", "one copy for the three slices");
    free(best);
    free_compiled(&cg);
}

/* fp32 contractions are GEMM kernels of gemm_f32.cuh (config tf32x3), not reductions: a gated MLP's two
 * contractions one dual-B GEMM with the gate in its epilogue, a weight stored [out, in] read as B (N, K), a
 * batched matmul one batched GEMM; the 64×64 tiles where 128×128 ones would leave SMs idle; no row statistics of
 * A folded into them and no padded copies (their loader reads any fp32 layout). */
Test(search, fp32_contractions_are_tf32x3_gemms) {
    compiled_graph cg;
    char *y = read_text("bench/heldout/f32_swiglu.yaml");
    compile_yaml(&cg, y);
    free(y);
    const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_GEMM);
    cr_expect(k->b1 >= 0, "one dual-B GEMM");
    cr_expect(k->cfg.tf32x3 && !k->cfg.library && k->cfg.skinny_m == 0);
    cr_expect_eq(k->cfg.fb_tile_m, 128, "1024 x 2048 outputs: 128 tiles of 128x128, most SMs busy");
    cr_expect_not(k->cfg.f32_wgmma, "the dual form: gemm_f32.cuh's mma.sync kernel");
    free_compiled(&cg);
    y = read_text("bench/heldout/f32_gemm_gelu_scale.yaml");
    compile_yaml(&cg, y);
    free(y);
    k = the_one_kernel(&cg, TS_KERNEL_GEMM);
    cr_expect(k->cfg.tf32x3 && !k->b_kn, "W [o, i] read as B (N, K)");
    cr_expect_eq(k->cfg.fb_tile_m, 128);
    ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
    const int nalt = ts_config_variants(&cg.c.g, &cg.out.plans[0], k, false, 132, alt, TS_CONFIG_MAX_VARIANTS);
    bool other = false;
    for (int i = 0; i < nalt; i++) other |= alt[i].tf32x3 && alt[i].fb_tile_m == 128 && alt[i].f32_wgmma != k->cfg.f32_wgmma;
    cr_expect(other, "tune times the 128x128 tiles by wgmma (gemm_f32_sm90.cuh) and by mma.sync, side by side");
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {b: 8, m: 1000, k: 2500, n: 3000}\n"
                      "inputs:\n  A: {dtype: fp32, shape: [b, m, k]}\n  B: {dtype: fp32, shape: [b, k, n]}\n"
                      "ops:\n  - {name: S2, op: mul, args: [A, A]}\n  - {name: S, op: reduce_sum, args: [S2], axis: k}\n"
                      "  - {name: C, op: matmul, args: [A, B], over: k}\n  - {name: Y, op: mul, args: [C, S]}\n"
                      "outputs: [Y]\n");
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    for (int i = 0; i < p->nk; i++) {
        if (p->k[i].kind != TS_KERNEL_GEMM) continue;
        cr_expect(p->k[i].cfg.tf32x3, "%s", best);
        cr_expect_eq(p->k[i].cfg.fb_tile_m, 128, "8 x 8 x 24 tiles of 128x128");
        cr_expect_eq(p->k[i].nstage, 0, "no row statistics folded into an fp32 GEMM: %s", best);
        cr_expect_eq(p->k[i].batch_axis >= 0, true, "%s", best);
    }
    cr_expect_null(strstr(best, "reduce-sum [b,m,n]"), "%s", best);
    for (int i = 0; i < p->nk; i++) /* K = 2500: rows 16-byte aligned in fp32 anyway; the loader takes any */
        cr_expect_not(p->k[i].kind == TS_KERNEL_MAP && p->buf[p->k[i].out.buf].pitch > 0, "no padded copy: %s", best);
    free(best);
    free_compiled(&cg);
    compile_yaml(&cg, "graph: g\naxes: {m: 128, k: 1024, n: 512}\n"
                      "inputs:\n  A: {dtype: fp32, shape: [m, k]}\n  B: {dtype: fp32, shape: [k, n]}\n"
                      "ops:\n  - {name: C, op: matmul, args: [A, B], over: k}\noutputs: [C]\n");
    cr_expect_eq(the_one_kernel(&cg, TS_KERNEL_GEMM)->cfg.fb_tile_m, 64, "4 tiles of 128x128: 64x64 ones");
    free_compiled(&cg);
}

/* gemm_f32.cuh's 3xTF32 MMAs run over whole tiles: a lone CTA an SM issues them back to back, so a 16-row fp32
 * GEMM costs its 64-row tiles' tensor work (bench/NOTES.md run 137: 16 tiles of 64×64 at M = 16 ran 25.9 µs, predicted
 * 11.2 from the valid rows alone); the wgmma kernel's padding stays unpriced (its lone CTAs wait on loads). */
Test(search, an_fp32_gemm_pays_for_whole_tiles) {
    double flops[2];
    const int rows[2] = {16, 64};
    for (int i = 0; i < 2; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "graph: g\naxes: {m: %d, k: 512, n: 1000}\n"
                 "inputs:\n  A: {dtype: fp32, shape: [m, k]}\n  B: {dtype: fp32, shape: [k, n]}\n"
                 "ops:\n  - {name: C, op: matmul, args: [A, B], over: k}\n  - {name: Y, op: relu, args: [C]}\n"
                 "outputs: [Y]\n", rows[i]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_GEMM); /* the ReLU in its epilogue */
        cr_assert(k->cfg.tf32x3 && k->cfg.tile_m == 64 && k->cfg.tile_n == 64, "16 tiles of 64x64");
        ts_kernel_work w;
        ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], k, &w);
        flops[i] = w.tensor_flops;
        free_compiled(&cg);
    }
    cr_expect_float_eq(flops[1], 2.0 * 64 * 1024 * 512, 1e-3, "N = 1000 in 16 tiles of 64 columns");
    cr_expect_float_eq(flops[0], flops[1], 1e-3, "16 rows cost their 64-row tiles");
}

/* gemm_f32.cuh's split-K: static fp32 GEMMs whose 64x64 tiles leave SMs idle share each tile's K among a cluster
 * (sk_split), doubled while the CTAs stay under one an SM and each keeps 4 K-slices of 64; the cost model counts
 * the clusters' CTAs (KernelBench's 256x256 over K = 524288: 8.9 ms predicted unsplit). A dynamic size: unsplit. */
Test(search, fp32_gemms_with_few_tiles_split_k) {
    const char *shapes[] = {"{m: 128, k: 1024, n: 512}", "{m: 256, k: 524288, n: 256}", "{m: 128, k: 128, n: 512}",
                            "{m: {dynamic: true, typical: 128}, k: 1024, n: 512}"};
    const int split[] = {4, 8, 1, 1};
    for (int i = 0; i < 4; i++) {
        char yaml[512];
        snprintf(yaml, sizeof yaml, "graph: g\naxes: %s\n"
                 "inputs:\n  A: {dtype: fp32, shape: [m, k]}\n  B: {dtype: fp32, shape: [k, n]}\n"
                 "ops:\n  - {name: C, op: matmul, args: [A, B], over: k}\n  - {name: Y, op: relu, args: [C]}\n"
                 "outputs: [Y]\n", shapes[i]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        ts_kernel k = *the_one_kernel(&cg, TS_KERNEL_GEMM);
        cr_assert(k.cfg.tf32x3 && k.cfg.tile_m == 64, "%s: 64x64 tiles", shapes[i]);
        cr_expect_eq(k.cfg.sk_split, split[i], "%s", shapes[i]);
        if (i == 1) {
            ts_kernel_work w;
            ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &k, &w);
            const double split_s = ts_costmodel_time(&cg.cm, &w);
            k.cfg.sk_split = 1;
            ts_costmodel_work(&cg.cm, &cg.c.g, &cg.out.plans[0], &k, &w);
            cr_expect_gt(ts_costmodel_time(&cg.cm, &w), 4 * split_s, "16 tiles on 128 SMs, not 16");
            /* the warps resident on each SM set its share of the 3xTF32 rate: one 4-warp CTA half of it, two all */
            cr_expect_float_eq(ts_config_f32_warp_share(&k, 128, 132), 0.5, 1e-9);
            cr_expect_float_eq(ts_config_f32_warp_share(&k, 2 * 132, 132), 1, 1e-9);
        }
        free_compiled(&cg);
    }
}

/* A deep small fp16 GEMM (KernelBench's 256x256 over K = 524288) gets a scratch for split-K through memory
 * (plan.h k_partials: 8 chunks' sums of its 256x256 product) and a deep variant of 64x64 tiles in clusters of 8 with
 * the K tiles in 8 chunks (sk_chunks: 1024 CTAs of 128 K-slices), one more launch, their sums' bytes priced; fp32's
 * chunked variant is tune-only (not yet measured). A K that leaves the clusters' CTAs too few slices: no scratch. */
Test(search, deep_small_gemms_split_k_through_memory) {
    const char *yaml = "graph: g\naxes: {m: 256, k: 524288, n: 256}\n"
                       "inputs:\n  A: {dtype: fp16, shape: [m, k]}\n  B: {dtype: fp16, shape: [k, n]}\n"
                       "ops:\n  - {name: C, op: matmul, args: [A, B], over: k}\noutputs: [C]\n";
    compiled_graph cg;
    compile_yaml(&cg, yaml);
    ts_plan *p = &cg.out.plans[0];
    cr_assert_eq(p->nk, 1);
    ts_kernel *k = &p->k[0];
    cr_assert(k->kind == TS_KERNEL_GEMM && k->k_partials);
    const ts_buffer *S = &p->buf[k->scratch];
    cr_assert(S->kind == TS_BUF_TEMP && S->dtype == TS_FP32 && S->ndim == 0);
    cr_assert_eq(S->elems, (int64_t)TS_GEMM_MAX_CHUNKS * 256 * 256);
    /* the search takes the chunked deep variant (measured 1.45x the clusters alone, run 171), which offers the
     * clusters-only form as a variant */
    cr_assert(k->cfg.skinny_only && !k->cfg.tune_only, "the deep variant");
    cr_expect_eq(k->cfg.sk_split, 8);
    cr_expect_eq(k->cfg.sk_chunks, 8);
    ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS];
    const ts_kernel_config was = k->cfg;
    int n = ts_config_variants(&cg.c.g, p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS), v = 0;
    while (v < n && !(alt[v].skinny_only && alt[v].sk_chunks <= 1)) v++;
    cr_expect_lt(v, n, "the clusters-only variant");
    cr_expect_eq(ts_kernel_launches(k), 2, "the chunks' sum is a second kernel");
    ts_kernel_work w;
    ts_costmodel_work(&cg.cm, &cg.c.g, p, k, &w);
    const double bytes = w.bytes;
    cr_expect_float_eq(w.wave_efficiency, 1, 1e-12);
    cr_expect_eq(w.extra_launches, 1);
    char d[96];
    cr_expect_str_eq(ts_config_describe(k, d, sizeof d), "skinny 64x64, 6 stages, split-K 8 x 8 chunks");
    k->cfg.sk_chunks = 1;
    ts_costmodel_work(&cg.cm, &cg.c.g, p, k, &w);
    cr_expect_float_eq(bytes - w.bytes, 2.0 * 8 * 256 * 256 * 4, 1, "each chunk's sums written and read back");
    cr_expect_float_eq(w.wave_efficiency, 128.0 / 132, 1e-12, "16 tiles x 8");
    k->cfg = was;
    free_compiled(&cg);

    compile_yaml(&cg, "graph: g\naxes: {m: 256, k: 65536, n: 256}\n"
                      "inputs:\n  A: {dtype: fp16, shape: [m, k]}\n  B: {dtype: fp16, shape: [k, n]}\n"
                      "ops:\n  - {name: C, op: matmul, args: [A, B], over: k}\noutputs: [C]\n");
    cr_expect(!cg.out.plans[0].k[0].k_partials, "1024 K-slices: 128 a CTA of 8, too few to chunk");
    free_compiled(&cg);

    /* fp32 (gemm_f32.cuh): the 64x64 tiles' clusters of 8, and a tune-only variant with the K tiles in 8 chunks */
    compile_yaml(&cg, "graph: g\naxes: {m: 256, k: 524288, n: 256}\n"
                      "inputs:\n  A: {dtype: fp32, shape: [m, k]}\n  B: {dtype: fp32, shape: [k, n]}\n"
                      "ops:\n  - {name: C, op: matmul, args: [A, B], over: k}\noutputs: [C]\n");
    p = &cg.out.plans[0];
    k = &p->k[0];
    cr_assert(k->cfg.tf32x3 && k->cfg.sk_split == 8 && k->cfg.sk_chunks <= 1 && k->k_partials);
    n = ts_config_variants(&cg.c.g, p, k, false, 132, alt, TS_CONFIG_MAX_VARIANTS), v = 0;
    while (v < n && alt[v].sk_chunks <= 1) v++;
    cr_assert_lt(v, n, "the chunked fp32 variant");
    cr_expect(alt[v].tune_only && alt[v].sk_chunks == 8 && alt[v].sk_split == 8);
    k->cfg = alt[v];
    cr_expect_eq(ts_kernel_launches(k), 2);
    ts_costmodel_work(&cg.cm, &cg.c.g, p, k, &w);
    cr_expect_eq(w.extra_launches, 1);
    free_compiled(&cg);
}

/* Rows merged over two axes: a Linear over [b, t, d] with a residual [b, t, n] is one GEMM of b·t rows — by the checker
 * (one axis b_t, hlir.h ts_graph_merge_free_axes) where t is static, by the planner (m_outer) where t is dynamic; with
 * an epilogue operand along t alone (a position bias [t, n]) the rows cannot be one index for either, and it stays a
 * batch of b GEMMs (test_emit: the header of merged rows). */
Test(search, rows_merge_only_where_every_access_nests) {
    const char *extra[] = {"  R: {dtype: fp16, shape: [b, t, n]}\n", "  R: {dtype: fp16, shape: [b, t, n]}\n",
                           "  R: {dtype: fp16, shape: [t, n]}\n"};
    for (int i = 0; i < 3; i++) {
        char *yaml = ts_strfmt("graph: g\naxes: {b: 32, t: %s, d: 768, n: 3072}\n"
                               "inputs:\n  X: {dtype: fp16, shape: [b, t, d]}\n  W: {dtype: fp16, shape: [d, n]}\n%s"
                               "ops:\n  - {name: H, op: matmul, args: [X, W], over: d}\n"
                               "  - {name: Y, op: add, args: [H, R]}\noutputs: [Y]\n",
                               i == 1 ? "{dynamic: true, typical: 197}" : "197", extra[i]);
        compiled_graph cg;
        compile_yaml(&cg, yaml);
        const ts_kernel *k = the_one_kernel(&cg, TS_KERNEL_GEMM);
        if (i == 0) {
            cr_expect_eq(k->batch_axis, -1);
            cr_expect_str_eq(axis_name(&cg, k->m_axis), "b_t");
            cr_expect_eq(ts_gemm_rows(&cg.c.g, k), 32 * 197);
        } else if (i == 1) {
            cr_expect_eq(k->batch_axis, -1);
            cr_expect_str_eq(axis_name(&cg, k->m_outer), "b");
            cr_expect_eq(ts_gemm_rows(&cg.c.g, k), 32 * 197);
        } else {
            cr_expect_eq(ts_graph_find_axis(&cg.c.g, "b_t"), -1, "R along t alone: no merge");
            cr_expect_eq(k->m_outer, -1, "R along t alone: no merge");
            cr_expect_str_eq(axis_name(&cg, k->batch_axis), "b");
        }
        free(yaml);
        free_compiled(&cg);
    }
}

/* A 3×3 convolution over `window` views, as tsopt_torch writes one (Conv2d → ReLU → + bias): the windows laid out
 * [b, p, c·kh·kw] by one copy (im2col), then one GEMM over the taps whose result is written channel-first [b, o, p]
 * straight into the graph output (plan.c view_through_layout, reader_order_into), its bias, ReLU and second bias in
 * the epilogue (hlir.c ts_graph_merge_after_splits: the elementwise ops work over p, not [oh, ow]). */
Test(search, a_convolution_over_windows_is_a_copy_and_one_gemm_with_its_epilogue) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup(
        "graph: g\naxes: {b: 128, c: 3, h: 32, w: 32, oh: 30, kh: 3, ow: 30, kw: 3, o: 16, ckk: 27, p: 900}\n"
        "inputs:\n  X: {dtype: fp32, shape: [b, c, h, w]}\n  W: {dtype: fp32, shape: [o, c, kh, kw]}\n"
        "  bias: {dtype: fp32, shape: [o]}\n  bias2: {dtype: fp32, shape: [o]}\nops:\n"
        "  - {name: Xh, op: window, args: [X], axis: h, as: [oh, kh]}\n"
        "  - {name: Xw, op: window, args: [Xh], axis: w, as: [ow, kw]}\n"
        "  - {name: Xp, op: permute, args: [Xw], order: [b, oh, ow, c, kh, kw]}\n"
        "  - {name: Xm, op: reshape, args: [Xp], shape: [b, p, ckk]}\n"
        "  - {name: Wm, op: reshape, args: [W], shape: [o, ckk]}\n"
        "  - {name: Y, op: matmul, args: [Wm, Xm], over: ckk}\n"
        "  - {name: Yp, op: permute, args: [Y], order: [b, o, p]}\n"
        "  - {name: Ys, op: reshape, args: [Yp], shape: [b, o, oh, ow]}\n"
        "  - {name: Yb, op: add, args: [Ys, bias]}\n  - {name: Yr, op: relu, args: [Yb]}\n"
        "  - {name: Z, op: add, args: [Yr, bias2]}\noutputs: [Z]\n"));
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_assert_eq(p->nk, 2, "%s", best);
    cr_expect_eq(p->k[0].kind, TS_KERNEL_MAP, "the im2col copy: %s", best);
    const ts_kernel *k = &p->k[1];
    cr_assert_eq(k->kind, TS_KERNEL_GEMM, "%s", best);
    cr_expect_eq(p->buf[k->out.buf].kind, TS_BUF_OUTPUT, "the GEMM writes the output itself: %s", best);
    cr_expect_eq(p->buf[k->acc[k->a].buf].kind, TS_BUF_INPUT, "W read in place as A: %s", best);
    free(best);
    free_compiled(&cg);
}

/* A 3×3 max pool of stride 2 written tap by tap (tsopt_torch's pool_taps): nine strided slices of X, one MAP kernel.
 * Its nine reads overlap (each element of X is read by up to four windows' taps), so the model counts X's bytes
 * once and none of them as strided (costmodel.c shared_buffer_share): the prediction stays within 2x of X read once
 * and Y written once at the DRAM rate — 0.48 ms (nine 16 MB reads at the strided rate) before. */
Test(search, overlapping_slices_of_one_input_count_its_bytes_once) {
    compiled_graph cg;
    compile_yaml(&cg, ts_strdup(
        "graph: g\naxes: {b: 16, c: 64, h: 128, w: 128, oh: 63, ow: 63}\ninputs:\n  X: {dtype: fp32, shape: [b, c, h, w]}\n"
        "ops:\n"
        "  - {name: A, op: slice, args: [X], axis: h, start: 0, step: 2, as: oh}\n"
        "  - {name: A0, op: slice, args: [A], axis: w, start: 0, step: 2, as: ow}\n"
        "  - {name: A1, op: slice, args: [A], axis: w, start: 1, step: 2, as: ow}\n"
        "  - {name: A2, op: slice, args: [A], axis: w, start: 2, step: 2, as: ow}\n"
        "  - {name: B, op: slice, args: [X], axis: h, start: 1, step: 2, as: oh}\n"
        "  - {name: B0, op: slice, args: [B], axis: w, start: 0, step: 2, as: ow}\n"
        "  - {name: B1, op: slice, args: [B], axis: w, start: 1, step: 2, as: ow}\n"
        "  - {name: B2, op: slice, args: [B], axis: w, start: 2, step: 2, as: ow}\n"
        "  - {name: C, op: slice, args: [X], axis: h, start: 2, step: 2, as: oh}\n"
        "  - {name: C0, op: slice, args: [C], axis: w, start: 0, step: 2, as: ow}\n"
        "  - {name: C1, op: slice, args: [C], axis: w, start: 1, step: 2, as: ow}\n"
        "  - {name: C2, op: slice, args: [C], axis: w, start: 2, step: 2, as: ow}\n"
        "  - {name: M1, op: max, args: [A0, A1]}\n  - {name: M2, op: max, args: [M1, A2]}\n"
        "  - {name: M3, op: max, args: [M2, B0]}\n  - {name: M4, op: max, args: [M3, B1]}\n"
        "  - {name: M5, op: max, args: [M4, B2]}\n  - {name: M6, op: max, args: [M5, C0]}\n"
        "  - {name: M7, op: max, args: [M6, C1]}\n  - {name: Y, op: max, args: [M7, C2]}\noutputs: [Y]\n"));
    const ts_plan *p = &cg.out.plans[0];
    char *best = best_plan(&cg);
    cr_assert_eq(p->nk, 1, "%s", best);
    cr_expect_eq(p->k[0].kind, TS_KERNEL_MAP, "%s", best);
    const double bytes = 4.0 * 16 * 64 * (128.0 * 128 + 63 * 63), floor_s = bytes / 3.9e12;
    cr_expect_lt(p->predicted_s, 2 * floor_s, "%s: %.4f ms, floor %.4f", best, p->predicted_s * 1e3, floor_s * 1e3);
    free(best);
    free_compiled(&cg);
}

/* A pointwise convolution's bias and GELU, then its output permuted ([b, o, h, w] or channels-last [b, h, w, o]): the
 * checker merges h and w (free axes), the view after the epilogue reads the GEMM's [o, b, h_w] result as the output
 * wants it, so the GEMM writes that order itself (view_walk_order) and the view reads it in place (view_through_layout)
 * — one kernel; a GEMM and a transposing map before (0.108 ms predicted against 0.061). */
Test(search, an_epilogue_then_a_permuted_output_is_one_gemm) {
    const char *orders[] = {"[b, h, w, o]", "[b, o, h, w]"};
    for (int i = 0; i < 2; i++) {
        compiled_graph cg;
        compile_yaml(&cg, ts_strfmt("graph: g\naxes: {b: 16, c: 256, h: 64, w: 64, o: 512}\ninputs:\n"
                                    "  X: {dtype: fp16, shape: [b, c, h, w]}\n  W: {dtype: fp16, shape: [o, c]}\n"
                                    "  bias: {dtype: fp16, shape: [o]}\nops:\n"
                                    "  - {name: Y, op: matmul, args: [W, X], over: c}\n  - {name: Yb, op: add, args: [Y, bias]}\n"
                                    "  - {name: G, op: gelu, args: [Yb]}\n  - {name: Z, op: permute, args: [G], order: %s}\n"
                                    "outputs: [Z]\n", orders[i]));
        const ts_plan *p = &cg.out.plans[0];
        char *best = best_plan(&cg);
        cr_expect_eq(p->nk, 1, "%s: %s", orders[i], best);
        cr_expect_eq(p->k[0].kind, TS_KERNEL_GEMM, "%s: %s", orders[i], best);
        cr_expect_eq(p->buf[p->k[0].out.buf].kind, TS_BUF_OUTPUT, "%s: %s", orders[i], best);
        free(best);
        free_compiled(&cg);
    }
}
