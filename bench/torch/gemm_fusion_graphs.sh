#!/usr/bin/env bash
# gemm_fusion_graphs.sh — GEMM-fusion graphs in the style of KernelBench level 2, exported from the modules of
# bench/torch/gemm_fusion_modules.py the way a user would (`python3 -m tsopt_torch.export`, fp16; the BatchNorm
# ones in training mode where the name says so): a Linear 4096 → 4096 over 2048 rows followed by activations,
# norms, reductions and pooling. None of them is a bench file; bench/NOTES.md run 155 timed sixteen of them.
# Usage: bash bench/torch/gemm_fusion_graphs.sh [OUTDIR]   (default build/gemm-fusion; needs python3 with torch)
#   DTYPE=float32 M=128 I=1024 O=512 bash ... exports them at other sizes or in KernelBench's own fp32 (defaults:
#   float16, 2048 rows, 4096 → 4096)
# Then, on the GPU: GRAPHS_DIR=OUTDIR TOP=2 SWEEP=0 BENCH_AUTOTUNE=0 bash bench/h200.sh (tuned, validated against
# graphref, timed against PyTorch eager and torch.compile of the same graph).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/gemm-fusion}
mkdir -p "$out"
m=bench/torch/gemm_fusion_modules.py
export_graph() {  # CLASS ARGS...
  local cls=$1 name train=()
  shift
  name=$(echo "$cls" | sed -E 's/([a-z0-9])([A-Z])/\1_\2/g' | tr A-Z a-z)
  case $cls in *Train*) train=(--train) ;; esac
  local args=()
  for a in "$@"; do args+=(--args "$a"); done
  python3 -W ignore -m tsopt_torch.export "$m:$cls" "${args[@]}" --init "{\"i\": ${I:-4096}, \"o\": ${O:-4096}}" --axis "o=${O:-4096}" --dtype "${DTYPE:-float16}" "${train[@]}" \
    --name "$name" -o "$out/$name.yaml" 2> "$out/$name.log" ||
    { cat "$out/$name.log"; echo "gemm_fusion_graphs: exporting $name failed"; exit 1; }
  rm -f "$out/$name.log"
  echo "wrote $out/$name.yaml"
}
x=x=m:${M:-2048},i:${I:-4096}
for cls in GemmSubMulRelu GemmSumMaxMeanLse GemmScaleResidualClampLseMish GemmSwishBiasGroupNorm GemmSigmoidGemmLse \
    GemmGroupNormLeakyReluSum GemmMeanSoftmax GemmMinSub GemmGroupNormMinBias GemmMaxSubGelu GemmSwishDivClampTanhClamp \
    GemmBatchNormTrainScaleSoftmax GemmAddSwishTanhGeluHardtanh GemmBatchNormEvalBiasDivSwish GemmAvgPoolGeluScaleMax \
    GemmGeluSoftmax GemmDivGelu GemmBatchNormTrainGeluGroupNormMeanRelu; do
  export_graph "$cls" "$x"
done
export_graph GemmInstanceNormResidualMul "$x" "y=m:${M:-2048},o:${O:-4096}"
