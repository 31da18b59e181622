"""Learning-time detection on synthetic accuracy curves with known answers."""

import math

import numpy as np
import pandas as pd
import pytest

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


def test_authors_learning_index_is_the_centre_of_the_first_run_of_three_above_the_threshold():
    from conceptlab.analysis.concept_space import authors_learning_index

    # unsmoothed (σ 0): the run 2, 3, 4 is the first of three above; its centre is 3. A run at the very start has
    # its centre one later (nothing above before the first checkpoint); two above are not a run
    assert authors_learning_index([0.95, 0.2, 0.95, 0.95, 0.95, 0.2], sigma=0) == 3
    assert authors_learning_index([0.95, 0.95, 0.95, 0.1], sigma=0) == 1
    assert authors_learning_index([0.95, 0.95, 0.1, 0.95, 0.95], sigma=0) is None
    assert authors_learning_index([0.9, 0.9, 0.9, 0.9], sigma=0) is None  # strictly above
    assert authors_learning_index([0.9, 0.9, 0.9, 0.9], threshold=0.8, sigma=0) == 1


def test_authors_learning_index_smooths_with_a_centred_gaussian_of_one_and_a_half_checkpoints():
    from conceptlab.analysis.concept_space import authors_learning_index

    # a step from 0 to 1 at checkpoint 10: the σ 1.5 Gaussian reads Φ((i − 9.5)/1.5) there, 0.63, 0.84, 0.95 at
    # 10, 11, 12, so the first run of three above 0.9 is 12, 13, 14 and the learning index its centre, 13 (our
    # trailing variant says 12)
    step = [0.0] * 10 + [1.0] * 10
    assert authors_learning_index(step) == 13
    assert first_sustained_crossing(smooth(np.array(step), 3), 0.9, 3) == 12
    spike = [0.5] * 5 + [1.0] + [0.5] * 5  # one checkpoint at 1.0 smooths to 0.63: never learned
    assert authors_learning_index(spike, threshold=0.6, sigma=0) is None and authors_learning_index(spike) is None
    assert authors_learning_index([0.95, float("nan"), 0.95, 0.95]) is None
    with pytest.raises(ValueError, match="odd"):
        authors_learning_index(step, consistent=2)


def test_authors_learning_times_per_split_and_concept():
    from conceptlab.analysis.concept_space import authors_learning_times

    steps = [100 * (i + 1) for i in range(20)]
    table = _table({("11", "held_out", "color"): [0.0] * 10 + [1.0] * 10,
                    ("11", "held_out", "size"): [0.0] * 20}, steps)
    times = authors_learning_times(table).set_index("concept")["learning_time"]
    assert times["color"] == 1400 and math.isnan(times["size"])
