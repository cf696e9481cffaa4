"""check_graphref.py — checks bench/graphref.py (the GPU check's reference) against the float64
interpreter: for every bench graph at small sizes, `tsopt eval --dump` writes inputs and outputs, and
graphref.py with numpy must reproduce the outputs. Run by `make test` when numpy and PyYAML are present."""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import graphref  # noqa: E402

# (attention_bf16 is not here: graphref rounds to bf16 with the torch backend only)
CASES = {
    "attention": "h=2,t_q=8,t_kv=8,d_h=4",
    "attention_causal": "h=2,t_q=8,t_kv=8,d_h=4",
    "attention_gqa": "t_q=8,t_kv=8,d_h=4",
    "attention_d64": "h=2,t_q=8,t_kv=8,d_h=4",
    "attention_d256": "h=2,t_q=8,t_kv=8,d_h=4",
    "attention_cross": "h=2,t_q=4,t_kv=12,d_h=4",
    "attention_softcap": "t_q=8,t_kv=8,d_h=4",
    "attention_mask": "h=2,t_q=8,t_kv=12,d_h=4",
    "decoder_layer": "t=5,d=16,f=8",
    "decoder_decode": "b=3,s=5,s_max=7,d=16,f=8",
    "decoder_prefill": "b=2,n=3,s=5,s_max=7,d=16,f=8",
    "matmul": "m=3,d=8,n=5",
    "rmsnorm": "m=3,d=8,n=5",
    "rmsnorm_mlp": "m=3,d=8,n=5",
    "swiglu": "m=3,d=8,n=5",
    "tests/fixtures/literal_operands.yaml": "m=6",
    "tests/fixtures/composites.yaml": "m=5",
    "tests/fixtures/mha_export.yaml": "b=2",
    "tests/fixtures/conv_windows.yaml": "b=2",  # window views: a strided, dilated and a grouped convolution, pools  # slices, splits and permutes of one projection (torch.export)
}


def read_manifest(d):
    rows = []
    for line in open(os.path.join(d, "manifest.txt")):
        kind, name, dtype, *sizes = line.split()
        data = np.fromfile(os.path.join(d, name + ".f64"), dtype=np.float64).reshape([int(s) for s in sizes])
        rows.append((kind, name, data))
    return rows


def main():
    tsopt = os.environ.get("TSOPT", "build/tsopt")
    be = graphref.Backend(np)
    failures = 0
    for name, dims in CASES.items():
        with tempfile.TemporaryDirectory() as d:
            path = name if name.endswith(".yaml") else "bench/graphs/%s.yaml" % name
            subprocess.run([tsopt, "eval", "--dims", dims, "--dump", d, path], check=True, stdout=subprocess.DEVNULL)
            rows = read_manifest(d)
            g = graphref.Graph(path, {k: int(v) for k, v in (kv.split("=") for kv in dims.split(","))})
            ins = {n: x.copy() for kind, n, x in rows if kind == "in"}
            outs = g.evaluate(be, ins)
            for kind, n, want in rows:
                if kind != "out":
                    continue
                if n not in outs:  # an updated inout input (a KV cache after append): graphref wrote it in place
                    outs[n] = graphref.Tensor(ins[n], [], None)
                spec_axes = outs[n].axes
                got = outs[n].data
                # the interpreter writes outputs in the checker's order, which graphref mirrors
                err = np.linalg.norm(got.reshape(want.shape) - want) / max(np.linalg.norm(want), 1e-300)
                ok = err < 1e-9
                failures += not ok
                print("%-4s %-18s %-4s %s rel. error %.2e" % ("ok" if ok else "FAIL", os.path.basename(name), n, spec_axes, err))
    print("%d passed, %d failed" % (len(CASES) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
