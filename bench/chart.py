"""chart.py — draws the H200 benchmark's two-panel PNG from bench.py's results JSON.

Left: our speedup over each anchor, per workload (grouped bars, log scale, a line at 1x; an anchor that was
skipped or unavailable has no bar). Right: predicted vs measured time of every tuned candidate with status
"ok" (log-log; the y = x line and a ±20% band; the chosen candidates drawn larger, outlined in black).

Usage: python3 bench/chart.py RESULTS.json OUT.png      (bench.py calls main() itself when matplotlib imports)
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import accuracy  # noqa: E402

ANCHORS = [("eager", "PyTorch eager"), ("torch.compile", "torch.compile"),
           ("torch.compile max-autotune", "torch.compile max-autotune"), ("sdpa_flash", "SDPA flash"),
           ("sdpa_cudnn", "SDPA cuDNN"), ("flex", "FlexAttention"), ("cublas", "cuBLAS")]


def speedups(results):
    """[(graph, {anchor: speedup})] in the results' order, from its "speedups" or recomputed from the times."""
    out = []
    for g, r in (results.get("graphs") or {}).items():
        sp = dict(r.get("speedups") or {})
        if not sp:
            ours = r.get("ours_ms") if r.get("ours_passed", True) else None
            sp = {a: accuracy.speedup(v, ours) for a, v in (r.get("anchors") or {}).items()}
        out.append((g, {a: v for a, v in sp.items() if isinstance(v, (int, float)) and v > 0}))
    return out


def candidate_points(results):
    """[(graph, predicted_ms, measured_ms, chosen)] of every ok candidate with both times."""
    pts = []
    for g, r in (results.get("graphs") or {}).items():
        chosen_rank = r.get("chosen")
        for c in r.get("candidates") or []:
            p, m = c.get("predicted_s"), c.get("measured_s")
            if c.get("status") == "ok" and isinstance(p, (int, float)) and isinstance(m, (int, float)) and p > 0 and m > 0:
                chosen = c.get("chosen", c.get("rank") == chosen_rank)
                pts.append((g, p * 1e3, m * 1e3, bool(chosen)))
    return pts


def draw(results, png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 6.2), gridspec_kw={"width_ratios": [1.35, 1]})
    colors = plt.get_cmap("tab10").colors

    # left: speedups
    rows = speedups(results)
    used = [(a, label) for a, label in ANCHORS if any(a in sp for _, sp in rows)]
    if rows and used:
        n = len(used)
        width = 0.8 / n
        for j, (a, label) in enumerate(used):
            xs = [i - 0.4 + width * (j + 0.5) for i, (_, sp) in enumerate(rows) if a in sp]
            ys = [sp[a] for _, sp in rows if a in sp]
            # from 1x up (ours faster) or down (ours slower)
            bars = ax1.bar(xs, [y - 1 for y in ys], width, bottom=1.0, label=label, color=colors[j % len(colors)])
            for bar, y in zip(bars, ys):
                ax1.annotate("%.2f" % y, (bar.get_x() + bar.get_width() / 2, y), ha="center",
                             va="bottom" if y >= 1 else "top", fontsize=6, rotation=90,
                             xytext=(0, 2 if y >= 1 else -2), textcoords="offset points")
        ax1.set_yscale("log")
        ax1.axhline(1.0, color="black", linewidth=1)
        vals = [v for _, sp in rows for v in sp.values()]
        lo, hi = min(vals + [1.0]), max(vals + [1.0])
        ax1.set_ylim(lo / 1.6, hi * 1.6)
        fmt = matplotlib.ticker.FuncFormatter(lambda v, _: ("%gx" % float("%.2g" % v)) if v > 0 else "")
        ax1.yaxis.set_major_formatter(fmt)
        ax1.yaxis.set_minor_formatter(fmt if hi / lo < 12 else matplotlib.ticker.NullFormatter())
        for i, (g, sp) in enumerate(rows):
            if not sp:
                ax1.text(i, 1.0, "no result", ha="center", va="bottom", fontsize=7, color="gray")
        ax1.legend(fontsize=8, loc="best")
    else:
        ax1.text(0.5, 0.5, "no speedups measured", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_xlim(-0.6, max(len(rows), 1) - 0.4)
    ax1.set_xticks(range(len(rows)))
    ax1.set_xticklabels([g for g, _ in rows], rotation=30, ha="right", fontsize=8)
    ax1.set_ylabel("our speedup over the anchor (anchor ms / ours ms; > 1: ours faster)")
    ax1.set_title("tsopt vs PyTorch on %s" % results.get("gpu", "?"), fontsize=10)
    ax1.grid(axis="y", which="both", alpha=0.3)

    # right: predicted vs measured
    pts = candidate_points(results)
    if pts:
        graphs = list(dict.fromkeys(g for g, _, _, _ in pts))
        for i, g in enumerate(graphs):
            c = colors[i % len(colors)]
            mine = [p for p in pts if p[0] == g]
            rest = [p for p in mine if not p[3]]
            if rest:
                ax2.scatter([p[1] for p in rest], [p[2] for p in rest], s=22, color=c, alpha=0.8, label=g)
            ch = [p for p in mine if p[3]]
            if ch:
                ax2.scatter([p[1] for p in ch], [p[2] for p in ch], s=90, color=c, edgecolors="black", linewidths=1.5,
                            marker="*", label=None if any(not p[3] for p in mine) else g, zorder=3)
        vals = [p[1] for p in pts] + [p[2] for p in pts]
        lo, hi = min(vals) / 1.5, max(vals) * 1.5
        xs = [lo * (hi / lo) ** (k / 50) for k in range(51)]
        ax2.plot(xs, xs, color="black", linewidth=1, label="measured = predicted")
        ax2.fill_between(xs, [x * 0.8 for x in xs], [x * 1.2 for x in xs], color="gray", alpha=0.2, label="±20%")
        ax2.set_xscale("log")
        ax2.set_yscale("log")
        msfmt = matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % float("%.3g" % v))
        for axis in (ax2.xaxis, ax2.yaxis):
            axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(msfmt)
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax2.set_xlim(lo, hi)
        ax2.set_ylim(lo, hi)
        ax2.legend(fontsize=7, loc="upper left")
        acc = results.get("accuracy") or {}
        txt = []
        if acc.get("median_ape") is not None:
            txt.append("median |err| %.0f%%" % (100 * acc["median_ape"]))
        if acc.get("spearman_pooled") is not None:
            txt.append("Spearman %.2f" % acc["spearman_pooled"])
        if acc.get("top1_share") is not None:
            txt.append("top-1 within 10%%: %.0f%%" % (100 * acc["top1_share"]))
        if txt:
            ax2.text(0.98, 0.02, "\n".join(txt), ha="right", va="bottom", transform=ax2.transAxes, fontsize=8,
                     bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "gray"})
    else:
        ax2.text(0.5, 0.5, "no tuned candidates with both times", ha="center", va="center", transform=ax2.transAxes)
    ax2.set_xlabel("predicted (ms, cost model)")
    ax2.set_ylabel("measured (ms, tsopt tune)")
    ax2.set_title("cost model: every ok candidate (stars: chosen)", fontsize=10)
    ax2.grid(which="both", alpha=0.3)

    fig.tight_layout()
    fig.savefig(png, dpi=130)
    plt.close(fig)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python3 bench/chart.py RESULTS.json OUT.png", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        results = json.load(f)
    draw(results, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
