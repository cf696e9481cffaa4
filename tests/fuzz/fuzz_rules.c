/* fuzz_rules.c — libFuzzer target: rule-file bytes → ts_rule_load_string (with ts_egir_rule_env(): the
 * fused ops and the guards) → ts_verify_rule on every rule that loaded, 3 trials each.
 *
 * Properties (abort() on violation):
 *  - the loader's verdict agrees with its diagnostics: false exactly when there is an error;
 *  - every error headline is "fuzz.rules:L:C: error: ..." with L, C >= 1 (rule files have no file-level
 *    errors when loaded from a string); printing the diagnostics does not fault;
 *  - every loaded rule has a name, a line and a column, and can be printed back (ts_rule_side_str);
 *  - verifying any loaded rule does not fault: it passes, fails with a counterexample, or is skipped or
 *    unsatisfiable with a reason. */
#include "egir.h"
#include "fuzz_common.h"
#include "rules.h"
#include "verify.h"

#define RULES_PATH "fuzz.rules"
#define MAX_INPUT 8192
#define MAX_VERIFIED 8 /* rules verified per input (each costs a few interpreter runs) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return -1;
    char *text = ts_xmalloc(size + 1); /* the loader takes a C string: an embedded NUL ends it */
    memcpy(text, data, size);
    text[size] = '\0';
    ts_rules rs;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rs, &env);
    ts_diags d;
    bool ok = ts_rule_load_string(&rs, RULES_PATH, text, &d);
    if (ok != (d.nerrors == 0)) fuzz_fail("loader returned %d with %d errors", ok, d.nerrors);
    if (!ok) {
        check_rejection(&d, RULES_PATH, "rules");
        for (int i = 0; i < d.n; i++)
            if (d.items[i].severity == TS_ERROR && d.items[i].line == 0)
                fuzz_fail("rule error without a line:col: %s", d.items[i].message);
    }
    for (int r = 0; r < rs.nrules; r++) {
        const ts_rule *rule = &rs.rule[r];
        if (!rule->name || !rule->name[0] || rule->line < 1 || rule->col < 1)
            fuzz_fail("loaded rule %d has no name or place", r);
        char *l = ts_rule_side_str(&rs, rule, false), *rt = ts_rule_side_str(&rs, rule, true);
        free(l);
        free(rt);
    }
    ts_verify_opts vo = {.trials = 3, .seed = 1};
    for (int r = 0; r < rs.nrules && r < MAX_VERIFIED; r++) {
        ts_verify_result res = ts_verify_rule(&rs, r, &vo);
        if (res.status == TS_VERIFY_FAILED && !res.detail) fuzz_fail("rule failed without a counterexample");
        ts_verify_result_free(&res);
    }
    ts_diags_free(&d);
    ts_rule_free(&rs);
    free(text);
    return 0;
}
