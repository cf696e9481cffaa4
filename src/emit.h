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
} ts_emit_opts;

/* Writes the header for plan p of graph g to out. Returns 0, or -1 with *err (heap) when a template
 * cannot be read or a kernel kind cannot be emitted. */
int ts_emit_header(FILE *out, const ts_graph *g, const ts_plan *p, const ts_emit_opts *o, char **err);

/* Writes the header to DIR/<name>.cuh through a temporary file renamed into place, so an existing header
 * is replaced only by a complete one. */
int ts_emit_header_file(const char *dir, const ts_graph *g, const ts_plan *p, const ts_emit_opts *o, char **err);

#endif
