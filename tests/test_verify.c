/* test_verify.c — the formal layer: every shipped rule survives random verification against the float64
 * interpreter, and deliberately wrong rules (tests/rules_wrong/) are caught with a counterexample. */
#include "egir.h"
#include "saturate.h"
#include "testutil.h"
#include "verify.h"

static void load(ts_rules *rs, const char *path) {
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(rs, &env);
    cr_assert_eq(ts_load_rule_paths(rs, &path, 1, stderr), 0);
}

Test(verify, every_shipped_rule_passes) {
    ts_rules rs;
    load(&rs, "rules");
    cr_assert_gt(rs.nrules, 30);
    for (int i = 0; i < rs.nrules; i++) {
        ts_verify_result r = ts_verify_rule(&rs, i, &(ts_verify_opts){.trials = 60, .seed = 7});
        cr_expect_eq(r.status, TS_VERIFY_PASSED, "%s:%d %s\n%s", rs.rule[i].file, rs.rule[i].line, rs.rule[i].name,
                     r.detail ? r.detail : "");
        ts_verify_result_free(&r);
    }
    ts_rule_free(&rs);
}

Test(verify, every_planted_wrong_rule_is_caught_with_a_counterexample) {
    ts_rules rs;
    load(&rs, "tests/rules_wrong/planted.rules");
    cr_assert_eq(rs.nrules, 4);
    for (int i = 0; i < rs.nrules; i++) {
        ts_verify_result r = ts_verify_rule(&rs, i, NULL);
        cr_expect_eq(r.status, TS_VERIFY_FAILED, "%s was not caught", rs.rule[i].name);
        cr_expect_not_null(r.detail);
        cr_expect_not_null(strstr(r.detail, "axes: a0="), "the counterexample names the sizes: %s", r.detail);
        ts_verify_result_free(&r);
    }
    ts_rule_free(&rs);
}

Test(verify, guards_that_never_hold_make_a_rule_unverifiable) {
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    ts_diags d;
    /* x lacks k and has k: impossible */
    cr_assert(ts_rule_load_string(&rs, "t.rules",
                                  "rule never: (reduce_sum{?k} ?x) => ?x if (lacks ?x ?k) (has ?x ?k)\n", &d));
    ts_diags_free(&d);
    ts_verify_result r = ts_verify_rule(&rs, 0, NULL);
    cr_assert_eq(r.status, TS_VERIFY_UNSATISFIABLE);
    ts_verify_result_free(&r);
    ts_rule_free(&rs);
}

Test(verify, the_summary_line_counts_passes_and_failures) {
    ts_rules rs;
    load(&rs, "tests/rules_wrong/planted.rules");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(ts_verify_all(&rs, NULL, f), 4);
    fclose(f);
    cr_assert_not_null(strstr(buf, "FAIL tests/rules_wrong/planted.rules:5: bad-distribute ("));
    cr_assert_not_null(strstr(buf, "\n0 passed, 4 failed\n"));
    free(buf);
    ts_rule_free(&rs);
}
