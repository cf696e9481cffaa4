// span.cuh — VEC consecutive elements along one axis ("a span"), loaded into and stored from fp32
// registers: 16-byte vector accesses where the axis has unit stride and the address is aligned, with PAIRS
// 4-byte pairs of 2-byte elements where it is only 4-byte aligned (rows of an even length not a multiple of
// 8: 2500 halves), one scalar load broadcast where the stride is 0, a gather otherwise. PAIRS is a
// compile-time choice (a functor's kPairs, set by the emitter only where an operand's rows can be off 16
// bytes): the extra path cost aligned row kernels 10-15% (bench/NOTES.md run 121). The elementwise (map.cuh) and
// row-fused (row.cuh) kernels read and write their operands through these; they are not kernels.
// Exact for any stride, size and alignment: only positions [0, n) of a span are read or written. span_head gives
// the positions before a row's first aligned span (rows of an odd length), which row.cuh and map.cuh take apart.
// Namespace tsv; depends on tile.cuh (element conversions).
#pragma once
#include <type_traits>

#include "tile.cuh"

namespace tsv {

// Bytes moved by one vector instruction for a span of VEC elements of T (at most 16).
template <typename T, int VEC> __host__ __device__ constexpr int piece_bytes() {
    return (int)sizeof(T) * VEC >= 16 ? 16 : (int)sizeof(T) * VEC;
}

template <int BYTES> struct vec_word;
template <> struct vec_word<16> { using type = uint4; };
template <> struct vec_word<8> { using type = uint2; };
template <> struct vec_word<4> { using type = uint32_t; };
template <> struct vec_word<2> { using type = uint16_t; };

// Whether the span at q can be moved with vector instructions: unit stride, all VEC positions valid,
// and q aligned to the vector width.
template <typename T, int VEC>
__device__ __forceinline__ bool vector_ok(const T *q, int64_t stride, int n) {
    constexpr int B = piece_bytes<T, VEC>();
    return B > (int)sizeof(T) && stride == 1 && n == VEC && (reinterpret_cast<uintptr_t>(q) % B) == 0;
}

// Whether the span at q can be moved in 4-byte pairs (2-byte elements): unit stride, all VEC positions
// valid, q 4-byte aligned.
template <typename T, int VEC>
__device__ __forceinline__ bool pair_ok(const T *q, int64_t stride, int n) {
    return sizeof(T) == 2 && VEC % 2 == 0 && stride == 1 && n == VEC && (reinterpret_cast<uintptr_t>(q) % 4) == 0;
}

// Functor Fn's kPairs where it declares one, else false (map.cuh's stores follow the functor's loads).
template <class Fn, class = void> struct PairsOf { static constexpr bool value = false; };
template <class Fn> struct PairsOf<Fn, std::void_t<decltype(Fn::kPairs)>> { static constexpr bool value = Fn::kPairs; };
template <class Fn> constexpr bool kPairsOf = PairsOf<Fn>::value;

// v[j] ← p[(k0 + j)·stride] for j < n (0 beyond n). p is the element at position 0 of the axis.
template <int VEC, bool PAIRS = false, typename T>
__device__ __forceinline__ void load_span(float (&v)[VEC], const T *p, int64_t stride, int64_t k0, int n) {
    if (stride == 0) { // a broadcast operand: one load
        const float s = n > 0 ? tst::elem<T>::to_float(p[0]) : 0.f;
#pragma unroll
        for (int j = 0; j < VEC; j++) v[j] = s;
        return;
    }
    const T *q = p + k0 * stride;
    constexpr int B = piece_bytes<T, VEC>(), PER = B / (int)sizeof(T);
    using W = typename vec_word<B>::type;
    if (vector_ok<T, VEC>(q, stride, n)) {
#pragma unroll
        for (int c = 0; c < VEC / PER; c++) {
            W w = *reinterpret_cast<const W *>(q + c * PER);
            const T *e = reinterpret_cast<const T *>(&w);
#pragma unroll
            for (int j = 0; j < PER; j++) v[c * PER + j] = tst::elem<T>::to_float(e[j]);
        }
        return;
    }
    if constexpr (PAIRS && sizeof(T) == 2 && VEC % 2 == 0) {
        if (pair_ok<T, VEC>(q, stride, n)) {
#pragma unroll
            for (int c = 0; c < VEC / 2; c++) {
                const uint32_t w = *reinterpret_cast<const uint32_t *>(q + 2 * c);
                const T *e = reinterpret_cast<const T *>(&w);
                v[2 * c] = tst::elem<T>::to_float(e[0]), v[2 * c + 1] = tst::elem<T>::to_float(e[1]);
            }
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < VEC; j++) v[j] = j < n ? tst::elem<T>::to_float(q[j * stride]) : 0.f;
}

// p[(k0 + j)·stride] ← v[j] for j < n, rounded to T.
template <int VEC, bool PAIRS = false, typename T>
__device__ __forceinline__ void store_span(T *p, int64_t stride, int64_t k0, int n, const float (&v)[VEC]) {
    T *q = p + k0 * stride;
    constexpr int B = piece_bytes<T, VEC>(), PER = B / (int)sizeof(T);
    using W = typename vec_word<B>::type;
    if (vector_ok<T, VEC>(q, stride, n)) {
#pragma unroll
        for (int c = 0; c < VEC / PER; c++) {
            W w;
            T *e = reinterpret_cast<T *>(&w);
#pragma unroll
            for (int j = 0; j < PER; j++) e[j] = tst::elem<T>::from_float(v[c * PER + j]);
            *reinterpret_cast<W *>(q + c * PER) = w;
        }
        return;
    }
    if constexpr (PAIRS && sizeof(T) == 2 && VEC % 2 == 0) {
        if (pair_ok<T, VEC>(q, stride, n)) {
#pragma unroll
            for (int c = 0; c < VEC / 2; c++) {
                uint32_t w;
                T *e = reinterpret_cast<T *>(&w);
                e[0] = tst::elem<T>::from_float(v[2 * c]), e[1] = tst::elem<T>::from_float(v[2 * c + 1]);
                *reinterpret_cast<uint32_t *>(q + 2 * c) = w;
            }
            return;
        }
    }
#pragma unroll
    for (int j = 0; j < VEC; j++)
        if (j < n) q[j * stride] = tst::elem<T>::from_float(v[j]);
}

// Functor Fn's kHead where it declares one (rows that can start off 16 bytes, whose head row.cuh and map.cuh take
// apart), else false.
template <class Fn, class = void> struct HeadOf { static constexpr bool value = false; };
template <class Fn> struct HeadOf<Fn, std::void_t<decltype(Fn::kHead)>> { static constexpr bool value = Fn::kHead; };
template <class Fn> constexpr bool kHeadOf = HeadOf<Fn>::value;

// Rows of fewer spans take no head: its extra step outweighs what it saves (bench/NOTES.md run 153: 4096 rows of
// 20, 10% slower with it).
constexpr int kHeadMinSpans = 64;

// Positions before the first element from q on whose address suits vector moves of VEC elements of T (0..VEC-1):
// a row's head (row.cuh row_head), so that the spans after it are aligned. 0 where the stride is not 1.
template <int VEC, typename T> __device__ __forceinline__ int span_head(const T *q, int64_t stride) {
    constexpr int B = piece_bytes<T, VEC>();
    const uintptr_t a = reinterpret_cast<uintptr_t>(q);
    if (stride != 1 || B <= (int)sizeof(T) || a % sizeof(T) != 0) return 0;
    return (int)((B - a % B) % B / sizeof(T));
}

// Positions of the span starting at k0 that lie inside an axis of length len (0..VEC).
template <int VEC> __device__ __forceinline__ int span_len(int64_t k0, int64_t len) {
    const int64_t r = len - k0;
    return r <= 0 ? 0 : (r >= VEC ? VEC : (int)r);
}

}  // namespace tsv
