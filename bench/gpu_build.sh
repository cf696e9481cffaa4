#!/usr/bin/env bash
# gpu_build.sh — builds, on the development machine (no GPU needed), everything bench/gpu_check.py runs on
# the GPU machine: a header per case (the bench sizes, and odd sizes that no tile divides) compiled by
# tsopt, and one shared library per header exposing its C ABI entry. Writes build/gpu/cases.txt.
# EXTRA_CASES: more lines of the case table below; CASES: a case table used instead of it.
# Usage: bench/gpu_build.sh            (then carry build/gpu to the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/.."
# a build/tsopt that runs is used as it is (on the GPU machine, carried: it has no libyaml to rebuild)
build/tsopt --version > /dev/null 2>&1 || make -s build/tsopt
out=build/gpu
rm -rf "$out"
mkdir -p "$out"
arch=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a"}

# variant graph static-dims runtime-dims
cases=$(cat <<'CASES'
bench attention - -
bench attention_causal - -
bench attention_gqa - -
bench matmul - -
bench swiglu - -
bench rmsnorm - -
bench rmsnorm_mlp - -
bench decoder_layer - t=1024
odd attention t_q=1000,t_kv=1000 -
odd attention_causal t_q=1000,t_kv=1000 -
odd attention_gqa t_q=77,t_kv=77 -
odd matmul m=77,d=1000,n=1000 -
odd swiglu m=77,d=1000,n=1000 -
odd rmsnorm m=77,d=1000,n=1000 -
odd rmsnorm_mlp m=77,d=1000,n=1000 -
odd decoder_layer - t=77
CASES
)
[ -n "${CASES:-}" ] && cases=$CASES
# more cases, same format (bench/robust_build.sh adds primes, sizes of 1, and t_q > t_kv)
[ -n "${EXTRA_CASES:-}" ] && cases=$(printf '%s\n%s' "$cases" "$EXTRA_CASES")

jobs=()
while read -r variant graph static runtime; do
  dir="$out/$variant"
  mkdir -p "$dir"
  dims=()
  [ "$static" != - ] && dims=(--dims "$static")
  build/tsopt compile "${dims[@]}" -o "$dir" "bench/graphs/$graph.yaml" > "$dir/$graph.compile.txt"
  upper=$(echo "$graph" | tr '[:lower:]' '[:upper:]')
  printf '#define TSOPT_%s_IMPLEMENTATION\n#include "%s.cuh"\n' "$upper" "$graph" > "$dir/$graph.cu"
  jobs+=("nvcc -O3 -std=c++17 $arch -Xcompiler -fPIC -shared -I$dir -o $dir/lib$graph.so $dir/$graph.cu")
  echo "$variant $graph bench/graphs/$graph.yaml $static $runtime $dir/$graph.cuh $dir/lib$graph.so" >> "$out/cases.txt"
done <<< "$cases"
printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -I{} sh -c '{}'
echo "built $(wc -l < "$out/cases.txt") cases in $out"
