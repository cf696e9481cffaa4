"""modules.py — the PyTorch modules the importer's round-trip tests export (plain PyTorch, no model
libraries): a Llama-style decoder layer, a GPT-2 block, a gated MLP, SDPA variants and small GEMM +
activation / normalisation modules. Each CASES entry: (name, module factory, example input shapes, axis
names by size[, options: "dynamic": {axis: the size to evaluate at}, "buffers": "computed" and the buffers
"computed" must list]). Sizes are small and distinct per axis, so that axes are named apart."""

import math

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    """[x1, x2] → [-x2, x1] along the last dim, as two concatenated halves."""
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rope(x, cos, sin):
    """x·cos + rotate_half(x)·sin, with x's last dim seen as (2 halves, d_h/2): the halves flipped and signed
    ([-1, +1]) instead of concatenated, and the tables of d_h/2 broadcast over the halves."""
    x2 = x.unflatten(-1, (2, x.shape[-1] // 2))
    sign = torch.arange(2, dtype=x.dtype, device=x.device) * 2 - 1
    rot = x2.flip(-2) * sign[:, None]
    return (x2 * cos[:, None, :] + rot * sin[:, None, :]).flatten(-2)


class RopeCat(nn.Module):
    """Rotary embedding the way most code writes it: tables of d_h (two copies concatenated), rotate_half."""

    def forward(self, x):
        t, dh = x.shape[-2], x.shape[-1]
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dh, 2, dtype=x.dtype) / dh))
        freqs = torch.arange(t, dtype=x.dtype)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos() + rotate_half(x) * emb.sin()


class LlamaLayer(nn.Module):
    """Pre-norm decoder layer: RMSNorm, one fused q/k/v projection split in three, causal GQA attention with
    rotary embeddings (rotate-half convention, θ as in Llama 3) computed in forward from positions, SwiGLU."""

    def __init__(self, d=48, heads=6, kv_heads=2, ffn=40, theta=500000.0):
        super().__init__()
        self.h, self.kvh, self.dh, self.theta = heads, kv_heads, d // heads, theta
        self.attn_norm, self.mlp_norm = RMSNorm(d), RMSNorm(d)
        self.qkv_proj = nn.Linear(d, (heads + 2 * kv_heads) * self.dh, bias=False)
        self.o_proj = nn.Linear(heads * self.dh, d, bias=False)
        self.gate = nn.Linear(d, ffn, bias=False)
        self.up = nn.Linear(d, ffn, bias=False)
        self.down = nn.Linear(ffn, d, bias=False)

    def rope(self, t, dtype, device=None):
        """cos and sin of position · θ^(-2i/d_h), computed in fp32 (float64 in the round trip), then cast."""
        ct = torch.float64 if dtype == torch.float64 else torch.float32
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.dh, 2, dtype=ct, device=device) / self.dh))
        pos = torch.arange(t, dtype=ct, device=device)
        freqs = pos[:, None] * inv_freq[None, :]
        return freqs.cos().to(dtype), freqs.sin().to(dtype)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv_proj(self.attn_norm(x)).split([self.h * self.dh, self.kvh * self.dh, self.kvh * self.dh], -1)
        q = q.view(b, t, self.h, self.dh).transpose(1, 2)
        k = k.view(b, t, self.kvh, self.dh).transpose(1, 2)
        v = v.view(b, t, self.kvh, self.dh).transpose(1, 2)
        cos, sin = self.rope(t, x.dtype, x.device)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        h = x + self.o_proj(a.transpose(1, 2).reshape(b, t, self.h * self.dh))
        m = self.mlp_norm(h)
        return h + self.down(F.silu(self.gate(m)) * self.up(m))


LLAMA3_8B = {"d": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "theta": 500000.0}  # bench/torch/


class GPT2Block(nn.Module):
    """LayerNorm, fused qkv projection split in three, causal attention, tanh-GELU MLP, residuals."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.h = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(b, t, d))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GatedMLP(nn.Module):
    def __init__(self, d=24, f=40):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(d, f, bias=False), nn.Linear(d, f, bias=False), nn.Linear(f, d)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class SDPA(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, **self.kw)


class RepeatedKVSDPA(nn.Module):
    """GQA written with K and V repeated to the query heads: HF's repeat_kv (expand, then reshape) or
    repeat_interleave; `manual`: the scores by matmul (the repeated K then read by a product, not attention)."""

    def __init__(self, how="repeat_kv", manual=False):
        super().__init__()
        self.how, self.manual = how, manual

    def repeat(self, x, n):
        if self.how == "repeat_interleave":
            return x.repeat_interleave(n, dim=1)
        b, h, t, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n, t, d).reshape(b, h * n, t, d)

    def forward(self, q, k, v):
        n = q.shape[1] // k.shape[1]
        k, v = self.repeat(k, n), self.repeat(v, n)
        if self.manual:
            return torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1) @ v
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class MaskedSDPA(nn.Module):
    """An explicit mask argument: boolean (True keeps) or additive."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask > 0), F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask)


class WindowMaskSDPA(nn.Module):
    """A sliding-window causal mask built in forward from positions (comparisons joined by &), and masks joined by
    | and ^ on the way (Mistral-style local attention)."""

    def forward(self, q, k, v, pad):
        t = q.shape[-2]
        i = torch.arange(t, device=q.device)
        local = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < 3)
        keep = local | ((pad > 0) ^ (pad > 0.5))   # pad in (0, 0.5] also opens a key
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


class ManualAttention(nn.Module):
    """softmax(q·kᵀ/√d masked by a computed lower triangle)·v, the way tutorials write it."""

    def forward(self, q, k, v):
        t = q.shape[-2]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        mask = torch.ones(t, t).tril()
        s = s.masked_fill(mask == 0, float("-inf"))
        return F.softmax(s, dim=-1) @ v


class BertLayer(nn.Module):
    """Post-LN BERT layer: fused qkv, attention with an additive padding mask per sequence ([b, s],
    broadcast over heads and queries), erf GELU MLP, residuals."""

    def __init__(self, d=32, heads=4, ffn=48):
        super().__init__()
        self.h = heads
        self.qkv, self.o = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, pad):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])
        x = self.ln1(x + self.o(a.transpose(1, 2).reshape(b, t, d)))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class BiasAttention(nn.Module):
    """T5-style: unscaled scores plus a relative-position bias per head [h, t, s]."""

    def forward(self, q, k, v, bias):
        return F.softmax(q @ k.transpose(-2, -1) + bias, dim=-1) @ v


class MultiQuery(nn.Module):
    """Multi-query attention: one K/V head expanded to every query head, causal."""

    def forward(self, q, k, v):
        h = q.shape[1]
        return F.scaled_dot_product_attention(q, k.expand(-1, h, -1, -1), v.expand(-1, h, -1, -1), is_causal=True)


class UpcastAttention(nn.Module):
    """Attention as Hugging Face's eager code writes it: the softmax in fp32, cast back to the input type."""

    def forward(self, q, k, v):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return F.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype) @ v


def seq(*layers):
    return lambda: nn.Sequential(*layers)


class Lambda(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


class LinearThen(nn.Module):
    def __init__(self, f, d=12, n=20):
        super().__init__()
        self.lin, self.f = nn.Linear(d, n), f

    def forward(self, x):
        return self.f(self.lin(x))


class Stats(nn.Module):
    """var, abs, log, erf, logsumexp, minimum/maximum, clamp, pow, sqrt in one module."""

    def forward(self, x):
        v = x.var(dim=-1, keepdim=True)
        z = (x - x.mean(-1, keepdim=True)) / torch.sqrt(v + 1e-3)
        a = torch.log(x.abs() + 0.5) + torch.erf(z) - torch.logsumexp(x, dim=-1, keepdim=True)
        b = torch.minimum(x, z).clamp(-0.7, 0.8) + torch.maximum(x, 0.25 * z) + x.pow(3) - 2 ** x
        return a * b + torch.clamp_min(x, -0.1) * F.log_softmax(z, dim=-1)


class Classifier(nn.Module):
    def __init__(self, d=12, hidden=20, classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, classes))

    def forward(self, x):
        return F.log_softmax(self.net(x), dim=-1)


class BufferedAttention(nn.Module):
    """GPT-2's registered causal mask and a rotary cos/sin cache as buffers, sliced to the sequence."""

    def __init__(self, max_t=11, e=8):
        super().__init__()
        self.register_buffer("bias", torch.tril(torch.ones(max_t, max_t)).view(1, 1, max_t, max_t))
        inv = 1.0 / (10000.0 ** (torch.arange(0, e, 2, dtype=torch.float64) / e))
        f = torch.arange(max_t, dtype=torch.float64)[:, None] * inv[None]
        emb = torch.cat((f, f), -1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())

    def forward(self, q, k, v):
        t = q.shape[-2]
        cos, sin = self.cos_cached[:t].to(q.dtype), self.sin_cached[:t].to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        s = s.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        return F.softmax(s, dim=-1) @ v


class Offset(nn.Module):
    """A buffer no recogniser matches (random): it stays an input even with buffers="computed"."""

    def __init__(self, d=12):
        super().__init__()
        self.register_buffer("offset", torch.randn(7, d))

    def forward(self, x):
        return x + self.offset


class Stack(nn.Module):
    """stack of three parts, chunk back, cat along another dim."""

    def forward(self, a, b):
        s = torch.stack([a, b * 2, a + b], 1)
        x, y, z = s.chunk(3, dim=1)
        return torch.cat([x, z], dim=0).squeeze(1) * s.sum(1)[:1]


class Cumsum(nn.Module):
    """Refused: cumsum has no tsopt op."""

    def forward(self, x):
        return torch.cumsum(x, dim=0)


X3 = [[2, 7, 12]]  # (batch, tokens, features)
AX3 = {"b": 2, "t": 7, "d": 12}
QKV = [[2, 3, 7, 8], [2, 3, 9, 8], [2, 3, 9, 8]]  # (batch, heads, queries, head dim), keys 9
AXQ = {"b": 2, "h": 3, "t": 7, "s": 9, "e": 8}

class Activations(nn.Module):
    """elu, selu, celu, hardswish, hardsigmoid, mish, softsign, logsigmoid, tanhshrink, threshold, hardshrink,
    softshrink and a Frobenius norm in one module."""

    def forward(self, x):
        a = F.elu(x, 0.8) + F.selu(x) + F.celu(x, 0.7) + F.hardswish(3 * x) + F.hardsigmoid(4 * x)
        b = F.threshold(x, 0.1, -2.0) + F.hardshrink(x, 0.3) + F.softshrink(x, 0.4)
        return a * F.mish(x) + F.softsign(x) - F.logsigmoid(x) + F.tanhshrink(x) + b / torch.norm(x, p="fro")


class NormsAndGlu(nn.Module):
    """std, F.normalize (a 2-norm), torch.norm over a dim, GLU."""

    def forward(self, x):
        y = F.normalize(x, dim=-1) + x.std(dim=-1, keepdim=True) * torch.norm(x, dim=1, keepdim=True)
        return F.glu(torch.cat([y, x], dim=-1), dim=-1)


class Pools(nn.Module):
    """A GEMM-fusion suite's pooling after a Linear: AvgPool1d(4) over the features (14 of them: the last 2 are
    dropped), then GELU and MaxPool1d(2); AvgPool2d and MaxPool2d over a [b, 2, 7, 12] reshape."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(12, 14)

    def forward(self, x):
        y = F.max_pool1d(F.gelu(F.avg_pool1d(self.lin(x), 4)), 2)
        z = x.reshape(2, 1, 7, 12)
        return y.sum(-1, keepdim=True) + F.avg_pool2d(z, (7, 3)).sum() + F.max_pool2d(z, 2).sum()


class Einsums(nn.Module):
    """einsum: a batched matmul, scores over heads, a transpose, a sum over a letter, an outer product, and
    two letters of one size (i and j, both 7) told apart."""

    def forward(self, q, k):
        s = torch.einsum("bhqd,bhkd->bhqk", q, k)
        y = torch.einsum("bhqk,bhkd->bqhd", s, k) + torch.einsum("bhkd->bkhd", k)
        o = torch.einsum("i,j->ij", q[0, 0, :, 0], k[0, 0, :, 1])
        return y.sum(-1, keepdim=True) * torch.einsum("ij,jk->ik", o, o).sum() + torch.einsum("bhqd->bq", q)[..., None, None]


class MinMax(nn.Module):
    """min and max over a dim (values; the unused indices stay out), amin, max against another tensor."""

    def forward(self, x):
        return torch.min(x, dim=1, keepdim=True)[0] + torch.amin(x, dim=1, keepdim=True) + \
            torch.max(x, dim=1, keepdim=True).values * torch.max(x, x.flip(1))


class BatchNormEval(nn.Module):
    """Linear → BatchNorm1d (eval: its running statistics, set to non-trivial values) → over [b, c, l] too."""

    def __init__(self, d=12, n=20):
        super().__init__()
        self.lin, self.bn = nn.Linear(d, n), nn.BatchNorm1d(n)
        self.bn3 = nn.BatchNorm1d(n)
        for bn in (self.bn, self.bn3):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x):
        y = self.bn(self.lin(x))
        return self.bn3(y.unsqueeze(-1).expand(-1, -1, 3)).sum(-1)


class MHA(nn.Module):
    """nn.MultiheadAttention (batch first): its heads merged with the batch (view(t, b * h, e)) and split back,
    which the importer keeps as compound dims (no copies)."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class ViTBlock(nn.Module):
    """A pre-norm ViT block: LayerNorm, nn.MultiheadAttention, residual, LayerNorm, GELU MLP, residual."""

    def __init__(self, d=16, heads=4, ffn=24):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class T5Attention(nn.Module):
    """T5's self-attention as Hugging Face writes it: q, k, v projections split into heads, a position bias
    added to the scores, the softmax in fp32 (s.float() ... type_as(s)), no scaling."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x, bias):
        b, t, d = x.shape
        q, k, v = (p(x).view(b, t, self.heads, -1).transpose(1, 2) for p in (self.q, self.k, self.v))
        s = torch.matmul(q, k.transpose(3, 2)) + bias
        p = torch.softmax(s.float(), dim=-1).type_as(s)
        return self.o(torch.matmul(p, v).transpose(1, 2).contiguous().view(b, t, d))


class SumMaxMeanLogsumexp(nn.Module):
    """KernelBench's Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp: every reduction after the first over a dim of
    size 1 (the identity), and a logsumexp over two dims."""

    def __init__(self, d=12, n=5):
        super().__init__()
        self.lin = nn.Linear(d, n)

    def forward(self, x):
        y = torch.sum(self.lin(x), dim=2, keepdim=True)
        y = torch.max(y, dim=2, keepdim=True)[0]
        y = torch.mean(y, dim=2, keepdim=True)
        y = torch.logsumexp(y, dim=2, keepdim=True)
        return torch.logsumexp(y, dim=(1, 2))


class MoreOps(nn.Module):
    """1- and ∞-norms, var_mean, sign, addcmul, clamp between tensors, expm1, log1p, and in-place ops on an
    intermediate (nn.ReLU(inplace=True)'s relu_): the tensor they mutate reads as their result afterwards."""

    def forward(self, x):
        y = x.clone()
        y.relu_()
        z = F.silu(x * 2, inplace=True)
        v, m = torch.var_mean(x, dim=-1, keepdim=True)
        n1 = F.normalize(x, p=1, dim=-1) + torch.norm(x, p=float("inf"), dim=-1, keepdim=True)
        c = torch.clamp(x, min=-m.abs(), max=v)
        return (y + z + n1 + c + torch.sign(x) + torch.addcmul(x, y, z, value=0.5) + torch.expm1(x * 0.1)
                + torch.log1p(x.abs()))


class FusedGateUp(nn.Module):
    """One projection to both halves of a gated MLP, then chunk (Phi-3's gate_up_proj; GeGLU with a bias)."""

    def __init__(self, d=12, f=10, bias=True):
        super().__init__()
        self.gate_up, self.down = nn.Linear(d, 2 * f, bias=bias), nn.Linear(f, d, bias=False)

    def forward(self, x):
        a, g = self.gate_up(x).chunk(2, dim=-1)
        return self.down(a * F.gelu(g))


class Diagonals(nn.Module):
    """torch.diag of a vector: as a matrix, and in products on either side (KernelBench's diag(A) @ B)."""

    def forward(self, v, x):
        d = torch.diag(v)
        return d @ x + (x @ torch.diag(v[:x.shape[1]])) * 0.5, d


class Losses(nn.Module):
    """KernelBench's losses: MSE, smooth L1, Huber (beta and delta 1 and 0.5), KL divergence (batchmean, of
    softmaxes), cosine similarity; and a LayerNorm over the last two dims (KernelBench's over [f, h, w])."""

    def __init__(self, n=7, d=12):
        super().__init__()
        self.ln = nn.LayerNorm([n, d])

    def forward(self, a, b):
        p, q = torch.softmax(a, -1), torch.softmax(b, -1)
        losses = (F.mse_loss(a, b) + F.smooth_l1_loss(a, b) + F.smooth_l1_loss(a, b, beta=0.5) + F.huber_loss(a, b)
                  + F.huber_loss(a, b, delta=0.5) + F.kl_div(torch.log(p), q, reduction="batchmean")
                  + torch.mean(1 - F.cosine_similarity(a, b, dim=2)))
        return self.ln(a) * losses, F.mse_loss(a, b, reduction="none")


class BatchStatsNorm(nn.Module):
    """Batch norm with the batch's statistics (training=True, no running statistics), and an instance norm."""

    def __init__(self, c=12):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.rand(c) + 0.5), nn.Parameter(torch.randn(c))
        self.inorm = nn.InstanceNorm1d(c, affine=True)

    def forward(self, x):
        return F.batch_norm(x, None, None, self.w, self.b, training=True, eps=1e-3) + self.inorm(x)


class PointwiseConvs(nn.Module):
    """Convolutions of kernel size 1 (a GEMM over the channels): 2-D with a bias (h and w merged), strided without
    one, 1-D, 3-D, transposed, and one of an unbatched input."""

    def __init__(self, c=6, o=5):
        super().__init__()
        self.c2, self.c2s = nn.Conv2d(c, o, 1), nn.Conv2d(c, o, 1, stride=2, bias=False)
        self.c1, self.c3 = nn.Conv1d(c, o, 1), nn.Conv3d(c, o, (1, 1, 1))
        self.ct = nn.ConvTranspose2d(c, o, 1)

    def forward(self, x):  # x [b, c, h, w]
        a = self.c2(x) + self.ct(x)
        s = self.c2s(x)
        return a, s, self.c1(x.flatten(2)), self.c3(x.unsqueeze(2)), self.c2(x[0])


class WindowConvs(nn.Module):
    """Convolutions over windows (no padding): 3×3 with a bias; strided and dilated without one; grouped;
    depthwise; 1-D and 3-D; an unbatched input; a conv followed by ReLU and a GroupNorm (KernelBench level 2's
    shape of problem)."""

    def __init__(self, c=4, o=6):
        super().__init__()
        self.c3, self.cs = nn.Conv2d(c, o, 3), nn.Conv2d(c, o, (3, 2), stride=(2, 1), dilation=(1, 2), bias=False)
        self.cg, self.cd = nn.Conv2d(c, o, 2, groups=2), nn.Conv2d(c, c, 3, groups=c)
        self.c1, self.c5 = nn.Conv1d(c, o, 3, stride=2), nn.Conv3d(c, o, (2, 2, 1))
        self.gn = nn.GroupNorm(2, o)

    def forward(self, x):  # x [b, c, h, w]
        y = self.c5(x.unsqueeze(2).expand(-1, -1, 3, -1, -1))
        return (self.c3(x), self.cs(x), self.cg(x), self.cd(x), self.c1(x.flatten(2)), y, self.c3(x[0]),
                self.gn(F.relu(self.c3(x))))


class WindowPools(nn.Module):
    """Pools over overlapping, strided or dilated windows (no padding): max 3×3 stride 2, average (3, 2) stride (2, 1),
    1-D max of dilation 2, a (1, 3) max of stride 2 (one tap along h), and ceil_mode where it adds no window."""

    def forward(self, x):  # x [b, c, h, w]
        return (F.max_pool2d(x, 3, 2), F.avg_pool2d(x, (3, 2), stride=(2, 1)), F.max_pool1d(x.flatten(2), 3, 2, dilation=2),
                F.max_pool2d(x, (1, 3), 2), F.max_pool2d(x[..., :6], 3, 3, ceil_mode=True))


class ProductsAndTriplets(nn.Module):
    """torch.prod over a dim (signs and a zero included by the inputs) and over every dim; the pairwise distance and
    the triplet margin loss (with and without swap, mean and none)."""

    def forward(self, a, b):  # a, b [m, d]
        z = torch.where(a.abs() < 0.2, torch.zeros_like(a), a)
        n = b.flip(0)
        return (torch.prod(z, dim=1), torch.prod(a[:, :4] + 1.0), F.pairwise_distance(a, b),
                F.triplet_margin_loss(a, b, n, margin=0.7), F.triplet_margin_loss(a, b, n, swap=True, reduction="none"))


class ProductForms(nn.Module):
    """torch.mv, dot, outer, baddbmm (beta and alpha), addmm with beta and alpha, addmv, addbmm."""

    def forward(self, a, b):  # a [m, d], b [m, d]
        v, w = a[0], b[1]
        a3, b3 = a.unsqueeze(0).expand(2, -1, -1), b.t().unsqueeze(0).expand(2, -1, -1)  # [2, m, d], [2, d, m]
        c3 = (a[:, :a.shape[0]] * 0.1).unsqueeze(0).expand(2, -1, -1)  # [2, m, m]
        return (torch.mv(a, w), torch.dot(v, w), torch.outer(v, w[:5]), torch.baddbmm(c3, a3 + 1.0, b3, beta=0.5, alpha=2.0),
                torch.addmm(v[:1], a, b.t(), beta=0.25, alpha=-1.5), torch.addmv(a[:, 0], a, w, beta=2.0),
                torch.addbmm(a[:, :a.shape[0]], a3, b3))


class MoreElementwise(nn.Module):
    """PReLU (a slope a channel, and one), RReLU in eval mode, logit (with and without eps), log10, sinh, cosh, tan,
    hypot, lerp (a number and a tensor weight), addcdiv, erfc, expit; std_mean, var over every dim and over two,
    linalg.norm and the Frobenius matrix norm."""

    def __init__(self, c=12):
        super().__init__()
        self.p, self.p1, self.rr = nn.PReLU(c), nn.PReLU(), nn.RReLU().eval()

    def forward(self, a, b):  # a, b [m, d] (d = c)
        s = torch.sigmoid(a)
        sd, mn = torch.std_mean(a, dim=1)
        return (self.p(a) + self.p1(b) + self.rr(a), torch.logit(s) + torch.logit(s, eps=0.1),
                torch.log10(a.abs() + 0.5) + torch.sinh(a) - torch.cosh(b) + torch.tan(0.5 * a) + torch.hypot(a, b),
                torch.lerp(a, b, 0.3) + torch.lerp(a, b, s) + torch.addcdiv(a, b, b.abs() + 1.0, value=0.5),
                torch.special.erfc(a) + torch.special.expit(b), sd, mn, a.var(), a.unsqueeze(0).var(dim=(1, 2)),
                torch.linalg.norm(a), torch.linalg.matrix_norm(a.unsqueeze(0)))


class MoreLosses(nn.Module):
    """binary cross-entropy (of probabilities and of logits), the soft margin loss, the margin ranking loss."""

    def forward(self, a, b):  # a, b [m, d]
        p, t = torch.sigmoid(a), torch.sigmoid(b)
        return (F.binary_cross_entropy(p, t), F.binary_cross_entropy(p, t, reduction="sum"),
                F.binary_cross_entropy_with_logits(a, t), F.binary_cross_entropy_with_logits(a, t, reduction="none"),
                F.soft_margin_loss(a, torch.sign(b)), F.margin_ranking_loss(a[0], a[1], torch.sign(b[0]), margin=0.2))


NO_KV_COPY = {"no_text": ["op: expand, args: [k]", "op: expand, args: [v]"]}  # K and V read per kv head

CASES = [
    ("llama_layer", LlamaLayer, [[1, 5, 48]], {"t": 5, "d": 48}),
    ("llama_layer_dynamic_t", LlamaLayer, [[1, 5, 48]], {"t": 5, "d": 48}, {"dynamic": {"t": 9}}),  # run at 9
    ("gpt2_block", GPT2Block, [[2, 5, 32]], {"b": 2, "t": 5, "d": 32}),
    ("gated_mlp", GatedMLP, [[3, 24]], {"m": 3, "d": 24}),
    ("sdpa", lambda: SDPA(), QKV, AXQ),
    ("sdpa_scale", lambda: SDPA(scale=0.3), QKV, AXQ),
    ("sdpa_causal", lambda: SDPA(is_causal=True), [[2, 3, 7, 8]] * 3, {"b": 2, "h": 3, "t": 7, "e": 8}),
    ("sdpa_gqa", lambda: SDPA(is_causal=True, enable_gqa=True), [[2, 6, 7, 8], [2, 2, 7, 8], [2, 2, 7, 8]],
     {"b": 2, "h": 6, "kv": 2, "t": 7, "e": 8}),
    ("sdpa_repeat_kv", RepeatedKVSDPA, [[2, 6, 7, 8], [2, 2, 7, 8], [2, 2, 7, 8]],
     {"b": 2, "h": 6, "kv": 2, "t": 7, "e": 8}, NO_KV_COPY),
    ("sdpa_repeat_interleave", lambda: RepeatedKVSDPA("repeat_interleave"), [[2, 6, 7, 8], [2, 2, 7, 8], [2, 2, 7, 8]],
     {"b": 2, "h": 6, "kv": 2, "t": 7, "e": 8}, NO_KV_COPY),
    ("matmul_repeat_interleave", lambda: RepeatedKVSDPA("repeat_interleave", manual=True),
     [[2, 6, 7, 8], [2, 3, 7, 8], [2, 3, 7, 8]], {"b": 2, "h": 6, "kv": 3, "t": 7, "e": 8}),
    ("sdpa_mask", MaskedSDPA, QKV + [[7, 9]], AXQ),
    ("sdpa_window_mask", WindowMaskSDPA, [[2, 3, 7, 8]] * 3 + [[7]], {"b": 2, "h": 3, "t": 7, "e": 8}),
    ("rope_cat", RopeCat, [[3, 7, 8]], {"h": 3, "t": 7, "e": 8}),
    ("buffers_as_inputs", BufferedAttention, [[2, 3, 7, 8]] * 3, {"b": 2, "h": 3, "t": 7, "e": 8}),
    # the mask compared with 0 is the slice of the comparison it was made of (no where(future, 0, 1) table: egir.c
    # then reads the slice as the comparison of t's positions, a causal mask)
    ("buffers_computed", BufferedAttention, [[2, 3, 7, 8]] * 3, {"b": 2, "h": 3, "t": 7, "e": 8},
     {"buffers": "computed", "computed": ["bias", "cos_cached", "sin_cached"],
      "no_text": ["op: where, args: [bias_future"]}),
    ("buffer_unrecognised", Offset, X3, AX3, {"buffers": "computed", "computed": []}),
    ("stack_chunk_cat", Stack, [[3, 4], [3, 4]], {"m": 3, "n": 4}),
    ("manual_attention", ManualAttention, [[3, 7, 8]] * 3, {"h": 3, "t": 7, "e": 8}),
    ("linear_relu", lambda: LinearThen(F.relu), X3, AX3),
    ("linear_gelu", lambda: LinearThen(F.gelu), X3, AX3),
    ("linear_gelu_tanh", lambda: LinearThen(lambda y: F.gelu(y, approximate="tanh")), X3, AX3),
    ("linear_sigmoid", lambda: LinearThen(torch.sigmoid), X3, AX3),
    ("linear_leaky_relu", lambda: LinearThen(lambda y: F.leaky_relu(y, 0.2)), X3, AX3),
    ("linear_softplus", lambda: LinearThen(lambda y: F.softplus(y, beta=2.0, threshold=1.0)), X3, AX3),
    ("linear_hardtanh_tanh", lambda: LinearThen(lambda y: torch.tanh(F.hardtanh(y, -0.5, 0.5) * 3)), X3, AX3),
    ("layernorm_linear", seq(nn.LayerNorm(12), nn.Linear(12, 20), nn.SiLU()), X3, AX3),
    ("rmsnorm_linear", seq(nn.RMSNorm(12, eps=1e-6), nn.Linear(12, 20, bias=False)), X3, AX3),
    ("groupnorm", seq(nn.GroupNorm(3, 12), nn.GELU()), [[2, 12, 7]], {"b": 2, "c": 12, "l": 7}),
    # groups of 81920 elements, past aten.GROUP_ROW_CACHED: the statistics, then one pass over the split channels
    ("groupnorm_long_rows", seq(nn.GroupNorm(2, 4), nn.GELU()), [[2, 4, 256, 160]], {"b": 2, "c": 4, "h": 256, "w": 160}),
    ("classifier", Classifier, [[4, 12]], {"m": 4, "d": 12}),
    ("stats", Stats, X3, AX3),
    ("multihead_attention", MHA, [[2, 7, 16]], {"b": 2, "t": 7, "d": 16}),
    # s.float() rounds the module's float64 scores to fp32 in this round trip (as upcast_attention's softmax)
    ("t5_attention", T5Attention, [[2, 7, 16], [1, 4, 7, 7]], {"b": 2, "t": 7, "d": 16, "h": 4}, {"tol": 1e-6}),
    ("sum_max_mean_logsumexp", SumMaxMeanLogsumexp, X3, AX3),
    ("more_ops", MoreOps, X3, AX3),
    ("diagonals", Diagonals, [[9], [9, 9]], {"n": 9}),
    ("losses", Losses, X3 * 2, AX3),
    ("fused_gate_up", FusedGateUp, X3, AX3),
    ("fused_gate_up_no_bias", lambda: FusedGateUp(bias=False), X3, AX3),
    ("vit_block", ViTBlock, [[2, 7, 16]], {"b": 2, "t": 7, "d": 16}),
    ("encoder_layer", seq(nn.TransformerEncoderLayer(16, 4, dim_feedforward=24, dropout=0.0, batch_first=True)),
     [[2, 7, 16]], {"b": 2, "t": 7, "d": 16}),
    ("bmm_softmax", lambda: Lambda(lambda x: torch.softmax(x @ x.transpose(1, 2), dim=-1) @ x), X3, AX3),
    # KernelBench's transposed matmuls: A.T (aten.numpy_T) and a constant made in forward (aten.detach_)
    ("matmul_transposed", lambda: Lambda(lambda x: torch.minimum(x[0].T @ x[1], torch.tensor(0.5))), X3, AX3),
    ("bert_layer", BertLayer, [[2, 5, 32], [2, 5]], {"b": 2, "t": 5, "d": 32}),
    ("bias_attention", BiasAttention, [[3, 7, 8], [3, 9, 8], [3, 9, 8], [3, 7, 9]], {"h": 3, "t": 7, "s": 9, "e": 8}),
    ("multi_query", MultiQuery, [[2, 3, 7, 8], [2, 1, 7, 8], [2, 1, 7, 8]], {"b": 2, "h": 3, "t": 7, "e": 8}),
    # the module rounds its softmax to fp32 (dtype=float32); the importer writes a softmax at the input's
    # type (tsopt's kernels compute it in fp32 and round the result), which in this float64 round trip
    # leaves out that rounding (~5e-8)
    ("upcast_attention", UpcastAttention, QKV, AXQ, {"tol": 1e-6}),
    ("activations", Activations, X3, AX3),
    ("min_max", MinMax, [[4, 12]], {"m": 4, "d": 12}),
    ("norms_glu", NormsAndGlu, X3, AX3),
    ("pools", Pools, X3, AX3),
    ("einsum", Einsums, [[2, 3, 7, 8], [2, 3, 7, 8]], {"b": 2, "h": 3, "t": 7, "e": 8}),
    ("batchnorm_eval", BatchNormEval, [[4, 12]], {"m": 4, "d": 12}),
    ("pointwise_convs", PointwiseConvs, [[2, 6, 5, 4]], {"b": 2, "c": 6, "h": 5, "w": 4}),
    ("window_convs", WindowConvs, [[2, 4, 9, 7]], {"b": 2, "c": 4, "h": 9, "w": 7}),
    ("window_pools", WindowPools, [[2, 4, 9, 7]], {"b": 2, "c": 4, "h": 9, "w": 7}),
    ("prod_triplet", ProductsAndTriplets, [[4, 12], [4, 12]], {"m": 4, "d": 12}),
    ("product_forms", ProductForms, [[4, 12], [4, 12]], {"m": 4, "d": 12}),
    ("more_elementwise", MoreElementwise, [[4, 12], [4, 12]], {"m": 4, "d": 12}),
    ("more_losses", MoreLosses, [[4, 12], [4, 12]], {"m": 4, "d": 12}),
    ("batch_stats_norms", BatchStatsNorm, [[2, 12, 7]], {"b": 2, "c": 12, "l": 7}),
    # training mode: both batch norms over the batch (and l); their running statistics' updates left out
    ("batchnorm_train", BatchNormEval, [[4, 12]], {"m": 4, "d": 12},
     {"training": True, "dropped": ["bn.running_mean", "bn.running_var", "bn.num_batches_tracked",
                                    "bn3.running_mean", "bn3.running_var", "bn3.num_batches_tracked"]}),
]

REFUSED = ("cumsum", Cumsum, [[5, 4]], {"t": 5, "d": 4})
