#!/usr/bin/env bash
# variants.sh — several builds of one kernel test (bench/gpu/attention_sm90_test.cu or row_test.cu: the same
# templates compiled with different -D switches, or different trees) timed side by side on the GPU in one call:
# each build runs once per argument set in FILTERS (the attention test: a config-name filter; row_test: e.g.
# `sweep`), ROUNDS times in turn (every run validating its outputs and timing medians of L2-flushed runs), then a
# table of each case's best time per build and its ratio to the first build. Build here, e.g.
#   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I templates bench/gpu/attention_sm90_test.cu -lcublas \
#        -DSOME_SWITCH=1 -o build/av/variant
# then on the GPU machine (carry the binaries):
#   BUILDS="base:build/av/base,v1:build/av/variant" FILTERS="seed (unscaled),causal scaled" OUT=build/av/run \
#     bash bench/gpu/variants.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/variants}
mkdir -p "$out"
IFS=, read -r -a builds <<< "${BUILDS:?BUILDS=name:binary,... needed}"
IFS=, read -r -a filters <<< "${FILTERS:-seed}"
status=0
for round in $(seq "${ROUNDS:-2}"); do
    for b in "${builds[@]}"; do
        name=${b%%:*} bin=${b#*:}
        for f in "${filters[@]}"; do
            timeout 120 "$bin" "$f" >> "$out/$name.log" 2>&1 || { echo "$name '$f' round $round: exit $?"; status=1; }
        done
    done
done
for b in "${builds[@]}"; do grep -H "FAIL" "$out/${b%%:*}.log" | grep -v "0 config(s) failed\|0 FAILED" && status=1; done
python3 - "$out" "${builds[@]}" <<'PY'
import re, sys
out, builds = sys.argv[1], [b.split(":", 1)[0] for b in sys.argv[2:]]
def best(path):  # case → best time (attention_sm90_test: config name, sm90 ms; row_test: name + shape, us)
    r = {}
    for line in open(path):
        m = re.match(r"(.{24}) .* (PASS|FAIL) sm90 +([0-9.na]+) ms", line)
        n = re.match(r"(.+?) +(\d+x\d+(?: \+\d+ elem)?) +([0-9.]+) us ", line)
        k, t = (m.group(1).strip(), float(m.group(3))) if m else (f"{n.group(1).strip()} {n.group(2)}", float(n.group(3))) if n else (None, 0)
        if k:
            r[k] = min(t, r.get(k, t))
    return r
times = {b: best(f"{out}/{b}.log") for b in builds}
w = max([24] + [len(k) for k in times[builds[0]]])
print(f"{'case':{w}} " + " ".join(f"{b:>10}" for b in builds) + " " + " ".join(f"{b + '/' + builds[0]:>10}" for b in builds[1:]))
for k, t0 in times[builds[0]].items():
    row = [times[b].get(k, float("nan")) for b in builds]
    print(f"{k:{w}} " + " ".join(f"{t:10.4f}" for t in row) + " " + " ".join(f"{t / t0:10.3f}" for t in row[1:]))
PY
exit $status
