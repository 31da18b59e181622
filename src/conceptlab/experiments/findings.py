"""The findings suite, planned, run and evaluated: the suite (`experiments.findings_spec`: its YAML, schema and
validation) becomes one sweep per run set, its runs run, are recorded and priced, and every criterion is evaluated.

`plan` turns the suite into one sweep per run set (`experiments.sweep`: stable run ids from the config and the code's
analysis versions, so a run is reused only when both match); `run_plan` runs every pending run on one executor;
`evaluate_suite` reads the finished runs and evaluates every criterion (`analysis.finding_criteria`);
`write_findings` writes findings.json, findings.md, report.html and one figure per finding (`report.findings`).
"""

from __future__ import annotations

import copy
import json
import math
import os
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

import pandas as pd
import yaml

from conceptlab.analysis import finding_criteria
from conceptlab.config_base import config_hash
from conceptlab.experiments.claims import summary_value
from conceptlab.experiments.loading import ConfigError, parse_yaml
from conceptlab.experiments.provenance import cpu_model, git_state, package_version, precision_name, run_code_drift
from conceptlab.experiments.executors import RunTask
from conceptlab.experiments.findings_spec import (
    SCALES, FindingSpec, RunSetSpec, Selector, StepBefore, StepWindow, Suite, Variant, claim_criteria, select,
    selectors_of, setup_of,
)
from conceptlab.experiments.sweep import (
    SEED_KEYS, Sweep, adopt_finished_twin, expand, is_complete, pending_runs, run_waves, spec_text, training_plan,
    training_waves, write_manifest, write_sweep_report_or_warn,
)
from conceptlab.experiments.training_reuse import run_folders_under, trained_in
from conceptlab.messages import one_line, shown
from conceptlab.plugins import resolve
from conceptlab.store.files import read_json, read_parquet, write_json, yaml_without_aliases
from conceptlab.store.index import flatten
from conceptlab.store.records import is_record, record_run
from conceptlab.store.run_folder import RunFolder

RESULTS = "findings.json"


# -- planning and running ------------------------------------------------------------------------------------------------

@dataclass
class PlannedSet:
    name: str
    spec: RunSetSpec
    seeds: list[int]
    root: Path
    sweep: Sweep | None = None              # None for an analytic set
    command: str = ""


@dataclass
class Plan:
    suite: Suite
    findings: list[FindingSpec]
    scale: str
    root: Path
    sets: dict[str, PlannedSet] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # finding → why it is not run at this scale

    def runs(self) -> list:
        return [r for s in self.sets.values() if s.sweep is not None for r in s.sweep.runs]


def _spec_yaml(name: str, runs: RunSetSpec, variant: Variant | None, seeds: list[int], scale: str) -> dict[str, Any]:
    """The sweep spec a run set becomes: its preset or sweep, its overrides, the seeds axis set to its seeds. A
    variant naming its own preset or sweep (paper scale) replaces the set's source and overrides; one naming neither
    (quick) adds its overrides to the set's."""
    replaces = variant is not None and (variant.preset is not None or variant.sweep is not None)
    source: RunSetSpec | Variant = variant if replaces else runs
    overrides = list(variant.overrides) if replaces else list(runs.overrides) + list(variant.overrides if variant else [])
    label = f"findings run set {name} ({scale})"
    if source.preset is not None:
        return {"description": label, "base": source.preset, "axes": {"seeds": seeds}, "overrides": overrides}
    _, text, folder = spec_text(source.sweep)
    data = dict(parse_yaml(text, f"sweep {shown(source.sweep)}") or {})
    data.pop("name", None)
    data.pop("root", None)
    base = data.get("base")
    if folder is not None and isinstance(base, str) and base.endswith((".yaml", ".yml")) and not Path(base).is_absolute():
        data["base"] = str((folder / base).resolve())  # the generated spec lives elsewhere
    data["description"] = f"{label} from sweep {source.sweep}: {data.get('description', '')}"
    data["axes"] = {**dict(data.get("axes") or {}), "seeds": seeds}
    own = data.get("overrides") or []
    if isinstance(own, dict):
        own = [f"{k}={json.dumps(v)}" for k, v in own.items()]
    data["overrides"] = list(own) + overrides
    return data


def missing_data(suite: Suite, sets: list[str]) -> str:
    """Why run sets that read real data cannot run here ("" when they can): the `data_env` variable unset, or not
    naming a folder."""
    for name in dict.fromkeys(sets):
        env = suite.runs[name].data_env
        if env is None:
            continue
        value = os.environ.get(env)
        if not value:
            return f"needs the real data: set ${env} to its folder (run set {name})"
        if not Path(value).expanduser().is_dir():
            return f"needs the real data: ${env}={value} is not a folder (run set {name})"
    return ""


def plan(suite: Suite, names: list[str] | None = None, scale: str = "full", root: Path | str = "findings",
         runs_folder: str = "runs", write: bool = True) -> Plan:
    """One sweep per run set the chosen findings use, at `scale`, under `<root>/<runs_folder>/<set>/`; writes the
    generated sweep specs under `<root>/specs/` and nothing else (with `write=False`, a dry run, not even those: they
    are expanded from a temporary folder, and each set's command names where a real run writes its spec)."""
    if scale not in SCALES:
        raise ConfigError(f"scale must be one of {', '.join(SCALES)}, got {shown(scale)}")
    root = Path(root)
    chosen = select(suite, names)
    result = Plan(suite=suite, findings=chosen, scale=scale, root=root)
    needed: dict[str, None] = {}
    for f in chosen:
        if f.status != "implemented":
            result.skipped[f.name] = f"not implemented: {f.reason}"
            continue
        sets = [s.runs for _, s in selectors_of(f)] + ([f.claims_from] if f.claims_from else [])
        absent = missing_data(suite, sets)
        if absent:
            result.skipped[f.name] = absent
            continue
        skipped = [f"{s}: {suite.runs[s].quick.skip}" for s in dict.fromkeys(sets) if suite.runs[s].quick.skip]
        if scale == "quick" and skipped:
            result.skipped[f.name] = "not at quick scale (" + "; ".join(skipped) + ")"
            continue
        if scale == "quick" and f.criteria and all(c.over_seeds for c in f.criteria):
            result.skipped[f.name] = "not at quick scale (a claim about the report seeds as a group; --quick runs one)"
            continue
        if scale == "paper":
            missing = [s for s in sets if suite.runs[s].paper is None and suite.runs[s].analytic is None]
            if missing:
                result.skipped[f.name] = f"no paper-scale run set for {', '.join(sorted(set(missing)))}"
                continue
        for s in sets:
            needed[s] = None
    specs = root / "specs"
    scratch = None if write else tempfile.TemporaryDirectory(prefix="conceptlab-plan-")
    try:
        _plan_sets(suite, needed, scale, root, runs_folder, specs, Path(scratch.name) if scratch else None, result)
    finally:
        if scratch is not None:
            scratch.cleanup()
    return result


def _plan_sets(suite: Suite, needed: dict[str, None], scale: str, root: Path, runs_folder: str, specs: Path,
               scratch: Path | None, result: Plan) -> None:
    for name in needed:
        runs = suite.runs[name]
        variant = runs.quick if scale == "quick" else runs.paper if scale == "paper" else None
        seeds = list((variant.seeds if variant is not None and variant.seeds else None)
                     or ([runs.seeds[0]] if scale == "quick" else runs.seeds))
        folder = root / runs_folder / name
        if runs.analytic is not None:
            result.sets[name] = PlannedSet(name, runs, seeds, folder, None, f"{runs.analytic} (seeds {seeds})")
            continue
        spec = _spec_yaml(name, runs, variant, seeds, scale)
        path = specs / f"{name}.{scale}.yaml"
        written = (scratch or specs) / path.name
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(yaml.safe_dump({"name": name, **spec}, sort_keys=False, allow_unicode=True))
        try:
            sweep = expand(str(written), root=folder)
        except ConfigError as err:
            raise ConfigError(f"run set {name} ({scale}): {err}") from None
        result.sets[name] = PlannedSet(name, runs, seeds, folder, sweep, f"conceptlab sweep run {path}")


def finished_counts(p: Plan) -> dict[str, Any]:
    """What `run_plan` returns, for an evaluation that runs nothing: every run set's runs counted as finished
    (read) or not finished; analytic sets are not computed (read where an earlier invocation left them)."""
    sweeps = [s.sweep for s in p.sets.values() if s.sweep is not None]
    total = sum(len(sw.runs) for sw in sweeps)
    unfinished = sum(len(pending_runs(sw)) for sw in sweeps)
    return {"runs": total, "skipped": total - unfinished, "done": 0, "not_finished": unfinished, "failed": {}}


def run_plan(p: Plan, executor, progress: bool = True, console=None,
             seeds: Collection[int] | None = None, record: Path | str | None = None,
             reuse_training: bool = True, train_from: list[Path] | None = None) -> dict[str, Any]:
    """Write every sweep's manifest, compute the analytic sets, run every pending run with one executor (so the
    workers stay busy across run sets); returns counts and failures. With `seeds`, only the runs of those report
    seeds (a suite split over sessions or machines); the other pending runs are counted as `deferred`. With
    `record`, each run is recorded under `<record>/runs/<set>/<run id>/` as soon as it finishes (`recorded`), so a
    suite of hours stopped later — killed, out of time, failing in its evaluation — keeps every run it finished.

    A run two sets share (the same run id: the same config and analysis versions, e.g. one band width in both the
    composition and the gap-width sets) runs once: a set whose twin is finished gets a copy of it
    (`sweep.adopt_finished_twin`; counted as `copied`), and of twins both pending only the first is run and the
    others are copied once it is done. With `reuse_training`, runs that share a training but not a config (e.g. two
    evaluations of one training, in two sets or in `train_from` roots) train it once and the others evaluate its
    checkpoints (`sweep.training_waves`, `experiments.training_reuse`; counted as `trained_elsewhere`)."""
    if seeds is not None:
        check_seeds(p, seeds)
    complete = {r.directory(s.sweep.root): r.run_id for s in p.sets.values() if s.sweep is not None
                for r in s.sweep.runs if is_complete(r.directory(s.sweep.root))}  # each folder looked at once
    finished: dict[str, Path] = {}
    for folder, run_id in complete.items():
        finished.setdefault(run_id, folder)
    tasks, twins = [], []
    first: dict[str, Path] = {}
    set_of: dict[str, str] = {}  # run id → the set whose folder runs it
    total = deferred = copied = 0
    for s in p.sets.values():
        if s.sweep is None:
            _run_analytic(s, seeds)
            continue
        write_manifest(s.sweep)
        total += len(s.sweep.runs)
        pending = [r for r in s.sweep.runs if r.directory(s.sweep.root) not in complete]
        chosen = [r for r in pending if seeds is None or int(r.config.train.train_seed) in seeds]
        deferred += len(pending) - len(chosen)
        for r in chosen:
            folder = r.directory(s.sweep.root)
            if r.run_id in finished and adopt_finished_twin(finished[r.run_id], folder):
                copied += 1
            elif r.run_id in first:
                twins.append((first[r.run_id], folder))
            else:
                first[r.run_id] = folder
                tasks.append(RunTask(r.run_id, folder, r.config))
                set_of[r.run_id] = s.name
    todo = len(tasks) + len(twins) + copied  # pending runs of the chosen seeds (the rest were finished already)
    recorded = 0

    def keep(outcome) -> None:  # a run just finished: record it now, not only when every run has ended
        nonlocal recorded
        if record is None or outcome.state != "done":
            return
        dest = Path(record) / "runs" / set_of[outcome.run_id] / outcome.run_id
        if made_with_code_drift(first[outcome.run_id]):  # not a record (record_plan counts it)
            return
        try:
            recorded += record_run(first[outcome.run_id], dest) is not None
        except (OSError, ConfigError) as err:  # kept for the final record_plan to try again; the runs go on
            if console is not None:
                console.print(f"could not record {outcome.run_id} yet: {one_line(str(err))}", markup=False)

    kwargs = {"on_outcome": keep} if record is not None else {}
    waves = [tasks] if tasks else []
    if reuse_training and tasks:
        candidates = [r.directory(s.sweep.root) for s in p.sets.values() if s.sweep is not None for r in s.sweep.runs]
        waves = training_waves(tasks, candidates + run_folders_under(train_from or []))
    outcomes = run_waves(executor, waves, progress=progress, console=console, **kwargs)
    waiting = 0
    for source, folder in twins:
        if adopt_finished_twin(source, folder):
            copied += 1
        else:  # its twin failed or is still queued (a SLURM executor that does not wait): the next invocation
            waiting += 1
    for s in p.sets.values():
        if s.sweep is not None:
            write_sweep_report_or_warn(s.sweep.root, console)
    return {"runs": total, "skipped": total - todo - deferred, "done": sum(o.state == "done" for o in outcomes),
            "failed": {o.run_id: o.error for o in outcomes if o.state == "failed"},
            "queued": sum(o.state == "queued" for o in outcomes) + waiting, "deferred": deferred, "copied": copied,
            "busy": sum(o.state == "busy" for o in outcomes), "recorded": recorded,
            "trained_elsewhere": sum(trained_in(t.run_dir) is not None for t in tasks)}


def check_seeds(p: Plan, seeds: Collection[int]) -> None:
    """Refuse seeds that are report seeds of none of the plan's run sets (a typo would run nothing, silently)."""
    known = {seed for s in p.sets.values() for seed in s.seeds}
    unknown = sorted(set(seeds) - known)
    if unknown:
        raise ConfigError(f"--seeds {', '.join(map(str, unknown))}: not a report seed of the chosen findings' run sets "
                          f"(their seeds: {', '.join(map(str, sorted(known))) or 'none'})")


def _analytic_path(s: PlannedSet, seed: int) -> Path:
    return s.root / f"seed_{seed}.json"


def _analytic_key(s: PlannedSet, seed: int) -> dict[str, Any]:
    """What an analytic result is a result of: the function, its version (`fn.version`, bumped when a change alters
    its numbers), its arguments, the seed and the package version."""
    fn = resolve(s.spec.analytic, "analytic function")
    return {"function": s.spec.analytic, "version": int(getattr(fn, "version", 1)), "args": s.spec.args, "seed": seed,
            "conceptlab": package_version()}


def _run_analytic(s: PlannedSet, seeds: Collection[int] | None = None) -> None:
    """Compute an analytic set once per seed (kept as seed_<s>.json with the args and the code version; recomputed
    when either differs); with `seeds`, only those."""
    fn = resolve(s.spec.analytic, "analytic function")
    commit, dirty = git_state()
    for seed in s.seeds:
        if seeds is not None and seed not in seeds:
            continue
        path = _analytic_path(s, seed)
        key = _analytic_key(s, seed)
        if path.is_file():
            old = read_json(path)
            if old.get("key") == key and old.get("provenance", {}).get("git_commit") == commit and not dirty:
                continue
        began = time.perf_counter()
        summary = fn(seed=seed, **s.spec.args)
        write_json(path, {"key": key, "summary": summary, "seconds": round(time.perf_counter() - began, 6),  # ms on a fast CPU
                          "provenance": {"git_commit": commit, "git_dirty": dirty, "cpu": cpu_model(),
                                         "host": socket.gethostname()}})


def run_seconds(summary: dict[str, Any]) -> float:
    """A finished run's own time, every invocation of it summed (a resumed run counts each part once)."""
    return float((summary.get("seconds_all_invocations") or summary.get("seconds") or {}).get("total", 0) or 0)


def machine_of(summary: dict[str, Any]) -> str:
    """The machine a run's summary says made it: its CPU, and its GPU where it had one."""
    prov = summary.get("provenance") or {}
    return f"{prov.get('cpu')}" + (f", GPU {prov['gpu']}" if prov.get("gpu") else "")


def trainers_of(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """The invocations that trained a run which evaluated another run's training (`provenance.trained_in`; each
    with its cpu, gpu and git_commit), else []."""
    return list(((summary.get("provenance") or {}).get("trained_in") or {}).get("invocations") or [])


def precision_of(summary: dict[str, Any]) -> str:
    """A run's precision: its summary's `precision` (`provenance.run_precision`: `mixed: …` where invocations in
    different precisions made it; summaries written before the field have only `bf16`, the last invocation's)."""
    return summary.get("precision") or precision_name(bool(summary.get("bf16")))


@dataclass
class RunCost:
    """What the finished runs of a set took (how many, the median run time, the machines that measured it) and how
    many of the plan's runs of the set are still to run."""

    runs: int
    median_seconds: float | None  # None: no run of the set has finished anywhere looked at
    machines: list[str]
    pending: int
    deferred: int = 0  # runs to go of report seeds not chosen now (`--seeds`): left for a later invocation
    other_precision: str | None = None  # the precision the runs to go will use, when no finished run used it
    borrowing: int = 0  # of the pending runs, those that will evaluate a training another run trains or trained
    median_eval_seconds: float | None = None  # the median of the timed runs' time outside training
    waiting: int = 0  # of the borrowing runs, those that wait for a run to go to train first (the second wave)

    def describe(self) -> str:
        parts = ["no finished run to time" if self.median_seconds is None else
                 f"{self.median_seconds / 60:.1f} min a run (median of {self.runs}; {'; '.join(self.machines)})"]
        if self.borrowing:
            parts.append(f"{self.borrowing} of them evaluate another run's training"
                         + ("" if self.median_eval_seconds is None else
                            f": {self.median_eval_seconds / 60:.1f} min each outside training"))
        if self.other_precision:
            parts.append(f"none timed at {self.other_precision}, which these runs will use here")
        return "; ".join(parts)

    def durations(self, wave: int | None = None) -> list[float]:
        """The predicted time of each pending run that can be timed: a full run's median, or for one that borrows
        its training the median time outside training; a run with nothing to time it by is left out. `wave` 1 or 2:
        only the runs of that wave (`run_plan` runs the second, the runs waiting for a training, after the first)."""
        borrowed = min(self.borrowing, self.pending)
        waiting = min(self.waiting, borrowed)
        full = [self.median_seconds] * (self.pending - borrowed) if self.median_seconds is not None else []
        evaluated = [self.median_eval_seconds] if self.median_eval_seconds is not None else []
        first, second = full + evaluated * (borrowed - waiting), evaluated * waiting
        return first if wave == 1 else second if wave == 2 else first + second


def config_shape(config: dict[str, Any]) -> str:
    """A run's resolved config (`RunConfig.model_dump(mode="json")`, or a run folder's `config.yaml`) without what
    names, stores or seeds it (`name`, `runs_dir`, the sweep seeds `SEED_KEYS`), as one key: runs of one shape
    differ only by their seeds, so one's run time prices another's. Hashed as run ids hash configs (`config_hash`)."""
    shaped = copy.deepcopy(config)
    shaped.pop("name", None)
    shaped.pop("runs_dir", None)
    for key in SEED_KEYS.values():
        section, name = key.split(".")
        if isinstance(shaped.get(section), dict):
            shaped[section].pop(name, None)
    return config_hash(shaped)


def _prices(folder: Path, shapes: set[str]) -> bool:
    """Whether the finished run in `folder` can time runs of these shapes: its `config.yaml` is one of them up to the
    seeds (`config_shape`). A folder without a readable config is kept (as before configs were compared)."""
    try:
        config = yaml_without_aliases((folder / "config.yaml").read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return True
    return not isinstance(config, dict) or config_shape(config) in shapes


def run_costs(p: Plan, records: Path | str | None = None,
              seeds: Collection[int] | None = None, reuse: bool = True,
              timing: Path | str | None = None, train_from: list[Path] | None = None) -> dict[str, RunCost]:
    """For each run set of the plan, what its finished runs took — those in its folder and those recorded under
    `<records>/runs/<set>/` whose config is one of the set's up to the seeds (`config_shape`: a CI-size `--quick`
    run is not priced by a full-size run of its set, nor a run by an older config of it), of any code version (a
    cost, not a result) — and how many runs it still has to run, as
    `run_plan` would: not finished in its folder, not recorded (with `records`, in any set: `recorded_runs`), and no
    twin (the same run id) finished or already counted in another set, since a twin is copied, not run. With `seeds`
    (as `run_plan`'s), only the runs of those report seeds are to run now; the others are counted as `deferred`. So a
    user sees what the rest will cost before starting it. A set no run has finished gets no time: nothing is
    guessed. Runs made at the precision the set's runs would use on this machine (bf16 autocast where it is native,
    else fp32) time it when there are any — on one CPU the two differ about twofold — else all of them, and the cost
    says so. With `reuse=False` (`--no-reuse`: every run fresh) the records still time the runs but none counts as
    done. `timing`: another records folder read for the times only (e.g. the repository's committed `results/`
    when no `--record` is given): its runs time a set, and none counts as done. With `reuse`, a run to go that will
    evaluate a training another run lends (a finished run of the plan, one under the `train_from` roots, or the
    first run to go of its training: `sweep.training_plan`, as `run_plan` runs them) is priced at the timed runs'
    time outside training (`borrowing`)."""
    sets = [s for s in p.sets.values() if s.sweep is not None]
    kept = {s.name: [Path(r) / "runs" / s.name for r in (records, timing) if r is not None] for s in sets}
    recorded = set(recorded_runs(records)) if records is not None and reuse else set()  # any set's record
    done = {r.run_id for s in sets for r in s.sweep.runs
            if is_complete(r.directory(s.sweep.root)) or r.run_id in recorded}
    counted: set[str] = set()
    out: dict[str, RunCost] = {}
    tasks: list[RunTask] = []
    for s in sets:
        found: dict[str, dict[str, Any]] = {}
        shapes = {config_shape(r.config.model_dump(mode="json")) for r in s.sweep.runs}
        for base in [s.sweep.root, *kept[s.name]]:
            for summary in sorted(Path(base).glob("*/summary.json")):
                if summary.parent.name.startswith("."):  # a copy or record left half-made by a crash
                    continue
                if summary.parent.name in found:
                    continue
                try:
                    data = read_json(summary)
                except (ValueError, OSError):  # a torn summary prices nothing (evaluating names the file)
                    continue
                if isinstance(data, dict) and run_seconds(data) > 0 and _prices(summary.parent, shapes):
                    found[summary.parent.name] = data
        to_go = {r.run_id: int(r.config.train.train_seed) for r in s.sweep.runs
                 if r.run_id not in done and r.run_id not in counted}
        to_run = {i for i, seed in to_go.items() if seeds is None or seed in seeds}
        tasks += [RunTask(r.run_id, r.directory(s.sweep.root), r.config) for r in s.sweep.runs if r.run_id in to_run]
        counted |= set(to_go)  # a twin left for later is counted once too
        here = _precision_here(s.sweep.runs[0].config) if s.sweep.runs else None  # a set's runs share their precision
        alike = [d for d in found.values() if precision_of(d) == here]
        timed = alike or list(found.values())  # bf16 and fp32 runs differ by ~2× on one CPU: never mixed if avoidable
        trained = [d for d in timed if not (d.get("provenance") or {}).get("trained_in")]  # the others: no training
        times = [run_seconds(d) for d in trained]
        evaluations = [run_seconds(d) - train_seconds(d) for d in timed]
        machines = sorted({f"{machine_of(d)}, {precision_of(d)}, {d.get('threads', '?')} thread"
                           + ("s" if d.get("threads") != 1 else "") for d in trained})
        out[s.name] = RunCost(len(trained), statistics.median(times) if times else None, machines, len(to_run),
                              len(to_go) - len(to_run), None if alike or not found or here is None else here,
                              median_eval_seconds=statistics.median(evaluations) if evaluations else None)
    if reuse and tasks:
        candidates = [r.directory(s.sweep.root) for s in sets for r in s.sweep.runs]
        waves, borrowers = training_plan(tasks, candidates + run_folders_under(train_from or []))
        second = {Path(t.run_dir) for t in waves[1]} if len(waves) > 1 else set()
        for s in sets:
            out[s.name].borrowing = sum(r.directory(s.sweep.root) in borrowers for r in s.sweep.runs)
            out[s.name].waiting = sum(r.directory(s.sweep.root) in second for r in s.sweep.runs)
    return out


def train_seconds(summary: dict[str, Any]) -> float:
    """The time a finished run spent training, every invocation of it summed (0 for one that evaluated another
    run's training)."""
    return float((summary.get("seconds_all_invocations") or summary.get("seconds") or {}).get("train", 0) or 0)


def wall_seconds(durations: Collection[float], workers: int) -> float:
    """An estimate of the wall time of runs of these durations on `workers` workers, one run each at a time: the
    makespan with the longest started first, each on the worker free soonest (the pool orders them by their
    training's arithmetic, `sweep.largest_first`, not by these times, so it can end later), not the run-hours over
    the workers (5 runs of an hour on 2 workers take 3 hours, not 2.5)."""
    if workers < 1:
        raise ValueError(f"workers must be ≥ 1, got {workers}")
    loads = [0.0] * workers
    for d in sorted(durations, reverse=True):
        loads[loads.index(min(loads))] += float(d)
    return max(loads)


def shipped_records() -> Path | None:
    """The run records committed with the package's repository (`results/` beside `src/`), when this is a clone that
    has them; None for an installed package."""
    folder = Path(__file__).resolve().parents[3] / "results"
    return folder if (folder / "runs").is_dir() else None


def _precision_here(cfg) -> str | None:
    """The precision a run of `cfg` would use on this machine, as `precision_of` names it (None: not known here)."""
    from conceptlab.train.precision import resolve_bf16, resolve_device

    try:
        return precision_name(resolve_bf16(cfg.train.bf16, resolve_device(cfg.train.device)))
    except ValueError:  # train.device=cuda on a machine without one: the runs cannot run here anyway
        return None


def recorded_runs(records: Path | str) -> dict[str, dict[str, Path]]:
    """Run id → set name → its record under `<records>/runs/<set>/<run id>/`, read once. A run id recorded under
    several sets is one run (twins: the same config and analysis versions), so a set run on its own can take the
    record another set made (`restore_records` prefers its own)."""
    found: dict[str, dict[str, Path]] = {}
    for folder in sorted((Path(records) / "runs").glob("*/*")):
        if not folder.name.startswith(".") and is_record(folder):
            found.setdefault(folder.name, {})[folder.parent.name] = folder
    return found


def restore_records(p: Plan, records: Path | str) -> int:
    """Fill each unfinished run folder of the plan whose run is recorded (`recorded_runs`: under
    `<records>/runs/<set>/<run id>/`, or a twin's record in another set) with a copy of its record
    (`sweep.adopt_finished_twin`: status `copied_from` the record), so that a suite gathered over sessions runs only
    what nobody has recorded yet and evaluates the rest from the records. A folder another process holds is left
    alone. Returns how many runs were restored."""
    restored = 0
    kept = recorded_runs(records)
    for s in p.sets.values():
        if s.sweep is None:  # analytic sets are recomputed when the code changes (seconds): never restored
            continue
        for r in s.sweep.runs:
            folder = r.directory(s.sweep.root)
            if r.run_id not in kept or is_complete(folder):
                continue
            by_set = kept[r.run_id]
            if adopt_finished_twin(by_set.get(s.name) or next(iter(by_set.values())), folder):
                restored += 1
    return restored


def adopt_runs(p: Plan, sources: Collection[Path | str]) -> dict[str, int]:
    """Fill each unfinished run folder of the plan with a copy of a finished run of the same run id found anywhere
    under `sources` (a sweep run on its own with `conceptlab sweep run`, another findings root, a records folder):
    the id names the config and the analysis versions, so that run's results are this one's
    (`sweep.adopt_finished_twin`; status `copied_from` it). Returns the count adopted from each source."""
    from conceptlab.experiments.findings_compare import run_folders

    found: dict[str, tuple[str, Path]] = {}
    for source in sources:
        if not Path(source).is_dir():
            raise ConfigError(f"--adopt {source}: not a folder")
        for run_id, folder in run_folders(source).items():
            found.setdefault(run_id, (str(source), folder))
    counts = {str(source): 0 for source in sources}
    for s in p.sets.values():
        if s.sweep is None:
            continue
        for r in s.sweep.runs:
            folder = r.directory(s.sweep.root)
            if r.run_id in found and not is_complete(folder) and adopt_finished_twin(found[r.run_id][1], folder):
                counts[found[r.run_id][0]] += 1
    return counts


def record_plan(p: Plan, dest: Path | str) -> dict[str, int]:
    """Keep a record (`store.records`) of every finished run of the plan's run sets under `<dest>/runs/<set>/<run
    id>/`, and each analytic set's per-seed results beside them, so that `dest` can be evaluated later as a findings
    root (`conceptlab findings --evaluate-only --root <dest>`) with runs gathered from several sessions or machines.
    A run already recorded there (same run id: same config and analysis versions) keeps its first record; a run made
    while code it depends on differed from its recorded version (`made_with_code_drift`) is not recorded. Returns
    counts: recorded now, already recorded, not finished, made with code drift (the last two not recorded)."""
    import shutil

    dest = Path(dest)
    if dest.resolve() == p.root.resolve():
        raise ConfigError(f"the records folder {dest} is the findings root itself; name another folder")
    counts = {"recorded": 0, "already": 0, "not_finished": 0, "code_drift": 0}
    for s in p.sets.values():
        target = dest / "runs" / s.name
        if s.sweep is None:
            for seed in s.seeds:
                path = _analytic_path(s, seed)
                if not path.is_file():
                    counts["not_finished"] += 1
                elif (target / path.name).is_file() and read_json(target / path.name) == read_json(path):
                    counts["already"] += 1
                else:  # analytic results are recomputed when the code changes: the newest is kept
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, target / path.name)
                    counts["recorded"] += 1
            continue
        for r in s.sweep.runs:
            folder = r.directory(s.sweep.root)
            if not is_complete(folder):
                counts["not_finished"] += 1
            elif made_with_code_drift(folder):
                counts["code_drift"] += 1
            elif record_run(folder, target / r.run_id) is None:
                counts["already"] += 1
            else:
                counts["recorded"] += 1
    return counts


def made_with_code_drift(folder: Path) -> bool:
    """Whether a finished run (or the training it reuses) was made while code it depends on differed from its
    recorded version (`code_drift` in its summary, `experiments.code_versions`): its numbers then belong to no
    recorded code, so it is not kept as a record. Runs made before the field existed are not."""
    summary = read_json(folder / "summary.json")
    made_by = summary.get("provenance") or {}
    return bool(run_code_drift([made_by, *trainers_of(summary)]))


# -- reading the runs and evaluating ------------------------------------------------------------------------------------

@dataclass
class RunRecord:
    """One finished run of a set, as the criteria read it."""

    run_id: str
    seed: int
    config: dict[str, Any]        # flattened (store.index.flatten): "data.color_separation" → value
    summary: dict[str, Any]
    folder: Path | None
    setup: str | None = None      # `setup_of` its config (None: not a concept-space run)


def records(s: PlannedSet, unreadable: list[str] | None = None) -> tuple[list[RunRecord], list[str]]:
    """(finished runs of the set, run ids not finished). An analytic result computed from other arguments, another
    function or another package version than the suite's now is not read: it counts as not finished (a rerun
    recomputes it), as a run whose config changed gets a new run id. A finished run whose summary does not read
    (torn, not JSON) counts as not finished too, and a line naming it goes to `unreadable`."""
    if s.sweep is None:
        out = []
        missing = []
        for seed in s.seeds:
            path = _analytic_path(s, seed)
            data = read_json(path) if path.is_file() else {}
            if data.get("key") != _analytic_key(s, seed):
                missing.append(f"seed_{seed}")
                continue
            # the computation's time and machine, where a run's summary keeps them
            summary = {"seconds": {"total": data.get("seconds", 0.0)}, "provenance": data.get("provenance"),
                       "precision": "analytic (no network)", **data["summary"]}
            out.append(RunRecord(f"seed_{seed}", seed, {"seed": seed, **{f"args.{k}": v for k, v in s.spec.args.items()}},
                                 summary, None))
        return out, missing
    out, missing = [], []
    for r in s.sweep.runs:
        folder = r.directory(s.sweep.root)
        run = RunFolder(folder)
        if not run.is_complete():
            missing.append(r.run_id)
            continue
        try:
            summary = run.read_summary()
        except (ValueError, OSError) as err:
            missing.append(r.run_id)
            if unreadable is not None:
                unreadable.append(f"{s.name}: {one_line(str(err))}; read as no run (`conceptlab resume "
                                  f"{folder}` writes its summary again from what the run folder holds)")
            continue
        out.append(RunRecord(r.run_id, int(r.config.train.train_seed), flatten(r.config.model_dump(mode="json")),
                             summary, folder, setup_of(r.config)))
    return out, missing


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, (int, float)) and not isinstance(wanted, bool) and isinstance(value, (int, float)):
        return math.isclose(float(value), float(wanted), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(wanted, (list, dict)):  # a flattened config keeps lists as JSON text
        return value == wanted or value == json.dumps(wanted)
    return str(value) == str(wanted)


def _table_value(rec: RunRecord, sel: Selector):
    """The run's value in its table `sel.table`: a number or truth value, None where the matching row holds none
    (the run wrote it as missing), `NOT_MEASURED` where nothing was read at all — no table, no row matching
    `where` (or at the step asked for), no checkpoint before a `StepBefore` rule's first reaching, too few for a
    `StepWindow` — so that a criterion never reads a value nobody measured as censored."""
    not_measured = finding_criteria.NOT_MEASURED
    if rec.folder is None:
        return not_measured
    path = RunFolder(rec.folder).table(sel.table)
    if not path.is_file():
        return not_measured
    table = read_parquet(path)
    frame = _rows(table, sel.where, sel.table, rec.run_id)
    if isinstance(sel.step, StepWindow) and "step" in frame.columns and not frame.empty:
        return _window_value(frame, sorted(table["step"].unique()), sel, rec.run_id)
    if sel.step is not None and "step" in frame.columns and not frame.empty:
        steps = sorted(frame["step"].unique())
        if isinstance(sel.step, StepBefore):
            at = step_before(_rows(table, sel.step.where, sel.table, rec.run_id), sel.step.column, sel.step.reaches)
            if at is None:
                return not_measured
        else:
            at = steps[0] if sel.step == "first" else steps[-1] if sel.step == "last" else sel.step
        frame = frame[frame["step"] == at]
    if frame.empty:
        return not_measured
    if len(frame) > 1:
        raise ConfigError(f"table {sel.table} of run {rec.run_id}: {len(frame)} rows match {sel.where} "
                          f"(step {sel.step}); narrow where or step to one row")
    v = frame.iloc[0][sel.column]
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else (bool(v) if isinstance(v, bool) else float(v))


def _window_value(frame: pd.DataFrame, steps: list, sel: Selector, run_id: str):
    """`sel.step`'s statistic (StepWindow) of `sel.column` over the table's last checkpoints (`steps`: every step
    the table has), one matching row each; `NOT_MEASURED` when the run has fewer checkpoints, or a checkpoint
    of the window has no matching row or no value (the window is never moved to earlier checkpoints)."""
    window = sel.step
    if len(steps) < window.last:
        return finding_criteria.NOT_MEASURED
    last = steps[-window.last:]
    rows = frame[frame["step"].isin(last)]
    if rows["step"].nunique() < window.last:
        return finding_criteria.NOT_MEASURED
    if len(rows) != window.last:
        raise ConfigError(f"table {sel.table} of run {run_id}: {len(rows)} rows match {sel.where} in its last "
                          f"{window.last} checkpoints; narrow where to one row a checkpoint")
    values = pd.to_numeric(rows[sel.column], errors="coerce")
    if values.isna().any():
        return finding_criteria.NOT_MEASURED
    return float(values.median())


def _rows(frame: pd.DataFrame, where: dict[str, Any], table: str, run_id: str) -> pd.DataFrame:
    for col, wanted in where.items():
        if col not in frame.columns:
            raise ConfigError(f"table {table} of run {run_id} has no column {col!r}")
        frame = frame[frame[col].map(lambda v, w=wanted: _matches(v, w))]
    return frame


def step_before(rows: pd.DataFrame, column: str, reaches: float):
    """The last step before `column` (its maximum over the rows of a step) first reaches `reaches`; None when it
    reaches it at the first step or there are no rows; the last step when it never does."""
    if rows.empty or column not in rows.columns:
        return None
    per_step = rows.groupby("step")[column].max().sort_index()
    hit = [i for i, v in enumerate(per_step.to_numpy()) if v >= reaches]
    if not hit:
        return per_step.index[-1]
    return None if hit[0] == 0 else per_step.index[hit[0] - 1]


def _one_value(rec: RunRecord, sel: Selector):
    """The run's value; `NOT_MEASURED` when its summary lacks the path (a typo, or a run made without the measure:
    not measured, never read as "did not happen", which a null there means)."""
    if sel.path is None:
        return _table_value(rec, sel)
    node = rec.summary
    for key in sel.path.split("."):
        if not isinstance(node, dict) or key not in node:
            return finding_criteria.NOT_MEASURED
        node = node[key]
    return summary_value(rec.summary, sel.path.split("."))


def seed_values(sel: Selector, recs: list[RunRecord], seeds: list[int]) -> tuple[dict[int, Any], dict[int, list[str]]]:
    """(seed → value, seed → the run ids it was read from) for every report seed. A seed none of whose finished runs
    the selector picks, a computed value the function returns nothing for, and a trend over runs of which one did
    not measure the value (or too few to make one) are `NOT_MEASURED`: never read as censored, which only a run
    that measured the value and wrote it as missing (the event did not happen) is. Several runs for one seed are
    refused (pick one with `config:`) unless the value is a trend over them (`across`) or a compute function
    that says it reads them together (`aggregates = True`: a trend, a mean, a crossing over a sweep axis)."""
    not_measured = finding_criteria.NOT_MEASURED
    chosen = [r for r in recs if _selects(sel, r.config)]
    used = {s: [r.run_id for r in chosen if r.seed == s] for s in seeds}
    if sel.compute is not None:
        fn = resolve(sel.compute, "compute function")
        if not getattr(fn, "aggregates", False):
            for s in seeds:
                _one_run_a_seed(sel, [r for r in chosen if r.seed == s], s)
        out = fn(chosen, **sel.args)
        return {s: out.get(s, not_measured) for s in seeds}, used
    values: dict[int, Any] = {}
    for s in seeds:
        mine = [r for r in chosen if r.seed == s]
        if sel.across is not None:
            xs = [r.config.get(sel.across) for r in mine]
            ys = [finding_criteria.uncensor(_one_value(r, sel), sel.censored) for r in mine]
            if any(y is None for y in ys):  # a run of the trend did not measure it: no trend from the others
                values[s] = not_measured
                continue
            rho = finding_criteria.trend(xs, ys)  # NaN with fewer than 3 runs or a constant side
            values[s] = not_measured if math.isnan(rho) else rho
            continue
        _one_run_a_seed(sel, mine, s)
        values[s] = _one_value(mine[0], sel) if mine else not_measured
    return values, used


def _one_run_a_seed(sel: Selector, mine: list[RunRecord], seed: int) -> None:
    """Refuse a value read from one run a seed when the selector picks several for `seed`."""
    if len(mine) > 1:
        raise ConfigError(f"value from run set {sel.runs}: {len(mine)} runs for seed {seed}; pick one with config: "
                          f"(they differ in {sorted(_differing([r.config for r in mine]))[:4]})")


def unfinished_seeds(s: PlannedSet, missing: list[str], sel: Selector, seeds: list[int]) -> set[int]:
    """The report seeds for which a run the selector reads is not finished (`missing`: the set's unfinished run ids).
    Their value is unknown, not censored: a run that never finished says nothing about when an event happens."""
    if not missing:
        return set()
    gone = set(missing)
    if s.sweep is None:
        return {seed for seed in seeds if f"seed_{seed}" in gone}
    out = set()
    for r in s.sweep.runs:
        if r.run_id not in gone or int(r.config.train.train_seed) not in seeds:
            continue
        if _selects(sel, flatten(r.config.model_dump(mode="json"))):
            out.add(int(r.config.train.train_seed))
    return out


def _selects(sel: Selector, config: dict[str, Any]) -> bool:
    """Whether a run's flattened config matches the selector's `config:` filter."""
    return all(_matches(config.get(k), v) for k, v in sel.config.items())


def _differing(configs: list[dict[str, Any]]) -> set[str]:
    keys = set().union(*configs)
    return {k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1}


def evaluate_finding(p: Plan, finding: FindingSpec, recs: dict[str, list[RunRecord]],
                     missing: dict[str, list[str]]) -> dict[str, Any]:
    """A finding's criteria over its report seeds, with the runs, machines and times that made them."""
    if finding.status != "implemented" or finding.name in p.skipped:
        return {"name": finding.name, "paper": finding.paper, "claim": finding.claim, "setup": finding.setup,
                "control": finding.control, "control_label": finding.control_label,
                "title": finding.title, "headline": finding.headline, "see_also": finding.see_also,
                "reason": p.skipped.get(finding.name, finding.reason),
                "verdict": "not run", "criteria": []}
    out_criteria = []
    sets_used: dict[str, None] = {}
    for c in claim_criteria(p.suite, finding):
        seeds = p.sets[c.value.runs].seeds
        values, used = seed_values(c.value, recs[c.value.runs], seeds)
        sets_used[c.value.runs] = None
        no_run = unfinished_seeds(p.sets[c.value.runs], missing[c.value.runs], c.value, seeds)  # never censored
        if c.control is not None:
            controls, cused = seed_values(c.control, recs[c.control.runs], seeds)
            sets_used[c.control.runs] = None
            no_run |= unfinished_seeds(p.sets[c.control.runs], missing[c.control.runs], c.control, seeds)
            for s, ids in cused.items():
                used[s] = sorted(set(used[s]) | set(ids))
            against: Any = controls
        else:
            against = c.threshold
        need = c.min_seeds if c.min_seeds is None or p.scale != "quick" else min(c.min_seeds, len(seeds))  # quick: 1 seed
        control_censored = c.control.censored if c.control is not None else "none"
        if c.over_seeds is not None:
            result = finding_criteria.evaluate_over_seeds(values, against, c.direction, c.margin, c.over_seeds,
                                                          c.value.censored, control_censored, no_run)
        else:
            result = finding_criteria.evaluate(values, against, c.direction, c.margin, need, c.value.censored,
                                               control_censored, no_run)
        out_criteria.append({"name": c.name, "statement": c.statement, "direction": c.direction,
                             "margin": c.margin, "threshold": c.threshold,
                             "value": c.value.model_dump(exclude_defaults=True),
                             "control": None if c.control is None else c.control.model_dump(exclude_defaults=True),
                             "restated": c.restated, "over_seeds": c.over_seeds, "runs": used, **result})
    runs_by_set = {n: recs[n] for n in sets_used}
    summaries = [r.summary for rs in runs_by_set.values() for r in rs]
    # a run two of its sets share (one id: e.g. a gap width that is also a composition control) ran once
    once = {r.run_id if r.folder is not None else f"{n}/{r.run_id}": r.summary  # analytic: seed_<n> per set
            for n, rs in runs_by_set.items() for r in rs}
    seconds = sum(run_seconds(r) for r in once.values())
    trainers = [i for r in summaries for i in trainers_of(r)]  # a run evaluating another's training: who trained it
    machines = sorted({machine_of(r) for r in summaries} | {machine_of({"provenance": i}) for i in trainers})
    precision = sorted({precision_of(r) for r in summaries})
    threads = sorted({int(r["threads"]) for r in summaries if r.get("threads")})  # fp32 sums depend on it
    commits = sorted({str((r.get("provenance") or {}).get("git_commit"))[:7] for r in summaries}
                     | {str(i.get("git_commit"))[:7] for i in trainers})
    made = sorted({r.setup for rs in runs_by_set.values() for r in rs if r.setup is not None})
    # runs made (or whose training was made) while code they depend on differed from its recorded version
    drifts = [d for d in (run_code_drift([(r.get("provenance") or {}), *trainers_of(r)]) for r in once.values()) if d]
    return {
        "name": finding.name, "paper": finding.paper, "claim": finding.claim,
        "setup": "+".join(made) if made else finding.setup,  # what the runs were (a paper-scale run is the paper's)
        "control": finding.control, "control_label": finding.control_label, "reason": finding.reason,
        "title": finding.title, "headline": finding.headline, "see_also": finding.see_also,
        "verdict": finding_criteria.finding_verdict([c["verdict"] for c in out_criteria]),
        "criteria": out_criteria,
        "all_on_one_seed": finding_criteria.all_on_one_seed(out_criteria),
        "run_sets": {n: {"seeds": p.sets[n].seeds, "command": p.sets[n].command, "folder": str(p.sets[n].root),
                         "finished": len(recs[n]), "missing": missing[n]} for n in sets_used},
        "machines": machines, "precision": precision, "threads": threads, "code": commits,
        **({"code_drift": {"runs": len(drifts), "keys": sorted({str(k) for d in drifts for k in d})}} if drifts else {}),
        "run_seconds": round(seconds, 3),  # an analytic set takes milliseconds
        "command": f"conceptlab findings {finding.name}" + ("" if p.scale == "full" else f" --scale {p.scale}"),
    }


def evaluate_suite(p: Plan) -> dict[str, Any]:
    """Every chosen finding evaluated from the finished runs of the plan."""
    recs: dict[str, list[RunRecord]] = {}
    missing: dict[str, list[str]] = {}
    unreadable: list[str] = []
    for name, s in p.sets.items():
        recs[name], missing[name] = records(s, unreadable)
    findings = [evaluate_finding(p, f, recs, missing) for f in p.findings]
    commit, dirty = git_state()
    return {"scale": p.scale, "root": str(p.root), "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "code": {"conceptlab": package_version(), "git_commit": commit, "git_dirty": dirty},
            "machine": {"cpu": cpu_model(), "host": socket.gethostname()},
            "records": len({r.run_id for rs in recs.values() for r in rs  # a run two sets share counts once
                            if r.folder is not None and is_record(r.folder)}),
            "findings": findings, **({"unreadable": unreadable} if unreadable else {})}


def _same_page(old: str, new: str) -> bool:
    """Whether two generated findings pages differ at most in their provenance line (when and at which commit they
    were evaluated): a regenerated page whose content did not change is left as it was."""
    def body(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith("Scale `")]

    return body(old) == body(new)


def write_findings(result: dict[str, Any], root: Path, wall_seconds: float | None = None,
                   markdown: Path | None = None, readme: Path | None = None) -> list[Path]:
    """findings.json, findings.md, report.html and figures/<finding>.png (+ its vector files: `report.save`) under
    `root`; with `markdown`, the Markdown also at that path, its figures copied (PNG) to `figures/<its stem>/`
    beside it (how docs/findings.md is regenerated: `conceptlab findings --markdown docs/findings.md`; a page whose
    content is unchanged but for its provenance line is left as it was); with `readme`, that file's generated
    findings table rewritten from this evaluation (`report.readme`)."""
    from conceptlab.report.findings import findings_html, findings_markdown, finding_figure, has_runs
    from conceptlab.report.save import save_figure
    from conceptlab.store.files import write_text

    root = Path(root)
    if wall_seconds is not None:
        result = {**result, "wall_seconds": round(wall_seconds, 1)}
    figures = root / "figures"
    for f in result["findings"]:
        if has_runs(f):  # a finding with no finished run has no figure
            fig = finding_figure(f)
            save_figure(fig, figures / f"{f['name']}.png", remove_stale=True)
            f["figure"] = f"figures/{f['name']}.png"
    paths = [write_json(root / RESULTS, result, strict=True),  # strict JSON: jq and browsers read it too
             write_text(root / "findings.md", findings_markdown(result)),
             write_text(root / "report.html", findings_html(result, root))]
    if markdown is not None:
        import shutil

        markdown = Path(markdown)
        target = markdown.parent / "figures" / markdown.stem  # each page its own figures (findings.md: figures/findings)
        moved = json.loads(json.dumps(result))
        for f in moved["findings"]:
            if f.get("figure"):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / f["figure"], target / Path(f["figure"]).name)
                f["figure"] = f"figures/{markdown.stem}/{Path(f['figure']).name}"
            else:  # no runs (any more): no figure left from an earlier generation of the page
                (target / f"{f['name']}.png").unlink(missing_ok=True)
        page = findings_markdown(moved)
        if not (markdown.is_file() and _same_page(markdown.read_text(encoding="utf-8"), page)):
            paths.append(write_text(markdown, page))  # else kept: only its evaluation time and commit would change
    if readme is not None:  # the README's findings table, between its markers (report.readme)
        from conceptlab.report.readme import write_readme_table

        paths.append(write_readme_table(result, readme))
    return paths
