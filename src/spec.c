/* spec.c — loading graph files: disk I/O errors, text validation, libyaml parsing (see spec.h). */
#include "spec.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

char *ts_read_text_file(const char *path, size_t *len, ts_diags *d) {
    struct stat st;
    if (stat(path, &st) != 0) {
        ts_error(d, 0, 0, 1, NULL, "cannot open file: %s", strerror(errno));
        return NULL;
    }
    if (S_ISDIR(st.st_mode)) {
        ts_error(d, 0, 0, 1, "pass a .yaml file, not a folder", "is a directory");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        ts_error(d, 0, 0, 1, NULL, "cannot open file: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = ts_xmalloc(cap + 1);
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n > TS_MAX_FILE_BYTES) {
            ts_error(d, 0, 0, 1, NULL, "file is larger than the %u MiB limit", TS_MAX_FILE_BYTES >> 20);
            break;
        }
        if (got == 0) break;
        if (n == cap) {
            cap *= 2;
            buf = ts_xrealloc(buf, cap + 1);
        }
    }
    int failed = ferror(f) || n > TS_MAX_FILE_BYTES;
    if (ferror(f)) ts_error(d, 0, 0, 1, NULL, "cannot read file: %s", strerror(errno));
    fclose(f);
    if (failed) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Line and column (1-based) of byte offset `at`. */
static void locate(const char *text, size_t at, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else if (((unsigned char)text[i] & 0xC0) != 0x80) {
            (*col)++;
        }
    }
}

/* Length of the UTF-8 sequence starting at s (at most n bytes), or 0 when it is not valid UTF-8. */
static size_t utf8_seq_len(const unsigned char *s, size_t n) {
    size_t need;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if ((s[0] & 0xE0) == 0xC0) need = 2, cp = s[0] & 0x1Fu;
    else if ((s[0] & 0xF0) == 0xE0) need = 3, cp = s[0] & 0x0Fu;
    else if ((s[0] & 0xF8) == 0xF0) need = 4, cp = s[0] & 0x07u;
    else return 0;
    if (need > n) return 0;
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return need;
}

/* Refuses binary and non-UTF-8 files with a precise place, before libyaml sees them. */
static int check_text(const char *text, size_t len, ts_diags *d) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < len;) {
        int line, col;
        if (s[i] == 0) {
            locate(text, i, &line, &col);
            ts_error(d, line, col, 1, "graph files are YAML text", "binary file: NUL byte at offset %zu", i);
            return -1;
        }
        size_t k = utf8_seq_len(s + i, len - i);
        if (k == 0) {
            locate(text, i, &line, &col);
            ts_error(d, line, col, 1, "save the file as UTF-8", "invalid UTF-8 byte 0x%02x", s[i]);
            return -1;
        }
        i += k;
    }
    return 0;
}

/* Graph files nest a few levels (root → ops → op → args). libyaml's scanner spends time proportional to
 * the nesting depth on every token, so a file of 200,000 '[' takes minutes; refuse deep nesting after a
 * first pass over the events, which stops as soon as the limit is passed (malformed YAML is left to the
 * loader, which reports it with its place). */
#define TS_MAX_YAML_DEPTH 64

static int check_depth(ts_spec *spec, ts_diags *d) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return 0;
    yaml_parser_set_input_string(&parser, (const unsigned char *)spec->text, spec->len);
    int depth = 0, rc = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) break;
        yaml_event_type_t t = ev.type;
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) depth++;
        else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) depth--;
        if (depth > TS_MAX_YAML_DEPTH) {
            ts_error(d, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1, 1, "a graph file nests a few levels",
                     "YAML nested more than %d levels deep", TS_MAX_YAML_DEPTH);
            rc = -1;
        }
        yaml_event_delete(&ev);
        if (rc || t == YAML_STREAM_END_EVENT) break;
    }
    yaml_parser_delete(&parser);
    return rc;
}

static int parse_yaml(ts_spec *spec, ts_diags *d) {
    if (check_depth(spec, d) != 0) return -1;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        ts_error(d, 0, 0, 1, NULL, "cannot initialise the YAML parser");
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)spec->text, spec->len);
    int ok = yaml_parser_load(&parser, &spec->doc);
    if (!ok) {
        yaml_mark_t m = parser.problem_mark;
        const char *problem = parser.problem ? parser.problem : "unknown problem";
        if (parser.context)
            ts_error(d, (int)m.line + 1, (int)m.column + 1, 1, NULL, "malformed YAML: %s %s", problem,
                     parser.context);
        else
            ts_error(d, (int)m.line + 1, (int)m.column + 1, 1, NULL, "malformed YAML: %s", problem);
    } else {
        spec->has_doc = 1;
    }
    yaml_parser_delete(&parser);
    return ok ? 0 : -1;
}

int ts_spec_load_text(ts_spec *spec, const char *path, const char *text, size_t len, ts_diags *d) {
    memset(spec, 0, sizeof *spec);
    spec->path = ts_strdup(path);
    spec->text = ts_xmalloc(len + 1);
    memcpy(spec->text, text, len);
    spec->text[len] = '\0';
    spec->len = len;
    ts_diags_init(d, spec->path, spec->text, spec->len);
    if (check_text(spec->text, len, d) != 0) return -1;
    if (parse_yaml(spec, d) != 0) return -1;
    if (!ts_yaml_root(spec)) {
        ts_error(d, 1, 1, 1, "a graph needs inputs:, ops: and outputs:", "empty graph: the file holds no YAML document");
        return -1;
    }
    return 0;
}

int ts_spec_load(ts_spec *spec, const char *path, ts_diags *d) {
    ts_diags_init(d, path, NULL, 0);
    size_t len = 0;
    char *text = ts_read_text_file(path, &len, d);
    if (!text) {
        memset(spec, 0, sizeof *spec);
        return -1;
    }
    int rc = ts_spec_load_text(spec, path, text, len, d);
    free(text);
    return rc;
}

void ts_spec_free(ts_spec *spec) {
    if (spec->has_doc) yaml_document_delete(&spec->doc);
    free(spec->text);
    free(spec->path);
    memset(spec, 0, sizeof *spec);
}

yaml_node_t *ts_yaml_root(ts_spec *s) { return s->has_doc ? yaml_document_get_root_node(&s->doc) : NULL; }
yaml_node_t *ts_yaml_node(ts_spec *s, int id) { return yaml_document_get_node(&s->doc, id); }

yaml_node_t *ts_yaml_get(ts_spec *s, yaml_node_t *m, const char *key) {
    if (!m || m->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = ts_yaml_str(ts_yaml_node(s, p->key));
        if (k && strcmp(k, key) == 0) return ts_yaml_node(s, p->value);
    }
    return NULL;
}

const char *ts_yaml_str(yaml_node_t *n) {
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int ts_yaml_line(yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }
int ts_yaml_col(yaml_node_t *n) { return n ? (int)n->start_mark.column + 1 : 0; }

int ts_yaml_len(yaml_node_t *n) {
    if (!n || n->end_mark.line != n->start_mark.line) return 1;
    int len = (int)(n->end_mark.column - n->start_mark.column);
    return len > 0 ? len : 1;
}
