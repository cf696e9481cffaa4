#!/usr/bin/env bash
# stack.sh — a stack of N Llama-3-8B decoder layers (bench/make_stack.py, default 32) on the H200: `tsopt tune`
# of the whole stack (validated against the float64 reference at a small t, timed at t=1024), then
# bench/stack.py times the chosen header (C ABI and CUDA-graph helper) against PyTorch eager, torch.compile
# and max-autotune of one layer called per layer, validating every output against graphref; table last.
# Here (no GPU), to build the candidates first:   PREPARE=1 bash bench/gpu/stack.sh
#   (the float64 reference of 32 layers needs ~56 GB for its inputs: it is made on the GPU machine)
# On the GPU machine (carry build/tsopt and the build/tune-cache folders the prepare step printed):
#   OUT=/tmp/stack bash bench/gpu/stack.sh       results: $OUT/stack.json, $OUT/stack.tar.gz (record, logs)
# Environment: OUT (build/stack-out), LAYERS (32), TOP (1: plans tuned), TUNE_TIMEOUT (420 s),
# STACK_ARGS (extra bench/stack.py options, e.g. --no-autotune).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/stack-out}
n=${LAYERS:-32}
graphs=build/stack-graphs
name=decoder_stack_$n
mkdir -p "$graphs" "$out"
python3 bench/make_stack.py "$n" "$graphs/$name.yaml" || exit 1
status=0
OUT=$out ONLY=$name GRAPHS_DIR=$graphs TOP=${TOP:-1} LIST=bench TUNE_TIMEOUT=${TUNE_TIMEOUT:-420} \
  PREPARE=${PREPARE:-0} bash bench/tune_all.sh || status=1
if [ "${PREPARE:-0}" = 1 ]; then
  cat "$out/tune/$name.build.log"
  exit $status
fi
if [ -f "$out/tune/$name.json" ]; then
  # shellcheck disable=SC2086
  python3 bench/stack.py --record "$out/tune/$name.json" --graph "$graphs/$name.yaml" --out "$out" ${STACK_ARGS:-} || status=1
fi
tar -czf "$out/stack.tar.gz" -C "$out" tune 2>/dev/null
exit $status
