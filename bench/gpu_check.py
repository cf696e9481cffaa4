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

Usage: python3 bench/gpu_check.py [--cases build/gpu/cases.txt] [--out DIR] [--seed N] [--compile] [--profile]

The helpers here (timing, inputs, output layouts from a header's banner, loading a library's C ABI,
validation against graphref, the PyTorch anchors) are shared with bench/bench.py, which imports this module.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphref  # noqa: E402

DT = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
TOLERANCE = 1e-2                 # relative L2 of every output against the fp32 reference
FLUSH_BYTES = 256 << 20          # zeroed before each timed run: larger than the H200's 60 MiB L2
DEVICE = "cuda"                  # "cpu" only for bench.py's self-test without a GPU (no events, no flush)


HOST_AHEAD_S = 100e-6          # the least GPU sleep between the flush and a timed call's start event
SLEEP_CYCLES_PER_S = 2.0e9       # GPU clock cycles a second assumed for torch.cuda._sleep (H200: <= 1.98 GHz)


def timing_method(reps=20, warmup=3):
    if DEVICE != "cuda":
        return "median of %d host-clock timings after %d warm-up calls (CPU self-test; no L2 flush)" % (reps, warmup)
    return ("median of %d CUDA-event timings (start/end events around one call on the current stream) after %d "
            "warm-up calls; L2 flushed before each by zeroing a %d MiB buffer (outside the events), then a GPU sleep "
            "at least twice the call's host enqueue time (>= %d us) so that the host has queued the whole call "
            "before the GPU reaches the start event: the events time GPU work, not host dispatch (a timing whose "
            "start event had already completed when the call was queued is redone with the sleep doubled, at most 4 times)"
            % (reps, warmup, FLUSH_BYTES >> 20, HOST_AHEAD_S * 1e6))


def host_enqueue_s(fn, calls=5):
    """The host time to queue one fn() (median of `calls`, each after the stream drained), in seconds."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return statistics.median(times)


def timed(fn, reps=20, warmup=3):
    """Median time of fn() in ms: CUDA events around each call, the L2 flushed before each (see timing_method).

    Host dispatch never counts: after the flush the stream sleeps on the GPU for at least twice the call's
    host enqueue time, so the start event is reached only after the host has queued the call. Without it a
    call whose host side outlasts the flush (torch.compile's guards and wrapper, cuDNN's graph lookup: 40-100
    us on the bench machine's host) was timed with the GPU idle between start and its first kernel, and such
    anchors moved by up to 2x between runs with the host's speed. A timing whose start event had completed by
    the time the call was queued is redone with the sleep doubled (at most 4 times)."""
    for _ in range(warmup):
        fn()
    if DEVICE != "cuda":
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    flush = getattr(timed, "flush", None)
    if flush is None:
        flush = timed.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    ahead_s = max(HOST_AHEAD_S, 2 * host_enqueue_s(fn))
    times = []
    doublings = 0
    while len(times) < reps:
        flush.zero_()
        torch.cuda._sleep(int(ahead_s * SLEEP_CYCLES_PER_S))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        host_behind = start.query()   # the GPU reached start before the call was queued: host time inside
        end.record()
        torch.cuda.synchronize()
        if host_behind and doublings < 4:
            doublings += 1
            ahead_s *= 2
            continue
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def synchronize():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def make_inputs(g, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    out = {}
    for name, dtype, shape in g.inputs:
        sizes = [g.sizes[a] for a in shape]
        x = torch.rand(sizes, generator=gen, device=DEVICE, dtype=torch.float32) * 2 - 1
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


class Library:
    """A shared library built from a generated header: its C ABI `<graph>_run` and `<graph>_workspace`."""

    def __init__(self, path, graph):
        self.path, self.graph = path, graph
        self.lib = ctypes.CDLL(path)
        self.run = getattr(self.lib, graph + "_run")
        self.run.restype = ctypes.c_int
        self.run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p,
                             ctypes.c_void_p]
        self.workspace = getattr(self.lib, graph + "_workspace")
        self.workspace.restype = ctypes.c_size_t
        self.workspace.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        self.fallback = getattr(self.lib, graph + "_fallback", None)  # the last launch's fallback note, or ""
        if self.fallback is not None:
            self.fallback.restype = ctypes.c_char_p

    def bind(self, g, runtime_dims, layouts, ins):
        """Allocates NaN-poisoned outputs and the workspace; returns (call, outs): call() runs the C ABI once
        on the current stream and raises on a non-zero return."""
        dims = (ctypes.c_int64 * max(1, len(runtime_dims)))(*runtime_dims)
        outs = {n: torch.full([g.sizes[a] for a in axes], float("nan"), dtype=DT[dt], device=DEVICE)
                for n, (dt, axes) in layouts.items()}
        ws = torch.empty(max(1, self.workspace(dims)), dtype=torch.uint8, device=DEVICE)
        ptrs = [ins[n].data_ptr() for n, _, _ in g.inputs] + [outs[n].data_ptr() for n in g.outputs]
        bufs = (ctypes.c_void_p * len(ptrs))(*ptrs)
        stream = torch.cuda.current_stream().cuda_stream if DEVICE == "cuda" else 0
        run, graph = self.run, self.graph

        def call():
            rc = run(bufs, dims, ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(stream))
            if rc != 0:
                raise RuntimeError("%s_run returned CUDA error %d" % (graph, rc))

        call.keep = (dims, ws, bufs, outs)  # alive as long as call is
        return call, outs


def reference(g, ins):
    """(backend, {output: graphref.Tensor}) — the graph evaluated by PyTorch in fp32 on DEVICE."""
    be = graphref.Backend(torch, device=DEVICE, dtype=torch.float32)
    return be, g.evaluate(be, {n: x.float() for n, x in ins.items()})


def layouts_from_reference(ref):
    """name -> (dtype, [axes]) as graphref orders the outputs (the checker's order): a header-less fallback."""
    return {n: (t.dtype, list(t.axes)) for n, t in ref.items()}


def rel_error(got, want):
    """‖got − want‖₂ / ‖want‖₂ in fp32; inf for any NaN (or an inf where the reference has none)."""
    got, want = got.float(), want.float()
    if torch.isnan(got).any() or torch.isinf(got).any() != torch.isinf(want).any():
        return float("inf")
    return (torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want).clamp_min(1e-30)).item()


def worst_error(g, outs, layouts, be, ref):
    """The largest rel_error over the graph's outputs, each compared in its layout."""
    worst = 0.0
    for n in g.outputs:
        want = graphref.ordered(be, ref[n], layouts[n][1])
        worst = max(worst, rel_error(outs[n], want))
    return worst


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
    lib = Library(case.lib, case.graph)
    dyn = [v for k, v in case.runtime.items()]
    layouts = output_layouts(case.header)
    ins = make_inputs(g, seed)
    ours, outs = lib.bind(g, dyn, layouts, ins)
    ours()
    synchronize()
    be, ref = reference(g, ins)
    worst = worst_error(g, outs, layouts, be, ref)
    del ref
    ms = timed(ours)
    result = {"variant": case.variant, "graph": case.graph, "sizes": g.sizes, "error": worst,
              "passed": worst <= TOLERANCE, "ms": ms}
    note = (lib.fallback() or b"").decode() if lib.fallback is not None else ""  # NULL: every fast path ran
    if note:
        result["fallback"] = note
    if profile:
        result["kernels"] = kernel_times(ours)
    if anchors:
        result["anchors"] = time_anchors(case.graph, ins, use_compile)
    return result


# ---- anchors --------------------------------------------------------------------------------------------
class TypedGraph(graphref.Graph):
    """graphref.Graph evaluated at each tensor's own dtype (fp16 tensors in fp16, fp32 tables in fp32): the
    graph as written, run op by op by PyTorch eager. Use with a float32 Backend (constants and iotas are made
    in fp32, then rounded to their declared dtype)."""

    def run(self, be, op, args, env):
        super().run(be, op, args, env)
        t = env[op["name"]]
        want = DT.get(t.dtype)
        if want is not None and t.data.dtype != want:
            t.data = t.data.to(want)


def graph_eager(yaml_path, sizes, x, layouts=None):
    """A function running the whole graph in PyTorch eager at its own dtypes (TypedGraph); returns every
    output, each in its layout (from `layouts`, else graphref's order): the first alone, or a tuple of all
    in the graph's order when there are several — so that torch.compile of it computes them all, as ours
    does, rather than dropping what the caller does not return."""
    tg = TypedGraph(yaml_path, sizes)
    be = graphref.Backend(torch, device=DEVICE, dtype=torch.float32)

    def laid_out(env, name):
        axes = layouts[name][1] if layouts and name in layouts else None
        return graphref.ordered(be, env[name], axes) if axes else env[name].data

    def f():
        env = tg.evaluate(be, x)
        outs = tuple(laid_out(env, name) for name in tg.outputs)
        return outs[0] if len(outs) == 1 else outs
    return f


# Attention bench graphs: (causal, scaled by 1/sqrt(d_h), tanh soft-cap of the scores or None).
ATTENTION_GRAPHS = {"attention": (False, False, None), "attention_causal": (True, True, None),
                    "attention_gqa": (True, True, None), "attention_d64": (True, True, None),
                    "attention_d256": (True, True, None), "attention_bf16": (False, True, None),
                    "attention_cross": (False, True, None), "attention_softcap": (True, True, 50.0),
                    "attention_batch_gqa": (True, True, None), "attention_mask": (False, True, None)}
# Attention graphs with a mask input (its name): SDPA's attn_mask; flash takes none, so the memory-efficient
# back end stands in for it
ATTENTION_MASKS = {"attention_mask": "M"}


def flex_softcap(q, k, v, scale, cap, causal, gqa):
    """(fn, note): FlexAttention (torch.compile'd, as it is meant to run) with s = cap·tanh(s/cap) as its
    score_mod and the causal mask as a block mask (fully masked blocks skipped)."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    mask = None
    if causal:
        mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, q.shape[-2], k.shape[-2],
                                 device=q.device)
    flex = torch.compile(flex_attention)
    return (lambda: flex(q, k, v, score_mod=softcap, block_mask=mask, scale=scale, enable_gqa=gqa),
            "torch.compile(flex_attention), score_mod cap*tanh(s/cap)%s" % (", causal block mask" if causal else ""))


def anchor_fns(graph, x, yaml_path=None, sizes=None, layouts=None):
    """(fns, notes): name -> zero-argument function returning the graph's first output, or a tuple of outputs
    with it first (in the same element order as ours), and name -> a note on how it was built. Names: "eager" (idiomatic PyTorch, or the
    graph as written via TypedGraph where there is no idiomatic version and yaml_path is given), "cublas"
    (torch.matmul), "sdpa_flash" and "sdpa_cudnn" (scaled_dot_product_attention restricted to one back end)."""
    fns, notes = {}, {}
    if graph == "matmul":
        fns["cublas"] = lambda: x["X"] @ x["W"]
        fns["eager"] = lambda: torch.matmul(x["X"], x["W"])
        notes["eager"] = "torch.matmul, as cublas"
    elif graph in ("swiglu", "swiglu_decode"):
        fns["eager"] = lambda: (x["X"] @ x["W_up"]) * F.silu(x["X"] @ x["W_gate"])
    elif graph == "rmsnorm":
        fns["eager"] = lambda: F.rms_norm(x["X"], (x["X"].shape[-1],), eps=1e-6) @ x["W"]
    elif graph in ("rmsnorm_mlp", "rmsnorm_mlp_decode"):
        def f():
            n = F.rms_norm(x["X"], (x["X"].shape[-1],), eps=1e-6)
            return (n @ x["W_up"]) * (n @ x["W_gate"])
        fns["eager"] = f
    elif graph == "layernorm_mlp":
        def f():
            n = F.layer_norm(x["X"], (x["X"].shape[-1],), x["ln_g"], x["ln_b"], eps=1e-5)
            return F.gelu(n @ x["W1"] + x["b1"], approximate="tanh") @ x["W2"] + x["b2"]
        fns["eager"] = f
    elif graph == "residual_rmsnorm":  # both outputs, as the next layer needs the residual stream too
        def f():
            h = x["X"] + x["R"]
            return F.rms_norm(h, (h.shape[-1],), x["g"], eps=1e-5), h
        fns["eager"] = f
    elif graph == "lora":
        fns["eager"] = lambda: x["X"] @ x["W"] + 2.0 * ((x["X"] @ x["A"]) @ x["B"])
    elif graph == "gemm_gelu":
        fns["eager"] = lambda: F.gelu(x["X"] @ x["W"] + x["b"], approximate="tanh")
    elif graph == "gemm_mish":
        fns["eager"] = lambda: F.mish(F.mish(x["X"] @ x["W"] + x["bias"]))
    elif graph == "gemm_groupnorm":
        fns["eager"] = lambda: F.silu(F.group_norm(x["X"] @ x["W"] + x["b"], 32, x["gn_g"], x["gn_b"], eps=1e-5))
    elif graph == "linear_bf16":
        fns["eager"] = lambda: F.gelu(x["X"] @ x["W"] + x["c"], approximate="tanh")
    elif graph == "gemm_layernorm":
        fns["eager"] = lambda: F.layer_norm(x["X"] @ x["W"] + x["b"] + x["R"], (x["R"].shape[-1],), x["ln_g"], x["ln_b"],
                                            eps=1e-12)
    elif graph == "gemm_logsumexp":
        fns["eager"] = lambda: torch.logsumexp((x["X"] @ x["W"]).float(), dim=-1)
    elif graph == "qknorm_attention":  # rms_norm of Q and K, then causal SDPA (each back end, and the math one)
        from torch.nn.attention import SDPBackend, sdpa_kernel
        d_h = x["Q"].shape[-1]

        def qk_sdpa(backend):
            def f():
                q = F.rms_norm(x["Q"], (d_h,), x["g_q"], eps=1e-6)[None]
                k = F.rms_norm(x["K"], (d_h,), x["g_k"], eps=1e-6)[None]
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, x["V"][None], is_causal=True, scale=1 / math.sqrt(d_h))
            return f
        fns["sdpa_flash"] = qk_sdpa(SDPBackend.FLASH_ATTENTION)
        fns["sdpa_cudnn"] = qk_sdpa(SDPBackend.CUDNN_ATTENTION)
        notes["sdpa_flash"] = notes["sdpa_cudnn"] = "F.rms_norm of Q and K, then SDPA on that back end"
        fns["eager"] = qk_sdpa(SDPBackend.MATH)
        notes["eager"] = "F.rms_norm of Q and K, then SDPA's math back end"
    elif graph in ATTENTION_GRAPHS:
        causal, scaled, cap = ATTENTION_GRAPHS[graph]
        d_h = x["Q"].shape[-1]
        scale = 1 / math.sqrt(d_h) if scaled else 1.0
        if x["Q"].dim() == 5:  # batched GQA: Q [b, kv_h, grp, t_q, d_h] -> b batches of kv_h·grp query heads
            nb, kv_h, grp, t_q = x["Q"].shape[:4]
            q = x["Q"].reshape(nb, kv_h * grp, t_q, d_h)
            k, v = x["K"], x["V"]
        elif x["Q"].dim() == 4:  # GQA: Q [kv_h, grp, t_q, d_h] -> 1 batch of kv_h·grp query heads, kv-major
            kv_h, grp, t_q = x["Q"].shape[:3]
            q = x["Q"].reshape(1, kv_h * grp, t_q, d_h)
            k, v = x["K"][None], x["V"][None]
        else:
            grp = 1
            q = x["Q"][None]
            k, v = x["K"][None], x["V"][None]
        from torch.nn.attention import SDPBackend, sdpa_kernel

        mask = x[ATTENTION_MASKS[graph]] if graph in ATTENTION_MASKS else None

        def sdpa(backend, kk, vv, **kw):
            if mask is not None:
                kw["attn_mask"] = mask
                if backend == SDPBackend.FLASH_ATTENTION:
                    backend = SDPBackend.EFFICIENT_ATTENTION

            def f():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, kk, vv, is_causal=causal, scale=scale, **kw)
            return f
        if mask is not None:
            notes["sdpa_flash"] = "attn_mask: SDPA's memory-efficient back end (flash takes no mask)"
        if cap is not None:  # SDPA cannot soft-cap its scores: FlexAttention with a score_mod is the anchor
            try:
                fns["flex"], notes["flex"] = flex_softcap(q, k, v, scale, cap, causal, grp > 1)
            except Exception as e:  # no FlexAttention in this PyTorch: reported, not fatal
                notes["flex"] = "unavailable: %s" % (str(e).splitlines()[0][:80] if str(e) else type(e).__name__)
        for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            if cap is not None:
                break
            if grp == 1:
                fns[name] = sdpa(backend, k, v)
                continue
            f = sdpa(backend, k, v, enable_gqa=True)
            try:
                f()
                synchronize()
                fns[name] = f
                notes[name] = "enable_gqa=True"
            except Exception as e:  # this back end has no GQA: K and V repeated per query head, outside the timing
                why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                fns[name] = sdpa(backend, k.repeat_interleave(grp, dim=1), v.repeat_interleave(grp, dim=1))
                notes[name] = "K/V repeat_interleave'd to %d heads beforehand (enable_gqa failed: %s)" % (kv_h * grp, why)
        if graph == "attention":
            fns["eager"] = lambda: torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        elif graph == "attention_causal":
            t_q, t_kv = q.shape[-2], k.shape[-2]
            future = torch.ones(t_q, t_kv, dtype=torch.bool, device=q.device).triu(1)  # a buffer, as in nanoGPT
            fns["eager"] = lambda: torch.softmax((q @ k.transpose(-1, -2) * scale).masked_fill(future, float("-inf")),
                                                 dim=-1) @ v
            notes["eager"] = "causal mask precomputed (a module buffer)"
    if "eager" not in fns and yaml_path is not None:
        fns["eager"] = graph_eager(yaml_path, sizes, x, layouts)
        notes["eager"] = "graphref's torch backend running the graph as written at its own dtypes (no idiomatic version)"
    return fns, notes


# The anchors gpu_check times per graph (bench.py times every one anchor_fns gives).
CHECK_ANCHORS = {"matmul": ["cublas"], "swiglu": ["eager"], "rmsnorm": ["eager"], "rmsnorm_mlp": ["eager"],
                 "swiglu_decode": ["eager"], "rmsnorm_mlp_decode": ["eager"],
                 "attention": ["sdpa_flash", "sdpa_cudnn", "eager"], "attention_causal": ["sdpa_flash", "sdpa_cudnn"],
                 "attention_gqa": ["sdpa_flash", "sdpa_cudnn"], "attention_d64": ["sdpa_flash", "sdpa_cudnn"],
                 "attention_d256": ["sdpa_flash", "sdpa_cudnn"], "attention_bf16": ["sdpa_flash", "sdpa_cudnn"],
                 "attention_cross": ["sdpa_flash", "sdpa_cudnn"], "attention_softcap": ["flex"],
                 "attention_batch_gqa": ["sdpa_flash", "sdpa_cudnn"], "attention_mask": ["sdpa_flash", "sdpa_cudnn"]}


def time_anchors(graph, x, use_compile):
    """Idiomatic PyTorch versions of the seed workloads, timed like ours."""
    if graph not in CHECK_ANCHORS:
        return {}
    fns, _ = anchor_fns(graph, x)
    fns = {k: fns[k] for k in CHECK_ANCHORS[graph] if k in fns}
    out = {}
    for name, fn in list(fns.items()):
        try:
            out[name] = timed(fn)
        except Exception as e:  # a back end missing on this machine is reported, not fatal
            out[name] = "unavailable: %s" % str(e).splitlines()[0][:80]
    if use_compile and "eager" in fns:
        try:
            torch._dynamo.reset()   # per case, static shapes: as bench/bench.py (shared code objects recompile)
            c = torch.compile(fns["eager"], dynamic=False)
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
    timed.flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
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
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("\n%-8s %-18s %-10s %-5s %10s  %s" % ("variant", "graph", "rel.err", "ok", "ms", "anchors (ms)"))
    for r in results:
        anchors = " ".join("%s=%s" % (k, ("%.4f" % v) if isinstance(v, float) else "n/a")
                           for k, v in r.get("anchors", {}).items())
        ms = ("%.4f" % r["ms"]) if r.get("ms") else "-"
        print("%-8s %-18s %-10.2e %-5s %10s  %s%s" % (r["variant"], r["graph"], r["error"], "PASS" if r["passed"] else "FAIL",
                                                     ms, anchors or r.get("failure", ""),
                                                     "  [mma.sync fallback]" if r.get("fallback") else ""))
    for r in results:
        for name, us in r.get("kernels", []):
            print("  %-18s %8.2f us  %s" % (r["graph"], us, name))
    failed = sum(not r["passed"] for r in results)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
