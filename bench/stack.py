"""stack.py — a stack of N decoder layers (bench/make_stack.py over bench/graphs/decoder_layer.yaml) timed on
the GPU, ours against PyTorch with the same weights:

  ours          the header `tsopt tune` chose for the whole stack (its record's library), through its C ABI
  ours graph    the same through <graph>_graph_run (the header's CUDA-graph helper)
  eager         PyTorch eager, one layer's graph op by op at its own dtypes (gpu_check.TypedGraph), called
                once per layer with that layer's weights, the residual stream passed on
  compile       torch.compile (default mode) of that one-layer function, called once per layer: how a model
                of identical layers is compiled in practice ("regional compilation": one compile serves
                every layer; dynamo guards on shapes, so the N calls reuse it)
  max-autotune  the same with mode="max-autotune-no-cudagraphs" (bench.py's max-autotune anchor)

Validation: our output (NaN before the call) and every anchor's against graphref evaluating the whole
stack in fp32 on the GPU (relative L2 <= 1e-2). Times are medians of CUDA-event timings after warm-up, the
L2 flushed before each (gpu_check.timed). The floor is max(FLOPs at the dense fp16 tensor peak, minimum bytes
at the DRAM bandwidth) from `tsopt check` and costmodel/h200.yaml.

With --clocks, the GPU's SM clock, power and temperature are sampled (nvidia-smi, every 100 ms) while each
line is timed and their medians printed beside it: a long run at full tensor rate can hold a lower clock than
a short one. --only-ours times our header alone. The graph may also be the layer itself (one layer, its
inputs unsuffixed).

Usage: python3 bench/stack.py --record RECORD.json --graph STACK.yaml [--layer bench/graphs/decoder_layer.yaml]
       [--reps 10] [--out DIR] [--no-autotune] [--autotune-budget-s 240] [--only-ours] [--clocks]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy  # noqa: E402
import bench  # noqa: E402  (time_limit: a compile's budget)
import decode  # noqa: E402
import gpu_check as gc  # noqa: E402
import graphref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TENSOR_PEAK = 989e12  # dense fp16 wgmma FLOP/s of the H200 (the physical ceiling README's floors use)


def floor_ms(tsopt, yaml_path, spec, sizes):
    """(floor ms, minimum bytes, FLOPs) from `tsopt check` at the graph's dynamic sizes (the others follow)."""
    dynamic = {a: sizes[a] for a, v in spec["axes"].items() if isinstance(v, dict) and v.get("dynamic") and a in sizes}
    mb, flops = decode.check_work(tsopt, yaml_path, dynamic)
    return max(mb / decode.dram_bytes_per_s(), flops / TENSOR_PEAK) * 1e3, mb, flops


def layer_count(stack_graph, layer_graph):
    """Layers in the stack: its copies of the layer's first weight (1 when the graph is the layer itself)."""
    first = layer_graph.inputs[1][0]
    names = [name for name, _, _ in stack_graph.inputs]
    return 1 if first in names else sum(1 for name in names if re.fullmatch(re.escape(first) + r"_\d+", name))


def layer_weights(layer_graph, stack_inputs, n):
    """Per layer i, {layer input name: the stack's tensor} for every input but the residual stream."""
    names = [name for name, _, _ in layer_graph.inputs[1:]]
    if names[0] in stack_inputs:
        return [{w: stack_inputs[w] for w in names}]
    return [{w: stack_inputs["%s_%d" % (w, i)] for w in names} for i in range(n)]


class ClockLog:
    """nvidia-smi sampling the SM clock (MHz), power (W) and temperature (C) every 100 ms while open."""

    def __enter__(self):
        self.p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                                   "--format=csv,noheader,nounits", "-lms", "100"], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        out, _ = self.p.communicate()
        rows = []
        for line in out.splitlines():
            try:
                rows.append([float(v) for v in line.split(",")])
            except ValueError:
                pass
        self.median = [sorted(col)[len(col) // 2] for col in zip(*rows)] if rows else None
        return False


def chained(layer_fn, stream_name, weights):
    """A function running the layers in turn, each on the previous one's output."""
    def run(x):
        for w in weights:
            x = layer_fn(dict(w, **{stream_name: x}))
        return x
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--record", required=True, help="the tsopt tune record of the stack")
    ap.add_argument("--graph", required=True, help="the stack's YAML (bench/make_stack.py)")
    ap.add_argument("--layer", default=os.path.join(ROOT, "bench", "graphs", "decoder_layer.yaml"))
    ap.add_argument("--tsopt", default=os.environ.get("TSOPT", os.path.join(ROOT, "build", "tsopt")))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None, help="write DIR/stack.json")
    ap.add_argument("--no-autotune", action="store_true")
    ap.add_argument("--compile-budget-s", type=float, default=120)
    ap.add_argument("--autotune-budget-s", type=float, default=240)
    ap.add_argument("--only-ours", action="store_true", help="time our header only (no PyTorch anchors)")
    ap.add_argument("--clocks", action="store_true", help="sample the SM clock and power while timing")
    a = ap.parse_args()

    rec = json.load(open(a.record))
    sizes = {k: int(v) for k, v in rec["sizes"].items()}
    chosen = accuracy.chosen_candidate(rec)
    lib_path = chosen["library"] if os.path.isabs(chosen["library"]) else os.path.join(ROOT, chosen["library"])
    g = graphref.Graph(a.graph, sizes)
    lg = gc.TypedGraph(a.layer, sizes)
    n = layer_count(g, lg)
    res = {"graph": rec["graph"], "layers": n, "sizes": sizes, "plan": chosen.get("plan"),
           "predicted_ms": chosen["predicted_s"] * 1e3, "tune_measured_ms": (chosen.get("measured_s") or 0) * 1e3,
           "times_ms": {}, "errors": {}, "compile_s": {}, "notes": {}, "clocks": {}}

    ins = gc.make_inputs(g, 1)
    be, ref = gc.reference(g, ins)
    layouts = gc.layouts_from_reference(ref)
    out_name = g.outputs[0]
    want = graphref.ordered(be, ref[out_name], layouts[out_name][1])
    del ref
    torch.cuda.empty_cache()

    lib = gc.Library(lib_path, rec["graph"])
    ours, outs = lib.bind(g, rec["runtime_dims"], layouts, ins)

    def check_and_time(label, call, result):
        out = call()
        torch.cuda.synchronize()
        got = result(out)
        res["errors"][label] = gc.rel_error(got.reshape(want.shape), want)
        clocks = ""
        if a.clocks:
            with ClockLog() as log:
                res["times_ms"][label] = gc.timed(call, a.reps)
            if log.median:
                res["clocks"][label] = {"sm_mhz": log.median[0], "power_w": log.median[1], "temp_c": log.median[2]}
                clocks = "  SM %.0f MHz, %.0f W, %.0f C (medians while timed)" % tuple(log.median)
        else:
            res["times_ms"][label] = gc.timed(call, a.reps)
        print("  %-13s %9.3f ms  rel.err %.1e%s" % (label, res["times_ms"][label], res["errors"][label], clocks),
              flush=True)

    for name in g.outputs:
        outs[name].fill_(float("nan"))
    check_and_time("ours", ours, lambda _: outs[out_name])
    dims, ws, bufs, _ = ours.keep
    try:
        outs[out_name].fill_(float("nan"))
        check_and_time("ours graph", decode.graph_runner(lib_path, rec["graph"], bufs, dims, ws),
                       lambda _: outs[out_name])
    except Exception as e:
        res["notes"]["ours graph"] = str(e)[:200]

    stream = lg.inputs[0][0]
    lbe = graphref.Backend(torch, device="cuda", dtype=torch.float32)
    layer_out = lg.outputs[0]

    stream_axes = lg.inputs[0][2]

    def layer_fn(x):  # the residual stream comes back in the layer input's axis order
        return graphref.ordered(lbe, lg.evaluate(lbe, x)[layer_out], stream_axes)

    weights = layer_weights(lg, ins, n)
    x0 = ins[stream]
    anchors = [] if a.only_ours else [("eager", None, None)]
    if not a.only_ours:
        anchors.append(("compile", "default", a.compile_budget_s))
    if not a.no_autotune and not a.only_ours:
        anchors.append(("max-autotune", "max-autotune-no-cudagraphs", a.autotune_budget_s))
    for label, mode, budget in anchors:
        try:
            torch._dynamo.reset()
            fn = layer_fn if mode is None else torch.compile(layer_fn, mode=None if mode == "default" else mode,
                                                             dynamic=False)
            run = chained(fn, stream, weights)
            t0 = time.time()
            if budget:
                with bench.time_limit(budget):
                    run(x0)
                    torch.cuda.synchronize()
                res["compile_s"][label] = round(time.time() - t0, 1)
            check_and_time(label, lambda: run(x0), lambda out: out)
        except bench.BudgetExceeded:
            res["notes"][label] = "skipped: compiling took over %.0f s" % budget
            print("  %-13s %s" % (label, res["notes"][label]), flush=True)
        except Exception as e:
            res["notes"][label] = "unavailable: %s" % str(e)[:300]
            print("  %-13s %s" % (label, res["notes"][label]), flush=True)

    res["floor_ms"], res["min_bytes"], res["flops"] = floor_ms(a.tsopt, a.graph, g.spec, sizes)
    res["passed"] = all(e <= gc.TOLERANCE for e in res["errors"].values()) and "ours" in res["errors"]
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "stack.json"), "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "result": res}, f, indent=1)
    t = res["times_ms"]
    best = min(v for k, v in t.items() if k.startswith("ours")) if any(k.startswith("ours") for k in t) else None
    print("\n%d-layer stack (%s; ms; x = our speedup; floor = max(FLOPs at %.0f TFLOP/s, bytes at DRAM rate))"
          % (n, ", ".join("%s=%d" % kv for kv in sizes.items() if kv[0] == "t"), TENSOR_PEAK / 1e12))
    print("%-13s %-12s %s" % ("", "ms", "vs ours"))
    for k, v in t.items():
        print("%-13s %-12.3f %s" % (k, v, "" if k.startswith("ours") or best is None else "%.2fx" % (v / best)))
    for k, v in res["notes"].items():
        print("%-13s %s" % (k, v))
    if best:
        print("floor %.3f ms: ours at %.0f%%; predicted %.3f ms; max rel.err %.1e%s" % (
            res["floor_ms"], 100 * res["floor_ms"] / best, res["predicted_ms"], max(res["errors"].values()),
            "" if res["passed"] else "  VALIDATION FAILED"))
    return 0 if res["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
