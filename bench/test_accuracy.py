"""test_accuracy.py — tests of bench/accuracy.py (and bench/chart.py when matplotlib is there); no GPU needed.

Run: python3 -m pytest bench/test_accuracy.py   or   python3 bench/test_accuracy.py (prints "N passed, N failed").
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import accuracy as A  # noqa: E402


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


# ---- statistics ----------------------------------------------------------------------------------------
def test_average_ranks_ties():
    assert A.average_ranks([10, 20, 20, 5]) == [2, 3.5, 3.5, 1]
    assert A.average_ranks([1, 1, 1]) == [2, 2, 2]
    assert A.average_ranks([]) == []
    assert A.average_ranks([3.0, 1.0, 2.0]) == [3, 1, 2]


def test_spearman_perfect_and_reversed():
    assert close(A.spearman([1, 2, 3, 4], [10, 20, 30, 40]), 1.0)
    assert close(A.spearman([1, 2, 3, 4], [40, 30, 20, 10]), -1.0)
    # monotone but not linear: still 1
    assert close(A.spearman([1, 2, 3, 4, 5], [1, 4, 9, 16, 1000]), 1.0)


def test_spearman_ties_matches_scipy_value():
    # scipy.stats.spearmanr([1, 2, 2, 3], [1, 3, 2, 4]).correlation == 0.9486832980505138
    assert close(A.spearman([1, 2, 2, 3], [1, 3, 2, 4]), 0.9486832980505138)
    # spearmanr([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]) == 0.8207826816681233
    assert close(A.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7]), 0.8207826816681233)


def test_spearman_undefined():
    assert A.spearman([1], [2]) is None
    assert A.spearman([1, 1, 1], [1, 2, 3]) is None
    try:
        A.spearman([1, 2], [1])
    except ValueError:
        pass
    else:
        raise AssertionError("length mismatch accepted")


def test_median_ape():
    assert close(A.median_ape([1.1, 2.0, 2.0], [1.0, 1.0, 4.0]), 0.5)   # errors 0.1, 1.0, 0.5
    assert close(A.median_ape([1.0, 3.0], [2.0, 2.0]), 0.5)             # errors 0.5, 0.5
    assert close(A.median_ape([1.0, 1.2, 9, None], [1.0, 1.0, 0, 1.0]), 0.1)  # m=0 and None skipped
    assert A.median_ape([], []) is None


def cand(rank, pred, meas, status="ok"):
    return {"rank": rank, "predicted_s": pred, "measured_s": meas, "status": status}


def test_top1_within():
    assert A.top1_within([cand(1, 1e-5, 1.05e-5), cand(2, 2e-5, 1.0e-5)]) is True    # 5% off the best
    assert A.top1_within([cand(1, 1e-5, 1.2e-5), cand(2, 2e-5, 1.0e-5)]) is False    # 20% off
    assert A.top1_within([cand(2, 1e-5, 1.0e-5), cand(1, 1e-5, 2.0e-5)]) is False    # tie: lowest rank wins
    assert A.top1_within([]) is None
    assert A.top1_within([cand(1, 1e-5, 1.2e-5), cand(2, 2e-5, 1.0e-5)], tol=0.25) is True


def test_top1_share():
    assert A.top1_share([True, False, None, True]) == 2 / 3
    assert A.top1_share([None]) is None


def test_ok_candidates_and_chosen():
    rec = {"chosen": 2, "candidates": [cand(1, 1e-5, None, "invalid"), cand(2, 2e-5, 3e-5),
                                       cand(3, 3e-5, 1e-5, "build-failed"), cand(4, 4e-5, 0.0)]}
    assert [c["rank"] for c in A.ok_candidates(rec)] == [2]
    assert A.chosen_candidate(rec)["rank"] == 2
    assert A.chosen_candidate({"chosen": 0, "candidates": rec["candidates"]}) is None
    # no "rank" fields: candidates[chosen - 1]
    assert A.chosen_candidate({"chosen": 1, "candidates": [{"x": 1}]}) == {"x": 1}


def test_speedup_and_table():
    assert A.speedup(2.0, 1.0) == 2.0
    assert A.speedup("skipped (budget)", 1.0) is None
    assert A.speedup(2.0, None) is None
    assert A.speedup(True, 1.0) is None
    res = {"g": {"ours_ms": 0.5, "anchors": {"eager": 1.0, "torch.compile": "unavailable: x"}}}
    assert A.speedup_table(res, ["eager", "torch.compile", "cublas"]) == {
        "g": {"eager": 2.0, "torch.compile": None, "cublas": None}}


def test_accuracy_report():
    records = {
        "a": {"chosen": 1, "candidates": [cand(1, 1.0e-5, 1.1e-5), cand(2, 2.0e-5, 1.9e-5), cand(3, 3.0e-5, 3.3e-5)]},
        "b": {"chosen": 2, "candidates": [cand(1, 1.0e-5, 2.0e-5), cand(2, 1.5e-5, 1.0e-5),
                                          cand(3, 4e-5, None, "run-failed")]},
        "c": {"chosen": 0, "candidates": [cand(1, 1e-5, None, "invalid")]},
    }
    rep = A.accuracy_report(records, anchor_ms={"a": 0.022, "b": 0.03, "c": 0.05}, ours_ms={"a": 0.011, "b": 0.01})
    assert rep["candidates_ok"] == 5 and rep["graphs"] == 3
    # errors: 0.0909, 0.0526, 0.0909, 0.5, 0.5 -> median 0.0909
    assert close(rep["median_ape"], 0.1 / 1.1)
    assert close(rep["per_graph"]["a"]["spearman"], 1.0)
    assert rep["per_graph"]["b"]["spearman"] is None          # 2 ok candidates < 3
    assert rep["spearman_graphs"] == 1 and close(rep["spearman_mean_per_graph"], 1.0)
    assert rep["per_graph"]["a"]["top1_within"] is True
    assert rep["per_graph"]["b"]["top1_within"] is False      # predicted best (1e-5) measured 2e-5 vs best 1e-5
    assert rep["per_graph"]["c"]["top1_within"] is None
    assert rep["top1_share"] == 0.5
    assert close(rep["per_graph"]["a"]["predicted_speedup"], 0.022 / 0.01)
    assert close(rep["per_graph"]["a"]["measured_speedup"], 2.0)
    assert close(rep["per_graph"]["b"]["predicted_speedup"], 0.03 / 0.015)
    assert rep["per_graph"]["c"]["predicted_speedup"] is None and rep["per_graph"]["c"]["measured_speedup"] is None
    # pooled: predicted [1,2,3,1,1.5] vs measured [1.1,1.9,3.3,2,1]
    assert close(rep["spearman_pooled"], A.spearman([1, 2, 3, 1, 1.5], [1.1, 1.9, 3.3, 2, 1]))
    json.dumps(rep)


def test_accuracy_report_empty():
    rep = A.accuracy_report({})
    assert rep["median_ape"] is None and rep["spearman_pooled"] is None and rep["top1_share"] is None


# ---- work and roofline ---------------------------------------------------------------------------------
def load_spec(name):
    import yaml
    with open(os.path.join(ROOT, "bench", "graphs", name + ".yaml")) as f:
        return yaml.safe_load(f)


def test_graph_work_bench_graphs():
    w = A.graph_work(load_spec("matmul"))
    assert w["flops"] == 2 * 1024 * 4096 * 4096 and w["flops_effective"] == w["flops"]
    assert w["min_bytes"] == 2 * (1024 * 4096 + 4096 * 4096 + 1024 * 4096)
    assert w["causal_fraction"] is None
    w = A.graph_work(load_spec("attention"))
    assert w["flops"] == 2 * 2 * 16 * 4096 * 4096 * 128 and w["causal_fraction"] is None
    w = A.graph_work(load_spec("attention_causal"))
    n = 4096
    assert close(w["causal_fraction"], (n + 1) / (2 * n))
    assert close(w["flops_effective"], w["flops"] * (n + 1) / (2 * n))
    w = A.graph_work(load_spec("attention_gqa"), {"t_q": 100, "t_kv": 300})
    # t_q < t_kv: query i sees keys 0..i: sum(i + 1) = 100 * 101 / 2 of 100 * 300
    assert close(w["causal_fraction"], 5050 / 30000)
    w = A.graph_work(load_spec("decoder_layer"), {"t": 1024})
    assert w["sizes"]["t_kv"] == 1024
    gemm = 2 * 1024 * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)
    attn = 2 * 2 * 1024 * 32 * 1024 * 128
    assert w["flops"] == gemm + attn
    assert close(w["flops_effective"], gemm + attn * 1025 / 2048)
    w = A.graph_work(load_spec("rmsnorm_mlp"))
    assert w["flops"] == 2 * 2 * 1024 ** 3


def test_graph_work_matches_tsopt_check():
    """Contraction FLOPs and minimum bytes agree with `tsopt check` (skipped when build/tsopt is absent)."""
    tsopt = os.path.join(ROOT, "build", "tsopt")
    if not os.access(tsopt, os.X_OK):
        print("  (skipped: no build/tsopt)")
        return
    unit = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    for path in sorted(glob.glob(os.path.join(ROOT, "bench", "graphs", "*.yaml"))):
        name = os.path.basename(path)[:-5]
        dims = ["--dims", "t=1024"] if name == "decoder_layer" else []
        out = subprocess.run([tsopt, "check"] + dims + [path], capture_output=True, text=True).stdout
        f = re.search(r"^FLOPs: .*, ([0-9.]+) ([KMGT]?)FLOP in contractions", out, re.M)
        b = re.search(r"^minimum bytes: ([0-9.]+) ([KMGT]?)B", out, re.M)
        assert f and b, out[-300:]
        spec = load_spec(name)
        w = A.graph_work(spec, {"t": 1024} if name == "decoder_layer" else None)
        # tsopt check counts an RMSNorm's Σ x·x as a contraction too; graph_work counts matmuls only
        env, sizes = A.track_axes(spec), w["sizes"]
        norms = sum(2 * A._prod(sizes, env[op["args"][0]][0]) for op in spec["ops"] if op["op"] == "rmsnorm")
        for got, m in ((w["flops"] + norms, f), (w["min_bytes"], b)):
            digits = m.group(1).split(".")[1] if "." in m.group(1) else ""
            want = float(m.group(1)) * unit[m.group(2)]
            half_ulp = 0.5 * 10 ** -len(digits) * unit[m.group(2)]   # tsopt prints 4 significant digits
            assert abs(got - want) <= half_ulp * 1.001, (name, got, want)


def test_roofline_floor():
    assert close(A.roofline_floor_s(1e12, 1e9, 1e15, 1e12), 1e-3)      # compute-bound: 1 ms vs 1 ms -> 1 ms
    assert close(A.roofline_floor_s(1e9, 4e9, 1e15, 2e12), 2e-3)       # memory-bound


def test_formatting():
    assert A.fmt_ms(0.12345) == "0.1235" and A.fmt_ms(None) == "-" and A.fmt_ms("skipped") == "-"
    assert A.fmt_x(1.234) == "1.23x" and A.fmt_x(None) == "-"
    assert A.fmt_pct(0.5) == "50%"
    t = A.text_table(["graph", "ms"], [["a", "1.0"], ["bbb", "10.25"]]).splitlines()
    assert t[0].startswith("graph") and t[2].startswith("a    ") and t[3].endswith("10.25")


# ---- chart ----------------------------------------------------------------------------------------------
def synthetic_results():
    graphs = {}
    for i, g in enumerate(["attention", "matmul", "decoder_layer"]):
        cands = [{"rank": r, "plan": "p%d" % r, "status": "ok" if r != 3 else "invalid",
                  "predicted_s": 1e-4 * (i + 1) * r, "measured_s": 1.2e-4 * (i + 1) * (5 - r) / 3}
                 for r in (1, 2, 3, 4)]
        graphs[g] = {"graph": g, "ours_ms": 0.1 * (i + 1), "chosen": 1,
                     "anchors": {"eager": 0.3 * (i + 1), "torch.compile": 0.2 * (i + 1),
                                 "torch.compile max-autotune": "skipped (BENCH_AUTOTUNE=0)",
                                 "cublas": 0.09 if g == "matmul" else None},
                     "candidates": cands}
    return {"format": "tsopt-h200-bench 1", "gpu": "synthetic", "graphs": graphs}


def test_chart_png():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("  (skipped: no matplotlib)")
        return
    import chart
    d = tempfile.mkdtemp()
    try:
        src, png = os.path.join(d, "r.json"), os.path.join(d, "r.png")
        with open(src, "w") as f:
            json.dump(synthetic_results(), f)
        assert chart.main([src, png]) == 0
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        # an empty results file still gives a chart (with "no data" panels)
        with open(src, "w") as f:
            json.dump({"graphs": {}}, f)
        assert chart.main([src, png]) == 0
    finally:
        shutil.rmtree(d)


def _main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    failed = 0
    for name, f in tests:
        try:
            f()
            print("PASS", name)
        except Exception as e:  # report every failure, then the count
            failed += 1
            print("FAIL", name, "%s: %s" % (type(e).__name__, e))
    print("%d passed, %d failed" % (len(tests) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main())
