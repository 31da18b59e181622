"""`LabelledImages`: a training set of images, their prompts and ground-truth labels, one row each."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class LabelledImages:
    """Images with their prompts and ground-truth labels (one row each)."""

    images: Tensor  # float32 [N, C, S, S] in [0, 1], or uint8 0..255 (large worlds; the trainer converts batches)
    prompts: Tensor  # float32 [N, D]
    labels: Tensor  # float64 [N, L]

    def __len__(self) -> int:
        return self.images.shape[0]


def unit_float(images: Tensor) -> Tensor:
    """Images as float in [0, 1]: uint8 is divided by 255, float passes through unchanged."""
    return images.float() / 255.0 if images.dtype == torch.uint8 else images
