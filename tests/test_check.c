/* test_check.c — the checker: every kind of bad graph gives its exact `file:line:col: error:` message,
 * and good graphs lower to the expected shapes and dtypes. */
#include "testutil.h"

/* A valid graph whose lines the tests below vary; line numbers in messages refer to this layout. */
#define AXES "axes:\n  m: 4\n  d: 8\n  n: 3\n"   /* lines 1-4 */
#define INPUTS "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n" /* 5-7 */
#define OPS "ops:\n"                            /* line 8; ops start at line 9 */

Test(check, accepts_a_matmul_graph) {
    checked c;
    check_ok(&c, AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Y]\n");
    cr_assert_eq(c.g.noutputs, 1);
    const ts_view *v = &c.g.outputs[0].ref.view;
    cr_assert_eq(v->ndim, 2);
    cr_assert_str_eq(c.g.axes[v->axis[0]].name, "m");
    cr_assert_str_eq(c.g.axes[v->axis[1]].name, "n");
    cr_assert_eq(c.g.outputs[0].dtype, TS_FP16);
    free_checked(&c);
}

/* A number in a where takes the tensor's dtype, as in a binary op (and in PyTorch's torch.where). */
Test(check, a_where_between_a_number_and_a_tensor_has_the_tensor_dtype) {
    checked c;
    check_ok(&c, AXES INPUTS OPS "  - {name: H, op: matmul, args: [X, W], over: d}\n"
                               "  - {name: z, op: constant, value: 0.0}\n  - {name: L, op: less_than, args: [H, z]}\n"
                               "  - {name: Y, op: where, args: [L, z, H]}\n  - {name: Y2, op: where, args: [L, H, z]}\n"
                               "outputs: [Y, Y2]\n");
    cr_assert_eq(c.g.outputs[0].dtype, TS_FP16);
    cr_assert_eq(c.g.outputs[1].dtype, TS_FP16);
    free_checked(&c);
}

Test(check, malformed_yaml_names_line_and_column) {
    assert_error(AXES "inputs: [a, b\n", "g.yaml:6:1: error: malformed YAML: did not find expected ',' or ']' "
                                         "while parsing a flow sequence");
}

Test(check, unknown_op_suggests_the_closest_name) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmull, args: [X, W], over: d}\noutputs: [Y]\n",
                 "g.yaml:9:19: error: unknown op 'matmull'");
}

Test(check, wrong_operand_count) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X], over: d}\noutputs: [Y]\n",
                 "g.yaml:9:33: error: matmul takes 2 operands, got 1");
}

Test(check, unary_op_with_two_operands) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: silu, args: [X, W]}\noutputs: [Y]\n",
                 "g.yaml:9:31: error: silu takes 1 operand, got 2");
}

Test(check, undefined_tensor) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, Wq], over: d}\noutputs: [Y]\n",
                 "g.yaml:9:37: error: undefined tensor 'Wq'");
}

Test(check, duplicate_tensor_names) {
    assert_error(AXES INPUTS OPS "  - {name: W, op: silu, args: [X]}\noutputs: [W]\n",
                 "g.yaml:9:12: error: duplicate tensor name 'W'");
}

Test(check, duplicate_axis_names) {
    assert_error("axes:\n  m: 4\n  m: 8\n", "g.yaml:3:3: error: duplicate axis 'm'");
}

Test(check, cycle_is_reported_with_its_path) {
    assert_error(AXES INPUTS OPS "  - {name: A, op: add, args: [X, B]}\n  - {name: B, op: silu, args: [A]}\n"
                                 "outputs: [B]\n",
                 "g.yaml:9:12: error: cycle: A <- B <- A");
}

Test(check, self_cycle) {
    assert_error(AXES INPUTS OPS "  - {name: A, op: add, args: [X, A]}\noutputs: [A]\n",
                 "g.yaml:9:12: error: cycle: A <- A");
}

Test(check, elementwise_shape_mismatch) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: add, args: [X, W]}\noutputs: [Y]\n",
                 "g.yaml:9:34: error: shape mismatch in add: 'X' has axes [m, d], 'W' has axes [d, n]");
}

Test(check, broadcast_of_a_subset_is_accepted) {
    checked c;
    check_ok(&c, AXES "inputs:\n  X: {dtype: fp32, shape: [m, d]}\n  b: {dtype: fp32, shape: [d]}\n" OPS
                      "  - {name: Y, op: add, args: [b, X]}\noutputs: [Y]\n");
    const ts_view *v = &c.g.outputs[0].ref.view;
    cr_assert_eq(v->ndim, 2);
    cr_assert_str_eq(c.g.axes[v->axis[0]].name, "m", "the larger operand's order wins");
    free_checked(&c);
}

Test(check, dtype_mismatch_hints_a_cast) {
    assert_error(AXES "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  Z: {dtype: fp32, shape: [m, d]}\n" OPS
                      "  - {name: Y, op: add, args: [X, Z]}\noutputs: [Y]\n",
                 "g.yaml:9:34: error: dtype mismatch in add: 'X' is fp16, 'Z' is fp32");
}

Test(check, matmul_contraction_axis_missing) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, W], over: n}\noutputs: [Y]\n",
                 "g.yaml:9:47: error: matmul contracts over 'n', but operand 'X' has axes [m, d]");
}

Test(check, matmul_contraction_axes_of_different_sizes) {
    assert_error("axes:\n  m: 4\n  d: 8\n  e: 6\n  n: 3\n"
                 "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [e, n]}\n" OPS
                 "  - {name: Y, op: matmul, args: [X, W], over: [d, e]}\noutputs: [Y]\n",
                 "g.yaml:10:47: error: matmul contraction axes differ in size: 'd' is 8, 'e' is 6");
}

Test(check, matmul_over_two_names_of_equal_size) {
    checked c;
    check_ok(&c, "axes:\n  m: 4\n  d: 8\n  e: 8\n  n: 3\n"
                 "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [e, n]}\n" OPS
                 "  - {name: Y, op: matmul, args: [X, W], over: [d, e]}\noutputs: [Y]\n");
    cr_assert_eq(c.g.outputs[0].ref.view.ndim, 2);
    free_checked(&c);
}

Test(check, reduce_over_an_axis_the_tensor_lacks) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: softmax, args: [X], axis: n}\noutputs: [Y]\n",
                 "g.yaml:9:45: error: softmax over axis 'n', but 'X' has axes [m, d]");
}

Test(check, reduce_over_an_undeclared_axis) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: reduce_sum, args: [X], axis: dd}\noutputs: [Y]\n",
                 "g.yaml:9:48: error: unknown axis 'dd'");
}

Test(check, unknown_dtype) {
    assert_error(AXES "inputs:\n  X: {dtype: fp64, shape: [m, d]}\n", "g.yaml:6:14: error: unknown dtype 'fp64'");
}

Test(check, zero_size) { assert_error("axes:\n  m: 0\n", "g.yaml:2:6: error: axis size must be a positive integer, got 0"); }

Test(check, negative_size) {
    assert_error("axes:\n  m: -4\n", "g.yaml:2:6: error: axis size must be a positive integer, got -4");
}

Test(check, non_integer_size) {
    assert_error("axes:\n  m: 2.5\n", "g.yaml:2:6: error: axis size must be a positive integer, got '2.5'");
}

Test(check, size_too_large_to_parse) {
    assert_error("axes:\n  m: 99999999999999999999\n", "g.yaml:2:6: error: axis size '99999999999999999999' is too large");
}

Test(check, element_count_overflow_in_an_input) {
    assert_error("axes:\n  a: 4294967296\n  b: 4294967296\ninputs:\n  X: {dtype: fp16, shape: [a, b]}\n",
                 "g.yaml:5:27: error: shape has more than 2^56 elements");
}

/* Within int64 as elements, but not as bytes times the later stages' factors (fuzz_compile, README item 10). */
Test(check, element_count_beyond_any_gpu) {
    assert_error("axes:\n  m: 4\n  d: 866666666666666666\ninputs:\n  X: {dtype: fp32, shape: [m, d]}\n",
                 "g.yaml:5:27: error: shape has more than 2^56 elements");
}

Test(check, element_count_overflow_inside_a_contraction) {
    assert_error("axes:\n  a: 2147483648\n  b: 2147483648\n  k: 4\n"
                 "inputs:\n  X: {dtype: fp16, shape: [a, k]}\n  W: {dtype: fp16, shape: [k, b]}\n" OPS
                 "  - {name: Y, op: matmul, args: [X, W], over: k}\noutputs: [Y]\n",
                 "g.yaml:9:12: error: 'Y' would have more than 2^56 elements");
}

Test(check, output_never_produced) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Z]\n",
                 "g.yaml:10:11: error: output 'Z' is never produced");
}

Test(check, output_that_is_an_input) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [X]\n",
                 "g.yaml:10:11: error: output 'X' is a graph input");
}

Test(check, empty_file_is_an_empty_graph) {
    assert_error("", "g.yaml:1:1: error: empty graph: the file holds no YAML document");
}

Test(check, comments_only_is_an_empty_graph) {
    assert_error("# nothing here\n", "g.yaml:1:1: error: empty graph: the file holds no YAML document");
}

Test(check, graph_without_outputs) {
    assert_error(AXES INPUTS, "g.yaml:1:1: error: empty graph: no outputs");
}

Test(check, non_utf8_byte) {
    assert_error("axes:\n  m: 4\n  d\xff: 8\n", "g.yaml:3:4: error: invalid UTF-8 byte 0xff");
}

Test(check, binary_file) {
    static const char bin[] = "axes:\n\x7f" "ELF\0\0\x01";
    char *got = first_error_for(bin, sizeof bin - 1, NULL);
    cr_assert_str_eq(got, "g.yaml:2:5: error: binary file: NUL byte at offset 10");
    free(got);
}

Test(check, unknown_top_level_key) {
    assert_error("axis:\n  m: 4\n", "g.yaml:1:1: error: unknown key 'axis' at the top level");
}

Test(check, unknown_op_attribute) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, W], ovr: d}\noutputs: [Y]\n",
                 "g.yaml:9:41: error: unknown key 'ovr' for op matmul");
}

Test(check, unknown_axis_in_a_shape) {
    assert_error(AXES "inputs:\n  X: {dtype: fp16, shape: [m, k]}\n", "g.yaml:6:31: error: unknown axis 'k'");
}

Test(check, repeated_axis_in_a_shape) {
    assert_error(AXES "inputs:\n  X: {dtype: fp16, shape: [m, m]}\n",
                 "g.yaml:6:31: error: axis 'm' appears twice in the shape");
}

Test(check, dims_override_unknown_axis) {
    char *got = first_error_for(AXES, strlen(AXES), "q=3");
    cr_assert_str_eq(got, "g.yaml: error: --dims: the graph has no axis 'q'");
    free(got);
}

Test(check, dims_override_resizes_the_graph) {
    checked c;
    check_ok_dims(&c, AXES INPUTS OPS "  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Y]\n", "m=2,d=5");
    cr_assert_eq(c.g.outputs[0].ref.view.size[0], 2);
    cr_assert_eq(c.g.axes[ts_graph_find_axis(&c.g, "d")].size, 5);
    free_checked(&c);
}

Test(check, dynamic_axis_needs_a_typical_size) {
    assert_error("axes:\n  t: {dynamic: true}\n", "g.yaml:2:6: error: dynamic axis 't' needs a typical size");
}

Test(check, like_axes_follow_their_root) {
    checked c;
    check_ok_dims(&c, "axes:\n  t: {dynamic: true, typical: 64}\n  s: {like: t}\n  d: 4\n"
                      "inputs:\n  K: {dtype: fp16, shape: [t, d]}\n" OPS
                      "  - {name: K2, op: reshape, args: [K], shape: [s, d]}\n"
                      "  - {name: Y, op: copy, args: [K2]}\noutputs: [Y]\n",
                  "t=7");
    int s = ts_graph_find_axis(&c.g, "s");
    cr_assert_eq(c.g.axes[s].size, 7);
    cr_assert(c.g.axes[s].dynamic);
    free_checked(&c);
}

Test(check, renaming_a_dynamic_axis_needs_like) {
    assert_error("axes:\n  t: {dynamic: true, typical: 64}\n  s: 64\n  d: 4\n"
                 "inputs:\n  K: {dtype: fp16, shape: [t, d]}\n" OPS
                 "  - {name: K2, op: reshape, args: [K], shape: [s, d]}\noutputs: [K2]\n",
                 "g.yaml:8:47: error: cannot rename dynamic axis 't' to 's': their sizes are not tied");
}

Test(check, slice_out_of_range) {
    assert_error("axes:\n  d: 8\n  h: 4\ninputs:\n  X: {dtype: fp16, shape: [d]}\n" OPS
                 "  - {name: Y, op: slice, args: [X], axis: d, start: 6, as: h}\noutputs: [Y]\n",
                 "g.yaml:7:60: error: slice out of range: indices 6..9 of axis 'd' (size 8)");
}

/* window: windows i·step + j·dilation of one axis; out of range, a wrong `as`, a dynamic axis and a bad step are
 * each named where they are written. */
#define WINDOW_GRAPH(axes, op) "axes:\n" axes "inputs:\n  X: {dtype: fp16, shape: [c, h]}\n" OPS "  - " op "\noutputs: [Y]\n"
Test(check, window_out_of_range) {
    assert_error(WINDOW_GRAPH("  c: 2\n  h: 9\n  o: 4\n  k: 3\n",
                              "{name: Y, op: window, args: [X], axis: h, as: [o, k], step: 2, dilation: 2}"),
                 "g.yaml:9:51: error: window out of range: 4 windows of step 2 and 3 taps of dilation 2 need 11 "
                 "elements of axis 'h' (size 9)");
}

Test(check, window_needs_two_new_axes_and_static_sizes) {
    assert_error(WINDOW_GRAPH("  c: 2\n  h: 9\n  o: 7\n  k: 3\n", "{name: Y, op: window, args: [X], axis: h, as: [o]}"),
                 "g.yaml:9:51: error: window needs two new axes, the windows' and the taps'");
    assert_error(WINDOW_GRAPH("  c: 2\n  h: {dynamic: true, typical: 9}\n  o: 7\n  k: 3\n",
                              "{name: Y, op: window, args: [X], axis: h, as: [o, k]}"),
                 "g.yaml:9:44: error: cannot window dynamic axis 'h'");
    assert_error(WINDOW_GRAPH("  c: 2\n  h: 9\n  o: 7\n  k: 3\n",
                              "{name: Y, op: window, args: [X], axis: h, as: [o, k], step: 0}"),
                 "g.yaml:9:65: error: step must be a positive integer");
    assert_error(WINDOW_GRAPH("  c: 2\n  h: 9\n  o: 7\n  k: 3\n", "{name: Y, op: window, args: [X], axis: h, as: [c, k]}"),
                 "g.yaml:9:51: error: 'X' already has an axis 'c'");
}

/* A 3×3 window of stride 2 over h and one of stride 1 over w: the view's strides step the input's rows and
 * columns, overlapping (the taps and the windows share elements). */
Test(check, window_is_a_strided_view) {
    checked c;
    check_ok_dims(&c, "axes: {c: 2, h: 9, w: 6, oh: 4, kh: 3, ow: 4, kw: 3}\n"
                      "inputs:\n  X: {dtype: fp16, shape: [c, h, w]}\n" OPS
                      "  - {name: A, op: window, args: [X], axis: h, as: [oh, kh], step: 2}\n"
                      "  - {name: Y, op: window, args: [A], axis: w, as: [ow, kw]}\noutputs: [Y]\n",
                  NULL);
    const ts_view *v = &c.g.outputs[0].ref.view;
    const int64_t strides[] = {54, 12, 6, 1, 1}, sizes[] = {2, 4, 3, 4, 3};
    cr_assert_eq(v->ndim, 5);
    for (int d = 0; d < 5; d++) {
        cr_expect_eq(v->stride[d], strides[d], "dim %d: stride %lld", d, (long long)v->stride[d]);
        cr_expect_eq(v->size[d], sizes[d], "dim %d", d);
    }
    free_checked(&c);
}

Test(check, reshape_that_changes_the_element_count) {
    assert_error("axes:\n  d: 8\n  a: 2\n  b: 3\ninputs:\n  X: {dtype: fp16, shape: [d]}\n" OPS
                 "  - {name: Y, op: reshape, args: [X], shape: [a, b]}\noutputs: [Y]\n",
                 "g.yaml:8:46: error: reshape changes the element count: 'X' has 8, the shape 6");
}

Test(check, permute_must_list_every_axis) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: permute, args: [X], order: [d]}\noutputs: [Y]\n",
                 "g.yaml:9:46: error: permute order must list exactly the axes of 'X': [m, d]");
}

Test(check, input_is_not_an_op) {
    assert_error(AXES INPUTS OPS "  - {name: Y, op: input}\noutputs: [Y]\n",
                 "g.yaml:9:19: error: 'input' is not an op: declare inputs under inputs:");
}

Test(check, errors_in_dependents_are_not_repeated) {
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    const char *y = AXES INPUTS OPS "  - {name: A, op: softmax, args: [X], axis: n}\n"
                                    "  - {name: B, op: silu, args: [A]}\noutputs: [B]\n";
    cr_assert_eq(ts_spec_load_text(&spec, "g.yaml", y, strlen(y), &d), 0);
    cr_assert_neq(ts_check(&spec, NULL, &g, &d), 0);
    cr_assert_eq(d.nerrors, 1);
    ts_graph_free(&g);
    ts_diags_free(&d);
    ts_spec_free(&spec);
}

Test(check, unused_input_is_a_warning_not_an_error) {
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    const char *y = AXES INPUTS OPS "  - {name: Y, op: silu, args: [X]}\noutputs: [Y]\n";
    cr_assert_eq(ts_spec_load_text(&spec, "g.yaml", y, strlen(y), &d), 0);
    cr_assert_eq(ts_check(&spec, NULL, &g, &d), 0);
    cr_assert_eq(d.n, 1);
    char *h = ts_diag_headline(&d, 0);
    cr_assert_str_eq(h, "g.yaml:7:3: warning: input 'W' is never used");
    free(h);
    ts_graph_free(&g);
    ts_diags_free(&d);
    ts_spec_free(&spec);
}

Test(check, graphs_deeper_than_the_limit_are_refused) {
    size_t cap = 64 * (TS_MAX_DEPTH + 10), n = 0; /* a chain of neg ops one longer than the limit */
    char *y = ts_xmalloc(cap);
    n += (size_t)snprintf(y + n, cap - n, "axes: {m: 2}\ninputs:\n  X: {dtype: fp32, shape: [m]}\nops:\n"
                                          "  - {name: A0, op: neg, args: [X]}\n");
    for (int i = 1; i <= TS_MAX_DEPTH + 1; i++)
        n += (size_t)snprintf(y + n, cap - n, "  - {name: A%d, op: neg, args: [A%d]}\n", i, i - 1);
    snprintf(y + n, cap - n, "outputs: [A%d]\n", TS_MAX_DEPTH + 1);
    char *got = first_error(y);
    cr_assert_str_eq(got, "g.yaml:10005:12: error: graph is deeper than 10000 operations at 'A10000'");
    free(got);
    free(y);
}
