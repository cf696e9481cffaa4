"""decode.py — a decode step with a KV cache (bench/graphs/decoder_decode.yaml: one new token per sequence,
its key and value appended into the caches in place) timed on the GPU, one size per --case:

  ours         the header `tsopt tune` chose (its record's library), called through its C ABI <graph>_run
  ours graph   the same through <graph>_graph_run (the header's CUDA-graph helper: captured once, replayed)
  eager        PyTorch eager, the graph op by op at its own dtypes (bench/gpu_check.py's TypedGraph), the
               caches updated in place as the graph says
  compile      torch.compile of that function (default mode)
  reduce-overhead
               torch.compile mode="reduce-overhead" (CUDA graphs), the caches marked static addresses as a
               serving stack's static KV cache is, so that the in-place update is captured

Validation: before our call the caches hold random values with NaN in the rows the step writes, and the
output buffer is NaN; afterwards the output and both whole caches are compared with bench/graphref.py
evaluated in fp32 on copies of the inputs (relative L2 <= 1e-2; a NaN fails). Every anchor's output is
compared too. Times are medians of 20 CUDA-event timings after warm-up, the L2 flushed before each
(gpu_check.timed). The floor is tsopt check's minimum bytes (weights, the valid cache rows and the new rows
read once, the output and the new rows written) at the DRAM bandwidth of costmodel/h200.yaml.

Usage: python3 bench/decode.py --case NAME=RECORD.json [--case ...] [--out DIR] [--graph YAML]
"""
import argparse
import ctypes
import json
import os
import re
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy  # noqa: E402
import gpu_check as gc  # noqa: E402
import graphref  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def dram_bytes_per_s():
    for line in open(os.path.join(ROOT, "costmodel", "h200.yaml")):
        m = re.match(r"\s*dram_bytes_per_s:\s*([0-9.eE+]+)", line)
        if m:
            return float(m.group(1))
    raise RuntimeError("costmodel/h200.yaml has no dram_bytes_per_s")


def check_work(tsopt, yaml_path, dims):
    """(minimum bytes, FLOPs) as `tsopt check --dims` prints them at the sizes `dims` (a dict; may be empty)."""
    arg = ",".join("%s=%d" % kv for kv in dims.items())
    cmd = [tsopt, "check"] + (["--dims", arg] if arg else []) + [yaml_path]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"minimum bytes: ([0-9.]+) (KB|MB|GB)", out)
    f = re.search(r"FLOPs: ([0-9.]+) (MFLOP|GFLOP|TFLOP)", out)
    flops = float(f.group(1)) * {"MFLOP": 1e6, "GFLOP": 1e9, "TFLOP": 1e12}[f.group(2)] if f else 0.0
    return float(m.group(1)) * {"KB": 1e3, "MB": 1e6, "GB": 1e9}[m.group(2)], flops


def inout_rows(g):
    """{cache input: (axis index written, first row, end row)} for every append of the graph (one row at
    size(as) - 1, or a block of `rows` rows ending there)."""
    rows = {}
    for op in g.spec["ops"]:
        if op["op"] == "append":
            cache = op["args"][0]
            shape = next(s for n, _, s in g.inputs if n == cache)
            end = g.sizes[op["as"]]
            rows[cache] = (shape.index(op["axis"]), end - (g.sizes[op["rows"]] if "rows" in op else 1), end)
    return rows


def graph_runner(lib_path, graph, bufs, dims, ws):
    """<graph>_graph_run on a stream of its own (a CUDA graph cannot be captured on the legacy default
    stream), ordered after and before the current stream so that the CUDA-event timing still brackets it."""
    lib = ctypes.CDLL(lib_path)
    fn = getattr(lib, graph + "_graph_run")
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_void_p]
    side = torch.cuda.Stream()

    def call():
        side.wait_stream(torch.cuda.current_stream())
        rc = fn(bufs, dims, ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(side.cuda_stream))
        torch.cuda.current_stream().wait_stream(side)
        if rc != 0:
            raise RuntimeError("%s_graph_run returned CUDA error %d" % (graph, rc))
    call.keep = (lib, side)
    return call


def run_case(name, record_path, yaml_path, tsopt, reps):
    rec = json.load(open(record_path))
    sizes = {k: int(v) for k, v in rec["sizes"].items()}
    chosen = accuracy.chosen_candidate(rec)
    lib_path = chosen["library"] if os.path.isabs(chosen["library"]) else os.path.join(ROOT, chosen["library"])
    g = graphref.Graph(yaml_path, sizes)
    res = {"case": name, "sizes": sizes, "plan": chosen.get("plan"), "predicted_ms": chosen["predicted_s"] * 1e3,
           "tune_measured_ms": (chosen.get("measured_s") or 0) * 1e3, "times_ms": {}, "errors": {}, "notes": {}}
    ins = gc.make_inputs(g, 1)
    rows = inout_rows(g)
    for cache, (ax, first, end) in rows.items():  # the rows this step writes: NaN until it does
        ins[cache].narrow(ax, first, end - first).fill_(float("nan"))
    ref_ins = {n: x.float().clone() for n, x in ins.items()}
    be = graphref.Backend(torch, device="cuda", dtype=torch.float32)
    ref = g.evaluate(be, ref_ins)  # writes the new rows into ref_ins' caches
    layouts = gc.layouts_from_reference(ref)
    want = {n: graphref.ordered(be, ref[n], layouts[n][1]) for n in g.outputs}

    lib = gc.Library(lib_path, rec["graph"])
    ours, outs = lib.bind(g, rec["runtime_dims"], layouts, ins)

    def check_and_time(label, call):
        """call() on NaN outputs and NaN new cache rows, checked against the reference, then timed."""
        for n in g.outputs:
            outs[n].fill_(float("nan"))
        for cache, (ax, first, end) in rows.items():
            ins[cache].narrow(ax, first, end - first).fill_(float("nan"))
        call()
        torch.cuda.synchronize()
        for n in g.outputs:
            res["errors"]["%s %s" % (label, n)] = gc.rel_error(outs[n].reshape(want[n].shape), want[n])
        for cache in rows:
            res["errors"]["%s %s" % (label, cache)] = gc.rel_error(ins[cache], ref_ins[cache])
        res["passed"] = all(e <= gc.TOLERANCE for e in res["errors"].values())
        res["times_ms"][label] = gc.timed(call, reps)

    check_and_time("ours", ours)
    dims, ws, bufs, _ = ours.keep
    try:  # the captured graph must write them too
        check_and_time("ours graph", graph_runner(lib_path, rec["graph"], bufs, dims, ws))
    except Exception as e:
        res["notes"]["ours graph"] = str(e)[:200]

    eager = gc.graph_eager(yaml_path, sizes, ins, layouts)
    first = g.outputs[0]
    fns = [("eager", lambda: eager)]
    fns.append(("compile", lambda: torch.compile(eager, dynamic=False)))

    def reduce_overhead():
        for cache in rows:
            torch._dynamo.mark_static_address(ins[cache])
        return torch.compile(eager, mode="reduce-overhead", dynamic=False)
    fns.append(("reduce-overhead", reduce_overhead))
    for label, make in fns:
        try:
            torch._dynamo.reset()
            f = make()
            for _ in range(3):  # reduce-overhead records its CUDA graph after warm-up runs
                out = f()
            torch.cuda.synchronize()
            out = out[0] if isinstance(out, tuple) else out  # graph_eager returns every output, the first first
            res["errors"][label] = gc.rel_error(out.reshape(want[first].shape), want[first])
            res["times_ms"][label] = gc.timed(f, reps)
        except Exception as e:
            res["notes"][label] = "unavailable: %s" % str(e)[:300]
    mb, _ = check_work(tsopt, yaml_path, sizes)
    res["min_bytes"] = mb
    res["floor_ms"] = mb / dram_bytes_per_s() * 1e3
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", action="append", required=True, help="NAME=RECORD.json (a tsopt tune record)")
    ap.add_argument("--graph", default=os.path.join(ROOT, "bench", "graphs", "decoder_decode.yaml"))
    ap.add_argument("--tsopt", default=os.environ.get("TSOPT", os.path.join(ROOT, "build", "tsopt")))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=None, help="write DIR/decode.json")
    a = ap.parse_args()
    results, status = [], 0
    for spec in a.case:
        name, path = spec.split("=", 1)
        try:
            r = run_case(name, path, a.graph, a.tsopt, a.reps)
        except Exception as e:
            r = {"case": name, "failed": "%s: %s" % (type(e).__name__, str(e)[:400])}
        results.append(r)
        print(json.dumps(r, indent=1), flush=True)
        status |= not r.get("passed", False)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "decode.json"), "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)
    print("\ndecode step (ms; x = our speedup; floor = minimum bytes at the DRAM bandwidth)")
    print("%-6s %-9s %-9s %-10s %-16s %-16s %-16s %-8s %s" % ("case", "ours", "ours graph", "floor", "eager",
                                                              "compile", "reduce-overhead", "% floor", "max rel.err"))
    for r in results:
        if "failed" in r:
            print("%-6s FAILED %s" % (r["case"], r["failed"]))
            continue
        t = r["times_ms"]
        best = min(v for k, v in t.items() if k.startswith("ours"))

        def anchor(k):
            return "%.4f (%.2fx)" % (t[k], t[k] / best) if k in t else "-"
        print("%-6s %-9.4f %-10s %-10.4f %-16s %-16s %-16s %-8.0f %.1e%s" % (
            r["case"], t["ours"], "%.4f" % t["ours graph"] if "ours graph" in t else "-", r["floor_ms"],
            anchor("eager"), anchor("compile"), anchor("reduce-overhead"), 100 * r["floor_ms"] / best,
            max(r["errors"].values()), "" if r["passed"] else "  VALIDATION FAILED"))
    return status


if __name__ == "__main__":
    sys.exit(main())
