"""Fair emergence statistics on synthetic per-image scores: the bias-matched baseline, censored gaps, the sign test
and median interval across seeds, and the null false-positive rates of the old and the new statistic."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from conceptlab.analysis.emergence_stats import (
    EmergenceRule,
    _emerged_index,
    gap_interval,
    matched_baseline,
    median_interval,
    null_false_positive_rates,
    sign_of,
    sign_test,
    summarize_gaps,
    variants_per_intervention,
)

STEPS = [100.0 * (i + 1) for i in range(10)]
RULE = EmergenceRule(threshold=0.5, stay=2, confidence=True)
N = 24


def _rising_pool(step_index: int, rng: np.random.Generator, size: int = 96) -> np.ndarray:
    """Per-image scores whose mean rises slowly from 0.3 to 0.9 over the 10 checkpoints (Beta draws, as probe
    products are), so when a batch of 24 crosses the bar varies from batch to batch."""
    mean = 0.3 + 0.6 * step_index / 9
    return rng.beta(4 * mean, 4 * (1 - mean), size=size)


def _table(rng, interventions: dict[str, int], streams: int) -> pd.DataFrame:
    """A run's interventions table where every variant and every naive stream draws from the same distribution."""
    rows = []
    for i, step in enumerate(STEPS):
        pool = _rising_pool(i, rng, 1000)
        batches = [("naive", "prompt", 0)] + [("naive_repeats", f"stream {j}", j) for j in range(1, streams)]
        batches += [(x, f"v{j}", j) for x, k in interventions.items() for j in range(k)]
        for name, label, stream in batches:
            scores = rng.choice(pool, N)
            rows.append({"step": step, "target": "11", "intervention": name, "variant": label, "stream": stream,
                         "n": N, "score": float(scores.mean()), "image_scores": list(scores)})
    return pd.DataFrame(rows)


def test_matched_baseline_is_the_best_of_the_first_k_naive_streams():
    table = _table(np.random.default_rng(0), {"over_prompting": 3}, streams=3)
    base = matched_baseline(table, "11", 2)
    naive = table[table["intervention"].isin(["naive", "naive_repeats"]) & (table["stream"] < 2)]
    assert base["score"].tolist() == naive.groupby("step")["score"].max().tolist()
    assert set(base["stream"]) <= {0, 1} and list(base["step"]) == STEPS
    assert matched_baseline(table, "11", 1)["score"].tolist() == table[table["intervention"] == "naive"]["score"].tolist()
    with pytest.raises(ValueError, match="needs 4 naive streams per checkpoint; the table has 3"):
        matched_baseline(table, "11", 4)
    assert variants_per_intervention(table, "11") == {"naive": 1, "naive_repeats": 2, "over_prompting": 3}


def test_gap_intervals_are_censored_at_the_last_checkpoint():
    assert gap_interval(300, 500, 1000) == (200, 200)
    assert gap_interval(300, math.nan, 1000) == (700, math.inf)  # the baseline never: > last − 300
    assert gap_interval(math.nan, 500, 1000) == (-math.inf, -500)
    assert gap_interval(math.nan, math.nan, 1000) == (-math.inf, math.inf)
    assert [sign_of(g) for g in [(200, 200), (0, 0), (700, math.inf), (-math.inf, -500), (-math.inf, math.inf)]] == \
        [1, 0, 1, -1, 0]
    assert sign_of(gap_interval(1000, math.nan, 1000)) == 1  # emerged at the last checkpoint, the baseline never


def test_a_series_that_never_emerged_is_censored_where_it_could_still_emerge_not_after_the_run():
    """With `stay` = 3 a crossing at the last two checkpoints cannot count within the run: a baseline above the bar
    at 5,000 and 6,000 only never emerged, yet one more checkpoint above would make it emerge at 5,000, a gap of
    3,000; the interval must hold that gap (censored at 5,000, not after 6,000)."""
    steps = [1000, 2000, 3000, 4000, 5000, 6000]
    rule = EmergenceRule(threshold=0.5, stay=3, confidence=False)
    intervention = [0.1, 0.9, 0.9, 0.9, 0.9, 0.9]
    baseline = [0.1, 0.1, 0.1, 0.1, 0.9, 0.9]
    x, b = rule.step(steps, intervention, None), rule.step(steps, baseline, None)
    assert (x, math.isnan(b)) == (2000, True)
    low, high = gap_interval(x, b, rule.censor_step(steps))
    longer = rule.step(steps + [7000], baseline + [0.9], None)
    assert longer == 5000 and low <= longer - x <= high, (low, high)
    assert (low, high) == (3000, math.inf)
    assert EmergenceRule(stay=2).censor_step(steps) == 6000 == EmergenceRule(stay=1).censor_step(steps)
    assert EmergenceRule(stay=5).censor_step(steps[:2]) == 2000  # stay clamped to the run's length, as emergence_step
    assert sign_of(gap_interval(x, b, rule.censor_step(steps))) == 1  # signs are unchanged by the censoring point


def test_sign_test_and_median_interval():
    gaps = [(200, 200), (100, 100), (700, math.inf), (-100, -100), (-math.inf, math.inf)]
    test = sign_test(gaps)
    assert (test["positive"], test["negative"], test["untested"]) == (3, 1, 1)
    assert test["p_one_sided"] == pytest.approx(5 / 16)  # P(X ≥ 3), X ~ Bin(4, ½)
    assert sign_test([(100, 100)] * 5)["p_one_sided"] == pytest.approx(1 / 32)
    med = median_interval(gaps)
    assert med["median_low"] == 100 and med["median_high"] == 200  # ends (−∞, −100, 100, 200, 700) and (…, ∞, ∞)
    assert med["ci_low"] == -math.inf and med["ci_high"] == math.inf and med["coverage"] == pytest.approx(1 - 2 / 32)
    many = median_interval([(g, g) for g in range(-50, 50)], confidence=0.95)
    assert many["coverage"] >= 0.95 and many["ci_low"] < -0.5 < many["ci_high"]


def test_an_intervention_as_good_as_naive_prompting_gets_a_gap_interval_covering_zero():
    """Best of k variants against the best of k naive batches, all from one distribution: no systematic gap."""
    rng = np.random.default_rng(1)
    gaps = []
    for _ in range(40):  # 40 synthetic seeds
        table = _table(rng, {"over_prompting": 3}, streams=3)
        curves = {x: table[table["intervention"] == x].groupby("step")["score"].max() for x in ("over_prompting",)}
        e_x = RULE.step(STEPS, curves["over_prompting"].to_numpy(), N)
        base = matched_baseline(table, "11", 3)
        gaps.append(gap_interval(e_x, RULE.step(base["step"], base["score"], N), STEPS[-1]))
    summary = summarize_gaps(gaps)
    assert summary["ci_low"] <= 0 <= summary["ci_high"]
    assert summary["p_two_sided"] > 0.05
    assert summary["positive"] + summary["negative"] >= 10  # the test had something to test


def test_the_vectorised_rule_is_emergence_step():
    rng = np.random.default_rng(2)
    curves = rng.uniform(0.2, 0.9, size=(300, 10))
    for rule in (RULE, EmergenceRule(0.5, 3, False), EmergenceRule(0.6, 1, True)):
        index = _emerged_index(curves, rule, N)
        for c, i in zip(curves, index):
            step = rule.step(STEPS, c, N)
            assert (math.isnan(step) and i == 10) or STEPS[i] == step


def test_null_rates_old_statistic_is_biased_new_one_is_not():
    rng = np.random.default_rng(3)
    pools = {f"run{s}": [_rising_pool(i, rng) for i in range(10)] for s in range(5)}
    design = {"over_prompting": 4, "linear": 3, "patching": 1}
    rates = null_false_positive_rates(pools, STEPS, design, N, RULE, replicates=300, seed=0)
    assert rates["replicates"] == 300 and rates["runs"] == 5
    # earliest of three interventions (best of 4, 3 and 1 variants) against one naive curve: usually "first"
    assert rates["old_per_seed"] > 0.5
    for x in design:  # each against its matched baseline: at most about a fair coin (ties count against)
        assert rates["new_per_seed"][x] < 0.5
        assert rates["new_sign_test"][x] <= 0.1
    assert rates["new_sign_test_any"] < rates["old_all_seeds"]
    for x in design:  # the suite's "steadier across seeds" claim, the intervention being naive prompting: a coin
        assert rates["spread_steadier"][x] < 0.5  # at most (ties fail)
    never = {"run0": [np.zeros(50)] * 10}
    flat = null_false_positive_rates(never, STEPS, design, N, RULE, replicates=50)
    assert flat["old_per_seed"] == 0 and flat["new_sign_test_any"] == 0 and flat["old_all_seeds"] == 0


def test_null_rates_refuse_what_they_cannot_resample():
    with pytest.raises(ValueError, match="no runs"):
        null_false_positive_rates({}, STEPS, {"x": 1}, N)
    with pytest.raises(ValueError, match="one pool of naive scores per checkpoint"):
        null_false_positive_rates({"r": [np.ones(3)]}, STEPS, {"x": 1}, N)
    with pytest.raises(ValueError, match="no naive images"):
        null_false_positive_rates({"r": [np.ones(3)] * 9 + [np.ones(0)]}, STEPS, {"x": 1}, N)


def test_the_resampled_null_p_value_is_calibrated_when_the_intervention_is_naive_prompting():
    """Experiments where an intervention's variants come from the naive images' own distribution: its p value
    against the resampled null is below 0.05 about as often as 5% of the time, and an intervention that is better
    (a higher score at every checkpoint) gets a small one."""
    rng = np.random.default_rng(4)
    small, p_better = 0, []
    for trial in range(20):
        pools = {f"run{s}": [_rising_pool(i, rng) for i in range(10)] for s in range(5)}
        net = {"same": 0, "better": 0}
        for run, pool in pools.items():
            def batches(k, shift=0.0):
                return np.array([[np.clip(rng.choice(p, N) + shift, 0, 1).mean() for p in pool] for _ in range(k)])
            base = RULE.step(STEPS, batches(2).max(0), N)
            for name, shift in (("same", 0.0), ("better", 0.15)):
                net[name] += sign_of(gap_interval(RULE.step(STEPS, batches(2, shift).max(0), N), base, STEPS[-1]))
        rates = null_false_positive_rates(pools, STEPS, {"same": 2, "better": 2}, N, RULE, replicates=200,
                                          seed=trial, observed=net)
        small += rates["p_resampled"]["same"] < 0.05
        p_better.append(rates["p_resampled"]["better"])
    assert small <= 3  # 20 trials at α = 0.05: 1 expected; 3 or fewer with probability 0.98
    assert np.median(p_better) < 0.05


def test_the_null_follows_the_same_images_through_training_where_the_pools_line_up():
    """The evaluation reuses each image's noise at every checkpoint: a replicate draws its images once. Images that
    score 1 at every checkpoint (and the others 0) then give a baseline that, once lucky, stays lucky: naive prompting
    'emerges' more often than when each checkpoint is drawn on its own."""
    rng = np.random.default_rng(5)
    persistent = {"run0": [np.r_[np.ones(30), np.zeros(34)]] * 10}
    shuffled = {"run0": [rng.permutation(np.r_[np.ones(30), np.zeros(34)]) for _ in range(10)]}
    rule = EmergenceRule(0.5, 3, False)
    a = null_false_positive_rates(persistent, STEPS, {"x": 1}, 8, rule, replicates=400, seed=1)
    b = null_false_positive_rates({"run0": persistent["run0"][:9] + [np.ones(63)]}, STEPS, {"x": 1}, 8, rule,
                                  replicates=10, seed=1)
    assert a["paired"] and not b["paired"]
    # pairing matters only through the order of images: shuffling each checkpoint's pool leaves a paired draw as
    # independent as the unpaired one, and the persistent pools make the old statistic's ties (both emerge at the
    # same checkpoint) far more common, so it reads "first" less often
    c = null_false_positive_rates(shuffled, STEPS, {"x": 1}, 8, rule, replicates=400, seed=1)
    assert a["old_per_seed"] < c["old_per_seed"]
