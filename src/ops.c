/* ops.c — the tables generated from the TS_OPS X-macro: names, arities and kinds of primitive ops. */
#include "ops.h"

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

const char *ts_op_name(ts_op op) { return (unsigned)op < TS_OP_COUNT ? op_table[op].name : "?"; }
int ts_op_arity(ts_op op) { return op_table[op].arity; }
ts_op_kind ts_op_kind_of(ts_op op) { return op_table[op].kind; }

int ts_op_lookup(const char *name) {
    for (int i = 0; i < TS_OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0) return i;
    return -1;
}
