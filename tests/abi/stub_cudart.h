/* stub_cudart.h — what tests/abi/stub_cudart.c records and lets a test set (see there). */
#ifndef TS_STUB_CUDART_H
#define TS_STUB_CUDART_H

typedef struct {
    int cc_major, cc_minor, sms, ptx_version; /* what the stub device reports */
    int launches;                             /* kernel launches since stub_reset */
    int attribute_queries;                    /* cudaDeviceGetAttribute calls since stub_reset */
    int func_attribute_sets;                  /* cudaFuncSetAttribute calls since stub_reset */
    const char *last_kernel;                  /* device name of the last kernel launched */
} stub_state;

extern stub_state stub;
void stub_reset(void);

#endif
