"""Hidden-emergence analysis: joint scores, emergence steps, capability gap, sudden turn, memorization, seed spread.

Pure functions on numpy arrays and pandas tables (no I/O), following Park et
al.'s concept-space paper (findings 2 and 3):

- Joint score of a class: the mean over generated images of the product of the
  per-concept probabilities of the class's target values, an invalid image
  counting 0. `joint_score` takes per-image inputs and is exact;
  `read_as(table, prompt_class, read_class)` works on the tidy evaluation table
  of `analysis.concept_space` (columns step, class, concept, target, p_one,
  valid_fraction, …) and approximates it as valid_fraction · Π_k P(concept k =
  target_k), with P from p_one (mean over valid images), i.e. it assumes the
  concepts are read independently. `read_as(t, c, c)` is the class's own score;
  `read_as(t, held_out, train_class)` how much the held-out prompt's generations
  look like a training class (memorization).
- `emergence_step`: first checkpoint where the score is ≥ threshold (0.5) and
  stays there for `stay` checkpoints (None: to the last one); with `n` samples
  per checkpoint the Wilson lower bound must cross instead of the point value.
- `capability_gap`: naive emergence step minus the earliest other intervention's.
- `sudden_turn`: the checkpoint where a concept-space trajectory changes
  direction most (angle between successive displacements; displacements under
  0.01 or under a tenth of the longest one skipped).
- `memorization_phase`: the first contiguous checkpoints at which the held-out
  prompt reads as a training class (nearest ones by default).
- `across_seeds`: mean, std and number of seeds in which a quantity occurred.

Tables of curves have columns `step`, `score` (and `n` for confidence bounds)
plus any grouping columns such as `seed` and `intervention`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from conceptlab.analysis.concept_space import first_sustained_crossing


def joint_score(p_target: np.ndarray, valid: np.ndarray) -> float:
    """Mean over images of Π_k p_target[i, k] (probability of each concept's target value); invalid images count 0."""
    p_target, valid = np.asarray(p_target, dtype=float), np.asarray(valid, dtype=bool)
    if p_target.ndim != 2 or p_target.shape[0] == 0:
        raise ValueError(f"p_target must be [images, concepts] with at least one image, got shape {p_target.shape}")
    if valid.shape != (p_target.shape[0],):
        raise ValueError(f"valid must have one entry per image ({p_target.shape[0]}), got shape {valid.shape}")
    return float(np.where(valid, np.prod(np.nan_to_num(p_target), axis=1), 0.0).mean())


def read_as(table: pd.DataFrame, prompt_class: str, read_class: str) -> pd.Series:
    """Per step: valid_fraction · Π_k P(concept k = read_class's value) for `prompt_class`'s generations."""
    for code in (prompt_class, read_class):
        if code not in set(table["class"]):
            raise ValueError(f"class {code!r} is not in the table; classes: {sorted(set(table['class']))}")
    targets = table[table["class"] == read_class].groupby("concept")["target"].first()
    rows = table[table["class"] == prompt_class]
    p_one = rows["p_one"].fillna(0.0).to_numpy()
    p = np.where(rows["concept"].map(targets).to_numpy() == 1, p_one, 1.0 - p_one)
    p = np.where(rows["valid_fraction"].to_numpy() > 0, p, 0.0)
    per_step = pd.DataFrame({"step": rows["step"].to_numpy(), "p": p, "valid": rows["valid_fraction"].to_numpy()})
    grouped = per_step.groupby("step")
    return (grouped["p"].prod() * grouped["valid"].first()).rename("score")


def wilson_interval(p: np.ndarray | float, n: np.ndarray | int, z: float = 1.96) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (lower, upper) of a proportion p observed on n samples."""
    p, n = np.asarray(p, dtype=float), np.asarray(n, dtype=float)
    if np.any(n <= 0):
        raise ValueError("wilson_interval needs n ≥ 1 samples")
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def emergence_step(
    steps: Sequence[float],
    scores: Sequence[float],
    threshold: float = 0.5,
    stay: int | None = 3,
    n: Sequence[int] | int | None = None,
    z: float = 1.96,
) -> float:
    """First step where the score (or its Wilson lower bound given n) is ≥ threshold and stays; NaN if never."""
    steps, scores = np.asarray(steps, dtype=float), np.asarray(scores, dtype=float)
    if steps.size == 0:
        raise ValueError("emergence_step needs at least one checkpoint")
    if steps.shape != scores.shape:
        raise ValueError(f"steps and scores differ in shape: {steps.shape} vs {scores.shape}")
    order = np.argsort(steps)
    steps, scores = steps[order], np.nan_to_num(scores[order])
    if n is not None:
        scores = wilson_interval(scores, np.broadcast_to(np.asarray(n), scores.shape)[order], z)[0]
    if stay is None:
        below = np.flatnonzero(scores < threshold)
        idx = None if below.size and below[-1] == len(scores) - 1 else (below[-1] + 1 if below.size else 0)
    elif stay < 1:
        raise ValueError(f"stay must be ≥ 1 checkpoints or None, got {stay}")
    else:
        idx = first_sustained_crossing(scores, threshold, min(stay, len(scores)))
    return float(steps[idx]) if idx is not None else math.nan


def emergence_steps(
    curves: pd.DataFrame,
    by: Sequence[str] = ("seed", "intervention"),
    threshold: float = 0.5,
    stay: int | None = 3,
    use_n: bool = False,
    z: float = 1.96,
) -> pd.DataFrame:
    """`emergence_step` of each curve (grouped by `by`) of a table with step, score (and n if use_n)."""
    by = [c for c in by if c in curves.columns]
    if curves.empty:
        raise ValueError("no curves: the table is empty")
    rows = []
    for key, group in curves.groupby(by, sort=True) if by else [((), curves)]:
        n = group["n"].to_numpy() if use_n else None
        step = emergence_step(group["step"], group["score"], threshold, stay, n, z)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "emergence_step": step})
    return pd.DataFrame(rows)


def capability_gap(emergence: Mapping[str, float], naive: str = "naive") -> float:
    """Naive prompting's emergence step minus the earliest other intervention's (NaN if either never emerges)."""
    if naive not in emergence:
        raise ValueError(f"no {naive!r} intervention among {sorted(emergence)}")
    others = [v for k, v in emergence.items() if k != naive and not math.isnan(v)]
    if not others:
        return math.nan
    return float(emergence[naive]) - min(others)


def capability_gaps(emergence: pd.DataFrame, naive: str = "naive", by: Sequence[str] = ("seed",)) -> pd.DataFrame:
    """`capability_gap` per group of an `emergence_steps` table (columns by…, intervention, emergence_step)."""
    by = [c for c in by if c in emergence.columns]
    rows = []
    for key, group in emergence.groupby(by, sort=True) if by else [((), emergence)]:
        steps = dict(zip(group["intervention"], group["emergence_step"].astype(float)))
        labels = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        rows.append({**labels, "capability_gap": capability_gap(steps, naive)})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Turn:
    """The checkpoint of a trajectory's largest change of direction and that angle in degrees (NaN if undefined)."""

    step: float
    angle: float


def sudden_turn(
    steps: Sequence[float], points: np.ndarray, min_norm: float = 0.01, min_fraction: float = 0.1
) -> Turn:
    """Checkpoint joining the two successive displacements with the largest angle.

    Displacements shorter than `min_norm`, or than `min_fraction` of the trajectory's longest displacement, are
    skipped: on a plateau the readings jitter by sampling noise, and a 0.01 wobble there reverses direction
    (180°) as sharply as the real turn does. Relative to the longest move, the bar adapts to how far the
    trajectory travels."""
    steps, points = np.asarray(steps, dtype=float), np.asarray(points, dtype=float)
    if points.ndim != 2 or points.shape[0] != steps.shape[0]:
        raise ValueError(f"points must be [checkpoints, concepts] matching {steps.shape[0]} steps, got {points.shape}")
    if steps.size < 3:
        raise ValueError(f"a turn needs at least 3 checkpoints, got {steps.size}")
    order = np.argsort(steps)
    steps, points = steps[order], points[order]
    moves = np.diff(points, axis=0)
    norms = np.linalg.norm(moves, axis=1)
    kept = np.flatnonzero(norms >= max(min_norm, min_fraction * float(norms.max(initial=0.0))))
    best = Turn(math.nan, math.nan)
    for a, b in zip(kept[:-1], kept[1:]):
        cos = float(moves[a] @ moves[b] / (norms[a] * norms[b]))
        angle = math.degrees(math.acos(max(-1.0, min(1.0, cos))))
        if math.isnan(best.angle) or angle > best.angle:
            best = Turn(float(steps[b]), angle)
    return best


@dataclass(frozen=True)
class Phase:
    """A contiguous run of checkpoints [start, end] and the training class the held-out prompt read as."""

    start: float
    end: float
    read_class: str


def memorization_phase(
    table: pd.DataFrame, held_out: str, threshold: float = 0.5, candidates: Sequence[str] | None = None
) -> Phase | None:
    """First contiguous checkpoints where the held-out prompt reads (score ≥ threshold) as one training class.

    `candidates` defaults to the training classes nearest the held-out one
    (fewest differing concepts, split == "train"). None if it never happens.
    """
    if candidates is None:
        train = sorted(set(table.loc[table["split"] == "train", "class"]))
        if not train:
            raise ValueError("no training classes in the table (split == 'train')")
        dist = {c: sum(a != b for a, b in zip(c, held_out)) for c in train}
        candidates = [c for c in train if dist[c] == min(dist.values())]
    reads = pd.DataFrame({c: read_as(table, held_out, c) for c in candidates}).sort_index()
    best = reads.idxmax(axis=1)
    hit = reads.max(axis=1).to_numpy() >= threshold
    if not hit.any():
        return None
    start = int(np.argmax(hit))
    end = start
    while end + 1 < len(hit) and hit[end + 1] and best.iloc[end + 1] == best.iloc[start]:
        end += 1
    return Phase(float(reads.index[start]), float(reads.index[end]), str(best.iloc[start]))


def across_seeds(values: pd.DataFrame, value: str, by: Sequence[str] = ()) -> pd.DataFrame:
    """Mean, std (ddof=1; NaN for one seed) and count of seeds where `value` occurred (not NaN), per group."""
    if "seed" not in values.columns or value not in values.columns:
        raise ValueError(f"values needs columns 'seed' and {value!r}, got {list(values.columns)}")
    groups = values.groupby(list(by), sort=True)[value] if by else values.assign(_all=0).groupby("_all")[value]
    out = groups.agg(mean="mean", std="std", occurred="count", seeds="size").reset_index()
    return out.drop(columns="_all", errors="ignore")


def capability_before_behavior(emergence: pd.DataFrame, naive: str = "naive") -> pd.DataFrame:
    """Per target (and seed): does some intervention emerge strictly before naive prompting?

    `emergence` has columns seed, target (optional), run (optional), intervention, emergence_step (NaN: never).
    Returns one row per seed × target (per run × target where a `run` column names runs: several runs may share a
    seed, and one run's steps must not be read against another's) with naive's step, the earliest other step and
    which intervention, and `capability_first`: True / False where naive emerged, NaN where it never
    did (the claim "capability precedes behavior in every seed where behavior appears" is then
    `capability_first.dropna().all()`).
    """
    need = {"seed", "intervention", "emergence_step"}
    if not need <= set(emergence.columns):
        raise ValueError(f"emergence needs columns {sorted(need)}, got {list(emergence.columns)}")
    by = [c for c in ("target", "seed", "run") if c in emergence.columns]
    rows = []
    for key, group in emergence.groupby(by, sort=True):
        steps = dict(zip(group["intervention"], group["emergence_step"].astype(float)))
        if naive not in steps:
            raise ValueError(f"no {naive!r} intervention for {dict(zip(by, key))}")
        others = {k: v for k, v in steps.items() if k != naive and not math.isnan(v)}
        first = min(others, key=others.get) if others else None
        naive_step = steps[naive]
        verdict = math.nan if math.isnan(naive_step) else float(bool(others) and others[first] < naive_step)
        rows.append({**dict(zip(by, key)), "naive_step": naive_step,
                     "earliest_other_step": others[first] if first else math.nan,
                     "earliest_other": first, "capability_first": verdict})
    return pd.DataFrame(rows)
