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

Where a run samples the held-out prompt on several noise streams (the paper-setup runs have 5 × 24 images per
checkpoint, against 8 in the concept-space table), a sharper test measures the noise instead of bounding it:

- `pool_streams(readings, valid)`: the streams' readings averaged by their valid images.
- `stream_turn_test(steps, readings, valid, alpha)`: a sign-flip randomization test. Each stream's deviation from the
  pooled path's straight path is flipped as a whole (one sign per stream, so the correlation a stream's reused noise
  gives its checkpoints is kept); a turn every stream shares does not survive mixed signs. It passes when the pooled
  bow exceeds all but a share α of the patterns (2 / patterns when larger: the pooled path's mirror, its deviation
  with every sign flipped, bows as far when no progress is clipped, so with 5 streams the level is 1/16).
  Approximate, as the straight path is estimated from the pooled path; simulated straight paths with
  stream-correlated noise pass at about the level (6–7.5% at a level of 6.25%; tests/unit).

Neither null covers the network's own noise: a network trained without an EMA of its weights moves between
checkpoints by its optimizer's noise, a move every image and stream read there shares. For that:

- `checkpoint_noise_turn_test(steps, points, hold)`: a studentized parametric bootstrap of a straight path with
  independent Gaussian noise per checkpoint at the scale the path's own second differences imply
  (`checkpoint_noise`), on the bow the path keeps for `hold` consecutive checkpoints (`sustained_bow`), so a swing
  at one checkpoint is not a turn. Noise lasting `hold` checkpoints or more counts as signal.
- `semivariogram(points, max_lag)` and `noise_persistence(points, max_lag)`: on a stretch where the signal is flat
  (a converged tail), the noise's scale and over how many checkpoints it lasts — what a test with denser
  checkpoints must know before its `hold` can be chosen.

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


def chord_distances(points: np.ndarray) -> np.ndarray:
    """Each point's distance from the path's chord, the segment from its first to its last point (from that point
    when the path ends where it started)."""
    points = _as_path(points)
    start, end = points[0], points[-1]
    direction = end - start
    length2 = float(direction @ direction)
    offsets = points - start
    if length2 < 1e-12:
        return np.linalg.norm(offsets, axis=1)
    along = np.clip(offsets @ direction / length2, 0.0, 1.0)
    return np.linalg.norm(offsets - along[:, None] * direction, axis=1)


def chord_bow(points: np.ndarray) -> float:
    """The path's largest distance from its chord (`chord_distances`)."""
    return float(chord_distances(points).max())


def sustained_bow(points: np.ndarray, hold: int = 2) -> float:
    """The largest distance from the chord that the path keeps at `hold` consecutive checkpoints: the max over
    windows of `hold` checkpoints of the window's smallest distance (`hold` 1 is `chord_bow`). A swing of one
    checkpoint does not raise it; a turn the path stays in does."""
    distances = chord_distances(points)
    if hold < 1 or hold > distances.size:
        raise ValueError(f"hold must be in [1, {distances.size}] (the checkpoints), got {hold}")
    windows = np.lib.stride_tricks.sliding_window_view(distances, hold)
    return float(windows.min(axis=1).max())


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


@dataclass(frozen=True)
class StreamTurnTest:
    """The pooled trajectory's chord bow; the critical bow it must exceed (the largest null bow that the level
    leaves out); the randomization p-value; the number of sign patterns (all of them when `exact`); the level the
    test was run at (α, or 2 / patterns when that is larger); the streams and checkpoints read."""

    bow: float
    bow_critical: float
    bow_p: float
    patterns: int
    exact: bool
    level: float
    streams: int
    checkpoints: int


def _as_streams(readings: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    readings, valid = np.asarray(readings, dtype=float), np.asarray(valid)
    if readings.ndim != 3:
        raise ValueError(f"readings must be [streams, checkpoints, concepts], got shape {readings.shape}")
    if valid.shape != readings.shape[:2]:
        raise ValueError(f"valid must be [streams, checkpoints] = {readings.shape[:2]}, got shape {valid.shape}")
    if not np.isfinite(valid).all() or (valid < 0).any() or (valid != np.round(valid)).any():
        raise ValueError("valid must hold counts of valid images (integers ≥ 0)")
    valid = valid.astype(int)
    read = valid > 0
    if not np.isfinite(readings[read]).all():
        raise ValueError("a stream with valid images at a checkpoint must have a finite reading there")
    return np.where(read[..., None], readings, 0.0), valid


def pool_streams(readings: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pooled [checkpoints, concepts], weights [streams, checkpoints]): the streams' readings averaged with weights
    proportional to their valid images (so the pooled value is the mean over every valid image), a stream without a
    valid image at a checkpoint weighing 0 there. Every checkpoint needs a valid image on some stream."""
    readings, valid = _as_streams(readings, valid)
    total = valid.sum(axis=0)
    if (total == 0).any():
        raise ValueError(f"checkpoints {np.flatnonzero(total == 0).tolist()} have no valid image on any stream")
    weights = valid / total
    return (weights[..., None] * readings).sum(axis=0), weights


def sign_patterns(streams: int, max_exact: int, draws: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """([patterns, streams] of ±1, exact): all 2^streams patterns (the identity first) when streams ≤ `max_exact`;
    else the identity and `draws` random patterns."""
    if streams < 1:
        raise ValueError(f"streams must be ≥ 1, got {streams}")
    if streams <= max_exact:
        codes = np.arange(2**streams)[:, None] >> np.arange(streams)[None, :] & 1
        return 1.0 - 2.0 * codes, True
    if draws < 1:
        raise ValueError(f"draws must be ≥ 1, got {draws}")
    return np.vstack([np.ones((1, streams)), rng.choice([-1.0, 1.0], size=(draws, streams))]), False


def stream_turn_test(steps: np.ndarray, readings: np.ndarray, valid: np.ndarray, alpha: float = 0.05,
                     min_streams: int = 5, max_exact: int = 12, draws: int = 4095, seed: int = 0) -> StreamTurnTest:
    """Does the trajectory pooled over replicate sampling streams bow away from its chord more than its own streams'
    noise makes a straight path bow? A sign-flip randomization test.

    `readings[s, i]` is stream s's mean concept reading at checkpoint i (NaN where it had no valid image),
    `valid[s, i]` its number of valid images. The pooled path P (`pool_streams`) is its straight path S
    (`straight_path`) plus the weighted mean of the streams' deviations from S. Without a turn those deviations are
    sampling noise, independent between streams (each stream draws its own noise) and symmetric about 0, so flipping
    the sign of a stream's whole deviation — one sign per stream, so its correlation over checkpoints (a stream
    reuses its noise at every checkpoint) is kept — leaves their distribution unchanged; a turn shared by every
    stream is not symmetric, and mixed signs cancel it. The null bows are those of S plus every sign pattern's
    weighted mean deviation (the identity pattern gives P itself), the p-value the share of patterns whose bow is
    ≥ P's. The test passes when p ≤ the level (equivalently, P's bow exceeds `bow_critical`): α, or 2 / patterns
    when that is larger. The mirror 2S − P bows as far as P where S's progress is not clipped (where it is, it
    bows further or less), so a level of 1 / patterns would often be unreachable; at 2 / patterns the test stays
    valid under sign-flip symmetry either way (with 5 streams, 32 patterns: level 1/16, P among the 2 furthest).
    Random patterns (identity kept) when streams > `max_exact`. Measured noise, not the bound `turn_test` draws
    from, so it is sharper; S is estimated from P, which makes it approximate (simulated straight paths pass at
    6–7.5% against a level of 6.25%; tests/unit). NaN with fewer than
    `min_streams` streams, fewer than three checkpoints or a path that ends where it started."""
    steps = np.asarray(steps, dtype=float)
    readings, valid = _as_streams(readings, valid)
    streams, checkpoints = valid.shape
    if steps.shape != (checkpoints,):
        raise ValueError(f"steps must match the {checkpoints} checkpoints, got shape {steps.shape}")
    if min_streams < 2:
        raise ValueError(f"min_streams must be ≥ 2, got {min_streams}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    order = np.argsort(steps)
    readings, valid = readings[:, order], valid[:, order]
    undefined = StreamTurnTest(math.nan, math.nan, math.nan, 0, False, math.nan, streams, checkpoints)
    if streams < min_streams or checkpoints < 3:
        return undefined
    pooled, weights = pool_streams(readings, valid)
    path = straight_path(pooled)
    if path is None:
        return undefined
    deviations = weights[..., None] * (readings - path[None]) * (valid > 0)[..., None]
    signs, exact = sign_patterns(streams, max_exact, draws, np.random.default_rng(seed))
    null_bow = np.array([chord_bow(path + d) for d in np.einsum("ps,stc->ptc", signs, deviations)])
    bow = chord_bow(pooled)
    n = len(signs)
    level = max(alpha, 2.0 / n)
    allowed = max(2, math.floor(alpha * n + 1e-9))  # patterns allowed at or above P's bow, P itself among them
    tie = 1e-12 * max(1.0, bow)  # the identity pattern recomputes P's bow up to rounding
    p = float((null_bow >= bow - tie).mean())
    critical = float(np.sort(null_bow)[::-1][min(allowed, n - 1)])
    if critical >= bow - tie:  # a tie with P is not exceeded: `bow > bow_critical` exactly when p ≤ the level
        critical = max(critical, bow)
    return StreamTurnTest(bow, critical, p, n, exact, level, streams, checkpoints)


@dataclass(frozen=True)
class CheckpointNoiseTurnTest:
    """The path's sustained bow (`sustained_bow`); the bow it must exceed (the null's 95th percentile of the studentized
    bow, times the path's noise scale); the bootstrap p-value; the number of null draws; the checkpoint noise per
    concept the null was drawn at; the checkpoints read."""

    bow: float
    bow_null_q95: float
    bow_p: float
    draws: int
    sigma: tuple[float, ...]
    checkpoints: int


def checkpoint_noise(points: np.ndarray) -> np.ndarray:
    """Per concept, the scale of independent checkpoint-to-checkpoint noise that the path's second differences
    imply: sqrt(mean (x[i+1] − 2 x[i] + x[i−1])² / 6) (for independent noise of sd σ a second difference has
    variance 6σ²). Not robust on purpose: the path's own bends (a turn's corner, its progress speeding up or slowing
    down along a straight line) and single-checkpoint swings raise it."""
    points = _as_path(points)
    if points.shape[0] < 3:
        raise ValueError(f"checkpoint noise needs ≥ 3 checkpoints, got {points.shape[0]}")
    return np.sqrt((np.diff(points, n=2, axis=0) ** 2).mean(axis=0) / 6.0)


def _noise_scale(points: np.ndarray) -> float:
    return max(float(np.sqrt((checkpoint_noise(points) ** 2).sum())), 1e-12)


def checkpoint_noise_turn_test(steps: np.ndarray, points: np.ndarray, hold: int = 2, draws: int = 999,
                               seed: int = 0, min_checkpoints: int = 5) -> CheckpointNoiseTurnTest:
    """Does the trajectory stay bowed away from its chord, for `hold` consecutive checkpoints, further than a straight
    path with independent checkpoint-to-checkpoint noise does? A studentized parametric bootstrap for training noise.

    Between checkpoints a network without an EMA of its weights moves by its optimizer's noise, and every image read
    at a checkpoint shares that move, so pooling images or noise streams (`stream_turn_test`) cannot remove it. The
    statistic is the sustained bow (`sustained_bow`) over the path's noise scale (`checkpoint_noise`, summed over
    concepts in quadrature): a swing at a single checkpoint — heavy-tailed, what a network without an EMA shows —
    raises the scale but not the sustained bow. The null is the straight path (`straight_path`) plus independent
    Gaussian noise per checkpoint and concept at the scale the path's second differences imply, its statistic
    studentized by that noise's own scale (the straight path's progress is left out of it, so a path speeding up or
    slowing down along its chord, which raises the observed scale, makes the test conservative, as does a turn's
    own corner). Not clipped to [0, 1]. Noise that persists over `hold` or more checkpoints (a slow drift) is outside
    this null and counts as signal. p = (1 + #{null ≥ observed}) / (draws + 1); simulated straight paths pass at
    0.7–5.7% (Gaussian noise) and 4.3–9.7% (Student-t, 2 degrees of freedom) against 5%, one-checkpoint swings
    ≤ 0.3%, at 8 and 19 checkpoints (tests/unit, docs/findings-suite.md). NaN with fewer than max(`min_checkpoints`,
    `hold` + 2) checkpoints or a path that ends where it started."""
    steps = np.asarray(steps, dtype=float)
    points = _as_path(points)
    if steps.shape != (points.shape[0],):
        raise ValueError(f"steps must match the {points.shape[0]} checkpoints, got shape {steps.shape}")
    if hold < 1:
        raise ValueError(f"hold must be ≥ 1, got {hold}")
    if draws < 1:
        raise ValueError(f"draws must be ≥ 1, got {draws}")
    points = points[np.argsort(steps)]
    n = points.shape[0]
    path = straight_path(points) if n >= max(min_checkpoints, hold + 2, 3) else None
    if path is None:
        return CheckpointNoiseTurnTest(math.nan, math.nan, math.nan, 0, (), n)
    sigma = checkpoint_noise(points)
    noise = np.random.default_rng(seed).standard_normal((draws, *path.shape)) * sigma
    null = np.array([sustained_bow(path + z, hold) / _noise_scale(z) for z in noise])
    scale = _noise_scale(points)
    bow = sustained_bow(points, hold)
    return CheckpointNoiseTurnTest(bow, float(np.quantile(null, 0.95)) * scale,
                                   (1 + int((null >= bow / scale).sum())) / (draws + 1), draws,
                                   tuple(float(x) for x in sigma), n)


def semivariogram(points: np.ndarray, max_lag: int) -> np.ndarray:
    """γ(h) for h = 1 … `max_lag` checkpoints: half the mean squared change of the path over h checkpoints, summed
    over concepts (½ mean_i ‖x[i+h] − x[i]‖²). On a stretch where the signal is flat (a converged tail) it measures
    the network's checkpoint noise directly: independent noise of variance σ² per concept gives γ(h) = σ² · concepts
    at every lag; noise that persists (e.g. AR(1), γ(h) ∝ 1 − φʰ) rises over as many lags as it lasts."""
    points = _as_path(points)
    if max_lag < 1 or max_lag >= points.shape[0]:
        raise ValueError(f"max_lag must be in [1, {points.shape[0] - 1}] for {points.shape[0]} checkpoints, "
                         f"got {max_lag}")
    return np.array([0.5 * float((((points[h:] - points[:-h]) ** 2).sum(axis=1)).mean())
                     for h in range(1, max_lag + 1)])


def noise_persistence(points: np.ndarray, max_lag: int, share: float = 0.9) -> int:
    """How many checkpoints the path's noise lasts: the smallest lag at which its semivariogram reaches `share` of
    its plateau (the mean of γ over the largest third of the lags, at least one). 1 for independent noise; for AR(1)
    noise of coefficient φ about ln(1 − share) / ln φ. Meant for a stretch whose signal is flat (any trend raises γ
    at long lags, and so the lag found)."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    gamma = semivariogram(points, max_lag)
    plateau = float(gamma[-max(1, max_lag // 3):].mean())
    if plateau <= 0:
        return 1
    return int(np.argmax(gamma >= share * plateau)) + 1
