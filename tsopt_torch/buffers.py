"""buffers.py — constant buffers recognised by their values and emitted as computed ops (export's
buffers="computed"), so that a causal mask or a RoPE table costs no input and no memory traffic.

Recognised, each checked on every element before it is used (a buffer that does not match stays an input):
  - causal masks [.., T, S]: one value where j > i (the future), another elsewhere — tril(ones), the boolean
    form, triu(full(-inf), 1): where(iota_i < iota_j, future, past);
  - rotary tables [.., T, D]: cos or sin of t·f_i (t = 0..T-1) with f_i = f_0·r^i over D columns or over
    D/2 columns written twice (the rotate-half layout): sin/cos of iota_t · exp2(iota_i·log2 r + log2 f_0);
    f_0 and r come from row 1's first two columns (well conditioned), every element is then checked within
    the rounding of an fp32 table (1e-6 + 4.8e-7·|angle|).
Needs torch (export.py imports it only when asked).
"""

import math

import torch

from .graph import Val

# RoPE tables are usually computed in fp32: they equal ours within the rounding of the table and of its angles
TABLE_TOL, ANGLE_TOL = 1e-6, 4.8e-7


def square_core(value):
    """The buffer as a 2-D float64 tensor when all its leading dims are 1 and the last two are > 1."""
    shape = list(value.shape)
    if len(shape) < 2 or any(s != 1 for s in shape[:-2]) or min(shape[-2:]) < 2:
        return None
    return value.detach().to(torch.float64).reshape(shape[-2:])


def causal_mask(g, name, value, dtype):
    m = square_core(value)
    if m is None:
        return None
    t, s = m.shape
    future = torch.arange(s)[None, :] > torch.arange(t)[:, None]
    hi, lo = m[0, s - 1].item(), m[0, 0].item()
    if hi == lo or math.isnan(hi) or math.isnan(lo) or not torch.equal(m, torch.where(future, hi, lo)):
        return None
    at = g.axis_for(t, static=True)
    aks = g.axis_for(s, static=True)
    if aks == at:
        aks = g.alt(at, {at})
    iq = g.op(name + "_i", "iota", (), [at], "fp32", axis=at)
    ik = g.op(name + "_j", "iota", (), [aks], "fp32", axis=aks)
    fut = g.elementwise(name + "_future", "less_than", [Val(iq.name, [at, None], "fp32"), ik], [t, s], "fp32")
    v = g.elementwise(name, "where", [fut, hi, lo], [t, s], dtype)
    return Val(v.name, [None] * (value.dim() - 2) + v.axes, dtype)


def rope_table(g, name, value, dtype):
    m = square_core(value)
    if m is None:
        return None
    t, d = m.shape
    for fn, inverse, op in ((torch.cos, torch.acos, "cos"), (torch.sin, torch.asin, "sin")):
        row = m[1].clamp(-1, 1)
        f = inverse(row)
        half = d // 2
        doubled = d % 2 == 0 and torch.allclose(m[:, :half], m[:, half:], atol=TABLE_TOL, rtol=0)
        base = f[:half] if doubled else f
        if len(base) < 2 or base[0] <= 0 or base[1] <= 0:
            continue
        for log2f0, log2r in rope_candidates(base):
            fr = torch.exp2(log2f0 + torch.arange(len(base), dtype=torch.float64) * log2r)
            angle = torch.arange(t, dtype=torch.float64)[:, None] * (torch.cat([fr, fr]) if doubled else fr)[None]
            if ((fn(angle) - m).abs() <= TABLE_TOL + ANGLE_TOL * angle.abs()).all():
                return emit_rope(g, name, value, dtype, op, t, len(base), doubled, log2f0, log2r)
    return None


def rope_candidates(base):
    """(log2 f_0, log2 r) as read from row 1, then with f_0 = 1 and θ = r^(-n) rounded to 3 significant digits
    (the usual θ^(-i/n) frequencies: row 1 alone is too coarse for the small ones of an fp32 table)."""
    log2f0, log2r = math.log2(base[0].item()), math.log2((base[1] / base[0]).item())
    yield log2f0, log2r
    theta = float("%.3g" % 2 ** (-log2r * len(base)))
    if abs(log2f0) < 1e-6 and theta > 1:
        yield 0.0, -math.log2(theta) / len(base)


def emit_rope(g, name, value, dtype, op, t, n, doubled, log2f0, log2r):
    at, ai = g.axis_for(t, static=True), g.axis_for(n, static=True)
    if ai == at:
        ai = g.alt(at, {at})
    pos = g.op(name + "_pos", "iota", (), [at], "fp32", axis=at)
    i = g.op(name + "_i", "iota", (), [ai], "fp32", axis=ai)
    lf = g.op(name + "_lf", "add", [g.op(name + "_li", "scale", [i], [ai], "fp32", by=log2r), log2f0], [ai], "fp32")
    fr = g.op(name + "_f", "exp2", [lf], [ai], "fp32")
    ang = g.elementwise(name + "_angle", "mul", [Val(pos.name, [at, None], "fp32"), fr], [t, n], "fp32")
    if op == "cos":  # cos θ = sin(θ + π/2)
        ang = g.elementwise(name + "_angle", "add", [ang, math.pi / 2], [t, n], "fp32")
    v = g.op(name + "_v", "sin", [ang], ang.axes, "fp32")
    if dtype != "fp32":
        v = g.op(name + "_v", "cast", [v], v.axes, dtype, dtype=dtype)
    if doubled:  # the D/2 columns written twice: broadcast over a pair axis, merged
        pair = g.fresh_axis(2)
        v = g.expand_to(Val(v.name, [at, None, ai], dtype), [at, pair, ai])
        v = g.reshape(v, [t, 2 * n])
    return Val(v.name, [None] * (value.dim() - 2) + v.axes, dtype)


RECOGNISERS = (causal_mask, rope_table)


def computed(g, name, value, dtype):
    """A Val computing the buffer's values, or None when no recogniser matches them."""
    for r in RECOGNISERS:
        v = r(g, name, value, dtype)
        if v is not None:
            return v
    return None
