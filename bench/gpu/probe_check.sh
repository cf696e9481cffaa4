#!/usr/bin/env bash
# probe_check.sh — the GPU check of changes not yet measured (named session35_check.sh for run 168): row_test built
# against this tree's templates and OLD_REV's side by side (the row functors over every row shape it covers),
# gemm_f32_test (fp32 split-K beside the unsplit tiles and cuBLAS SGEMM), then bench/h200.sh over the probes the
# changes moved, with their anchors, and decoder_prefill re-validated.
# Usage (here, no GPU): PREPARE=1 [OLD_REV=<rev with the old templates>] [PROBES="<bench/probes names>"]
#   [HELDOUT="<bench/heldout names>"] [GRAPHS="<bench/graphs names>"] [ROW_TEST=0: no row_test] [PREFILL=0: no decoder_prefill] bash bench/gpu/probe_check.sh
#   — fills build/tc-all, builds build/ab/row_test_{new,old} and build/ab/gemm_f32_test and packs build/carry.tar.xz
# (bench/gpu/carry.sh); then (device, carry build/carry.tar.xz and build/pg): bash bench/gpu/probe_check.sh
# (MINI=1: row_test, gemm_f32_test and a few probes' candidates only, for a short call)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
probes=${PROBES:-"attention_pooling vector_matmul linear_vector_silu lm_head_vector_softmax token_gate_scores vector_swiglu_mlp
  matvec_column_operand bmm_one_row_f32 linear_one_token_softmax layernorm_chw_f32 groupnorm_f32 sum_one_row
  frobenius_norm_f32 matmul_large_k matmul_large_k_f32 f32_linear_small_gelu"}
if [ "${PREPARE:-0}" = 1 ]; then
  rm -rf build/pg && mkdir -p build/pg build/ab/tpl_old || exit 1
  for p in $probes; do cp "bench/probes/$p.yaml" build/pg/ || exit 1; done
  for h in ${HELDOUT-matmul_div_sum_scale}; do cp "bench/heldout/$h.yaml" build/pg/ || exit 1; done
  for g in ${GRAPHS-}; do cp "bench/graphs/$g.yaml" build/pg/ || exit 1; done
  arch=-gencode=arch=compute_90a,code=sm_90a
  extra=build/ab/gemm_f32_test
  if [ "${ROW_TEST:-1}" = 1 ]; then
    for f in $(git ls-files templates); do git show "${OLD_REV:-55e81d7}:$f" > "build/ab/tpl_old/$(basename "$f")"; done
    nvcc -O3 -std=c++17 $arch -I templates bench/gpu/row_test.cu -o build/ab/row_test_new || exit 1
    nvcc -O3 -std=c++17 $arch -I build/ab/tpl_old bench/gpu/row_test.cu -o build/ab/row_test_old || exit 1
    extra="$extra build/ab/row_test_new build/ab/row_test_old"
  fi
  nvcc -O3 -std=c++17 $arch -I templates bench/gpu/gemm_f32_test.cu -lcublas -lcuda -o build/ab/gemm_f32_test || exit 1
  out=$(mktemp -d)
  GRAPHS_DIR=build/pg TSOPT_CACHE=build/tc-all PREPARE=1 TOP=${TOP:-4} OUT="$out" bash bench/tune_all.sh > "$out/prep.log" 2>&1 || exit 1
  if [ "${PREFILL:-1}" = 1 ]; then
    touch build/pg/.prefill
    build/tsopt tune --build-only --top 1 --cache build/tc-all bench/graphs/decoder_prefill.yaml > "$out/tune/prefill.build.log" 2>&1 || exit 1
  fi
  CACHE=build/tc-all TAR=build/carry.tar.xz LOGS="$out/tune/*.build.log" EXTRA="$extra" \
    bash bench/gpu/carry.sh
  exit $?
fi
OUT=${OUT:-build/probe-check}
mkdir -p "$OUT"
tar xJf build/carry.tar.xz && rm -rf build/tune-cache && mv build/tc-all build/tune-cache || exit 1
rt() { [ -x "build/ab/row_test_$1" ] || return 0; timeout "$2" "build/ab/row_test_$1" > "$OUT/row_$1.log" 2>&1; echo "row_test $1 rc=$?"; grep -E "1048576|4194304|200003|cases valid|FAILED" "$OUT/row_$1.log" | tail -30; }
rt new 120
timeout 150 build/ab/gemm_f32_test > "$OUT/gemm_f32.log" 2>&1; echo "gemm_f32_test rc=$?"; grep -E "split|FAIL|passed" "$OUT/gemm_f32.log" | cut -c1-230
if [ "${MINI:-0}" = 1 ]; then  # a short call: the candidates of five probes validated and timed, no anchors
  for g in ${MINI_PROBES:-matmul_large_k_f32 f32_linear_small_gelu attention_pooling layernorm_chw_f32}; do
    timeout 45 build/tsopt tune --top 2 --cache build/tune-cache --record "$OUT/$g.json" "build/pg/$g.yaml" > "$OUT/$g.log" 2>&1
    echo "== $g rc=$?"; sed -n '/^rank/,$p' "$OUT/$g.log" | head -6
  done
  exit 0
fi
GRAPHS_DIR=build/pg OUT=$OUT/a TOP=${TOP:-4} SWEEP=0 BENCH_AUTOTUNE=0 BUDGET_S=${BUDGET_S:-220} bash bench/h200.sh > "$OUT/a.log" 2>&1
echo "h200.sh rc=$?"
grep -E "^graph .* on |^rank|^[0-9]+ +[a-z]|chosen" "$OUT/a.log" | head -80; tail -30 "$OUT/a.log"
if [ -f build/pg/.prefill ]; then
  timeout 120 build/tsopt tune --top 1 --cache build/tune-cache --record "$OUT/prefill.json" bench/graphs/decoder_prefill.yaml \
    > "$OUT/prefill.log" 2>&1; echo "prefill rc=$?"; sed -n '/^rank/,$p' "$OUT/prefill.log" | head -5
fi
rt old 100
