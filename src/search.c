/* search.c — extraction as search, guided by the cost model (see search.h): seeds from hand-weighted
 * presets and the graph as written, then first-improvement local search over e-node choices and kernel
 * boundaries (one at a time, or all below a class at once), every candidate lowered (plan.c) and predicted
 * (costmodel.c); the K best distinct plans are kept. */
#include "search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "pad.h"
#include "rowstat.h"
#include "util.h"

/* ---- seeds ------------------------------------------------------------------------------------- */

/* How much each kind of node weighs, per element of the space it iterates over. */
typedef struct {
    const char *name;
    double elementwise, reduce, contract, dual, wsum, online, tile, view;
    double materialise; /* per element of a contraction operand that must be computed first */
} cost_preset;

/* The seeds: extractions under weights that favour different fused forms. They only start the search. */
static const cost_preset presets[] = {
    /* fused forms preferred: tensor-core contractions, dual GEMMs, online softmax */
    {"fused", 1, 6, 2, 1.5, 8, 2, 7, 1, 2}, /* dual < contract: each pick pays the dual once */
    /* the same without the dual contraction: two GEMMs */
    {"fused-separate-gemms", 1, 6, 2, 100, 8, 2, 7, 1, 2},
    /* elementwise work moved after contractions (epilogues, attention scores) rather than before */
    {"fused-epilogues", 1, 6, 2, 1.5, 8, 2, 7, 1, 1000},
};

static double axes_numel(const ts_graph *g, uint64_t axes) {
    double n = 1;
    for (int a = 0; a < g->naxes && a < 64; a++)
        if (axes & (1ull << a)) n *= (double)g->axes[a].size;
    return n;
}

static const ts_egir_data *cdata(const ts_egir *x, uint32_t cls) { return ts_eg_data_const(x->eg, cls); }

/* Whether class cls can be read in place (an input or a view of one) rather than computed first. */
static bool readable_in_place(const ts_egir *x, uint32_t cls) {
    for (uint32_t i = 0; i < ts_eg_class_size(x->eg, cls); i++) {
        int32_t op = ts_eg_class_node(x->eg, cls, i)->op;
        if (op == TS_OP_INPUT || op == TS_OP_VIEW) return true;
    }
    return false;
}

/* A contraction's operands that must be materialised first cost a write and a read of their elements:
 * this is what makes a row scale after the contraction (an epilogue) beat one before it (a pass). The first
 * `nkids` kids are its operands (contract_add's third, the tensor it accumulates onto, is no operand). */
static double operand_penalty(const ts_egir *x, const cost_preset *c, const ts_enode *n, int nkids) {
    double p = 0;
    for (int k = 0; k < nkids; k++) {
        uint32_t cls = ts_eg_find(x->eg, n->kid[k]);
        if (!readable_in_place(x, cls)) p += c->materialise * axes_numel(x->g, cdata(x, cls)->axes);
    }
    return p;
}

static double node_cost(const ts_egir *x, const cost_preset *c, const ts_enode *n) {
    ts_op op = (ts_op)n->op;
    uint64_t space = 0;
    for (int k = 0; k < ts_op_arity(op); k++) space |= cdata(x, ts_eg_find(x->eg, n->kid[k]))->axes;
    /* param[0] is the reduced axis of a reduction or a fused op; of view{v} and pick{i} it is no axis (counted as
     * one it made a view's cost depend on its number: two halves of one weight cost apart) */
    bool param_bit = (ts_op_kind_of(op) == TS_KIND_REDUCE || ts_op_kind_of(op) == TS_KIND_FUSED) && op != TS_OP_VIEW &&
                     op != TS_OP_PICK && n->param[0] >= 0 && n->param[0] < 64;
    double work = axes_numel(x->g, space | (param_bit ? 1ull << n->param[0] : 0));
    switch (op) {
    case TS_OP_INPUT:
    case TS_OP_CONSTANT:
    case TS_OP_IOTA:
    case TS_OP_PICK: return 0;
    case TS_OP_VIEW: return c->view * work;
    case TS_OP_REDUCE_SUM:
    case TS_OP_REDUCE_MAX: return c->reduce * work;
    case TS_OP_CONTRACT:
    case TS_OP_CONTRACT_ADD: return c->contract * work + operand_penalty(x, c, n, 2);
    case TS_OP_DUAL: return c->dual * work + operand_penalty(x, c, n, 3);
    case TS_OP_WSUM: return c->wsum * work;
    case TS_OP_ONLINE_WSUM: return c->online * work;
    case TS_OP_TILE_SUM:
    case TS_OP_TILE_MAX: return c->tile * work;
    default: return c->elementwise * work;
    }
}

/* Best node per class under preset c by a bottom-up fixed point (cycles never win: their cost stays infinite; NULL
 * where no node is finite); no_pick (optional): classes whose pick nodes are left out. */
static const ts_enode **choose_nodes_but(const ts_egir *x, const cost_preset *c, const uint8_t *no_pick) {
    uint32_t bound = ts_eg_id_bound(x->eg);
    double *cost = ts_xmalloc(sizeof *cost * (bound + 1));
    const ts_enode **best = ts_xcalloc(bound + 1, sizeof *best);
    for (uint32_t i = 0; i < bound; i++) cost[i] = INFINITY;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t cls = 0; cls < bound; cls++) {
            if (!ts_eg_is_root(x->eg, cls)) continue;
            for (uint32_t i = 0; i < ts_eg_class_size(x->eg, cls); i++) {
                const ts_enode *n = ts_eg_class_node(x->eg, cls, i);
                if (no_pick && no_pick[cls] && n->op == TS_OP_PICK) continue;
                double total = node_cost(x, c, n);
                for (int k = 0; k < ts_op_arity((ts_op)n->op); k++)
                    total += cost[ts_eg_find(x->eg, n->kid[k])];
                if (total < cost[cls] * (1 - 1e-12)) cost[cls] = total, best[cls] = n, changed = true;
            }
        }
    }
    free(cost);
    return best;
}

static const ts_enode **choose_nodes(const ts_egir *x, const cost_preset *c) { return choose_nodes_but(x, c, NULL); }


/* ---- the seed as written ----------------------------------------------------------------------- */

enum { UNSEEN = TS_EG_NONE - 1 };

/* The node of x's class `cls` equal to m (kids canonical), or NULL. */
static const ts_enode *node_in_class(const ts_egir *x, uint32_t cls, const ts_enode *m) {
    for (uint32_t i = 0; i < ts_eg_class_size(x->eg, cls); i++) {
        const ts_enode *n = ts_eg_class_node(x->eg, cls, i);
        if (n->op != m->op || memcmp(n->param, m->param, sizeof n->param) != 0) continue;
        bool same = true;
        for (int k = 0; k < ts_op_arity((ts_op)n->op) && same; k++)
            same = ts_eg_find(x->eg, n->kid[k]) == m->kid[k];
        if (same) return n;
    }
    return NULL;
}

/* The class of saturated graph x that holds unsaturated class ucls's term (its node in ubest, kids first),
 * choosing that node there in best; TS_EG_NONE when some node of the term is not in x. map: per unsaturated
 * class, UNSEEN or the result. */
static uint32_t written_class(const ts_egir *x, const ts_egir *u, const ts_enode **ubest, uint32_t *map,
                              const ts_enode **best, uint32_t ucls) {
    ucls = ts_eg_find(u->eg, ucls);
    if (map[ucls] != UNSEEN) return map[ucls];
    map[ucls] = TS_EG_NONE; /* while on the path: a cycle gives no term */
    const ts_enode *n = ubest[ucls];
    if (!n) return TS_EG_NONE;
    ts_enode m = *n;
    for (int k = 0; k < ts_op_arity((ts_op)n->op); k++)
        if ((m.kid[k] = written_class(x, u, ubest, map, best, n->kid[k])) == TS_EG_NONE) return TS_EG_NONE;
    uint32_t id = ts_eg_lookup(x->eg, &m);
    if (id == TS_EG_NONE) return TS_EG_NONE;
    uint32_t cls = ts_eg_find(x->eg, id);
    const ts_enode *in_x = node_in_class(x, cls, &m);
    if (!in_x) return TS_EG_NONE;
    best[cls] = in_x;
    return map[ucls] = cls;
}

/* The seed that keeps the graph as written: in every class its term reaches, the node the graph itself put
 * there (found in the saturated graph), and `fill`'s choice elsewhere. The presets all prefer the fewest
 * operations, which pulls a LayerNorm's mean through the GEMM before it (Σ_n X·W = X·Σ_n W) — a pass over W
 * and a GEMV ahead of the GEMM — where the GEMM and one row kernel over its result are faster; no single
 * move leads back, so the written form starts a climb of its own. NULL when the term is not found. */
static const ts_enode **as_written(const ts_egir *x, const ts_egir *u, const cost_preset *fill) {
    static const cost_preset plain = {"as written", 1, 1, 1, 1, 1, 1, 1, 1, 0};
    const ts_enode **best = choose_nodes(x, fill), **ubest = choose_nodes(u, &plain);
    uint32_t ubound = ts_eg_id_bound(u->eg);
    uint32_t *map = ts_xmalloc(sizeof *map * (ubound + 1));
    for (uint32_t i = 0; i <= ubound; i++) map[i] = UNSEEN;
    bool found = true;
    for (int o = 0; o < u->g->noutputs && found; o++)
        found = written_class(x, u, ubest, map, best, u->output_class[o]) != TS_EG_NONE;
    free(map);
    free(ubest);
    if (!found) {
        free(best);
        return NULL;
    }
    return best;
}

/* ---- candidates -------------------------------------------------------------------------------- */

/* An extraction: an e-node per class and the lowering decisions per class (TS_MARK_* bits, plan.h). */
typedef struct {
    const ts_enode **best;
    uint8_t *mark;
} extraction;

typedef struct {
    const ts_egir *x;
    const ts_egir_view *views2;
    const ts_graph *g;
    const ts_costmodel *cm;
    uint32_t bound;
    int keep, max_evals;
    bool allow_library;
    ts_plan *pool; /* the best distinct plans met, best first */
    uint64_t *sig, *shape; /* per pool entry: plan_signature, shape_signature */
    int npool;
    ts_search_stats st;
    /* scratch for the cycle check and the reachable classes; for try_absorb, the classes below one and a stack */
    uint8_t *mark, *seen;
    uint32_t *order, *below, *stack;
    int norder;
} search;

static extraction extraction_copy(const search *s, const extraction *e) {
    extraction c = {ts_xmalloc(sizeof *c.best * (s->bound + 1)), ts_xmalloc(s->bound + 1)};
    memcpy(c.best, e->best, sizeof *c.best * s->bound);
    memcpy(c.mark, e->mark, s->bound);
    return c;
}

static void extraction_free(extraction *e) {
    free(e->best);
    free(e->mark);
}

/* Post-order walk from class cls: false on a cycle (a class reached again while on the path) or a class
 * with no node. The classes reached are appended to s->order, kids first. */
static bool walk(search *s, const extraction *e, uint32_t cls) {
    cls = ts_eg_find(s->x->eg, cls);
    if (s->mark[cls] == 2) return true;
    if (s->mark[cls] == 1 || !e->best[cls]) return false;
    s->mark[cls] = 1;
    const ts_enode *n = e->best[cls];
    for (int k = 0; k < ts_op_arity((ts_op)n->op); k++)
        if (!walk(s, e, n->kid[k])) return false;
    s->mark[cls] = 2;
    s->order[s->norder++] = cls;
    return true;
}

/* Whether e is a finite term (no cycle, every reached class chosen); fills s->order. */
static bool well_formed(search *s, const extraction *e) {
    memset(s->mark, 0, s->bound + 1);
    s->norder = 0;
    for (int o = 0; o < s->x->g->noutputs; o++)
        if (!walk(s, e, s->x->output_class[o])) return false;
    return true;
}

/* What tells plans apart for tuning: their kernels in words (their shape) and their predicted time to
 * 0.1% (plans that differ only in an epilogue's operand order or a constant folded elsewhere are one
 * candidate). */
static uint64_t shape_signature(const char *described) { return ts_fnv1a(TS_FNV_OFFSET, described, strlen(described)); }

static uint64_t plan_signature(uint64_t shape, const ts_plan *p) {
    long long t = llround(log(p->predicted_s) * 1000);
    return ts_fnv1a(shape, &t, sizeof t);
}

/* Plans of one shape differ only inside their kernels' expressions and time alike: the pool keeps the best
 * two of each, so that the candidates tune times are different programs. */
enum { MAX_PER_SHAPE = 2 };

static void pool_remove(search *s, int i) {
    ts_plan_free(&s->pool[i]);
    memmove(&s->pool[i], &s->pool[i + 1], sizeof *s->pool * (size_t)(s->npool - i - 1));
    memmove(&s->sig[i], &s->sig[i + 1], sizeof *s->sig * (size_t)(s->npool - i - 1));
    memmove(&s->shape[i], &s->shape[i + 1], sizeof *s->shape * (size_t)(s->npool - i - 1));
    s->npool--;
}

/* Inserts p into the pool when it is new and among the best s->keep (takes ownership). */
static void pool_offer(search *s, ts_plan *p) {
    char *d = ts_plan_describe(p, s->g);
    uint64_t shape = shape_signature(d), sig = plan_signature(shape, p);
    free(d);
    int same = 0, slowest_same = -1; /* the pool is sorted, best first */
    for (int i = 0; i < s->npool; i++) {
        if (s->sig[i] == sig) {
            ts_plan_free(p);
            return;
        }
        if (s->shape[i] == shape) same++, slowest_same = i;
    }
    if (same >= MAX_PER_SHAPE) {
        if (!(p->predicted_s < s->pool[slowest_same].predicted_s)) {
            ts_plan_free(p);
            return;
        }
        pool_remove(s, slowest_same);
    }
    int at = s->npool;
    for (int i = 0; i < s->npool && at == s->npool; i++)
        if (p->predicted_s < s->pool[i].predicted_s) at = i;
    if (at >= s->keep) {
        ts_plan_free(p);
        return;
    }
    if (s->npool == s->keep) ts_plan_free(&s->pool[--s->npool]);
    memmove(&s->pool[at + 1], &s->pool[at], sizeof *s->pool * (size_t)(s->npool - at));
    memmove(&s->sig[at + 1], &s->sig[at], sizeof *s->sig * (size_t)(s->npool - at));
    memmove(&s->shape[at + 1], &s->shape[at], sizeof *s->shape * (size_t)(s->npool - at));
    s->pool[at] = *p;
    s->sig[at] = sig;
    s->shape[at] = shape;
    s->npool++;
}

/* Configurations are part of the search: each GEMM of p takes the configuration (config.h: its default and
 * the variants tune may time) the cost model predicts fastest, the default unless another is predicted at
 * least MIN_CONFIG_GAIN faster (a 1024×2048 output in 128×256 tiles fills 64 of 132 SMs: 128×128 tiles,
 * predicted 0.0194 ms against 0.0244, measured 0.0187 against 0.0233, bench/NOTES.md run 47). */
#define MIN_CONFIG_GAIN 0.02
static double kernel_time(const search *s, const ts_plan *p, const ts_kernel *k) {
    ts_kernel_work w;
    ts_costmodel_work(s->cm, s->g, p, k, &w);
    return ts_costmodel_time(s->cm, &w);
}

static void choose_configs(const search *s, ts_plan *p) {
    for (int i = 0; i < p->nk; i++) {
        ts_kernel *k = &p->k[i];
        ts_kernel_config alt[TS_CONFIG_MAX_VARIANTS], best = k->cfg;
        int n = ts_config_variants(s->g, p, k, s->allow_library, s->cm->sms, alt, TS_CONFIG_MAX_VARIANTS);
        if (n == 0) continue;
        double t_default = kernel_time(s, p, k), t_best = t_default;
        for (int v = 0; v < n; v++) {
            if (alt[v].tune_only) continue;
            k->cfg = alt[v];
            double t = kernel_time(s, p, k);
            if (t < t_best && t < t_default * (1 - MIN_CONFIG_GAIN)) t_best = t, best = alt[v];
        }
        k->cfg = best;
    }
}

/* q, a rewrite of a plan named `name`, predicted (its GEMM configurations chosen again when `reconfigure`:
 * a GEMM whose operands changed layout) and offered to the pool as "<name>+<form>"; its predicted time. */
static double offer_form(search *s, ts_plan *q, const char *name, const char *form, bool reconfigure) {
    if (reconfigure) choose_configs(s, q);
    ts_costmodel_predict(s->cm, s->g, q);
    double t = q->predicted_s;
    free(q->name);
    q->name = ts_strfmt("%s+%s", name, form);
    pool_offer(s, q);
    return t;
}

/* Lowers and predicts e; its predicted time (INFINITY when it is no finite term or has no kernel), the
 * best of its forms: as lowered, with the row statistics of GEMM operands moved into their GEMMs
 * (rowstat.h), with GEMMs reducing their products' rows themselves (rowstat.h), with unaligned GEMM operands copied into padded rows (pad.h). The plans go to the pool,
 * named `name` and `name`+<form>. */
static double evaluate(search *s, const extraction *e, const char *name) {
    if (!well_formed(s, e)) return INFINITY;
    s->st.evals++;
    ts_plan p = {0};
    char *err = NULL;
    if (ts_plan_lower_with(s->x, s->views2, e->best, e->mark, true, s->allow_library, &p, &err) != 0) {
        free(err);
        ts_plan_free(&p);
        return INFINITY;
    }
    choose_configs(s, &p);
    ts_costmodel_predict(s->cm, s->g, &p);
    p.name = ts_strdup(name);
    double t = p.predicted_s;
    ts_plan q;
    if (ts_plan_with_row_stats(&p, &q)) t = fmin(t, offer_form(s, &q, name, "rowstats", false));
    if (ts_plan_with_row_parts(&p, s->g, &q)) t = fmin(t, offer_form(s, &q, name, "rowparts", true));
    if (ts_plan_with_padded_operands(&p, s->g, &q)) t = fmin(t, offer_form(s, &q, name, "padded", true));
    pool_offer(s, &p);
    return t;
}

/* ---- local search ------------------------------------------------------------------------------ */

static bool commutative(ts_op op) { return op == TS_OP_ADD || op == TS_OP_MUL || op == TS_OP_MAX; }

/* Whether n computes the same as m with its two operands swapped (the plan would not change). */
static bool swapped(const search *s, const ts_enode *n, const ts_enode *m) {
    if (n->op != m->op || !commutative((ts_op)n->op)) return false;
    ts_egraph *eg = s->x->eg;
    return ts_eg_find(eg, n->kid[0]) == ts_eg_find(eg, m->kid[1]) && ts_eg_find(eg, n->kid[1]) == ts_eg_find(eg, m->kid[0]);
}

/* Whether a boundary at a class computed by n can change a plan: elementwise values and reductions (the
 * row kernels' stages) are the ones kernels inline. */
static bool cuttable(const ts_enode *n) {
    ts_op_kind k = ts_op_kind_of((ts_op)n->op);
    return k == TS_KIND_UNARY || k == TS_KIND_BINARY || k == TS_KIND_TERNARY || k == TS_KIND_REDUCE ||
           n->op == TS_OP_CONTRACT || n->op == TS_OP_CONTRACT_ADD || n->op == TS_OP_TILE_SUM || n->op == TS_OP_TILE_MAX;
}

typedef struct {
    extraction cur;
    double cost;
    const char *seed;
    int moves;
} climb;

/* Tries the current extraction with one change applied (already applied to c->cur); keeps it when the
 * prediction improves. Returns whether it was kept. */
static bool try_move(search *s, climb *c) {
    char *name = ts_strfmt("%s/%d", c->seed, s->st.evals + 1);
    double t = evaluate(s, &c->cur, name);
    free(name);
    if (!(t < c->cost * (1 - 1e-9))) return false;
    c->cost = t;
    c->moves++;
    s->st.accepted++;
    return true;
}

/* Whether a reduction at a class computed by n may be lowered either way (REDUCE or ROW kernel). */
static bool row_markable(const ts_enode *n) {
    return n->op == TS_OP_REDUCE_SUM || n->op == TS_OP_REDUCE_MAX || n->op == TS_OP_CONTRACT;
}

/* Toggles the decision bit at class cls as a move; keeps it when the prediction improves. */
static bool try_mark(search *s, climb *c, uint32_t cls, uint8_t bit) {
    c->cur.mark[cls] ^= bit;
    if (try_move(s, c)) return true;
    c->cur.mark[cls] ^= bit;
    return false;
}

/* Moves a kernel boundary up by one node: the boundary at an operand of class cls's node goes to cls itself
 * (the operand is then computed inside cls's kernel, cls into a buffer). One toggle at a time cannot make
 * this move when the boundary at the operand pays and one at cls alone (on top of it) does not: a GEMM whose
 * bias was cut off before a row kernel takes the residual too only when both boundaries move together
 * (gemm_layernorm: the row kernel then reads one [m, n] tensor, not two). Returns whether it was kept. */
static bool try_shift_cut(search *s, climb *c, uint32_t cls) {
    if (c->cur.mark[cls] & TS_MARK_CUT) return false;
    const ts_enode *n = c->cur.best[cls];
    for (int k = 0; k < ts_op_arity((ts_op)n->op) && s->st.evals < s->max_evals; k++) {
        uint32_t kid = ts_eg_find(s->x->eg, n->kid[k]);
        if (kid == cls || !(c->cur.mark[kid] & TS_MARK_CUT)) continue;
        c->cur.mark[kid] ^= TS_MARK_CUT, c->cur.mark[cls] ^= TS_MARK_CUT;
        if (try_move(s, c)) return true;
        c->cur.mark[kid] ^= TS_MARK_CUT, c->cur.mark[cls] ^= TS_MARK_CUT;
    }
    return false;
}

/* The classes below cls in the current term (its operands, theirs, ...), each once, into s->below; their count.
 * region: only those in cls's kernel region (not past a class marked as a boundary, nor those classes).
 * s->seen must be all zero on entry and is left so. */
static int classes_below(search *s, const extraction *e, uint32_t cls, bool region) {
    int n = 0, top = 0;
    uint32_t *stack = s->stack, *below = s->below;
    stack[top++] = cls;
    while (top > 0) {
        const ts_enode *node = e->best[stack[--top]];
        for (int k = 0; k < ts_op_arity((ts_op)node->op); k++) {
            uint32_t kid = ts_eg_find(s->x->eg, node->kid[k]);
            if (s->seen[kid] || (region && (e->mark[kid] & TS_MARK_CUT))) continue;
            s->seen[kid] = 1;
            below[n++] = kid;
            stack[top++] = kid;
        }
    }
    for (int i = 0; i < n; i++) s->seen[below[i]] = 0;
    return n;
}

/* Makes cls a kernel's root that computes everything below it (a boundary at cls, and no boundary or ROW lowering
 * left below it). One toggle at a time cannot make this move when several values
 * below were given kernels of their own: a log-sum-exp and a target logit each cut off into a row kernel, which
 * a loss's per-token value computes in one row kernel of three stages only once both cuts and the ROW marks of
 * the maximum and the sum are gone together. Returns whether it was kept. */
static bool try_absorb(search *s, climb *c, uint32_t cls) {
    const int n = classes_below(s, &c->cur, cls, false);
    const uint32_t *below = s->below;
    uint8_t *saved = ts_xmalloc((size_t)n + 1), own = c->cur.mark[cls];
    bool any = false;
    for (int i = 0; i < n; i++) saved[i] = c->cur.mark[below[i]], any |= saved[i] != 0;
    bool kept = false;
    if (any) {
        for (int i = 0; i < n; i++) c->cur.mark[below[i]] = 0;
        if (cuttable(c->cur.best[cls])) c->cur.mark[cls] |= TS_MARK_CUT;
        kept = try_move(s, c);
        if (!kept) {
            for (int i = 0; i < n; i++) c->cur.mark[below[i]] = saved[i];
            c->cur.mark[cls] = own;
        }
    }
    free(saved);
    return kept;
}

/* Lowers the reduction at cls as a ROW kernel of its own: the ROW mark there, and a boundary at every reduction
 * its region reaches (below cls, up to the boundaries already there), so that the kernel's one stage reads
 * those reductions' results as loaded values. One toggle at a time cannot make this move when the region holds
 * other reductions along its axis, which a ROW stage cannot read: a softmax-weighted sum over a sequence,
 * Σ_t softmax(s)[b, t]·x[b, t, d], whose maximum and sum over t fold into the weighted sum's region (a REDUCE
 * kernel reading x down t, strided) unless both are cut off and the sum is marked together; it then runs down
 * the columns of x, coalesced. Returns whether it was kept. */
static bool try_row_alone(search *s, climb *c, uint32_t cls) {
    if (c->cur.mark[cls] & TS_MARK_ROW) return false;
    const int below = classes_below(s, &c->cur, cls, true);
    uint32_t *cut = s->below; /* the reductions among them, kept in place */
    int n = 0;
    for (int i = 0; i < below; i++)
        if (row_markable(c->cur.best[cut[i]]) && cuttable(c->cur.best[cut[i]])) cut[n++] = cut[i];
    if (n == 0) return false; /* the plain toggle covers it */
    for (int i = 0; i < n; i++) c->cur.mark[cut[i]] |= TS_MARK_CUT;
    c->cur.mark[cls] |= TS_MARK_ROW;
    if (try_move(s, c)) return true;
    for (int i = 0; i < n; i++) c->cur.mark[cut[i]] &= (uint8_t)~TS_MARK_CUT;
    c->cur.mark[cls] &= (uint8_t)~TS_MARK_ROW;
    return false;
}

/* Class cls's node just became alt, which did not pay alone: alt a reduction over a reduction (Σ_j Σ_k x swapped to
 * Σ_k Σ_j x: a sum of a [b·c·h, w] tensor's rows first, where a column kernel summed down b·c·h), with the reductions
 * among alt and its operands ROW-marked too — the inner sum is a REDUCE kernel until marked, so neither change pays
 * without the other. Returns whether it was kept. */
static bool try_node_with_rows(search *s, climb *c, uint32_t cls, const ts_enode *alt) {
    if (!row_markable(alt)) return false;
    uint32_t marked[4];
    int n = 0;
    for (int k = -1; k < ts_op_arity((ts_op)alt->op) && n < 4; k++) {
        const uint32_t at = k < 0 ? cls : ts_eg_find(s->x->eg, alt->kid[k]);
        if (c->cur.best[at] && row_markable(c->cur.best[at]) && !(c->cur.mark[at] & TS_MARK_ROW)) marked[n++] = at;
    }
    if (n < 2) return false; /* one mark alone: the plain toggle's move */
    for (int i = 0; i < n; i++) c->cur.mark[marked[i]] |= TS_MARK_ROW;
    if (try_move(s, c)) return true;
    for (int i = 0; i < n; i++) c->cur.mark[marked[i]] &= (uint8_t)~TS_MARK_ROW;
    return false;
}

/* One pass over the classes the current term reaches, in post-order: every other e-node of each class,
 * then a boundary toggled there (or moved up to it), then everything below it taken into its kernel, then (a
 * reduction) the other lowering of it. Returns whether anything improved. */
static bool climb_pass(search *s, climb *c) {
    if (!well_formed(s, &c->cur)) return false;
    int n = s->norder;
    uint32_t *classes = ts_xmalloc(sizeof *classes * (size_t)(n + 1));
    memcpy(classes, s->order, sizeof *classes * (size_t)n);
    bool improved = false;
    for (int i = 0; i < n && s->st.evals < s->max_evals; i++) {
        uint32_t cls = classes[i];
        for (uint32_t j = 0; j < ts_eg_class_size(s->x->eg, cls) && s->st.evals < s->max_evals; j++) {
            const ts_enode *alt = ts_eg_class_node(s->x->eg, cls, j), *was = c->cur.best[cls];
            if (alt == was || swapped(s, alt, was)) continue;
            c->cur.best[cls] = alt;
            if (try_move(s, c) || try_node_with_rows(s, c, cls, alt)) improved = true;
            else c->cur.best[cls] = was;
        }
        if (cuttable(c->cur.best[cls]) && s->st.evals < s->max_evals) { /* an output too: its kernel then computes it
                                                                         first and its users load it */
            improved |= try_mark(s, c, cls, TS_MARK_CUT);
            improved |= try_shift_cut(s, c, cls); /* when the cut alone did not pay */
        }
        if (s->st.evals < s->max_evals) improved |= try_absorb(s, c, cls);
        if (row_markable(c->cur.best[cls]) && s->st.evals < s->max_evals) improved |= try_mark(s, c, cls, TS_MARK_ROW);
    }
    free(classes);
    return improved;
}

/* Local search from one seed until a pass improves nothing or the budget is spent. */
static void climb_from(search *s, const extraction *seed, const char *name) {
    climb c = {extraction_copy(s, seed), INFINITY, name, 0};
    c.cost = evaluate(s, &c.cur, name);
    if (isfinite(c.cost))
        while (s->st.evals < s->max_evals && climb_pass(s, &c)) {
        }
    extraction_free(&c.cur);
}

/* Climbs from seeds [from, to) in turn, each with its share of the budget the earlier ones left. */
static void climb_seeds(search *s, const extraction *seeds, const char *const *names, int from, int to) {
    for (int i = from; i < to; i++) {
        int share = s->st.evals + (s->max_evals - s->st.evals) / (to - i), all = s->max_evals;
        s->max_evals = share;
        climb_from(s, &seeds[i], names[i]);
        s->max_evals = all;
    }
}

/* A further seed from `seed`: each of its reductions as a ROW kernel of its own (try_row_alone) where that
 * improves the prediction, in post-order; false (*out untouched) where none does. The climb's moves, in
 * post-order, may fold a reduction's operands' reductions into its region before its own turn comes (a softmax
 * into the sum it weights), after which no ROW kernel is left to choose; starting from the seed itself changed
 * where other climbs end (a sum after a linear layer lost its GEMV form), so this is a seed of its own. */
static bool rows_alone_seed(search *s, const extraction *seed, extraction *out) {
    climb c = {extraction_copy(s, seed), INFINITY, "rows alone", 0};
    c.cost = evaluate(s, &c.cur, "rows alone");
    if (isfinite(c.cost) && well_formed(s, &c.cur)) {
        int n = s->norder;
        uint32_t *classes = ts_xmalloc(sizeof *classes * (size_t)(n + 1));
        memcpy(classes, s->order, sizeof *classes * (size_t)n);
        for (int i = 0; i < n && s->st.evals < s->max_evals; i++)
            if (row_markable(c.cur.best[classes[i]])) try_row_alone(s, &c, classes[i]);
        free(classes);
    }
    if (c.moves > 0) {
        *out = c.cur;
        return true;
    }
    extraction_free(&c.cur);
    return false;
}

/* A preset's tree cost counts each pick of a dual contraction as paying for the dual once, so it may take
 * pick{i}(dual(A, B0, B1)) for a lone contraction A·B_i whose class also holds it plain: a dual GEMM of which the
 * term reads one half (a tanh-GELU MLP's down projection as P·(0.5·Wd) beside an unread P·Wd: two GEMMs and a scaled
 * copy of the weight), from which no single move leads back. Classes whose pick reads a dual the term reads
 * through that pick alone are extracted again without their picks, until every dual the term reaches is read
 * through both. */
static void drop_lone_picks(search *s, const cost_preset *c, extraction *e) {
    const ts_egir *x = s->x;
    uint8_t *no_pick = ts_xcalloc(s->bound + 1, 1), *read = ts_xcalloc(s->bound + 1, 1);
    for (int round = 0; round < 8 && well_formed(s, e); round++) {
        memset(read, 0, s->bound + 1);
        for (int i = 0; i < s->norder; i++) { /* the halves of each dual the term reads */
            const ts_enode *n = e->best[s->order[i]];
            if (n->op == TS_OP_PICK && n->param[0] >= 0 && n->param[0] < 8)
                read[ts_eg_find(x->eg, n->kid[0])] |= (uint8_t)(1u << n->param[0]);
        }
        bool lone = false;
        for (int i = 0; i < s->norder; i++) {
            uint32_t cls = s->order[i];
            const ts_enode *n = e->best[cls];
            if (n->op != TS_OP_PICK || no_pick[cls] || __builtin_popcount(read[ts_eg_find(x->eg, n->kid[0])]) != 1) continue;
            for (uint32_t j = 0; j < ts_eg_class_size(x->eg, cls) && !no_pick[cls]; j++)
                if (ts_eg_class_node(x->eg, cls, j)->op != TS_OP_PICK) no_pick[cls] = 1, lone = true;
        }
        if (!lone) break;
        const ts_enode **best = choose_nodes_but(x, c, no_pick);
        free(e->best);
        e->best = best;
    }
    free(no_pick);
    free(read);
}

/* ---- the search -------------------------------------------------------------------------------- */

ts_search_opts ts_search_default_opts(void) { return (ts_search_opts){.keep = 8, .max_evals = 0}; }

/* The default budget: about 1.5 s of lowering on the development machine for a decoder layer, less per
 * class for larger graphs (each evaluation lowers the whole graph). */
static int default_budget(int classes) {
    int b = 600000 / (classes > 1 ? classes : 1);
    return b < 40 ? 40 : b > 3000 ? 3000 : b;
}

int ts_search_baseline(const ts_egir *u, const ts_egir_view *views2, const ts_graph *g, const ts_costmodel *cm,
                       ts_plan *p, char **err) {
    static const cost_preset plain = {"baseline", 1, 1, 1, 1, 1, 1, 1, 1, 0};
    const ts_enode **best = choose_nodes(u, &plain);
    int rc = ts_plan_lower(u, views2, best, NULL, false, p, err);
    free(best);
    p->name = ts_strdup("baseline (one kernel per op)");
    if (rc == 0) ts_costmodel_predict(cm, g, p);
    return rc;
}

int ts_search_plans(const ts_egir *x, const ts_egir *unsaturated, const ts_egir_view *views2, const ts_graph *g,
                    const ts_costmodel *cm, const ts_search_opts *opts, ts_plan **plans, int *n,
                    ts_search_stats *stats, char **err) {
    search s = {.x = x, .views2 = views2, .g = g, .cm = cm, .bound = ts_eg_id_bound(x->eg), .keep = opts->keep,
                .allow_library = opts->allow_library};
    if (s.keep < 1) s.keep = 1;
    s.pool = ts_xcalloc((size_t)s.keep + 1, sizeof *s.pool);
    s.sig = ts_xcalloc((size_t)s.keep + 1, sizeof *s.sig);
    s.shape = ts_xcalloc((size_t)s.keep + 1, sizeof *s.shape);
    s.mark = ts_xmalloc(s.bound + 1);
    s.seen = ts_xcalloc(s.bound + 1, 1);
    s.below = ts_xmalloc(sizeof *s.below * (s.bound + 1));
    s.stack = ts_xmalloc(sizeof *s.stack * (s.bound + 1));
    s.order = ts_xmalloc(sizeof *s.order * (s.bound + 1));
    *plans = ts_xcalloc((size_t)s.keep + 1, sizeof **plans);
    *n = 0;
    int rc = ts_search_baseline(unsaturated, views2, g, cm, &(*plans)[0], err);
    if (rc == 0) {
        *n = 1;
        enum { NPRESETS = (int)(sizeof presets / sizeof *presets) };
        extraction seeds[2 * (NPRESETS + 1)];
        const char *names[2 * (NPRESETS + 1)];
        int nseeds = 0;
        for (int i = 0; i < NPRESETS; i++, nseeds++) {
            seeds[i].best = choose_nodes(x, &presets[i]);
            names[i] = presets[i].name;
        }
        if ((seeds[nseeds].best = as_written(x, unsaturated, &presets[0]))) names[nseeds++] = "as-written";
        for (int i = 0; i < nseeds; i++) seeds[i].mark = ts_xcalloc(s.bound + 1, 1);
        for (int i = 0; i < NPRESETS; i++) drop_lone_picks(&s, &presets[i], &seeds[i]);
        s.max_evals = opts->max_evals > 0 ? opts->max_evals : default_budget(well_formed(&s, &seeds[0]) ? s.norder : 1);
        climb_seeds(&s, seeds, names, 0, nseeds);
        /* then, with what the climbs left, the seeds' rows-alone forms (none where the budget is spent) */
        const int first = nseeds;
        for (int i = 0; i < first && s.st.evals < s.max_evals; i++)
            if (rows_alone_seed(&s, &seeds[i], &seeds[nseeds])) names[nseeds++] = names[i];
        climb_seeds(&s, seeds, names, first, nseeds);
        s.st.classes = well_formed(&s, &seeds[0]) ? s.norder : 0;
        for (int i = 0; i < nseeds; i++) extraction_free(&seeds[i]);
        for (int i = 0; i < s.npool; i++) (*plans)[(*n)++] = s.pool[i];
    } else {
        ts_plan_free(&(*plans)[0]);
        for (int i = 0; i < s.npool; i++) ts_plan_free(&s.pool[i]);
    }
    if (stats) *stats = s.st;
    free(s.pool);
    free(s.sig);
    free(s.shape);
    free(s.mark);
    free(s.seen);
    free(s.below);
    free(s.stack);
    free(s.order);
    return rc;
}

/* ---- terms for explanations -------------------------------------------------------------------- */

static uint32_t term_of(const ts_egir *x, const ts_enode **best, int *memo, ts_eg_term *t, uint32_t cls) {
    cls = ts_eg_find(x->eg, cls);
    if (memo[cls] >= 0) return (uint32_t)memo[cls];
    ts_enode e = *best[cls];
    for (int k = 0; k < ts_op_arity((ts_op)e.op); k++) e.kid[k] = term_of(x, best, memo, t, e.kid[k]);
    t->node = ts_xrealloc(t->node, sizeof *t->node * (t->n + 1));
    t->node[t->n] = e;
    return (uint32_t)(memo[cls] = (int)t->n++);
}

bool ts_search_seed_term(const ts_egir *x, uint32_t cls, ts_eg_term *out) {
    const ts_enode **best = choose_nodes(x, &presets[0]);
    uint32_t bound = ts_eg_id_bound(x->eg);
    int *memo = ts_xmalloc(sizeof(int) * (bound + 1));
    for (uint32_t i = 0; i < bound; i++) memo[i] = -1;
    out->node = NULL;
    out->n = 0;
    bool ok = best[ts_eg_find(x->eg, cls)] != NULL;
    if (ok) term_of(x, best, memo, out, cls);
    free(memo);
    free(best);
    return ok;
}
