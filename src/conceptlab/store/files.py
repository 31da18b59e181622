"""Atomic file writes (temp file + rename) for JSON, safetensors and Parquet, so readers never see half a file;
and an exclusive lock file, so concurrent processes sharing a cache build each entry once."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:  # POSIX; elsewhere the lock is a no-op and concurrent processes may each build the same entry
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

import pandas as pd
import torch
from safetensors.torch import load_file, save_file


def _atomic(path: Path, write) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on `path` (created if missing) for the `with` block; other processes (and
    other open files in this one) asking for it wait. Released when the block exits, error or not."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def write_text(path: Path, text: str) -> Path:
    return _atomic(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: Path, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_jsonable) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> Path:
    flat = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    return _atomic(path, lambda tmp: save_file(flat, tmp, metadata=metadata))


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def write_parquet(path: Path, table: pd.DataFrame) -> Path:
    return _atomic(path, lambda tmp: table.to_parquet(tmp, index=False))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
