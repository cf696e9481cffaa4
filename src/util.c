/* util.c — checked allocation and internal assertion reporting (see util.h). */
#include "util.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Noreturn void out_of_memory(size_t n) {
    fprintf(stderr, "tsopt: error: out of memory (allocating %zu bytes)\n", n);
    exit(3);
}

void *ts_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *ts_xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) out_of_memory(n * size);
    return p;
}

void *ts_xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *ts_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(ts_xmalloc(n), s, n);
}

char *ts_strfmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = ts_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void ts_assert_fail(const char *expr, const char *file, int line) {
    fprintf(stderr, "tsopt: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}

typedef struct {
    void (*fn)(void *ctx, long long begin, long long end);
    void *ctx;
    long long begin, end;
} range_job;

static void *run_range(void *arg) {
    range_job *j = arg;
    j->fn(j->ctx, j->begin, j->end);
    return NULL;
}

void ts_parallel_ranges(long long n, long long min_part, void (*fn)(void *ctx, long long begin, long long end),
                        void *ctx) {
    enum { MAX_THREADS = 64 };
    long procs = sysconf(_SC_NPROCESSORS_ONLN);
    long long parts = procs > 1 ? procs : 1, floor_part = min_part > 0 ? min_part : 1;
    if (parts > MAX_THREADS) parts = MAX_THREADS;
    if (parts > n / floor_part) parts = n / floor_part;
    if (parts <= 1) {
        if (n > 0) fn(ctx, 0, n);
        return;
    }
    range_job job[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (long long p = 0; p < parts; p++) job[p] = (range_job){fn, ctx, n * p / parts, n * (p + 1) / parts};
    for (long long p = 1; p < parts; p++) started[p] = pthread_create(&th[p], NULL, run_range, &job[p]) == 0;
    run_range(&job[0]);
    for (long long p = 1; p < parts; p++) {
        if (started[p]) pthread_join(th[p], NULL);
        else run_range(&job[p]); /* no thread to be had: this one does the part */
    }
}
