"""llama_export.py — writes OUT/llama_layer.yaml (tests/torch/modules.py's LlamaLayer at Llama-3-8B sizes,
fp16, t dynamic with typical size 1024, exported by tsopt_torch) and OUT/llama_layer.json (the YAML's inputs
in order with their module attribute paths: what bench/torch/llama_check.py feeds the header's C ABI).
The module is built on the meta device: export needs shapes, not 218 M weights. Usage: llama_export.py OUT"""
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "torch")]
import torch  # noqa: E402

from modules import LLAMA3_8B, LlamaLayer  # noqa: E402
from tsopt_torch.export import export_module  # noqa: E402

out = sys.argv[1]
with torch.device("meta"):
    module = LlamaLayer(**LLAMA3_8B).half()
    x = torch.randn(1, 1024, LLAMA3_8B["d"], dtype=torch.float16)
    text, info = export_module(module, [x], {"t": 1024, "d": LLAMA3_8B["d"], "f": LLAMA3_8B["ffn"]}, {"t": 1024},
                               graph_name="llama_layer")
with open(os.path.join(out, "llama_layer.yaml"), "w") as f:
    f.write(text)
with open(os.path.join(out, "llama_layer.json"), "w") as f:
    json.dump(info, f, indent=1)
print("exported %s/llama_layer.yaml: %d inputs, %d ops" % (out, len(info["inputs"]), text.count("op:")))
