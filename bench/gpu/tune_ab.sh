#!/usr/bin/env bash
# tune_ab.sh — two tsopt builds tuned on the same graphs in one call on the GPU machine, alternating A, B, A, B
# (ROUNDS rounds), so that every candidate kernel of each side is validated and timed beside the other's under
# the same clocks; then each round's per-kernel table (bench/kernel_table.py: configuration, predicted and
# measured µs). For a template or emitter change measured kernel by kernel, not only the chosen plan.
#
# On the development machine, per side: a tsopt binary at DIR/build/tsopt with its own rules/, templates/ and
# costmodel/ in DIR (tsopt reads them beside its build folder; `git archive REV rules templates costmodel`), and a
# prepared compile cache (TSOPT_CACHE=CACHE TSOPT=DIR/build/tsopt PREPARE=1 TOP=.. ONLY=.. bash bench/tune_all.sh).
# Carry both binaries' folders and caches, then on the GPU machine:
#   A_TSOPT=build/tsopt A_CACHE=build/tc-a B_TSOPT=build/pairs/build/tsopt B_CACHE=build/tc-b \
#   ONLY=gemm_gelu,linear_bf16 OUT=$OUT/ab bash bench/gpu/tune_ab.sh
# Environment: GRAPHS_DIR (bench/graphs), ONLY (every graph there when empty), TOP (2; the same as prepared),
# ROUNDS (2), TUNE_TIMEOUT (100 s a graph), BUDGET_S (no new step after this many seconds; default none).
# Writes OUT/<side><round>/ (tune_all's records and logs), OUT/tables/<side><round>.txt, OUT/tables/ab<round>.txt
# (bench/kernel_table.py --compare: each kernel on both sides, printed last) and OUT/ab.tgz (all of it, rewritten
# after every step, so that a call cut short still returns what ran).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:?OUT: the folder for the results}
: "${A_TSOPT:?}" "${A_CACHE:?}" "${B_TSOPT:?}" "${B_CACHE:?}"
mkdir -p "$out/tables"
start=$SECONDS
status=0
for round in $(seq 1 "${ROUNDS:-2}"); do
    for side in A B; do
        if [ -n "${BUDGET_S:-}" ] && [ $((SECONDS - start)) -ge "$BUDGET_S" ]; then
            echo "tune_ab: ${side}${round} skipped (budget of ${BUDGET_S}s spent)"; status=1; continue
        fi
        bin_var=${side}_TSOPT cache_var=${side}_CACHE
        echo "== ${side}${round}: ${!bin_var} (cache ${!cache_var})"
        TSOPT=${!bin_var} TSOPT_CACHE=${!cache_var} OUT="$out/$side$round" LIST=bench TOP=${TOP:-2} \
            GRAPHS_DIR=${GRAPHS_DIR:-bench/graphs} ONLY=${ONLY:-} TUNE_TIMEOUT=${TUNE_TIMEOUT:-100} \
            bash bench/tune_all.sh > "$out/tables/$side$round.log" 2>&1 || status=1
        grep -E '^(== |tune_all:)' "$out/tables/$side$round.log"
        python3 bench/kernel_table.py "$out/$side$round"/tune/*.json > "$out/tables/$side$round.txt" 2>&1 || status=1
        tar czf "$out/ab.tgz" -C "$out" tables $(cd "$out" && ls -d [AB][0-9]*/tune 2>/dev/null)
    done
done
for round in $(seq 1 "${ROUNDS:-2}"); do   # last: each round's kernels side by side (B/A < 1: B faster)
    [ -d "$out/A$round/tune" ] && [ -d "$out/B$round/tune" ] || continue
    python3 bench/kernel_table.py --compare "$out/A$round/tune" "$out/B$round/tune" > "$out/tables/ab$round.txt"
    echo "== round $round, measured us (A, B, B/A)"; cat "$out/tables/ab$round.txt"
done
tar czf "$out/ab.tgz" -C "$out" tables $(cd "$out" && ls -d [AB][0-9]*/tune 2>/dev/null)
exit $status
