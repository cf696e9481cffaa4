#!/usr/bin/env bash
# decode.sh — the decode step with a KV cache (bench/graphs/decoder_decode.yaml) on the H200: `tsopt tune` at
# batch 16 and batch 1 (cache length 4096, the graph's typical size), then bench/decode.py times the chosen
# headers (C ABI and CUDA-graph helper) against PyTorch eager, torch.compile and torch.compile
# reduce-overhead, validating the output and both updated caches; the table is printed last.
# Here (no GPU), to build the candidates first:   PREPARE=1 bash bench/gpu/decode.sh
# On the GPU machine (carry build/tsopt and the build/tune-cache folders the prepare step printed):
#   OUT=/tmp/dec bash bench/gpu/decode.sh        results: $OUT/decode.json, $OUT/decode.tar.gz (records, logs)
# Environment: OUT (build/decode-out), TOP (2: plans tuned per size), BATCHES ("16 1").
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-build/decode-out}
top=${TOP:-2}
status=0
for b in ${BATCHES:-16 1}; do
  OUT=$out/b$b DIMS=b=$b ONLY=decoder_decode TOP=$top LIST=bench TUNE_TIMEOUT=${TUNE_TIMEOUT:-150} \
    PREPARE=${PREPARE:-0} bash bench/tune_all.sh || status=1
done
if [ "${PREPARE:-0}" = 1 ]; then
  for b in ${BATCHES:-16 1}; do cat "$out/b$b/tune/decoder_decode.build.log"; done
  exit $status
fi
cases=()
for b in ${BATCHES:-16 1}; do
  [ -f "$out/b$b/tune/decoder_decode.json" ] && cases+=(--case "b$b=$out/b$b/tune/decoder_decode.json")
done
[ ${#cases[@]} -gt 0 ] && { python3 bench/decode.py "${cases[@]}" --out "$out" || status=1; }
tar -czf "$out/decode.tar.gz" -C "$out" $(cd "$out" && ls -d b* 2>/dev/null) 2>/dev/null
exit $status
