/* emit.c — plans → CUDA headers (see emit.h). The code here fills template parameters and prints the
 * functors of fused expressions; the kernels themselves live in templates/ and are copied verbatim. */
#include "emit.h"

#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "spec.h"
#include "sym.h"
#include "util.h"
#include "version.h"
#include "libgemm.h"
#include "rowstat.h"
#include "workspace.h"

typedef struct {
    FILE *f;
    const ts_graph *g;
    const ts_plan *p;
    const ts_emit_opts *o;
    ts_dyn dyn;
    const char *dyn_names[TS_SYM_MAX_DYN]; /* dynamic axes as C identifiers (ts_emit_ident) */
    char **in_names, **out_names;          /* inputs and outputs as C identifiers */
    int nout;                              /* outputs the caller passes (ts_graph_abi_outputs: not the hidden
                                            * updated inout inputs, which live in their inputs' buffers) */
    const char *name;                      /* the symbols' prefix: --name, else the graph's name */
    char upper[128];                       /* NAME for macros */
    char macros[64][64];                   /* the templates' macros, renamed TSOPT_*, #undef'd at the end */
    int nmacros;
    const char *const *load_expr; /* when set: the C expression of each access slot's loaded value */
    bool fast_tanh;               /* print_expr: a tanh (ts_expr_tanh_arg) as tst::fast_tanh (tanh.approx) */
    ts_workspace ws;              /* where each temporary lives (workspace.h) */
    int *code_of;                 /* per kernel: the first kernel with the same code, whose code it runs */
    const int *param_of;          /* while printing a kernel's shared code: buffer → its parameter, else NULL */
    int param_id;                 /* ... and the kernel whose parameters they are */
    const char *span_args;        /* a MAP or ROW functor's span template arguments: "kVec", or "kVec, kPairs" */
} emitter;

static const char *ctype_of(ts_dtype t) {
    switch (t) {
    case TS_FP16: return "__half";
    case TS_BF16: return "__nv_bfloat16";
    default: return "float";
    }
}

/* ---- identifiers ------------------------------------------------------------------------------- */

/* Words a tensor or axis name must not be in a header: C and C++ keywords (C++20, alternative tokens
 * included), the names the launch code declares or calls, and macros of the headers it includes. */
const char *const ts_emit_reserved[] = {
    /* C++ keywords */
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
    "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
    "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default",
    "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "final",
    "float", "for", "friend", "goto", "if", "import", "inline", "int", "long", "module", "mutable", "namespace",
    "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "override", "private",
    "protected", "public", "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof",
    "static", "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw",
    "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "wchar_t", "while", "xor", "xor_eq",
    /* C only */
    "restrict",
    /* the launch code's parameters, locals, types and namespaces */
    "workspace", "stream", "buffers", "dims", "bytes", "ws", "dev", "sms", "err", "p", "half", "int8_t",
    "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "ptrdiff_t",
    "intptr_t", "uintptr_t", "tsm", "tsr", "tsg", "tsg90", "tsa", "tsa90", "tst", "std", "make_float2", "fallback_note",
    /* macros of math.h, stddef.h and stdint.h */
    "NAN", "INFINITY", "HUGE_VAL", "HUGE_VALF", "NULL", "offsetof", "assert",
    NULL};

/* Prefixes reserved for the CUDA runtime, the implementation, tsopt's own symbols and the generated
 * functors (K0, K1Inner) and temporaries (tmp0). */
static bool reserved_pattern(const char *s, size_t n) {
    if ((n >= 4 && !strncmp(s, "cuda", 4)) || (n >= 2 && s[0] == '_' && (s[1] == '_' || isupper((unsigned char)s[1]))) ||
        (n >= 5 && !strncasecmp(s, "tsopt", 5)))
        return true;
    size_t d = s[0] == 'K' ? 1 : n >= 3 && !strncmp(s, "tmp", 3) ? 3 : 0;
    return d && d < n && isdigit((unsigned char)s[d]);
}

static bool reserved_word(const char *s, size_t n) {
    if (reserved_pattern(s, n)) return true;
    for (const char *const *w = ts_emit_reserved; *w; w++)
        if (strlen(*w) == n && !strncmp(*w, s, n)) return true;
    return false;
}

bool ts_emit_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n > 64 || isdigit((unsigned char)name[0]) || (name[0] == '_' && n >= 2 && reserved_pattern(name, n)))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_') return false;
    return true;
}

char *ts_emit_ident(const char *name) {
    size_t n = strlen(name);
    while (n > 0 && name[n - 1] == '_') n--;
    return n > 0 && reserved_word(name, n) ? ts_strfmt("%s_", name) : ts_strdup(name);
}

/* ---- templates --------------------------------------------------------------------------------- */

/* Whether line s (n bytes) opens a template's self-test block: `#ifdef <NAME>_SELFTEST`. */
static bool is_selftest_ifdef(const char *s, size_t n) {
    return n > 16 && !strncmp(s, "#ifdef ", 7) && n - 7 >= 9 && !strncmp(s + n - 9, "_SELFTEST", 9);
}

static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Index of macro (s, n) among the collected ones, or -1. */
static int macro_index(const emitter *e, const char *s, size_t n) {
    for (int i = 0; i < e->nmacros; i++)
        if (strlen(e->macros[i]) == n && !strncmp(e->macros[i], s, n)) return i;
    return -1;
}

/* Records every macro the template text #defines (they are renamed TSOPT_<NAME> in the header and
 * #undef'd at its end: macros ignore namespaces). Returns the first macro there is no room for, or NULL. */
static const char *collect_macros(emitter *e, const char *text, size_t len) {
    for (const char *p = text; p < text + len; p++) {
        if (p != text && p[-1] != '\n') continue;
        const char *s = p;
        while (s < text + len && (*s == ' ' || *s == '\t')) s++;
        if ((size_t)(text + len - s) < 8 || strncmp(s, "#define", 7) || !isspace((unsigned char)s[7])) continue;
        s += 7;
        while (s < text + len && (*s == ' ' || *s == '\t')) s++;
        size_t n = 0;
        while (s + n < text + len && ident_char(s[n])) n++;
        if (n == 0 || macro_index(e, s, n) >= 0 || !strncmp(s, "TSOPT_", 6)) continue;
        if (n >= sizeof e->macros[0] || e->nmacros == (int)(sizeof e->macros / sizeof e->macros[0])) return s;
        memcpy(e->macros[e->nmacros], s, n);
        e->macros[e->nmacros++][n] = '\0';
    }
    return NULL;
}

/* Prints one template line with every collected macro name prefixed TSOPT_. */
static void print_renamed(emitter *e, const char *line, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (ident_char(line[i]) && (i == 0 || !ident_char(line[i - 1])))
            while (j < n && ident_char(line[j])) j++;
        if (j > i) {
            fprintf(e->f, "%s%.*s", macro_index(e, line + i, j - i) >= 0 ? "TSOPT_" : "", (int)(j - i), line + i);
            i = j;
        } else fputc(line[i++], e->f);
    }
    fputc('\n', e->f);
}

/* Prints the template text without its #include and #pragma once lines and its self-test block, with the
 * collected macros renamed. */
static void copy_template_lines(emitter *e, const char *text, size_t len) {
    int selftest = 0; /* #if depth inside a *_SELFTEST block, which is dropped (0: outside) */
    for (const char *line = text; line < text + len;) {
        const char *end = memchr(line, '\n', (size_t)(text + len - line));
        size_t n = end ? (size_t)(end - line) : (size_t)(text + len - line);
        const char *s = line;
        while (s < line + n && isspace((unsigned char)*s)) s++;
        bool drop = !strncmp(s, "#include", 8) || !strncmp(s, "#pragma once", 12) || !strncmp(s, "// ---- self-test", 17);
        if (!selftest && is_selftest_ifdef(s, (size_t)(line + n - s))) selftest = 1, drop = true;
        else if (selftest) {
            drop = true;
            if (!strncmp(s, "#if", 3)) selftest++;
            else if (!strncmp(s, "#endif", 6)) selftest--;
        }
        if (!drop) print_renamed(e, line, n);
        line += n + 1;
    }
}

/* Copies templates/<name> without its #include and #pragma once lines (they are in the header once) and
 * its self-test block, with its macros renamed TSOPT_*. */
static int embed_template(emitter *e, const char *name, char **err) {
    char *path = ts_strfmt("%s/%s", e->o->templates_dir, name);
    ts_diags d;
    ts_diags_init(&d, path, NULL, 0);
    size_t len;
    char *text = ts_read_text_file(path, &len, &d);
    int errnum = errno;
    ts_diags_free(&d);
    if (!text) {
        *err = ts_strfmt("cannot read template %s: %s (--templates DIR or TSOPT_HOME sets where templates are)", path,
                         strerror(errnum));
        free(path);
        return -1;
    }
    fprintf(e->f, "// ---- %s ", name);
    for (int i = 0; i < 90 - (int)strlen(name); i++) fputc('-', e->f);
    fputc('\n', e->f);
    const char *full = collect_macros(e, text, len);
    if (full) {
        *err = ts_strfmt("template %s: the macro at '%.40s' does not fit the emitter's table (at most %d macros of "
                         "fewer than %d characters)", path, full, (int)(sizeof e->macros / sizeof e->macros[0]),
                         (int)sizeof e->macros[0]);
        free(text);
        free(path);
        return -1;
    }
    copy_template_lines(e, text, len);
    free(text);
    free(path);
    return 0;
}

static bool uses_kind(const ts_plan *p, ts_kernel_kind k) {
    for (int i = 0; i < p->nk; i++)
        if (p->k[i].kind == k) return true;
    return false;
}

/* Whether a GEMM of plan p runs gemm_f32.cuh's kernel (fp32 operands; config.h tf32x3) — wgmma: its Hopper form. */
static bool uses_f32_gemm(const ts_plan *p, bool wgmma) {
    for (int i = 0; i < p->nk; i++)
        if (p->k[i].kind == TS_KERNEL_GEMM && p->k[i].cfg.tf32x3 && (!wgmma || p->k[i].cfg.f32_wgmma)) return true;
    return false;
}

static int embed_templates(emitter *e, char **err) {
    if (embed_template(e, "tile.cuh", err)) return -1;
    bool spans = uses_kind(e->p, TS_KERNEL_MAP) || uses_kind(e->p, TS_KERNEL_ROW);
    if (spans && embed_template(e, "span.cuh", err)) return -1;
    if (uses_kind(e->p, TS_KERNEL_MAP) && embed_template(e, "map.cuh", err)) return -1;
    if (uses_kind(e->p, TS_KERNEL_ROW) && embed_template(e, "row.cuh", err)) return -1;
    if (uses_kind(e->p, TS_KERNEL_REDUCE) && embed_template(e, "reduce.cuh", err)) return -1;
    bool gemm = uses_kind(e->p, TS_KERNEL_GEMM), attn = uses_kind(e->p, TS_KERNEL_ATTENTION);
    /* the Hopper attention kernel builds on the Hopper GEMM's TMA and wgmma helpers */
    if ((gemm || attn) && (embed_template(e, "gemm.cuh", err) || embed_template(e, "gemm_sm90.cuh", err))) return -1;
    if (uses_f32_gemm(e->p, false) && embed_template(e, "gemm_f32.cuh", err)) return -1;
    if (uses_f32_gemm(e->p, true) && embed_template(e, "gemm_f32_sm90.cuh", err)) return -1;
    if (attn && (embed_template(e, "attention.cuh", err) || embed_template(e, "attention_sm90.cuh", err))) return -1;
    if (ts_plan_uses_cublas(e->p) && embed_template(e, "cublaslt.cuh", err)) return -1;
    return 0;
}

/* ---- expressions ------------------------------------------------------------------------------- */

static void print_float(FILE *f, double v) {
    if (isnan(v)) fputs("NAN", f);
    else if (isinf(v)) fputs(v > 0 ? "INFINITY" : "-INFINITY", f);
    else {
        char buf[40];
        snprintf(buf, sizeof buf, "%.9g", v);
        fprintf(f, "%s%sf", buf, strpbrk(buf, ".eE") ? "" : ".0");
    }
}

/* Where each axis sits in the index array a functor receives. */
typedef struct {
    int n;
    int32_t axis[TS_MAX_DIMS + 1];
    const char *expr[TS_MAX_DIMS + 1]; /* C expression of its index, e.g. "idx[1]", "k", "row" */
} index_map;

static const char *index_of(const index_map *m, int32_t axis) {
    for (int i = 0; i < m->n; i++)
        if (m->axis[i] == axis) return m->expr[i];
    return NULL;
}

/* The element offset of access slot `s` at the indices of m. A stride known when the header is written is
 * printed as a number (0: no term, 1: no multiply), so the compiler folds it: an attention score functor
 * loading a mask per score spent more on 64-bit index products than on the softmax itself (run 38). */
static void print_offset(FILE *f, const ts_kernel *k, int s, const index_map *m) {
    const ts_access *a = &k->acc[s];
    fprintf(f, "o%d", s);
    for (int d = 0; d < a->ndim; d++) {
        const char *ix = index_of(m, a->axis[d]);
        int64_t v;
        if (!ix) continue;
        if (!ts_sym_const_value(&a->stride[d], &v)) fprintf(f, " + (int64_t)(%s) * s%d[%d]", ix, s, d);
        else if (v == 1) fprintf(f, " + (int64_t)(%s)", ix);
        else if (v != 0) fprintf(f, " + (int64_t)(%s) * %lld", ix, (long long)v);
    }
}

/* Whether kernel k writes buffer `buf` (then its reads stay ordered with the kernel's stores). */
/* A read of access slot s, as float: through the read-only path (tst::load_ro) when the kernel does not write
 * the buffer — inputs and outputs never overlap (the header's contract; temporaries by liveness). */
static void print_load(emitter *e, const ts_kernel *k, int s, const index_map *m) {
    const char *t = ctype_of(e->p->buf[k->acc[s].buf].dtype);
    if (ts_kernel_writes(k, k->acc[s].buf)) {
        fprintf(e->f, "tst::elem<%s>::to_float(p%d[", t, s);
        print_offset(e->f, k, s, m);
        fputs("])", e->f);
    } else {
        fprintf(e->f, "tst::elem<%s>::to_float(tst::load_ro(p%d + ", t, s);
        print_offset(e->f, k, s, m);
        fputs("))", e->f);
    }
}

static void print_op(FILE *f, const ts_xnode *n, const char *name, int i) {
    const int *c = n->kid;
    switch (n->op) {
    case TS_OP_NEG: fprintf(f, "-v%d", c[0]); break;
    case TS_OP_RECIP: fprintf(f, "__fdividef(1.f, v%d)", c[0]); break; /* rcp.approx: 1 ulp, no division */
    case TS_OP_SQRT: fprintf(f, "tst::fast_sqrt(v%d)", c[0]); break;
    case TS_OP_EXP2: fprintf(f, "tst::fast_exp2(v%d)", c[0]); break; /* ex2.approx.ftz (templates/tile.cuh) */
    case TS_OP_LOG2: fprintf(f, "tst::fast_log2(v%d)", c[0]); break;
    case TS_OP_SIN: fprintf(f, "tst::fast_sin(v%d)", c[0]); break;
    case TS_OP_ERF: fprintf(f, "erff(v%d)", c[0]); break;
    case TS_OP_CAST:
        if (n->dtype == TS_FP32) fprintf(f, "v%d", c[0]);
        else fprintf(f, "tst::elem<%s>::to_float(tst::elem<%s>::from_float(v%d))", name, name, c[0]);
        break;
    case TS_OP_ADD: fprintf(f, "v%d + v%d", c[0], c[1]); break;
    case TS_OP_MUL: fprintf(f, "v%d * v%d", c[0], c[1]); break;
    case TS_OP_MAX: fprintf(f, "fmaxf(v%d, v%d)", c[0], c[1]); break;
    case TS_OP_LESS_THAN: fprintf(f, "v%d < v%d ? 1.f : 0.f", c[0], c[1]); break;
    case TS_OP_WHERE: fprintf(f, "v%d != 0.f ? v%d : v%d", c[0], c[1], c[2]); break;
    default: fprintf(f, "0.f /* op %d */", i); break;
    }
}

/* Statements computing expression x; its value is v<root>. acc[0], acc[1] name the accumulators. */
static void print_expr(emitter *e, const ts_kernel *k, const ts_expr *x, const index_map *m, const char *const *acc,
                       const char *indent) {
    bool *live = ts_xmalloc(sizeof *live * (size_t)(x->n + 1));
    ts_expr_live(x, e->fast_tanh, live);
    for (int i = 0; i < x->n; i++) {
        const ts_xnode *n = &x->node[i];
        int y = e->fast_tanh ? ts_expr_tanh_arg(x, i) : -1;
        if (e->fast_tanh && !live[i]) continue; /* inside a tanh computed below from its argument */
        fprintf(e->f, "%sconst float v%d = ", indent, i);
        if (y >= 0) { /* 1 − 2/(2^y + 1) = tanh(y·ln2/2) */
            fprintf(e->f, "tst::fast_tanh(v%d * 0.346573590f);\n", y);
            continue;
        }
        switch (n->kind) {
        case TS_X_CONST: print_float(e->f, n->value); break;
        case TS_X_ACC: fputs(acc[n->slot], e->f); break;
        case TS_X_INDEX: fprintf(e->f, "(float)(%s)", index_of(m, n->slot) ? index_of(m, n->slot) : "0"); break;
        case TS_X_LOAD:
            if (e->load_expr) fputs(e->load_expr[n->slot], e->f);
            else print_load(e, k, n->slot, m);
            break;
        case TS_X_OP: print_op(e->f, n, ctype_of(n->dtype), i); break;
        }
        fputs(";\n", e->f);
    }
    free(live);
}

/* Fields of a functor: a pointer, strides and an offset per access slot. */
static void print_fields(emitter *e, const ts_kernel *k) {
    for (int s = 0; s < k->nacc; s++)
        fprintf(e->f, "    const %s *p%d;\n    int64_t o%d, s%d[%d];\n", ctype_of(e->p->buf[k->acc[s].buf].dtype), s, s, s,
                k->acc[s].ndim ? k->acc[s].ndim : 1);
}

/* The index names of a kernel's output space: its out access's axes (the out buffer's, except for an
 * append's MAP, which writes one slice of its inout buffer). */
static index_map out_index_map(const emitter *e, const ts_kernel *k, const char *array) {
    (void)e;
    static char names[TS_MAX_DIMS][16];
    index_map m = {0};
    for (int d = 0; d < k->out.ndim; d++) {
        snprintf(names[d], sizeof names[d], "%s[%d]", array, d);
        m.axis[m.n] = k->out.axis[d];
        m.expr[m.n++] = names[d];
    }
    return m;
}

/* ---- functors per kernel kind ------------------------------------------------------------------ */

/* ---- spans: kVec consecutive elements along one axis (span.cuh) -------------------------------- */

/* Whether the score reads tensors (a mask over [t_q, t_kv]): an attention kernel's access slots before Q's. */
static bool score_loads(const ts_kernel *k) {
    for (int s = 0; s < k->nacc; s++)
        if (ts_expr_reads(&k->expr, s)) return true;
    return false;
}

/* The stride of an access along `axis` as printed in a functor: a constant when it is one (so that the
 * compiler keeps only the vector, broadcast or gather path that applies), else its field; 0 when the
 * access does not vary along the axis. */
static void print_span_stride(emitter *e, const ts_access *a, const char *field, int32_t axis) {
    for (int d = 0; d < a->ndim; d++) {
        if (a->axis[d] != axis) continue;
        if (ts_sym_is_const(&a->stride[d])) ts_sym_print(e->f, &a->stride[d], e->dyn_names);
        else fprintf(e->f, "%s[%d]", field, d);
        return;
    }
    fputs("0", e->f);
}

/* `float <name>[kVec]; tsv::load_span<kVec>(<name>, p<s> + <base>, <stride>, <k0>, n);` (span_args) */
static void print_span_load(emitter *e, const ts_kernel *k, int s, const char *name, const char *base, int32_t axis,
                            const char *k0, const char *indent) {
    char field[16];
    snprintf(field, sizeof field, "s%d", s);
    fprintf(e->f, "%sfloat %s[kVec];\n%stsv::load_span<%s>(%s, p%d + %s, ", indent, name, indent, e->span_args, name, s,
            base);
    print_span_stride(e, &k->acc[s], field, axis);
    fprintf(e->f, ", %s, n);\n", k0);
}

/* ---- functors per kernel kind ------------------------------------------------------------------ */

/* Whether access a (of a 2-byte type) moves along `axis` with unit stride in spans that can start 4- but not
 * 16-byte aligned: its other strides or offset even but not all multiples of 8 elements (rows of 2500). */
static bool span_pairs_pay(const emitter *e, const ts_access *a, int32_t axis) {
    if (ts_dtype_bytes(e->p->buf[a->buf].dtype) != 2 || ts_access_unit_axis(a) != axis) return false;
    return !ts_access_chunked(a) && ts_access_paired(a);
}

/* A MAP or ROW functor's kPairs (span.cuh: 4-byte pair moves off 16-byte alignment), declared only where an
 * operand or output pays for it along the span axis: the extra path slows aligned kernels (bench/NOTES.md
 * run 121). Sets the span template arguments the functor's loads and stores print. */
static void declare_span_pairs(emitter *e, const ts_kernel *k, int32_t axis) {
    bool pay = span_pairs_pay(e, &k->out, axis);
    for (int i = 0; i < k->nacc; i++) pay |= span_pairs_pay(e, &k->acc[i], axis);
    for (int o = 0; o < k->nextra; o++) pay |= span_pairs_pay(e, &k->extra_out[o], axis);
    if (pay) fputs("    static constexpr bool kPairs = true; /* 4-byte pairs where spans are off 16 bytes */\n", e->f);
    e->span_args = pay ? "kVec, kPairs" : "kVec";
}

/* Whether access a's rows along `axis` (unit stride) can start off the 16 bytes of a vector where no cheaper
 * path serves them: 2-byte elements at an odd offset (rows of an odd length: a vocabulary of 50257; 4-byte-aligned
 * rows move in pairs, kPairs), or 4-byte ones anywhere off 16 bytes. Such rows have their head — the positions
 * before the first aligned one — taken apart (row.cuh and map.cuh kHead), so that the rest, and the spans of
 * operands aligned alike, move in 16-byte vectors rather than element by element: 1.4-2.4x (bench/NOTES.md run
 * 153); on 4-byte-aligned 2-byte rows the head cost 5-16% against the pairs. */
static bool rows_need_head(const emitter *e, const ts_access *a, int32_t axis) {
    if (ts_access_unit_axis(a) != axis || ts_access_chunked(a)) return false;
    return ts_dtype_bytes(e->p->buf[a->buf].dtype) != 2 || !ts_access_paired(a);
}

/* A MAP functor computes a span of kVec elements along the output's innermost axis: every operand's span
 * loaded once (vector, broadcast or gather: span.cuh), then the expression per element. */
static void emit_map_functor(emitter *e, int ki, const ts_kernel *k) {
    const ts_access *B = &k->out; /* the output space (out_index_map) */
    int32_t inner = B->ndim ? B->axis[B->ndim - 1] : -1;
    char k0[24], inner_ix[48];
    snprintf(k0, sizeof k0, "idx[%d]", B->ndim ? B->ndim - 1 : 0);
    snprintf(inner_ix, sizeof inner_ix, "(%s + i)", k0);
    fprintf(e->f, "struct K%d {\n", ki);
    print_fields(e, k);
    for (int o = 0; o < k->nextra; o++) /* extra outputs: pointer and strides over the output's axes */
        fprintf(e->f, "    %s *q%d;\n    int64_t qs%d[%d];\n", ctype_of(e->p->buf[k->extra_out[o].buf].dtype), o, o,
                B->ndim ? B->ndim : 1);
    fprintf(e->f, "    static constexpr int kVec = %d;\n", ts_kernel_span_vec(e->p, k));
    declare_span_pairs(e, k, inner);
    if (rows_need_head(e, B, inner)) /* map.cuh: each row's head before its first aligned span a span of its own */
        fputs("    static constexpr bool kHead = true; /* rows that can start off 16 bytes */\n", e->f);
    if (k->cfg.walk) /* map.cuh's transposed walk along this output dimension (config.h) */
        fprintf(e->f, "    static constexpr int kWalk = %d;\n", k->cfg.walk_dim);
    fprintf(e->f, "    __device__ void operator()(const int64_t *idx, int n, float (&y)[kVec]) const {\n");
    index_map m = out_index_map(e, k, "idx");
    if (B->ndim) m.expr[m.n - 1] = inner_ix;
    char **loads = ts_xmalloc(sizeof *loads * (size_t)(k->nacc ? k->nacc : 1));
    for (int s = 0; s < k->nacc; s++) {
        loads[s] = ts_strfmt("x%d[i]", s);
        if (!ts_expr_reads(&k->expr, s)) continue;
        char name[16], *base = ts_strfmt("o%d", s);
        for (int d = 0; d < k->acc[s].ndim; d++) {
            const char *ix = k->acc[s].axis[d] == inner ? NULL : index_of(&m, k->acc[s].axis[d]);
            if (!ix) continue;
            char *more = ts_strfmt("%s + %s * s%d[%d]", base, ix, s, d);
            free(base);
            base = more;
        }
        snprintf(name, sizeof name, "x%d", s);
        print_span_load(e, k, s, name, base, inner, k0, "        ");
        free(base);
    }
    for (int o = 0; o < k->nextra; o++) fprintf(e->f, "        float y%d[kVec];\n", o);
    fputs("#pragma unroll\n        for (int i = 0; i < kVec; i++) {\n", e->f);
    const char *acc[2] = {"0.f", "0.f"};
    e->load_expr = (const char *const *)loads;
    for (int o = 0; o < k->nextra; o++) { /* the extra outputs (nodes of the expression): stored below */
        fputs("            {\n", e->f);
        print_expr(e, k, &k->extra_expr[o], &m, acc, "                ");
        fprintf(e->f, "                y%d[i] = v%d;\n            }\n", o, k->extra_expr[o].n - 1);
    }
    print_expr(e, k, &k->expr, &m, acc, "            ");
    e->load_expr = NULL;
    fprintf(e->f, "            y[i] = v%d;\n        }\n", k->expr.n - 1);
    for (int o = 0; o < k->nextra; o++) { /* over the output's axes, as the kernel stores y */
        fprintf(e->f, "        tsv::store_span<%s>(q%d", e->span_args, o);
        for (int d = 0; d + 1 < B->ndim; d++) fprintf(e->f, " + idx[%d] * qs%d[%d]", d, o, d);
        fprintf(e->f, ", qs%d[%d], %s, n, y%d);\n", o, B->ndim ? B->ndim - 1 : 0, k0, o);
    }
    fputs("    }\n};\n\n", e->f);
    for (int s = 0; s < k->nacc; s++) free(loads[s]);
    free(loads);
}

static void emit_reduce_functors(emitter *e, int ki, const ts_kernel *k) {
    index_map m = out_index_map(e, k, "idx");
    m.axis[m.n] = k->red_axis;
    m.expr[m.n++] = "k";
    const char *acc[2] = {"acc", "0.f"};
    fprintf(e->f, "struct K%dInner {\n", ki);
    print_fields(e, k);
    fprintf(e->f, "    __device__ float2 operator()(const int64_t *idx, int64_t k) const {\n");
    ts_expr both = k->inner;
    print_expr(e, k, &both, &m, acc, "        ");
    if (k->combine == TS_COMBINE_WSUM) {
        fprintf(e->f, "        const float score = v%d;\n", k->inner.n - 1);
        fprintf(e->f, "        float weighted;\n        {\n");
        print_expr(e, k, &k->inner_weighted, &m, acc, "            ");
        fprintf(e->f, "            weighted = v%d;\n        }\n        return make_float2(score, weighted);\n",
                k->inner_weighted.n - 1);
    } else {
        fprintf(e->f, "        return make_float2(v%d, 0.f);\n", k->inner.n - 1);
    }
    fprintf(e->f, "    }\n};\n\nstruct K%dFinish {\n", ki);
    print_fields(e, k);
    fprintf(e->f, "    __device__ float operator()(const int64_t *idx, float acc) const {\n");
    m.n--; /* no k in the finish */
    print_expr(e, k, &k->expr, &m, acc, "        ");
    fprintf(e->f, "        return v%d;\n    }\n};\n\n", k->expr.n - 1);
}

/* ---- launch code ------------------------------------------------------------------------------- */

static void print_sym(emitter *e, const ts_sym *s) { ts_sym_print(e->f, s, e->dyn_names); }

/* `        dst = v;` */
static void print_assign(emitter *e, const char *dst, ts_sym v) {
    fprintf(e->f, "        %s = ", dst);
    print_sym(e, &v);
    fputs(";\n", e->f);
}

/* `        dst = <stride of a along axis, 0 for no axis (-1)>;` */
static void print_stride(emitter *e, const char *dst, const ts_access *a, int32_t axis) {
    print_assign(e, dst, axis >= 0 ? ts_access_stride(a, axis) : ts_sym_const(0));
}

/* The pointer variable of buffer b: in a kernel's launch function (K<i>_launch) its parameter K<i>_b<j>,
 * in the graph's launch function the tensor's name or tmp<index>. */
static void buf_ptr(emitter *e, int b, char *out, size_t n) {
    const ts_buffer *B = &e->p->buf[b];
    if (e->param_of) snprintf(out, n, "K%d_b%d", e->param_id, e->param_of[b]);
    else if (B->kind == TS_BUF_INPUT) snprintf(out, n, "%s", e->in_names[B->index]);
    else if (B->kind == TS_BUF_OUTPUT) snprintf(out, n, "%s", e->out_names[B->index]);
    else snprintf(out, n, "tmp%d", B->index);
}

/* The pointer, offset and strides of access slot s into functor `var`'s fields (print_fields). */
static void fill_slot(emitter *e, const ts_kernel *k, const char *var, int s) {
    char ptr[160];
    const ts_access *a = &k->acc[s];
    buf_ptr(e, a->buf, ptr, sizeof ptr);
    fprintf(e->f, "        %s.p%d = %s;\n        %s.o%d = ", var, s, ptr, var, s);
    print_sym(e, &a->offset);
    fputs(";\n", e->f);
    for (int d = 0; d < a->ndim; d++) {
        fprintf(e->f, "        %s.s%d[%d] = ", var, s, d);
        print_sym(e, &a->stride[d]);
        fputs(";\n", e->f);
    }
}

/* Fills the fields of functor variable `var` for every access. */
static void fill_fields(emitter *e, const ts_kernel *k, const char *var) {
    for (int s = 0; s < k->nacc; s++) fill_slot(e, k, var, s);
}

/* size[], out pointer, out strides and numel of a MAP or REDUCE params struct. */
static void fill_space(emitter *e, const ts_kernel *k, const char *var) {
    char ptr[160];
    buf_ptr(e, k->out.buf, ptr, sizeof ptr);
    fprintf(e->f, "        %s.ndim = %d;\n        %s.out = %s", var, k->out.ndim, var, ptr);
    int64_t off0;
    if (!ts_sym_const_value(&k->out.offset, &off0) || off0 != 0) { /* an append's slice */
        fputs(" + (", e->f);
        print_sym(e, &k->out.offset);
        fputc(')', e->f);
    }
    fprintf(e->f, ";\n        %s.numel = 1;\n", var);
    for (int d = 0; d < k->out.ndim; d++) {
        ts_sym sz = ts_sym_axis(e->g, &e->dyn, k->out.axis[d]);
        fprintf(e->f, "        %s.size[%d] = ", var, d);
        print_sym(e, &sz);
        fprintf(e->f, ";\n        %s.out_stride[%d] = ", var, d);
        print_sym(e, &k->out.stride[d]);
        fprintf(e->f, ";\n        %s.numel *= %s.size[%d];\n", var, var, d);
    }
}

static void emit_map_launch(emitter *e, int ki, const ts_kernel *k) {
    const char *t = ctype_of(e->p->buf[k->out.buf].dtype);
    if (k->out.ndim == 0) { /* a scalar: a one-element space */
        fprintf(e->f, "    {\n        tsm::MapParams<%s, K%d> p{};\n", t, ki);
        fill_fields(e, k, "p.fn");
        char ptr[160];
        buf_ptr(e, k->out.buf, ptr, sizeof ptr);
        fprintf(e->f, "        p.ndim = 1;\n        p.size[0] = 1;\n        p.out = %s;\n        p.out_stride[0] = 1;\n"
                      "        p.numel = 1;\n",
                ptr);
    } else {
        fprintf(e->f, "    {\n        tsm::MapParams<%s, K%d> p{};\n", t, ki);
        fill_fields(e, k, "p.fn");
        fill_space(e, k, "p");
    }
    for (int o = 0; o < k->nextra; o++) { /* extra outputs: over the output's axes (a scalar's: one element) */
        const ts_access *a = &k->extra_out[o];
        char ptr[160], dst[48];
        buf_ptr(e, a->buf, ptr, sizeof ptr);
        fprintf(e->f, "        p.fn.q%d = %s + (", o, ptr);
        print_sym(e, &a->offset);
        fputs(");\n", e->f);
        for (int d = 0; d < a->ndim; d++) {
            snprintf(dst, sizeof dst, "p.fn.qs%d[%d]", o, d);
            print_assign(e, dst, a->stride[d]);
        }
        if (a->ndim == 0) fprintf(e->f, "        p.fn.qs%d[0] = 1;\n", o);
    }
    fprintf(e->f, "        err = tsm::launch_map(p, sms, stream);\n        if (err != cudaSuccess) return err;\n    }\n");
}

static void emit_reduce_launch(emitter *e, int ki, const ts_kernel *k) {
    const char *t = ctype_of(e->p->buf[k->out.buf].dtype);
    static const char *const combine[] = {"tsr::kSum", "tsr::kMax", "tsr::kWeightedSum"};
    fprintf(e->f, "    {\n        tsr::ReduceParams<%s, K%dInner, K%dFinish> p{};\n", t, ki, ki);
    fill_fields(e, k, "p.inner");
    fill_fields(e, k, "p.finish");
    fill_space(e, k, "p");
    ts_sym len = ts_sym_axis(e->g, &e->dyn, k->red_axis);
    fprintf(e->f, "        p.len = ");
    print_sym(e, &len);
    fprintf(e->f, ";\n        p.c = ");
    print_float(e->f, k->c);
    fprintf(e->f, ";\n        err = tsr::launch_reduce<%s, K%dInner, K%dFinish, %s>(p, sms, stream);\n"
                  "        if (err != cudaSuccess) return err;\n    }\n",
            t, ki, ki, combine[k->combine]);
}

/* ---- the header -------------------------------------------------------------------------------- */

static void print_dims(emitter *e, const int32_t *axes, int n) {
    fputc('[', e->f);
    for (int d = 0; d < n; d++) fprintf(e->f, "%s%s", d ? ", " : "", e->g->axes[axes[d]].name);
    fputc(']', e->f);
}

/* The banner's usage notes: the stb contract, the entry points, names that were mangled. */
static void emit_banner_use(emitter *e) {
    const char *n = e->name;
    fprintf(e->f, "//\n// Use (stb-style): every file that calls it includes this header, which then declares, in plain C\n"
                  "// (gcc, g++, clang, FFI) or C++ (nvcc):\n"
                  "//   size_t %s_workspace_bytes(%s);  /* inline; 0: pass NULL */\n"
                  "//   int %s_run(void *const *buffers /* inputs, then outputs, in the order above */,\n"
                  "//       const int64_t *dims /* the dynamic sizes in the order above */, void *workspace, cudaStream_t)\n"
                  "//       returns a cudaError_t value; errors are returned, never printed\n"
                  "//   size_t %s_workspace(const int64_t *dims);  const char *%s_fallback(void);\n"
                  "//   int %s_graph_run(<as %s_run>);  int %s_graph_reset(void);\n"
                  "//       the same work as a CUDA graph: run, then captured, on the first call for a device, dims,\n"
                  "//       buffers, workspace and stream; replayed while they stay the same; updated or captured again\n"
                  "//       when they change. One graph is cached, under a lock; _graph_reset destroys it. The stream must\n"
                  "//       not be NULL or cudaStreamLegacy (cudaErrorStreamCaptureUnsupported); inside the caller's own\n"
                  "//       stream capture it runs as _run.\n"
                  "//   cudaError_t %s_launch(<inputs>, <outputs>, %s<workspace>, stream);  /* nvcc only: typed */\n"
                  "// Exactly one .cu file compiled by nvcc defines TSOPT_%s_IMPLEMENTATION before including it: only\n"
                  "// that file compiles the kernels.\n",
            n, e->dyn.n ? "<dynamic sizes>" : "void", n, n, n, n, n, n, n, e->dyn.n ? "<dynamic sizes>, " : "", e->upper);
    bool renamed = false;
    for (int i = 0; i < e->g->ninputs + e->nout; i++) {
        const char *orig = i < e->g->ninputs ? e->g->inputs[i].name : e->g->outputs[i - e->g->ninputs].name;
        const char *c = i < e->g->ninputs ? e->in_names[i] : e->out_names[i - e->g->ninputs];
        if (strcmp(orig, c) == 0) continue;
        fprintf(e->f, "%s %s → %s", renamed ? "," : "// Renamed in C (reserved words, see tsopt's README):", orig, c);
        renamed = true;
    }
    for (int d = 0; d < e->dyn.n; d++) {
        const char *orig = e->g->axes[e->dyn.axis[d]].name;
        if (strcmp(orig, e->dyn_names[d]) == 0) continue;
        fprintf(e->f, "%s %s → %s", renamed ? "," : "// Renamed in C (reserved words, see tsopt's README):", orig,
                e->dyn_names[d]);
        renamed = true;
    }
    if (renamed) fputc('\n', e->f);
}

/* One banner line per GEMM and attention kernel: its configuration (src/config.c), e.g. the tile tune kept. */
static void emit_banner_configs(emitter *e) {
    char buf[160];
    for (int i = 0; i < e->p->nk; i++)
        if (*ts_config_describe(&e->p->k[i], buf, sizeof buf))
            fprintf(e->f, "// config:    kernel %d (%s): %s\n", i + 1, ts_kernel_kind_name(e->p->k[i].kind), buf);
}

static void emit_banner(emitter *e) {
    const ts_emit_opts *o = e->o;
    const char *base = strrchr(o->source_path, '/');
    char *desc = ts_plan_describe(e->p, e->g);
    fprintf(e->f, "// %s.cuh — generated by tsopt %s from %s — do not edit.\n//\n", e->name, TS_VERSION,
            base ? base + 1 : o->source_path);
    fprintf(e->f, "// graph:     %s (source hash %016llx)\n", e->g->name,
            ts_fnv1a(TS_FNV_OFFSET, o->source_text, o->source_len));
    fprintf(e->f, "// plan:      %s — %d kernel%s: %s\n", e->p->name, e->p->nk, e->p->nk == 1 ? "" : "s", desc);
    fprintf(e->f, "// predicted: %.4f ms on %s at the typical sizes (%.2fx the %.4f ms predicted for one kernel per op)\n",
            e->p->predicted_s * 1e3, o->cost_model->gpu, o->baseline_s / e->p->predicted_s, o->baseline_s * 1e3);
    fprintf(e->f, "// cost model: %s (%s)\n", o->cost_model->path,
            o->cost_model->calibrated ? "calibrated" : "uncalibrated: datasheet figures");
    fprintf(e->f, "// measured:  %s\n", o->measured ? o->measured : "not tuned on a GPU");
    emit_banner_configs(e);
    fputs("//\n", e->f);
    if (ts_plan_uses_cublas(e->p))
        fprintf(e->f, "// Depends on the CUDA toolkit's headers and cuBLASLt (compiled with --allow-cublas: link with\n"
                      "// -lcublasLt; TSOPT_%s_NEEDS_CUBLASLT is defined). Build flags: -arch=sm_90a for the Hopper kernels\n"
                      "// (wgmma, TMA; plain sm_90 or sm_80+ runs the mma.sync fallback), and no -rdc (relocatable device\n"
                      "// code serialises wgmma). %s_fallback() says when a launch fell back.\n//\n// Buffers (row-major):\n",
                e->upper, e->name);
    else
        fprintf(e->f, "// Depends only on the CUDA toolkit's headers. Build flags: -arch=sm_90a for the Hopper kernels (wgmma,\n"
                      "// TMA; plain sm_90 or sm_80+ runs the mma.sync fallback), and no -rdc (relocatable device code\n"
                      "// serialises wgmma). %s_fallback() says when a launch fell back.\n//\n// Buffers (row-major):\n",
                e->name);
    for (int i = 0; i < e->g->ninputs; i++) {
        const ts_node *n = &e->g->nodes[e->g->inputs[i].node];
        fprintf(e->f, "//   %s %-10s %s ", e->g->inputs[i].inout ? "inout" : "in ", e->in_names[i], ts_dtype_name(n->dtype));
        print_dims(e, n->axis, n->ndim);
        fputc('\n', e->f);
    }
    for (int i = 0; i < e->nout; i++) {
        fprintf(e->f, "//   out %-10s %s ", e->out_names[i], ts_dtype_name(e->g->outputs[i].dtype));
        print_dims(e, e->g->outputs[i].ref.view.axis, e->g->outputs[i].ref.view.ndim);
        fputc('\n', e->f);
    }
    for (int i = e->nout; i < e->g->noutputs; i++) { /* the appends: what each writes in place */
        const ts_output *up = &e->g->outputs[i];
        const ts_node *u = &e->g->nodes[up->ref.node];
        const char *at = e->g->axes[u->at_axis].name, *w = e->g->axes[u->reduce_axis].name;
        if (u->rows_axis < 0)
            fprintf(e->f, "//   (%s is written in place: index %s - 1 of %s, the appended value; nothing else; needs 1 <= %s <= %s)\n",
                    e->in_names[up->input], at, w, at, w);
        else
            fprintf(e->f, "//   (%s is written in place: indices %s - %s .. %s - 1 of %s, the appended rows; nothing else; "
                          "needs %s <= %s <= %s)\n",
                    e->in_names[up->input], at, e->g->axes[u->rows_axis].name, at, w, e->g->axes[u->rows_axis].name, at, w);
    }
    fprintf(e->f, "// Sizes:");
    for (int a = 0; a < e->g->naxes; a++) {
        const ts_axis *ax = &e->g->axes[a];
        if (ax->name[0] == '_') continue;
        int32_t root = ts_axis_root(e->g, a);
        if (ax->dynamic && root != a) fprintf(e->f, " %s=%s", ax->name, e->g->axes[root].name); /* like: root */
        else if (ax->dynamic) fprintf(e->f, " %s=dynamic", ax->name);
        else fprintf(e->f, " %s=%lld", ax->name, (long long)ax->size);
    }
    fputc('\n', e->f);
    if (e->dyn.n) {
        fputs("// dims[] (the C ABI's dynamic sizes, in order):", e->f);
        for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, " %s", e->g->axes[e->dyn.axis[d]].name);
        fputc('\n', e->f);
    }
    emit_banner_use(e);
    free(desc);
}

/* "const __half *X, const __half *W, __half *Y, int64_t t, " */
static void print_signature(emitter *e) {
    for (int i = 0; i < e->g->ninputs; i++)
        fprintf(e->f, "%s%s *%s, ", e->g->inputs[i].inout ? "" : "const ", ctype_of(e->g->nodes[e->g->inputs[i].node].dtype),
                e->in_names[i]);
    for (int i = 0; i < e->nout; i++) fprintf(e->f, "%s *%s, ", ctype_of(e->g->outputs[i].dtype), e->out_names[i]);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "int64_t %s, ", e->dyn_names[d]);
}

/* Bytes of a workspace slot, rounded up to 256 (each slot starts 256-byte aligned). */
static void print_slot_bytes(emitter *e, int slot) {
    fputs("(((size_t)", e->f);
    print_sym(e, &e->ws.slot_bytes[slot]);
    fputs(" + 255) & ~(size_t)255)", e->f);
}

static void emit_workspace_fn(emitter *e) {
    fprintf(e->f, "/* Bytes of workspace %s_run and %s_launch need (0: pass NULL). */\nstatic inline size_t %s_workspace_bytes(",
            e->name, e->name, e->name);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "%sint64_t %s", d ? ", " : "", e->dyn_names[d]);
    if (e->dyn.n == 0) fputs("void", e->f);
    fputs(") {\n", e->f);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "    (void)%s;\n", e->dyn_names[d]);
    fputs("    size_t bytes = 0;\n", e->f);
    for (int s = 0; s < e->ws.nslot; s++) {
        fputs("    bytes += ", e->f);
        print_slot_bytes(e, s);
        fputs(";\n", e->f);
    }
    if (ts_plan_uses_cublas(e->p)) fprintf(e->f, "    bytes += %d; /* cuBLASLt's, after the temporaries */\n", TS_LT_WORKSPACE_BYTES);
    fputs("    return bytes;\n}\n\n", e->f);
}

/* The stride of `axis` in access a, or 0 when a does not vary along it. */
/* `dst = ptr + offset;` for access a. */
static void print_base(emitter *e, const char *dst, const ts_access *a) {
    char ptr[160];
    buf_ptr(e, a->buf, ptr, sizeof ptr);
    fprintf(e->f, "        %s = %s + ", dst, ptr);
    print_sym(e, &a->offset);
    fputs(";\n", e->f);
}

/* Records, for <name>_fallback(), that kernel ki ran its mma.sync form instead of the wgmma one. */
static void print_fallback_note(emitter *e, int ki, const char *what) {
    fprintf(e->f, "            fallback_note = \"kernel %d (%s): ran the mma.sync fallback, not the sm_90a wgmma kernel "
                  "(the GPU is not sm_90, or this header was not compiled with -arch=sm_90a)\";\n", ki + 1, what);
}

/* Split-K through memory (config sk_chunks > 1): the chunks' sums in the kernel's scratch (gemm.cuh k_chunks). */
static void emit_k_chunks(emitter *e, const ts_kernel *k, const char *in) {
    if (k->cfg.sk_chunks <= 1) return;
    char ptr[160];
    buf_ptr(e, k->scratch, ptr, sizeof ptr);
    TS_ASSERT(k->k_partials);
    fprintf(e->f, "%s        p.k_partials = static_cast<float *>(%s);\n%s        p.k_partials_floats = %lld;\n"
                  "%s        p.k_chunks = %d; /* split-K through memory as well */\n",
            in, ptr, in, (long long)e->p->buf[k->scratch].elems, in, k->cfg.sk_chunks);
}

/* The GEMM's template calls with its configuration (src/config.c) as template arguments: the skinny form
 * for M ≤ skinny_m (alone when M is static), else the wgmma kernel with the mma.sync one as fallback. */
static void emit_gemm_calls(emitter *e, int ki, const ts_kernel *k, const char *t) {
    const ts_kernel_config *c = &k->cfg;
    const char *kn = k->b_kn ? "true" : "false", *du = k->b1 >= 0 ? "true" : "false";
    /* the template arguments after the functor: TWO (a second operand pair) and A_KM (A read M-major; never with
     * TWO, nor skinny: config.c) — after PP in the wgmma call, defaults not printed; after SPLIT = 1 in the fallback */
    const bool a_km = ts_gemm_a_km(k);
    TS_ASSERT(!a_km || (!k->two_k && c->skinny_m == 0));
    const char *two = k->two_k ? ", true" : a_km ? ", false, true" : "";
    if (c->skinny_m > 0) {
        const char *in = c->skinny_only ? "" : "    ";
        if (!c->skinny_only) fprintf(e->f, "        if (p.M <= %d) { /* decode sizes: stream B at DRAM bandwidth */\n", c->skinny_m);
        emit_k_chunks(e, k, in);
        char split[24] = ""; /* split-K over a cluster (config.h), and a second operand pair; defaults not printed */
        if (c->sk_split > 1 || k->two_k) snprintf(split, sizeof split, ", %d%s", c->sk_split > 1 ? c->sk_split : 1, k->two_k ? ", true" : "");
        fprintf(e->f, "%s        err = tsg::launch_gemm<%s, %d, %d, 64, 1, 4, %d, %s, %s, K%d%s>(p, stream);%s\n", in, t,
                c->sk_tile_m, c->sk_tile_n, c->sk_stages, kn, du, ki, split,
                c->skinny_only ? " /* decode sizes: stream B at DRAM bandwidth */" : "");
        if (c->skinny_only) {
            fputs("        if (err != cudaSuccess) return err;\n    }\n", e->f);
            return;
        }
        fputs("        } else {\n", e->f);
    }
    const char *in = c->skinny_m > 0 ? "    " : "";
    fprintf(e->f, "%s        err = tsg90::launch_gemm_sm90<%s, %d, %d, %d, %d, %s, %s, K%d, %s%s>(p, stream);\n", in, t,
            c->tile_m, c->tile_n, c->stages, c->cluster_m, kn, du, ki, c->pingpong ? "true" : "false", two);
    fprintf(e->f, "%s        if (err == cudaErrorNotSupported) { /* not a Hopper GPU, or built without sm_90a */\n%s", in, in);
    print_fallback_note(e, ki, "GEMM");
    /* SPLIT = 1, TWO, A_KM, and the fallback's reach (tst::Reach: compiled only into device code that is not sm_90a) */
    fprintf(e->f, "%s            err = tsg::launch_gemm<%s, %d, %d, %d, %d, %d, %d, %s, %s, K%d, 1, %s, %s, tst::kOtherCode>(p, stream);\n"
                  "%s        }\n",
            in, t, c->fb_tile_m, c->fb_tile_n, c->fb_tile_k, c->fb_warps_m, c->fb_warps_n, c->fb_stages, kn, du, ki,
            k->two_k ? "true" : "false", a_km ? "true" : "false", in);
    if (c->skinny_m > 0) fputs("        }\n", e->f);
    fputs("        if (err != cudaSuccess) return err;\n    }\n", e->f);
}

/* An fp32 GEMM's template call (gemm_f32.cuh, 3xTF32; every GPU from sm_80; or gemm_f32_sm90.cuh's wgmma kernel,
 * which falls back to gemm_f32.cuh's off sm_90a) with its configuration. */
static void emit_gemm_f32_call(emitter *e, int ki, const ts_kernel *k) {
    const ts_kernel_config *c = &k->cfg;
    if (c->f32_wgmma) {
        fprintf(e->f, "        err = tsg90::launch_gemm_f32_sm90<%s, K%d>(p, stream); /* fp32: 3xTF32 by wgmma */\n"
                      "        if (err != cudaSuccess) return err;\n    }\n",
                k->b_kn ? "true" : "false", ki);
        return;
    }
    emit_k_chunks(e, k, "");
    fprintf(e->f, "        err = tsg::launch_gemm_f32<%d, %d, %d, %d, %d, %d, %s, %s, K%d, %d>(p, stream); /* fp32: 3xTF32 */\n"
                  "        if (err != cudaSuccess) return err;\n    }\n",
            c->fb_tile_m, c->fb_tile_n, c->fb_tile_k, c->fb_warps_m, c->fb_warps_n, c->fb_stages, k->b_kn ? "true" : "false",
            k->b1 >= 0 ? "true" : "false", ki, c->sk_split > 1 ? c->sk_split : 1);
}

/* Whether buffer b is an input no kernel writes (not an inout): a weight, which a GEMM may stream before the
 * kernels before it in the launch sequence are done (GemmParams::b_ready; with A one too, a_ready: its whole
 * main loop). */
static bool read_only_input(const emitter *e, int b) {
    const ts_buffer *buf = &e->p->buf[b];
    return buf->kind == TS_BUF_INPUT && !e->g->inputs[buf->index].inout;
}

/* A two-pair GEMM's second operand pair (contract_add): A2, B2 and their K, leading dims and batch strides. */
static void emit_gemm_second_pair(emitter *e, const ts_kernel *k) {
    const ts_access *a2 = &k->acc[k->a2], *b2 = &k->acc[k->b2];
    print_base(e, "p.A2", a2);
    print_base(e, "p.B2", b2);
    print_assign(e, "p.K2", ts_sym_axis(e->g, &e->dyn, k->red_axis2));
    print_assign(e, "p.lda2", ts_access_stride(a2, k->m_axis));
    print_assign(e, "p.ldb2", ts_access_stride(b2, k->b_kn ? k->red_axis2 : k->n_axis));
    print_stride(e, "p.a2_batch_stride", a2, k->batch_axis);
    print_stride(e, "p.b2_batch_stride", b2, k->batch_axis);
}

static const char *cuda_data_type(ts_dtype t) {
    return t == TS_FP16 ? "CUDA_R_16F" : t == TS_BF16 ? "CUDA_R_16BF" : "CUDA_R_32F";
}

/* A matrix operand of the cuBLASLt call (templates/cublaslt.cuh tslt::Gemm), into fields lt.<x>, lt.ld<x>,
 * lt.<x>_batch (x: a, b or c) and lt.<contig> where given: pointer, leading dimension (the stride along the
 * axis that is not unit-stride), batch stride, and whether `unit` is the unit-stride axis. */
static void fill_library_operand(emitter *e, const ts_kernel *k, const ts_access *a, char x, int32_t unit,
                                 int32_t other, const char *contig) {
    char f[48];
    ts_sym su = ts_access_stride(a, unit);
    bool along = ts_sym_is_one(&su);
    snprintf(f, sizeof f, "lt.%c", x - 'a' + 'A');
    print_base(e, f, a);
    snprintf(f, sizeof f, "lt.ld%c", x);
    print_stride(e, f, a, along ? other : unit);
    snprintf(f, sizeof f, "lt.%c_batch", x);
    print_stride(e, f, a, k->batch_axis);
    if (contig) fprintf(e->f, "        lt.%s = %s;\n", contig, along ? "true" : "false");
}

/* GEMM kernel k's row count: m_axis's size, times m_outer's where rows are merged over both. */
static ts_sym gemm_rows_sym(const emitter *e, const ts_kernel *k) {
    ts_sym m = ts_sym_axis(e->g, &e->dyn, k->m_axis);
    return k->m_outer >= 0 ? ts_sym_mul(m, ts_sym_axis(e->g, &e->dyn, k->m_outer)) : m;
}

/* `<v>.M/N/K/batch = ...;` of GEMM kernel k (a batch axis with batch_outer nested in it: their product; rows
 * merged over m_outer: theirs). */
static void print_gemm_dims(emitter *e, const ts_kernel *k, const char *v) {
    char f[32];
    const ts_sym dims[3] = {gemm_rows_sym(e, k), ts_sym_axis(e->g, &e->dyn, k->n_axis), ts_sym_axis(e->g, &e->dyn, k->red_axis)};
    const char *names[3] = {"M", "N", "K"};
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof f, "%s.%s", v, names[i]);
        print_assign(e, f, dims[i]);
    }
    ts_sym batch = k->batch_axis >= 0 ? ts_sym_axis(e->g, &e->dyn, k->batch_axis) : ts_sym_const(1);
    if (k->batch_outer >= 0) batch = ts_sym_mul(batch, ts_sym_axis(e->g, &e->dyn, k->batch_outer)); /* nested */
    snprintf(f, sizeof f, "%s.batch", v);
    print_assign(e, f, batch);
}

/* The cuBLASLt call of a GEMM configured `library` (--allow-cublas; libgemm.h matched it): the same GEMM and
 * epilogue as the plan's own kernel, which runs instead when cuBLASLt has no algorithm for the call — but for
 * A read transposed, which no own template takes: then the launch fails with cudaErrorNotSupported, said by
 * <name>_fallback(). */
static void emit_gemm_library_call(emitter *e, int ki, const ts_kernel *k) {
    ts_lt_epilogue ep;
    const char *why = NULL;
    bool ok = ts_libgemm_match(e->g, e->p, k, &ep, &why);
    TS_ASSERT(ok); /* check_library_gemm refused the plan otherwise */
    const ts_access *a = &k->acc[k->a], *b = &k->acc[k->b0];
    fprintf(e->f, "        /* cuBLASLt (--allow-cublas): D = %s(%s·A·B%s%s) */\n", ep.act == TS_LT_ACT_RELU ? "relu" : ep.act == TS_LT_ACT_GELU ? "gelu" : "",
            "alpha", ep.bias >= 0 ? " + bias" : "", ep.residual >= 0 ? " + beta·C" : "");
    fprintf(e->f, "        static tslt::Cache lt_cache;\n        tslt::Gemm lt{};\n        lt.ab_type = %s;\n        lt.d_type = %s;\n",
            cuda_data_type(e->p->buf[a->buf].dtype), cuda_data_type(e->p->buf[k->out.buf].dtype));
    print_gemm_dims(e, k, "lt");
    fill_library_operand(e, k, a, 'a', k->red_axis, k->m_axis, "a_kcontig");
    fill_library_operand(e, k, b, 'b', k->n_axis, k->red_axis, "b_ncontig");
    if (ep.residual >= 0) fill_library_operand(e, k, &k->acc[ep.residual], 'c', k->n_axis, k->m_axis, NULL);
    fputs("        lt.alpha = ", e->f);
    print_float(e->f, ep.alpha);
    fputs(";\n        lt.beta = ", e->f);
    print_float(e->f, ep.beta);
    fputs(";\n", e->f);
    char ptr[160];
    buf_ptr(e, k->out.buf, ptr, sizeof ptr);
    fprintf(e->f, "        lt.D = %s;\n", ptr);
    print_stride(e, "lt.ldd", &k->out, k->m_axis);
    print_stride(e, "lt.d_batch", &k->out, k->batch_axis);
    if (ep.bias >= 0) print_base(e, "lt.bias", &k->acc[ep.bias]);
    fprintf(e->f, "        lt.act = %s;\n", ep.act == TS_LT_ACT_RELU ? "tslt::kRelu" : ep.act == TS_LT_ACT_GELU ? "tslt::kGelu" : "tslt::kNone");
    fprintf(e->f, "        err = tslt::matmul(lt, lt_cache, lt_workspace, %d, stream);\n", TS_LT_WORKSPACE_BYTES);
    if (ts_gemm_library_only(e->p, k)) {
        fprintf(e->f, "        if (err == cudaErrorNotSupported) fallback_note = \"kernel %d (GEMM): cuBLASLt has no algorithm for "
                      "this call, and no tsopt template runs it (%s)\";\n        if (err != cudaSuccess) return err;\n",
                ki + 1, "A read transposed");
        return;
    }
    fputs("        if (err != cudaErrorNotSupported) return err; /* done, or a real error */\n", e->f);
    fprintf(e->f, "        fallback_note = \"kernel %d (GEMM): cuBLASLt has no algorithm for this call; ran tsopt's own kernel\";\n",
            ki + 1);
}

static void emit_gemm_launch(emitter *e, int ki, const ts_kernel *k) {
    const ts_access *a = &k->acc[k->a], *b = &k->acc[k->b0];
    const char *t = ctype_of(e->p->buf[a->buf].dtype);
    if (ts_gemm_library_only(e->p, k)) { /* cuBLASLt alone (no own template runs it) */
        fputs("    {\n", e->f);
        emit_gemm_library_call(e, ki, k);
        fputs("    }\n", e->f);
        return;
    }
    fprintf(e->f, "    {\n        tsg::GemmParams<%s, K%d> p{};\n", t, ki);
    print_base(e, "p.A", a);
    print_base(e, "p.B0", b);
    if (k->b1 >= 0) print_base(e, "p.B1", &k->acc[k->b1]);
    print_gemm_dims(e, k, "p");
    print_assign(e, "p.lda", ts_access_stride(a, ts_gemm_a_km(k) ? k->red_axis : k->m_axis)); /* the non-unit stride */
    print_assign(e, "p.ldb", ts_access_stride(b, k->b_kn ? k->red_axis : k->n_axis));
    print_stride(e, "p.a_batch_stride", a, k->batch_axis);
    print_stride(e, "p.b_batch_stride", b, k->batch_axis);
    char ptr[160];
    buf_ptr(e, k->out.buf, ptr, sizeof ptr);
    fprintf(e->f, "        p.ep.out = %s;\n        p.ep.n = p.N;\n", ptr);
    print_stride(e, "p.ep.ob", &k->out, k->batch_axis);
    print_assign(e, "p.ep.om", ts_access_stride(&k->out, k->m_axis));
    fill_fields(e, k, "p.ep");
    if (k->row_parts) { /* the tiles' results pass through the product's buffer */
        buf_ptr(e, k->scratch, ptr, sizeof ptr);
        fprintf(e->f, "        p.rows_scratch = %s;\n", ptr);
        print_assign(e, "p.rows_scratch_bytes", ts_workspace_buffer_bytes(e->p, e->g, &e->dyn, k->scratch));
    }
    for (int o = 0; o < k->nrowstat; o++) { /* where the wgmma kernel's grid publishes the rows' values */
        buf_ptr(e, k->rowstat_buf[o], ptr, sizeof ptr);
        fprintf(e->f, "        p.row_stats[%d] = %s;\n", o, ptr);
    }
    if (k->two_k) emit_gemm_second_pair(e, k);
    bool b_ready = read_only_input(e, b->buf) && (k->b1 < 0 || read_only_input(e, k->acc[k->b1].buf)) &&
                   (!k->two_k || read_only_input(e, k->acc[k->b2].buf));
    if (b_ready) fputs("        p.b_ready = true;\n", e->f);
    if (b_ready && read_only_input(e, a->buf) && (!k->two_k || read_only_input(e, k->acc[k->a2].buf)))
        fputs("        p.a_ready = true; /* the main loop runs before the wait for the kernel before */\n", e->f);
    if (k->cfg.library) emit_gemm_library_call(e, ki, k);
    if (k->cfg.tf32x3) emit_gemm_f32_call(e, ki, k);
    else emit_gemm_calls(e, ki, k, t);
}

/* Whether the head axes (kv head outer, query-only head inner) nest into one head index in access a. */
static bool heads_nest(emitter *e, const ts_access *a, int32_t outer, int32_t inner) {
    return ts_sym_equal(ts_access_stride(a, outer), ts_sym_mul(ts_access_stride(a, inner), ts_sym_axis(e->g, &e->dyn, inner)));
}

/* Whether kernel k's kv heads and group form one head index (else the kv heads are its batch); kvh, qh:
 * its head axes (ts_attention_head_axes). With a batch axis of its own the heads always nest (src/plan.c
 * copies Q where they would not). */
static bool attention_heads_merged(emitter *e, const ts_kernel *k, int32_t *kvh, int32_t *qh) {
    ts_attention_head_axes(k->heads_ndim, k->head_axis, k->group, kvh, qh);
    return k->batch_axis >= 0 || *qh < 0 || *kvh < 0 ||
           (heads_nest(e, &k->acc[k->a], *kvh, *qh) && heads_nest(e, &k->out, *kvh, *qh));
}

/* Heads as the kernel's head index (n_q_heads query heads over n_kv_heads kv heads): every head in one
 * grid dimension, so that causal rows of all heads are scheduled longest first. When the query-only heads
 * of GQA do not nest under the kv heads, the kv heads become the batch instead. */
static void emit_attention_heads(emitter *e, const ts_kernel *k, const ts_access *const *acc) {
    int32_t kvh, qh, bat = k->batch_axis;
    bool merged = attention_heads_merged(e, k, &kvh, &qh);
    ts_sym zero = ts_sym_const(0), one = ts_sym_const(1);
    const char *nm[4] = {"q", "k", "v", "o"};
    for (int i = 0; i < 4; i++) {
        char dst[32];
        bool query_side = i == 0 || i == 3;
        int32_t head = query_side ? (qh >= 0 ? qh : kvh) : kvh;
        snprintf(dst, sizeof dst, "p.%s_batch_stride", nm[i]);
        print_assign(e, dst, bat >= 0 ? ts_access_stride(acc[i], bat) : !merged && kvh >= 0 ? ts_access_stride(acc[i], kvh) : zero);
        snprintf(dst, sizeof dst, "p.%s_head_stride", nm[i]);
        bool has_head = head >= 0 && (merged || head == qh); /* unmerged: kv heads are the batch */
        print_assign(e, dst, has_head ? ts_access_stride(acc[i], head) : zero);
        snprintf(dst, sizeof dst, "p.%s_seq_stride", nm[i]);
        print_assign(e, dst, ts_access_stride(acc[i], query_side ? k->m_axis : k->red_axis));
    }
    ts_sym nkv = kvh >= 0 ? ts_sym_axis(e->g, &e->dyn, kvh) : one;
    ts_sym nq = qh >= 0 ? ts_sym_axis(e->g, &e->dyn, qh) : one;
    print_assign(e, "p.batch", bat >= 0 ? ts_sym_axis(e->g, &e->dyn, bat) : merged ? one : nkv);
    print_assign(e, "p.n_q_heads", merged ? ts_sym_mul(nkv, nq) : nq);
    print_assign(e, "p.n_kv_heads", merged ? nkv : one);
}

/* An attention kernel's head dim: its tiled template's (the value axis's size, or the next supported one above
 * it, zero-padded: config.h; the decode form's is ts_config_attention_decode_dim). */
static int64_t head_dim(const emitter *e, const ts_kernel *k) {
    return ts_config_attention_kernel_dim(e->g->axes[k->n_axis].size);
}

/* The positive scale a causal score's unmasked form multiplies the dot product by, folded into the softmax's
 * constant (1: none; ts_attention_unmasked). */
static double unmasked_scale(const emitter *e, const ts_kernel *k) {
    ts_expr below = {0};
    double scale = 1;
    ts_attention_unmasked(k, head_dim(e, k), &below, &scale);
    free(below.node);
    return scale;
}

static void emit_attention_launch(emitter *e, int ki, const ts_kernel *k) {
    const ts_access *q = &k->acc[k->a], *kk = &k->acc[k->b0], *v = &k->acc[k->b1];
    const char *t = ctype_of(e->p->buf[q->buf].dtype);
    fprintf(e->f, "    {\n        tsa::AttnParams<%s, K%d> p{};\n", t, ki);
    print_base(e, "p.q", q);
    print_base(e, "p.k", kk);
    print_base(e, "p.v", v);
    char ptr[160];
    buf_ptr(e, k->out.buf, ptr, sizeof ptr);
    fprintf(e->f, "        p.o = %s;\n", ptr);
    const ts_access *acc[4] = {q, kk, v, &k->out};
    emit_attention_heads(e, k, acc);
    print_assign(e, "p.t_q", ts_sym_axis(e->g, &e->dyn, k->m_axis));
    print_assign(e, "p.t_kv", ts_sym_axis(e->g, &e->dyn, k->red_axis));
    print_assign(e, "p.d", ts_sym_axis(e->g, &e->dyn, k->n_axis));
    if (score_loads(k)) { /* the mask the score functor reads */
        for (int s = 0; s < k->nacc; s++)
            if (ts_expr_reads(&k->expr, s)) fill_slot(e, k, "p.score", s);
        print_assign(e, "p.score.nq", ts_sym_axis(e->g, &e->dyn, k->m_axis));
        print_assign(e, "p.score.nk", ts_sym_axis(e->g, &e->dyn, k->red_axis));
    }
    fputs("        p.c = ", e->f);
    print_float(e->f, k->c * unmasked_scale(e, k)); /* a score's positive scale, folded (emit_score_functor) */
    const ts_kernel_config *c = &k->cfg; /* src/config.c */
    long long d = (long long)head_dim(e, k), dd = (long long)ts_config_attention_decode_dim(e->g->axes[k->n_axis].size);
    fputs(";\n", e->f);
    if (c->dec_only) { /* t_q is static and few: the split-key decode kernel alone */
        fprintf(e->f, "        err = tsa::launch_attention_decode<%lld>(p, stream);\n"
                      "        if (err != cudaSuccess) return err;\n    }\n", dd);
        return;
    }
    if (c->dec_rows > 0) /* a dynamic t_q: the decode kernel when it is few rows */
        fprintf(e->f, "        if (p.t_q <= %d) {\n            err = tsa::launch_attention_decode<%lld>(p, stream);\n"
                      "        } else {\n", c->dec_rows, dd);
    const char *in = c->dec_rows > 0 ? "    " : "";
    fprintf(e->f, "%s        err = tsa90::launch_attention_sm90<%lld, %d, %s, %d>(p, stream);\n"
                  "%s        if (err == cudaErrorNotSupported) { /* not a Hopper GPU, or built without sm_90a */\n", in, d,
            c->stages, c->pingpong ? "true" : "false", c->tile_n, in);
    print_fallback_note(e, ki, "attention");
    fprintf(e->f, "%s            err = tsa::launch_attention<%lld, %d, %d, %d, %d, tst::kOtherCode>(p, stream);\n%s        }\n", in, d,
            c->fb_tile_m, c->fb_tile_n, c->fb_warps_m, c->fb_tile_k, in);
    if (c->dec_rows > 0) fputs("        }\n", e->f);
    fputs("        if (err != cudaSuccess) return err;\n    }\n", e->f);
}

/* ---- ROW kernels (row.cuh) --------------------------------------------------------------------- */

/* The outputs of a ROW kernel: out, then extra_out[0..nextra), with their expressions. */
static const ts_access *row_out(const ts_kernel *k, int o) { return o == 0 ? &k->out : &k->extra_out[o - 1]; }
static const ts_expr *row_out_expr(const ts_kernel *k, int o) { return o == 0 ? &k->expr : &k->extra_expr[o - 1]; }
/* Whether output o is written once per row beside per-position ones (plan.h extra_per_row). */
static bool row_out_per_row(const ts_kernel *k, int o) { return o > 0 && k->extra_per_row[o - 1]; }
static bool row_has_per_row_outs(const ts_kernel *k) {
    for (int o = 1; o <= k->nextra; o++)
        if (row_out_per_row(k, o)) return true;
    return false;
}

/* Operands cached in registers for the whole row (ts_row_operand_cached). Returns cache[slot] (heap): the
 * slot's index among the cached operands, or -1; *n: their number. */
static int *row_cached(const ts_kernel *k, int *n) {
    int *cache = ts_xmalloc(sizeof *cache * (size_t)(k->nacc ? k->nacc : 1));
    *n = 0;
    for (int s = 0; s < k->nacc; s++) cache[s] = ts_row_operand_cached(k, s) ? (*n)++ : -1;
    return cache;
}

/* A ROW kernel the template can run, or an error naming the kernel and the problem. */
static int check_row_kernel(const emitter *e, int ki, const ts_kernel *k, char **err) {
    const ts_buffer *B = &e->p->buf[k->out.buf];
    bool has_row_axis = false;
    for (int d = 0; d < B->ndim; d++) has_row_axis |= B->axis[d] == k->red_axis;
    if (k->nstage < 1 || k->nstage > TS_ROW_MAX_STAGES)
        *err = ts_strfmt("kernel %d: a ROW kernel needs 1 to %d stages, not %d", ki, TS_ROW_MAX_STAGES, k->nstage);
    else if (k->nextra < 0 || k->nextra > TS_KERNEL_MAX_OUTS - 1)
        *err = ts_strfmt("kernel %d: a ROW kernel writes 1 to %d outputs, not %d", ki, TS_KERNEL_MAX_OUTS, k->nextra + 1);
    else if (has_row_axis == k->per_row)
        *err = ts_strfmt(k->per_row ? "kernel %d: a per-row ROW kernel's output spans its row axis"
                                    : "kernel %d: the row axis is not an axis of the ROW kernel's output", ki);
    else
        for (int j = 0; j < k->nstage && !*err; j++)
            if (k->stage_combine[j] != TS_COMBINE_SUM && k->stage_combine[j] != TS_COMBINE_MAX)
                *err = ts_strfmt("kernel %d: stage %d of a ROW kernel combines by sum or max only", ki, j);
    for (int o = 1; o <= k->nextra && !*err; o++) { /* a per-row one: the first's axes less the row axis */
        const ts_buffer *X = &e->p->buf[row_out(k, o)->buf];
        const bool per = row_out_per_row(k, o);
        bool same = X->ndim == B->ndim - (per ? 1 : 0) && !(per && k->per_row);
        for (int d = 0, x = 0; same && d < B->ndim; d++)
            if (!per || B->axis[d] != k->red_axis) same = X->axis[x++] == B->axis[d];
        if (!same) *err = ts_strfmt("kernel %d: output %d of a ROW kernel spans other axes than its first", ki, o);
    }
    return *err ? -1 : 0;
}

/* The axes of a ROW kernel's rows besides the row axis: its output's, less the row axis unless per_row. */
static int row_ndim(const emitter *e, const ts_kernel *k) { return e->p->buf[k->out.buf].ndim - (k->per_row ? 0 : 1); }

/* The index map of a ROW functor: the row's other axes from b.idx[], the row axis as k0 + i. */
static index_map row_index_map(const emitter *e, const ts_kernel *k) {
    static char names[TS_MAX_DIMS][32];
    index_map m = {0};
    const ts_buffer *B = &e->p->buf[k->out.buf];
    for (int d = 0, r = 0; d < B->ndim; d++) {
        m.axis[m.n] = B->axis[d];
        if (B->axis[d] == k->red_axis) m.expr[m.n++] = "(k0 + i)";
        else snprintf(names[r], sizeof names[r], "b.idx[%d]", r), m.expr[m.n++] = names[r++];
    }
    if (k->per_row) m.axis[m.n] = k->red_axis, m.expr[m.n++] = "(k0 + i)"; /* stages only: outputs never read it */
    return m;
}

/* `dst = <field o> + Σ idx[row axis] · <field s>[d];` for an access at row idx[]. */
static void print_row_base(emitter *e, const char *dst, const ts_access *a, const char *o, const char *s,
                           const ts_kernel *k) {
    const ts_buffer *B = &e->p->buf[k->out.buf];
    fprintf(e->f, "        %s = %s", dst, o);
    for (int d = 0; d < a->ndim; d++)
        for (int bd = 0, r = 0; bd < B->ndim; bd++) {
            if (B->axis[bd] == k->red_axis) continue;
            if (B->axis[bd] == a->axis[d]) fprintf(e->f, " + idx[%d] * %s[%d]", r, s, d);
            r++;
        }
    fputs(";\n", e->f);
}

static void emit_row_bind(emitter *e, const ts_kernel *k, int nrow) {
    fputs("    __device__ void bind(const int64_t *idx, Base &b) const {\n        (void)idx;\n", e->f);
    for (int r = 0; r < nrow; r++) fprintf(e->f, "        b.idx[%d] = idx[%d];\n", r, r);
    char dst[32], o[16], s[16];
    for (int a = 0; a < k->nacc; a++) {
        snprintf(dst, sizeof dst, "b.in[%d]", a), snprintf(o, sizeof o, "o%d", a), snprintf(s, sizeof s, "s%d", a);
        print_row_base(e, dst, &k->acc[a], o, s, k);
    }
    for (int q = 0; q <= k->nextra; q++) {
        snprintf(dst, sizeof dst, "b.out[%d]", q), snprintf(o, sizeof o, "qo%d", q), snprintf(s, sizeof s, "qs%d", q);
        print_row_base(e, dst, row_out(k, q), o, s, k);
    }
    fputs("    }\n", e->f);
}

/* The spans of operands that are not cached and that expression x reads (u<slot>[kVec]). */
static void print_row_uncached_loads(emitter *e, const ts_kernel *k, const ts_expr *const *x, int nx, const int *cache) {
    for (int s = 0; s < k->nacc; s++) {
        bool used = false;
        for (int i = 0; i < nx; i++) used |= ts_expr_reads(x[i], s);
        if (!used || cache[s] >= 0) continue;
        char name[16], base[32];
        snprintf(name, sizeof name, "u%d", s), snprintf(base, sizeof base, "b.in[%d]", s);
        print_span_load(e, k, s, name, base, k->red_axis, "k0", "        ");
    }
}

/* load(): each cached operand's span into x[], with its prologue applied (ts_row_hoist). */
static void emit_row_load(emitter *e, const ts_kernel *k, const ts_row_hoisted *h, const int *cache, int ncached) {
    fputs("    __device__ void load(const Base &b, int64_t k0, int n, float (&x)[kIn][kVec]) const {\n"
          "        (void)b, (void)k0, (void)n;\n", e->f);
    for (int s = 0; s < k->nacc; s++) {
        if (cache[s] < 0) continue;
        fprintf(e->f, "        tsv::load_span<%s>(x[%d], p%d + b.in[%d], ", e->span_args, cache[s], s, s);
        char field[16];
        snprintf(field, sizeof field, "s%d", s);
        print_span_stride(e, &k->acc[s], field, k->red_axis);
        fputs(", k0, n);\n", e->f);
        if (!h->prologue[s].n) continue;
        index_map none = {0};
        const char *acc[2] = {"0.f", "0.f"};
        fputs("#pragma unroll\n        for (int i = 0; i < kVec; i++) { /* its prologue, once an element */\n", e->f);
        print_expr(e, k, &h->prologue[s], &none, acc, "            ");
        fprintf(e->f, "            x[%d][i] = v%d;\n        }\n", cache[s], h->prologue[s].n - 1);
    }
    if (!ncached) fputs("        for (int i = 0; i < kVec; i++) x[0][i] = 0.f; /* no operand is cached */\n", e->f);
    fputs("    }\n", e->f);
}

static const char *const row_acc[TS_ROW_MAX_STAGES] = {"acc[0]", "acc[1]", "acc[2]", "acc[3]"};

static void emit_row_stage(emitter *e, const ts_kernel *k, const ts_row_hoisted *h, const index_map *m, const int *cache) {
    fputs("    __device__ void stage(int j, const Base &b, int64_t k0, int n, const float (&x)[kIn][kVec],\n"
          "                          const float *acc, float (&y)[kVec]) const {\n"
          "        (void)b, (void)k0, (void)n, (void)x, (void)acc;\n", e->f);
    for (int j = 0; j < k->nstage; j++) {
        const ts_expr *x = &h->stage[j];
        fprintf(e->f, "        if (j == %d) {\n", j);
        print_row_uncached_loads(e, k, &x, 1, cache);
        fputs("#pragma unroll\n            for (int i = 0; i < kVec; i++) {\n", e->f);
        print_expr(e, k, x, m, row_acc, "                ");
        fprintf(e->f, "                y[i] = v%d;\n            }\n            return;\n        }\n", x->n - 1);
    }
    fputs("        for (int i = 0; i < kVec; i++) y[i] = 0.f;\n    }\n", e->f);
}

/* store(): every output written per position (per_row: once per row), at k0..k0+n. */
static void emit_row_store(emitter *e, const ts_kernel *k, const ts_row_hoisted *h, const index_map *m, const int *cache) {
    int nout = 0, outs[TS_KERNEL_MAX_OUTS];
    const ts_expr *xs[TS_KERNEL_MAX_OUTS] = {0};
    for (int o = 0; o <= k->nextra; o++)
        if (!row_out_per_row(k, o)) xs[nout] = o == 0 ? &h->expr : &h->extra_expr[o - 1], outs[nout++] = o;
    fputs("    __device__ void store(const Base &b, int64_t k0, int n, const float (&x)[kIn][kVec], const float *acc) const {\n"
          "        (void)x, (void)acc;\n", e->f);
    print_row_uncached_loads(e, k, xs, nout, cache);
    for (int i = 0; i < nout; i++) fprintf(e->f, "        float y%d[kVec];\n", outs[i]);
    fputs("#pragma unroll\n        for (int i = 0; i < kVec; i++) {\n", e->f);
    for (int i = 0; i < nout; i++) {
        fputs("            {\n", e->f);
        print_expr(e, k, xs[i], m, row_acc, "                ");
        fprintf(e->f, "                y%d[i] = v%d;\n            }\n", outs[i], xs[i]->n - 1);
    }
    fputs("        }\n", e->f);
    for (int i = 0; i < nout; i++) {
        char field[16];
        snprintf(field, sizeof field, "qs%d", outs[i]);
        fprintf(e->f, "        tsv::store_span<%s>(q%d + b.out[%d], ", e->span_args, outs[i], outs[i]);
        print_span_stride(e, row_out(k, outs[i]), field, k->red_axis);
        fprintf(e->f, ", k0, n, y%d);\n", outs[i]);
    }
    fputs("    }\n", e->f);
}

/* store_per_row(): the outputs written once per row beside per-position ones, from the stage results alone. */
static void emit_row_store_per_row(emitter *e, const ts_kernel *k, const index_map *m) {
    fputs("    __device__ void store_per_row(const Base &b, const float *acc) const {\n        (void)b, (void)acc;\n", e->f);
    for (int o = 1; o <= k->nextra; o++) {
        if (!row_out_per_row(k, o)) continue;
        const ts_expr *x = row_out_expr(k, o);
        fputs("        {\n            const int i = 0;\n            (void)i;\n", e->f);
        print_expr(e, k, x, m, row_acc, "            ");
        fprintf(e->f, "            const float y[kVec] = {v%d};\n            tsv::store_span<kVec>(q%d + b.out[%d], 1, 0, 1, y);\n        }\n",
                x->n - 1, o, o);
    }
    fputs("    }\n", e->f);
}

/* kOnline and merge(): a maximum and the sum after it that a pass over an uncached row folds together
 * (rowstat.h ts_row_online_stage; row.cuh); kOnline = -1 where no stage pair folds. */
static void emit_row_online(emitter *e, const ts_kernel *k, const index_map *m) {
    ts_expr merge;
    const int j = ts_row_online_stage(k, &merge);
    fprintf(e->f, "    static constexpr int kOnline = %d;\n", j);
    const unsigned joins = ts_row_first_pass_joins(k, j);
    if (joins) fprintf(e->f, "    static constexpr unsigned kJoinFirst = %uu; /* stages read in the first pass */\n", joins);
    if (j >= 0) {
        const char *names[2 + 2 * TS_ROW_MAX_STAGES];
        for (int i = 0; i < 2 + 2 * TS_ROW_MAX_STAGES; i++) names[i] = "0.f";
        names[2 + j] = "part_max", names[2 + j + 1] = "part_sum", names[2 + TS_ROW_MAX_STAGES + j] = "new_max";
        fputs("    __device__ __forceinline__ float merge(float part_sum, float part_max, float new_max) const {\n"
              "        (void)part_sum, (void)part_max, (void)new_max;\n", e->f);
        print_expr(e, k, &merge, m, names, "        ");
        fprintf(e->f, "        return v%d;\n    }\n", merge.n - 1);
    }
    free(merge.node);
}

/* A ROW functor's head (row.cuh kHead), decided by its first cached operand along the row (rows_need_head). */
static void emit_row_head(emitter *e, const ts_kernel *k, const int *cache) {
    for (int s = 0; s < k->nacc; s++) {
        if (cache[s] < 0 || ts_access_unit_axis(&k->acc[s]) != k->red_axis) continue;
        if (rows_need_head(e, &k->acc[s], k->red_axis))
            fprintf(e->f,
                    "    static constexpr bool kHead = true; /* rows that can start off 16 bytes */\n"
                    "    __device__ int head(const Base &b) const { return tsv::span_head<kVec>(p%d + b.in[%d], 1); }\n",
                    s, s);
        return;
    }
}

/* A ROW functor's kCache16 (row.cuh): where every cached operand keeps its loaded value (no prologue) and every one
 * is fp16 (1), or every one bf16 (2), the row's cache holds them two to a register — exact, and half the registers
 * (bench/NOTES.md run 161, H100: at the same launch shapes up to 12% faster, level on two cases, 4% slower on one). */
static void emit_row_cache16(emitter *e, const ts_kernel *k, const ts_row_hoisted *h, const int *cache) {
    int kind = 0;
    for (int s = 0; s < k->nacc; s++) {
        if (cache[s] < 0) continue;
        const ts_dtype dt = e->p->buf[k->acc[s].buf].dtype;
        const int this_kind = dt == TS_FP16 ? 1 : dt == TS_BF16 ? 2 : 0;
        if (h->prologue[s].n || !this_kind || (kind && kind != this_kind)) return;
        kind = this_kind;
    }
    if (kind)
        fprintf(e->f, "    static constexpr int kCache16 = %d; /* its %s operands cached two to a register */\n", kind,
                kind == 1 ? "fp16" : "bf16");
}

/* The functor of a ROW kernel (the interface row.cuh documents). */
static void emit_row_functor(emitter *e, int ki, const ts_kernel *k) {
    int ncached, *cache = row_cached(k, &ncached), nrow = row_ndim(e, k);
    fprintf(e->f, "struct K%d {\n", ki);
    print_fields(e, k);
    for (int o = 0; o <= k->nextra; o++)
        fprintf(e->f, "    %s *q%d;\n    int64_t qo%d, qs%d[%d];\n", ctype_of(e->p->buf[row_out(k, o)->buf].dtype), o, o, o,
                row_out(k, o)->ndim ? row_out(k, o)->ndim : 1);
    fprintf(e->f, "    static constexpr int kVec = %d, kIn = %d, kStages = %d;\n", ts_kernel_span_vec(e->p, k), ncached ? ncached : 1,
            k->nstage);
    fprintf(e->f, "    static constexpr bool kPerRow = %s, kPerRowOuts = %s;\n", k->per_row ? "true" : "false",
            row_has_per_row_outs(k) ? "true" : "false");
    ts_sym len = ts_sym_axis(e->g, &e->dyn, k->red_axis);
    int64_t static_len;
    if (ts_sym_const_value(&len, &static_len)) /* row.cuh compiles only the launch rows of this length take */
        fprintf(e->f, "    static constexpr int64_t kLen = %lld;\n", (long long)static_len);
    declare_span_pairs(e, k, k->red_axis);
    fprintf(e->f, "    struct Base {\n        int64_t in[%d], out[%d], idx[%d];\n    };\n", k->nacc ? k->nacc : 1, k->nextra + 1,
            nrow ? nrow : 1);
    emit_row_bind(e, k, nrow);
    fputs("    __device__ static constexpr int combine(int j) {\n        return ", e->f);
    for (int j = 0; j + 1 < k->nstage; j++) fprintf(e->f, "j == %d ? %s : ", j, k->stage_combine[j] == TS_COMBINE_MAX ? "tsw::kMax" : "tsw::kSum");
    fprintf(e->f, "%s;\n    }\n", k->stage_combine[k->nstage - 1] == TS_COMBINE_MAX ? "tsw::kMax" : "tsw::kSum");
    char **loads = ts_xmalloc(sizeof *loads * (size_t)(k->nacc ? k->nacc : 1));
    for (int s = 0; s < k->nacc; s++) loads[s] = cache[s] >= 0 ? ts_strfmt("x[%d][i]", cache[s]) : ts_strfmt("u%d[i]", s);
    index_map m = row_index_map(e, k);
    e->load_expr = (const char *const *)loads;
    ts_row_hoisted h;
    ts_row_hoist(k, &h);
    emit_row_load(e, k, &h, cache, ncached);
    emit_row_stage(e, k, &h, &m, cache);
    emit_row_store(e, k, &h, &m, cache);
    emit_row_cache16(e, k, &h, cache);
    ts_row_hoisted_free(&h);
    if (row_has_per_row_outs(k)) emit_row_store_per_row(e, k, &m);
    e->load_expr = NULL;
    emit_row_online(e, k, &m);
    emit_row_head(e, k, cache);
    fputs("};\n\n", e->f);
    for (int s = 0; s < k->nacc; s++) free(loads[s]);
    free(loads);
    free(cache);
}

static void emit_row_launch(emitter *e, int ki, const ts_kernel *k) {
    const ts_buffer *B = &e->p->buf[k->out.buf];
    fprintf(e->f, "    {\n        tsw::RowParams<K%d> p{};\n", ki);
    fill_fields(e, k, "p.fn");
    char ptr[160], dst[48];
    for (int o = 0; o <= k->nextra; o++) {
        const ts_access *a = row_out(k, o);
        buf_ptr(e, a->buf, ptr, sizeof ptr);
        fprintf(e->f, "        p.fn.q%d = %s;\n", o, ptr);
        snprintf(dst, sizeof dst, "p.fn.qo%d", o);
        print_assign(e, dst, a->offset);
        for (int d = 0; d < a->ndim; d++) {
            snprintf(dst, sizeof dst, "p.fn.qs%d[%d]", o, d);
            print_assign(e, dst, a->stride[d]);
        }
    }
    fprintf(e->f, "        p.nrowdim = %d;\n        p.rows = 1;\n", row_ndim(e, k));
    for (int d = 0, r = 0; d < B->ndim; d++) {
        if (B->axis[d] == k->red_axis) continue;
        snprintf(dst, sizeof dst, "p.rsize[%d]", r);
        print_assign(e, dst, ts_sym_axis(e->g, &e->dyn, B->axis[d]));
        fprintf(e->f, "        p.rows *= p.rsize[%d];\n", r++);
    }
    print_assign(e, "p.len", ts_sym_axis(e->g, &e->dyn, k->red_axis));
    if (k->row_grid) { /* few long rows: a cooperative grid's partials (row.cuh launch_row_grid) */
        buf_ptr(e, k->scratch, ptr, sizeof ptr);
        fprintf(e->f, "        p.grid_scratch = static_cast<float *>(%s);\n        p.grid_scratch_floats = %d;\n", ptr,
                TS_ROW_GRID_SCRATCH_FLOATS);
    }
    fprintf(e->f, "        err = tsw::launch_row%s(p, sms, stream%s);\n        if (err != cudaSuccess) return err;\n    }\n",
            k->columns ? "_columns" : "", k->cfg.row_split ? ", true /* long rows split over clusters */" : "");
}

static void emit_kernel_launch(emitter *e, int ki, const ts_kernel *k) {
    switch (k->kind) { /* every kernel kind has a template; ROW kernels were checked before the header began */
    case TS_KERNEL_ROW: emit_row_launch(e, ki, k); break;
    case TS_KERNEL_MAP: emit_map_launch(e, ki, k); break;
    case TS_KERNEL_REDUCE: emit_reduce_launch(e, ki, k); break;
    case TS_KERNEL_GEMM: emit_gemm_launch(e, ki, k); break;
    case TS_KERNEL_ATTENTION: emit_attention_launch(e, ki, k); break;
    }
}

/* ---- argument checks of the launch helper (the errors the banner documents) ------------------------ */

/* "(m) == 0 || (n) == 0": whether output i is empty at run time; false when it has no dynamic axis. */
static bool print_output_empty(emitter *e, int i) {
    const ts_view *v = &e->g->outputs[i].ref.view;
    bool any = false;
    for (int d = 0; d < v->ndim; d++) {
        ts_sym sz = ts_sym_axis(e->g, &e->dyn, v->axis[d]);
        if (ts_sym_is_const(&sz)) continue;
        fputs(any ? " || (" : "(", e->f);
        print_sym(e, &sz);
        fputs(") == 0", e->f);
        any = true;
    }
    return any;
}

/* Dynamic sizes in [0, 2^40]; when every output is empty, success without a launch; otherwise each size
 * at least 1 (a reduction over an empty axis is refused, not guessed). */
static void emit_dim_checks(emitter *e) {
    if (!e->dyn.n) return;
    for (int d = 0; d < e->dyn.n; d++)
        fprintf(e->f, "    if (%s < 0 || %s > ((int64_t)1 << 40)) return cudaErrorInvalidValue;\n", e->dyn_names[d],
                e->dyn_names[d]);
    for (int i = e->nout; i < e->g->noutputs; i++) { /* an append's position lies inside its cache */
        const ts_node *u = &e->g->nodes[e->g->outputs[i].ref.node];
        ts_sym at = ts_sym_axis(e->g, &e->dyn, u->at_axis), cap = ts_sym_axis(e->g, &e->dyn, u->reduce_axis);
        fputs("    if ((", e->f);
        print_sym(e, &at);
        if (u->rows_axis >= 0) { /* a block: its rows all inside the cache */
            ts_sym rows = ts_sym_axis(e->g, &e->dyn, u->rows_axis);
            fputs(") < (", e->f);
            print_sym(e, &rows);
            fputs(") || (", e->f);
        } else {
            fputs(") < 1 || (", e->f);
        }
        print_sym(e, &at);
        fputs(") > (", e->f);
        print_sym(e, &cap);
        fprintf(e->f, ")) return cudaErrorInvalidValue; /* append into %s: position outside the cache */\n",
                e->in_names[e->g->outputs[i].input]);
    }
    bool every_output_can_be_empty = true;
    for (int i = 0; i < e->nout; i++) {
        const ts_view *v = &e->g->outputs[i].ref.view;
        bool dynamic = false;
        for (int d = 0; d < v->ndim; d++) {
            ts_sym sz = ts_sym_axis(e->g, &e->dyn, v->axis[d]);
            dynamic |= !ts_sym_is_const(&sz);
        }
        every_output_can_be_empty &= dynamic;
    }
    if (every_output_can_be_empty) {
        fputs("    if (", e->f);
        for (int i = 0; i < e->nout; i++) {
            fputs(i ? " && (" : "(", e->f);
            print_output_empty(e, i);
            fputc(')', e->f);
        }
        fputs(") return cudaSuccess; /* every output is empty: nothing to compute, nothing launched */\n", e->f);
        if (e->dyn.n == 1) return; /* the one size is 0 exactly when every output is empty */
    }
    for (int d = 0; d < e->dyn.n; d++)
        fprintf(e->f, "    if (%s < 1) return cudaErrorInvalidValue; /* an output would reduce over an empty axis */\n",
                e->dyn_names[d]);
}

/* Every buffer present and aligned to its element type; the workspace 16-byte aligned. */
static void emit_pointer_checks(emitter *e) {
    fputs("    if (", e->f);
    for (int i = 0; i < e->g->ninputs; i++) fprintf(e->f, "%s!%s", i ? " || " : "", e->in_names[i]);
    for (int i = 0; i < e->nout; i++) fprintf(e->f, " || !%s", e->out_names[i]);
    fputs(") return cudaErrorInvalidValue;\n    if (", e->f);
    for (int i = 0; i < e->g->ninputs; i++)
        fprintf(e->f, "%sreinterpret_cast<uintptr_t>(%s) %% sizeof(*%s)", i ? " ||\n        " : "", e->in_names[i],
                e->in_names[i]);
    for (int i = 0; i < e->nout; i++)
        fprintf(e->f, " ||\n        reinterpret_cast<uintptr_t>(%s) %% sizeof(*%s)", e->out_names[i],
                e->out_names[i]);
    fputs(" ||\n        reinterpret_cast<uintptr_t>(workspace) % 16)\n        return cudaErrorMisalignedAddress;\n", e->f);
}

/* A size the kernel's 32-bit parameter cannot hold is refused before anything is launched; `seen` holds
 * the sizes already checked (each is checked once). `what` names it in a comment. */
static void emit_int_limit_of(emitter *e, ts_sym sz, const char *what, ts_sym *seen, int *nseen) {
    if (ts_sym_is_const(&sz)) return;
    for (int i = 0; i < *nseen; i++)
        if (ts_sym_equal(seen[i], sz)) return;
    seen[(*nseen)++] = sz;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    ts_sym_print(m, &sz, e->dyn_names);
    fclose(m);
    /* 64-bit arithmetic: a product with a constant prints its own cast first */
    fprintf(e->f, "    if (%s%s > INT32_MAX) return cudaErrorInvalidValue; /* %s: a 32-bit kernel parameter */\n",
            strncmp(text, "(int64_t)", 9) == 0 ? "" : "(int64_t)", text, what);
    free(text);
}

static void emit_int_limit(emitter *e, int32_t axis, ts_sym *seen, int *nseen) {
    if (axis >= 0) emit_int_limit_of(e, ts_sym_axis(e->g, &e->dyn, axis), e->g->axes[axis].name, seen, nseen);
}

static void emit_size_limits(emitter *e) {
    ts_sym *seen = ts_xcalloc((size_t)e->p->nk * 9 + 1, sizeof *seen);
    int nseen = 0;
    for (int i = 0; i < e->p->nk; i++) {
        const ts_kernel *k = &e->p->k[i];
        if (k->kind != TS_KERNEL_GEMM && k->kind != TS_KERNEL_ATTENTION) continue;
        const int32_t axes[] = {k->m_axis, k->red_axis, k->n_axis, k->batch_axis, k->batch_outer, k->two_k ? k->red_axis2 : -1};
        for (size_t a = 0; a < sizeof axes / sizeof *axes; a++) emit_int_limit(e, axes[a], seen, &nseen);
        if (k->kind == TS_KERNEL_GEMM && k->m_outer >= 0) /* rows merged over two axes: M is their product */
            emit_int_limit_of(e, gemm_rows_sym(e, k), "the GEMM's rows", seen, &nseen);
        for (int h = 0; k->kind == TS_KERNEL_ATTENTION && h < k->heads_ndim && h < 4; h++)
            emit_int_limit(e, k->head_axis[h], seen, &nseen);
    }
    free(seen);
}

static void emit_arg_checks(emitter *e) {
    emit_dim_checks(e);
    emit_pointer_checks(e);
    emit_size_limits(e);
}

/* The launch helper's contract on its arguments, under the banner. */
static void emit_contract_note(emitter *e) {
    fputs("//\n// Arguments: cudaErrorInvalidValue for a null buffer (or workspace, when one is needed), a dynamic size\n"
          "// below 0 or above 2^40, a size past a kernel's 32-bit limit (2^31 - 1) or, unless every output is\n"
          "// empty, a dynamic size of 0 (nothing is launched; every output empty is success with no launch);\n"
          "// cudaErrorMisalignedAddress for a buffer not aligned to its element type, or a workspace not\n"
          "// 16-byte aligned. 16-byte alignment is not required: a buffer off it takes a slower path, except\n"
          "// attention operands, which are refused with cudaErrorMisalignedAddress. Thread-safe: device facts\n"
          "// and kernel attributes are cached per device.\n",
          e->f);
}

/* The declarations every includer sees: the C ABI (plain C and C++), the workspace size (inline C), and
 * for nvcc the typed launch helper. */
static void emit_declarations(emitter *e) {
    const char *n = e->name;
    fprintf(e->f, "#ifndef TSOPT_%s_H\n#define TSOPT_%s_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n", e->upper, e->upper);
    if (ts_plan_uses_cublas(e->p)) /* for build systems: this header's program links -lcublasLt */
        fprintf(e->f, "#define TSOPT_%s_NEEDS_CUBLASLT 1\n\n", e->upper);
    fputs("#ifdef __cplusplus\nextern \"C\" {\n#endif\nstruct CUstream_st; /* cudaStream_t is a struct CUstream_st * */\n",
          e->f);
    fprintf(e->f, "/* Runs the graph on the stream (a cudaStream_t; NULL: the default stream): buffers are device pointers,\n"
                  " * inputs then outputs in the banner's order (no output may overlap an input, another output or the\n"
                  " * workspace); dims the dynamic sizes in its order. Returns a cudaError_t. */\n"
                  "int %s_run(void *const *buffers, const int64_t *dims, void *workspace, struct CUstream_st *stream);\n"
                  "/* %s_workspace_bytes with the dynamic sizes from dims. */\nsize_t %s_workspace(const int64_t *dims);\n"
                  "/* %s_run as a CUDA graph: captured on the first call for a device, dims, buffers, workspace and stream,\n"
                  " * replayed while they stay the same (updated or captured again when they change); see the banner. */\n"
                  "int %s_graph_run(void *const *buffers, const int64_t *dims, void *workspace, struct CUstream_st *stream);\n"
                  "/* Destroys the cached CUDA graph (the next %s_graph_run captures again). Returns a cudaError_t. */\n"
                  "int %s_graph_reset(void);\n"
                  "/* NULL when the calling thread's last launch ran every kernel on its fast path; else which kernel ran\n"
                  " * its fallback and why (e.g. built without -arch=sm_90a). */\nconst char *%s_fallback(void);\n",
            n, n, n, n, n, n, n, n);
    fputs("#ifdef __cplusplus\n}\n#endif\n\n", e->f);
    emit_workspace_fn(e);
    /* the element types declared, not included: cuda_fp16.h and cuda_bf16.h cost seconds of every build */
    fprintf(e->f, "#ifdef __CUDACC__\n#include <cuda_runtime.h>\nstruct __half;\nstruct __nv_bfloat16;\n"
                  "/* Runs the graph on `stream`. Pointers are device pointers to row-major buffers (see the banner). */\n"
                  "cudaError_t %s_launch(", n);
    print_signature(e);
    fprintf(e->f, "void *workspace, cudaStream_t stream);\n#endif\n\n#endif  /* TSOPT_%s_H */\n\n", e->upper);
}

static void emit_c_abi(emitter *e) {
    const char *n = e->name;
    fprintf(e->f, "extern \"C\" size_t %s_workspace(const int64_t *dims) {\n", n);
    if (!e->dyn.n) fputs("    (void)dims;\n", e->f);
    else fputs("    if (!dims) return 0;\n", e->f);
    fprintf(e->f, "    return %s_workspace_bytes(", n);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "%sdims[%d]", d ? ", " : "", d);
    fputs(");\n}\n\n", e->f);
    fprintf(e->f, "extern \"C\" const char *%s_fallback(void) { return tsopt_%s::fallback_note; }\n\n", n, n);
    fprintf(e->f, "extern \"C\" int %s_run(void *const *buffers, const int64_t *dims, void *workspace, cudaStream_t stream) {\n", n);
    fprintf(e->f, "    if (!buffers%s) return (int)cudaErrorInvalidValue;\n", e->dyn.n ? " || !dims" : "");
    if (!e->dyn.n) fputs("    (void)dims;\n", e->f);
    fprintf(e->f, "    return (int)%s_launch(", n);
    int b = 0;
    for (int i = 0; i < e->g->ninputs; i++, b++)
        fprintf(e->f, "static_cast<%s%s *>(buffers[%d]), ", e->g->inputs[i].inout ? "" : "const ",
                ctype_of(e->g->nodes[e->g->inputs[i].node].dtype), b);
    for (int i = 0; i < e->nout; i++, b++)
        fprintf(e->f, "static_cast<%s *>(buffers[%d]), ", ctype_of(e->g->outputs[i].dtype), b);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "dims[%d], ", d);
    fputs("workspace, stream);\n}\n", e->f);
}

/* ---- the CUDA-graph helper ------------------------------------------------------------------------ */

/* The cache of <name>_graph_run: one executable graph and the call it was captured for. */
static void emit_graph_cache(emitter *e) {
    int nbuf = e->g->ninputs + e->nout, ndims = e->dyn.n ? e->dyn.n : 1;
    fprintf(e->f, "#pragma GCC visibility push(hidden)\nnamespace tsopt_%s {\n\n"
                  "/* The CUDA graph %s_graph_run replays and the call it was captured for (device -1: none). */\n"
                  "struct GraphCache {\n    std::mutex lock;\n    cudaGraphExec_t exec = nullptr;\n    int device = -1;\n"
                  "    cudaStream_t stream = nullptr;\n    void *workspace = nullptr;\n    void *buffers[%d] = {};\n"
                  "    int64_t dims[%d] = {};\n};\nstatic GraphCache graph_cache;\n\n",
            e->name, e->name, nbuf, ndims);
    fprintf(e->f, "static bool graph_captured_for(const GraphCache &c, int device, void *const *buffers, const int64_t *dims,\n"
                  "                               void *workspace, cudaStream_t stream) {\n"
                  "    if (!c.exec || c.device != device || c.stream != stream || c.workspace != workspace) return false;\n"
                  "    for (int i = 0; i < %d; i++)\n        if (c.buffers[i] != buffers[i]) return false;\n", nbuf);
    if (e->dyn.n)
        fprintf(e->f, "    for (int i = 0; i < %d; i++)\n        if (c.dims[i] != dims[i]) return false;\n", e->dyn.n);
    else fputs("    (void)dims;\n", e->f);
    fputs("    return true;\n}\n\n", e->f);
}

/* Capturing <name>_run into the cache's graph: updated in place when CUDA can, else instantiated anew. */
static void emit_graph_capture(emitter *e) {
    fprintf(e->f, "static cudaError_t graph_capture(GraphCache &c, void *const *buffers, const int64_t *dims, void *workspace,\n"
                  "                                 cudaStream_t stream) {\n"
                  "    cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);\n"
                  "    if (err != cudaSuccess) return err;\n"
                  "    const cudaError_t launched = static_cast<cudaError_t>(%s_run(buffers, dims, workspace, stream));\n"
                  "    cudaGraph_t graph = nullptr;\n    err = cudaStreamEndCapture(stream, &graph);\n"
                  "    if (launched != cudaSuccess || err != cudaSuccess) {\n        if (graph) cudaGraphDestroy(graph);\n"
                  "        return launched != cudaSuccess ? launched : err;\n    }\n"
                  "    cudaGraphExecUpdateResultInfo info;\n"
                  "    if (c.exec && cudaGraphExecUpdate(c.exec, graph, &info) != cudaSuccess) {\n"
                  "        (void)cudaGetLastError(); /* the refused update is no error of this call */\n"
                  "        cudaGraphExecDestroy(c.exec);\n        c.exec = nullptr;\n    }\n"
                  "    if (!c.exec) err = cudaGraphInstantiate(&c.exec, graph, 0);\n"
                  "    cudaGraphDestroy(graph);\n    return err;\n}\n\n}  // namespace tsopt_%s\n#pragma GCC visibility pop\n\n",
            e->name, e->name);
}

/* <name>_graph_run and <name>_graph_reset (the banner documents them). */
static void emit_graph_helper(emitter *e) {
    const char *n = e->name;
    emit_graph_cache(e);
    emit_graph_capture(e);
    fprintf(e->f, "extern \"C\" int %s_graph_run(void *const *buffers, const int64_t *dims, void *workspace, cudaStream_t stream) {\n"
                  "    using namespace tsopt_%s;\n", n, n);
    fprintf(e->f, "    if (!buffers%s) return (int)cudaErrorInvalidValue;\n", e->dyn.n ? " || !dims" : "");
    fputs("    if (!stream || stream == cudaStreamLegacy) return (int)cudaErrorStreamCaptureUnsupported;\n"
          "    cudaStreamCaptureStatus capturing;\n    cudaError_t err = cudaStreamIsCapturing(stream, &capturing);\n"
          "    if (err != cudaSuccess) return (int)err;\n", e->f);
    fprintf(e->f, "    if (capturing != cudaStreamCaptureStatusNone) return %s_run(buffers, dims, workspace, stream); /* the caller's capture */\n"
                  "    int device;\n    err = cudaGetDevice(&device);\n    if (err != cudaSuccess) return (int)err;\n"
                  "    GraphCache &c = graph_cache;\n    std::lock_guard<std::mutex> hold(c.lock);\n"
                  "    if (graph_captured_for(c, device, buffers, dims, workspace, stream)) return (int)cudaGraphLaunch(c.exec, stream);\n"
                  "    /* a new call: run it (checking the arguments, filling the per-device caches), then capture it */\n"
                  "    err = static_cast<cudaError_t>(%s_run(buffers, dims, workspace, stream));\n"
                  "    if (err != cudaSuccess) return (int)err;\n"
                  "    c.device = -1;\n    err = graph_capture(c, buffers, dims, workspace, stream);\n"
                  "    if (err != cudaSuccess) return (int)err;\n"
                  "    c.device = device, c.stream = stream, c.workspace = workspace;\n"
                  "    for (int i = 0; i < %d; i++) c.buffers[i] = buffers[i];\n",
            n, n, e->g->ninputs + e->nout);
    if (e->dyn.n) fprintf(e->f, "    for (int i = 0; i < %d; i++) c.dims[i] = dims[i];\n", e->dyn.n);
    fputs("    return (int)cudaSuccess;\n}\n\n", e->f);
    fprintf(e->f, "extern \"C\" int %s_graph_reset(void) {\n    using namespace tsopt_%s;\n"
                  "    GraphCache &c = graph_cache;\n    std::lock_guard<std::mutex> hold(c.lock);\n"
                  "    cudaError_t err = c.exec ? cudaGraphExecDestroy(c.exec) : cudaSuccess;\n"
                  "    c.exec = nullptr;\n    c.device = -1;\n    return (int)err;\n}\n", n, n);
}

/* How a functor's pair method reads access slot s at two neighbours along `axis` (a score functor's keys k and
 * k + 1, a GEMM functor's columns col and col + 1): the same element for both (the access does not vary along
 * the axis), the two side by side (contiguous along it, read-only, 2 or 4 bytes: one load, tst::load2_ro), or
 * two loads. */
typedef enum { PAIR_SHARED, PAIR_ADJACENT, PAIR_TWO } pair_read;

static pair_read pair_read_along(const emitter *e, const ts_kernel *k, int s, int32_t axis) {
    const ts_access *a = &k->acc[s];
    const ts_sym stride = ts_access_stride(a, axis); /* 0 where the access lacks the axis */
    int64_t v;
    if (!ts_sym_const_value(&stride, &v)) v = -1;
    if (v == 0) return PAIR_SHARED;
    size_t bytes = ts_dtype_bytes(e->p->buf[a->buf].dtype);
    return v == 1 && (bytes == 2 || bytes == 4) && !ts_kernel_writes(k, a->buf) ? PAIR_ADJACENT : PAIR_TWO;
}

/* pair_ok() of a functor whose expression x reads pairs along `axis` (attention.cuh's score functors, gemm.cuh's
 * epilogue loads): the pair loads of PAIR_ADJACENT slots are aligned — every such slot's other strides even, and
 * its offset even (attention operands are 16-byte aligned: the header refuses others) or, with `pointer`, its
 * first element's address a multiple of the pair's bytes (other buffers need only their element's alignment).
 * Returns false when a stride known now is odd (no pair form). */
static bool print_pair_ok(emitter *e, const ts_kernel *k, const ts_expr *x, const index_map *m, int32_t axis, bool pointer) {
    char odd[512] = "", ptr[512] = "";
    size_t len = 0, plen = 0;
    for (int s = 0; s < k->nacc; s++) {
        if (!ts_expr_reads(x, s) || pair_read_along(e, k, s, axis) != PAIR_ADJACENT) continue;
        const ts_access *a = &k->acc[s];
        if (pointer)
            plen += (size_t)snprintf(ptr + plen, sizeof ptr - plen, "%sreinterpret_cast<uintptr_t>(p%d + o%d) %% %d == 0",
                                     plen ? " && " : "", s, s, 2 * (int)ts_dtype_bytes(e->p->buf[a->buf].dtype));
        else
            len += (size_t)snprintf(odd + len, sizeof odd - len, "%so%d", len ? " | " : "", s);
        for (int d = 0; d < a->ndim && len < sizeof odd; d++) {
            int64_t v;
            if (a->axis[d] == axis || !index_of(m, a->axis[d])) continue;
            if (!ts_sym_const_value(&a->stride[d], &v)) len += (size_t)snprintf(odd + len, sizeof odd - len, "%ss%d[%d]", len ? " | " : "", s, d);
            else if (v % 2 != 0) return false;
        }
        if (len >= sizeof odd || plen >= sizeof ptr) return false;
    }
    fputs("    __device__ __forceinline__ bool pair_ok() const { return ", e->f);
    if (plen) fprintf(e->f, "%s%s", ptr, len ? " && " : "");
    if (len) fprintf(e->f, "((%s) & 1) == 0", odd);
    fprintf(e->f, "%s; }%s\n", len || plen ? "" : "true", len || plen ? "  // pair loads aligned" : "");
    return true;
}

/* A GEMM functor's row statistics of A (templates/gemm.cuh): kRowStats reductions of row_term over each row,
 * then row_finish's kRowOuts values per row, which the epilogue reads as rs[o] (ACC 2 + o). */
static void emit_gemm_row_stats(emitter *e, const ts_kernel *k) {
    fprintf(e->f, "    static constexpr int kRowStats = %d, kRowOuts = %d;\n", k->nstage, k->nrowstat);
    fputs("    __host__ __device__ static constexpr bool row_max(int j) {\n        return false", e->f);
    for (int j = 0; j < k->nstage; j++)
        if (k->stage_combine[j] == TS_COMBINE_MAX) fprintf(e->f, " || j == %d", j);
    fputs(";\n    }\n    __device__ __forceinline__ float row_term(int j, float a) const {\n        (void)a;\n", e->f);
    const char **a_only = ts_xcalloc((size_t)k->nacc + 1, sizeof *a_only); /* A's element is `a` */
    a_only[k->a] = "a";
    index_map none = {0};
    for (int j = 0; j < k->nstage; j++) {
        fprintf(e->f, "        if (j == %d) {\n", j);
        e->load_expr = a_only;
        print_expr(e, k, &k->stage[j], &none, NULL, "            ");
        e->load_expr = NULL;
        fprintf(e->f, "            return v%d;\n        }\n", k->stage[j].n - 1);
    }
    free(a_only);
    fprintf(e->f, "        return 0.f;\n    }\n    __device__ __forceinline__ void row_finish(const float (&s)[%d], float (&o)[%d]) const {\n"
                  "        (void)s;\n", k->nstage, k->nrowstat);
    const char *sums[TS_ROW_MAX_STAGES] = {"s[0]", "s[1]", "s[2]", "s[3]"};
    for (int o = 0; o < k->nrowstat; o++) {
        fputs("        {\n", e->f);
        print_expr(e, k, &k->rowstat[o], &none, sums, "            ");
        fprintf(e->f, "            o[%d] = v%d;\n        }\n", o, k->rowstat[o].n - 1);
    }
    fputs("    }\n", e->f);
}

/* The functor's prefetch (gemm.cuh): the lines its load reads at (b, row, col) from the operands that vary along
 * rows and columns (ts_gemm_operand_per_row: a residual, not a bias or a row scale, which L1 holds), asked into L2
 * near the end of the tile's main loop; kPrefetchStep columns a 128-byte line of the widest of them. */
static void emit_gemm_prefetch(emitter *e, const ts_kernel *k, char *const *loads, const index_map *m) {
    int widest = 0;
    for (int s = 0; s < k->nacc; s++)
        if (loads[s] && ts_gemm_operand_per_row(k, s) && ts_dtype_bytes(e->p->buf[k->acc[s].buf].dtype) > widest)
            widest = ts_dtype_bytes(e->p->buf[k->acc[s].buf].dtype);
    if (widest == 0) return;
    fprintf(e->f, "    static constexpr int kPrefetchStep = %d;   /* columns a 128-byte line holds */\n"
                  "    __device__ __forceinline__ void prefetch(int b, int row, int col) const {\n"
                  "        (void)b, (void)row;\n        const int cc = col;\n        (void)cc;\n",
            128 / widest);
    for (int s = 0; s < k->nacc; s++) {
        if (!loads[s] || !ts_gemm_operand_per_row(k, s)) continue;
        fprintf(e->f, "        tst::prefetch_l2(p%d + ", s);
        print_offset(e->f, k, s, m);
        fputs(");\n", e->f);
    }
    fputs("    }\n", e->f);
}

/* The body of a GEMM functor's load (pairs: load_pair, whose callers guarantee col + 1 < n and pair_ok()): each
 * operand the expression reads, at columns col and col + 1 (col even) — once where it does not vary along the
 * columns (a row scale); with `pairs`, in one 4- or 8-byte load where its two elements sit side by side (a bias, a
 * residual); else element by element. */
static void print_gemm_load_body(emitter *e, const ts_kernel *k, char *const *loads, const index_map *m, bool pairs) {
    fputs("        In in;\n", e->f);
    if (!pairs) fputs("        const bool two = col + 1 < n;\n        (void)two;\n", e->f);
    for (int s = 0, i = 0; s < k->nacc; s++) {
        if (!loads[s]) continue;
        pair_read how = pair_read_along(e, k, s, k->n_axis);
        if (how == PAIR_SHARED) {
            fprintf(e->f, "        { const int cc = col; (void)cc; in.x[0][%d] = in.x[1][%d] = ", i, i);
            print_load(e, k, s, m);
            fputs("; }\n", e->f);
        } else if (how == PAIR_ADJACENT && pairs) {
            fprintf(e->f, "        {\n            const int cc = col;\n            const float2 t = tst::load2_ro(p%d + ", s);
            print_offset(e->f, k, s, m);
            fprintf(e->f, ");\n            in.x[0][%d] = t.x, in.x[1][%d] = t.y;\n        }\n", i, i);
        } else {
            for (int h = 0; h < 2; h++) {
                fprintf(e->f, "        { const int cc = col + %d; (void)cc; in.x[%d][%d] = %s", h, h, i, h && !pairs ? "two ? " : "");
                print_load(e, k, s, m);
                fprintf(e->f, "%s; }\n", h && !pairs ? " : 0.f" : "");
            }
        }
        i++;
    }
    fputs("        return in;\n    }\n", e->f);
}

/* A GEMM functor's two-phase loads (gemm.cuh): `In load(b, row, col)`; where an operand sits side by side along
 * the columns, `load_pair` and pair_ok() as well (the packed epilogue loads its pairs so, on tiles where pair_ok()
 * holds: one test a tile, no branch beside each load); kLoadByColumn where no operand varies along the rows (a
 * bias: the kernel then loads a column's operands once for all the rows it holds); and the prefetch of the
 * operands that vary along both. */
static void emit_gemm_loads(emitter *e, const ts_kernel *k, char *const *loads, const index_map *m, int nl) {
    bool adjacent = false, by_row = false;
    for (int s = 0; s < k->nacc; s++) {
        if (!loads[s]) continue;
        adjacent |= pair_read_along(e, k, s, k->n_axis) == PAIR_ADJACENT;
        by_row |= ts_gemm_operand_by_row(k, s);
    }
    fprintf(e->f, "    struct In { float x[2][%d]; };   /* the operands at col and col + 1 */\n", nl);
    fputs("    __device__ __forceinline__ In load(int b, int row, int col) const {\n        (void)b, (void)row;\n", e->f);
    print_gemm_load_body(e, k, loads, m, false);
    if (adjacent && print_pair_ok(e, k, &k->expr, m, k->n_axis, true)) {
        fputs("    __device__ __forceinline__ In load_pair(int b, int row, int col) const {  // col + 1 < n, pair_ok()\n"
              "        (void)b, (void)row;\n", e->f);
        print_gemm_load_body(e, k, loads, m, true);
    }
    if (!by_row) fputs("    static constexpr bool kLoadByColumn = true;   /* load reads nothing that varies along rows */\n", e->f);
    emit_gemm_prefetch(e, k, loads, m);
}

/* A GEMM functor's index names: its batch `b`, row `row` and column `cc`. */
static index_map gemm_index_map(const ts_kernel *k) {
    index_map m = {0};
    if (k->batch_axis >= 0) m.axis[m.n] = k->batch_axis, m.expr[m.n++] = "b";
    m.axis[m.n] = k->m_axis, m.expr[m.n++] = "row";
    m.axis[m.n] = k->n_axis, m.expr[m.n++] = "cc";
    return m;
}

/* The GEMM epilogue functor: the expression at (b, row, col) and (b, row, col+1), stored as a pair, and in
 * gemm.cuh's value form (row_ptr, value or value_loaded), which the wgmma kernel stores as 16-byte vectors.
 * When the expression reads memory (a bias, a residual) the functor comes in two phases as well:
 * `In load(b, row, col)` reads every operand of the pair and `apply_loaded(b, row, col, in, v0, v1[, w0, w1])`
 * computes and stores, so that the kernel can issue the reads of several pairs before the first store
 * (gemm_sm90.cuh's staged epilogue); `apply` is the two in a row. */
static void emit_gemm_functor(emitter *e, int ki, const ts_kernel *k) {
    const char *tout = ctype_of(e->p->buf[k->out.buf].dtype);
    bool dual = k->b1 >= 0;
    int nl = 0;
    char **loads = ts_xmalloc(sizeof *loads * (size_t)(k->nacc ? k->nacc : 1));
    for (int s = 0; s < k->nacc; s++)
        loads[s] = ts_expr_reads(&k->expr, s) ? ts_strfmt("ld[%d]", nl++) : NULL;
    fprintf(e->f, "struct K%d {\n    %s *out;\n    int64_t ob, om;\n    int n;\n", ki, tout);
    print_fields(e, k);
    const index_map m = gemm_index_map(k);
    if (nl) emit_gemm_loads(e, k, loads, &m, nl);
    bool stats = k->nrowstat > 0;
    if (stats) emit_gemm_row_stats(e, k);
    const char *rs_param = stats ? ", const float *rs" : "", *rs_arg = stats ? ", rs" : "";
    fprintf(e->f, "    __device__ __forceinline__ float at(int b, int row, int cc, float acc0, float acc1%s%s) const {\n",
            nl ? ", const float *ld" : "", rs_param);
    fprintf(e->f, "        (void)b, (void)row, (void)cc, (void)acc1%s%s;\n", nl ? ", (void)ld" : "", stats ? ", (void)rs" : "");
    /* ACC 2 + o: row value o of the row statistics */
    const char *acc[2 + TS_KERNEL_MAX_OUTS] = {"acc0", "acc1", "rs[0]", "rs[1]", "rs[2]", "rs[3]"};
    e->load_expr = nl ? (const char *const *)loads : NULL;
    print_expr(e, k, &k->expr, &m, acc, "        ");
    e->load_expr = NULL;
    fprintf(e->f, "        return v%d;\n    }\n", k->expr.n - 1);
    const char *wparams = dual ? ", float w0, float w1" : "", *wargs = dual ? ", w0, w1" : "";
    const char *vname = nl ? "value_loaded" : "value", *in_param = nl ? ", const In &in" : "", *in_arg = nl ? ", in" : "";
    /* the value form (gemm.cuh): the kernel may store the values itself, as 16-byte vectors */
    fprintf(e->f, "    __device__ __forceinline__ %s *row_ptr(int b, int row) const { return out + b * ob + (int64_t)row * om; }\n",
            tout);
    fprintf(e->f, "    __device__ __forceinline__ float2 %s(int b, int row, int col%s, float v0, float v1%s%s) const {\n"
                  "        return make_float2(at(b, row, col, v0, %s%s%s), at(b, row, col + 1, v1, %s%s%s));\n    }\n",
            vname, in_param, wparams, rs_param, dual ? "w0" : "0.f", nl ? ", in.x[0]" : "", rs_arg, dual ? "w1" : "0.f",
            nl ? ", in.x[1]" : "", rs_arg);
    fprintf(e->f, "    template <typename T>\n    __device__ __forceinline__ void %s(int b, int row, int col%s, float v0, "
                  "float v1%s%s) const {\n", nl ? "apply_loaded" : "apply", in_param, wparams, rs_param);
    fprintf(e->f, "        const float2 r = %s(b, row, col%s, v0, v1%s%s);\n"
                  "        tsg::store2(row_ptr(b, row) + col, r.x, r.y, col + 1 < n);\n    }\n",
            vname, in_arg, wargs, rs_arg);
    if (nl)
        fprintf(e->f, "    template <typename T>\n    __device__ __forceinline__ void apply(int b, int row, int col, float v0, float v1%s%s) const {\n"
                      "        apply_loaded<T>(b, row, col, load(b, row, col), v0, v1%s%s);\n    }\n",
                wparams, rs_param, wargs, rs_arg);
    fputs("};\n\n", e->f);
    for (int s = 0; s < k->nacc; s++) free(loads[s]);
    free(loads);
}

/* A method body of a row-parts functor: `if (j == i) { x_i; return v; }` for each expression of xs (n of them),
 * with ACC slot s named acc[s], loads inline at (b, row, cc) of index map m. */
static void print_stage_switch(emitter *e, const ts_kernel *k, const ts_expr *xs, int n, const index_map *m,
                               const char *const *acc) {
    for (int j = 0; j < n; j++) {
        fprintf(e->f, "        if (j == %d) {\n", j);
        print_expr(e, k, &xs[j], m, acc, "            ");
        fprintf(e->f, "            return v%d;\n        }\n", xs[j].n - 1);
    }
    fputs("        return 0.f;\n    }\n", e->f);
}

/* The functor of a GEMM reducing its product's rows (plan.h row_parts; gemm.cuh kRowParts): pre (the product's
 * value, the GEMM's own epilogue), part_term (each reduction's term within a tile), merge_term (a tile's share of
 * the whole row's), row_out (the per-row output). */
static void emit_gemm_row_parts_functor(emitter *e, int ki, const ts_kernel *k) {
    const char *tout = ctype_of(e->p->buf[k->out.buf].dtype);
    fprintf(e->f, "struct K%d {   /* the product's rows reduced: nothing of it is stored */\n    %s *out;\n    int64_t ob, om;\n    int n;\n",
            ki, tout);
    print_fields(e, k);
    const index_map m = gemm_index_map(k);
    fprintf(e->f, "    static constexpr int kRowParts = %d;\n    __host__ __device__ static constexpr bool part_max(int j) {\n"
                  "        return false", k->nstage);
    for (int j = 0; j < k->nstage; j++)
        if (k->stage_combine[j] == TS_COMBINE_MAX) fprintf(e->f, " || j == %d", j);
    fputs(";\n    }\n    __device__ __forceinline__ float pre(int b, int row, int col, float acc0) const {\n"
          "        (void)b, (void)row;\n        const int cc = col;\n        (void)cc;\n", e->f);
    const char *pre_acc[2] = {"acc0", "0.f"};
    print_expr(e, k, &k->pre, &m, pre_acc, "        ");
    fprintf(e->f, "        return v%d;\n    }\n", k->pre.n - 1);
    /* ACC 0: the value; 2 + i: this tile's result i; 2 + TS_ROW_MAX_STAGES + i: the row's result i */
    const char *names[2 + 2 * TS_ROW_MAX_STAGES] = {"v", "0.f", "part[0]", "part[1]", "part[2]", "part[3]",
                                                    "whole[0]", "whole[1]", "whole[2]", "whole[3]"};
    fputs("    __device__ __forceinline__ float part_term(int j, float v, const float *part) const {\n        (void)v, (void)part;\n", e->f);
    print_stage_switch(e, k, k->stage, k->nstage, &m, names);
    fputs("    __device__ __forceinline__ float merge_term(int j, const float *part, const float *whole) const {\n"
          "        (void)part, (void)whole;\n", e->f);
    print_stage_switch(e, k, k->merge, k->nstage, &m, names);
    const char *whole[TS_ROW_MAX_STAGES] = {"whole[0]", "whole[1]", "whole[2]", "whole[3]"};
    fputs("    __device__ __forceinline__ void row_out(int b, int row, const float *whole) const {\n"
          "        (void)b;\n", e->f);
    print_expr(e, k, &k->expr, &m, whole, "        ");
    fprintf(e->f, "        out[b * ob + (int64_t)row * om] = tst::elem<%s>::from_float(v%d);\n    }\n};\n\n", tout, k->expr.n - 1);
}

/* One method of a score functor, float name(float dot, int q, int k), computing x. */
static void print_score_method(emitter *e, const ts_kernel *k, const ts_expr *x, const index_map *m, const char *name,
                               bool loads) {
    fprintf(e->f, "    __device__ __forceinline__ float %s(float dot, int q, int k) const {\n        (void)q, (void)k;\n", name);
    if (loads) /* 32-bit: t_q and t_kv are int in the kernels */
        fputs("        const int qc = q < nq ? q : (int)nq - 1, kc = k < nk ? k : (int)nk - 1;\n        (void)qc, (void)kc;\n", e->f);
    const char *acc[2] = {"dot", "0.f"};
    e->fast_tanh = true; /* scores are rounded to fp16/bf16 weights: the hardware tanh is accurate enough */
    print_expr(e, k, x, m, acc, "        ");
    e->fast_tanh = false;
    fprintf(e->f, "        return v%d;\n    }\n", x->n - 1);
}

/* The pair form of a score method that loads (attention.cuh: pair / unmasked_pair(dot0, dot1, q, k) scores keys
 * k and k + 1, both < t_kv, when pair_ok()): each operand's two elements read once — one load where they sit
 * side by side — then the expression twice, with k, kc and dot of each key in a block of its own. */
static void print_score_pair_method(emitter *e, const ts_kernel *k, const ts_expr *x, const index_map *m, const char *name) {
    index_map m0 = *m, m1 = *m;
    for (int i = 0; i < m->n; i++)
        if (m->axis[i] == k->red_axis) m0.expr[i] = "kc0", m1.expr[i] = "kc1";
    fprintf(e->f, "    __device__ __forceinline__ float2 %s(float dot0, float dot1, int q, int k2) const {\n"
                  "        const int qc = q < nq ? q : (int)nq - 1, kc0 = k2, kc1 = k2 + 1;  // k2 + 1 < t_kv\n"
                  "        (void)qc, (void)kc0, (void)kc1;\n", name);
    int nl = 0;
    char **names[2];
    for (int h = 0; h < 2; h++) names[h] = ts_xcalloc((size_t)(k->nacc ? k->nacc : 1), sizeof *names[h]);
    for (int s = 0; s < k->nacc; s++)
        if (ts_expr_reads(x, s)) names[0][s] = ts_strfmt("ld0[%d]", nl), names[1][s] = ts_strfmt("ld1[%d]", nl), nl++;
    fprintf(e->f, "        float ld0[%d], ld1[%d];\n", nl, nl);
    for (int s = 0, i = -1; s < k->nacc; s++) {
        if (!names[0][s]) continue;
        i++;
        switch (pair_read_along(e, k, s, k->red_axis)) {
        case PAIR_SHARED:
            fprintf(e->f, "        ld0[%d] = ld1[%d] = ", i, i);
            print_load(e, k, s, &m0);
            fputs(";\n", e->f);
            break;
        case PAIR_ADJACENT:
            fprintf(e->f, "        {\n            const float2 t = tst::load2_ro(p%d + ", s);
            print_offset(e->f, k, s, &m0);
            fprintf(e->f, ");\n            ld0[%d] = t.x, ld1[%d] = t.y;\n        }\n", i, i);
            break;
        case PAIR_TWO:
            fprintf(e->f, "        ld0[%d] = ", i);
            print_load(e, k, s, &m0);
            fprintf(e->f, ";\n        ld1[%d] = ", i);
            print_load(e, k, s, &m1);
            fputs(";\n", e->f);
            break;
        }
    }
    fputs("        float2 r;\n", e->f);
    const char *acc[2] = {"dot", "0.f"};
    for (int h = 0; h < 2; h++) {
        fprintf(e->f, "        {\n            const float dot = dot%d;\n            const int k = k2%s, kc = kc%d;\n"
                      "            (void)k, (void)kc;\n", h, h ? " + 1" : "", h);
        e->fast_tanh = true; /* as print_score_method */
        e->load_expr = (const char *const *)names[h];
        print_expr(e, k, x, m, acc, "            ");
        e->load_expr = NULL;
        e->fast_tanh = false;
        fprintf(e->f, "            r.%c = v%d;\n        }\n", h ? 'y' : 'x', x->n - 1);
    }
    fputs("        return r;\n    }\n", e->f);
    for (int h = 0; h < 2; h++) {
        for (int s = 0; s < k->nacc; s++) free(names[h][s]);
        free(names[h]);
    }
}

/* The attention score functor: s(dot, q, k). A mask it reads is loaded at (q, k) clamped into the tensor
 * (nq × nk): the kernels call it on the padding rows and keys of their last tiles too, whose scores they
 * discard. */
static void emit_score_functor(emitter *e, int ki, const ts_kernel *k, bool causal) {
    fprintf(e->f, "struct K%d {\n    static constexpr bool causal = %s;\n", ki, causal ? "true" : "false");
    if (k->windowed) /* the graph's own mask: s = −inf for k < q − window, in the functor's q and k */
        fprintf(e->f, "    static constexpr double window = %.17g;\n", k->window);
    bool loads = score_loads(k);
    index_map m = {0};
    m.axis[m.n] = k->m_axis, m.expr[m.n++] = loads ? "qc" : "q";
    m.axis[m.n] = k->red_axis, m.expr[m.n++] = loads ? "kc" : "k";
    /* the batch and head axes (ALiBi's slope per head, a padding mask per sequence): from at(b, h) */
    int32_t kvh, qh;
    bool merged = attention_heads_merged(e, k, &kvh, &qh);
    char kv_ix[48], q_ix[48];
    snprintf(kv_ix, sizeof kv_ix, k->group > 1 ? "(h_ / %lld)" : "h_", (long long)k->group);
    snprintf(q_ix, sizeof q_ix, "(h_ %% %lld)", (long long)k->group);
    if (k->batch_axis >= 0) m.axis[m.n] = k->batch_axis, m.expr[m.n++] = "b_";
    if (kvh >= 0) m.axis[m.n] = kvh, m.expr[m.n++] = merged ? kv_ix : "b_";
    if (qh >= 0) m.axis[m.n] = qh, m.expr[m.n++] = merged ? q_ix : "h_";
    bool per_head = false;
    for (int s = 0; s < k->nacc; s++) { /* the tensors the score reads (none: loads false) */
        if (!ts_expr_reads(&k->expr, s)) continue;
        fprintf(e->f, "    const %s *p%d;\n    int64_t o%d, s%d[%d];\n", ctype_of(e->p->buf[k->acc[s].buf].dtype), s, s, s,
                k->acc[s].ndim ? k->acc[s].ndim : 1);
        for (int d = 0; d < k->acc[s].ndim; d++)
            per_head |= k->acc[s].axis[d] != k->m_axis && k->acc[s].axis[d] != k->red_axis;
    }
    if (loads) fputs("    int64_t nq, nk;  // t_q, t_kv: q and k are clamped into them for loads\n", e->f);
    if (per_head)
        fprintf(e->f, "    int b_, h_;  // the kernel's batch and query head (tst::score_at)\n"
                      "    __device__ __forceinline__ K%d at(int b, int h) const {\n        K%d r = *this;\n"
                      "        r.b_ = b, r.h_ = h;\n        return r;\n    }\n", ki, ki);
    ts_expr below = {0};
    double scale;
    if (!ts_attention_unmasked(k, head_dim(e, k), &below, &scale)) {
        print_score_method(e, k, &k->expr, &m, "operator()", loads);
        if (loads && print_pair_ok(e, k, &k->expr, &m, k->red_axis, false)) print_score_pair_method(e, k, &k->expr, &m, "pair");
    } else if (scale != 1) { /* a·dot below the diagonal: a goes into the softmax's constant (emit_attention_launch) */
        fputs("    // The graph masks every key after the query and scores the others scale·dot; the scale is folded\n"
              "    // into the softmax's exp2 constant (p.c), so a score is the dot product itself.\n"
              "    static constexpr bool masks_future = true;\n"
              "    __device__ __forceinline__ float operator()(float dot, int q, int k) const {\n"
              "        return k > q ? -INFINITY : dot;\n    }\n"
              "    __device__ __forceinline__ float unmasked(float dot, int, int) const { return dot; }\n", e->f);
    } else { /* the graph masks every k > q (plan.c) and `unmasked` equals the score wherever k <= q */
        print_score_method(e, k, &k->expr, &m, "operator()", loads);
        fputs("    // The score where the key is at or before the query (k <= q: the graph's causal comparisons\n"
              "    // folded away); the graph masks every later key, so the kernels compute k > q ? -inf : unmasked.\n"
              "    static constexpr bool masks_future = true;\n", e->f);
        print_score_method(e, k, &below, &m, "unmasked", loads);
        if (loads && print_pair_ok(e, k, &k->expr, &m, k->red_axis, false)) { /* below reads a subset of what expr reads */
            print_score_pair_method(e, k, &k->expr, &m, "pair");
            print_score_pair_method(e, k, &below, &m, "unmasked_pair");
        }
    }
    free(below.node);
    fputs("};\n\n", e->f);
}

/* Whether keys may be skipped past the bottom-right diagonal: the graph masks k > q (top-left), which
 * masks at least that much exactly when t_kv ≥ t_q for every size the header accepts. */
static bool causal_skip_ok(const emitter *e, const ts_kernel *k) {
    const ts_axis *q = &e->g->axes[k->m_axis], *kv = &e->g->axes[k->red_axis];
    if (!k->causal) return false;
    if (ts_axis_root(e->g, k->m_axis) == ts_axis_root(e->g, k->red_axis)) return true;
    return !q->dynamic && !kv->dynamic && kv->size >= q->size;
}

/* ---- one code instance per distinct kernel ------------------------------------------------------ */
/* Each kernel's functor and launch code is printed once as K<i> and K<i>_launch(<its buffers>, <dynamic
 * sizes>, sms, stream); a kernel whose code, printed under one name, is the same as an earlier kernel's
 * (the same kernel of another identical layer) calls that one's K<i>_launch with its own buffers. */

/* Adds buffer b to a kernel's parameters (each buffer once; written if any use writes it); returns the count. */
static int add_param(int *bufs, bool *written, int n, int b, bool w) {
    for (int i = 0; i < n; i++)
        if (bufs[i] == b) {
            written[i] |= w;
            return n;
        }
    bufs[n] = b, written[n] = w;
    return n + 1;
}

/* The buffers kernel k touches, in the order of its launch function's parameters: the outputs, then the
 * operands. bufs and written hold nacc + 2·TS_KERNEL_MAX_OUTS entries. Returns how many. */
static int kernel_buffers(const ts_kernel *k, int *bufs, bool *written) {
    int n = add_param(bufs, written, 0, k->out.buf, true);
    for (int o = 0; o < k->nextra; o++) n = add_param(bufs, written, n, k->extra_out[o].buf, true);
    if (ts_kernel_has_scratch(k)) n = add_param(bufs, written, n, k->scratch, true); /* (GEMM: no extra outputs then) */
    for (int o = 0; o < k->nrowstat; o++) n = add_param(bufs, written, n, k->rowstat_buf[o], true);
    for (int s = 0; s < k->nacc; s++) n = add_param(bufs, written, n, k->acc[s].buf, false);
    return n;
}

static void emit_functor(emitter *e, int ki, const ts_kernel *k) {
    if (ts_gemm_library_only(e->p, k)) return; /* cuBLASLt's alone: no epilogue functor */
    if (k->kind == TS_KERNEL_MAP) emit_map_functor(e, ki, k);
    else if (k->kind == TS_KERNEL_REDUCE) emit_reduce_functors(e, ki, k);
    else if (k->kind == TS_KERNEL_GEMM && k->row_parts) emit_gemm_row_parts_functor(e, ki, k);
    else if (k->kind == TS_KERNEL_GEMM) emit_gemm_functor(e, ki, k);
    else if (k->kind == TS_KERNEL_ROW) emit_row_functor(e, ki, k);
    else emit_score_functor(e, ki, k, causal_skip_ok(e, k));
}

/* Kernel k's functor and launch function, named K<id>. */
static void emit_kernel_code(emitter *e, int id, const ts_kernel *k) {
    size_t cap = (size_t)k->nacc + 2 * TS_KERNEL_MAX_OUTS;
    int *bufs = ts_xmalloc(cap * sizeof *bufs), *param_of = ts_xmalloc(((size_t)e->p->nbuf + 1) * sizeof *param_of);
    bool *written = ts_xmalloc(cap * sizeof *written);
    int n = kernel_buffers(k, bufs, written);
    for (int b = 0; b < e->p->nbuf; b++) param_of[b] = -1;
    for (int j = 0; j < n; j++) param_of[bufs[j]] = j;
    emit_functor(e, id, k);
    fprintf(e->f, "static cudaError_t K%d_launch(", id);
    for (int j = 0; j < n; j++)
        fprintf(e->f, "%s%s *K%d_b%d, ", written[j] ? "" : "const ", ctype_of(e->p->buf[bufs[j]].dtype), id, j);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "int64_t %s, ", e->dyn_names[d]);
    if (k->cfg.library) fputs("void *lt_workspace, ", e->f); /* cuBLASLt's share of the workspace */
    fputs("int sms, cudaStream_t stream) {\n    cudaError_t err;\n    (void)sms;\n", e->f);
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "    (void)%s;\n", e->dyn_names[d]);
    e->param_of = param_of, e->param_id = id;
    emit_kernel_launch(e, id, k);
    e->param_of = NULL;
    fputs("    return cudaSuccess;\n}\n\n", e->f);
    free(bufs);
    free(param_of);
    free(written);
}

/* code_of[i]: the first kernel whose code, printed under one name, is kernel i's. */
static void share_kernel_code(emitter *e) {
    char **text = ts_xcalloc((size_t)e->p->nk + 1, sizeof *text);
    FILE *out = e->f;
    e->code_of = ts_xmalloc(((size_t)e->p->nk + 1) * sizeof *e->code_of);
    for (int i = 0; i < e->p->nk; i++) {
        size_t len;
        e->f = open_memstream(&text[i], &len);
        TS_ASSERT(e->f);
        emit_kernel_code(e, -1, &e->p->k[i]);
        fclose(e->f);
        e->code_of[i] = i;
        for (int j = 0; j < i && e->code_of[i] == i; j++)
            if (e->code_of[j] == j && strcmp(text[j], text[i]) == 0) e->code_of[i] = j;
    }
    e->f = out;
    for (int i = 0; i < e->p->nk; i++) free(text[i]);
    free(text);
}

/* Kernel i's launch in the graph's launch function: its code's K<j>_launch with its own buffers. */
static void emit_kernel_call(emitter *e, int i) {
    const ts_kernel *k = &e->p->k[i];
    size_t cap = (size_t)k->nacc + 2 * TS_KERNEL_MAX_OUTS;
    int *bufs = ts_xmalloc(cap * sizeof *bufs);
    bool *written = ts_xmalloc(cap * sizeof *written);
    int n = kernel_buffers(k, bufs, written);
    char *what = ts_kernel_describe(e->p, e->g, i), ptr[160];
    fprintf(e->f, "    /* kernel %d: %s */\n    err = K%d_launch(", i + 1, what, e->code_of[i]);
    for (int j = 0; j < n; j++) {
        buf_ptr(e, bufs[j], ptr, sizeof ptr);
        fprintf(e->f, "%s, ", ptr);
    }
    for (int d = 0; d < e->dyn.n; d++) fprintf(e->f, "%s, ", e->dyn_names[d]);
    if (k->cfg.library) fputs("lt_workspace, ", e->f);
    fputs("sms, stream);\n    if (err != cudaSuccess) return err;\n", e->f);
    free(what);
    free(bufs);
    free(written);
}

/* The code of every distinct kernel (share_kernel_code), once. */
static void emit_kernels(emitter *e) {
    for (int i = 0; i < e->p->nk; i++)
        if (e->code_of[i] == i) emit_kernel_code(e, i, &e->p->k[i]);
}

/* The temporaries' pointers, slot by slot (workspace.h): every temporary of a slot starts where it does. */
static void emit_temp_pointers(emitter *e) {
    fputs("    if (!workspace) return cudaErrorInvalidValue;\n    char *ws = static_cast<char *>(workspace);\n", e->f);
    for (int s = 0; s < e->ws.nslot; s++) {
        for (int b = 0; b < e->p->nbuf; b++) {
            const ts_buffer *B = &e->p->buf[b];
            if (e->ws.slot_of[b] == s)
                fprintf(e->f, "    %s *tmp%d = reinterpret_cast<%s *>(ws);\n", ctype_of(B->dtype), B->index, ctype_of(B->dtype));
        }
        if (s + 1 == e->ws.nslot && !ts_plan_uses_cublas(e->p)) break;
        fputs("    ws += ", e->f);
        print_slot_bytes(e, s);
        fputs(";\n", e->f);
    }
    if (ts_plan_uses_cublas(e->p)) fputs("    void *lt_workspace = ws; /* cuBLASLt's, after the temporaries */\n", e->f);
}

static int emit_launch_fn(emitter *e, char **err) {
    (void)err;
    fprintf(e->f, "cudaError_t %s_launch(", e->name);
    print_signature(e);
    fprintf(e->f, "void *workspace, cudaStream_t stream) {\n    using namespace tsopt_%s;\n    fallback_note = nullptr;\n",
            e->name);
    emit_arg_checks(e);
    if (e->ws.nslot || ts_plan_uses_cublas(e->p)) emit_temp_pointers(e);
    else fputs("    (void)workspace;\n", e->f);
    fputs("    tst::DeviceFacts facts;\n    cudaError_t err = tst::device_facts(&facts); /* cached per device */\n"
          "    if (err != cudaSuccess) return err;\n    const int sms = facts.sms;\n", e->f);
    if (e->p->nk > 1) /* kernels after the first launch as programmatic dependents (tile.cuh) */
        fputs("    tst::PdlSequence pdl;\n", e->f);
    for (int i = 0; i < e->p->nk; i++) emit_kernel_call(e, i);
    fputs("    return cudaSuccess;\n}\n\n", e->f);
    return 0;
}

/* Whether a ROW kernel of p may take a cooperative grid (plan.h row_grid). */
static bool uses_row_grid(const ts_plan *p) {
    for (int i = 0; i < p->nk; i++)
        if (p->k[i].kind == TS_KERNEL_ROW && p->k[i].row_grid) return true;
    return false;
}

/* The part only the TU defining TSOPT_<NAME>_IMPLEMENTATION compiles: templates, functors, launch code. */
static int emit_implementation(emitter *e, char **err) {
    FILE *out = e->f;
    fprintf(out, "#if defined(TSOPT_%s_IMPLEMENTATION) && !defined(TSOPT_%s_IMPLEMENTED)\n#define TSOPT_%s_IMPLEMENTED\n",
            e->upper, e->upper, e->upper);
    fprintf(out, "#ifndef __CUDACC__\n#error \"TSOPT_%s_IMPLEMENTATION: define it in one .cu file compiled by nvcc (the kernels "
                 "are CUDA); other files include the header without it\"\n#endif\n\n", e->upper);
    /* tile.cuh's per-device caches and TSOPT_NO_PDL; the graph helper's lock */
    fputs("#include <atomic>\n#include <cstdlib>\n#include <mutex>\n", out);
    fputs("#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n#include <math.h>\n", out);
    if (uses_kind(e->p, TS_KERNEL_GEMM) || uses_kind(e->p, TS_KERNEL_ATTENTION)) /* TMA descriptor types only */
        fputs("#include <cuda.h>\n#include <cudaTypedefs.h>\n", out);
    if (ts_plan_uses_cublas(e->p)) fputs("#include <cublasLt.h>\n", out); /* --allow-cublas */
    if (uses_row_grid(e->p)) fputs("#include <cooperative_groups.h>  // row.cuh launch_row_grid's grid barrier\n", out);
    else if (uses_kind(e->p, TS_KERNEL_ROW)) /* row.cuh's TSW_ROW_GRID, renamed as its macros are (and #undef'd) */
        fputs("#define TSOPT_TSW_ROW_GRID 0  // no cooperative grid\n", out);
    /* Hidden visibility: no kernel, template instance or cache is exported from a shared library. Exported,
     * two libraries built from headers of one graph name (a torch op and a ctypes library, two tuned
     * candidates) would share their function-local statics as STB_GNU_UNIQUE symbols across the process,
     * RTLD_LOCAL or not: the second library's kernel then skips raising its shared-memory limit and its
     * launch fails with cudaErrorInvalidValue. (nvcc gives an unnamed namespace a named, exported form.) */
    fprintf(out, "\n#pragma GCC visibility push(hidden)  // nothing below is shared with another library\n"
                 "namespace tsopt_%s {\n\n", e->name);
    if (embed_templates(e, err)) return -1;
    fputs("\n// ---- fused expressions and launches of this plan's distinct kernels ---------------------------\n\n", out);
    fputs("static thread_local const char *fallback_note = nullptr; /* what <name>_fallback() returns */\n\n", out);
    emit_kernels(e);
    fprintf(out, "}  // namespace tsopt_%s\n#pragma GCC visibility pop\n\n", e->name);
    if (emit_launch_fn(e, err)) return -1;
    emit_c_abi(e);
    fputc('\n', out);
    emit_graph_helper(e);
    fputc('\n', out);
    for (int i = 0; i < e->nmacros; i++) fprintf(out, "#undef TSOPT_%s\n", e->macros[i]);
    fprintf(out, "#endif  /* TSOPT_%s_IMPLEMENTATION */\n", e->upper);
    return 0;
}

/* The C identifiers of the graph's tensors and dynamic axes (ts_emit_ident), in e. */
static void name_identifiers(emitter *e) {
    e->in_names = ts_xcalloc((size_t)e->g->ninputs + 1, sizeof *e->in_names);
    e->out_names = ts_xcalloc((size_t)e->g->noutputs + 1, sizeof *e->out_names);
    for (int i = 0; i < e->g->ninputs; i++) e->in_names[i] = ts_emit_ident(e->g->inputs[i].name);
    for (int i = 0; i < e->g->noutputs; i++) e->out_names[i] = ts_emit_ident(e->g->outputs[i].name);
    for (int d = 0; d < e->dyn.n; d++) e->dyn_names[d] = ts_emit_ident(e->g->axes[e->dyn.axis[d]].name);
    e->nout = ts_graph_abi_outputs(e->g);
}

static void free_identifiers(emitter *e) {
    for (int i = 0; i < e->g->ninputs; i++) free(e->in_names[i]);
    for (int i = 0; i < e->g->noutputs; i++) free(e->out_names[i]);
    for (int d = 0; d < e->dyn.n; d++) free((char *)e->dyn_names[d]);
    free(e->in_names);
    free(e->out_names);
}

/* A GEMM configured for cuBLASLt is one libgemm.h matches (the search and tune configure only those; a plan
 * transform that broke it is refused here, not emitted). */
static int check_library_gemm(const emitter *e, int ki, const ts_kernel *k, char **err) {
    ts_lt_epilogue ep;
    const char *why = NULL;
    if (k->kind != TS_KERNEL_GEMM || !k->cfg.library || ts_libgemm_match(e->g, e->p, k, &ep, &why)) return 0;
    *err = ts_strfmt("kernel %d (GEMM) is configured for cuBLASLt, which cannot run it: %s", ki + 1, why);
    return -1;
}

static int emit_parts(emitter *e, char **err) {
    for (int ki = 0; ki < e->p->nk; ki++) {
        if (e->p->k[ki].kind == TS_KERNEL_ROW && check_row_kernel(e, ki, &e->p->k[ki], err)) return -1;
        if (check_library_gemm(e, ki, &e->p->k[ki], err)) return -1;
    }
    ts_workspace_plan(e->p, e->g, &e->dyn, &e->ws);
    share_kernel_code(e);
    emit_banner(e);
    emit_contract_note(e);
    emit_declarations(e);
    if (emit_implementation(e, err)) return -1;
    if (ferror(e->f)) {
        *err = ts_strdup("write error");
        return -1;
    }
    return 0;
}

int ts_emit_header(FILE *out, const ts_graph *g, const ts_plan *p, const ts_emit_opts *o, char **err) {
    emitter e = {.f = out, .g = g, .p = p, .o = o, .name = o->name ? o->name : g->name};
    if (!ts_emit_name_ok(e.name)) {
        *err = ts_strfmt("'%s' cannot prefix C symbols (a C identifier of at most 64 characters, not starting with "
                         "__ or _ and a capital, is needed): choose one with --name", e.name);
        return -1;
    }
    if (ts_dyn_of(g, &e.dyn) != 0) {
        *err = ts_strfmt("more than %d dynamic axes", TS_SYM_MAX_DYN);
        return -1;
    }
    size_t i = 0;
    for (; e.name[i] && i + 1 < sizeof e.upper; i++) e.upper[i] = (char)toupper((unsigned char)e.name[i]);
    e.upper[i] = '\0';
    name_identifiers(&e);
    int rc = emit_parts(&e, err);
    ts_workspace_free(&e.ws);
    free(e.code_of);
    free_identifiers(&e);
    return rc;
}

int ts_emit_header_file(const char *dir, const ts_graph *g, const ts_plan *p, const ts_emit_opts *o, char **err) {
    struct stat st;
    if (stat(dir, &st) != 0 && mkdir(dir, 0777) != 0) {
        *err = ts_strfmt("cannot create folder %s: %s", dir, strerror(errno));
        return -1;
    }
    const char *name = o->name ? o->name : g->name;
    char *path = ts_strfmt("%s/%s.cuh", dir, name), *tmp = ts_strfmt("%s/.%s.cuh.tmp", dir, name);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (!f) {
        *err = ts_strfmt("cannot write %s: %s", tmp, strerror(errno));
    } else {
        rc = ts_emit_header(f, g, p, o, err);
        if (fclose(f) != 0 && rc == 0) {
            rc = -1;
            *err = ts_strfmt("cannot write %s", tmp);
        }
        if (rc == 0 && rename(tmp, path) != 0) {
            rc = -1;
            *err = ts_strfmt("cannot rename %s: %s", tmp, strerror(errno));
        }
        if (rc != 0) unlink(tmp);
    }
    free(path);
    free(tmp);
    return rc;
}
