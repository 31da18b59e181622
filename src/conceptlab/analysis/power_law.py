"""Power laws y = c·x^b fitted by least squares in log-log space (the scaling fits of the data-efficiency and
percolation analyses)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PowerLaw:
    """y ≈ prefactor · x^exponent; `r2` is the coefficient of determination in log-log space, `points` the fit's n."""

    exponent: float
    prefactor: float
    r2: float
    points: int


def fit_power_law(x, y) -> PowerLaw:
    """Least-squares line through (log x, log y); ValueError unless there are ≥ 2 distinct positive x and every
    value is positive and finite. R² is 1 when y does not vary."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D of one length, got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all() and (x > 0).all() and (y > 0).all()):
        raise ValueError("a power-law fit needs positive, finite x and y")
    if len(np.unique(x)) < 2:
        raise ValueError("a power-law fit needs at least 2 distinct x values")
    lx, ly = np.log(x), np.log(y)
    b, a = np.polyfit(lx, ly, 1)
    resid = ly - (a + b * lx)
    ss = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss if ss > 0 else 1.0
    return PowerLaw(float(b), float(math.exp(a)), r2, len(x))
