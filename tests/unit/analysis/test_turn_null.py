"""The straight-path null of the sudden-turn detector: calibrated on paths without a turn, powered on an L-turn."""

import math

import numpy as np
import pytest

from conceptlab.analysis.turn_null import (checkpoint_noise, checkpoint_noise_turn_test, chord_bow, redraw_straight,
                                           straight_path, sustained_bow, turn_test)

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


# ---- the replicate-stream sign-flip test

STREAMS, PER_STREAM = 5, 24


def _streams(path: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Readings as the evaluation makes them on replicate noise streams: each stream's PER_STREAM images keep their
    noise at every checkpoint (an image reads 1 on a concept while its own uniform u, the same at every checkpoint,
    is below the path's value q, else 0: a confident classifier, mean exactly q), so a stream's deviation is
    correlated over checkpoints."""
    u = rng.uniform(size=(STREAMS, PER_STREAM, 1, path.shape[1]))
    readings = (u < path[None, None]).mean(axis=1)
    return readings, np.full(readings.shape[:2], PER_STREAM)


def test_stream_flip_rejects_few_straight_paths_and_most_l_turns():
    from conceptlab.analysis.turn_null import stream_turn_test

    rng = np.random.default_rng(5)
    steps = 100.0 * np.arange(1, CHECKPOINTS + 1)
    straight = [stream_turn_test(steps, *_streams(_straight(rng), rng)) for _ in range(300)]
    turned = [stream_turn_test(steps, *_streams(_l_turn(), rng)) for _ in range(100)]
    assert all(t.patterns == 32 and t.exact and t.level == pytest.approx(1 / 16) for t in straight + turned)
    false = np.mean([t.bow > t.bow_critical for t in straight])
    assert false <= 0.10  # nominal 1/16; S is estimated from the pooled path, so the test is approximate
    assert np.mean([t.bow > t.bow_critical for t in turned]) >= 0.9
    # the decision is the p-value's: bow > critical exactly when p ≤ the level
    assert all((t.bow > t.bow_critical) == (t.bow_p <= t.level + 1e-12) for t in straight + turned)


def test_stream_flip_is_sharper_than_the_bounded_straight_path_null_where_readings_are_soft():
    """The bounded null draws every checkpoint at the largest variance a mean of its images can have; the stream
    test measures the noise. Where each image's reading is soft (its value ± 0.15, mean exact, the same offset at
    every checkpoint) a shallow L-turn read from 5 × 24 images is found by the stream test and rarely by the bound."""
    from conceptlab.analysis.turn_null import stream_turn_test

    rng = np.random.default_rng(6)
    steps = 100.0 * np.arange(1, CHECKPOINTS + 1)
    l_turn = 0.2 + 0.6 * (_l_turn() - 0.1) / 0.85  # inside [0.2, 0.8]: the soft readings never clip
    shallow = 0.15 * l_turn + 0.85 * straight_path(l_turn)
    flip, bounded = [], []
    for k in range(40):
        offsets = rng.uniform(-0.15, 0.15, size=(STREAMS, PER_STREAM, 1, 2))
        readings = (shallow[None, None] + offsets).mean(axis=1)
        valid = np.full(readings.shape[:2], PER_STREAM)
        flip.append(stream_turn_test(steps, readings, valid).bow_p <= 1 / 16)
        bounded.append(turn_test(steps, readings.mean(axis=0), valid.sum(axis=0), draws=199, seed=k).bow_p <= 0.05)
    assert np.mean(flip) >= 0.9 and np.mean(bounded) <= 0.2


def test_pool_streams_weights_streams_by_their_valid_images():
    from conceptlab.analysis.turn_null import pool_streams

    readings = np.array([[[0.2, 0.4]], [[0.8, np.nan]], [[0.5, 0.6]]])  # 3 streams, 1 checkpoint, 2 concepts
    readings[1, 0, 1] = 0.9
    valid = np.array([[1], [3], [0]])  # the third stream has no valid image: its reading is ignored
    pooled, weights = pool_streams(readings, valid)
    assert pooled[0] == pytest.approx([(0.2 + 3 * 0.8) / 4, (0.4 + 3 * 0.9) / 4])
    assert weights[:, 0] == pytest.approx([0.25, 0.75, 0.0])
    nan_unread = readings.copy()
    nan_unread[2] = np.nan  # NaN where a stream had no valid image is allowed
    assert pool_streams(nan_unread, valid)[0] == pytest.approx(pooled)
    with pytest.raises(ValueError, match="finite reading"):
        pool_streams(np.full((2, 1, 2), np.nan), np.array([[1], [1]]))
    with pytest.raises(ValueError, match="no valid image"):
        pool_streams(readings, np.zeros((3, 1), dtype=int))
    with pytest.raises(ValueError, match="integers"):
        pool_streams(readings, np.array([[0.5], [1], [1]]))


def test_sign_patterns_are_every_pattern_identity_first_or_random_beyond_the_exact_limit():
    from conceptlab.analysis.turn_null import sign_patterns

    rng = np.random.default_rng(0)
    exact, is_exact = sign_patterns(3, 12, 0, rng)
    assert is_exact and exact.shape == (8, 3) and (exact[0] == 1).all()
    assert len({tuple(p) for p in exact}) == 8
    drawn, is_exact = sign_patterns(14, 12, 99, rng)
    assert not is_exact and drawn.shape == (100, 14) and (drawn[0] == 1).all()


def test_stream_turn_test_is_undefined_with_too_few_streams_or_checkpoints_and_checks_input():
    from conceptlab.analysis.turn_null import stream_turn_test

    rng = np.random.default_rng(1)
    readings, valid = _streams(_l_turn(), rng)
    steps = 100.0 * np.arange(1, CHECKPOINTS + 1)
    assert math.isnan(stream_turn_test(steps, readings[:4], valid[:4]).bow)  # 4 streams: level 1/8, not run
    assert stream_turn_test(steps[:2], readings[:, :2], valid[:, :2]).patterns == 0
    flat = np.full_like(readings, 0.5)
    assert math.isnan(stream_turn_test(steps, flat, valid).bow_p)  # ends where it started
    with pytest.raises(ValueError, match="steps must match"):
        stream_turn_test(steps[:-1], readings, valid)
    with pytest.raises(ValueError, match="alpha"):
        stream_turn_test(steps, readings, valid, alpha=0)
    shuffled = np.random.default_rng(2).permutation(CHECKPOINTS)  # order of checkpoints does not matter
    assert stream_turn_test(steps[shuffled], readings[:, shuffled], valid[:, shuffled]) == stream_turn_test(
        steps, readings, valid)


def test_stream_turn_test_weights_streams_by_their_valid_images_and_counts_the_pooled_path_itself():
    """One stream with every valid image carries a turn; four with one valid image each (and NaN where they have
    none) run straight. Weighted by valid images the pooled path is nearly the turned stream, and the identity sign
    pattern reproduces it exactly, so p ≥ 1/32 (a version weighting streams equally would put the identity pattern's
    path near the straight ones and give p = 0)."""
    from conceptlab.analysis.turn_null import pool_streams, stream_turn_test

    steps = 100.0 * np.arange(1, CHECKPOINTS + 1)
    straight = straight_path(_l_turn())
    readings = np.stack([_l_turn()] + [straight] * 4)
    valid = np.array([[24] * CHECKPOINTS] + [[1] * CHECKPOINTS] * 4)
    valid[1:, 3] = 0
    readings[1:, 3] = np.nan
    test = stream_turn_test(steps, readings, valid)
    assert test.bow == pytest.approx(chord_bow(pool_streams(readings, valid)[0]))
    assert test.bow > 0.5 and test.bow_p >= 1 / 32


def test_identical_straight_streams_do_not_pass():
    """No noise and no turn: every pattern bows 0, p = 1, and `bow > bow_critical` fails (a tie is not a pass)."""
    from conceptlab.analysis.turn_null import stream_turn_test

    steps = 100.0 * np.arange(1, CHECKPOINTS + 1)
    readings = np.stack([straight_path(_l_turn())] * STREAMS)
    test = stream_turn_test(steps, readings, np.full((STREAMS, CHECKPOINTS), PER_STREAM))
    assert test.bow_p == 1.0 and not test.bow > test.bow_critical and test.bow_p > test.level


# --- the checkpoint-noise null: a network's own checkpoint-to-checkpoint swings (no EMA) -----------------------------

def _line(n: int, rng: np.random.Generator, sigmoid: bool) -> np.ndarray:
    t = np.arange(n)
    progress = 1 / (1 + np.exp(-(t - n / 2) / (n / 8))) if sigmoid else t / (n - 1)
    a, b = rng.uniform(0, 0.4, 2), rng.uniform(0.6, 1, 2)
    return a + progress[:, None] * (b - a)


def _rate(paths, hold: int = 2) -> float:
    tests = [checkpoint_noise_turn_test(np.arange(len(p)), p, hold=hold, draws=199, seed=k) for k, p in enumerate(paths)]
    assert not any(math.isnan(t.bow_p) for t in tests)
    return float(np.mean([t.bow_p <= 0.05 for t in tests]))


@pytest.mark.parametrize("n", [8, 19])
def test_checkpoint_noise_null_passes_few_noisy_straight_paths(n):
    rng = np.random.default_rng(n)
    gaussian = [_line(n, rng, sigmoid=k % 2 == 0) + rng.normal(0, rng.choice([0.02, 0.1]), (n, 2)) for k in range(160)]
    heavy = [_line(n, rng, sigmoid=False) + 0.05 * rng.standard_t(2, (n, 2)) for k in range(120)]
    assert _rate(gaussian) <= 0.09
    assert _rate(heavy) <= 0.15  # heavy tails are outside the Gaussian null; still near the level


@pytest.mark.parametrize("n, hold", [(80, 5), (27, 3)])
def test_checkpoint_noise_null_keeps_its_level_at_the_dense_checkpoint_rules_settings(n, hold):
    """The settings the dense-checkpoint rule can pick (docs/findings-suite.md: 80 checkpoints with hold 5 when the
    noise lasts one checkpoint, ~27 with hold 3 when thinned by 3)."""
    rng = np.random.default_rng(n)
    gaussian = [_line(n, rng, sigmoid=k % 2 == 0) + rng.normal(0, rng.choice([0.02, 0.1]), (n, 2)) for k in range(120)]
    heavy = [_line(n, rng, sigmoid=False) + 0.05 * rng.standard_t(2, (n, 2)) for k in range(100)]
    assert _rate(gaussian, hold) <= 0.09
    assert _rate(heavy, hold) <= 0.15


def test_noise_that_persists_passes_as_a_turn_unless_the_path_is_thinned_to_its_persistence():
    """AR(1) checkpoint noise (φ = 0.5, lasting about three checkpoints) on straight dense paths: read at every
    checkpoint the independent-noise null calls half of them turns; thinned to every third checkpoint it holds."""
    rng = np.random.default_rng(5)

    def ar1(n: int, phi: float = 0.5, sigma: float = 0.03) -> np.ndarray:
        e, x = rng.normal(0, sigma, (n, 2)), np.zeros((n, 2))
        x[0] = e[0]
        for i in range(1, n):
            x[i] = phi * x[i - 1] + math.sqrt(1 - phi ** 2) * e[i]
        return x

    paths = [_line(80, rng, sigmoid=False) + ar1(80) for _ in range(120)]
    assert _rate(paths, hold=5) >= 0.3
    assert _rate([p[::-1][::3][::-1] for p in paths], hold=3) <= 0.15


def test_a_swing_at_one_checkpoint_is_not_a_turn_but_a_held_turn_is():
    rng = np.random.default_rng(3)
    n = 19

    def swung():
        p = _line(n, rng, sigmoid=False) + rng.normal(0, 0.03, (n, 2))
        p[rng.integers(2, n - 2)] += [0.7, -0.7]  # a network without an EMA, read once far off its path
        return p

    swings = [swung() for _ in range(100)]
    assert _rate(swings) <= 0.03
    assert _rate(swings, hold=1) >= 0.5  # the mutant without the hold calls the swing a turn
    l_turns = []
    for _ in range(100):
        k = n // 3  # toward (1, 0.1) for a third of training, then to the target (1, 1)
        path = np.concatenate([np.linspace([0.2, 0.2], [1.0, 0.1], k), np.linspace([1.0, 0.1], [1.0, 1.0], n - k)])
        l_turns.append(path + rng.normal(0, 0.05, (n, 2)))
    assert _rate(l_turns) >= 0.9
    t = np.linspace(0, 1, 8)
    u_turns = [np.stack([0.5 - 0.4 * np.sin(np.pi * t) + 0.1 * t, np.ones(8)], 1) + rng.normal(0, 0.02, (8, 2))
               for _ in range(60)]  # the fast variant's shape: color first away from the target, then back
    assert _rate(u_turns) >= 0.9


def test_checkpoint_noise_and_sustained_bow():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, [0.05, 0.2], (4000, 2))
    assert np.allclose(checkpoint_noise(noise), [0.05, 0.2], rtol=0.05)
    path = np.array([[0, 0], [1, 0.5], [2, 0], [3, 0.3], [4, 0.4], [5, 0.0]], dtype=float)
    assert sustained_bow(path, 1) == pytest.approx(0.5) == chord_bow(path)
    assert sustained_bow(path, 2) == pytest.approx(0.3)  # 0.5 is held for one checkpoint only
    assert sustained_bow(path, 3) == pytest.approx(0.0)
    with pytest.raises(ValueError, match="hold"):
        sustained_bow(path, 7)


def test_checkpoint_noise_test_is_reproducible_consistent_and_undefined_where_it_should_be():
    rng = np.random.default_rng(1)
    path = _line(12, rng, sigmoid=True) + rng.normal(0, 0.05, (12, 2))
    a, b = (checkpoint_noise_turn_test(np.arange(12), path, seed=5) for _ in range(2))
    assert a == b and a.checkpoints == 12 and a.draws == 999 and len(a.sigma) == 2
    assert (a.bow > a.bow_null_q95) == (a.bow_p <= 0.05) or abs(a.bow_p - 0.05) < 0.01
    shuffled = np.random.default_rng(2).permutation(12)  # steps need not come sorted
    assert checkpoint_noise_turn_test(np.arange(12)[shuffled], path[shuffled], seed=5) == a
    assert math.isnan(checkpoint_noise_turn_test(np.arange(4), path[:4]).bow_p)  # too few checkpoints
    assert math.isnan(checkpoint_noise_turn_test(np.arange(5), np.zeros((5, 2))).bow_p)  # ends where it started
    with pytest.raises(ValueError, match="steps"):
        checkpoint_noise_turn_test(np.arange(5), path)
    with pytest.raises(ValueError, match="hold"):
        checkpoint_noise_turn_test(np.arange(12), path, hold=0)


def _ar1(n, phi, sigma, rng):
    """AR(1) noise per concept, stationary variance sigma²."""
    e = np.empty((n, 2))
    e[0] = rng.standard_normal(2) * sigma
    innov = sigma * math.sqrt(1 - phi**2)
    for i in range(1, n):
        e[i] = phi * e[i - 1] + rng.standard_normal(2) * innov
    return e


def test_the_semivariogram_and_persistence_of_checkpoint_noise():
    from conceptlab.analysis.turn_null import noise_persistence, semivariogram

    rng = np.random.default_rng(0)
    flat = np.full((4000, 2), 0.5)
    independent = flat + rng.standard_normal((4000, 2)) * 0.05
    gamma = semivariogram(independent, 6)
    assert np.allclose(gamma, 2 * 0.05**2, rtol=0.06)  # σ² per concept, two concepts, at every lag
    assert noise_persistence(independent, 8) == 1
    lasting = flat + _ar1(4000, 0.7, 0.05, rng)  # γ(h) ∝ 1 − 0.7^h: 90% of the plateau at h ≈ 6.5
    gamma = semivariogram(lasting, 24)
    assert np.allclose(gamma[:3], 2 * 0.05**2 * (1 - 0.7 ** np.arange(1, 4)), rtol=0.1)
    assert 6 <= noise_persistence(lasting, 24) <= 8
    with pytest.raises(ValueError, match="max_lag"):
        semivariogram(independent[:5], 5)
    with pytest.raises(ValueError, match="share"):
        noise_persistence(independent, 4, share=0)
    assert noise_persistence(flat, 4) == 1  # no noise at all
