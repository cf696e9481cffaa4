#!/usr/bin/env bash
# row_head_ab.sh — row.cuh's head (kHead: a row's positions before its first aligned span taken apart) against
# the build before it, on the GPU: both row_test_pairs builds (the emitter's form for rows that can start off 16
# bytes) over every case, then compute-sanitizer memcheck on the cluster cases; prints the misaligned and
# odd-length cases of both side by side. Usage: bash bench/gpu/row_head_ab.sh NEW OLD (binaries; OUT=folder).
set -uo pipefail
new=${1:-build/gpu/row_test_pairs}; old=${2:-build/gpu/row_test_pairs_old}; out=${OUT:-build/gpu/out}
mkdir -p "$out"
timeout 200 "$new" > "$out/row_head_new.log" 2>&1; echo "new: rc $? $(grep -E '^ok:|FAILED' "$out/row_head_new.log" | tail -3)"
timeout 200 "$old" > "$out/row_head_old.log" 2>&1; echo "old: rc $? $(grep -E '^ok:|FAILED' "$out/row_head_old.log" | tail -3)"
timeout 150 compute-sanitizer --tool memcheck "$new" cluster > "$out/row_head_memcheck.log" 2>&1
echo "memcheck: rc $? $(grep -E 'ERROR SUMMARY' "$out/row_head_memcheck.log" | tail -1)"
pick() { sed -n '/^case /,$p' "$1" | grep -E '\+[12] elem|37x|1000x2500|300x12007|x4099|x20011|x40000' ; }
echo "case (shape)                                                  new us   old us"
awk 'NR == FNR { old[substr($0, 1, 60)] = $(NF-3); next }
     { k = substr($0, 1, 60); printf "%-60s %8s %8s\n", k, $(NF-3), (k in old) ? old[k] : "-" }' \
    <(pick "$out/row_head_old.log") <(pick "$out/row_head_new.log")
