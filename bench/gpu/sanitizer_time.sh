#!/usr/bin/env bash
# sanitizer_time.sh — how long one slice of a template test takes plain and under each compute-sanitizer tool
# (initcheck of gemm_test / gemm_sm90_test never finished inside robust.sh's budget: this says where the
# time goes). Runs the slices side by side, each under a time limit, and prints one line per run.
# Usage (GPU machine, build/gpu carried from bench/robust_build.sh):
#   bash bench/gpu/sanitizer_time.sh [TEST] [PART] [LIMIT_S]    (defaults gemm_sm90_test 0/64 90)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
t=${1:-gemm_sm90_test} part=${2:-0/64} limit=${3:-90}
out=${OUT:-build/sanitizer-time}
mkdir -p "$out"
cs=compute-sanitizer
command -v $cs > /dev/null || cs=/usr/local/cuda/bin/compute-sanitizer
run() {  # NAME CMD...
  local name=$1
  shift
  local t0=$(date +%s%N)
  timeout "$limit" "$@" > "$out/$name.log" 2>&1
  local rc=$?
  printf '%-28s rc %-4s %6d s  %s configs  last: %s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000000 ))" \
    "$(grep -c "relL2" "$out/$name.log")" "$(tail -n 1 "$out/$name.log" | cut -c1-90)"
}
run plain build/gpu/$t quick $part &
run memcheck $cs --tool memcheck build/gpu/$t quick $part &
run initcheck $cs --tool initcheck build/gpu/$t quick $part &
run initcheck-exclude-nvjet $cs --tool initcheck --kernel-name-exclude kns=nvjet build/gpu/$t quick $part &
wait
