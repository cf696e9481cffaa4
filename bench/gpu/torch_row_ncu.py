"""torch_row_ncu.py — what torch.compile's kernel for residual add + RMSNorm (both outputs kept) does, for ncu.

Runs torch.compile's function on fresh random fp16 inputs at the given widths, checks it against fp32 eager, and
times it with CUDA events (L2 flushed before each run), so that `ncu --metrics ...` over this script shows each
Triton kernel's duration and DRAM bytes beside tsopt's (bench/gpu/row_test long).
Usage: python3 bench/gpu/torch_row_ncu.py [t:d ...]   (default 4096:4096 4096:8192)
"""
import sys

import torch


def step(x, r, g):
    h = x + r
    hf = h.float()
    y = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(h.dtype) * g
    return y, h


def main():
    shapes = [tuple(int(v) for v in a.split(":")) for a in sys.argv[1:]] or [(4096, 4096), (4096, 8192)]
    fn = torch.compile(step)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for t, d in shapes:
        x, r = (torch.randn(t, d, device="cuda", dtype=torch.float16) for _ in range(2))
        g = torch.randn(d, device="cuda", dtype=torch.float16)
        y, h = fn(x, r, g)
        ye, he = step(x.float(), r.float(), g.float())
        err = max((y.float() - ye).abs().max().item(), (h.float() - he).abs().max().item())
        times = []
        for _ in range(20):
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(x, r, g)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        ms = sorted(times)[len(times) // 2]
        gb = 4 * t * d * 2 / 1e9
        print(f"torch.compile residual+rmsnorm {t}x{d}: {ms:.4f} ms, {gb / (ms * 1e-3):.0f} GB/s (4 streams), max err {err:.3g}")


if __name__ == "__main__":
    main()
