#!/usr/bin/env bash
# rowstat.sh — row statistics of A published by the wgmma GEMM's grid (gemm_sm90.cuh), on the GPU machine:
# the template test's `rowstat` set (each config validated, then timed beside cuBLAS; the RMSNorm shapes in the
# form reading a row kernel's scales, "flashnorm", and in the publishing form, "stats"; the path without a free
# grid counter last), the whole template test untimed (`quick`), then bench/h200.sh over graphs whose plans fold
# row statistics, every candidate's kernels listed (bench/kernel_table.py).
#   here:    make build/tsopt; nvcc ... bench/gpu/gemm_sm90_test.cu -o build/gpu/gemm_sm90_test (make gpu-build);
#            TSOPT_CACHE=build/tc-P PREPARE=1 TOP=4 GRAPHS_DIR=<graphs> bash bench/tune_all.sh
#   device:  TC=build/tc-P GRAPHS_DIR=<graphs> OUT=$OUT bash bench/gpu/rowstat.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/rowstat-out}
mkdir -p "$out"
timeout 150 build/gpu/gemm_sm90_test rowstat > "$out/rowstat.log" 2>&1
echo "gemm_sm90_test rowstat: exit $?" >> "$out/rowstat.log"
grep -E "PASS|FAIL|exit" "$out/rowstat.log" | sed -E 's/  +/ /g' | cut -c1-220
# a run that ends without its summary line (run 159: exit 1 after "batched NK rowstat no counter") shows its last lines
grep -q "config(s) failed" "$out/rowstat.log" || { echo "-- no summary line; the log ends:"; tail -n 6 "$out/rowstat.log"; }
timeout 240 build/gpu/gemm_sm90_test quick > "$out/quick.log" 2>&1
echo "gemm_sm90_test quick: exit $? ($(grep -c ' PASS' "$out/quick.log") configs passed, $(grep -c ' FAIL' "$out/quick.log") failed)" | tee -a "$out/quick.log"
grep " FAIL" "$out/quick.log" | head -5
if [ -n "${TC:-}" ]; then
    rm -rf build/tune-cache && mv "$TC" build/tune-cache
    OUT=$out/n PACK=0 TOP=${TOP:-4} SWEEP=0 BENCH_AUTOTUNE=0 BUDGET_S=${BUDGET_S:-200} bash bench/h200.sh > "$out/n.log" 2>&1
    grep -A8 "side by side" "$out/n.log"
    python3 bench/kernel_table.py "$out/n/tune"
fi
