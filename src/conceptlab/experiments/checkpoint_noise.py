"""How noisy a concept-space run is from one checkpoint to the next, and for how many checkpoints that noise lasts.

Over a stretch of checkpoints where the trajectories are flat (a converged tail, chosen by `from_step`), each
trajectory's semivariogram γ(h), h = 1 … `max_lag` checkpoints, and its noise persistence — the smallest lag where
γ reaches `share` of its plateau (`analysis.turn_null.semivariogram`, `noise_persistence`). Independent noise from
one checkpoint to the next has a flat γ and persistence 1; noise that lasts (the network wandering slowly) makes γ
rise over as many lags as it lasts. It is what a turn test on dense checkpoints has to assume about its noise.

Trajectories read from one finished run folder:
- `concept space <class>`: each class's point in concept space (P(concept) per concept) from the concept-space
  table, the training classes and the held-out one;
- `naive <target> pooled`: the held-out target's naive prompting pooled over its noise streams from the
  interventions table, checkpoints with under 25% valid images left out — the path the turn tests read
  (`experiments.finding_measures.naive_stream_readings`).

`measure_run` returns one `TrajectoryNoise` per trajectory; `noise_frame` lays them out one row per trajectory and
lag. `window_spread` says what reading a score as the median of a window of checkpoints (a criterion's
`step: {last: n}`) does to that noise: the spread of single checkpoints' scores against the spread of window medians
over the same stretch. Nothing is written; the CLI (`conceptlab runs noise`) prints and plots them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from conceptlab.analysis.turn_null import noise_persistence, pool_streams, semivariogram
from conceptlab.experiments.finding_measures import MIN_VALID_FRACTION, naive_stream_readings
from conceptlab.store.files import read_parquet
from conceptlab.store.run_folder import RunFolder


class NoiseInputError(ValueError):
    """The run folder cannot be read for checkpoint noise (no table, too few checkpoints in the stretch)."""


@dataclass(frozen=True)
class TrajectoryNoise:
    """One trajectory's noise over the stretch: its name, which split it belongs to ("train", "held_out"), the
    checkpoints read, γ at lags 1 … max_lag (in the trajectory's units squared, summed over concepts) and the
    persistence in checkpoints."""

    name: str
    split: str
    steps: np.ndarray
    gamma: np.ndarray
    persistence: int

    @property
    def spacing(self) -> float:
        """Steps between consecutive checkpoints (the median gap)."""
        return float(np.median(np.diff(self.steps)))


def concept_space_paths(folder: Path, from_step: float) -> dict[str, tuple[str, np.ndarray, np.ndarray]]:
    """{class: (split, steps, points [checkpoints, concepts])} of the concept-space table at steps ≥ `from_step`,
    P(concept) per concept in the table's concept order; a class is named by its code and, where the table has
    them, its name ("01 (red small)")."""
    path = RunFolder(folder).table("concept_space")
    if not path.is_file():
        raise NoiseInputError(f"{folder}: no concept_space.parquet (not a finished concept-space run?)")
    table = read_parquet(path)
    table = table[table["step"] >= from_step]
    concepts = list(dict.fromkeys(table["concept"].astype(str)))
    out = {}
    for code, rows in table.groupby(table["class"].astype(str), sort=True):
        grid = rows.pivot_table(index="step", columns="concept", values="p_one", aggfunc="mean", dropna=False)
        grid = grid[concepts].dropna()  # a checkpoint without a valid image has no reading: left out, said below
        name = f"{code} ({rows['class_name'].iloc[0]})" if "class_name" in rows else code
        out[name] = (str(rows["split"].iloc[0]), grid.index.to_numpy(dtype=float), grid.to_numpy(dtype=float))
    return out


def naive_pooled_path(folder: Path, target: str, from_step: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(steps, pooled points) of `target`'s naive prompting over every noise stream, oriented so 1 is the target's
    value, at steps ≥ `from_step`; None when the run has no interventions table or no naive rows for `target`."""
    read = naive_stream_readings(folder, target, MIN_VALID_FRACTION)
    if not isinstance(read, tuple):
        return None
    steps, readings, valid = read
    keep = steps >= from_step
    if not keep.any():
        return steps[keep], np.empty((0, readings.shape[-1]))
    pooled, _ = pool_streams(readings[:, keep], valid[:, keep])
    return steps[keep], pooled


def held_out_targets(folder: Path) -> list[str]:
    """The targets with naive prompting rows in the run's interventions table (none without the table)."""
    path = RunFolder(folder).table("interventions")
    if not path.is_file():
        return []
    table = read_parquet(path)
    return sorted(set(table.loc[table["intervention"] == "naive", "target"].astype(str)))


def measure_run(folder: Path, from_step: float = 0.0, max_lag: int = 8, share: float = 0.9) -> list[TrajectoryNoise]:
    """Every trajectory's semivariogram and persistence over the run's checkpoints at steps ≥ `from_step`. Refuses
    (NoiseInputError) a trajectory with fewer than max_lag + 2 checkpoints there (γ at the longest lag would rest on
    a single difference) or unevenly spaced ones (a lag counts checkpoints; a missing one — a checkpoint without a
    valid image, or one the naive path drops for too few — would mix two lags)."""
    folder = Path(folder)
    if max_lag < 1:
        raise ValueError(f"max_lag must be ≥ 1, got {max_lag}")
    paths = [(f"concept space {code}", split, steps, points)
             for code, (split, steps, points) in concept_space_paths(folder, from_step).items()]
    for target in held_out_targets(folder):
        read = naive_pooled_path(folder, target, from_step)
        if read is not None:
            paths.append((f"naive {target} pooled", "held_out", *read))
    out = []
    for name, split, steps, points in paths:
        if len(steps) < max_lag + 2:
            raise NoiseInputError(f"{folder}: {name} has {len(steps)} checkpoints at steps ≥ {from_step:g}; "
                                  f"lags up to {max_lag} need at least {max_lag + 2} (lower --max-lag or --from-step)")
        gaps = np.diff(steps)
        if gaps.max() > 1.01 * gaps.min():
            raise NoiseInputError(f"{folder}: {name}'s checkpoints at steps ≥ {from_step:g} are not evenly spaced "
                                  f"({gaps.min():g} to {gaps.max():g} steps apart); a lag counts checkpoints, so "
                                  f"start --from-step where the spacing is even")
        gamma = semivariogram(points, max_lag)
        out.append(TrajectoryNoise(name, split, np.asarray(steps, dtype=float), gamma,
                                   noise_persistence(points, max_lag, share)))
    return out


def noise_frame(results: list[TrajectoryNoise]) -> pd.DataFrame:
    """One row per trajectory and lag: trajectory, split, checkpoints, lag (checkpoints), lag_steps, gamma, and the
    trajectory's persistence (checkpoints and steps)."""
    rows = []
    for r in results:
        for lag, g in enumerate(r.gamma, start=1):
            rows.append({"trajectory": r.name, "split": r.split, "checkpoints": len(r.steps), "lag": lag,
                         "lag_steps": lag * r.spacing, "gamma": float(g), "persistence": r.persistence,
                         "persistence_steps": r.persistence * r.spacing})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Spread:
    """Standard deviation (n − 1), range and count of some readings."""

    sd: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values) -> "Spread":
        v = np.asarray(list(values), dtype=float)
        return cls(float(np.std(v, ddof=1)) if v.size > 1 else float("nan"), float(v.min()), float(v.max()), v.size)

    def describe(self) -> str:
        return f"sd {self.sd:.3f}, range {self.low:.3f}–{self.high:.3f}, n = {self.n}"


@dataclass(frozen=True)
class WindowSpread:
    """`window_spread`'s result: single checkpoints at steps ≥ from_step; the window medians over every window that
    fits there (its end as its step); the single checkpoints at those same ends."""

    target: str
    intervention: str
    window: int
    spacing: float
    single: Spread
    medians: Spread
    single_at_ends: Spread


def window_spread(folder: Path, target: str, window: int, spacing: float, from_step: float = 0.0,
                  intervention: str = "naive") -> WindowSpread:
    """How much a window median steadies a score read from one checkpoint: `intervention`'s score on `target`
    (its best variant, from the emergence table) at every checkpoint at steps ≥ `from_step`, against the median
    of `window` checkpoints `spacing` steps apart, over every window whose checkpoints all lie in that stretch.
    NoiseInputError when the run has no emergence table, no such rows, or fewer than two windows there."""
    if window < 1 or spacing <= 0:
        raise ValueError(f"window must be ≥ 1 and spacing > 0, got {window} and {spacing}")
    path = RunFolder(folder).table("emergence")
    if not path.is_file():
        raise NoiseInputError(f"{folder}: no emergence.parquet (not a finished run with interventions?)")
    table = read_parquet(path)
    rows = table[(table["target"].astype(str) == str(target)) & (table["intervention"] == intervention)
                 & (table["step"] >= from_step)]
    if rows.empty:
        raise NoiseInputError(f"{folder}: no {intervention} score for target {target} at steps ≥ {from_step:g}")
    score = rows.groupby("step")["score"].max()  # one row a checkpoint already (the best variant)
    have = {float(s): float(v) for s, v in score.items()}
    ends = [e for e in have if all(e - k * spacing in have for k in range(window))]
    if len(ends) < 2:
        raise NoiseInputError(f"{folder}: fewer than two windows of {window} checkpoints {spacing:g} steps apart at "
                              f"steps ≥ {from_step:g}")
    medians = [float(np.median([have[e - k * spacing] for k in range(window)])) for e in ends]
    return WindowSpread(str(target), intervention, window, float(spacing), Spread.of(have.values()),
                        Spread.of(medians), Spread.of(have[e] for e in ends))
