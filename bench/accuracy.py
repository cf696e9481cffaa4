"""accuracy.py — pure functions of the H200 benchmark report (no GPU, no torch; tested by test_accuracy.py).

Used by bench/bench.py and bench/chart.py:
  - ranks with ties averaged, Spearman rank correlation, median absolute percentage error;
  - the cost-model accuracy report over tune records (docs/tune-records.md): every candidate with status
    "ok" counts; pooled and per-graph Spearman, top-1 share, predicted vs measured speedup over an anchor;
  - speedup tables (anchor time / our time);
  - the work of a graph from its YAML spec alone — contraction FLOPs (also with causal masks taken into
    account), minimum bytes (inputs read once, outputs written once) — and its roofline floor.

Usage: import accuracy; see each function's docstring. `python3 bench/test_accuracy.py` runs the tests.
"""

import math
import statistics

import graphref

# Goals printed beside the measured figures.
GOALS = {"median_ape": 0.20, "spearman": 0.8, "top1_within": 0.10, "top1_share": 0.8}

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8, "int32": 4, "int64": 8, "int8": 1, "bool": 1}


# ---- statistics ----------------------------------------------------------------------------------------
def average_ranks(xs):
    """1-based ranks of xs, ties given the mean of the ranks they span: [10, 20, 20, 5] -> [2, 3.5, 3.5, 1]."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        r = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = r
        i = j + 1
    return ranks


def pearson(x, y):
    """Pearson correlation; None when fewer than 2 points or either side is constant."""
    n = len(x)
    if n != len(y):
        raise ValueError("pearson: %d vs %d values" % (n, len(y)))
    if n < 2:
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(x, y):
    """Spearman rank correlation (Pearson of the average ranks, so ties are handled); None when undefined."""
    if len(x) != len(y):
        raise ValueError("spearman: %d vs %d values" % (len(x), len(y)))
    return pearson(average_ranks(x), average_ranks(y))


def ape(predicted, measured):
    """Absolute percentage error |p - m| / m, as a fraction."""
    return abs(predicted - measured) / measured


def median_ape(predicted, measured):
    """Median of |p - m| / m over pairs with m > 0; None when there are none."""
    errs = [ape(p, m) for p, m in zip(predicted, measured) if p is not None and m is not None and m > 0]
    return statistics.median(errs) if errs else None


# ---- tune records ---------------------------------------------------------------------------------------
def ok_candidates(record):
    """The candidates of one record that were validated and timed, with both times present."""
    out = []
    for c in record.get("candidates") or []:
        if c.get("status") == "ok" and _pos(c.get("predicted_s")) and _pos(c.get("measured_s")):
            out.append(c)
    return out


def _pos(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def chosen_candidate(record):
    """The emitted candidate: the one whose rank is record["chosen"] (else candidates[chosen-1]); None if 0."""
    k = record.get("chosen") or 0
    cands = record.get("candidates") or []
    if k <= 0:
        return None
    for c in cands:
        if c.get("rank") == k:
            return c
    return cands[k - 1] if k <= len(cands) else None


def top1_within(candidates, tol=GOALS["top1_within"]):
    """Whether the predicted-best candidate measured within `tol` of the measured best (None if empty).

    Ties in prediction: the lowest rank (the tuner's order) is the predicted best."""
    if not candidates:
        return None
    pred_best = min(candidates, key=lambda c: (c["predicted_s"], c.get("rank", 0)))
    best = min(c["measured_s"] for c in candidates)
    return pred_best["measured_s"] <= best * (1 + tol)


def top1_share(per_graph_flags):
    """Share of True among the non-None flags; None when all are None."""
    flags = [f for f in per_graph_flags if f is not None]
    return sum(1 for f in flags if f) / len(flags) if flags else None


def speedup(anchor, ours):
    """anchor / ours when both are positive numbers, else None (an anchor that was skipped or failed)."""
    return anchor / ours if _pos(anchor) and _pos(ours) else None


def accuracy_report(records, anchor_ms=None, ours_ms=None, min_per_graph=3, tol=GOALS["top1_within"]):
    """The cost-model accuracy report over tune records.

    records: {graph: record}; anchor_ms: {graph: torch.compile ms (or None)}; ours_ms: {graph: our measured
    ms in the benchmark (or None)}. Returns a JSON-ready dict: counts, median APE, pooled Spearman, mean
    per-graph Spearman (graphs with at least `min_per_graph` ok candidates), top-1 share, and per graph
    its own figures and the predicted vs measured speedup over the anchor:
      predicted = anchor ms / (chosen candidate's predicted_s in ms); measured = anchor ms / ours ms.
    """
    anchor_ms, ours_ms = anchor_ms or {}, ours_ms or {}
    pred_all, meas_all, per_graph = [], [], {}
    for graph in sorted(records):
        rec = records[graph]
        oks = ok_candidates(rec)
        pred = [c["predicted_s"] for c in oks]
        meas = [c["measured_s"] for c in oks]
        pred_all += pred
        meas_all += meas
        chosen = chosen_candidate(rec)
        pred_chosen_ms = chosen["predicted_s"] * 1e3 if chosen and _pos(chosen.get("predicted_s")) else None
        a = anchor_ms.get(graph)
        row = {
            "candidates": len(rec.get("candidates") or []),
            "ok": len(oks),
            "median_ape": median_ape(pred, meas),
            "spearman": spearman(pred, meas) if len(oks) >= min_per_graph else None,
            "top1_within": top1_within(oks, tol),
            "chosen_rank": rec.get("chosen") or 0,
            "chosen_predicted_ms": pred_chosen_ms,
            "chosen_measured_ms": chosen["measured_s"] * 1e3 if chosen and _pos(chosen.get("measured_s")) else None,
            "anchor_ms": a if _pos(a) else None,
            "predicted_speedup": speedup(a, pred_chosen_ms),
            "measured_speedup": speedup(a, ours_ms.get(graph)),
        }
        per_graph[graph] = row
    rhos = [r["spearman"] for r in per_graph.values() if r["spearman"] is not None]
    return {
        "candidates_ok": len(pred_all),
        "graphs": len(per_graph),
        "median_ape": median_ape(pred_all, meas_all),
        "spearman_pooled": spearman(pred_all, meas_all) if len(pred_all) >= 2 else None,
        "spearman_mean_per_graph": sum(rhos) / len(rhos) if rhos else None,
        "spearman_graphs": len(rhos),
        "top1_share": top1_share(r["top1_within"] for r in per_graph.values()),
        "goals": {"median_ape_max": GOALS["median_ape"], "spearman_min": GOALS["spearman"],
                  "top1_within": tol, "top1_share_min": GOALS["top1_share"]},
        "per_graph": per_graph,
    }


def speedup_table(results, anchors):
    """{graph: {anchor: anchor_ms / ours_ms or None}} from results {graph: {"ours_ms", "anchors": {name: ms|str}}}."""
    table = {}
    for graph, r in results.items():
        table[graph] = {a: speedup((r.get("anchors") or {}).get(a), r.get("ours_ms")) for a in anchors}
    return table


# ---- work and roofline -----------------------------------------------------------------------------------
def _sizes(spec, sizes):
    out = {}
    for name, v in (spec.get("axes") or {}).items():
        if isinstance(v, dict):
            out[name] = v.get("size", v.get("typical"))
        else:
            out[name] = v
    out.update(sizes or {})
    for name, v in (spec.get("axes") or {}).items():
        if isinstance(v, dict) and "like" in v and name not in (sizes or {}):
            out[name] = out[v["like"]]
    return out


def _union(*lists):
    out = []
    for axes in lists:
        out += [a for a in axes if a not in out]
    return out


def _prod(sizes, axes):
    p = 1
    for a in axes:
        p *= sizes[a]
    return p


def track_axes(spec):
    """name -> (axes, dtype) for every input and op, by graphref's rules (the axis sets; order not kept)."""
    env = {n: (list(v["shape"]), v["dtype"]) for n, v in spec["inputs"].items()}
    names = {op["name"] for op in spec["ops"]}
    for op in spec["ops"]:
        # an operand written as a number (graphref.number) is a 0-dim constant: no axes, the op's dtype
        kind, args = op["op"], [([], None) if graphref.number(a, env, names) is not None else env[a]
                                for a in op.get("args", [])]
        if kind == "matmul":
            over = op["over"]
            ka, kb = (over, over) if isinstance(over, str) else over
            (xa, xd), (ya, _) = args
            ya = [ka if a == kb else a for a in ya]
            r = ([a for a in _union(xa, ya) if a != ka], xd)
        elif kind == "constant":
            r = ([], op.get("dtype", "fp32"))
        elif kind == "iota":
            r = ([op["axis"]], op.get("dtype", "fp32"))
        elif kind == "cast":
            r = (args[0][0], op["dtype"])
        elif kind in ("reduce_sum", "reduce_max", "mean", "var", "logsumexp"):
            r = ([a for a in args[0][0] if a != op["axis"]], args[0][1])
        elif kind in ("permute",):
            r = (list(op["order"]), args[0][1])
        elif kind in ("expand", "reshape"):
            r = (list(op["shape"]), args[0][1])
        elif kind == "slice":
            r = ([op["as"] if a == op["axis"] else a for a in args[0][0]], args[0][1])
        elif kind == "where":
            typed = args[1] if args[1][0] else args[2]
            r = (_union(*[a for a, _ in args]), typed[1])
        elif kind == "append":  # the cache seen over its first `as` positions
            r = ([op["as"] if a == op["axis"] else a for a in args[0][0]], args[0][1])
        else:  # elementwise, unary, scale, softmax, rmsnorm
            order = args if kind in ("sub", "div", "less_than") else sorted(args, key=lambda t: -len(t[0]))
            typed = [t for t in args if t[0]]
            r = (_union(*[a for a, _ in order]), (typed[0] if typed else args[0])[1])
        env[op["name"]] = r
    return env


def _causal_fraction(ops, env, sizes, where_op):
    """Fraction of score elements left unmasked by where(less_than(index_a, index_b), -inf, 0) (or its
    mirror where(c, 0, -inf)), the indices being iotas (possibly expanded) of two axes; None otherwise."""
    def const(name):
        op = ops.get(name)
        if op is None or op["op"] != "constant":
            return None
        v = op["value"]
        return float("-inf") if v in ("-inf", "-.inf") else float("inf") if v in ("inf", ".inf") else float(v)

    def iota_axis(name):
        op = ops.get(name)
        while op is not None and op["op"] in ("expand", "copy", "cast"):
            op = ops.get(op["args"][0])
        return op["axis"] if op is not None and op["op"] == "iota" else None

    cond, a, b = where_op["args"]
    ca, cb = const(a), const(b)
    if ca == float("-inf") and cb == 0:
        masked_when_true = True
    elif ca == 0 and cb == float("-inf"):
        masked_when_true = False
    else:
        return None
    lt = ops.get(cond)
    if lt is None or lt["op"] != "less_than":
        return None
    x, y = iota_axis(lt["args"][0]), iota_axis(lt["args"][1])
    if x is None or y is None or x == y:
        return None
    nx, ny = sizes[x], sizes[y]
    # cond is true where ix < iy; the pairs with iy <= ix number sum over ix of min(ix + 1, ny)
    m = min(nx, ny)
    le = m * (m + 1) // 2 + (nx - m) * ny
    true_frac = 1 - le / (nx * ny)
    return 1 - true_frac if masked_when_true else true_frac


def graph_work(spec, sizes=None):
    """Work of a graph at `sizes` (defaults from the YAML; dynamic axes at their typical size).

    Returns {"flops": contraction FLOPs as written (2 per multiply-add), "flops_effective": the same with the
    contractions before and after a causal mask (where(less_than(iota, iota), -inf, 0) added to scores
    that a softmax normalizes) counted only over unmasked elements, "causal_fraction": that fraction or
    None, "min_bytes": inputs read once plus outputs written once, "sizes": the sizes used}.
    """
    sizes = _sizes(spec, sizes)
    env = track_axes(spec)
    ops = {op["name"]: op for op in spec["ops"]}
    consumers = {}
    for op in spec["ops"]:
        for a in op.get("args", []):
            consumers.setdefault(a, []).append(op)
    flops = {}
    for op in spec["ops"]:
        if op["op"] == "matmul":
            over = op["over"]
            ka, kb = (over, over) if isinstance(over, str) else over
            xa = env[op["args"][0]][0]
            ya = [ka if a == kb else a for a in env[op["args"][1]][0]]
            flops[op["name"]] = 2 * _prod(sizes, _union(xa, ya))
    factor, frac_seen = {}, None
    for op in spec["ops"]:
        if op["op"] != "where":
            continue
        frac = _causal_fraction(ops, env, sizes, op)
        if frac is None:
            continue
        for add in consumers.get(op["name"], []):
            if add["op"] != "add":
                continue
            softmaxes = [c for c in consumers.get(add["name"], []) if c["op"] == "softmax"]
            if not softmaxes:
                continue
            frac_seen = frac
            other = [a for a in add["args"] if a != op["name"]]
            name = other[0] if other else None
            while name in ops and ops[name]["op"] in ("scale", "copy", "cast", "neg"):
                name = ops[name]["args"][0]
            if name in flops:
                factor[name] = frac
            for sm in softmaxes:
                for c in consumers.get(sm["name"], []):
                    if c["op"] == "matmul" and c["args"][0] == sm["name"]:
                        factor[c["name"]] = frac
    total = sum(flops.values())
    effective = sum(f * factor.get(n, 1.0) for n, f in flops.items())
    nbytes = 0
    for n, v in spec["inputs"].items():
        nbytes += _prod(sizes, v["shape"]) * DTYPE_BYTES[v["dtype"]]
    for n in spec["outputs"]:
        axes, dt = env[n]
        nbytes += _prod(sizes, axes) * DTYPE_BYTES[dt]
    return {"flops": total, "flops_effective": effective, "causal_fraction": frac_seen, "min_bytes": nbytes,
            "sizes": sizes}


def roofline_floor_s(flops, nbytes, tensor_flops_per_s, dram_bytes_per_s):
    """max(FLOPs / tensor rate, bytes / DRAM bandwidth): the time no implementation beats by much — when the
    tensor rate is the physical peak (cost-model coefficient tensor_peak_flops_per_s), not a kernel's."""
    return max(flops / tensor_flops_per_s, nbytes / dram_bytes_per_s)


# ---- formatting -------------------------------------------------------------------------------------------
def fmt_ms(v, digits=4):
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return "%.*f" % (digits, v)
    return "-"


def fmt_x(v):
    return ("%.2fx" % v) if isinstance(v, (int, float)) and v is not None else "-"


def fmt_pct(v):
    return ("%.0f%%" % (100 * v)) if isinstance(v, (int, float)) and v is not None else "-"


def text_table(headers, rows):
    """Left-aligned first column, right-aligned others; every cell a string."""
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    def line(cells):
        return "  ".join(str(c).ljust(widths[i]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(cells))
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])
