"""Emergence analysis on synthetic curves, tables and trajectories with known answers."""

import math

import numpy as np
import pandas as pd
import pytest

from conceptlab.analysis.emergence import (
    across_seeds,
    capability_gap,
    capability_gaps,
    emergence_step,
    emergence_steps,
    joint_score,
    memorization_phase,
    read_as,
    sudden_turn,
    wilson_interval,
)

CONCEPTS = ["color", "size"]
SPLITS = {"00": "train", "01": "train", "10": "train", "11": "test"}


def tidy(points: dict[int, dict[str, tuple[float, float]]], valid: float = 1.0) -> pd.DataFrame:
    """A tidy evaluation table: points[step][class] = (p_one color, p_one size) of that class's generations."""
    rows = []
    for step, per_class in points.items():
        for code, p in per_class.items():
            for i, concept in enumerate(CONCEPTS):
                rows.append(dict(step=step, **{"class": code}, split=SPLITS[code], concept=concept,
                                 target=int(code[i]), p_one=p[i], accuracy=0.0, valid_fraction=valid, n=32))
    return pd.DataFrame(rows)


def test_joint_score_counts_invalid_images_as_zero():
    p = np.array([[0.9, 0.8], [1.0, 1.0], [0.5, 0.5]])
    assert joint_score(p, np.array([True, False, True])) == pytest.approx((0.72 + 0.0 + 0.25) / 3)
    with pytest.raises(ValueError, match="at least one image"):
        joint_score(np.zeros((0, 2)), np.zeros(0, bool))


def test_read_as_uses_targets_of_the_read_class_and_valid_fraction():
    table = tidy({0: {"11": (0.2, 0.9), "01": (0.1, 0.9)}}, valid=0.5)
    assert read_as(table, "11", "11").loc[0] == pytest.approx(0.5 * 0.2 * 0.9)
    assert read_as(table, "11", "01").loc[0] == pytest.approx(0.5 * 0.8 * 0.9)
    with pytest.raises(ValueError, match="'22'"):
        read_as(table, "22", "11")


def test_emergence_step_stays_and_confidence_bound():
    steps = np.arange(0, 1000, 100)
    scores = np.array([0, 0.6, 0.2, 0.55, 0.7, 0.9, 0.95, 0.4, 0.9, 0.9])
    assert emergence_step(steps, scores, stay=1) == 100
    assert emergence_step(steps, scores, stay=3) == 300
    assert emergence_step(steps, scores, stay=None) == 800
    assert emergence_step(steps[::-1], scores[::-1], stay=3) == 300  # order-free
    # Wilson lower bounds: n=100 drops 0.55 (0.45) but keeps 0.7 (0.60); n=10 also drops 0.7 (0.40)
    assert emergence_step(steps, scores, stay=2) == 300
    assert emergence_step(steps, scores, stay=2, n=100) == 400
    assert emergence_step(steps, scores, stay=2, n=10) == 500
    assert math.isnan(emergence_step(steps, np.zeros(10)))
    with pytest.raises(ValueError, match="at least one checkpoint"):
        emergence_step([], [])


def test_wilson_interval_known_value():
    lo, hi = wilson_interval(0.5, 100)
    assert (float(lo), float(hi)) == pytest.approx((0.4038, 0.5962), abs=1e-4)


def test_capability_gap_per_seed_and_across_seeds():
    curves = []
    truth = {0: {"naive": 700, "over": 300, "linear": 500}, 1: {"naive": None, "over": 400, "linear": 400}}
    for seed, per in truth.items():
        for name, at in per.items():
            for step in range(0, 1000, 100):
                curves.append(dict(seed=seed, intervention=name, step=step,
                                   score=0.9 if at is not None and step >= at else 0.1))
    emergence = emergence_steps(pd.DataFrame(curves))
    gaps = capability_gaps(emergence)
    assert gaps["capability_gap"].iloc[0] == 400 and math.isnan(gaps["capability_gap"].iloc[1])
    assert math.isnan(capability_gap({"naive": 900.0, "over": math.nan}))  # no other intervention emerged
    assert math.isnan(capability_gap({"naive": math.nan, "over": 100.0}))  # naive prompting never emerged
    assert capability_gap({"naive": 900.0, "over": 100.0, "linear": 300.0}) == 800.0  # minus the earliest other
    with pytest.raises(ValueError, match="naive"):
        capability_gap({"over": 1.0})
    spread = across_seeds(emergence, "emergence_step", by=["intervention"]).set_index("intervention")
    assert spread.loc["over", "mean"] == 350 and spread.loc["over", "std"] == pytest.approx(math.sqrt(5000))
    assert spread.loc["naive", "occurred"] == 1 and spread.loc["naive", "seeds"] == 2


def test_sudden_turn_finds_the_corner_and_skips_tiny_steps():
    # move toward (0, 1) (memorization of class 01), jitter in place, then turn toward (1, 1)
    pts = np.array([[0.5, 0.5], [0.4, 0.7], [0.3, 0.9], [0.3005, 0.8995], [0.6, 0.95], [0.9, 1.0]])
    steps = np.arange(6) * 50
    turn = sudden_turn(steps, pts)
    assert turn.step == 150 and 90 < turn.angle < 120
    raw = sudden_turn(steps, pts, min_norm=0.0, min_fraction=0.0)  # the jitter's reversal would otherwise dominate
    assert raw.step == 100 and raw.angle > 150
    with pytest.raises(ValueError, match="3 checkpoints"):
        sudden_turn([0, 1], pts[:2])


def test_sudden_turn_ignores_a_wobble_on_the_plateau_after_the_real_reversal():
    # held-out color reading of a measured run (size stays read correctly): it falls toward red (memorization),
    # reverses at step 400, climbs, and wobbles by 0.01 at the top — as sharp a reversal (180°), but noise
    color = [0.88, 0.24, 0.16, 0.47, 0.65, 0.82, 0.91, 0.90, 0.98]
    size = [0.97, 0.98, 0.99, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    pts = np.stack([color, size], axis=1)
    steps = np.arange(200, 1001, 100)
    turn = sudden_turn(steps, pts)
    assert turn.step == 400 and 165 < turn.angle < 175
    assert sudden_turn(steps, pts, min_fraction=0.0).step == 800  # the absolute bar alone keeps the wobble (180°)


def test_memorization_phase_reads_held_out_as_nearest_training_class():
    held = {0: (0.5, 0.5), 50: (0.1, 0.9), 100: (0.1, 0.95), 150: (0.6, 0.9), 200: (0.95, 0.95)}
    table = tidy({s: {"11": p, "01": (0.05, 0.95), "10": (0.95, 0.05), "00": (0.05, 0.05)} for s, p in held.items()})
    phase = memorization_phase(table, "11")
    assert (phase.start, phase.end, phase.read_class) == (50, 100, "01")
    assert memorization_phase(tidy({0: {"11": (0.9, 0.9), "01": (0.0, 1.0)}}), "11") is None


def test_capability_before_behavior_per_seed():
    from conceptlab.analysis.emergence import capability_before_behavior

    table = pd.DataFrame(
        {
            "seed": [0, 0, 0, 1, 1, 1, 2, 2, 2],
            "intervention": ["naive", "over_prompting", "linear"] * 3,
            "emergence_step": [250, 200, 225, 300, 300, float("nan"), float("nan"), 150, 175],
        }
    )
    out = capability_before_behavior(table).set_index("seed")
    assert out.loc[0, "capability_first"] == 1.0 and out.loc[0, "earliest_other"] == "over_prompting"
    assert out.loc[0, "earliest_other_step"] == 200
    assert out.loc[1, "capability_first"] == 0.0  # a tie is not "before"
    assert math.isnan(out.loc[2, "capability_first"]) and out.loc[2, "earliest_other_step"] == 150
    with pytest.raises(ValueError, match="needs columns"):
        capability_before_behavior(table.drop(columns="seed"))
