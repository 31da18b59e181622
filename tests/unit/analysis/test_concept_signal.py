"""Sweep analysis: learning time per concept vs the swept key and concept signal, mean ± sd over seeds."""

import math

import pandas as pd
import pytest
from matplotlib.figure import Figure

from conceptlab.analysis.concept_signal import (
    learning_time_by_axis,
    learning_time_table,
    signal_rank_agreement,
)
from conceptlab.report.sweep_figures import plot_learning_time_vs_signal


def _tables():
    runs, times = [], []
    for dc, color_times in [(0.2, [None, None]), (0.5, [300, 340]), (0.8, [100, 140])]:
        for seed, t in enumerate(color_times):
            run_id = f"r{dc}-{seed}"
            runs.append({"run_id": run_id, "data.color_separation": dc, "data.data_seed": seed,
                         "train.train_seed": seed, "concept_signal_color": 20 * dc, "concept_signal_size": 6.0})
            times += [{"run_id": run_id, "split": "train", "concept": "color", "learning_time": t},
                      {"run_id": run_id, "split": "train", "concept": "size", "learning_time": 250.0},
                      {"run_id": run_id, "split": "held_out", "concept": "color", "learning_time": 999.0}]
    return pd.DataFrame(runs), pd.DataFrame(times).astype({"learning_time": float})


def test_mean_and_spread_over_seeds_per_color_separation():
    runs, times = _tables()
    long = learning_time_table(runs, times, "data.color_separation", "train")
    assert len(long) == 6 * 2 and set(long["concept"]) == {"color", "size"}
    summary = learning_time_by_axis(long).set_index(["axis_value", "concept"])
    assert summary.loc[(0.5, "color"), "learning_time_mean"] == 320
    assert summary.loc[(0.5, "color"), "learning_time_std"] == pytest.approx(math.sqrt(800))
    assert summary.loc[(0.8, "color"), "learning_time_mean"] == 120
    assert summary.loc[(0.2, "color"), "n_learned"] == 0 and math.isnan(summary.loc[(0.2, "color"), "learning_time_mean"])
    assert summary.loc[(0.8, "color"), "concept_signal_mean"] == pytest.approx(16.0)
    assert summary.loc[(0.5, "color"), "learning_time_median"] == 320
    assert summary.loc[(0.2, "color"), "median_censored"] and math.isnan(summary.loc[(0.2, "color"), "learning_time_median"])
    # Larger signal first: agrees at Δc 0.8 (color 16 > 6, learned first) and 0.2 (size 6 > 4, color never
    # learned); disagrees at 0.5 (color 10 > 6 but learned after size): 4 of 6 runs agree.
    assert signal_rank_agreement(long) == (4, 6)
    fig = plot_learning_time_vs_signal(long, learning_time_by_axis(long))
    assert isinstance(fig, Figure) and len(fig.axes) == 2


def test_the_median_counts_runs_that_never_learned_and_one_learned_run_has_no_spread():
    long = pd.DataFrame({"axis_value": [0.3] * 3, "concept": ["color"] * 3, "learning_time": [100.0, None, None],
                         "concept_signal": [1.0, 1.0, 1.0]}).astype({"learning_time": float})
    row = learning_time_by_axis(long).iloc[0]
    assert row["learning_time_mean"] == 100 and math.isnan(row["learning_time_std"])  # the learned run alone
    assert row["median_censored"] and math.isnan(row["learning_time_median"])  # 2 of 3 never learned
    long.loc[1, "learning_time"] = 500.0
    row = learning_time_by_axis(long).iloc[0]
    assert row["learning_time_median"] == 500 and not row["median_censored"]


def test_missing_axis_or_split_is_a_clear_error():
    runs, times = _tables()
    with pytest.raises(ValueError, match="no config key 'data.size_separation'"):
        learning_time_table(runs, times, "data.size_separation")
    with pytest.raises(ValueError, match="no learning times for split 'test'"):
        learning_time_table(runs, times, split="test")


def test_a_seed_key_can_be_the_axis():
    """Sweeping a seed: the axis column is that seed (the seed renames once overrode the axis's: KeyError)."""
    runs, times = _tables()
    long = learning_time_table(runs, times, "train.train_seed", "train")
    assert sorted(set(long["axis_value"])) == [0, 1] and (long["train_seed"] == long["axis_value"]).all()
    assert set(long["axis"]) == {"train.train_seed"}


def test_runs_whose_signals_are_unknown_or_equal_decide_no_order():
    """Neither concept is the larger-signal one when the signals are NaN or tie: such a run is not counted as agreeing
    or disagreeing (the sort once picked one arbitrarily)."""
    base = {"learning_time": [100.0, 200.0], "concept": ["color", "size"]}
    for signals in ([float("nan"), 6.0], [6.0, 6.0], [float("nan"), float("nan")]):
        run = pd.DataFrame({**base, "run_id": ["r", "r"], "concept_signal": signals})
        assert signal_rank_agreement(run) == (0, 0), signals
    assert signal_rank_agreement(pd.DataFrame({**base, "run_id": ["r", "r"], "concept_signal": [7.0, 6.0]})) == (1, 1)
