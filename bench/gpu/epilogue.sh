#!/usr/bin/env bash
# epilogue.sh — the GEMM epilogue's cost term measured (bench/NOTES.md run 141): the probes
# bench/probes/epilogue_*.yaml (one 4096×4096 GEMM over K = 512, a bias, then an activation or a chain of them)
# tuned with their top TOP plans (the single GEMM and the GEMM + map forms side by side, configurations included),
# every candidate validated against float64; then each kernel's table and bench/epilogue_fit.py (each epilogue's
# cost over the bias-only GEMM in the same configuration against the model's, and epilogue_efficiency fitted).
# First bench/gpu/math_test.cu: the errors of the special functions those epilogues use (templates/tile.cuh).
# Prepare the cache on the development machine first:
#   TSOPT_CACHE=build/tc-ep PREPARE=1 TOP=3 PARALLEL=2 GRAPHS_DIR=bench/probes ONLY=<the probes> bash bench/tune_all.sh
# Environment: OUT (required), TSOPT (build/tsopt), TSOPT_CACHE (build/tc-ep), TOP (3).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:?OUT: the folder for the results}
mkdir -p "$out"
nvcc -O3 -std=c++17 -arch=sm_90a -I templates bench/gpu/math_test.cu -o "$out/math_test" && "$out/math_test" | tee "$out/math.txt"
math=${PIPESTATUS[0]}
probes=$(ls bench/probes/epilogue_*.yaml | xargs -n1 basename | sed 's/\.yaml$//' | paste -sd,)
TSOPT=${TSOPT:-build/tsopt} TSOPT_CACHE=${TSOPT_CACHE:-build/tc-ep} LIST=bench TOP=${TOP:-3} GRAPHS_DIR=bench/probes \
    ONLY=$probes OUT="$out/probes" bash bench/tune_all.sh > "$out/probes.log" 2>&1
status=$?
[ "$math" -eq 0 ] || status=1
grep -E '^(== |tune_all:)' "$out/probes.log"
python3 bench/kernel_table.py "$out"/probes/tune/*.json > "$out/kernels.txt" 2>&1
python3 bench/epilogue_fit.py "$out"/probes/tune/*.json | tee "$out/fit.txt"
exit $status
