#!/usr/bin/env bash
# carry.sh — packs, on the development machine, what the GPU machine needs to tune and time bench graphs
# without compiling them there: build/tsopt and a tune cache prepared here (`PREPARE=1 bash bench/tune_all.sh`
# with TSOPT_CACHE=<cache>), as one xz archive. The libraries and tsopt are stripped; float64 reference files
# over REF_MB are left out (tune recomputes a missing reference on the GPU machine: the decoder layer's is 1 GB).
# It checks the archive plus the tracked tree against the device's transfer limit (64 MiB).
# Usage (here):   CACHE=build/tc-all TAR=build/carry.tar.xz [EXTRA="build/gpu/gemm_sm90_test"] [LOGS="OUT/tune/*.build.log"] bash bench/gpu/carry.sh
# LOGS: pack only the libraries and references those `tune --build-only` logs name (a shared cache holds many graphs').
# Then (device):  run with carry [TAR] and the command
#                 tar xJf TAR && rm -rf build/tune-cache && mv CACHE build/tune-cache && OUT=$OUT/a bash bench/h200.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${CACHE:?CACHE: the tune cache to pack (a folder under build/)}
tar_out=${TAR:-build/carry.tar.xz}
ref_mb=${REF_MB:-8}
limit=$((64 * 1024 * 1024))
[ -d "$cache" ] || { echo "carry: no cache folder $cache (prepare it: TSOPT_CACHE=$cache PREPARE=1 bash bench/tune_all.sh)"; exit 1; }
[ -x build/tsopt ] || { echo "carry: build/tsopt missing (make build/tsopt)"; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build" "$stage/$(dirname "$cache")"
cp build/tsopt "$stage/build/tsopt" && strip "$stage/build/tsopt"
if [ -n "${LOGS:-}" ]; then
  mkdir -p "$stage/$cache"
  # shellcheck disable=SC2086  # LOGS is a list of globs
  for h in $(grep -ho "$cache/[0-9a-f]\{16\}/\|reference [0-9a-f]\{16\}" $LOGS | grep -o "[0-9a-f]\{16\}" | sort -u); do
    [ -d "$cache/$h" ] && cp -a "$cache/$h" "$stage/$cache/"
    [ -f "$cache/ref-$h.bin" ] && cp -a "$cache/ref-$h.bin" "$stage/$cache/"
  done
else
  cp -a "$cache" "$stage/$cache"
fi
rm -rf "$stage/$cache"/*.tmp.*                                   # builds that were interrupted
dropped=$(find "$stage/$cache" -maxdepth 1 -name 'ref-*.bin' -size +"${ref_mb}M" | wc -l)
find "$stage/$cache" -maxdepth 1 -name 'ref-*.bin' -size +"${ref_mb}M" -delete
find "$stage/$cache" -name '*.so' -exec strip --strip-unneeded {} +
for f in ${EXTRA:-}; do
  mkdir -p "$stage/$(dirname "$f")" && cp "$f" "$stage/$f"
  file "$stage/$f" | grep -q 'not stripped' && strip "$stage/$f"
done
(cd "$stage" && tar cf - build | xz -T0 -6) > "$tar_out"

tree=$(git ls-files -z | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1)
size=$(stat -c %s "$tar_out")
echo "carry: $tar_out $((size / 1048576)) MiB ($(find "$stage/$cache" -name '*.so' | wc -l) libraries," \
     "$dropped references over ${ref_mb} MB left out); with the tracked tree $(((size + tree) / 1048576)) of 64 MiB"
if [ $((size + tree)) -gt $limit ]; then
  echo "carry: over the device's limit: prepare fewer graphs (ONLY=...) or a smaller TOP"
  exit 1
fi
