/* test_composites.c — the PyTorch vocabulary (issue 15): the primitive erf and the composites layernorm,
 * sigmoid, relu, leaky_relu, min, abs, log, softplus, logsumexp, clamp, var, pow and gelu (exact and tanh)
 * evaluated by the interpreter against closed forms written out here with libm; numbers written directly as
 * operands; every checker error these ops add, by exact text; the unknown-op hint by meaning. */
#include <float.h>
#include <math.h>

#include "testutil.h"

#define NEAR(a, b) near_or_fail((double)(a), (double)(b))
static void near_or_fail(double a, double b) {
    if (isinf(b)) cr_assert(a == b, "%.17g != %.17g", a, b);
    else cr_assert(fabs(a - b) <= 1e-12 * (1 + fabs(b)), "%.17g != %.17g", a, b);
}

#define ROW "axes: {n: 6}\ninputs:\n  X: {dtype: fp32, shape: [n]}\nops:\n" /* ops start on line 5 */
static double xs[6] = {-3.5, -1, -0.25, 0, 0.6, 2.75};

/* Evaluates a graph of one input X = xs; out[i] is output i. */
static double **eval_row(checked *c, const char *ops_and_outputs) {
    char *yaml = ts_strfmt(ROW "%s", ops_and_outputs);
    double *in[] = {xs};
    check_ok(c, yaml);
    free(yaml);
    return eval_graph(c, in);
}

static double gelu_erf(double v) { return 0.5 * v * (1 + erf(v / sqrt(2))); }
static double gelu_tanh(double v) { return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }

Test(composites, erf_and_both_gelu_forms_match_closed_forms) {
    checked c;
    double **out = eval_row(&c, "  - {name: E, op: erf, args: [X]}\n  - {name: G, op: gelu, args: [X]}\n"
                                "  - {name: N, op: gelu, args: [X], approximate: none}\n"
                                "  - {name: T, op: gelu, args: [X], approximate: tanh}\noutputs: [E, G, N, T]\n");
    for (int i = 0; i < 6; i++) {
        NEAR(out[0][i], erf(xs[i]));
        NEAR(out[1][i], gelu_erf(xs[i]));
        NEAR(out[2][i], gelu_erf(xs[i]));
        NEAR(out[3][i], gelu_tanh(xs[i]));
    }
    cr_assert(fabs(out[1][5] - out[3][5]) > 1e-5, "the default gelu is the erf form, not the tanh one");
    ts_free_buffers(out, 4);
    free_checked(&c);
}

Test(composites, pointwise_activations_match_closed_forms) {
    checked c;
    double **out = eval_row(&c, "  - {name: S, op: sigmoid, args: [X]}\n  - {name: R, op: relu, args: [X]}\n"
                                "  - {name: L, op: leaky_relu, args: [X], slope: 0.1}\n"
                                "  - {name: L2, op: leaky_relu, args: [X], slope: 2}\n"
                                "  - {name: LD, op: leaky_relu, args: [X]}\n"
                                "  - {name: A, op: abs, args: [X]}\n"
                                "  - {name: P, op: softplus, args: [X]}\n"
                                "  - {name: P2, op: softplus, args: [X], beta: 2, threshold: 1}\n"
                                "outputs: [S, R, L, L2, LD, A, P, P2]\n");
    for (int i = 0; i < 6; i++) {
        double v = xs[i];
        NEAR(out[0][i], 1 / (1 + exp(-v)));
        NEAR(out[1][i], v > 0 ? v : 0);
        NEAR(out[2][i], v > 0 ? v : 0.1 * v);
        NEAR(out[3][i], v > 0 ? v : 2 * v);
        NEAR(out[4][i], v > 0 ? v : 0.01 * v);
        NEAR(out[5][i], fabs(v));
        NEAR(out[6][i], log1p(exp(v)));
        NEAR(out[7][i], 2 * v > 1 ? v : log1p(exp(2 * v)) / 2); /* PyTorch's threshold: x itself past it */
    }
    ts_free_buffers(out, 8);
    free_checked(&c);
}

/* The exponentials and logarithms (EXP2, LOG2 nodes) that node reads, each counted once. */
static int exponentials_under(const ts_graph *g, int32_t node) {
    bool *seen = ts_xcalloc((size_t)g->nnodes, sizeof *seen);
    int32_t *stack = ts_xmalloc(sizeof *stack * (size_t)g->nnodes * 3 + sizeof *stack), n = 0;
    int count = 0;
    stack[n++] = node;
    while (n > 0) {
        int32_t i = stack[--n];
        if (seen[i]) continue;
        seen[i] = true;
        count += g->nodes[i].op == TS_OP_EXP2 || g->nodes[i].op == TS_OP_LOG2;
        for (int s = 0; s < g->nodes[i].nsrc; s++) stack[n++] = g->nodes[i].src[s].node;
    }
    free(seen);
    free(stack);
    return count;
}

/* Mish, x·tanh(softplus(x)): a tanh of a softplus (β = 1) is lowered in one exponential and one reciprocal
 * (expand.c ts_t_tanh_softplus), equal to the two composites from −∞ to +∞ — at x = 800 its e^x overflows even in
 * float64, and 1 − 2/(m + 2) still gives 1 (as an fp16 intermediate past 65504 must); a softplus with another β or
 * a low threshold keeps the two composites. */
Test(composites, mish_matches_its_closed_form_from_minus_to_plus_infinity) {
    static double wide[9] = {-INFINITY, -100, -20, -3.5, 0, 0.6, 14.5, 40, 800};
    checked c;
    check_ok(&c, "axes: {n: 9}\ninputs:\n  X: {dtype: fp32, shape: [n]}\nops:\n"
                 "  - {name: S, op: softplus, args: [X]}\n  - {name: T, op: tanh, args: [S]}\n"
                 "  - {name: M, op: mul, args: [X, T]}\n"
                 "  - {name: S2, op: softplus, args: [X], beta: 2}\n  - {name: T2, op: tanh, args: [S2]}\n"
                 "  - {name: S3, op: softplus, args: [X], threshold: 1}\n  - {name: T3, op: tanh, args: [S3]}\n"
                 "outputs: [T, M, T2, T3]\n");
    double *in[] = {wide};
    double **out = eval_graph(&c, in);
    for (int i = 0; i < 9; i++) {
        const double v = wide[i], t = v > 20 ? tanh(v) : tanh(log1p(exp(v)));
        NEAR(out[0][i], t);
        if (isfinite(v)) NEAR(out[1][i], v * t);
        else cr_assert(isnan(out[1][i]), "mish(-inf) = -inf·0, NaN as in PyTorch");
        NEAR(out[2][i], tanh(2 * v > 20 ? v : log1p(exp(2 * v)) / 2));
        NEAR(out[3][i], tanh(v > 1 ? v : log1p(exp(v))));
    }
    ts_free_buffers(out, 4);
    cr_expect_eq(exponentials_under(&c.g, c.g.outputs[0].ref.node), 1, "tanh(softplus(x)): one exponential");
    cr_expect_eq(exponentials_under(&c.g, c.g.outputs[2].ref.node), 3, "β = 2: softplus's two and tanh's");
    free_checked(&c);
}

Test(composites, log_pow_and_clamp_match_closed_forms) {
    checked c;
    double **out = eval_row(&c, "  - {name: A, op: abs, args: [X]}\n  - {name: L, op: log, args: [A]}\n"
                                "  - {name: P2, op: pow, args: [X], exponent: 2}\n"
                                "  - {name: P3, op: pow, args: [X], exponent: 3}\n"
                                "  - {name: P7, op: pow, args: [X], exponent: 7}\n"
                                "  - {name: M2, op: pow, args: [X], exponent: -2}\n"
                                "  - {name: H, op: pow, args: [A], exponent: 0.5}\n"
                                "  - {name: MH, op: pow, args: [A], exponent: -0.5}\n"
                                "  - {name: C, op: clamp, args: [X], lo: -0.5, hi: 1}\n"
                                "  - {name: CL, op: clamp, args: [X], lo: 0.1}\n"
                                "  - {name: CH, op: clamp, args: [X], hi: -0.3}\n"
                                "outputs: [L, P2, P3, P7, M2, H, MH, C, CL, CH]\n");
    for (int i = 0; i < 6; i++) {
        double v = xs[i];
        NEAR(out[0][i], log(fabs(v)));
        NEAR(out[1][i], v * v);
        NEAR(out[2][i], v * v * v);
        NEAR(out[3][i], pow(v, 7));
        NEAR(out[4][i], 1 / (v * v));
        NEAR(out[5][i], sqrt(fabs(v)));
        NEAR(out[6][i], 1 / sqrt(fabs(v)));
        NEAR(out[7][i], fmin(fmax(v, -0.5), 1));
        NEAR(out[8][i], fmax(v, 0.1));
        NEAR(out[9][i], fmin(v, -0.3));
    }
    ts_free_buffers(out, 10);
    free_checked(&c);
}

/* (m=2, d=3) rows for the reductions */
#define ROWS "axes: {m: 2, d: 3}\ninputs:\n  X: {dtype: fp32, shape: [m, d]}\n  g: {dtype: fp32, shape: [d]}\n" \
             "  b: {dtype: fp32, shape: [d]}\nops:\n" /* ops start on line 7 */
static double xm[6] = {1, 2, 4, -1000, 1000, 999}, gv[3] = {2, 0.5, -1}, bv[3] = {0.25, 0, -3};

Test(composites, var_logsumexp_and_layernorm_match_closed_forms) {
    checked c;
    double *in[] = {xm, gv, bv};
    check_ok(&c, ROWS "  - {name: V, op: var, args: [X], axis: d}\n"
                      "  - {name: V0, op: var, args: [X], axis: d, correction: 0}\n"
                      "  - {name: S, op: logsumexp, args: [X], axis: d}\n"
                      "  - {name: N, op: layernorm, args: [X, g, b], axis: d, eps: 0.5}\n"
                      "  - {name: N0, op: layernorm, args: [X], axis: d}\n"
                      "outputs: [V, V0, S, N, N0]\n");
    double **out = eval_graph(&c, in);
    for (int r = 0; r < 2; r++) {
        const double *x = xm + 3 * r;
        double mean = (x[0] + x[1] + x[2]) / 3, ss = 0, mx = fmax(x[0], fmax(x[1], x[2])), se = 0;
        for (int j = 0; j < 3; j++) ss += (x[j] - mean) * (x[j] - mean), se += exp(x[j] - mx);
        NEAR(out[0][r], ss / 2);
        NEAR(out[1][r], ss / 3);
        NEAR(out[2][r], mx + log(se)); /* stable at ±1000 */
        for (int j = 0; j < 3; j++) {
            NEAR(out[3][3 * r + j], (x[j] - mean) / sqrt(ss / 3 + 0.5) * gv[j] + bv[j]);
            NEAR(out[4][3 * r + j], (x[j] - mean) / sqrt(ss / 3 + 1e-5));
        }
    }
    ts_free_buffers(out, 5);
    free_checked(&c);
}

Test(composites, logsumexp_of_a_row_of_minus_infinity_is_minus_infinity) {
    checked c;
    double x[] = {-INFINITY, -INFINITY, -INFINITY, 0, 0, 0};
    double *in[] = {x, gv, bv};
    check_ok(&c, ROWS "  - {name: S, op: logsumexp, args: [X], axis: d}\noutputs: [S]\n");
    double **out = eval_graph(&c, in);
    NEAR(out[0][0], -INFINITY);
    NEAR(out[0][1], log(3));
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(composites, numbers_stand_for_scalar_operands) {
    checked c;
    double **out = eval_row(&c, "  - {name: A, op: add, args: [X, 2.5]}\n  - {name: B, op: sub, args: [1, X]}\n"
                                "  - {name: M, op: min, args: [X, 0.5]}\n  - {name: D, op: div, args: [-inf, X]}\n"
                                "  - {name: C, op: less_than, args: [0, X]}\n"
                                "  - {name: W, op: where, args: [C, X, 1e-2]}\noutputs: [A, B, M, D, W]\n");
    for (int i = 0; i < 6; i++) {
        double v = xs[i];
        NEAR(out[0][i], v + 2.5);
        NEAR(out[1][i], 1 - v);
        NEAR(out[2][i], fmin(v, 0.5));
        if (v != 0) NEAR(out[3][i], -INFINITY / v);
        NEAR(out[4][i], v > 0 ? v : 0.01);
    }
    ts_free_buffers(out, 5);
    free_checked(&c);
}

Test(composites, a_number_takes_the_dtype_of_its_tensor_operand) {
    checked c;
    check_ok(&c, "axes: {n: 2}\ninputs:\n  X: {dtype: fp16, shape: [n]}\nops:\n"
                 "  - {name: A, op: mul, args: [0.5, X]}\noutputs: [A]\n");
    cr_assert_eq(c.g.outputs[0].dtype, TS_FP16);
    free_checked(&c);
}

Test(composites, min_keeps_the_larger_operand_axis_order) {
    checked c;
    double *in[] = {xm, gv, bv};
    check_ok(&c, ROWS "  - {name: M, op: min, args: [g, X]}\noutputs: [M]\n");
    cr_assert_str_eq(c.g.axes[c.g.outputs[0].ref.view.axis[0]].name, "m");
    double **out = eval_graph(&c, in);
    for (int i = 0; i < 6; i++) NEAR(out[0][i], fmin(xm[i], gv[i % 3]));
    ts_free_buffers(out, 1);
    free_checked(&c);
}

/* ---- checker errors ---------------------------------------------------------------------------- */

static void expect(const char *ops, const char *want) {
    char *yaml = ts_strfmt(ROWS "%soutputs: [Y]\n", ops);
    assert_error(yaml, want);
    free(yaml);
}

Test(composites_errors, gelu_approximate_is_none_or_tanh) {
    expect("  - {name: Y, op: gelu, args: [X], approximate: fast}\n",
           "g.yaml:7:49: error: gelu approximate must be none or tanh, got 'fast'");
}

Test(composites_errors, pow_needs_a_small_integer_exponent) {
    expect("  - {name: Y, op: pow, args: [X], exponent: 2.5}\n",
           "g.yaml:7:45: error: pow exponent must be a non-zero integer from -16 to 16, or 0.5 or -0.5, got 2.5");
    expect("  - {name: Y, op: pow, args: [X], exponent: 0}\n",
           "g.yaml:7:45: error: pow exponent must be a non-zero integer from -16 to 16, or 0.5 or -0.5, got 0");
    expect("  - {name: Y, op: pow, args: [X]}\n", "g.yaml:7:19: error: pow needs 'exponent'");
}

Test(composites_errors, clamp_needs_an_ordered_bound) {
    expect("  - {name: Y, op: clamp, args: [X]}\n", "g.yaml:7:19: error: clamp needs 'lo' or 'hi'");
    expect("  - {name: Y, op: clamp, args: [X], lo: 1, hi: -1}\n", "g.yaml:7:48: error: clamp hi (-1) is below lo (1)");
    expect("  - {name: Y, op: clamp, args: [X], lo: low}\n", "g.yaml:7:41: error: lo must be a number, got 'low'");
}

Test(composites_errors, var_correction_below_the_axis_size) {
    expect("  - {name: Y, op: var, args: [X], axis: d, correction: 3}\n",
           "g.yaml:7:56: error: var correction must be an integer from 0 to 2 (axis 'd' has size 3), got 3");
    expect("  - {name: Y, op: var, args: [X], axis: k}\n", "g.yaml:7:41: error: unknown axis 'k'");
}

Test(composites_errors, softplus_beta_positive) {
    expect("  - {name: Y, op: softplus, args: [X], beta: 0}\n",
           "g.yaml:7:46: error: softplus beta must be positive and finite, got 0");
}

Test(composites_errors, layernorm_gain_and_bias_have_the_normalised_axis) {
    expect("  - {name: Y, op: layernorm, args: [X, g, X], axis: d}\n",
           "g.yaml:7:43: error: layernorm bias must have exactly the normalised axis [d], got [m, d]");
    expect("  - {name: Y, op: layernorm, args: [X, X], axis: d}\n",
           "g.yaml:7:40: error: layernorm gain must have exactly the normalised axis [d], got [m, d]");
    expect("  - {name: Y, op: layernorm, args: [X, g, b, b], axis: d}\n",
           "g.yaml:7:36: error: layernorm takes 1 to 3 operands, got 4");
}

Test(composites_errors, numbers_only_where_an_operand_may_be_a_scalar) {
    expect("  - {name: Y, op: matmul, args: [X, 2], over: d}\n",
           "g.yaml:7:37: error: operand 2 of matmul must be a tensor, got the number 2");
    expect("  - {name: Y, op: relu, args: [0.5]}\n", "g.yaml:7:32: error: operand 1 of relu must be a tensor, got the number 0.5");
}

/* The hint of the first error of `ops`. */
static char *first_hint(const char *ops) {
    char *yaml = ts_strfmt(ROWS "%soutputs: [Y]\n", ops);
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    cr_assert_eq(ts_spec_load_text(&spec, "g.yaml", yaml, strlen(yaml), &d), 0);
    cr_assert_neq(ts_check(&spec, NULL, &g, &d), 0);
    char *hint = ts_strdup(d.items[0].hint ? d.items[0].hint : "");
    ts_graph_free(&g);
    ts_diags_free(&d);
    ts_spec_free(&spec);
    free(yaml);
    return hint;
}

Test(composites_errors, unknown_op_hint_by_meaning_then_by_spelling) {
    struct {
        const char *op, *hint;
    } cases[] = {
        {"minimum", "tsopt calls it 'min' (README.md, \"Ops\")"},
        {"layer_norm", "tsopt calls it 'layernorm' (README.md, \"Ops\")"},
        {"Linear", "tsopt calls it 'matmul' (README.md, \"Ops\")"},
        {"clip", "tsopt calls it 'clamp' (README.md, \"Ops\")"},
        {"sigmoidd", "did you mean 'sigmoid'?"},
        {"erff", "did you mean 'erf'?"},
        {"frobnicate", "see README.md, \"Ops\", for the op list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *ops = ts_strfmt("  - {name: Y, op: %s, args: [X]}\n", cases[i].op);
        char *hint = first_hint(ops);
        cr_assert_str_eq(hint, cases[i].hint, "op %s", cases[i].op);
        free(hint);
        free(ops);
    }
}
