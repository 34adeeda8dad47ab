"""toy_cnn: a small CNN that still shows every event kind a report needs — delegated
convolutions and GEMM, a residual add, a transpose (data movement) and one operator that XNNPACK
leaves to the portable runtime (adaptive average pooling to a non-global size)."""

from __future__ import annotations

import torch
from torch import nn

from pytest_sme2.programs.registry import ModelDef


class ToyCNN(nn.Module):
    def __init__(self, channels: int = 16, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels),
                                  nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1),
                                   nn.BatchNorm2d(channels), nn.ReLU(),
                                   nn.Conv2d(channels, channels, 3, padding=1))
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.head = nn.Linear(channels * 16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = torch.relu(y + self.block(y))          # residual add
        y = self.pool(y)                           # 4x4: stays portable
        y = y.transpose(1, 3).flatten(1)           # layout change: a Transpose event
        return self.head(y)


def build(channels: int = 16, size: int = 32, seed: int = 0) -> ModelDef:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = ToyCNN(channels).eval()
    example = (torch.randn(1, 3, size, size, generator=gen),)
    calibration = [(torch.randn(1, 3, size, size, generator=gen),) for _ in range(8)]
    return ModelDef(model, example, calibration)
