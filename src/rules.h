/* rules.h — rewrite rules: the rule language, its loader, e-matching and rule application.
 *
 * What it is: rules are data, read from text files at run time. This module parses them (reporting every
 * problem as `file:line:col: error: message` into a ts_diags), matches a rule's left side against a
 * rebuilt e-graph, checks its guards and instantiates its right side. What it is not: the saturation loop
 * (runner.h) or the guards themselves (the client registers them, e.g. the HLIR integration).
 *
 * ---- The rule language ------------------------------------------------------------------------------
 *
 *     # Multiplication commutes: a*b = b*a.            <- the comment block right above a rule is its doc
 *     ruleset algebra                                  <- the following rules belong to ruleset 'algebra'
 *     rule mul-commute: (mul ?a ?b) <=> (mul ?b ?a)
 *     rule recip-recip: (recip (recip ?x)) => ?x
 *     rule scale-past-sum: (reduce_sum{?k} (mul ?x ?s)) => (mul (reduce_sum{?k} ?x) ?s) if (const-along ?s ?k)
 *     rule shared-operand: (reduce_sum{?k} (mul ?x ?a)) ; (reduce_sum{?k} (mul ?x ?b))
 *                       => (pick{0} (dual{?k} ?x ?a ?b)) ; (pick{1} (dual{?k} ?x ?a ?b)) if (distinct ?a ?b)
 *
 *   file     := { 'ruleset' NAME | rule }                    (# starts a comment that runs to end of line)
 *   rule     := 'rule' NAME ':' side ('=>' | '<=>') side [ 'if' guard { guard } ]
 *   side     := pattern { ';' pattern }                      1..TS_RULE_MAX_ROOTS patterns
 *   pattern  := '?'NAME                                      an operand variable: binds an e-class
 *             | OP [params]                                  an op of arity 0, e.g. input{0}
 *             | '(' OP [params] pattern... ')'               exactly the op's arity of operands
 *   params   := '{' param { ',' param } '}'                  exactly the op's number of params
 *   param    := INTEGER | '?'NAME                            a literal, or a param variable (binds an int64)
 *   guard    := '(' GUARD { '?'NAME | INTEGER } ')'          a registered C predicate; all guards must hold
 *   NAME     := [A-Za-z_][A-Za-z0-9_.-]*    INTEGER := -?[0-9]+ | 0x[0-9a-fA-F]+
 *
 * - Newlines are not significant: a rule ends where the next 'rule' or 'ruleset' (or the file) begins, so a
 *   long rule may span lines. 'rule', 'ruleset' and 'if' are keywords.
 * - Variables are bound by the left side. The right side and the guards may use only those; a variable
 *   is an operand variable or a param variable, never both. A variable repeated on the left must match
 *   the same e-class (or the same param value) everywhere.
 * - `=>` rewrites left to right. `a <=> b` is two rules: NAME (a => b) and NAME-rev (b => a), with the same
 *   guards; each side must then bind every variable, and neither side may be a bare variable.
 * - The left side of a rule (each of its patterns) cannot be a bare variable.
 * - Multi-patterns (egg's): `P1 ; P2 => R1 ; R2` has as many right patterns as left ones. A match binds
 *   every variable so that each Pi matches some class (variables shared between patterns bind the same
 *   class or param); applying it adds each Ri and merges it with the class Pi matched. Any right pattern
 *   and guard may use a variable bound by any left pattern. Matching is a join: each Pi is searched once
 *   alone and its matches paired with the earlier patterns' on the variables they share. `<=>` cannot join
 *   multi-patterns.
 * - Rules before the first 'ruleset' line belong to ruleset 'default'. A ruleset named again (in the same
 *   or another file) continues. Rule names are unique across everything loaded into one ts_rules.
 * - Ops are looked up in the primitives of ops.h, then in the client's extra ops (ts_eg_ops).
 *
 * Usage:
 *     ts_rules rs; ts_rule_init(&rs, &(ts_rule_env){.guards = my_guards, .nguards = 2});
 *     ts_diags d; if (!ts_rule_load_file(&rs, "rules/algebra.rules", &d)) ts_diags_print(&d, stderr);
 *     ts_diags_free(&d); ... ts_rule_free(&rs); */
#ifndef TS_RULES_H
#define TS_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "egraph.h"

#define TS_RULE_MAX_VARS 16       /* variables per rule */
#define TS_RULE_MAX_PAT 64        /* pattern nodes per rule (all its patterns together) */
#define TS_RULE_MAX_ROOTS 4       /* patterns per side of a multi-pattern rule */
#define TS_RULE_MAX_GUARD_ARGS 4  /* arguments per guard */
#define TS_PAT_VAR (-1)           /* ts_pat_node.op of an operand variable */

/* ---- guards ------------------------------------------------------------------------------------- */

/* One guard argument, as the match bound it. */
typedef struct {
    bool is_param;    /* a param variable or an integer literal; else an operand variable */
    uint32_t cls;     /* operand variable: its canonical e-class */
    const void *data; /* operand variable: its class's analysis data (NULL without an analysis) */
    int64_t value;    /* param variable or literal: its value */
} ts_rule_arg;

/* A guard predicate: true when the rule may fire for these arguments. Must not change the e-graph. */
typedef bool (*ts_rule_guard_fn)(void *ctx, const ts_egraph *eg, const ts_rule_arg *args, int nargs);

/* A guard that admits rounding: the relative L2 error within which the rule's two sides agree for these
 * arguments (e.g. a few units of a 16-bit type's rounding), for verify-rules; exact rules have none. */
typedef double (*ts_rule_tolerance_fn)(const ts_rule_arg *args, int nargs);

typedef struct {
    const char *name; /* as written after 'if', e.g. "const-along" */
    int arity;        /* number of arguments it takes */
    ts_rule_guard_fn fn;
    ts_rule_tolerance_fn tolerance; /* NULL: the rule is an identity */
} ts_rule_guard;

/* What rule files may name: extra ops and guards (tables borrowed; they must outlive the ts_rules). */
typedef struct {
    const ts_eg_ops *ops; /* NULL: primitive ops only; must be the ops of the e-graphs the rules run on */
    const ts_rule_guard *guards;
    int nguards;
    void *ctx; /* passed to every guard */
} ts_rule_env;

/* ---- patterns and rules ------------------------------------------------------------------------- */

typedef struct {
    int32_t op;         /* an op id, or TS_PAT_VAR */
    uint16_t var;       /* TS_PAT_VAR: the variable's index */
    uint8_t nkids, nparams;
    uint8_t param_var;  /* bit i set: param[i] is a variable index, else a literal value */
    int64_t param[TS_EG_MAX_PARAMS];
    uint32_t kid[TS_EG_MAX_KIDS]; /* indices of earlier nodes of the pattern */
} ts_pat_node;

/* Nodes in post-order: kids before their parent, the root last. */
typedef struct {
    ts_pat_node *node;
    uint32_t n;
} ts_pattern;

typedef struct {
    char *name;    /* with its '?' */
    bool is_param; /* bound in {params}; else an operand variable (an e-class) */
} ts_rule_var;

typedef struct {
    bool is_var;
    int64_t value; /* a variable index, or a literal */
} ts_rule_garg;

typedef struct {
    int guard; /* index into env.guards */
    int nargs;
    ts_rule_garg arg[TS_RULE_MAX_GUARD_ARGS];
} ts_rule_cond;

typedef struct {
    char *name;       /* "mul-commute"; the reverse of a '<=>' rule is "mul-commute-rev" */
    char *doc;        /* the comment block right above the rule, '#' and one space stripped; or NULL */
    const char *file; /* as given to the loader (owned by the ts_rules) */
    int line, col;    /* of the rule's name, 1-based */
    int ruleset;      /* index into ts_rules.set */
    bool reverse;     /* the right-to-left half of a '<=>' rule */
    ts_pattern lhs, rhs; /* the two sides; of a multi-pattern rule, the first pattern of each */
    int npatterns;       /* patterns per side: 1, or 2..TS_RULE_MAX_ROOTS (0 is read as 1) */
    ts_pattern more_lhs[TS_RULE_MAX_ROOTS - 1], more_rhs[TS_RULE_MAX_ROOTS - 1]; /* patterns 2.. */
    int nvars;
    ts_rule_var var[TS_RULE_MAX_VARS];
    int nconds;
    ts_rule_cond *cond; /* all must hold */
} ts_rule;

typedef struct {
    char *name;
    int *rule; /* indices into ts_rules.rule, in file order */
    int n, cap;
} ts_ruleset;

typedef struct {
    ts_rule_env env;
    ts_rule *rule;
    int nrules, cap_rules;
    ts_ruleset *set;
    int nsets, cap_sets;
    char **kept; /* file names and texts the rules and diagnostics point into */
    int nkept, cap_kept;
} ts_rules;

void ts_rule_init(ts_rules *rs, const ts_rule_env *env); /* env copied; NULL: no extras, no guards */
void ts_rule_free(ts_rules *rs);

/* Loads the rules of `text`, named `path` in diagnostics. *d is initialised here (free it with
 * ts_diags_free; its excerpts point into `text`). Rules with errors are not added; the others are.
 * Returns true when there was no error. */
bool ts_rule_load_string(ts_rules *rs, const char *path, const char *text, ts_diags *d);
/* Reads `path` and loads it as above; rs keeps the text, so *d can print excerpts while rs lives. */
bool ts_rule_load_file(ts_rules *rs, const char *path, ts_diags *d);

/* The index of the rule or ruleset named `name`, or -1. */
int ts_rule_find(const ts_rules *rs, const char *name);
int ts_rule_find_ruleset(const ts_rules *rs, const char *name);

/* Patterns per side of r (1 unless it is a multi-pattern rule), and its i-th left and right pattern. */
int ts_rule_npatterns(const ts_rule *r);
const ts_pattern *ts_rule_lhs(const ts_rule *r, int i);
const ts_pattern *ts_rule_rhs(const ts_rule *r, int i);

/* A pattern or rule as text in the rule syntax, e.g. "(mul ?a ?b)" (malloc'd). */
char *ts_rule_pattern_str(const ts_rules *rs, const ts_rule *r, const ts_pattern *p);
/* A whole side (right: the right one), its patterns joined by " ; " (malloc'd). */
char *ts_rule_side_str(const ts_rules *rs, const ts_rule *r, bool right);

/* ---- matching and applying ---------------------------------------------------------------------- */

/* A match: the e-class each left pattern matched (root is roots[0]; roots past the rule's patterns are
 * TS_EG_NONE) and each variable's value (an e-class id or a param). */
typedef struct {
    union {
        uint32_t root;
        uint32_t roots[TS_RULE_MAX_ROOTS];
    };
    int64_t val[TS_RULE_MAX_VARS];
} ts_rule_match;

typedef struct {
    ts_rule_match *m;
    size_t n, cap;
} ts_rule_matches;

void ts_rule_matches_free(ts_rule_matches *ms);

/* Appends to `out` the matches of r's left side in the rebuilt graph eg, at most `limit` of them (0: no
 * limit), by top-down backtracking over the nodes of each class. The root of each pattern is tried on the
 * classes holding its op (ts_eg_classes_with_op) when eg's op index is up to date, else on every class;
 * the results are the same. A multi-pattern rule's patterns are each searched once and joined in order on
 * their shared variables (sorted by their values), the matches in the order a nested search would give: the
 * earlier patterns' in their order, each with the later pattern's in its own. Returns the number appended. */
size_t ts_rule_search(const ts_egraph *eg, const ts_rule *r, size_t limit, ts_rule_matches *out);
/* Whether every guard of r holds for match m. */
bool ts_rule_guards_hold(const ts_rules *rs, const ts_egraph *eg, const ts_rule *r, const ts_rule_match *m);
/* Adds pattern p with m's bindings to eg and returns the class of its root. */
uint32_t ts_rule_instantiate(ts_egraph *eg, const ts_pattern *p, const ts_rule_match *m);
/* Instantiates each right pattern i of r and records its union with m->roots[i], without checking the
 * guards. Returns whether the graph changed (a node was added or two distinct classes are to be merged). */
bool ts_rule_apply_match(ts_egraph *eg, const ts_rule *r, const ts_rule_match *m);
/* ts_rule_apply_match if every guard holds; else false. */
bool ts_rule_apply(const ts_rules *rs, ts_egraph *eg, const ts_rule *r, const ts_rule_match *m);

/* Parses a ground term (a pattern without variables, e.g. "(mul (add a b) c)") and adds it to eg.
 * Returns its class, or TS_EG_NONE with errors in *d (initialised here, named `path`). */
uint32_t ts_rule_add_term(ts_egraph *eg, const char *path, const char *text, ts_diags *d);

#endif
