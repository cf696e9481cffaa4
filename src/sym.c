/* sym.c — symbolic sizes over dynamic axes (see sym.h). */
#include "sym.h"

#include <string.h>

#include "util.h"

const int64_t ts_sym_primes[TS_SYM_MAX_DYN] = {3, 5, 7, 11};

int ts_dyn_of(const ts_graph *g, ts_dyn *out) {
    out->n = 0;
    for (int a = 0; a < g->naxes; a++)
        if (g->axes[a].dynamic && g->axes[a].like < 0) {
            if (out->n == TS_SYM_MAX_DYN) return -1;
            out->axis[out->n++] = a;
        }
    return 0;
}

ts_sym ts_sym_const(int64_t c) {
    ts_sym s = {0};
    if (c != 0) s.n = 1, s.t[0].coef = c;
    return s;
}

ts_sym ts_sym_axis(const ts_graph *g, const ts_dyn *dyn, int32_t axis) {
    int32_t root = ts_axis_root(g, axis);
    for (int i = 0; i < dyn->n; i++)
        if (dyn->axis[i] == root) {
            ts_sym s = {.n = 1};
            s.t[0].coef = 1;
            s.t[0].exp[i] = 1;
            return s;
        }
    return ts_sym_const(g->axes[axis].size);
}

static void add_term(ts_sym *s, ts_monomial m) {
    if (m.coef == 0) return;
    for (int i = 0; i < s->n; i++)
        if (memcmp(s->t[i].exp, m.exp, sizeof m.exp) == 0) {
            s->t[i].coef += m.coef;
            if (s->t[i].coef == 0) s->t[i] = s->t[--s->n];
            return;
        }
    TS_ASSERT(s->n < TS_SYM_MAX_TERMS);
    s->t[s->n++] = m;
}

ts_sym ts_sym_add(ts_sym a, ts_sym b) {
    for (int i = 0; i < b.n; i++) add_term(&a, b.t[i]);
    return a;
}

ts_sym ts_sym_mul(ts_sym a, ts_sym b) {
    ts_sym r = {0};
    for (int i = 0; i < a.n; i++)
        for (int j = 0; j < b.n; j++) {
            ts_monomial m = {.coef = a.t[i].coef * b.t[j].coef};
            for (int d = 0; d < TS_SYM_MAX_DYN; d++) m.exp[d] = (uint8_t)(a.t[i].exp[d] + b.t[j].exp[d]);
            add_term(&r, m);
        }
    return r;
}

bool ts_sym_const_value(const ts_sym *s, int64_t *v) {
    if (!ts_sym_is_const(s)) return false;
    *v = s->n ? s->t[0].coef : 0;
    return true;
}

bool ts_sym_is_one(const ts_sym *s) {
    int64_t v;
    return ts_sym_const_value(s, &v) && v == 1;
}

bool ts_sym_is_const(const ts_sym *s) {
    for (int i = 0; i < s->n; i++)
        for (int d = 0; d < TS_SYM_MAX_DYN; d++)
            if (s->t[i].exp[d]) return false;
    return true;
}

int64_t ts_sym_eval(const ts_sym *s, const int64_t *sizes) {
    int64_t v = 0;
    for (int i = 0; i < s->n; i++) {
        int64_t m = s->t[i].coef;
        for (int d = 0; d < TS_SYM_MAX_DYN; d++)
            for (int e = 0; e < s->t[i].exp[d]; e++) m *= sizes[d];
        v += m;
    }
    return v;
}

bool ts_sym_from_samples(int64_t v1, int64_t v2, const int64_t *b1, int ndyn, ts_sym *out) {
    *out = ts_sym_const(v1);
    if (v1 == v2) return true;
    if (v1 == 0 || v2 % v1 != 0) return false;
    int64_t ratio = v2 / v1;
    ts_monomial m = {.coef = v1};
    for (int d = 0; d < ndyn; d++)
        while (ratio % ts_sym_primes[d] == 0) {
            ratio /= ts_sym_primes[d];
            if (m.coef % b1[d] != 0) return false;
            m.coef /= b1[d];
            m.exp[d]++;
        }
    if (ratio != 1) return false;
    out->n = 1;
    out->t[0] = m;
    return true;
}

void ts_sym_print(FILE *f, const ts_sym *s, const char *const *names) {
    if (s->n == 0) {
        fputs("0", f);
        return;
    }
    if (s->n > 1) fputc('(', f);
    for (int i = 0; i < s->n; i++) {
        const ts_monomial *m = &s->t[i];
        if (i) fputs(" + ", f);
        bool first = true;
        if (m->coef != 1 || ts_sym_is_const(&(ts_sym){.n = 1, .t = {*m}})) {
            fprintf(f, "(int64_t)%lld", (long long)m->coef);
            first = false;
        }
        for (int d = 0; d < TS_SYM_MAX_DYN; d++)
            for (int e = 0; e < m->exp[d]; e++) {
                fprintf(f, "%s%s", first ? "" : "*", names[d]);
                first = false;
            }
    }
    if (s->n > 1) fputc(')', f);
}

bool ts_sym_equal(ts_sym a, ts_sym b) { return ts_sym_add(a, ts_sym_mul(b, ts_sym_const(-1))).n == 0; }
