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

/* explain reads the shipped cost model when no --cost-model is given (it crashed on a NULL path). */
Test(cli, explain_names_the_chosen_plan_with_the_shipped_cost_model) {
    EXPECT("explain bench/graphs/swiglu.yaml", 0, "ranked with costmodel/h200.yaml\nchosen:    ");
    EXPECT("explain bench/graphs/swiglu.yaml", 0, "runner-up: ");
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

/* ---- the data folder, --name, --templates ------------------------------------------------------- */

/* The binary as an absolute path, so that commands can run from another directory. */
static char *abs_tsopt(void) {
    char *bin = realpath(getenv("TSOPT") ? getenv("TSOPT") : "build/tsopt", NULL);
    cr_assert_not_null(bin);
    return bin;
}

/* A GEMM whose operand rows are not 16-byte aligned runs without TMA at a fifth to a tenth of the rate
 * (bench/NOTES.md runs 117-118): compile says so, naming the tensor, when the plan keeps it so (a GEMM too
 * small for padded copies to pay); a large one reads padded copies and an aligned one is fine: no warning. */
Test(cli, compile_warns_of_a_gemm_operand_whose_rows_are_not_16_byte_aligned) {
    EXPECT("compile -o /tmp --name odd_k --dims i=2500,b=8,o=64 bench/heldout/gemm_odd_relu.yaml", 0,
           "warning: kernel 1 (a GEMM) reads 'X' with a row stride or offset that is not a multiple of 8");
    const char *quiet[] = {"compile -o /tmp --name odd_k_padded --dims i=2500 bench/heldout/gemm_odd_relu.yaml",
                           "compile -o /tmp --name even_k --dims i=2496 bench/heldout/gemm_odd_relu.yaml"};
    for (int i = 0; i < 2; i++) {
        tsopt_result r = run_tsopt(quiet[i]);
        cr_assert_eq(r.code, 0, "%s", r.out);
        cr_assert_null(strstr(r.out, "warning:"), "%s:\n%s", quiet[i], r.out);
        cr_assert(i == 1 || strstr(r.out, "(plan 1: fused+padded"), "the padded plan is written:\n%s", r.out);
        free(r.out);
    }
    cr_assert_eq(system("rm -f /tmp/odd_k.cuh /tmp/odd_k_padded.cuh /tmp/even_k.cuh"), 0);
}

/* An fp32 matmul is a GEMM kernel (gemm_f32.cuh's 3xTF32), not a reduction: compile is quiet about it, as about
 * an fp16 one, and the header launches the fp32 template. */
Test(cli, compile_runs_an_fp32_matmul_as_a_gemm) {
    char dir[] = "/tmp/tsopt-fp32-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *path = ts_strfmt("%s/mm32.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs("graph: mm32\naxes: {m: 512, d: 1024, n: 512}\ninputs:\n  X: {dtype: fp32, shape: [m, d]}\n"
          "  W: {dtype: fp32, shape: [d, n]}\nops:\n  - {name: Y, op: matmul, args: [X, W], over: d}\noutputs: [Y]\n", f);
    fclose(f);
    char *args = ts_strfmt("compile -o %s %s", dir, path);
    tsopt_result r = run_tsopt(args);
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_expect_null(strstr(r.out, "warning:"), "%s", r.out);
    cr_expect(strstr(r.out, "gemm [m,n] over d"), "%s", r.out);
    free(r.out);
    char *hpath = ts_strfmt("%s/mm32.cuh", dir);
    char *h = read_text(hpath);
    cr_expect(strstr(h, "tsg::launch_gemm_f32<"), "the fp32 template's launch");
    free(h);
    free(hpath);
    r = run_tsopt("compile -o /tmp --name mm16_quiet bench/graphs/matmul.yaml");
    cr_assert_eq(r.code, 0, "%s", r.out);
    cr_assert_null(strstr(r.out, "warning:"), "%s", r.out);
    free(r.out);
    char *rm = ts_strfmt("rm -rf %s /tmp/mm16_quiet.cuh", dir);
    cr_assert_eq(system(rm), 0);
    free(rm);
    free(args);
    free(path);
}

Test(cli, compile_finds_its_data_beside_the_binary_from_any_directory) {
    char dir[] = "/tmp/tsopt-home-XXXXXX", cwd[4096];
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    char *bin = abs_tsopt();
    char *cmd = ts_strfmt("cd %s && env -u TSOPT_HOME %s compile --name mm_small --dims m=8 %s/bench/graphs/matmul.yaml "
                          "> out.txt 2>&1 && grep -c 'cost model: costmodel/h200.yaml (calibrated)' mm_small.cuh",
                          dir, bin, cwd);
    FILE *p = popen(cmd, "r");
    char line[64] = "";
    cr_assert_not_null(fgets(line, sizeof line, p), "%s failed", cmd);
    cr_assert_eq(pclose(p), 0);
    cr_assert_str_eq(line, "1\n", "the banner names the shipped cost model, not this machine's path");
    free(cmd);
    cmd = ts_strfmt("rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    free(cmd);
    free(bin);
}

Test(cli, a_missing_data_folder_is_named_in_the_error) {
    tsopt_result r = run_tsopt_env("TSOPT_HOME=/nonexistent/tsopt", "compile -o /tmp bench/graphs/matmul.yaml");
    cr_assert_eq(r.code, 1, "%s", r.out);
    cr_assert_not_null(strstr(r.out, "/nonexistent/tsopt/rules: error: cannot read rule file (No such file or directory)"),
                       "%s", r.out);
    free(r.out);
    EXPECT("compile --templates /nonexistent/t -o /tmp bench/graphs/matmul.yaml", 1,
           "bench/graphs/matmul.yaml: error: plan 1 (baseline (one kernel per op)) cannot be emitted: cannot read template "
           "/nonexistent/t/tile.cuh: "
           "No such file or directory (--templates DIR or TSOPT_HOME sets where templates are)");
}

Test(cli, name_must_be_an_identifier) {
    EXPECT("compile --name 'two words' bench/graphs/matmul.yaml", 2,
           "tsopt: error: --name wants a C identifier (letters, digits, _; at most 64) not starting with a digit, __ or _ "
           "and a capital, not 'two words'");
    EXPECT("compile --help", 0, "  --name NAME             the symbols' prefix and file name");
    EXPECT("compile --help", 0, "  --dims AXIS=N,...");
    EXPECT("compile --help", 0, "  --templates DIR");
    EXPECT("tune --help", 0, "  --templates DIR");
    EXPECT("--help", 0, "data: rules/, templates/ and costmodel/ are read from $TSOPT_HOME");
}
