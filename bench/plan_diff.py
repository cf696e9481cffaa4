#!/usr/bin/env python3
"""plan_diff.py — which chosen plans a change moves: compiles every graph of bench/graphs, bench/heldout and
bench/probes, and random graphs (bench/random_graphs.py's, fixed seeds), with two tsopt builds, and lists the
graphs whose chosen plan (its kernels) or predicted time differs. For a cost-model, search or rule change: what
it changes is what needs timing. No GPU needed.

usage: python3 bench/plan_diff.py (--rev REV | --old PATH) [--new PATH] [--seeds 1,2] [--count 200]
                                  [--threshold 0.01] [--jobs 2] [--no-random] [GRAPH.yaml ...]

  --rev REV    build REV's tsopt in a worktree (build/plan-diff/rev) and use it as the old build
  --old PATH   an old tsopt binary (it reads the rules/, templates/ and costmodel/ beside its build/ folder)
  --new PATH   the new binary (default build/tsopt, built with make when missing)
  GRAPH.yaml   compile these instead of the bench, held-out and probe graphs
A prediction counts as moved when old and new differ by more than --threshold (relative). Exit status 1 when a
graph compiled with one build and failed with the other (a graph failing with both is listed, not counted)."""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import random_graphs  # noqa: E402  (bench/random_graphs.py: the generator and the compile-output parser)

WROTE = re.compile(r"predicted ([0-9.eE+-]+) ms\)")


def build_rev(rev):
    """REV's tsopt, built in a worktree under build/plan-diff/rev; returns the binary's path."""
    tree = os.path.join(ROOT, "build", "plan-diff", "rev")
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"], check=True,
                         capture_output=True, text=True).stdout.strip()   # HEAD: this tree's, not the worktree's
    if os.path.exists(os.path.join(tree, ".git")):
        subprocess.run(["git", "-C", tree, "checkout", "-q", "--detach", rev], check=True)
    else:
        os.makedirs(os.path.dirname(tree), exist_ok=True)
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", tree, rev], check=True)
    subprocess.run(["make", "-s", "-C", tree, "build/tsopt"], check=True, stdout=subprocess.DEVNULL)
    return os.path.join(tree, "build", "tsopt")


def compile_plan(tsopt, graph, outdir):
    """(exit status, chosen kernels, predicted seconds or None, first error line) of `tsopt compile graph`."""
    try:
        run = subprocess.run([tsopt, "compile", graph, "-o", outdir], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
    except subprocess.TimeoutExpired:
        return 124, "-", None, "ran past 300 s"
    wrote = WROTE.search(run.stdout)
    said = (run.stderr or run.stdout).strip().splitlines()
    return (run.returncode, random_graphs.chosen_kernels(run.stdout),
            float(wrote.group(1)) * 1e-3 if wrote else None, said[0] if run.returncode and said else "")


def graphs_to_compare(args, work):
    """(label, path) of every graph: the named files, or the bench, held-out and probe graphs; then the random
    graphs of each seed, written to work."""
    if args.graphs:
        found = [(os.path.relpath(g, ROOT), g) for g in args.graphs]
    else:
        found = [(os.path.relpath(g, ROOT), g) for d in ("graphs", "heldout", "probes")
                 for g in sorted(glob.glob(os.path.join(ROOT, "bench", d, "*.yaml")))]
    if not args.no_random:
        for seed in [int(s) for s in args.seeds.split(",") if s]:
            for n, _, desc, text, _ in random_graphs.generate(seed, args.count):
                path = os.path.join(work, f"s{seed}-r{n}.yaml")
                with open(path, "w") as f:
                    f.write(text)
                found.append((f"seed {seed} r{n} ({desc})", path))
    return found


def compare(label, path, old, new, work):
    """One graph compiled with both builds (each into a folder of its own): (label, old result, new result)."""
    results = []
    for side, tsopt in (("old", old), ("new", new)):
        outdir = os.path.join(work, side, re.sub(r"\W+", "_", label))
        os.makedirs(outdir, exist_ok=True)
        results.append(compile_plan(tsopt, path, outdir))
    return label, results[0], results[1]


def describe(result):
    rc, kernels, predicted, said = result
    if rc:
        return f"failed ({said or f'exit status {rc}'})"
    return f"{kernels}  [{predicted * 1e3:.4f} ms]" if predicted is not None else kernels


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    side = ap.add_mutually_exclusive_group(required=True)
    side.add_argument("--rev")
    side.add_argument("--old")
    ap.add_argument("--new", default=os.path.join(ROOT, "build", "tsopt"))
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--threshold", type=float, default=0.01)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-random", action="store_true")
    ap.add_argument("graphs", nargs="*")
    args = ap.parse_args()
    if not os.path.exists(args.new):
        subprocess.run(["make", "-s", "-C", ROOT, "build/tsopt"], check=True, stdout=subprocess.DEVNULL)
    old = build_rev(args.rev) if args.rev else args.old
    changed, moved, broke, both_failed = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="plan_diff.") as work:
        todo = graphs_to_compare(args, work)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for label, a, b in pool.map(lambda lp: compare(lp[0], lp[1], old, args.new, work), todo):
                if a[0] and b[0]:
                    both_failed.append(f"{label}: {describe(b)}")
                elif bool(a[0]) != bool(b[0]):
                    broke.append(f"{label}\n    old: {describe(a)}\n    new: {describe(b)}")
                elif a[1] != b[1]:
                    changed.append(f"{label}\n    old: {describe(a)}\n    new: {describe(b)}")
                elif a[2] and b[2] and abs(b[2] - a[2]) > args.threshold * a[2]:
                    moved.append(f"{label}: {a[2] * 1e3:.4f} -> {b[2] * 1e3:.4f} ms  ({a[1]})")
    for title, items in (("compiles with one build only", broke), ("chosen plan changed", changed),
                         (f"same plan, prediction moved > {args.threshold:.0%}", moved),
                         ("failed with both builds", both_failed)):
        if items:
            print(f"== {title} ({len(items)})")
            for item in items:
                print(f"  {item}")
    print(f"{len(todo)} graphs: {len(changed)} chosen plans changed, {len(moved)} predictions moved, "
          f"{len(broke)} compile with one build only, {len(both_failed)} fail with both")
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
