"""Fair emergence statistics: a bias-matched naive baseline, censored gaps across seeds, and their null rates.

"Capability before behavior" compares interventions with naive prompting. An intervention with k variants is scored
by its best variant, re-chosen at every checkpoint; the earliest of several interventions is then compared with
one naive curve. Were every intervention exactly as good as naive prompting, the best of k and the earliest of m
would still come first more often than not. The statistics here compare like with like:

- **bias-matched baseline** (`matched_baseline`): naive prompting with the same number of chances — the best, at
  every checkpoint, of k independent naive batches (naive prompting's stream 0 and its repeats on streams 1..k−1),
  the same images per batch and the same emergence rule as the intervention;
- **censored gap** (`gap_interval`): baseline step − intervention step per seed, as an interval when either never
  emerged, censored at c, the earliest step a series that never emerged could still emerge at had the run gone on
  (`EmergenceRule.censor_step`: "> last" when one checkpoint suffices, else the `stay` − 1-th last checkpoint):
  both emerged → [g, g]; only the intervention → (c − e_x, ∞); only the baseline → (−∞, e_b − c); neither →
  (−∞, ∞), undetermined;
- **across seeds** (`summarize_gaps`): a paired sign test over the seeds whose gap has a sign (exact binomial,
  one-sided for "capability first" and two-sided), and distribution-free bounds on the median gap — the median of
  the interval ends, with an order-statistic confidence interval at ≥ the asked confidence (conservative under
  censoring), the achieved confidence reported;
- **null rates** (`null_false_positive_rates`): the false-positive rate of the old and the new statistic when every
  "intervention" is naive prompting, by resampling images (with replacement) from the stored per-image naive scores
  of each checkpoint — no retraining.

Pure functions on numpy arrays and pandas tables, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from conceptlab.analysis.emergence import emergence_step, wilson_interval
from conceptlab.analysis.finding_criteria import over_seeds_range


@dataclass(frozen=True)
class EmergenceRule:
    """What counts as emerged: the score's Wilson lower bound over n images (`confidence`) or the score itself ≥
    `threshold` for `stay` checkpoints."""

    threshold: float = 0.5
    stay: int = 2
    confidence: bool = True

    def step(self, steps: Sequence[float], scores: Sequence[float], n: Sequence[int] | int | None) -> float:
        return emergence_step(steps, scores, self.threshold, self.stay, n if self.confidence else None)

    def censor_step(self, steps: Sequence[float]) -> float:
        """The earliest step at which a series that never emerged over `steps` could still emerge, had the run gone
        on: with `stay` = s ≥ 2 (clamped to the run's length, as `emergence_step` does), a crossing at the s − 1
        last checkpoints needs checkpoints the run does not have, so it is the (s − 1)-th last checkpoint (≥); with
        s = 1 (or None, "stays to the end") it is after the last one (> last, returned as the last step)."""
        steps = np.sort(np.asarray(steps, dtype=float))
        if steps.size == 0:
            raise ValueError("censor_step needs at least one checkpoint")
        s = 1 if self.stay is None else min(self.stay, steps.size)
        return float(steps[steps.size - s + 1]) if s >= 2 else float(steps[-1])


def matched_baseline(table: pd.DataFrame, target: str, k: int) -> pd.DataFrame:
    """Per step, the best score over naive prompting's streams 0..k−1 for `target` (columns step, score, n, stream).

    `table` is a run's interventions table (rows per target × intervention × variant × step with `stream`): naive
    prompting is stream 0 of intervention "naive", its repeats streams 1.. of "naive_repeats"."""
    if k < 1:
        raise ValueError(f"k (variants of the intervention matched) must be ≥ 1, got {k}")
    rows = table[(table["target"] == target) & table["intervention"].isin(["naive", "naive_repeats"])]
    rows = rows[rows["stream"] < k]
    have = rows.groupby("step")["stream"].nunique()
    if rows.empty or (have < k).any():
        short = int(have.min()) if len(have) else 0
        raise ValueError(f"the bias-matched baseline of k = {k} needs {k} naive streams per checkpoint; "
                         f"the table has {short} (set eval.interventions.matched_naive)")
    best = rows.loc[rows.groupby("step")["score"].idxmax(), ["step", "score", "n", "stream"]]
    return best.sort_values("step").reset_index(drop=True)


def variants_per_intervention(table: pd.DataFrame, target: str) -> dict[str, int]:
    """How many variants each intervention evaluated for `target` (at its first checkpoint)."""
    rows = table[table["target"] == target]
    first = rows[rows["step"] == rows["step"].min()]
    return {str(k): int(v) for k, v in first.groupby("intervention", sort=False)["variant"].nunique().items()}


def gap_interval(intervention_step: float, baseline_step: float, censor_step: float) -> tuple[float, float]:
    """The gap baseline − intervention (positive: the intervention first) as an interval; NaN steps never emerged
    and are censored at `censor_step` (`EmergenceRule.censor_step`: the last checkpoint when one checkpoint
    suffices, where the bound is exclusive, e.g. (last − e_x, ∞); earlier when `stay` ≥ 2, where it is inclusive
    but never reached: an emerged step is before it)."""
    x, b = intervention_step, baseline_step
    x_done, b_done = not math.isnan(x), not math.isnan(b)
    if x_done and b_done:
        return (b - x, b - x)
    if x_done:
        return (censor_step - x, math.inf)
    if b_done:
        return (-math.inf, b - censor_step)
    return (-math.inf, math.inf)


def sign_of(interval: tuple[float, float]) -> int:
    """+1 when the whole interval is > 0, −1 when < 0, 0 otherwise (a tie or undetermined). A censored bound counts
    as strict, so (0, ∞) — the intervention emerged at the last checkpoint, the baseline never — is +1."""
    lo, hi = interval
    if lo > 0 or (math.isinf(hi) and lo == 0 and not math.isinf(lo)):
        return 1
    if hi < 0 or (math.isinf(lo) and hi == 0 and not math.isinf(hi)):
        return -1
    return 0


def sign_test(intervals: Sequence[tuple[float, float]]) -> dict[str, float | int]:
    """Exact binomial sign test of the gaps' signs (ties and undetermined seeds left out): one-sided p of at least
    this many positive signs, and two-sided p."""
    signs = [sign_of(iv) for iv in intervals]
    pos, neg = signs.count(1), signs.count(-1)
    n = pos + neg
    if n == 0:
        return {"positive": 0, "negative": 0, "untested": len(signs), "p_one_sided": 1.0, "p_two_sided": 1.0}
    from scipy.stats import binom  # lazy: docs/benchmarks.md, "Command start-up"

    p_one = float(binom.sf(pos - 1, n, 0.5))  # P(X ≥ pos)
    p_two = float(min(1.0, 2 * min(binom.cdf(pos, n, 0.5), binom.sf(pos - 1, n, 0.5))))
    return {"positive": pos, "negative": neg, "untested": len(signs) - n, "p_one_sided": p_one, "p_two_sided": p_two}


def median_interval(intervals: Sequence[tuple[float, float]], confidence: float = 0.95) -> dict[str, float]:
    """Distribution-free bounds on the median gap from interval-valued gaps.

    `median_low`/`median_high`: the medians of the lower and of the upper ends (the median lies between them for any
    values inside the intervals). `ci_low`/`ci_high`: order statistics x_(r) of the lower ends and x_(n+1−r) of the
    upper ends with the largest r whose coverage 1 − 2·P(Bin(n, ½) < r) is ≥ `confidence` (r = 1 if none is);
    `coverage` is what that r achieves (with 5 seeds at most 1 − 2/32 = 0.9375)."""
    if not intervals:
        raise ValueError("median_interval needs at least one gap")
    lows = np.sort([lo for lo, _ in intervals])
    highs = np.sort([hi for _, hi in intervals])
    n = len(intervals)
    r = 1
    from scipy.stats import binom  # lazy: docs/benchmarks.md, "Command start-up"

    for cand in range(1, n // 2 + 1):
        if 1 - 2 * binom.cdf(cand - 1, n, 0.5) >= confidence:
            r = cand
    coverage = float(1 - 2 * binom.cdf(r - 1, n, 0.5))
    return {"median_low": float(np.median(lows)), "median_high": float(np.median(highs)),
            "ci_low": float(lows[r - 1]), "ci_high": float(highs[n - r]), "coverage": coverage}


def summarize_gaps(intervals: Sequence[tuple[float, float]], confidence: float = 0.95) -> dict:
    """Sign test and median bounds of one intervention's gaps over seeds."""
    return {**sign_test(intervals), **median_interval(intervals, confidence), "seeds": len(intervals)}


# -- the null ---------------------------------------------------------------------------------------------------
def _emerged_index(scores: np.ndarray, rule: EmergenceRule, n: int) -> np.ndarray:
    """Index of the emergence checkpoint along the last axis (scores [..., T]); T where never. The same rule as
    `analysis.emergence.emergence_step` (Wilson bound on n when `rule.confidence`; `stay` checkpoints or to the end)."""
    values = wilson_interval(scores, np.full(scores.shape, n))[0] if rule.confidence else scores
    above = values >= rule.threshold
    t = above.shape[-1]
    stay = min(rule.stay, t)
    out = np.full(above.shape[:-1], t, dtype=int)
    for i in range(t - 1, -1, -1):  # a run of `stay` above from i (shorter at the end is not enough)
        if i + stay <= t:
            ok = above[..., i : i + stay].all(axis=-1)
            out = np.where(ok, i, out)
    return out


def seed_spread(steps: Sequence[float | None]) -> tuple[float, float] | None:
    """The seeds' spread of an emergence step as the findings suite reads it: the median absolute deviation, as
    (lowest, highest) over the true steps the seeds that never emerged (NaN or None) may have, from the largest step
    seen to +inf (`analysis.finding_criteria.over_seeds_range`); None where it is undefined."""
    return over_seeds_range([math.inf if x is None or math.isnan(x) else float(x) for x in steps])


def _steadier(x_steps: np.ndarray, baseline_steps: np.ndarray) -> bool:
    """Whether X's emergence steps over the runs spread at least one step less than its baseline's, decided as the
    findings suite decides it: at the least favourable ends of each side's range over the true steps its
    never-emerged runs may have (`analysis.finding_criteria.over_seeds_range`)."""
    a, b = seed_spread(x_steps), seed_spread(baseline_steps)
    return a is not None and b is not None and b[0] - a[1] >= 1


def null_false_positive_rates(
    pools: Mapping[object, Sequence[np.ndarray]],
    steps: Sequence[float],
    design: Mapping[str, int],
    n: int,
    rule: EmergenceRule = EmergenceRule(),
    replicates: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    observed: Mapping[str, int] | None = None,
) -> dict:
    """False-positive rates of "capability before behavior" when every intervention is naive prompting.

    `pools[run]` holds, per checkpoint (in `steps` order), that run's naive per-image scores (stream 0 and its
    repeats, in the same order at every checkpoint); `design` the interventions compared (name → number of variants
    k). Each replicate draws, for every run and batch, n images with replacement from the pool — the same images at
    every checkpoint (`paired`, as the evaluation reuses each image's noise), or each checkpoint's own where the
    pools differ in size: one naive batch, k_X batches per
    "intervention" X (its score at a checkpoint: the best of them) and, for the bias-matched baseline of X, k_X
    fresh naive batches. Returned rates (each over `replicates` replicates):

    - `old_per_seed`: the earliest-of-m statistic in one seed: some intervention emerged and naive prompting did not,
      or later;
    - `old_all_seeds`: the old cross-seed verdict, "capability first in every seed where naive prompting emerged"
      (at least one such seed);
    - `new_per_seed[X]`: the bias-matched gap of X is positive in one seed;
    - `new_sign_test[X]`: X's one-sided sign test over the runs has p < `alpha`; `new_sign_test_any`: some X has;
    - `spread_steadier[X]`: the findings suite's claim "capability varies less across seeds than behavior" passes:
      over the runs, the median absolute deviation of X's emergence step is at least one step below its bias-matched
      baseline's whatever the true steps of the runs that never emerged (`analysis.finding_criteria.over_seeds_range`:
      decided at the least favourable ends; undefined fails);
    - with `observed` (X → the runs where X's bias-matched gap was positive minus those where it was negative):
      `p_resampled[X]`, the share of replicates with at least that net count (+1 in numerator and denominator) — a
      test of X against "as good as naive prompting" calibrated on this data's own noise, where the sign test
      assumes a positive and a negative gap equally likely and ignores how often neither emerges.
    """
    runs = list(pools)
    if not runs:
        raise ValueError("no runs to resample")
    steps = np.asarray(steps, dtype=float)
    t = len(steps)
    if any(len(pools[r]) != t for r in runs):
        raise ValueError("every run needs one pool of naive scores per checkpoint")
    if any(len(p) == 0 for r in runs for p in pools[r]):
        raise ValueError("a checkpoint has no naive images to resample")
    rng = np.random.default_rng(seed)
    names = list(design)
    batches = 1 + 2 * sum(design.values())
    # The evaluation draws each image's noise from a stream seeded without the step: image i of a stream starts from
    # the same noise at every checkpoint, so its scores are correlated over training. Where every checkpoint's pool
    # holds the same images in the same order (the same streams × images), a replicate draws its images once and
    # follows them through the checkpoints; otherwise each checkpoint is drawn on its own (`paired` says which).
    paired = all(len({len(pool) for pool in pools[r]}) == 1 for r in runs)
    censor = rule.censor_step(steps)

    def draw(run) -> np.ndarray:  # [replicates, batches, T]: mean score of n resampled images
        out = np.empty((replicates, batches, t))
        sizes = {len(pool) for pool in pools[run]}
        shared = rng.integers(0, sizes.pop(), size=(replicates, batches, n)) if paired else None
        for j, pool in enumerate(pools[run]):
            pool = np.asarray(pool, dtype=float)
            idx = shared if paired else rng.integers(0, len(pool), size=(replicates, batches, n))
            out[:, :, j] = pool[idx].mean(axis=-1)
        return out

    def step_of(index: np.ndarray) -> np.ndarray:
        return np.where(index < t, steps[np.minimum(index, t - 1)], np.nan)

    naive_steps, x_steps, b_steps = [], {x: [] for x in names}, {x: [] for x in names}
    for run in runs:
        scores = draw(run)
        naive_steps.append(step_of(_emerged_index(scores[:, 0], rule, n)))
        col = 1
        for x in names:
            k = design[x]
            x_steps[x].append(step_of(_emerged_index(scores[:, col : col + k].max(axis=1), rule, n)))
            b_steps[x].append(step_of(_emerged_index(scores[:, col + k : col + 2 * k].max(axis=1), rule, n)))
            col += 2 * k
    naive = np.stack(naive_steps, 1)  # [replicates, runs]
    xs = {x: np.stack(v, 1) for x, v in x_steps.items()}
    bs = {x: np.stack(v, 1) for x, v in b_steps.items()}

    earliest = np.fmin.reduce(np.stack([xs[x] for x in names]), axis=0)  # NaN only where none emerged
    some = ~np.isnan(earliest)
    first = some & (np.isnan(naive) | (earliest < naive))
    naive_emerged = ~np.isnan(naive)
    with np.errstate(invalid="ignore"):
        old_all = naive_emerged.any(axis=1) & np.where(naive_emerged, first, True).all(axis=1)

    out: dict = {"replicates": replicates, "runs": len(runs), "n": n, "design": dict(design), "alpha": alpha,
                 "paired": paired,
                 "old_per_seed": float(first.mean()), "old_all_seeds": float(old_all.mean()),
                 "new_per_seed": {}, "new_sign_test": {}, "p_resampled": {}, "spread_steadier": {}}
    significant_any = np.zeros(replicates, dtype=bool)
    from scipy.stats import binom  # lazy: docs/benchmarks.md, "Command start-up"

    for x in names:
        signs = np.zeros_like(naive)
        for r in range(replicates):
            for s in range(len(runs)):
                signs[r, s] = sign_of(gap_interval(xs[x][r, s], bs[x][r, s], censor))
        pos, neg = (signs > 0).sum(axis=1), (signs < 0).sum(axis=1)
        tested = pos + neg
        p = np.where(tested > 0, binom.sf(pos - 1, np.maximum(tested, 1), 0.5), 1.0)
        significant = (p < alpha) & (pos > neg)
        significant_any |= significant
        out["new_per_seed"][x] = float((signs > 0).mean())
        out["spread_steadier"][x] = float(np.mean([_steadier(xs[x][r], bs[x][r]) for r in range(replicates)]))
        out["new_sign_test"][x] = float(significant.mean())
        if observed is not None and x in observed:
            out["p_resampled"][x] = float((1 + (pos - neg >= observed[x]).sum()) / (1 + replicates))
    out["new_sign_test_any"] = float(significant_any.mean())
    return out
