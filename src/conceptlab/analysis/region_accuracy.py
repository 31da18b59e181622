"""Generation accuracy per label region across the runs of a sweep (bump worlds): composition vs interpolation.

Input: the store's `runs` table (one row per run, one column per config key spelled as in the config:
`data.held_out.scope`, `train.train_seed`) and its `composition` view (one
row per run × checkpoint × region with x / y / joint accuracy). `final_region_accuracy` keeps each run's last
evaluated checkpoint and attaches the config columns that vary across the runs (seeds excluded: they are what is
averaged over); `region_accuracy_by_axis` gives mean ± sd over seeds per setting and region.
"""

from __future__ import annotations

import pandas as pd

METRICS = ("x", "y", "joint")
_CONFIG_PREFIXES = ("data.", "model.", "diffusion.", "train.", "eval.")
SEEDS = ("data.data_seed", "train.train_seed")


def _is_config_axis(column: str) -> bool:
    """A config key of a section (`data.spacing`), not a seed (`data.data_seed`, `eval.probe.seed`)."""
    last = str(column).rsplit(".", 1)[-1]
    return str(column).startswith(_CONFIG_PREFIXES) and not (last == "seed" or last.endswith("_seed"))


def varying_config_columns(runs: pd.DataFrame) -> list[str]:
    """Config columns whose value differs between runs, seeds excluded."""
    columns = [c for c in runs.columns if _is_config_axis(c)]
    return [c for c in columns if runs[c].astype(str).nunique(dropna=False) > 1]  # a key absent in some runs too


def final_region_accuracy(runs: pd.DataFrame, composition: pd.DataFrame) -> pd.DataFrame:
    """Per run × region at the run's last evaluated step: run_id, the varying config columns, seed columns, region,
    step, x, y, joint, n."""
    needed = {"run_id", "step", "region", *METRICS}
    missing = needed - set(composition.columns)
    if composition.empty or missing:
        raise ValueError(f"no generation-accuracy rows to report (composition table empty or lacking {sorted(missing)})")
    last = composition.groupby("run_id")["step"].transform("max")
    final = composition[composition["step"] == last]
    axes = varying_config_columns(runs)
    seeds = [c for c in SEEDS if c in runs.columns]
    keep = ["run_id", "step", "region", *METRICS] + (["n"] if "n" in final.columns else [])
    return runs[["run_id", *axes, *seeds]].merge(final[keep], on="run_id", how="inner")


def region_accuracy_by_axis(final: pd.DataFrame) -> pd.DataFrame:
    """Mean, sd and number of runs of x / y / joint accuracy per (varying config setting, region)."""
    axes = [c for c in final.columns if _is_config_axis(c)]
    keys = [*axes, "region"]
    grouped = final.groupby(keys, dropna=False)
    out = grouped[list(METRICS)].agg(["mean", "std"])
    out.columns = [f"{m}_{s}" for m, s in out.columns]
    out["runs"] = grouped.size()
    return out.reset_index()
