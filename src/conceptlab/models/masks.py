"""Dropout keep-masks drawn fast on a CPU: 32-bit words of numpy's SFC64 generator compared with a threshold.

torch draws a CPU uniform one element at a time from its Mersenne twister: an 8.4 M-element mask took 41.5 ms as
`torch.rand(shape) >= p` on an AMD EPYC Zen 4, 13.1 ms this way, and the paper network's masks were 6–7% of its
bf16 training step (docs/benchmarks.md). Here a mask of n elements is the first n unsigned 32-bit words of SFC64's
raw output (each 64-bit output gives two, low word first), compared with round(p · 2³²): a unit is dropped with
probability round(p · 2³²) / 2³², within 2⁻³³ of p (a float32 uniform compared with p, the `uniform` mask, resolves
p to 2⁻²⁴). The generator is seeded by one 63-bit draw from torch's default generator, so the mask depends on
torch's random state only — not on the thread count — and a training run that saves and restores that state
(`train.trainer`) resumes with the same masks. Raw output, not a `Generator` method: numpy keeps a bit generator's
raw stream the same across versions.
"""

from __future__ import annotations

import numpy as np
import torch


def drop_threshold(p: float) -> int:
    """The 32-bit word below which a unit is dropped: round(p · 2³²)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    threshold = int(round(p * 2**32))
    if threshold >= 2**32:
        raise ValueError(f"dropout probability {p} rounds to 1 at 32 bits: use the bernoulli or uniform mask")
    return threshold


def sfc64_keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool keep-mask of `shape` on the CPU, each element True with probability 1 − round(p · 2³²)/2³²,
    independently; one draw from torch's default generator seeds it. Under `torch.compile` the draw stays eager
    (numpy, and the seed from torch's generator: compiled, it would come from the compiler's RNG); torch's dynamo is
    imported only then, not by importing this module (a second of every process's start-up)."""
    if not torch.compiler.is_compiling():
        return _draw(shape, p)
    eager = getattr(_draw, "eager", None)
    if eager is None:
        eager = _draw.eager = torch.compiler.disable(_draw)  # type: ignore[attr-defined]
    return eager(shape, p)


def _draw(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    threshold = np.uint32(drop_threshold(p))
    n = int(np.prod(shape, dtype=np.int64))
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    words = np.random.SFC64(np.random.SeedSequence(seed)).random_raw((n + 1) // 2)
    bits = words.astype("<u8", copy=False).view("<u4")[:n]  # low word first, whatever the machine's byte order
    keep = torch.from_numpy(np.greater_equal(bits, threshold))
    return keep.view(tuple(shape))
