"""machine_probe: the machine-state probe's workload, not a benchmark. A fixed fp32 GEMM
(16 x 128 x 128, one XNNPACK Fully Connected) that every block's runner process times right
before its first run and right after its last (pytest_sme2.analysis.machine_state): the same
kind of vector work the models do, with a fixed footprint (64 KB of weights), so its speed
moves with the machine's and not with the code under test."""

from __future__ import annotations

import torch
from torch import nn

from pytest_sme2.programs.registry import ModelDef

ROWS, WIDTH = 16, 128


def build(seed: int = 0) -> ModelDef:
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = nn.Linear(WIDTH, WIDTH).eval()
    example = (torch.randn(ROWS, WIDTH, generator=gen),)
    return ModelDef(model, example, [example])
