"""Concept-space evaluation: where each class prompt's generations sit in concept space, and when concepts are learned.

Per checkpoint, `evaluate_generations` reads a batch of generated images per
class with the concept probe and returns a tidy table, one row per class ×
concept: the concept-space coordinate (mean probability of the concept's "1"
value over valid images), the accuracy (an image counts only if the probe sees
a valid object AND reads the target value) and the valid fraction.
`learning_times` turns the table over checkpoints into each concept's learning
time: the first checkpoint where the smoothed accuracy exceeds a threshold and
stays above it for `stay` checkpoints. That is our *trailing* variant (a trailing
moving average; the run's first checkpoint above). `authors_learning_time` is the
authors' released definition (their `analysis_concept_space.ipynb`): accuracy
smoothed over checkpoints by a centred Gaussian (σ = 1.5 checkpoints), then the
centre of the first run of 3 checkpoints above 0.9 (a binary erosion), one
checkpoint later than the run's start.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from torch import Tensor

from conceptlab.probes.concept_classifier import read_concepts

TABLE_COLUMNS = ["step", "class", "split", "concept", "target", "p_one", "accuracy", "valid_fraction", "n"]


def evaluate_generations(
    images: Tensor, class_codes: list[str], splits: dict[str, str], concepts: list[str], probe, step: int
) -> pd.DataFrame:
    """Rows (class × concept) for `images` = n generations per class, in `class_codes` order."""
    n = images.shape[0] // len(class_codes)
    if n * len(class_codes) != images.shape[0]:
        raise ValueError("images must hold the same number of generations for every class")
    reading = read_concepts(probe, images)
    rows = []
    for k, code in enumerate(class_codes):
        part = slice(k * n, (k + 1) * n)
        valid = reading.valid[part]
        for i, concept in enumerate(concepts):
            target = int(code[i])
            correct = valid & (reading.predicted[concept][part] == target)
            p_one = reading.p_one[concept][part][valid]
            rows.append(
                {
                    "step": step,
                    "class": code,
                    "split": splits[code],
                    "concept": concept,
                    "target": target,
                    "p_one": float(p_one.mean()) if p_one.numel() else math.nan,
                    "accuracy": float(correct.float().mean()),
                    "valid_fraction": float(valid.float().mean()),
                    "n": n,
                }
            )
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def first_sustained_crossing(values: np.ndarray, threshold: float, stay: int) -> int | None:
    """Index of the first point from which `stay` consecutive values are ≥ threshold (None if never)."""
    above = np.asarray(values) >= threshold
    for i in range(len(above) - stay + 1):
        if above[i : i + stay].all():
            return i
    return None


def smooth(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (the first points average over what exists)."""
    values = np.asarray(values, dtype=float)
    if window <= 1:
        return values
    cumsum = np.cumsum(np.insert(values, 0, 0.0))
    out = np.empty_like(values)
    for i in range(len(values)):
        lo = max(0, i + 1 - window)
        out[i] = (cumsum[i + 1] - cumsum[lo]) / (i + 1 - lo)
    return out


AUTHORS_SIGMA = 1.5  # checkpoints; the authors' learning-time smoothing
AUTHORS_THRESHOLD = 0.9
AUTHORS_CONSISTENT = 3


def authors_learning_index(accuracy: np.ndarray, threshold: float = AUTHORS_THRESHOLD, sigma: float = AUTHORS_SIGMA,
                           consistent: int = AUTHORS_CONSISTENT) -> int | None:
    """The authors' learning time as a checkpoint index (None if never): `accuracy` (one value per checkpoint, in
    order) smoothed by a centred Gaussian of `sigma` checkpoints (edges reflected, truncated at 4σ: scipy's
    defaults, as they used it), thresholded strictly, then eroded by a window of `consistent` (odd) checkpoints with
    nothing above the threshold outside the run: the first index whose whole centred window is above, i.e. the
    centre of the first run of `consistent` checkpoints above the threshold."""
    if consistent % 2 != 1 or consistent < 1:
        raise ValueError(f"consistent must be an odd number ≥ 1, got {consistent}")
    values = np.asarray(accuracy, dtype=float)
    if values.ndim != 1:
        raise ValueError("accuracy must be one value per checkpoint")
    if values.size == 0 or np.isnan(values).any():
        return None
    from scipy.ndimage import binary_erosion, gaussian_filter1d  # lazy: docs/benchmarks.md, "Command start-up"

    smoothed = gaussian_filter1d(values, sigma) if sigma > 0 else values
    good = binary_erosion(smoothed > threshold, structure=np.ones(consistent, dtype=bool), border_value=0)
    found = np.nonzero(good)[0]
    return int(found[0]) if found.size else None


def authors_learning_times(table: pd.DataFrame, threshold: float = AUTHORS_THRESHOLD, sigma: float = AUTHORS_SIGMA,
                           consistent: int = AUTHORS_CONSISTENT) -> pd.DataFrame:
    """Learning time per (split, concept) by the authors' definition (`authors_learning_index`) on the accuracy
    averaged over the split's classes; columns split, concept, learning_time (a step; NaN if never)."""
    rows = []
    for (split, concept), group in table.groupby(["split", "concept"], sort=True):
        curve = group.groupby("step")["accuracy"].mean().sort_index()
        idx = authors_learning_index(curve.to_numpy(), threshold, sigma, consistent)
        rows.append({"split": split, "concept": concept,
                     "learning_time": float(curve.index[idx]) if idx is not None else math.nan})
    return pd.DataFrame(rows, columns=["split", "concept", "learning_time"])


def learning_times(table: pd.DataFrame, threshold: float = 0.9, smoothing: int = 3, stay: int = 3) -> pd.DataFrame:
    """Learning time per (split, concept), our trailing variant: accuracy averaged over the split's classes,
    smoothed by a trailing mean of `smoothing` checkpoints, the first checkpoint of the first `stay` above
    `threshold` (≥)."""
    rows = []
    for (split, concept), group in table.groupby(["split", "concept"], sort=True):
        curve = group.groupby("step")["accuracy"].mean().sort_index()
        smoothed = smooth(curve.to_numpy(), smoothing)
        idx = first_sustained_crossing(smoothed, threshold, stay)
        rows.append(
            {
                "split": split,
                "concept": concept,
                "learning_time": float(curve.index[idx]) if idx is not None else math.nan,
                "final_accuracy": float(curve.iloc[-1]),
                "mean_accuracy": float(curve.mean()),
                "threshold": threshold,
            }
        )
    return pd.DataFrame(rows)


def trajectories(table: pd.DataFrame) -> pd.DataFrame:
    """Concept-space trajectory: one row per (class, step), one column per concept (its p_one)."""
    wide = table.groupby(["class", "split", "step", "concept"])["p_one"].mean().unstack("concept")
    return wide.reset_index().sort_values(["class", "step"])


def generation_prompts(class_prompts: Tensor, n_per_class: int) -> Tensor:
    """Stack `n_per_class` copies of each class prompt, class by class (the order `evaluate_generations` expects)."""
    return class_prompts.repeat_interleave(n_per_class, dim=0)
