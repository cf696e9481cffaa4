/* diag.h — user-facing diagnostics: `path:line:col: error: message`, the offending source line with a
 * caret under the item, and an optional hint. Diagnostics are collected, never fatal; the CLI prints them
 * and chooses the exit code. Lines and columns are 1-based (libyaml marks are converted on entry). */
#ifndef TS_DIAG_H
#define TS_DIAG_H

#include <stddef.h>
#include <stdio.h>

typedef enum { TS_ERROR, TS_WARNING } ts_severity;

typedef struct {
    ts_severity severity;
    int line, col; /* 1-based; 0 when the problem has no place in the file */
    int len;       /* characters to underline, at least 1 */
    char *message; /* "unknown op 'matmull'" */
    char *hint;    /* NULL or "did you mean 'matmul'?" */
} ts_diag;

typedef struct {
    const char *path; /* as the user named the file */
    const char *text; /* the file's bytes (not owned), for excerpts; may be NULL */
    size_t text_len;
    int n, cap, nerrors;
    ts_diag *items;
} ts_diags;

void ts_diags_init(ts_diags *d, const char *path, const char *text, size_t text_len);
void ts_diags_free(ts_diags *d);
void ts_diag_add(ts_diags *d, ts_severity sev, int line, int col, int len, const char *hint, const char *fmt,
                 ...) __attribute__((format(printf, 7, 8)));
#define ts_error(d, line, col, len, hint, ...) ts_diag_add((d), TS_ERROR, (line), (col), (len), (hint), __VA_ARGS__)
/* The first line of diagnostic i: "path:line:col: error: message" (fresh heap string). */
char *ts_diag_headline(const ts_diags *d, int i);
/* Every diagnostic with its excerpt and hint. */
void ts_diags_print(const ts_diags *d, FILE *out);

/* The closest of `names` to `word` within a small edit distance, or NULL (for "did you mean" hints). */
const char *ts_closest_name(const char *word, const char *const *names, int n);

#endif
