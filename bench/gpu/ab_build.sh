#!/usr/bin/env bash
# ab_build.sh — builds a kernel test twice for an A/B on the GPU machine (sourced by gemm_ab.sh and
# attn_ab.sh). ab_old_templates extracts the templates of git revision ${REV:-HEAD} to build/old-templates
# (a caller may inspect them there before building); ab_build SOURCE OUT [OLD_FLAGS] then compiles SOURCE
# against templates/ into OUT and against build/old-templates into OUT_old, both at once.
ab_old_templates() {
    rm -rf build/old-templates && mkdir -p build/old-templates
    git archive "${REV:-HEAD}" templates | tar x -C build/old-templates --strip-components=1
}
ab_build() {
    local src=$1 out=$2 oldflags=${3:-}
    mkdir -p "$(dirname "$out")"
    local flags="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a $src -lcublas"
    nvcc $flags -I templates -o "$out" &
    local new=$!
    nvcc $flags $oldflags -I build/old-templates -o "${out}_old" &
    local old=$!
    wait $new; local rn=$?
    wait $old; local ro=$?
    [ $rn -eq 0 ] && [ $ro -eq 0 ] || { echo "ab_build: nvcc failed on $src (new: exit $rn, old: exit $ro)" >&2; return 1; }
}
