"""The findings suite's criterion evaluator on plain numbers: pass, fail, mixed, missing runs, censored values,
tolerances, trends and the finding's verdict."""

import math

import pytest

from conceptlab.analysis.finding_criteria import (compare, evaluate, finding_verdict, spread, trend, uncensor,
                                                  verdict_with_missing)


def test_every_seed_clearing_the_margin_is_reproduced_none_is_not_and_some_is_mixed():
    control = {0: 0.5, 1: 0.5, 2: 0.5}
    assert evaluate({0: 0.9, 1: 0.8, 2: 0.75}, control, "greater", 0.2)["verdict"] == "reproduced"
    assert evaluate({0: 0.6, 1: 0.5, 2: 0.4}, control, "greater", 0.2)["verdict"] == "not reproduced"
    mixed = evaluate({0: 0.9, 1: 0.6, 2: 0.8}, control, "greater", 0.2)
    assert mixed["verdict"] == "mixed" and (mixed["passed"], mixed["of"]) == (2, 3)
    # min_seeds relaxes "every seed" to a declared count
    assert evaluate({0: 0.9, 1: 0.6, 2: 0.8}, control, "greater", 0.2, min_seeds=2)["verdict"] == "reproduced"
    # exactly at the margin passes, just below fails
    r = evaluate({0: 0.7, 1: 0.6999}, {0: 0.5, 1: 0.5}, "greater", 0.2)
    assert [s["passed"] for s in r["seeds"]] == [True, False]


def test_less_is_the_control_minus_the_value_and_a_threshold_is_a_fixed_control():
    r = evaluate({0: 100.0, 1: 300.0}, {0: 200.0, 1: 200.0}, "less", 1)
    assert [s["difference"] for s in r["seeds"]] == [100.0, -100.0] and r["verdict"] == "mixed"
    t = evaluate({0: 0.6, 1: 0.4}, 0.5, "greater", 0.0)
    assert [s["passed"] for s in t["seeds"]] == [True, False] and t["controls"] is None


def test_a_missing_run_or_value_fails_its_seed_and_is_never_passed():
    r = evaluate({0: 0.9, 1: None}, {0: 0.1}, "greater", 0.1)
    assert [s["passed"] for s in r["seeds"]] == [True, False]
    assert r["seeds"][1]["note"] == "not measured" and r["verdict"] == "mixed"
    none = evaluate({0: None, 1: float("nan")}, {0: 0.1, 1: 0.1}, "greater", 0.0)
    assert none["verdict"] == "not reproduced" and none["differences"]["n"] == 0
    holds = evaluate({0: True, 1: None, 2: False}, None, "holds")
    assert [s["passed"] for s in holds["seeds"]] == [True, False, False]


def test_a_seed_without_a_run_is_never_read_as_censored_even_where_censoring_would_pass_it():
    # "size is learned after step 100": a run that never learned size passes (censored high); a run that never
    # finished says nothing and fails as "no run", where reading its missing value as +inf would have passed it
    r = evaluate({0: None, 1: 300.0, 2: None}, 100.0, "greater", 1, censored="high", no_run=[2])
    assert [s["passed"] for s in r["seeds"]] == [True, True, False]
    assert r["seeds"][2]["note"] == "no run" and r["seeds"][2]["value"] is None and r["no_run"] == 1
    assert r["verdict"] == "incomplete"  # seed 2 could still pass or fail
    assert r["values"]["censored"] == 1 and r["values"]["n"] == 1  # the unrun seed is in neither count
    with pytest.raises(ValueError, match="not among the seeds"):
        evaluate({0: 1.0}, 0.0, "greater", no_run=[5])


def test_a_verdict_with_unfinished_seeds_is_incomplete_unless_they_cannot_change_it():
    assert verdict_with_missing([True, True, False], 0) == "mixed"  # every seed ran: the plain rule
    assert verdict_with_missing([True, True, False], 1) == "incomplete"  # the unrun seed decides it
    assert verdict_with_missing([True, False, False], 1) == "mixed"  # 1 pass + 1 to come < 3: mixed whatever it does
    assert verdict_with_missing([True, True, False], 1, min_seeds=2) == "reproduced"  # enough passes already
    assert verdict_with_missing([True, False, False, False, False], 1, min_seeds=5) == "mixed"  # cannot reach 5
    assert verdict_with_missing([False, False, False], 2) == "incomplete"  # none yet: mixed or not reproduced
    assert verdict_with_missing([False] * 5, 5) == "incomplete"
    with pytest.raises(ValueError, match="no_run"):
        verdict_with_missing([True], 2)


def test_censored_values_decide_a_comparison_only_when_the_outcome_does_not_depend_on_them():
    # emergence steps: None = never within the run = +inf under censored high
    never = None
    r = evaluate({0: 400.0, 1: never, 2: never, 3: 400.0}, {0: never, 1: 500.0, 2: never, 3: 600.0}, "less", 1,
                 censored="high", control_censored="high")
    seeds = r["seeds"]
    assert seeds[0]["passed"] and seeds[0]["difference"] == math.inf  # it emerged, the control never did
    assert not seeds[1]["passed"] and seeds[1]["difference"] == -math.inf  # it never did, the control did
    assert not seeds[2]["passed"] and seeds[2]["note"] == "both censored"  # neither: no evidence either way
    assert seeds[3]["passed"] and seeds[3]["difference"] == 200.0
    assert r["verdict"] == "mixed" and r["values"]["censored"] == 2 and r["values"]["n"] == 2
    # a lower gap bound that is unbounded below (the intervention never emerged) is −inf under censored low
    low = evaluate({0: None, 1: 100.0}, 0.0, "greater", 1, censored="low")
    assert [s["passed"] for s in low["seeds"]] == [False, True]
    # without censoring the same missing value is "not measured"
    assert evaluate({0: None}, 0.0, "greater", 1)["seeds"][0]["note"] == "not measured"
    assert uncensor(None, "high") == math.inf and uncensor(float("nan"), "low") == -math.inf
    assert uncensor(None) is None and uncensor(3) == 3.0
    with pytest.raises(ValueError, match="censored"):
        uncensor(1.0, "sideways")


def test_a_negative_margin_is_a_tolerance_for_claims_of_absence():
    # "CFG scores no more than 0.1 above naive prompting": less with margin −0.1 (naive − cfg ≥ −0.1)
    r = evaluate({0: 0.05, 1: 0.15, 2: 0.3}, {0: 0.0, 1: 0.1, 2: 0.1}, "less", -0.1)
    assert [s["passed"] for s in r["seeds"]] == [True, True, False]
    with pytest.raises(ValueError, match="finite"):
        evaluate({0: 1.0}, {0: 0.0}, "greater", math.nan)


def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="direction"):
        compare(0, 1.0, 0.0, "bigger", 0.0)
    with pytest.raises(ValueError, match="control or a threshold"):
        evaluate({0: 1.0}, None, "greater")
    with pytest.raises(ValueError, match="at least one seed"):
        evaluate({}, {}, "greater")
    with pytest.raises(ValueError, match="min_seeds"):
        evaluate({0: 1.0}, {0: 0.0}, "greater", 0.0, min_seeds=2)


def test_trend_is_spearman_with_censored_values_ranked_last():
    assert trend([1, 2, 3, 4], [0.9, 0.7, 0.4, 0.1]) == pytest.approx(-1.0)
    assert trend([1, 2, 3, 4], [0.1, 0.4, 0.3, 0.9]) == pytest.approx(0.8)
    # a learning time never reached ranks beyond every finite one
    assert trend([0.3, 0.5, 0.7], [math.inf, 300.0, 200.0]) == pytest.approx(-1.0)
    assert math.isnan(trend([1, 2], [1.0, 2.0]))  # too few points
    assert trend([1, 2, 3], [0.5, 0.5, 0.5]) == 0.0  # the same value everywhere: no trend
    assert trend([1, 2, 3], [math.inf] * 3) == 0.0  # never reached anywhere: no trend either
    assert math.isnan(trend([2, 2, 2], [0.1, 0.5, 0.9]))  # one x: nothing to trend against
    assert trend([1, 2, 3, 4], [1.0, None, 3.0, 4.0]) == pytest.approx(1.0)  # a missing value drops its pair


def test_spread_counts_censored_values_apart():
    s = spread([1.0, 3.0, math.inf, None])
    assert (s["n"], s["censored"], s["mean"], s["min"], s["max"]) == (2, 1, 2.0, 1.0, 3.0)
    assert spread([2.0])["sd"] is None and spread([])["mean"] is None


def test_a_finding_is_reproduced_only_when_every_criterion_is():
    assert finding_verdict(["reproduced", "reproduced"]) == "reproduced"
    assert finding_verdict(["reproduced", "mixed"]) == "mixed"
    assert finding_verdict(["reproduced", "not reproduced"]) == "mixed"
    assert finding_verdict(["not reproduced", "not reproduced"]) == "not reproduced"
    # a finding with an incomplete criterion is incomplete unless its settled criteria already make it mixed
    assert finding_verdict(["reproduced", "incomplete"]) == "incomplete"
    assert finding_verdict(["not reproduced", "incomplete"]) == "incomplete"
    assert finding_verdict(["mixed", "incomplete"]) == "mixed"
    assert finding_verdict(["reproduced", "not reproduced", "incomplete"]) == "mixed"
    with pytest.raises(ValueError):
        finding_verdict([])
    with pytest.raises(ValueError, match="unknown"):
        finding_verdict(["passed"])


def test_all_on_one_seed_counts_the_seeds_where_every_criterion_passes():
    from conceptlab.analysis.finding_criteria import all_on_one_seed

    a = {"seeds": [{"seed": 100, "passed": True}, {"seed": 101, "passed": False}, {"seed": 102, "passed": True}]}
    b = {"seeds": [{"seed": 100, "passed": False}, {"seed": 101, "passed": True}, {"seed": 102, "passed": True}]}
    assert all_on_one_seed([a, b]) == {"passed": 1, "of": 3, "seeds": [102], "no_run": 0}
    c = {"seeds": [{"seed": 100, "passed": False}, {"seed": 101, "passed": True}, {"seed": 102, "passed": False}]}
    assert all_on_one_seed([a, c])["passed"] == 0  # each passes somewhere, never together
    unrun = {"seeds": [{"seed": 100, "passed": True}, {"seed": 101, "passed": False, "note": "no run"},
                       {"seed": 102, "passed": True}]}
    assert all_on_one_seed([a, unrun]) == {"passed": 2, "of": 3, "seeds": [100, 102], "no_run": 1}
    assert all_on_one_seed([a]) is None  # one criterion: its own count says it
    other = {"seeds": [{"seed": 200, "passed": True}]}
    assert all_on_one_seed([a, other]) is None  # different report seeds: no common seed to read


def test_the_median_absolute_deviation_over_seeds_tolerates_censoring_under_half():
    from conceptlab.analysis.finding_criteria import over_seeds_statistic

    inf = math.inf
    assert over_seeds_statistic([6000, 6000, 7000, 6000, 5000]) == 0.0  # deviations 0, 0, 1000, 0, 1000
    assert over_seeds_statistic([5000, 7000, 9000, 11000, 13000]) == 2000.0
    assert over_seeds_statistic([5000, 7000, 9000, inf, inf]) == 4000.0  # two of five censored: at infinity
    assert over_seeds_statistic([5000, 7000, inf, inf, inf]) is None  # the median itself censored: undefined
    assert over_seeds_statistic([5000, inf, inf]) is None
    assert over_seeds_statistic([5000, 6000]) is None  # fewer than three seeds
    assert over_seeds_statistic([1.0, 2.0, math.nan]) is None
    with pytest.raises(ValueError, match="statistic"):
        over_seeds_statistic([1, 2, 3], "variance")


def test_a_criterion_over_the_seeds_is_decided_once_and_every_seed_carries_its_outcome():
    from conceptlab.analysis.finding_criteria import INCOMPLETE, evaluate_over_seeds

    capability = {100: 6000, 101: 6000, 102: 7000, 103: 6000, 104: 5000}
    behavior = {100: 7000, 101: None, 102: 12000, 103: 9000, 104: 8000}  # None: never (censored high)
    r = evaluate_over_seeds(capability, behavior, "less", margin=1, censored="high", control_censored="high")
    assert r["statistic"] == {"name": "median_absolute_deviation", "value": 0.0, "control": 2000.0,
                              "difference": 2000.0, "value_range": [0.0, 0.0], "control_range": [2000.0, 2000.0]}
    assert (r["passed"], r["of"], r["verdict"]) == (1, 1, "reproduced")
    assert [s["passed"] for s in r["seeds"]] == [True] * 5 and r["seeds"][0]["note"] == "over the seeds"
    assert r["seeds"][1]["control"] == math.inf and r["seeds"][1]["difference"] is None
    # the mutant reading: swap the sides and it fails
    swapped = evaluate_over_seeds(behavior, capability, "less", margin=1, censored="high", control_censored="high")
    assert (swapped["passed"], swapped["verdict"]) == (0, "not reproduced")
    assert all(not s["passed"] for s in swapped["seeds"])
    # a seed without a run: incomplete; a side not measured on a seed: undefined, and it fails
    waiting = evaluate_over_seeds(capability, behavior, "less", 1, censored="high", control_censored="high",
                                  no_run=[104])
    assert waiting["verdict"] == INCOMPLETE and waiting["passed"] == 0
    assert [s["note"] for s in waiting["seeds"]] == ["over the seeds: incomplete"] * 4 + ["no run"]
    unmeasured = evaluate_over_seeds(capability, {**behavior, 101: None}, "less", 1, censored="high")
    assert unmeasured["verdict"] == "not reproduced" and unmeasured["seeds"][0]["note"] == "over the seeds: undefined"
    # a fixed threshold: the spread itself against a number
    assert evaluate_over_seeds(capability, 500.0, "less", 0)["statistic"]["control"] == 500.0
    with pytest.raises(ValueError, match="greater or less"):
        evaluate_over_seeds(capability, behavior, "holds")


def test_the_spread_of_a_group_with_censored_values_is_a_range_not_its_reading_at_infinity():
    from conceptlab.analysis.finding_criteria import over_seeds_range

    inf = math.inf
    # the two censored seeds lie at or beyond 9000 (the largest step seen): the MAD is anywhere in [0, 4000]
    assert over_seeds_range([5000, 7000, 9000, inf, inf]) == (0.0, 4000.0)
    assert over_seeds_range([6000, 6000, 7000, 6000, 5000]) == (0.0, 0.0)  # nothing censored: one number
    assert over_seeds_range([7000, inf, 12000, 9000, 8000]) == (2000.0, 2000.0)  # decided whatever the true step
    assert over_seeds_range([-inf, 1.0, 2.0, 4.0, 5.0]) == (1.0, 2.0)  # censored low: at or below the smallest
    assert over_seeds_range([5000, 7000, inf, inf, inf]) is None  # the median itself censored
    assert over_seeds_range([5000, 6000]) is None


def test_the_range_of_the_median_absolute_deviation_holds_every_true_value_of_the_censored_seeds():
    import numpy as np

    from conceptlab.analysis.finding_criteria import over_seeds_range, over_seeds_statistic

    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(3, 8))
        xs = [float(x) for x in rng.integers(1, 20, n) * 100]
        k = int(rng.integers(1, (n + 1) // 2))  # censored, fewer than half
        for i in rng.choice(n, k, replace=False):
            xs[i] = math.inf if rng.random() < 0.7 else -math.inf
        got = over_seeds_range(xs)
        finite = [x for x in xs if math.isfinite(x)]
        if got is None:
            continue
        lo, hi = got
        seen = []
        for _ in range(60):  # every censored value somewhere in its range, ends included
            draw = [x if math.isfinite(x) else
                    (max(finite) + rng.choice([0, 1, 50, 10 ** 6]) * 100 * rng.random()) if x > 0 else
                    (min(finite) - rng.choice([0, 1, 50, 10 ** 6]) * 100 * rng.random()) for x in xs]
            stat = over_seeds_statistic(draw)
            assert lo - 1e-6 <= stat <= hi + 1e-6, (xs, draw, got)
            seen.append(stat)
        near = over_seeds_statistic([x if math.isfinite(x) else max(finite) if x > 0 else min(finite) for x in xs])
        assert near == pytest.approx(lo) and over_seeds_statistic(xs) == pytest.approx(hi)


def test_a_spread_over_censored_seeds_passes_only_when_decided_whatever_the_censored_seeds_truly_are():
    from conceptlab.analysis.finding_criteria import evaluate_over_seeds

    # capability-steadier-than-behavior as recorded (checkpoints 100..1000; None: never emerged by step 1000)
    steps = {100: 900, 101: 700, 102: None, 103: 400, 104: 900}
    baseline = {100: None, 101: 900, 102: 900, 103: 500, 104: None}
    r = evaluate_over_seeds(steps, baseline, "less", 1, censored="high", control_censored="high")
    # at infinity it read 200 against 400 and passed; had the censored seeds emerged at step 1100 it is 200 against
    # 200: the data do not decide it, and it fails
    assert (r["passed"], r["verdict"]) == (0, "not reproduced")
    assert r["seeds"][0]["note"] == "over the seeds: undecided"
    assert r["statistic"]["value_range"] == [0.0, 200.0] and r["statistic"]["control_range"] == [0.0, 400.0]
    assert (r["statistic"]["value"], r["statistic"]["control"]) == (200.0, 0.0)  # the least favourable ends
    fill = {s: 1100 if v is None else v for s, v in steps.items()}
    assert evaluate_over_seeds(fill, {s: 1100 if v is None else v for s, v in baseline.items()}, "less", 1,
                               )["verdict"] == "not reproduced"
    # a censored seed whose true value cannot move the spread: decided, and it passes
    steady = {100: 6000, 101: 6000, 102: 7000, 103: 6000, 104: 5000}
    spread_out = {100: 7000, 101: None, 102: 12000, 103: 9000, 104: 8000}
    ok = evaluate_over_seeds(steady, spread_out, "less", 1, censored="high", control_censored="high")
    assert (ok["verdict"], ok["seeds"][0]["note"]) == ("reproduced", "over the seeds")
    # greater: the value's low end against the control's high end
    up = evaluate_over_seeds(spread_out, steady, "greater", 1, censored="high", control_censored="high")
    assert up["verdict"] == "reproduced" and up["statistic"]["difference"] == 2000.0
    wide = evaluate_over_seeds({100: 5000, 101: 7000, 102: 9000, 103: None, 104: None}, steady, "greater", 1,
                               censored="high")
    assert (wide["verdict"], wide["seeds"][0]["note"]) == ("not reproduced", "over the seeds: undecided")
    # a spread undecided and failing at both ends is a plain failure, not "undecided"
    flat = evaluate_over_seeds(steady, steady, "less", 1)
    assert flat["seeds"][0]["note"] == "over the seeds" and flat["verdict"] == "not reproduced"
