/* tunefit.c — `tsopt calibrate --from-tune` (see tunefit.h): tune records read as JSON through libyaml and
 * checked field by field, the template efficiencies (one per kernel kind) fitted to the recorded kernel timings (a
 * log-spaced scan, then GSL's Brent minimiser), the accuracy report (median APE, Spearman, top-1), and the
 * base cost-model file rewritten line by line so that its comments and fits survive. */
#include "tunefit.h"

#include <errno.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_min.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spec.h"
#include "util.h"
#include "version.h"

static const char *const kind_names[TS_NKINDS] = {TS_KERNEL_KINDS(TS_KIND_NAME_)};
/* The fitted efficiencies: "<name>_efficiency" (tunefit.h). */
static const char *const slot_names[TS_FIT_SLOTS] = {TS_KERNEL_KINDS(TS_KIND_NAME_) "skinny_gemm", "cublas", "gemm_tf32x3"};
/* The order of tables and lists: the tensor-core kinds first. */
static const int slot_order[TS_FIT_SLOTS] = {TS_KERNEL_GEMM,   TS_FIT_CUBLAS, TS_FIT_TF32X3, TS_KERNEL_ATTENTION,
                                             TS_FIT_SKINNY,    TS_KERNEL_REDUCE, TS_KERNEL_ROW, TS_KERNEL_MAP};

double *ts_costmodel_efficiency_slot(ts_costmodel *m, int slot) {
    switch (slot) {
    case TS_FIT_SKINNY: return &m->skinny_gemm_efficiency;
    case TS_FIT_CUBLAS: return &m->cublas_efficiency;
    case TS_FIT_TF32X3: return &m->gemm_tf32x3_efficiency;
    case TS_KERNEL_GEMM: return &m->gemm_efficiency;
    case TS_KERNEL_ATTENTION: return &m->attention_efficiency;
    case TS_KERNEL_REDUCE: return &m->reduce_efficiency;
    case TS_KERNEL_ROW: return &m->row_efficiency;
    default: return &m->map_efficiency;
    }
}

/* ---- reading records: JSON values ------------------------------------------------------------------ */

typedef struct {
    ts_spec *s;
    ts_diags *d;
    double slots_per_legacy_op; /* a record from before op_cost: FMA-pipe slots per `epilogue_ops` op (read_costmodel) */
} reader;

typedef enum { J_NULL, J_NUMBER, J_STRING, J_BOOL, J_WORD, J_EMPTY, J_ARRAY, J_OBJECT } jtype;

static const char *digits(const char *s) {
    while (*s >= '0' && *s <= '9') s++;
    return s;
}

/* JSON's number grammar exactly (strtod alone would take "inf", "0x1p3", " 1"). */
static bool json_number(const char *s) {
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (*s >= '1' && *s <= '9') s = digits(s);
    else return false;
    if (*s == '.') {
        if (digits(s + 1) == s + 1) return false;
        s = digits(s + 1);
    }
    if (*s == 'e' || *s == 'E') {
        s += s[1] == '+' || s[1] == '-' ? 2 : 1;
        if (digits(s) == s) return false;
        s = digits(s);
    }
    return *s == '\0';
}

static jtype jtype_of(const yaml_node_t *n) {
    if (n->type == YAML_SEQUENCE_NODE) return J_ARRAY;
    if (n->type == YAML_MAPPING_NODE) return J_OBJECT;
    if (n->type != YAML_SCALAR_NODE) return J_WORD;
    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return J_STRING;
    const char *v = (const char *)n->data.scalar.value;
    if (!*v) return J_EMPTY;
    if (strcmp(v, "null") == 0) return J_NULL;
    if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) return J_BOOL;
    return json_number(v) ? J_NUMBER : J_WORD;
}

static const char *jtype_name(jtype t) {
    static const char *const names[] = {"null", "a number", "a string", "true/false", "a bare word (not JSON)",
                                        "nothing", "an array", "an object"};
    return names[t];
}

#define HINT "see docs/tune-records.md"

__attribute__((format(printf, 3, 4))) static void error_at(reader *r, yaml_node_t *n, const char *fmt, ...) {
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_error(r->d, ts_yaml_line(n), ts_yaml_col(n), ts_yaml_len(n), HINT, "%s", msg);
}

/* The value of `key` in object obj, or NULL with "WHAT has no 'KEY'" reported at obj. */
static yaml_node_t *need(reader *r, yaml_node_t *obj, const char *key, const char *what) {
    yaml_node_t *v = ts_yaml_get(r->s, obj, key);
    if (!v) ts_error(r->d, ts_yaml_line(obj), ts_yaml_col(obj), 1, HINT, "%s has no '%s'", what, key);
    return v;
}

static int type_error(reader *r, yaml_node_t *v, const char *what, const char *key, const char *want) {
    error_at(r, v, "%s: '%s' must be %s, not %s", what, key, want, jtype_name(jtype_of(v)));
    return -1;
}

typedef enum { NUM_NONNEG, NUM_POSITIVE, NUM_UNIT } num_range;

enum { NULLABLE = 1, OPTIONAL = 2 };

/* A number field of a record's object, stored at `offset` of the struct it is read into. */
typedef struct {
    const char *key;
    size_t offset;
    num_range range;
    int flags;       /* NULLABLE: null gives NAN; OPTIONAL: may be absent (fields added after format 1 began) */
    double fallback; /* the value when absent */
} num_field;

static bool in_range(double x, num_range range) {
    if (!isfinite(x)) return false;
    if (range == NUM_NONNEG) return x >= 0;
    return x > 0 && (range == NUM_POSITIVE || x <= 1);
}

/* Reads field f of obj into base + f->offset. */
static int get_number(reader *r, yaml_node_t *obj, const char *what, const num_field *f, void *base) {
    static const char *const want[] = {"a non-negative number", "a positive number", "a number in (0, 1]"};
    double *out = (double *)((char *)base + f->offset);
    *out = f->flags & OPTIONAL ? f->fallback : NAN;
    if (f->flags & OPTIONAL && !ts_yaml_get(r->s, obj, f->key)) return 0;
    yaml_node_t *v = need(r, obj, f->key, what);
    if (!v) return -1;
    jtype t = jtype_of(v);
    if (t == J_NULL && f->flags & NULLABLE) return 0;
    char wanted[64];
    snprintf(wanted, sizeof wanted, "%s%s", want[f->range], f->flags & NULLABLE ? " or null" : "");
    if (t != J_NUMBER) return type_error(r, v, what, f->key, wanted);
    double x = strtod(ts_yaml_str(v), NULL);
    if (!in_range(x, f->range)) {
        error_at(r, v, "%s: '%s' must be %s, not %.40s", what, f->key, wanted, ts_yaml_str(v));
        return -1;
    }
    if (x != 0 && !(x >= TS_TUNE_NUM_MIN && x <= TS_TUNE_NUM_MAX)) { /* keeps every prediction and residual finite */
        error_at(r, v, "%s: '%s' is %.40s, outside what a record can hold (0, or %g to %g)", what, f->key,
                 ts_yaml_str(v), TS_TUNE_NUM_MIN, TS_TUNE_NUM_MAX);
        return -1;
    }
    *out = x;
    return 0;
}

static void get_numbers(reader *r, yaml_node_t *obj, const char *what, const num_field *f, int n, void *base) {
    for (int i = 0; i < n; i++) get_number(r, obj, what, &f[i], base);
}

/* String field `key` of obj: its node, or NULL (reported). */
static yaml_node_t *get_string(reader *r, yaml_node_t *obj, const char *key, const char *what) {
    yaml_node_t *v = need(r, obj, key, what);
    if (v && jtype_of(v) != J_STRING) {
        type_error(r, v, what, key, "a string");
        return NULL;
    }
    return v;
}

/* Field `key` of obj that must be an array or an object (`type`). */
static yaml_node_t *get_node(reader *r, yaml_node_t *obj, const char *key, const char *what, jtype type) {
    yaml_node_t *v = need(r, obj, key, what);
    if (v && jtype_of(v) != type) {
        type_error(r, v, what, key, jtype_name(type));
        return NULL;
    }
    return v;
}

/* String field `key` whose value must be one of names[0..n); its index, or -1 (reported). */
static int get_choice(reader *r, yaml_node_t *obj, const char *key, const char *what, const char *const *names,
                      int n, const char *hint) {
    yaml_node_t *v = get_string(r, obj, key, what);
    if (!v) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(ts_yaml_str(v), names[i]) == 0) return i;
    ts_error(r->d, ts_yaml_line(v), ts_yaml_col(v), ts_yaml_len(v), hint, "%s: unknown %s '%.40s'", what, key,
             ts_yaml_str(v));
    return -1;
}

/* Every node of the document is referenced at most once: YAML aliases (which could multiply the work
 * of a small file) are refused. */
static int check_no_aliases(reader *r) {
    yaml_document_t *doc = &r->s->doc;
    size_t n = (size_t)(doc->nodes.top - doc->nodes.start);
    unsigned char *seen = ts_xcalloc(n + 1, 1);
    int rc = 0;
    for (yaml_node_t *node = doc->nodes.start; node < doc->nodes.top && rc == 0; node++) {
        int ids[2], nids = 0;
        yaml_node_item_t *it = node->type == YAML_SEQUENCE_NODE ? node->data.sequence.items.start : NULL;
        yaml_node_pair_t *p = node->type == YAML_MAPPING_NODE ? node->data.mapping.pairs.start : NULL;
        for (;;) {
            if (it && it < node->data.sequence.items.top) ids[0] = *it++, nids = 1;
            else if (p && p < node->data.mapping.pairs.top) ids[0] = p->key, ids[1] = p->value, nids = 2, p++;
            else break;
            for (int j = 0; j < nids && rc == 0; j++) {
                if (ids[j] < 1 || (size_t)ids[j] > n || !seen[ids[j]]++) continue;
                yaml_node_t *dup = ts_yaml_node(r->s, ids[j]);
                ts_error(r->d, ts_yaml_line(dup), ts_yaml_col(dup), 1, "a tune record is plain JSON",
                         "YAML alias: this value is used twice");
                rc = -1;
            }
        }
    }
    free(seen);
    return rc;
}

/* ---- reading records: the fields ------------------------------------------------------------------- */

/* The cost model's coefficients as records carry them (costmodel.h): those a model file may lack may be
 * absent from records written before they existed too. */
static const num_field coefs[] = {
#define TS_X_COEF_FIELD(name, same_as, fallback)                                                          \
    {#name, offsetof(ts_costmodel, name), NUM_POSITIVE, (same_as) != NULL || (fallback) > 0 ? OPTIONAL : 0, fallback},
    TS_COSTMODEL_COEFFICIENTS(TS_X_COEF_FIELD)
#undef TS_X_COEF_FIELD
};
#define NCOEFS ((int)(sizeof coefs / sizeof *coefs))
#define COEF_AT(m, i) (*(double *)((char *)(m) + coefs[i].offset))

#define WORK(name, range) {#name, offsetof(ts_tune_kernel, work.name), range, 0, 0}
static const num_field kernel_fields[] = {
    WORK(tensor_flops, NUM_NONNEG), WORK(fma_flops, NUM_NONNEG), WORK(sfu_ops, NUM_NONNEG), WORK(bytes, NUM_NONNEG),
    WORK(wave_efficiency, NUM_UNIT),
    {"strided_bytes", offsetof(ts_tune_kernel, work.strided_bytes), NUM_NONNEG, OPTIONAL, 0},
    {"epilogue_slots", offsetof(ts_tune_kernel, work.epilogue_slots), NUM_NONNEG, OPTIONAL, 0},
    {"epilogue_sfu_ops", offsetof(ts_tune_kernel, work.epilogue_sfu_ops), NUM_NONNEG, OPTIONAL, 0},
    {"score_sfu_ops", offsetof(ts_tune_kernel, work.score_sfu_ops), NUM_NONNEG, OPTIONAL, 0},
    {"score_loads", offsetof(ts_tune_kernel, work.score_loads), NUM_NONNEG, OPTIONAL, 0},
    {"tile_waves", offsetof(ts_tune_kernel, work.tile_waves), NUM_NONNEG, OPTIONAL, 0},
    {"rowstat_stages", offsetof(ts_tune_kernel, work.rowstat_stages), NUM_NONNEG, OPTIONAL, 0},
    {"scores", offsetof(ts_tune_kernel, work.scores), NUM_NONNEG, OPTIONAL, 0},
    {"score_fn_ops", offsetof(ts_tune_kernel, work.score_fn_ops), NUM_NONNEG, OPTIONAL, 0},
    {"simt_gemm_flops", offsetof(ts_tune_kernel, work.simt_gemm_flops), NUM_NONNEG, OPTIONAL, 0},
    {"predicted_s", offsetof(ts_tune_kernel, predicted_s), NUM_NONNEG, NULLABLE, 0},
    {"measured_s", offsetof(ts_tune_kernel, measured_s), NUM_NONNEG, NULLABLE, 0},
};
static const num_field candidate_fields[] = {
    {"predicted_s", offsetof(ts_tune_candidate, predicted_s), NUM_NONNEG, NULLABLE, 0},
    {"measured_s", offsetof(ts_tune_candidate, measured_s), NUM_NONNEG, NULLABLE, 0},
};
static const num_field rank_field = {"rank", 0, NUM_POSITIVE, 0, 0};
#define NFIELDS(t) ((int)(sizeof t / sizeof *t))

static const char *const statuses[] = {"ok", "invalid", "build-failed", "run-failed", "pending"};

/* An optional true/false field of a kernel record (absent: false). */
static bool optional_flag(reader *r, yaml_node_t *kn, const char *what, const char *key) {
    yaml_node_t *v = ts_yaml_get(r->s, kn, key);
    if (v && jtype_of(v) != J_BOOL) type_error(r, v, what, key, "true/false");
    return v && jtype_of(v) == J_BOOL && strcmp(ts_yaml_str(v), "true") == 0;
}

/* A record written before the epilogue was priced per pipe (bench/NOTES.md run 141) counts its GEMM epilogue in
 * `epilogue_ops`, every op alike at the retired epilogue_ops_per_s: read as that many FMA-pipe slots' time, so that
 * it predicts what its own model did. */
static void read_legacy_epilogue(reader *r, yaml_node_t *kn, const char *what, ts_tune_kernel *k) {
    static const num_field legacy = {"epilogue_ops", 0, NUM_NONNEG, OPTIONAL, 0};
    double ops = 0;
    if (ts_yaml_get(r->s, kn, "epilogue_slots") || get_number(r, kn, what, &legacy, &ops) != 0) return;
    k->work.epilogue_slots = ops * r->slots_per_legacy_op;
}

static void read_kernel(reader *r, yaml_node_t *kn, const char *what, ts_tune_kernel *k) {
    if (jtype_of(kn) != J_OBJECT) {
        error_at(r, kn, "%s must be an object, not %s", what, jtype_name(jtype_of(kn)));
        return;
    }
    int kind = get_choice(r, kn, "kind", what, kind_names, TS_NKINDS, "one of map, reduce, gemm, attention, row");
    k->work.kind = kind < 0 ? TS_KERNEL_MAP : (ts_kernel_kind)kind;
    get_numbers(r, kn, what, kernel_fields, NFIELDS(kernel_fields), k);
    /* Whether the GEMM ran in its skinny form (config.h): "skinny": true/false; records written before the
     * field: when the configuration, as ts_config_describe wrote it, starts "skinny" (a static skinny form). */
    yaml_node_t *sk = ts_yaml_get(r->s, kn, "skinny"), *cfg = ts_yaml_get(r->s, kn, "config");
    if (sk && jtype_of(sk) != J_BOOL) type_error(r, sk, what, "skinny", "true/false");
    else if (sk) k->work.skinny = strcmp(ts_yaml_str(sk), "true") == 0;
    else k->work.skinny = k->work.kind == TS_KERNEL_GEMM && cfg && jtype_of(cfg) == J_STRING &&
                          strncmp(ts_yaml_str(cfg), "skinny", 6) == 0;
    k->work.columns = optional_flag(r, kn, what, "columns");   /* a ROW kernel down columns */
    k->work.unchunked = optional_flag(r, kn, what, "unchunked"); /* a GEMM on its element-wise loader */
    k->work.paired = optional_flag(r, kn, what, "paired");       /* a GEMM on its 4-byte loader */
    k->work.pingpong = optional_flag(r, kn, what, "pingpong"); /* a GEMM in its ping-pong form */
    k->work.whole_tiles = optional_flag(r, kn, what, "whole_tiles"); /* attention without a causal diagonal */
    k->work.key64 = optional_flag(r, kn, what, "key64");             /* attention in 64-key tiles */
    k->work.tile64 = optional_flag(r, kn, what, "tile64");           /* a single-B GEMM in 128x64 tiles */
    k->work.library = optional_flag(r, kn, what, "library");         /* a GEMM cuBLASLt ran */
    k->work.tf32x3 = optional_flag(r, kn, what, "tf32x3");           /* an fp32 GEMM in gemm_f32.cuh */
    read_legacy_epilogue(r, kn, what, k);

    if (k->work.strided_bytes > k->work.bytes)
        error_at(r, kn, "%s: 'strided_bytes' (%g) is more than 'bytes' (%g)", what, k->work.strided_bytes,
                 k->work.bytes);
}

/* The candidate's `kernels` array; *budget: kernels the record may still hold. */
static void read_kernels(reader *r, yaml_node_t *cn, const char *what, ts_tune_candidate *c, int *budget) {
    yaml_node_t *arr = get_node(r, cn, "kernels", what, J_ARRAY);
    if (!arr) return;
    yaml_node_item_t *it = arr->data.sequence.items.start;
    int n = (int)(arr->data.sequence.items.top - it);
    if (n > *budget) {
        ts_error(r->d, ts_yaml_line(arr), ts_yaml_col(arr), 1, NULL, "more than %d kernels in one record",
                 TS_TUNE_MAX_KERNELS);
        *budget = -1;
        return;
    }
    *budget -= n;
    c->k = ts_xcalloc((size_t)(n ? n : 1), sizeof *c->k);
    c->nk = n;
    for (int i = 0; i < n; i++) {
        char kwhat[96];
        snprintf(kwhat, sizeof kwhat, "kernel %d of %s", i + 1, what);
        read_kernel(r, ts_yaml_node(r->s, it[i]), kwhat, &c->k[i]);
    }
}

static void read_candidate(reader *r, yaml_node_t *cn, int index, ts_tune_candidate *c, int *budget) {
    char what[48];
    snprintf(what, sizeof what, "candidate %d", index + 1);
    c->measured_s = c->predicted_s = NAN;
    if (jtype_of(cn) != J_OBJECT) {
        error_at(r, cn, "%s must be an object, not %s", what, jtype_name(jtype_of(cn)));
        return;
    }
    double rank;
    if (get_number(r, cn, what, &rank_field, &rank) == 0) {
        if (rank != floor(rank) || rank > 1e9) {
            yaml_node_t *v = ts_yaml_get(r->s, cn, "rank");
            error_at(r, v, "%s: 'rank' must be a whole number from 1, not %.40s", what, ts_yaml_str(v));
        }
        c->rank = (int)fmin(rank, 1e9);
    }
    yaml_node_t *plan = get_string(r, cn, "plan", what);
    c->plan = ts_strdup(plan ? ts_yaml_str(plan) : "");
    int st = get_choice(r, cn, "status", what, statuses, 5, "one of ok, invalid, build-failed, run-failed, pending");
    c->status = ts_strdup(st >= 0 ? statuses[st] : "?");
    c->ok = st == 0;
    get_numbers(r, cn, what, candidate_fields, NFIELDS(candidate_fields), c);
    read_kernels(r, cn, what, c, budget);
}

static void read_costmodel(reader *r, yaml_node_t *root, ts_costmodel *cm) {
    yaml_node_t *obj = get_node(r, root, "costmodel", "the record", J_OBJECT);
    if (!obj) return;
    get_numbers(r, obj, "costmodel", coefs, NCOEFS, cm);
    ts_costmodel_fill_absent(cm); /* a record from before a coefficient existed */
    /* the retired rate of a record from before epilogue_efficiency (6.5e12 in every shipped model since run 14) */
    static const num_field legacy = {"epilogue_ops_per_s", 0, NUM_POSITIVE, OPTIONAL, 6.5e12};
    double ops_per_s; /* the fallback where absent */
    get_number(r, obj, "costmodel", &legacy, &ops_per_s);
    r->slots_per_legacy_op = 0.5 * cm->fma_flops_per_s * cm->epilogue_efficiency / ops_per_s;
}

static void read_candidates(reader *r, yaml_node_t *root, ts_tune_record *rec) {
    yaml_node_t *arr = get_node(r, root, "candidates", "the record", J_ARRAY);
    if (!arr) return;
    yaml_node_item_t *it = arr->data.sequence.items.start;
    int n = (int)(arr->data.sequence.items.top - it), budget = TS_TUNE_MAX_KERNELS;
    if (n > TS_TUNE_MAX_CANDIDATES) {
        ts_error(r->d, ts_yaml_line(arr), ts_yaml_col(arr), 1, NULL, "more than %d candidates in one record",
                 TS_TUNE_MAX_CANDIDATES);
        return;
    }
    rec->c = ts_xcalloc((size_t)(n ? n : 1), sizeof *rec->c);
    for (int i = 0; i < n && budget >= 0; i++, rec->nc++)
        read_candidate(r, ts_yaml_node(r->s, it[i]), i, &rec->c[i], &budget);
}

static void read_record(reader *r, ts_tune_record *rec) {
    yaml_node_t *root = ts_yaml_root(r->s);
    if (jtype_of(root) != J_OBJECT) {
        error_at(r, root, "a tune record is a JSON object, not %s", jtype_name(jtype_of(root)));
        return;
    }
    yaml_node_t *fmt = get_string(r, root, "format", "the record");
    if (fmt && strcmp(ts_yaml_str(fmt), TS_TUNE_FORMAT) != 0)
        error_at(r, fmt, "unsupported record format '%.60s'; this tsopt reads '%s'", ts_yaml_str(fmt), TS_TUNE_FORMAT);
    yaml_node_t *graph = get_string(r, root, "graph", "the record");
    rec->graph = ts_strdup(graph ? ts_yaml_str(graph) : "?");
    read_costmodel(r, root, &rec->cm);
    read_candidates(r, root, rec);
}

/* ---- reading records: files ------------------------------------------------------------------------ */

static void record_free(ts_tune_record *rec) {
    for (int i = 0; i < rec->nc; i++) {
        free(rec->c[i].plan);
        free(rec->c[i].status);
        free(rec->c[i].k);
    }
    free(rec->c);
    free(rec->graph);
}

void ts_tune_set_free(ts_tune_set *s) {
    for (int i = 0; i < s->n; i++) record_free(&s->r[i]);
    for (int i = 0; i < s->nkeep; i++) free(s->keep[i]);
    free(s->r);
    free(s->keep);
    memset(s, 0, sizeof *s);
}

static char *keep(ts_tune_set *s, char *p) {
    TS_GROW(s->keep, s->nkeep, s->capkeep);
    return s->keep[s->nkeep++] = p;
}

/* Only white space and # comments: no JSON value at all. */
static bool blank(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '#')
            while (i < len && text[i] != '\n') i++;
        else if (text[i] != ' ' && text[i] != '\t' && text[i] != '\n' && text[i] != '\r')
            return false;
    }
    return true;
}

int ts_tune_load_text(ts_tune_set *s, const char *path, const char *text, size_t len, ts_diags *d) {
    char *kpath = keep(s, ts_strdup(path)), *ktext = keep(s, ts_xmalloc(len + 1));
    memcpy(ktext, text, len);
    ktext[len] = '\0';
    ts_spec spec;
    ts_tune_record rec = {.path = kpath};
    int rc = -1;
    if (blank(text, len)) {
        memset(&spec, 0, sizeof spec);
        ts_diags_init(d, kpath, ktext, len);
        ts_error(d, 1, 1, 1, HINT, "empty file: a tune record is a JSON object");
    } else if (ts_spec_load_text(&spec, kpath, ktext, len, d) == 0) {
        reader r = {&spec, d, 0};
        if (check_no_aliases(&r) == 0) read_record(&r, &rec);
        rc = d->nerrors ? -1 : 0;
    }
    d->path = kpath, d->text = ktext, d->text_len = len; /* spec's copies are freed below */
    ts_spec_free(&spec);
    if (rc != 0) {
        record_free(&rec);
        return -1;
    }
    TS_GROW(s->r, s->n, s->cap);
    s->r[s->n++] = rec;
    return 0;
}

int ts_tune_load(ts_tune_set *s, const char *path, ts_diags *d) {
    const char *kpath = keep(s, ts_strdup(path));
    ts_diags_init(d, kpath, NULL, 0);
    size_t len = 0;
    char *text = ts_read_text_file(path, &len, d);
    if (!text) return -1;
    int rc = ts_tune_load_text(s, path, text, len, d);
    free(text);
    return rc;
}

/* ---- the fit --------------------------------------------------------------------------------------- */

typedef struct {
    const ts_kernel_work *w;
    const ts_costmodel *cm; /* the record's coefficients */
    double measured;
} sample;

typedef struct {
    int slot; /* a ts_kernel_kind, or TS_FIT_SKINNY */
    sample *s;
    int n, cap;
} sample_set;

static double predict(const sample *x, int slot, double eff) {
    ts_costmodel m = *x->cm;
    *ts_costmodel_efficiency_slot(&m, slot) = eff;
    return ts_costmodel_time(&m, x->w);
}

/* Σ log²(predicted / measured) at efficiency exp(log_eff). */
static double objective(double log_eff, void *arg) {
    const sample_set *ss = arg;
    double sum = 0, eff = exp(log_eff);
    for (int i = 0; i < ss->n; i++) {
        double q = log(predict(&ss->s[i], ss->slot, eff) / ss->s[i].measured);
        sum += q * q;
    }
    return sum;
}

static void collect(const ts_tune_set *s, int slot, sample_set *ss) {
    ss->slot = slot;
    for (int r = 0; r < s->n; r++)
        for (int c = 0; c < s->r[r].nc; c++) {
            const ts_tune_candidate *cand = &s->r[r].c[c];
            for (int k = 0; k < cand->nk && cand->ok; k++) {
                const ts_kernel_work *w = &cand->k[k].work;
                /* columns and GEMMs off the 16-byte loaders: at their own efficiencies */
                if (!(cand->k[k].measured_s > 0) || w->columns || w->unchunked || w->paired) continue;
                /* a skinny kernel streams at skinny_gemm_efficiency, its MMAs at skinny_tensor_efficiency */
                if (slot == TS_FIT_SKINNY ? !w->skinny
                    : slot == TS_FIT_CUBLAS ? w->skinny || !w->library /* cuBLASLt's GEMMs: their own rate */
                    : slot == TS_FIT_TF32X3 ? !w->tf32x3               /* fp32 GEMMs: theirs */
                                            : w->skinny || w->library || w->tf32x3 || (int)w->kind != slot)
                    continue;
                TS_GROW(ss->s, ss->n, ss->cap);
                ss->s[ss->n++] = (sample){&cand->k[k].work, &s->r[r].cm, cand->k[k].measured_s};
            }
        }
}

/* Refines a bracketed minimum (f(mid) below both ends) with GSL's Brent minimiser; mid if it cannot. */
static double brent(sample_set *ss, double lo, double mid, double hi) {
    gsl_function fn = {objective, ss};
    gsl_min_fminimizer *m = gsl_min_fminimizer_alloc(gsl_min_fminimizer_brent);
    gsl_error_handler_t *old = gsl_set_error_handler_off();
    double x = mid;
    if (gsl_min_fminimizer_set(m, &fn, mid, lo, hi) == GSL_SUCCESS) {
        for (int it = 0; it < 200; it++) {
            if (gsl_min_fminimizer_iterate(m) != GSL_SUCCESS) break;
            x = gsl_min_fminimizer_x_minimum(m);
            double a = gsl_min_fminimizer_x_lower(m), b = gsl_min_fminimizer_x_upper(m);
            if (gsl_min_test_interval(a, b, 1e-10, 0) == GSL_SUCCESS) break;
        }
    }
    gsl_set_error_handler(old);
    gsl_min_fminimizer_free(m);
    return objective(x, ss) <= objective(mid, ss) ? x : mid;
}

#define SCAN 97 /* log-spaced points over [TS_TUNE_EFF_MIN, TS_TUNE_EFF_MAX]: 4.9% apart */

/* The efficiency minimising the objective; *flat when no point of the scan differs from another (no
 * kernel's time depends on the efficiency); *at_bound when the minimum is an end of the range. */
static double minimise(sample_set *ss, bool *flat, bool *at_bound) {
    double x[SCAN], f[SCAN], lo = log(TS_TUNE_EFF_MIN), hi = log(TS_TUNE_EFF_MAX), worst = 0;
    int best = 0;
    for (int i = 0; i < SCAN; i++) {
        x[i] = lo + (hi - lo) * i / (SCAN - 1);
        f[i] = objective(x[i], ss);
        if (f[i] < f[best]) best = i;
        worst = fmax(worst, f[i]);
    }
    *flat = worst - f[best] <= 1e-12 * (1 + f[best]);
    *at_bound = !*flat && (best == 0 || best == SCAN - 1);
    if (*flat || *at_bound) return exp(x[best]);
    return exp(brent(ss, x[best - 1], x[best], x[best + 1]));
}

/* RMS and max of |predicted - measured| / measured and R² of the times at efficiency eff. */
static void fit_stats(const sample_set *ss, double eff, ts_fit *f) {
    double mean = 0, ss_res = 0, ss_tot = 0, rel2 = 0, relmax = 0;
    for (int i = 0; i < ss->n; i++) mean += ss->s[i].measured / ss->n;
    for (int i = 0; i < ss->n; i++) {
        double y = ss->s[i].measured, r = predict(&ss->s[i], ss->slot, eff) - y;
        ss_res += r * r;
        ss_tot += (y - mean) * (y - mean);
        rel2 += (r / y) * (r / y);
        relmax = fmax(relmax, fabs(r / y));
    }
    f->r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : (ss_res == 0 ? 1 : 0);
    f->resid_rms = sqrt(rel2 / ss->n);
    f->resid_max = relmax;
}

static const char *const slot_models[TS_FIT_SLOTS] = {
    [TS_KERNEL_MAP] = "t = launch + max(fma / (fma rate * c0), sfu / sfu rate, bytes / (dram rate * c0)); "
                      "c0 minimises sum log^2(t / measured)",
    [TS_KERNEL_REDUCE] = "t = launch + max(fma / (fma rate * c0), sfu / sfu rate, bytes / (dram rate * c0)); "
                         "c0 minimises sum log^2(t / measured)",
    [TS_KERNEL_GEMM] = "t = launch + max(tensor / (tensor rate * c0 * wave), fma / fma rate, sfu / sfu rate, "
                       "bytes / dram rate) + tile waves * wave overhead; c0 minimises sum log^2(t / measured)",
    [TS_KERNEL_ATTENTION] = "t = launch + max(tensor / (tensor rate * c0 * wave), fma / (fma rate * c0), sfu / sfu "
                            "rate, bytes / dram rate); c0 minimises sum log^2(t / measured)",
    [TS_KERNEL_ROW] = "t = launch + max(fma / (fma rate * c0), sfu / sfu rate, bytes / (dram rate * c0)); "
                      "c0 minimises sum log^2(t / measured)",
    [TS_FIT_SKINNY] = "t = launch + max(tensor / (tensor rate * skinny tensor eff * wave), fma / fma rate, sfu / sfu "
                      "rate, bytes / (dram rate * c0 * wave)) (+ epilogue); c0 minimises sum log^2(t / measured)",
    [TS_FIT_CUBLAS] = "cuBLASLt's GEMMs: t = launch + max(tensor / (tensor rate * c0 * wave), fma / fma rate, sfu / sfu "
                      "rate, bytes / dram rate) + tile waves * wave overhead; c0 minimises sum log^2(t / measured)",
    [TS_FIT_TF32X3] = "fp32 GEMMs (3xTF32): t = launch + max(tensor / (tensor rate * c0 * wave), fma / fma rate, sfu / "
                      "sfu rate, bytes / dram rate) + epilogue + tile waves * wave overhead; c0 minimises sum "
                      "log^2(t / measured)",
};

static void fit_slot(const ts_tune_set *s, int slot, ts_eff_fit *e) {
    sample_set ss = {0};
    collect(s, slot, &ss);
    e->samples = ss.n;
    bool flat = false, at_bound = false;
    double eff = ss.n >= TS_TUNE_MIN_SAMPLES ? minimise(&ss, &flat, &at_bound) : e->before;
    if (ss.n < TS_TUNE_MIN_SAMPLES) {
        e->why_not = ss.n ? "fewer than 3 timed kernels" : "no timed kernels";
    } else if (flat) {
        e->why_not = "no timed kernel's time depends on it";
    } else {
        e->fitted = true;
        e->at_bound = at_bound;
        e->after = eff;
        snprintf(e->fit.name, sizeof e->fit.name, "%s_efficiency", slot_names[slot]);
        e->fit.model = slot_models[slot];
        e->fit.n = ss.n;
        e->fit.p = 1;
        e->fit.coef[0] = eff;
        fit_stats(&ss, eff, &e->fit);
    }
    free(ss.s);
}

void ts_tune_fit_run(const ts_tune_set *s, const ts_costmodel *base, ts_tune_fit *f) {
    memset(f, 0, sizeof *f);
    for (int k = 0; k < TS_FIT_SLOTS; k++) {
        ts_eff_fit *e = &f->kind[k];
        ts_costmodel m = *base; /* a shallow copy, to read the slot through the one accessor */
        e->before = e->after = *ts_costmodel_efficiency_slot(&m, k);
        fit_slot(s, k, e);
        f->nfitted += e->fitted;
    }
}

/* ---- accuracy -------------------------------------------------------------------------------------- */

typedef struct {
    double v;
    int i;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (isnan(x->v) || isnan(y->v)) return isnan(x->v) - isnan(y->v); /* a total order even then */
    return (x->v > y->v) - (x->v < y->v);
}

static int cmp_double(const void *a, const void *b) {
    ranked x = {*(const double *)a, 0}, y = {*(const double *)b, 0};
    return cmp_ranked(&x, &y);
}

/* 1-based ranks of x, ties at their average rank. */
static void average_ranks(const double *x, int n, double *rank) {
    ranked *r = ts_xmalloc(sizeof *r * (size_t)n);
    for (int i = 0; i < n; i++) r[i] = (ranked){x[i], i};
    qsort(r, (size_t)n, sizeof *r, cmp_ranked);
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && cmp_ranked(&r[j], &r[i]) == 0;) j++;
        for (int t = i; t < j; t++) rank[r[t].i] = (i + j + 1) / 2.0; /* ranks i+1 .. j */
    }
    free(r);
}

static double pearson(const double *a, const double *b, int n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) ma += a[i] / n, mb += b[i] / n;
    for (int i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : NAN;
}

double ts_spearman(const double *x, const double *y, int n) {
    if (n < 2) return NAN;
    double *rx = ts_xmalloc(sizeof *rx * (size_t)n), *ry = ts_xmalloc(sizeof *ry * (size_t)n);
    average_ranks(x, n, rx);
    average_ranks(y, n, ry);
    double rho = pearson(rx, ry, n);
    free(rx);
    free(ry);
    return rho;
}

double ts_median(double *x, int n) {
    if (n <= 0) return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static int cmp_group(const void *a, const void *b) {
    const ts_acc_point *const *x = a, *const *y = b;
    if ((*x)->group != (*y)->group) return (*x)->group < (*y)->group ? -1 : 1;
    return *x < *y ? -1 : *x > *y; /* input order within a group */
}

/* One group's points (n of them): Spearman (into *rho; NAN under 3 points) and whether its predicted
 * best (the first of equals) is within 10% of its measured best. */
static bool group_stats(const ts_acc_point *const *g, int n, double *rho) {
    double *pred = ts_xmalloc(sizeof *pred * (size_t)n), *meas = ts_xmalloc(sizeof *meas * (size_t)n);
    int pbest = 0;
    double mbest = INFINITY;
    for (int i = 0; i < n; i++) {
        pred[i] = g[i]->predicted, meas[i] = g[i]->measured;
        if (pred[i] < pred[pbest]) pbest = i;
        mbest = fmin(mbest, meas[i]);
    }
    *rho = n >= 3 ? ts_spearman(pred, meas, n) : NAN;
    bool hit = meas[pbest] <= 1.10 * mbest;
    free(pred);
    free(meas);
    return hit;
}

static void per_group(const ts_acc_point *p, int n, ts_accuracy *a) {
    const ts_acc_point **order = ts_xmalloc(sizeof *order * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) order[i] = &p[i];
    qsort(order, (size_t)n, sizeof *order, cmp_group);
    double rho_sum = 0;
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && order[j]->group == order[i]->group;) j++;
        double rho;
        a->groups++;
        a->top1_hits += group_stats(order + i, j - i, &rho);
        if (isfinite(rho)) rho_sum += rho, a->spearman_groups++;
    }
    a->spearman_per_group = a->spearman_groups ? rho_sum / a->spearman_groups : NAN;
    a->top1_share = a->groups ? (double)a->top1_hits / a->groups : NAN;
    free(order);
}

void ts_accuracy_compute(const ts_acc_point *p, int n, ts_accuracy *a) {
    memset(a, 0, sizeof *a);
    a->points = n;
    double *ape = ts_xmalloc(sizeof *ape * (size_t)(n ? n : 1)), *pred = ts_xmalloc(sizeof *pred * (size_t)(n ? n : 1));
    double *meas = ts_xmalloc(sizeof *meas * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        pred[i] = p[i].predicted, meas[i] = p[i].measured;
        ape[i] = fabs(p[i].predicted - p[i].measured) / p[i].measured;
    }
    a->median_ape = ts_median(ape, n);
    a->spearman = ts_spearman(pred, meas, n);
    per_group(p, n, a);
    free(ape);
    free(pred);
    free(meas);
}

static double candidate_time(const ts_tune_candidate *c, const ts_costmodel *cm) {
    double t = 0;
    for (int k = 0; k < c->nk; k++) t += ts_costmodel_time(cm, &c->k[k].work);
    return t;
}

int ts_tune_points(const ts_tune_set *s, const double *eff, ts_acc_point **out) {
    int n = 0, cap = 0;
    *out = NULL;
    for (int r = 0; r < s->n; r++) {
        ts_costmodel cm = s->r[r].cm;
        for (int k = 0; k < TS_FIT_SLOTS && eff; k++) *ts_costmodel_efficiency_slot(&cm, k) = eff[k];
        for (int c = 0; c < s->r[r].nc; c++) {
            const ts_tune_candidate *cand = &s->r[r].c[c];
            if (!cand->ok || !(cand->measured_s > 0)) continue;
            TS_GROW(*out, n, cap);
            (*out)[n++] = (ts_acc_point){r, candidate_time(cand, &cm), cand->measured_s};
        }
    }
    return n;
}

/* ---- the cost-model file --------------------------------------------------------------------------- */

typedef struct {
    const char *p;
    int len;
} text_line;

static int split_lines(const char *text, text_line **out) {
    int n = 0, cap = 0;
    *out = NULL;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        int len = (int)(e ? e - p : (ptrdiff_t)strlen(p));
        TS_GROW(*out, n, cap);
        (*out)[n++] = (text_line){p, len};
        p += len + (e != NULL);
    }
    return n;
}

/* The mapping key a line starts (into key), or -1 (comment, blank, anything else); *indent: its column. */
static int line_key(text_line l, char *key, int keycap, int *indent) {
    int i = 0, k = 0;
    while (i < l.len && l.p[i] == ' ') i++;
    *indent = i;
    while (i < l.len && k < keycap - 1 && (l.p[i] == '_' || (l.p[i] >= 'a' && l.p[i] <= 'z') ||
                                           (l.p[i] >= 'A' && l.p[i] <= 'Z') || (l.p[i] >= '0' && l.p[i] <= '9')))
        key[k++] = l.p[i++];
    key[k] = '\0';
    while (i < l.len && l.p[i] == ' ') i++;
    return k > 0 && i < l.len && l.p[i] == ':' ? i + 1 : -1;
}

/* Nothing but blanks or a comment after position `from`. */
static bool rest_empty(text_line l, int from) {
    while (from < l.len && (l.p[from] == ' ' || l.p[from] == '\r')) from++;
    return from == l.len || l.p[from] == '#';
}

/* A line at column 0 that is neither blank nor a comment: it opens a top-level section. */
static bool top_level(text_line l) { return l.len && l.p[0] != ' ' && l.p[0] != '#' && l.p[0] != '\r'; }

/* The section a top-level line opens: its key, or "" when it is no `key:` line. */
static void section_of(text_line l, char *section, int cap) {
    int indent, at = line_key(l, section, cap, &indent);
    if (at < 0) section[0] = '\0';
}

static bool contains(text_line l, const char *needle) {
    int n = (int)strlen(needle);
    for (int i = 0; i + n <= l.len; i++)
        if (memcmp(l.p + i, needle, (size_t)n) == 0) return true;
    return false;
}

static bool comment(text_line l) { return l.len && l.p[0] == '#'; }

static int efficiency_kind(const char *key) {
    for (int k = 0; k < TS_FIT_SLOTS; k++) {
        size_t n = strlen(slot_names[k]);
        if (strncmp(key, slot_names[k], n) == 0 && strcmp(key + n, "_efficiency") == 0) return k;
    }
    return -1;
}

#define SENTENCE_MARK "Template efficiencies:"

/* The header's sentence about the efficiencies (the calibrate writer's "... are NOT measured ..." or one
 * this writer made): lines [*from, *to) of the leading comment block; false when there is none. */
static bool find_sentence(const text_line *l, int n, int *from, int *to) {
    int i = 0;
    while (i < n && comment(l[i]) && !contains(l[i], "NOT measured") && !contains(l[i], "# " SENTENCE_MARK)) i++;
    if (i == n || !comment(l[i])) return false;
    int j = i;
    for (;; j++) {
        int e = l[j].len;
        while (e > 0 && (l[j].p[e - 1] == ' ' || l[j].p[e - 1] == '\r')) e--;
        if (l[j].p[e - 1] == '.' || j + 1 == n || !comment(l[j + 1])) break;
    }
    *from = i, *to = j + 1;
    return true;
}

/* Writes words as "# " comment lines of at most 100 columns. */
static void put_wrapped(FILE *out, const char *text) {
    int col = 0;
    for (const char *p = text; *p;) {
        while (*p == ' ') p++;
        int w = (int)strcspn(p, " ");
        if (!w) break;
        if (col && col + 1 + w > 100) fputc('\n', out), col = 0;
        col += fprintf(out, col ? " %.*s" : "# %.*s", w, p);
        p += w;
    }
    if (col) fputc('\n', out);
}

/* "a, b and c": the kinds with fitted == want, each with its sample count or why it was not fitted. */
static char *kind_list(const ts_tune_fit *f, bool want, int *count) {
    char *s = ts_strdup("");
    int total = 0;
    for (int k = 0; k < TS_FIT_SLOTS; k++) total += f->kind[k].fitted == want;
    *count = 0;
    for (int i = 0; i < TS_FIT_SLOTS; i++) {
        const ts_eff_fit *e = &f->kind[slot_order[i]];
        if (e->fitted != want) continue;
        const char *sep = *count == 0 ? "" : *count + 1 == total ? " and " : ", ";
        char *t = want ? ts_strfmt("%s%s%s_efficiency (%d kernels)", s, sep, slot_names[slot_order[i]], e->samples)
                       : ts_strfmt("%s%s%s_efficiency (%s)", s, sep, slot_names[slot_order[i]],
                                   e->why_not ? e->why_not : "not fitted");
        free(s);
        s = t, ++*count;
    }
    return s;
}

/* A path printable inside a comment: control characters become '?'. */
static char *printable(const char *s) {
    char *t = ts_strdup(s);
    for (char *p = t; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return t;
}

/* "a.json, b.json" */
static char *file_list(const char *const *records, int n) {
    char *files = ts_strdup("");
    for (int i = 0; i < n; i++) {
        char *p = printable(records[i]), *t = ts_strfmt("%s%s%s", files, i ? ", " : "", p);
        free(p), free(files);
        files = t;
    }
    return files;
}

static void put_sentence(FILE *out, const ts_tune_fit *f, const char *base_path, const char *const *records,
                         int nrecords, time_t when) {
    int nfit, nkept;
    char date[32], *fitted = kind_list(f, true, &nfit), *kept = kind_list(f, false, &nkept);
    char *files = file_list(records, nrecords), *base = printable(base_path), *tail;
    struct tm tm;
    gmtime_r(&when, &tm);
    strftime(date, sizeof date, "%Y-%m-%d", &tm);
    tail = nkept ? ts_strfmt("; %s: not fitted, kept at %s from %s", kept, nkept == 1 ? "its value" : "their values",
                             base)
                 : ts_strdup("");
    char *text = ts_strfmt("%s %s fitted by `tsopt calibrate --from-tune` (tsopt %s) on %s UTC to the per-kernel "
                           "timings in %d tsopt tune record%s (%s), each minimising the sum of squared log ratios of "
                           "predicted to measured kernel times (the `fit:` section)%s.",
                           SENTENCE_MARK, fitted, TS_VERSION, date, nrecords, nrecords == 1 ? "" : "s", files, tail);
    put_wrapped(out, text);
    free(text), free(tail), free(base), free(files), free(fitted), free(kept);
}

static void put_fit_entries(FILE *out, const ts_tune_fit *f) {
    for (int i = 0; i < TS_FIT_SLOTS; i++)
        if (f->kind[slot_order[i]].fitted) ts_calib_write_fit(out, &f->kind[slot_order[i]].fit);
}

typedef struct {
    int sentence_from, sentence_to; /* -1: none */
    int fit_after;                  /* the line after which the new fit entries go; -1: no fit section */
    bool replaced[TS_FIT_SLOTS];
    bool present[TS_FIT_SLOTS];        /* an efficiency's line is under coefficients: */
} layout;

/* Where things are in the base; an error (fresh string) when its layout cannot be rewritten. */
static char *find_layout(const text_line *l, int n, layout *lay) {
    char key[64], section[64] = "";
    lay->fit_after = -1;
    if (!find_sentence(l, n, &lay->sentence_from, &lay->sentence_to)) lay->sentence_from = lay->sentence_to = -1;
    for (int i = 0; i < n; i++) {
        int indent, at = line_key(l[i], key, sizeof key, &indent);
        if (top_level(l[i])) {
            section_of(l[i], section, sizeof section);
            if (at > 0 && (!strcmp(key, "coefficients") || !strcmp(key, "fit")) && !rest_empty(l[i], at))
                return ts_strfmt("line %d: '%s:' is not a block mapping (one entry per line): cannot rewrite it",
                                 i + 1, key);
            if (!strcmp(section, "fit")) lay->fit_after = i;
        } else if (indent > 0 && !strcmp(section, "fit") && !rest_empty(l[i], indent)) {
            lay->fit_after = i;
        } else if (at > 0 && indent > 0 && !strcmp(section, "coefficients") && efficiency_kind(key) >= 0) {
            lay->present[efficiency_kind(key)] = true;
        }
    }
    return NULL;
}

/* Efficiencies whose line the base file lacks (an optional coefficient such as row_efficiency, which
 * then took another's value), after its map_efficiency line (a coefficient every model file has): the
 * fitted value, or the value it had, so that refitting another coefficient does not move it. */
static void put_missing_efficiencies(FILE *out, const ts_tune_fit *f, layout *lay) {
    for (int i = 0; i < TS_FIT_SLOTS; i++) {
        int k = slot_order[i];
        if (lay->present[k]) continue;
        if (f->kind[k].fitted)
            fprintf(out, "  %s_efficiency: %.5g  # fitted: %d kernels from tsopt tune records\n", slot_names[k],
                    f->kind[k].after, f->kind[k].samples);
        else
            fprintf(out, "  %s_efficiency: %.5g  # not fitted: the value it defaulted to\n", slot_names[k], f->kind[k].after);
        lay->present[k] = lay->replaced[k] = true;
    }
}

/* One base line (i) to out: rewritten, dropped or kept. */
static void put_line(FILE *out, text_line l, const char *section, const ts_tune_fit *f, layout *lay) {
    char key[64];
    int indent, at = line_key(l, key, sizeof key, &indent), k = at > 0 && indent > 0 ? efficiency_kind(key) : -1;
    if (k >= 0 && f->kind[k].fitted && !strcmp(section, "coefficients")) {
        fprintf(out, "%.*s%s: %.5g  # fitted: %d kernels from tsopt tune records\n", indent, l.p, key,
                f->kind[k].after, f->kind[k].samples);
        lay->replaced[k] = true;
    } else if (!(k >= 0 && f->kind[k].fitted && !strcmp(section, "fit"))) { /* an older fit of it is dropped */
        fprintf(out, "%.*s\n", l.len, l.p);
    }
    if (k == TS_KERNEL_MAP && !strcmp(section, "coefficients")) put_missing_efficiencies(out, f, lay);
}

typedef struct {
    const ts_tune_fit *f;
    const char *base_path;
    const char *const *records;
    int nrecords;
    time_t when;
} model_args;

static void put_model(FILE *out, const text_line *l, int n, layout *lay, const model_args *a) {
    char section[64] = "";
    if (lay->sentence_from < 0) put_sentence(out, a->f, a->base_path, a->records, a->nrecords, a->when);
    for (int i = 0; i < n; i++) {
        if (top_level(l[i])) section_of(l[i], section, sizeof section);

        if (i == lay->sentence_from) put_sentence(out, a->f, a->base_path, a->records, a->nrecords, a->when);
        if (i < lay->sentence_from || i >= lay->sentence_to) put_line(out, l[i], section, a->f, lay);
        if (i == lay->fit_after) put_fit_entries(out, a->f);
    }
    if (lay->fit_after < 0) {
        fputs("# The template efficiencies' fits: model, coefficient, R² and relative residual spread of the\n"
              "# kernel times, samples.\nfit:\n", out);
        put_fit_entries(out, a->f);
    }
}

char *ts_tune_model_text(const char *base_text, const char *base_path, const ts_tune_fit *f,
                         const char *const *records, int nrecords, time_t when, char **err) {
    *err = NULL;
    text_line *l;
    int n = split_lines(base_text, &l);
    layout lay = {0};
    char *buf = NULL;
    size_t size = 0;
    if ((*err = find_layout(l, n, &lay))) {
        free(l);
        return NULL;
    }
    FILE *out = open_memstream(&buf, &size);
    model_args args = {f, base_path, records, nrecords, when};
    put_model(out, l, n, &lay, &args);
    fclose(out);
    free(l);
    for (int k = 0; k < TS_FIT_SLOTS && !*err; k++)
        if (f->kind[k].fitted && !lay.replaced[k])
            *err = ts_strfmt("no line '  %s_efficiency: ...' under 'coefficients:' to replace", slot_names[k]);
    if (*err) free(buf), buf = NULL;
    return buf;
}

/* ---- the command ----------------------------------------------------------------------------------- */

static int load_records(const char *const *paths, int n, ts_tune_set *s) {
    int rc = 0;
    for (int i = 0; i < n; i++) {
        ts_diags d;
        if (ts_tune_load(s, paths[i], &d) != 0) {
            ts_diags_print(&d, stderr);
            rc = -1;
        }
        ts_diags_free(&d);
    }
    return rc;
}

/* A note for each record predicted with rates other than the base's: the fit keeps the record's. */
static void note_other_rates(const ts_tune_set *s, const ts_costmodel *base, const char *base_path) {
    for (int r = 0; r < s->n; r++)
        for (int i = 0; i < NCOEFS; i++) {
            double a = COEF_AT(&s->r[r].cm, i), b = COEF_AT(base, i);
            if (efficiency_kind(coefs[i].key) >= 0 || fabs(a - b) <= 1e-3 * fmax(a, b)) continue;
            fprintf(stderr, "calibrate: note: %s was predicted with %s %.5g, %s has %.5g; its kernels are fitted with "
                    "the record's rates\n", s->r[r].path, coefs[i].key, a, base_path, b);
            break;
        }
}

static void print_fits(FILE *out, const ts_tune_fit *f, int nrecords) {
    fprintf(out, "template efficiencies fitted to %d tune record%s (timed kernels of ok candidates):\n", nrecords,
            nrecords == 1 ? "" : "s");
    fprintf(out, "  %-22s %7s %8s %8s %10s %10s  %s\n", "efficiency", "samples", "before", "after", "resid rms",
            "resid max", "R²");
    for (int i = 0; i < TS_FIT_SLOTS; i++) {
        const ts_eff_fit *e = &f->kind[slot_order[i]];
        char name[32];
        snprintf(name, sizeof name, "%s_efficiency", slot_names[slot_order[i]]);
        if (e->fitted)
            fprintf(out, "  %-22s %7d %8.4g %8.4g %9.2f%% %9.2f%%  %.4f%s\n", name, e->samples, e->before, e->after,
                    100 * e->fit.resid_rms, 100 * e->fit.resid_max, e->fit.r2,
                    e->at_bound ? "  (at the end of the searched range)" : "");
        else
            fprintf(out, "  %-22s %7d %8.4g %8.4g  kept: %s\n", name, e->samples, e->before, e->after, e->why_not);
    }
}

static void put_metric(FILE *out, const char *what, double before, double after, bool percent) {
    char a[32] = "n/a", b[32] = "n/a";
    if (isfinite(before)) snprintf(a, sizeof a, percent ? "%.1f%%" : "%.3f", percent ? 100 * before : before);
    if (isfinite(after)) snprintf(b, sizeof b, percent ? "%.1f%%" : "%.3f", percent ? 100 * after : after);
    fprintf(out, "  %-56s %12s %12s\n", what, a, b);
}

static void print_accuracy(FILE *out, const ts_accuracy *b, const ts_accuracy *a, bool held_out) {
    char what[96], hb[32], ha[32];
    fprintf(out, "cost-model accuracy over %d ok, timed candidates of %d tuning runs%s:\n", b->points, b->groups,
            held_out ? " held out from the fit (--evaluate)" : "");
    fprintf(out, "  %-56s %12s %12s\n",
            held_out ? "(after the fit: predicted with the fitted efficiencies)" : "(after the fit: in-sample, the same timings)",
            "as recorded", "after fit");
    put_metric(out, "median |predicted - measured| / measured of the totals", b->median_ape, a->median_ape, true);
    put_metric(out, "Spearman rank correlation, all candidates pooled", b->spearman, a->spearman, false);
    snprintf(what, sizeof what, "Spearman, mean over the %d run%s with >= 3 candidates", b->spearman_groups,
             b->spearman_groups == 1 ? "" : "s");
    put_metric(out, what, b->spearman_per_group, a->spearman_per_group, false);
    snprintf(hb, sizeof hb, "%d of %d", b->top1_hits, b->groups);
    snprintf(ha, sizeof ha, "%d of %d", a->top1_hits, a->groups);
    fprintf(out, "  %-56s %12s %12s\n", "predicted best within 10% of the measured best", hb, ha);
}

static void report_accuracy(FILE *out, const ts_tune_set *s, const ts_tune_fit *f, bool held_out) {
    double eff[TS_FIT_SLOTS];
    for (int k = 0; k < TS_FIT_SLOTS; k++) eff[k] = f->kind[k].after;
    ts_acc_point *p;
    ts_accuracy before, after;
    int n = ts_tune_points(s, NULL, &p);
    ts_accuracy_compute(p, n, &before);
    free(p);
    n = ts_tune_points(s, eff, &p);
    ts_accuracy_compute(p, n, &after);
    free(p);
    print_accuracy(out, &before, &after, held_out);
}

/* The written file loads as a cost model with the fitted values (else a bug here: said, and refused). */
static int verify_model(const char *path, const ts_tune_fit *f) {
    ts_costmodel m;
    ts_diags d;
    int rc = ts_costmodel_load(&m, path, &d);
    if (rc != 0) {
        fprintf(stderr, "tsopt: error: internal: the rewritten cost model does not load:\n");
        ts_diags_print(&d, stderr);
    }
    for (int k = 0; k < TS_FIT_SLOTS && rc == 0; k++) {
        double got = *ts_costmodel_efficiency_slot(&m, k), want = f->kind[k].after;
        if (fabs(got - want) > 1e-4 * want) {
            fprintf(stderr, "tsopt: error: internal: the rewritten cost model has %s_efficiency %g, not %g\n",
                    slot_names[k], got, want);
            rc = -1;
        }
    }
    ts_diags_free(&d);
    ts_costmodel_free(&m);
    return rc;
}

/* The mode for dest: an existing file's, else what the umask allows of 0666. */
static mode_t new_file_mode(const char *dest) {
    struct stat st;
    if (dest && stat(dest, &st) == 0) return st.st_mode & 07777;
    mode_t mask = umask(022);
    umask(mask);
    return 0666 & ~mask;
}

/* Writes text to a temporary file beside dest (or in $TMPDIR for standard output), checks it loads, then
 * renames it over dest (or copies it to standard output). Nothing changes on any failure. */
static int write_model(const char *dest, const char *text, const ts_tune_fit *f) {
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *tmp = dest ? ts_strfmt("%s.tmp-XXXXXX", dest) : ts_strfmt("%s/tsopt-model-XXXXXX.yaml", tmpdir);
    int fd = dest ? mkstemp(tmp) : mkstemps(tmp, 5), rc = -1;
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fp) {
        fchmod(fd, new_file_mode(dest));
        bool wrote = fputs(text, fp) >= 0;
        if (fclose(fp) == 0 && wrote) rc = verify_model(tmp, f);
        else fprintf(stderr, "tsopt: error: cannot write %s: %s\n", tmp, strerror(errno));
        if (rc == 0 && dest && rename(tmp, dest) != 0) {
            fprintf(stderr, "tsopt: error: cannot write %s: %s\n", dest, strerror(errno));
            rc = -1;
        }
        if (rc == 0 && !dest && (fputs(text, stdout) < 0 || fflush(stdout) != 0)) rc = -1;
        if (rc != 0 || !dest) unlink(tmp);
    } else {
        fprintf(stderr, "tsopt: error: cannot write %s: %s\n", dest ? dest : tmp, strerror(errno));
        if (fd >= 0) close(fd), unlink(tmp);
    }
    free(tmp);
    return rc;
}

static int fit_and_write(const ts_calib_opts *o, const ts_tune_set *s, const ts_tune_set *held,
                         const ts_costmodel *base) {
    const char *base_path = o->base_path ? o->base_path : "costmodel/h200.yaml";
    FILE *rep = o->out_path ? stdout : stderr;
    ts_tune_fit f;
    note_other_rates(s, base, base_path);
    ts_tune_fit_run(s, base, &f);
    print_fits(rep, &f, s->n);
    report_accuracy(rep, s, &f, false);
    if (held->n) report_accuracy(rep, held, &f, true);
    fflush(rep);
    if (f.nfitted == 0) {
        fprintf(stderr, "tsopt: error: no efficiency could be fitted: each needs %d timed kernels of ok candidates "
                "whose time depends on it; nothing was written\n", TS_TUNE_MIN_SAMPLES);
        return TS_CALIB_INPUT;
    }
    char *err = NULL, *text = ts_tune_model_text(base->text, base_path, &f, o->from_tune, o->nfrom_tune, o->when, &err);
    int rc = TS_CALIB_OK;
    if (!text) {
        fprintf(stderr, "%s: error: %s\n", base_path, err);
        rc = TS_CALIB_INPUT;
    } else if (write_model(o->out_path, text, &f) != 0) {
        rc = TS_CALIB_INPUT;
    }
    free(text);
    free(err);
    return rc;
}

int ts_calibrate_from_tune(const ts_calib_opts *o) {
    const char *base_path = o->base_path ? o->base_path : "costmodel/h200.yaml";
    ts_tune_set s = {0}, held = {0};
    ts_costmodel base;
    ts_diags d;
    int rc = load_records(o->from_tune, o->nfrom_tune, &s) == 0 ? TS_CALIB_OK : TS_CALIB_INPUT;
    if (load_records(o->evaluate, o->nevaluate, &held) != 0) rc = TS_CALIB_INPUT;
    if (ts_costmodel_load(&base, base_path, &d) != 0) {
        ts_diags_print(&d, stderr);
        rc = TS_CALIB_INPUT;
    }
    if (rc == TS_CALIB_OK) rc = fit_and_write(o, &s, &held, &base);
    else fprintf(stderr, "tsopt: nothing was written\n");
    ts_diags_free(&d);
    ts_costmodel_free(&base);
    ts_tune_set_free(&s);
    ts_tune_set_free(&held);
    return rc;
}
