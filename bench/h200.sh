#!/usr/bin/env bash
# h200.sh — the one command of the H200 benchmark: builds tsopt if needed, tunes every bench graph
# (`tsopt tune`, one record each, docs/tune-records.md), then bench/bench.py times our headers side by side
# with PyTorch eager, torch.compile (default, max-autotune-no-cudagraphs), SDPA flash/cuDNN and cuBLAS in one
# process, checks every output, prints the cost-model accuracy report and the table last, and writes
# $OUT/h200.json and $OUT/h200.png.
#
# Usage, from the repository root of the GPU machine (carry build/tsopt and build/tune-cache, made on the
# development machine by `make build/tsopt` and `tsopt tune --build-only`):
#   bash bench/h200.sh [--commit-results] [extra bench.py options...]
# Environment (defaults):
#   OUT=build/h200-out   output folder; what comes back from the device machine is $OUT/h200.json,
#                        h200.png, h200.log and tune.tar.gz (records, tune logs, tuned headers: the tune/ and
#                        tuned/ folders are packed and removed, since at most 8 files come back; PACK=0 keeps them)
#   TOP=4                candidates tuned per graph (tsopt tune --top)
#   TSOPT=build/tsopt    the tsopt binary (built with make if missing); GRAPHS_DIR=bench/graphs the graphs
#   AT=t=1024            run-time sizes of dynamic axes for bench.py (bench/tune_all.sh tunes at t=1024)
#   SWEEP=1              also tune bench/sweep.txt's sizes into $OUT/sweep (records for the efficiency fit)
#   BUDGET_S=520         the whole command's wall-clock budget (the device allows 9 minutes): bench.py is given
#                        the deadline, and a compile that would not fit is reported "skipped (reason)"
#   TUNE_TIMEOUT=100     seconds per `tsopt tune`; TUNE_BUDGET_S=240: no new tune starts after this many seconds
#   BENCH_COMPILE=0      skip every torch.compile anchor; BENCH_AUTOTUNE=0 skip only max-autotune
#   COMPILE_BUDGET_S=60  per graph, torch.compile default; AUTOTUNE_BUDGET_S=90 per graph, max-autotune
#   ONLY=a,b             tune and bench only these graphs (names in $GRAPHS_DIR)
#   COMMIT_RESULTS=1     as --commit-results: copy h200.json and h200.png to bench/results/ (on the GPU
#                        machine the tree does not come back, so by default they stay in $OUT)
# Exit status: 0 when every graph was tuned and validated; 1 otherwise (the report is written either way).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
start=$(date +%s)
out=${OUT:-build/h200-out}
commit=${COMMIT_RESULTS:-0}
bench_args=()
for a in "$@"; do
  case "$a" in
    --commit-results) commit=1 ;;
    *) bench_args+=("$a") ;;
  esac
done
TOP=${TOP:-4}
GRAPHS_DIR=${GRAPHS_DIR:-bench/graphs}
AT=${AT:-t=1024}
BUDGET_S=${BUDGET_S:-520}
TUNE_TIMEOUT=${TUNE_TIMEOUT:-100}
TUNE_BUDGET_S=${TUNE_BUDGET_S:-240}
mkdir -p "$out"
rm -rf "$out/tune" "$out/tuned" "$out/sweep" "$out/tune.tar.gz"
mkdir -p "$out/tune" "$out/tuned"
exec > >(tee "$out/h200.log") 2>&1
elapsed() { echo $(( $(date +%s) - start )); }

echo "== h200.sh $(date -u +%Y-%m-%dT%H:%M:%SZ), OUT=$out, TOP=$TOP, AT=$AT, budget ${BUDGET_S}s"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.used --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
status=0

# (a) tsopt
tsopt=${TSOPT:-build/tsopt}
if [ -x "$tsopt" ] && "$tsopt" --version > /dev/null 2>&1; then
  echo "== using $tsopt ($("$tsopt" --version 2>&1 | head -n 1))"
else
  echo "== $tsopt missing or not runnable here: make build/tsopt"
  if make -s build/tsopt > "$out/make.log" 2>&1 && "$tsopt" --version > /dev/null 2>&1; then
    echo "   built $tsopt"
    rm -f "$out/make.log"
  else
    echo "ERROR: make build/tsopt FAILED on this machine (last lines of make.log below): no graph can be tuned;"
    echo "       build it on the development machine (make build/tsopt) and carry build/tsopt. The anchors are still timed."
    tail -n 15 "$out/make.log"
    status=1
  fi
fi
if [ -d build/tune-cache ]; then
  echo "== tune cache: build/tune-cache ($(find build/tune-cache -name '*.so' 2>/dev/null | wc -l) libraries; tune falls back to nvcc for missing ones)"
else
  echo "== no build/tune-cache: tsopt tune compiles every candidate with nvcc (slow; make it with tsopt tune --build-only)"
fi

# (a') the compile cache: candidates missing from build/tune-cache built first, several graphs at once
#      (PREPARE_PARALLEL, default 4; 0 skips this and leaves the builds to tune, one graph at a time)
if [ $status -eq 0 ] && [ "${PREPARE_PARALLEL:-4}" -gt 0 ]; then
  echo "== building the candidates' libraries (${PREPARE_PARALLEL:-4} graphs at once)"
  GRAPHS_DIR=$GRAPHS_DIR OUT=$out TOP=$TOP TSOPT=$tsopt PREPARE=1 PARALLEL=${PREPARE_PARALLEL:-4} LIST=bench bash bench/tune_all.sh ||
    echo "   (some candidates failed to build: tune reports them)"
  echo "   built at $(elapsed)s"
fi

# (b) tune every bench graph, then (SWEEP=1, the default) the extra sizes of bench/sweep.txt for the
#     efficiency fit, within the tuning budget
if [ $status -eq 0 ]; then
  GRAPHS_DIR=$GRAPHS_DIR OUT=$out TOP=$TOP TSOPT=$tsopt TUNE_TIMEOUT=$TUNE_TIMEOUT LIST=bench bash bench/tune_all.sh || status=1
  if [ "${SWEEP:-1}" = 1 ]; then
    OUT=$out TOP=$TOP TSOPT=$tsopt TUNE_TIMEOUT=$TUNE_TIMEOUT TUNE_BUDGET_S=$(( TUNE_BUDGET_S > $(elapsed) ? TUNE_BUDGET_S - $(elapsed) : 1 )) \
      LIST=sweep bash bench/tune_all.sh || echo "   (the sweep is incomplete: the fit uses what there is)"
  fi
fi
echo "== tuning done at $(elapsed)s"

# (c) the side-by-side benchmark, within what is left of the budget
left=$(( BUDGET_S - $(elapsed) ))
deadline=$(( start + BUDGET_S - 10 ))
echo "== bench.py (${left}s left)"
PYTHONUNBUFFERED=1 BENCH_DEADLINE=$deadline timeout -s TERM -k 10 $(( left > 20 ? left - 5 : 15 )) \
  python3 bench/bench.py --records "$out/tune" --headers "$out/tuned" --out "$out" --at "$AT" \
  --graphs-dir "$GRAPHS_DIR" ${ONLY:+--graphs "$ONLY"} "${bench_args[@]}"
rc=$?
[ $rc -eq 0 ] || { echo "bench.py exit status $rc"; status=1; }

# (d) results
if [ "$commit" = 1 ]; then
  for f in h200.json h200.png; do
    [ -f "$out/$f" ] && cp "$out/$f" bench/results/ && echo "copied $out/$f to bench/results/"
  done
fi
if [ "${PACK:-1}" = 1 ]; then
  packed=(tune tuned)
  [ -d "$out/sweep" ] && packed+=(sweep)
  [ -f "$out/make.log" ] && packed+=(make.log)
  tar -czf "$out/tune.tar.gz" -C "$out" "${packed[@]}" && rm -rf "$out/tune" "$out/tuned" "$out/sweep"
  echo "records, tune logs and tuned headers: $out/tune.tar.gz"
fi
echo "== done in $(elapsed)s, status $status; results: $out/h200.json $out/h200.png"
exit $status
