// map_walk.cu — checks templates/map.cuh's transposed walk on the host (no GPU): for index spaces of two to
// five dimensions (sizes 1, odd, a multiple of the tile and past it), every walk dimension and both span
// widths, the spans that walk_span hands the 256 threads of every tile (walk_tiles of them) cover each
// output element exactly once, each span's output offset is the row-major offset of its idx[], and no span
// reaches past the innermost dimension. The kernel runs these same two functions (make check-gpu-tests).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "map.cuh"

template <int VEC, int W> struct Probe {  // a functor's compile-time face; its body is never called here
    static constexpr int kVec = VEC, kWalk = W;
    __device__ void operator()(const int64_t *, int, float (&y)[VEC]) const {
        for (int i = 0; i < VEC; i++) y[i] = 0.f;
    }
};

static int failures = 0;

template <int VEC, int W, typename I> static void check_space(const std::vector<int64_t> &size) {
    tsm::MapParams<__half, Probe<VEC, W>> p{};
    p.ndim = (int)size.size();
    p.numel = 1;
    for (int d = p.ndim - 1; d >= 0; d--) p.size[d] = size[d], p.out_stride[d] = p.numel, p.numel *= size[d];
    std::vector<int> seen((size_t)p.numel, 0);
    const int64_t inner = size.back();
    const I tiles = tsm::walk_tiles<W, I>(p);
    bool bad = false;
    for (I t = 0; t < tiles && !bad; t++)
        for (int th = 0; th < 256 && !bad; th++) {
            int64_t idx[tsm::kMaxDims], off = -1;
            if (!tsm::walk_span<W>(p, t, th, idx, off)) continue;
            int64_t expect = 0;
            for (int d = 0; d + 1 < p.ndim; d++) {
                if (idx[d] < 0 || idx[d] >= size[d]) bad = true;
                expect += idx[d] * p.out_stride[d];
            }
            const int64_t col = idx[p.ndim - 1];
            if (bad || off != expect || col < 0 || col >= inner || col % VEC) { bad = true; break; }
            for (int64_t j = col; j < col + VEC && j < inner; j++) seen[(size_t)(off + j)]++;
        }
    for (size_t i = 0; i < seen.size() && !bad; i++) bad = seen[i] != 1;
    if (bad) {
        failures++;
        printf("FAIL: VEC %d, walk dim %d, %d-byte index, space", VEC, W, (int)sizeof(I));
        for (int64_t s : size) printf(" %lld", (long long)s);
        printf("\n");
    }
}

template <int VEC, int W> static void check_all(int ndim) {
    const int64_t sizes[] = {1, 3, 16, 17, 40};
    const int64_t inners[] = {1, 7, 8, 128, 129, 300};
    std::vector<int64_t> size((size_t)ndim);
    int n = 0;
    for (int64_t inner : inners)
        for (int64_t a : sizes)
            for (int64_t b : sizes) {
                for (int d = 0; d < ndim - 1; d++) size[(size_t)d] = d == W ? a : (d % 2 ? b : (b % 5) + 1);
                size[(size_t)ndim - 1] = inner;
                check_space<VEC, W, uint32_t>(size);
                check_space<VEC, W, int64_t>(size);
                n++;
            }
    printf("  %d-d spaces, walk dim %d, kVec %d: %d spaces\n", ndim, W, VEC, n);
}

int main() {
    check_all<8, 0>(2);
    check_all<4, 0>(2);
    check_all<8, 0>(3);
    check_all<8, 1>(3);
    check_all<4, 1>(3);
    check_all<8, 0>(4);
    check_all<8, 2>(4);
    check_all<8, 1>(5);
    check_all<4, 3>(5);
    if (failures) {
        printf("map.cuh transposed walk: %d spaces FAILED\n", failures);
        return 1;
    }
    printf("map.cuh transposed walk covers every output element once: ok\n");
    return 0;
}
