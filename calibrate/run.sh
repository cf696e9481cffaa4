#!/usr/bin/env bash
# calibrate/run.sh — the calibration run on the GPU machine (the H200): fits the cost model's coefficients
# with `tsopt calibrate` and prints the calibrated file last.
#
#   here:   make                      (build/tsopt: libyaml and GSL static; CUDA, NVRTC, CUPTI loaded at run time)
#   there:  bash calibrate/run.sh     (with build/tsopt carried; writes under $OUT, default build/calibrate-out)
#
# Writes $OUT/h200.yaml (the calibrated cost model), $OUT/calibrate.log (progress, notes, the fit table),
# $OUT/nvidia-smi.txt (the card's state before the run). If the run with CUPTI fails (CUPTI missing is not
# a failure: tsopt falls back to CUDA events by itself), it runs once more with --events and says so.
# Takes well under a minute of GPU time. To adopt the result: copy $OUT/h200.yaml to costmodel/h200.yaml.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-build/calibrate-out}
BIN=${TSOPT:-build/tsopt}
mkdir -p "$OUT"
if [ ! -x "$BIN" ]; then
    echo "calibrate/run.sh: $BIN is missing: run make on the development machine and carry build/tsopt" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
    --format=csv > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi not available" > "$OUT/nvidia-smi.txt"
cat "$OUT/nvidia-smi.txt"

t0=$(date +%s)
timeout 300 "$BIN" calibrate -o "$OUT/h200.yaml" > "$OUT/calibrate.log" 2>&1
rc=$?
cat "$OUT/calibrate.log"
if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ]; then
    echo "== calibrate exited $rc; running again with CUDA events (--events)"
    timeout 300 "$BIN" calibrate --events -o "$OUT/h200.yaml" > "$OUT/calibrate-events.log" 2>&1
    rc=$?
    cat "$OUT/calibrate-events.log"
fi
echo "== calibrate exit code $rc, $(( $(date +%s) - t0 )) s wall"
[ "$rc" -eq 0 ] || exit "$rc"

echo "== coefficients: costmodel/h200.yaml (datasheet) -> calibrated"
for k in launch_s dram_bytes_per_s tensor_flops_per_s fma_flops_per_s sfu_ops_per_s sms l2_bytes; do
    old=$(awk -v k="  $k:" 'index($0, k) == 1 {print $2; exit}' costmodel/h200.yaml)
    new=$(awk -v k="  $k:" 'index($0, k) == 1 {print $2; exit}' "$OUT/h200.yaml")
    printf '  %-20s %12s -> %s\n' "$k" "$old" "$new"
done
echo "== $OUT/h200.yaml"
cat "$OUT/h200.yaml"
