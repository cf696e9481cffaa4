#!/usr/bin/env bash
# gemm_cluster.sh — the wgmma GEMM's fixed cost per tile and its cluster form, on the H200: builds
# bench/gpu/gemm_sm90_test.cu and runs its "cluster" set (validation + timing beside cuBLAS): one CTA per tile
# (CM=1) against clusters of 2 with TMA multicast of B (CM=2) on the bench matmul, 4096³ and the gemm_gelu
# shape, and a K sweep on one wave of tiles (1024×4096, K = 256 … 8192: time = fixed cost + K · main-loop
# rate, the intercept being the prologue, pipeline fill and epilogue). About a minute. Usage, from the
# repository root of the GPU machine:
#   bash bench/gpu/gemm_cluster.sh        (OUT=build/gemm-cluster)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/gemm-cluster}
mkdir -p "$out"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates bench/gpu/gemm_sm90_test.cu -lcublas \
    -o "$out/gemm_sm90_test" > "$out/build.log" 2>&1 || { cat "$out/build.log"; exit 1; }
timeout 120 "$out/gemm_sm90_test" cluster 2>&1 | tee "$out/run.log" | cut -c1-60,120-400
