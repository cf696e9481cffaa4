/* sym.h — symbolic sizes: sums of monomials c · Π size(a)^e over a graph's dynamic axes, so that strides,
 * offsets, element counts and GEMM extents of a generated header follow the sizes its caller passes at
 * run time. Static axes are folded into the coefficients. Printed as C expressions over variables named
 * after the dynamic axes. */
#ifndef TS_SYM_H
#define TS_SYM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hlir.h"

#define TS_SYM_MAX_DYN 4   /* dynamic (root) axes per graph */
#define TS_SYM_MAX_TERMS 8

typedef struct {
    int64_t coef;
    uint8_t exp[TS_SYM_MAX_DYN];
} ts_monomial;

typedef struct {
    int n;
    ts_monomial t[TS_SYM_MAX_TERMS];
} ts_sym;

/* The dynamic root axes of a graph, in axis order. */
typedef struct {
    int n;
    int32_t axis[TS_SYM_MAX_DYN];
} ts_dyn;

/* Returns -1 when the graph has more dynamic axes than supported. */
int ts_dyn_of(const ts_graph *g, ts_dyn *out);

ts_sym ts_sym_const(int64_t c);
/* size(axis): a constant for static axes, a monomial for dynamic ones (through like: links). */
ts_sym ts_sym_axis(const ts_graph *g, const ts_dyn *dyn, int32_t axis);
ts_sym ts_sym_add(ts_sym a, ts_sym b);
ts_sym ts_sym_mul(ts_sym a, ts_sym b);
bool ts_sym_is_const(const ts_sym *s);
/* Whether s is a constant, and then its value in *v (terms are merged: a constant has at most one). */
bool ts_sym_const_value(const ts_sym *s, int64_t *v);
/* Whether s is the constant 1 (a unit stride). */
bool ts_sym_is_one(const ts_sym *s);
/* Whether a and b are the same size for every binding of the dynamic axes. */
bool ts_sym_equal(ts_sym a, ts_sym b);
/* Value with the dynamic axes at sizes[i] (indexed like dyn->axis). */
int64_t ts_sym_eval(const ts_sym *s, const int64_t *sizes);
/* Recovers a monomial from its value at two bindings: v1 with dynamic root i at size b1[i], v2 at
 * b2[i] = b1[i]·prime[i] (distinct primes). Returns false when v2/v1 is not such a product. */
bool ts_sym_from_samples(int64_t v1, int64_t v2, const int64_t *b1, int ndyn, ts_sym *out);
/* A C expression, e.g. "(4096*t)" or "128"; names[i] names dynamic axis i. */
void ts_sym_print(FILE *f, const ts_sym *s, const char *const *names);

extern const int64_t ts_sym_primes[TS_SYM_MAX_DYN];

#endif
