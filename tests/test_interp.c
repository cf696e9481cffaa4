/* test_interp.c — the float64 reference interpreter against values computed by hand (or by closed-form
 * formulas written out here, independent of the interpreter): matmul, softmax, rmsnorm, silu, gelu,
 * attention with and without a causal mask, casts, random inputs and the memory budget. */
#include <math.h>

#include "testutil.h"

static double **run1(checked *c, const char *yaml, double *const *inputs) {
    check_ok(c, yaml);
    return eval_graph(c, inputs);
}

#define NEAR(a, b) near_or_fail((double)(a), (double)(b))
static void near_or_fail(double a, double b) { cr_assert(fabs(a - b) <= 1e-12 * (1 + fabs(b)), "%.17g != %.17g", a, b); }

Test(interp, matmul_matches_hand_computed_values) {
    double x[] = {1, 2, 3, 4, 5, 6};        /* (m=2, k=3) */
    double w[] = {7, 8, 9, 10, 11, 12};     /* (k=3, n=2) */
    double *in[] = {x, w};
    checked c;
    double **out = run1(&c, "axes: {m: 2, k: 3, n: 2}\ninputs:\n  X: {dtype: fp32, shape: [m, k]}\n"
                            "  W: {dtype: fp32, shape: [k, n]}\nops:\n"
                            "  - {name: Y, op: matmul, args: [X, W], over: k}\noutputs: [Y]\n", in);
    double want[] = {58, 64, 139, 154};
    for (int i = 0; i < 4; i++) NEAR(out[0][i], want[i]);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, matmul_with_transposed_operand_contracts_by_name) {
    double q[] = {1, 2, 3, 4};  /* (t_q=2, d=2) */
    double k[] = {5, 6, 7, 8};  /* (t_kv=2, d=2): Q·Kᵀ */
    double *in[] = {q, k};
    checked c;
    double **out = run1(&c, "axes: {t_q: 2, t_kv: 2, d: 2}\ninputs:\n  Q: {dtype: fp32, shape: [t_q, d]}\n"
                            "  K: {dtype: fp32, shape: [t_kv, d]}\nops:\n"
                            "  - {name: S, op: matmul, args: [Q, K], over: d}\noutputs: [S]\n", in);
    double want[] = {17, 23, 39, 53};
    for (int i = 0; i < 4; i++) NEAR(out[0][i], want[i]);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, softmax_of_one_two_three) {
    double x[] = {1, 2, 3};
    double *in[] = {x};
    checked c;
    double **out = run1(&c, "axes: {n: 3}\ninputs:\n  X: {dtype: fp32, shape: [n]}\nops:\n"
                            "  - {name: P, op: softmax, args: [X], axis: n}\noutputs: [P]\n", in);
    double want[] = {0.090030573170380462, 0.24472847105479764, 0.66524095577481771};
    for (int i = 0; i < 3; i++) NEAR(out[0][i], want[i]);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, softmax_is_stable_for_large_inputs) {
    double x[] = {1000, 1000};
    double *in[] = {x};
    checked c;
    double **out = run1(&c, "axes: {n: 2}\ninputs:\n  X: {dtype: fp32, shape: [n]}\nops:\n"
                            "  - {name: P, op: softmax, args: [X], axis: n}\noutputs: [P]\n", in);
    NEAR(out[0][0], 0.5);
    NEAR(out[0][1], 0.5);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, rmsnorm_with_gain) {
    double x[] = {3, 4, 1, 1};  /* (m=2, d=2) */
    double g[] = {2, 0.5};
    double *in[] = {x, g};
    checked c;
    double **out = run1(&c, "axes: {m: 2, d: 2}\ninputs:\n  X: {dtype: fp32, shape: [m, d]}\n"
                            "  g: {dtype: fp32, shape: [d]}\nops:\n"
                            "  - {name: N, op: rmsnorm, args: [X, g], axis: d, eps: 0.5}\noutputs: [N]\n", in);
    double r0 = 1 / sqrt((9 + 16) / 2.0 + 0.5), r1 = 1 / sqrt(1 + 0.5);
    double want[] = {3 * r0 * 2, 4 * r0 * 0.5, r1 * 2, r1 * 0.5};
    for (int i = 0; i < 4; i++) NEAR(out[0][i], want[i]);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, activations_match_closed_forms) {
    double x[] = {-2, -0.5, 0, 0.75, 3};
    double *in[] = {x};
    checked c;
    double **out = run1(&c, "axes: {n: 5}\ninputs:\n  X: {dtype: fp32, shape: [n]}\nops:\n"
                            "  - {name: S, op: silu, args: [X]}\n  - {name: G, op: gelu, args: [X], approximate: tanh}\n"
                            "  - {name: T, op: tanh, args: [X]}\n  - {name: E, op: exp, args: [X]}\n"
                            "outputs: [S, G, T, E]\n", in);
    for (int i = 0; i < 5; i++) {
        double v = x[i];
        NEAR(out[0][i], v / (1 + exp(-v)));
        NEAR(out[1][i], 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
        NEAR(out[2][i], tanh(v));
        NEAR(out[3][i], exp(v));
    }
    ts_free_buffers(out, 4);
    free_checked(&c);
}

/* softmax(Q·Kᵀ)·V written out with loops, for one head. */
static void attention_by_hand(const double *q, const double *k, const double *v, int t, int d, bool causal,
                              double *o) {
    for (int i = 0; i < t; i++) {
        double s[8], mx = -INFINITY, sum = 0;
        for (int j = 0; j < t; j++) {
            s[j] = 0;
            for (int e = 0; e < d; e++) s[j] += q[i * d + e] * k[j * d + e];
            if (causal && j > i) s[j] = -INFINITY;
            mx = fmax(mx, s[j]);
        }
        for (int j = 0; j < t; j++) sum += s[j] = exp(s[j] - mx);
        for (int e = 0; e < d; e++) {
            o[i * d + e] = 0;
            for (int j = 0; j < t; j++) o[i * d + e] += s[j] / sum * v[j * d + e];
        }
    }
}

#define ATTN_HEAD                                                                                       \
    "axes: {t_q: 3, t_kv: 3, d: 2}\ninputs:\n  Q: {dtype: fp32, shape: [t_q, d]}\n"                      \
    "  K: {dtype: fp32, shape: [t_kv, d]}\n  V: {dtype: fp32, shape: [t_kv, d]}\nops:\n"                  \
    "  - {name: S, op: matmul, args: [Q, K], over: d}\n"

Test(interp, attention_at_tiny_size) {
    double q[] = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, k[] = {0.7, 0.8, -0.9, 1.0, 0.2, -0.3},
           v[] = {1, 2, 3, 4, 5, 6}, want[6];
    double *in[] = {q, k, v};
    attention_by_hand(q, k, v, 3, 2, false, want);
    checked c;
    double **out = run1(&c, ATTN_HEAD "  - {name: P, op: softmax, args: [S], axis: t_kv}\n"
                                      "  - {name: O, op: matmul, args: [P, V], over: t_kv}\noutputs: [O]\n", in);
    for (int i = 0; i < 6; i++) NEAR(out[0][i], want[i]);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, causal_attention_masks_the_future_with_minus_infinity) {
    double q[] = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, k[] = {0.7, 0.8, -0.9, 1.0, 0.2, -0.3},
           v[] = {1, 2, 3, 4, 5, 6}, want[6];
    double *in[] = {q, k, v};
    attention_by_hand(q, k, v, 3, 2, true, want);
    checked c;
    double **out = run1(&c, ATTN_HEAD "  - {name: i, op: iota, axis: t_q}\n  - {name: j, op: iota, axis: t_kv}\n"
                                      "  - {name: i2, op: expand, args: [i], shape: [t_q, t_kv]}\n"
                                      "  - {name: f, op: less_than, args: [i2, j]}\n"
                                      "  - {name: ninf, op: constant, value: -inf}\n"
                                      "  - {name: z, op: constant, value: 0}\n"
                                      "  - {name: M, op: where, args: [f, ninf, z]}\n"
                                      "  - {name: SM, op: add, args: [S, M]}\n"
                                      "  - {name: P, op: softmax, args: [SM], axis: t_kv}\n"
                                      "  - {name: O, op: matmul, args: [P, V], over: t_kv}\noutputs: [O]\n", in);
    for (int i = 0; i < 6; i++) NEAR(out[0][i], want[i]);
    NEAR(out[0][0], 1); /* the first query sees only the first key */
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(interp, cast_rounds_to_the_target_dtype) {
    double x[] = {1.0 / 3, 70000, 1e-8};
    double *in[] = {x};
    checked c;
    double **out = run1(&c, "axes: {n: 3}\ninputs:\n  X: {dtype: fp32, shape: [n]}\nops:\n"
                            "  - {name: H, op: cast, args: [X], dtype: fp16}\n"
                            "  - {name: B, op: cast, args: [X], dtype: bf16}\noutputs: [H, B]\n", in);
    NEAR(out[0][0], 0.333251953125);
    cr_assert(isinf(out[0][1]) && out[0][1] > 0, "70000 overflows fp16");
    NEAR(out[0][2], 0.0); /* below half the smallest fp16 subnormal (2^-24 ≈ 6e-8) */
    NEAR(out[1][0], 0.333984375);
    NEAR(out[1][1], 70144);
    ts_free_buffers(out, 2);
    free_checked(&c);
}

Test(interp, dtype_round_handles_subnormals_and_ties) {
    NEAR(ts_dtype_round(TS_FP16, 0x1p-24), 0x1p-24);       /* smallest fp16 subnormal */
    NEAR(ts_dtype_round(TS_FP16, 1.5 * 0x1p-24), 0x1p-23);  /* tie rounds to even */
    NEAR(ts_dtype_round(TS_FP16, 2049), 2048);              /* tie between 2048 and 2050 → even */
    NEAR(ts_dtype_round(TS_FP16, 65504), 65504);
    NEAR(ts_dtype_round(TS_FP32, 1 + 0x1p-24), 1);
}

/* Large inputs are filled by several threads: the values are the one stream's, drawn in order across the
 * inputs (a small one first, then 3·2^20 elements, more than one thread's part), whatever the processors. */
Test(interp, random_inputs_are_one_stream_however_many_threads_fill_them) {
    checked c;
    check_ok(&c, "axes: {a: 5, n: 3145728}\ninputs:\n  S: {dtype: fp32, shape: [a]}\n  X: {dtype: bf16, shape: [n]}\n"
                 "ops:\n  - {name: Y, op: neg, args: [X]}\n  - {name: Z, op: neg, args: [S]}\noutputs: [Y, Z]\n");
    double **in = ts_random_inputs(&c.g, 42);
    unsigned long long state = 42;
    for (int i = 0; i < 5; i++) cr_assert_eq(in[0][i], ts_dtype_round(TS_FP32, 2.0 * ts_uniform(&state) - 1.0));
    for (int64_t k = 0; k < 3145728; k++) {
        double want = ts_dtype_round(TS_BF16, 2.0 * ts_uniform(&state) - 1.0);
        if (in[1][k] != want) cr_assert_fail("element %lld: %.17g, the stream's is %.17g", (long long)k, in[1][k], want);
    }
    ts_free_buffers(in, 2);
    free_checked(&c);
}

Test(interp, random_inputs_are_seeded_representable_and_not_zero) {
    checked c;
    check_ok(&c, "axes: {n: 64}\ninputs:\n  X: {dtype: fp16, shape: [n]}\nops:\n"
                 "  - {name: Y, op: neg, args: [X]}\noutputs: [Y]\n");
    double **a = ts_random_inputs(&c.g, 7), **b = ts_random_inputs(&c.g, 7), **d = ts_random_inputs(&c.g, 8);
    int zeros = 0, differ = 0;
    for (int i = 0; i < 64; i++) {
        cr_assert_eq(a[0][i], b[0][i], "same seed, same values");
        cr_assert_eq(a[0][i], ts_dtype_round(TS_FP16, a[0][i]), "representable in fp16");
        cr_assert(a[0][i] >= -1 && a[0][i] <= 1);
        zeros += a[0][i] == 0;
        differ += a[0][i] != d[0][i];
    }
    cr_assert_lt(zeros, 2);
    cr_assert_gt(differ, 60, "another seed, other values");
    ts_free_buffers(a, 1);
    ts_free_buffers(b, 1);
    ts_free_buffers(d, 1);
    free_checked(&c);
}

Test(interp, refuses_graphs_over_the_memory_budget) {
    checked c;
    check_ok(&c, "axes: {m: 1024, n: 1024}\ninputs:\n  X: {dtype: fp16, shape: [m, n]}\nops:\n"
                 "  - {name: Y, op: exp, args: [X]}\noutputs: [Y]\n");
    double **in = ts_random_inputs(&c.g, 1), **out = NULL;
    char *err = NULL;
    ts_interp_opts opts = {.max_bytes = 1 << 20};
    cr_assert_eq(ts_interp_run(&c.g, in, &out, &opts, &err), -1);
    cr_assert_str_eq(err, "evaluating needs 16.00 MiB of float64 buffers, over the interpreter's budget of 1.00 MiB; "
                          "evaluate at smaller sizes with --dims");
    free(err);
    ts_free_buffers(in, 1);
    free_checked(&c);
}

Test(interp, contraction_products_are_not_stored) {
    checked c;
    check_ok(&c, "axes: {m: 256, k: 256, n: 256}\ninputs:\n  X: {dtype: fp16, shape: [m, k]}\n"
                 "  W: {dtype: fp16, shape: [k, n]}\nops:\n"
                 "  - {name: Y, op: matmul, args: [X, W], over: k}\noutputs: [Y]\n");
    cr_assert_eq(ts_interp_bytes(&c.g), 8.0 * 256 * 256, "only the [m, n] result is stored");
    free_checked(&c);
}

/* ---- contractions through BLAS against loops written here -------------------------------------- */

/* Σ_k A[a0 + i*ai + k*ak] · B[b0 + j*bj + k*bk] for Y[i, j] at y0 + i*yi + j*yj, compared with out. */
typedef struct {
    int64_t a0, ai, ak, b0, bj, bk, y0, yi, yj;
} contraction;

static void check_contraction(const double *A, const double *B, const double *Y, int64_t I, int64_t J, int64_t K,
                              contraction c) {
    for (int64_t i = 0; i < I; i++)
        for (int64_t j = 0; j < J; j++) {
            double want = 0;
            for (int64_t k = 0; k < K; k++) want += A[c.a0 + i * c.ai + k * c.ak] * B[c.b0 + j * c.bj + k * c.bk];
            cr_assert(fabs(Y[c.y0 + i * c.yi + j * c.yj] - want) <= 1e-12 * (1 + fabs(want)), "Y[%lld, %lld]: %.17g != %.17g",
                      (long long)i, (long long)j, Y[c.y0 + i * c.yi + j * c.yj], want);
        }
}

/* Batched, transposed and swapped operand layouts, at sizes where the interpreter runs several threads. */
Test(interp, contractions_in_every_layout_match_loops) {
    checked c;
    check_ok(&c, "axes: {b: 3, m: 300, k: 130, n: 150}\ninputs:\n"
                 "  X: {dtype: fp32, shape: [b, m, k]}\n  W: {dtype: fp32, shape: [k, n]}\n"
                 "  K: {dtype: fp32, shape: [b, n, k]}\n  T: {dtype: fp32, shape: [k, m]}\n  V: {dtype: fp32, shape: [n, k]}\n"
                 "ops:\n  - {name: Y1, op: matmul, args: [X, W], over: k}\n" /* [b, m, n]: batch on A only */
                 "  - {name: Y2, op: matmul, args: [X, K], over: k}\n"      /* [b, m, n]: both batched, B transposed */
                 "  - {name: Y3, op: matmul, args: [T, V], over: k}\n"      /* [m, n]: both transposed */
                 "  - {name: Y4, op: matmul, args: [W, T], over: k}\n"      /* [n, m]: the output's inner dim from B */
                 "outputs: [Y1, Y2, Y3, Y4]\n");
    double **in = ts_random_inputs(&c.g, 7);
    double **out = eval_graph(&c, in);
    const int64_t B = 3, M = 300, K = 130, N = 150; /* M: three blocks of rows */
    for (int64_t b = 0; b < B; b++) {
        check_contraction(in[0], in[1], out[0], M, N, K, (contraction){b * M * K, K, 1, 0, 1, N, b * M * N, N, 1});
        check_contraction(in[0], in[2], out[1], M, N, K, (contraction){b * M * K, K, 1, b * N * K, K, 1, b * M * N, N, 1});
    }
    check_contraction(in[3], in[4], out[2], M, N, K, (contraction){0, 1, M, 0, K, 1, 0, N, 1});
    check_contraction(in[1], in[3], out[3], N, M, K, (contraction){0, 1, N, 0, 1, M, 0, M, 1});
    ts_free_buffers(out, 4);
    ts_free_buffers(in, 5);
    free_checked(&c);
}

/* Elementwise work after a merging reshape runs in the reshape's source axes (hlir.h,
 * ts_graph_split_after_merges): a group norm's gain, bias and SiLU over [m, f] become nodes over [m, g, c]
 * (their gain and bias read through split views), the output a merging view of the last one — and the values
 * are those of the graph as written. */
Test(interp, group_norm_gain_and_silu_after_the_reshape_run_in_its_source_axes) {
    double x[] = {1, 2, 3, 5, -1, 0, 4, 2, 0.5, -2, 3, 1};  /* (m=2, f=6) = (m, g=3, c=2) */
    double gain[] = {1, 2, -1, 0.5, 3, 1}, bias[] = {0, 1, -1, 2, 0.5, -0.5};
    double *in[] = {x, gain, bias};
    checked c;
    double **out = run1(&c, "axes: {m: 2, f: 6, g: 3, c: 2}\ninputs:\n  X: {dtype: fp32, shape: [m, f]}\n"
                            "  w: {dtype: fp32, shape: [f]}\n  b: {dtype: fp32, shape: [f]}\nops:\n"
                            "  - {name: G, op: reshape, args: [X], shape: [m, g, c]}\n"
                            "  - {name: Mu, op: mean, args: [G], axis: c}\n  - {name: D, op: sub, args: [G, Mu]}\n"
                            "  - {name: N, op: reshape, args: [D], shape: [m, f]}\n  - {name: W, op: mul, args: [N, w]}\n"
                            "  - {name: B, op: add, args: [W, b]}\n  - {name: Y, op: silu, args: [B]}\noutputs: [Y]\n", in);
    for (int m = 0; m < 2; m++)
        for (int f = 0; f < 6; f++) {
            int g0 = m * 6 + (f / 2) * 2;
            double v = (x[m * 6 + f] - (x[g0] + x[g0 + 1]) / 2) * gain[f] + bias[f];
            NEAR(out[0][m * 6 + f], v / (1 + exp(-v)));
        }
    const ts_output *o = &c.g.outputs[0];
    const ts_node *y = &c.g.nodes[o->ref.node];
    cr_assert_eq(y->ndim, 3, "the SiLU runs over [m, g, c]");
    cr_assert_eq(o->ref.view.ndim, 2, "the output is still [m, f]: a merging view of it");
    ts_free_buffers(out, 1);
    free_checked(&c);
}

/* A pointwise convolution over channel-first X (hlir.h, ts_graph_merge_free_axes): h and w merge into h_w in every node,
 * the output is still [b, o, h, w], and the values are the graph's. */
Test(interp, a_pointwise_convolution_merges_its_spatial_axes) {
    enum { B = 2, C = 3, H = 4, W = 5, O = 6 };
    double x[B * C * H * W], w[O * C], y[B * O * H * W];
    for (int i = 0; i < B * C * H * W; i++) x[i] = sin(0.41 * i) + 0.02 * i;
    for (int i = 0; i < O * C; i++) w[i] = cos(0.73 * i);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < O; o++)
            for (int p = 0; p < H * W; p++) {
                double acc = 0;
                for (int c = 0; c < C; c++) acc += w[o * C + c] * x[(b * C + c) * H * W + p];
                y[(b * O + o) * H * W + p] = acc;
            }
    double *in[] = {x, w};
    checked c;
    double **out = run1(&c,
                        "axes: {b: 2, c: 3, h: 4, w: 5, o: 6}\ninputs:\n  X: {dtype: fp32, shape: [b, c, h, w]}\n"
                        "  W: {dtype: fp32, shape: [o, c]}\nops:\n  - {name: H, op: matmul, args: [W, X], over: c}\n"
                        "  - {name: Y, op: permute, args: [H], order: [b, o, h, w]}\noutputs: [Y]\n",
                        in);
    for (int i = 0; i < B * O * H * W; i++) cr_assert(fabs(out[0][i] - y[i]) <= 1e-12, "element %d", i);
    const ts_output *o = &c.g.outputs[0];
    cr_assert_eq(c.g.nodes[o->ref.node].ndim, 3, "H is computed over [o, b, h_w]");
    cr_assert_neq(ts_graph_find_axis(&c.g, "h_w"), -1);
    cr_assert_eq(o->ref.view.ndim, 4, "and written as [b, o, h, w]");
    ts_free_buffers(out, 1);
    free_checked(&c);
}

/* An instance norm written as means over w then h (as PyTorch's exporter writes a reduction over two dims):
 * hlir.h's ts_graph_merge_reduced_axes rewrites the graph over one axis h_w — each chain of two reductions one
 * reduction, every node over [b, c, h_w], the output still [b, c, h, w] — and the values are the graph's. */
static const char *instance_norm_yaml(int c) {
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "axes: {b: 1, c: %d, h: 2, w: 3}\ninputs:\n  X: {dtype: fp32, shape: [b, c, h, w]}\nops:\n"
             "  - {name: S1, op: mean, args: [X], axis: w}\n  - {name: Mu, op: mean, args: [S1], axis: h}\n"
             "  - {name: D, op: sub, args: [X, Mu]}\n  - {name: D2, op: mul, args: [D, D]}\n"
             "  - {name: V1, op: mean, args: [D2], axis: w}\n  - {name: V, op: mean, args: [V1], axis: h}\n"
             "  - {name: Ve, op: add, args: [V, 1e-5]}\n  - {name: R, op: rsqrt, args: [Ve]}\n"
             "  - {name: Y, op: mul, args: [D, R]}\noutputs: [Y]\n",
             c);
    return buf;
}

static int reductions_over(const ts_graph *g, const char *axis) {
    int n = 0, a = ts_graph_find_axis(g, axis);
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TS_OP_REDUCE_SUM && g->nodes[i].reduce_axis == a) n++;
    return a < 0 ? 0 : n;
}

Test(interp, an_instance_norm_over_two_axes_reduces_them_merged) {
    enum { C = 64, HW = 6 };
    double x[C * HW];
    for (int i = 0; i < C * HW; i++) x[i] = sin(0.37 * i) * (1 + i % 7) + 0.1 * (i / HW);
    double *in[] = {x};
    checked c;
    double **out = run1(&c, instance_norm_yaml(C), in);
    for (int ch = 0; ch < C; ch++) {
        double mu = 0, var = 0;
        for (int k = 0; k < HW; k++) mu += x[ch * HW + k] / HW;
        for (int k = 0; k < HW; k++) var += (x[ch * HW + k] - mu) * (x[ch * HW + k] - mu) / HW;
        for (int k = 0; k < HW; k++)
            cr_assert(fabs(out[0][ch * HW + k] - (x[ch * HW + k] - mu) / sqrt(var + 1e-5)) <= 1e-9);
    }
    cr_assert_eq(reductions_over(&c.g, "h_w"), 2, "the mean and the variance each one reduction over h_w");
    cr_assert_eq(reductions_over(&c.g, "w") + reductions_over(&c.g, "h"), 0);
    const ts_output *o = &c.g.outputs[0];
    cr_assert_eq(c.g.nodes[o->ref.node].ndim, 3, "Y is computed over [b, c, h_w]");
    cr_assert_eq(o->ref.view.ndim, 4, "and written as [b, c, h, w]");
    ts_free_buffers(out, 1);
    free_checked(&c);
}

/* Merged, the reductions would leave fewer values (rows of a row kernel) than hlir.c's kMinMergedRows: the
 * chain stays as written, its first reduction over many rows. */
Test(interp, a_norm_over_two_axes_of_few_channels_keeps_its_reductions_apart) {
    checked c;
    check_ok(&c, instance_norm_yaml(8));
    cr_assert_eq(ts_graph_find_axis(&c.g, "h_w"), -1);
    cr_assert_eq(reductions_over(&c.g, "w"), 2);
    free_checked(&c);
}
