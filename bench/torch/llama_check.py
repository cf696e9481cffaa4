"""llama_check.py — on the H200: validates, against the PyTorch module itself, the Llama-style decoder layer
(tests/torch/modules.py's LlamaLayer at Llama-3-8B sizes, fp16) compiled by tsopt two ways — exported from
PyTorch by tsopt_torch (build/gpu_torch/libllama_layer.so) and hand-written (bench/graphs/decoder_layer.yaml,
build/gpu_torch/libdecoder_layer.so) — both called through their C ABI `<graph>_run` with ctypes on the
module's own weights (the hand-written graph takes the projection matrices transposed and q/k/v as one
matrix, which is what LlamaLayer.qkv_proj holds).

Reference: the module in fp32 on the same fp16 weights and inputs. Every output must be within relative L2
1e-2 (the GPU check's fp16 bound) with no NaN; the fp16 module's own error is printed beside it. Tokens t =
1024 (the typical size) and 77 (a size no tile divides; t is a run-time argument of both headers). Each
header is also timed (median of 20 CUDA-event timings, L2 flushed) beside the fp16 module in eager mode.

Build first, on the development machine: bash bench/torch/llama_build.sh (carry build/gpu_torch).
Usage: python3 bench/torch/llama_check.py [--lib-dir build/gpu_torch]. Exit status 1 when a check fails.
"""

import argparse
import ctypes
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path[:0] = [os.path.join(ROOT, "tests", "torch"), os.path.join(ROOT, "bench")]
import torch  # noqa: E402

from gpu_check import rel_error, timed  # noqa: E402
from modules import LLAMA3_8B, LlamaLayer  # noqa: E402

TOLERANCE = 1e-2


class Header:
    """A generated header's shared library: run(buffers, dims) on the current stream."""

    def __init__(self, path, graph):
        lib = ctypes.CDLL(path)
        self.run_fn = getattr(lib, graph + "_run")
        self.run_fn.restype = ctypes.c_int
        self.run_fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p,
                                ctypes.c_void_p]
        self.ws_fn = getattr(lib, graph + "_workspace")
        self.ws_fn.restype = ctypes.c_size_t
        self.ws_fn.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        self.graph = graph

    def bind(self, inputs, out, t):
        dims = (ctypes.c_int64 * 1)(t)
        ws = torch.empty(max(1, self.ws_fn(dims)), dtype=torch.uint8, device="cuda")
        bufs = (ctypes.c_void_p * (len(inputs) + 1))(*[x.data_ptr() for x in inputs], out.data_ptr())
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        def call():
            rc = self.run_fn(bufs, dims, ctypes.c_void_p(ws.data_ptr()), stream)
            if rc != 0:
                raise RuntimeError("%s_run returned CUDA error %d" % (self.graph, rc))

        call.keep = (dims, ws, bufs, inputs)
        return call


def exported_inputs(module, x, info):
    """The exported graph's inputs in YAML order: x (batch dim of 1 dropped), then the weights by path."""
    out = []
    for _name, kind, target, _shape in info["inputs"]:
        out.append(x if kind == "USER_INPUT" else module.get_parameter(target).detach())
    return [t.contiguous() for t in out]


def handwritten_inputs(module, x):
    """bench/graphs/decoder_layer.yaml's inputs: x, g_attn, W_qkv [d, qkv], W_o, g_mlp, W_gate, W_up, W_down
    (matrices [in, out], the transpose of nn.Linear's weight)."""
    w = lambda lin: lin.weight.detach().t().contiguous()  # noqa: E731
    return [x.contiguous(), module.attn_norm.weight.detach(), w(module.qkv_proj), w(module.o_proj),
            module.mlp_norm.weight.detach(), w(module.gate), w(module.up), w(module.down)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib-dir", default=os.path.join(ROOT, "build", "gpu_torch"))
    o = ap.parse_args()
    info = json.load(open(os.path.join(o.lib_dir, "llama_layer.json")))
    headers = {"exported": (Header(os.path.join(o.lib_dir, "libllama_layer.so"), "llama_layer"), False),
               "hand-written": (Header(os.path.join(o.lib_dir, "libdecoder_layer.so"), "decoder_layer"), True)}
    torch.manual_seed(0)
    module = LlamaLayer(**LLAMA3_8B).to("cuda", torch.float16).eval()
    ref_module = LlamaLayer(**LLAMA3_8B).to("cuda").eval()
    ref_module.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
    failures = 0
    print("%-13s %5s  %-10s %-10s %s" % ("graph", "t", "rel. L2", "fp16 torch", "time (ms): header / torch eager"))
    for t in (1024, 77):
        x = torch.randn(1, t, LLAMA3_8B["d"], device="cuda", dtype=torch.float16)
        with torch.no_grad():
            want = ref_module(x.float())[0]
            eager = module(x)[0]
            t_eager = timed(lambda: module(x))
        for name, (hdr, hand) in headers.items():
            ins = handwritten_inputs(module, x[0]) if hand else exported_inputs(module, x[0], info)
            out = torch.full((t, LLAMA3_8B["d"]), float("nan"), device="cuda", dtype=torch.float16)
            call = hdr.bind(ins, out, t)
            call()
            torch.cuda.synchronize()
            err = rel_error(out, want)
            ok = err <= TOLERANCE
            failures += not ok
            print("%-13s %5d  %-10.2e %-10.2e %.4f / %.4f  %s" % (name, t, err, rel_error(eager, want), timed(call),
                                                                   t_eager, "ok" if ok else "FAIL"))
    print("%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
