/* check.c — the checker: a YAML graph spec (src/spec.h) becomes a checked HLIR graph (src/hlir.h).
 *
 * Passes, in order: top-level keys → axes (and --dims overrides) → inputs → op names (duplicates) →
 * references (undefined tensors) → topological order (cycles) → lowering each op in that order, checking
 * its operands, attributes, shapes and dtypes → outputs. Each user error is a diagnostic at the item that
 * is wrong; a failed op marks its tensor failed so that its users are not reported again. */
#include "check.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "expand.h"
#include "util.h"

/* ---- context ----------------------------------------------------------------------------------- */

typedef enum { T_PENDING, T_DONE, T_FAILED } tensor_state;

typedef struct {
    const char *name;
    yaml_node_t *where; /* the name's node (for "first defined here") */
    yaml_node_t *entry; /* the op's mapping; NULL for inputs */
    tensor_state state;
    ts_tensor value;
    int nargs;
    int32_t args[3]; /* tensor indices of the operands, -1 when unresolved, ARG_NUMBER for a number */
    double number[3]; /* the operand's value where args[i] == ARG_NUMBER */
} tensor;

#define ARG_NUMBER (-2) /* an operand written as a number: a 0-dim constant of its tensor operands' dtype */

typedef struct {
    ts_spec *spec;
    ts_diags *d;
    ts_graph *g;
    ts_builder b;
    int ntensors, cap_tensors;
    tensor *tensors;
    /* name → tensor index, open addressing */
    int32_t *slots;
    size_t nslots;
    bool scaled;       /* the binding is ts_binding.scaled */
    int *append_line;  /* per input: the line of the append that writes it (0: none) */
    ts_ref *updated;   /* per input: the updated value (the UPDATE node) when append_line is set */
    /* softplus results with β = 1 and a threshold of 10 or more, and their operands: a tanh of one is lowered
     * as ts_t_tanh_softplus of the operand (Mish) */
    int nsoftplus, cap_softplus;
    struct softplus_call {
        ts_tensor out, arg;
    } *softplus;
} ctx;

#define ERR(c, node, hint, ...) \
    ts_error((c)->d, ts_yaml_line(node), ts_yaml_col(node), ts_yaml_len(node), (hint), __VA_ARGS__)

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int32_t find_tensor(const ctx *c, const char *name) {
    if (!c->slots) return -1;
    for (size_t i = hash_str(name) & (c->nslots - 1);; i = (i + 1) & (c->nslots - 1)) {
        int32_t t = c->slots[i];
        if (t < 0) return -1;
        if (strcmp(c->tensors[t].name, name) == 0) return t;
    }
}

static void rehash(ctx *c, size_t nslots) {
    free(c->slots);
    c->nslots = nslots;
    c->slots = ts_xmalloc(nslots * sizeof *c->slots);
    memset(c->slots, 0xff, nslots * sizeof *c->slots);
    for (int t = 0; t < c->ntensors; t++) {
        size_t i = hash_str(c->tensors[t].name) & (nslots - 1);
        while (c->slots[i] >= 0) i = (i + 1) & (nslots - 1);
        c->slots[i] = t;
    }
}

static int32_t add_tensor(ctx *c, const char *name, yaml_node_t *where, yaml_node_t *entry) {
    TS_GROW(c->tensors, c->ntensors, c->cap_tensors);
    tensor *t = &c->tensors[c->ntensors];
    memset(t, 0, sizeof *t);
    t->name = name;
    t->where = where;
    t->entry = entry;
    c->ntensors++;
    if ((size_t)c->ntensors * 2 > c->nslots) rehash(c, c->nslots ? c->nslots * 4 : 64);
    else {
        size_t i = hash_str(name) & (c->nslots - 1);
        while (c->slots[i] >= 0) i = (i + 1) & (c->nslots - 1);
        c->slots[i] = c->ntensors - 1;
    }
    return c->ntensors - 1;
}

/* ---- YAML item helpers ------------------------------------------------------------------------- */

static bool is_identifier(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
    return true;
}

/* A scalar that names something (tensor, axis): an identifier, else an error at n. */
static const char *expect_name(ctx *c, yaml_node_t *n, const char *what) {
    const char *s = ts_yaml_str(n);
    if (!s) {
        ERR(c, n, NULL, "expected %s name, got a %s", what, n->type == YAML_MAPPING_NODE ? "mapping" : "list");
        return NULL;
    }
    if (!is_identifier(s)) {
        ERR(c, n, "names are letters, digits and '_', not starting with a digit", "invalid %s name '%s'", what,
            s);
        return NULL;
    }
    return s;
}

static const char *const top_keys[] = {"graph", "axes", "inputs", "ops", "outputs"};

/* Reports keys of mapping m that are not among allowed[0..n). */
static int check_keys(ctx *c, yaml_node_t *m, const char *const *allowed, int n, const char *where) {
    int bad = 0;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = ts_yaml_node(c->spec, p->key);
        const char *ks = ts_yaml_str(k);
        int i = 0;
        while (ks && i < n && strcmp(ks, allowed[i]) != 0) i++;
        if (ks && i < n) continue;
        const char *near = ks ? ts_closest_name(ks, allowed, n) : NULL;
        char *hint = near ? ts_strfmt("did you mean '%s'?", near) : NULL;
        ERR(c, k, hint, "unknown key '%s' %s", ks ? ks : "?", where);
        free(hint);
        bad = 1;
    }
    return bad;
}

static yaml_node_t *get_seq(ctx *c, yaml_node_t *m, const char *key) {
    yaml_node_t *n = ts_yaml_get(c->spec, m, key);
    if (n && n->type != YAML_SEQUENCE_NODE) {
        ERR(c, n, "write a list: [a, b]", "'%s' must be a list", key);
        return NULL;
    }
    return n;
}

static int seq_len(yaml_node_t *n) { return (int)(n->data.sequence.items.top - n->data.sequence.items.start); }
static yaml_node_t *seq_at(ctx *c, yaml_node_t *n, int i) {
    return ts_yaml_node(c->spec, n->data.sequence.items.start[i]);
}

/* Parses a positive integer size; reports at n. */
static int parse_size(ctx *c, yaml_node_t *n, const char *what, int64_t *out) {
    const char *s = ts_yaml_str(n);
    if (!s) {
        ERR(c, n, NULL, "%s must be a positive integer", what);
        return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') {
        ERR(c, n, NULL, "%s must be a positive integer, got '%s'", what, s);
        return -1;
    }
    if (errno == ERANGE) {
        ERR(c, n, NULL, "%s '%s' is too large", what, s);
        return -1;
    }
    if (v <= 0) {
        ERR(c, n, NULL, "%s must be a positive integer, got %lld", what, v);
        return -1;
    }
    *out = v;
    return 0;
}

/* Whether s is a real number (YAML's .inf spellings and C's inf accepted, NaN refused); its value. */
static bool scan_number(const char *s, double *out) {
    const char *t = s;
    if (*t == '+' || *t == '-') t++;
    if (strcmp(t, ".inf") == 0 || strcmp(t, ".Inf") == 0 || strcmp(t, "inf") == 0) {
        *out = *s == '-' ? -INFINITY : INFINITY;
        return true;
    }
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || isnan(v)) return false;
    *out = v;
    return true;
}

/* Parses a real number; reports at n. */
static int parse_number(ctx *c, yaml_node_t *n, const char *what, double *out) {
    const char *s = ts_yaml_str(n);
    if (!s) {
        ERR(c, n, NULL, "%s must be a number", what);
        return -1;
    }
    if (!scan_number(s, out)) {
        ERR(c, n, NULL, "%s must be a number, got '%s'", what, s);
        return -1;
    }
    return 0;
}

static int lookup_axis(ctx *c, yaml_node_t *n) {
    const char *s = expect_name(c, n, "axis");
    if (!s) return -1;
    int a = ts_graph_find_axis(c->g, s);
    if (a >= 0) return a;
    const char **names = ts_xmalloc(sizeof *names * (size_t)(c->g->naxes + 1));
    for (int i = 0; i < c->g->naxes; i++) names[i] = c->g->axes[i].name;
    const char *near = ts_closest_name(s, names, c->g->naxes);
    char *hint = near ? ts_strfmt("did you mean '%s'?", near) : ts_strfmt("declare it under axes:");
    ERR(c, n, hint, "unknown axis '%s'", s);
    free(hint);
    free(names);
    return -1;
}

static int lookup_dtype(ctx *c, yaml_node_t *n, ts_dtype *out) {
    const char *s = ts_yaml_str(n);
    int t = s ? ts_dtype_lookup(s) : -1;
    if (t < 0) {
        ERR(c, n, "dtypes are fp16, bf16 and fp32", "unknown dtype '%s'", s ? s : "?");
        return -1;
    }
    *out = (ts_dtype)t;
    return 0;
}

/* A shape: a list of distinct declared axes; element count must fit in 63 bits. */
static int parse_shape(ctx *c, yaml_node_t *n, int32_t *axes, int *ndim) {
    if (!n || n->type != YAML_SEQUENCE_NODE) {
        ERR(c, n, "write the axes as a list: [m, d]", "shape must be a list of axis names");
        return -1;
    }
    int k = seq_len(n);
    if (k > TS_MAX_DIMS) {
        ERR(c, n, NULL, "shape has %d axes; at most %d are supported", k, TS_MAX_DIMS);
        return -1;
    }
    int64_t numel = 1;
    for (int i = 0; i < k; i++) {
        yaml_node_t *item = seq_at(c, n, i);
        int a = lookup_axis(c, item);
        if (a < 0) return -1;
        for (int j = 0; j < i; j++)
            if (axes[j] == a) {
                ERR(c, item, "name each dim with its own axis", "axis '%s' appears twice in the shape",
                    c->g->axes[a].name);
                return -1;
            }
        if (__builtin_mul_overflow(numel, c->g->axes[a].size, &numel) || numel > (int64_t)1 << TS_MAX_ELEMENTS_LOG2) {
            ERR(c, n, NULL, "shape has more than 2^%d elements", TS_MAX_ELEMENTS_LOG2);
            return -1;
        }
        axes[i] = (int32_t)a;
    }
    *ndim = k;
    return 0;
}

/* ---- axes and inputs --------------------------------------------------------------------------- */

static const char *const axis_keys[] = {"size", "dynamic", "typical", "like"};

static int parse_axis(ctx *c, yaml_node_t *key, yaml_node_t *val) {
    const char *name = expect_name(c, key, "axis");
    if (!name) return -1;
    if (ts_graph_find_axis(c->g, name) >= 0) {
        ERR(c, key, NULL, "duplicate axis '%s'", name);
        return -1;
    }
    int64_t size = 0, typical = 0;
    bool dynamic = false;
    if (val->type == YAML_MAPPING_NODE) {
        if (check_keys(c, val, axis_keys, 4, "in an axis (expected size, dynamic and typical, or like)")) return -1;
        yaml_node_t *like = ts_yaml_get(c->spec, val, "like");
        if (like) { /* sized like an axis declared before it */
            int l = lookup_axis(c, like);
            if (l < 0) return -1;
            int a = ts_graph_add_axis(c->g, name, 0, false, 0);
            c->g->axes[a].like = l;
            c->g->axes[a].line = ts_yaml_line(key);
            c->g->axes[a].col = ts_yaml_col(key);
            return 0;
        }
        yaml_node_t *dyn = ts_yaml_get(c->spec, val, "dynamic");
        yaml_node_t *typ = ts_yaml_get(c->spec, val, "typical");
        yaml_node_t *sz = ts_yaml_get(c->spec, val, "size");
        dynamic = dyn && ts_yaml_str(dyn) && strcmp(ts_yaml_str(dyn), "true") == 0;
        if (dynamic) {
            if (!typ) {
                ERR(c, val, "write {dynamic: true, typical: 1024}", "dynamic axis '%s' needs a typical size",
                    name);
                return -1;
            }
            if (parse_size(c, typ, "typical size", &typical) != 0) return -1;
            size = typical;
        } else if (!sz || parse_size(c, sz, "axis size", &size) != 0) {
            if (!sz) ERR(c, val, "write a size: 'd: 128' or {dynamic: true, typical: 1024}", "axis '%s' has no size", name);
            return -1;
        }
    } else if (parse_size(c, val, "axis size", &size) != 0) {
        return -1;
    }
    int a = ts_graph_add_axis(c->g, name, size, dynamic, typical);
    c->g->axes[a].line = ts_yaml_line(key);
    c->g->axes[a].col = ts_yaml_col(key);
    return 0;
}

static int parse_axes(ctx *c, yaml_node_t *axes, const ts_binding *bind) {
    if (!axes) return 0;
    if (axes->type != YAML_MAPPING_NODE) {
        ERR(c, axes, "write 'axes: {m: 1024, d: 4096}'", "'axes' must be a mapping from axis name to size");
        return -1;
    }
    int naxes = (int)(axes->data.mapping.pairs.top - axes->data.mapping.pairs.start);
    if (naxes > TS_MAX_AXES) { /* axis lookups are linear: keep a hostile file from taking minutes */
        ERR(c, axes, NULL, "graph has %d axes; the limit is %d", naxes, TS_MAX_AXES);
        return -1;
    }
    int bad = 0;
    for (yaml_node_pair_t *p = axes->data.mapping.pairs.start; p < axes->data.mapping.pairs.top; p++)
        bad |= parse_axis(c, ts_yaml_node(c->spec, p->key), ts_yaml_node(c->spec, p->value)) != 0;
    for (int i = 0; bind && i < bind->n; i++) {
        int a = ts_graph_find_axis(c->g, bind->name[i]);
        if (a < 0) {
            ts_error(c->d, 0, 0, 1, NULL, "--dims: the graph has no axis '%s'", bind->name[i]);
            bad = 1;
        } else if (c->g->axes[a].like >= 0) {
            ts_error(c->d, 0, 0, 1, NULL, "--dims: axis '%s' is sized like '%s'; set that one",
                     bind->name[i], c->g->axes[ts_axis_root(c->g, a)].name);
            bad = 1;
        } else {
            c->g->axes[a].size = bind->size[i];
        }
    }
    for (int a = 0; a < c->g->naxes; a++) { /* like: axes take their root's size and dynamism */
        const ts_axis *r = &c->g->axes[ts_axis_root(c->g, a)];
        c->g->axes[a].size = r->size;
        c->g->axes[a].dynamic = r->dynamic;
        c->g->axes[a].typical = r->typical;
    }
    return bad ? -1 : 0;
}

static const char *const input_keys[] = {"dtype", "shape", "inout"};

static int parse_input(ctx *c, yaml_node_t *key, yaml_node_t *val) {
    const char *name = expect_name(c, key, "tensor");
    if (!name) return -1;
    if (val->type != YAML_MAPPING_NODE) {
        ERR(c, val, "write '{dtype: fp16, shape: [m, d]}'", "input '%s' must be a mapping", name);
        return -1;
    }
    if (check_keys(c, val, input_keys, 3, "in an input (expected dtype, shape, inout)")) return -1;
    yaml_node_t *dt = ts_yaml_get(c->spec, val, "dtype"), *sh = ts_yaml_get(c->spec, val, "shape");
    yaml_node_t *io = ts_yaml_get(c->spec, val, "inout");
    const char *ios = io ? ts_yaml_str(io) : "false";
    if (!ios || (strcmp(ios, "true") != 0 && strcmp(ios, "false") != 0)) {
        ERR(c, io, "write inout: true for a buffer an append writes in place (a KV cache)", "inout must be true or false");
        return -1;
    }
    if (!dt || !sh) {
        ERR(c, val, "write '{dtype: fp16, shape: [m, d]}'", "input '%s' needs %s", name, dt ? "a shape" : "a dtype");
        return -1;
    }
    ts_dtype dtype;
    int32_t axes[TS_MAX_DIMS];
    int ndim;
    if (lookup_dtype(c, dt, &dtype) != 0 || parse_shape(c, sh, axes, &ndim) != 0) return -1;
    int32_t prev = find_tensor(c, name);
    if (prev >= 0) {
        char *hint = ts_strfmt("first defined at line %d", ts_yaml_line(c->tensors[prev].where));
        ERR(c, key, hint, "duplicate tensor name '%s'", name);
        free(hint);
        return -1;
    }
    TS_GROW(c->g->inputs, c->g->ninputs, c->g->cap_inputs);
    ts_input *in = &c->g->inputs[c->g->ninputs];
    in->name = ts_strdup(name);
    in->line = ts_yaml_line(key);
    in->col = ts_yaml_col(key);
    in->inout = strcmp(ios, "true") == 0;
    int32_t t = add_tensor(c, name, key, NULL);
    c->b.origin = t;
    c->tensors[t].value = ts_t_input(&c->b, c->g->ninputs, axes, ndim, dtype);
    in->node = c->tensors[t].value.ref.node;
    c->tensors[t].state = T_DONE;
    c->g->ninputs++;
    return 0;
}

static int parse_inputs(ctx *c, yaml_node_t *inputs) {
    if (!inputs) return 0;
    if (inputs->type != YAML_MAPPING_NODE) {
        ERR(c, inputs, "write 'inputs: {X: {dtype: fp16, shape: [m, d]}}'", "'inputs' must be a mapping");
        return -1;
    }
    int ninputs = (int)(inputs->data.mapping.pairs.top - inputs->data.mapping.pairs.start);
    if (ninputs > TS_MAX_OPS) {
        ERR(c, inputs, "split the graph into several files", "graph has %d inputs; the limit is %d", ninputs,
            TS_MAX_OPS);
        return -1;
    }
    int bad = 0;
    for (yaml_node_pair_t *p = inputs->data.mapping.pairs.start; p < inputs->data.mapping.pairs.top; p++)
        bad |= parse_input(c, ts_yaml_node(c->spec, p->key), ts_yaml_node(c->spec, p->value)) != 0;
    return bad ? -1 : 0;
}

/* ---- the op table ------------------------------------------------------------------------------ */

typedef struct op_call op_call;
typedef int (*lower_fn)(ctx *c, op_call *o);

typedef struct {
    const char *name;
    int min_args, max_args;
    const char *attrs[4]; /* attribute keys this op takes */
    lower_fn lower;
    int prim;     /* primitive op for the generic lowerings, or -1 */
    bool numbers; /* operands may be written as numbers (elementwise ops) */
} op_def;

struct op_call {
    const op_def *def;
    yaml_node_t *entry, *op_node, *args_node;
    int nargs;
    ts_tensor args[3];
    yaml_node_t *arg_nodes[3];
    ts_tensor result;
};

static yaml_node_t *attr(ctx *c, op_call *o, const char *key) { return ts_yaml_get(c->spec, o->entry, key); }

static yaml_node_t *require_attr(ctx *c, op_call *o, const char *key, const char *example) {
    yaml_node_t *n = attr(c, o, key);
    if (!n) {
        char *hint = ts_strfmt("add %s", example);
        ERR(c, o->op_node, hint, "%s needs '%s'", o->def->name, key);
        free(hint);
    }
    return n;
}

static const char *axis_name(ctx *c, int32_t a) { return c->g->axes[a].name; }

/* "[m, d]" for messages */
static char *dims_str(ctx *c, const ts_view *v) {
    char buf[512];
    size_t n = 0;
    n += (size_t)snprintf(buf + n, sizeof buf - n, "[");
    for (int i = 0; i < v->ndim && n < sizeof buf - 64; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "", axis_name(c, v->axis[i]));
    snprintf(buf + n, sizeof buf - n, "]");
    return ts_strdup(buf);
}

/* The operand's axis `key` attribute, which the operand must have. */
static int operand_axis(ctx *c, op_call *o, int arg, const char *key, int32_t *axis) {
    yaml_node_t *n = require_attr(c, o, key, "the axis to work over");
    if (!n) return -1;
    int a = lookup_axis(c, n);
    if (a < 0) return -1;
    if (ts_view_find(&o->args[arg].ref.view, a) < 0) {
        char *dims = dims_str(c, &o->args[arg].ref.view);
        ERR(c, n, NULL, "%s over axis '%s', but '%s' has axes %s", o->def->name, axis_name(c, a),
            ts_yaml_str(o->arg_nodes[arg]), dims);
        free(dims);
        return -1;
    }
    *axis = a;
    return 0;
}

static bool axes_subset(const ts_view *a, const ts_view *b) {
    for (int i = 0; i < a->ndim; i++)
        if (ts_view_find(b, a->axis[i]) < 0) return false;
    return true;
}

/* Elementwise operands: the same dtype (0-dim tensors adapt), and each axis set within the largest. */
static int check_elementwise(ctx *c, op_call *o) {
    int big = 0;
    for (int i = 1; i < o->nargs; i++)
        if (o->args[i].ref.view.ndim > o->args[big].ref.view.ndim) big = i;
    for (int i = 0; i < o->nargs; i++) {
        const ts_view *v = &o->args[i].ref.view, *w = &o->args[big].ref.view;
        if (!axes_subset(v, w)) {
            char *a = dims_str(c, w), *b = dims_str(c, v);
            ERR(c, o->arg_nodes[i], "use expand to broadcast explicitly, or matmul to contract",
                "shape mismatch in %s: '%s' has axes %s, '%s' has axes %s", o->def->name,
                ts_yaml_str(o->arg_nodes[big]), a, ts_yaml_str(o->arg_nodes[i]), b);
            free(a);
            free(b);
            return -1;
        }
    }
    int first_typed = -1;
    for (int i = (o->def->prim == TS_OP_WHERE); i < o->nargs; i++) {
        if (o->args[i].ref.view.ndim == 0) continue;
        if (first_typed < 0) first_typed = i;
        else if (o->args[i].dtype != o->args[first_typed].dtype) {
            char *hint = ts_strfmt("cast one operand: {op: cast, args: [%s], dtype: %s}",
                                   ts_yaml_str(o->arg_nodes[i]), ts_dtype_name(o->args[first_typed].dtype));
            ERR(c, o->arg_nodes[i], hint, "dtype mismatch in %s: '%s' is %s, '%s' is %s", o->def->name,
                ts_yaml_str(o->arg_nodes[first_typed]), ts_dtype_name(o->args[first_typed].dtype),
                ts_yaml_str(o->arg_nodes[i]), ts_dtype_name(o->args[i].dtype));
            free(hint);
            return -1;
        }
    }
    return 0;
}

/* ---- lowerings --------------------------------------------------------------------------------- */

static int lower_elementwise(ctx *c, op_call *o) {
    if (check_elementwise(c, o) != 0) return -1;
    if (o->nargs == 1) o->result = ts_t_unary(&c->b, (ts_op)o->def->prim, o->args[0]);
    else if (o->nargs == 2) {
        ts_tensor x = o->args[0], y = o->args[1];
        if (x.ref.view.ndim < y.ref.view.ndim) { /* the result takes the larger operand's order */
            if (o->def->prim == TS_OP_LESS_THAN) {
                o->result = ts_t_binary(&c->b, TS_OP_LESS_THAN, x, y); /* order matters; keep it */
                return 0;
            }
            x = o->args[1], y = o->args[0];
        }
        o->result = ts_t_binary(&c->b, (ts_op)o->def->prim, x, y);
    } else {
        o->result = ts_t_where(&c->b, o->args[0], o->args[1], o->args[2]);
    }
    return 0;
}

/* The operand of the softplus (β = 1, threshold ≥ 10) whose result x is — as it came out, not a view of it (a
 * permute in between keeps the two composites); NULL when x is none. */
static const ts_tensor *softplus_operand(const ctx *c, ts_tensor x) {
    for (int i = 0; i < c->nsoftplus; i++) {
        const ts_tensor *out = &c->softplus[i].out;
        if (out->ref.node == x.ref.node && out->dtype == x.dtype && ts_view_equal(&out->ref.view, &x.ref.view))
            return &c->softplus[i].arg;
    }
    return NULL;
}

static int lower_unary_composite(ctx *c, op_call *o) {
    const char *n = o->def->name;
    ts_tensor x = o->args[0];
    if (strcmp(n, "exp") == 0) o->result = ts_t_exp(&c->b, x);
    else if (strcmp(n, "rsqrt") == 0) o->result = ts_t_rsqrt(&c->b, x);
    else if (strcmp(n, "tanh") == 0) {
        const ts_tensor *sp = softplus_operand(c, x);
        o->result = sp ? ts_t_tanh_softplus(&c->b, *sp) : ts_t_tanh(&c->b, x);
    }
    else if (strcmp(n, "silu") == 0) o->result = ts_t_silu(&c->b, x);
    else if (strcmp(n, "sigmoid") == 0) o->result = ts_t_sigmoid(&c->b, x);
    else if (strcmp(n, "relu") == 0) o->result = ts_t_relu(&c->b, x);
    else if (strcmp(n, "abs") == 0) o->result = ts_t_abs(&c->b, x);
    else if (strcmp(n, "log") == 0) o->result = ts_t_log(&c->b, x);
    else o->result = ts_t_copy(&c->b, x);
    return 0;
}

static int lower_binary_composite(ctx *c, op_call *o) {
    if (check_elementwise(c, o) != 0) return -1;
    const char *n = o->def->name;
    ts_tensor x = o->args[0], y = o->args[1];
    if (strcmp(n, "sub") == 0) o->result = ts_t_sub(&c->b, x, y);
    else if (strcmp(n, "div") == 0) o->result = ts_t_div(&c->b, x, y);
    else o->result = x.ref.view.ndim < y.ref.view.ndim ? ts_t_min(&c->b, y, x) : ts_t_min(&c->b, x, y);
    return 0;
}

static int lower_reduce(ctx *c, op_call *o) {
    int32_t a;
    if (operand_axis(c, o, 0, "axis", &a) != 0) return -1;
    const char *n = o->def->name;
    if (strcmp(n, "softmax") == 0) o->result = ts_t_softmax(&c->b, o->args[0], a);
    else if (strcmp(n, "mean") == 0) o->result = ts_t_mean(&c->b, o->args[0], a);
    else if (strcmp(n, "logsumexp") == 0) o->result = ts_t_logsumexp(&c->b, o->args[0], a);
    else o->result = ts_t_reduce(&c->b, (ts_op)o->def->prim, o->args[0], a);
    return 0;
}

/* A norm's gain and bias (operands 1..): exactly the normalised axis, the dtype of x. */
static int check_norm_params(ctx *c, op_call *o, int32_t axis) {
    static const char *const what[] = {"", "gain", "bias"};
    for (int i = 1; i < o->nargs; i++) {
        const ts_view *gv = &o->args[i].ref.view;
        if (gv->ndim != 1 || gv->axis[0] != axis) {
            char *dims = dims_str(c, gv);
            ERR(c, o->arg_nodes[i], NULL, "%s %s must have exactly the normalised axis [%s], got %s", o->def->name,
                what[i], axis_name(c, axis), dims);
            free(dims);
            return -1;
        }
    }
    return check_elementwise(c, o);
}

static int lower_rmsnorm(ctx *c, op_call *o) {
    int32_t a;
    double eps = 1e-6;
    if (operand_axis(c, o, 0, "axis", &a) != 0) return -1;
    yaml_node_t *e = attr(c, o, "eps");
    if (e && parse_number(c, e, "eps", &eps) != 0) return -1;
    if (o->nargs == 2 && check_norm_params(c, o, a) != 0) return -1;
    o->result = ts_t_rmsnorm(&c->b, o->args[0], o->nargs == 2 ? &o->args[1] : NULL, a, eps);
    return 0;
}

/* The number under `key`, or `dflt` when the op has none. */
static int optional_number(ctx *c, op_call *o, const char *key, double dflt, double *out) {
    yaml_node_t *n = attr(c, o, key);
    *out = dflt;
    return n ? parse_number(c, n, key, out) : 0;
}

static int lower_layernorm(ctx *c, op_call *o) {
    int32_t a;
    double eps;
    if (operand_axis(c, o, 0, "axis", &a) != 0 || optional_number(c, o, "eps", 1e-5, &eps) != 0) return -1;
    if (o->nargs > 1 && check_norm_params(c, o, a) != 0) return -1;
    o->result = ts_t_layernorm(&c->b, o->args[0], o->nargs > 1 ? &o->args[1] : NULL, o->nargs > 2 ? &o->args[2] : NULL,
                               a, eps);
    return 0;
}

/* gelu: approximate: none (default, the erf form, as PyTorch) or tanh */
static int lower_gelu(ctx *c, op_call *o) {
    yaml_node_t *n = attr(c, o, "approximate");
    const char *s = n ? ts_yaml_str(n) : "none";
    if (!s || (strcmp(s, "none") != 0 && strcmp(s, "tanh") != 0)) {
        ERR(c, n, "write approximate: none (the erf form) or approximate: tanh",
            "gelu approximate must be none or tanh, got '%s'", s ? s : "a collection");
        return -1;
    }
    o->result = strcmp(s, "tanh") == 0 ? ts_t_gelu_tanh(&c->b, o->args[0]) : ts_t_gelu(&c->b, o->args[0]);
    return 0;
}

static int lower_leaky_relu(ctx *c, op_call *o) {
    double slope;
    if (optional_number(c, o, "slope", 0.01, &slope) != 0) return -1;
    o->result = ts_t_leaky_relu(&c->b, o->args[0], slope);
    return 0;
}

static int lower_softplus(ctx *c, op_call *o) {
    double beta, threshold;
    if (optional_number(c, o, "beta", 1, &beta) != 0 || optional_number(c, o, "threshold", 20, &threshold) != 0)
        return -1;
    if (beta <= 0 || isinf(beta)) {
        ERR(c, attr(c, o, "beta"), NULL, "softplus beta must be positive and finite, got %g", beta);
        return -1;
    }
    o->result = ts_t_softplus(&c->b, o->args[0], beta, threshold);
    if (beta == 1 && threshold >= 10) {
        TS_GROW(c->softplus, c->nsoftplus, c->cap_softplus);
        c->softplus[c->nsoftplus++] = (struct softplus_call){o->result, o->args[0]};
    }
    return 0;
}

static int lower_clamp(ctx *c, op_call *o) {
    yaml_node_t *ln = attr(c, o, "lo"), *hn = attr(c, o, "hi");
    double lo, hi;
    if (!ln && !hn) {
        ERR(c, o->op_node, "add lo: <a number>, hi: <a number>, or both", "clamp needs 'lo' or 'hi'");
        return -1;
    }
    if ((ln && parse_number(c, ln, "lo", &lo) != 0) || (hn && parse_number(c, hn, "hi", &hi) != 0)) return -1;
    if (ln && hn && lo > hi) {
        ERR(c, hn, NULL, "clamp hi (%g) is below lo (%g)", hi, lo);
        return -1;
    }
    o->result = ts_t_clamp(&c->b, o->args[0], ln ? &lo : NULL, hn ? &hi : NULL);
    return 0;
}

static int lower_var(ctx *c, op_call *o) {
    int32_t a;
    double corr;
    if (operand_axis(c, o, 0, "axis", &a) != 0 || optional_number(c, o, "correction", 1, &corr) != 0) return -1;
    int64_t n = c->g->axes[a].size;
    if (corr < 0 || corr != floor(corr) || corr >= (double)n) {
        ERR(c, attr(c, o, "correction"), "correction: 1 divides by n - 1, correction: 0 by n",
            "var correction must be an integer from 0 to %lld (axis '%s' has size %lld), got %g", (long long)n - 1,
            axis_name(c, a), (long long)n, corr);
        return -1;
    }
    o->result = ts_t_var(&c->b, o->args[0], a, corr);
    return 0;
}

static int lower_pow(ctx *c, op_call *o) {
    double e;
    yaml_node_t *n = require_attr(c, o, "exponent", "exponent: <an integer>");
    if (!n || parse_number(c, n, "exponent", &e) != 0) return -1;
    if (!(fabs(e) == 0.5 || (e == floor(e) && e != 0 && fabs(e) <= 16))) {
        ERR(c, n, "write x·x·... with mul, or exp(e·log x) for other exponents",
            "pow exponent must be a non-zero integer from -16 to 16, or 0.5 or -0.5, got %g", e);
        return -1;
    }
    o->result = ts_t_pow(&c->b, o->args[0], e);
    return 0;
}

/* matmul over: k (both operands have k) or over: [k_a, k_b] (the operands name it differently). */
static int lower_matmul(ctx *c, op_call *o) {
    yaml_node_t *over = require_attr(c, o, "over", "over: <the contraction axis>");
    if (!over) return -1;
    yaml_node_t *names[2] = {over, over};
    if (over->type == YAML_SEQUENCE_NODE) {
        if (seq_len(over) != 2) {
            ERR(c, over, "write over: k, or over: [k_of_first, k_of_second]", "'over' lists %d axes; expected 1 or 2",
                seq_len(over));
            return -1;
        }
        names[0] = seq_at(c, over, 0);
        names[1] = seq_at(c, over, 1);
    }
    int32_t ax[2];
    for (int i = 0; i < 2; i++) {
        int a = lookup_axis(c, names[i]);
        if (a < 0) return -1;
        if (ts_view_find(&o->args[i].ref.view, a) < 0) {
            char *dims = dims_str(c, &o->args[i].ref.view);
            ERR(c, names[i], "both operands must have the contraction axis",
                "matmul contracts over '%s', but operand '%s' has axes %s", axis_name(c, a),
                ts_yaml_str(o->arg_nodes[i]), dims);
            free(dims);
            return -1;
        }
        ax[i] = (int32_t)a;
    }
    if (c->g->axes[ax[0]].size != c->g->axes[ax[1]].size) {
        ERR(c, over, NULL, "matmul contraction axes differ in size: '%s' is %lld, '%s' is %lld",
            axis_name(c, ax[0]), (long long)c->g->axes[ax[0]].size, axis_name(c, ax[1]),
            (long long)c->g->axes[ax[1]].size);
        return -1;
    }
    ts_tensor y = o->args[1];
    if (ax[1] != ax[0]) {
        if (ts_view_find(&y.ref.view, ax[0]) >= 0) {
            ERR(c, names[1], NULL, "operand '%s' already has an axis '%s'", ts_yaml_str(o->arg_nodes[1]),
                axis_name(c, ax[0]));
            return -1;
        }
        y.ref.view.axis[ts_view_find(&y.ref.view, ax[1])] = ax[0]; /* rename k_b to k_a */
    }
    if (o->args[0].dtype != y.dtype) {
        ERR(c, o->arg_nodes[1], "cast one operand", "dtype mismatch in matmul: %s and %s",
            ts_dtype_name(o->args[0].dtype), ts_dtype_name(y.dtype));
        return -1;
    }
    o->result = ts_t_matmul(&c->b, o->args[0], y, ax[0]);
    return 0;
}

static int lower_scale(ctx *c, op_call *o) {
    double v;
    yaml_node_t *n = require_attr(c, o, "by", "by: <a number>");
    if (!n || parse_number(c, n, "scale factor", &v) != 0) return -1;
    o->result = ts_t_scale(&c->b, o->args[0], v);
    return 0;
}

static int optional_dtype(ctx *c, op_call *o, ts_dtype *t) {
    yaml_node_t *n = attr(c, o, "dtype");
    *t = TS_FP32;
    return n ? lookup_dtype(c, n, t) : 0;
}

static int lower_constant(ctx *c, op_call *o) {
    double v;
    ts_dtype t;
    yaml_node_t *n = require_attr(c, o, "value", "value: <a number>");
    if (!n || parse_number(c, n, "constant value", &v) != 0 || optional_dtype(c, o, &t) != 0) return -1;
    o->result = ts_t_constant(&c->b, v, t);
    return 0;
}

static int lower_iota(ctx *c, op_call *o) {
    ts_dtype t;
    yaml_node_t *n = require_attr(c, o, "axis", "axis: <the axis to count along>");
    if (!n) return -1;
    int a = lookup_axis(c, n);
    if (a < 0 || optional_dtype(c, o, &t) != 0) return -1;
    o->result = ts_t_iota(&c->b, a, t);
    return 0;
}

static int lower_cast(ctx *c, op_call *o) {
    ts_dtype t;
    yaml_node_t *n = require_attr(c, o, "dtype", "dtype: fp32");
    if (!n || lookup_dtype(c, n, &t) != 0) return -1;
    o->result = ts_t_cast(&c->b, o->args[0], t);
    return 0;
}

/* ---- view ops: permute, expand, reshape, slice -------------------------------------------------- */

/* Reads a list of distinct axes under `key`. */
static int axis_list(ctx *c, op_call *o, const char *key, int32_t *axes, int *n) {
    yaml_node_t *l = require_attr(c, o, key, "a list of axes");
    if (!l) return -1;
    return parse_shape(c, l, axes, n);
}

static int lower_permute(ctx *c, op_call *o) {
    int32_t order[TS_MAX_DIMS];
    int n;
    if (axis_list(c, o, "order", order, &n) != 0) return -1;
    ts_view v = o->args[0].ref.view;
    ts_view want = {.ndim = n};
    memcpy(want.axis, order, sizeof(int32_t) * (size_t)n);
    if (n != v.ndim || !axes_subset(&v, &want)) {
        char *dims = dims_str(c, &v);
        ERR(c, attr(c, o, "order"), NULL, "permute order must list exactly the axes of '%s': %s",
            ts_yaml_str(o->arg_nodes[0]), dims);
        free(dims);
        return -1;
    }
    o->result = o->args[0];
    ts_view_permute(&o->result.ref.view, order, n);
    return 0;
}

static int lower_expand(ctx *c, op_call *o) {
    int32_t shape[TS_MAX_DIMS];
    int n;
    if (axis_list(c, o, "shape", shape, &n) != 0) return -1;
    ts_view v = o->args[0].ref.view, want = {.ndim = n};
    memcpy(want.axis, shape, sizeof(int32_t) * (size_t)n);
    if (!axes_subset(&v, &want)) {
        char *dims = dims_str(c, &v);
        ERR(c, attr(c, o, "shape"), NULL, "expand shape must include every axis of '%s': %s",
            ts_yaml_str(o->arg_nodes[0]), dims);
        free(dims);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (ts_view_find(&v, shape[i]) < 0) ts_view_expand(&v, v.ndim, shape[i], c->g->axes[shape[i]].size);
    ts_view_permute(&v, shape, n);
    o->result = o->args[0];
    o->result.ref.view = v;
    return 0;
}

/* Groups of consecutive dims with equal products pair the source dims with the target's. */
static int reshape_view(ctx *c, op_call *o, const int32_t *shape, int n, yaml_node_t *where) {
    ts_tensor x = o->args[0];
    ts_view v = x.ref.view;
    int si = 0, ti = 0, out = 0; /* out: position of the next target dim in v */
    while (si < x.ref.view.ndim || ti < n) {
        int s0 = si, t0 = ti;
        int64_t sp = si < x.ref.view.ndim ? x.ref.view.size[si++] : 1;
        int64_t tp = ti < n ? c->g->axes[shape[ti++]].size : 1;
        while (sp != tp && (si < x.ref.view.ndim || ti < n)) {
            if (sp < tp && si < x.ref.view.ndim) sp *= x.ref.view.size[si++];
            else if (ti < n) tp *= c->g->axes[shape[ti++]].size;
            else break;
        }
        if (sp != tp) break;
        int ns = si - s0, nt = ti - t0;
        for (int i = s0; i < si && (ns > 1 || nt > 1); i++)
            if (c->g->axes[x.ref.view.axis[i]].dynamic) {
                ERR(c, where, NULL, "cannot split or merge dynamic axis '%s'", axis_name(c, x.ref.view.axis[i]));
                return -1;
            }
        for (int i = t0; i < ti && (ns > 1 || nt > 1); i++)
            if (c->g->axes[shape[i]].dynamic) {
                ERR(c, where, NULL, "cannot split or merge dynamic axis '%s'", axis_name(c, shape[i]));
                return -1;
            }
        if (ns == 1 && nt == 1 && x.ref.view.axis[s0] != shape[t0] &&
            (c->g->axes[shape[t0]].dynamic || c->g->axes[x.ref.view.axis[s0]].dynamic) &&
            ts_axis_root(c->g, shape[t0]) != ts_axis_root(c->g, x.ref.view.axis[s0])) {
            ERR(c, where, "declare the new axis as {like: <the old one>}",
                "cannot rename dynamic axis '%s' to '%s': their sizes are not tied",
                axis_name(c, x.ref.view.axis[s0]), axis_name(c, shape[t0]));
            return -1;
        }
        if (ns > 1 && !ts_view_merge(&v, out, ns, shape[t0])) {
            o->args[0] = ts_t_copy(&c->b, (ts_tensor){.ref = {.node = x.ref.node, .view = v}, .dtype = x.dtype});
            v = o->args[0].ref.view; /* materialise, then merge the now contiguous dims */
            TS_ASSERT(ts_view_merge(&v, out, ns, shape[t0]));
            x.ref.node = o->args[0].ref.node;
        } else if (ns == 0) {
            ts_view_expand(&v, out, shape[t0], 1); /* a new size-1 axis */
            ns = 1;
        }
        if (nt > 1) {
            int64_t sizes[TS_MAX_DIMS];
            for (int i = 0; i < nt; i++) sizes[i] = c->g->axes[shape[t0 + i]].size;
            ts_view_split(&v, out, shape + t0, sizes, nt);
        } else if (nt == 1) {
            v.axis[out] = shape[t0];
        } else {
            /* a size-1 source dim with no target: drop it */
            for (int i = out; i + 1 < v.ndim; i++) {
                v.axis[i] = v.axis[i + 1];
                v.size[i] = v.size[i + 1];
                v.stride[i] = v.stride[i + 1];
            }
            v.ndim--;
        }
        out += nt;
    }
    if (si < x.ref.view.ndim || ti < n || out != n) {
        char *dims = dims_str(c, &x.ref.view);
        ERR(c, where, "the products of consecutive axis sizes must match", "cannot reshape '%s' %s to this shape",
            ts_yaml_str(o->arg_nodes[0]), dims);
        free(dims);
        return -1;
    }
    o->result = (ts_tensor){.ref = {.node = x.ref.node, .view = v}, .dtype = x.dtype};
    return 0;
}

static int lower_reshape(ctx *c, op_call *o) {
    int32_t shape[TS_MAX_DIMS];
    int n;
    if (axis_list(c, o, "shape", shape, &n) != 0) return -1;
    int64_t a = ts_view_numel(&o->args[0].ref.view), b = 1;
    for (int i = 0; i < n; i++) b *= c->g->axes[shape[i]].size;
    if (a != b) {
        ERR(c, attr(c, o, "shape"), NULL, "reshape changes the element count: '%s' has %lld, the shape %lld",
            ts_yaml_str(o->arg_nodes[0]), (long long)a, (long long)b);
        return -1;
    }
    return reshape_view(c, o, shape, n, attr(c, o, "shape"));
}

/* slice: {axis: d, start: s, step: k, as: e} — index i of e is s + i·k of d; e's size is declared. */
static int lower_slice(ctx *c, op_call *o) {
    int32_t from;
    if (operand_axis(c, o, 0, "axis", &from) != 0) return -1;
    yaml_node_t *as = require_attr(c, o, "as", "as: <the new axis, declared with its size>");
    if (!as) return -1;
    int to = lookup_axis(c, as);
    if (to < 0) return -1;
    double start = 0, step = 1;
    yaml_node_t *sn = attr(c, o, "start"), *kn = attr(c, o, "step");
    if ((sn && parse_number(c, sn, "start", &start) != 0) || (kn && parse_number(c, kn, "step", &step) != 0))
        return -1;
    if (start != floor(start) || step != floor(step) || step == 0 || fabs(start) > 1e15 || fabs(step) > 1e15) {
        ERR(c, sn && start != floor(start) ? sn : kn ? kn : o->op_node, NULL, "slice start and step must be integers, step not 0");
        return -1;
    }
    if (c->g->axes[from].dynamic || c->g->axes[to].dynamic) {
        ERR(c, as, NULL, "cannot slice dynamic axis '%s'", axis_name(c, c->g->axes[from].dynamic ? from : to));
        return -1;
    }
    int64_t n = c->g->axes[from].size, size = c->g->axes[to].size;
    int64_t first = (int64_t)start, last;
    /* (size - 1)·step can overflow int64 for huge declared sizes: that is out of range too. */
    bool overflow = __builtin_mul_overflow(size - 1, (int64_t)step, &last) || __builtin_add_overflow(last, first, &last);
    if (overflow) {
        ERR(c, as, NULL, "slice out of range: %lld elements of step %lld do not fit in axis '%s' (size %lld)",
            (long long)size, (long long)step, axis_name(c, from), (long long)n);
        return -1;
    }
    if (first < 0 || first >= n || last < 0 || last >= n) {
        ERR(c, as, NULL, "slice out of range: indices %lld..%lld of axis '%s' (size %lld)", (long long)first,
            (long long)last, axis_name(c, from), (long long)n);
        return -1;
    }
    if (to != from && ts_view_find(&o->args[0].ref.view, to) >= 0) {
        ERR(c, as, NULL, "'%s' already has an axis '%s'", ts_yaml_str(o->arg_nodes[0]), axis_name(c, to));
        return -1;
    }
    o->result = o->args[0];
    ts_view_slice(&o->result.ref.view, ts_view_find(&o->result.ref.view, from), to, first, (int64_t)step, size);
    return 0;
}

/* A positive integer attribute `key` (default 1 when absent) in *v; -1 (reported) otherwise. */
static int positive_int_attr(ctx *c, op_call *o, const char *key, int64_t *v) {
    yaml_node_t *n = attr(c, o, key);
    double x = 1;
    if (n && parse_number(c, n, key, &x) != 0) return -1;
    if (x != floor(x) || x < 1 || x > 1e15) {
        ERR(c, n, NULL, "%s must be a positive integer", key);
        return -1;
    }
    *v = (int64_t)x;
    return 0;
}

/* window: {axis: d, as: [o, k], step: s, dilation: r} — d seen as sliding windows (PyTorch's unfold): index
 * (i, j) of the new axes o and k (declared with their sizes) is element i·s + j·r of d. A view; the windows may
 * overlap. A convolution is a contraction over the channels and the taps of such views. */
static int lower_window(ctx *c, op_call *o) {
    int32_t from, as[TS_MAX_DIMS];
    int n;
    if (operand_axis(c, o, 0, "axis", &from) != 0 || axis_list(c, o, "as", as, &n) != 0) return -1;
    yaml_node_t *as_node = attr(c, o, "as");
    if (n != 2) {
        ERR(c, as_node, "as: [windows, taps]", "window needs two new axes, the windows' and the taps'");
        return -1;
    }
    int64_t step, dilation;
    if (positive_int_attr(c, o, "step", &step) != 0 || positive_int_attr(c, o, "dilation", &dilation) != 0)
        return -1;
    const ts_view *v = &o->args[0].ref.view;
    for (int i = 0; i < 2; i++)
        if (ts_view_find(v, as[i]) >= 0) {
            ERR(c, as_node, NULL, "'%s' already has an axis '%s'", ts_yaml_str(o->arg_nodes[0]), axis_name(c, as[i]));
            return -1;
        }
    for (int i = 0; i < 3; i++) {
        int32_t a = i == 2 ? from : as[i];
        if (c->g->axes[a].dynamic) {
            ERR(c, i == 2 ? attr(c, o, "axis") : as_node, NULL, "cannot window dynamic axis '%s'", axis_name(c, a));
            return -1;
        }
    }
    if (v->ndim >= TS_MAX_DIMS) {
        ERR(c, o->op_node, NULL, "the windows of '%s' would have more than %d axes", ts_yaml_str(o->arg_nodes[0]),
            TS_MAX_DIMS);
        return -1;
    }
    int64_t size = c->g->axes[from].size, windows = c->g->axes[as[0]].size, taps = c->g->axes[as[1]].size, a, b;
    bool overflow = __builtin_mul_overflow(windows - 1, step, &a) || __builtin_mul_overflow(taps - 1, dilation, &b) ||
                    __builtin_add_overflow(a, b, &a);
    if (overflow || a >= size) {
        ERR(c, as_node, "windows = (size - dilation·(taps - 1) - 1) / step + 1, rounded down",
            "window out of range: %lld windows of step %lld and %lld taps of dilation %lld need %s%lld elements of axis "
            "'%s' (size %lld)", (long long)windows, (long long)step, (long long)taps, (long long)dilation,
            overflow ? "more than " : "", overflow ? (long long)INT64_MAX : (long long)a + 1, axis_name(c, from),
            (long long)size);
        return -1;
    }
    o->result = o->args[0];
    ts_view_window(&o->result.ref.view, ts_view_find(&o->result.ref.view, from), as[0], windows, step, as[1], taps,
                   dilation);
    return 0;
}

/* The inout input that operand `arg` is, seen whole; -1 (reported) when it is not one. */
static int inout_operand(ctx *c, op_call *o, int arg) {
    const ts_ref *r = &o->args[arg].ref;
    const ts_node *n = &c->g->nodes[r->node];
    bool plain = n->op == TS_OP_INPUT && ts_ref_is_whole(c->g, r);
    if (!plain || !c->g->inputs[n->input].inout) {
        ERR(c, o->arg_nodes[arg], "declare the cache under inputs: with inout: true, and append to it unchanged",
            "append writes into '%s' in place, which must be an input declared inout", ts_yaml_str(o->arg_nodes[arg]));
        return -1;
    }
    return n->input;
}

/* The block append's `rows` axis: an axis of v in the place of the cache's w, no longer than s. */
static int append_rows_axis(ctx *c, op_call *o, yaml_node_t *rn, int32_t w, int32_t s) {
    int rows = lookup_axis(c, rn);
    if (rows < 0) return -1;
    const ts_view *cv = &o->args[0].ref.view, *vv = &o->args[1].ref.view;
    if (rows == w || rows == s || ts_view_find(cv, rows) >= 0 || ts_view_find(vv, rows) < 0) {
        ERR(c, rn, "rows: names the appended value's axis of new positions, one the cache does not have",
            "'%s' is not an axis of the appended value alone", axis_name(c, rows));
        return -1;
    }
    if (!c->scaled && c->g->axes[rows].size > c->g->axes[s].size) {
        ERR(c, rn, NULL, "the block of %lld rows ('%s') is longer than the valid length '%s' (%lld)",
            (long long)c->g->axes[rows].size, axis_name(c, rows), axis_name(c, s), (long long)c->g->axes[s].size);
        return -1;
    }
    return rows;
}

/* append(cache, v, axis: w, as: s): the cache (an inout input) with v written at index size(s) - 1 of its
 * axis w, seen over the first size(s) positions of w as the new axis s (a KV cache and its valid length:
 * the new token's row, then everything up to it). With rows: n, v has the axis n in w's place and its rows
 * are written at size(s) - size(n) .. size(s) - 1 (a prefill chunk of n tokens). The write happens in the
 * cache's own buffer. */
static int lower_append(ctx *c, op_call *o) {
    int in = inout_operand(c, o, 0);
    int32_t w;
    if (in < 0 || operand_axis(c, o, 0, "axis", &w) != 0) return -1;
    yaml_node_t *as = require_attr(c, o, "as", "as: <the valid length's axis: the cache's first positions>");
    int s = as ? lookup_axis(c, as) : -1;
    if (s < 0) return -1;
    yaml_node_t *rn = attr(c, o, "rows");
    int rows = rn ? append_rows_axis(c, o, rn, w, s) : -1;
    if (rn && rows < 0) return -1;
    if (c->append_line[in]) {
        char *hint = ts_strfmt("it is appended to at line %d; an input is written by one append", c->append_line[in]);
        ERR(c, o->arg_nodes[0], hint, "'%s' is appended to twice", ts_yaml_str(o->arg_nodes[0]));
        free(hint);
        return -1;
    }
    const ts_view *cv = &o->args[0].ref.view, *vv = &o->args[1].ref.view;
    if (ts_view_find(cv, s) >= 0) {
        ERR(c, as, "name a new axis for the valid length, e.g. {s: {dynamic: true, typical: 4096}}",
            "'%s' already has an axis '%s'", ts_yaml_str(o->arg_nodes[0]), axis_name(c, s));
        return -1;
    }
    if (!c->scaled && c->g->axes[s].size > c->g->axes[w].size) {
        ERR(c, as, NULL, "the valid length '%s' (%lld) exceeds the cache's axis '%s' (%lld)", axis_name(c, s),
            (long long)c->g->axes[s].size, axis_name(c, w), (long long)c->g->axes[w].size);
        return -1;
    }
    bool fits = vv->ndim == cv->ndim - (rows < 0) && ts_view_find(vv, w) < 0;
    for (int d = 0; d < vv->ndim && fits; d++) fits = vv->axis[d] == rows || ts_view_find(cv, vv->axis[d]) >= 0;
    if (!fits) {
        char *want = dims_str(c, cv), *got = dims_str(c, vv);
        if (rows < 0)
            ERR(c, o->arg_nodes[1], "a block of new rows: name its axis with rows:",
                "the appended value must have the axes of %s without '%s', got %s", want, axis_name(c, w), got);
        else
            ERR(c, o->arg_nodes[1], NULL, "the appended value must have the axes of %s with '%s' for '%s', got %s",
                want, axis_name(c, rows), axis_name(c, w), got);
        free(want), free(got);
        return -1;
    }
    if (o->args[1].dtype != o->args[0].dtype) {
        ERR(c, o->arg_nodes[1], "add {op: cast}", "append of %s into a %s cache", ts_dtype_name(o->args[1].dtype),
            ts_dtype_name(o->args[0].dtype));
        return -1;
    }
    ts_tensor u = ts_t_update(&c->b, o->args[0], o->args[1], w, s, rows);
    c->append_line[in] = ts_yaml_line(o->op_node);
    c->updated[in] = u.ref;
    o->result = u;
    ts_view_slice(&o->result.ref.view, ts_view_find(&o->result.ref.view, w), s, 0, 1, c->g->axes[s].size);
    return 0;
}

/* An inout input is read only by the one append that writes it (any other reader could see the cache
 * before or after the write, depending on kernel order), and is written by one. */
static int check_inout(ctx *c) {
    int bad = 0;
    for (int t = 0; t < c->ntensors; t++) {
        const tensor *x = &c->tensors[t];
        const char *op = x->entry ? ts_yaml_str(ts_yaml_get(c->spec, x->entry, "op")) : NULL;
        for (int a = 0; a < x->nargs; a++) {
            int32_t src = x->args[a];
            if (src < 0 || src >= c->g->ninputs || !c->g->inputs[src].inout) continue;
            if (a == 0 && op && strcmp(op, "append") == 0) continue;
            char *hint = c->append_line[src] ? ts_strfmt("read the append's result (line %d) instead", c->append_line[src])
                                             : NULL;
            ERR(c, seq_at(c, ts_yaml_get(c->spec, x->entry, "args"), a), hint,
                "'%s' is inout: only the append that writes it may read it", c->g->inputs[src].name);
            free(hint);
            bad = 1;
        }
    }
    for (int i = 0; i < c->g->ninputs; i++)
        if (c->g->inputs[i].inout && !c->append_line[i]) {
            ts_error(c->d, c->g->inputs[i].line, c->g->inputs[i].col, (int)strlen(c->g->inputs[i].name),
                     "drop inout: true, or write to it with {op: append}", "input '%s' is inout but nothing appends to it",
                     c->g->inputs[i].name);
            bad = 1;
        }
    return bad ? -1 : 0;
}

/* The updated inout inputs, as hidden outputs after the user's. */
static void add_inout_outputs(ctx *c) {
    for (int i = 0; i < c->g->ninputs; i++) {
        if (!c->append_line[i]) continue;
        TS_GROW(c->g->outputs, c->g->noutputs, c->g->cap_outputs);
        ts_ref r = c->updated[i];
        c->g->outputs[c->g->noutputs++] = (ts_output){.name = ts_strdup(c->g->inputs[i].name), .ref = r,
                                                      .dtype = c->g->nodes[r.node].dtype, .inout = true, .input = i};
    }
}

#define P(op) TS_OP_##op
static const op_def op_defs[] = {
    /* composites */
    {"matmul", 2, 2, {"over"}, lower_matmul, -1, false},
    {"softmax", 1, 1, {"axis"}, lower_reduce, -1, false},
    {"mean", 1, 1, {"axis"}, lower_reduce, -1, false},
    {"rmsnorm", 1, 2, {"axis", "eps"}, lower_rmsnorm, -1, false},
    {"sub", 2, 2, {0}, lower_binary_composite, -1, true},
    {"div", 2, 2, {0}, lower_binary_composite, -1, true},
    {"exp", 1, 1, {0}, lower_unary_composite, -1, false},
    {"rsqrt", 1, 1, {0}, lower_unary_composite, -1, false},
    {"tanh", 1, 1, {0}, lower_unary_composite, -1, false},
    {"silu", 1, 1, {0}, lower_unary_composite, -1, false},
    {"gelu", 1, 1, {"approximate"}, lower_gelu, -1, false},
    {"scale", 1, 1, {"by"}, lower_scale, -1, false},
    {"sigmoid", 1, 1, {0}, lower_unary_composite, -1, false},
    {"relu", 1, 1, {0}, lower_unary_composite, -1, false},
    {"abs", 1, 1, {0}, lower_unary_composite, -1, false},
    {"log", 1, 1, {0}, lower_unary_composite, -1, false},
    {"min", 2, 2, {0}, lower_binary_composite, -1, true},
    {"leaky_relu", 1, 1, {"slope"}, lower_leaky_relu, -1, false},
    {"softplus", 1, 1, {"beta", "threshold"}, lower_softplus, -1, false},
    {"logsumexp", 1, 1, {"axis"}, lower_reduce, -1, false},
    {"clamp", 1, 1, {"lo", "hi"}, lower_clamp, -1, false},
    {"var", 1, 1, {"axis", "correction"}, lower_var, -1, false},
    {"pow", 1, 1, {"exponent"}, lower_pow, -1, false},
    {"layernorm", 1, 3, {"axis", "eps"}, lower_layernorm, -1, false},
    /* views */
    {"permute", 1, 1, {"order"}, lower_permute, -1, false},
    {"expand", 1, 1, {"shape"}, lower_expand, -1, false},
    {"reshape", 1, 1, {"shape"}, lower_reshape, -1, false},
    {"slice", 1, 1, {"axis", "start", "step", "as"}, lower_slice, -1, false},
    {"window", 1, 1, {"axis", "as", "step", "dilation"}, lower_window, -1, false},
    /* in place */
    {"append", 2, 2, {"axis", "as", "rows"}, lower_append, -1, false},
};
#undef P

/* Primitives take their names and arities from the TS_OPS X-macro; these say what each needs. */
static op_def primitive_def(ts_op op) {
    op_def d = {ts_op_name(op), ts_op_arity(op), ts_op_arity(op), {0}, NULL, (int)op, false};
    switch (ts_op_kind_of(op)) {
    case TS_KIND_REDUCE: d.attrs[0] = "axis", d.lower = lower_reduce; break;
    case TS_KIND_SOURCE:
        d.lower = op == TS_OP_IOTA ? lower_iota : lower_constant;
        d.attrs[0] = op == TS_OP_IOTA ? "axis" : "value";
        d.attrs[1] = "dtype";
        break;
    default:
        d.lower = op == TS_OP_CAST ? lower_cast : op == TS_OP_COPY ? lower_unary_composite : lower_elementwise;
        d.numbers = ts_op_arity(op) > 1;
        if (op == TS_OP_CAST) d.attrs[0] = "dtype";
    }
    return d;
}

static int find_op_def(const char *name, op_def *out) {
    for (size_t i = 0; i < sizeof op_defs / sizeof *op_defs; i++)
        if (strcmp(op_defs[i].name, name) == 0) return *out = op_defs[i], 0;
    int p = ts_op_lookup(name);
    if (p < 0 || p == TS_OP_INPUT || p == TS_OP_UPDATE) return -1; /* update: written as append */
    *out = primitive_def((ts_op)p);
    return 0;
}

static const char **all_op_names(int *n) {
    const char **names = ts_xmalloc(sizeof *names * (TS_OP_COUNT + sizeof op_defs / sizeof *op_defs));
    *n = 0;
    for (size_t i = 0; i < sizeof op_defs / sizeof *op_defs; i++) names[(*n)++] = op_defs[i].name;
    for (int i = 0; i < TS_OP_COUNT; i++)
        if (i != TS_OP_INPUT && i != TS_OP_UPDATE) names[(*n)++] = ts_op_name((ts_op)i);
    return names;
}

/* Names other libraries give our ops (PyTorch, NumPy, ONNX): the unknown-op hint by meaning. */
static const struct {
    const char *alias, *op;
} op_aliases[] = {
    {"minimum", "min"}, {"maximum", "max"}, {"clip", "clamp"}, {"hardtanh", "clamp"}, {"relu6", "clamp"},
    {"absolute", "abs"}, {"ln", "log"}, {"log_e", "log"}, {"logistic", "sigmoid"}, {"expit", "sigmoid"},
    {"swish", "silu"}, {"square", "pow"}, {"power", "pow"}, {"variance", "var"}, {"std", "var"},
    {"layer_norm", "layernorm"}, {"rms_norm", "rmsnorm"}, {"linear", "matmul"}, {"mm", "matmul"},
    {"bmm", "matmul"}, {"dot", "matmul"}, {"einsum", "matmul"}, {"gemm", "matmul"}, {"subtract", "sub"},
    {"multiply", "mul"}, {"divide", "div"}, {"reciprocal", "recip"}, {"negative", "neg"}, {"sum", "reduce_sum"},
    {"amax", "reduce_max"}, {"lt", "less_than"}, {"gt", "less_than"}, {"select", "where"}, {"masked_fill", "where"},
    {"transpose", "permute"}, {"view", "reshape"}, {"broadcast", "expand"}, {"broadcast_to", "expand"},
    {"arange", "iota"}, {"full", "constant"}, {"to", "cast"}, {"astype", "cast"}, {"log_sum_exp", "logsumexp"},
    {"log1p", "log"}, {"expm1", "exp"}, {"erfc", "erf"},
};

/* "did you mean ...": the op of that meaning in other libraries' vocabulary, else the closest spelling. */
static char *unknown_op_hint(const char *name) {
    for (size_t i = 0; i < sizeof op_aliases / sizeof *op_aliases; i++)
        if (strcasecmp(op_aliases[i].alias, name) == 0)
            return ts_strfmt("tsopt calls it '%s' (README.md, \"Ops\")", op_aliases[i].op);
    int n;
    const char **names = all_op_names(&n);
    const char *near = ts_closest_name(name, names, n);
    char *hint = near ? ts_strfmt("did you mean '%s'?", near) : ts_strfmt("see README.md, \"Ops\", for the op list");
    free(names);
    return hint;
}

/* ---- ops: names, references, order, lowering --------------------------------------------------- */

static const char *const op_common_keys[] = {"name", "op", "args"};

/* First pass over one op entry: its name (unique) and its argument names (kept for resolution). */
static int declare_op(ctx *c, yaml_node_t *entry) {
    if (entry->type != YAML_MAPPING_NODE) {
        ERR(c, entry, "write '- {name: Y, op: matmul, args: [X, W], over: d}'", "each op must be a mapping");
        return -1;
    }
    yaml_node_t *name = ts_yaml_get(c->spec, entry, "name");
    if (!name) {
        ERR(c, entry, "add name: <the tensor it defines>", "op has no 'name'");
        return -1;
    }
    const char *s = expect_name(c, name, "tensor");
    if (!s) return -1;
    int32_t prev = find_tensor(c, s);
    if (prev >= 0) {
        char *hint = ts_strfmt("first defined at line %d", ts_yaml_line(c->tensors[prev].where));
        ERR(c, name, hint, "duplicate tensor name '%s'", s);
        free(hint);
        return -1;
    }
    add_tensor(c, s, name, entry);
    return 0;
}

/* Resolves an op's op name and arguments; reports unknown ops, operand counts, unknown keys, undefined
 * tensors. Fills def. */
static int resolve_op(ctx *c, int32_t t, op_def *def) {
    tensor *x = &c->tensors[t];
    yaml_node_t *opn = ts_yaml_get(c->spec, x->entry, "op");
    if (!opn || !ts_yaml_str(opn)) {
        ERR(c, opn ? opn : x->entry, "add op: <an op name>", "op '%s' has no op name", x->name);
        return -1;
    }
    const char *on = ts_yaml_str(opn);
    if (find_op_def(on, def) != 0) {
        char *hint = unknown_op_hint(on);
        ERR(c, opn, hint, strcmp(on, "input") == 0 ? "'%s' is not an op: declare inputs under inputs:" : "unknown op '%s'",
            on);
        free(hint);
        return -1;
    }
    const char *keys[8];
    int nk = 0;
    for (int i = 0; i < 3; i++) keys[nk++] = op_common_keys[i];
    for (int i = 0; i < 4 && def->attrs[i]; i++) keys[nk++] = def->attrs[i];
    char *where = ts_strfmt("for op %s", def->name);
    int bad = check_keys(c, x->entry, keys, nk, where);
    free(where);
    yaml_node_t *args = get_seq(c, x->entry, "args");
    int nargs = args ? seq_len(args) : 0;
    if ((nargs < def->min_args || nargs > def->max_args) && (args || def->min_args > 0)) {
        char want[32];
        if (def->min_args == def->max_args) snprintf(want, sizeof want, "%d", def->min_args);
        else snprintf(want, sizeof want, "%d %s %d", def->min_args, def->max_args - def->min_args > 1 ? "to" : "or",
                      def->max_args);
        ERR(c, args ? args : opn, NULL, "%s takes %s operand%s, got %d", def->name, want,
            def->max_args == 1 ? "" : "s", nargs);
        return -1;
    }
    x->nargs = nargs;
    for (int i = 0; i < nargs; i++) {
        yaml_node_t *a = seq_at(c, args, i);
        const char *as = ts_yaml_str(a);
        if (as && scan_number(as, &x->number[i])) { /* a number where a tensor may be a scalar */
            x->args[i] = ARG_NUMBER;
            if (!def->numbers) {
                ERR(c, a, "numbers may stand for operands of elementwise ops; declare a {op: constant} here",
                    "operand %d of %s must be a tensor, got the number %s", i + 1, def->name, as);
                bad = 1;
            }
            continue;
        }
        const char *an = expect_name(c, a, "tensor");
        x->args[i] = an ? find_tensor(c, an) : -1;
        if (an && x->args[i] < 0) {
            ERR(c, a, "define it under inputs: or as an op's name", "undefined tensor '%s'", an);
            bad = 1;
        }
        bad |= !an;
    }
    return bad ? -1 : 0;
}

/* Kahn's algorithm over op tensors; on a cycle, reports one and returns -1. order receives op tensor ids. */
static int topo_order(ctx *c, int32_t first_op, int32_t *order) {
    int n = c->ntensors;
    int *indeg = ts_xcalloc((size_t)n, sizeof *indeg);
    int *users_start = ts_xcalloc((size_t)n + 1, sizeof *users_start);
    for (int t = first_op; t < n; t++)
        for (int i = 0; i < c->tensors[t].nargs; i++)
            if (c->tensors[t].args[i] >= first_op) indeg[t]++, users_start[c->tensors[t].args[i] + 1]++;
    for (int t = 0; t < n; t++) users_start[t + 1] += users_start[t];
    int *users = ts_xmalloc(sizeof *users * (size_t)(users_start[n] + 1));
    int *fill = ts_xcalloc((size_t)n, sizeof *fill);
    for (int t = first_op; t < n; t++)
        for (int i = 0; i < c->tensors[t].nargs; i++) {
            int a = c->tensors[t].args[i];
            if (a >= first_op) users[users_start[a] + fill[a]++] = t;
        }
    int head = 0, tail = 0;
    for (int t = first_op; t < n; t++)
        if (indeg[t] == 0) order[tail++] = t;
    while (head < tail) {
        int t = order[head++];
        for (int u = users_start[t]; u < users_start[t + 1]; u++)
            if (--indeg[users[u]] == 0) order[tail++] = users[u];
    }
    int rc = 0;
    if (tail < n - first_op) { /* walk arguments inside the cycle until a tensor repeats */
        int t = first_op;
        while (indeg[t] == 0) t++;
        int *seen = fill;
        memset(seen, 0, sizeof *seen * (size_t)n);
        while (!seen[t]) {
            seen[t] = 1;
            int next = -1;
            for (int i = 0; i < c->tensors[t].nargs; i++)
                if (c->tensors[t].args[i] >= first_op && indeg[c->tensors[t].args[i]] > 0) next = c->tensors[t].args[i];
            t = next;
        }
        char buf[400];
        size_t len = (size_t)snprintf(buf, sizeof buf, "%s", c->tensors[t].name);
        int u = t, steps = 0;
        do {
            int next = -1;
            for (int i = 0; i < c->tensors[u].nargs; i++)
                if (c->tensors[u].args[i] >= first_op && indeg[c->tensors[u].args[i]] > 0) next = c->tensors[u].args[i];
            u = next;
            if (len < sizeof buf - 80) len += (size_t)snprintf(buf + len, sizeof buf - len, " <- %s", c->tensors[u].name);
            else if (steps++ == 0) len += (size_t)snprintf(buf + len, sizeof buf - len, " <- ...");
        } while (u != t);
        ERR(c, c->tensors[t].where, "a tensor cannot depend on itself", "cycle: %s", buf);
        rc = -1;
    }
    free(indeg);
    free(users_start);
    free(users);
    free(fill);
    return rc;
}

static int lower_op(ctx *c, int32_t t, const op_def *def) {
    tensor *x = &c->tensors[t];
    op_call o = {.def = def, .entry = x->entry, .nargs = x->nargs};
    o.op_node = ts_yaml_get(c->spec, x->entry, "op");
    o.args_node = ts_yaml_get(c->spec, x->entry, "args");
    ts_dtype dtype = TS_FP32; /* numbers take the dtype of the op's first tensor operand */
    for (int i = x->nargs - 1; i >= 0; i--) {
        if (x->args[i] == ARG_NUMBER) continue;
        if (c->tensors[x->args[i]].state != T_DONE) return -1; /* an operand failed: already reported */
        o.args[i] = c->tensors[x->args[i]].value;
        if (!(def->prim == TS_OP_WHERE && i == 0)) dtype = o.args[i].dtype;
    }
    c->b.origin = t;
    for (int i = 0; i < x->nargs; i++) {
        o.arg_nodes[i] = seq_at(c, o.args_node, i);
        if (x->args[i] == ARG_NUMBER) o.args[i] = ts_t_constant(&c->b, x->number[i], dtype);
    }
    if (def->lower(c, &o) != 0) return -1;
    c->tensors[t].value = o.result;
    return 0;
}

static int parse_ops(ctx *c, yaml_node_t *ops) {
    if (!ops) return 0;
    if (ops->type != YAML_SEQUENCE_NODE) {
        ERR(c, ops, "write 'ops:' followed by a list of '- {name: ..., op: ..., args: [...]}'", "'ops' must be a list");
        return -1;
    }
    int n = seq_len(ops);
    if (n > TS_MAX_OPS) {
        ERR(c, ops, "split the graph into several files", "graph has %d ops; the limit is %d", n, TS_MAX_OPS);
        return -1;
    }
    int32_t first = c->ntensors;
    int bad = 0;
    for (int i = 0; i < n; i++) bad |= declare_op(c, seq_at(c, ops, i)) != 0;
    if (bad) return -1;
    op_def *defs = ts_xmalloc(sizeof *defs * (size_t)(n ? n : 1));
    for (int t = first; t < c->ntensors; t++) bad |= resolve_op(c, t, &defs[t - first]) != 0;
    int32_t *order = ts_xmalloc(sizeof *order * (size_t)(n ? n : 1));
    if (!bad) bad = topo_order(c, first, order) != 0;
    for (int i = 0; !bad && i < n; i++) {
        int32_t t = order[i];
        c->tensors[t].state = lower_op(c, t, &defs[t - first]) == 0 ? T_DONE : T_FAILED;
    }
    free(defs);
    free(order);
    return bad || c->d->nerrors ? -1 : 0;
}

/* No node may exceed 2^TS_MAX_ELEMENTS_LOG2 elements: re-check every node's count with overflow checks. */
static int check_sizes(ctx *c) {
    for (int i = 0; i < c->g->nnodes; i++) {
        const ts_node *n = &c->g->nodes[i];
        int64_t e = 1;
        for (int d = 0; d < n->ndim; d++)
            if (__builtin_mul_overflow(e, c->g->axes[n->axis[d]].size, &e) || e > (int64_t)1 << TS_MAX_ELEMENTS_LOG2) {
                int32_t t = n->origin;
                yaml_node_t *where = t >= 0 ? c->tensors[t].where : NULL;
                ERR(c, where, "reduce the axis sizes", "'%s' would have more than 2^%d elements",
                    t >= 0 ? c->tensors[t].name : "a tensor", TS_MAX_ELEMENTS_LOG2);
                return -1;
            }
    }
    return 0;
}

/* The longest path of primitive ops must stay under TS_MAX_DEPTH: later stages recurse along it. */
static int check_depth(ctx *c) {
    int32_t *depth = ts_xcalloc((size_t)c->g->nnodes + 1, sizeof *depth);
    int rc = 0;
    for (int i = 0; i < c->g->nnodes && rc == 0; i++) { /* nodes are in topological order */
        const ts_node *n = &c->g->nodes[i];
        for (int s = 0; s < n->nsrc; s++)
            if (depth[n->src[s].node] + 1 > depth[i]) depth[i] = depth[n->src[s].node] + 1;
        if (depth[i] > TS_MAX_DEPTH) {
            int32_t t = n->origin;
            yaml_node_t *where = t >= 0 ? c->tensors[t].where : NULL;
            ERR(c, where, "split the graph into several files", "graph is deeper than %d operations at '%s'",
                TS_MAX_DEPTH, t >= 0 ? c->tensors[t].name : "?");
            rc = -1;
        }
    }
    free(depth);
    return rc;
}

static int parse_outputs(ctx *c, yaml_node_t *outs, yaml_node_t *root) {
    if (!outs || (outs->type == YAML_SEQUENCE_NODE && seq_len(outs) == 0)) {
        ERR(c, outs ? outs : root, "add outputs: [<tensor names>]", "empty graph: no outputs");
        return -1;
    }
    if (outs->type != YAML_SEQUENCE_NODE) {
        ERR(c, outs, "write outputs: [O]", "'outputs' must be a list of tensor names");
        return -1;
    }
    if (seq_len(outs) > TS_MAX_OPS) {
        ERR(c, outs, NULL, "graph lists %d outputs; the limit is %d", seq_len(outs), TS_MAX_OPS);
        return -1;
    }
    int bad = 0;
    bool *listed = ts_xcalloc((size_t)c->ntensors + 1, sizeof *listed); /* duplicates in linear time */
    for (int i = 0; i < seq_len(outs); i++) {
        yaml_node_t *o = seq_at(c, outs, i);
        const char *s = expect_name(c, o, "tensor");
        int32_t t = s ? find_tensor(c, s) : -1;
        if (s && t < 0) ERR(c, o, "name a tensor defined under ops:", "output '%s' is never produced", s);
        else if (t >= 0 && !c->tensors[t].entry)
            ERR(c, o, "outputs are computed by ops; copy the input with {op: copy} if you mean it",
                "output '%s' is a graph input", s);
        if (t < 0 || !c->tensors[t].entry) {
            bad = 1;
            continue;
        }
        if (listed[t]) {
            ERR(c, o, NULL, "output '%s' is listed twice", s);
            bad = 1;
        }
        listed[t] = true;
        if (bad || c->tensors[t].state != T_DONE) continue;
        TS_GROW(c->g->outputs, c->g->noutputs, c->g->cap_outputs);
        c->g->outputs[c->g->noutputs++] =
            (ts_output){.name = ts_strdup(s), .ref = c->tensors[t].value.ref, .dtype = c->tensors[t].value.dtype};
    }
    free(listed);
    return bad ? -1 : 0;
}

static void warn_unused_inputs(ctx *c) {
    bool *used = ts_xcalloc((size_t)c->g->ninputs + 1, sizeof *used); /* one pass: inputs are tensors 0.. */
    for (int t = 0; t < c->ntensors; t++)
        for (int a = 0; a < c->tensors[t].nargs; a++)
            if (c->tensors[t].args[a] >= 0 && c->tensors[t].args[a] < c->g->ninputs) used[c->tensors[t].args[a]] = true;
    for (int i = 0; i < c->g->ninputs; i++) {
        if (!used[i])
            ts_diag_add(c->d, TS_WARNING, c->g->inputs[i].line, c->g->inputs[i].col, (int)strlen(c->g->inputs[i].name),
                        NULL, "input '%s' is never used", c->g->inputs[i].name);
    }
    free(used);
}

/* Keeps every user tensor in the graph, indexed like node origins. */
static void record_named(ctx *c) {
    for (int t = 0; t < c->ntensors; t++) {
        const tensor *x = &c->tensors[t];
        TS_GROW(c->g->named, c->g->nnamed, c->g->cap_named);
        const char *op = x->entry ? ts_yaml_str(ts_yaml_get(c->spec, x->entry, "op")) : "input";
        c->g->named[c->g->nnamed++] = (ts_named){.name = ts_strdup(x->name), .op = ts_strdup(op ? op : "?"),
                                                 .ref = x->value.ref, .dtype = x->value.dtype,
                                                 .line = ts_yaml_line(x->where), .col = ts_yaml_col(x->where)};
    }
}

/* ---- entry points ------------------------------------------------------------------------------ */

static void default_name(ts_spec *spec, ts_graph *g, yaml_node_t *name_node) {
    const char *s = ts_yaml_str(name_node);
    if (s) {
        free(g->name);
        g->name = ts_strdup(s);
        return;
    }
    const char *base = strrchr(spec->path, '/');
    base = base ? base + 1 : spec->path;
    size_t n = strcspn(base, ".");
    char *name = ts_xmalloc(n + 1);
    for (size_t i = 0; i < n; i++) name[i] = isalnum((unsigned char)base[i]) ? base[i] : '_';
    name[n] = '\0';
    free(g->name);
    g->name = is_identifier(name) ? name : ts_strfmt("g_%s", name);
    if (g->name != name) free(name);
}

int ts_check(ts_spec *spec, const ts_binding *bind, ts_graph *g, ts_diags *d) {
    ts_graph_init(g, NULL);
    ctx c = {.spec = spec, .d = d, .g = g, .b = {.g = g, .origin = -1}, .scaled = bind && bind->scaled};
    int rc = -1;
    yaml_node_t *root = ts_yaml_root(spec);
    if (!root || root->type != YAML_MAPPING_NODE) {
        ERR(&c, root, "a graph file is a mapping with axes:, inputs:, ops: and outputs:",
            "expected a mapping at the top of the file");
        goto done;
    }
    if (check_keys(&c, root, top_keys, 5, "at the top level")) goto done;
    yaml_node_t *name = ts_yaml_get(spec, root, "graph");
    if (name && !expect_name(&c, name, "graph")) goto done;
    default_name(spec, g, name);
    if (parse_axes(&c, ts_yaml_get(spec, root, "axes"), bind) != 0) goto done;
    if (parse_inputs(&c, ts_yaml_get(spec, root, "inputs")) != 0) goto done;
    c.append_line = ts_xcalloc((size_t)g->ninputs + 1, sizeof *c.append_line);
    c.updated = ts_xcalloc((size_t)g->ninputs + 1, sizeof *c.updated);
    if (parse_ops(&c, ts_yaml_get(spec, root, "ops")) != 0 || check_inout(&c) != 0) goto done;
    if (check_sizes(&c) != 0 || check_depth(&c) != 0) goto done;
    if (parse_outputs(&c, ts_yaml_get(spec, root, "outputs"), root) != 0) goto done;
    add_inout_outputs(&c);
    warn_unused_inputs(&c);
    record_named(&c);
    if (!d->nerrors) ts_graph_merge_reduced_axes(g);  /* hlir.h: two axes reduced one after the other, merged */
    if (!d->nerrors) ts_graph_split_after_merges(g); /* hlir.h: after a merging reshape, work in its source axes */
    if (!d->nerrors) ts_graph_merge_after_splits(g); /* hlir.h: after a splitting reshape, likewise */
    if (!d->nerrors) ts_graph_merge_free_axes(g);    /* hlir.h: a contraction operand's two nesting free axes */
    rc = d->nerrors ? -1 : 0;
done:
    free(c.tensors);
    free(c.slots);
    free(c.append_line);
    free(c.updated);
    free(c.softplus);
    return rc;
}

/* ---- --dims ------------------------------------------------------------------------------------ */

int ts_binding_parse(ts_binding *b, const char *text, ts_diags *d) {
    const char *p = text;
    while (*p) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        if (!comma) comma = p + strlen(p);
        if (!eq || eq > comma || eq == p) {
            ts_error(d, 0, 0, 1, "write --dims m=8,d=16", "--dims: expected name=size, got '%.*s'", (int)(comma - p), p);
            return -1;
        }
        char *end;
        errno = 0;
        long long v = strtoll(eq + 1, &end, 10);
        if (end != comma || v <= 0 || errno == ERANGE) {
            ts_error(d, 0, 0, 1, NULL, "--dims: size of '%.*s' must be a positive integer", (int)(eq - p), p);
            return -1;
        }
        if (b->n == 64) {
            ts_error(d, 0, 0, 1, NULL, "--dims: too many axes");
            return -1;
        }
        b->name[b->n] = ts_xmalloc((size_t)(eq - p) + 1);
        memcpy(b->name[b->n], p, (size_t)(eq - p));
        b->name[b->n][eq - p] = '\0';
        b->size[b->n++] = v;
        p = *comma ? comma + 1 : comma;
    }
    return 0;
}

void ts_binding_free(ts_binding *b) {
    for (int i = 0; i < b->n; i++) free(b->name[i]);
    b->n = 0;
}

void ts_binding_copy(ts_binding *out, const ts_binding *in) {
    memset(out, 0, sizeof *out);
    for (int i = 0; in && i < in->n; i++) {
        out->name[out->n] = ts_strdup(in->name[i]);
        out->size[out->n++] = in->size[i];
    }
    out->scaled = in && in->scaled;
}

void ts_binding_set(ts_binding *b, const char *name, int64_t size) {
    int at = -1;
    for (int i = 0; i < b->n; i++)
        if (strcmp(b->name[i], name) == 0) at = i;
    if (at < 0 && b->n < 64) b->name[at = b->n++] = ts_strdup(name);
    if (at >= 0) b->size[at] = size;
}
