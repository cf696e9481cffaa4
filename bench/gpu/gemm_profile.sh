#!/usr/bin/env bash
# gemm_profile.sh — where the wgmma GEMM's time goes against cuBLAS's, on the H200: (1) `gemm_sm90_test
# epilogue` (each large shape with its stores and with them skipped, kDiscard: the difference is what the
# stores cost), then (2) Nsight Compute's full set on our kernel and on cuBLAS's timed kernel at one shape
# (`gemm_sm90_test one M N K`), and a side-by-side of the lines that tell them apart. Build here (no GPU):
#   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates bench/gpu/gemm_sm90_test.cu -lcublas \
#        -o build/gpu/gemm_sm90_test
# then on the GPU machine (carry build/gpu/gemm_sm90_test):
#   OUT=build/gemm-profile SHAPE="4096 4096 4096" bash bench/gpu/gemm_profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/gemm-profile}
shape=${SHAPE:-4096 4096 4096}
mkdir -p "$out"
status=0
timeout 200 build/gpu/gemm_sm90_test epilogue > "$out/epilogue.log" 2>&1 || { echo "epilogue: exit $?"; status=1; }
# ours: its first launch (the validated one); cuBLAS: a timed launch (skipping the fp32 reference and warm-ups)
profile() {   # name filter skip
    timeout 200 ncu --clock-control none --set full --import-source no -k "regex:$2" -s "$3" -c 1 -o "$out/$1" \
        build/gpu/gemm_sm90_test one $shape > "$out/ncu-$1.log" 2>&1 || { echo "ncu $1: exit $?"; status=1; }
    ncu -i "$out/$1.ncu-rep" --page details > "$out/$1-details.txt" 2>&1
}
profile ours gemm_sm90_kernel 0
profile cublas nvjet 4
keys="Duration|SM Frequency|DRAM Throughput|Memory Throughput|L2 Hit Rate|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Executed Ipc Active|Registers Per|Block Size|Grid Size|Dynamic Shared|L1/TEX Hit"
for f in ours cublas; do
    echo "== $f: $(grep -m1 -E "^  [a-z_]" "$out/$f-details.txt" | cut -c1-110)"
    grep -E "$keys" "$out/$f-details.txt" | head -24
done
echo "== stores against no stores (ms; ours, cuBLAS)"
grep -E "store|discard" "$out/epilogue.log" | sed -E 's/ +relL2.*(PASS|FAIL)//; s/ +TFLOP.*//'
exit $status
