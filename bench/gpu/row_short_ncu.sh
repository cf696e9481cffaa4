#!/usr/bin/env bash
# row_short_ncu.sh — why a per-row mean over short rows (run 160's global average pool: 32768 rows of 784 halves)
# reads at 1.56 TB/s on an H100 while a copy moves 2.74 TB/s (bench/NOTES.md run 161): row_test's `short` cases
# timed, then ncu over row_test's MeanRows kernels and over torch.compile's reduction of the same shapes
# (bench/gpu/torch_row_ncu.py), with the speed-of-light, occupancy, memory and warp-state sections side by side.
# Usage, on the GPU machine with build/gpu/row_test carried (make gpu-build, or nvcc as the Makefile does):
#   bash bench/gpu/row_short_ncu.sh [ROW_TEST]     OUT=folder (default build/gpu/out); prints a short summary last
set -uo pipefail
bin=${1:-build/gpu/row_test}; out=${OUT:-build/gpu/out}
mkdir -p "$out"
timeout 150 "$bin" short > "$out/short.log" 2>&1; echo "row_test short: rc $? $(grep -E '^ok:|FAILED' "$out/short.log" | tail -1)"
sections=(--section SpeedOfLight --section Occupancy --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats)
# every MeanRows launch (validation, warm-up and timed runs of each launch shape), not the L2 flushes between them
timeout 240 ncu --kernel-name-base demangled -k regex:MeanRows "${sections[@]}" "$bin" short > "$out/ncu_ours.log" 2>&1
echo "ncu row_test: rc $?"
timeout 200 ncu -k regex:triton "${sections[@]}" python3 bench/gpu/torch_row_ncu.py mean:32768:784 mean:65536:196 \
  > "$out/ncu_torch.log" 2>&1
echo "ncu torch.compile: rc $?"
grep -E "torch.compile row mean" "$out/ncu_torch.log"
grep -E "^mean \(per row\)" "$out/short.log"
for f in ours torch; do
  echo "== $f: first kernels' duration, DRAM throughput, achieved occupancy, registers, top stall"
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Achieved Occupancy|Registers Per Thread|Block Size|Grid Size|Stall Long Scoreboard" \
    "$out/ncu_$f.log" | head -40
done
