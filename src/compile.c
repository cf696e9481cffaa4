/* compile.c — saturate, search plans (predicted by the cost model), rank (see compile.h). */
#include "compile.h"

#include <stdlib.h>
#include <string.h>

#include "saturate.h"
#include "search.h"
#include "sym.h"
#include "util.h"

/* The graph re-checked with each dynamic axis times its prime (sym.h), for symbolic strides; g2 and x2
 * are initialised here on success. */
static int second_binding(ts_spec *spec, const ts_binding *bind, const ts_graph *g, ts_graph *g2, ts_egir *x2,
                          char **err) {
    ts_binding b2 = {0};
    ts_dyn dyn;
    if (ts_dyn_of(g, &dyn) != 0) {
        *err = ts_strfmt("more than %d dynamic axes", TS_SYM_MAX_DYN);
        return -1;
    }
    for (int i = 0; bind && i < bind->n; i++) { /* the caller's sizes, with the dynamic ones scaled */
        b2.name[b2.n] = ts_strdup(bind->name[i]);
        b2.size[b2.n++] = bind->size[i];
    }
    for (int d = 0; d < dyn.n; d++) {
        int i = 0;
        while (i < b2.n && strcmp(b2.name[i], g->axes[dyn.axis[d]].name) != 0) i++;
        if (i == b2.n) b2.name[b2.n++] = ts_strdup(g->axes[dyn.axis[d]].name);
        if (__builtin_mul_overflow(g->axes[dyn.axis[d]].size, ts_sym_primes[d], &b2.size[i])) {
            ts_binding_free(&b2); /* a typical size near 2^63 has no second size */
            *err = ts_strdup("the graph does not check at a second size of its dynamic axes");
            return -1;
        }
    }
    ts_diags dg;
    ts_diags_init(&dg, spec->path, NULL, 0);
    int rc = ts_check(spec, &b2, g2, &dg);
    ts_diags_free(&dg);
    ts_binding_free(&b2);
    if (rc != 0) {
        ts_graph_free(g2);
        *err = ts_strdup("the graph does not check at a second size of its dynamic axes");
        return -1;
    }
    if (ts_egir_init(x2, g2, err) != 0) {
        ts_graph_free(g2);
        return -1;
    }
    return 0;
}

static int by_predicted(const void *a, const void *b) {
    double x = ((const ts_plan *)a)->predicted_s, y = ((const ts_plan *)b)->predicted_s;
    return x < y ? -1 : x > y;
}

int ts_compile(ts_spec *spec, const ts_binding *bind, ts_graph *g, const ts_rules *rs, const ts_costmodel *cm,
               ts_compiled *out, char **err) {
    memset(out, 0, sizeof *out);
    ts_runner_limits lim = ts_runner_default_limits();
    ts_saturation s;
    ts_egir plain = {0}, x2 = {0};
    ts_graph g2 = {0};
    bool dynamic = false;
    for (int a = 0; a < g->naxes; a++) dynamic |= g->axes[a].dynamic;
    int rc = ts_saturate(g, rs, ts_default_phases, ts_default_nphases, &lim, &s, err);
    if (rc == 0) rc = ts_egir_init(&plain, g, err);
    if (rc == 0 && dynamic) rc = second_binding(spec, bind, g, &g2, &x2, err);
    ts_search_opts so = ts_search_default_opts();
    if (rc == 0)
        rc = ts_search_plans(&s.x, &plain, dynamic ? x2.views : NULL, g, cm, &so, &out->plans, &out->n, &out->search, err);
    if (rc == 0) {
        out->baseline_s = out->plans[0].predicted_s; /* built first */
        qsort(out->plans, (size_t)out->n, sizeof *out->plans, by_predicted);
    }
    if (dynamic && x2.eg) {
        ts_egir_free(&x2);
        ts_graph_free(&g2);
    }
    ts_egir_free(&plain);
    ts_saturation_free(&s);
    if (rc != 0) ts_compiled_free(out);
    return rc;
}

void ts_compiled_free(ts_compiled *c) {
    for (int i = 0; i < c->n; i++) ts_plan_free(&c->plans[i]);
    free(c->plans);
    memset(c, 0, sizeof *c);
}
