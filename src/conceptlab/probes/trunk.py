"""The classifier trunk both ground-truth readers share: three conv stages, global average + max pooling, a hidden
layer, then one linear head per output (the concept probe and the Shapes3D attribute classifier)."""

from __future__ import annotations

from typing import Mapping

import torch
from torch import Tensor, nn


class PooledConvClassifier(nn.Module):
    """conv(3→w)·BN·ReLU, pool, conv(w→2w)·BN·ReLU, pool, conv(2w→2w)·BN·ReLU; [mean ‖ max] over space →
    Linear(4w, 4w)·ReLU → one `Linear(4w, k)` head per entry of `heads` (name → k). Inputs in [0, 1], RGB."""

    def __init__(self, heads: Mapping[str, int], width: int = 16):
        super().__init__()
        self.width = width

        def stage(c_in: int, c_out: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())

        self.features = nn.Sequential(
            stage(3, width), nn.MaxPool2d(2), stage(width, 2 * width), nn.MaxPool2d(2), stage(2 * width, 2 * width)
        )
        self.trunk = nn.Sequential(nn.Linear(4 * width, 4 * width), nn.ReLU())
        self.heads = nn.ModuleDict({name: nn.Linear(4 * width, k) for name, k in heads.items()})

    def forward(self, images: Tensor) -> dict[str, Tensor]:
        h = self.features((images - 0.5).contiguous(memory_format=torch.channels_last))  # ~1.5x faster on CPU
        h = self.trunk(torch.cat([h.mean((2, 3)), h.amax((2, 3))], 1))
        return {name: head(h) for name, head in self.heads.items()}
