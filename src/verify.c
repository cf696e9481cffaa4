/* verify.c — checking rules against the float64 interpreter on random instances (see verify.h). */
#include "verify.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "egir.h"
#include "interp.h"
#include "util.h"

#define POOL_AXES 3
#define MAX_ATTEMPTS_PER_TRIAL 20

/* What a param variable stands for, from where the left side uses it. */
typedef enum { PARAM_AXIS, PARAM_PICK, PARAM_DTYPE, PARAM_CONSTANT, PARAM_UNSUPPORTED } param_role;

typedef struct {
    const ts_rules *rs;
    const ts_rule *r;
    param_role role[TS_RULE_MAX_VARS];
    unsigned long long rng;
    /* one trial */
    ts_graph g;
    ts_builder b;
    ts_tensor operand[TS_RULE_MAX_VARS];
    int64_t param[TS_RULE_MAX_VARS];
    ts_egir_data data[TS_RULE_MAX_VARS];
} verifier;

/* ---- roles of param variables ------------------------------------------------------------------ */

static param_role role_of(int32_t op, int i) {
    ts_op o = (ts_op)op;
    if (o == TS_OP_CAST) return PARAM_DTYPE;
    if (o == TS_OP_CONSTANT) return PARAM_CONSTANT;
    if (o == TS_OP_PICK) return PARAM_PICK;
    if (o == TS_OP_INPUT || o == TS_OP_VIEW) return PARAM_UNSUPPORTED;
    if (i == 0 && (o == TS_OP_IOTA || ts_op_kind_of(o) == TS_KIND_REDUCE || ts_op_kind_of(o) == TS_KIND_FUSED))
        return PARAM_AXIS;
    return PARAM_UNSUPPORTED; /* e.g. a tile size given by a variable */
}

/* Fills v->role; returns the name of an op the verifier cannot instantiate, or NULL. */
static const char *find_roles(verifier *v, const ts_pattern *p) {
    for (uint32_t i = 0; i < p->n; i++) {
        const ts_pat_node *n = &p->node[i];
        if (n->op == TS_OP_INPUT || n->op == TS_OP_VIEW) return ts_op_name((ts_op)n->op);
        for (int k = 0; k < n->nparams; k++)
            if (n->param_var & (1u << k)) {
                v->role[n->param[k]] = role_of(n->op, k);
                if (v->role[n->param[k]] == PARAM_UNSUPPORTED) return ts_op_name((ts_op)n->op);
            }
    }
    return NULL;
}

/* A literal param the verifier cannot instantiate (heap message), or NULL. Axis ids are per graph, so a
 * literal axis (contract{-1}, reduce_sum{3}) names no axis of a random instance; a literal pick index or
 * dtype must be one that exists. Without this, such a rule file made the verifier index out of bounds. */
static char *bad_literal(const ts_pattern *p) {
    for (uint32_t i = 0; i < p->n; i++) {
        const ts_pat_node *n = &p->node[i];
        for (int k = 0; k < n->nparams; k++) {
            if (n->param_var & (1u << k)) continue;
            int64_t x = n->param[k];
            param_role role = role_of(n->op, k);
            if (role == PARAM_AXIS)
                return ts_strfmt("    a literal axis {%lld} of '%s' names no axis of a random instance\n", (long long)x,
                                 ts_op_name((ts_op)n->op));
            if ((role == PARAM_PICK && (x < 0 || x > 1)) || (role == PARAM_DTYPE && (x < 0 || x >= TS_DTYPE_COUNT)))
                return ts_strfmt("    '%s' has no {%lld}\n", ts_op_name((ts_op)n->op), (long long)x);
        }
    }
    return NULL;
}

/* ---- drawing a trial --------------------------------------------------------------------------- */

static int64_t pick_size(verifier *v, bool big) {
    static const int64_t big_sizes[] = {1, 2, 3, 7, 64, 65, 129, 257, 300};
    static const int64_t small_sizes[] = {1, 2, 3, 4, 5};
    if (big) return big_sizes[ts_splitmix64(&v->rng) % (sizeof big_sizes / sizeof *big_sizes)];
    return small_sizes[ts_splitmix64(&v->rng) % (sizeof small_sizes / sizeof *small_sizes)];
}

static void draw_axes(verifier *v) {
    ts_graph_init(&v->g, v->r->name);
    v->b = (ts_builder){.g = &v->g, .origin = -1};
    for (int a = 0; a < POOL_AXES; a++) {
        char name[8];
        snprintf(name, sizeof name, "a%d", a);
        ts_graph_add_axis(&v->g, name, pick_size(v, a == 0), false, 0);
    }
    ts_t_pair_axis(&v->b);
}

static void draw_operand(verifier *v, int var) {
    int32_t axes[POOL_AXES];
    int n = 0;
    ts_egir_data *d = &v->data[var];
    *d = (ts_egir_data){.dtype = TS_FP32};
    if (ts_uniform(&v->rng) < 0.25) { /* a scalar constant: lets (positive ?c) and (constant ?c) hold */
        d->is_const = true;
        d->value = floor(ts_uniform(&v->rng) * 32 - 16) / 8; /* in [-2, 2), exact in binary */
        v->operand[var] = ts_t_constant(&v->b, d->value, TS_FP32);
        return;
    }
    for (int a = 0; a < POOL_AXES; a++)
        if (ts_uniform(&v->rng) < 0.5) axes[n++] = a, d->axes |= 1ull << a;
    TS_GROW(v->g.inputs, v->g.ninputs, v->g.cap_inputs);
    v->g.inputs[v->g.ninputs] = (ts_input){.name = ts_strdup(v->r->var[var].name)};
    v->operand[var] = ts_t_input(&v->b, v->g.ninputs, axes, n, TS_FP32);
    v->g.inputs[v->g.ninputs++].node = v->operand[var].ref.node;
}

static void draw_param(verifier *v, int var) {
    double c = floor(ts_uniform(&v->rng) * 32 - 16) / 8;
    switch (v->role[var]) {
    case PARAM_AXIS: /* favour the axis that may be large */
        v->param[var] = ts_uniform(&v->rng) < 0.5 ? 0 : (int64_t)(ts_splitmix64(&v->rng) % POOL_AXES);
        break;
    case PARAM_PICK: v->param[var] = (int64_t)(ts_splitmix64(&v->rng) % 2); break;
    case PARAM_DTYPE: v->param[var] = (int64_t)(ts_splitmix64(&v->rng) % TS_DTYPE_COUNT); break;
    case PARAM_CONSTANT: memcpy(&v->param[var], &c, sizeof c); break;
    case PARAM_UNSUPPORTED: break;
    }
}

static void draw_trial(verifier *v) {
    draw_axes(v);
    for (int i = 0; i < v->r->nvars; i++) {
        if (v->r->var[i].is_param) draw_param(v, i);
        else draw_operand(v, i);
    }
}

/* The arguments of guard `cond` in this trial. */
static void guard_args(const verifier *v, const ts_rule_cond *cond, ts_rule_arg *args) {
    for (int a = 0; a < cond->nargs; a++) {
        const ts_rule_garg *g = &cond->arg[a];
        bool param = !g->is_var || v->r->var[g->value].is_param;
        args[a] = (ts_rule_arg){.is_param = param};
        if (!g->is_var) args[a].value = g->value;
        else if (param) args[a].value = v->param[g->value];
        else args[a].cls = (uint32_t)g->value, args[a].data = &v->data[g->value];
    }
}

static bool guards_hold(const verifier *v) {
    for (int c = 0; c < v->r->nconds; c++) {
        ts_rule_arg args[TS_RULE_MAX_GUARD_ARGS];
        guard_args(v, &v->r->cond[c], args);
        const ts_rule_guard *guard = &v->rs->env.guards[v->r->cond[c].guard];
        if (!guard->fn(v->rs->env.ctx, NULL, args, v->r->cond[c].nargs)) return false;
    }
    return true;
}

/* The error this trial may show: `exact` (float64 noise), or what a guard that admits rounding allows. */
static double trial_tolerance(const verifier *v, double exact) {
    double tol = exact;
    for (int c = 0; c < v->r->nconds; c++) {
        const ts_rule_guard *guard = &v->rs->env.guards[v->r->cond[c].guard];
        if (!guard->tolerance) continue;
        ts_rule_arg args[TS_RULE_MAX_GUARD_ARGS];
        guard_args(v, &v->r->cond[c], args);
        tol = fmax(tol, guard->tolerance(args, v->r->cond[c].nargs));
    }
    return tol;
}

/* ---- evaluating both sides --------------------------------------------------------------------- */

static ts_tensor build_side(verifier *v, const ts_pattern *p) {
    ts_tensor *val = ts_xmalloc(sizeof *val * (size_t)(p->n + 1));
    for (uint32_t i = 0; i < p->n; i++) {
        const ts_pat_node *n = &p->node[i];
        if (n->op == TS_PAT_VAR) {
            val[i] = v->operand[n->var];
            continue;
        }
        int64_t params[TS_EG_MAX_PARAMS] = {0};
        for (int k = 0; k < n->nparams; k++) params[k] = n->param_var & (1u << k) ? v->param[n->param[k]] : n->param[k];
        ts_tensor kids[TS_EG_MAX_KIDS];
        for (int k = 0; k < n->nkids; k++) kids[k] = val[n->kid[k]];
        val[i] = ts_egir_build_node(&v->b, NULL, n->op, params, kids);
    }
    ts_tensor root = val[p->n - 1];
    free(val);
    return root;
}

static uint64_t axis_set(const ts_view *w) {
    uint64_t m = 0;
    for (int d = 0; d < w->ndim; d++) m |= 1ull << w->axis[d];
    return m;
}

static void describe_trial(const verifier *v, double *const *in, char **out);

/* b's values re-ordered to a's dim order (same axis set). */
static double *align_values(const ts_view *a, const ts_view *b, const double *bv) {
    int64_t n = ts_view_numel(a), idx[TS_MAX_DIMS] = {0};
    double *out = ts_xmalloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0, stride = 1;
        for (int d = b->ndim - 1; d >= 0; d--) {
            off += idx[ts_view_find(a, b->axis[d])] * stride;
            stride *= b->size[d];
        }
        out[e] = bv[off];
        for (int d = a->ndim - 1; d >= 0 && ++idx[d] == a->size[d]; d--) idx[d] = 0;
    }
    return out;
}

/* Relative L2 error of y against x; infinite when NaNs or infinities disagree (*bad = first such index). */
static double compare(const double *x, const double *y, int64_t n, int64_t *bad) {
    double num = 0, den = 0, worst = -1;
    *bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]) || isnan(y[i]) || isinf(x[i]) || isinf(y[i])) {
            bool same = (isnan(x[i]) && isnan(y[i])) || x[i] == y[i];
            if (!same) return *bad = i, INFINITY;
            continue;
        }
        double d = (x[i] - y[i]) * (x[i] - y[i]);
        if (d > worst) worst = d, *bad = i;
        num += d;
        den += x[i] * x[i];
    }
    return sqrt(num / (den > 1e-300 ? den : 1));
}

/* ---- counterexamples --------------------------------------------------------------------------- */

static void appendf(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void appendf(char **s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    size_t old = *s ? strlen(*s) : 0;
    *s = ts_xrealloc(*s, old + (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(*s + old, (size_t)n + 1, fmt, ap);
    va_end(ap);
}

static void describe_trial(const verifier *v, double *const *in, char **out) {
    appendf(out, "    axes:");
    for (int a = 0; a < POOL_AXES; a++) appendf(out, " %s=%lld", v->g.axes[a].name, (long long)v->g.axes[a].size);
    appendf(out, "\n");
    for (int i = 0; i < v->r->nvars; i++) {
        const ts_rule_var *var = &v->r->var[i];
        if (var->is_param) {
            if (v->role[i] == PARAM_AXIS) appendf(out, "    %s = %s\n", var->name, v->g.axes[v->param[i]].name);
            else appendf(out, "    %s = %lld\n", var->name, (long long)v->param[i]);
            continue;
        }
        if (v->data[i].is_const) {
            appendf(out, "    %s = constant %g\n", var->name, v->data[i].value);
            continue;
        }
        const ts_view *w = &v->operand[i].ref.view;
        appendf(out, "    %s = input [", var->name);
        for (int d = 0; d < w->ndim; d++) appendf(out, "%s%s", d ? ", " : "", v->g.axes[w->axis[d]].name);
        if (!in) {
            appendf(out, "]\n");
            continue;
        }
        const double *x = in[v->g.nodes[v->operand[i].ref.node].input];
        appendf(out, "] = {%.6g%s}\n", x[0], ts_view_numel(w) > 1 ? ", ..." : "");
    }
}

/* ---- one rule ---------------------------------------------------------------------------------- */

static void add_output(ts_graph *g, const char *name, ts_tensor t) {
    TS_GROW(g->outputs, g->noutputs, g->cap_outputs);
    g->outputs[g->noutputs++] = (ts_output){.name = ts_strdup(name), .ref = t.ref, .dtype = t.dtype};
}

/* Runs one trial whose guards hold: every left pattern against its right pattern (a multi-pattern rule
 * has several pairs, all under the same bindings). Returns the largest error; fills *detail with the
 * trial and the worst pair. */
static double run_trial(verifier *v, char **detail) {
    int n = ts_rule_npatterns(v->r);
    ts_tensor lhs[TS_RULE_MAX_ROOTS], rhs[TS_RULE_MAX_ROOTS];
    for (int i = 0; i < n; i++) {
        lhs[i] = build_side(v, ts_rule_lhs(v->r, i));
        rhs[i] = build_side(v, ts_rule_rhs(v->r, i));
        if (axis_set(&lhs[i].ref.view) != axis_set(&rhs[i].ref.view)) {
            describe_trial(v, NULL, detail);
            appendf(detail, "    the two sides of pattern %d vary along different axes\n", i + 1);
            return INFINITY;
        }
        add_output(&v->g, "lhs", lhs[i]);
        add_output(&v->g, "rhs", rhs[i]);
    }
    double **in = ts_random_inputs(&v->g, ts_splitmix64(&v->rng)), **out = NULL;
    char *err = NULL;
    double worst = INFINITY;
    if (ts_interp_run(&v->g, in, &out, NULL, &err) != 0) {
        appendf(detail, "    %s\n", err);
        free(err);
    } else {
        worst = 0;
        for (int i = 0; i < n; i++) {
            double *r = align_values(&lhs[i].ref.view, &rhs[i].ref.view, out[2 * i + 1]);
            int64_t bad;
            double e = compare(out[2 * i], r, ts_view_numel(&lhs[i].ref.view), &bad);
            if (e > worst || isnan(e) || *detail == NULL) { /* the worst pair is the counterexample */
                free(*detail);
                *detail = NULL;
                describe_trial(v, in, detail);
                appendf(detail, "    %sleft[%lld] = %.17g, right[%lld] = %.17g, relative L2 error %.3g\n",
                        n > 1 ? "pattern " : "", (long long)bad, out[2 * i][bad], (long long)bad, r[bad], e);
                worst = isnan(e) ? INFINITY : fmax(worst, e);
            }
            free(r);
        }
        ts_free_buffers(out, 2 * n);
    }
    ts_free_buffers(in, v->g.ninputs);
    return worst;
}

ts_verify_result ts_verify_rule(const ts_rules *rs, int ri, const ts_verify_opts *opts) {
    ts_verify_opts o = opts ? *opts : (ts_verify_opts){0};
    if (!o.trials) o.trials = 40;
    if (!o.seed) o.seed = 1;
    if (!o.tolerance) o.tolerance = 1e-9;
    verifier v = {.rs = rs, .r = &rs->rule[ri], .rng = o.seed * 0x9E3779B97F4A7C15ull + (unsigned)ri};
    ts_verify_result res = {.status = TS_VERIFY_PASSED};
    const char *bad_op = NULL;
    for (int i = 0; i < ts_rule_npatterns(v.r) && !bad_op; i++) {
        bad_op = find_roles(&v, ts_rule_lhs(v.r, i));
        if (!bad_op) bad_op = find_roles(&v, ts_rule_rhs(v.r, i));
    }
    if (bad_op) {
        res.status = TS_VERIFY_SKIPPED;
        res.detail = ts_strfmt("    cannot draw random instances of '%s' with variables\n", bad_op);
        return res;
    }
    for (int i = 0; i < ts_rule_npatterns(v.r) && !res.detail; i++) {
        res.detail = bad_literal(ts_rule_lhs(v.r, i));
        if (!res.detail) res.detail = bad_literal(ts_rule_rhs(v.r, i));
    }
    if (res.detail) {
        res.status = TS_VERIFY_SKIPPED;
        return res;
    }
    for (int attempt = 0; res.trials < o.trials && attempt < o.trials * MAX_ATTEMPTS_PER_TRIAL; attempt++) {
        draw_trial(&v);
        if (guards_hold(&v)) {
            char *detail = NULL;
            double e = run_trial(&v, &detail);
            res.trials++;
            if (e > res.error || isnan(e)) res.error = e;
            if (!(e <= trial_tolerance(&v, o.tolerance))) {
                res.status = TS_VERIFY_FAILED;
                res.detail = detail;
                ts_graph_free(&v.g);
                return res;
            }
            free(detail);
        }
        ts_graph_free(&v.g);
    }
    if (res.trials < o.trials) {
        res.status = TS_VERIFY_UNSATISFIABLE;
        res.detail = ts_strfmt("    its guards held in only %d of %d random instances\n", res.trials,
                               o.trials * MAX_ATTEMPTS_PER_TRIAL);
    }
    return res;
}

void ts_verify_result_free(ts_verify_result *res) {
    free(res->detail);
    res->detail = NULL;
}

int ts_verify_all(const ts_rules *rs, const ts_verify_opts *opts, FILE *out) {
    static const char *const verdict[] = {"ok  ", "FAIL", "FAIL", "SKIP"};
    int passed = 0, failed = 0;
    for (int i = 0; i < rs->nrules; i++) {
        const ts_rule *r = &rs->rule[i];
        ts_verify_result res = ts_verify_rule(rs, i, opts);
        fprintf(out, "%s %s:%d: %s (%d trials, max error %.2g)\n", verdict[res.status], r->file, r->line, r->name,
                res.trials, res.error);
        if (res.status == TS_VERIFY_FAILED) fprintf(out, "  counterexample:\n%s", res.detail);
        else if (res.detail) fprintf(out, "%s", res.detail);
        if (res.status == TS_VERIFY_PASSED) passed++;
        else failed++;
        ts_verify_result_free(&res);
    }
    fprintf(out, "%d passed, %d failed\n", passed, failed);
    return failed;
}
