"""Data efficiency: size to reach 60% accuracy (log-interpolated) and its N-scaling on synthetic tables with known answers."""

import math

import numpy as np
import pandas as pd
import pytest

from conceptlab.analysis.data_efficiency import scaling_fit, size_to_reach, threshold_crossing

TRUE = {"bumps": lambda n: 3.0 * n**2, "bumps+stripes": lambda n: 5.0 * n}  # S*(N): the paper's N² vs N


def synthetic_runs(ns=(8, 16, 32, 64), seeds=2) -> pd.DataFrame:
    """accuracy = 0.6 + 0.25·ln(S/S*), linear in log size, so the log-interpolated crossing is exactly S*;
    two seeds at ±0.03 that average out."""
    rows = []
    for family, s_star in TRUE.items():
        for n in ns:
            for size in np.geomspace(4, 4 * 2**16, 17):  # factor-2 grid that never hits S* exactly
                base = 0.6 + 0.25 * math.log(size / s_star(n))
                for seed in range(seeds):
                    acc = float(np.clip(base + (0.03 if seed else -0.03), 0.0, 1.0))
                    rows.append({"family": family, "N": n, "dataset_size": size, "accuracy": acc, "seed": seed})
    return pd.DataFrame(rows)


def test_size_to_reach_recovers_the_crossing_exactly():
    sizes = size_to_reach(synthetic_runs(), target=0.6)
    assert len(sizes) == 8 and not sizes["censored"].any()
    for row in sizes.itertuples():
        assert row.size_to_reach == pytest.approx(TRUE[row.family](row.N), rel=1e-9)


def test_scaling_fit_gives_n_squared_for_bumps_and_n_with_stripes():
    fit = scaling_fit(size_to_reach(synthetic_runs())).set_index("family")
    assert fit.loc["bumps", "exponent"] == pytest.approx(2.0, abs=1e-9)
    assert fit.loc["bumps+stripes", "exponent"] == pytest.approx(1.0, abs=1e-9)
    assert fit.loc["bumps", "prefactor"] == pytest.approx(3.0, rel=1e-9)
    assert fit.loc["bumps+stripes", "prefactor"] == pytest.approx(5.0, rel=1e-9)
    assert (fit["r2"] > 0.999999).all() and (fit["points"] == 4).all()


def test_other_targets_move_the_crossing_as_expected():
    sizes = size_to_reach(synthetic_runs(), target=0.7)  # 0.7 = 0.6 + 0.25·ln(S/S*) → S = S*·e^0.4
    row = sizes[(sizes["family"] == "bumps") & (sizes["N"] == 16)].iloc[0]
    assert row["size_to_reach"] == pytest.approx(3.0 * 256 * math.exp(0.4), rel=1e-9)


def test_first_crossing_unreached_and_censored():
    assert threshold_crossing(np.array([1.0, 10.0, 100.0]), np.array([0.1, 0.5, 0.7]), 0.6) == pytest.approx(
        10 ** 1.5, rel=1e-12)
    # a non-monotone curve: the first crossing counts
    assert threshold_crossing(np.array([1.0, 10.0, 100.0]), np.array([0.6, 0.2, 0.9]), 0.6) == 1.0
    assert math.isnan(threshold_crossing(np.array([1.0, 10.0]), np.array([0.1, 0.5]), 0.6))
    runs = pd.DataFrame({"family": ["a"] * 4, "N": [8, 8, 16, 16], "dataset_size": [10, 20, 10, 20],
                         "accuracy": [0.7, 0.9, 0.1, 0.2]})
    sizes = size_to_reach(runs).set_index("N")
    assert sizes.loc[8, "censored"] and sizes.loc[8, "size_to_reach"] == 10
    assert not sizes.loc[16, "censored"] and math.isnan(sizes.loc[16, "size_to_reach"])
    fit = scaling_fit(sizes.reset_index())
    assert fit["points"][0] == 0 and math.isnan(fit["exponent"][0])


def test_bad_input():
    runs = synthetic_runs(ns=(8,), seeds=1)
    with pytest.raises(ValueError, match="target"):
        size_to_reach(runs, target=0.0)
    with pytest.raises(ValueError, match="columns"):
        size_to_reach(runs.drop(columns="family"))
    with pytest.raises(ValueError, match="dataset_size"):
        size_to_reach(runs.assign(dataset_size=0))
    with pytest.raises(ValueError, match="empty"):
        size_to_reach(runs.iloc[:0])
    with pytest.raises(ValueError, match="increasing"):
        threshold_crossing(np.array([2.0, 1.0]), np.array([0.0, 1.0]), 0.5)
