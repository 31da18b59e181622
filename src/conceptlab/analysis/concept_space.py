"""Concept-space evaluation: where each class prompt's generations sit in concept space, and when concepts are learned.

Per checkpoint, `evaluate_generations` reads a batch of generated images per
class with the concept probe and returns a tidy table, one row per class ×
concept: the concept-space coordinate (mean probability of the concept's "1"
value over valid images), the accuracy (an image counts only if the probe sees
a valid object AND reads the target value) and the valid fraction.
`learning_times` turns the table over checkpoints into each concept's learning
time: the first checkpoint where the smoothed accuracy exceeds a threshold and
stays above it for `stay` checkpoints.
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


def learning_times(table: pd.DataFrame, threshold: float = 0.9, smoothing: int = 3, stay: int = 3) -> pd.DataFrame:
    """Learning time per (split, concept): accuracy averaged over the split's classes, smoothed over checkpoints."""
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
