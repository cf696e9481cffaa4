"""torch_row_ncu.py — what torch.compile's row kernels do, for ncu: residual add + RMSNorm (both outputs kept),
and a per-row mean (a global average pool over a merged [h, w]).

Runs torch.compile's function on fresh random fp16 inputs at the given sizes, checks it against fp32 eager, and
times it with CUDA events (L2 flushed before each run), so that `ncu --metrics ...` over this script shows each
Triton kernel's duration and DRAM bytes beside tsopt's (bench/gpu/row_test long / short; bench/gpu/row_short_ncu.sh).
Usage: python3 bench/gpu/torch_row_ncu.py [t:d | mean:rows:len ...]   (default 4096:4096 4096:8192)
"""
import sys

import torch


def residual_rmsnorm(x, r, g):
    h = x + r
    hf = h.float()
    y = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(h.dtype) * g
    return y, h


def row_mean(x):
    return x.float().mean(-1).to(x.dtype)


def median_ms(fn, *args):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    times = []
    for _ in range(20):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def run_residual(t, d):
    fn = torch.compile(residual_rmsnorm)
    x, r = (torch.randn(t, d, device="cuda", dtype=torch.float16) for _ in range(2))
    g = torch.randn(d, device="cuda", dtype=torch.float16)
    y, h = fn(x, r, g)
    ye, he = residual_rmsnorm(x.float(), r.float(), g.float())
    err = max((y.float() - ye).abs().max().item(), (h.float() - he).abs().max().item())
    ms = median_ms(fn, x, r, g)
    gb = 4 * t * d * 2 / 1e9
    print(f"torch.compile residual+rmsnorm {t}x{d}: {ms:.4f} ms, {gb / (ms * 1e-3):.0f} GB/s (4 streams), max err {err:.3g}")


def run_mean(rows, length):
    fn = torch.compile(row_mean)
    x = torch.randn(rows, length, device="cuda", dtype=torch.float16)
    err = (fn(x).float() - x.float().mean(-1)).abs().max().item()
    ms = median_ms(fn, x)
    gb = rows * length * 2 / 1e9
    print(f"torch.compile row mean {rows}x{length}: {ms:.4f} ms, {gb / (ms * 1e-3):.0f} GB/s (read), max err {err:.3g}")


def main():
    for a in sys.argv[1:] or ["4096:4096", "4096:8192"]:
        parts = a.split(":")
        if parts[0] == "mean":
            run_mean(int(parts[1]), int(parts[2]))
        else:
            run_residual(int(parts[0]), int(parts[1]))


if __name__ == "__main__":
    main()
