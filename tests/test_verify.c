/* test_verify.c — the formal layer: every shipped rule survives random verification against the float64
 * interpreter, and deliberately wrong rules (tests/rules_wrong/) are caught with a counterexample. */
#include <math.h>

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

/* Verifies one rule given as text (its file "t.rules"); the result is the caller's to free. */
static ts_verify_result verify_text(const char *text) {
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    ts_diags d;
    cr_assert(ts_rule_load_string(&rs, "t.rules", text, &d), "%s", text);
    ts_diags_free(&d);
    ts_verify_result r = ts_verify_rule(&rs, 0, &(ts_verify_opts){.trials = 200, .seed = 3});
    ts_rule_free(&rs);
    return r;
}

/* (rounding ?t) lets the two sides differ by where they round to a 16-bit ?t, no more: rounding a product once
 * or rounding its factors passes with the guard and fails without it; a 1% change of value fails even with it
 * (eight units of fp16's rounding are 0.4%), and the guard holds for 16-bit types only. */
Test(verify, a_rounding_guard_admits_moved_roundings_and_nothing_larger) {
    const struct {
        const char *rule;
        ts_verify_status want;
    } cases[] = {
        {"rule r: (cast{?t} (mul ?a ?b)) => (mul (cast{?t} ?a) (cast{?t} ?b)) if (rounding ?t)\n", TS_VERIFY_PASSED},
        {"rule r: (cast{?t} (mul ?a ?b)) => (mul (cast{?t} ?a) (cast{?t} ?b))\n", TS_VERIFY_FAILED},
        {"rule r: (cast{?t} ?a) => (cast{?t} (mul ?a constant{0x3ff028f5c28f5c29})) if (rounding ?t)\n",
         TS_VERIFY_FAILED}, /* x·1.01 */
        {"rule r: (cast{?t} ?a) => ?a if (rounding ?t)\n", TS_VERIFY_PASSED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ts_verify_result r = verify_text(cases[i].rule);
        cr_expect_eq(r.status, cases[i].want, "%s-> status %d, max error %g\n%s", cases[i].rule, (int)r.status, r.error,
                     r.detail ? r.detail : "");
        if (r.status == TS_VERIFY_PASSED) cr_expect_leq(r.error, 8 * ldexp(1.0, -8), "%s", cases[i].rule);
        ts_verify_result_free(&r);
    }
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    cr_assert(env.nguards > 0);
    for (int g = 0; g < env.nguards; g++) {
        if (strcmp(env.guards[g].name, "rounding") != 0) continue;
        ts_rule_arg fp16 = {.is_param = true, .value = TS_FP16}, fp32 = {.is_param = true, .value = TS_FP32};
        cr_expect(env.guards[g].fn(NULL, NULL, &fp16, 1));
        cr_expect_not(env.guards[g].fn(NULL, NULL, &fp32, 1), "fp32 is no 16-bit rounding");
    }
    ts_rule_free(&rs);
}
