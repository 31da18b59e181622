"""A finding beside its controls across report seeds: gather a sweep's runs, tabulate, evaluate its claims.

`controls_report(root)` reads the `controls` block of the sweep spec kept in `root` (`experiments.claims`), every
finished run of the sweep's manifest, and writes to `root`:

    controls_seeds.parquet         one row per run × source × measure: seed, value
    controls_across_seeds.parquet  per source × measure: n, mean, std, min, max over seeds
    controls_claims.json           per claim: the statement, binding control, direction, margin, per-seed values and
                                   differences, passed / of, the verdict; and which runs, code and machine made them
    controls.md                    the same as a Markdown table (what docs/ quotes)
    controls.png                   one panel per measure: every source's value on every seed, the trained model first

A run missing from the manifest's finished runs is listed as missing, never silently dropped: its seed stays a
report seed of every claim, fails as "no run", and makes a verdict it could still change `incomplete`
(`analysis.finding_criteria.verdict_with_missing`, as the findings suite reads an unfinished run); a claim's seed
whose run did not measure the value fails.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Collection

import pandas as pd

from conceptlab.analysis.control_claims import evaluate
from conceptlab.analysis.finding_criteria import verdict_with_missing
from conceptlab.experiments.claims import ClaimSpec, ControlsSpec, summary_value
from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.experiments.provenance import cpu_model, git_state, package_version
from conceptlab.experiments.sweep import parse_spec
from conceptlab.experiments.sweep_state import read_manifest
from conceptlab.store.files import write_json, write_parquet, write_text
from conceptlab.store.run_folder import RunFolder

SEEDS_TABLE = "controls_seeds.parquet"
ACROSS_TABLE = "controls_across_seeds.parquet"
CLAIMS = "controls_claims.json"
MARKDOWN = "controls.md"
FIGURE = "controls.png"


def _runs(root: Path) -> tuple[list[dict], list[str], dict[str, int]]:
    """(finished runs: run_id, seed, summary), (run ids of the manifest not finished), (run id → report seed of
    each unfinished run: from its config.yaml, which the sweep writes before running it, else the manifest's
    `train.train_seed` value)."""
    manifest = read_manifest(root)
    done, missing, unrun = [], [], {}
    for entry in manifest["runs"]:
        run = RunFolder(Path(root) / entry["run_id"])
        if not run.is_complete():
            missing.append(entry["run_id"])
            seed = (load_config(str(run.config)).train.train_seed if run.config.is_file()
                    else entry["values"].get("train.train_seed"))
            if seed is None:
                raise ConfigError(f"run {entry['run_id']} of {root} is not finished and its report seed is unknown "
                                  "(no config.yaml, no train.train_seed in the manifest); rerun the sweep to write it")
            unrun[entry["run_id"]] = int(seed)
            continue
        cfg = load_config(str(run.config))
        done.append({"run_id": entry["run_id"], "seed": int(cfg.train.train_seed), "summary": run.read_summary(),
                     "config": cfg})
    return done, missing, unrun


def tabulate(runs: list[dict], spec: ControlsSpec) -> pd.DataFrame:
    """One row per run × source × measure (value NaN where the run did not measure it)."""
    rows = []
    for r in runs:
        for source in spec.sources:
            for measure in spec.measures:
                v = summary_value(r["summary"], spec.table_path(source, measure))
                rows.append({"run": r["run_id"], "seed": r["seed"], "source": source, "measure": measure,
                             "value": math.nan if v is None else float(v)})
    return pd.DataFrame(rows, columns=["run", "seed", "source", "measure", "value"])


def across_seeds(table: pd.DataFrame) -> pd.DataFrame:
    """Per source × measure: n (seeds measured), mean, std (ddof 1), min, max."""
    g = table.dropna(subset=["value"]).groupby(["source", "measure"], sort=False)["value"]
    out = g.agg(n="count", mean="mean", std="std", min="min", max="max").reset_index()
    return out


def evaluate_claim(claim: ClaimSpec, spec: ControlsSpec, runs: list[dict], no_run: Collection[int] = ()) -> dict:
    """One claim over the report seeds: its definition, per-seed values and the verdict. `no_run`: report seeds whose
    run is not finished; each fails with the note "no run" (never read as measured), and the verdict is
    `incomplete` while they could still change it."""
    unrun = set(no_run) - {r["seed"] for r in runs}
    trained = {**{s: None for s in unrun},
               **{r["seed"]: summary_value(r["summary"], spec.value_path(claim, "trained")) for r in runs}}
    control = None if claim.control is None else {
        r["seed"]: summary_value(r["summary"], spec.value_path(claim, claim.control)) for r in runs}
    result = evaluate(trained, control, claim.direction, claim.margin, claim.min_seeds)
    for row in result["seeds"]:
        row["note"] = "no run" if row["seed"] in unrun else ""
    result["no_run"] = len(unrun)
    result["verdict"] = verdict_with_missing([row["passed"] for row in result["seeds"]], len(unrun), claim.min_seeds)
    return {**claim.model_dump(), **result}


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def markdown(name: str, across: pd.DataFrame, claims: list[dict], sources: list[str], measures: list[str],
             seeds: list[int], missing: list[str]) -> str:
    lines = [f"# {name}: the model beside its controls", "",
             f"Report seeds: {', '.join(map(str, seeds)) or 'none'}"
             + (f"; runs not finished: {', '.join(missing)}" if missing else ""), "",
             "mean ± sd over seeds (min – max)", "",
             "| measure | " + " | ".join(sources) + " |", "|---" * (len(sources) + 1) + "|"]
    for m in measures:
        cells = []
        for s in sources:
            row = across[(across["source"] == s) & (across["measure"] == m)]
            if row.empty:
                cells.append("—")
                continue
            r = row.iloc[0]
            sd = "" if pd.isna(r["std"]) else f" ± {r['std']:.3g}"
            cells.append(f"{r['mean']:.3g}{sd} ({r['min']:.3g} – {r['max']:.3g})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if claims:
        lines += ["", "| claim | binding control | criterion | passed | verdict |", "|---|---|---|---|---|"]
        for c in claims:
            crit = ("true on each seed" if c["direction"] == "holds" else
                    f"{'trained − control' if c['direction'] == 'greater' else 'control − trained'} ≥ {c['margin']:g}")
            lines.append(f"| {c['name']}: {c['statement']} | {c['control'] or '—'} | {crit} | "
                         f"{c['passed']}/{c['of']} | {c['verdict']} |")
        for c in claims:
            if c["verdict"] in ("not reproduced", "mixed") and c["restated"]:  # not while seeds are still to run
                lines += ["", f"**{c['name']} — {c['verdict']} against {c['control'] or 'its criterion'}.** "
                              f"What holds instead: {c['restated']}"]
    return "\n".join(lines) + "\n"


def controls_report(root: Path) -> dict:
    """Tabulate the sweep under `root` against its controls and evaluate its claims; see the module doc."""
    from conceptlab.report.control_figures import plot_controls
    from conceptlab.report.save import save_figure

    root = Path(root)
    spec = parse_spec(str(root))
    if spec.controls is None:
        raise ConfigError(f"sweep {spec.name} declares no controls block (see conceptlab.experiments.claims)")
    runs, missing, unrun = _runs(root)
    if not runs:
        raise FileNotFoundError(f"no finished run under {root}")
    controls = spec.controls
    table = tabulate(runs, controls)
    across = across_seeds(table)
    claims = [evaluate_claim(c, controls, runs, unrun.values()) for c in controls.claims]
    seeds = sorted({r["seed"] for r in runs} | set(unrun.values()))  # every report seed, finished or not
    commit, dirty = git_state()
    report = {
        "sweep": spec.name,
        "seeds": seeds,
        "settings_seeds": spec.settings_seeds,
        "missing_runs": missing,
        "claims": claims,
        "runs": {r["run_id"]: {"seed": r["seed"], **{k: (r["summary"].get("provenance") or {}).get(k) for k in
                                                       ("git_commit", "git_dirty", "versions", "cpu")},
                                "bf16": r["summary"].get("bf16"),
                                "precision": r["summary"].get("precision"), "threads": r["summary"].get("threads")}
                 for r in runs},
        "report_made_by": {"package": package_version(), "git_commit": commit, "git_dirty": dirty,
                           "cpu": cpu_model(), "time": time.strftime("%Y-%m-%dT%H:%M:%S")},
    }
    write_parquet(root / SEEDS_TABLE, table)
    write_parquet(root / ACROSS_TABLE, across)
    write_json(root / CLAIMS, json.loads(json.dumps(report, default=str)))
    write_text(root / MARKDOWN, markdown(spec.name, across, claims, controls.sources, controls.measures, seeds,
                                         missing))
    save_figure(plot_controls(table, controls.sources, controls.measures, f"{spec.name}: seeds {seeds}"),
                root / FIGURE, remove_stale=True)
    return report
