"""Phenomenological model of concept-space trajectories (finding 6): a gated gradient flow, simulated and fitted.

The state c = (c1, c2) (the concept-space point of the held-out class, e.g.
P(blue), P(small)) starts at c(t_start) = (0.5, 0.5) and follows gradient flow
on a quadratic energy whose two terms pull each coordinate toward 1 (the value
the concept signal supports) and toward a gate α(t):

    α(t)   = sigmoid(k (t − t0))
    dc1/dt = η [ (1/(2a)) (1 − c1) + (a/2) (α(t) − c1) ]
    dc2/dt = η [ (a/2) (1 − c2) + (1/(2a)) (α(t) − c2) ]

with a > 0 the ratio of the two concept signals, k > 0 the gate's sharpness,
t0 its opening time and η > 0 the learning rate, all in the units of `steps`.
Before the gate opens (α ≈ 0) c heads toward (1/(1+a²), a²/(1+a²)), a training
class when a ≠ 1 (memorization); once it opens both coordinates go to 1 (the
turn toward the held-out class).

`simulate` integrates it with scipy's `solve_ivp`; `fit_gated_flow` fits
(a, k, t0, η) to a measured trajectory with `least_squares` from a few starts
(in log a, log k, log η and t0 scaled by the step range) and reports RMSE and R².
`fit_independent_sigmoids` is its parameter-matched null: a logistic time course per coordinate (k_i, t_i; four
parameters for two concepts), no coupling and no gate, fitted and scored the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np


# the fit's search box, in the units it searches (span = the last step − t_start): a; k·span; (t0 − t_start)/span;
# η·span (a, k and η searched in log)
FIT_BOUNDS = {"a": (0.02, 50.0), "k": (0.1, 1e3), "t0": (-0.5, 1.5), "eta": (0.01, 1e3)}


@dataclass(frozen=True)
class GatedFlowParams:
    """a: concept-signal ratio; k: gate sharpness; t0: gate opening time; eta: learning rate."""

    a: float
    k: float
    t0: float
    eta: float


@dataclass(frozen=True)
class GatedFlowFit:
    """Best-fitting parameters, the fitted trajectory at the measured steps, RMSE and R² over both coordinates."""

    params: GatedFlowParams
    fitted: np.ndarray
    rmse: float
    r2: float


def _check_steps(steps: np.ndarray, t_start: float) -> None:
    if steps.ndim != 1 or steps.size == 0:
        raise ValueError(f"steps must be a non-empty 1-d array, got shape {steps.shape}")
    if np.any(np.diff(steps) <= 0) or steps[0] < t_start:
        raise ValueError(f"steps must be strictly increasing and ≥ t_start={t_start}")


def simulate(params: GatedFlowParams, steps: np.ndarray, t_start: float = 0.0) -> np.ndarray:
    """c(t) at each of `steps` ([len(steps), 2]) from c(t_start) = (0.5, 0.5)."""
    steps = np.asarray(steps, dtype=float)
    _check_steps(steps, t_start)
    a, k, t0, eta = params.a, params.k, params.t0, params.eta
    if min(a, k, eta) <= 0:
        raise ValueError(f"a, k and eta must be positive, got {params}")
    w_small, w_large = 1.0 / (2.0 * a), a / 2.0
    from scipy.special import expit  # lazy: docs/benchmarks.md, "Command start-up"

    def rhs(t: float, c: np.ndarray) -> np.ndarray:
        gate = expit(k * (t - t0))
        return eta * np.array(
            [w_small * (1.0 - c[0]) + w_large * (gate - c[0]), w_large * (1.0 - c[1]) + w_small * (gate - c[1])]
        )

    if steps[-1] == t_start:
        return np.full((1, 2), 0.5)
    from scipy.integrate import solve_ivp  # lazy: docs/benchmarks.md, "Command start-up"

    sol = solve_ivp(
        rhs, (t_start, steps[-1]), [0.5, 0.5], t_eval=steps, rtol=1e-6, atol=1e-8, max_step=max(0.5 / k, 1e-12)
    )
    if not sol.success:
        raise RuntimeError(f"ODE integration failed: {sol.message}")
    return sol.y.T


def fit_gated_flow(
    steps: np.ndarray,
    c: np.ndarray,
    t_start: float = 0.0,
    starts: list[GatedFlowParams] | None = None,
) -> GatedFlowFit:
    """Least-squares fit of (a, k, t0, η) to a measured trajectory c ([len(steps), 2]); best of several starts."""
    steps, c = np.asarray(steps, dtype=float), np.asarray(c, dtype=float)
    _check_steps(steps, t_start)
    if c.shape != (steps.size, 2):
        raise ValueError(f"c must be [len(steps), 2] = {(steps.size, 2)}, got {c.shape}")
    if steps.size < 5:
        raise ValueError(f"fitting 4 parameters needs at least 5 checkpoints, got {steps.size}")
    span = steps[-1] - t_start

    def unpack(x: np.ndarray) -> GatedFlowParams:
        a, k, t0, eta = np.exp(x[0]), np.exp(x[1]) / span, t_start + x[2] * span, np.exp(x[3]) / span
        return GatedFlowParams(a=float(a), k=float(k), t0=float(t0), eta=float(eta))

    def pack(p: GatedFlowParams) -> np.ndarray:
        return np.array([np.log(p.a), np.log(p.k * span), (p.t0 - t_start) / span, np.log(p.eta * span)])

    def residual(x: np.ndarray) -> np.ndarray:
        return (simulate(unpack(x), steps, t_start) - c).ravel()

    if starts is None:
        starts = [
            GatedFlowParams(a, 10.0 / span, t_start + f * span, 10.0 / span)
            for a, f in product((0.5, 2.0), (0.3, 0.6))
        ]
    lower = np.array([np.log(FIT_BOUNDS["a"][0]), np.log(FIT_BOUNDS["k"][0]), FIT_BOUNDS["t0"][0],
                      np.log(FIT_BOUNDS["eta"][0])])
    upper = np.array([np.log(FIT_BOUNDS["a"][1]), np.log(FIT_BOUNDS["k"][1]), FIT_BOUNDS["t0"][1],
                      np.log(FIT_BOUNDS["eta"][1])])
    best = None
    from scipy.optimize import least_squares  # lazy: docs/benchmarks.md, "Command start-up"

    for start in starts:
        x0 = np.clip(pack(start), lower + 1e-9, upper - 1e-9)
        result = least_squares(residual, x0, bounds=(lower, upper), x_scale="jac")
        if best is None or result.cost < best.cost:
            best = result
    params = unpack(best.x)
    fitted = simulate(params, steps, t_start)
    ss_res = float(((fitted - c) ** 2).sum())
    ss_tot = float(((c - c.mean(axis=0)) ** 2).sum())
    return GatedFlowFit(
        params=params,
        fitted=fitted,
        rmse=float(np.sqrt(ss_res / c.size)),
        r2=1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"),
    )


def params_at_bounds(params: GatedFlowParams, span: float, t_start: float = 0.0, tolerance: float = 1e-3) -> list[str]:
    """The parameters a fit left on the edge of its search box (`FIT_BOUNDS`; `span` = the fitted steps' last −
    `t_start`), within `tolerance` of the box's width in the searched units (log for a, k, η): such a fit is the
    best the box allowed, so its R² says how close the curve came, not that the gate model's parameters were found.
    The tolerance covers the rounding of a stored fit (a to 4 decimals, t0 to 0.1 step)."""
    if span <= 0:
        raise ValueError(f"span must be positive, got {span}")
    scaled = {"a": params.a, "k": params.k * span, "t0": (params.t0 - t_start) / span, "eta": params.eta * span}
    out = []
    for name, (low, high) in FIT_BOUNDS.items():
        x = scaled[name]
        if name == "t0":
            near = min(abs(x - low), abs(x - high)) <= tolerance * (high - low)
        else:
            near = x > 0 and min(abs(np.log(x / low)), abs(np.log(x / high))) <= tolerance * np.log(high / low)
        if near:
            out.append(name)
    return out


@dataclass(frozen=True)
class IndependentFit:
    """Each coordinate's own logistic time course: its sharpness k and midpoint t per coordinate, the fitted
    trajectory, RMSE and R² (over both coordinates, as `GatedFlowFit`)."""

    k: tuple[float, ...]
    t: tuple[float, ...]
    fitted: np.ndarray
    rmse: float
    r2: float


def fit_independent_sigmoids(steps: np.ndarray, c: np.ndarray, t_start: float = 0.0) -> IndependentFit:
    """The gated flow's parameter-matched null: every coordinate follows its own logistic c_i(t) = σ(k_i (t − t_i))
    from 0 to 1, fitted by least squares (best of a few starts per coordinate). Two coordinates, four parameters,
    as the gated flow has, but no coupling between the concepts and no gate: whatever the gated flow explains beyond
    it is its mechanism, not its number of parameters."""
    steps, c = np.asarray(steps, dtype=float), np.asarray(c, dtype=float)
    _check_steps(steps, t_start)
    if c.ndim != 2 or c.shape[0] != steps.size:
        raise ValueError(f"c must be [len(steps), concepts] with {steps.size} rows, got {c.shape}")
    if steps.size < 5:
        raise ValueError(f"fitting 2 parameters per coordinate needs at least 5 checkpoints, got {steps.size}")
    span = steps[-1] - t_start
    lower, upper = np.array([np.log(0.1), -0.5]), np.array([np.log(1e3), 1.5])
    fitted, ks, ts = np.empty_like(c), [], []
    from scipy.optimize import least_squares  # lazy: docs/benchmarks.md, "Command start-up"
    from scipy.special import expit

    for i in range(c.shape[1]):
        def curve(x: np.ndarray) -> np.ndarray:
            return expit(np.exp(x[0]) / span * (steps - t_start - x[1] * span))

        best = None
        for k0, f0 in product((3.0, 30.0), (0.1, 0.4, 0.8)):
            x0 = np.clip([np.log(k0), f0], lower + 1e-9, upper - 1e-9)
            result = least_squares(lambda x: curve(x) - c[:, i], x0, bounds=(lower, upper), x_scale="jac")
            if best is None or result.cost < best.cost:
                best = result
        fitted[:, i] = curve(best.x)
        ks.append(float(np.exp(best.x[0]) / span))
        ts.append(float(t_start + best.x[1] * span))
    ss_res = float(((fitted - c) ** 2).sum())
    ss_tot = float(((c - c.mean(axis=0)) ** 2).sum())
    return IndependentFit(k=tuple(ks), t=tuple(ts), fitted=fitted, rmse=float(np.sqrt(ss_res / c.size)),
                          r2=1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"))
