/* partition.h — graph breaks between repeated blocks, and groups of structurally identical chunks, so that a
 * stack of 32 identical decoder layers is saturated (and later compiled) once per distinct block, not 32
 * times.
 *
 * Order. The partitioner works on its own topological order of the non-source nodes (sources: INPUT,
 * CONSTANT, IOTA): a depth-first post-order from the graph outputs, operands in order, then any node no
 * output needs. Every value is thus computed just before the subtree that first needs it, so the layers
 * of a stack are contiguous (the checker's order is breadth-first and interleaves them).
 *
 * Cuts. A cut is a position of that order where exactly one non-source value computed before it is used by
 * a node after it (the residual stream between decoder layers, and the mid-layer residual). Sources never
 * cross: inputs, constants and iotas may be used anywhere. Graph outputs need not cross either: a chunk
 * exports them itself. Chunks are the ranges between cuts; a chunk with fewer than TS_PARTITION_MIN_NODES
 * nodes is merged into the previous one (the first into the next), so a plain graph stays one chunk.
 *
 * Groups. Two chunks are in one group when their canonical encodings are byte-identical: each node in
 * order with op, dtype, axes and params, each operand as a chunk-local index or a boundary ordinal
 * (boundary values numbered by first use, described by dtype and axes — a graph input and a value from an
 * earlier chunk look alike — and constants by value, iotas by axis), and every view exactly.
 *
 * Not covered: a graph output that is itself a source (an input passed through) belongs to no chunk. */
#ifndef TS_PARTITION_H
#define TS_PARTITION_H

#include <stdint.h>

#include "hlir.h"

#define TS_PARTITION_MIN_NODES 16 /* fewer non-source nodes than this: merged into a neighbour */

typedef struct {
    int32_t first, last; /* the chunk's nodes are order[first..last) of its ts_partition */
    int32_t group;       /* index into ts_partition.groups */
    int nin;
    int32_t *in;         /* the values it reads from outside, in order of first use (node ids: graph INPUT
                            nodes or nodes of earlier chunks): the chunk graph's inputs, in this order */
    int nout;
    int32_t *out;        /* the node of each chunk graph output, in order */
    int32_t *out_output; /* per chunk graph output: the graph output it is (read through that output's
                            view), or -1: the node's value, contiguous, for later chunks. Graph outputs
                            come first. */
} ts_chunk;

typedef struct {
    int32_t rep; /* the first chunk of the group, which stands for all */
    int members; /* chunks in the group */
} ts_group;

typedef struct {
    int norder;
    int32_t *order; /* the non-source nodes in partition order (a topological order) */
    int nchunks;
    ts_chunk *chunks;
    int ngroups;
    ts_group *groups;
} ts_partition;

/* Partitions g (checked) into chunks and groups them. (Not named ts_partition: C gives a function and a
 * type one namespace.) p is initialised here; free it with
 * ts_partition_free. Returns 0 (there is no failure yet; the int leaves room for limits). */
int ts_partition_graph(const ts_graph *g, ts_partition *p);
void ts_partition_free(ts_partition *p);

/* A standalone graph computing chunk `chunk`: g's axes; as inputs, the chunk's boundary values (graph
 * inputs keep their names; a value from an earlier chunk takes the name of the user tensor that is its
 * node, or "in<k>"); constants and iotas it uses copied in; as outputs, in the order of ts_chunk.out, the
 * graph outputs it computes (their names and views), then the values used after the chunk (contiguous,
 * named like inputs, or "out<k>"). Named tensors computed in the chunk are kept. out is initialised here;
 * free it with ts_graph_free. */
void ts_partition_chunk_graph(const ts_graph *g, const ts_partition *p, int chunk, ts_graph *out);

#endif
