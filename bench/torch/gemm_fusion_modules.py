"""gemm_fusion_modules.py — GEMM-fusion modules in the style of KernelBench level 2 (a Linear followed by
activations, norms, reductions and pooling, as its problems chain them), for bench/torch/gemm_fusion_graphs.sh:
graphs no bench file was written for, exported as a user would (bench/NOTES.md run 155)."""
import torch, torch.nn as nn, torch.nn.functional as F

class GemmSubMulRelu(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x): return torch.relu((s.l(x) - 2.0) * 1.5)
class GemmSumMaxMeanLse(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x):
        x = s.l(x); x = torch.sum(x, dim=1, keepdim=True); x = torch.max(x, dim=1, keepdim=True)[0]
        x = torch.mean(x, dim=1, keepdim=True); x = torch.logsumexp(x, dim=1, keepdim=True); return torch.logsumexp(x, dim=1, keepdim=True)
class GemmScaleResidualClampLseMish(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x):
        x = s.l(x); x = x * 2.0; x = x + x; x = torch.clamp(x, -10., 10.)
        x = torch.logsumexp(x, dim=1, keepdim=True); return x * F.mish(x)
class GemmInstanceNormResidualMul(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o); s.n = nn.InstanceNorm2d(o)
    def forward(s, x, y):
        x = s.l(x); x = s.n(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1); x = x + y; return x * y
class GemmSwishBiasGroupNorm(nn.Module):
    def __init__(s, i=4096, o=4096, g=64): super().__init__(); s.l = nn.Linear(i, o); s.b = nn.Parameter(torch.randn(o)); s.g = nn.GroupNorm(g, o)
    def forward(s, x):
        x = s.l(x); x = torch.sigmoid(x) * x; x = x + s.b; return s.g(x)
class GemmSigmoidGemmLse(nn.Module):
    def __init__(s, i=4096, h=4096, o=1024): super().__init__(); s.l1 = nn.Linear(i, h); s.l2 = nn.Linear(h, o)
    def forward(s, x):
        x = torch.sigmoid(s.l1(x)); x = s.l2(x); return torch.logsumexp(x, dim=1)
class GemmGroupNormLeakyReluSum(nn.Module):
    def __init__(s, i=4096, o=4096, g=256): super().__init__(); s.l = nn.Linear(i, o); s.g = nn.GroupNorm(g, o)
    def forward(s, x):
        x = s.g(s.l(x)); x = F.leaky_relu(x, 0.01); return x + x
class GemmMeanSoftmax(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x):
        x = s.l(x); x = torch.mean(x, dim=1, keepdim=True); return torch.softmax(x, dim=1)
class GemmMinSub(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x):
        x = s.l(x); x = torch.min(x, torch.tensor(0.5, dtype=x.dtype)); return x - 0.5
class GemmGroupNormMinBias(nn.Module):
    def __init__(s, i=4096, o=4096, g=128): super().__init__(); s.l = nn.Linear(i, o); s.g = nn.GroupNorm(g, o); s.b = nn.Parameter(torch.randn(1, o))
    def forward(s, x):
        x = s.g(s.l(x)); x = torch.min(x, dim=1, keepdim=True)[0]; return x + s.b
class GemmMaxSubGelu(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x):
        x = s.l(x); x = torch.max(x, dim=1, keepdim=True).values; x = x - x.mean(dim=1, keepdim=True); return F.gelu(x)
class GemmSwishDivClampTanhClamp(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x):
        x = s.l(x); x = x * torch.sigmoid(x); x = x / 2.0; x = torch.clamp(x, -1, 1); x = torch.tanh(x); return torch.clamp(x, -1, 1)
class GemmBatchNormTrainScaleSoftmax(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o); s.bn = nn.BatchNorm1d(o); s.sc = nn.Parameter(torch.ones(1))
    def forward(s, x):
        x = s.bn(s.l(x)); return torch.softmax(s.sc * x, dim=1)
class GemmAddSwishTanhGeluHardtanh(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o); s.a = nn.Parameter(torch.randn(o))
    def forward(s, x):
        x = s.l(x) + s.a; x = torch.sigmoid(x) * x; x = torch.tanh(x); x = F.gelu(x); return F.hardtanh(x, -1, 1)
class GemmBatchNormEvalBiasDivSwish(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o); s.bn = nn.BatchNorm1d(o); s.b = nn.Parameter(torch.randn(1)) 
    def forward(s, x):
        x = s.bn(s.l(x)); x = (x + s.b) / 1.5; return x * torch.sigmoid(x)
class GemmAvgPoolGeluScaleMax(nn.Module):
    def __init__(s, i=4096, o=4096, k=16): super().__init__(); s.l = nn.Linear(i, o); s.p = nn.AvgPool1d(k)
    def forward(s, x):
        x = s.l(x); x = s.p(x.unsqueeze(1)).squeeze(1); x = F.gelu(x) * 2.0; return torch.max(x, dim=1).values
class GemmGeluSoftmax(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x): return torch.softmax(F.gelu(s.l(x)), dim=1)
class GemmDivGelu(nn.Module):
    def __init__(s, i=4096, o=4096): super().__init__(); s.l = nn.Linear(i, o)
    def forward(s, x): return F.gelu(s.l(x) / 10.0)
class GemmBatchNormTrainGeluGroupNormMeanRelu(nn.Module):
    def __init__(s, i=4096, o=4096, g=32): super().__init__(); s.l = nn.Linear(i, o); s.bn = nn.BatchNorm1d(o); s.g = nn.GroupNorm(g, o)
    def forward(s, x):
        x = F.gelu(s.bn(s.l(x))); x = s.g(x); x = torch.mean(x, dim=1, keepdim=True); return torch.relu(x)
