#!/usr/bin/env bash
# attn_ab.sh — the Hopper attention template against an earlier version of itself, on the H200 in one call:
# bench/gpu/attention_sm90_test.cu built twice (NEW: templates/ of this tree; OLD: the templates of a git
# revision), the configs whose names match FILTERS run old, new, old, new (validation against the fp32
# reference each time, the timing median of 30 L2-flushed runs), then a table: per config the better of each
# build's two times, new/old. With NCU=<filter>, Nsight Compute then profiles the first launch of the new
# build's matching config (`--set full`, clocks left alone) and writes the details and the per-SASS-line
# source counters. Build here (no GPU needed):
#   REV=HEAD bash bench/gpu/attn_ab.sh build      → build/gpu/attention_sm90_test{,_old}
# then on the GPU machine (carry both binaries):
#   OUT=build/attn-ab FILTERS="seed,causal scaled" [NCU="seed (unscaled)"] bash bench/gpu/attn_ab.sh run
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if [ "${1:-}" = build ]; then
    . bench/gpu/ab_build.sh
    ab_old_templates || exit 1
    ab_build "-Werror all-warnings bench/gpu/attention_sm90_test.cu" build/gpu/attention_sm90_test
    exit
fi
out=${OUT:-build/attn-ab}
mkdir -p "$out"
IFS=, read -r -a filters <<< "${FILTERS:-seed}"
status=0
for round in 1 2; do
    for build in old new; do
        bin=build/gpu/attention_sm90_test; [ $build = old ] && bin=${bin}_old
        for f in "${filters[@]}"; do
            timeout 120 "$bin" "$f" >> "$out/$build.log" 2>&1 || { echo "$build '$f' round $round: exit $?"; status=1; }
        done
    done
done
grep -h "FAIL" "$out/old.log" "$out/new.log" | grep -v "0 config(s) failed" && status=1
# Table: config name (24 columns), best sm90 ms of each build.
python3 - "$out/old.log" "$out/new.log" <<'EOF'
import re, sys
def best(path):  # config name → (best ms, its TFLOP/s)
    r = {}
    for line in open(path):
        m = re.match(r"(.{24}) .* (PASS|FAIL) sm90 +([0-9.na]+) ms +([0-9.na]+) TFLOP/s", line)
        if m:
            k, t, tf = m.group(1).strip(), float(m.group(3)), float(m.group(4))
            if k not in r or t < r[k][0]:
                r[k] = (t, tf)
    return r
old, new = best(sys.argv[1]), best(sys.argv[2])
print(f"{'config':24} {'old ms':>9} {'new ms':>9} {'new TFLOP/s':>12} {'new/old':>8}")
for k, (n, tf) in new.items():
    o = old.get(k, (float("nan"), 0))[0]
    print(f"{k:24} {o:9.4f} {n:9.4f} {tf:12.1f} {n / o:8.3f}")
EOF
if [ -n "${NCU:-}" ]; then
    timeout 300 ncu --clock-control none --set full --import-source no -k regex:attention_sm90 -c 1 \
        -o "$out/profile" build/gpu/attention_sm90_test "$NCU" > "$out/ncu-run.log" 2>&1 || { echo "ncu: exit $?"; status=1; }
    ncu -i "$out/profile.ncu-rep" --page details > "$out/ncu-details.txt" 2>&1
    ncu -i "$out/profile.ncu-rep" --page source --csv --print-source sass > "$out/ncu-sass.csv" 2>&1
    grep -E "Duration|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Active Warps Per Scheduler|Eligible Warps|Registers Per|L1/TEX Hit|Executed Ipc A" "$out/ncu-details.txt" | head -20
fi
exit $status
