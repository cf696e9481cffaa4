#!/usr/bin/env bash
# robust.sh — the GPU robustness suite, one command on the H200 (issue 13), with build/tsopt, build/gpu and
# build/robust carried from `bash bench/robust_build.sh` on the development machine:
#   1. `tsopt tune` fault isolation: rmsnorm's candidates with a planted trapping kernel (best predicted)
#      and a planted hanging one (third): both must be reported run-failed (fault, hang killed by the
#      watchdog) and the remaining valid candidate validated, timed and emitted;
#   2. bench/robust.py: compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over every generated
#      header's C ABI and every template test, then misaligned operands, 4 threads x 4 streams, special
#      values, fully masked rows, determinism and size limits (see its docstring);
#   and prints the table last. Budget-aware: BUDGET_S (default 545) for the whole command; what does not
#   fit is reported as skipped. Logs in $OUT (default build/robust/out). JOBS (default 14): sanitizer runs at
#   once. SHARD=K/N runs the K-th of N parts of robust.py's cases (step 1 only in part 0), for a suite
#   larger than one call of the GPU machine. SELECT=REGEX reruns only the matching sanitizer runs and cases
#   (robust.py --select), SKIP_TUNE=1 leaves out step 1.
# Exit status: 0 when nothing was found (no sanitizer report, wrong answer or crash) and tune isolated both
# planted candidates; 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
budget=${BUDGET_S:-545}
out=${OUT:-build/robust/out}
mkdir -p "$out"
for f in build/tsopt build/gpu/cases.txt build/robust/abi_driver build/robust/planted.env; do
  [ -e "$f" ] || { echo "robust.sh: $f is missing: run bash bench/robust_build.sh on the development machine and carry build/"; exit 1; }
done
[ -x /usr/local/cuda/bin/nvcc ] && export TSOPT_REAL_NVCC=/usr/local/cuda/bin/nvcc
export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/gpu.txt"
status=0
shard=${SHARD:-0/1}
tune_ok=1
run_tune=0
[ "${shard%%/*}" = 0 ] && [ -z "${SKIP_TUNE:-}" ] && run_tune=1
if [ $run_tune = 1 ]; then
echo "== 1. tsopt tune with a planted trapping and a planted hanging candidate"
set -a; . build/robust/planted.env; set +a
timeout 180 build/tsopt tune --top 3 --watchdog 30 --nvcc tests/tune/trap_nvcc.sh --cache build/robust/tune-cache \
  --record "$out/tune-record.json" -o "$out/tuned" bench/graphs/rmsnorm.yaml > "$out/tune.log" 2>&1
tune_rc=$?
cat "$out/tune.log"
tune_ok=1
grep -qF "$TSOPT_TRAP_PLAN" "$out/tune.log" && grep -q "run-failed (failed while validating: .*(CUresult 7" "$out/tune.log" || tune_ok=0
grep -q "run-failed (hung while validating: killed by the 30 s watchdog)" "$out/tune.log" || tune_ok=0
grep -q "^     ^ chosen" "$out/tune.log" && grep -q "^wrote " "$out/tune.log" || tune_ok=0
[ $tune_rc -eq 0 ] || tune_ok=0
[ $tune_ok -eq 1 ] || status=1
fi

echo "== 2. bench/robust.py (part $shard)"
left=$(( budget - ($(date +%s) - start) - 15 ))
PYTHONUNBUFFERED=1 timeout $(( left + 10 )) python3 bench/robust.py --budget "$left" --jobs "${JOBS:-14}" --shard "$shard" --out "$out" ${SELECT:+--select "$SELECT"} > "$out/robust.log" 2>&1
robust_rc=$?
[ $robust_rc -eq 0 ] || status=1
echo "bench/robust.py: exit $robust_rc, every check in $out/robust.log"
grep -q "^== robustness table" "$out/robust.log" || tail -n 20 "$out/robust.log"

echo
[ $run_tune = 1 ] && echo "== tune fault isolation: $([ $tune_ok -eq 1 ] && echo "ok: the trapping ('$TSOPT_TRAP_PLAN') and hanging ('$TSOPT_HANG_PLAN') candidates were run-failed, the valid one chosen and emitted" || echo "FAILED (exit $tune_rc; see $out/tune.log)")"
sed -n '/^== robustness table/,$p' "$out/robust.log"
echo "robust.sh: $(( $(date +%s) - start )) s, exit $status"
exit $status
