#!/usr/bin/env bash
# session35_check.sh — the GPU check of session thirty-five's unmeasured changes (bench/NOTES.md: vector products as
# skinny GEMMs, few long rows over clusters in passes, the Frobenius sums, the deep small GEMM's split-K variant):
# row_test built against this tree's templates and HEAD~'s side by side (the new cases {16, 1048576}, {1, 4194304},
# {100, 200003} for every row functor), then bench/h200.sh over the probes the changes moved, with their anchors, and
# decoder_prefill re-validated.
# Usage (here, no GPU): PREPARE=1 [OLD_REV=<rev with the old templates>] bash bench/gpu/session35_check.sh
#   — fills build/tc-all, builds build/ab/row_test_{new,old} and packs build/carry.tar.xz (bench/gpu/carry.sh);
# then (device, carry build/carry.tar.xz and build/pg): bash bench/gpu/session35_check.sh  (MINI=1: row_test and five
# probes' candidates only, for a short call)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
probes="attention_pooling vector_matmul linear_vector_silu lm_head_vector_softmax token_gate_scores vector_swiglu_mlp
  matvec_column_operand bmm_one_row_f32 linear_one_token_softmax layernorm_chw_f32 groupnorm_f32 sum_one_row
  frobenius_norm_f32 matmul_large_k"
if [ "${PREPARE:-0}" = 1 ]; then
  rm -rf build/pg && mkdir -p build/pg build/ab/tpl_old || exit 1
  for p in $probes; do cp "bench/probes/$p.yaml" build/pg/ || exit 1; done
  cp bench/heldout/matmul_div_sum_scale.yaml build/pg/
  for f in $(git ls-files templates); do git show "${OLD_REV:-55e81d7}:$f" > "build/ab/tpl_old/$(basename "$f")"; done
  arch=-gencode=arch=compute_90a,code=sm_90a
  nvcc -O3 -std=c++17 $arch -I templates bench/gpu/row_test.cu -o build/ab/row_test_new || exit 1
  nvcc -O3 -std=c++17 $arch -I build/ab/tpl_old bench/gpu/row_test.cu -o build/ab/row_test_old || exit 1
  out=$(mktemp -d)
  GRAPHS_DIR=build/pg TSOPT_CACHE=build/tc-all PREPARE=1 TOP=4 OUT="$out" bash bench/tune_all.sh > "$out/prep.log" 2>&1 || exit 1
  build/tsopt tune --build-only --top 1 --cache build/tc-all bench/graphs/decoder_prefill.yaml > "$out/tune/prefill.build.log" 2>&1 || exit 1
  CACHE=build/tc-all TAR=build/carry.tar.xz LOGS="$out/tune/*.build.log" EXTRA="build/ab/row_test_new build/ab/row_test_old" \
    bash bench/gpu/carry.sh
  exit $?
fi
OUT=${OUT:-build/session35}
mkdir -p "$OUT"
tar xJf build/carry.tar.xz && rm -rf build/tune-cache && mv build/tc-all build/tune-cache || exit 1
rt() { timeout "$2" "build/ab/row_test_$1" > "$OUT/row_$1.log" 2>&1; echo "row_test $1 rc=$?"; grep -E "1048576|4194304|200003|cases valid|FAILED" "$OUT/row_$1.log" | tail -30; }
rt new 120
if [ "${MINI:-0}" = 1 ]; then  # a short call: the candidates of five probes validated and timed, no anchors
  for g in attention_pooling vector_matmul layernorm_chw_f32 matmul_large_k frobenius_norm_f32; do
    timeout 45 build/tsopt tune --top 2 --cache build/tune-cache --record "$OUT/$g.json" "build/pg/$g.yaml" > "$OUT/$g.log" 2>&1
    echo "== $g rc=$?"; sed -n '/^rank/,$p' "$OUT/$g.log" | head -6
  done
  exit 0
fi
GRAPHS_DIR=build/pg OUT=$OUT/a TOP=4 SWEEP=0 BENCH_AUTOTUNE=0 BUDGET_S=${BUDGET_S:-220} bash bench/h200.sh > "$OUT/a.log" 2>&1
echo "h200.sh rc=$?"
grep -E "^graph .* on |^rank|^[0-9]+ +[a-z]|chosen" "$OUT/a.log" | head -80; tail -30 "$OUT/a.log"
timeout 120 build/tsopt tune --top 1 --cache build/tune-cache --record "$OUT/prefill.json" bench/graphs/decoder_prefill.yaml \
  > "$OUT/prefill.log" 2>&1; echo "prefill rc=$?"; sed -n '/^rank/,$p' "$OUT/prefill.log" | head -5
rt old 100
