#!/usr/bin/env bash
# llama_build.sh — on the development machine (torch and nvcc, no GPU): exports tests/torch/modules.py's
# LlamaLayer at Llama-3-8B sizes (fp16, tokens t dynamic, typical 1024) with tsopt_torch, compiles it and the
# hand-written bench/graphs/decoder_layer.yaml with tsopt (printing both predicted plans), and builds a shared
# library of each header's C ABI into build/gpu_torch — what bench/torch/llama_check.py runs on the H200.
# Usage: bash bench/torch/llama_build.sh     (then carry build/gpu_torch to the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s build/tsopt
out=build/gpu_torch
rm -rf "$out" && mkdir -p "$out"
arch=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a"}
python3 -W ignore bench/torch/llama_export.py "$out" 2>&1 | grep -v "^W[0-9]" || true
test -s "$out/llama_layer.yaml"
for g in "$out/llama_layer.yaml" bench/graphs/decoder_layer.yaml; do
  n=$(basename "$g" .yaml)
  build/tsopt compile -o "$out" "$g" | sed -n '1,3p' | cut -c1-120
  printf '#define TSOPT_%s_IMPLEMENTATION\n#include "%s.cuh"\n' "$(echo "$n" | tr a-z A-Z)" "$n" > "$out/$n.cu"
done
printf '%s\n' llama_layer decoder_layer | xargs -P 2 -I{} \
  nvcc -O3 -std=c++17 $arch -Xcompiler -fPIC -shared -I"$out" -o "$out/lib{}.so" "$out/{}.cu"
echo "built $out/libllama_layer.so and $out/libdecoder_layer.so; on the H200: python3 bench/torch/llama_check.py"
