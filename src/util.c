/* util.c — checked allocation and internal assertion reporting (see util.h). */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Noreturn void out_of_memory(size_t n) {
    fprintf(stderr, "tsopt: error: out of memory (allocating %zu bytes)\n", n);
    exit(3);
}

void *ts_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *ts_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(n * size);
    return p;
}

void *ts_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *ts_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(ts_xmalloc(n), s, n);
}

char *ts_strfmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ts_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void ts_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "tsopt: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}
