/* test_cli.c — the tsopt command line as users run it: help and version, exit codes (0 ok, 1 input
 * errors, 2 usage, 3 limits), the check summary, eval's determinism, and that a rejected input writes
 * nothing. Runs the binary named by $TSOPT (default build/tsopt). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define EXPECT(args, code_, needle)                                                                    \
    do {                                                                                               \
        tsopt_result r_ = run_tsopt(args);                                                                   \
        cr_assert_eq(r_.code, code_, "tsopt %s exited %d:\n%s", args, r_.code, r_.out);               \
        cr_assert_not_null(strstr(r_.out, needle), "tsopt %s printed:\n%s", args, r_.out);           \
        free(r_.out);                                                                                  \
    } while (0)

Test(cli, version_and_help) {
    EXPECT("--version", 0, "tsopt 0.1.0\n");
    EXPECT("--help", 0, "commands:");
    EXPECT("check --help", 0, "usage: tsopt check");
    EXPECT("eval --help", 0, "usage: tsopt eval");
}

Test(cli, usage_errors_exit_2) {
    EXPECT("", 2, "usage: tsopt");
    EXPECT("frobnicate x.yaml", 2, "tsopt: error: unknown command 'frobnicate'");
    EXPECT("check", 2, "tsopt: error: missing FILE");
    EXPECT("check --bogus bench/graphs/matmul.yaml", 2, "tsopt: error: unknown option '--bogus'");
    EXPECT("eval --seed", 2, "tsopt: error: missing value for '--seed'");
}

Test(cli, input_errors_exit_1_with_a_located_message) {
    EXPECT("check /nonexistent.yaml", 1, "/nonexistent.yaml: error: cannot open file: No such file or directory");
    EXPECT("check tests", 1, "tests: error: is a directory\n      = hint: pass a .yaml file, not a folder");
    EXPECT("check --dims zz=4 bench/graphs/matmul.yaml", 1,
           "bench/graphs/matmul.yaml: error: --dims: the graph has no axis 'zz'");
    EXPECT("eval --dims m=x bench/graphs/matmul.yaml", 1, "--dims: size of 'm' must be a positive integer");
}

Test(cli, check_prints_the_attention_summary) {
    EXPECT("check bench/graphs/attention.yaml", 0, "  S            matmul     fp16  [h, t_q, t_kv]  68.7 GFLOP\n");
    EXPECT("check bench/graphs/attention.yaml", 0, "FLOPs: 139.0 GFLOP total, 137.4 GFLOP in contractions\n");
    EXPECT("check bench/graphs/attention.yaml", 0, "minimum bytes: 67.1 MB");
}

Test(cli, eval_is_deterministic_per_seed) {
    tsopt_result a = run_tsopt("eval --dims t_q=16,t_kv=16 --seed 3 bench/graphs/attention.yaml");
    tsopt_result b = run_tsopt("eval --dims t_q=16,t_kv=16 --seed 3 bench/graphs/attention.yaml");
    tsopt_result c = run_tsopt("eval --dims t_q=16,t_kv=16 --seed 4 bench/graphs/attention.yaml");
    cr_assert_eq(a.code, 0, "%s", a.out);
    cr_assert_str_eq(a.out, b.out);
    cr_assert_str_neq(a.out, c.out);
    cr_assert_not_null(strstr(a.out, "output O fp16 [h, t_q, d_h] (16x16x128)\n  sum "));
    free(a.out);
    free(b.out);
    free(c.out);
}

Test(cli, eval_over_the_memory_budget_exits_3) {
    EXPECT("eval --max-memory 0.001 --dims t_q=256,t_kv=256 bench/graphs/attention.yaml", 3,
           "over the interpreter's budget");
}

Test(cli, rejected_input_writes_no_file) {
    char dir[] = "/tmp/tsopt-cli-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *bad = ts_strfmt("%s/bad.yaml", dir);
    FILE *f = fopen(bad, "w");
    fputs("axes: {m: 4}\nops:\n  - {name: Y, op: nope}\noutputs: [Y]\n", f);
    fclose(f);
    char *args = ts_strfmt("check %s", bad);
    EXPECT(args, 1, "bad.yaml:3:19: error: unknown op 'nope'");
    free(args);
    char *ls = ts_strfmt("ls -A %s", dir);
    FILE *p = popen(ls, "r");
    char line[256], listing[1024] = "";
    while (fgets(line, sizeof line, p)) strncat(listing, line, sizeof listing - strlen(listing) - 1);
    pclose(p);
    cr_assert_str_eq(listing, "bad.yaml\n", "nothing but the input is in the folder");
    unlink(bad);
    rmdir(dir);
    free(bad);
    free(ls);
}
