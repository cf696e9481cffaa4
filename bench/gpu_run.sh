#!/usr/bin/env bash
# gpu_run.sh — the one command to run on the GPU machine (with build/gpu carried from `make gpu-build`):
# the template test programs (and the decode sets of gemm_test and attention_sm90_test), then every
# generated header validated and timed by bench/gpu_check.py.
# Logs and results go to $OUT (or build/gpu/out); the summary table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/gpu/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
status=0
for t in gemm_test gemm_sm90_test gemm_row_parts_test gemm_f32_test attention_test attention_sm90_test row_test row_test_pairs math_test; do
  if [ -x build/gpu/$t ]; then
    echo "== $t"
    timeout 240 build/gpu/$t > "$out/$t.log" 2>&1; rc=$?
    tail -n 30 "$out/$t.log"
    [ $rc -eq 0 ] || { echo "$t exited $rc"; status=1; }
    case $t in  # the decode-size sets: skinny and split-K GEMMs, split-key decode attention
      gemm_test|attention_sm90_test)
        echo "== $t decode"
        timeout 240 build/gpu/$t decode > "$out/$t-decode.log" 2>&1; rc=$?
        tail -n 20 "$out/$t-decode.log"
        [ $rc -eq 0 ] || { echo "$t decode exited $rc"; status=1; } ;;
    esac
  fi
done
echo "== generated headers"
PYTHONUNBUFFERED=1 timeout 400 python3 bench/gpu_check.py --out "$out" "$@" 2>&1 | tee "$out/gpu_check.log" | tail -n 25
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
