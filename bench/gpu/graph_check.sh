#!/usr/bin/env bash
# graph_check.sh — the CUDA-graph helper on the GPU (H200, CUDA 13, with build/tsopt carried): builds
# bench/graphs/decoder_layer.yaml's header and examples/graph (a C program through the C ABI), runs
# decoder_layer_run and decoder_layer_graph_run on the same random inputs at t = 16, 128 and 1024,
# checks that their outputs are bit-for-bit identical (first graph call, which runs and captures, and a
# replay), and times both per call (CUDA events, 50 back-to-back calls). About a minute: most of it is
# nvcc. Logs in $OUT (default build/gpu/graph); the table is printed last. Exit status 0 only when every
# output agrees.
#
#   bash bench/gpu/graph_check.sh [T...]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-build/gpu/graph}
mkdir -p "$out"
out=$(cd "$out" && pwd)  # absolute: make runs in examples/
[ -x build/tsopt ] || { echo "graph_check: build/tsopt is missing (carry it from the development machine)"; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"
if ! timeout 300 make -s -C examples TSOPT="$PWD/build/tsopt" OUT="$out" "$out/graph" > "$out/build.log" 2>&1; then
  tail -n 30 "$out/build.log"
  echo "graph_check: the build failed (log: $out/build.log)"
  exit 1
fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16 128 1024)
timeout 120 "$out/graph" "${sizes[@]}" 2>&1 | tee "$out/graph.log"
exit "${PIPESTATUS[0]}"
