/* emit.h — writing a plan as a self-contained CUDA header (the header contract in README.md): a banner,
 * the templates it uses copied into the graph's own namespace, generated functors for the fused
 * expressions, `<name>_workspace_bytes`, the typed `<name>_launch`, and the C ABI `<name>_run`.
 * The output depends only on its inputs (no dates, no paths of this machine), so regenerating it gives
 * the same bytes. */
#ifndef TS_EMIT_H
#define TS_EMIT_H

#include <stdio.h>

#include "costmodel.h"
#include "hlir.h"
#include "plan.h"

typedef struct {
    const char *source_path;  /* the YAML file, as named on the command line */
    const char *source_text;  /* its bytes, hashed into the banner */
    size_t source_len;
    const char *templates_dir; /* the folder the templates (.cuh) are read from */
    const ts_costmodel *cost_model;
    double baseline_s;         /* the baseline plan's predicted time */
    const char *measured;      /* the banner's "measured:" text (tsopt tune); NULL: not tuned on a GPU */
    const char *name;          /* the symbols' prefix and the file's name (--name); NULL: the graph's name */
} ts_emit_opts;

/* Identifier hygiene. A tensor or axis name becomes a C identifier in the header as follows: strip its
 * trailing underscores; when what is left is reserved, append one underscore to the whole name (`class`
 * → `class_`, `class_` → `class__`, `p` → `p_`); otherwise keep it. The mapping is deterministic and
 * one-to-one. Reserved: the words in ts_emit_reserved (C/C++ keywords, the launch code's own names,
 * macros of the included C headers), and names starting with `cuda`, `tsopt` (any case), `__` or `_`
 * and a capital letter, `K` and a digit, or `tmp` and a digit. Returns a heap string. */
char *ts_emit_ident(const char *name);
extern const char *const ts_emit_reserved[]; /* NULL-terminated */

/* Whether `name` can prefix the header's symbols (a C identifier of at most 64 characters that is not
 * reserved in the sense above). */
bool ts_emit_name_ok(const char *name);

/* Writes the header for plan p of graph g to out. Returns 0, or -1 with *err (heap) when a template
 * cannot be read or a kernel kind cannot be emitted. */
int ts_emit_header(FILE *out, const ts_graph *g, const ts_plan *p, const ts_emit_opts *o, char **err);

/* Writes the header to DIR/<name>.cuh through a temporary file renamed into place, so an existing header
 * is replaced only by a complete one. */
int ts_emit_header_file(const char *dir, const ts_graph *g, const ts_plan *p, const ts_emit_opts *o, char **err);

#endif
