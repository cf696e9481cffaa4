#!/usr/bin/env bash
# gemm_ab.sh — the wgmma GEMM template against an earlier version of itself, in one process set on the H200:
# runs bench/gpu/gemm_sm90_test.cu built twice (NEW: templates/ of this tree; OLD: the templates of a git
# revision), each in full (validation + timing beside cuBLAS), then the new one in quick mode under
# compute-sanitizer racecheck and memcheck (4 processes each, `quick K/4`). Prints per config: ours old,
# ours new, cuBLAS (new run), new/old (OLD built without the ping-pong or two-pair configs when its templates
# predate them). Build here (no GPU needed):
#   REV=HEAD bash bench/gpu/gemm_ab.sh build      → build/gpu/gemm_sm90_test{,_old}
# then on the GPU machine (carry build/gpu/gemm_sm90_test and build/gpu/gemm_sm90_test_old):
#   OUT=build/gemm-ab [SANITIZE=0] bash bench/gpu/gemm_ab.sh run
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
if [ "${1:-}" = build ]; then
    . bench/gpu/ab_build.sh
    ab_old_templates || exit 1
    oldflag=; grep -q "bool PP" build/old-templates/gemm_sm90.cuh || oldflag=-DGEMM_SM90_TEST_NO_PP
    grep -q "bool TWO" build/old-templates/gemm_sm90.cuh || oldflag="$oldflag -DGEMM_SM90_TEST_NO_TWO"
    grep -q "bool A_KM" build/old-templates/gemm_sm90.cuh || oldflag="$oldflag -DGEMM_SM90_TEST_NO_AKM"
    grep -q "row_stats\[4\]" build/old-templates/gemm.cuh || oldflag="$oldflag -DGEMM_SM90_TEST_NO_PUBLISH"
    ab_build bench/gpu/gemm_sm90_test.cu build/gpu/gemm_sm90_test "$oldflag"
    exit
fi
out=${OUT:-build/gemm-ab}
mkdir -p "$out"
timeout 240 build/gpu/gemm_sm90_test_old > "$out/old.log" 2>&1; echo "old: exit $?" >> "$out/old.log"
timeout 240 build/gpu/gemm_sm90_test > "$out/new.log" 2>&1; echo "new: exit $?" >> "$out/new.log"
san=${SANITIZER_S:-150}
tools="racecheck memcheck"; [ "${SANITIZE:-1}" = 0 ] && tools=   # SANITIZE=0: the two timed runs alone
for tool in $tools; do
    for k in 0 1 2 3; do
        timeout "$san" compute-sanitizer --tool "$tool" --error-exitcode 3 build/gpu/gemm_sm90_test quick "$k/4" \
            > "$out/$tool-$k.log" 2>&1 &
    done
    wait
    for k in 0 1 2 3; do echo "$tool $k: $(grep -c PASS "$out/$tool-$k.log") pass, $(grep -c FAIL "$out/$tool-$k.log") fail, $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/$tool-$k.log" | tail -1)"; done
done
python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
def rows(f):
    r = []
    for line in open(f):
        m = re.match(r"(.*?) \.\.\. .*?(PASS|FAIL).*?ours\s+([\d.na]+) ms\s+cuBLAS\s+([\d.na]+) ms", line)
        if m: r.append((" ".join(m.group(1).split()), m.group(2), float(m.group(3)), float(m.group(4))))
        elif "..." in line and "PASS" not in line: r.append((line[:62].strip(), "FAIL?", float("nan"), float("nan")))
    return r
def keyed(rs):   # config name → rows, in order (a name may repeat)
    d = {}
    for r in rs: d.setdefault(r[0], []).append(r)
    return d
old, new = keyed(rows(f"{out}/old.log")), rows(f"{out}/new.log")
print(f"{'config':<66} {'old ms':>8} {'new ms':>8} {'cuBLAS':>8} {'new/old':>7} {'cuBLAS/new':>10}")
seen = {}
for n, s, t, b in new:
    k = seen[n] = seen.get(n, -1) + 1
    to = old[n][k][2] if n in old and k < len(old[n]) else float("nan")
    print(f"{n:<66} {to:8.4f} {t:8.4f} {b:8.4f} {t / to:7.3f} {b / t:10.3f} {s}")
PY
grep -E "^(PASS|FAIL)|exit" "$out/old.log" "$out/new.log"
