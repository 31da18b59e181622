"""Concept signal orders learning, across a sweep: learning time per concept vs the swept key and vs concept signal.

Pure functions on tables (no I/O). Inputs are the results store's `runs` table (one row
per run: one column per config key, spelled as in the config — `data.color_separation`,
`data.data_seed`, `train.train_seed` — and `concept_signal_<concept>` from the run's summary) and its
`learning_times` view (run_id, split, concept, learning_time; NaN = not learned).

- `learning_time_table`: one row per run × concept — the swept value, the seeds, the
  concept's signal and its learning time on one split.
- `learning_time_by_axis`: per swept value × concept, the median over every run (unlearned ones counted as later)
  and the mean ± standard deviation
  (and min / max) of the learning time over the runs that learned it (seeds), how many
  did, and the mean concept signal (Park et al. 2024, Fig. 3-style).
- `signal_rank_agreement`: in how many runs the concept with the larger signal was
  learned first (a run where neither was learned does not count).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


SEEDS = {"data.data_seed": "data_seed", "train.train_seed": "train_seed"}  # runs column → this table's column


def learning_time_table(runs: pd.DataFrame, learning_times: pd.DataFrame, axis: str = "data.color_separation",
                        split: str = "train") -> pd.DataFrame:
    """Long table: run_id, axis_value, data_seed, train_seed, concept, concept_signal, learning_time."""
    column = axis
    if column not in runs.columns:
        raise ValueError(f"the runs have no config key {axis!r}; is it a config key of these runs?")
    if learning_times.empty or "split" not in learning_times.columns:
        raise ValueError("no learning times yet: no run of this sweep has finished")
    if split not in set(learning_times["split"]):
        raise ValueError(f"no learning times for split {split!r}; splits: {sorted(set(learning_times['split']))}")
    times = learning_times[learning_times["split"] == split][["run_id", "concept", "learning_time"]]
    keep = ["run_id", column] + [c for c in SEEDS if c in runs.columns and c != column]
    signals = [c for c in runs.columns if c.startswith("concept_signal_")]
    merged = times.merge(runs[keep + signals], on="run_id", how="inner")
    merged["concept_signal"] = [
        row[f"concept_signal_{row['concept']}"] if f"concept_signal_{row['concept']}" in merged.columns else np.nan
        for _, row in merged.iterrows()
    ]
    merged = merged.rename(columns={**SEEDS, column: "axis_value"})  # the axis wins where it is a seed key
    if column in SEEDS:
        merged[SEEDS[column]] = merged["axis_value"]
    cols = ["run_id", "axis_value", "data_seed", "train_seed", "concept", "concept_signal", "learning_time"]
    out = merged[[c for c in cols if c in merged.columns]].copy()
    out["axis"] = axis
    return out.sort_values(["concept", "axis_value", "run_id"]).reset_index(drop=True)


def learning_time_by_axis(table: pd.DataFrame) -> pd.DataFrame:
    """Per (axis_value, concept): n_runs, n_learned, learning_time mean/std/min/max over the learned runs (std NaN
    with one), and learning_time_median over every run with the unlearned ones later than any time (a mean over
    the learned runs alone comes out early where few learn); NaN with `median_censored` True when half or more never
    learned (the median is then only "later than the last checkpoint"). Mean signal beside them."""
    rows = []
    for (value, concept), group in table.groupby(["axis_value", "concept"], sort=True):
        learned = group["learning_time"].dropna().to_numpy(dtype=float)
        every = np.sort(np.where(group["learning_time"].isna(), np.inf, group["learning_time"].to_numpy(dtype=float)))
        n = len(every)
        median = float(np.inf if n == 0 else (every[(n - 1) // 2] + every[n // 2]) / 2)
        rows.append({
            "axis_value": float(value),
            "concept": concept,
            "n_runs": len(group),
            "n_learned": len(learned),
            "learning_time_mean": float(learned.mean()) if len(learned) else np.nan,
            "learning_time_std": float(learned.std(ddof=1)) if len(learned) > 1 else np.nan,
            "learning_time_min": float(learned.min()) if len(learned) else np.nan,
            "learning_time_max": float(learned.max()) if len(learned) else np.nan,
            "learning_time_median": median if np.isfinite(median) else np.nan,
            "median_censored": not np.isfinite(median),
            "concept_signal_mean": float(group["concept_signal"].mean()),
            "concept_signal_std": float(group["concept_signal"].std(ddof=1)) if len(group) > 1 else 0.0,
        })
    return pd.DataFrame(rows)


def signal_rank_agreement(table: pd.DataFrame) -> tuple[int, int]:
    """(runs where the larger-signal concept was learned strictly first, runs where the order is decided).

    Not learned counts as later than any learning time; ties and runs learning neither are undecided, and so are
    runs whose two signals are unknown (NaN) or equal: neither concept is the larger-signal one.
    """
    agree = decided = 0
    for _, group in table.groupby("run_id"):
        if len(group) < 2:
            continue
        ranked = group.sort_values("concept_signal", ascending=False)
        strong, weak = ranked.iloc[0], ranked.iloc[-1]
        if pd.isna(strong["concept_signal"]) or pd.isna(weak["concept_signal"]) or \
                strong["concept_signal"] == weak["concept_signal"]:
            continue
        t_strong = np.inf if pd.isna(strong["learning_time"]) else strong["learning_time"]
        t_weak = np.inf if pd.isna(weak["learning_time"]) else weak["learning_time"]
        if t_strong == t_weak:
            continue
        decided += 1
        agree += int(t_strong < t_weak)
    return agree, decided
