#!/bin/sh
# fake_nvcc.sh — stands in for nvcc in tests/test_tune.c: called as `nvcc ... -o LIB TU.cu`, it reads the
# plan from the header beside TU (its banner's "plan:" line) and builds tests/tune/fake_candidate.c as LIB:
# one simulated kernel per kernel of the plan, 5 us each; the baseline plan computes a wrong result.
# FAKE_NVCC_FAIL=fused makes the build of plans named so fail, like a compiler error; FAKE_NVCC_WRONG=all
# makes every plan compute a wrong result. FAKE_NVCC_FAULT, FAKE_NVCC_HANG and FAKE_NVCC_CRASH name a plan whose
# kernel faults (poisoning the context), never ends, or whose host code aborts.
set -eu
out= tu=
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift 2 ;;
    *.cu) tu=$1; shift ;;
    *) shift ;;
  esac
done
header=${tu%.cu}.cuh
plan=$(sed -n 's|^// plan: *\(.*\) — \([0-9]*\) kernels*:.*|\1/\2|p' "$header")
name=${plan%/*} nk=${plan##*/}
if [ -n "${FAKE_NVCC_FAIL:-}" ] && [ "$name" = "$FAKE_NVCC_FAIL" ]; then
  echo "$tu(1): error: simulated compiler failure for plan $name" >&2
  exit 1
fi
wrong=0
case "$name" in baseline*) wrong=1 ;; esac
[ "${FAKE_NVCC_WRONG:-}" = all ] && wrong=1
is() { [ "$1" = "$name" ] && echo 1 || echo 0; }
exec cc -O1 -shared -fPIC -DNK="$nk" -DKUS=5 -DWRONG=$wrong -DFAULT="$(is "${FAKE_NVCC_FAULT:-}")" \
  -DHANG="$(is "${FAKE_NVCC_HANG:-}")" -DCRASH="$(is "${FAKE_NVCC_CRASH:-}")" -o "$out" "$(dirname "$0")/fake_candidate.c" -lm
