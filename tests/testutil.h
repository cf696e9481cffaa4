/* testutil.h — helpers shared by the Criterion tests: checking YAML held in strings, reading the first
 * diagnostic, evaluating a graph. Header-only so every test binary stays one file. */
#ifndef TS_TESTUTIL_H
#define TS_TESTUTIL_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "compile.h"
#include "egir.h"
#include "saturate.h"
#include "interp.h"
#include "spec.h"
#include "util.h"

/* Loads and checks `yaml` as file "g.yaml"; returns the headline of the first error ("" if none).
 * The caller frees the result. */
static inline char *first_error_for(const char *yaml, size_t len, const char *dims) {
    ts_spec spec;
    ts_diags d;
    ts_graph g;
    ts_binding b = {0};
    int rc = ts_spec_load_text(&spec, "g.yaml", yaml, len, &d);
    if (rc == 0 && dims) rc = ts_binding_parse(&b, dims, &d);
    if (rc == 0) rc = ts_check(&spec, &b, &g, &d);
    else ts_graph_init(&g, NULL);
    char *msg = NULL;
    for (int i = 0; i < d.n && !msg; i++)
        if (d.items[i].severity == TS_ERROR) msg = ts_diag_headline(&d, i);
    if (!msg) msg = ts_strdup("");
    cr_assert((rc != 0) == (msg[0] != '\0'), "status and diagnostics disagree: rc=%d msg=%s", rc, msg);
    ts_graph_free(&g);
    ts_binding_free(&b);
    ts_diags_free(&d);
    ts_spec_free(&spec);
    return msg;
}

static inline char *first_error(const char *yaml) { return first_error_for(yaml, strlen(yaml), NULL); }

#define assert_error(yaml, expected)                                                                    \
    do {                                                                                                \
        char *got_ = first_error(yaml);                                                                 \
        cr_assert_str_eq(got_, expected);                                                               \
        free(got_);                                                                                     \
    } while (0)

/* Checks yaml (must succeed) into g; spec and g must be freed by the caller via free_checked. */
typedef struct {
    ts_spec spec;
    ts_graph g;
} checked;

static inline void check_ok_dims(checked *c, const char *yaml, const char *dims) {
    ts_diags d;
    ts_binding b = {0};
    int rc = ts_spec_load_text(&c->spec, "g.yaml", yaml, strlen(yaml), &d);
    if (rc == 0 && dims) rc = ts_binding_parse(&b, dims, &d);
    if (rc == 0) rc = ts_check(&c->spec, &b, &c->g, &d);
    else ts_graph_init(&c->g, NULL);
    char *msg = d.n ? ts_diag_headline(&d, 0) : ts_strdup("");
    cr_assert_eq(rc, 0, "unexpected error: %s", msg);
    free(msg);
    ts_binding_free(&b);
    ts_diags_free(&d);
}

static inline void check_ok(checked *c, const char *yaml) { check_ok_dims(c, yaml, NULL); }

static inline void free_checked(checked *c) {
    ts_graph_free(&c->g);
    ts_spec_free(&c->spec);
}

/* The text of a file, NUL-terminated (free it); the test fails when it cannot be read. */
static inline char *read_text(const char *path) {
    size_t len;
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    char *text = ts_read_text_file(path, &len, &d);
    cr_assert_not_null(text, "%s", path);
    ts_diags_free(&d);
    return text;
}

/* Checks the graph file `path` at `dims` (NULL: its own sizes) into c. */
static inline void check_file(checked *c, const char *path, const char *dims) {
    char *text = read_text(path);
    check_ok_dims(c, text, dims);
    free(text);
}

/* Checks bench/graphs/<name>.yaml at `dims` into c. */
static inline void check_bench(checked *c, const char *name, const char *dims) {
    char *path = ts_strfmt("bench/graphs/%s.yaml", name);
    check_file(c, path, dims);
    free(path);
}

/* Evaluates c's graph on the given inputs; returns the outputs (free with ts_free_buffers). */
static inline double **eval_graph(checked *c, double *const *inputs) {
    double **out = NULL;
    char *err = NULL;
    int rc = ts_interp_run(&c->g, inputs, &out, NULL, &err);
    cr_assert_eq(rc, 0, "interpreter refused: %s", err ? err : "");
    return out;
}

/* ---- running the binary ($TSOPT, default build/tsopt) ------------------------------------------ */

typedef struct {
    int code;  /* exit status (-1: killed) */
    char *out; /* stdout and stderr together */
    size_t len;
} tsopt_result;

/* Runs `ENV tsopt ARGS` through the shell (env: "VAR=value ..." or ""). */
static inline tsopt_result run_tsopt_env(const char *env, const char *args) {
    const char *bin = getenv("TSOPT") ? getenv("TSOPT") : "build/tsopt";
    char *cmd = ts_strfmt("%s %s %s 2>&1", env, bin, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t cap = 1 << 16, n = 0, got;
    char *buf = ts_xmalloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap) buf = ts_xrealloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int status = pclose(p);
    free(cmd);
    return (tsopt_result){WIFEXITED(status) ? WEXITSTATUS(status) : -1, buf, n};
}

static inline tsopt_result run_tsopt(const char *args) { return run_tsopt_env("", args); }

/* Asserts that `got` is the text of golden file `path`; with TSOPT_REGEN_GOLDEN set, first writes it there. */
static inline void assert_matches_golden(const char *got, const char *path) {
    if (getenv("TSOPT_REGEN_GOLDEN")) {
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f, "cannot write %s", path);
        fputs(got, f);
        fclose(f);
    }
    size_t len;
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    char *want = ts_read_text_file(path, &len, &d);
    ts_diags_free(&d);
    cr_assert_not_null(want, "missing %s: run the test with TSOPT_REGEN_GOLDEN=1", path);
    cr_assert_str_eq(got, want, "%s changed: review the difference, then TSOPT_REGEN_GOLDEN=1", path);
    free(want);
}

/* A graph compiled from YAML held in a string with the repository's rules and the H200 cost model. */
typedef struct {
    checked c;
    ts_rules rs;
    ts_costmodel cm;
    ts_compiled out;
} compiled_graph;

/* The same with the cost model's coefficients adjusted by `adjust` (NULL: as loaded) before compiling. */
static inline void compile_yaml_adjusted(compiled_graph *cg, const char *yaml, void (*adjust)(ts_costmodel *)) {
    check_ok(&cg->c, yaml);
    ts_rule_env env = ts_egir_rule_env();
    ts_rule_init(&cg->rs, &env);
    const char *dir = "rules";
    cr_assert_eq(ts_load_rule_paths(&cg->rs, &dir, 1, stderr), 0);
    ts_diags d;
    cr_assert_eq(ts_costmodel_load(&cg->cm, "costmodel/h200.yaml", &d), 0);
    ts_diags_free(&d);
    if (adjust) adjust(&cg->cm);
    char *err = NULL;
    cr_assert_eq(ts_compile(&cg->c.spec, NULL, &cg->c.g, &cg->rs, &cg->cm, &cg->out, &err), 0, "%s", err);
}

static inline void compile_yaml(compiled_graph *cg, const char *yaml) { compile_yaml_adjusted(cg, yaml, NULL); }

static inline void free_compiled(compiled_graph *cg) {
    ts_compiled_free(&cg->out);
    ts_costmodel_free(&cg->cm);
    ts_rule_free(&cg->rs);
    free_checked(&cg->c);
}

#endif
