/* test_partition.c — graph breaks and groups: a 4-layer decoder stack (tests/fixtures/decoder_stack4.yaml,
 * written by bench/make_stack.py) is 8 chunks in 2 groups; single bench graphs stay whole (the decoder
 * layer: its two residual halves); chunk graphs evaluated in order reproduce the whole graph exactly and
 * convert to the e-graph; chunks of different structure never share a group. */
#include <string.h>

#include "egir.h"
#include "partition.h"
#include "testutil.h"

#define SMALL_DECODER "t=5,d=16,f=8"

static void load_stack4(checked *c) { check_file(c, "tests/fixtures/decoder_stack4.yaml", SMALL_DECODER); }

/* Runs chunk ci on the values val[] holds for its inputs; stores what it exports into val (owned) or outs. */
static void run_chunk(const ts_graph *g, const ts_partition *p, int ci, double **val, bool *owned, double **outs) {
    const ts_chunk *c = &p->chunks[ci];
    ts_graph cg;
    ts_partition_chunk_graph(g, p, ci, &cg);
    double **args = ts_xcalloc((size_t)c->nin + 1, sizeof *args), **res = NULL;
    for (int k = 0; k < c->nin; k++) cr_assert_not_null(args[k] = val[c->in[k]], "chunk %d input %d", ci, k);
    char *err = NULL;
    cr_assert_eq(ts_interp_run(&cg, args, &res, NULL, &err), 0, "chunk %d: %s", ci, err ? err : "");
    cr_assert_eq(cg.noutputs, c->nout);
    for (int k = 0; k < c->nout; k++) {
        if (c->out_output[k] >= 0) outs[c->out_output[k]] = res[k];
        else val[c->out[k]] = res[k], owned[c->out[k]] = true;
    }
    free(res);
    free(args);
    ts_graph_free(&cg);
}

/* Runs every chunk graph in order, each reading the values earlier chunks exported; returns the graph
 * outputs (free with ts_free_buffers(out, g->noutputs)). */
static double **eval_chunked(const ts_graph *g, const ts_partition *p, double *const *inputs) {
    double **val = ts_xcalloc((size_t)g->nnodes, sizeof *val);
    bool *owned = ts_xcalloc((size_t)g->nnodes, sizeof *owned);
    double **outs = ts_xcalloc((size_t)g->noutputs, sizeof *outs);
    for (int i = 0; i < g->ninputs; i++) val[g->inputs[i].node] = inputs[i];
    for (int ci = 0; ci < p->nchunks; ci++) run_chunk(g, p, ci, val, owned, outs);
    for (int i = 0; i < g->nnodes; i++)
        if (owned[i]) free(val[i]);
    free(val);
    free(owned);
    return outs;
}

/* Whole graph and chunk chain agree bit for bit on the same random inputs. */
static void assert_chunked_exact(checked *c, const ts_partition *p) {
    double **in = ts_random_inputs(&c->g, 11);
    double **want = eval_graph(c, in), **got = eval_chunked(&c->g, p, in);
    for (int o = 0; o < c->g.noutputs; o++) {
        cr_assert_not_null(got[o], "output %d computed by no chunk", o);
        int64_t n = ts_output_numel(&c->g, o);
        cr_assert_eq(memcmp(want[o], got[o], sizeof(double) * (size_t)n), 0, "output %s differs", c->g.outputs[o].name);
    }
    ts_free_buffers(in, c->g.ninputs);
    ts_free_buffers(want, c->g.noutputs);
    ts_free_buffers(got, c->g.noutputs);
}

Test(partition, four_layer_stack_is_eight_chunks_in_two_groups) {
    checked c;
    load_stack4(&c);
    ts_partition p;
    cr_assert_eq(ts_partition_graph(&c.g, &p), 0);
    cr_assert_eq(p.nchunks, 8);
    cr_assert_eq(p.ngroups, 2);
    for (int i = 0; i < 8; i++) cr_assert_eq(p.chunks[i].group, i % 2, "chunk %d", i);
    cr_assert_eq(p.groups[0].rep, 0);
    cr_assert_eq(p.groups[1].rep, 1);
    cr_assert_eq(p.groups[0].members, 4);
    cr_assert_eq(p.groups[1].members, 4);
    for (int i = 1; i < 8; i++) cr_assert_eq(p.chunks[i].first, p.chunks[i - 1].last, "chunks tile the order");
    cr_assert_eq(p.chunks[7].last, p.norder);
    ts_partition_free(&p);
    free_checked(&c);
}

Test(partition, single_bench_graphs_stay_whole) {
    const char *graphs[][2] = {{"attention", "h=2,t_q=8,t_kv=8,d_h=4"},
                               {"attention_causal", "h=2,t_q=8,t_kv=8,d_h=4"},
                               {"attention_gqa", "t_q=8,t_kv=8,d_h=4"},
                               {"matmul", "m=3,d=8,n=5"},
                               {"rmsnorm", "m=3,d=8,n=5"},
                               {"rmsnorm_mlp", "m=3,d=8,n=5"},
                               {"swiglu", "m=3,d=8,n=5"}};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) {
        checked c;
        check_bench(&c, graphs[i][0], graphs[i][1]);
        ts_partition p;
        ts_partition_graph(&c.g, &p);
        cr_assert_eq(p.nchunks, 1, "%s: %d chunks", graphs[i][0], p.nchunks);
        cr_assert_eq(p.ngroups, 1);
        ts_partition_free(&p);
        free_checked(&c);
    }
}

/* Chains without a contraction never stand alone: cutting between a GEMM and its activations (each Mish
 * alone is past TS_PARTITION_MIN_NODES nodes once expanded) would force them into kernels of their own. */
Test(partition, elementwise_chains_stay_with_their_gemm) {
    checked c;
    check_file(&c, "tests/fixtures/gemm_mish_mish.yaml", "b=3,k=8,f=5");
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    cr_assert_eq(p.nchunks, 1, "%d chunks", p.nchunks);
    ts_partition_free(&p);
    free_checked(&c);
}

Test(partition, decoder_layer_breaks_at_the_mid_layer_residual) {
    checked c;
    check_bench(&c, "decoder_layer", SMALL_DECODER);
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    cr_assert_eq(p.nchunks, 2);
    cr_assert_eq(p.ngroups, 2);
    cr_assert_eq(p.chunks[0].nout, 1);
    cr_assert_eq(p.chunks[1].nout, 1);
    ts_graph cg;
    ts_partition_chunk_graph(&c.g, &p, 1, &cg);
    cr_assert_str_eq(cg.inputs[0].name, "h", "the residual takes its user name");
    cr_assert_str_eq(cg.outputs[0].name, "out");
    ts_graph_free(&cg);
    assert_chunked_exact(&c, &p);
    ts_partition_free(&p);
    free_checked(&c);
}

Test(partition, chunk_graphs_chained_reproduce_the_stack_exactly) {
    checked c;
    load_stack4(&c);
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    assert_chunked_exact(&c, &p);
    ts_partition_free(&p);
    free_checked(&c);
}

Test(partition, chunk_graphs_convert_to_the_egraph) {
    checked c;
    load_stack4(&c);
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    for (int i = 0; i < p.nchunks; i++) {
        ts_graph cg;
        ts_partition_chunk_graph(&c.g, &p, i, &cg);
        ts_egir x;
        char *err = NULL;
        cr_assert_eq(ts_egir_init(&x, &cg, &err), 0, "chunk %d: %s", i, err ? err : "");
        cr_assert_eq(x.axis_conflicts, 0);
        ts_egir_free(&x);
        ts_graph_free(&cg);
    }
    ts_partition_free(&p);
    free_checked(&c);
}

Test(partition, chunk_graphs_name_their_boundaries) {
    checked c;
    load_stack4(&c);
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    ts_graph first, mid, last;
    ts_partition_chunk_graph(&c.g, &p, 0, &first);
    ts_partition_chunk_graph(&c.g, &p, 2, &mid);
    ts_partition_chunk_graph(&c.g, &p, 7, &last);
    cr_assert_str_eq(first.inputs[0].name, "x", "a graph input keeps its name");
    cr_assert_str_eq(first.outputs[0].name, "h_0");
    cr_assert_str_eq(mid.inputs[0].name, "out_0", "a value from an earlier chunk takes its user name");
    cr_assert_eq(mid.ninputs, first.ninputs);
    cr_assert_str_eq(last.outputs[0].name, "out_3", "the graph output keeps its name");
    cr_assert_eq(p.chunks[7].out_output[0], 0);
    ts_graph_free(&first);
    ts_graph_free(&mid);
    ts_graph_free(&last);
    ts_partition_free(&p);
    free_checked(&c);
}

/* Layer 2's first rmsnorm gets another eps (same text length): its chunk leaves the group. */
Test(partition, a_layer_with_another_eps_is_a_group_of_its_own) {
    char *text = read_text("tests/fixtures/decoder_stack4.yaml");
    char *at = strstr(text, "{name: n1_2,");
    cr_assert_not_null(at);
    at = strstr(at, "eps: 1e-5");
    cr_assert_not_null(at);
    memcpy(at, "eps: 2e-5", 9);
    checked c;
    check_ok_dims(&c, text, SMALL_DECODER);
    free(text);
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    cr_assert_eq(p.nchunks, 8);
    cr_assert_eq(p.ngroups, 3);
    int odd = p.chunks[4].group;
    cr_assert_eq(p.groups[odd].members, 1);
    cr_assert_eq(p.groups[odd].rep, 4);
    for (int i = 0; i < 8; i++)
        if (i != 4) cr_assert_neq(p.chunks[i].group, odd, "chunk %d shares the odd layer's group", i);
    cr_assert_eq(p.groups[p.chunks[0].group].members, 3);
    cr_assert_eq(p.groups[p.chunks[1].group].members, 4);
    assert_chunked_exact(&c, &p);
    ts_partition_free(&p);
    free_checked(&c);
}

/* Layers whose views differ (a slice start) are different blocks even with identical ops. */
Test(partition, a_different_view_splits_the_group) {
    char *text = read_text("tests/fixtures/decoder_stack4.yaml");
    char *at = strstr(text, "{name: k_1,");
    cr_assert_not_null(at);
    at = strstr(at, "start: 4096");
    cr_assert_not_null(at);
    memcpy(at, "start: 4097", 11);
    checked c;
    check_ok_dims(&c, text, SMALL_DECODER);
    free(text);
    ts_partition p;
    ts_partition_graph(&c.g, &p);
    cr_assert_eq(p.nchunks, 8);
    cr_assert_eq(p.ngroups, 3, "layer 1's attention stands alone");
    cr_assert_eq(p.groups[p.chunks[2].group].members, 1);
    cr_assert_eq(p.groups[p.chunks[0].group].members, 3);
    cr_assert_eq(p.groups[p.chunks[3].group].members, 4, "its MLP half is unchanged");
    ts_partition_free(&p);
    free_checked(&c);
}
