#!/usr/bin/env bash
# header_ab.sh — the headers this tree generates against those an earlier revision generates, validated and
# timed in one process on the H200 (bench/gpu_check.py: fresh random inputs, outputs against bench/graphref.py,
# median of CUDA events with the L2 flushed), in both orders. The new header of each graph runs as the variant
# "bench" in the first order, so its anchors (SDPA cuDNN and flash, cuBLAS, eager) are timed beside it.
# Build here (no GPU needed; REV's tsopt is built in a worktree under build/header-ab/rev):
#   REV=HEAD GRAPHS="bench/graphs/attention_mask.yaml bench/probes/attention_head_bias.yaml" \
#       bash bench/gpu/header_ab.sh build           → build/header-ab/{old,new}/<graph>/, cases-{1,2}.txt
# then on the GPU machine (carry build/header-ab/old, new, graphs and cases-1.txt, cases-2.txt; not rev):
#   OUT=build/header-ab-out bash bench/gpu/header_ab.sh run
# AB_DIR: another folder than build/header-ab (the same for build and run); ARCH: the nvcc target flags
# (default sm_90a; an sm_80-only build runs every kernel's mma.sync fallback on the H200).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
dir=${AB_DIR:-build/header-ab}
arch=${ARCH:--gencode=arch=compute_90a,code=sm_90a}   # e.g. ARCH=-gencode=arch=compute_80,code=sm_80: the fallbacks
if [ "${1:-}" = build ]; then
    [ -n "${GRAPHS:-}" ] || { echo "header_ab.sh: GRAPHS (graph files) is empty" >&2; exit 2; }
    rm -rf "$dir/old" "$dir/new" "$dir/graphs" "$dir"/cases-*.txt && mkdir -p "$dir"
    if [ ! -d "$dir/rev/.git" ] && [ ! -f "$dir/rev/.git" ]; then
        git worktree add --detach "$dir/rev" "${REV:-HEAD}" > /dev/null || exit 1
    else
        git -C "$dir/rev" checkout -q --detach "${REV:-HEAD}" || exit 1
    fi
    make -s -C "$dir/rev" build/tsopt > "$dir/rev-make.log" 2>&1 || { echo "header_ab.sh: make in $dir/rev failed" >&2; exit 1; }
    jobs=()
    mkdir -p "$dir/graphs"
    for g0 in $GRAPHS; do
        name=$(basename "$g0" .yaml)
        g="$dir/graphs/$name.yaml"   # a copy beside the libraries: the GPU machine gets whatever it reads
        cp "$g0" "$g" || exit 1
        upper=$(echo "$name" | tr '[:lower:]' '[:upper:]')
        for side in old new; do
            d="$dir/$side/$name"
            mkdir -p "$d"
            if [ $side = old ]; then (cd "$dir/rev" && build/tsopt compile -o "$OLDPWD/$d" "$OLDPWD/$g") > "$d/compile.txt" 2>&1
            else build/tsopt compile -o "$d" "$g" > "$d/compile.txt" 2>&1; fi || { echo "header_ab.sh: $side compile of $g failed" >&2; exit 1; }
            printf '#define TSOPT_%s_IMPLEMENTATION\n#include "%s.cuh"\n' "$upper" "$name" > "$d/$name.cu"
            jobs+=("nvcc -O3 -std=c++17 $arch -Xcompiler -fPIC -shared -I$d -o $d/lib$name.so $d/$name.cu")
        done
        echo "bench $name $g - - $dir/new/$name/$name.cuh $dir/new/$name/lib$name.so" >> "$dir/cases-1.txt"
        echo "old $name $g - - $dir/old/$name/$name.cuh $dir/old/$name/lib$name.so" >> "$dir/cases-1.txt"
        echo "old $name $g - - $dir/old/$name/$name.cuh $dir/old/$name/lib$name.so" >> "$dir/cases-2.txt"
        echo "new $name $g - - $dir/new/$name/$name.cuh $dir/new/$name/lib$name.so" >> "$dir/cases-2.txt"
    done
    printf '%s\n' "${jobs[@]}" | xargs -P "$(nproc)" -I{} sh -c '{}' || { echo "header_ab.sh: nvcc failed" >&2; exit 1; }
    echo "built $(wc -l < "$dir/cases-1.txt") cases in $dir"
    exit
fi
out=${OUT:-build/header-ab-out}
mkdir -p "$out"
status=0
for order in 1 2; do
    timeout 280 python3 bench/gpu_check.py --cases "$dir/cases-$order.txt" --out "$out/order-$order" --seed 7 \
        > "$out/order-$order.log" 2>&1 || { echo "order $order: exit $?"; status=1; }
done
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
times = {}
for order in (1, 2):
    try:
        rows = json.load(open(f"{out}/order-{order}/results.json"))
    except (OSError, ValueError) as e:
        print(f"order {order}: no results ({e})"); continue
    for r in rows:
        side = "new" if r["variant"] in ("bench", "new") else "old"
        ms = r["ms"] if r.get("passed") and r.get("ms") is not None else float("nan")   # a failed case counts as nan
        times.setdefault(r["graph"], {}).setdefault(side, []).append(ms)
print(f"{'graph':<28} {'old ms (two orders)':>22} {'new ms (two orders)':>22} {'new/old':>8}")
for g, t in times.items():
    o, n = t.get("old", []), t.get("new", [])
    ratio = (sum(n) / len(n)) / (sum(o) / len(o)) if o and n else float("nan")
    print(f"{g:<28} {' / '.join(f'{x:.4f}' for x in o):>22} {' / '.join(f'{x:.4f}' for x in n):>22} {ratio:8.3f}")
PY
tail -n 25 "$out/order-1.log"
exit $status
