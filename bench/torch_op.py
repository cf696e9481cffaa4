"""torch_op.py — validates and times python/tsopt_torch.py's PyTorch operator for every bench graph (H200).

For each header generated/<graph>.cuh (the bench sizes; one command on the GPU machine):
  - builds the operator (tsopt_torch.build, all graphs at once) and a ctypes library of the same kernels;
  - validates the op's outputs against bench/graphref.py in fp32 (relative L2 at most 1e-2, as gpu_check)
    and requires them bit-identical to the C ABI called through ctypes; graphs with a dynamic axis are
    validated again at an odd size (the op reads it from the tensors);
  - checks the error for a wrong-size input (a clear message, no launch);
  - runs it inside torch.compile(fullgraph=True), on a second stream, captured in a CUDA graph and replayed,
    and again after release_workspaces(), each compared with eager bit for bit (the op keeps one workspace
    per device and stream, and allocates one afresh under capture);
  - times, per call, the host time of the raw C ABI and of the operator through the dispatcher, each in a C++
    loop, and from Python of the op, of an ATen op (PyTorch's own per-call cost) and of ctypes (each call
    with the GPU idle, the median of 200), and the GPU time (gpu_check.timed) of op and ctypes.
  - places that overhead: the op's checks and allocations alone (prep), the dispatcher alone (an op of the
    same arguments that does nothing), and the overhead itself timed in pairs — each iteration calls the raw
    C ABI and the op once, alternating which goes first, and keeps the difference (two loops timed apart
    moved by 2x between runs 35 and 38, more than the overhead);
Prints one line per graph and writes build/torch_op/results.json. Exit status 1 when any check fails or
the operator's per-call overhead over the raw C ABI (both called from C++, timed in pairs) is 5 us or more.

Usage: python3 bench/torch_op.py [--headers generated] [--graphs a,b,...] [--jobs N] [--prepare]
--prepare (no GPU needed): only the nvcc builds — every header's kernels object and ctypes library into
build/torch_op — so the GPU machine, given build/torch_op, compiles just the C++ bindings.
"""

import argparse
import concurrent.futures
import faulthandler
import json
import os
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import gpu_check  # noqa: E402
import decode  # noqa: E402  (inout_rows: the rows an append writes)
import graphref  # noqa: E402
import tsopt_torch  # noqa: E402

OUT = os.path.join(HERE, "..", "build", "torch_op")
ODD_SIZE = 77  # a second size for dynamic axes
OVERHEAD_LIMIT_US = 5.0
# The table's columns: title, key in a graph's result, format
COLUMNS = [("rel err", "rel_err", "%8.2e"), ("raw us", "raw_us", "%8.2f"), ("raw 2nd", "raw_again_us", "%8.2f"),
           ("op C++", "dispatch_us", "%8.2f"), ("prep", "prep_us", "%8.2f"), ("dispatch", "noop_us", "%8.2f"),
           ("overhead", "overhead_us", "%8.2f"), ("alloc", "alloc_us", "%8.2f"), ("launch+", "launch_extra_us", "%8.2f"),
           ("after", "after_us", "%8.2f"), ("ovh poll", "overhead_poll_us", "%8.2f"), ("queued", "queued_us", "%8.2f"), ("op py", "op_us", "%8.2f"), ("aten py", "aten_us", "%8.2f"),
           ("ctypes", "ctypes_us", "%8.2f"), ("compiled", "compiled_us", "%8.2f"), ("op ms", "op_ms", "%8.4f"),
           ("ctypes ms", "ctypes_ms", "%8.4f")]


def build_ctypes(header, name):
    """A shared library of the header's C ABI for ctypes, linked from the kernels object tsopt_torch.build made."""
    obj = tsopt_torch.kernels_object(header)
    so = os.path.join(OUT, "lib%s.so" % name)
    nvcc = os.environ.get("TSOPT_NVCC") or os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    subprocess.run([nvcc, tsopt_torch.DEFAULT_ARCH, "-shared", obj, "-o", so], check=True, capture_output=True)
    return so


def host_us(fn, calls=200):
    """Median host time (us) of one call with the GPU idle (synchronised before each, untimed): the call's own
    cost, never the wait for a full launch queue (which made a GPU-bound graph's calls look as long as its
    kernels in run 32)."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def as_dict(g, outs):
    outs = outs if isinstance(outs, (tuple, list)) else (outs,)
    return dict(zip(g.outputs, outs))


def op_args(sig, g, ins):
    """The op's arguments: the graph's inputs (its caches among them), then the sizes no tensor has (s)."""
    return [ins[n] for n, _, _ in g.inputs] + [g.sizes[a] for a in sig.size_args]


def validate(op, sig, yaml_path, header, dims, seed):
    """Worst relative L2 error of the op against graphref at `dims` (None: the header's sizes), over its
    outputs and the caches it updates in place (their new rows NaN before the call, as decode.py does)."""
    g = graphref.Graph(yaml_path, dims)
    ins = gpu_check.make_inputs(g, seed)
    rows = decode.inout_rows(g)
    for cache, (ax, first, end) in rows.items():
        ins[cache].narrow(ax, first, end - first).fill_(float("nan"))
    ref_ins = {n: x.float().clone() for n, x in ins.items()}  # the reference first: the op writes the caches
    be = graphref.Backend(torch, device="cuda", dtype=torch.float32)
    ref = g.evaluate(be, ref_ins)
    outs = as_dict(g, op(*op_args(sig, g, ins)))
    err = gpu_check.worst_error(g, outs, gpu_check.output_layouts(header), be, ref)
    for cache in rows:
        err = max(err, gpu_check.rel_error(ins[cache], ref_ins[cache]))
    return err, g, ins, outs


def wrong_size_message(op, sig, g, ins):
    """The op's error for an input one element too large along an axis of compiled (static) size."""
    args = op_args(sig, g, ins)
    for i, b in enumerate(sig.inputs):
        for d, axis in enumerate(b.axes):
            if isinstance(sig.sizes[sig.root(axis)], int):
                shape = list(args[i].shape)
                shape[d] += 1
                args[i] = torch.empty(shape, dtype=args[i].dtype, device=args[i].device)
                try:
                    op(*args)
                except RuntimeError as e:
                    return str(e).splitlines()[0]
                return None
    return "no static axis"


def stream_and_capture_failures(op, g, args, outs):
    """The op's kept workspaces (one per device and stream; a fresh one under capture) checked: the op on a
    second stream, captured into a CUDA graph and replayed, and called again after release_workspaces() must
    each give eager's outputs bit for bit."""
    failures = []

    def same(got, what):
        got = as_dict(g, got)
        if not all(torch.equal(got[n], outs[n]) for n in g.outputs):
            failures.append("%s differs from eager" % what)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        on_side = op(*args)  # also the warm-up before capture, on a side stream as PyTorch's docs ask
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    same(on_side, "the op on a second stream")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = op(*args)
    graph.replay()
    torch.cuda.synchronize()
    same(captured, "the op captured in a CUDA graph and replayed")
    op.release_workspaces()
    same(op(*args), "the op after release_workspaces()")
    torch.cuda.synchronize()
    del graph
    return failures


def step(name, what):
    """Progress on stderr, flushed: after a crash (faulthandler's traceback) the last line names the step."""
    print("torch_op: %s: %s" % (name, what), file=sys.stderr, flush=True)


def check_graph(name, header, so, seed):
    sig = tsopt_torch.parse_header(header)
    step(name, "load and validate the op")
    yaml_path = os.path.join(HERE, "graphs", name + ".yaml")
    op = tsopt_torch.load(header)
    r = {"graph": name, "failures": []}
    err, g, ins, outs = validate(op, sig, yaml_path, header, None, seed)
    r["rel_err"] = err
    if not err <= gpu_check.TOLERANCE:
        r["failures"].append("rel err %.2e against graphref" % err)
    args = op_args(sig, g, ins)
    runtime = [g.sizes[a] for a in sig.dims]
    step(name, "ctypes library")
    lib = gpu_check.Library(so, name)
    call, couts = lib.bind(g, runtime, gpu_check.output_layouts(header), ins)
    call()
    torch.cuda.synchronize()
    if not all(torch.equal(outs[n], couts[n]) for n in g.outputs):
        r["failures"].append("outputs differ from the C ABI called through ctypes")
    if sig.dims:
        odd = {a: ODD_SIZE for a in sig.dims}
        r["odd_rel_err"], _, _, _ = validate(op, sig, yaml_path, header, odd, seed + 1)
        if not r["odd_rel_err"] <= gpu_check.TOLERANCE:
            r["failures"].append("rel err %.2e at %s" % (r["odd_rel_err"], odd))
    step(name, "wrong-size input")
    msg = wrong_size_message(op, sig, g, ins)
    r["wrong_size_error"] = msg
    if not msg or "tsopt::" + name not in msg:
        r["failures"].append("no clear error for a wrong-size input: %r" % msg)
    step(name, "torch.compile(fullgraph=True)")
    torch._dynamo.reset()  # a fresh dynamo per graph: the same lambda compiled for 23 graphs hit its recompile limit
    compiled = torch.compile(lambda *a: op(*a), fullgraph=True)
    cout = as_dict(g, compiled(*args))
    torch.cuda.synchronize()
    if not all(torch.equal(cout[n], outs[n]) for n in g.outputs):
        r["failures"].append("torch.compile(fullgraph=True) differs from eager")
    step(name, "another stream, CUDA graph capture, released workspaces")
    r["failures"] += stream_and_capture_failures(op, g, args, outs)
    step(name, "raw C ABI loop and host times")
    out_list = [outs[n] for n in g.outputs]
    r["raw_us"] = op.raw(*args, out_list, 200)
    r["dispatch_us"] = op.op_us(*args, 200)
    r["prep_us"] = op.prep_us(*args, 200)  # the op's checks and allocations alone
    r["noop_us"] = op.noop_us(*args, 200)  # the dispatcher alone, for the same arguments
    r["raw_again_us"] = op.raw(*args, out_list, 200)  # the raw loop once more: how much the figures move
    torch.cuda.synchronize()
    r["op_us"] = host_us(lambda: op(*args))
    r["aten_us"] = host_us(lambda: torch.ops.aten.alias.default(args[0]))  # any ATen op's cost from Python
    r["ctypes_us"] = host_us(call)
    r["compiled_us"] = host_us(lambda: compiled(*args))
    # the acceptance figure: op − raw timed in pairs (two loops timed apart moved by 2x between runs 35 and 38)
    # and where it goes (tsopt_torch's <name>_overhead_us): the op's allocations, its launch over raw's, what
    # follows its launch (returns and frees), and op − raw again with the stream polled idle (no sleeping thread)
    (r["overhead_us"], r["alloc_us"], r["launch_extra_us"], r["after_us"],
     r["overhead_poll_us"]) = op.overhead_us(*args, out_list, 400)
    # op − raw with the host ahead of the GPU (calls queued behind a held stream, as in a forward pass)
    r["queued_us"] = op.queued_us(*args, out_list, 400)
    if r["overhead_us"] >= OVERHEAD_LIMIT_US:
        r["failures"].append("op overhead %.2f us over the raw C ABI" % r["overhead_us"])
    r["op_ms"] = gpu_check.timed(lambda: op(*args))
    r["ctypes_ms"] = gpu_check.timed(call)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--headers", default=os.path.join(HERE, "..", "generated"))
    ap.add_argument("--graphs", help="comma-separated (default: every bench/graphs/*.yaml with a header)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prepare", action="store_true", help="only the nvcc builds (no GPU): kernels and ctypes libraries")
    a = ap.parse_args()
    faulthandler.enable()
    os.makedirs(OUT, exist_ok=True)
    os.environ.setdefault("TSOPT_TORCH_CACHE", os.path.join(OUT, "cache"))
    names = a.graphs.split(",") if a.graphs else sorted(
        f[:-5] for f in os.listdir(os.path.join(HERE, "graphs"))
        if f.endswith(".yaml") and os.path.exists(os.path.join(a.headers, f[:-5] + ".cuh")))
    headers = {n: os.path.join(a.headers, n + ".cuh") for n in names}
    t0 = time.time()
    if a.prepare:
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
            for f in [ex.submit(tsopt_torch.build_kernels, headers[n]) for n in names]:
                f.result()
            for f in [ex.submit(build_ctypes, headers[n], n) for n in names]:
                f.result()
        print("prepared %d kernels objects and ctypes libraries in %.0f s (%s)" % (len(names), time.time() - t0, OUT))
        return 0
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:  # subprocesses only: nvcc and g++
        ops = {n: ex.submit(tsopt_torch.build, headers[n]) for n in names}
        for n in names:
            ops[n].result()
        libs = {n: ex.submit(build_ctypes, headers[n], n) for n in names}
        for n in names:
            libs[n].result()
    print("built %d operators and %d ctypes libraries in %.0f s" % (len(names), len(names), time.time() - t0))
    print("%-18s %s  status" % ("graph", " ".join("%8s" % title for title, _, _ in COLUMNS)))
    results, failed = [], 0
    for n in names:
        try:
            r = check_graph(n, headers[n], libs[n].result(), a.seed)
        except Exception as e:  # one graph's failure is reported, the others still run
            r = {"graph": n, "failures": ["%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")]}
        results.append(r)
        failed += bool(r["failures"])
        if "op_ms" in r:
            print("%-18s %s  %s" % (n, " ".join(fmt % r[key] for _, key, fmt in COLUMNS), "; ".join(r["failures"]) or "ok"))
        else:
            print("%-16s %s" % (n, "; ".join(r["failures"])))
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results}, f, indent=1)
    print("%d of %d graphs ok (us: host time of one call, GPU idle, median of 200; raw: the C ABI in a C++ loop; op C++: the "
          "operator through the dispatcher in a C++ loop; prep: its checks and allocations alone; dispatch: an op that does nothing, through the dispatcher; overhead: op C++ minus raw, timed in pairs (the median over 400 iterations that call each once); alloc: the op's checks and allocations before its launch; launch+: its launch minus raw's; after: the op after its launch (returns, frees); ovh poll: overhead with the stream polled idle before each call instead of synchronised; queued: op minus raw with the host ahead of the GPU (calls queued behind a held stream, each timed, pairs alternating); op py: the operator called from "
          "Python; aten py: torch.ops.aten.alias from Python, PyTorch's own cost of any op call; compiled: the op "
          "inside torch.compile(fullgraph=True)); %s" % (len(names) - failed, len(names), os.path.join(OUT, "results.json")))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
