/* spec.h — reading a graph file: bytes from disk, text checks (UTF-8, binary), and the YAML document
 * (libyaml) kept with its source marks so that every later error can name file:line:col.
 * This file knows YAML, not tensors: src/check.c gives the document its meaning. */
#ifndef TS_SPEC_H
#define TS_SPEC_H

#include <stddef.h>
#include <yaml.h>

#include "diag.h"

#define TS_MAX_FILE_BYTES (10u << 20) /* graph and rule files larger than this are refused */

typedef struct {
    char *path;
    char *text; /* NUL-terminated copy of the file */
    size_t len;
    yaml_document_t doc;
    int has_doc;
} ts_spec;

/* Reads `path` whole; on failure reports into d (which must have been initialised with the path). */
char *ts_read_text_file(const char *path, size_t *len, ts_diags *d);
/* Loads a graph file. Returns 0 on success; on failure the errors are in d. d is initialised by this
 * call (with the file's text, for excerpts) and stays valid while spec lives. */
int ts_spec_load(ts_spec *spec, const char *path, ts_diags *d);
/* Same from an in-memory buffer; `path` is only used in messages. */
int ts_spec_load_text(ts_spec *spec, const char *path, const char *text, size_t len, ts_diags *d);
void ts_spec_free(ts_spec *spec);

/* YAML node helpers (NULL-safe). */
yaml_node_t *ts_yaml_root(ts_spec *s);
yaml_node_t *ts_yaml_node(ts_spec *s, int id);
/* The value of key `key` in mapping m, or NULL. */
yaml_node_t *ts_yaml_get(ts_spec *s, yaml_node_t *m, const char *key);
const char *ts_yaml_str(yaml_node_t *n); /* scalar text, or NULL */
int ts_yaml_line(yaml_node_t *n);         /* 1-based */
int ts_yaml_col(yaml_node_t *n);          /* 1-based */
int ts_yaml_len(yaml_node_t *n);          /* characters spanned on its first line, at least 1 */

#endif
