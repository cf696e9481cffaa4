#!/usr/bin/env bash
# tune_all.sh — `tsopt tune` on every bench graph (the decoder layer at t=1024 tokens; records in
# $OUT/tune/<graph>.json, tables in $OUT/tune/<graph>.log, tuned headers in $OUT/tuned/<graph>/), and with LIST=sweep
# on the extra sizes of bench/sweep.txt instead (records in $OUT/sweep/: more template instances for the
# cost model's efficiency fit, `tsopt calibrate --from-tune`). The compile cache is build/tune-cache:
# prepare it without a GPU with PREPARE=1 (tsopt tune --build-only for the same list), then carry build/tsopt
# and build/tune-cache to the GPU machine; a library missing there is built with its nvcc.
# Environment: OUT (build/h200-out), LIST (bench | sweep), TOP (4), TUNE_TIMEOUT (100 s per graph),
# TUNE_BUDGET_S (no new graph after this many seconds; default none), TSOPT (build/tsopt), PARALLEL (with
# PREPARE=1: graphs built at once, default 1), ONLY (LIST=bench: a comma-separated list of graph names),
# GRAPHS_DIR (LIST=bench: the folder of graphs, default bench/graphs), DIMS (LIST=bench: the sizes every listed
# graph is tuned at, e.g. b=1 for a decode step, instead of the default above), TUNE_ARGS (more arguments for
# every `tsopt tune`, e.g. --allow-cublas; the same with PREPARE=1 and on the GPU machine).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-build/h200-out}
list_name=${LIST:-bench}
top=${TOP:-4}
tsopt=${TSOPT:-build/tsopt}
cache=${TSOPT_CACHE:-build/tune-cache}
timeout_s=${TUNE_TIMEOUT:-100}
budget=${TUNE_BUDGET_S:-0}
start=$SECONDS

case "$list_name" in
  bench) dir=$out/tune tuned=$out/tuned
         list=$(for g in "${GRAPHS_DIR:-bench/graphs}"/*.yaml; do
                  n=$(basename "$g" .yaml)
                  [ -z "${ONLY:-}" ] || [[ ",$ONLY," == *",$n,"* ]] || continue
                  # a dynamic token axis t is tuned at 1024; other dynamic axes (a decode step's m) at
                  # their `typical` size, which tune uses when --dims does not name them
                  if [ -n "${DIMS:-}" ]; then echo "$n $g $DIMS"
                  elif grep -Eq "^ +t: *\{ *dynamic: *true" "$g"; then echo "$n $g t=1024"; else echo "$n $g -"; fi
                done) ;;
  sweep) dir=$out/sweep tuned=$out/sweep/tuned; list=$(grep -v '^#' bench/sweep.txt | grep .) ;;
  *) echo "tune_all: LIST is bench or sweep, not '$list_name'"; exit 2 ;;
esac
mkdir -p "$dir" "$tuned"
[ -x "$tsopt" ] || make -s build/tsopt || { echo "tune_all: cannot build $tsopt"; exit 1; }

status=0
while read -r name graph dims; do
  args=(--top "$top" --cache "$cache")
  [ -n "${TUNE_ARGS:-}" ] && read -r -a extra <<< "$TUNE_ARGS" && args+=("${extra[@]}")
  [ "$dims" != - ] && args+=(--dims "$dims")
  if [ "${PREPARE:-0}" = 1 ]; then
    # PARALLEL graphs at once (each builds its candidates with all processors: on the 16-core GPU machine
    # PARALLEL=4 keeps ~16 compilers busy)
    ( "$tsopt" tune --build-only "${args[@]}" "$graph" > "$dir/$name.build.log" 2>&1 ||
        { echo "tune_all: $name failed to build (see $dir/$name.build.log)"; exit 1; } ) &
    while [ "$(jobs -rp | wc -l)" -ge "${PARALLEL:-1}" ]; do wait -n || status=1; done
    continue
  fi
  if [ "$budget" -gt 0 ] && [ $((SECONDS - start)) -ge "$budget" ]; then
    echo "== $name: skipped (the tuning budget of ${budget}s is spent)"
    status=1
    continue
  fi
  echo "== $name ($graph${dims/#-/}${dims:+ })"
  t0=$SECONDS
  timeout "$timeout_s" "$tsopt" tune "${args[@]}" --record "$dir/$name.json" -o "$tuned/$name" "$graph" > "$dir/$name.log" 2>&1
  rc=$?
  sed -n '/^graph /,$p' "$dir/$name.log"
  if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "tune_all: $name timed out after ${timeout_s}s" || echo "tune_all: $name exited $rc:"
    tail -n 5 "$dir/$name.log"
    status=1
  fi
  echo "   ($((SECONDS - t0)) s)"
done <<< "$list"
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || status=1; done
exit $status
