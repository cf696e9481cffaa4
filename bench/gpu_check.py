"""gpu_check.py — validates and times tsopt's generated headers on the GPU (run on the H200 machine).

For every case listed in build/gpu/cases.txt (written by bench/gpu_build.sh on the development machine,
which also builds one shared library per case from its header): fresh random inputs on the GPU (uniform in
[-1, 1), weight matrices — inputs named W... — scaled by 1/sqrt(fan-in) so that fp16 stays in range),
outputs poisoned with NaN, the library's C ABI entry `<graph>_run` called through ctypes on the current
stream, every output compared with bench/graphref.py evaluated by PyTorch in fp32 (relative L2 at most 1e-2
for fp16 and bf16; any NaN fails), then timed: median of CUDA-event timings after warm-up, the L2 cache
flushed before each run. At the bench sizes the anchors are timed the same way in the same process:
PyTorch eager (and torch.compile with --compile), SDPA's flash and cuDNN back ends for attention, cuBLAS
(through torch.matmul) for the GEMMs. Prints one line per case and a summary table last; writes
results.json beside --out.
"""

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import graphref  # noqa: E402

DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def timed(fn, reps=20, warmup=3):
    flush = timed.flush
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def make_inputs(g, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    out = {}
    for name, dtype, shape in g.inputs:
        sizes = [g.sizes[a] for a in shape]
        x = torch.rand(sizes, generator=gen, device="cuda", dtype=torch.float32) * 2 - 1
        if name.startswith("W") and len(sizes) >= 2:
            x = x / math.sqrt(sizes[0])
        out[name] = x.to(DT[dtype])
    return out


def output_layouts(header):
    """name -> (dtype, [axes]) from the header's banner."""
    outs = {}
    for line in open(header):
        if line.startswith("//   out "):
            _, _, name, dtype, dims = line.split(None, 4)
            outs[name] = (dtype, [a.strip() for a in dims.strip().strip("[]").split(",") if a.strip()])
        if line.startswith("#ifndef"):
            break
    return outs


class Case:
    def __init__(self, row):
        self.variant, self.graph, self.yaml, static, runtime, self.header, self.lib = row.split()
        parse = lambda s: {} if s == "-" else {k: int(v) for k, v in (kv.split("=") for kv in s.split(","))}  # noqa: E731
        self.static, self.runtime = parse(static), parse(runtime)


def kernel_times(fn):
    """Per-kernel device times (us) of one call, from the PyTorch profiler (CUPTI)."""
    from torch.profiler import ProfilerActivity, profile as prof
    fn()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        fn()
        torch.cuda.synchronize()
    rows = []
    for e in p.events():
        if e.device_type.name == "CUDA":
            rows.append((e.name[:60], round(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total, 2)))
    return rows


def run_case(case, seed, anchors, use_compile, profile=False):
    g = graphref.Graph(case.yaml, {**case.static, **case.runtime})
    lib = ctypes.CDLL(case.lib)
    run = getattr(lib, case.graph + "_run")
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_void_p]
    wsf = getattr(lib, case.graph + "_workspace")
    wsf.restype = ctypes.c_size_t
    wsf.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    dyn = [v for k, v in case.runtime.items()]
    dims = (ctypes.c_int64 * max(1, len(dyn)))(*dyn)
    layouts = output_layouts(case.header)
    ins = make_inputs(g, seed)
    outs = {n: torch.full([g.sizes[a] for a in axes], float("nan"), dtype=DT[dt], device="cuda")
            for n, (dt, axes) in layouts.items()}
    ws = torch.empty(max(1, wsf(dims)), dtype=torch.uint8, device="cuda")
    ptrs = [ins[n].data_ptr() for n, _, _ in g.inputs] + [outs[n].data_ptr() for n in g.outputs]
    bufs = (ctypes.c_void_p * len(ptrs))(*ptrs)
    stream = torch.cuda.current_stream().cuda_stream

    def ours():
        rc = run(bufs, dims, ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(stream))
        if rc != 0:
            raise RuntimeError("%s_run returned CUDA error %d" % (case.graph, rc))

    ours()
    torch.cuda.synchronize()
    be = graphref.Backend(torch, device="cuda", dtype=torch.float32)
    ref = g.evaluate(be, {n: x.float() for n, x in ins.items()})
    worst = 0.0
    for n in g.outputs:
        want = graphref.ordered(be, ref[n], layouts[n][1]).float()
        got = outs[n].float()
        if torch.isnan(got).any() or torch.isinf(got).any() != torch.isinf(want).any():
            worst = float("inf")
            continue
        worst = max(worst, (torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-30)).item())
    del ref
    ms = timed(ours)
    result = {"variant": case.variant, "graph": case.graph, "sizes": g.sizes, "error": worst,
              "passed": worst <= 1e-2, "ms": ms}
    if profile:
        result["kernels"] = kernel_times(ours)
    if anchors:
        result["anchors"] = time_anchors(case.graph, ins, use_compile)
    return result


def time_anchors(graph, x, use_compile):
    """Idiomatic PyTorch versions of the seed workloads, timed like ours."""
    fns = {}
    if graph == "matmul":
        fns["cublas"] = lambda: x["X"] @ x["W"]
    elif graph == "swiglu":
        fns["eager"] = lambda: (x["X"] @ x["W_up"]) * F.silu(x["X"] @ x["W_gate"])
    elif graph == "rmsnorm":
        fns["eager"] = lambda: F.rms_norm(x["X"], (x["X"].shape[-1],), eps=1e-6) @ x["W"]
    elif graph == "rmsnorm_mlp":
        def f():
            n = F.rms_norm(x["X"], (x["X"].shape[-1],), eps=1e-6)
            return (n @ x["W_up"]) * (n @ x["W_gate"])
        fns["eager"] = f
    elif graph in ("attention", "attention_causal"):
        causal = graph == "attention_causal"
        scale = 1.0 if not causal else 1 / math.sqrt(x["Q"].shape[-1])
        q, k, v = x["Q"][None], x["K"][None], x["V"][None]
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def sdpa(backend):
            def f():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            return f
        fns["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
        fns["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
        if not causal:
            fns["eager"] = lambda: torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
    out = {}
    for name, fn in list(fns.items()):
        try:
            out[name] = timed(fn)
        except Exception as e:  # a back end missing on this machine is reported, not fatal
            out[name] = "unavailable: %s" % str(e).splitlines()[0][:80]
    if use_compile and "eager" in fns:
        try:
            c = torch.compile(fns["eager"])
            c()
            out["torch.compile"] = timed(c)
        except Exception as e:
            out["torch.compile"] = "unavailable: %s" % str(e).splitlines()[0][:80]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="build/gpu/cases.txt")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--compile", action="store_true", help="also time torch.compile of the eager anchors")
    ap.add_argument("--profile", action="store_true", help="per-kernel times of each bench case (PyTorch profiler)")
    args = ap.parse_args()
    timed.flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    print("device:", torch.cuda.get_device_name(), "seed:", args.seed, flush=True)
    results = []
    for row in open(args.cases):
        if not row.strip() or row.startswith("#"):
            continue
        case = Case(row)
        try:
            r = run_case(case, args.seed, case.variant == "bench", args.compile, args.profile and case.variant == "bench")
        except Exception as e:
            r = {"variant": case.variant, "graph": case.graph, "error": float("inf"), "passed": False, "ms": None,
                 "failure": str(e)[:200]}
        results.append(r)
        print(json.dumps(r), flush=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("\n%-8s %-18s %-10s %-5s %10s  %s" % ("variant", "graph", "rel.err", "ok", "ms", "anchors (ms)"))
    for r in results:
        anchors = " ".join("%s=%s" % (k, ("%.4f" % v) if isinstance(v, float) else "n/a")
                           for k, v in r.get("anchors", {}).items())
        ms = ("%.4f" % r["ms"]) if r.get("ms") else "-"
        print("%-8s %-18s %-10.2e %-5s %10s  %s" % (r["variant"], r["graph"], r["error"], "PASS" if r["passed"] else "FAIL",
                                                   ms, anchors or r.get("failure", "")))
    for r in results:
        for name, us in r.get("kernels", []):
            print("  %-18s %8.2f us  %s" % (r["graph"], us, name))
    failed = sum(not r["passed"] for r in results)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
