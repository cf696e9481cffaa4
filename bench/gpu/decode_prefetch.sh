#!/usr/bin/env bash
# decode_prefetch.sh — the L2-prefetch experiment of bench/NOTES.md run 107 on decoder_decode (see
# decode_prefetch_probe.cu). Here (no GPU): `PREPARE=1 bash bench/gpu/decode_prefetch.sh` compiles the header
# and the probe into build/pf; on the GPU machine (carry build/pf): `bash bench/gpu/decode_prefetch.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${PREPARE:-0}" = 1 ]; then
  mkdir -p build/pf
  build/tsopt compile bench/graphs/decoder_decode.yaml --dims b=1 -o build/pf --name dd > /dev/null
  sed -e 's/^    err = K\([0-9]*\)_launch(/    PF_HOOK(\1); err = K\1_launch(/' build/pf/dd.cuh > build/pf/dd_probe.cuh
  nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I build/pf bench/gpu/decode_prefetch_probe.cu -o build/pf/probe
  exit 0
fi
PB=1 build/pf/probe base 2=o:0:32 5=o:0:32 0=qkv:0:24 0=qkv:0:12,0=qkv:24:12 2=o:0:32,0=qkv:0:12,0=qkv:24:12 \
  2=o:0:32,7=gate:0:8,7=up:0:8 2=o:0:16,5=o:16:16
PB=16 build/pf/probe base 2=o:0:32 2=o:0:32,0=qkv:0:12,0=qkv:24:12
