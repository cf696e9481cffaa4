/* test_diag.c — diagnostics: headline format, source excerpt with caret, hints, "did you mean", and the
 * file-level errors of reading a graph (missing file, directory). */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static char *render(const ts_diags *d) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ts_diags_print(d, f);
    fclose(f);
    return buf;
}

Test(diag, prints_excerpt_caret_and_hint) {
    const char *text = "ops:\n  - {name: Y, op: matmull}\n";
    ts_diags d;
    ts_diags_init(&d, "g.yaml", text, strlen(text));
    ts_error(&d, 2, 19, 7, "did you mean 'matmul'?", "unknown op '%s'", "matmull");
    char *out = render(&d);
    cr_assert_str_eq(out, "g.yaml:2:19: error: unknown op 'matmull'\n"
                          "    2 |   - {name: Y, op: matmull}\n"
                          "      |                   ^~~~~~~\n"
                          "      = hint: did you mean 'matmul'?\n");
    free(out);
    ts_diags_free(&d);
}

Test(diag, no_excerpt_for_binary_lines) {
    const char text[] = "a\x01\x02\n";
    ts_diags d;
    ts_diags_init(&d, "g.yaml", text, sizeof text - 1);
    ts_error(&d, 1, 2, 1, NULL, "bad");
    char *out = render(&d);
    cr_assert_str_eq(out, "g.yaml:1:2: error: bad\n");
    free(out);
    ts_diags_free(&d);
}

Test(diag, closest_name_finds_one_typo_and_ignores_far_words) {
    const char *names[] = {"matmul", "softmax", "rmsnorm"};
    cr_assert_str_eq(ts_closest_name("matmull", names, 3), "matmul");
    cr_assert_str_eq(ts_closest_name("sofmax", names, 3), "softmax");
    cr_assert_null(ts_closest_name("convolution", names, 3));
}

Test(spec, missing_file) {
    ts_spec s;
    ts_diags d;
    cr_assert_eq(ts_spec_load(&s, "/nonexistent/graph.yaml", &d), -1);
    char *h = ts_diag_headline(&d, 0);
    cr_assert_str_eq(h, "/nonexistent/graph.yaml: error: cannot open file: No such file or directory");
    free(h);
    ts_diags_free(&d);
    ts_spec_free(&s);
}

Test(spec, directory_is_refused) {
    ts_spec s;
    ts_diags d;
    cr_assert_eq(ts_spec_load(&s, "tests", &d), -1);
    char *h = ts_diag_headline(&d, 0);
    cr_assert_str_eq(h, "tests: error: is a directory");
    free(h);
    ts_diags_free(&d);
    ts_spec_free(&s);
}

Test(spec, every_bench_graph_loads_and_checks) {
    const char *graphs[] = {"attention",       "attention_causal", "attention_gqa",  "attention_d64",
                            "attention_d256",  "attention_bf16",   "attention_cross", "attention_softcap",
                            "decoder_layer",   "matmul",           "rmsnorm",         "rmsnorm_mlp",
                            "swiglu"};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        char *path = ts_strfmt("bench/graphs/%s.yaml", graphs[i]);
        ts_spec s;
        ts_diags d;
        ts_graph g;
        cr_assert_eq(ts_spec_load(&s, path, &d), 0, "%s", path);
        cr_assert_eq(ts_check(&s, NULL, &g, &d), 0, "%s", path);
        cr_assert_eq(d.n, 0, "%s has no warnings", path);
        cr_assert_str_eq(g.name, graphs[i]);
        ts_graph_free(&g);
        ts_diags_free(&d);
        ts_spec_free(&s);
        free(path);
    }
}
