"""Training reuse: a run whose training another run already did is evaluated from that run's checkpoints.

Two runs train the same weights (on one machine: a lender's weights are its machine's, and its record says which)
when their configs agree on everything that determines training (the data, model,
diffusion and train sections: `RunConfig.training_hash`), they train in the same precision (`train.bf16: null`
resolves per machine, so a lender trained where it resolved otherwise is refused) and the code that trains them is the
same: the same
training-loop version (`provenance.TRAINING_VERSION`) and a study version whose data-generating process is the current
one (from the study's `data_since` to its `version`; a study bumps `version` for any change to its numbers, and
`data_since` with it only when the training data change). Such runs differ in their evaluation only, e.g. a sweep over
`eval.*` keys, or a rerun that changes how checkpoints are read. `find_donor` picks, among candidate run folders, one
that has trained this run's training to its last step and kept every checkpoint; `seed_from` fills a fresh run folder
with its training (checkpoints and training state hard-linked where the filesystem allows, else copied; the training
log copied) and records where it came from in `training.json` (`trained_in`: the donor's folder, run id, and its
invocations, its training among them), which the run's summary repeats. The run driver then resumes that folder as any other:
training is done, so it evaluates. The evaluation is the same as after training in place, because every measurement
draws its randomness from its own seeds, not from the state training left behind (tested).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import ConfigError, config_to_yaml, load_config
from conceptlab.experiments.provenance import TRAINING_VERSION, analysis_versions, precision_name, training_precisions
from conceptlab.store.files import read_json, write_json, write_text
from conceptlab.store.index import find_run_dirs, flatten
from conceptlab.store.run_folder import FORMAT, RunFolder
from conceptlab.studies import study_for
from conceptlab.train.checkpoints import checkpoint_schedule, training_state_step
from conceptlab.train.precision import resolve_bf16, resolve_device

TRAINED_IN = "trained_in"  # the key in training.json (and in summary.json's provenance) naming the donor


@dataclass(frozen=True)
class Donor:
    """A run folder whose training a run can reuse, and what trained it (its provenance invocations)."""

    folder: Path
    invocations: list


def data_versions(cfg: RunConfig) -> range:
    """The study versions whose training data are the current code's: `data_since` (default: `version`) to
    `version`."""
    study = study_for(cfg.data.kind)
    version = int(getattr(study, "version", 1))
    since = int(getattr(study, "data_since", None) or version)
    return range(min(since, version), version + 1)


def training_differences(cfg: RunConfig, other: RunConfig, limit: int = 5) -> list[str]:
    """The dotted keys (at most `limit`) in which two configs' training sections differ (those `training_hash`
    covers: data, model, diffusion and train, not `train.tensorboard`)."""
    sections = {"data", "model", "diffusion", "train"}
    mine = flatten(cfg.model_dump(mode="json", include=sections, exclude={"train": {"tensorboard"}}))
    theirs = flatten(other.model_dump(mode="json", include=sections, exclude={"train": {"tensorboard"}}))
    return sorted(k for k in mine.keys() | theirs.keys() if mine.get(k, "∅") != theirs.get(k, "∅"))[:limit]


def donor_refusal(cfg: RunConfig, folder: Path) -> str | None:
    """Why the run folder `folder` cannot lend `cfg` its training (one line), or None when it can: it must hold the
    same training (same training hash), made by the current training loop and a study version with the current data,
    in the precision this run would train in on this machine (`train.bf16: null` follows the machine; a record
    that does not say is taken as it), trained to the last step, every scheduled checkpoint on disk and none pruned."""
    return _examine(cfg, folder)[0]


def _examine(cfg: RunConfig, folder: Path) -> tuple[str | None, dict]:
    """`donor_refusal`'s reason, and the folder's provenance record as read for it ({} when unread)."""
    run = RunFolder(folder)
    if not run.config.is_file() or not run.provenance.is_file():
        return "it is not a run folder with a provenance record (config.yaml and provenance.json)", {}
    try:
        record = read_json(run.provenance)
    except (OSError, ValueError) as err:
        return f"it cannot be read ({type(err).__name__}: {str(err)[:200]})", {}
    return _refusal(cfg, run, record), record


def _refusal(cfg: RunConfig, run: RunFolder, record: dict) -> str | None:
    try:
        other = load_config(str(run.config))
        if other.training_hash() != cfg.training_hash():
            keys = training_differences(cfg, other)
            return "it trains differently" + (f" ({', '.join(keys)})" if keys else "")
        versions = record.get("versions") or {}
        if versions.get("training") != TRAINING_VERSION:
            return f"training code version {versions.get('training')} trained it (this code: {TRAINING_VERSION})"
        allowed = data_versions(cfg)
        if versions.get("study") not in allowed:
            return (f"study version {versions.get('study')} made it; this code's data are those of versions "
                    f"{allowed.start}–{allowed.stop - 1}")
        trained = run.trained_step()
        if trained < cfg.train.steps:
            return f"it has trained to step {trained} of {cfg.train.steps}"
        done = read_json(run.training) if run.training.is_file() else {}
        pruned = done.get("pruned", [])
        lent = lent_invocations(done.get(TRAINED_IN))  # it reused a training too: that one's invocations
        if done.get(TRAINED_IN) is not None and lent is None:
            return "it cannot be read (its training.json names a lent training without its invocations)"
        precisions = training_precisions(lent if lent is not None else record.get("invocations") or [])
        here = precision_name(resolve_bf16(cfg.train.bf16, resolve_device(cfg.train.device)))
        if precisions and precisions != {here}:
            return f"it was trained in {' + '.join(sorted(precisions))}; this run would train in {here} here"
    except (ConfigError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
        return f"it cannot be read ({type(err).__name__}: {str(err)[:200]})"
    if pruned:
        return f"retention pruned its checkpoints of steps {sorted(pruned)[:5]}"
    listed = {s for s, _ in run.list_checkpoints()}
    missing = [s for s in checkpoint_schedule(cfg.train) if s not in listed]
    if missing:
        return f"its checkpoints of steps {missing[:5]} are missing"
    return None


def _trains_the_same(cfg: RunConfig, folder: RunFolder) -> Donor | None:
    """`folder` as a donor for `cfg`'s training, or None (`donor_refusal` says why)."""
    why, record = _examine(cfg, folder.root)
    if why is not None:
        return None
    return Donor(folder.root, list(record.get("invocations") or []))


def find_donor(cfg: RunConfig, candidates: Iterable[Path], exclude: Path | None = None) -> Donor | None:
    """The first candidate run folder (never `exclude`) that can lend `cfg` its training (`donor_refusal` is None),
    or None. A candidate that itself evaluated a lent training lends it on; `seed_from` then names the run that
    trained."""
    skip = Path(exclude).resolve() if exclude is not None else None
    for path in candidates:
        path = Path(path)
        if skip is not None and path.resolve() == skip:
            continue
        donor = _trains_the_same(cfg, RunFolder(path))
        if donor is not None:
            return donor
    return None


def is_fresh(run_dir: Path) -> bool:
    """Nothing trained in `run_dir` yet: no training state, no checkpoint, no training record."""
    run = RunFolder(run_dir)
    return not (run.train_state.exists() or run.training.exists() or run.list_checkpoints())


def seed_from(donor: Donor, run_dir: Path, cfg: RunConfig) -> dict:
    """Fill the fresh run folder `run_dir` (its config already written or not) with `donor`'s training; returns the
    `trained_in` record written into its `training.json`. Refuses (ValueError) a folder that has trained anything.
    Files are hard links where the filesystem allows (every store write replaces a file, never edits it in place, so
    a link never changes under the other run), copies otherwise.

    The order makes a crash safe: checkpoints first, then `training.json` with `trained_in`, the training state last.
    Interrupted before the record, the folder holds no training state or record, so the run driver trains it in place
    from step 0 (replacing the linked checkpoints as it goes); after it, the record says training is done and where
    it was done, whether or not the state was linked."""
    run, source = RunFolder(run_dir), RunFolder(donor.folder)
    if not is_fresh(run_dir):
        raise ValueError(f"{run_dir} has training of its own; training is reused only into a fresh run folder")
    source_record = read_json(source.training) if source.training.is_file() else {}
    step = (training_state_step(source.train_state) if source.train_state.is_file()
            else int(source_record.get("step", 0)))
    if step < cfg.train.steps:
        raise ValueError(f"{donor.folder} has trained to step {step}, not {cfg.train.steps}")
    origin = source_record.get(TRAINED_IN)  # the donor reused its training too: name the run that trained
    trained_in = origin or {"folder": str(donor.folder.resolve()), "run_id": donor.folder.name,
                            "invocations": donor.invocations}
    run.checkpoints.mkdir(parents=True, exist_ok=True)
    for _, path in source.list_checkpoints():
        _link_or_copy(path, run.checkpoints / path.name)
        _link_or_copy(path.with_suffix(".json"), run.checkpoints / path.with_suffix(".json").name)
    if source.train_log.is_file():
        shutil.copy2(source.train_log, run.train_log)  # the run driver rewrites its log: a copy, not a link
    write_json(run.training, {"step": step, "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), TRAINED_IN: trained_in})
    if source.train_state.is_file():
        _link_or_copy(source.train_state, run.train_state)
    if not run.config.is_file():  # the folder says what it is from now on, as the run driver's would
        write_text(run.config, config_to_yaml(cfg))
    if not run.provenance.is_file():  # the folder's format: the run driver adds this invocation to it
        write_json(run.provenance, {"format": FORMAT, "versions": analysis_versions(cfg), "invocations": []})
    return trained_in


def trained_in(run_dir: Path) -> dict | None:
    """Where a run's training was done, when it reused another run's (`training.json`'s `trained_in`), else None."""
    run = RunFolder(run_dir)
    if not run.training.is_file():
        return None
    try:
        record = read_json(run.training)
    except (OSError, ValueError):
        return None
    return record.get(TRAINED_IN) if isinstance(record, dict) else None


def lent_invocations(trained: dict | None) -> list | None:
    """The invocations that trained a lent training (a `trained_in` record), None for a run's own training."""
    invocations = trained.get("invocations") if isinstance(trained, dict) else None
    return invocations if isinstance(invocations, list) else None


def reuse_training(cfg: RunConfig, run_dir: Path, candidates: Iterable[Path]) -> dict | None:
    """Seed the fresh run folder `run_dir` from the first candidate that trained `cfg`'s training; returns the
    `trained_in` record, or None (not fresh, or no candidate qualifies: the run trains itself)."""
    if not is_fresh(run_dir):
        return None
    donor = find_donor(cfg, candidates, exclude=run_dir)
    return seed_from(donor, run_dir, cfg) if donor is not None else None


def run_folders_under(roots: Iterable[Path]) -> list[Path]:
    """Every run folder under each root (`store.index.find_run_dirs`: a sweep root's runs, a findings root's
    `runs/<set>/<run id>`, or the root itself when it is a run folder)."""
    found: list[Path] = []
    for root in roots:
        if not Path(root).is_dir():
            raise ConfigError(f"--train-from {root}: no such folder")
        found.extend(find_run_dirs(Path(root)))
    return found


def _link_or_copy(source: Path, dest: Path) -> None:
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)
