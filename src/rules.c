/* rules.c — the rule language's lexer and parser, e-matching, guards and instantiation (see rules.h for
 * the syntax). It does not run rules to saturation (runner.c) and defines no guards (clients do). */
#include "rules.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "util.h"

/* ======== lexer =================================================================================== */

typedef enum {
    T_EOF,
    T_LPAREN,
    T_RPAREN,
    T_LBRACE,
    T_RBRACE,
    T_COMMA,
    T_COLON,
    T_SEMI,   /* ; between the patterns of a multi-pattern side */
    T_ARROW,  /* => */
    T_DARROW, /* <=> */
    T_VAR,    /* ?name (text includes the '?') */
    T_INT,
    T_SYM,
    T_BADCHAR, /* a character the language does not use (reported where the parser meets it) */
    T_BADINT,  /* a malformed or out-of-range integer */
} tok_kind;

typedef struct {
    tok_kind kind;
    int line, col, len;
    const char *text;
    int64_t value; /* T_INT */
} token;

typedef struct {
    int first_line, last_line;
    char *text;
} doc_block;

typedef struct {
    ts_rules *rs;
    ts_diags *d;
    const char *file;
    token *tok;
    int ntok, cap_tok, pos;
    doc_block *doc;
    int ndoc, cap_doc;
    const ts_eg_ops *ops;
    bool term_mode; /* parsing a ground term: variables are errors */
    int depth; /* nesting of the pattern being parsed (bounded: parsing recurses) */
} parser;

static void perr_at(parser *p, int line, int col, int len, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void perr_at(parser *p, int line, int col, int len, const char *hint, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_diag_add(p->d, TS_ERROR, line, col, len, hint, "%s", msg);
}

#define perr(p, t, ...) perr_at((p), (t)->line, (t)->col, (t)->len, NULL, __VA_ARGS__)

static bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static bool is_name_char(char c) { return is_name_start(c) || is_digit(c) || c == '-' || c == '.'; }

static void push_tok(parser *p, token t) {
    TS_GROW(p->tok, p->ntok, p->cap_tok);
    p->tok[p->ntok++] = t;
}

/* Appends a comment-only line's text to the doc block it continues, or starts a new block. */
static void add_doc_line(parser *p, int line, const char *s, int len) {
    if (len > 0 && s[0] == ' ') s++, len--;
    doc_block *b = p->ndoc > 0 ? &p->doc[p->ndoc - 1] : NULL;
    if (b && b->last_line == line - 1) {
        char *t = ts_strfmt("%s\n%.*s", b->text, len, s);
        free(b->text);
        b->text = t;
        b->last_line = line;
        return;
    }
    TS_GROW(p->doc, p->ndoc, p->cap_doc);
    p->doc[p->ndoc++] = (doc_block){line, line, ts_strfmt("%.*s", len, s)};
}

/* Lexes an integer at s; false when malformed or out of range. */
static bool lex_int(const char *s, int len, int64_t *out) {
    char buf[40];
    if (len >= (int)sizeof buf) return false;
    memcpy(buf, s, (size_t)len);
    buf[len] = 0;
    char *end;
    errno = 0;
    bool hex = len > 2 && buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
    if (hex) {
        unsigned long long u = strtoull(buf, &end, 16); /* a bit pattern: all 64 bits allowed */
        *out = (int64_t)u;
    } else {
        *out = strtoll(buf, &end, 10);
    }
    return errno == 0 && *end == 0;
}

static int scan_word(const char *s) {
    int n = 1;
    while (is_name_char(s[n])) n++;
    return n;
}

/* Lexes one token at s (not whitespace or comment); returns its length. */
static int lex_one(parser *p, const char *s, int line, int col) {
    token t = {T_EOF, line, col, 1, s, 0};
    static const char single[] = "(){},:;";
    static const tok_kind single_kind[] = {T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE, T_COMMA, T_COLON, T_SEMI};
    const char *hit = strchr(single, *s);
    if (hit) {
        t.kind = single_kind[hit - single];
    } else if (s[0] == '=' && s[1] == '>') {
        t.kind = T_ARROW, t.len = 2;
    } else if (s[0] == '<' && s[1] == '=' && s[2] == '>') {
        t.kind = T_DARROW, t.len = 3;
    } else if (s[0] == '?' && is_name_start(s[1])) {
        t.kind = T_VAR, t.len = scan_word(s + 1) + 1;
    } else if (is_digit(s[0]) || (s[0] == '-' && is_digit(s[1]))) {
        t.kind = T_INT, t.len = scan_word(s);
        if (!lex_int(s, t.len, &t.value)) t.kind = T_BADINT;
    } else if (is_name_start(s[0])) {
        t.kind = T_SYM, t.len = scan_word(s);
    } else {
        t.kind = T_BADCHAR;
    }
    push_tok(p, t);
    return t.len;
}

static void lex(parser *p, const char *text) {
    int line = 1;
    const char *line_start = text, *s = text;
    bool line_has_token = false;
    while (*s) {
        if (*s == '\n') {
            line++, s++, line_start = s, line_has_token = false;
        } else if (*s == ' ' || *s == '\t' || *s == '\r') {
            s++;
        } else if (*s == '#') {
            const char *e = strchr(s, '\n');
            int len = e ? (int)(e - s) : (int)strlen(s);
            if (!line_has_token) add_doc_line(p, line, s + 1, len - 1);
            s += len;
        } else {
            s += lex_one(p, s, line, (int)(s - line_start) + 1);
            line_has_token = true;
        }
    }
    token eof = {T_EOF, line, (int)(s - line_start) + 1, 1, s, 0};
    if (p->ntok > 0) { /* "got end of file" points just past the last token, not at an empty last line */
        const token *last = &p->tok[p->ntok - 1];
        eof.line = last->line;
        eof.col = last->col + last->len;
    }
    push_tok(p, eof);
}

/* ======== parser helpers ========================================================================== */

static const token *peek(const parser *p) { return &p->tok[p->pos]; }
static const token *next(parser *p) {
    const token *t = &p->tok[p->pos];
    if (t->kind != T_EOF) p->pos++;
    return t;
}

static bool tok_is(const token *t, const char *word) {
    return t->kind == T_SYM && (int)strlen(word) == t->len && strncmp(t->text, word, (size_t)t->len) == 0;
}

static bool is_keyword(const token *t) { return tok_is(t, "rule") || tok_is(t, "ruleset") || tok_is(t, "if"); }

/* Where a rule ends: the next rule or ruleset, or the end of the file. */
static bool at_rule_end(const token *t) {
    return t->kind == T_EOF || tok_is(t, "rule") || tok_is(t, "ruleset");
}

static char *tok_str(const token *t) { return ts_strfmt("%.*s", t->len, t->text); }

/* A short description of a token for messages: 'text' or "end of file". */
static const char *describe(const token *t, char *buf, size_t n) {
    if (t->kind == T_EOF) return "end of file";
    snprintf(buf, n, "'%.*s'", t->len > 40 ? 40 : t->len, t->text);
    return buf;
}

static void err_unexpected(parser *p, const token *t, const char *expected) {
    char buf[64];
    unsigned char c = (unsigned char)*t->text;
    if (t->kind == T_BADCHAR && (c <= 0x20 || c >= 0x7f))
        perr(p, t, "expected %s, got byte 0x%02x", expected, c);
    else if (t->kind == T_BADINT)
        perr(p, t, "bad integer '%.*s' (not a 64-bit integer)", t->len, t->text);
    else if (t->kind == T_RPAREN)
        perr(p, t, "unbalanced parentheses: ')' has no matching '('");
    else
        perr(p, t, "expected %s, got %s", expected, describe(t, buf, sizeof buf));
}

/* The op names the lexer could have meant, for "did you mean" hints. */
static const char *closest_op(const ts_eg_ops *ops, const char *word) {
    const char *names[TS_OP_COUNT + 64];
    int n = 0;
    for (int32_t op = 0; n < (int)(sizeof names / sizeof *names); op++) {
        const ts_eg_opinfo *info = ts_eg_op_info(ops, op);
        if (!info) break;
        names[n++] = info->name;
    }
    return ts_closest_name(word, names, n);
}

static const char *plural(int n, const char *one, const char *many) { return n == 1 ? one : many; }

/* ======== patterns ================================================================================ */

typedef enum { SIDE_LEFT, SIDE_RIGHT, SIDE_GUARD } side;

/* The rule being parsed. */
typedef struct {
    ts_rule r;
    side side;
    bool on_right[TS_RULE_MAX_VARS]; /* used by the right side */
    const token *first_use[TS_RULE_MAX_VARS];
    ts_pat_node pat[TS_RULE_MAX_PAT];
    uint32_t npat;
    bool too_big;
} rule_build;

static int find_var(const rule_build *b, const token *t) {
    for (int i = 0; i < b->r.nvars; i++)
        if ((int)strlen(b->r.var[i].name) == t->len && strncmp(b->r.var[i].name, t->text, (size_t)t->len) == 0)
            return i;
    return -1;
}

/* The index of variable t used as a param (or operand) variable; -1 after reporting an error. */
static int use_var(parser *p, rule_build *b, const token *t, bool is_param) {
    if (p->term_mode) {
        perr(p, t, "a term cannot contain variables ('%.*s')", t->len, t->text);
        return -1;
    }
    int v = find_var(b, t);
    if (v < 0 && b->side != SIDE_LEFT) {
        perr(p, t, "'%.*s' is not bound by the left side", t->len, t->text);
        return -1;
    }
    if (v < 0 && b->r.nvars == TS_RULE_MAX_VARS) {
        perr(p, t, "too many variables (at most %d per rule)", TS_RULE_MAX_VARS);
        return -1;
    }
    if (v < 0) {
        v = b->r.nvars++;
        b->r.var[v] = (ts_rule_var){tok_str(t), is_param};
        b->first_use[v] = t;
    }
    if (b->side != SIDE_GUARD && b->r.var[v].is_param != is_param) {
        perr(p, t, "'%.*s' is used both as an operand and as a param", t->len, t->text);
        return -1;
    }
    if (b->side == SIDE_RIGHT) b->on_right[v] = true;
    return v;
}

static int add_pat(parser *p, rule_build *b, const token *at, ts_pat_node n) {
    if (b->npat == TS_RULE_MAX_PAT) {
        if (!b->too_big) perr(p, at, "pattern too large (more than %d nodes)", TS_RULE_MAX_PAT);
        b->too_big = true;
        return -1;
    }
    b->pat[b->npat] = n;
    return (int)b->npat++;
}

/* Parses '{' param {',' param} '}' into n; the count goes to *count (may exceed the storage). */
static bool parse_params(parser *p, rule_build *b, ts_pat_node *n, int *count) {
    next(p); /* '{' */
    for (;;) {
        const token *t = next(p);
        int64_t value;
        bool is_var = t->kind == T_VAR;
        if (is_var) {
            int v = use_var(p, b, t, true);
            if (v < 0) return false;
            value = v;
        } else if (t->kind == T_INT) {
            value = t->value;
        } else {
            err_unexpected(p, t, "a param (an integer or a ?variable)");
            return false;
        }
        if (*count < TS_EG_MAX_PARAMS) {
            n->param[*count] = value;
            if (is_var) n->param_var = (uint8_t)(n->param_var | 1u << *count);
        }
        (*count)++;
        t = next(p);
        if (t->kind == T_RBRACE) return true;
        if (t->kind != T_COMMA) {
            err_unexpected(p, t, "',' or '}' in the params");
            return false;
        }
    }
}

/* Looks up op `t`; reports unknown ops. */
static bool lookup_op(parser *p, const token *t, int32_t *op) {
    char *name = tok_str(t);
    *op = ts_eg_op_lookup(p->ops, name);
    if (*op < 0) {
        const char *near = closest_op(p->ops, name);
        char *hint = near ? ts_strfmt("did you mean '%s'?", near) : NULL;
        perr_at(p, t->line, t->col, t->len, hint, "unknown op '%s'", name);
        free(hint);
    }
    free(name);
    return *op >= 0;
}

/* Checks the operand and param counts of op token t. */
static bool check_counts(parser *p, const token *t, int32_t op, int nkids, int nparams) {
    const ts_eg_opinfo *info = ts_eg_op_info(p->ops, op);
    if (nkids != info->arity) {
        perr(p, t, "'%s' takes %d %s, got %d", info->name, info->arity, plural(info->arity, "operand", "operands"),
             nkids);
        return false;
    }
    if (nparams != info->nparams) {
        perr(p, t, "'%s' takes %d %s, got %d", info->name, info->nparams, plural(info->nparams, "param", "params"),
             nparams);
        return false;
    }
    return true;
}

static int parse_pattern(parser *p, rule_build *b);

/* Can token t not start an operand, so that an open '(' before it is never closed? */
static bool ends_operands(const token *t) {
    return t->kind == T_EOF || t->kind == T_ARROW || t->kind == T_DARROW || t->kind == T_COLON ||
           t->kind == T_SEMI || is_keyword(t);
}

/* OP [params] [operands...] after an optional '(' (open: the '(' token, or NULL for a bare atom). */
static int parse_op_node(parser *p, rule_build *b, const token *open) {
    const token *opt = next(p);
    ts_pat_node n;
    memset(&n, 0, sizeof n);
    int32_t op;
    if (!lookup_op(p, opt, &op)) return -1;
    int nparams = 0, nkids = 0;
    if (peek(p)->kind == T_LBRACE && !parse_params(p, b, &n, &nparams)) return -1;
    while (open && peek(p)->kind != T_RPAREN) {
        if (ends_operands(peek(p))) {
            perr(p, open, "unbalanced parentheses: '(' is never closed");
            return -1;
        }
        int k = parse_pattern(p, b);
        if (k < 0) return -1;
        if (nkids < TS_EG_MAX_KIDS) n.kid[nkids] = (uint32_t)k;
        nkids++;
    }
    if (open) next(p); /* ')' */
    if (!check_counts(p, opt, op, nkids, nparams)) return -1;
    n.op = op;
    n.nkids = (uint8_t)nkids;
    n.nparams = (uint8_t)nparams;
    return add_pat(p, b, opt, n);
}

/* Parses one pattern; returns its node index, or -1 after reporting an error. */
#define TS_RULE_MAX_DEPTH TS_RULE_MAX_PAT /* deeper patterns cannot fit a rule anyway */

static int parse_pattern_at(parser *p, rule_build *b);

/* A pattern, nested at most TS_RULE_MAX_DEPTH levels (the parser recurses once per level). */
static int parse_pattern(parser *p, rule_build *b) {
    if (p->depth >= TS_RULE_MAX_DEPTH) {
        perr(p, peek(p), "pattern nested deeper than %d levels", TS_RULE_MAX_DEPTH);
        return -1;
    }
    p->depth++;
    int r = parse_pattern_at(p, b);
    p->depth--;
    return r;
}

static int parse_pattern_at(parser *p, rule_build *b) {
    const token *t = peek(p);
    if (t->kind == T_VAR) {
        next(p);
        int v = use_var(p, b, t, false);
        if (v < 0) return -1;
        ts_pat_node n;
        memset(&n, 0, sizeof n);
        n.op = TS_PAT_VAR;
        n.var = (uint16_t)v;
        return add_pat(p, b, t, n);
    }
    if (t->kind == T_SYM && !is_keyword(t)) return parse_op_node(p, b, NULL);
    if (t->kind != T_LPAREN) {
        err_unexpected(p, t, "a pattern");
        return -1;
    }
    next(p);
    const token *opt = peek(p);
    if (opt->kind == T_SYM && !is_keyword(opt)) return parse_op_node(p, b, t);
    if (opt->kind == T_RPAREN)
        perr(p, t, "empty '()': expected an op name after '('");
    else if (ends_operands(opt))
        perr(p, t, "unbalanced parentheses: '(' is never closed");
    else
        err_unexpected(p, opt, "an op name after '('");
    return -1;
}

/* Copies the parsed pattern nodes [from, npat) into a fresh pattern, reindexing kids. */
static ts_pattern take_pattern(const rule_build *b, uint32_t from, uint32_t to) {
    ts_pattern out = {ts_xmalloc((to - from) * sizeof(ts_pat_node)), to - from};
    for (uint32_t i = from; i < to; i++) {
        ts_pat_node n = b->pat[i];
        for (int k = 0; k < n.nkids; k++) n.kid[k] -= from;
        out.node[i - from] = n;
    }
    return out;
}

/* ======== rules =================================================================================== */

/* The index of the guard named by t; reports unknown guards. */
static int lookup_guard(parser *p, const token *t) {
    const ts_rule_env *env = &p->rs->env;
    for (int i = 0; i < env->nguards; i++)
        if (tok_is(t, env->guards[i].name)) return i;
    const char *names[256];
    int n = env->nguards < 256 ? env->nguards : 256;
    for (int i = 0; i < n; i++) names[i] = env->guards[i].name;
    char *word = tok_str(t);
    const char *near = ts_closest_name(word, names, n);
    char *hint = near ? ts_strfmt("did you mean '%s'?", near) : NULL;
    perr_at(p, t->line, t->col, t->len, hint, "unknown guard '%s'", word);
    free(hint);
    free(word);
    return -1;
}

/* '(' GUARD args... ')' */
static bool parse_guard(parser *p, rule_build *b, ts_rule_cond *c) {
    const token *open = next(p);
    const token *gt = peek(p);
    if (gt->kind != T_SYM || is_keyword(gt)) {
        err_unexpected(p, gt, "a guard name after '('");
        return false;
    }
    next(p);
    const ts_rule_env *env = &p->rs->env;
    c->guard = lookup_guard(p, gt);
    if (c->guard < 0) return false;
    c->nargs = 0;
    while (peek(p)->kind != T_RPAREN) {
        const token *a = peek(p);
        ts_rule_garg g = {false, 0};
        if (a->kind == T_VAR) {
            int v = use_var(p, b, a, false);
            if (v < 0) return false;
            g = (ts_rule_garg){true, v};
        } else if (a->kind == T_INT) {
            g = (ts_rule_garg){false, a->value};
        } else if (ends_operands(a)) {
            perr(p, open, "unbalanced parentheses: '(' is never closed");
            return false;
        } else {
            err_unexpected(p, a, "a ?variable or an integer as a guard argument");
            return false;
        }
        next(p);
        if (c->nargs < TS_RULE_MAX_GUARD_ARGS) c->arg[c->nargs] = g;
        c->nargs++;
    }
    next(p); /* ')' */
    if (c->nargs > TS_RULE_MAX_GUARD_ARGS) {
        perr(p, gt, "too many guard arguments (at most %d)", TS_RULE_MAX_GUARD_ARGS);
        return false;
    }
    int want = env->guards[c->guard].arity;
    if (c->nargs != want) {
        perr(p, gt, "guard '%s' takes %d %s, got %d", env->guards[c->guard].name, want,
             plural(want, "argument", "arguments"), c->nargs);
        return false;
    }
    return true;
}

static bool parse_guards(parser *p, rule_build *b) {
    if (!tok_is(peek(p), "if")) return true;
    next(p);
    b->side = SIDE_GUARD;
    if (peek(p)->kind != T_LPAREN) {
        err_unexpected(p, peek(p), "a guard '(name ?var ...)' after 'if'");
        return false;
    }
    int cap = 0;
    while (peek(p)->kind == T_LPAREN) {
        TS_GROW(b->r.cond, b->r.nconds, cap);
        if (!parse_guard(p, b, &b->r.cond[b->r.nconds])) return false;
        b->r.nconds++;
    }
    return true;
}

/* For '<=>': both sides must bind every variable, and neither may be a bare variable. */
static bool check_two_way(parser *p, rule_build *b, const token *rhs_tok) {
    if (b->pat[b->npat - 1].op == TS_PAT_VAR) {
        perr(p, rhs_tok, "the right side of a '<=>' rule cannot be a bare variable (use '=>')");
        return false;
    }
    for (int v = 0; v < b->r.nvars; v++) {
        if (b->on_right[v]) continue;
        const token *t = b->first_use[v];
        perr(p, t, "'%s' is not bound by the right side (both sides of a '<=>' rule must bind it)",
             b->r.var[v].name);
        return false;
    }
    return true;
}

static void rule_free(ts_rule *r) {
    free(r->name);
    free(r->doc);
    free(r->lhs.node);
    free(r->rhs.node);
    for (int i = 0; i < TS_RULE_MAX_ROOTS - 1; i++) {
        free(r->more_lhs[i].node);
        free(r->more_rhs[i].node);
    }
    for (int v = 0; v < r->nvars; v++) free(r->var[v].name);
    free(r->cond);
    memset(r, 0, sizeof *r);
}

static const char *doc_for(const parser *p, int line) {
    for (int i = 0; i < p->ndoc; i++)
        if (p->doc[i].last_line == line - 1) return p->doc[i].text;
    return NULL;
}

static int ruleset_index(ts_rules *rs, const char *name) {
    int i = ts_rule_find_ruleset(rs, name);
    if (i >= 0) return i;
    TS_GROW(rs->set, rs->nsets, rs->cap_sets);
    rs->set[rs->nsets] = (ts_ruleset){ts_strdup(name), NULL, 0, 0};
    return rs->nsets++;
}


/* Adds rule r (taking its memory) unless its name is taken, which is reported at name_tok. */
static bool commit_rule(parser *p, ts_rule *r, const token *name_tok) {
    ts_rules *rs = p->rs;
    int dup = ts_rule_find(rs, r->name);
    if (dup >= 0) {
        const ts_rule *o = &rs->rule[dup];
        perr(p, name_tok, "duplicate rule name '%s' (first defined at %s:%d:%d)", r->name, o->file, o->line, o->col);
        rule_free(r);
        return false;
    }
    TS_GROW(rs->rule, rs->nrules, rs->cap_rules);
    rs->rule[rs->nrules] = *r;
    ts_ruleset *set = &rs->set[r->ruleset];
    TS_GROW(set->rule, set->n, set->cap);
    set->rule[set->n++] = rs->nrules++;
    return true;
}

static char *dup_or_null(const char *s) { return s ? ts_strdup(s) : NULL; }

/* The right-to-left half of two-way rule r. */
static ts_rule reverse_of(const ts_rule *r) {
    ts_rule v = *r;
    v.name = ts_strfmt("%s-rev", r->name);
    v.doc = dup_or_null(r->doc);
    v.reverse = true;
    v.lhs = (ts_pattern){ts_xmalloc(r->rhs.n * sizeof(ts_pat_node)), r->rhs.n};
    memcpy(v.lhs.node, r->rhs.node, r->rhs.n * sizeof(ts_pat_node));
    v.rhs = (ts_pattern){ts_xmalloc(r->lhs.n * sizeof(ts_pat_node)), r->lhs.n};
    memcpy(v.rhs.node, r->lhs.node, r->lhs.n * sizeof(ts_pat_node));
    for (int i = 0; i < r->nvars; i++) v.var[i].name = ts_strdup(r->var[i].name);
    v.cond = NULL;
    if (r->nconds > 0) {
        v.cond = ts_xmalloc((size_t)r->nconds * sizeof *v.cond);
        memcpy(v.cond, r->cond, (size_t)r->nconds * sizeof *v.cond);
    }
    return v;
}

/* The patterns of one side, as parsed: pattern i is b->pat[end[i-1] .. end[i]) (end[-1]: `from`). */
typedef struct {
    int n;
    uint32_t from, end[TS_RULE_MAX_ROOTS];
    const token *first; /* the side's first token */
} side_parse;

/* Parses pattern { ';' pattern } as side `sd` into b; false after reporting an error. */
static bool parse_side(parser *p, rule_build *b, side sd, side_parse *out) {
    b->side = sd;
    out->n = 0;
    out->from = b->npat;
    out->first = peek(p);
    for (;;) {
        const token *t = peek(p);
        if (out->n == TS_RULE_MAX_ROOTS) {
            perr(p, t, "too many patterns (at most %d on a side)", TS_RULE_MAX_ROOTS);
            return false;
        }
        int k = parse_pattern(p, b);
        if (k < 0) return false;
        if (sd == SIDE_LEFT && b->pat[k].op == TS_PAT_VAR) {
            perr(p, t, "the left side of a rule cannot be a bare variable");
            return false;
        }
        out->end[out->n++] = b->npat;
        if (peek(p)->kind != T_SEMI) return true;
        next(p);
    }
}

static bool err_two_way_multi(parser *p, const token *arrow) {
    perr(p, arrow, "'<=>' cannot join multi-patterns (write each direction as a '=>' rule)");
    return false;
}

/* Checks that the arrow joins sides of equal pattern counts, and that '<=>' joins single patterns. */
static bool check_sides(parser *p, const token *arrow, const side_parse *l, const side_parse *r) {
    if (arrow->kind == T_DARROW && (l->n > 1 || r->n > 1)) return err_two_way_multi(p, arrow);
    if (l->n != r->n) {
        perr(p, arrow, "%d left %s but %d right %s (a multi-pattern rule needs one right pattern per left one)",
             l->n, plural(l->n, "pattern", "patterns"), r->n, plural(r->n, "pattern", "patterns"));
        return false;
    }
    return true;
}

/* Reports anything but the end of the rule at the current token. */
static bool expect_rule_end(parser *p) {
    const token *t = peek(p);
    if (at_rule_end(t)) return true;
    char buf[64];
    if (t->kind == T_RPAREN)
        err_unexpected(p, t, "the next rule");
    else
        perr(p, t, "unexpected %s after the rule (a rule ends where the next 'rule' begins)",
             describe(t, buf, sizeof buf));
    return false;
}

/* Pattern i of side s, out of b. */
static ts_pattern side_pattern(const rule_build *b, const side_parse *s, int i) {
    return take_pattern(b, i == 0 ? s->from : s->end[i - 1], s->end[i]);
}

static void take_sides(rule_build *b, const side_parse *l, const side_parse *r) {
    b->r.npatterns = l->n;
    b->r.lhs = side_pattern(b, l, 0);
    b->r.rhs = side_pattern(b, r, 0);
    for (int i = 1; i < l->n; i++) {
        b->r.more_lhs[i - 1] = side_pattern(b, l, i);
        b->r.more_rhs[i - 1] = side_pattern(b, r, i);
    }
}

/* Parses the sides and guards of a rule into b; false after reporting an error. */
static bool parse_rule_body(parser *p, rule_build *b, bool *two_way) {
    side_parse l, r;
    if (!parse_side(p, b, SIDE_LEFT, &l)) return false;
    const token *arrow = next(p);
    if (arrow->kind != T_ARROW && arrow->kind != T_DARROW) {
        err_unexpected(p, arrow, l.n > 1 ? "'=>' after the left side" : "'=>' or '<=>' after the left side");
        return false;
    }
    *two_way = arrow->kind == T_DARROW;
    if (*two_way && l.n > 1) return err_two_way_multi(p, arrow);
    if (!parse_side(p, b, SIDE_RIGHT, &r) || !check_sides(p, arrow, &l, &r)) return false;
    if (*two_way && !check_two_way(p, b, r.first)) return false;
    if (!parse_guards(p, b) || !expect_rule_end(p)) return false;
    take_sides(b, &l, &r);
    return true;
}

/* 'rule' NAME ':' ...; false after reporting an error. */
static bool parse_rule(parser *p, int set) {
    const token *kw = next(p); /* 'rule' */
    const token *name = next(p);
    if (name->kind != T_SYM || is_keyword(name)) {
        err_unexpected(p, name, "a rule name after 'rule'");
        return false;
    }
    const token *colon = next(p);
    if (colon->kind != T_COLON) {
        err_unexpected(p, colon, "':' after the rule name");
        return false;
    }
    rule_build *b = ts_xcalloc(1, sizeof *b);
    bool two_way = false;
    bool ok = parse_rule_body(p, b, &two_way);
    if (ok) {
        ts_rule *r = &b->r;
        r->name = tok_str(name);
        r->doc = dup_or_null(doc_for(p, kw->line));
        r->file = p->file;
        r->line = name->line;
        r->col = name->col;
        r->ruleset = set;
        ts_rule rev = two_way ? reverse_of(r) : (ts_rule){0};
        if (commit_rule(p, r, name) && two_way)
            commit_rule(p, &rev, name);
        else if (two_way)
            rule_free(&rev);
    } else {
        rule_free(&b->r);
    }
    free(b);
    return ok;
}

static void skip_to_rule_end(parser *p) {
    while (!at_rule_end(peek(p))) next(p);
}

static void parse_file(parser *p) {
    int set = -1;
    while (peek(p)->kind != T_EOF) {
        const token *t = peek(p);
        if (tok_is(t, "ruleset")) {
            next(p);
            const token *name = next(p);
            if (name->kind != T_SYM || is_keyword(name)) {
                err_unexpected(p, name, "a ruleset name after 'ruleset'");
                skip_to_rule_end(p);
                continue;
            }
            char *s = tok_str(name);
            set = ruleset_index(p->rs, s);
            free(s);
        } else if (tok_is(t, "rule")) {
            if (set < 0) set = ruleset_index(p->rs, "default");
            if (!parse_rule(p, set)) skip_to_rule_end(p);
        } else {
            err_unexpected(p, t, "'rule' or 'ruleset'");
            next(p);
            skip_to_rule_end(p);
        }
    }
}

static void parser_free(parser *p) {
    free(p->tok);
    for (int i = 0; i < p->ndoc; i++) free(p->doc[i].text);
    free(p->doc);
}

/* ======== loading ================================================================================= */

void ts_rule_init(ts_rules *rs, const ts_rule_env *env) {
    memset(rs, 0, sizeof *rs);
    if (env) rs->env = *env;
}

void ts_rule_free(ts_rules *rs) {
    for (int i = 0; i < rs->nrules; i++) rule_free(&rs->rule[i]);
    free(rs->rule);
    for (int i = 0; i < rs->nsets; i++) {
        free(rs->set[i].name);
        free(rs->set[i].rule);
    }
    free(rs->set);
    for (int i = 0; i < rs->nkept; i++) free(rs->kept[i]);
    free(rs->kept);
    memset(rs, 0, sizeof *rs);
}

static char *keep(ts_rules *rs, char *s) {
    TS_GROW(rs->kept, rs->nkept, rs->cap_kept);
    return rs->kept[rs->nkept++] = s;
}

bool ts_rule_load_string(ts_rules *rs, const char *path, const char *text, ts_diags *d) {
    ts_diags_init(d, path, text, strlen(text));
    parser p;
    memset(&p, 0, sizeof p);
    p.rs = rs;
    p.d = d;
    p.file = keep(rs, ts_strdup(path));
    p.ops = rs->env.ops;
    lex(&p, text);
    parse_file(&p);
    parser_free(&p);
    return d->nerrors == 0;
}

/* The whole file as a string, or NULL (errno set). */
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *s = ts_xmalloc(cap);
    for (size_t got; (got = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (cap - n - 1 == 0) s = ts_xrealloc(s, cap *= 2);
    }
    bool bad = ferror(f) != 0;
    fclose(f);
    if (bad) {
        free(s);
        return NULL;
    }
    s[n] = 0;
    return s;
}

bool ts_rule_load_file(ts_rules *rs, const char *path, ts_diags *d) {
    char *text = read_file(path);
    if (!text) {
        const char *why = strerror(errno);
        ts_diags_init(d, path, NULL, 0);
        ts_diag_add(d, TS_ERROR, 0, 0, 0, NULL, "cannot read rule file (%s)", why);
        return false;
    }
    return ts_rule_load_string(rs, path, keep(rs, text), d);
}

int ts_rule_find(const ts_rules *rs, const char *name) {
    for (int i = 0; i < rs->nrules; i++)
        if (strcmp(rs->rule[i].name, name) == 0) return i;
    return -1;
}

int ts_rule_find_ruleset(const ts_rules *rs, const char *name) {
    for (int i = 0; i < rs->nsets; i++)
        if (strcmp(rs->set[i].name, name) == 0) return i;
    return -1;
}

/* ======== patterns of a rule ====================================================================== */

int ts_rule_npatterns(const ts_rule *r) { return r->npatterns > 1 ? r->npatterns : 1; }

const ts_pattern *ts_rule_lhs(const ts_rule *r, int i) {
    TS_ASSERT(i >= 0 && i < ts_rule_npatterns(r));
    return i == 0 ? &r->lhs : &r->more_lhs[i - 1];
}

const ts_pattern *ts_rule_rhs(const ts_rule *r, int i) {
    TS_ASSERT(i >= 0 && i < ts_rule_npatterns(r));
    return i == 0 ? &r->rhs : &r->more_rhs[i - 1];
}

/* ======== printing patterns ======================================================================= */

typedef struct {
    char *s;
    size_t n, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)len + 1 > b->cap) {
        b->cap = 2 * (b->n + (size_t)len + 1);
        b->s = ts_xrealloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

static void pat_put(strbuf *b, const ts_rules *rs, const ts_rule *r, const ts_pattern *p, uint32_t i) {
    const ts_pat_node *n = &p->node[i];
    if (n->op == TS_PAT_VAR) {
        sb_printf(b, "%s", r->var[n->var].name);
        return;
    }
    const ts_eg_opinfo *info = ts_eg_op_info(rs->env.ops, n->op);
    sb_printf(b, "%s%s", n->nkids ? "(" : "", info->name);
    for (int k = 0; k < n->nparams; k++) {
        const char *sep = k == 0 ? "{" : ",";
        if (n->param_var & (1u << k))
            sb_printf(b, "%s%s", sep, r->var[n->param[k]].name);
        else
            sb_printf(b, "%s%lld", sep, (long long)n->param[k]);
    }
    if (n->nparams) sb_printf(b, "}");
    for (int k = 0; k < n->nkids; k++) {
        sb_printf(b, " ");
        pat_put(b, rs, r, p, n->kid[k]);
    }
    if (n->nkids) sb_printf(b, ")");
}

char *ts_rule_pattern_str(const ts_rules *rs, const ts_rule *r, const ts_pattern *p) {
    strbuf b = {0};
    sb_printf(&b, "%s", "");
    if (p->n > 0) pat_put(&b, rs, r, p, p->n - 1);
    return b.s;
}

char *ts_rule_side_str(const ts_rules *rs, const ts_rule *r, bool right) {
    strbuf b = {0};
    sb_printf(&b, "%s", "");
    for (int i = 0; i < ts_rule_npatterns(r); i++) {
        const ts_pattern *p = right ? ts_rule_rhs(r, i) : ts_rule_lhs(r, i);
        if (i > 0) sb_printf(&b, " ; ");
        if (p->n > 0) pat_put(&b, rs, r, p, p->n - 1);
    }
    return b.s;
}

/* ======== e-matching ============================================================================== */

typedef struct {
    uint32_t pat, cls;
} goal;

typedef struct {
    const ts_egraph *eg;
    const ts_rule *r;
    const ts_pattern *p; /* the left pattern being matched */
    goal todo[TS_RULE_MAX_PAT];
    ts_rule_match cur;
    uint32_t bound; /* bit v: variable v is bound in cur */
    ts_rule_matches *out;
    size_t limit, found;
} matcher;

static void emit(matcher *m) {
    ts_rule_matches *out = m->out;
    TS_GROW(out->m, out->n, out->cap);
    out->m[out->n++] = m->cur;
    m->found++;
}

static bool full(const matcher *m) { return m->limit && m->found >= m->limit; }

/* Binds variable v to x, or checks it is already x. */
static bool bind(matcher *m, uint32_t v, int64_t x) {
    if (m->bound & (1u << v)) return m->cur.val[v] == x;
    m->bound |= 1u << v;
    m->cur.val[v] = x;
    return true;
}

static bool params_match(matcher *m, const ts_pat_node *pn, const ts_enode *n) {
    for (int i = 0; i < pn->nparams; i++) {
        if (pn->param_var & (1u << i)) {
            if (!bind(m, (uint32_t)pn->param[i], n->param[i])) return false;
        } else if (pn->param[i] != n->param[i]) {
            return false;
        }
    }
    return true;
}

/* Solves the goals todo[0..ntodo) (the last first), then emits the match of pattern pi. Preserves
 * todo[0..ntodo) and the bindings. */
static void solve(matcher *m, int ntodo) {
    if (full(m)) return;
    if (ntodo == 0) {
        emit(m);
        return;
    }
    goal g = m->todo[ntodo - 1];
    const ts_pat_node *pn = &m->p->node[g.pat];
    uint32_t saved = m->bound;
    if (pn->op == TS_PAT_VAR) {
        if (bind(m, pn->var, g.cls)) solve(m, ntodo - 1);
        m->bound = saved;
        return;
    }
    uint32_t first, end;
    ts_eg_class_op_span(m->eg, g.cls, pn->op, &first, &end);
    for (uint32_t i = first; i < end && !full(m); i++) {
        const ts_enode *n = ts_eg_class_node(m->eg, g.cls, i);
        if (n->op == pn->op && params_match(m, pn, n)) {
            for (int k = 0; k < pn->nkids; k++) m->todo[ntodo - 1 + k] = (goal){pn->kid[k], n->kid[k]};
            solve(m, ntodo - 1 + pn->nkids);
            m->todo[ntodo - 1] = g;
        }
        m->bound = saved;
    }
}

/* Matches left pattern pi at every candidate root class (the op index's, or all classes). */
static void search_pattern(matcher *m, int pi) {
    m->p = ts_rule_lhs(m->r, pi);
    uint32_t root = m->p->n - 1, n;
    TS_ASSERT(m->p->node[root].op != TS_PAT_VAR);
    const uint32_t *cls = ts_eg_classes_with_op(m->eg, m->p->node[root].op, &n);
    if (!cls) n = ts_eg_id_bound(m->eg);
    for (uint32_t i = 0; i < n && !full(m); i++) {
        uint32_t c = cls ? cls[i] : i;
        if (!cls && !ts_eg_is_root(m->eg, c)) continue;
        m->cur.roots[pi] = c;
        m->todo[0] = (goal){root, c};
        solve(m, 1);
    }
    m->cur.roots[pi] = TS_EG_NONE;
}

/* ---- multi-pattern rules: each pattern matched alone, then joined on the variables they share ----------
 * Searching pattern i + 1 afresh under every match of patterns 0..i cost a whole search of it per match (4.9 s of
 * a 6 s compile for shared-operand on a GEMM + activation chain of 15 ops, bench/random_graphs.py); the join
 * searches each pattern once and pairs its matches by their shared variables' values, sorted. The matches come
 * out in the same order as the nested search's: the earlier patterns' in their order, then pattern i's in its. */

/* The variables pattern p binds: its variable leaves and its {params} variables. */
static uint32_t pattern_vars(const ts_pattern *p) {
    uint32_t vars = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        const ts_pat_node *n = &p->node[i];
        if (n->op == TS_PAT_VAR) vars |= 1u << n->var;
        for (int k = 0; k < n->nparams; k++)
            if (n->param_var & (1u << k)) vars |= 1u << (uint32_t)n->param[k];
    }
    return vars;
}

/* Appends the matches of left pattern pi alone (its root in roots[pi], its variables in val), at most `limit` (0:
 * no limit); returns how many. */
static size_t collect_pattern(const ts_egraph *eg, const ts_rule *r, int pi, size_t limit, ts_rule_matches *out) {
    matcher m;
    memset(&m, 0, sizeof m);
    m.eg = eg, m.r = r, m.out = out, m.limit = limit;
    for (int i = 0; i < TS_RULE_MAX_ROOTS; i++) m.cur.roots[i] = TS_EG_NONE;
    search_pattern(&m, pi);
    return m.found;
}

/* The order of matches by the values of the variables in `key`, then by position (a stable order). */
typedef struct {
    const ts_rule_match *m;
    uint32_t key;
} join_order;

static int compare_key(const ts_rule_match *a, const ts_rule_match *b, uint32_t key) {
    for (uint32_t v = 0; v < TS_RULE_MAX_VARS; v++)
        if ((key & (1u << v)) && a->val[v] != b->val[v]) return a->val[v] < b->val[v] ? -1 : 1;
    return 0;
}

static _Thread_local join_order sort_by;

static int by_key_then_position(const void *pa, const void *pb) {
    const size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    int c = compare_key(&sort_by.m[a], &sort_by.m[b], sort_by.key);
    return c ? c : a < b ? -1 : a > b;
}

/* The first of idx[0..n) whose match's key is not below (upper: above) want's. */
static size_t key_bound(const ts_rule_match *ms, const size_t *idx, size_t n, const ts_rule_match *want, uint32_t key,
                        bool upper) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare_key(&ms[idx[mid]], want, key);
        if (c < 0 || (upper && c == 0)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static size_t join_search(const ts_egraph *eg, const ts_rule *r, size_t limit, ts_rule_matches *out) {
    const int np = ts_rule_npatterns(r);
    ts_rule_matches acc = {0};
    collect_pattern(eg, r, 0, 0, &acc);
    uint32_t bound = pattern_vars(ts_rule_lhs(r, 0));
    size_t found = 0;
    for (int pi = 1; pi < np && acc.n > 0; pi++) {
        ts_rule_matches part = {0}, next = {0};
        collect_pattern(eg, r, pi, 0, &part);
        const uint32_t vars = pattern_vars(ts_rule_lhs(r, pi)), key = bound & vars;
        size_t *idx = ts_xmalloc((part.n ? part.n : 1) * sizeof *idx);
        for (size_t j = 0; j < part.n; j++) idx[j] = j;
        sort_by = (join_order){part.m, key};
        if (part.n > 1) qsort(idx, part.n, sizeof *idx, by_key_then_position);
        const bool last = pi + 1 == np;
        ts_rule_matches *into = last ? out : &next;
        for (size_t a = 0; a < acc.n && !(last && limit && found >= limit); a++) {
            size_t lo = key_bound(part.m, idx, part.n, &acc.m[a], key, false);
            size_t hi = key_bound(part.m, idx, part.n, &acc.m[a], key, true);
            for (size_t j = lo; j < hi && !(last && limit && found >= limit); j++) {
                ts_rule_match m = acc.m[a];
                const ts_rule_match *p = &part.m[idx[j]];
                m.roots[pi] = p->roots[pi];
                for (uint32_t v = 0; v < TS_RULE_MAX_VARS; v++)
                    if (vars & (1u << v)) m.val[v] = p->val[v];
                TS_GROW(into->m, into->n, into->cap);
                into->m[into->n++] = m;
                found += last;
            }
        }
        free(idx);
        ts_rule_matches_free(&part);
        ts_rule_matches_free(&acc);
        acc = next;
        bound |= vars;
    }
    ts_rule_matches_free(&acc);
    return found;
}

size_t ts_rule_search(const ts_egraph *eg, const ts_rule *r, size_t limit, ts_rule_matches *out) {
    TS_ASSERT(!ts_eg_is_dirty(eg));
    return ts_rule_npatterns(r) > 1 ? join_search(eg, r, limit, out) : collect_pattern(eg, r, 0, limit, out);
}

void ts_rule_matches_free(ts_rule_matches *ms) {
    free(ms->m);
    memset(ms, 0, sizeof *ms);
}

/* ======== guards and application ================================================================== */

bool ts_rule_guards_hold(const ts_rules *rs, const ts_egraph *eg, const ts_rule *r, const ts_rule_match *m) {
    for (int i = 0; i < r->nconds; i++) {
        const ts_rule_cond *c = &r->cond[i];
        ts_rule_arg args[TS_RULE_MAX_GUARD_ARGS];
        for (int a = 0; a < c->nargs; a++) {
            const ts_rule_garg *g = &c->arg[a];
            if (!g->is_var) {
                args[a] = (ts_rule_arg){true, TS_EG_NONE, NULL, g->value};
            } else if (r->var[g->value].is_param) {
                args[a] = (ts_rule_arg){true, TS_EG_NONE, NULL, m->val[g->value]};
            } else {
                uint32_t cls = (uint32_t)m->val[g->value];
                args[a] = (ts_rule_arg){false, cls, ts_eg_data_const(eg, cls), 0};
            }
        }
        const ts_rule_guard *guard = &rs->env.guards[c->guard];
        if (!guard->fn(rs->env.ctx, eg, args, c->nargs)) return false;
    }
    return true;
}

uint32_t ts_rule_instantiate(ts_egraph *eg, const ts_pattern *p, const ts_rule_match *m) {
    uint32_t cls[TS_RULE_MAX_PAT];
    TS_ASSERT(p->n > 0 && p->n <= TS_RULE_MAX_PAT);
    for (uint32_t i = 0; i < p->n; i++) {
        const ts_pat_node *pn = &p->node[i];
        if (pn->op == TS_PAT_VAR) {
            cls[i] = (uint32_t)m->val[pn->var];
            continue;
        }
        ts_enode n;
        memset(&n, 0, sizeof n);
        n.op = pn->op;
        for (int k = 0; k < pn->nkids; k++) n.kid[k] = cls[pn->kid[k]];
        for (int k = 0; k < pn->nparams; k++)
            n.param[k] = pn->param_var & (1u << k) ? m->val[pn->param[k]] : pn->param[k];
        cls[i] = ts_eg_add(eg, &n);
    }
    return cls[p->n - 1];
}

bool ts_rule_apply_match(ts_egraph *eg, const ts_rule *r, const ts_rule_match *m) {
    uint32_t before = ts_eg_node_count(eg);
    bool merged = false;
    for (int i = 0; i < ts_rule_npatterns(r); i++) {
        uint32_t c = ts_rule_instantiate(eg, ts_rule_rhs(r, i), m);
        merged |= ts_eg_union(eg, m->roots[i], c);
    }
    return merged || ts_eg_node_count(eg) != before;
}

bool ts_rule_apply(const ts_rules *rs, ts_egraph *eg, const ts_rule *r, const ts_rule_match *m) {
    return ts_rule_guards_hold(rs, eg, r, m) && ts_rule_apply_match(eg, r, m);
}

/* ======== ground terms ============================================================================ */

uint32_t ts_rule_add_term(ts_egraph *eg, const char *path, const char *text, ts_diags *d) {
    ts_diags_init(d, path, text, strlen(text));
    ts_rules rs;
    ts_rule_init(&rs, &(ts_rule_env){.ops = ts_eg_ops_of(eg)});
    parser p;
    memset(&p, 0, sizeof p);
    p.rs = &rs;
    p.d = d;
    p.file = path;
    p.ops = rs.env.ops;
    p.term_mode = true;
    lex(&p, text);
    rule_build *b = ts_xcalloc(1, sizeof *b);
    uint32_t cls = TS_EG_NONE;
    if (d->nerrors == 0 && parse_pattern(&p, b) >= 0) {
        if (peek(&p)->kind != T_EOF)
            err_unexpected(&p, peek(&p), "the end of the term");
        else
            cls = ts_rule_instantiate(eg, &(ts_pattern){b->pat, b->npat}, &(ts_rule_match){0});
    }
    free(b);
    parser_free(&p);
    ts_rule_free(&rs);
    return cls;
}
