"""Sweep specs: expand a YAML sweep (base config + axes) into a manifest of runs with stable ids.

A sweep spec is YAML (shipped ones live in `conceptlab/experiments/sweeps/`):

    description: "..."
    base: concept-signal-color-first-tiny    # preset name or YAML file (relative to the spec)
    overrides:                               # applied to every run: mapping or list of key=value
      train.steps: 400
    axes:
      grid:                                  # every combination of these lists
        data.color_separation: [0.3, 0.5, 0.7]
      zip:                                   # groups of equal-length lists that advance together
        - {data.size_separation: [0.1, 0.2], model.dropout: [0.0, 0.1]}
      seeds: [0, 1, 2]                       # data_seed = train_seed = each value
      # seeds: {data_seed: [0, 1], train_seed: [0, 1, 2]}   # separate seeds, crossed
    settings_seeds: [0, 1]                   # seeds the settings were chosen on: refused on the seeds axis
    controls: {...}                          # optional: numbers beside their controls, claims (experiments.claims)
    executor:
      kind: local                            # local | slurm
      workers: null                          # local: processes (default: CPU cores)
      slurm: {partition: null, time_min: 60, gpus_per_task: 0, cpus_per_task: 2, mem_gb: 4, array_parallelism: 64}

Every run is the base config plus the spec's overrides, the command line's overrides and
one value per axis; an override or axis value that is a mapping for a config section changes only the keys it names.
Its id is the hash of its resolved config (`runs_dir` and `name` left
out), so the same run has the same id in every sweep and on every machine. Each run lives
in `<sweep_root>/<run_id>/`; `<sweep_root>/manifest.json` lists them with their axis values, the resolved base and
the command line's overrides, which a rerun from the sweep folder applies again (a sweep folder holds one setting).
Rerunning a sweep skips runs that are complete (summary.json written) and resumes the rest; `sweep_state` reads
the manifest and each run's state back (`conceptlab sweep status`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from conceptlab.config_base import StrictConfig, config_hash
from conceptlab.experiments.claims import ControlsSpec
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.executors import ExecutorOptions, RunTask
from conceptlab.experiments.loading import (
    ConfigError,
    config_to_yaml,
    is_file_source,
    load_config,
    parse_override,
    parse_yaml,
    read_text_file,
    set_key,
    validate,
)
from conceptlab.experiments.provenance import analysis_versions
from conceptlab.experiments.resources import check_memory, training_flops, training_shape
from conceptlab.experiments.sweep_state import MANIFEST, is_sweep_folder, read_manifest
from conceptlab.experiments.training_reuse import find_donor, run_folders_under, trained_in
from conceptlab.messages import one_line, shown
from conceptlab.store.files import write_json, write_text
from conceptlab.store.run_folder import STATUS, RunFolder, RunLockedError

SPEC_COPY = "sweep.yaml"
SEED_KEYS = {"data_seed": "data.data_seed", "train_seed": "train.train_seed"}


class SweepSpec(StrictConfig):
    """A parsed sweep spec (before expansion)."""

    name: str
    description: str = ""
    base: str
    overrides: list[str] = Field(default_factory=list)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    zip: list[dict[str, list[Any]]] = Field(default_factory=list)
    seeds: dict[str, list[int]] = Field(default_factory=dict)
    settings_seeds: list[int] = Field(
        default_factory=list, description="seeds used to choose the sweep's settings: never run (so never reported)"
    )
    executor: ExecutorOptions = Field(default_factory=ExecutorOptions)
    root: str | None = None
    controls: ControlsSpec | None = Field(
        None, description="the numbers to tabulate beside their controls and the claims to test (experiments.claims)"
    )


@dataclass
class SweepRun:
    """One run of a sweep: its stable id, the axis values that make it, its resolved config."""

    run_id: str
    values: dict[str, Any]
    config: RunConfig

    def directory(self, root: Path) -> Path:
        return Path(root) / self.run_id


@dataclass
class Sweep:
    """An expanded sweep: the spec, where it lives, its runs (in manifest order) and the command line's overrides."""

    spec: SweepSpec
    root: Path
    runs: list[SweepRun] = field(default_factory=list)
    source: str = ""
    overrides: list[str] = field(default_factory=list)

    @property
    def axes(self) -> list[str]:
        return list(self.runs[0].values) if self.runs else []


def sweep_names() -> list[str]:
    folder = resources.files("conceptlab.experiments") / "sweeps"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def spec_text(source: str) -> tuple[str, str, Path | None]:
    """(name, YAML text, folder relative paths resolve from) for a shipped sweep name or a YAML path."""
    path = Path(source)
    if path.is_dir() and (path / SPEC_COPY).is_file():
        path = path / SPEC_COPY
    if path.is_file():
        name = path.stem if path.name != SPEC_COPY else path.parent.resolve().name
        return name, read_text_file(path, "sweep spec"), path.parent
    if source.endswith((".yaml", ".yml")) or "/" in source or path.exists():  # a path: never a shipped name
        read_text_file(path, "sweep spec")  # says why it cannot be read: missing, not a regular file, ...
    if source not in sweep_names():
        raise ConfigError(f"unknown sweep {shown(source)}; available: {', '.join(sweep_names())} (or a YAML file)")
    text = (resources.files("conceptlab.experiments") / "sweeps" / f"{source}.yaml").read_text()
    return source, text, None


def _as_overrides(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, dict):
        return [f"{k}={json.dumps(v)}" for k, v in value.items()]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{where}: overrides must be a mapping of key: value or a list of key=value strings")


def parse_spec(source: str) -> SweepSpec:
    """Read a sweep spec (shipped name, YAML file, or a sweep folder holding sweep.yaml)."""
    name, text, folder = spec_text(source)
    where = f"sweep {shown(name)}"
    data = parse_yaml(text, where) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of sweep keys (base, axes, ...), got {type(data).__name__}")
    data = dict(data)
    if "base" not in data:
        raise ConfigError(f"{where}: missing 'base' (a preset name or config YAML)")
    if not isinstance(data["base"], str) or not data["base"].strip():
        raise ConfigError(f"{where}: base must be a preset name or a config YAML path, got {shown(data['base'])}")
    base = data["base"]
    if folder is not None and base.endswith((".yaml", ".yml")) and not Path(base).is_absolute():
        base = str(folder / base)
    axes = data.pop("axes", None) or {}
    if not isinstance(axes, dict):
        raise ConfigError(f"{where}: 'axes' must be a mapping with grid / zip / seeds")
    unknown = set(axes) - {"grid", "zip", "seeds"}
    if unknown:
        raise ConfigError(f"{where}: unknown axes section {sorted(unknown)[0]!r}; allowed: grid, zip, seeds")
    seeds = axes.get("seeds")
    if isinstance(seeds, list):
        seeds = {"together": seeds}
    elif isinstance(seeds, dict):
        bad = set(seeds) - set(SEED_KEYS)
        if bad:
            raise ConfigError(f"{where}: seeds axis key {sorted(bad)[0]!r} unknown; allowed: data_seed, train_seed")
    elif seeds is not None:
        raise ConfigError(f"{where}: 'seeds' must be a list (both seeds) or a mapping data_seed/train_seed → list")
    zipped = axes.get("zip") or []
    if isinstance(zipped, dict):
        zipped = [zipped]
    name = str(data.pop("name", None) or name)
    where = f"sweep {shown(name)}"
    check_sweep_name(name, where)
    fields = {
        "name": name,
        "description": str(data.pop("description", "") or ""),
        "base": base,
        "overrides": _as_overrides(data.pop("overrides", None), where),
        "grid": axes.get("grid") or {},
        "zip": zipped,
        "seeds": seeds or {},
        "settings_seeds": data.pop("settings_seeds", None) or [],
        "executor": data.pop("executor", None) or {},
        "root": data.pop("root", None),
        "controls": data.pop("controls", None),
    }
    data.pop("base")
    if data:
        raise ConfigError(
            f"{where}: unknown key {sorted(data)[0]!r}; allowed: name, description, base, overrides, axes, "
            "settings_seeds, executor, root, controls"
        )
    try:
        return SweepSpec.model_validate(fields)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        shows_value = "input" in first and first["type"] != "value_error" and not isinstance(first["input"], dict)
        msg = first["msg"].removeprefix("Value error, ")
        detail = f"{shown(first['input'])} ({msg})" if shows_value else msg
        raise ConfigError(one_line(f"{where}: bad value at {loc}: {detail}")) from None


def check_sweep_name(name: str, where: str) -> None:
    """ConfigError unless `name` can be a folder name under the runs folder (no path separator, no control
    character, not `.` or `..`, at most 100 characters): the default sweep root is RUNS_DIR/NAME."""
    if (not name or name in (".", "..") or len(name) > 100 or "/" in name or "\\" in name
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise ConfigError(f"{where}: name {shown(name)} must be a plain folder name (no '/', no control characters, "
                          f"at most 100 characters)")


def _axis_columns(spec: SweepSpec) -> list[tuple[list[str], list[tuple[Any, ...]]]]:
    """Each axis as (keys, list of value tuples); axes are crossed, a zip group's keys advance together."""
    where = f"sweep {spec.name}"
    axes: list[tuple[list[str], list[tuple[Any, ...]]]] = []
    for key, values in spec.grid.items():
        if not values:
            raise ConfigError(f"{where}: axis {key!r} is empty")
        axes.append(([key], [(v,) for v in values]))
    for group in spec.zip:
        if not group:
            raise ConfigError(f"{where}: a zip group is empty")
        lengths = {k: len(v) for k, v in group.items()}
        for key, n in lengths.items():
            if n == 0:
                raise ConfigError(f"{where}: axis {key!r} is empty")
        if len(set(lengths.values())) > 1:
            raise ConfigError(f"{where}: zip group lists differ in length: {lengths}")
        keys = list(group)
        axes.append((keys, list(zip(*(group[k] for k in keys)))))
    for name, values in spec.seeds.items():
        if not values:
            raise ConfigError(f"{where}: axis 'seeds' is empty" if name == "together" else f"{where}: axis {name!r} is empty")
        keys = list(SEED_KEYS.values()) if name == "together" else [SEED_KEYS[name]]
        axes.append((keys, [tuple([v] * len(keys)) for v in values]))
    chosen_on = set(spec.settings_seeds)
    for name, values in spec.seeds.items():
        reused = sorted(chosen_on & set(values))
        if reused:
            raise ConfigError(f"{where}: seeds {reused} were used to choose this sweep's settings (settings_seeds); "
                              f"report on other seeds")
    seen: set[str] = set()
    for keys, _ in axes:
        for key in keys:
            if key in seen:
                raise ConfigError(f"{where}: key {key!r} is set by two axes")
            seen.add(key)
    return axes


def run_id(cfg: RunConfig) -> str:
    """Stable id of a run: the hash of its resolved config, without where it is stored or what it is called, and of
    the analysis versions of the code (`experiments.provenance.analysis_versions`): a change that alters a study's
    numbers gives its runs new ids, so a sweep never reuses what older code made."""
    return config_hash({"config": cfg.model_dump(mode="json", exclude={"runs_dir", "name"}),
                        "versions": analysis_versions(cfg)})


def expand(source: str, overrides: list[str] | None = None, root: Path | None = None) -> Sweep:
    """Expand a sweep spec into its runs (validated configs with stable ids); writes nothing. From a sweep folder
    whose manifest records its base and command-line overrides (`write_manifest`), those are applied again; other
    overrides given there are refused (a sweep folder holds one setting)."""
    spec = parse_spec(source)
    where = f"sweep {spec.name}"
    given = overrides = list(overrides or [])
    here = Path(source) if Path(source).is_dir() else None  # rerunning from a sweep folder: it is the root
    recorded = _recorded_setting(here) if here is not None and is_sweep_folder(here) else None
    if recorded is not None:
        spec = spec.model_copy(update={"base": recorded[0]})
        overrides = recorded[1]
    axes = _axis_columns(spec)
    axis_keys = {k for keys, _ in axes for k in keys}
    for text in dict.fromkeys([*given, *overrides]):
        for key in sorted(axis_keys):
            if _sets_key(text, key):
                raise ConfigError(f"{where}: override {text!r} sets {key!r}, which the sweep varies (change the "
                                  f"axis instead)")
    for text in spec.overrides:  # the spec's own overrides come before the axes, which would overrule them silently
        for key in sorted(axis_keys):
            if _sets_key(text, key):
                raise ConfigError(f"{where}: the spec's override {text!r} sets {key!r}, which an axis of the sweep "
                                  "varies (the axis would overrule it): remove it from overrides, or from the axis")
    try:
        base_cfg = load_config(spec.base, spec.overrides + overrides)
        same = not given or _same_setting(spec, overrides, given)
    except ConfigError as err:
        raise ConfigError(f"{where}: base: {err}") from None
    if not same:
        raise _another_setting(spec, here, overrides, given, "rerun it without overrides, or run the spec (its name "
                               "or YAML file, not this folder) with them into another folder (--root)")
    base = base_cfg.model_dump(mode="json")
    for keys, values in axes:  # name the axis whose key is unknown, before any combination
        try:
            _with_values(base, dict(zip(keys, values[0])))
        except ConfigError as err:
            label = "seeds" if set(keys) <= set(SEED_KEYS.values()) else ", ".join(keys)
            raise ConfigError(f"{where}: axis {label}: {err}") from None
    sweep_root = Path(root or spec.root or here or Path(base_cfg.runs_dir) / spec.name)
    runs: list[SweepRun] = []
    ids: dict[str, dict[str, Any]] = {}
    for combo in itertools.product(*(values for _, values in axes)):
        values = {k: v for (keys, _), vals in zip(axes, combo) for k, v in zip(keys, vals)}
        try:
            cfg = _with_values(base, values)
        except ConfigError as err:
            raise ConfigError(f"{where}: run {values}: {err}") from None
        cfg.name = spec.name
        cfg.runs_dir = str(sweep_root)
        rid = run_id(cfg)
        if rid in ids:
            raise ConfigError(f"{where}: runs {ids[rid]} and {values} resolve to the same config")
        ids[rid] = values
        runs.append(SweepRun(rid, values, cfg))
    return Sweep(spec=spec, root=sweep_root, runs=runs, source=source, overrides=overrides)


def _recorded_setting(folder: Path) -> tuple[str, list[str]] | None:
    """(base, command-line overrides) that the manifest of sweep folder `folder` records; None for a manifest
    written before they were recorded (such a folder reruns from its spec copy and the overrides given)."""
    manifest = read_manifest(folder)
    if "command_line_overrides" not in manifest:
        return None
    base, recorded = manifest.get("base"), manifest["command_line_overrides"]
    if not (isinstance(base, str) and base.strip() and isinstance(recorded, list)
            and all(isinstance(text, str) for text in recorded)):
        raise ConfigError(f"{shown(str(Path(folder) / MANIFEST))}: 'base' must be a preset name or YAML path and "
                          f"'command_line_overrides' a list of key=value strings")
    return base, list(recorded)


def _sets_key(text: str, key: str) -> bool:
    """Whether override `text` sets dotted `key`: its own key, or a key inside a mapping it gives."""
    try:
        path, value = parse_override(text)
    except ConfigError:  # load_config says what is wrong with it
        return False
    parts = key.split(".")
    if parts[: len(path)] != path:
        return False
    for part in parts[len(path):]:
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return True


def _resolved_base(base: str) -> str:
    """A base YAML path made absolute (a rerun from the sweep folder reads it from there); a preset name as it is."""
    return str(Path(base).resolve()) if is_file_source(base) else base


def check_root(sweep: Sweep) -> None:
    """ConfigError when `sweep.root` is a run folder, holds another sweep (its manifest names another), or holds
    this sweep run with command-line overrides that give another config than `sweep`'s (whatever the spec says now:
    editing it is allowed, renaming it is another sweep)."""
    run = RunFolder(sweep.root)
    if run.config.is_file() and any(p.exists() for p in (run.summary, run.status, run.root / "checkpoints",
                                                         run.root / "train_log.jsonl")):
        raise ConfigError(f"sweep {sweep.spec.name}: {shown(str(sweep.root))} is a run folder, not a sweep folder: "
                          "run the sweep into another folder (--root)")
    if not (sweep.root / MANIFEST).is_file():
        return
    try:
        other = read_manifest(sweep.root).get("sweep")
        recorded = _recorded_setting(sweep.root)
    except ConfigError:
        return  # an unreadable record: the rerun from the folder says so; a spec run into it rewrites it
    if isinstance(other, str) and other != sweep.spec.name:
        raise ConfigError(f"sweep {sweep.spec.name}: {shown(str(sweep.root))} holds the runs of sweep {shown(other)} "
                          "(a sweep folder holds one sweep; its report would pool both): run it into another folder "
                          "(--root)")
    if recorded is not None and not _same_setting(sweep.spec, recorded[1], sweep.overrides):
        raise _another_setting(sweep.spec, sweep.root, recorded[1], sweep.overrides,
                               "run these into another folder (--root)")


def _same_setting(spec: SweepSpec, recorded: list[str], given: list[str]) -> bool:
    """Whether two lists of command-line overrides give the spec's base the same config (`train.lr=1e-3` is
    `train.lr=0.001`)."""
    return recorded == given or (load_config(spec.base, spec.overrides + recorded).model_dump()
                                 == load_config(spec.base, spec.overrides + given).model_dump())


def _another_setting(spec: SweepSpec, root: Path | None, recorded: list[str], given: list[str], advice: str):
    """The one-line refusal of a sweep folder that holds the runs of other command-line overrides."""
    return ConfigError(one_line(
        f"sweep {spec.name}: {shown(str(root))} holds the runs of overrides {shown(' '.join(recorded) or 'none')}, "
        f"not {shown(' '.join(given) or 'none')} (a sweep folder holds one setting): {advice}"))


def _with_values(base: dict[str, Any], values: dict[str, Any]) -> RunConfig:
    data = json.loads(json.dumps(base))
    for key, value in values.items():
        set_key(data, key, value)
    return validate(data)


def check_sweep_memory(sweep: Sweep) -> None:
    """ResourceError (one line, naming the run's axis values) when a run's data and evaluation alone would not fit
    in the memory a run may use here (`resources.check_memory` before anything is built); each distinct data and
    eval setting is checked once. Each run checks its whole estimate again when it starts."""
    seen: set[str] = set()
    for run in sweep.runs:
        key = run.config.data.model_dump_json() + run.config.eval.model_dump_json()
        if key in seen:
            continue
        seen.add(key)
        try:
            check_memory(run.config)
        except ConfigError as err:
            raise type(err)(f"sweep {shown(sweep.spec.name)}: run {shown(run.values)}: {err}") from None


def write_manifest(sweep: Sweep) -> Path:
    """Write manifest.json and a copy of the spec into the sweep root, and each run's config.yaml if new. The
    manifest records the base (a YAML path made absolute), the overrides of every run (the spec's, then the command
    line's) and the command line's alone, which a rerun from the folder applies again (`expand`). A root whose
    manifest records other command-line overrides (the spec run into it again with other ones) is refused: a sweep
    folder holds one setting."""
    check_root(sweep)
    sweep.root.mkdir(parents=True, exist_ok=True)
    _, text, _ = spec_text(sweep.source) if sweep.source else ("", "", None)
    if text and not (Path(sweep.source).is_dir() or Path(sweep.source).name == SPEC_COPY):
        named = text if any(line.startswith("name:") for line in text.splitlines()) else f"name: {sweep.spec.name}\n{text}"
        write_text(sweep.root / SPEC_COPY, named)
    manifest = {
        "sweep": sweep.spec.name,
        "description": sweep.spec.description,
        "base": _resolved_base(sweep.spec.base),
        "overrides": sweep.spec.overrides + sweep.overrides,
        "command_line_overrides": sweep.overrides,
        "axes": sweep.axes,
        "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "runs": [{"run_id": r.run_id, "values": r.values} for r in sweep.runs],
    }
    for run in sweep.runs:
        folder = run.directory(sweep.root)
        if not RunFolder(folder).config.is_file():
            write_text(RunFolder(folder).config, config_to_yaml(run.config))
    return write_json(sweep.root / MANIFEST, manifest)


def is_complete(run_dir: Path) -> bool:
    """A run is complete once its summary.json is written (the run driver writes it last)."""
    return RunFolder(run_dir).is_complete()


_NOT_COPIED = frozenset({".lock", STATUS})  # the copy gets its own status (done, copied_from); nobody holds it


def adopt_finished_twin(source: Path, dest: Path) -> bool:
    """Fill `dest` with a copy of `source`, a complete run folder of the same run id (another sweep or run set ran
    the same config under the same analysis versions, so its results are this run's): every file but its lock and
    status; `dest`'s own config.yaml (its `name` and `runs_dir`) is kept. The copy is made in a hidden sibling and
    renamed into place, so an interruption leaves `dest` as it was; an incomplete `dest` (an earlier, unfinished
    attempt at the same config) is replaced. `dest`'s lock is held throughout, so no run starts in it meanwhile.
    Returns False, touching nothing, when `source` is not complete, a live process holds `dest`, or `dest` is
    complete by then (it finished meanwhile: nothing to adopt)."""
    source, dest = Path(source), Path(dest)
    if not is_complete(source) or RunFolder(dest).holder() is not None:
        return False
    try:
        with RunFolder(dest).lock():
            if is_complete(dest):
                return False
            _adopt(source, dest)
    except RunLockedError:  # taken between the check and the lock
        return False
    return True


def _adopt(source: Path, dest: Path) -> None:
    own_config = RunFolder(dest).config.read_text() if RunFolder(dest).config.is_file() else None
    staging = dest.with_name(f".{dest.name}.copying-{os.getpid()}")
    if staging.exists():
        shutil.rmtree(staging)
    shutil.copytree(source, staging, ignore=lambda folder, names: [n for n in names if n in _NOT_COPIED
                                                                     and Path(folder) == source])
    if own_config is not None:
        write_text(RunFolder(staging).config, own_config)
    write_json(RunFolder(staging).status, {"state": "done", "error": None, "copied_from": str(source),
                                           "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    replaced = dest.with_name(f".{dest.name}.replaced-{os.getpid()}")  # dest exists: its lock is held
    os.replace(dest, replaced)
    os.replace(staging, dest)
    shutil.rmtree(replaced)


def pending_runs(sweep: Sweep) -> list[SweepRun]:
    """The sweep's runs that are not complete: what a (re)run has to do."""
    return [r for r in sweep.runs if not is_complete(r.directory(sweep.root))]


def sweep_root_of(target: str) -> Path:
    """The sweep folder for a sweep folder path, a spec file or a shipped sweep name."""
    path = Path(target)
    if is_sweep_folder(path):
        return path
    if path.is_dir() and not (path / SPEC_COPY).is_file():
        raise ConfigError(f"{shown(target)} is not a sweep folder (no {MANIFEST}) nor a sweep spec")
    return expand(target).root


def training_waves(tasks: list[RunTask], candidates: list[Path]) -> list[list[RunTask]]:
    """Order tasks so that runs sharing a training (equal `RunConfig.training_hash`) train it once: each task gets as
    donors the candidate folders and the other tasks' folders of its training (`training_reuse` checks each when the
    run starts); the first task of a training no candidate has finished runs in the first wave, the others of it in
    the second, once the first has trained. Without such sharing there is one wave."""
    return training_plan(tasks, candidates)[0]


def training_plan(tasks: list[RunTask], candidates: list[Path]) -> tuple[list[list[RunTask]], set[Path]]:
    """`training_waves`, and the run folders of the tasks that will evaluate a training another run trained (a
    candidate that can lend it now, or the first task of their training, once it has trained): what a cost
    prediction prices without training."""
    by_hash: dict[str, list[Path]] = {}
    for folder in candidates:
        try:
            key = load_config(str(RunFolder(folder).config)).training_hash()
        except (ConfigError, OSError):
            continue  # an unreadable folder is no donor
        by_hash.setdefault(key, []).append(Path(folder))
    first: list[RunTask] = []
    later: list[RunTask] = []
    borrowers: set[Path] = set()
    leaders: set[str] = set()
    groups: dict[str, list[RunTask]] = {}
    for task in tasks:
        groups.setdefault(task.config.training_hash(), []).append(task)
    for key, group in groups.items():
        ready = find_donor(group[0].config, by_hash.get(key, [])) is not None
        for task in group:
            seen, donors = {Path(task.run_dir).resolve()}, []
            for folder in [*by_hash.get(key, []), *(t.run_dir for t in group)]:  # each folder once, never itself
                if Path(folder).resolve() not in seen:
                    seen.add(Path(folder).resolve())
                    donors.append(Path(folder))
            task = dataclasses.replace(task, donors=tuple(donors)) if donors else task
            trains = not ready and key not in leaders  # the first of a training no candidate can lend yet
            if ready or trains:
                leaders.add(key)
                first.append(task)
            else:
                later.append(task)
            if not trains:
                borrowers.add(Path(task.run_dir))
    return [wave for wave in (first, later) if wave], borrowers


def largest_first(tasks: list[RunTask], workers: int | None = None) -> list[RunTask]:
    """The tasks with the largest training first (`resources.training_flops`; those it cannot size before all, as
    they may be the longest), ties in their given order. A pool starts runs in its list's order, and a long run
    started last leaves the other workers idle while it ends: largest first is the classic rule that keeps that
    tail short (the quick findings suite's runs measured 2026-12-07: 13.7 min on two workers in the suite's order,
    13.0 in this one, 12.8 with the measured times known, docs/benchmarks.md). Which run goes first changes no
    run's numbers: each draws from its own seeds. Nothing is counted and the order is kept when it cannot matter —
    no more tasks than `workers` (all start at once), or every task of one training shape (`resources.training_shape`:
    data kind and image size, model, steps, batch; a sweep over seeds, separations or evaluation keys) — since
    sizing a first network costs about a second in a fresh process (measured 2026-12-07: 1.15 s, mostly imports)."""
    shapes = {training_shape(t.config) for t in tasks}
    if len(shapes) < 2 or (workers is not None and len(tasks) <= workers):
        return list(tasks)
    work = [training_flops(t.config) for t in tasks]
    order = sorted(range(len(tasks)), key=lambda i: (work[i] is not None, -(work[i] or 0.0), i))
    return [tasks[i] for i in order]


def run_waves(executor, waves: list[list[RunTask]], **kwargs) -> list:
    """Run each wave (`training_waves`) after the one before, its runs largest training first (`largest_first`, for
    the executor's `workers` where it has them); `kwargs` go to `executor.run`. The outcomes of all waves."""
    outcomes = []
    for wave in waves:
        outcomes += executor.run(largest_first(wave, getattr(executor, "workers", None)), **kwargs)
    return outcomes


def run_sweep(sweep: Sweep, executor, progress: bool = True, console=None, train_from: list[Path] | None = None,
              reuse_training: bool = True) -> dict[str, Any]:
    """Write the manifest, run every incomplete run with `executor`, then the sweep's `report.html`
    (`report.html.write_sweep_report`); returns counts and the failures. With `reuse_training`, runs that share a
    training (the sweep varies only evaluation keys, or `train_from` roots hold a run that trained it) train it once
    and evaluate its checkpoints (`experiments.training_reuse`; `reused` counts them). The runs are done without
    the report: a failure to write it (an unreadable manifest, a full disk) is said on `console` and in
    `report_error`, not raised; a run's torn summary.json is a row of the report saying so."""
    write_manifest(sweep)
    todo = pending_runs(sweep)
    tasks = [RunTask(r.run_id, r.directory(sweep.root), r.config) for r in todo]
    waves = [tasks]
    if reuse_training and tasks:
        candidates = [r.directory(sweep.root) for r in sweep.runs] + run_folders_under(train_from or [])
        waves = training_waves(tasks, candidates)
    outcomes = run_waves(executor, waves, progress=progress, console=console)
    report_error = write_sweep_report_or_warn(sweep.root, console)  # links each finished run's own report
    return {
        "runs": len(sweep.runs),
        "skipped": len(sweep.runs) - len(todo),
        "done": sum(o.state == "done" for o in outcomes),
        "failed": {o.run_id: o.error for o in outcomes if o.state == "failed"},
        "queued": sum(o.state == "queued" for o in outcomes),
        "busy": {o.run_id: o.error for o in outcomes if o.state == "busy"},
        "reused": sum(trained_in(r.directory(sweep.root)) is not None for r in todo),
        "report_error": report_error,
    }


def write_sweep_report_or_warn(root: Path, console=None) -> str | None:
    """A sweep folder's `report.html` (`report.html.write_sweep_report`); a failure to write it (an unreadable
    manifest, a full disk) is returned as one line and said on `console`, not raised — the runs are done without it."""
    from conceptlab.report.html import write_sweep_report

    try:
        write_sweep_report(root)
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        error = one_line(f"{root}: report.html not written ({type(err).__name__}: {err})")
        if console is not None:
            from rich.markup import escape

            console.print(f"[yellow]warning:[/] {escape(error)}", highlight=False, soft_wrap=True)
        return error
    return None


def training_roles(sweep: Sweep, train_from: list[Path] | None = None, reuse_training: bool = True) -> dict[str, str]:
    """Run id → what `run_sweep` would do about its training now: "complete" (nothing to run), "trains", or
    "borrowed" (it evaluates another run's training: a finished run of the sweep or under `train_from` lends it, or
    an earlier run of the sweep trains it first: `training_plan`). For a dry run."""
    todo = pending_runs(sweep)
    roles = {r.run_id: "complete" for r in sweep.runs}
    roles.update({r.run_id: "trains" for r in todo})
    if reuse_training and todo:
        tasks = [RunTask(r.run_id, r.directory(sweep.root), r.config) for r in todo]
        candidates = [r.directory(sweep.root) for r in sweep.runs] + run_folders_under(train_from or [])
        _, borrowers = training_plan(tasks, candidates)
        roles.update({r.run_id: "borrowed" for r in todo
                      if r.directory(sweep.root) in borrowers})
    return roles


