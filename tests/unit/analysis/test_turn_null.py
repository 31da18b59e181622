"""The straight-path null of the sudden-turn detector: calibrated on paths without a turn, powered on an L-turn."""

import math

import numpy as np
import pytest

from conceptlab.analysis.turn_null import chord_bow, redraw_straight, straight_path, turn_test

CHECKPOINTS, IMAGES = 10, 8


def _noisy(path: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A reading as the evaluation makes one: the mean over IMAGES generations of a confident classifier's soft
    probability (each image's drawn from Beta(0.5 q, 0.5 (1 − q)) around the path's value q)."""
    q = np.clip(path, 1e-3, 1 - 1e-3)[None]
    return rng.beta(0.5 * q, 0.5 * (1 - q), size=(IMAGES, *path.shape)).mean(axis=0)


def _straight(rng: np.random.Generator) -> np.ndarray:
    t = np.arange(CHECKPOINTS)
    s = 1 / (1 + np.exp(-(t - rng.uniform(2, 7)) * rng.uniform(0.8, 2)))
    a, b = rng.uniform(0, 0.4, 2), rng.uniform(0.6, 1, 2)
    return a + s[:, None] * (b - a)


def _l_turn() -> np.ndarray:
    t = np.arange(CHECKPOINTS)
    up, right = np.clip(t / 4, 0, 1), np.clip((t - 5) / 3, 0, 1)
    return np.stack([0.1 + 0.85 * right, 0.1 + 0.85 * up], 1)  # first toward (0, 1), then to (1, 1)


def test_straight_path_keeps_the_ends_and_the_progress_and_drops_the_bend():
    pts = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    path = straight_path(pts)
    assert path[0] == pytest.approx([0, 0]) and path[-1] == pytest.approx([1, 1])
    assert path[1] == pytest.approx([0.5, 0.5])  # (0, 1) projects halfway along the chord
    back = straight_path(np.array([[0.0, 0.0], [0.8, 0.8], [0.5, 0.5], [1.0, 1.0]]))
    assert np.all(np.diff(back[:, 0]) >= 0)  # progress never runs backwards
    assert straight_path(np.array([[0.2, 0.2], [0.9, 0.1], [0.2, 0.2]])) is None  # ends where it started


def test_chord_bow_is_the_largest_distance_from_the_chord():
    assert chord_bow(np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 1.0]])) == pytest.approx(math.sqrt(0.5))
    assert chord_bow(np.array([[0.0, 0.0], [0.5, 0.5], [1.0, 1.0]])) == pytest.approx(0.0)


def test_redraws_have_the_largest_variance_of_a_mean_and_are_continuous():
    pts = np.array([[0.1, 0.1], [0.5, 0.5], [0.9, 0.99]])
    draws = redraw_straight(pts, np.array([8, 4, 8]), 4000, np.random.default_rng(0))
    assert draws.shape == (4000, 3, 2)
    assert draws[:, 1].mean() == pytest.approx(0.5, abs=0.02)
    assert draws[:, 1].var() == pytest.approx(0.25 / 4, rel=0.1)  # q(1 − q)/n with n = 4
    assert np.unique(draws[:, 1, 0]).size > 3900  # continuous, like means of soft probabilities (not a 1/n grid)
    with pytest.raises(ValueError, match="counts"):
        redraw_straight(pts, np.array([8, 1, 8]), 10, np.random.default_rng(0))


def test_the_null_rejects_few_straight_paths_and_most_l_turns():
    """The reviewer's check: the detector's angle alone 'turned' on 149 of 200 noisy straight paths; the bow against
    its null calls few straight paths and most L-turns."""
    rng = np.random.default_rng(7)
    counts = np.full(CHECKPOINTS, IMAGES)
    straight = [turn_test(np.arange(CHECKPOINTS), _noisy(_straight(rng), rng), counts, draws=199, seed=k)
                for k in range(60)]
    turned = [turn_test(np.arange(CHECKPOINTS), _noisy(_l_turn(), rng), counts, draws=199, seed=k) for k in range(60)]
    false_bow = np.mean([t.bow > t.bow_null_q95 for t in straight])
    power_bow = np.mean([t.bow > t.bow_null_q95 for t in turned])
    assert false_bow <= 0.1
    assert power_bow >= 0.8
    assert np.mean([t.bow_p <= 0.05 for t in turned]) >= 0.8
    assert np.mean([t.bow_p <= 0.05 for t in straight]) <= 0.1


def test_turn_test_is_undefined_on_too_few_checkpoints_and_checks_shapes():
    t = turn_test(np.array([0, 1]), np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([8, 8]))
    assert math.isnan(t.bow_p) and t.draws == 0
    with pytest.raises(ValueError, match="steps"):
        turn_test(np.arange(3), np.zeros((4, 2)), np.full(4, 8))
    with pytest.raises(ValueError, match="finite"):
        turn_test(np.arange(3), np.array([[0.0, 0.0], [np.nan, 0.5], [1.0, 1.0]]), np.full(3, 8))


def test_turn_test_is_reproducible_for_a_seed():
    pts = _noisy(_l_turn(), np.random.default_rng(1))
    a = turn_test(np.arange(CHECKPOINTS), pts, np.full(CHECKPOINTS, IMAGES), draws=99, seed=3)
    b = turn_test(np.arange(CHECKPOINTS), pts, np.full(CHECKPOINTS, IMAGES), draws=99, seed=3)
    assert a == b
