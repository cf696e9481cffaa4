#!/usr/bin/env bash
# attn_family.sh — the attention family (issue 16) on the GPU machine in one command of about 3 minutes:
#   1. builds the attention bench graphs' headers, at the bench sizes and at odd sizes, into one shared
#      library each (bench/gpu_build.sh with this file's case table: build/tsopt compiles, nvcc in parallel),
#      and meanwhile the kernel-level test bench/gpu/attention_sm90_test.cu;
#   2. runs that test's head-dim-256 configs (the wgmma kernel with 64-key tiles against an fp32 reference:
#      odd sizes, bf16, GQA, soft-cap; the path taken is printed);
#   3. bench/gpu_check.py on the cases: each validated against graphref's fp32 reference, the bench sizes
#      timed beside SDPA flash and cuDNN (FlexAttention with a soft-cap score_mod for attention_softcap);
#   4. prints a short table last: per graph our time, the anchors', our speedup over the best anchor, and
#      whether the launch fell back to the mma.sync kernel.
# Usage, from the repository root on the H200 (build/tsopt carried from the development machine):
#   bash bench/gpu/attn_family.sh
# Environment: OUT=build/attn-family (logs and results.json), ARCH (nvcc's target, as gpu_build.sh).
# Exit status: 0 when every case and kernel-test config passed, else 1.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/attn-family}
mkdir -p "$out"
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
status=0

# variant graph static-dims runtime-dims (as bench/gpu_build.sh); causal graphs keep t_q = t_kv
cases=$(cat <<'CASES'
bench attention_d64 - -
bench attention_d256 - -
bench attention_bf16 - -
bench attention_cross - -
bench attention_softcap - -
bench attention_causal - -
bench attention_gqa - -
odd attention_d64 t_q=1000,t_kv=1000 -
odd attention_d256 t_q=333,t_kv=333 -
odd attention_bf16 t_q=77,t_kv=77 -
odd attention_cross t_q=77,t_kv=1000 -
odd attention_softcap t_q=1000,t_kv=1000 -
CASES
)

echo "== attn_family.sh $(date -u +%Y-%m-%dT%H:%M:%SZ): building $(echo "$cases" | wc -l) cases and the sm90 kernel test"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates bench/gpu/attention_sm90_test.cu \
  -o "$out/attention_sm90_test" > "$out/sm90_test.build.log" 2>&1 &
test_pid=$!
CASES=$cases bash bench/gpu_build.sh > "$out/build.log" 2>&1 || { tail -n 20 "$out/build.log"; status=1; }
wait "$test_pid" || { tail -n 20 "$out/sm90_test.build.log"; status=1; }
echo "   built in $(elapsed)s"
grep -h "^1 " build/gpu/*/*.compile.txt | sed 's/^/   plan: /' | sort -u

echo "== kernel test, head dim 256 ($(elapsed)s)"
if [ -x "$out/attention_sm90_test" ]; then
  timeout 90 "$out/attention_sm90_test" d256 > "$out/sm90_test.log" 2>&1
  rc=$?
  cat "$out/sm90_test.log"
  [ $rc -eq 0 ] || { echo "attention_sm90_test exit status $rc"; status=1; }
fi

echo "== gpu_check.py ($(elapsed)s)"
timeout 200 python3 bench/gpu_check.py --cases build/gpu/cases.txt --out "$out" > "$out/gpu_check.log" 2>&1
rc=$?
grep -v '^{' "$out/gpu_check.log" | tail -n 40
[ $rc -eq 0 ] || { echo "gpu_check.py exit status $rc"; status=1; }

echo "== table ($(elapsed)s; ms, CUDA events, L2 flushed; speedup = best anchor / ours)"
python3 - "$out/results.json" "$out/sm90_test.log" <<'PY'
import json, sys
try:
    results = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit("no results: %s" % e)
print("%-7s %-18s %-9s %-4s %8s  %-34s %7s %s" % ("variant", "graph", "rel.err", "ok", "tsopt", "anchors", "speedup", "path"))
for r in results:
    anchors = {k: v for k, v in r.get("anchors", {}).items() if isinstance(v, float)}
    best = min(anchors.values()) if anchors else None
    ms = r.get("ms")
    print("%-7s %-18s %-9.2e %-4s %8s  %-34s %7s %s" % (
        r["variant"], r["graph"], r["error"], "PASS" if r["passed"] else "FAIL", "%.4f" % ms if ms else "-",
        " ".join("%s=%.4f" % (k.replace("sdpa_", ""), v) for k, v in anchors.items()) or r.get("failure", "")[:34],
        "%.2fx" % (best / ms) if best and ms else "-", "mma.sync" if r.get("fallback") else "wgmma"))
try:
    last = [l for l in open(sys.argv[2]) if l.startswith(("PASS", "FAIL"))]
    print("kernel test (head dim 256):", last[-1].strip() if last else "no summary line")
except OSError:
    print("kernel test (head dim 256): not run")
PY
exit $status
