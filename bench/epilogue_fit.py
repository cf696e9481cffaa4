#!/usr/bin/env python3
"""epilogue_fit.py — the GEMM epilogue's cost term against tune records (bench/NOTES.md run 141).

Reads `tsopt tune --record` files of GEMM + epilogue graphs that share one GEMM shape and a bias-only graph
(bench/probes/epilogue_*.yaml; the bias-only one is named by --base, default epilogue_bias). For every GEMM kernel
in the cooperative form (not ping-pong, not skinny, not cuBLASLt) whose configuration the bias-only graph also
timed, the epilogue's measured cost is its kernel time less the bias-only kernel's in that configuration; the
model's is the busier pipe's time (FMA-pipe slots at half fma_flops_per_s, MUFU ops at sfu_ops_per_s) of the
difference in epilogue work, over the share of SMs the tiles occupy. Prints a row per kernel, then
epilogue_efficiency fitted as the geometric mean of model / measured (Σ log² minimised), and the same for a model
that adds the two pipes instead of taking the busier. Last, the ping-pong kernels against the bias-only ping-pong
kernel: the share of the epilogue (at the fitted efficiency) they leave unhidden, and its median.

  python3 bench/epilogue_fit.py RECORD.json... [--base epilogue_bias] [--min-us 0.5]
"""
import argparse
import json
import math
import sys


def gemm_kernels(record, pingpong=False):
    """(config, kernel) of every ok candidate's GEMM kernels in the cooperative tile form (or the ping-pong one)."""
    for c in record["candidates"]:
        if c.get("status") != "ok":
            continue
        for k in c["kernels"]:
            if k["kind"] != "gemm" or bool(k.get("pingpong")) != pingpong or k.get("skinny") or k.get("library"):
                continue
            if k.get("measured_s") is None:
                continue
            yield k.get("config", "?"), k


def pipes(k, cm):
    """(FMA-pipe seconds, MUFU seconds) of a kernel's epilogue on all SMs, before the share and efficiency."""
    return (k.get("epilogue_slots", 0) / (0.5 * cm["fma_flops_per_s"]),
            k.get("epilogue_sfu_ops", 0) / cm["sfu_ops_per_s"])


def base_kernels(record, pingpong=False):
    """The bias-only graph's kernel per configuration: the one with the bias in its epilogue (a baseline plan's bare
    GEMM has none), the first (best-ranked) of those."""
    base = {}
    for cfg, k in gemm_kernels(record, pingpong):
        if k.get("epilogue_slots", 0) > base.get(cfg, {}).get("epilogue_slots", 0):
            base[cfg] = k
    return base


def paired_kernels(recs, base_name, pingpong=False):
    """(graph, config, kernel, the bias-only kernel in that configuration, the record's cost model) for every graph
    but the bias-only one, a kernel per configuration both timed."""
    base = base_kernels(recs[base_name], pingpong)
    for name, r in sorted(recs.items()):
        if name == base_name:
            continue
        seen = set()
        for cfg, k in gemm_kernels(r, pingpong):
            b = base.get(cfg)
            if b is None or cfg in seen:
                continue
            seen.add(cfg)
            yield name, cfg, k, b, r["costmodel"]


def pingpong_share(recs, base_name, eff):
    """The ping-pong form's unhidden epilogue: per graph, its ping-pong kernel's time over the bias-only one's
    against the model's epilogue difference at eff; the model (costmodel.c ts_costmodel_time) leaves
    gemm_pingpong_epilogue_share of it plus one wave's worth (1/tile_waves) unhidden while the epilogue is the
    shorter of the two."""
    shares = []
    print(f"\nping-pong: {'graph':24s} {'config':30s} {'meas us':>8s} {'model us':>8s} {'unhidden':>8s} {'share':>6s}")
    for name, cfg, k, b, cm in paired_kernels(recs, base_name, pingpong=True):
        f, s = pipes(k, cm)
        bf, bs = pipes(b, cm)
        model = (max(f, s) - max(bf, bs)) / (eff * k["wave_efficiency"]) * 1e6
        meas = (k["measured_s"] - b["measured_s"]) * 1e6
        if model <= 0:
            continue
        share = meas / model - 1 / max(k.get("tile_waves", 1), 1)
        shares.append(share)
        print(f"ping-pong: {name:24s} {cfg:30s} {meas:8.2f} {model:8.2f} {meas / model:8.2f} {share:6.2f}")
    if shares:
        shares.sort()
        print(f"ping-pong: gemm_pingpong_epilogue_share, the median of {len(shares)}: {shares[len(shares) // 2]:.2f} "
              f"(range {shares[0]:.2f}-{shares[-1]:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("records", nargs="+")
    ap.add_argument("--base", default="epilogue_bias", help="the bias-only graph's name")
    ap.add_argument("--min-us", type=float, default=0.5,
                    help="fit only epilogues that cost at least this many microseconds measured")
    a = ap.parse_args()
    recs = {}
    for path in a.records:
        with open(path) as f:
            r = json.load(f)
        recs[r["graph"]] = r
    if a.base not in recs:
        sys.exit(f"epilogue_fit: no record of the bias-only graph '{a.base}' among the files")
    print(f"{'graph':28s} {'config':22s} {'slots/el':>8s} {'mufu/el':>7s} {'meas us':>8s} {'busier us':>9s} "
          f"{'sum us':>7s} {'ratio':>6s}")
    busier_ratios, sum_ratios = [], []
    for name, cfg, k, b, cm in paired_kernels(recs, a.base):
        wave = k["wave_efficiency"]
        f, s = pipes(k, cm)
        bf, bs = pipes(b, cm)
        meas = (k["measured_s"] - b["measured_s"]) * 1e6
        busier = (max(f, s) - max(bf, bs)) / wave * 1e6
        summed = ((f + s) - (bf + bs)) / wave * 1e6
        # per output element: the bias-only kernel's epilogue is one add an element, so its slots are M·N
        el = b.get("epilogue_slots", 0) or 1
        ratio = busier / meas if meas > 0 else float("nan")
        print(f"{name:28s} {cfg:22s} {k.get('epilogue_slots', 0) / el:8.1f} "
              f"{k.get('epilogue_sfu_ops', 0) / el:7.1f} {meas:8.2f} {busier:9.2f} {summed:7.2f} {ratio:6.2f}")
        if meas >= a.min_us and busier > 0:
            busier_ratios.append(busier / meas)
            sum_ratios.append(summed / meas)
    fitted = None
    for label, rs in (("busier pipe", busier_ratios), ("pipes added", sum_ratios)):
        if not rs:
            print(f"{label}: no epilogue of {a.min_us} us or more to fit")
            continue
        logs = [math.log(x) for x in rs]
        eff = math.exp(sum(logs) / len(logs))
        fitted = fitted or eff
        spread = math.sqrt(sum((l - math.log(eff)) ** 2 for l in logs) / len(logs))
        print(f"{label}: epilogue_efficiency {eff:.3f} over {len(rs)} kernels, residual spread "
              f"{100 * (math.exp(spread) - 1):.0f}% (rms of log ratio), ratios {min(rs):.2f}-{max(rs):.2f}")
    if fitted:
        pingpong_share(recs, a.base, fitted)


if __name__ == "__main__":
    main()
