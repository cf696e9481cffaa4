"""roundtrip.py — the importer's round-trip tests: every module of modules.py exported to YAML, evaluated by
`tsopt eval --dump` (the float64 interpreter, random inputs and weights), and the module itself run in float64
on the same inputs and weights; the outputs must agree to relative L2 ≤ 1e-9. Also: the refusal of an unmapped
op names the ATen op and the source line. `make test` runs it where python3 has torch, and says it skipped
otherwise. TSOPT: the binary (default build/tsopt). Exit status 1 on any failure."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

try:
    import torch
except ImportError:
    print("skipped: python3 has no torch (pip install torch); the importer needs it, tsopt does not")
    sys.exit(0)

import warnings  # noqa: E402

warnings.filterwarnings("ignore")
from tsopt_torch.export import ExportError, export_module  # noqa: E402

import modules  # noqa: E402

TOL = 1e-9


def read_dump(d):
    """name → (kind, flat float64 tensor) from `tsopt eval --dump`."""
    out = {}
    for line in open(os.path.join(d, "manifest.txt")):
        kind, name, _dtype, *_sizes = line.split()
        with open(os.path.join(d, name + ".f64"), "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.float64)
        out[name] = (kind, data)
    return out


def roundtrip(name, factory, shapes, axes, tsopt, options=None):
    """Exports factory() at the example shapes, evaluates the YAML and the module on the same values;
    returns the worst relative L2 error. options: "dynamic": {axis: size}: the axis is exported dynamic and
    both sides are evaluated at that size instead of the example's; "buffers": export's buffers argument,
    "computed": the buffers that must have become ops; "tol": the case's bound instead of TOL (main);
    "training": export (and run) the module in training mode, "dropped": the running statistics whose update
    the graph must leave out, "no_text": what the YAML must not hold (a copy the export should avoid)."""
    torch.manual_seed(0)
    module = factory()
    examples = [torch.randn(*s) for s in shapes]
    options = options or {}
    dynamic = options.get("dynamic", {})
    text, info = export_module(module, examples, axes, {a: axes[a] for a in dynamic}, graph_name=name,
                               buffers=options.get("buffers", "inputs"), training=options.get("training", False))
    if info["dropped"] != options.get("dropped", []):
        raise AssertionError("updates left out: %s, expected %s" % (info["dropped"], options.get("dropped", [])))
    if info["computed"] != options.get("computed", []):
        raise AssertionError("buffers computed: %s, expected %s" % (info["computed"], options.get("computed", [])))
    for what in options.get("no_text", []):
        if what in text:
            raise AssertionError("the graph holds %r:\n%s" % (what, text))
    resize = {axes[a]: n for a, n in dynamic.items()}  # example size → evaluated size (sizes are distinct)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name + ".yaml")
        with open(path, "w") as f:
            f.write(text)
        cmd = [tsopt, "eval", "--seed", "3", "--dump", d, path]
        if dynamic:
            cmd[2:2] = ["--dims", ",".join("%s=%d" % kv for kv in dynamic.items())]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise AssertionError("tsopt eval failed:\n%s\n%s" % (r.stdout + r.stderr, text))
        dump = read_dump(d)
    module = module.double()
    args = []
    for yname, kind, target, shape in info["inputs"]:
        if kind == "USER_INPUT":
            shape = [resize.get(n, n) for n in shape]
        value = dump[yname][1].reshape(shape)
        if kind == "USER_INPUT":
            args.append(value)
        elif kind == "PARAMETER":
            module.get_parameter(target).data.copy_(value)
        else:
            module.get_buffer(target).copy_(value)
    with torch.no_grad():
        got = module(*args)
    got = got if isinstance(got, tuple) else (got,)
    worst = 0.0
    for (yname, shape), want in zip(info["outputs"], got):
        ours = dump[yname][1]
        want = want.contiguous().reshape(-1)
        if ours.numel() != want.numel():
            raise AssertionError("output %s: %d elements, the module's %d" % (yname, ours.numel(), want.numel()))
        # NaN where both have it (a batch norm's running variance drawn negative by the random inputs: PyTorch
        # and the interpreter both give NaN there); the rest compared
        nan = torch.isnan(ours)
        if not torch.equal(nan, torch.isnan(want)) or bool(nan.all()):
            return float("inf")
        ours, want = ours[~nan], want[~nan]
        err = (torch.linalg.vector_norm(ours - want) / max(torch.linalg.vector_norm(want).item(), 1e-300)).item()
        if err != err:
            err = float("inf")
        worst = max(worst, err)
    return worst


def refusal_names_op_and_line():
    name, factory, shapes, axes = modules.REFUSED
    try:
        export_module(factory(), [torch.randn(*s) for s in shapes], axes)
    except ExportError as e:
        line = [i + 1 for i, ln in enumerate(open(os.path.join(HERE, "modules.py"))) if "torch.cumsum(x" in ln][0]
        want = "modules.py:%d: return torch.cumsum(x, dim=0): aten.cumsum.default: no tsopt mapping for this op" % line
        return str(e) == want, "got %r, want %r" % (str(e), want)
    return False, "exported a module with cumsum"


def cli_writes_a_graph_and_refuses_with_status_1(tsopt):
    """python3 -m tsopt_torch.export: a graph tsopt checks; an unmapped op: status 1 and the message."""
    root = os.path.join(HERE, "..", "..")
    mods = os.path.join(HERE, "modules.py")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "mlp.yaml")
        cmd = [sys.executable, "-W", "ignore", "-m", "tsopt_torch.export", mods + ":GatedMLP", "--args",
               "x=m:3,d:24", "--axis", "f=40", "--dynamic", "m=4096", "-o", out]
        r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        if r.returncode != 0:
            return False, "export failed: " + r.stderr[-500:]
        text = open(out).read()
        for want in ("graph: gatedmlp", "  m: {dynamic: true, typical: 4096}", "  f: 40",
                     "  x: {dtype: fp32, shape: [m, d]}"):
            if want not in text.splitlines():
                return False, "%r not in the graph:\n%s" % (want, text)
        r = subprocess.run([tsopt, "check", out], capture_output=True, text=True)
        if r.returncode != 0:
            return False, "tsopt check: " + r.stdout + r.stderr
        cmd[5:] = [mods + ":Cumsum", "--args", "x=5,4"]
        r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        want = "tsopt_torch.export: error: modules.py:"
        if r.returncode != 1 or not last.startswith(want) or "aten.cumsum.default: no tsopt mapping" not in last:
            return False, "refusal: status %d, %r" % (r.returncode, last)
    return True, ""


def upcast_softmax_is_a_softmax_at_the_scores_type(tsopt):
    """softmax(s.float()).type_as(s) in fp16 (Hugging Face's eager attention) exports as a softmax of s (tsopt's
    kernels compute it in fp32 and round the result, as the casts do): no casts, one attention kernel."""
    mod = modules.Lambda(lambda x: torch.softmax((x @ x.transpose(1, 2)).float(), dim=-1).type_as(x) @ x)
    text, _ = export_module(mod, [torch.randn(2, 64, 16, dtype=torch.float16)], {"b": 2, "t": 64, "d": 16})
    if " op: cast" in text:
        return False, "casts left:\n" + text
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.yaml")
        open(path, "w").write(text)
        r = subprocess.run([tsopt, "compile", "-o", d, path], capture_output=True, text=True)
        if r.returncode != 0 or "attention [" not in r.stdout.splitlines()[2]:
            return False, "compile: " + r.stdout + r.stderr
    return True, ""


def main():
    tsopt = os.environ.get("TSOPT", "build/tsopt")
    only = sys.argv[1:]
    failures = 0
    for name, factory, shapes, axes, *options in modules.CASES:
        if only and name not in only:
            continue
        try:
            err = roundtrip(name, factory, shapes, axes, tsopt, *options)
            tol = options[0].get("tol", TOL) if options else TOL
            ok, note = err <= tol, "rel. L2 %.2e" % err
        except (AssertionError, ExportError) as e:
            ok, note = False, str(e)
        failures += not ok
        print("%-4s %-22s %s" % ("ok" if ok else "FAIL", name, note))
    if not only:
        for name, check in (("refusal", refusal_names_op_and_line),
                            ("cli", lambda: cli_writes_a_graph_and_refuses_with_status_1(tsopt)),
                            ("upcast_softmax", lambda: upcast_softmax_is_a_softmax_at_the_scores_type(tsopt))):
            ok, note = check()
            failures += not ok
            print("%-4s %-22s %s" % ("ok" if ok else "FAIL", name, "" if ok else note))
    total = len(only) if only else len(modules.CASES) + 3
    print("%d passed, %d failed" % (total - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
