/* ops.c — the tables generated from the TS_OPS X-macro: names, arities and kinds of primitive ops. */
#include "ops.h"

#include <stdbool.h>
#include <string.h>

static const struct {
    const char *name;
    int arity;
    ts_op_kind kind;
} op_table[TS_OP_COUNT] = {
#define TS_X_ROW(e, name, arity, kind) [TS_OP_##e] = {name, arity, kind},
    TS_OPS(TS_X_ROW)
#undef TS_X_ROW
};

static const struct {
    const char *name;
    int arity, nparams;
} fused_table[TS_OP_ALL - TS_OP_COUNT] = {
#define TS_X_FROW(e, name, arity, nparams) [TS_OP_##e - TS_OP_COUNT] = {name, arity, nparams},
    TS_FUSED_OPS(TS_X_FROW)
#undef TS_X_FROW
};

static bool is_fused(ts_op op) { return op >= (ts_op)TS_OP_COUNT && op < TS_OP_ALL; }

const char *ts_op_name(ts_op op) {
    if ((unsigned)op < TS_OP_COUNT) return op_table[op].name;
    return is_fused(op) ? fused_table[op - TS_OP_COUNT].name : "?";
}
int ts_op_arity(ts_op op) { return is_fused(op) ? fused_table[op - TS_OP_COUNT].arity : op_table[op].arity; }
ts_op_kind ts_op_kind_of(ts_op op) { return is_fused(op) ? TS_KIND_FUSED : op_table[op].kind; }
int ts_fused_op_nparams(ts_op op) { return is_fused(op) ? fused_table[op - TS_OP_COUNT].nparams : 0; }

int ts_op_lookup(const char *name) {
    for (int i = 0; i < TS_OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0) return i;
    return -1;
}
