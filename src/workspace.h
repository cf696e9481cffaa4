/* workspace.h — where a plan's temporaries live in the workspace: an interval allocation over the kernel
 * launch order, so that temporaries whose lifetimes do not overlap share memory (a stack of identical
 * layers needs about one layer's workspace, not one per layer).
 *
 * A temporary is live from the first kernel that touches it (the one writing it) to the last one that
 * reads it, both included. Temporaries are placed, largest first at the typical sizes, into slots: a slot
 * is one region of the workspace, sized for the first temporary placed in it, and takes another temporary
 * when its size is at least that temporary's for every run-time size (ts_workspace_fits) and no
 * temporary already there is live at the same time. Slots are laid out one after another, each starting
 * 256-byte aligned. Sizes are symbolic (sym.h), so the workspace follows the dynamic sizes; the emitter
 * prints the same slots and offsets this module computes, and the tests evaluate them. Not an optimal
 * allocator (first fit, no splitting of slots); it is what keeps deep stacks' workspace flat. */
#ifndef TS_WORKSPACE_H
#define TS_WORKSPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "hlir.h"
#include "plan.h"
#include "sym.h"

typedef struct {
    int nslot;
    ts_sym *slot_bytes; /* per slot: bytes before rounding up to 256 (the largest temporary placed there) */
    int *slot_of;       /* per plan buffer: its slot; -1 for inputs, outputs and temporaries no kernel touches */
    int *first, *last;  /* per plan buffer: the first and last kernel touching it (-1: none) */
} ts_workspace;

/* Allocates the temporaries of p (dyn: the graph's dynamic axes, ts_dyn_of). */
void ts_workspace_plan(const ts_plan *p, const ts_graph *g, const ts_dyn *dyn, ts_workspace *w);
void ts_workspace_free(ts_workspace *w);

/* Bytes of temporary b of p before rounding (its elements times their size). */
ts_sym ts_workspace_buffer_bytes(const ts_plan *p, const ts_graph *g, const ts_dyn *dyn, int b);

/* Whether a region of `have` bytes holds `need` bytes at every size of the dynamic axes (each at least 1). */
bool ts_workspace_fits(const ts_sym *have, const ts_sym *need);

/* At the dynamic sizes `sizes` (indexed like dyn->axis): the byte offset of slot s, and the total bytes. */
int64_t ts_workspace_offset(const ts_workspace *w, int s, const int64_t *sizes);
int64_t ts_workspace_total(const ts_workspace *w, const int64_t *sizes);

#endif
