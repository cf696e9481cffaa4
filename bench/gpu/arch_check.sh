#!/usr/bin/env bash
# arch_check.sh — generated headers built for targets other than sm_90a alone, validated on the GPU: a plain
# -arch=sm_90 build must run every GEMM and attention through its mma.sync fallback (the launchers tell sm_90a
# code from other code by the wgmma kernel's attributes: tile.cuh, built_for_sm90a), and a fat binary (sm_80 and
# sm_90a) must take the wgmma path on Hopper. Each device code compiles only the fallbacks it can launch
# (tst::Reach), so a wrong choice of path traps instead of computing: bench/gpu_check.py then reports the case
# invalid or its launch failed. bench/NOTES.md run 157.
#
# Usage:
#   bash bench/gpu/arch_check.sh build    on the development machine: build/gpu-arch/{plain,fat}/ (carry them)
#   bash bench/gpu/arch_check.sh run      on the GPU machine: bench/gpu_check.py over both sets; OUT=folder
# Exit status 1 when a case fails, when a plain-sm_90 case did not report its fallback, or a fat one did.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
sets="plain fat"
case "${1:-}" in
  build)
    set -e
    plain_cases="bench matmul - -
odd matmul m=77,d=1000,n=1000 -
bench attention - -
bench rmsnorm_mlp - -
bench decoder_layer - t=1024
odd decoder_layer - t=77"
    fat_cases="bench matmul - -
bench attention_gqa - -
bench decoder_layer - t=1024"
    rm -rf build/gpu-arch && mkdir -p build/gpu-arch
    for s in $sets; do
      if [ "$s" = plain ]; then cases=$plain_cases arch="-arch=sm_90"
      else cases=$fat_cases arch="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a"; fi
      # gpu_build.sh writes build/gpu: moved aside, and its case table pointed at the new place
      [ -e build/gpu ] && mv build/gpu build/gpu-arch/saved
      CASES=$cases ARCH=$arch bash bench/gpu_build.sh
      mv build/gpu "build/gpu-arch/$s"
      sed -i "s# build/gpu/# build/gpu-arch/$s/#g" "build/gpu-arch/$s/cases.txt"
      [ -e build/gpu-arch/saved ] && mv build/gpu-arch/saved build/gpu
    done
    echo "built build/gpu-arch/{plain,fat}: carry build/gpu-arch to the GPU machine" ;;
  run)
    out=${OUT:-build/gpu-arch/out}
    mkdir -p "$out"
    status=0
    for s in $sets; do
      python3 bench/gpu_check.py --cases "build/gpu-arch/$s/cases.txt" --out "$out/$s" > "$out/$s.log" 2>&1 || status=1
      python3 - "$out/$s/results.json" "$s" <<'EOF' || status=1
import json, sys
results, which = json.load(open(sys.argv[1])), sys.argv[2]
bad = 0
for r in results:
    fell_back = bool(r.get("fallback"))
    want = which == "plain"   # plain sm_90: every wgmma kernel falls back; fat: none does
    ok = r.get("passed") and fell_back == want
    bad += not ok
    print("%-6s %-6s %-16s %-5s %8.4f ms  %s" % (which, r["variant"], r["graph"], "ok" if ok else "FAIL", r.get("ms") or 0,
                                                "mma.sync fallback" if fell_back else "wgmma"))
sys.exit(1 if bad else 0)
EOF
    done
    exit $status ;;
  *) echo "usage: bash bench/gpu/arch_check.sh build|run"; exit 2 ;;
esac
