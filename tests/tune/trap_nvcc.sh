#!/bin/sh
# trap_nvcc.sh — nvcc for `tsopt tune --nvcc` on a GPU, planting broken candidates to test tune's fault
# isolation (bench/robust.sh): the candidate whose plan is named $TSOPT_TRAP_PLAN launches a kernel that
# executes __trap() (a device fault, which poisons its CUDA context) before its real work, and the one
# named $TSOPT_HANG_PLAN a kernel that never ends. Every other candidate is built as nvcc would build it.
# Called as `trap_nvcc.sh FLAGS... -o LIB DIR/GRAPH.cu` (what tune runs); DIR/GRAPH.cuh is the header.
set -eu
nvcc=${TSOPT_REAL_NVCC:-nvcc}
tu=
for a in "$@"; do case "$a" in *.cu) tu=$a ;; esac; done
[ -n "$tu" ] || exec "$nvcc" "$@"
graph=$(basename "$tu" .cu)
plan=$(sed -n 's|^// plan: *\(.*\) — [0-9]* kernels*:.*|\1|p' "${tu%.cu}.cuh")
body=
[ "$plan" = "${TSOPT_TRAP_PLAN:-}" ] && body='__trap();'
# (a loop of __nanosleep, an asm volatile: a loop over a volatile local ended on the H200, run 19)
[ "$plan" = "${TSOPT_HANG_PLAN:-}" ] && body='for (;;) __nanosleep(1000000);'
[ -n "$body" ] || exec "$nvcc" "$@"
planted=${tu%.cu}.planted.cu
{
  printf '#define %s_run %s_run_unplanted\n' "$graph" "$graph"
  cat "$tu"
  printf '#undef %s_run\n' "$graph"
  printf '__global__ void tsopt_planted_kernel() { %s }\n' "$body"
  printf 'extern "C" int %s_run(void *const *b, const int64_t *d, void *w, cudaStream_t s) {\n' "$graph"
  printf '    tsopt_planted_kernel<<<1, 1, 0, s>>>();\n    return %s_run_unplanted(b, d, w, s);\n}\n' "$graph"
} > "$planted"
args=
for a in "$@"; do
  [ "$a" = "$tu" ] && a=$planted
  args="$args '$(printf %s "$a" | sed "s/'/'\\\\''/g")'"
done
eval "exec \"\$nvcc\" $args"
