/* fuzz_compile.c — libFuzzer target: graph YAML (at most 4 KB) → check → ts_compile (compile.h: saturate
 * with rules/, loaded once; ts_plan_build_all with the second binding for dynamic axes; cost model;
 * ranking — what `tsopt compile` runs) → ts_emit_header of every plan into a tmpfile(). Must not fault; a
 * graph the checker rejects must carry well-formed diagnostics (as in fuzz_graph); compile and emit may
 * refuse, but only with a message.
 * Runs from the repository root (rules/, templates/, costmodel/h200.yaml). */
#include "compile.h"
#include "costmodel.h"
#include "egir.h"
#include "emit.h"
#include "fuzz_common.h"
#include "plan.h"
#include "saturate.h"

#define MAX_INPUT 4096

static ts_rules rules;
static ts_costmodel cm;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&rules, &env);
    const char *paths[] = {"rules"};
    if (ts_load_rule_paths(&rules, paths, 1, stderr) != 0 || rules.nrules == 0) {
        fprintf(stderr, "fuzz_compile: cannot load rules/ (run from the repository root)\n");
        exit(1);
    }
    ts_diags d;
    if (ts_costmodel_load(&cm, "costmodel/h200.yaml", &d) != 0) {
        ts_diags_print(&d, stderr);
        exit(1);
    }
    ts_diags_free(&d);
    return 0;
}

/* ts_compile (saturate, plans at a second binding of the dynamic axes, cost model, ranking) as
 * `tsopt compile` runs it, then every plan emitted into a tmpfile(). */
static void compile(ts_spec *spec, ts_graph *g) {
    ts_compiled c;
    char *err = NULL;
    if (ts_compile(spec, NULL, g, &rules, &cm, &c, &err) != 0) {
        if (!err || !*err) fuzz_fail("ts_compile refused without a message");
        free(err);
        return;
    }
    if (c.n < 1) fuzz_fail("ts_compile returned no plans");
    ts_emit_opts eo = {.source_path = FUZZ_PATH, .source_text = spec->text, .source_len = spec->len,
                       .templates_dir = "templates", .cost_model = &cm, .baseline_s = c.baseline_s};
    for (int i = 0; i < c.n; i++) {
        FILE *f = tmpfile();
        if (!f) break;
        char *e2 = NULL;
        if (ts_emit_header(f, g, &c.plans[i], &eo, &e2) != 0 && (!e2 || !*e2))
            fuzz_fail("ts_emit_header refused plan %d without a message", i);
        free(e2);
        fclose(f);
    }
    ts_compiled_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > MAX_INPUT) return -1;
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    int rc = ts_spec_load_text(&spec, FUZZ_PATH, (const char *)data, size, &d);
    if (rc == 0) rc = ts_check(&spec, NULL, &g, &d);
    else ts_graph_init(&g, NULL);
    if (rc != 0) check_rejection(&d, FUZZ_PATH, "check");
    ts_diags_free(&d);
    if (rc == 0) compile(&spec, &g);
    ts_graph_free(&g);
    ts_spec_free(&spec);
    return 0;
}
