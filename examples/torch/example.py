"""example.py — a tsopt header as a PyTorch operator (python/tsopt_torch.py), eager and inside torch.compile.

    tsopt compile --name swiglu_small --dims m=32,d=256,n=512 -o build bench/graphs/swiglu.yaml
    python3 examples/torch/example.py build/swiglu_small.cuh         # on a machine with a GPU

Builds the operator once (cached in ~/.cache/tsopt/torch), checks it against PyTorch's own SwiGLU,
shows the error a wrong-size input gets, and runs it inside torch.compile(fullgraph=True).
"""

import os
import sys

import torch
import torch.nn.functional as F

# python/ of the repository, or <prefix>/share/tsopt/python once installed: two folders up either way
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import tsopt_torch  # noqa: E402


def main(header):
    op = tsopt_torch.load(header)
    sig = op.sig
    m, d, n = (sig.sizes[a] for a in ("m", "d", "n"))
    x = torch.randn(m, d, device="cuda", dtype=torch.float16)
    w_up, w_gate = (torch.randn(d, n, device="cuda", dtype=torch.float16) / d**0.5 for _ in range(2))
    y = op(x, w_up, w_gate)
    want = (x.float() @ w_up.float()) * F.silu(x.float() @ w_gate.float())
    err = ((y.float() - want).norm() / want.norm()).item()
    print("torch.ops.tsopt.%s: relative error %.2e against PyTorch" % (op.name, err))
    try:
        op(x[:, :-1].contiguous(), w_up, w_gate)
    except RuntimeError as e:
        print("a wrong-size input:", str(e).splitlines()[0])
    compiled = torch.compile(lambda a, b, c: op(a, b, c) * 2, fullgraph=True)
    same = torch.equal(compiled(x, w_up, w_gate), y * 2)
    print("inside torch.compile(fullgraph=True): %s" % ("same result" if same else "DIFFERENT"))
    return 0 if err < 1e-2 and same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/swiglu_small.cuh"))
