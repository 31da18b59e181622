"""`conceptlab runs migrate`: upgrade run folders of an older format to the current one (or say why not).

Format 1 → 2 (folders written before 2026-12-01): checkpoint sidecars get the SHA-256 of their tensor file as it is
now (so later damage is detected; damage before the migration cannot be), the bump study's final cloud
`geometry/cloud_step_X.safetensors` is renamed `geometry/step_X.safetensors`, `training.json` records the step the
training state reached, and `provenance.json` records the format with the analysis versions unknown — a migrated
folder reads everywhere (show, the store, reports) but is not continued by `resume`, whose new results would mix
with ones of unknown code.
"""

from __future__ import annotations

import time
from pathlib import Path

from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.store.files import FileFormatError, file_sha256, read_json, write_json
from conceptlab.store.run_folder import FORMAT, RunFolder
from conceptlab.train.checkpoints import CheckpointIntegrityError, training_state_step


class MigrationError(ValueError):
    """A folder that cannot be migrated; the message says why."""


def migrate_run(run_dir: Path) -> list[str]:
    """Upgrade one run folder in place; returns what was done (empty: already current)."""
    run = RunFolder(run_dir)
    if not run.config.is_file():
        raise MigrationError(f"{run.root} is not a run folder (no config.yaml)")
    try:
        load_config(str(run.config))
    except ConfigError as err:
        raise MigrationError(f"{run.root}: its config.yaml does not load with this code ({err})") from None
    try:
        version = run.format_version()
    except FileFormatError as err:
        raise MigrationError(f"{run.root}: {err}") from None
    if version >= FORMAT:
        return []
    done = []
    with run.lock():
        for path in sorted(run.checkpoints.glob("step_*.json")):
            try:
                meta = read_json(path)
            except FileFormatError as err:
                raise MigrationError(f"{run.root}: checkpoint sidecar {err}") from None
            weights = path.with_suffix(".safetensors")
            if "sha256" not in meta and weights.is_file():
                write_json(path, {**meta, "sha256": file_sha256(weights)})
                done.append(f"hashed {weights.name}")
        for old in sorted((run.root / "geometry").glob("cloud_step_*.safetensors")):
            new = old.with_name(old.name[len("cloud_"):])
            if not new.exists():
                old.rename(new)
                done.append(f"renamed geometry/{old.name} → {new.name}")
        if run.train_state.is_file() and not run.training.is_file():
            try:
                step = training_state_step(run.train_state)
            except CheckpointIntegrityError as err:
                raise MigrationError(str(err)) from None
            write_json(run.training, {"step": step, "finished": None})
            done.append(f"recorded training to step {step}")
        write_json(run.provenance, {"format": FORMAT, "versions": None, "invocations": [],
                                    "migrated": {"from": version, "at": time.strftime("%Y-%m-%dT%H:%M:%S")}})
        done.append(f"format {version} → {FORMAT}")
    return done
