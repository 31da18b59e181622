"""Learning-time detection on synthetic accuracy curves with known answers."""

import math

import numpy as np
import pandas as pd

from conceptlab.analysis.concept_space import first_sustained_crossing, learning_times, smooth, trajectories


def _table(curves: dict[tuple[str, str, str], list[float]], steps: list[int]) -> pd.DataFrame:
    rows = []
    for (code, split, concept), acc in curves.items():
        for step, a in zip(steps, acc):
            rows.append({"step": step, "class": code, "split": split, "concept": concept, "target": 0,
                         "p_one": a, "accuracy": a, "valid_fraction": 1.0, "n": 10})
    return pd.DataFrame(rows)


def test_first_sustained_crossing_ignores_a_transient_spike():
    values = np.array([0.1, 0.95, 0.2, 0.5, 0.92, 0.93, 0.97, 0.99])
    assert first_sustained_crossing(values, 0.9, stay=3) == 4
    assert first_sustained_crossing(values, 0.9, stay=1) == 1
    assert first_sustained_crossing(values[:6], 0.9, stay=3) is None


def test_smooth_is_a_trailing_mean():
    assert smooth(np.array([0.0, 3.0, 6.0, 9.0]), 3).tolist() == [0.0, 1.5, 3.0, 6.0]
    assert smooth(np.array([1.0, 2.0]), 1).tolist() == [1.0, 2.0]


def test_learning_times_per_split_and_concept():
    steps = [10, 20, 30, 40, 50, 60, 70, 80]
    table = _table(
        {
            ("00", "train", "color"): [0.2, 0.95, 1, 1, 1, 1, 1, 1],
            ("01", "train", "color"): [0.2, 0.95, 1, 1, 1, 1, 1, 1],
            ("00", "train", "size"): [0, 0, 0, 0.5, 1, 1, 1, 1],
            ("01", "train", "size"): [0, 0, 0, 0.5, 1, 1, 1, 1],
            ("11", "held_out", "color"): [0, 0, 0, 0, 0, 0, 0, 0],
            ("11", "held_out", "size"): [0, 0, 0, 0, 0, 1, 1, 1],
        },
        steps,
    )
    lt = learning_times(table, threshold=0.9, smoothing=1, stay=3).set_index(["split", "concept"])["learning_time"]
    assert lt["train", "color"] == 20 and lt["train", "size"] == 50 and lt["held_out", "size"] == 60
    assert math.isnan(lt["held_out", "color"])
    smoothed = learning_times(table, threshold=0.9, smoothing=3, stay=3).set_index(["split", "concept"])
    assert smoothed.loc[("train", "color"), "learning_time"] == 40  # smoothing delays the crossing


def test_trajectories_pivot_one_column_per_concept():
    table = _table({("11", "held_out", "color"): [0.1, 0.9], ("11", "held_out", "size"): [0.2, 0.8]}, [5, 6])
    traj = trajectories(table)
    assert traj[["step", "color", "size"]].values.tolist() == [[5, 0.1, 0.2], [6, 0.9, 0.8]]
