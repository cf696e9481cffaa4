/* libgemm.c — which GEMM kernels cuBLASLt can run, and their epilogue (libgemm.h). */
#include "libgemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

/* Whether access a spans only the axes in allowed[0..n) (-1 entries ignored) with a nonzero stride. */
static bool spans_only(const ts_access *a, const int32_t *allowed, int n) {
    for (int d = 0; d < a->ndim; d++) {
        int64_t v;
        if (ts_sym_const_value(&a->stride[d], &v) && v == 0) continue;
        bool ok = false;
        for (int i = 0; i < n; i++) ok |= allowed[i] >= 0 && a->axis[d] == allowed[i];
        if (!ok) return false;
    }
    return true;
}

static bool unit_along(const ts_access *a, int32_t axis) {
    ts_sym s = ts_access_stride(a, axis);
    return ts_sym_is_one(&s);
}

/* Axis `outer` (-1: none) nested outside `inner` in access a: outer's stride is inner's times its size, or both
 * are 0 — one index over both at inner's stride. */
static bool nests(const ts_graph *g, const ts_access *a, int32_t outer, int32_t inner) {
    if (outer < 0) return true;
    ts_dyn dyn;
    if (ts_dyn_of(g, &dyn) != 0) return false;
    ts_sym si = ts_access_stride(a, inner), so = ts_access_stride(a, outer);
    return ts_sym_equal(so, ts_sym_mul(si, ts_sym_axis(g, &dyn, inner)));
}

/* The kernel's batch (batch_axis, with batch_outer nested in it) and rows (m_axis, with m_outer nested in it)
 * are one stride each in access a. */
static bool batch_nests(const ts_graph *g, const ts_kernel *k, const ts_access *a) {
    return nests(g, a, k->batch_outer, k->batch_axis) && nests(g, a, k->m_outer, k->m_axis);
}

/* A matrix operand over (r, c) (and the batch): unit stride along one of the two, nothing else spanned. */
static bool matrix_ok(const ts_graph *g, const ts_kernel *k, const ts_access *a, int32_t r, int32_t c) {
    const int32_t allowed[] = {r, c, k->batch_axis, k->batch_outer, k->m_outer};
    return spans_only(a, allowed, 5) && (unit_along(a, r) || unit_along(a, c)) && batch_nests(g, k, a);
}

/* Operand slot s as the bias: a vector along n with unit stride, of the output's type. */
static bool bias_like(const ts_plan *p, const ts_kernel *k, int s) {
    const ts_access *a = &k->acc[s];
    return spans_only(a, &k->n_axis, 1) && unit_along(a, k->n_axis) && p->buf[a->buf].dtype == p->buf[k->out.buf].dtype;
}

/* Operand slot s as C: the output's axes and type, n contiguous, the batch one stride. */
static bool residual_like(const ts_graph *g, const ts_plan *p, const ts_kernel *k, int s) {
    const ts_access *a = &k->acc[s];
    const int32_t allowed[] = {k->m_axis, k->n_axis, k->batch_axis, k->batch_outer, k->m_outer};
    return spans_only(a, allowed, 5) && unit_along(a, k->n_axis) && batch_nests(g, k, a) &&
           p->buf[a->buf].dtype == p->buf[k->out.buf].dtype;
}

static double act_apply(ts_lt_act act, double x) {
    switch (act) {
    case TS_LT_ACT_RELU: return x > 0 ? x : 0;
    case TS_LT_ACT_GELU: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

typedef struct {
    const ts_kernel *k;
    double *load; /* per operand slot; NAN for slots the epilogue may not read */
} probe;

/* The epilogue at accumulator value acc, bias value b and C value c. */
static double epilogue_at(probe *pr, const ts_lt_epilogue *e, double acc, double b, double c) {
    if (pr->k->expr.n == 0) return acc;
    const double accs[2] = {acc, NAN};
    if (e->bias >= 0) pr->load[e->bias] = b;
    if (e->residual >= 0) pr->load[e->residual] = c;
    return ts_expr_eval(&pr->k->expr, accs, pr->load, NULL, false);
}

/* A small deterministic generator for the probe points (the same points every run). */
static double probe_value(uint64_t *state, double range) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((double)(*state >> 11) / 9007199254740992.0 * 2 - 1) * range;
}

/* Whether the epilogue is act(alpha·acc + bias + beta·C) for this act, with alpha (and beta) read off
 * probes: act(α) − act(−α) is 2α for none and α for ReLU and GELU's tanh form (tanh is odd), then checked
 * at 64 points. */
static bool fits_act(probe *pr, ts_lt_epilogue *e, ts_lt_act act) {
    e->act = act;
    if (fabs(epilogue_at(pr, e, 0, 0, 0)) > 1e-12) return false; /* a constant term: no such epilogue */
    double d = epilogue_at(pr, e, 1, 0, 0) - epilogue_at(pr, e, -1, 0, 0);
    e->alpha = act == TS_LT_ACT_NONE ? d / 2 : d;
    e->beta = e->residual >= 0 ? epilogue_at(pr, e, 0, 0, 1) - epilogue_at(pr, e, 0, 0, 0) : 0;
    if (!isfinite(e->alpha) || e->alpha == 0 || !isfinite(e->beta)) return false;
    uint64_t state = 0x7473707431ULL;
    for (int i = 0; i < 64; i++) {
        double acc = probe_value(&state, 6), b = probe_value(&state, 3), c = probe_value(&state, 3);
        double want = act_apply(act, e->alpha * acc + (e->bias >= 0 ? b : 0) + e->beta * (e->residual >= 0 ? c : 0));
        double got = epilogue_at(pr, e, acc, b, c);
        if (!(fabs(got - want) <= 1e-6 * (1 + fabs(want)))) return false;
    }
    return true;
}

/* The operand slots the epilogue reads, as bias and C; false when it reads anything else (an index, the
 * second accumulator, an operand of another shape, two of a kind). */
static bool epilogue_operands(const ts_graph *g, const ts_plan *p, const ts_kernel *k, ts_lt_epilogue *e,
                              const char **why) {
    e->bias = e->residual = -1;
    for (int i = 0; i < k->expr.n; i++) {
        const ts_xnode *n = &k->expr.node[i];
        if (n->kind == TS_X_INDEX || (n->kind == TS_X_ACC && n->slot != 0)) {
            *why = "the epilogue reads an index or a second accumulator";
            return false;
        }
        if (n->kind != TS_X_LOAD || n->slot == e->bias || n->slot == e->residual) continue;
        if (e->bias < 0 && bias_like(p, k, n->slot)) e->bias = n->slot;
        else if (e->residual < 0 && residual_like(g, p, k, n->slot)) e->residual = n->slot;
        else {
            *why = "the epilogue reads an operand that is neither a bias along n nor a tensor of the output's shape";
            return false;
        }
    }
    return true;
}

static bool operands_ok(const ts_graph *g, const ts_plan *p, const ts_kernel *k, const char **why) {
    ts_dtype ab = p->buf[k->acc[k->a].buf].dtype, d = p->buf[k->out.buf].dtype;
    if (p->buf[k->acc[k->b0].buf].dtype != ab || (d != ab && d != TS_FP32)) {
        *why = "cuBLASLt's path here takes operands of one type and an output of that type or fp32";
        return false;
    }
    if (ts_access_stride(&k->acc[k->a], k->m_axis).n == 0) { /* a vector's rows "_one" (plan.c): stride 0 */
        *why = "a vector's product (rows of stride 0) is not cuBLASLt's layout";
        return false;
    }
    const int32_t out_axes[] = {k->m_axis, k->n_axis, k->batch_axis, k->batch_outer, k->m_outer};
    if (!matrix_ok(g, k, &k->acc[k->a], k->m_axis, k->red_axis) || !matrix_ok(g, k, &k->acc[k->b0], k->red_axis, k->n_axis) ||
        !spans_only(&k->out, out_axes, 5) || !unit_along(&k->out, k->n_axis) || !batch_nests(g, k, &k->out)) {
        *why = "an operand has no unit stride along its matrix axes, or spans another axis";
        return false;
    }
    return true;
}

bool ts_libgemm_match(const ts_graph *g, const ts_plan *p, const ts_kernel *k, ts_lt_epilogue *e, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    *e = (ts_lt_epilogue){.act = TS_LT_ACT_NONE, .alpha = 1, .bias = -1, .residual = -1};
    if (k->kind != TS_KERNEL_GEMM || k->b1 >= 0 || k->two_k || k->nstage > 0 || k->nrowstat > 0 || k->nextra > 0) {
        *why = "not a GEMM of one operand pair and one output (dual B, a second pair, row statistics)";
        return false;
    }
    if (!operands_ok(g, p, k, why) || !epilogue_operands(g, p, k, e, why)) return false;
    probe pr = {.k = k, .load = ts_xmalloc(sizeof(double) * (size_t)(k->nacc ? k->nacc : 1))};
    for (int s = 0; s < k->nacc; s++) pr.load[s] = NAN;
    bool ok = fits_act(&pr, e, TS_LT_ACT_NONE) ||
              (e->residual < 0 && (fits_act(&pr, e, TS_LT_ACT_RELU) || fits_act(&pr, e, TS_LT_ACT_GELU)));
    free(pr.load);
    if (!ok) {
        *why = "the epilogue is not act(alpha*acc + bias + beta*C) for act none, ReLU or GELU (tanh form)";
        *e = (ts_lt_epilogue){.act = TS_LT_ACT_NONE, .alpha = 1, .bias = -1, .residual = -1};
    }
    return ok;
}

bool ts_plan_uses_cublas(const ts_plan *p) {
    for (int i = 0; i < p->nk; i++)
        if (p->k[i].kind == TS_KERNEL_GEMM && p->k[i].cfg.library) return true;
    return false;
}

const char *ts_lt_epilogue_describe(const ts_lt_epilogue *e) {
    static char buf[64];
    snprintf(buf, sizeof buf, "%s%s%s", e->bias >= 0 ? ", bias" : "", e->residual >= 0 ? ", + C" : "",
             e->act == TS_LT_ACT_RELU ? ", ReLU" : e->act == TS_LT_ACT_GELU ? ", GELU" : "");
    return buf;
}
