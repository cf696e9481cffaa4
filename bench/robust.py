"""robust.py — the GPU robustness suite over tsopt's generated headers and templates (run on the H200 by
bench/robust.sh, with build/gpu and build/robust carried from bench/robust_build.sh).

For every case of build/gpu/cases.txt (bench sizes, odd sizes, primes and 1) it checks, each within the
time budget (what does not fit is reported as skipped, never silently dropped):

  sanitizer    compute-sanitizer memcheck, racecheck, synccheck and initcheck over the case's C ABI
               (build/robust/abi_driver: inputs random, outputs and workspace left uninitialised), and
               over every template test program (build/gpu/*_test quick; attention_sm90_test's decode set too)
  baseline     fresh random inputs, NaN-poisoned outputs, compared with bench/graphref.py in fp32
  misaligned   each input (and the first output) moved by 2, 4 and 8 bytes: the answer must be right or
               the call refused with a named error; never a wrong answer
  concurrency  4 host threads, each on its own stream with its own outputs and workspace, 8 calls each,
               every result compared bitwise with the single-stream one
  special      +inf, -inf and NaN planted in the first input: NaN/inf positions compared with the float64
               reference's; causal attention with t_q > t_kv: a fully masked row (NaN in float64: softmax
               over no keys) must be 0 by the template's contract (a documented difference), other rows
               right; the bench graphs' top-left mask leaves no row fully masked, which is reported
  determinism  two runs on the same inputs, bitwise equal
  limits       for dynamic graphs: size 0 (success, nothing written), -1, 2^31 and 2^40 + 1 (refused)

Prints one line per check as it goes and a table last: sanitizer reports, wrong answers, crashes, refused
calls with their named errors, documented differences, skips. Exit status 1 when any sanitizer report,
wrong answer or crash was found.

Usage: python3 bench/robust.py [--cases build/gpu/cases.txt] [--budget SECONDS] [--jobs N] [--shard K/N]
                               [--share SECONDS] [--select REGEX] [--out DIR]
  --share caps one sanitizer run (default 400 s); --select keeps only the sanitizer runs and in-process cases
  whose "<tool> <case>" or "<case>" matches REGEX (e.g. rerunning what an earlier run skipped); every
  sanitizer run that reports or crashes leaves its whole output in DIR/sanitizer/ (default build/robust/out).
  --shard K/N runs the K-th of N parts (cases and template tests dealt round-robin), for a suite that does
  not fit one call of the GPU machine: every part run once covers everything.
"""

import argparse
import concurrent.futures as cf
import ctypes
import os
import re
import subprocess
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphref  # noqa: E402
from gpu_check import (DT, TOLERANCE, Case, Library, make_inputs, output_layouts, reference,  # noqa: E402
                       worst_error)

ERROR_NAMES = {0: "cudaSuccess", 1: "cudaErrorInvalidValue", 9: "cudaErrorInvalidConfiguration",
               716: "cudaErrorMisalignedAddress", 801: "cudaErrorNotSupported"}
TOOLS = ["memcheck", "initcheck", "synccheck", "racecheck"]
TEMPLATE_TESTS = ["gemm_test", "gemm_sm90_test", "attention_test", "attention_sm90_test", "row_test"]
# tests whose configs are split among this many sanitizer processes (`quick K/N`): initcheck of either GEMM
# test in one process ran past 400 s (run 34)
TEMPLATE_PARTS = {"gemm_test": 4, "gemm_sm90_test": 4}
# The GEMM template tests compare with cuBLAS, whose Hopper kernels (nvjet_*) are not ours. memcheck, initcheck
# and synccheck leave them out (--kernel-name-exclude). racecheck does not follow their TMA/mbarrier
# synchronisation (52 hazards reported inside them in run 29, none in ours) and with them excluded it failed
# with an internal error (run 31), so it runs them and only hazards between accesses of our kernels count.
FOREIGN_KERNELS = "nvjet"


def error_name(rc):
    return ERROR_NAMES.get(rc, "cudaError %d" % rc)


class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


class Results:
    """Every check's outcome, one row each: (check, case, kind, text); kind is one of ok, refused,
    documented, wrong, sanitizer, crash, skipped."""

    def __init__(self):
        self.rows, self.lock = [], threading.Lock()

    def add(self, check, case, kind, text):
        with self.lock:
            self.rows.append((check, case, kind, text))
        print("%-24s %-28s %-10s %s" % (check, case, kind, text), flush=True)

    def count(self, kind):
        return sum(1 for r in self.rows if r[2] == kind)


# ---- compute-sanitizer ---------------------------------------------------------------------------------
def sanitizer(tool, argv, timeout, log=None, foreign=None):
    """(kind, text) of one compute-sanitizer run of argv; the whole output goes to the file log when the run
    reports or crashes. foreign: a kernel-name substring of library kernels that are not ours (see
    FOREIGN_KERNELS)."""
    opts = ["--print-limit", "20"]
    if foreign and tool == "racecheck":
        opts = ["--print-limit", "1000000"]  # every hazard listed: each must be placed in ours or the library's
    elif foreign:
        opts += ["--kernel-name-exclude", "kns=" + foreign]
    cmd = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "99"] + opts + argv
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "skipped", "past its %d s share of the budget" % timeout
    out = p.stdout + p.stderr
    # memcheck, synccheck and initcheck end with "ERROR SUMMARY: n errors"; racecheck with
    # "RACECHECK SUMMARY: n hazards displayed (e errors, w warnings)"
    m = re.search(r"ERROR SUMMARY: (\d+) error", out) or re.search(r"RACECHECK SUMMARY: (\d+) hazard", out)
    n = int(m.group(1)) if m else -1
    if log and (n != 0 or p.returncode not in (0, 99)):
        os.makedirs(os.path.dirname(log), exist_ok=True)
        with open(log, "w") as f:
            f.write(" ".join(cmd) + "\n" + out)
    if n > 0 and foreign and tool == "racecheck":
        theirs = racecheck_only_in(out, foreign, n)
        if theirs is not None:
            return "ok", "0 reports in our kernels (%d hazards inside %s* kernels, not ours)" % (theirs, foreign)
    if n > 0:
        first = next((l for l in out.splitlines() if l.startswith("========= ") and "ERROR SUMMARY" not in l), "")
        return "sanitizer", "%d reports: %s" % (n, first[10:120])
    if p.returncode not in (0, 99) or n < 0:
        tail = " | ".join(out.strip().splitlines()[-2:])[:160]
        return "crash", "exit %d: %s" % (p.returncode, tail)
    return "ok", "0 reports"


def racecheck_only_in(out, foreign, displayed):
    """The number of hazards racecheck reported when every one of them lies between accesses of kernels whose
    names contain `foreign` and all were displayed; None otherwise (then they count as reports)."""
    m = re.search(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)", out)
    if not m or int(m.group(1)) != int(m.group(2)) + int(m.group(3)):
        return None  # some hazards were not displayed: they cannot be placed
    kernels = re.findall(r"(?:Race reported between|and) \w+ access at (\S+?)\+0x", out)
    if len(re.findall(r"Race reported between", out)) == 0 or not kernels:
        return None
    return displayed if all(foreign in k for k in kernels) else None


def driver_argv(case, g, layouts):
    dims = ",".join(str(v) for v in case.runtime.values()) or "-"
    ins = ["%d:%s" % (numel(g, shape) * bytes_of(dt), dt) for _, dt, shape in g.inputs]
    outs = ["%d:%s" % (numel(g, axes) * bytes_of(dt), dt) for dt, axes in (layouts[n] for n in g.outputs)]
    return ["build/robust/abi_driver", case.lib, case.graph, dims] + ins + ["--"] + outs


def numel(g, axes):
    n = 1
    for a in axes:
        n *= g.sizes[a]
    return n


def bytes_of(dt):
    return 4 if dt == "fp32" else 2


def sanitize_all(cases, res, budget, args, shard=(0, 1)):
    """Tool by tool (memcheck first, racecheck, the slowest, last), every header then every template test,
    so that what the budget cuts is the slowest tool's tail."""
    targets = []
    for case in cases:
        g = graphref.Graph(case.yaml, {**case.static, **case.runtime})
        targets.append(("%s/%s" % (case.variant, case.graph), driver_argv(case, g, output_layouts(case.header))))
    for t in TEMPLATE_TESTS[shard[0]::shard[1]]:
        if not os.access("build/gpu/" + t, os.X_OK):
            continue
        parts = TEMPLATE_PARTS.get(t, 1)
        for k in range(parts):
            targets.append(("template %s%s" % (t, " part %d/%d" % (k + 1, parts) if parts > 1 else ""),
                            ["build/gpu/" + t, "quick"] + (["%d/%d" % (k, parts)] if parts > 1 else [])))
        if t == "attention_sm90_test":  # its decode set: the split-key kernel, clusters and their merge
            targets.append(("template %s decode" % t, ["build/gpu/" + t, "decode", "quick"]))
    jobs_list = [("sanitizer " + tool, name, tool, argv) for tool in TOOLS for name, argv in targets
                 if selected(args, "%s %s" % (tool, name))]
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        futs = {}
        for check, name, tool, argv in jobs_list:
            log = os.path.join(args.out, "sanitizer", "%s-%s.txt" % (tool, re.sub(r"[^A-Za-z0-9_.]+", "_", name)))
            foreign = FOREIGN_KERNELS if name.startswith("template gemm") else None
            futs[ex.submit(run_sanitizer_job, tool, argv, budget, args.share, log, foreign)] = (check, name)
        for f in cf.as_completed(futs):
            check, name = futs[f]
            kind, text = f.result()
            res.add(check, name, kind, text)


def run_sanitizer_job(tool, argv, budget, cap, log, foreign):
    share = int(min(cap, budget.left() - 5))
    if share < 10:
        return "skipped", "no time left in the budget"
    return sanitizer(tool, argv, share, log, foreign)


def selected(args, name):
    return args.select is None or re.search(args.select, name) is not None


# ---- in-process checks (PyTorch, ctypes) ---------------------------------------------------------------
class Bound:
    """A case loaded in this process: graph, library, layouts, inputs, reference."""

    def __init__(self, case, seed=7):
        self.case = case
        self.g = graphref.Graph(case.yaml, {**case.static, **case.runtime})
        self.lib = Library(case.lib, case.graph)
        self.layouts = output_layouts(case.header)
        self.dyn = list(case.runtime.values())
        self.ins = make_inputs(self.g, seed)
        self.name = "%s/%s" % (case.variant, case.graph)

    def outputs(self):
        return {n: torch.full([self.g.sizes[a] for a in axes], float("nan"), dtype=DT[dt], device="cuda")
                for n, (dt, axes) in self.layouts.items()}

    def call(self, ins, outs, dims=None, stream=None, ws=None):
        """The C ABI's return value for these tensors (or raw addresses) on `stream`."""
        dims = self.dyn if dims is None else dims
        d = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        if ws is None:
            ws = torch.empty(max(1, self.lib.workspace(d)) + 256, dtype=torch.uint8, device="cuda")
        ptr = lambda x: x if isinstance(x, int) else x.data_ptr()  # noqa: E731
        ptrs = [ptr(ins[n]) for n, _, _ in self.g.inputs] + [ptr(outs[n]) for n in self.g.outputs]
        bufs = (ctypes.c_void_p * len(ptrs))(*ptrs)
        s = (stream or torch.cuda.current_stream()).cuda_stream
        return self.lib.run(bufs, d, ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(s))

    def error(self, outs):
        """The worst relative error of outs against the fp32 reference of self.ins (computed once)."""
        if not hasattr(self, "ref"):
            self.ref = reference(self.g, self.ins)
        be, ref = self.ref
        return worst_error(self.g, outs, self.layouts, be, ref)


def baseline(b, res):
    outs = b.outputs()
    rc = b.call(b.ins, outs)
    torch.cuda.synchronize()
    if rc:
        res.add("baseline", b.name, "wrong", "refused a well-formed call: %s" % error_name(rc))
        return None
    err = b.error(outs)
    res.add("baseline", b.name, "ok" if err <= TOLERANCE else "wrong", "rel. error %.2e" % err)
    return outs


def shifted(t, offset):
    """A tensor with t's values whose storage starts `offset` bytes past a 256-byte boundary."""
    raw = torch.empty(t.numel() * t.element_size() + 512, dtype=torch.uint8, device="cuda")
    view = raw[offset: offset + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
    view.copy_(t)
    view.keep = raw
    return view


def misaligned(b, res):
    targets = [(n, "in") for n, _, _ in b.g.inputs] + [(b.g.outputs[0], "out")]
    for offset in (2, 4, 8):
        for name, side in targets:
            ins, outs = dict(b.ins), b.outputs()
            t = ins[name] if side == "in" else outs[name]
            if offset % t.element_size():
                # off its element alignment (fp32 at +2): the helper must refuse before reading anything
                raw = torch.empty(t.numel() * t.element_size() + 512, dtype=torch.uint8, device="cuda")
                (ins if side == "in" else outs)[name] = raw.data_ptr() + offset
                rc = b.call(ins, outs)
                torch.cuda.synchronize()
                res.add("misaligned +%d %s" % (offset, name), b.name, "refused" if rc else "wrong",
                        error_name(rc) if rc else "accepted a buffer off its element alignment")
                continue
            if side == "in":
                ins[name] = shifted(ins[name], offset)
            else:
                outs[name] = shifted(outs[name], offset)
            rc = b.call(ins, outs)
            torch.cuda.synchronize()
            check = "misaligned +%d %s" % (offset, name)
            if rc:
                res.add(check, b.name, "refused", error_name(rc))
                continue
            err = b.error(outs)
            res.add(check, b.name, "ok" if err <= TOLERANCE else "wrong", "ran: rel. error %.2e" % err)


def concurrency(b, res, want):
    threads, calls = 4, 8
    results, errors = [None] * threads, []

    def worker(i):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                outs = b.outputs()
                ws = torch.empty(max(1, b.lib.workspace((ctypes.c_int64 * max(1, len(b.dyn)))(*b.dyn))) + 256,
                                 dtype=torch.uint8, device="cuda")
                same = 0
                for _ in range(calls):
                    for o in outs.values():
                        o.fill_(float("nan"))
                    rc = b.call(b.ins, outs, stream=s, ws=ws)
                    if rc:
                        errors.append("thread %d: %s" % (i, error_name(rc)))
                        return
                    s.synchronize()
                    same += all(torch.equal(outs[n], want[n]) for n in b.g.outputs)
                results[i] = same
        except Exception as e:  # noqa: BLE001 — reported as a crash of the check
            errors.append("thread %d: %s" % (i, e))

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        res.add("concurrency 4x4", b.name, "crash", "; ".join(errors)[:160])
        return
    good = sum(results)
    kind = "ok" if good == threads * calls else "wrong"
    res.add("concurrency 4x4", b.name, kind, "%d/%d calls bitwise equal to the single-stream result" % (good, threads * calls))


def determinism(b, res, first):
    outs = b.outputs()
    b.call(b.ins, outs)
    torch.cuda.synchronize()
    same = all(torch.equal(outs[n], first[n]) for n in b.g.outputs)
    res.add("determinism", b.name, "ok" if same else "wrong", "second run bitwise equal" if same else "second run differs")


def is_attention(b):
    """Whether the header's plan is one attention kernel (its banner's plan line), whose contract writes a
    row with no finite score as 0."""
    with open(b.case.header) as f:
        plan = next((l for l in f if l.startswith("// plan:")), "")
    return re.search(r"— 1 kernel: attention", plan) is not None


def special_values(b, res):
    ins = {n: x.clone() for n, x in b.ins.items()}
    first = b.g.inputs[0][0]
    flat = ins[first].view(-1)
    k = flat.numel()
    for i, v in zip((0, k // 3, (2 * k) // 3), (float("inf"), float("-inf"), float("nan"))):
        flat[i] = v
    outs = b.outputs()
    rc = b.call(ins, outs)
    torch.cuda.synchronize()
    if rc:
        res.add("special values", b.name, "refused", error_name(rc))
        return
    be = graphref.Backend(torch, device="cuda", dtype=torch.float64)
    ref = b.g.evaluate(be, {n: x.double() for n, x in ins.items()})
    diffs, zero_rows = [], 0
    for n in b.g.outputs:
        want = graphref.ordered(be, ref[n], b.layouts[n][1])
        got = outs[n].double()
        # attention's contract: a row whose softmax has no finite score (every score -inf, as for a fully
        # masked row; NaN in float64) is written as 0 — a documented difference, not counted as wrong
        rows = (torch.isnan(want).all(-1) & (got == 0).all(-1)) if is_attention(b) else torch.zeros_like(want[..., 0], dtype=torch.bool)
        zero_rows += rows.sum().item()
        keep = ~rows.unsqueeze(-1).expand_as(want)
        nan_d = ((torch.isnan(got) != torch.isnan(want)) & keep).sum().item()
        inf_d = ((torch.isinf(got) != torch.isinf(want)) & keep).sum().item()
        if nan_d or inf_d:
            diffs.append("%s: %d NaN and %d inf positions differ of %d" % (n, nan_d, inf_d, got.numel()))
    if not diffs and zero_rows:
        res.add("special values", b.name, "documented", "%d rows with only -inf scores (NaN in float64) written as 0 "
                "(attention.cuh contract); other NaN/inf positions as float64" % zero_rows)
    elif not diffs:
        res.add("special values", b.name, "ok", "same NaN/inf positions as float64")
    else:
        # A documented difference only where the contract says so; anything else counts as wrong.
        res.add("special values", b.name, "wrong", "; ".join(diffs)[:160])


def masked_rows(b, res):
    """attention_causal with t_q > t_kv: rows q < t_q - t_kv see no key; the template writes them as 0."""
    t_q, t_kv = b.g.sizes.get("t_q", 0), b.g.sizes.get("t_kv", 0)
    if "causal" not in b.case.graph or t_q <= t_kv:
        return
    outs = b.outputs()
    rc = b.call(b.ins, outs)
    torch.cuda.synchronize()
    if rc:
        res.add("fully masked rows", b.name, "refused", error_name(rc))
        return
    be = graphref.Backend(torch, device="cuda", dtype=torch.float64)
    ref = b.g.evaluate(be, {n: x.double() for n, x in b.ins.items()})
    n = b.g.outputs[0]
    want = graphref.ordered(be, ref[n], b.layouts[n][1])
    got = outs[n].double()
    masked = torch.isnan(want)
    rest = ((got[~masked] - want[~masked]).norm() / want[~masked].norm()).item()
    if not masked.any():
        res.add("fully masked rows", b.name, "ok" if rest <= TOLERANCE else "wrong",
                "none under this graph's mask (query i sees keys 0..i); t_q > t_kv rel. error %.2e" % rest)
        return
    zero = bool((got[masked] == 0).all().item())
    kind = "documented" if zero and rest <= TOLERANCE else "wrong"
    res.add("fully masked rows", b.name, kind, "%d elements NaN in float64, written as 0 (attention.cuh contract); "
            "others rel. error %.2e" % (masked.sum().item(), rest))


def limits(b, res):
    if len(b.dyn) != 1:
        return
    outs = b.outputs()
    for o in outs.values():
        o.fill_(7)
    rc = b.call(b.ins, outs, dims=[0], ws=torch.empty(256, dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    untouched = all(bool((o == 7).all().item()) for o in outs.values())
    res.add("size 0", b.name, "ok" if rc == 0 and untouched else "wrong",
            "%s, outputs untouched: %s" % (error_name(rc), untouched))
    small = torch.empty(256, dtype=torch.uint8, device="cuda")  # never reached: refused before any launch
    for v, label in ((-1, "-1"), (1 << 31, "2^31"), ((1 << 40) + 1, "2^40+1")):
        rc = b.call(b.ins, outs, dims=[v], ws=small)
        torch.cuda.synchronize()
        res.add("size " + label, b.name, "refused" if rc else "wrong", error_name(rc) if rc else "accepted: would overrun")


def in_process(cases, res, budget, args):
    for case in cases:
        name = "%s/%s" % (case.variant, case.graph)
        if not selected(args, name):
            continue
        if budget.left() < 20:
            res.add("in-process checks", name, "skipped", "no time left in the budget")
            continue
        try:
            b = Bound(case)
            first = baseline(b, res)
            if first is None:
                continue
            determinism(b, res, first)
            concurrency(b, res, first)
            misaligned(b, res)
            special_values(b, res)
            masked_rows(b, res)
            limits(b, res)
            del b
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001 — a crash of the check, reported in the table
            res.add("in-process checks", name, "crash", str(e)[:160])


# ---- the table -----------------------------------------------------------------------------------------
def table(res):
    print("\n== robustness table (check, case, outcome)")
    order = {"sanitizer": 0, "wrong": 1, "crash": 2, "refused": 3, "documented": 4, "skipped": 5, "ok": 6}
    for check, case, kind, text in sorted(res.rows, key=lambda r: (order.get(r[2], 9), r[0], r[1])):
        if kind != "ok":
            print("%-10s %-24s %-28s %s" % (kind, check, case, text))
    refused = sorted({r[3] for r in res.rows if r[2] == "refused"})
    print("%d checks: %d ok; sanitizer reports %d, wrong answers %d, crashes %d, refused %d (%s), documented "
          "differences %d, skipped %d" % (len(res.rows), res.count("ok"), res.count("sanitizer"), res.count("wrong"),
                                         res.count("crash"), res.count("refused"), ", ".join(refused) or "-",
                                         res.count("documented"), res.count("skipped")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="build/gpu/cases.txt")
    ap.add_argument("--budget", type=float, default=420, help="seconds for the whole suite (default 420)")
    ap.add_argument("--jobs", type=int, default=4, help="sanitizer runs at once (default 4)")
    ap.add_argument("--shard", default="0/1", help="K/N: the K-th of N parts of the cases and template tests")
    ap.add_argument("--share", type=float, default=400, help="seconds one sanitizer run may take (default 400)")
    ap.add_argument("--select", help="only the sanitizer runs and in-process cases matching this regex")
    ap.add_argument("--out", default="build/robust/out", help="where failing sanitizer runs leave their output")
    args = ap.parse_args()
    budget = Budget(args.budget)
    k, n = (int(v) for v in args.shard.split("/"))
    if not 0 <= k < n:
        ap.error("--shard K/N needs 0 <= K < N, got %s" % args.shard)
    cases = [Case(l) for l in open(args.cases) if l.strip()][k::n]
    res = Results()
    # in-process checks first (fast, a few seconds per case), then the sanitizers in what is left
    in_process(cases, res, Budget(min(args.budget * 0.4, budget.left())), args)
    sanitize_all(cases, res, budget, args, (k, n))
    table(res)
    bad = res.count("sanitizer") + res.count("wrong") + res.count("crash")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
