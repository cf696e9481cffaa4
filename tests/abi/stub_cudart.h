/* stub_cudart.h — what tests/abi/stub_cudart.c records and lets a test set (see there). */
#ifndef TS_STUB_CUDART_H
#define TS_STUB_CUDART_H

typedef struct {
    int cc_major, cc_minor, sms, ptx_version; /* what the stub device reports */
    int launches;                             /* kernel launches since stub_reset */
    int attribute_queries;                    /* cudaDeviceGetAttribute calls since stub_reset */
    int func_attribute_sets;                  /* cudaFuncSetAttribute calls since stub_reset */
    const char *last_kernel;                  /* device name of the last kernel launched */
    int pdl_launches;                         /* launches with programmatic stream serialization since stub_reset */
    int first_pdl;                            /* the first launch since stub_reset had it */
    int device;                               /* what cudaGetDevice answers */
    /* CUDA graphs: counts since stub_reset, except the live ones */
    int captures, captured_launches;          /* stream captures begun; launches recorded into them, not run */
    int instantiations, updates, graph_launches;
    int live_graphs, live_execs;              /* captured graphs and executable graphs not yet destroyed */
    int capturing;                            /* a capture begun by the header and not yet ended */
    int caller_capturing;                     /* set by a test: every stream reports a capture of its own */
    int update_fails;                         /* set by a test: cudaGraphExecUpdate refuses */
} stub_state;

extern stub_state stub;
void stub_reset(void);

#endif
