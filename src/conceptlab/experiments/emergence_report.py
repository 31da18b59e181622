"""Hidden emergence across seeds: gather finished runs' emergence results, aggregate them, draw one figure.

`emergence_report(root)` reads every finished run folder under `root` (a sweep
folder or a runs folder) whose summary has an "emergence" block, and writes to
`root`:

    emergence_seeds.parquet          one row per run × target × intervention: emergence step, final score,
                                     memorization start/end, turn step, capability gap, and the bias-matched
                                     baseline's step and the censored gap (gap_low, gap_high; NaN = unbounded)
    emergence_across_seeds.parquet   per target × intervention: mean, std and count of emergence steps
    emergence_gaps.parquet           per target × intervention: the bias-matched gap over seeds (sign test, median
                                     bounds with an order-statistic interval) and its false-positive rate under the null
    emergence_seeds.png              score vs step, one colour per intervention, one line per run (styled by seed)

and returns a dict of verdicts: in how many runs (and seeds) naive prompting emerged at
all, whether some intervention emerged strictly earlier in every such seed (the
old statistic), per intervention the bias-matched gap across seeds with its
interval (`analysis.emergence_stats`), the false-positive rates of the old and
the new statistic when every intervention is naive prompting (images resampled
from the stored per-image naive scores), whether memorization preceded the
turn, and the mean ± std over runs of each intervention's final score. Every statistic takes one run as one
replicate; where runs share a seed (the same training evaluated twice, say at two `eval.samples_per_class`) they
are not independent, and the verdicts say so (`shared_seeds`, with the config keys the runs differ in) rather than
count them as seeds.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from conceptlab.analysis.emergence import across_seeds, capability_before_behavior
from conceptlab.analysis.emergence_stats import EmergenceRule, null_false_positive_rates, seed_spread, summarize_gaps
from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.experiments.sweep import SEED_KEYS
from conceptlab.experiments.sweep_state import MANIFEST, read_manifest
from conceptlab.report.save import save_figure
from conceptlab.store.files import read_parquet, write_parquet
from conceptlab.store.index import flatten
from conceptlab.store.run_folder import SUMMARY, RunFolder


def _runs_with_emergence(root: Path) -> list[Path]:
    """Finished runs with emergence results under `root`; in a sweep folder only the runs its manifest lists (a sweep
    whose spec changed keeps its earlier runs beside the new ones, which must not be pooled with them; a manifest
    without a readable run list restricts nothing)."""
    listed = None
    if (Path(root) / MANIFEST).is_file():
        try:
            listed = {entry["run_id"] for entry in read_manifest(Path(root))["runs"]}
        except ConfigError:  # not a manifest this report can read: every run under the folder, as before
            listed = None
    found = []
    for summary in sorted(Path(root).rglob(SUMMARY)):
        run = RunFolder(summary.parent)
        if listed is not None and run.root.name not in listed:
            continue
        if run.config.is_file() and "emergence" in run.read_summary():
            found.append(run.root)
    return found


def collect_emergence(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-run table, score curves with run and seed columns) of every finished run under root with emergence
    results; `run` is the run folder relative to root in both (several runs may share a seed)."""
    runs = _runs_with_emergence(root)
    if not runs:
        raise FileNotFoundError(f"no finished run with hidden-emergence results under {root}")
    rows, curves = [], []
    for run in runs:
        summary = RunFolder(run).read_summary()
        cfg = load_config(str(RunFolder(run).config))
        seed = cfg.train.train_seed
        for target, entry in summary["emergence"]["targets"].items():
            phase = entry.get("memorization") or {}
            turn = entry.get("turn") or {}
            for name, step in entry["emergence_step"].items():
                rows.append(
                    {
                        "run": str(run.relative_to(root)),
                        "seed": seed,
                        "data_seed": cfg.data.data_seed,
                        "target": target,
                        "intervention": name,
                        "emergence_step": math.nan if step is None else float(step),
                        "final_score": entry["final_score"].get(name, math.nan),
                        "memorization_start": phase.get("start", math.nan),
                        "memorization_end": phase.get("end", math.nan),
                        "turn_step": math.nan if turn.get("step") is None else float(turn["step"]),
                        "capability_gap": entry.get("capability_gap"),
                        **_matched_columns((entry.get("matched") or {}).get(name)),
                    }
                )
        best = read_parquet(RunFolder(run).table("emergence"))
        curves.append(best[best["intervention"] != "naive_repeats"].assign(seed=seed, run=str(run.relative_to(root))))
    return pd.DataFrame(rows), pd.concat(curves, ignore_index=True)


def _matched_columns(block: dict | None) -> dict[str, Any]:
    """The bias-matched columns of one run × intervention (NaN where there is none; an unbounded gap end is ±inf)."""
    if not block or "k" not in block or "error" in block:
        return {"k": math.nan, "baseline_step": math.nan, "gap_low": math.nan, "gap_high": math.nan}
    low, high = block.get("gap_low"), block.get("gap_high")
    return {"k": float(block["k"]),
            "baseline_step": math.nan if block.get("baseline_step") is None else float(block["baseline_step"]),
            "gap_low": -math.inf if low is None else float(low), "gap_high": math.inf if high is None else float(high)}


def naive_pools(root: Path, runs: list[str], target: str) -> tuple[dict[str, list], list[float], int]:
    """Per run, per checkpoint, the per-image scores of naive prompting and its repeats (the null's image pool);
    the checkpoints; the images per batch."""
    pools, steps, n = {}, None, None
    for run in runs:
        table = read_parquet(RunFolder(root / run).table("interventions"))
        naive = table[(table["target"] == target) & table["intervention"].isin(["naive", "naive_repeats"])]
        if "image_scores" not in naive.columns:
            raise ValueError(f"{run} stores no per-image scores (made before they were kept); rerun it to test the null")
        these = sorted(naive["step"].unique())
        if steps is not None and these != steps:
            raise ValueError(f"runs have different checkpoints ({run}: {these[:4]}… vs {steps[:4]}…)")
        steps = these
        n = int(naive["n"].iloc[0])
        pools[run] = [[float(x) for scores in naive[naive["step"] == s].sort_values("stream", kind="stable")["image_scores"]
                       for x in scores] for s in steps]  # stream by stream, image by image: the same order at each step
    return pools, [float(s) for s in steps or []], int(n or 0)


def emergence_report(root: Path, null_replicates: int = 1000, alpha: float = 0.05) -> dict[str, Any]:
    """Aggregate the runs under root, write the tables and the figure, return the verdicts."""
    from conceptlab.report.emergence_figures import plot_intervention_scores

    root = Path(root)
    per_run, curves = collect_emergence(root)
    write_parquet(root / "emergence_seeds.parquet", per_run)
    spread = across_seeds(per_run, "emergence_step", by=["target", "intervention"])
    write_parquet(root / "emergence_across_seeds.parquet", spread)
    first = capability_before_behavior(per_run)
    block = RunFolder(root / per_run["run"].iloc[0]).read_summary()["emergence"]
    threshold = block["threshold"]
    rule = EmergenceRule(block["threshold"], block.get("stay", 2), block.get("confidence", True))
    names = {t: e.get("name") or t for t, e in block["targets"].items()}
    save_figure(plot_intervention_scores(curves, threshold, target_names=names), root / "emergence_seeds.png",
                remove_stale=True)
    gap_rows = []

    seeds = ["seed", "data_seed"]  # a run's seeds: its training seed and its data seed
    verdicts: dict[str, Any] = {"seeds": len(per_run[seeds].drop_duplicates()), "runs": int(per_run["run"].nunique()),
                                "shared_seeds": _shared_seeds(root, per_run), "targets": {}}
    for target, group in per_run.groupby("target"):
        firsts = first[first["target"] == target] if "target" in first.columns else first
        naive = group[group["intervention"] == "naive"]
        runs = group.drop_duplicates("run")
        mem_before_turn = (runs["memorization_start"] < runs["turn_step"]).where(
            runs[["memorization_start", "turn_step"]].notna().all(axis=1)
        )
        earliest = firsts["earliest_other_step"]
        verdicts["targets"][target] = {
            "naive_emerged_in": int(naive["emergence_step"].notna().sum()),  # runs
            "naive_emerged_in_seeds": len(naive.loc[naive["emergence_step"].notna(), seeds].drop_duplicates()),
            "intervention_emerged_in": int(earliest.notna().sum()),
            "capability_first_where_naive_emerged": (
                None if firsts["capability_first"].dropna().empty else bool(firsts["capability_first"].dropna().all())
            ),
            "memorization_precedes_turn_in": int(mem_before_turn.fillna(False).astype(bool).sum()),
            "runs_with_memorization_and_turn": int(mem_before_turn.notna().sum()),
            "naive_step_mean_std": _mean_std(naive["emergence_step"]),
            "earliest_intervention_step_mean_std": _mean_std(earliest),
            "final_score_mean_std": {
                name: _mean_std(g["final_score"], 3) for name, g in group.groupby("intervention", sort=False)
            },
            "per_seed": _per_seed(group),
        }
        matched = _matched_verdicts(root, group, target, rule, null_replicates, alpha)
        verdicts["targets"][target].update(matched)
        null = matched.get("null") or {}
        for x, g in matched.get("matched", {}).items():
            gap_rows.append({"target": target, "intervention": x, **g,
                             "null_per_seed": null.get("new_per_seed", {}).get(x),
                             "null_sign_test": null.get("new_sign_test", {}).get(x),
                             "p_resampled": null.get("p_resampled", {}).get(x),
                             "null_spread_steadier": null.get("spread_steadier", {}).get(x)})
    if gap_rows:
        write_parquet(root / "emergence_gaps.parquet", pd.DataFrame(gap_rows))
    return verdicts


def _shared_seeds(root: Path, per_run: pd.DataFrame) -> dict[str, Any] | None:
    """None when every run has seeds of its own; else the seeds several runs share ({"7": [runs]}, or "7 (data 3)"
    where the data seed differs from the training seed) and the config keys (seeds aside) whose values differ between
    the runs under root."""
    runs = per_run.drop_duplicates("run")
    shared = {(f"{seed}" if seed == data else f"{seed} (data {data})"): sorted(g["run"])
              for (seed, data), g in runs.groupby(["seed", "data_seed"]) if len(g) > 1}
    if not shared:
        return None
    flat = [flatten(load_config(str(RunFolder(root / run).config)).model_dump(mode="json")) for run in runs["run"]]
    keys = sorted({k for f in flat for k in f} - {"name", "runs_dir", *SEED_KEYS.values()})
    differ = [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1]
    return {"seeds": shared, "differ_in": differ}


def _matched_verdicts(root: Path, group: pd.DataFrame, target: str, rule: EmergenceRule, replicates: int,
                      alpha: float) -> dict[str, Any]:
    """Per intervention, the bias-matched gap over seeds, and the null rates of the old and the new statistic."""
    rows = group[group["k"].notna() & (group["intervention"] != "naive")]
    if rows.empty:
        return {}
    out: dict[str, Any] = {"matched": {}, "per_seed_gaps": [
        {"seed": int(r.seed), "run": str(r.run), "intervention": str(r.intervention), "k": int(r.k),
         "step": None if pd.isna(r.emergence_step) else float(r.emergence_step),
         "baseline_step": None if pd.isna(r.baseline_step) else float(r.baseline_step),
         "gap": [float(r.gap_low), float(r.gap_high)]}
        for r in rows.sort_values(["intervention", "seed"]).itertuples()]}
    for name, g in rows.groupby("intervention", sort=False):
        out["matched"][str(name)] = {"k": int(g["k"].iloc[0]),
                                     **summarize_gaps(list(zip(g["gap_low"], g["gap_high"]))),
                                     "spread": _listed(seed_spread(g["emergence_step"].tolist())),
                                     "baseline_spread": _listed(seed_spread(g["baseline_step"].tolist()))}
    runs = sorted(group["run"].unique())
    try:
        pools, steps, n = naive_pools(root, runs, target)
    except ValueError as err:
        out["null"] = {"error": str(err)}
        return out
    design = {name: block["k"] for name, block in out["matched"].items()}
    observed = {name: block["positive"] - block["negative"] for name, block in out["matched"].items()}
    out["null"] = null_false_positive_rates(pools, steps, design, n, rule, replicates, alpha, observed=observed)
    return out


def _per_seed(group: pd.DataFrame) -> list[dict[str, Any]]:
    """One entry per run of a target: seed, emergence step per intervention, memorization phase and turn (None:
    did not happen)."""
    def step(x: Any) -> float | None:
        return None if pd.isna(x) else float(x)

    rows = []
    for run, g in group.groupby("run", sort=False):
        first = g.iloc[0]
        rows.append({
            "run": str(run), "seed": int(first["seed"]),
            "emergence_step": {str(r.intervention): step(r.emergence_step) for r in g.itertuples()},
            "memorization": (None if pd.isna(first["memorization_start"])
                             else [float(first["memorization_start"]), float(first["memorization_end"])]),
            "turn_step": step(first["turn_step"]),
        })
    return sorted(rows, key=lambda r: (r["seed"], r["run"]))


def _mean_std(values: pd.Series, digits: int = 1) -> list[float | None]:
    v = values.dropna().astype(float)
    if v.empty:
        return [None, None]
    return [round(float(v.mean()), digits), round(float(v.std(ddof=1)), digits) if len(v) > 1 else None]


def _listed(low_high: tuple[float, float] | None) -> list[float] | None:
    """A (low, high) range as JSON keeps it ([low, high]; inf as the summary's other infinite steps)."""
    return None if low_high is None else [float(low_high[0]), float(low_high[1])]
