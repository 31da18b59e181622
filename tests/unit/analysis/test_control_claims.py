"""A claim against its binding control over seeds: per-seed margins, missing values and the verdict rule."""

import math

import pytest

from conceptlab.analysis.control_claims import evaluate, seed_margin, verdict


def test_greater_passes_only_seeds_clearing_the_margin():
    out = evaluate({100: 0.9, 101: 0.8, 102: 0.62}, {100: 0.5, 101: 0.7, 102: 0.6}, "greater", 0.05)
    assert [s["passed"] for s in out["seeds"]] == [True, True, False]
    assert out["passed"] == 2 and out["of"] == 3 and out["verdict"] == "mixed"
    assert out["min_difference"] == pytest.approx(0.02) and out["max_difference"] == pytest.approx(0.4)


def test_less_reverses_the_difference():
    out = evaluate({0: 0.1, 1: 0.2}, {0: 0.5, 1: 0.5}, "less", 0.25)
    assert [s["difference"] for s in out["seeds"]] == [pytest.approx(0.4), pytest.approx(0.3)]
    assert out["verdict"] == "reproduced"


def test_a_control_that_wins_everywhere_is_not_reproduced():
    out = evaluate({0: 0.3, 1: 0.31, 2: 0.29}, {0: 0.9, 1: 0.9, 2: 0.9}, "greater", 0.0)
    assert out["passed"] == 0 and out["verdict"] == "not reproduced"


def test_a_tie_passes_a_zero_margin_but_not_a_positive_one():
    assert seed_margin(0, 0.5, 0.5, "greater", 0.0).passed
    assert not seed_margin(0, 0.5, 0.5, "greater", 1e-9).passed


def test_missing_or_nan_values_fail_their_seed():
    out = evaluate({0: 0.9, 1: None, 2: math.nan, 3: 0.9}, {0: 0.1, 1: 0.1, 2: 0.1}, "greater", 0.1)
    assert [s["passed"] for s in out["seeds"]] == [True, False, False, False]  # seed 3 has no control value
    assert out["verdict"] == "mixed"


def test_holds_reads_truth_values_only():
    out = evaluate({0: True, 1: True, 2: False}, None, "holds", 0.0, min_seeds=2)
    assert out["passed"] == 2 and out["verdict"] == "reproduced"
    assert not seed_margin(0, 1.0, None, "holds", 0.0).passed  # a number is not a truth value
    assert not seed_margin(0, None, None, "holds", 0.0).passed


def test_verdict_rule_and_its_bounds():
    assert verdict([True, True, True]) == "reproduced"
    assert verdict([True, True, False]) == "mixed"
    assert verdict([True, True, False], min_seeds=2) == "reproduced"
    assert verdict([False, False]) == "not reproduced"
    with pytest.raises(ValueError, match="at least one seed"):
        verdict([])
    with pytest.raises(ValueError, match="min_seeds"):
        verdict([True], min_seeds=2)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="direction"):
        seed_margin(0, 1.0, 0.0, "bigger", 0.0)
    with pytest.raises(ValueError, match="margin"):
        evaluate({0: 1.0}, {0: 0.0}, "greater", -0.1)
