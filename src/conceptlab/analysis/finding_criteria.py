"""A finding's pass criterion over report seeds, on plain numbers: censored values, trends, margins, verdicts.

A criterion compares, on every report seed, a value of the trained model with the same kind of value of its binding
control (or with a fixed threshold) in a direction fixed before the report seeds were run:

- `greater`: value − control ≥ margin,
- `less`:    control − value ≥ margin,
- `holds`:   the value itself is true (a truth value the study computed, e.g. "departs from every control").

A negative margin is a tolerance: `greater` with margin −0.1 reads "the value is not more than 0.1 below the
control" (how an absence is claimed, e.g. "guidance does not help before the transition").

**Censored values.** An event that did not happen within a run (an emergence step, a learning time) is recorded as
missing. A criterion says what a missing value stands for: `censored: high` (later than every step measured, +∞),
`low` (−∞; e.g. the lower end of a gap whose intervention never emerged) or `none` (missing means not measured, and
the seed fails: a criterion is never passed by a run that did not measure it). With censoring, a seed passes when
the comparison is decided whatever the true value is: a finite value before a censored control's +∞ passes a `less`
criterion; two censored values (neither event happened) decide nothing, and the seed fails.

**Trends.** `trend(xs, ys)` is Spearman's rank correlation of a value with a config axis over one seed's runs
(censored values rank beyond every finite one; ties share their mean rank); NaN when either side is constant.

**Seeds without a run.** A report seed whose run is not finished (not run yet, failed, or left out of an
evaluation of the finished runs only) is neither censored nor measured: it fails, with the note "no run", and is
counted apart. Censoring speaks only for a run that finished without the event.

**Verdict rule.** Over seeds, `reproduced` when at least `min_seeds` pass (every seed by default), `not reproduced`
when none does, `mixed` otherwise; a finding with several criteria is `reproduced` when every criterion is,
`not reproduced` when none is reproduced and none is mixed, `mixed` otherwise. While seeds have no run, a verdict
the missing seeds could still change is `incomplete` (enough passes already: `reproduced`; some passes and too few
seeds left to reach `min_seeds`: `mixed`); a finding with an `incomplete` criterion is `mixed` when its settled
criteria already make it so (one mixed, or one reproduced and one not), `incomplete` otherwise.

**Over the seeds.** A claim about the report seeds as a group (e.g. "capability probes vary little across seeds,
behavior a lot") compares one statistic of the values over the seeds with the same statistic of the controls'
(`evaluate_over_seeds`; `OVER_SEEDS` names the statistics: the median absolute deviation, defined while fewer than
half the values are censored). As for one seed, it passes only when the comparison is decided whatever the censored
values truly are: a value censored high lies anywhere from the largest finite value of its side (the side's runs
share their checkpoints, so an event never seen happens after every step another seed saw it at) to +∞ (low: from
−∞ to the smallest), the statistic is taken at both ends of that range (`over_seeds_range`) and the comparison must
hold at its least favourable end; one that holds at some true values and not at others fails as "undecided". It
passes or fails once ("1/1"); every seed's row carries that outcome, so the seeds' conjunction (`all_on_one_seed`)
holds the group claim on each of them. It needs at least 3 measured seeds and every seed's run.

**Whole on one seed.** `all_on_one_seed` counts the report seeds on which every criterion of a finding passes at
once: a finding is a conjunction on each seed, and criteria that pass on different seeds make no seed show it.

Pure functions on plain numbers; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Collection, Mapping, Sequence

import numpy as np

from conceptlab.analysis.control_claims import DIRECTIONS, VERDICTS, verdict

CENSORING = ("none", "high", "low")
OVER_SEEDS = ("median_absolute_deviation",)
MIN_SEEDS_OVER = 3  # a spread over fewer seeds says little
INCOMPLETE = "incomplete"
FINDING_VERDICTS = (*VERDICTS, INCOMPLETE)
ROUNDING = 1e-9  # a difference equal to the margin up to float rounding (0.7 − 0.5 vs 0.2) passes
__all__ = ["CENSORING", "OVER_SEEDS", "DIRECTIONS", "VERDICTS", "FINDING_VERDICTS", "INCOMPLETE", "NOT_MEASURED",
           "SeedResult", "uncensor", "compare", "trend", "evaluate", "evaluate_over_seeds", "over_seeds_statistic",
           "over_seeds_range", "verdict_with_missing", "finding_verdict", "all_on_one_seed", "spread"]


@dataclass(frozen=True)
class SeedResult:
    seed: int
    value: float | bool | None     # the trained model's value (±inf: censored)
    control: float | None          # the control's value or the threshold (±inf: censored)
    difference: float | None       # in the criterion's direction: ≥ margin passes (±inf when one side is censored)
    passed: bool
    note: str = ""                 # why a seed failed without a difference: "no run", "not measured", "both censored"


class _NotMeasured:
    """The value of a run that does not hold the measure at all (its summary lacks the path): not measured, never
    censored — unlike a value the run wrote as null (the event did not happen by the last checkpoint)."""

    def __repr__(self) -> str:
        return "NOT_MEASURED"


NOT_MEASURED = _NotMeasured()


def uncensor(x, censored: str = "none") -> float | None:
    """A number, ±inf for a missing value under `censored` high / low, or None (missing and not censored, or
    `NOT_MEASURED`: the run does not hold the measure, whatever the censoring)."""
    if censored not in CENSORING:
        raise ValueError(f"censored must be one of {CENSORING}, got {censored!r}")
    if x is NOT_MEASURED:
        return None
    if x is None or isinstance(x, bool) or (isinstance(x, float) and math.isnan(x)):
        return math.inf if censored == "high" else -math.inf if censored == "low" else None
    return float(x)


def compare(seed: int, value, control, direction: str, margin: float) -> SeedResult:
    """One seed: the difference in the criterion's direction and whether it clears `margin`. `value` and `control`
    are numbers already uncensored (±inf allowed) or None (not measured); for `holds`, `value` is a truth value."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if direction == "holds":
        if value is None:
            return SeedResult(seed, None, None, None, False, "not measured")
        return SeedResult(seed, bool(value), None, None, value is True or value == 1)
    if value is None or control is None:
        return SeedResult(seed, value, control, None, False, "not measured")
    if math.isinf(value) and math.isinf(control) and (value > 0) == (control > 0):
        return SeedResult(seed, value, control, None, False, "both censored")
    diff = value - control if direction == "greater" else control - value
    return SeedResult(seed, value, control, diff, diff >= margin - ROUNDING * max(1.0, abs(margin)))


def trend(xs: Sequence[float], ys: Sequence[float | None]) -> float:
    """Spearman's ρ of ys against xs (ys may hold ±inf for censored values; None or NaN pairs are dropped);
    0 when ys are constant over varying xs (every value the same, e.g. never reached at any x: no trend); NaN with
    fewer than 3 pairs or when xs are constant (nothing to trend against)."""
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if y is not None and not math.isnan(float(y))]
    if len(pairs) < 3:
        return math.nan
    from scipy.stats import rankdata  # lazy: docs/benchmarks.md, "Command start-up"

    x = rankdata([p[0] for p in pairs])
    y = rankdata([p[1] for p in pairs])
    if np.ptp(x) == 0:
        return math.nan
    if np.ptp(y) == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def all_on_one_seed(criteria: Sequence[Mapping]) -> dict | None:
    """On how many report seeds does every criterion pass at once? {"passed", "of", "seeds", "no_run"} over the seeds every
    criterion was evaluated on (each criterion's `seeds`: dicts with seed and passed); None with fewer than two
    criteria or when they do not share their seeds (e.g. different run sets with different report seeds). A finding
    whose criteria each pass on some seeds may hold whole on none: the per-criterion verdicts do not say."""
    if len(criteria) < 2:
        return None
    by_seed = [{int(r["seed"]): bool(r["passed"]) for r in c["seeds"]} for c in criteria]
    seeds = set(by_seed[0])
    if not seeds or any(set(b) != seeds for b in by_seed):
        return None
    whole = sorted(s for s in seeds if all(b[s] for b in by_seed))
    unrun = {int(r["seed"]) for c in criteria for r in c["seeds"] if r.get("note") == "no run"}
    return {"passed": len(whole), "of": len(seeds), "seeds": whole, "no_run": len(unrun)}


def spread(values: Sequence[float]) -> dict:
    """n, mean, sd (ddof 1; None for one value), min, max of the finite values (censored ones counted apart)."""
    finite = [float(v) for v in values if v is not None and not isinstance(v, bool) and math.isfinite(float(v))]
    censored = sum(1 for v in values if v is not None and not isinstance(v, bool) and math.isinf(float(v)))
    if not finite:
        return {"n": 0, "censored": censored, "mean": None, "sd": None, "min": None, "max": None}
    return {"n": len(finite), "censored": censored, "mean": float(np.mean(finite)),
            "sd": float(np.std(finite, ddof=1)) if len(finite) > 1 else None,
            "min": min(finite), "max": max(finite)}


def verdict_with_missing(passed: Sequence[bool], no_run: int = 0, min_seeds: int | None = None) -> str:
    """The verdict over `passed` (every report seed, those without a run as False) when `no_run` of them have no run:
    the plain verdict when every seed ran; else `reproduced` / `mixed` where the missing seeds cannot change it, and
    `incomplete` where they could."""
    if no_run < 0 or no_run > len(passed):
        raise ValueError(f"no_run must be in 0..{len(passed)}, got {no_run}")
    plain = verdict(passed, min_seeds)  # also checks min_seeds
    if no_run == 0 or plain == "reproduced":
        return plain
    n = sum(bool(p) for p in passed)
    need = len(passed) if min_seeds is None else min_seeds
    return "mixed" if n > 0 and n + no_run < need else INCOMPLETE


def _checked_seeds(values: Mapping[int, object], margin: float, no_run: Collection[int]) -> set[int]:
    """The seeds without a run, after checking a criterion's inputs: a finite margin, some seed, and no unknown
    seed among those without a run."""
    if not math.isfinite(margin):
        raise ValueError(f"margin must be a finite number, got {margin}")
    if not values:
        raise ValueError("a criterion needs at least one seed")
    unrun = set(no_run)
    if unrun - set(values):
        raise ValueError(f"no_run seeds {sorted(unrun - set(values))} are not among the seeds {sorted(values)}")
    return unrun


def evaluate(values: Mapping[int, object], controls: Mapping[int, object] | float | None, direction: str,
             margin: float = 0.0, min_seeds: int | None = None, censored: str = "none",
             control_censored: str = "none", no_run: Collection[int] = ()) -> dict:
    """One criterion over seeds. `values`: seed → the trained model's value (not measured: None);
    `controls`: seed → the control's value (a missing seed fails), a fixed threshold (a number), or None for `holds`;
    `no_run`: the seeds (keys of `values`) whose run is not finished: they fail as "no run", never censored.
    Returns the per-seed results (as dicts), passed / of, how many had no run, the verdict, and the spread of values,
    controls and differences."""
    if direction != "holds" and controls is None:
        raise ValueError(f"direction {direction!r} needs a control or a threshold")
    unrun = _checked_seeds(values, margin, no_run)
    rows = []
    for seed in sorted(values):
        if seed in unrun:
            rows.append(SeedResult(seed, None, None, None, False, "no run"))
            continue
        if direction == "holds":
            raw = values[seed]
            missing = raw is None or raw is NOT_MEASURED or (isinstance(raw, float) and math.isnan(raw))
            rows.append(compare(seed, None if missing else raw,
                                None, direction, margin))
            continue
        v = uncensor(values[seed], censored)
        if isinstance(controls, Mapping):
            c = uncensor(controls.get(seed), control_censored)
        else:
            c = float(controls)
        rows.append(compare(seed, v, c, direction, margin))
    return {
        "seeds": [asdict(r) for r in rows],
        "passed": sum(r.passed for r in rows),
        "of": len(rows),
        "no_run": len(unrun),
        "verdict": verdict_with_missing([r.passed for r in rows], len(unrun), min_seeds),
        "values": spread([r.value for r in rows if not isinstance(r.value, bool)]) if direction != "holds" else None,
        "controls": spread([r.control for r in rows]) if isinstance(controls, Mapping) else None,
        "differences": spread([r.difference for r in rows]),
    }


def over_seeds_statistic(values: Sequence[float], statistic: str = "median_absolute_deviation") -> float | None:
    """One number for a group of seeds' values, taken as they are (±inf included: the statistic with the censored
    values at infinity, the far end of `over_seeds_range`). `median_absolute_deviation`: median |x − median x|;
    None (undefined) when the median itself is infinite (over half the values censored on one side) or with fewer
    than `MIN_SEEDS_OVER` values."""
    if statistic not in OVER_SEEDS:
        raise ValueError(f"statistic must be one of {OVER_SEEDS}, got {statistic!r}")
    xs = np.asarray([float(v) for v in values], dtype=float)
    if xs.size < MIN_SEEDS_OVER or np.isnan(xs).any():
        return None
    centre = float(np.median(xs))
    if not math.isfinite(centre):
        return None
    return float(np.median(np.abs(xs - centre)))


def over_seeds_range(values: Sequence[float], statistic: str = "median_absolute_deviation"
                     ) -> tuple[float, float] | None:
    """(lowest, highest) of `statistic` over every true value the group's censored values (±inf) may stand for; the
    same number twice without censoring. A value censored high lies at or above the largest finite value of the
    group (its runs share their checkpoints: an event never seen comes after every step another seed saw it at; the
    run's own last checkpoint is not known here, so the range is if anything wider than the truth), one censored
    low at or below the smallest. None (undefined) when the statistic is undefined at either end: fewer than
    `MIN_SEEDS_OVER` values, a NaN, no finite value, the median itself censored.

    Exact for the median absolute deviation: while the median is not censored it is fixed by finite values over
    the whole range, and every censored value lies beyond it, so its deviation — and the median of the deviations,
    an order statistic — can only grow as the value moves away. The lowest is at the near end (every censored value
    at the group's largest, or smallest, finite value), the highest with them at ±inf."""
    far = over_seeds_statistic(values, statistic)  # also checks the statistic's name
    if far is None:
        return None
    xs = [float(v) for v in values]
    finite = [x for x in xs if math.isfinite(x)]
    if not finite:
        return None
    near = over_seeds_statistic([x if math.isfinite(x) else max(finite) if x > 0 else min(finite) for x in xs],
                                statistic)
    if near is None:
        return None
    return (min(near, far), max(near, far))


def evaluate_over_seeds(values: Mapping[int, object], controls: Mapping[int, object] | float, direction: str,
                        margin: float = 0.0, statistic: str = "median_absolute_deviation", censored: str = "none",
                        control_censored: str = "none", no_run: Collection[int] = ()) -> dict:
    """One criterion about the seeds as a group: `statistic` of the values over every report seed against the same
    statistic of the controls' (or a fixed threshold), in `direction` with `margin`, decided once. Returns the same
    keys as `evaluate` (per-seed rows hold each seed's value and control, no difference, and the group's outcome with
    the note "over the seeds"; passed / of is 1/1 or 0/1) plus `statistic`: its name, each side's range over the
    true values its censored seeds may have (`over_seeds_range`; `value_range`, `control_range`: None for a
    threshold), and the two sides' values and difference at the ends least favourable to the claim, where it is
    decided: it passes only when it holds there, and one that holds only at the favourable ends fails as
    "undecided". A seed without a run makes it `incomplete`; an undefined statistic (a side not measured on a seed,
    fewer than 3 seeds, its median censored) fails it."""
    if direction not in ("greater", "less"):
        raise ValueError(f"a criterion over the seeds compares numbers: direction greater or less, got {direction!r}")
    unrun = _checked_seeds(values, margin, no_run)
    seeds = sorted(values)
    v = {s: uncensor(values[s], censored) for s in seeds}
    if isinstance(controls, Mapping):
        c: dict[int, float | None] = {s: uncensor(controls.get(s), control_censored) for s in seeds}
    else:
        c = {s: float(controls) for s in seeds}

    def side(xs: dict[int, float | None]) -> tuple[float, float] | None:
        if any(x is None for x in xs.values()):
            return None
        return over_seeds_range(list(xs.values()), statistic)

    value_range = control_range = None
    value_stat = control_stat = None
    if unrun:  # the group is not all there: nothing to compute yet
        group = SeedResult(-1, None, None, None, False, "incomplete")
    else:
        value_range = side(v)
        control_range = side(c) if isinstance(controls, Mapping) else (float(controls), float(controls))
        worst = 1 if direction == "less" else 0  # the least favourable end of the value's range (the control's: the other)
        value_stat = None if value_range is None else value_range[worst]
        control_stat = None if control_range is None else control_range[1 - worst]
        if value_stat is None or control_stat is None:
            group = SeedResult(-1, value_stat, control_stat, None, False, "undefined")
        else:  # decided at the least favourable ends; passing at the most favourable only is undecided
            group = compare(-1, value_stat, control_stat, direction, margin)
            if not group.passed and compare(-1, value_range[1 - worst], control_range[worst], direction, margin).passed:
                group = replace(group, note="undecided")
    note = "over the seeds" + (f": {group.note}" if group.note else "")
    rows = [SeedResult(s, None, None, None, False, "no run") if s in unrun else
            SeedResult(s, v[s], c[s], None, group.passed, note) for s in seeds]
    verdict_ = INCOMPLETE if unrun else "reproduced" if group.passed else "not reproduced"
    return {
        "seeds": [asdict(r) for r in rows],
        "passed": int(group.passed),
        "of": 1,
        "no_run": len(unrun),
        "verdict": verdict_,
        "values": spread([r.value for r in rows]),
        "controls": spread([r.control for r in rows]) if isinstance(controls, Mapping) else None,
        "differences": spread([] if group.difference is None else [group.difference]),
        "statistic": {"name": statistic, "value": value_stat, "control": control_stat,
                      "difference": group.difference,
                      "value_range": None if value_range is None else list(value_range),
                      "control_range": None if control_range is None or not isinstance(controls, Mapping)
                      else list(control_range)},
    }


def finding_verdict(verdicts: Sequence[str]) -> str:
    """`reproduced` when every criterion is, `not reproduced` when every one is not, `mixed` when one is mixed or
    they disagree, `incomplete` when one is incomplete and the settled ones do not already make the finding mixed."""
    if not verdicts:
        raise ValueError("a finding needs at least one criterion")
    bad = set(verdicts) - set(FINDING_VERDICTS)
    if bad:
        raise ValueError(f"unknown verdicts {sorted(bad)}; allowed: {FINDING_VERDICTS}")
    if INCOMPLETE in verdicts:
        settled = set(verdicts) - {INCOMPLETE}
        return "mixed" if "mixed" in settled or {"reproduced", "not reproduced"} <= settled else INCOMPLETE
    if all(v == "reproduced" for v in verdicts):
        return "reproduced"
    if all(v == "not reproduced" for v in verdicts):
        return "not reproduced"
    return "mixed"
