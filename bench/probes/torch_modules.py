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
