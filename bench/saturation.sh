#!/bin/sh
# saturation.sh — the saturation benchmark: builds tsopt, then prints one line per bench graph and for a
# generated 32-layer decoder stack: nodes, chunks, groups, saturation seconds, e-nodes and e-classes, as
# reported by `tsopt explain --stats FILE` (one line: `stats: nodes=N chunks=C groups=G seconds=S
# enodes=E eclasses=K`).
#
#   bench/saturation.sh [EXPLAIN-OPTION]...     e.g. bench/saturation.sh --iter-limit 8
#
# TSOPT=path uses another binary (still builds build/tsopt first); LAYERS=n changes the stack's depth.
# Exits 1 when any graph could not be measured (its line says why), after measuring the others.
set -eu
cd "$(dirname "$0")/.."
make -s
TSOPT=${TSOPT:-build/tsopt}
LAYERS=${LAYERS:-32}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
stack="$tmp/decoder_stack_$LAYERS.yaml"
python3 bench/make_stack.py "$LAYERS" "$stack"

# field KEY LINE: the value of KEY=value in a stats line.
field() { printf '%s\n' "$2" | sed -n "s/.*[ :]$1=\([^ ]*\).*/\1/p"; }

row() { printf '%-22s %7s %7s %7s %9s %9s %9s\n' "$@"; }

row graph nodes chunks groups seconds enodes eclasses
failed=0
for f in bench/graphs/*.yaml "$stack"; do
    name=$(basename "$f" .yaml)
    if out=$("$TSOPT" explain --stats "$@" "$f" 2>"$tmp/err") && line=$(printf '%s\n' "$out" | grep '^stats:'); then
        row "$name" "$(field nodes "$line")" "$(field chunks "$line")" "$(field groups "$line")" \
            "$(field seconds "$line")" "$(field enodes "$line")" "$(field eclasses "$line")"
    else
        printf '%-22s (no stats line: %s)\n' "$name" "$(head -n 1 "$tmp/err")"
        failed=1
    fi
done
exit "$failed"
