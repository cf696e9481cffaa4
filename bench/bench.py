"""bench.py — the side-by-side H200 benchmark: tsopt's tuned headers against PyTorch, in one process.

Run by bench/h200.sh after `tsopt tune` has written one record per graph (docs/tune-records.md). For every
bench graph (bench/graphs/*.yaml), with one set of seeded inputs (gpu_check.make_inputs):
  - ours: the chosen candidate's library (record["candidates"][chosen-1]["library"], C ABI `<graph>_run`),
    outputs poisoned with NaN, validated against bench/graphref.py in fp32 (relative L2 <= 1e-2, NaN fails);
    every other candidate with status "ok" is validated and re-timed too (column bench_ms), as a check on
    the tuner's own timings;
  - anchors, timed with the same function (gpu_check.timed: median of CUDA events after warm-up, L2 flushed
    before each rep): PyTorch eager (idiomatic; for attention_gqa and decoder_layer the graph as written,
    run op by op by graphref's torch backend at the graph's own dtypes), SDPA flash and cuDNN for the
    attention graphs (FlexAttention for soft-capped scores), cuBLAS (torch.matmul) for matmul, and — once every graph has those — torch.compile
    of the eager function, default mode and then mode="max-autotune-no-cudagraphs", cheapest graphs first,
    each within a time budget (else "skipped (reason)"); each anchor's output is checked against the same
    reference;
  - the roofline floor: max(FLOPs / tensor_peak_flops_per_s, minimum bytes / dram_bytes_per_s) with the rates
    of the record's "costmodel" (the physical dense wgmma rate, not our mma.sync rate; a record from before
    that coefficient takes costmodel/h200.yaml's); FLOPs are the contraction FLOPs, counted over unmasked elements for causal
    attention (accuracy.graph_work), bytes are inputs read once and outputs written once;
then the cost-model accuracy report over every "ok" candidate of every record (accuracy.accuracy_report),
$OUT/h200.json (everything, written after each graph too), $OUT/h200.png (bench/chart.py), and the table,
printed last.

Usage (from the repository root, on the GPU machine):
  python3 bench/bench.py --records $OUT/tune [--headers $OUT/tuned] [--out $OUT] [--at t=1024] [--seed N]
      [--reps 20] [--warmup 3] [--graphs a,b] [--no-compile] [--no-autotune] [--no-candidates]
      [--compile-budget-s 60] [--autotune-budget-s 90] [--deadline EPOCH_S]
Environment (defaults of the options above): BENCH_COMPILE=0, BENCH_AUTOTUNE=0, COMPILE_BUDGET_S,
AUTOTUNE_BUDGET_S, BENCH_DEADLINE (a wall-clock time, seconds since the epoch, by which everything must be
written: compiles that do not fit are reported as "skipped (reason)"), BENCH_SEED.
Exit status: 0 when every graph with a record validated, 1 otherwise.
"""

import argparse
import contextlib
import datetime
import glob
import json
import math
import os
import signal
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import accuracy  # noqa: E402

ANCHORS = ["eager", "torch.compile", "torch.compile max-autotune", "sdpa_flash", "sdpa_cudnn", "flex", "cublas"]
AUTOTUNE_MODE = "max-autotune-no-cudagraphs"
ANCHOR_LABELS = {"eager": "eager", "torch.compile": "compile", "torch.compile max-autotune": "max-autotune",
                 "sdpa_flash": "SDPA flash", "sdpa_cudnn": "SDPA cuDNN", "flex": "FlexAttention", "cublas": "cuBLAS"}
RESERVE_S = 25        # kept back from the deadline for the accuracy report, the JSON and the chart
MIN_COMPILE_S = 15    # a compile is not started with less than this left


# ---- time budget ---------------------------------------------------------------------------------------
class BudgetExceeded(BaseException):
    """Raised by SIGALRM inside a compile that outran its budget (a BaseException, so that no library's
    `except Exception` swallows it)."""


@contextlib.contextmanager
def time_limit(seconds):
    def handler(signum, frame):
        raise BudgetExceeded()
    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, max(0.001, seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Budget:
    def __init__(self, deadline):
        self.deadline = deadline

    def left(self):
        return None if self.deadline is None else self.deadline - time.time()

    def grant(self, want):
        """Seconds a compile may take: `want`, less if the deadline is nearer; 0 if under MIN_COMPILE_S."""
        left = self.left()
        if left is None:
            return want
        avail = left - RESERVE_S
        return min(want, avail) if avail >= MIN_COMPILE_S else 0


# ---- helpers ---------------------------------------------------------------------------------------------
def parse_dims(s):
    out = {}
    for kv in (s or "").split(","):
        if kv.strip():
            k, v = kv.split("=")
            out[k.strip()] = int(v)
    return out


def resolve(path, *bases):
    """path as given if it exists (absolute or relative to the cwd), else joined to each base in turn."""
    if path is None:
        return None
    if os.path.exists(path):
        return path
    if not os.path.isabs(path):
        for b in bases:
            p = os.path.join(b, path)
            if os.path.exists(p):
                return p
    return None


def short(e):
    s = str(e).strip().splitlines()
    return (s[0] if s else type(e).__name__)[:100]


def load_records(rec_dir):
    """{graph: (path, record)} from every *.json in rec_dir; unreadable files reported, not fatal."""
    out, bad = {}, {}
    for p in sorted(glob.glob(os.path.join(rec_dir, "*.json"))):
        try:
            with open(p) as f:
                rec = json.load(f)
            g = rec.get("graph") or os.path.basename(p)[:-5]
            out[g] = (p, rec)
        except Exception as e:
            bad[os.path.basename(p)[:-5]] = "unreadable record %s: %s" % (p, short(e))
    return out, bad


def physical_tensor_rate(c):
    """The physical dense tensor rate of cost-model coefficients c: tensor_peak_flops_per_s (wgmma; the
    datasheet's until calibrate measures it), else — a model from before it existed — tensor_flops_per_s."""
    return float(c.get("tensor_peak_flops_per_s") or c["tensor_flops_per_s"])


def costmodel_rates(record):
    """(tensor peak FLOP/s, dram_bytes_per_s, source) for the roofline floor: the record's costmodel, else
    costmodel/h200.yaml. The tensor rate is the physical peak, not the rate our mma.sync kernels reach."""
    cm = (record or {}).get("costmodel") or {}
    if cm.get("tensor_peak_flops_per_s") and cm.get("dram_bytes_per_s"):
        return physical_tensor_rate(cm), float(cm["dram_bytes_per_s"]), cm.get("path", "record")
    import yaml
    path = os.path.join(ROOT, "costmodel", "h200.yaml")
    with open(path) as f:
        c = yaml.safe_load(f)["coefficients"]
    if cm.get("dram_bytes_per_s"):  # a record from before the peak coefficient: its bandwidth, the file's peak
        return physical_tensor_rate(c), float(cm["dram_bytes_per_s"]), cm.get("path", "record") + " + costmodel/h200.yaml"
    return physical_tensor_rate(c), float(c["dram_bytes_per_s"]), "costmodel/h200.yaml"


def find_header(graph, headers_dir, library):
    """Our header, for the output layouts: headers_dir/<graph>/<graph>.cuh (bench/tune_all.sh's layout) or
    headers_dir/<graph>.cuh, else a .cuh beside the library."""
    cands = []
    if headers_dir:
        cands += [os.path.join(headers_dir, graph, graph + ".cuh"), os.path.join(headers_dir, graph + ".cuh")]
    if library:
        d = os.path.dirname(library)
        cands += [os.path.join(d, graph + ".cuh")] + sorted(glob.glob(os.path.join(d, "*.cuh")))
    for c in cands:
        if os.path.isfile(c):
            return c
    return None


def is_ms(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


# ---- one graph -------------------------------------------------------------------------------------------
class GraphBench:
    def __init__(self, name, yaml_path, record, record_path, args):
        self.name, self.yaml_path, self.record, self.args = name, yaml_path, record, args
        self.res = {"graph": name, "file": os.path.relpath(yaml_path, ROOT) if yaml_path else None,
                    "record": record_path, "status": "pending", "ours_ms": None, "ours_error": None,
                    "ours_passed": None, "anchors": {}, "anchor_errors": {}, "anchor_notes": {},
                    "compile_s": {}, "speedups": {}, "candidates": []}
        self.eager = None
        self.want = None
        self.ins = None
        self.cands = []

    # -- setup: sizes, inputs, reference, layouts
    def setup(self, gc):
        import graphref
        rec, args = self.record, self.args
        if rec and rec.get("sizes"):
            sizes = {k: int(v) for k, v in rec["sizes"].items()}
        else:
            g0 = graphref.Graph(self.yaml_path)
            sizes = {k: v for k, v in parse_dims(args.at).items() if k in g0.sizes}
        self.g = graphref.Graph(self.yaml_path, sizes)
        missing = [a for a, v in self.g.sizes.items() if v is None]
        if missing:
            raise RuntimeError("no size for axes %s (pass --at AXIS=N)" % ",".join(missing))
        self.res["sizes"] = dict(self.g.sizes)
        self.res["runtime_dims"] = list((rec or {}).get("runtime_dims") or [])
        dynamic = [a for a, v in (self.g.spec.get("axes") or {}).items() if isinstance(v, dict) and v.get("dynamic")]
        if dynamic and not self.res["runtime_dims"]:  # the record should say; else the YAML's order of dynamic axes
            self.res["runtime_dims"] = [self.g.sizes[a] for a in dynamic]
            self.res["runtime_dims_from"] = "YAML order of the dynamic axes (the record has no runtime_dims)"
        with open(self.yaml_path) as f:
            import yaml
            spec = yaml.safe_load(f)
        work = accuracy.graph_work(spec, self.g.sizes)
        tflops, bw, src = costmodel_rates(rec)
        floor_s = accuracy.roofline_floor_s(work["flops_effective"], work["min_bytes"], tflops, bw)
        self.res["work"] = {k: work[k] for k in ("flops", "flops_effective", "causal_fraction", "min_bytes")}
        self.res["roofline"] = {
            "tensor_flops_per_s": tflops, "dram_bytes_per_s": bw, "rates_from": src,
            "floor_ms": floor_s * 1e3,
            "floor_as_written_ms": accuracy.roofline_floor_s(work["flops"], work["min_bytes"], tflops, bw) * 1e3,
            "bound": "compute" if work["flops_effective"] / tflops >= work["min_bytes"] / bw else "memory",
            "pct_of_floor": None}
        self.ins = gc.make_inputs(self.g, args.seed)
        self.be, ref = gc.reference(self.g, self.ins)
        chosen = accuracy.chosen_candidate(rec) if rec else None
        lib = resolve(chosen.get("library"), ROOT, os.path.dirname(self.res["record"] or ".")) if chosen else None
        header = find_header(self.name, args.headers, lib)
        layouts = None
        if header:
            layouts = gc.output_layouts(header)
            if sorted(layouts) != sorted(self.g.outputs):
                print("  %s: header %s lists outputs %s, the graph %s: using graphref's layouts"
                      % (self.name, header, sorted(layouts), self.g.outputs))
                layouts = None
        self.res["header"] = header if layouts else None
        self.res["layouts_from"] = "header" if layouts else "graphref"
        self.layouts = layouts or gc.layouts_from_reference(ref)
        self.wants = {n: gc.graphref.ordered(self.be, ref[n], self.layouts[n][1]) for n in self.g.outputs}
        self.ref = ref
        self.want = self.wants[self.g.outputs[0]]

    # -- ours: every ok candidate, the chosen one first
    def candidates(self, gc):
        rec, args = self.record, self.args
        if not rec:
            log = os.path.join(args.records, self.name + ".log")
            last = ""
            if os.path.isfile(log):
                with open(log, errors="replace") as f:
                    lines = [ln.strip() for ln in f if ln.strip()]
                last = "; tune log %s ends: %s" % (log, lines[-1][:120] if lines else "(empty)")
            self.res["status"] = (self.res.get("record_problem") or "no tune record") + last
            return
        chosen_rank = rec.get("chosen") or 0
        self.res["chosen"] = chosen_rank
        for k in ("gpu", "driver", "tsopt", "timing", "baseline_predicted_s", "validation"):
            if k in rec:
                self.res.setdefault("tune", {})[k] = rec[k]
        cands = [dict(c) for c in rec.get("candidates") or []]
        chosen = accuracy.chosen_candidate(rec)
        for i, c in enumerate(cands):  # the same candidate accuracy.chosen_candidate picks
            c["chosen"] = chosen is not None and (c.get("rank") == chosen_rank if any("rank" in d for d in cands)
                                                  else i == chosen_rank - 1)
        self.cands = cands
        for c in cands:
            if c["chosen"]:
                self.bench_candidate(gc, c)
                self.res["library"] = c.get("bench_library")
                self.res["ours_ms"] = c.get("bench_ms")
                self.res["ours_error"] = c.get("bench_error")
                self.res["ours_passed"] = c.get("bench_status") == "ok"
                self.res["predicted_ms"] = c["predicted_s"] * 1e3 if is_ms(c.get("predicted_s")) else None
                self.res["tune_measured_ms"] = c["measured_s"] * 1e3 if is_ms(c.get("measured_s")) else None
                self.res["plan"] = c.get("plan")
                print("  %s: ours %s ms (rank %d, %s), rel.err %s, %s" % (
                    self.name, accuracy.fmt_ms(c.get("bench_ms")), chosen_rank, c.get("plan"),
                    "%.2e" % c["bench_error"] if "bench_error" in c else "-", c.get("bench_status")), flush=True)
        self.res["candidates"] = cands
        if chosen is None:
            self.res["status"] = "no valid candidate in the tune record (chosen = 0)"
        elif self.res["ours_passed"]:
            self.res["status"] = "ok"
            fl = self.res["roofline"]["floor_ms"]
            self.res["roofline"]["pct_of_floor"] = fl / self.res["ours_ms"] if is_ms(self.res["ours_ms"]) else None
        else:
            self.res["status"] = "ours failed: %s" % next(c.get("bench_status") for c in cands if c.get("chosen"))

    def bench_candidate(self, gc, c):
        """Validates and times one candidate's library here; results in c["bench_*"]."""
        lib = resolve(c.get("library"), ROOT, os.path.dirname(self.res["record"] or "."))
        c["bench_library"] = lib
        if not lib:
            c["bench_status"] = "library not found: %s" % c.get("library")
            return
        try:
            L = gc.Library(lib, self.name)
            call, outs = L.bind(self.g, self.res["runtime_dims"], self.layouts, self.ins)
            call()
            gc.synchronize()
            err = max(gc.rel_error(outs[n], self.wants[n]) for n in self.g.outputs)
            c["bench_error"] = err
            c["bench_ms"] = gc.timed(call, self.args.reps, self.args.warmup)
            c["bench_status"] = "ok" if err <= gc.TOLERANCE else "invalid"
        except Exception as e:
            c["bench_status"] = "failed: %s" % short(e)

    def other_candidates(self, gc):
        """Every other candidate the tuner passed ("ok"), re-timed here (after all anchors: a candidate that
        breaks the CUDA context can then spoil nothing but this check)."""
        if self.args.no_candidates or not getattr(self, "cands", None) or self.ins is None:
            return
        n = 0
        for c in self.cands:
            if not c["chosen"] and c.get("status") == "ok":
                self.bench_candidate(gc, c)
                n += 1
        if n:
            print("  %s: %d other candidates re-timed: %s" % (self.name, n, ", ".join(
                "#%s %s ms (tune %s)" % (c.get("rank"), accuracy.fmt_ms(c.get("bench_ms")),
                                         accuracy.fmt_ms(c["measured_s"] * 1e3 if is_ms(c.get("measured_s")) else None))
                for c in self.cands if not c["chosen"] and c.get("status") == "ok")), flush=True)

    # -- anchors
    def check_anchor(self, gc, name, out):
        try:
            got = out if not isinstance(out, (tuple, list)) else out[0]
            if got.numel() != self.want.numel():
                self.res["anchor_notes"][name] = (self.res["anchor_notes"].get(name, "") +
                                                  " output has %d elements, ours %d" % (got.numel(), self.want.numel())).strip()
                return
            err = gc.rel_error(got.reshape(self.want.shape), self.want)
            self.res["anchor_errors"][name] = err
            if not err <= gc.TOLERANCE:
                print("  %s: WARNING %s disagrees with the reference: rel.err %.2e" % (self.name, name, err))
        except Exception as e:
            self.res["anchor_notes"][name] = "check failed: %s" % short(e)

    def anchors(self, gc):
        args = self.args
        fns, notes = gc.anchor_fns(self.name, self.ins, self.yaml_path, self.g.sizes, self.layouts)
        self.res["anchor_notes"].update(notes)
        self.eager = fns.get("eager")
        for name in ANCHORS:
            if name not in fns:
                continue
            try:
                out = fns[name]()
                gc.synchronize()
                self.check_anchor(gc, name, out)
                del out
                self.res["anchors"][name] = gc.timed(fns[name], args.reps, args.warmup)
            except Exception as e:  # a back end missing on this machine is reported, not fatal
                self.res["anchors"][name] = "unavailable: %s" % short(e)

    def compiled(self, gc, torch, label, mode, enabled, want_s, budget):
        """torch.compile of the eager function in `mode`, within a time budget; result in anchors[label]."""
        if enabled is not True:
            self.res["anchors"][label] = "skipped (%s)" % enabled
            return
        if self.eager is None:
            self.res["anchors"][label] = "skipped (no eager version)"
            return
        grant = budget.grant(want_s)
        if grant <= 0:
            self.res["anchors"][label] = "skipped (time budget: %.0f s left before the deadline)" % (budget.left() or 0)
            return
        t0 = time.time()
        try:
            # A fresh dynamo state per graph and mode, and static shapes: graphs whose eager version is
            # graphref's generic backend share one code object, and a recompile of it at another graph's
            # shapes would mark dims dynamic (slower kernels) or reach the recompile limit (eager fallback).
            torch._dynamo.reset()
            c = torch.compile(self.eager, mode=mode, dynamic=False) if mode else torch.compile(self.eager, dynamic=False)
            with time_limit(grant):
                out = c()
                gc.synchronize()
            self.res["compile_s"][label] = round(time.time() - t0, 1)
            self.check_anchor(gc, label, out)
            del out
            self.res["anchors"][label] = gc.timed(c, self.args.reps, self.args.warmup)
        except BudgetExceeded:
            self.res["anchors"][label] = "skipped (compiling took over %.0f s, its budget)" % grant
            self.res["compile_s"][label] = round(time.time() - t0, 1)
            try:
                torch._dynamo.reset()
            except Exception:
                pass
        except Exception as e:
            self.res["anchors"][label] = "unavailable: %s" % short(e)
        print("  %s: %s %s (compile %s s)" % (self.name, label, accuracy.fmt_ms(self.res["anchors"][label])
                                              if is_ms(self.res["anchors"][label]) else self.res["anchors"][label],
                                              self.res["compile_s"].get(label, "-")), flush=True)

    def finish(self):
        ours = self.res["ours_ms"] if self.res.get("ours_passed") else None
        self.res["speedups"] = {a: accuracy.speedup(v, ours) for a, v in self.res["anchors"].items()}

    def release(self):
        for k in ("ins", "ref", "wants", "want", "eager", "g", "be"):
            if hasattr(self, k):
                setattr(self, k, None)


# ---- report ----------------------------------------------------------------------------------------------
def print_accuracy(rep):
    g = rep["goals"]

    def verdict(v, ok):
        return "" if v is None else ("meets the goal" if ok(v) else "MISSES the goal")
    print("\nCost-model accuracy over %d ok candidates in %d tune records:" % (rep["candidates_ok"], rep["graphs"]))
    m, sp, spg, t1 = rep["median_ape"], rep["spearman_pooled"], rep["spearman_mean_per_graph"], rep["top1_share"]
    print("  median |predicted - measured| / measured  %-8s goal <= %.0f%%   %s" % (
        accuracy.fmt_pct(m), 100 * g["median_ape_max"], verdict(m, lambda v: v <= g["median_ape_max"])))
    print("  Spearman, pooled over all candidates      %-8s goal >= %.2f   %s" % (
        "-" if sp is None else "%.3f" % sp, g["spearman_min"], verdict(sp, lambda v: v >= g["spearman_min"])))
    print("  Spearman, mean per graph (%d with >= 3 ok) %-8s goal >= %.2f   %s" % (
        rep["spearman_graphs"], "-" if spg is None else "%.3f" % spg, g["spearman_min"],
        verdict(spg, lambda v: v >= g["spearman_min"])))
    print("  predicted top-1 within %.0f%% of the best   %-8s goal >= %.0f%%   %s" % (
        100 * g["top1_within"], accuracy.fmt_pct(t1), 100 * g["top1_share_min"],
        verdict(t1, lambda v: v >= g["top1_share_min"])))
    rows = []
    for name, r in sorted(rep["per_graph"].items()):
        rows.append([name, "%d/%d" % (r["ok"], r["candidates"]), accuracy.fmt_pct(r["median_ape"]),
                     "-" if r["spearman"] is None else "%.2f" % r["spearman"],
                     {True: "yes", False: "no", None: "-"}[r["top1_within"]],
                     accuracy.fmt_ms(r["chosen_predicted_ms"]), accuracy.fmt_ms(r["chosen_measured_ms"]),
                     accuracy.fmt_ms(r["anchor_ms"]), accuracy.fmt_x(r["predicted_speedup"]),
                     accuracy.fmt_x(r["measured_speedup"])])
    print(accuracy.text_table(["graph", "ok", "med|err|", "rho", "top1", "pred ms", "tuned ms", "compile ms",
                               "pred x", "meas x"], rows))
    print("  (pred x / meas x: speedup over torch.compile (default) predicted from the chosen candidate's "
          "predicted time, and measured here)")


def print_table(results, order, gpu):
    headers = ["graph", "ours ms"] + [ANCHOR_LABELS[a] for a in ANCHORS] + ["floor ms", "% floor", "rel.err"]
    rows, notes = [], []
    for name in order:
        r = results[name]
        cells = [name]
        if is_ms(r.get("ours_ms")):
            cells.append(accuracy.fmt_ms(r["ours_ms"]) + ("" if r.get("ours_passed") else " FAIL"))
        else:
            cells.append("-")
        for a in ANCHORS:
            v = r["anchors"].get(a)
            if is_ms(v):
                x = r["speedups"].get(a)
                cells.append(accuracy.fmt_ms(v) + (" %s" % accuracy.fmt_x(x) if x else ""))
            elif v is None:
                cells.append("")
            else:
                cells.append("skipped" if str(v).startswith("skipped") else "n/a")
                notes.append("%s / %s: %s" % (name, a, v))
        rf = r.get("roofline") or {}
        cells += [accuracy.fmt_ms(rf.get("floor_ms")), accuracy.fmt_pct(rf.get("pct_of_floor")),
                  "%.1e" % r["ours_error"] if isinstance(r.get("ours_error"), float) else "-"]
        rows.append(cells)
        if r.get("status") != "ok":
            notes.append("%s: %s" % (name, r.get("status")))
        for c in r.get("candidates") or []:
            if c.get("status") == "ok" and c.get("bench_status") not in (None, "ok"):
                notes.append("%s: candidate %s passed in tune but here: %s%s" % (
                    name, c.get("rank"), c["bench_status"],
                    " (rel.err %.2e)" % c["bench_error"] if isinstance(c.get("bench_error"), float) else ""))
        for a, n in sorted((r.get("anchor_notes") or {}).items()):
            notes.append("%s / %s: %s" % (name, a, n))
        for a, e in sorted((r.get("anchor_errors") or {}).items()):
            if not e <= 1e-2:
                notes.append("%s / %s: output disagrees with the reference (rel.err %.2e)" % (name, a, e))
    print("\n" + gpu + ", side by side (ms, median of CUDA events, L2 flushed; Nx = our speedup over that anchor; "
          "floor = max(FLOPs/physical tensor peak, bytes/DRAM bandwidth); % floor = floor / ours):")
    print(accuracy.text_table(headers, rows))
    for n in notes:
        print("  " + n)


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(tmp, path)


def main(argv=None):
    env = os.environ
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", default=os.path.join(env.get("OUT", "build/h200-out"), "tune"),
                    help="folder of tune records (<graph>.json)")
    ap.add_argument("--headers", default=None, help="folder of the tuned headers (default: RECORDS/../tuned)")
    ap.add_argument("--out", default=env.get("OUT", "build/h200-out"))
    ap.add_argument("--graphs-dir", default=os.path.join(ROOT, "bench", "graphs"))
    ap.add_argument("--graphs", default=None, help="comma-separated subset of the graphs")
    ap.add_argument("--at", default="t=1024", help="sizes of dynamic axes for graphs without a record")
    ap.add_argument("--seed", type=int, default=int(env.get("BENCH_SEED", "1")))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", default=env.get("BENCH_COMPILE", "1") == "0")
    ap.add_argument("--no-autotune", action="store_true", default=env.get("BENCH_AUTOTUNE", "1") == "0")
    ap.add_argument("--no-candidates", action="store_true", help="time only the chosen candidate")
    ap.add_argument("--compile-budget-s", type=float, default=float(env.get("COMPILE_BUDGET_S", "60")))
    ap.add_argument("--autotune-budget-s", type=float, default=float(env.get("AUTOTUNE_BUDGET_S", "90")))
    ap.add_argument("--deadline", type=float, default=float(env["BENCH_DEADLINE"]) if env.get("BENCH_DEADLINE") else None,
                    help="seconds since the epoch by which all must be written")
    ap.add_argument("--no-chart", action="store_true")
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # "cpu": self-test without a GPU
    args = ap.parse_args(argv)
    if args.headers is None:
        args.headers = os.path.join(os.path.dirname(os.path.abspath(args.records)), "tuned")
    os.makedirs(args.out, exist_ok=True)
    json_path, png_path = os.path.join(args.out, "h200.json"), os.path.join(args.out, "h200.png")
    budget = Budget(args.deadline)
    signal.signal(signal.SIGTERM, _on_sigterm)

    import torch
    import gpu_check as gc
    gc.DEVICE = args.device
    for k in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 256)
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else "cpu (self-test)"
    records, bad = load_records(args.records)
    yamls = {os.path.basename(p)[:-5]: p for p in sorted(glob.glob(os.path.join(args.graphs_dir, "*.yaml")))}
    names = list(yamls)
    for g in list(records) + list(bad):
        if g not in yamls and g not in names:
            names.append(g)
    if args.graphs:
        want = args.graphs.split(",")
        names = [n for n in names if n in want]
    doc = {
        "format": "tsopt-h200-bench 1",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "gpu": gpu,
        "driver": next((r.get("driver") for _, r in records.values() if r.get("driver")), None),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if args.device == "cuda" else None,
        "triton": _version("triton"),
        "timing": {"method": gc.timing_method(args.reps, args.warmup), "reps": args.reps, "warmup": args.warmup,
                   "l2_flush_bytes": gc.FLUSH_BYTES if args.device == "cuda" else 0,
                   "timer": "CUDA events" if args.device == "cuda" else "host clock",
                   "same_for": "ours, every candidate, every anchor"},
        "seed": args.seed,
        "validation": {"reference": "bench/graphref.py, PyTorch fp32 on the same inputs", "tolerance": gc.TOLERANCE,
                       "outputs_poisoned": "NaN"},
        "compile": {"default_budget_s": args.compile_budget_s, "autotune_mode": AUTOTUNE_MODE,
                    "autotune_budget_s": args.autotune_budget_s, "deadline": args.deadline},
        "records": args.records,
        "graphs": {},
    }
    print("device: %s  torch %s  seed %d  records: %d in %s" % (gpu, torch.__version__, args.seed, len(records),
                                                                 args.records), flush=True)
    print("timing: " + doc["timing"]["method"], flush=True)
    benches = {}
    compile_on = True if not args.no_compile else "BENCH_COMPILE=0 / --no-compile"
    autotune_on = compile_on if compile_on is not True else (True if not args.no_autotune
                                                                else "BENCH_AUTOTUNE=0 / --no-autotune")
    try:
        # pass 1: ours (the chosen candidate), the eager and library anchors
        for name in names:
            path, rec = records.get(name, (None, None))
            yaml_path = resolve((rec or {}).get("file"), ROOT) or yamls.get(name)
            print("== %s" % name, flush=True)
            b = GraphBench(name, yaml_path, rec, path, args)
            benches[name] = b
            doc["graphs"][name] = b.res
            if name in bad:
                b.res["status"] = b.res["record_problem"] = bad[name]
            if yaml_path is None:
                b.res["status"] = bad.get(name) or "no YAML for this record"
                continue
            try:
                b.setup(gc)
                b.candidates(gc)
                b.anchors(gc)
            except Exception as e:
                b.res["status"] = "failed: %s" % short(e)
                traceback.print_exc()
            b.finish()
            write_json(json_path, doc)
        # passes 2 and 3: torch.compile, default then max-autotune, cheapest graphs first, with what time is left
        order = sorted((n for n in names if benches[n].eager is not None),
                       key=lambda n: (benches[n].res.get("work") or {}).get("flops_effective", 0))
        for label, mode, on, want_s in (("torch.compile", None, compile_on, args.compile_budget_s),
                                        ("torch.compile max-autotune", AUTOTUNE_MODE, autotune_on,
                                         args.autotune_budget_s)):
            for name in order:
                b = benches[name]
                b.compiled(gc, torch, label, mode, on, want_s, budget)
                b.finish()
                write_json(json_path, doc)
        # pass 4: the other candidates, re-timed here as a check on the tuner's timings
        for name in names:
            if benches[name].res.get("sizes"):
                for label in ("torch.compile", "torch.compile max-autotune"):
                    if label not in benches[name].res["anchors"]:
                        benches[name].res["anchors"][label] = "skipped (no eager version)"
                try:
                    benches[name].other_candidates(gc)
                except Exception as e:
                    print("  %s: re-timing the other candidates failed: %s" % (name, short(e)))
                write_json(json_path, doc)
    except (SystemExit, KeyboardInterrupt) as e:
        print("interrupted: %s; writing what was measured" % e, flush=True)
        doc["interrupted"] = str(e)
        for b in benches.values():
            if b.res["status"] in ("pending", "ok", "no tune record") and len(b.res["anchors"]) < 2:
                b.res["status"] += " (interrupted)"
    finally:
        for b in benches.values():
            b.release()
        results = doc["graphs"]
        ok_records = {n: records[n][1] for n in names if n in records}
        compile_ms = {n: results[n]["anchors"].get("torch.compile") for n in results}
        ours_ms = {n: results[n]["ours_ms"] if results[n].get("ours_passed") else None for n in results}
        doc["accuracy"] = accuracy.accuracy_report(ok_records, compile_ms, ours_ms)
        ratios = [c["bench_ms"] / (c["measured_s"] * 1e3) for r in results.values() for c in r.get("candidates", [])
                  if is_ms(c.get("bench_ms")) and is_ms(c.get("measured_s"))]
        doc["accuracy"]["bench_over_tune_timing_median"] = (sorted(ratios)[len(ratios) // 2] if ratios else None)
        doc["missing"] = [n for n in names if n not in records]
        write_json(json_path, doc)
        if not args.no_chart:
            try:
                import chart
                chart.main([json_path, png_path])
                doc["chart"] = png_path
                print("chart: %s" % png_path)
            except ImportError as e:
                print("chart: not drawn (%s)" % short(e))
            except Exception as e:
                print("chart: failed: %s" % short(e))
                traceback.print_exc()
        write_json(json_path, doc)
        print_accuracy(doc["accuracy"])
        if ratios:
            print("  re-timed here vs the tuner's measured_s, median ratio over %d candidates: %.3f"
                  % (len(ratios), doc["accuracy"]["bench_over_tune_timing_median"]))
        print("results: %s" % json_path)
        print_table(results, [n for n in names if n in results], doc["gpu"])
    failed = [n for n in names if results.get(n, {}).get("status") != "ok"]
    print("%d passed, %d failed" % (len(names) - len(failed), len(failed)))
    return 1 if failed or doc.get("interrupted") else 0


def _on_sigterm(signum, frame):
    raise SystemExit("terminated (SIGTERM)")


def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
