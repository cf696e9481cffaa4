#!/usr/bin/env bash
# robust_build.sh — builds, on the development machine (no GPU), everything bench/robust.sh runs on the
# H200: `make gpu-build` (a header and its C ABI library per case, the template test programs) with extra
# cases (primes, sizes of 1, causal attention with t_q > t_kv for fully masked rows; odd sizes of every
# later bench graph: GEMM epilogues with interior and edge tiles, the attention family, decode m = 1 and
# 77), the sanitizer driver
# build/robust/abi_driver, and the planted candidates of the tune fault-isolation check: rmsnorm's plans
# built with tests/tune/trap_nvcc.sh into build/robust/tune-cache (the best predicted plan traps, the third
# hangs), its float64 reference cached beside them. Writes build/robust/planted.env (the planted names).
# Usage: bash bench/robust_build.sh   (then carry build/tsopt, build/gpu and build/robust)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${ARCH:-"-gencode=arch=compute_90a,code=sm_90a"}
# a build/tsopt that runs is used as it is (on the GPU machine, carried: it has no libyaml to rebuild)
build/tsopt --version > /dev/null 2>&1 || make -s build/tsopt
export EXTRA_CASES='prime matmul m=13,d=997,n=509 -
prime swiglu m=13,d=997,n=509 -
prime rmsnorm m=13,d=997,n=509 -
prime attention t_q=131,t_kv=257 -
prime attention_causal t_q=300,t_kv=100 -
prime decoder_layer - t=13
one matmul m=1,d=1000,n=1000 -
one rmsnorm m=1,d=1000,n=1000 -
one attention t_q=1,t_kv=1 -
one decoder_layer - t=1
odd gemm_gelu m=300,d=1000,n=520 -
prime gemm_gelu m=13,d=997,n=509 -
odd lora m=300,d=1000,n=520 -
odd layernorm_mlp m=300,d=1000,f=520,e=1000 -
odd residual_rmsnorm t=77,d=1000 -
prime residual_rmsnorm t=13,d=997 -
odd gemm_logsumexp m=300,d=1000,n=1000 -
odd gemm_mish b=300,k=1000,f=520 -
odd gemm_groupnorm m=77 -
odd gemm_layernorm m=300,k=1000,n=520 -
odd gemm_batchnorm b=300,k=1000,f=520 -
odd linear_bf16 b=3,t=77,d=1000,n=520 -
odd attention_batch_gqa t_q=300,t_kv=300 -
odd attention_mask t_q=300,t_kv=257 -
odd qknorm_attention t_q=1000,t_kv=1000 -
odd attention_d64 t_q=1000,t_kv=1000 -
odd attention_d256 t_q=1000,t_kv=1000 -
odd attention_bf16 t_q=1000,t_kv=1000 -
odd attention_cross t_q=77,t_kv=1000 -
odd attention_softcap t_q=1000,t_kv=1000 -
one swiglu_decode - m=1
odd swiglu_decode - m=77
one decoder_decode - b=1,s=1
odd decoder_decode - b=3,s=77'
make -s -o build/tsopt gpu-build NVCC_ARCH="$arch"
mkdir -p build/robust
nvcc -O2 -std=c++17 -Werror all-warnings $arch bench/robust/abi_driver.cu -o build/robust/abi_driver -ldl

# the planted candidates: names by predicted rank (the table `tsopt compile` prints)
plans=$(build/tsopt compile -o build/robust/compile bench/graphs/rmsnorm.yaml |
  sed -n 's/^\([0-9]\+\) \+\(.*[^ ]\) \+[0-9]\+ \+[0-9.]\+ ms .*/\1\t\2/p')
trap_plan=$(printf '%s\n' "$plans" | awk -F'\t' '$1 == 1 {print $2}')
hang_plan=$(printf '%s\n' "$plans" | awk -F'\t' '$1 == 3 {print $2}')
[ -n "$trap_plan" ] && [ -n "$hang_plan" ] || { echo "robust_build: cannot read rmsnorm's plan names"; exit 1; }
printf 'TSOPT_TRAP_PLAN=%q\nTSOPT_HANG_PLAN=%q\n' "$trap_plan" "$hang_plan" > build/robust/planted.env
rm -rf build/robust/tune-cache
TSOPT_TRAP_PLAN=$trap_plan TSOPT_HANG_PLAN=$hang_plan build/tsopt tune --build-only --top 3 \
  --nvcc tests/tune/trap_nvcc.sh --cache build/robust/tune-cache bench/graphs/rmsnorm.yaml
echo "robust_build: planted trap in '$trap_plan', hang in '$hang_plan'; carry build/tsopt build/gpu build/robust"
du -sh build/tsopt build/gpu build/robust
