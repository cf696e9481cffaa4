#!/usr/bin/env python3
"""kernel_table.py — every timed candidate of `tsopt tune` records, kernel by kernel: its configuration and its
predicted against measured time (docs/tune-records.md). No GPU needed.

    python3 bench/kernel_table.py OUT/tune/<graph>.json ... | OUT/tune.tar.gz ...
    python3 bench/kernel_table.py --compare A_RECORDS B_RECORDS   (each a .json, a folder of them or a .tar.gz)

A tune.tar.gz (what bench/h200.sh leaves) is read in place: every tune/<graph>.json inside it. --compare pairs
two runs' records (e.g. bench/gpu/tune_ab.sh's A1/tune and B1/tune) by graph, candidate plan and kernel position,
and prints each kernel's measured µs on both sides and B's change, then per graph the fastest validated candidate of
each side (the plan tune keeps, named or not alike)."""
import os
import json
import sys
import tarfile


def records(path):
    if os.path.isdir(path):
        for f in sorted(os.listdir(path)):
            if f.endswith(".json"):
                yield from records(os.path.join(path, f))
        return
    if path.endswith((".tar.gz", ".tgz")):
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                if member.name.endswith(".json") and "/tune/" in "/" + member.name:
                    yield member.name, json.load(tar.extractfile(member))
    else:
        with open(path) as f:
            yield path, json.load(f)


def us(seconds):
    return f"{seconds * 1e6:8.1f}" if isinstance(seconds, (int, float)) else f"{'-':>8s}"


def print_record(name, rec):
    print(f"== {rec.get('graph', name)} ({rec.get('gpu', '?')})")
    for cand in rec.get("candidates", []):
        print(f"  {cand.get('plan', '?'):40s} predicted {us(cand.get('predicted_s'))} us  measured "
              f"{us(cand.get('measured_s'))} us  {cand.get('status', '')}")
        for k in cand.get("kernels", []):
            print(f"      {str(k.get('kind', '?')):10s} {str(k.get('config') or ''):34s} predicted "
                  f"{us(k.get('predicted_s'))}  measured {us(k.get('measured_s'))}")


def by_graph(path):
    return {rec.get("graph", name): rec for name, rec in records(path)}


def compare(path_a, path_b):
    """Each kernel of every candidate timed on both sides: measured µs on A and B and B's change."""
    a, b = by_graph(path_a), by_graph(path_b)
    print(f"{'graph / plan / kernel':60s} {'A us':>8s} {'B us':>8s} {'B/A':>7s}")
    for graph in sorted(set(a) & set(b)):
        cands_b = {c.get("plan"): c for c in b[graph].get("candidates", [])}
        for ca in a[graph].get("candidates", []):
            cb = cands_b.get(ca.get("plan"))
            if cb is None:
                continue
            rows = [(ca.get("plan", "?"), ca.get("measured_s"), cb.get("measured_s"))]
            for i, (ka, kb) in enumerate(zip(ca.get("kernels", []), cb.get("kernels", []))):
                rows.append((f"  {i} {ka.get('kind', '?')} {ka.get('config') or ''}", ka.get("measured_s"),
                             kb.get("measured_s")))
            for label, ta, tb in rows:
                print(f"{(graph + ' ' + label)[:60]:60s} {us(ta)} {us(tb)} {ratio(ta, tb)}")
        best_a, best_b = fastest(a[graph]), fastest(b[graph])
        if best_a and best_b:   # the plans each side's tune keeps, whatever their names
            print(f"{(graph + ' fastest: A ' + best_a.get('plan', '?') + ', B ' + best_b.get('plan', '?'))[:60]:60s} "
                  f"{us(best_a['measured_s'])} {us(best_b['measured_s'])} {ratio(best_a['measured_s'], best_b['measured_s'])}")


def ratio(ta, tb):
    ok = isinstance(ta, (int, float)) and isinstance(tb, (int, float)) and ta > 0
    return f"{tb / ta:7.3f}" if ok else f"{'-':>7s}"


def fastest(rec):
    """The validated candidate with the least measured time (the one tune keeps), or None."""
    timed = [c for c in rec.get("candidates", []) if c.get("status") == "ok" and isinstance(c.get("measured_s"), (int, float))]
    return min(timed, key=lambda c: c["measured_s"]) if timed else None


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) < 2:
        print(__doc__.strip())
        return 2
    for path in sys.argv[1:]:
        for name, rec in records(path):
            print_record(name, rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
