/* test_hlir.c — views: permute, expand, split, merge and slice change only (dims, strides, offset), never
 * add nodes, and a chain of them evaluates exactly like the explicit copy written with loops. */
#include "testutil.h"

#include "hlir.h"

static ts_view contiguous(int n, const int64_t *sizes) {
    ts_view v = {.ndim = n};
    int64_t s = 1;
    for (int i = n - 1; i >= 0; i--) {
        v.axis[i] = i;
        v.size[i] = sizes[i];
        v.stride[i] = s;
        s *= sizes[i];
    }
    return v;
}

static bool same_view(const ts_view *a, const ts_view *b) {
    if (a->ndim != b->ndim || a->offset != b->offset) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->axis[i] != b->axis[i] || a->size[i] != b->size[i] || a->stride[i] != b->stride[i]) return false;
    return true;
}

Test(view, permute_swaps_strides) {
    int64_t sz[] = {2, 3};
    ts_view v = contiguous(2, sz);
    int32_t order[] = {1, 0};
    ts_view_permute(&v, order, 2);
    cr_assert_eq(v.size[0], 3);
    cr_assert_eq(v.stride[0], 1);
    cr_assert_eq(v.stride[1], 3);
}

Test(view, split_then_merge_round_trips) {
    int64_t sz[] = {4, 6};
    ts_view v = contiguous(2, sz), orig = v;
    int32_t axes[] = {7, 8};
    int64_t sizes[] = {2, 3};
    ts_view_split(&v, 1, axes, sizes, 2);
    cr_assert_eq(v.ndim, 3);
    cr_assert_eq(v.stride[1], 3);
    cr_assert_eq(v.stride[2], 1);
    cr_assert(ts_view_merge(&v, 1, 2, 1));
    cr_assert_eq(v.ndim, 2);
    cr_assert(same_view(&v, &orig));
}

Test(view, merge_refuses_dims_that_do_not_nest) {
    int64_t sz[] = {4, 6};
    ts_view v = contiguous(2, sz);
    int32_t order[] = {1, 0};
    ts_view_permute(&v, order, 2);
    ts_view before = v;
    cr_assert(!ts_view_merge(&v, 0, 2, 9));
    cr_assert(same_view(&v, &before), "unchanged on refusal");
}

Test(view, merge_skips_size_one_dims) {
    int64_t sz[] = {4, 1, 6};
    ts_view v = contiguous(3, sz);
    v.stride[1] = 12345; /* a size-1 dim's stride is irrelevant */
    cr_assert(ts_view_merge(&v, 0, 3, 5));
    cr_assert_eq(v.size[0], 24);
    cr_assert_eq(v.stride[0], 1);
}

Test(view, reversed_slice_has_negative_stride_and_offset) {
    int64_t sz[] = {5};
    ts_view v = contiguous(1, sz);
    ts_view_slice(&v, 0, 3, 4, -2, 3); /* indices 4, 2, 0 */
    int64_t idx = 2;
    cr_assert_eq(v.offset, 4);
    cr_assert_eq(v.stride[0], -2);
    cr_assert_eq(ts_view_offset(&v, &idx), 0);
}

/* Y[b, a, c] = X[a, b] through permute + expand, then reversed along b: all views, one copy node. */
Test(view, permute_broadcast_chain_evaluates_like_the_explicit_copy) {
    checked c;
    check_ok(&c, "axes: {a: 3, b: 4, c: 2}\ninputs:\n  X: {dtype: fp32, shape: [a, b]}\nops:\n"
                 "  - {name: P, op: permute, args: [X], order: [b, a]}\n"
                 "  - {name: E, op: expand, args: [P], shape: [b, a, c]}\n"
                 "  - {name: R, op: slice, args: [E], axis: b, start: 3, step: -1, as: b}\n"
                 "  - {name: Y, op: copy, args: [R]}\noutputs: [Y, E]\n");
    cr_assert_eq(c.g.nnodes, 2, "the input and the copy: views add no node");
    double x[12];
    for (int i = 0; i < 12; i++) x[i] = i * 1.5 - 4;
    double *in[] = {x};
    double **out = eval_graph(&c, in);
    for (int b = 0; b < 4; b++)
        for (int a = 0; a < 3; a++)
            for (int k = 0; k < 2; k++) {
                cr_assert_eq(out[0][(b * 3 + a) * 2 + k], x[a * 4 + (3 - b)]);
                cr_assert_eq(out[1][(b * 3 + a) * 2 + k], x[a * 4 + b]);
            }
    ts_free_buffers(out, 2);
    free_checked(&c);
}

Test(view, reshape_split_and_merge_of_a_contiguous_tensor_add_no_node) {
    checked c;
    check_ok(&c, "axes: {m: 2, hd: 6, h: 2, d: 3}\ninputs:\n  X: {dtype: fp32, shape: [m, hd]}\nops:\n"
                 "  - {name: S, op: reshape, args: [X], shape: [m, h, d]}\n"
                 "  - {name: M, op: reshape, args: [S], shape: [m, hd]}\n"
                 "  - {name: Y, op: neg, args: [M]}\noutputs: [Y]\n");
    cr_assert_eq(c.g.nnodes, 2);
    free_checked(&c);
}

Test(view, merging_a_permuted_tensor_materialises_it_once) {
    checked c;
    check_ok(&c, "axes: {a: 2, b: 3, ab: 6}\ninputs:\n  X: {dtype: fp32, shape: [a, b]}\nops:\n"
                 "  - {name: P, op: permute, args: [X], order: [b, a]}\n"
                 "  - {name: M, op: reshape, args: [P], shape: [ab]}\n"
                 "  - {name: Y, op: neg, args: [M]}\noutputs: [Y]\n");
    cr_assert_eq(c.g.nnodes, 3, "input, copy, neg");
    cr_assert_eq(c.g.nodes[1].op, TS_OP_COPY);
    double x[] = {0, 1, 2, 3, 4, 5};
    double *in[] = {x};
    double **out = eval_graph(&c, in);
    double want[] = {-0, -3, -1, -4, -2, -5}; /* Xᵀ flattened */
    for (int i = 0; i < 6; i++) cr_assert_eq(out[0][i], want[i]);
    ts_free_buffers(out, 1);
    free_checked(&c);
}

Test(stats, attention_flops_and_bytes) {
    checked c;
    check_ok(&c, "axes: {h: 16, t_q: 4096, t_kv: 4096, d_h: 128}\ninputs:\n"
                 "  Q: {dtype: fp16, shape: [h, t_q, d_h]}\n  K: {dtype: fp16, shape: [h, t_kv, d_h]}\n"
                 "  V: {dtype: fp16, shape: [h, t_kv, d_h]}\nops:\n"
                 "  - {name: S, op: matmul, args: [Q, K], over: d_h}\n"
                 "  - {name: P, op: softmax, args: [S], axis: t_kv}\n"
                 "  - {name: O, op: matmul, args: [P, V], over: t_kv}\noutputs: [O]\n");
    ts_graph_stats s = ts_graph_measure(&c.g);
    cr_assert_eq(s.contraction_flops, 4.0 * 16 * 4096 * 4096 * 128); /* 137.4 GFLOP */
    cr_assert_eq(s.min_bytes, 4.0 * 16 * 4096 * 128 * 2);
    free_checked(&c);
}
