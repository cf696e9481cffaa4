/* diag.c — collecting and printing diagnostics (see diag.h). */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TS_MAX_ERRORS 100 /* errors kept per file; the rest are only counted */

void ts_diags_init(ts_diags *d, const char *path, const char *text, size_t text_len) {
    memset(d, 0, sizeof *d);
    d->path = path;
    d->text = text;
    d->text_len = text_len;
}

void ts_diags_free(ts_diags *d) {
    for (int i = 0; i < d->n; i++) {
        free(d->items[i].message);
        free(d->items[i].hint);
    }
    free(d->items);
    d->items = NULL;
    d->n = d->cap = d->nerrors = 0;
}

void ts_diag_add(ts_diags *d, ts_severity sev, int line, int col, int len, const char *hint, const char *fmt,
                 ...) {
    /* A hostile file can hold millions of errors (outputs: [a, a, ...]): keep the first TS_MAX_ERRORS and
     * one error, at the first one dropped, saying the rest were dropped; still count them all, so memory
     * and output stay bounded. */
    if (sev == TS_ERROR && d->nerrors >= TS_MAX_ERRORS) {
        if (d->nerrors++ == TS_MAX_ERRORS) {
            TS_GROW(d->items, d->n, d->cap);
            d->items[d->n++] = (ts_diag){.severity = TS_ERROR, .line = line, .col = col, .len = 1,
                                         .message = ts_strfmt("too many errors; only the first %d are shown", TS_MAX_ERRORS)};
        }
        return;
    }
    TS_GROW(d->items, d->n, d->cap);
    ts_diag *x = &d->items[d->n++];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    x->message = ts_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(x->message, (size_t)n + 1, fmt, ap);
    va_end(ap);
    x->severity = sev;
    x->line = line;
    x->col = col;
    x->len = len > 0 ? len : 1;
    x->hint = hint ? ts_strdup(hint) : NULL;
    if (sev == TS_ERROR) d->nerrors++;
}

char *ts_diag_headline(const ts_diags *d, int i) {
    const ts_diag *x = &d->items[i];
    const char *sev = x->severity == TS_ERROR ? "error" : "warning";
    if (x->line > 0) return ts_strfmt("%s:%d:%d: %s: %s", d->path, x->line, x->col, sev, x->message);
    return ts_strfmt("%s: %s: %s", d->path, sev, x->message);
}

/* The bytes of 1-based line `line`, or NULL when absent or not plain printable text. */
static const char *source_line(const ts_diags *d, int line, size_t *len) {
    if (!d->text || line <= 0) return NULL;
    const char *p = d->text, *end = d->text + d->text_len;
    for (int l = 1; l < line; l++) {
        p = memchr(p, '\n', (size_t)(end - p));
        if (!p) return NULL;
        p++;
    }
    const char *e = p;
    while (e < end && *e != '\n' && *e != '\r') {
        unsigned char c = (unsigned char)*e;
        if ((c < 0x20 && c != '\t') || c == 0x7f || c >= 0x80) return NULL; /* keep excerpts plain ASCII */
        if (++e - p > 240) return NULL; /* too long to show; stop scanning (lines can be megabytes) */
    }
    *len = (size_t)(e - p);
    return p;
}

static void print_excerpt(const ts_diags *d, const ts_diag *x, FILE *out) {
    size_t len;
    const char *text = source_line(d, x->line, &len);
    if (!text) return;
    fprintf(out, "%5d | %.*s\n      | ", x->line, (int)len, text);
    for (int i = 1; i < x->col && (size_t)i <= len; i++) fputc(text[i - 1] == '\t' ? '\t' : ' ', out);
    fputc('^', out);
    for (int i = 1; i < x->len; i++) fputc('~', out);
    fputc('\n', out);
}

void ts_diags_print(const ts_diags *d, FILE *out) {
    for (int i = 0; i < d->n; i++) {
        char *head = ts_diag_headline(d, i);
        fprintf(out, "%s\n", head);
        free(head);
        print_excerpt(d, &d->items[i], out);
        if (d->items[i].hint) fprintf(out, "      = hint: %s\n", d->items[i].hint);
    }
}

static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    int row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *ts_closest_name(const char *word, const char *const *names, int n) {
    const char *best = NULL;
    int best_d = (int)strlen(word) / 3 + 1; /* allow about one typo in three characters */
    if (best_d > 3) best_d = 3;
    for (int i = 0; i < n; i++) {
        int dist = edit_distance(word, names[i]);
        if (dist <= best_d && (!best || dist < edit_distance(word, best))) best = names[i];
    }
    return best;
}
