"""Dropout keep-masks drawn fast on a CPU: bits from numpy's SFC64 generator, in fixed chunks drawn side by side.

torch draws a CPU uniform one element at a time from its Mersenne twister, on one thread (≈ 2.8 ns an element on an
AMD EPYC Zen 4): the paper network's dropout masks were 6–7% of its bf16 training step (docs/benchmarks.md). Here a
mask of n elements is n unsigned 32-bit words from SFC64 — each 64-bit output gives two — compared with
round(p · 2³²): the unit is dropped with probability round(p · 2³²) / 2³² (within 2⁻³³ of p; a float32 uniform
compared with p, the `uniform` mask, resolves p to 2⁻²⁴). The words come in `CHUNKS` chunks, each from its own
generator seeded by (one 63-bit draw from torch's default generator, the chunk's index), drawn and compared on up to
`CHUNKS` threads (numpy releases the GIL): the mask depends on torch's random state only — not on the thread count —
and a training run that saves and restores torch's state (`train.checkpoints`) resumes with the same masks.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

CHUNKS = 2  # fixed, so the mask does not depend on how many threads drew it

_pool: ThreadPoolExecutor | None = None
_pool_pid: int | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """One small pool per process (a forked child starts its own: threads do not survive a fork)."""
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():
            _pool, _pool_pid = ThreadPoolExecutor(CHUNKS, thread_name_prefix="conceptlab-masks"), os.getpid()
        return _pool


def drop_threshold(p: float) -> int:
    """The 32-bit word below which a unit is dropped: round(p · 2³²)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    return int(round(p * 2**32))


def sfc64_keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A bool keep-mask of `shape` on the CPU, each element True with probability 1 − round(p · 2³²)/2³²,
    independently; one draw from torch's default generator seeds it."""
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    threshold = np.uint32(drop_threshold(p)) if p > 0 else None
    keep = torch.empty(n, dtype=torch.bool)
    out = keep.numpy()
    words = (n + 1) // 2  # 64-bit outputs: two mask elements each
    bounds = [words * k // CHUNKS for k in range(CHUNKS + 1)]

    def fill(k: int) -> None:
        lo, hi = bounds[k], bounds[k + 1]
        if hi <= lo:
            return
        generator = np.random.Generator(np.random.SFC64(np.random.SeedSequence([seed, k])))
        raw = generator.integers(0, 2**64 - 1, size=hi - lo, dtype=np.uint64, endpoint=True)
        bits = raw.view(np.uint32)[: min(2 * hi, n) - 2 * lo]
        if threshold is None:
            out[2 * lo : 2 * lo + len(bits)] = True
        else:
            np.greater_equal(bits, threshold, out=out[2 * lo : 2 * lo + len(bits)])

    threads = min(CHUNKS, torch.get_num_threads())
    if threads > 1 and n >= 1 << 16:  # small masks: a thread hand-off costs more than it saves
        for future in [_executor().submit(fill, k) for k in range(CHUNKS)]:
            future.result()
    else:
        for k in range(CHUNKS):
            fill(k)
    return keep.view(tuple(shape))
