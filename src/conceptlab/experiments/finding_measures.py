"""Values of findings that no single run's summary holds: functions the findings suite names by import path.

- `percolation_scaling(seed, ...)` (an `analytic` run set): the percolation model's critical dataset size per N and
  its power-law exponent over N (`analysis.percolation`; no training).
- `images_to_reach(runs, family, n, target)` (a `compute` value): per seed, the training images a bump-world family
  needs to reach `target` generation accuracy at canvas size N, read across a data-efficiency sweep's λ axis
  (`analysis.data_efficiency.size_to_reach`); None (never) when it does not reach it, −inf when it reaches it
  already at the smallest size, not measured when the seed has no run of the family at that size.

- `matched_naive_score(runs, intervention, target, step, ...)` (a `compute` value): per seed, the bias-matched naive
  baseline of one intervention at one checkpoint — the best score of as many naive batches (naive prompting on
  noise streams 0..k−1) as the intervention has variants there (k), as `analysis.emergence_stats` matches them.
- `straight_path_turn(runs, target, part, ...)` (a `compute` value): per seed, the turn of the held-out prompt's
  naive trajectory (its bow from the chord) or, as its control, the 95th percentile of the bow of a straight path
  redrawn at the run's sampling resolution
  (`analysis.turn_null`): the null of the memorization-then-turn finding.
- `replicate_stream_turn(runs, target, part, ...)` (a `compute` value): per seed, the bow of the held-out prompt's
  naive trajectory pooled over every naive noise stream, the critical bow, p-value and level of a sign-flip test on
  the streams' deviations (`analysis.turn_null.stream_turn_test`): the sharper null, where a run has ≥ 5 streams.
- `independent_sigmoids_r2(runs, target)` (a `compute` value): per seed, R² of the gated flow's parameter-matched
  null (`analysis.phenomenology.fit_independent_sigmoids`) on the held-out prompt's naive trajectory.
- `copying_baseline(runs, region, metric)`, `final_accuracy(...)`, `trend_beyond_copying(runs, across, ...)`
  (`compute` values on bump-world runs): per seed, the accuracy of copying the nearest trained label's image
  (`studies.factorization.copying_accuracy`, recomputed from each run's config; no network), the runs' own final
  accuracy, both averaged over the seed's selected runs, and the trend over a config axis of their difference.

A compute function takes the run set's finished runs (`experiments.findings.RunRecord`: seed, flattened config,
summary, folder) and returns {seed: value}: None only where a run measured the value and the event did not happen
(a criterion may read it as censored), `NOT_MEASURED` where nothing was measured. One that reads a seed's runs
together (a trend, a mean, a crossing over a sweep axis) says so with `aggregates = True`; the others read one run
a seed, and the suite refuses a selector that gives them several (`experiments.findings.seed_values`).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from conceptlab.analysis.data_efficiency import data_efficiency_runs, size_to_reach
from conceptlab.analysis.percolation import critical_dataset_size, percolation_curve
from conceptlab.analysis.power_law import fit_power_law
from conceptlab.store.files import read_parquet
from conceptlab.store.run_folder import RunFolder


def percolation_scaling(seed: int, sizes: Sequence[int] = (32, 64), threshold: float = 0.005, trials: int = 10,
                        fractions: Sequence[float] = (0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.15, 0.2,
                                                      0.3, 0.5, 1.0),
                        target: float = 0.5, spacing: float = 1.0, sigma: float = 1.0) -> dict[str, Any]:
    """Critical dataset size (mass ratio ≥ `target`) per N and the exponent b of size* ∝ N^b over the sizes."""
    curve = percolation_curve(list(sizes), list(fractions), (spacing, spacing), (sigma, sigma), threshold, trials,
                              False, seed=seed)
    critical = critical_dataset_size(curve, target)
    ok = critical[np.isfinite(critical["critical_dataset_size"]) & ~critical["censored"]]
    exponent = (fit_power_law(ok["N"].astype(float), ok["critical_dataset_size"].astype(float)).exponent
                if ok["N"].nunique() >= 2 else None)
    nodes = curve.groupby("N")["nodes"].first()
    return {
        "critical_size": {str(int(r.N)): (None if not math.isfinite(r.critical_dataset_size)
                                          else float(r.critical_dataset_size)) for r in critical.itertuples()},
        "critical_fraction": {str(int(r.N)): (None if not math.isfinite(r.critical_dataset_size)
                                              else float(r.critical_dataset_size / nodes[r.N]))
                              for r in critical.itertuples()},
        "exponent": None if exponent is None else float(exponent),
        "threshold": threshold, "trials": trials, "sizes": list(sizes),
    }


percolation_scaling.version = 2  # 2: an independent random stream per (seed, N, λ) (2026-12-03)


def images_to_reach(runs: list, family: str, n: int, target: float = 0.6) -> dict[int, Any]:
    """Per seed: training images the family needs to reach `target` final joint accuracy (trained + unseen 2D
    labels) at canvas size `n`: None when never reached (a criterion reads it as censored high), −inf when reached
    already at the smallest size (the size is at most that: censored low, whatever the criterion's censoring),
    `NOT_MEASURED` when a finished run of the seed lacks its composition table (the crossing would be read from
    fewer sizes than were run) or the seed has no run of the family at size `n` (a family or size named wrong, or
    not run: nothing measured, never "not reached")."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    out: dict[int, Any] = {}
    for seed, mine in _by_seed(runs).items():
        rows, comp = [], []
        for r in mine:
            if r.config.get("data.image_size") is not None and int(r.config["data.image_size"]) != int(n):
                continue
            if r.folder is None or not RunFolder(r.folder).table("composition").is_file():
                rows = None
                break
            rows.append({"run_id": r.run_id, "data.image": r.config.get("data.image"),
                         "data.image_size": r.config.get("data.image_size"),
                         "data.fraction_scope": r.config.get("data.fraction_scope") or "all",
                         "training_images": r.summary.get("training_images")})
            comp.append(read_parquet(RunFolder(r.folder).table("composition")).assign(run_id=r.run_id))
        if not rows:  # a run without its table (None), or no run of the seed at size n
            out[seed] = NOT_MEASURED
            continue
        table = data_efficiency_runs(pd.DataFrame(rows), pd.concat(comp, ignore_index=True))
        at_n = table[table["N"] == int(n)]
        sizes = size_to_reach(at_n, target) if not at_n.empty else None
        hit = None if sizes is None else sizes[sizes["family"] == family]
        if hit is None or hit.empty:
            out[seed] = NOT_MEASURED
            continue
        if bool(hit["censored"].iloc[0]):
            out[seed] = -math.inf
            continue
        value = hit["size_to_reach"].iloc[0]
        out[seed] = None if value is None or not math.isfinite(float(value)) else float(value)
    return out


images_to_reach.aggregates = True  # a crossing over the seed's runs of the training-set size axis


def _by_seed(runs: list) -> dict[int, list]:
    """The runs grouped by report seed, in their order."""
    out: dict[int, list] = {}
    for r in runs:
        out.setdefault(r.seed, []).append(r)
    return out


def _run_table(r, name: str) -> pd.DataFrame | None:
    """A run's table `<name>.parquet`, or None when the run has no folder or no such table."""
    path = None if r.folder is None else RunFolder(r.folder).table(name)
    return read_parquet(path) if path is not None and path.is_file() else None


def matched_naive_score(runs: list, intervention: str, target: str = "11", step: Any = "last",
                        before: dict[str, Any] | None = None, window: int | None = None) -> dict[int, Any]:
    """Per seed: the best naive score over noise streams 0..k−1 at one checkpoint, k the number of variants
    `intervention` has there (its bias-matched naive baseline: each of its variants is paired with a naive batch on
    the same noise stream). The checkpoint is `step` ("last", "first" or a step) or, with `before` = {intervention,
    reaches}, the last checkpoint before that intervention's best variant first scores `reaches` (none when it
    does at the first checkpoint: not measured). With `window` = n: the median of that score over the last n
    checkpoints (as a criterion's `step: {last: n}` reads its value), not measured when the run has fewer. Not
    measured too when the run lacks the interventions table or the naive batches of some stream (a run evaluated
    without `matched_naive`)."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.findings import step_before

    if window is not None and (before is not None or step != "last" or int(window) < 1):
        raise ValueError("matched_naive_score: window reads the last checkpoints (step: last, no before, window ≥ 1)")
    out: dict[int, Any] = {}
    for r in runs:
        table = _run_table(r, "interventions")
        if table is None:
            out[r.seed] = NOT_MEASURED
            continue
        table = table[table["target"].astype(str) == str(target)]
        steps = sorted(table["step"].unique())
        if before is not None:
            rule = table[table["intervention"] == before["intervention"]]
            at = [step_before(rule, "score", float(before["reaches"]))]
        elif window is not None:
            at = steps[-int(window):] if len(steps) >= int(window) else [None]
        else:
            at = [(steps[0] if step == "first" else steps[-1] if step == "last" else step) if steps else None]
        scores = [None if s is None else _matched_naive_at(table[table["step"] == s], intervention) for s in at]
        out[r.seed] = NOT_MEASURED if any(v is None for v in scores) else float(np.median(scores))
    return out


def _matched_naive_at(here: pd.DataFrame, intervention: str) -> float | None:
    """The best naive score over the noise streams `intervention`'s variants use, at one checkpoint's rows; None
    when the intervention or a stream's naive batch is missing there."""
    k = here.loc[here["intervention"] == intervention, "variant"].nunique()
    naive = here[here["intervention"].isin(["naive", "naive_repeats"]) & (here["stream"] < k)]
    if k == 0 or naive["stream"].nunique() < k:
        return None
    return float(naive["score"].max())


@functools.lru_cache(maxsize=256)
def _authors_times_of(path: str, stamp: float, threshold: float) -> pd.DataFrame:
    """`analysis.concept_space.authors_learning_times` of one concept-space table and version (`stamp`: its mtime):
    read once when several criteria sides (the value, its control, another concept) ask the same run."""
    from conceptlab.analysis.concept_space import authors_learning_times

    return authors_learning_times(read_parquet(Path(path)), threshold=threshold)


def _authors_time(r, concept: str, split: str, threshold: float | None) -> Any:
    """One run's learning time of `concept` on `split` by the authors' definition: a step, None when never,
    NOT_MEASURED when the run lacks the concept-space table, the split or the concept."""
    from conceptlab.analysis.concept_space import AUTHORS_THRESHOLD
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    path = None if r.folder is None else RunFolder(r.folder).table("concept_space")
    if path is None or not path.is_file():
        return NOT_MEASURED
    cut = threshold if threshold is not None else r.config.get("eval.accuracy_threshold", AUTHORS_THRESHOLD)
    times = _authors_times_of(str(path), path.stat().st_mtime, float(cut))
    row = times[(times["split"] == split) & (times["concept"] == concept)]
    if row.empty:
        return NOT_MEASURED
    step = float(row["learning_time"].iloc[0])
    return None if math.isnan(step) else step


def authors_learning_time(runs: list, concept: str, split: str = "held_out",
                          threshold: float | None = None) -> dict[int, Any]:
    """Per seed: the step at which `concept` is learned on `split` by the authors' definition
    (`analysis.concept_space.authors_learning_times`: Gaussian smoothing σ 1.5 checkpoints, the centre of the first
    3 checkpoints above the threshold: the run's own `eval.accuracy_threshold` unless given, the spec allowing 0.8
    or 0.9), read from the run's concept-space table; None when never (censored high by the
    criterion), not measured when the run lacks the table, the split or the concept. The summary's
    `learning_time` is our trailing variant of the same reading."""
    return {r.seed: _authors_time(r, concept, split, threshold) for r in runs}


def authors_learning_time_trend(runs: list, concept: str, across: str, split: str = "held_out",
                                threshold: float | None = None) -> dict[int, Any]:
    """Per seed: Spearman ρ, over the seed's runs, of `concept`'s learning time on `split` (the authors'
    definition; never learned counts as later than any step) with the config key `across` (e.g.
    data.color_separation); 0 when every run has the same time, never learned included (`finding_criteria.trend`).
    Not measured with fewer than 3 runs or one value of `across` (no trend to read), or when a run lacks the
    measure."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED, trend, uncensor

    out: dict[int, Any] = {}
    for seed, mine in _by_seed(runs).items():
        times = [_authors_time(r, concept, split, threshold) for r in mine]
        if any(t is NOT_MEASURED for t in times):
            out[seed] = NOT_MEASURED
            continue
        rho = trend([r.config.get(across) for r in mine], [uncensor(t, "high") for t in times])
        out[seed] = NOT_MEASURED if math.isnan(rho) else rho
    return out


authors_learning_time_trend.aggregates = True  # a trend over the seed's runs


MIN_VALID_FRACTION = 0.25  # a turn is read from checkpoints with at least this share of valid images (as the figures)


def _held_out_trajectory(folder, target: str, min_valid: float = 0.0) -> Any:
    """(steps, points, valid images per step) of the target's naive concept-space trajectory in a run's table
    (`studies.emergence.oriented_trajectory`: each axis oriented so 1 is the target's value), keeping checkpoints
    read from at least max(2, `min_valid` × n) valid images when `min_valid` > 0; NOT_MEASURED when the run lacks
    the table or the target."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.studies.emergence import oriented_trajectory

    path = None if folder is None else RunFolder(folder).table("concept_space")
    if path is None or not path.is_file():
        return NOT_MEASURED
    table = read_parquet(path)
    table = table.assign(**{"class": table["class"].astype(str)})
    rows = table[table["class"] == str(target)]
    if rows.empty:
        return NOT_MEASURED
    steps, points = oriented_trajectory(table, str(target), list(dict.fromkeys(rows["concept"])))
    valid = (rows["n"] * rows["valid_fraction"]).groupby(rows["step"]).min().round().astype(int)
    counts = valid.reindex(steps).to_numpy()
    if min_valid > 0:
        keep = counts >= max(2, math.ceil(min_valid * int(rows["n"].max())))
        steps, points, counts = steps[keep], points[keep], counts[keep]
    return steps, points, counts


@functools.lru_cache(maxsize=256)
def _turn_test(folder: str, stamp: float, target: str, draws: int, seed: int):
    """The straight-path test of one run's held-out trajectory (NOT_MEASURED, None or an `analysis.turn_null.TurnTest`),
    computed once per run folder and table version (`stamp`: the table's mtime), as the observed value and its null's
    quantile are two criteria sides read from the same test."""
    from conceptlab.analysis.turn_null import turn_test

    read = _held_out_trajectory(folder, target, MIN_VALID_FRACTION)
    if not isinstance(read, tuple):
        return read
    steps, points, counts = read
    if len(steps) < 3:
        from conceptlab.analysis.finding_criteria import NOT_MEASURED

        return NOT_MEASURED  # no test to make: never read as censored
    return turn_test(steps, points, counts, draws=draws, seed=seed)


def straight_path_turn(runs: list, target: str = "11", part: str = "observed", draws: int = 999,
                       seed: int = 0) -> dict[int, Any]:
    """Per seed: the bow of the target's naive concept-space trajectory away from its chord (`part` "observed") or
    the 95th percentile of the bow of a straight path redrawn at the run's sampling resolution (`part` "null_q95";
    its binding null, `analysis.turn_null.turn_test`). The null's random stream is `seed` + the run's seed.
    Checkpoints read from fewer than max(2, 25% of the generations) valid images are left out (one image's reading
    would anchor the chord). Not measured when the run lacks its concept-space table or the target, or when the
    test is undefined (fewer than three checkpoints left, or a path that ends where it started)."""
    parts = {"observed": "bow", "null_q95": "bow_null_q95"}
    if part not in parts:
        raise ValueError(f"part must be 'observed' or 'null_q95', got {part!r}")
    return _test_part(runs, "concept_space", _turn_test, parts[part], str(target), int(draws), seed=seed)


def _test_part(runs: list, table: str, cached_test, attribute: str, *args, seed: int) -> dict[int, Any]:
    """Per seed: `attribute` of `cached_test(folder, the table's mtime, *args, seed + the run's seed)` (a cached
    per-run test); not measured when the run lacks `table` or the value is undefined (NaN), the test's own
    NOT_MEASURED passed on."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    out: dict[int, Any] = {}
    for r in runs:
        path = None if r.folder is None else RunFolder(r.folder).table(table)
        if path is None or not path.is_file():
            out[r.seed] = NOT_MEASURED
            continue
        test = cached_test(str(r.folder), path.stat().st_mtime, *args, int(seed) + int(r.seed))
        if test is None or test is NOT_MEASURED:
            out[r.seed] = NOT_MEASURED
            continue
        x = getattr(test, attribute)
        out[r.seed] = NOT_MEASURED if math.isnan(x) else float(x)
    return out


def naive_stream_readings(folder, target: str, min_valid: float, stride: int = 1) -> Any:
    """(steps, readings [streams, steps, concepts] oriented so 1 is the target's value, valid images [streams,
    steps]) of the target's naive prompting on every noise stream of a run's interventions table (streams 0..k−1:
    `naive` and `naive_repeats`), keeping checkpoints whose pooled valid images are at least max(2, `min_valid` × the
    images generated there); NOT_MEASURED when the run lacks the table or the target's naive rows. `stride` k > 1
    reads every k-th checkpoint counted back from the run's last (the last, the k-th before it, …), chosen on the
    run's own checkpoints before the valid-image filter, so the phase does not depend on which ones it drops."""
    if stride < 1:
        raise ValueError(f"stride must be ≥ 1, got {stride}")
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    path = None if folder is None else RunFolder(folder).table("interventions")
    if path is None or not path.is_file():
        return NOT_MEASURED
    table = read_parquet(path)
    rows = table[(table["target"].astype(str) == str(target)) & table["intervention"].isin(["naive", "naive_repeats"])]
    concepts = [c for c in table.columns if c.startswith("p_")]
    if rows.empty or len(concepts) != len(str(target)):
        return NOT_MEASURED
    steps = np.sort(rows["step"].unique())[::-1][::stride][::-1]
    rows = rows[rows["step"].isin(steps)]
    streams = np.sort(rows["stream"].unique())
    grid = rows.set_index(["stream", "step"]).sort_index()
    if grid.index.duplicated().any():
        raise ValueError(f"{path}: more than one naive row per stream and step for target {target}")
    full = pd.MultiIndex.from_product([streams, steps], names=["stream", "step"])
    grid = grid.reindex(full)
    n = grid["n"].fillna(0).to_numpy().reshape(len(streams), len(steps))
    valid = np.round(n * grid["valid_fraction"].fillna(0).to_numpy().reshape(n.shape)).astype(int)
    readings = np.stack([grid[c].to_numpy().reshape(n.shape) for c in concepts], axis=-1)
    flip = np.array([str(target)[k] != "1" for k in range(len(concepts))])
    readings = np.where(flip, 1.0 - readings, readings)
    keep = valid.sum(axis=0) >= np.maximum(2, np.ceil(min_valid * n.sum(axis=0)))
    return steps[keep].astype(float), readings[:, keep], valid[:, keep]


@functools.lru_cache(maxsize=64)
def _stream_readings_of(folder: str, stamp: float, target: str, min_valid: float, stride: int = 1) -> Any:
    """`naive_stream_readings` for one table version (`stamp`: its mtime), read once for the tests that share it."""
    return naive_stream_readings(folder, target, min_valid, stride)


@functools.lru_cache(maxsize=256)
def _stream_turn_test(folder: str, stamp: float, target: str, alpha: float, seed: int):
    """The replicate-stream test of one run's held-out trajectory (NOT_MEASURED or an
    `analysis.turn_null.StreamTurnTest`), computed once per run folder and table version (`stamp`)."""
    from conceptlab.analysis.turn_null import stream_turn_test

    read = _stream_readings_of(folder, stamp, target, MIN_VALID_FRACTION)
    if not isinstance(read, tuple):
        return read
    steps, readings, valid = read
    return stream_turn_test(steps, readings, valid, alpha=alpha, seed=seed)


def replicate_stream_turn(runs: list, target: str = "11", part: str = "observed", alpha: float = 0.05,
                          seed: int = 0) -> dict[int, Any]:
    """Per seed, from a sign-flip test that flips each naive stream's deviation from the pooled path's straight path
    (`analysis.turn_null.stream_turn_test` at level `alpha`, or 2 / 2^streams when that is larger): `part`
    "observed", the bow from its chord of the target's naive trajectory pooled over every naive noise stream of the
    interventions table; "critical", the bow it must exceed; "p", the test's p-value; "level", the level it is run
    at. A criterion reads p against level (p ≤ level is the test's decision; bow against critical would pass a tie,
    e.g. a bow of 0 against a critical 0). Checkpoints whose pooled valid images are under 25% of those generated
    are left out, as for `straight_path_turn`. Not measured when the run lacks the table or the target, or when
    the test is undefined (fewer than 5 streams or 3 checkpoints, or a path ending where it started). `seed` + the
    run's seed draws random patterns only beyond 12 streams."""
    parts = {"observed": "bow", "critical": "bow_critical", "p": "bow_p", "level": "level"}
    if part not in parts:
        raise ValueError(f"part must be one of {sorted(parts)}, got {part!r}")
    return _test_part(runs, "interventions", _stream_turn_test, parts[part], str(target), float(alpha), seed=seed)


@functools.lru_cache(maxsize=256)
def _checkpoint_noise_turn_test(folder: str, stamp: float, target: str, hold: int, draws: int, stride: int,
                                seed: int):
    """The checkpoint-noise test of one run's held-out trajectory pooled over its naive noise streams (NOT_MEASURED
    or an `analysis.turn_null.CheckpointNoiseTurnTest`), computed once per run folder and table version (`stamp`)."""
    from conceptlab.analysis.turn_null import checkpoint_noise_turn_test, pool_streams

    read = _stream_readings_of(folder, stamp, target, MIN_VALID_FRACTION, stride)
    if not isinstance(read, tuple):
        return read
    steps, readings, valid = read
    pooled, _ = pool_streams(readings, valid)
    return checkpoint_noise_turn_test(steps, pooled, hold=hold, draws=draws, seed=seed)


def checkpoint_noise_turn(runs: list, target: str = "11", part: str = "observed", hold: int = 2, draws: int = 999,
                          seed: int = 0, stride: int = 1) -> dict[int, Any]:
    """Per seed, from a studentized bootstrap of a straight path with independent checkpoint-to-checkpoint noise at
    the scale the path's own second differences imply (`analysis.turn_null.checkpoint_noise_turn_test`): `part`
    "observed", the largest distance from its chord that the target's naive trajectory (pooled over every naive
    noise stream of the interventions table) keeps for `hold` consecutive checkpoints; "null_q95", the bow it must
    exceed; "p", the bootstrap p-value. Checkpoints whose pooled valid images are under 25% of those generated are
    left out. Not measured when the run lacks the table or the target, or when the test is undefined (fewer than
    5 checkpoints, or a path ending where it started). The null's stream is `seed` + the run's seed. `stride` k > 1
    reads every k-th checkpoint counted back from the last (dense checkpoints whose noise persists over k − 1 of
    them; `naive_stream_readings`), so the null's independent noise holds between the checkpoints it reads."""
    parts = {"observed": "bow", "null_q95": "bow_null_q95", "p": "bow_p"}
    if part not in parts:
        raise ValueError(f"part must be one of {sorted(parts)}, got {part!r}")
    if int(stride) < 1:
        raise ValueError(f"stride must be ≥ 1, got {stride}")
    return _test_part(runs, "interventions", _checkpoint_noise_turn_test, parts[part], str(target), int(hold),
                      int(draws), int(stride), seed=seed)


def _copying(r, region: str, metric: str) -> Any:
    """One run's copying accuracy (`studies.factorization.copying_accuracy` from its saved config); NOT_MEASURED
    when the run has no config or no such region."""
    path = None if r.folder is None else Path(r.folder) / "config.yaml"
    if path is None or not path.is_file():
        from conceptlab.analysis.finding_criteria import NOT_MEASURED

        return NOT_MEASURED
    return _copying_of(str(path), path.stat().st_mtime, r.run_id, region, metric)


@functools.lru_cache(maxsize=256)
def _copying_of(path: str, stamp: float, run_id: str, region: str, metric: str) -> Any:
    """`_copying` for one config file and version (`stamp`: its mtime): rendered once when several criteria read it."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.loading import ConfigError, load_config
    from conceptlab.data.bump_world import BumpWorld
    from conceptlab.studies.factorization import copying_accuracy

    try:
        cfg = load_config(path)
    except ConfigError:
        return NOT_MEASURED
    if cfg.data.kind != "bumps":
        raise ValueError(f"copying accuracy needs a bump-world run, run {run_id} has data.kind {cfg.data.kind!r}")
    table = copying_accuracy(cfg, BumpWorld(cfg.data))
    row = table[table["region"] == region]
    return NOT_MEASURED if row.empty else float(row[metric].iloc[0])


def _final_accuracy(r, region: str, metric: str) -> Any:
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    value = (r.summary.get("final_accuracy") or {}).get(region, {}).get(metric)
    return NOT_MEASURED if value is None else float(value)


def _per_seed_mean(runs: list, value) -> dict[int, Any]:
    """{seed: mean of value(run) over the seed's runs}; NOT_MEASURED when any of them is."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    values = {seed: [value(r) for r in mine] for seed, mine in _by_seed(runs).items()}
    return {s: NOT_MEASURED if any(v is NOT_MEASURED for v in vs) else float(np.mean(vs)) for s, vs in values.items()}


def copying_baseline(runs: list, region: str = "held_out", metric: str = "joint") -> dict[int, Any]:
    """Per seed: the accuracy (`metric` x, y or joint) on `region` of a model that copies the nearest trained
    label's image at every evaluated label, scored like the run's generations (`studies.factorization.
    copying_accuracy`; no network), averaged over the seed's selected runs."""
    return _per_seed_mean(runs, lambda r: _copying(r, region, metric))


copying_baseline.aggregates = True  # a mean over the seed's runs


def final_accuracy(runs: list, region: str = "held_out", metric: str = "joint") -> dict[int, Any]:
    """Per seed: the runs' final generation accuracy on `region` (summary `final_accuracy`), averaged over the
    seed's selected runs (the value `copying_baseline` is the control of)."""
    return _per_seed_mean(runs, lambda r: _final_accuracy(r, region, metric))


final_accuracy.aggregates = True  # a mean over the seed's runs


def trend_beyond_copying(runs: list, across: str, region: str = "held_out", metric: str = "joint") -> dict[int, Any]:
    """Per seed: Spearman ρ, over the seed's runs, of (final accuracy − copying accuracy) with the config key
    `across`: does the accuracy follow the axis beyond what copying the training data gets along it? Not measured
    when undefined (fewer than 3 runs or a constant axis) or when a run lacks the measure."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED, trend

    out: dict[int, Any] = {}
    for seed, mine in _by_seed(runs).items():
        diffs = [(_final_accuracy(r, region, metric), _copying(r, region, metric)) for r in mine]
        if any(NOT_MEASURED in d for d in diffs):
            out[seed] = NOT_MEASURED
            continue
        rho = trend([r.config.get(across) for r in mine], [a - c for a, c in diffs])
        out[seed] = NOT_MEASURED if math.isnan(rho) else rho
    return out


trend_beyond_copying.aggregates = True  # a trend over the seed's runs


def independent_sigmoids_r2(runs: list, target: str = "11") -> dict[int, Any]:
    """Per seed: R² of a logistic time course per concept (`analysis.phenomenology.fit_independent_sigmoids`, four
    parameters for two concepts, as the gated flow has) on the target's naive concept-space trajectory, the
    trajectory and start time the run's own gated-flow fit used (`studies.emergence.oriented_trajectory`, t = 0).
    Not measured without the concept-space table or the target, with fewer than 5 checkpoints or an undefined R²."""
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.analysis.phenomenology import fit_independent_sigmoids

    out: dict[int, Any] = {}
    for r in runs:
        read = _held_out_trajectory(r.folder, target)
        if read is NOT_MEASURED or len(read[0]) < 5:
            out[r.seed] = NOT_MEASURED
            continue
        r2 = fit_independent_sigmoids(read[0], read[1]).r2
        out[r.seed] = NOT_MEASURED if math.isnan(r2) else float(r2)
    return out
