"""Commitment time: the generation time τ at which an attribute is decided under a measure, and measures' agreement.

A measure's curve v(τ) on a τ grid (0 = noise, 1 = data) goes from a start level to an end level — mutual information
rises from 0 to its final value, linear-probe accuracy from chance to its final accuracy, forking entropy falls from
the prior entropy to 0. The **commitment time** is the first τ at which the curve has covered `fraction` (default ½)
of the way from start to end,

    progress(τ) = (v(τ) − start) / (end − start) ≥ fraction,

linearly interpolated between grid points. `start` defaults to the curve's first value (give chance level for probe
accuracy), `end` to its last. A curve that never moves (end = start) or never gets there has no commitment time (NaN).

Agreement between measures is the Spearman rank correlation of the attributes' commitment times under each pair of
measures (scipy); with two attributes it is ±1 (same or reversed order), NaN when a measure ties or lacks a time.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch
from scipy.stats import norm, spearmanr
from torch import Tensor


def _check_curve(tau: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    tau, values = torch.as_tensor(tau, dtype=torch.float64), torch.as_tensor(values, dtype=torch.float64)
    if tau.dim() != 1 or tau.shape != values.shape or tau.numel() < 2:
        raise ValueError(f"need tau and values of the same length ≥ 2, got {tuple(tau.shape)}, {tuple(values.shape)}")
    if not bool(((tau >= 0) & (tau <= 1)).all()):
        raise ValueError(f"tau must lie in [0, 1], got {tau.tolist()}")
    if not bool((tau.diff() > 0).all()):
        raise ValueError(f"tau must be strictly increasing, got {tau.tolist()}")
    if not bool(torch.isfinite(values).all()):
        raise ValueError("curve values must be finite")
    return tau, values


def commitment_time(
    tau: Tensor | Sequence[float],
    values: Tensor | Sequence[float],
    fraction: float = 0.5,
    start: float | None = None,
    end: float | None = None,
) -> float:
    """The first τ at which the curve has gone `fraction` of the way from `start` to `end` (interpolated); NaN if
    never or if the curve does not move."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction}")
    tau, values = _check_curve(torch.as_tensor(tau), torch.as_tensor(values))
    v0 = float(values[0]) if start is None else float(start)
    v1 = float(values[-1]) if end is None else float(end)
    if v1 == v0:
        return math.nan
    progress = (values - v0) / (v1 - v0)
    above = (progress >= fraction).nonzero()
    if above.numel() == 0:
        return math.nan
    i = int(above[0])
    if i == 0:
        return float(tau[0])
    p_lo, p_hi = float(progress[i - 1]), float(progress[i])
    w = (fraction - p_lo) / (p_hi - p_lo)
    return float(tau[i - 1] + w * (tau[i] - tau[i - 1]))


def commitment_table(
    curves: Mapping[str, Mapping[str, tuple[Tensor, Tensor]]],
    fraction: float = 0.5,
    starts: Mapping[str, Mapping[str, float]] | None = None,
    ends: Mapping[str, Mapping[str, float]] | None = None,
) -> pd.DataFrame:
    """Commitment times: rows = attributes, columns = measures, from curves {measure: {attribute: (tau, values)}};
    `starts` / `ends` {measure: {attribute: level}} override the first / last value (e.g. chance for probe
    accuracy, H(V) = ln K for mutual information, whose estimate can overshoot at small σ)."""
    starts, ends = starts or {}, ends or {}
    table: dict[str, dict[str, float]] = {}
    for measure, per_attribute in curves.items():
        table[measure] = {
            attribute: commitment_time(
                tau, values, fraction, starts.get(measure, {}).get(attribute), ends.get(measure, {}).get(attribute)
            )
            for attribute, (tau, values) in per_attribute.items()
        }
    frame = pd.DataFrame(table)
    frame.index.name = "attribute"
    return frame


def commitment_order(table: pd.DataFrame, measure: str) -> list[str]:
    """Attributes by commitment time under `measure`, earliest first (no time: last)."""
    if measure not in table.columns:
        raise ValueError(f"unknown measure {measure!r}; the table has {list(table.columns)}")
    return list(table[measure].sort_values(na_position="last").index)


def measure_agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Spearman rank correlation of commitment times between every pair of measures (columns of `table`);
    rows: measure_a, measure_b, spearman, attributes (how many had a time under both)."""
    if table.shape[1] < 2:
        raise ValueError(f"need at least two measures to compare, got {list(table.columns)}")
    rows = []
    for a, b in combinations(table.columns, 2):
        both = table[[a, b]].dropna()
        rho = math.nan
        if len(both) >= 2 and both[a].nunique() > 1 and both[b].nunique() > 1:
            rho = float(spearmanr(both[a], both[b]).statistic)
        rows.append({"measure_a": a, "measure_b": b, "spearman": rho, "attributes": len(both)})
    return pd.DataFrame(rows)


def departure(trained: Sequence[float], control: Sequence[float], margin: float,
              trained_stderr: Sequence[float] | None = None, control_stderr: Sequence[float] | None = None,
              alpha: float = 0.05) -> dict:
    """Whether a trained curve departs from a control's on the same τ grid: at some τ they differ by more than
    `margin` × the trained curve's range (|last − first|) *and* by more than their measurement noise.

    Noise: a two-sided z test at each τ, |t − c| > z·√(se_t² + se_c²), Bonferroni-corrected over the grid's n
    points (z = Φ⁻¹(1 − α/2n)), so an identical-in-expectation control passes at some τ with probability ≤ α.
    No stderr given (None) counts as 0 (the margin alone); a NaN stderr at a τ means that τ cannot pass.
    Returns {"departs", "departs_margin" (the margin alone, the test before 2026-12-04), "gap" (the largest
    |t − c| / range), "z" (the largest |t − c| / se among the τ beyond the margin; inf where se = 0, None where no τ
    is), "z_needed"}.
    """
    def as_curve(values) -> Tensor:  # a copy: pandas hands out read-only arrays
        if isinstance(values, Tensor):
            return values.detach().to(torch.float64).clone()
        return torch.tensor(np.array(values, dtype=np.float64))

    t, c = as_curve(trained), as_curve(control)
    if t.dim() != 1 or t.shape != c.shape or t.numel() < 2:
        raise ValueError(f"need two curves of the same length ≥ 2, got {tuple(t.shape)}, {tuple(c.shape)}")
    if not 0 < alpha < 1 or margin < 0:
        raise ValueError(f"need 0 < alpha < 1 and margin ≥ 0, got alpha={alpha}, margin={margin}")

    def se(values) -> Tensor:  # NaN stays NaN: a τ whose noise is unknown cannot pass the noise test
        s = torch.zeros_like(t) if values is None else as_curve(values)
        if s.shape != t.shape:
            raise ValueError(f"stderr of shape {tuple(s.shape)} for curves of {tuple(t.shape)}")
        return s

    noise = (se(trained_stderr) ** 2 + se(control_stderr) ** 2).sqrt()
    scale = abs(float(t[-1] - t[0])) or 1e-12
    diff = (t - c).abs()
    beyond_margin = diff / scale > margin
    z_needed = float(norm.ppf(1 - alpha / (2 * t.numel())))
    z = torch.where(noise > 0, diff / noise.clamp_min(1e-300), torch.where(diff > 0, math.inf, 0.0))
    z_beyond = z[beyond_margin]
    return {"departs": bool((beyond_margin & (z > z_needed)).any()), "departs_margin": bool(beyond_margin.any()),
            "gap": float(diff.max()) / scale, "z": float(z_beyond.max()) if z_beyond.numel() else None,
            "z_needed": z_needed}
