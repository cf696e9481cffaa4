/* fuzz_common.h — helpers shared by the libFuzzer targets in tests/fuzz/ (header-only, one per target).
 *
 * The targets call the library directly (build-fuzz/libtsopt.a, built with ASan + UBSan); a property
 * violation calls fuzz_fail(), which prints why and aborts so that libFuzzer records the input. */
#ifndef TS_FUZZ_COMMON_H
#define TS_FUZZ_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "diag.h"
#include "spec.h"
#include "util.h"

#define FUZZ_PATH "fuzz.yaml"

__attribute__((noreturn, format(printf, 1, 2))) static void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz property violated: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* "path:LINE:COL: error: " with LINE, COL >= 1, or the whole-file form "path: error: " (line 0). */
static inline int headline_well_formed(const char *h, const char *path, int line) {
    size_t n = strlen(path);
    if (strncmp(h, path, n) != 0) return 0;
    const char *p = h + n;
    if (line == 0) return strncmp(p, ": error: ", 9) == 0;
    char *end;
    if (*p++ != ':') return 0;
    long l = strtol(p, &end, 10);
    if (end == p || l < 1 || *end != ':') return 0;
    p = end + 1;
    long c = strtol(p, &end, 10);
    if (end == p || c < 1) return 0;
    return strncmp(end, ": error: ", 9) == 0;
}

/* A rejected input must carry at least one error, and every error headline must be well formed (the
 * message non-empty). `what` names the stage for the report. */
static inline void check_rejection(const ts_diags *d, const char *path, const char *what) {
    int errors = 0;
    for (int i = 0; i < d->n; i++) {
        if (d->items[i].severity != TS_ERROR) continue;
        errors++;
        char *h = ts_diag_headline(d, i);
        if (!headline_well_formed(h, path, d->items[i].line))
            fuzz_fail("%s: malformed diagnostic headline: '%s'", what, h);
        if (!d->items[i].message[0]) fuzz_fail("%s: empty diagnostic message: '%s'", what, h);
        if (d->items[i].line < 0 || d->items[i].col < 0 || (d->items[i].line > 0) != (d->items[i].col > 0))
            fuzz_fail("%s: bad place %d:%d in '%s'", what, d->items[i].line, d->items[i].col, h);
        free(h);
    }
    if (errors == 0) fuzz_fail("%s: input rejected without an error diagnostic", what);
    if (errors > d->nerrors) fuzz_fail("%s: nerrors %d but %d error items", what, d->nerrors, errors);
    /* Printing must not fault either (excerpts index into the text). */
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        ts_diags_print(d, null);
        fclose(null);
    }
}

/* After a successful check: a binding of every axis that is not `like:` another (dynamic ones too) to a
 * size <= 3 (its own size when that is already smaller). At most 64 axes can be bound (ts_binding). */
static inline void tiny_binding(const ts_graph *g, ts_binding *b) {
    memset(b, 0, sizeof *b);
    for (int a = 0; a < g->naxes && b->n < 64; a++) {
        if (g->axes[a].like >= 0) continue;
        b->name[b->n] = ts_strdup(g->axes[a].name);
        b->size[b->n++] = g->axes[a].size < 3 ? g->axes[a].size : 3;
    }
}

#endif
