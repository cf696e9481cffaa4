#!/usr/bin/env bash
# batch_graphs.sh — graphs no bench file was written for, exported from PyTorch modules the way a user would
# (tests/torch/modules.py through `python3 -m tsopt_torch.export`, fp16, causal masks and RoPE tables as ops):
# mostly a batch of sequences, so activations are [b, t, d] and attention operands share two axes (batch
# and heads); the last four read tensors in their attention scores. They test src/plan.c's batched GEMM and
# attention forms on the GPU:
#   gpt2_block_b4        GPT-2 block, d 768, 12 heads, b 4, t 1024 (LayerNorm, qkv, causal attention, GELU MLP)
#   llama_layer_b3       Llama-style layer, d 1024, 8/2 heads (GQA), ffn 2816, b 3, t 512 (RoPE, SwiGLU)
#   manual_attention_b2  softmax(q·kᵀ/√d, computed causal mask)·v as tutorials write it, b 2, 12 heads, t 1024
#   masked_sdpa_b2       SDPA with an explicit mask argument (boolean and additive), b 2, 12 heads, 1024 × 1000
#   bert_layer_b4        post-LN BERT-base layer with a padding mask per sequence, b 4, t 512
#   bias_attention       T5-style: unscaled scores + a relative-position bias per head [h, t, s], 16 heads, 1024²
#   multi_query_b2       one K/V head expanded to 16 query heads, causal, b 2, t 1024, d 128
#   upcast_attention_b2  Hugging Face's eager attention (softmax in fp32, cast back), b 2, 16 heads, 1024², d 128
# Usage: bash bench/torch/batch_graphs.sh [OUTDIR]   (default build/batch-graphs; needs python3 with torch)
# Then, on the GPU: GRAPHS_DIR=OUTDIR SWEEP=0 bash bench/h200.sh (tuned, validated against graphref, timed
# against PyTorch eager and torch.compile of the same graph).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/batch-graphs}
mkdir -p "$out"
m=tests/torch/modules.py
export_graph() {  # NAME CLASS INIT ARGS...
  local name=$1 cls=$2 init=$3
  shift 3
  local args=()
  for a in "$@"; do args+=(--args "$a"); done
  python3 -W ignore -m tsopt_torch.export "$m:$cls" --init "$init" "${args[@]}" --dtype float16 \
    --buffers computed --name "$name" -o "$out/$name.yaml" 2> "$out/$name.log" ||
    { cat "$out/$name.log"; echo "batch_graphs: exporting $name failed"; exit 1; }
  rm -f "$out/$name.log"
  echo "wrote $out/$name.yaml"
}
export_graph gpt2_block_b4 GPT2Block '{"d": 768, "heads": 12}' x=b:4,t:1024,d:768
export_graph llama_layer_b3 LlamaLayer '{"d": 1024, "heads": 8, "kv_heads": 2, "ffn": 2816}' x=b:3,t:512,d:1024
export_graph manual_attention_b2 ManualAttention '{}' q=b:2,h:12,t:1024,e:64 k=b:2,h:12,t:1024,e:64 \
  v=b:2,h:12,t:1024,e:64
export_graph masked_sdpa_b2 MaskedSDPA '{}' q=b:2,h:12,t:1024,e:64 k=b:2,h:12,s:1000,e:64 \
  v=b:2,h:12,s:1000,e:64 mask=t:1024,s:1000
export_graph bert_layer_b4 BertLayer '{"d": 768, "heads": 12, "ffn": 3072}' x=b:4,t:512,d:768 pad=b:4,t:512
export_graph bias_attention BiasAttention '{}' q=h:16,t:1024,e:64 k=h:16,s:1000,e:64 v=h:16,s:1000,e:64 \
  bias=h:16,t:1024,s:1000
export_graph multi_query_b2 MultiQuery '{}' q=b:2,h:16,t:1024,e:128 k=b:2,one:1,t:1024,e:128 v=b:2,one:1,t:1024,e:128
export_graph upcast_attention_b2 UpcastAttention '{}' q=b:2,h:16,t:1024,e:128 k=b:2,h:16,s:1000,e:128 \
  v=b:2,h:16,s:1000,e:128
