"""The state of a sweep and of its run folders as the status commands show it, read from their files only.

`read_manifest(root)`: a sweep folder's manifest (its runs and their axis values); `read_status` / `write_status`: a
run folder's `status.json` (what the executors write as a run is queued, runs, fails or finishes); `run_state`: the
state `sweep status` shows (done, running, queued, failed, interrupted, pending) with the last error line;
`run_progress`: how far an unfinished run got; `sweep_status(root)`: one row per run of a sweep. Nothing here
imports torch or a study, so `conceptlab sweep status` and `runs show` of an unfinished run start in a fraction of a
second (docs/benchmarks.md, "Command start-up").
"""

from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path
from typing import Any

from conceptlab.experiments.loading import ConfigError, read_text_file
from conceptlab.messages import one_line, shown
from conceptlab.store.files import read_json, read_jsonl, write_json
from conceptlab.store.run_folder import RunFolder

MANIFEST = "manifest.json"
_RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")  # one folder inside the sweep folder
STATES = ("queued", "running", "done", "failed")


def is_sweep_folder(path: Path | str) -> bool:
    """Whether `path` is a sweep folder (it holds a manifest), as opposed to a spec file or a shipped sweep's name."""
    return Path(path).is_dir() and (Path(path) / MANIFEST).is_file()


def read_manifest(root: Path) -> dict[str, Any]:
    """The sweep folder's manifest; ConfigError naming the file when it is missing, not JSON or not a manifest (a
    `runs` list of {run_id, values}, each run id one folder name inside the sweep folder)."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{shown(str(root))} is not a sweep folder (no {MANIFEST})")
    where = shown(str(path))
    try:
        manifest = json.loads(read_text_file(path, "manifest"))
    except (ValueError, RecursionError) as err:  # not JSON, or nested past the parser
        if isinstance(err, ConfigError):
            raise
        raise ConfigError(one_line(f"{where} is not valid JSON ({type(err).__name__}: {err})")) from None
    runs = manifest.get("runs") if isinstance(manifest, dict) else None
    if not isinstance(runs, list):
        raise ConfigError(f"{where} is not a sweep manifest (no 'runs' list)")
    for i, entry in enumerate(runs):
        run_id = entry.get("run_id") if isinstance(entry, dict) else None
        if not (isinstance(run_id, str) and _RUN_ID.match(run_id)) or not isinstance(entry.get("values"), dict):
            raise ConfigError(f"{where}: runs[{i}] must be {{run_id, values}} with a run id of letters, digits, "
                              f"'-', '_' or '.', got {shown(entry)}")
    return manifest


def read_status(run_dir: Path) -> dict:
    """The run folder's status.json, or {} when it is missing, not JSON or not a JSON object."""
    return RunFolder(run_dir).read_status()


def write_status(run_dir: Path, state: str, **fields) -> None:
    if state not in STATES:
        raise ValueError(f"unknown run state {state!r}")
    old = read_status(run_dir)
    write_json(RunFolder(run_dir).status, {**old, "state": state, **fields})


def run_state(run_dir: Path) -> tuple[str, str | None]:
    """(state, last error line) of a run folder as `sweep status` shows it (`store.RunFolder.state`).

    States: done (summary written), failed, running, queued, interrupted (its process is gone: a dead local
    worker or sweep), done (summary unreadable) (a torn summary.json), pending (never started).
    """
    return RunFolder(run_dir).state()


def run_progress(run_dir: Path, live: bool = True) -> str:
    """How far an unfinished run got, for `sweep status`: "training 6,120/20,000 (31%), ~38 min left" (the time at
    the rate its training has run so far, every invocation summed from `timings.jsonl`, up to its last saved state),
    or, once trained, "evaluating: 7/21 checkpoints measured"; "" for a finished run or one that never started.
    `live`: its process is running, so the step is the last one logged; else (interrupted, failed) the last saved
    state's, where a resume starts."""
    folder = RunFolder(run_dir)
    if folder.is_complete() or not folder.config.is_file():
        return ""
    try:
        import yaml

        steps = int(((yaml.safe_load(folder.config.read_text()) or {}).get("train") or {})["steps"])
        saved = folder.trained_step()
        timings, _ = read_jsonl(folder.timings) if folder.timings.is_file() else ([], None)  # a torn line dropped
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):  # FileFormatError is a ValueError
        return ""
    step = max(saved, _last_logged_step(folder.train_log)) if live else saved
    if step == 0 and not folder.list_checkpoints():
        return "starting" if live else "no training state saved yet: it restarts from step 0"
    if step < steps:
        text = f"training {step:,}/{steps:,} ({100 * step // steps}%)"
        trained_seconds = sum(float((e.get("seconds") or {}).get("train") or 0) for e in timings if isinstance(e, dict))
        if saved > 0 and trained_seconds > 0:
            text += _left_text((steps - step) * trained_seconds / saved)
        return text
    checkpoints = len(folder.list_checkpoints())
    measured = len(folder.measured_steps())
    try:  # a run evaluating another run's training (experiments.training_reuse) says whose
        lent = (read_json(folder.training).get("trained_in") or {}) if folder.training.is_file() else {}
    except (OSError, ValueError, AttributeError):
        lent = {}
    what = f"evaluating (the training of {lent.get('run_id')})" if isinstance(lent, dict) and lent else "evaluating"
    if checkpoints and measured >= checkpoints:  # every checkpoint has a first measurement: the rest, then the summary
        return f"{what}: all {checkpoints} checkpoints begun, finishing their measurements and the summary"
    text = f"{what}: {measured}/{checkpoints} checkpoints measured"
    gap = _measurement_gap(folder) if live else None
    if gap is not None and checkpoints > measured:
        text += _left_text((checkpoints - measured) * gap)
    return text


def _left_text(seconds: float) -> str:
    return f", ~{seconds / 60:.0f} min left" if seconds >= 60 else f", ~{seconds:.0f} s left"


def _measurement_gap(folder: RunFolder, recent: int = 8) -> float | None:
    """Seconds between consecutive checkpoints' measurements: the median gap between the times the last `recent`
    measured checkpoints were last written (a checkpoint's time: its newest measurement file; the median, so a pause
    between a stopped evaluation and its resumption does not count); None with fewer than three measured."""
    times = sorted(folder.measurement_times().values())[-recent:]
    if len(times) < 3:
        return None
    return float(statistics.median(b - a for a, b in zip(times, times[1:])))


def _last_logged_step(log: Path) -> int:
    """The step of the last complete line of a training log, read from its end (the log grows to thousands of lines;
    0 when there is none)."""
    try:
        with open(log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 4096))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def sweep_status(root: Path) -> list[dict[str, Any]]:
    """One row per manifest run: id, axis values, state (`run_state`), how far an
    unfinished run got (`run_progress`: its training step and the time left, or its evaluation), last
    error."""
    manifest = read_manifest(root)
    rows = []
    for entry in manifest["runs"]:
        state, error = run_state(Path(root) / entry["run_id"])
        progress = (run_progress(Path(root) / entry["run_id"], live=state == "running")
                    if state not in ("done", "queued", "pending") else "")
        rows.append({"run_id": entry["run_id"], **entry["values"], "state": state, "progress": progress or "—",
                     "error": error})
    return rows
