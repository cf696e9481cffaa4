/* test_hostile.c — the command line against hostile input: properties beyond "does not crash" that the
 * fuzz targets (tests/fuzz/) cannot see from inside the library. A rejected input writes no file; files
 * over the size limit, graphs over the op, axis, input and output limits, and YAML nested too deep are
 * refused with a clear error, quickly and in bounded memory; evaluation over the interpreter's budget is
 * refused with a message (exit 3), inputs and outputs included; a file with very many errors prints a
 * bounded number of them. Runs the binary named by $TSOPT (default build/tsopt). */
#include <dirent.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile.h"
#include "egir.h"
#include "saturate.h"
#include "testutil.h"
#include "verify.h"

#define EXPECT(args, code_, needle)                                                                    \
    do {                                                                                               \
        tsopt_result r_ = run_tsopt(args);                                                                   \
        cr_assert_eq(r_.code, code_, "tsopt %s exited %d:\n%.4000s", args, r_.code, r_.out);           \
        cr_assert_not_null(strstr(r_.out, needle), "tsopt %s printed:\n%.4000s", args, r_.out);       \
        free(r_.out);                                                                                  \
    } while (0)

/* The largest resident set of any child waited for so far, in MiB. */
static double children_max_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* A fresh scratch folder; free with scratch_done. */
static char *scratch(void) {
    char *dir = ts_strdup("/tmp/tsopt-hostile-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    return dir;
}

static void scratch_done(char *dir) {
    char *cmd = ts_strfmt("rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(dir);
}

static char *write_file(const char *dir, const char *name, const char *text) {
    char *path = ts_strfmt("%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static char *read_all(const char *path, size_t *len) {
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    char *s = ts_read_text_file(path, len, &d);
    ts_diags_free(&d);
    return s;
}

/* The names in dir, one a line, sorted. */
static char *listing(const char *dir) {
    char *cmd = ts_strfmt("ls -A '%s'", dir);
    FILE *p = popen(cmd, "r");
    char line[256], all[2048] = "";
    while (fgets(line, sizeof line, p)) strncat(all, line, sizeof all - strlen(all) - 1);
    pclose(p);
    free(cmd);
    return ts_strdup(all);
}

/* ---- a rejected input writes nothing ------------------------------------------------------------ */

#define GOOD_GRAPH                                                                                     \
    "graph: hostile\naxes: {m: 4, d: 8, n: 8}\n"                                                       \
    "inputs:\n  X: {dtype: fp16, shape: [m, d]}\n  W: {dtype: fp16, shape: [d, n]}\n"                  \
    "ops:\n  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Y]\n"

static const char sentinel[] = "// an earlier header: must survive a failed compile byte for byte\n";

/* Runs `compile -o DIR/out <args>` with DIR/out/hostile.cuh present; it must exit `code` with `needle`,
 * leave the header byte-identical and add nothing to DIR/out. */
static void compile_leaves_header(const char *dir, const char *args, int code, const char *needle) {
    char *out = ts_strfmt("%s/out", dir);
    mkdir(out, 0777);
    char *hdr = write_file(out, "hostile.cuh", sentinel);
    char *cmd = ts_strfmt("compile -o %s %s", out, args);
    EXPECT(cmd, code, needle);
    size_t len = 0;
    char *now = read_all(hdr, &len);
    cr_assert_not_null(now);
    cr_assert(len == strlen(sentinel) && memcmp(now, sentinel, len) == 0, "the header changed:\n%s", now);
    char *ls = listing(out);
    cr_assert_str_eq(ls, "hostile.cuh\n", "compile %s left in the output folder:\n%s", args, ls);
    free(ls);
    free(now);
    free(cmd);
    free(hdr);
    free(out);
}

Test(hostile, compile_of_a_rejected_graph_writes_no_file) {
    char *dir = scratch();
    char *bad = write_file(dir, "bad.yaml",
                           "graph: hostile\naxes: {m: 4}\ninputs:\n  X: {dtype: fp16, shape: [m]}\n"
                           "ops:\n  - {name: Y, op: nope, args: [X]}\noutputs: [Y]\n");
    compile_leaves_header(dir, bad, 1, "bad.yaml:6:19: error: unknown op 'nope'");
    char *bin = ts_strfmt("%s/binary.yaml", dir);
    FILE *f = fopen(bin, "wb");
    fwrite("graph: hostile\n\0\x01\x02", 1, 18, f);
    fclose(f);
    compile_leaves_header(dir, bin, 1, "binary.yaml:2:1: error: binary file: NUL byte at offset 15");
    free(bin);
    free(bad);
    scratch_done(dir);
}

Test(hostile, compile_with_bad_rules_or_cost_model_writes_no_file) {
    char *dir = scratch();
    char *good = write_file(dir, "good.yaml", GOOD_GRAPH);
    char *args = ts_strfmt("--rules tests/rules_bad/unknown_op.rules %s", good);
    compile_leaves_header(dir, args, 1, "tests/rules_bad/unknown_op.rules:");
    free(args);
    args = ts_strfmt("--cost-model %s/none.yaml %s", dir, good);
    compile_leaves_header(dir, args, 1, "none.yaml: error: cannot open file");
    free(args);
    /* and the good graph does replace it: the test above is not vacuous */
    char *out = ts_strfmt("%s/out", dir);
    char *cmd = ts_strfmt("compile -o %s %s", out, good);
    EXPECT(cmd, 0, "wrote ");
    char *hdr = ts_strfmt("%s/hostile.cuh", out);
    size_t len = 0;
    char *now = read_all(hdr, &len);
    cr_assert(now && strstr(now, "hostile_launch"), "the header was not replaced");
    free(now);
    free(hdr);
    free(cmd);
    free(out);
    free(good);
    scratch_done(dir);
}

/* ---- size limits -------------------------------------------------------------------------------- */

Test(hostile, file_over_the_size_limit_is_refused_in_bounded_memory) {
    char *dir = scratch();
    char *big = ts_strfmt("%s/big.yaml", dir);
    FILE *f = fopen(big, "w");
    cr_assert_not_null(f);
    size_t n = 0;
    while (n <= TS_MAX_FILE_BYTES) n += (size_t)fprintf(f, "# a comment line that pads the file out to the limit\n");
    fprintf(f, "axes: {m: 4}\n");
    fclose(f);
    const char *cmds[] = {"check", "eval", "compile -o /nonexistent/never"};
    for (int i = 0; i < 3; i++) {
        char *args = ts_strfmt("%s %s", cmds[i], big);
        EXPECT(args, 1, "big.yaml: error: file is larger than the 10 MiB limit");
        free(args);
    }
    /* A sparse 8 GiB file: refused after reading just past the limit, not read whole. */
    char *huge = ts_strfmt("%s/huge.yaml", dir);
    f = fopen(huge, "w");
    cr_assert_eq(ftruncate(fileno(f), (off_t)8 << 30), 0);
    fclose(f);
    char *args = ts_strfmt("check %s", huge);
    EXPECT(args, 1, "huge.yaml: error: file is larger than the 10 MiB limit");
    free(args);
    /* rule files too */
    char *rules = ts_strfmt("%s/huge.rules", dir);
    f = fopen(rules, "w");
    cr_assert_eq(ftruncate(fileno(f), (off_t)8 << 30), 0);
    fclose(f);
    args = ts_strfmt("verify-rules %s", rules);
    EXPECT(args, 1, "huge.rules: error: file is larger than the 10 MiB limit");
    free(rules);
    double rss = children_max_rss_mib();
    cr_assert_lt(rss, 256.0, "a refused oversized file took %.0f MiB", rss);
    free(args);
    free(huge);
    free(big);
    scratch_done(dir);
}

/* A generated graph file: head, then n items pre<i>post, then tail. */
static char *generate(const char *dir, const char *name, const char *head, const char *pre, const char *post, int n,
                      const char *tail) {
    char *path = ts_strfmt("%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(head, f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d%s", pre, i, post);
    fputs(tail, f);
    fclose(f);
    return path;
}

Test(hostile, graph_over_the_op_limit_gets_a_clear_error, .timeout = 120) {
    char *dir = scratch();
    char *path = generate(dir, "ops.yaml", "axes: {m: 4}\ninputs:\n  X: {dtype: fp32, shape: [m]}\nops:\n",
                          "  - {name: t", ", op: neg, args: [X]}\n", TS_MAX_OPS + 1, "outputs: [t0]\n");
    char *args = ts_strfmt("check %s", path);
    char *want = ts_strfmt("ops.yaml:5:3: error: graph has %d ops; the limit is %d", TS_MAX_OPS + 1, TS_MAX_OPS);
    EXPECT(args, 1, want);
    free(want);
    free(args);
    free(path);
    /* exactly at the limit is accepted */
    path = generate(dir, "ops_ok.yaml", "axes: {m: 4}\ninputs:\n  X: {dtype: fp32, shape: [m]}\nops:\n",
                    "  - {name: t", ", op: neg, args: [X]}\n", TS_MAX_OPS, "outputs: [t0]\n");
    args = ts_strfmt("check %s", path);
    EXPECT(args, 0, "primitive nodes: ");
    free(args);
    free(path);
    scratch_done(dir);
}

Test(hostile, axes_inputs_and_outputs_have_limits_too, .timeout = 120) {
    char *dir = scratch();
    char *path = generate(dir, "axes.yaml", "axes:\n", "  a", ": 2\n", TS_MAX_AXES + 1,
                          "inputs:\n  X: {dtype: fp32, shape: [a0]}\nops:\n  - {name: Y, op: neg, args: [X]}\n"
                          "outputs: [Y]\n");
    char *args = ts_strfmt("check %s", path);
    char *want = ts_strfmt("axes.yaml:2:3: error: graph has %d axes; the limit is %d", TS_MAX_AXES + 1, TS_MAX_AXES);
    EXPECT(args, 1, want);
    free(want);
    free(args);
    free(path);
    path = generate(dir, "inputs.yaml", "axes: {m: 2}\ninputs:\n", "  i", ": {dtype: fp16, shape: [m]}\n",
                    TS_MAX_OPS + 1, "ops:\n  - {name: Y, op: neg, args: [i0]}\noutputs: [Y]\n");
    args = ts_strfmt("check %s", path);
    want = ts_strfmt("inputs.yaml:3:3: error: graph has %d inputs; the limit is %d", TS_MAX_OPS + 1, TS_MAX_OPS);
    EXPECT(args, 1, want);
    free(want);
    free(args);
    free(path);
    path = generate(dir, "outputs.yaml", "axes: {m: 2}\ninputs:\n  X: {dtype: fp16, shape: [m]}\n"
                                         "ops:\n  - {name: Y, op: neg, args: [X]}\noutputs:\n",
                    "  - Y # ", "\n", TS_MAX_OPS + 1, "");
    args = ts_strfmt("check %s", path);
    want = ts_strfmt("outputs.yaml:7:3: error: graph lists %d outputs; the limit is %d", TS_MAX_OPS + 1, TS_MAX_OPS);
    EXPECT(args, 1, want);
    free(want);
    free(args);
    free(path);
    scratch_done(dir);
}

Test(hostile, deeply_nested_yaml_is_refused_quickly) {
    char *dir = scratch();
    char *path = ts_strfmt("%s/deep.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs("axes: ", f);
    for (int i = 0; i < 1000000; i++) fputc('[', f); /* libyaml alone would take hours over this */
    for (int i = 0; i < 1000000; i++) fputc(']', f);
    fputc('\n', f);
    fclose(f);
    char *args = ts_strfmt("check %s", path);
    EXPECT(args, 1, "deep.yaml:1:70: error: YAML nested more than 64 levels deep");
    free(args);
    free(path);
    scratch_done(dir);
}

Test(hostile, a_file_with_very_many_errors_prints_a_bounded_report) {
    char *dir = scratch();
    char *path = generate(dir, "errs.yaml", "axes: {m: 2}\ninputs:\n  X: {dtype: fp16, shape: [m]}\n"
                                            "ops:\n  - {name: Y, op: neg, args: [X]}\noutputs:\n",
                          "  - nope", "\n", 50000, "");
    char *args = ts_strfmt("check %s", path);
    tsopt_result r = run_tsopt(args);
    cr_assert_eq(r.code, 1, "%.2000s", r.out);
    cr_assert_not_null(strstr(r.out, "errs.yaml:7:5: error: output 'nope0' is never produced"));
    cr_assert_not_null(strstr(r.out, "errs.yaml:107:5: error: too many errors; only the first 100 are shown"));
    cr_assert_null(strstr(r.out, "nope100'"), "errors past the first 100 are not printed");
    cr_assert_lt(r.len, 64u << 10, "%zu bytes of diagnostics", r.len);
    free(r.out);
    free(args);
    free(path);
    scratch_done(dir);
}

Test(hostile, slice_sizes_that_overflow_are_out_of_range) {
    char *dir = scratch();
    char *path = write_file(dir, "slice.yaml",
                            "axes: {d: 10, e: 9223372036854775807}\ninputs:\n  X: {dtype: fp32, shape: [d]}\n"
                            "ops:\n  - {name: Y, op: slice, args: [X], axis: d, start: 0, step: 4, as: e}\n"
                            "outputs: [Y]\n");
    char *args = ts_strfmt("check %s", path);
    EXPECT(args, 1, "slice.yaml:5:69: error: slice out of range: 9223372036854775807 elements of step 4 do not fit");
    free(args);
    free(path);
    scratch_done(dir);
}

/* ---- the interpreter's budget ------------------------------------------------------------------- */

Test(hostile, eval_over_the_budget_is_refused_with_a_message) {
    /* intermediates: S and P are [h, t_q, t_kv] */
    EXPECT("eval --max-memory 0.001 --dims t_q=256,t_kv=256,d_h=1 bench/graphs/attention.yaml", 3,
           "bench/graphs/attention.yaml: error: evaluating needs 40.16 MiB of float64 buffers, over the "
           "interpreter's budget of 1.02 MiB; evaluate at smaller sizes with --dims");
    /* inputs: Q, K and V are refused before they are allocated */
    EXPECT("eval --max-memory 0.001 --dims t_q=256,t_kv=256 bench/graphs/attention.yaml", 3,
           "bench/graphs/attention.yaml: error: the inputs alone need 12.00 MiB of float64 buffers, over the "
           "interpreter's budget of 1.02 MiB; evaluate at smaller sizes with --dims");
    EXPECT("eval --max-memory 0.001 --dims t_q=4,t_kv=4 bench/graphs/attention.yaml", 0, "output O fp16");
}

Test(hostile, eval_refuses_huge_inputs_and_outputs_before_allocating_them) {
    char *dir = scratch();
    /* 2^50 input elements: allocating them would fail (or, under ASan, abort) before the budget check */
    char *in = write_file(dir, "in.yaml",
                          "axes: {a: 65536, b: 131072, c: 131072}\ninputs:\n  X: {dtype: fp32, shape: [a, b, c]}\n"
                          "ops:\n  - {name: Y, op: reduce_sum, args: [X], axis: a}\noutputs: [Y]\n");
    char *args = ts_strfmt("eval %s", in);
    EXPECT(args, 3, "in.yaml: error: the inputs alone need 8388608.00 GiB of float64 buffers, over the "
                    "interpreter's budget of 8.00 GiB; evaluate at smaller sizes with --dims");
    free(args);
    /* one stored element, an output view of 2^50: the gathered output counts against the budget */
    char *out = write_file(dir, "out.yaml",
                           "axes: {a: 65536, b: 131072, c: 131072}\n"
                           "ops:\n  - {name: z, op: constant, value: 0}\n"
                           "  - {name: Y, op: expand, args: [z], shape: [a, b, c]}\noutputs: [Y]\n");
    args = ts_strfmt("eval %s", out);
    EXPECT(args, 3, "over the interpreter's budget of 8.00 GiB");
    double rss = children_max_rss_mib();
    cr_assert_lt(rss, 256.0, "refusing took %.0f MiB", rss);
    free(args);
    free(out);
    free(in);
    scratch_done(dir);
}

/* ---- fuzz regressions --------------------------------------------------------------------------- */

/* Every input a fuzz target once crashed on (tests/fuzz/regressions/<target>/) goes through the same
 * library calls here, so `make test` replays them under ASan + UBSan even where clang is absent. */
static int regression_files(const char *target, char ***paths) {
    char *dir = ts_strfmt("tests/fuzz/regressions/%s", target);
    DIR *dp = opendir(dir);
    int n = 0, cap = 0;
    *paths = NULL;
    for (struct dirent *e; dp && (e = readdir(dp));) {
        if (e->d_name[0] == '.') continue;
        TS_GROW(*paths, n, cap);
        (*paths)[n++] = ts_strfmt("%s/%s", dir, e->d_name);
    }
    if (dp) closedir(dp);
    free(dir);
    return n;
}

Test(hostile, fuzz_regressions_graph_and_compile) {
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    const char *rules_dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&rs, &rules_dir, 1, stderr), 0);
    ts_costmodel cm;
    ts_diags cd;
    cr_assert_eq(ts_costmodel_load(&cm, "costmodel/h200.yaml", &cd), 0);
    ts_diags_free(&cd);
    const char *targets[] = {"fuzz_graph", "fuzz_compile"};
    for (int k = 0; k < 2; k++) {
        char **paths;
        int n = regression_files(targets[k], &paths);
        for (int i = 0; i < n; i++) {
            ts_spec spec;
            ts_diags d;
            ts_graph g;
            int rc = ts_spec_load(&spec, paths[i], &d);
            if (rc == 0) rc = ts_check(&spec, NULL, &g, &d);
            else ts_graph_init(&g, NULL);
            cr_assert((rc != 0) == (d.nerrors > 0), "%s: status and errors disagree", paths[i]);
            if (rc == 0) {
                ts_compiled c;
                char *err = NULL;
                if (ts_compile(&spec, NULL, &g, &rs, &cm, &c, &err) == 0) ts_compiled_free(&c);
                free(err);
            }
            ts_graph_free(&g);
            ts_diags_free(&d);
            ts_spec_free(&spec);
            free(paths[i]);
        }
        free(paths);
    }
    ts_costmodel_free(&cm);
    ts_rule_free(&rs);
}

Test(hostile, fuzz_regressions_rules) {
    char **paths;
    int n = regression_files("fuzz_rules", &paths);
    for (int i = 0; i < n; i++) {
        ts_rules rs;
        ts_rule_env env = ts_egir_rule_env();
        ts_rule_init(&rs, &env);
        ts_diags d;
        ts_rule_load_file(&rs, paths[i], &d);
        ts_verify_opts vo = {.trials = 3, .seed = 1};
        for (int r = 0; r < rs.nrules; r++) {
            ts_verify_result res = ts_verify_rule(&rs, r, &vo);
            ts_verify_result_free(&res);
        }
        ts_diags_free(&d);
        ts_rule_free(&rs);
        free(paths[i]);
    }
    free(paths);
}
