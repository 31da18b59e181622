"""Dropout keep-masks drawn fast on a CPU: 32-bit words from numpy's SFC64 generator compared with a threshold.

torch draws a CPU uniform one element at a time from its Mersenne twister (≈ 2.8 ns an element on an AMD EPYC
Zen 4): the paper network's dropout masks were 6–7% of its bf16 training step (docs/benchmarks.md). Here a mask of
n elements is the first n unsigned 32-bit words of SFC64's output (each 64-bit output gives two),
compared with round(p · 2³²): a unit is dropped with probability round(p · 2³²) / 2³², within 2⁻³³ of p (a float32
uniform compared with p, the `uniform` mask, resolves p to 2⁻²⁴). The generator is seeded by one 63-bit draw from
torch's default generator, so the mask depends on torch's random state only — not on the thread count — and a
training run that saves and restores that state (`train.trainer`) resumes with the same masks. Drawn on one thread:
two chunks drawn side by side measured no faster inside a training step (0.8%, within noise; torch's own threads
hold the cores between its operators).
"""

from __future__ import annotations

import numpy as np
import torch


def drop_threshold(p: float) -> int:
    """The 32-bit word below which a unit is dropped: round(p · 2³²)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    return int(round(p * 2**32))


def sfc64_keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool keep-mask of `shape` on the CPU, each element True with probability 1 − round(p · 2³²)/2³²,
    independently; one draw from torch's default generator seeds it."""
    threshold = np.uint32(drop_threshold(p))
    n = int(np.prod(shape, dtype=np.int64))
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    generator = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed)))
    words = generator.integers(0, 2**64 - 1, size=(n + 1) // 2, dtype=np.uint64, endpoint=True)
    bits = words.view(np.uint32)[:n]
    keep = torch.from_numpy(np.greater_equal(bits, threshold))
    return keep.view(tuple(shape))
