#!/usr/bin/env python3
"""random_graphs.py — compiles random graphs of the kinds external suites hold and reports what the search chose,
to find plans nobody tuned for before a user does (no GPU needed).

usage: python3 bench/random_graphs.py [--seed S] [--count N] [--family F ...] [--keep DIR] [--tsopt PATH]

Families (default all, in turn):
  linear     X·W (W as [in, out] or PyTorch's [out, in]), an optional bias, 0-3 activations (ReLU, GELU in
             both forms, SiLU, tanh, sigmoid, Mish, hardtanh, softplus, leaky ReLU, a scale, a clamped exp),
             then maybe a norm, softmax, log-sum-exp, a row reduction, a residual or a channel scale
  bmm        a batched matmul (B maybe transposed), then maybe softmax along either axis, a reduction, ReLU
  attention  softmax(Q·Kᵀ·s [+ a mask] [soft-capped])·V over grouped heads, head dims 32-256, any lengths
  norm       LayerNorm, RMSNorm or softmax over one axis of a 3-D tensor, maybe after a residual add
  mlp        [LayerNorm | RMSNorm] → linear → activation (or a SwiGLU pair) → linear [+ the input], 1 to 2048 tokens
  elementwise  a 3-D tensor plus a transposed one, maybe times a vector along any axis, 0-3 activations, maybe a
             transposed output or a sum over one axis (sizes 1 and odd ones included)
Sizes 1 to 4096 (odd ones included), fp16, bf16 and fp32.

For every graph it runs `tsopt compile` and prints one line: the family, the sizes, the exit status, the compile
time and the chosen plan's kernels. Last, a summary, and every graph that needs a look:
  failed     tsopt exited non-zero (a valid graph must compile)
  slow       compile took over 2 s
  reduce     the matrix product left to a reduce kernel with 2^22 or more (output, position) pairs (reduce.cuh
             has no tiles: such kernels ran 21-40x slower than a DRAM-byte estimate, bench/NOTES.md run 135; a
             GEMM is the expected plan; a matrix-vector product after an algebraic rewrite is not counted)
  extra      more GEMM kernels than the graph has matmuls and sums of a product with a vector (a contraction
             distributed over a sum: the 4-GEMM LayerNorm MLP of issue 10)
Exit status 1 when any graph failed. The generated graphs and logs stay in --keep (default: a temporary folder,
removed).
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ACTIVATIONS = ["relu", "gelu", "gelu_tanh", "silu", "tanh", "sigmoid", "mish", "hardtanh", "softplus", "leaky",
               "scale", "exp"]


def activation(ops, cur, kind, name):
    """Appends ops computing activation `kind` of cur as `name`; returns name."""
    if kind == "mish":
        ops += [f"{{name: {name}a, op: softplus, args: [{cur}]}}", f"{{name: {name}b, op: tanh, args: [{name}a]}}",
                f"{{name: {name}, op: mul, args: [{cur}, {name}b]}}"]
    elif kind == "hardtanh":
        ops.append(f"{{name: {name}, op: clamp, args: [{cur}], lo: -1.0, hi: 1.0}}")
    elif kind == "gelu_tanh":
        ops.append(f"{{name: {name}, op: gelu, args: [{cur}], approximate: tanh}}")
    elif kind == "leaky":
        ops += [f"{{name: {name}a, op: scale, args: [{cur}], by: 0.01}}", f"{{name: {name}, op: max, args: [{cur}, {name}a]}}"]
    elif kind == "scale":
        ops.append(f"{{name: {name}, op: scale, args: [{cur}], by: {random.choice([0.5, 2.0, 1.7, -1.0])}}}")
    elif kind == "exp":
        ops += [f"{{name: {name}a, op: clamp, args: [{cur}], lo: -4.0, hi: 4.0}}", f"{{name: {name}, op: exp, args: [{name}a]}}"]
    else:
        ops.append(f"{{name: {name}, op: {kind}, args: [{cur}]}}")
    return name


def graph_text(name, axes, inputs, ops, outputs):
    ax = ", ".join(f"{k}: {v}" for k, v in axes.items())
    ins = "\n".join(f"  {n}: {{dtype: {d}, shape: [{', '.join(s)}]}}" for n, d, s in inputs)
    return (f"graph: {name}\naxes: {{{ax}}}\ninputs:\n{ins}\nops:\n" + "\n".join(f"  - {o}" for o in ops) +
            f"\noutputs: [{', '.join(outputs)}]\n")


def linear(name):
    dt = random.choice(["fp16", "fp16", "bf16", "fp32"])
    b, i, o = (random.choice([1, 7, 16, 77, 128, 129, 256, 1000, 1024, 2048, 4096]),
               random.choice([8, 64, 100, 256, 511, 512, 768, 1024, 2048, 4096]),
               random.choice([8, 16, 65, 256, 512, 1000, 1024, 3072, 4096]))
    inputs, ops = [("X", dt, ["b", "i"])], []
    if random.random() < 0.5:
        inputs.append(("W", dt, ["o", "i"]))
        ops.append("{name: Wt, op: permute, args: [W], order: [i, o]}")
        w = "Wt"
    else:
        inputs.append(("W", dt, ["i", "o"]))
        w = "W"
    ops.append(f"{{name: H, op: matmul, args: [X, {w}], over: i}}")
    cur = "H"
    if random.random() < 0.7:
        inputs.append(("bias", dt, ["o"]))
        ops.append("{name: Hb, op: add, args: [H, bias]}")
        cur = "Hb"
    for a in range(random.randint(0, 3)):
        cur = activation(ops, cur, random.choice(ACTIVATIONS), f"E{a}")
    tail = random.choice(["none", "none", "residual", "layernorm", "rmsnorm", "softmax", "logsumexp", "sum", "max",
                          "mean", "channel"])
    if tail == "residual":
        inputs.append(("R", dt, ["b", "o"]))
        ops.append(f"{{name: T, op: add, args: [{cur}, R]}}")
    elif tail == "layernorm":
        inputs += [("g", dt, ["o"]), ("be", dt, ["o"])]
        ops.append(f"{{name: T, op: layernorm, args: [{cur}, g, be], axis: o, eps: 1e-5}}")
    elif tail == "rmsnorm":
        ops.append(f"{{name: T, op: rmsnorm, args: [{cur}], axis: o, eps: 1e-6}}")
    elif tail in ("softmax", "logsumexp", "mean"):
        ops.append(f"{{name: T, op: {tail}, args: [{cur}], axis: o}}")
    elif tail in ("sum", "max"):
        ops.append(f"{{name: T, op: reduce_{tail}, args: [{cur}], axis: o}}")
    elif tail == "channel":
        inputs.append(("S", dt, ["o"]))
        ops.append(f"{{name: T, op: mul, args: [{cur}, S]}}")
    if tail != "none":
        cur = "T"
    axes = {"b": b, "i": i, "o": o}
    return f"linear {dt} {b}x{i}->{o} {tail}", graph_text(name, axes, inputs, ops, [cur]), axes


def bmm(name):
    dt = random.choice(["fp16", "bf16", "fp32"])
    b, m, k, n = (random.choice([1, 3, 8, 32, 128]), random.choice([1, 16, 100, 512, 1024]),
                  random.choice([8, 64, 96, 512, 1000]), random.choice([8, 64, 96, 512, 1024]))
    transposed = random.random() < 0.4
    inputs = [("A", dt, ["b", "m", "k"]), ("B", dt, ["b", "n", "k"] if transposed else ["b", "k", "n"])]
    ops = ["{name: Bt, op: permute, args: [B], order: [b, k, n]}"] if transposed else []
    ops.append(f"{{name: C, op: matmul, args: [A, {'Bt' if transposed else 'B'}], over: k}}")
    tail = random.choice(["none", "softmax n", "softmax m", "reduce_sum b", "reduce_max m", "relu", "mean n"])
    cur = "C"
    if tail != "none":
        op, *axis = tail.split()
        ops.append(f"{{name: T, op: {op}, args: [C]{', axis: ' + axis[0] if axis else ''}}}")
        cur = "T"
    axes = {"b": b, "m": m, "k": k, "n": n}
    return f"bmm {dt} {b}x{m}x{k}x{n}{' Bt' if transposed else ''} {tail}", graph_text(name, axes, inputs, ops, [cur]), axes


def attention(name):
    dt = random.choice(["fp16", "bf16"])
    heads = random.choice([1, 2, 8, 12, 16, 32])
    kv = random.choice([heads, max(1, heads // 4), max(1, heads // 8)])
    tq = random.choice([1, 7, 64, 128, 200, 1000, 2048])
    tkv = random.choice([tq, 64, 512, 4096])
    d = random.choice([32, 64, 80, 96, 128, 160, 192, 256])
    inputs = [("Q", dt, ["kv_h", "grp", "t_q", "d_h"]), ("K", dt, ["kv_h", "t_kv", "d_h"]),
              ("V", dt, ["kv_h", "t_kv", "d_h"])]
    ops = ["{name: S, op: matmul, args: [Q, K], over: d_h}", f"{{name: Ss, op: scale, args: [S], by: {d ** -0.5:.6f}}}"]
    cur, extra = "Ss", ""
    if random.random() < 0.3:
        ops += [f"{{name: St, op: scale, args: [{cur}], by: 0.02}}", "{name: Sh, op: tanh, args: [St]}",
                "{name: Sc, op: scale, args: [Sh], by: 50.0}"]
        cur, extra = "Sc", " softcap"
    if random.random() < 0.3:
        inputs.append(("M", dt, ["t_q", "t_kv"]))
        ops.append(f"{{name: Sm, op: add, args: [{cur}, M]}}")
        cur, extra = "Sm", extra + " mask"
    ops += [f"{{name: P, op: softmax, args: [{cur}], axis: t_kv}}", "{name: O, op: matmul, args: [P, V], over: t_kv}"]
    axes = {"kv_h": kv, "grp": heads // kv, "t_q": tq, "t_kv": tkv, "d_h": d}
    return (f"attention {dt} {kv}x{heads // kv} heads t_q {tq} t_kv {tkv} d {d}{extra}",
            graph_text(name, axes, inputs, ops, ["O"]), axes)


def norm(name):
    dt = random.choice(["fp16", "bf16", "fp32"])
    sizes = {"a": random.choice([1, 4, 32, 100]), "r": random.choice([7, 64, 500, 2048]),
             "c": random.choice([8, 77, 768, 1000, 4096])}
    axis = random.choice(["c", "c", "r", "a"])
    inputs, ops, cur = [("X", dt, ["a", "r", "c"])], [], "X"
    if random.random() < 0.4:
        inputs.append(("Y", dt, ["a", "r", "c"]))
        ops.append("{name: Z, op: add, args: [X, Y]}")
        cur = "Z"
    kind = random.choice(["layernorm", "rmsnorm", "softmax"])
    if kind == "layernorm":
        inputs += [("g", dt, [axis]), ("be", dt, [axis])]
        ops.append(f"{{name: N, op: layernorm, args: [{cur}, g, be], axis: {axis}, eps: 1e-5}}")
    else:
        ops.append(f"{{name: N, op: {kind}, args: [{cur}], axis: {axis}{', eps: 1e-6' if kind == 'rmsnorm' else ''}}}")
    return f"norm {dt} {sizes['a']}x{sizes['r']}x{sizes['c']} {kind} over {axis}", graph_text(name, sizes, inputs, ops, ["N"]), sizes


def mlp(name):
    dt = random.choice(["fp16", "bf16"])
    t, d = random.choice([1, 16, 64, 77, 200, 512, 1232, 2048]), random.choice([256, 768, 1024, 2048, 4096])
    f = random.choice([4 * d, (8 * d // 3 + 63) // 64 * 64])
    gated = random.random() < 0.5
    inputs, ops = [("X", dt, ["t", "d"])], []
    norm_kind = random.choice(["layernorm", "rmsnorm", "none"])
    if norm_kind == "layernorm":
        inputs += [("g", dt, ["d"]), ("be", dt, ["d"])]
        ops.append("{name: N, op: layernorm, args: [X, g, be], axis: d, eps: 1e-5}")
    elif norm_kind == "rmsnorm":
        ops.append("{name: N, op: rmsnorm, args: [X], axis: d, eps: 1e-6}")
    x = "X" if norm_kind == "none" else "N"
    if gated:
        inputs += [("Wg", dt, ["d", "f"]), ("Wu", dt, ["d", "f"])]
        ops += [f"{{name: G, op: matmul, args: [{x}, Wg], over: d}}", f"{{name: U, op: matmul, args: [{x}, Wu], over: d}}",
                "{name: S, op: silu, args: [G]}", "{name: H, op: mul, args: [S, U]}"]
    else:
        inputs += [("W1", dt, ["d", "f"]), ("b1", dt, ["f"])]
        ops += [f"{{name: H0, op: matmul, args: [{x}, W1], over: d}}", "{name: H1, op: add, args: [H0, b1]}"]
        activation(ops, "H1", random.choice(["gelu", "gelu_tanh", "relu", "silu"]), "H")
    inputs.append(("W2", dt, ["f", "d"]))
    ops.append("{name: Y0, op: matmul, args: [H, W2], over: f}")
    out = "Y0"
    if random.random() < 0.5:
        ops.append("{name: Y, op: add, args: [Y0, X]}")
        out = "Y"
    axes = {"t": t, "d": d, "f": f}
    return (f"mlp {dt} {t}x{d}->{f} {norm_kind}{' gated' if gated else ''}{' residual' if out == 'Y' else ''}",
            graph_text(name, axes, inputs, ops, [out]), axes)


def elementwise(name):
    dt = random.choice(["fp16", "bf16", "fp32"])
    sizes = {"a": random.choice([1, 2, 16, 33]), "r": random.choice([1, 7, 64, 500, 1024]),
             "c": random.choice([1, 3, 8, 77, 768, 2500])}
    order = random.sample(["a", "r", "c"], 3)
    inputs = [("X", dt, ["a", "r", "c"]), ("Y", dt, order)]
    ops = [f"{{name: Yp, op: permute, args: [Y], order: [a, r, c]}}", "{name: S, op: add, args: [X, Yp]}"]
    cur = "S"
    vec = random.choice(["a", "r", "c", None])
    if vec:
        inputs.append(("v", dt, [vec]))
        ops.append(f"{{name: Sv, op: mul, args: [{cur}, v]}}")
        cur = "Sv"
    for a in range(random.randint(0, 3)):
        cur = activation(ops, cur, random.choice(ACTIVATIONS), f"E{a}")
    out_order = random.sample(["a", "r", "c"], 3)
    if random.random() < 0.5:
        ops.append(f"{{name: O, op: permute, args: [{cur}], order: [{', '.join(out_order)}]}}")
        cur = "O"
    if random.random() < 0.3:
        axis = random.choice(["a", "r", "c"])
        ops.append(f"{{name: T, op: reduce_sum, args: [{cur}], axis: {axis}}}")
        cur = "T"
    return (f"elementwise {dt} {sizes['a']}x{sizes['r']}x{sizes['c']} Y as {''.join(order)} v along {vec}",
            graph_text(name, sizes, inputs, ops, [cur]), sizes)


FAMILIES = {"linear": linear, "bmm": bmm, "attention": attention, "norm": norm, "mlp": mlp,
            "elementwise": elementwise}
REDUCE_KERNEL = re.compile(r"reduce-sum \[([^\]]*)\] over (\w+)")


def reduce_pairs(kernels, axes):
    """The most (output, position) pairs of a reduce kernel computing the matrix product (over i or k, with the
    output's column axis o or n among its outputs) in the plan; a matrix-vector product after an algebraic rewrite
    (the column mean first) lacks that axis and streams its matrix once."""
    most = 0
    for m in REDUCE_KERNEL.finditer(kernels):
        outs = [a.strip() for a in m.group(1).split(",") if a.strip()]
        if m.group(2) not in ("i", "k") or not set(outs) & {"o", "n"}:
            continue
        pairs = axes[m.group(2)]
        for a in outs:
            pairs *= axes.get(a, 1)
        most = max(most, pairs)
    return most


def generate(seed, count, families=None):
    """The graphs of one seed, in order: (n, family, description, YAML text, axis sizes); the graph of index n is
    named r<n>. The same seed gives the same graphs (bench/plan_diff.py compiles them with two builds)."""
    random.seed(seed)
    families = families or list(FAMILIES)
    for n in range(count):
        family = families[n % len(families)]
        yield (n, family) + FAMILIES[family](f"r{n}")


def chosen_kernels(compile_stdout):
    """The kernels of the plan `tsopt compile` chose (its ranking table's first row, last column), or "-"."""
    rank = re.search(r"^1 +.*$", compile_stdout, re.M)
    return re.split(r" {2,}", rank.group(0))[-1] if rank else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=80)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    ap.add_argument("--keep")
    ap.add_argument("--tsopt", default=os.path.join(ROOT, "build", "tsopt"))
    args = ap.parse_args()
    families = args.family or list(FAMILIES)
    work = args.keep or tempfile.mkdtemp(prefix="random_graphs.")
    os.makedirs(work, exist_ok=True)
    failed, slow, reduce, extra = [], [], [], []
    try:
        for n, family, desc, text, axes in generate(args.seed, args.count, families):
            path = os.path.join(work, f"r{n}.yaml")
            with open(path, "w") as f:
                f.write(text)
            start = time.time()
            try:
                run = subprocess.run([args.tsopt, "compile", path, "-o", work], cwd=ROOT, capture_output=True,
                                     text=True, timeout=120)
            except subprocess.TimeoutExpired:
                run = subprocess.CompletedProcess([], 124, "", "tsopt compile ran past 120 s")
            took = time.time() - start
            with open(os.path.join(work, f"r{n}.log"), "w") as f:
                f.write(run.stdout + run.stderr)
            kernels = chosen_kernels(run.stdout)
            print(f"r{n:<4} {desc:58s} rc={run.returncode} {took:5.2f}s  {kernels}")
            if run.returncode != 0:
                said = (run.stderr or run.stdout).strip().splitlines()
                failed.append(f"r{n} ({desc}): {said[0] if said else f'exit status {run.returncode}, no message'}")
            if took > 2:
                slow.append(f"r{n} ({desc}): {took:.1f} s")
            if family in ("linear", "bmm") and reduce_pairs(kernels, axes) >= 1 << 22:
                reduce.append(f"r{n} ({desc}): {kernels}")
            # a sum of a product with a vector is a contraction too (a GEMV over the size-1 rows _one, plan.c)
            vector_sums = 1 if "args: [S, v]" in text and "op: reduce_sum" in text else 0
            if len(re.findall(r"\bgemm\S* \[", kernels)) > text.count("op: matmul") + vector_sums:  # gemm, dual-gemm, +rowstats
                extra.append(f"r{n} ({desc}): {kernels}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{args.count} graphs ({', '.join(families)}), seed {args.seed}: {len(failed)} failed, {len(slow)} slow, "
          f"{len(reduce)} contractions left to a reduce kernel, {len(extra)} with more GEMMs than matmuls")
    for title, items in (("failed", failed), ("slow", slow), ("reduce", reduce), ("extra", extra)):
        for item in items:
            print(f"  {title}: {item}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
