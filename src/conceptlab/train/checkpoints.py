"""Checkpoint schedules and checkpoint files (safetensors weights + JSON sidecar), incl. resumable training state."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import safe_open

if TYPE_CHECKING:
    import torch
# torch is imported by the one function that makes tensors, so the store (which lists checkpoints and reads a
# training state's step) and the reading commands start without it (lazy: docs/benchmarks.md, "Command start-up")

from conceptlab.train.config import TrainConfig
from conceptlab.store.files import (
    FileFormatError,
    file_sha256,
    read_json,
    read_tensors,
    tensors_sha256,
    write_json,
    write_tensors,
)

_STEP_FILE = re.compile(r"step_(\d+)\.safetensors$")


def checkpoint_schedule(cfg: TrainConfig) -> list[int]:
    """Steps at which to save weights; always ends with the final step.

    sqrt: evenly spaced in √step from `checkpoint_start` (the paper); log: evenly in
    log step; linear: evenly in step; list: `checkpoint_steps`.
    """
    end, start, count = cfg.steps, min(cfg.checkpoint_start, cfg.steps), cfg.checkpoint_count
    if cfg.checkpoint_schedule == "list":
        steps = [s for s in (cfg.checkpoint_steps or []) if 1 <= s <= end]
    elif cfg.checkpoint_schedule == "sqrt":
        steps = [round(v * v) for v in np.linspace(math.sqrt(start), math.sqrt(end), count)]
    elif cfg.checkpoint_schedule == "log":
        steps = [round(v) for v in np.geomspace(start, end, count)]
    else:
        steps = [round(v) for v in np.linspace(start, end, count)]
    return sorted(set(steps) | {end})


def checkpoint_path(folder: Path, step: int) -> Path:
    return Path(folder) / f"step_{step:07d}.safetensors"


def save_checkpoint(folder: Path, step: int, tensors: dict[str, torch.Tensor], sidecar: dict[str, Any]) -> Path:
    """Write `step_XXXXXXX.safetensors`, then its `.json` sidecar (step, config hash, the tensor file's SHA-256,
    metrics, ...): a checkpoint is complete once its sidecar exists."""
    path = checkpoint_path(folder, step)
    write_tensors(path, tensors)
    write_json(path.with_suffix(".json"), {"step": step, **sidecar, "sha256": file_sha256(path)})
    return path


class CheckpointMismatchError(ValueError):
    """A checkpoint that was not trained with this run's config."""


class CheckpointIntegrityError(ValueError):
    """A checkpoint whose sidecar is missing or unreadable, or whose file does not match the sidecar's hash."""


def load_checkpoint(path: Path, expected_hash: str | None = None) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(tensors, sidecar) of a checkpoint, after checking it: the sidecar must exist, the tensor file must match its
    SHA-256 (sidecars written before hashes were kept have none; `conceptlab runs migrate` adds them), and with
    `expected_hash` its config hash must be that one (a checkpoint copied in from another run is refused, not
    evaluated as this run's). Every refusal is one line naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        raise CheckpointIntegrityError(f"checkpoint {path} has no sidecar {sidecar.name} (incomplete or damaged)")
    try:
        meta = read_json(sidecar)
    except FileFormatError as err:
        raise CheckpointIntegrityError(f"checkpoint sidecar {err}") from None
    saved = meta.get("config_hash")
    if expected_hash is not None and saved is None:
        raise CheckpointIntegrityError(f"checkpoint sidecar {sidecar} has no config hash")
    if expected_hash is not None and saved != expected_hash:
        raise CheckpointMismatchError(
            f"checkpoint {path} was trained with a different config (hash {saved}, this run {expected_hash})"
        )
    if "sha256" in meta and file_sha256(path) != meta["sha256"]:
        raise CheckpointIntegrityError(
            f"checkpoint {path} does not match its sidecar's content hash (damaged or replaced after it was written)"
        )
    return read_tensors(path), meta


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint in `folder`, by step."""
    out = []
    for path in Path(folder).glob("step_*.safetensors"):
        match = _STEP_FILE.search(path.name)
        if match and path.with_suffix(".json").is_file():
            out.append((int(match.group(1)), path))
    return sorted(out)


def prefixed(prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}{k}": v for k, v in tensors.items()}


def unprefixed(prefix: str, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}


def optimizer_tensors(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Flatten an optimizer state dict into tensors (per-parameter state) + JSON (hyper-parameters)."""
    import torch

    state = optimizer.state_dict()
    tensors = {}
    for idx, slots in state["state"].items():
        for name, value in slots.items():
            tensors[f"{idx}.{name}"] = value if torch.is_tensor(value) else torch.tensor(value)
    return tensors, {"param_groups": state["param_groups"]}


def load_optimizer_tensors(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict) -> None:
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})


def save_training_state(path: Path, tensors: dict[str, torch.Tensor], sidecar: dict[str, Any]) -> None:
    """The resumable state (weights, EMA, optimizer, RNG), one self-contained file overwritten atomically.

    The sidecar travels inside the safetensors metadata, with the SHA-256 of the tensors (`store.files.tensors_sha256`),
    so tensors and metadata can never disagree and a damaged state is refused on load.
    """
    meta = {**sidecar, "tensors_sha256": tensors_sha256(tensors)}
    write_tensors(path, tensors, metadata={"sidecar": json.dumps(meta)})


def _state_meta(path: Path, handle) -> dict[str, Any]:
    try:
        return json.loads((handle.metadata() or {})["sidecar"])
    except (KeyError, ValueError, TypeError):
        raise CheckpointIntegrityError(f"training state {path} has no readable sidecar metadata") from None


def load_training_state(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
    """(tensors, sidecar) of the resumable state, None if there is none; CheckpointIntegrityError (one line naming
    the file) when it is damaged: unreadable, or its tensors do not match the hash stored with them."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="pt") as handle:
            sidecar = _state_meta(path, handle)
            tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    except CheckpointIntegrityError:
        raise
    except Exception as err:  # SafetensorError
        raise CheckpointIntegrityError(f"training state {path} is not readable ({err})") from None
    if "tensors_sha256" in sidecar and tensors_sha256(tensors) != sidecar["tensors_sha256"]:
        raise CheckpointIntegrityError(f"training state {path} does not match its content hash (damaged)")
    return tensors, sidecar


def training_state_meta(path: Path) -> dict[str, Any] | None:
    """A saved training state's sidecar (its step, the hash of the training config it was saved under, …), read
    without loading tensors; None when there is none."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        with safe_open(str(path), framework="numpy") as handle:  # its metadata only: no tensor is read
            return _state_meta(path, handle)
    except CheckpointIntegrityError:
        raise
    except Exception as err:
        raise CheckpointIntegrityError(f"training state {path} is not readable ({err})") from None


def training_state_step(path: Path) -> int:
    """The step a saved training state has reached (0 if none), read from its metadata without loading tensors."""
    meta = training_state_meta(path)
    if meta is None:
        return 0
    try:
        return int(meta["step"])
    except (KeyError, ValueError, TypeError):
        raise CheckpointIntegrityError(f"training state {path} has no readable step in its metadata") from None
