#!/usr/bin/env bash
# map_ab.sh — map.cuh's builds side by side on the GPU: `row_test map` (the elementwise maps alone, validated
# against float64, beside a device copy) for each binary given, then one table of every case's time (µs) per
# binary, the first binary's validity last. Usage: bash bench/gpu/map_ab.sh BIN... (OUT=folder for the logs).
# Build each with nvcc as the Makefile's gpu-build builds row_test, from the map.cuh to compare (-I its folder first).
set -uo pipefail
out=${OUT:-build/gpu/out}
mkdir -p "$out"
[ $# -ge 1 ] || { echo "usage: bash bench/gpu/map_ab.sh BIN..."; exit 2; }
logs=()
for b in "$@"; do
  log="$out/map_$(basename "$b").log"
  timeout 120 "$b" map > "$log" 2>&1
  echo "$(basename "$b"): rc $? $(grep -E '^ok:|FAILED' "$log" | tail -1)"
  logs+=("$log")
done
# the table rows of row_test: "case  shape  time  GB/s  % peak  valid" after the line starting "case "
printf '%-40s %-18s' case shape; for b in "$@"; do printf ' %12.12s' "$(basename "$b")"; done; printf '  valid\n'
awk -v n=$# '
  FNR == 1 { f++ }
  /^case / { on[f] = 1; next }
  on[f] && NF >= 6 && $NF ~ /^(ok|FAILED)$/ {
    key = substr($0, 1, 59)
    if (!(key in seen)) { seen[key] = ++k; keys[k] = key }
    t[f, key] = $(NF-3); if (f == 1) ok[key] = $NF
  }
  END { for (i = 1; i <= k; i++) { key = keys[i]; printf "%s", key
          for (j = 1; j <= n; j++) printf " %12s", ((j, key) in t) ? t[j, key] : "-"
          printf "  %s\n", ok[key] } }' "${logs[@]}"
