"""torch_modules.py — PyTorch modules shaped like GEMM-fusion suites' problems (KernelBench level 2), exported to
the probes beside this file with tsopt_torch.export (the commands are in each YAML's comment)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class GemmBatchNormGeluMin(nn.Module):
    """Linear, BatchNorm1d in training mode (the batch's statistics), GELU, then the minimum over features."""

    def __init__(self, i=1024, o=2048):
        super().__init__()
        self.gemm, self.bn = nn.Linear(i, o), nn.BatchNorm1d(o)

    def forward(self, x):
        y = F.gelu(self.bn(self.gemm(x)))
        return torch.min(y, dim=1, keepdim=True)[0]


class GemmInstanceNormResidual(nn.Module):
    """Linear, InstanceNorm2d over the features of each row (unsqueezed to [b, 1, 1, o]), + y, · y."""

    def __init__(self, i=1024, o=2048):
        super().__init__()
        self.gemm, self.instance_norm = nn.Linear(i, o), nn.InstanceNorm2d(o, eps=1e-5, momentum=0.1)

    def forward(self, x, y):
        x = self.gemm(x)
        x = self.instance_norm(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)
        return (x + y) * y


class ConvReluBias(nn.Module):
    """KernelBench level 2's Conv2d_ReLU_BiasAdd: a 3×3 convolution without padding, ReLU, a bias per channel."""

    def __init__(self, c=3, o=16, k=3):
        super().__init__()
        self.conv = nn.Conv2d(c, o, k)
        self.bias = nn.Parameter(torch.randn(o, 1, 1) * 0.02)

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


class Conv3x3(nn.Module):
    """A plain 3×3 convolution without padding or bias (KernelBench level 1's shape of problem)."""

    def __init__(self, c=64, o=128, k=3):
        super().__init__()
        self.conv = nn.Conv2d(c, o, k, bias=False)

    def forward(self, x):
        return self.conv(x)


class MaxPoolOverlap(nn.Module):
    """max_pool2d over overlapping 3×3 windows of stride 2 (KernelBench level 1's MaxPool2d without padding)."""

    def forward(self, x):
        return F.max_pool2d(x, 3, 2)


class DepthwiseConv(nn.Module):
    """A depthwise 3×3 convolution with a bias (MobileNet's; groups = channels), no padding."""

    def __init__(self, c=64, k=3):
        super().__init__()
        self.conv = nn.Conv2d(c, c, k, groups=c)

    def forward(self, x):
        return self.conv(x)


class PatchEmbed(nn.Module):
    """ViT's patch embedding: Conv2d(3, d, 16, stride 16) over the image, flattened to tokens [b, 196, d]."""

    def __init__(self, d=768, patch=16):
        super().__init__()
        self.proj = nn.Conv2d(3, d, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)
