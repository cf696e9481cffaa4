/* util.h — small shared helpers: checked allocation, growable arrays, internal assertions.
 * User errors never go through here: they are diagnostics (src/diag.h). TS_ASSERT is for broken
 * internal invariants only, and reports file, line and the failed expression before aborting. */
#ifndef TS_UTIL_H
#define TS_UTIL_H

#include <stddef.h>

void *ts_xmalloc(size_t n);
void *ts_xcalloc(size_t n, size_t size);
void *ts_xrealloc(void *p, size_t n);
char *ts_strdup(const char *s);
/* printf into a fresh heap string. */
char *ts_strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The next value of a splitmix64 stream (seeded random numbers for inputs and rule verification). */
#define TS_SPLITMIX64_STEP 0x9E3779B97F4A7C15ull /* what each draw adds to the state */
static inline unsigned long long ts_splitmix64(unsigned long long *state) {
    unsigned long long z = (*state += TS_SPLITMIX64_STEP);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* A uniform double in [0, 1) from the stream. */
static inline double ts_uniform(unsigned long long *state) { return (double)(ts_splitmix64(state) >> 11) * 0x1.0p-53; }
/* The state a stream started at `state` reaches after k draws: the stream is a counter, so its k-th value can
 * be computed without the k before it (inputs filled by several threads, equal to one thread's). */
static inline unsigned long long ts_splitmix64_skip(unsigned long long state, unsigned long long k) {
    return state + k * TS_SPLITMIX64_STEP;
}

/* fn(ctx, begin, end) over [0, n) in contiguous parts, one per thread (the online processors, each part at
 * least min_part long), returning when all are done; one part runs on the calling thread. Element-wise
 * passes over large float64 arrays use TS_PARALLEL_MIN_PART: below a million elements a thread is not worth
 * starting. */
#define TS_PARALLEL_MIN_PART (1 << 20)
void ts_parallel_ranges(long long n, long long min_part, void (*fn)(void *ctx, long long begin, long long end),
                        void *ctx);

/* FNV-1a over n bytes, continuing from h (start with TS_FNV_OFFSET): content hashes for banners and caches. */
#define TS_FNV_OFFSET 0xcbf29ce484222325ull
static inline unsigned long long ts_fnv1a(unsigned long long h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

_Noreturn void ts_assert_fail(const char *expr, const char *file, int line);
#define TS_ASSERT(e) ((e) ? (void)0 : ts_assert_fail(#e, __FILE__, __LINE__))

/* Makes room for one more element in a (ptr, len, cap) array. */
#define TS_GROW(ptr, len, cap)                                                                        \
    do {                                                                                              \
        if ((len) >= (cap)) {                                                                         \
            (cap) = (cap) ? 2 * (cap) : 8;                                                            \
            (ptr) = ts_xrealloc((ptr), (size_t)(cap) * sizeof *(ptr));                                \
        }                                                                                             \
    } while (0)

#endif
