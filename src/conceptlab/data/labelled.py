"""`LabelledImages`: a training set of images, their prompts and ground-truth labels, one row each."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class LabelledImages:
    """Images with their prompts and ground-truth labels (one row each)."""

    images: Tensor  # float32 [N, C, S, S] in [0, 1]
    prompts: Tensor  # float32 [N, D]
    labels: Tensor  # float64 [N, L]

    def __len__(self) -> int:
        return self.images.shape[0]
