#!/usr/bin/env bash
# gemm_check.sh — the GEMM issue's check on the H200 (about 3 minutes): builds the decode-size graphs
# (swiglu_decode, rmsnorm_mlp_decode: d=4096, n=14336, m dynamic) and the plain GEMM (matmul, 1024×4096×4096)
# with bench/gpu_build.sh, validates each against the fp32 PyTorch evaluation of the graph and times it with
# bench/gpu_check.py (CUDA events, L2 flushed), beside PyTorch eager, torch.compile and cuBLAS for the
# "bench" rows, and prints last a table with each row's DRAM/tensor roofline floor (the physical peak of
# costmodel/h200.yaml) and the share of it reached.
# Usage, from the repository root of the GPU machine (carry build/tsopt from the development machine):
#   bash bench/gpu/gemm_check.sh          (OUT=build/gemm-check: results.json, gpu_check.log)
# Rows: decode sizes m = 1, 4, 16 on the skinny path (m ≤ 64), m = 77 through the same header's large-tile
# branch, a static m = 16 matmul (skinny form alone), and the bench matmul.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/gemm-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
start=$(date +%s)
CASES='bench swiglu_decode - m=16
bench rmsnorm_mlp_decode - m=16
bench matmul - -
odd swiglu_decode - m=1
odd swiglu_decode - m=4
odd swiglu_decode - m=77
odd rmsnorm_mlp_decode - m=1
odd rmsnorm_mlp_decode - m=4
odd matmul m=16 -' timeout 150 bash bench/gpu_build.sh > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; echo "gemm_check: build FAILED"; exit 1; }
echo "== built in $(( $(date +%s) - start )) s"
status=0
PYTHONUNBUFFERED=1 timeout 200 python3 bench/gpu_check.py --cases build/gpu/cases.txt --out "$out" --compile --profile \
  > "$out/gpu_check.log" 2>&1 || status=1
tail -n 40 "$out/gpu_check.log"
python3 - "$out/results.json" <<'PY' || status=1
import json, os, sys
import yaml
sys.path.insert(0, "bench")
import accuracy
c = yaml.safe_load(open("costmodel/h200.yaml"))["coefficients"]
peak, bw = float(c.get("tensor_peak_flops_per_s") or c["tensor_flops_per_s"]), float(c["dram_bytes_per_s"])
rows = []
for r in json.load(open(sys.argv[1])):
    spec = yaml.safe_load(open(os.path.join("bench/graphs", r["graph"] + ".yaml")))
    w = accuracy.graph_work(spec, r.get("sizes"))
    floor = accuracy.roofline_floor_s(w["flops"], w["min_bytes"], peak, bw) * 1e3
    ms = r.get("ms")
    anchors = " ".join("%s=%.4f" % (k, v) for k, v in (r.get("anchors") or {}).items() if isinstance(v, float))
    rows.append("%-20s m=%-5s %-5s %9s %9.4f %6s  %s" % (
        r["graph"], (r.get("sizes") or {}).get("m", "?"), "ok" if r.get("passed") else "FAIL",
        "%.4f" % ms if ms else "-", floor, "%.0f%%" % (100 * floor / ms) if ms else "-", anchors))
print("\ngemm_check (ms; floor = max(FLOPs / %.3g FLOP/s, bytes / %.3g B/s)):" % (peak, bw))
print("%-20s %-7s %-5s %9s %9s %6s  %s" % ("graph", "size", "valid", "ours", "floor", "%floor", "anchors"))
print("\n".join(rows))
PY
exit $status
