#!/usr/bin/env bash
# column_pdl_ab.sh — where bilinear's ~67 us over its kernels' own times went (bench/NOTES.md run 165): its column
# kernel with one thread a column (row.cuh kShortColumnSpans raised to 32, in a copy of templates/ at build/tpl32) against
# the ladder (templates/), each timed by `tsopt tune` with programmatic dependent launch and without (TSOPT_NO_PDL=1).
# If the gap is PDL's (a dependent kernel's CTAs resident while the GEMM before it still places its own), the two
# NO_PDL rows show it gone.
# Usage (here, no GPU): PREPARE=1 bash bench/gpu/column_pdl_ab.sh   — builds build/tpl32 and fills build/tc-all;
#   then pack: CACHE=build/tc-all TAR=build/carry.tar.xz LOGS="$OUT/*.build.log" bash bench/gpu/carry.sh
# (device): tar xJf build/carry.tar.xz && rm -rf build/tune-cache && mv build/tc-all build/tune-cache &&
#   CACHE=build/tune-cache OUT=$OUT bash bench/gpu/column_pdl_ab.sh      (carry build/tpl32 too)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
graph=${GRAPH:-bench/probes/bilinear.yaml}
cache=${CACHE:-build/tc-all}
out=${OUT:-build/column-pdl}
mkdir -p "$out"
if [ "${PREPARE:-0}" = 1 ]; then
  rm -rf build/tpl32 && cp -r templates build/tpl32 &&
    sed -i 's/inline constexpr int64_t kShortColumnSpans = 8;/inline constexpr int64_t kShortColumnSpans = 32;/' build/tpl32/row.cuh
  grep -q "kShortColumnSpans = 32" build/tpl32/row.cuh || { echo "column_pdl_ab: kShortColumnSpans not found in row.cuh"; exit 1; }
  build/tsopt tune --build-only --top 2 --cache "$cache" "$graph" > "$out/ladder.build.log" 2>&1 || exit 1
  build/tsopt tune --build-only --top 2 --cache "$cache" --templates build/tpl32 "$graph" > "$out/thread.build.log" 2>&1 || exit 1
  tail -n 6 "$out"/*.build.log
  exit 0
fi
status=0
for v in ladder ladder-nopdl thread thread-nopdl; do
  args=(); [[ $v == thread* ]] && args=(--templates build/tpl32)
  nopdl=""; [[ $v == *nopdl ]] && nopdl=1
  TSOPT_NO_PDL=$nopdl timeout 60 build/tsopt tune --top 2 --cache "$cache" "${args[@]}" --record "$out/$v.json" "$graph" \
    > "$out/$v.log" 2>&1 || status=1
  echo "== $v"; sed -n '/^rank/,$p' "$out/$v.log" | head -n 7
done
exit $status
