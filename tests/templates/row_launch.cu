// row_launch.cu — checks templates/row.cuh's launch choices on the host (no GPU): a functor that declares its
// rows' length (kLen, as the emitter does for a static row axis) has launch_row compile only the launches rows
// of that length take — row_spans_in true for exactly one group size of the short-row ladder, the one with as
// many lanes as spans (1, 2 and 4 lanes for a group norm's 8, 16 and 32 channels: 8 lanes had left most idle,
// bench/NOTES.md run 155) — and row_params_ok refuses a row length other than the declared one; a functor
// without kLen may take every launch.
#include <cstdio>

#include "row.cuh"

template <int64_t LEN> struct Probe {  // a functor's compile-time face; its members are never called here
    static constexpr int kVec = 8, kIn = 1, kStages = 1;
    static constexpr bool kPerRow = true, kPerRowOuts = false;
    static constexpr int64_t kLen = LEN;
};
struct AnyLength {
    static constexpr int kVec = 8, kIn = 1, kStages = 1;
    static constexpr bool kPerRow = true, kPerRowOuts = false;
};

static int failures = 0;
static void expect(bool ok, const char *what) {
    if (!ok) printf("FAILED: %s\n", what), failures++;
}

// The lanes a row of this functor takes among the short-row cases of launch_row (1, 2, 4, 8, 16, 32 spans),
// 0 where none or more than one case is compiled.
template <class Fn> static int short_row_lanes() {
    const int64_t hi[] = {1, 2, 4, 8, 16, 32};
    int64_t lo = 0;
    int lanes = 0, live = 0;
    for (int64_t h : hi) {
        if (tsw::row_spans_in<Fn>(lo, h)) lanes = (int)h, live++;
        lo = h;
    }
    return live == 1 ? lanes : 0;
}

int main() {
    expect(short_row_lanes<Probe<8>>() == 1, "8 positions: a lane a row");
    expect(short_row_lanes<Probe<16>>() == 2, "a group norm's 16 channels: 2 lanes");
    expect(short_row_lanes<Probe<12>>() == 2, "12 positions: 2 spans, 2 lanes");
    expect(short_row_lanes<Probe<32>>() == 4, "32 channels: 4 lanes");
    expect(short_row_lanes<Probe<64>>() == 8, "64 channels: 8 lanes");
    expect(short_row_lanes<Probe<100>>() == 16, "13 spans: 16 lanes");
    expect(short_row_lanes<Probe<4096>>() == 0, "a 4096-wide row takes none of them");
    expect(!tsw::row_spans_in<Probe<4096>>(0, 32) && tsw::row_spans_in<Probe<4096>>(256, 1024), "512 spans");
    /* launch_row_columns: rows of at most 8 spans down enough columns for a 512-column CTA an SM take a thread a
       column (run 165); fewer columns: the fewest threads that cover a row's spans */
    expect(tsw::short_column_cols<Probe<8>>(1 << 20, 8, 132) == tsw::kColumnThreads, "8 experts, 1M columns: a thread a column");
    expect(tsw::short_column_cols<Probe<12>>(3 << 20, 12, 132) == tsw::kColumnThreads, "12 heads, 3M columns: a thread a column");
    expect(tsw::short_column_cols<Probe<64>>(1 << 20, 64, 132) == tsw::kColumnThreads, "64 positions: a thread a column");
    expect(tsw::short_column_cols<Probe<72>>(1 << 20, 72, 132) == 0, "9 spans: the ladder");
    expect(tsw::short_column_cols<Probe<256>>(1 << 18, 256, 132) == 0, "32 spans: the ladder (run 165)");
    expect(tsw::short_column_cols<Probe<12>>(40000, 12, 132) == tsw::kColumnThreads / 2,
           "12 heads, 40000 columns (too few for 512 an SM): 2 spans, 2 threads a column");
    expect(tsw::short_column_cols<Probe<64>>(40000, 64, 132) == tsw::kColumnThreads / 8, "8 spans, 40000 columns: 8 threads a column");
    expect(tsw::short_column_cols<Probe<64>>(4096, 64, 132) == 0, "8 spans, 4096 columns: the ladder");
    expect(tsw::short_columns_compiled<Probe<8>>(1) && !tsw::short_columns_compiled<Probe<8>>(2), "8 positions: only the 1-thread launch");
    expect(tsw::short_columns_compiled<Probe<12>>(1) && tsw::short_columns_compiled<Probe<12>>(2) &&
           !tsw::short_columns_compiled<Probe<12>>(4), "12 positions: the 1- and 2-thread launches");
    expect(!tsw::short_columns_compiled<Probe<256>>(1), "256 positions: no short launch");
    expect(tsw::short_columns_compiled<AnyLength>(8), "no kLen: every short launch compiled");
    expect(tsw::short_column_cols<Probe<8>>(4096, 8, 132) == 0, "too few columns for every SM: the ladder");
    expect(tsw::short_column_cols<Probe<4096>>(1 << 20, 4096, 132) == 0, "a 4096-long column: the ladder");
    int any = 0;
    for (int64_t h = 1; h <= 32; h *= 2) any += tsw::row_spans_in<AnyLength>(h / 2, h);
    expect(any == 6, "no kLen: every case compiled");
    tsw::RowParams<Probe<16>> p{};
    p.rows = 1, p.len = 16;
    expect(tsw::row_params_ok(p), "the declared length");
    p.len = 24;
    expect(!tsw::row_params_ok(p), "another length refused");
    tsw::RowParams<AnyLength> q{};
    q.rows = 1, q.len = 24;
    expect(tsw::row_params_ok(q), "any length without kLen");
    if (failures) return 1;
    printf("row_launch: launch_row's cases by declared row length: ok\n");
    return 0;
}
