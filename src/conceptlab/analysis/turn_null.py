"""A null model for a concept-space trajectory's turn: how far does a trajectory with no turn appear to turn?

`analysis.emergence.sudden_turn` returns the largest angle between successive displacements of a concept-space
trajectory. Every measured trajectory turns somewhat: the concept readings are means over a few generated images
per checkpoint, and their sampling noise bends even a straight path. A turn must therefore be larger than what a
path without one shows at the same sampling resolution; here it is measured as the path's bow away from its chord.

The null here is a parametric bootstrap of a straight path:

- `straight_path(points)`: the path with no turn that stays closest to the observed one — the segment from its first
  to its last point, travelled with the observed progress along it (each point's projection on the segment, made
  non-decreasing and kept in [0, 1]), so the null keeps the trajectory's timing and loses only its direction changes.
- `redraw_straight(points, counts, draws, rng)`: `draws` redraws of that path, each coordinate at each checkpoint
  drawn independently around the straight path's value q with mean q and variance q(1 − q) / counts (a Beta): for
  a mean of `counts` readings in [0, 1] that is the largest variance possible, so the null is at least as noisy as
  one checkpoint's sampling noise. It is also independent across checkpoints, while the evaluation reuses each
  image's noise at every checkpoint (readings of neighbouring checkpoints are correlated): both make the test
  conservative and weak: a turn it does not call real is not shown, which is not the same as absent. Counts
  must be ≥ 2.
- `chord_bow(points)`: the path's largest distance from its chord (how far it bows away from a straight path).
- `turn_test(steps, points, counts, draws, seed)`: the observed bow, the null's 95th percentile and the one-sided
  bootstrap p-value (1 + #{null ≥ observed}) / (draws + 1). NaN when the test is undefined (fewer than three
  checkpoints, or a path that ends where it started).

The detector's own angle is not tested: on a nearly one-dimensional path every reversal is close to 180°, the null's
as much as the observed one, so its null says nothing (tried and dropped, docs/findings-suite.md). Pure functions on
numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TurnTest:
    """The observed chord bow, the null's 95th percentile, the bootstrap p-value and the number of null draws."""

    bow: float
    bow_null_q95: float
    bow_p: float
    draws: int


def _as_path(points: np.ndarray) -> np.ndarray:
    points = np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[0] < 2:
        raise ValueError(f"points must be [checkpoints ≥ 2, concepts], got shape {points.shape}")
    if not np.isfinite(points).all():
        raise ValueError("points must be finite (leave out checkpoints without a reading)")
    return points


def straight_path(points: np.ndarray) -> np.ndarray | None:
    """The segment from the first to the last point, travelled with the observed (non-decreasing) progress along it.

    None when the path ends where it started (no direction to travel in)."""
    points = _as_path(points)
    start, end = points[0], points[-1]
    direction = end - start
    length2 = float(direction @ direction)
    if length2 < 1e-12:
        return None
    progress = (points - start) @ direction / length2
    progress = np.clip(np.maximum.accumulate(progress), 0.0, 1.0)
    progress[0], progress[-1] = 0.0, 1.0
    return start + progress[:, None] * direction


def chord_bow(points: np.ndarray) -> float:
    """The path's largest distance from its chord, the segment from its first to its last point (from that point
    when the path ends where it started)."""
    points = _as_path(points)
    start, end = points[0], points[-1]
    direction = end - start
    length2 = float(direction @ direction)
    offsets = points - start
    if length2 < 1e-12:
        return float(np.linalg.norm(offsets, axis=1).max())
    along = np.clip(offsets @ direction / length2, 0.0, 1.0)
    return float(np.linalg.norm(offsets - along[:, None] * direction, axis=1).max())


def redraw_straight(points: np.ndarray, counts: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """`draws` redraws of the straight path, [draws, checkpoints, concepts]: each value drawn from
    Beta(q (n − 1), (1 − q)(n − 1)) around the path's value q, n the checkpoint's count (mean q, variance
    q(1 − q)/n, the largest a mean of n readings in [0, 1] can have). Continuous, like the readings: a binomial
    redraw put values on a 1/n grid, where a saturated coordinate is redrawn as exactly 1 and every reversal is
    exactly 180°, which no observed mean of soft probabilities reaches."""
    path = straight_path(points)
    if path is None:
        raise ValueError("the path ends where it started: a straight-path null is undefined")
    counts = np.asarray(counts, dtype=int)
    if counts.shape != (path.shape[0],) or (counts < 2).any():
        raise ValueError(f"counts must be one count ≥ 2 per checkpoint ({path.shape[0]}), got {counts}")
    if draws < 1:
        raise ValueError(f"draws must be ≥ 1, got {draws}")
    q = np.clip(path, 1e-6, 1.0 - 1e-6)
    shape = (draws, *q.shape)
    n = counts[None, :, None] - 1.0
    return rng.beta(np.broadcast_to(q * n, shape), np.broadcast_to((1.0 - q) * n, shape))


def turn_test(steps: np.ndarray, points: np.ndarray, counts: np.ndarray, draws: int = 999, seed: int = 0) -> TurnTest:
    """Does the trajectory bow away from its chord more than a straight path's sampling noise makes it?

    `counts[i]` is the number of readings averaged at checkpoint i (valid images, ≥ 2)."""
    steps = np.asarray(steps, dtype=float)
    points = _as_path(points)
    if steps.shape != (points.shape[0],):
        raise ValueError(f"steps must match the {points.shape[0]} checkpoints, got shape {steps.shape}")
    order = np.argsort(steps)
    points, counts = points[order], np.asarray(counts)[order]
    if steps.size < 3 or straight_path(points) is None:
        return TurnTest(math.nan, math.nan, math.nan, 0)
    null_bow = np.array([chord_bow(r) for r in redraw_straight(points, counts, draws, np.random.default_rng(seed))])
    bow = chord_bow(points)
    return TurnTest(bow, float(np.quantile(null_bow, 0.95)), (1 + int((null_bow >= bow).sum())) / (draws + 1), draws)
