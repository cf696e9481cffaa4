/* test_models.c — whole models: a stack of identical layers shares its kernels' code and its workspace.
 * Workspace by liveness (workspace.h): in every plan of every bench graph and of a 4-layer stack, no two
 * temporaries live at the same time overlap in memory, at the typical and at odd dynamic sizes; a
 * 32-layer stack needs at most 1.5x one layer's workspace. One code instance per distinct kernel
 * (emit.c): the 32-layer stack's header is within 2x of one layer's and defines no more kernels. */
#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "compile.h"
#include "egir.h"
#include "saturate.h"
#include "emit.h"
#include "testutil.h"
#include "workspace.h"

/* A graph compiled with the shipped rules and cost model: its plans, best first. */
typedef struct {
    ts_spec spec;
    ts_graph g;
    ts_rules rs;
    ts_costmodel cm;
    ts_compiled c;
    ts_dyn dyn;
} model_graph;

static void compile_file(model_graph *cg, const char *path) {
    ts_diags d;
    cr_assert_eq(ts_spec_load(&cg->spec, path, &d), 0, "%s", path);
    cr_assert_eq(ts_check(&cg->spec, NULL, &cg->g, &d), 0, "%s", path);
    ts_diags_free(&d);
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&cg->rs, &env);
    const char *dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&cg->rs, &dir, 1, stderr), 0);
    cr_assert_eq(ts_costmodel_load(&cg->cm, "costmodel/h200.yaml", &d), 0);
    ts_diags_free(&d);
    char *err = NULL;
    cr_assert_eq(ts_compile(&cg->spec, NULL, &cg->g, &cg->rs, &cg->cm, &cg->c, &err), 0, "%s: %s", path, err);
    cr_assert_eq(ts_dyn_of(&cg->g, &cg->dyn), 0);
}

static void compiled_free(model_graph *cg) {
    ts_compiled_free(&cg->c);
    ts_costmodel_free(&cg->cm);
    ts_rule_free(&cg->rs);
    ts_graph_free(&cg->g);
    ts_spec_free(&cg->spec);
}

/* Temporaries of plan p at the dynamic sizes `sizes`: every one inside its slot, inside the workspace, and
 * apart from every other one live at the same time. */
static void assert_no_live_overlap(const model_graph *cg, const ts_plan *p, const int64_t *sizes, const char *what) {
    ts_workspace w;
    ts_workspace_plan(p, &cg->g, &cg->dyn, &w);
    int64_t total = ts_workspace_total(&w, sizes);
    for (int a = 0; a < p->nbuf; a++) {
        if (w.slot_of[a] < 0) continue;
        ts_sym sa = ts_workspace_buffer_bytes(p, &cg->g, &cg->dyn, a);
        int64_t a0 = ts_workspace_offset(&w, w.slot_of[a], sizes), a1 = a0 + ts_sym_eval(&sa, sizes);
        cr_assert(a1 <= ts_workspace_offset(&w, w.slot_of[a] + 1, sizes) && a1 <= total, "%s: temporary %d overflows its slot", what, a);
        for (int b = a + 1; b < p->nbuf; b++) {
            if (w.slot_of[b] < 0 || w.first[a] > w.last[b] || w.first[b] > w.last[a]) continue;
            ts_sym sb = ts_workspace_buffer_bytes(p, &cg->g, &cg->dyn, b);
            int64_t b0 = ts_workspace_offset(&w, w.slot_of[b], sizes), b1 = b0 + ts_sym_eval(&sb, sizes);
            cr_assert(a1 <= b0 || b1 <= a0 || a0 == a1 || b0 == b1,
                      "%s (%s): temporaries %d [%lld, %lld) and %d [%lld, %lld) are live together and overlap", what,
                      p->name, a, (long long)a0, (long long)a1, b, (long long)b0, (long long)b1);
        }
    }
    ts_workspace_free(&w);
}

/* Every plan of the graph at `path`, at its typical sizes and with every dynamic axis at 1, 3 and 17. */
static void assert_graph_has_no_live_overlap(const char *path) {
    model_graph cg;
    compile_file(&cg, path);
    int64_t sizes[4][TS_SYM_MAX_DYN];
    for (int d = 0; d < cg.dyn.n; d++)
        sizes[0][d] = cg.g.axes[cg.dyn.axis[d]].size, sizes[1][d] = 1, sizes[2][d] = 3, sizes[3][d] = 17;
    for (int i = 0; i < cg.c.n; i++)
        for (int s = 0; s < 4; s++) assert_no_live_overlap(&cg, &cg.c.plans[i], sizes[s], path);
    compiled_free(&cg);
}

Test(models, temporaries_live_together_never_share_memory, .timeout = 300) {
    assert_graph_has_no_live_overlap("tests/fixtures/decoder_stack4.yaml");
    DIR *dir = opendir("bench/graphs");
    cr_assert_not_null(dir);
    int n = 0;
    for (struct dirent *de; (de = readdir(dir));) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0) continue;
        char *path = ts_strfmt("bench/graphs/%s", de->d_name);
        assert_graph_has_no_live_overlap(path);
        free(path);
        n++;
    }
    closedir(dir);
    cr_assert_geq(n, 14, "bench graphs checked: %d", n);
}

/* ---- stacks of layers ---------------------------------------------------------------------------- */

/* A stack of n decoder layers written by bench/make_stack.py, compiled. */
static void compile_stack(model_graph *cg, int n) {
    char *path = ts_strfmt("/tmp/tsopt_test_stack_%d_%d.yaml", (int)getpid(), n);
    char *cmd = ts_strfmt("python3 bench/make_stack.py %d %s", n, path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    compile_file(cg, path);
    unlink(path);
    free(cmd);
    free(path);
}

/* The best plan's workspace bytes at the typical sizes. */
static int64_t workspace_bytes(const model_graph *cg) {
    ts_workspace w;
    ts_workspace_plan(&cg->c.plans[0], &cg->g, &cg->dyn, &w);
    int64_t typical[TS_SYM_MAX_DYN];
    for (int d = 0; d < cg->dyn.n; d++) typical[d] = cg->g.axes[cg->dyn.axis[d]].size;
    int64_t total = ts_workspace_total(&w, typical);
    ts_workspace_free(&w);
    return total;
}

/* The best plan's header (heap), emitted with the shipped templates. */
static char *header_of(const model_graph *cg, size_t *len) {
    ts_emit_opts eo = {.source_path = cg->spec.path, .source_text = cg->spec.text, .source_len = cg->spec.len,
                       .templates_dir = "templates", .cost_model = &cg->cm, .baseline_s = cg->c.baseline_s};
    char *buf = NULL, *err = NULL;
    FILE *f = open_memstream(&buf, len);
    cr_assert_eq(ts_emit_header(f, &cg->g, &cg->c.plans[0], &eo, &err), 0, "%s", err);
    fclose(f);
    return buf;
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *s = text; (s = strstr(s, what)); s++) n++;
    return n;
}

Test(models, a_32_layer_stack_needs_one_layers_workspace_and_kernel_code, .timeout = 300) {
    model_graph one, deep;
    compile_stack(&one, 1);
    compile_stack(&deep, 32);
    int64_t ws1 = workspace_bytes(&one), ws32 = workspace_bytes(&deep);
    cr_assert_gt(ws1, 0);
    cr_assert_leq(ws32 * 2, ws1 * 3, "workspace: 32 layers %lld bytes, one layer %lld", (long long)ws32, (long long)ws1);
    size_t len1, len32;
    char *h1 = header_of(&one, &len1), *h32 = header_of(&deep, &len32);
    cr_assert_leq(len32, 2 * len1, "header: 32 layers %zu bytes, one layer %zu", len32, len1);
    cr_assert_eq(count(h32, "static cudaError_t K"), count(h1, "static cudaError_t K"), "distinct kernels");
    cr_assert_eq(count(h32, "err = K"), 32 * count(h1, "err = K"), "launches");
    free(h1);
    free(h32);
    compiled_free(&one);
    compiled_free(&deep);
}
