#!/usr/bin/env python3
"""cublas_kernels.py — which kernels cuBLAS (through PyTorch, as torch.compile calls it) runs for given GEMM
shapes, and how long each takes: the tile shape, cluster shape and split-K/stream-K choice are in the kernel
names (sm90_xmma_gemm_..._tilesize128x64x64_..._cluster..., ..._splitK...). Used to see what the library does
at the sizes where it beats our wgmma GEMM (bench/NOTES.md run 127).

    python3 bench/gpu/cublas_kernels.py [MxNxK[+bias] ...]

Per shape: F.linear(x [M, K], w [N, K]) (+ a bias through addmm's epilogue), fp16, timed by the profiler's
CUDA activity (median of 20 after warm-up; L2 not flushed: the operands of these sizes stay resident, which is
also what back-to-back layers see)."""
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

DEFAULT = ["1232x768x3072+bias", "1232x3072x768+bias", "1024x512x1024", "1232x768x3072", "4096x1024x4096+bias",
           "2048x2048x2048", "1024x4096x4096", "4096x4096x4096"]


def parse(spec):
    bias = spec.endswith("+bias")
    m, n, k = (int(v) for v in spec.removesuffix("+bias").split("x"))
    return m, n, k, bias


def main():
    torch.manual_seed(0)
    specs = sys.argv[1:] or DEFAULT
    rows = []
    for spec in specs:
        m, n, k, bias = parse(spec)
        x = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16)
        b = torch.randn(n, device="cuda", dtype=torch.float16) if bias else None
        for _ in range(5):
            F.linear(x, w, b)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                F.linear(x, w, b)
            torch.cuda.synchronize()
        times = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                times.setdefault(e.name, []).append(e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total)
        for name, ts in times.items():
            us = statistics.median(ts)
            tflops = 2.0 * m * n * k / (us * 1e-6) / 1e12
            rows.append((spec, len(ts), us, tflops, name))
    print(f"{'shape':22s} {'calls':>5s} {'us':>8s} {'TFLOP/s':>8s}  kernel")
    for spec, calls, us, tflops, name in rows:
        print(f"{spec:22s} {calls:5d} {us:8.2f} {tflops:8.1f}  {name[:160]}")


if __name__ == "__main__":
    main()
