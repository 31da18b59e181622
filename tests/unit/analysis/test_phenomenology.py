"""The gated gradient-flow model: qualitative shape of simulated trajectories and recovery of known parameters."""

import time

import numpy as np
import pytest

from conceptlab.analysis.phenomenology import GatedFlowParams, fit_gated_flow, simulate

TRUE = GatedFlowParams(a=2.0, k=0.01, t0=1200.0, eta=0.004)
STEPS = np.arange(0, 3001, 100, dtype=float)


def test_simulated_trajectory_memorizes_then_turns():
    c = simulate(TRUE, STEPS)
    assert np.allclose(c[0], 0.5)
    before = c[STEPS == 900][0]  # gate closed: heads to (1/(1+a²), a²/(1+a²)) = (0.2, 0.8)
    assert before[0] < 0.3 and before[1] > 0.7
    assert np.all(c[-1] > 0.95)  # gate open: both concepts → 1


def test_fit_recovers_known_parameters_from_noisy_data():
    rng = np.random.default_rng(0)
    data = simulate(TRUE, STEPS) + rng.normal(0.0, 0.01, (STEPS.size, 2))
    began = time.perf_counter()
    fit = fit_gated_flow(STEPS, data)
    assert time.perf_counter() - began < 20
    p = fit.params
    assert p.a == pytest.approx(TRUE.a, rel=0.1)
    assert p.k == pytest.approx(TRUE.k, rel=0.3)
    assert p.t0 == pytest.approx(TRUE.t0, abs=60)
    assert p.eta == pytest.approx(TRUE.eta, rel=0.2)
    assert fit.rmse < 0.015 and fit.r2 > 0.98
    assert fit.fitted.shape == data.shape


def test_bad_input():
    with pytest.raises(ValueError, match="non-empty"):
        simulate(TRUE, np.array([]))
    with pytest.raises(ValueError, match="increasing"):
        simulate(TRUE, np.array([0.0, 200.0, 100.0]))
    with pytest.raises(ValueError, match="positive"):
        simulate(GatedFlowParams(a=-1.0, k=0.01, t0=0.0, eta=0.01), STEPS)
    with pytest.raises(ValueError, match=r"\[len\(steps\), 2\]"):
        fit_gated_flow(STEPS, np.zeros((STEPS.size, 3)))
