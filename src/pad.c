/* pad.c — GEMM operands copied into row-padded temporaries (pad.h). */
#include "pad.h"

#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "util.h"

/* An operand access already given a padded copy in this pass, the access the GEMMs read it with, and the
 * copy kernel's index (later insertions all come after it). */
typedef struct {
    ts_access from, to;
    int kernel;
} padded;

typedef struct {
    ts_plan *p;
    const ts_graph *g;
    ts_dyn dyn;
    int64_t typical[TS_SYM_MAX_DYN];
    int n, cap;
    padded *done;
} padder;

/* Access a's stride along dim d at the typical sizes. */
static int64_t typical_stride(const padder *pd, const ts_access *a, int d) { return ts_sym_eval(&a->stride[d], pd->typical); }

/* The dims of a that move (a nonzero stride), outermost first (largest typical stride), the unit-stride
 * one last; how many. */
static int moving_dims(const padder *pd, const ts_access *a, int *dims) {
    int n = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (typical_stride(pd, a, d) == 0) continue;
        int j = n++;
        while (j > 0 && typical_stride(pd, a, dims[j - 1]) < typical_stride(pd, a, d)) dims[j] = dims[j - 1], j--;
        dims[j] = d;
    }
    return n;
}

/* Whether a can be copied into a padded temporary: not chunked already, no negative stride, and its
 * innermost moving dim of unit stride over an axis of static size (one moving dim: a vector whose offset
 * the copy moves to 0). */
static bool paddable(const padder *pd, const ts_access *a, int *dims, int *n) {
    if (ts_access_chunked(a)) return false;
    for (int d = 0; d < a->ndim; d++)
        if (typical_stride(pd, a, d) < 0) return false;
    *n = moving_dims(pd, a, dims);
    if (*n < 1 || !ts_sym_is_one(&a->stride[dims[*n - 1]])) return false;
    return !pd->g->axes[a->axis[dims[*n - 1]]].dynamic;
}

/* A MAP kernel copying a into a fresh padded temporary, inserted at kernel index `at`; the access that
 * reads the copy as a was read (same dims, zero strides kept). */
static ts_access copy_padded(padder *pd, const ts_access *a, const int *dims, int n, int at) {
    int32_t axes[TS_MAX_DIMS];
    for (int i = 0; i < n; i++) axes[i] = a->axis[dims[i]];
    int buf = ts_plan_add_buffer(pd->p, TS_BUF_TEMP, 0, pd->p->buf[a->buf].dtype, axes, n);
    int64_t inner = pd->g->axes[axes[n - 1]].size;
    pd->p->buf[buf].pitch = n > 1 ? (inner + 7) / 8 * 8 : 0;

    ts_access to = *a, out = {.buf = buf, .ndim = n, .offset = ts_sym_const(0)}, from = {.buf = a->buf, .ndim = n, .offset = a->offset};
    to.buf = buf, to.offset = ts_sym_const(0);
    ts_sym stride = ts_sym_const(1);
    for (int i = n - 1; i >= 0; i--) {
        out.axis[i] = from.axis[i] = axes[i];
        out.stride[i] = to.stride[dims[i]] = stride;
        from.stride[i] = a->stride[dims[i]];
        stride = ts_sym_mul(stride, i == n - 1 && n > 1 ? ts_sym_const(pd->p->buf[buf].pitch) : ts_sym_axis(pd->g, &pd->dyn, axes[i]));
    }

    ts_plan *p = pd->p;
    TS_GROW(p->k, p->nk, p->cap_k);
    memmove(&p->k[at + 1], &p->k[at], sizeof *p->k * (size_t)(p->nk - at));
    p->nk++;
    ts_kernel *k = &p->k[at];
    ts_kernel_init(k, TS_KERNEL_MAP);
    k->out = out;
    k->acc = ts_xmalloc(sizeof *k->acc), k->acc[0] = from, k->nacc = k->cap_acc = 1;
    k->expr.node = ts_xmalloc(sizeof *k->expr.node), k->expr.n = k->expr.cap = 1;
    k->expr.node[0] = (ts_xnode){.kind = TS_X_LOAD, .slot = 0};
    ts_config_choose(pd->g, p, k);
    return to;
}

/* Whether a kernel after `from` and before `to` writes buffer b (an in-place update: a copy made before it
 * is stale after it). */
static bool written_between(const ts_plan *p, int b, int from, int to) {
    for (int i = from + 1; i < to; i++)
        if (ts_kernel_writes(&p->k[i], b)) return true;
    return false;
}

/* GEMM kernel gi's operand slot s read from a padded copy (made now, before gi, or shared with an earlier
 * GEMM) where it is paddable. *gi is where the GEMM is after any insertion (*gi moves down one). */
static void pad_slot(padder *pd, int *gi, int s) {
    const ts_access a = pd->p->k[*gi].acc[s];
    int dims[TS_MAX_DIMS], n;
    if (!paddable(pd, &a, dims, &n)) return;
    for (int i = 0; i < pd->n; i++)
        if (memcmp(&pd->done[i].from, &a, sizeof a) == 0 && !written_between(pd->p, a.buf, pd->done[i].kernel, *gi)) {
            pd->p->k[*gi].acc[s] = pd->done[i].to;
            return;
        }
    ts_access to = copy_padded(pd, &a, dims, n, *gi);
    TS_GROW(pd->done, pd->n, pd->cap);
    pd->done[pd->n++] = (padded){a, to, *gi};
    (*gi)++;
    pd->p->k[*gi].acc[s] = to;
}

/* Whether GEMM operands of kernel k may be padded: a GEMM of fp16/bf16 operands (gemm_f32.cuh copies any fp32
 * layout asynchronously, 4 bytes at a time where rows are off 16 bytes, and folds no padding in its price). */
static bool paddable_gemm(const ts_plan *p, const ts_kernel *k) {
    return k->kind == TS_KERNEL_GEMM && !ts_gemm_fp32(p, k);
}

/* Whether plan p has an operand to pad (without changing anything). */
static bool anything_to_pad(padder *pd, const ts_plan *p) {
    for (int i = 0; i < p->nk; i++) {
        if (!paddable_gemm(p, &p->k[i])) continue;
        int slots[5], n = ts_gemm_operand_slots(&p->k[i], slots), dims[TS_MAX_DIMS], nd;
        for (int j = 0; j < n; j++)
            if (paddable(pd, &p->k[i].acc[slots[j]], dims, &nd)) return true;
    }
    return false;
}

bool ts_plan_with_padded_operands(const ts_plan *p, const ts_graph *g, ts_plan *out) {
    padder pd = {.g = g};
    if (ts_dyn_of(g, &pd.dyn) != 0) return false;
    for (int d = 0; d < pd.dyn.n; d++) pd.typical[d] = g->axes[pd.dyn.axis[d]].size;
    if (!anything_to_pad(&pd, p)) return false; /* the common case: no copy */
    ts_plan_copy(out, p);
    pd.p = out;
    for (int gi = 0; gi < out->nk; gi++) {
        if (!paddable_gemm(out, &out->k[gi])) continue;
        int slots[5], n = ts_gemm_operand_slots(&out->k[gi], slots);
        for (int j = 0; j < n; j++) pad_slot(&pd, &gi, slots[j]);
    }
    free(pd.done);
    return true;
}
