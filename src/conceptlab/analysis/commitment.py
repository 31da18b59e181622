"""Commitment time: the generation time τ at which an attribute is decided under a measure, and measures' agreement.

A measure's curve v(τ) on a τ grid (0 = noise, 1 = data) goes from a start level to an end level — mutual information
rises from 0 to its final value, linear-probe accuracy from chance to its final accuracy, forking entropy falls from
the prior entropy to 0. The **commitment time** is the first τ at which the curve has covered `fraction` (default ½)
of the way from start to end,

    progress(τ) = (v(τ) − start) / (end − start) ≥ fraction,

linearly interpolated between grid points. `start` defaults to the curve's first value (give chance level for probe
accuracy), `end` to its last. A curve that never moves (end = start) or never gets there has no commitment time (NaN),
nor, given the measure's `direction` (+1 rising, −1 falling), one that ends on the wrong side of its start — a probe
that ends at or below chance, a forking entropy that does not fall — whose dips would otherwise read as progress.

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
    direction: int | None = None,
) -> float:
    """The first τ at which the curve has gone `fraction` of the way from `start` to `end` (interpolated); NaN if
    never, if the curve does not move, or if it moves against `direction` (+1: it must end above its start, −1:
    below; None: either way)."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction}")
    if direction not in (None, 1, -1):
        raise ValueError(f"direction must be +1, -1 or None, got {direction!r}")
    tau, values = _check_curve(torch.as_tensor(tau), torch.as_tensor(values))
    v0 = float(values[0]) if start is None else float(start)
    v1 = float(values[-1]) if end is None else float(end)
    if v1 == v0 or (direction is not None and (v1 - v0) * direction < 0):
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
    directions: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """Commitment times: rows = attributes, columns = measures, from curves {measure: {attribute: (tau, values)}};
    `starts` / `ends` {measure: {attribute: level}} override the first / last value (e.g. chance for probe
    accuracy, H(V) = ln K for mutual information, whose estimate can overshoot at small σ); `directions`
    {measure: ±1} the way each measure moves when an attribute is committed (`commitment_time`)."""
    starts, ends, directions = starts or {}, ends or {}, directions or {}
    table: dict[str, dict[str, float]] = {}
    for measure, per_attribute in curves.items():
        table[measure] = {
            attribute: commitment_time(
                tau, values, fraction, starts.get(measure, {}).get(attribute), ends.get(measure, {}).get(attribute),
                directions.get(measure),
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
    from scipy.stats import spearmanr  # lazy: docs/benchmarks.md, "Command start-up"

    rows = []
    for a, b in combinations(table.columns, 2):
        both = table[[a, b]].dropna()
        rho = math.nan
        if len(both) >= 2 and both[a].nunique() > 1 and both[b].nunique() > 1:
            rho = float(spearmanr(both[a], both[b]).statistic)
        rows.append({"measure_a": a, "measure_b": b, "spearman": rho, "attributes": len(both)})
    return pd.DataFrame(rows)


def paired_stderr(trained: Tensor, control: Tensor, sizes: Tensor | None = None, floor: float = 0.0) -> Tensor:
    """Standard error at each τ of the difference of two curves measured on the same units (the same draws, paths,
    roots or held-out clusters), from their per-unit totals `[T, G]` and the units' sizes `[G]` (None: 1 each).

    A curve's value at τ is Σ_g totals / Σ_g sizes; the difference's error is the cluster-robust one of a ratio mean,
    √(G/(G − 1) · Σ_g (d_g − n_g·D)²) / N with d_g the units' differences, n_g their sizes, N = Σ n_g and D = Σ d_g / N
    — for units of size 1 the standard error of the mean of paired differences, std(d)/√G. Correlated noise shared
    by the two curves cancels here, where √(se_t² + se_c²) counts it twice. `floor`: the least error returned (e.g.
    one row's worth, 1/N, for an accuracy, so a difference that every unit shows alike is not infinitely sure)."""
    t, c = torch.as_tensor(trained, dtype=torch.float64), torch.as_tensor(control, dtype=torch.float64)
    if t.dim() != 2 or t.shape != c.shape or t.shape[1] < 2:
        raise ValueError(f"need per-unit totals [T, G ≥ 2] of the same shape, got {tuple(t.shape)}, {tuple(c.shape)}")
    g = t.shape[1]
    n = torch.ones(g, dtype=torch.float64) if sizes is None else torch.as_tensor(sizes, dtype=torch.float64)
    if n.shape != (g,) or not bool((n > 0).all()):
        raise ValueError(f"sizes must be [{g}] and positive, got {tuple(n.shape)}")
    d = t - c
    total = float(n.sum())
    mean = d.sum(1, keepdim=True) / total
    se = (g / (g - 1) * ((d - n * mean) ** 2).sum(1)).sqrt() / total
    return se.clamp_min(floor)


def departure(trained: Sequence[float], control: Sequence[float], margin: float,
              trained_stderr: Sequence[float] | None = None, control_stderr: Sequence[float] | None = None,
              alpha: float = 0.05, difference_stderr: Sequence[float] | None = None, df: float | None = None) -> dict:
    """Whether a trained curve departs from a control's on the same τ grid: at some τ they differ by more than
    `margin` × the trained curve's range (|last − first|) *and* by more than their measurement noise.

    Noise: a two-sided z test at each τ, |t − c| > z·se, Bonferroni-corrected over the grid's n points
    (z = Φ⁻¹(1 − α/2n)), so an identical-in-expectation control passes at some τ with probability ≤ α. se is
    `difference_stderr` where given (the paired test: the error of the difference itself, `paired_stderr`), else
    √(se_t² + se_c²) (unpaired: right for independent measurements, too large where they share noise). With `df`
    (the degrees of freedom of an estimated se, G − 1 for G paired units) the critical value is Student's t's
    quantile, not the normal's: with 64 units and 21 τ the normal one rejects equal curves ~1.7× as often as α.
    No stderr given (None) counts as 0 (the margin alone); a NaN stderr at a τ means that τ cannot pass.
    Returns {"departs", "departs_margin" (the margin alone, the test before 2026-12-04), "gap" (the largest
    |t − c| / range), "z" (the largest |t − c| / se among the τ beyond the margin whose se is known; inf where se = 0,
    None where no τ is), "z_needed"}.
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

    noise = (se(difference_stderr) if difference_stderr is not None
             else (se(trained_stderr) ** 2 + se(control_stderr) ** 2).sqrt())
    scale = abs(float(t[-1] - t[0])) or 1e-12
    diff = (t - c).abs()
    beyond_margin = diff / scale > margin
    if df is not None and not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    level = 1 - alpha / (2 * t.numel())
    from scipy.stats import norm, t as student_t  # lazy: docs/benchmarks.md, "Command start-up"

    z_needed = float(norm.ppf(level) if df is None else student_t.ppf(level, df))
    z = torch.where(noise > 0, diff / noise.clamp_min(1e-300), torch.where(diff > 0, math.inf, 0.0))
    z = torch.where(noise.isnan(), math.nan, z)  # unknown noise: that τ cannot pass (NaN > z_needed is False)
    z_beyond = z[beyond_margin & ~z.isnan()]
    return {"departs": bool((beyond_margin & (z > z_needed)).any()), "departs_margin": bool(beyond_margin.any()),
            "gap": float(diff.max()) / scale, "z": float(z_beyond.max()) if z_beyond.numel() else None,
            "z_needed": z_needed}
