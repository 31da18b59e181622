"""Prompts of categorical attributes: one one-hot block per attribute, a block of the null value (0 by default) meaning
"not given".

This layout is shared by the data (Shapes3D prompts), the VE process (attribute-wise label dropout nulls blocks)
and the analyses (conditional denoisers given one attribute at a time).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Sequence

import torch
from torch import Tensor


@dataclass(frozen=True)
class AttributePrompt:
    """One-hot prompt blocks per attribute; a block filled with `null_value` means "attribute not given" (the null
    label, as the VE process's label dropout writes it)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]
    null_value: float = 0.0

    def __post_init__(self) -> None:
        if not self.names or len(self.names) != len(self.sizes) or len(set(self.names)) != len(self.names):
            raise ValueError(f"need distinct attribute names with one size each, got {self.names}, {self.sizes}")
        if any(k < 2 for k in self.sizes):
            raise ValueError(f"every attribute needs at least 2 classes, got sizes {self.sizes}")

    @property
    def dim(self) -> int:
        return sum(self.sizes)

    @property
    def blocks(self) -> list[slice]:
        """The prompt columns of each attribute."""
        return attribute_blocks(self.sizes)

    def index(self, name: str) -> int:
        if name not in self.names:
            raise ValueError(f"unknown attribute {name!r}; this prompt has {list(self.names)}")
        return self.names.index(name)

    def encode(self, labels: Tensor, given: Sequence[str] | None = None) -> Tensor:
        """Prompts [N, dim] of class labels [N, A] (attribute order of `names`; whole numbers of any dtype, a
        fractional one is refused); only `given` attributes (default all) are written, the others are null."""
        if labels.dim() != 2 or labels.shape[1] != len(self.names):
            raise ValueError(f"labels must be [N, {len(self.names)}] for {list(self.names)}, got {tuple(labels.shape)}")
        sizes = torch.tensor(self.sizes)
        if bool(((labels < 0) | (labels >= sizes)).any()):
            raise ValueError(f"labels out of range; attribute sizes are {dict(zip(self.names, self.sizes))}")
        fractional = labels[labels != labels.round()] if labels.is_floating_point() else labels[:0]
        if fractional.numel():
            raise ValueError(f"labels must be whole class indices, got {fractional[0].item():g}")
        keep = {self.index(n) for n in (self.names if given is None else given)}
        prompt = torch.full((labels.shape[0], self.dim), float(self.null_value))
        for i, block in enumerate(self.blocks):
            if i in keep:
                prompt[:, block] = torch.nn.functional.one_hot(labels[:, i].long(), self.sizes[i]).float()
        return prompt

    def only(self, name: str, values: Tensor) -> Tensor:
        """Prompts [N, dim] giving attribute `name` = values [N] and nothing else."""
        i = self.index(name)
        labels = torch.zeros(values.shape[0], len(self.names), dtype=torch.long)
        labels[:, i] = values.long()
        return self.encode(labels, given=[name])

    def null(self, n: int) -> Tensor:
        """The null (unconditional) prompt, n rows."""
        return torch.full((n, self.dim), float(self.null_value))


def attribute_blocks(sizes: Sequence[int]) -> list[slice]:
    """The prompt columns of consecutive blocks of the given widths."""
    ends = list(accumulate(sizes))
    return [slice(end - size, end) for size, end in zip(sizes, ends)]
