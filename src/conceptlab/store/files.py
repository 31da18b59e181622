"""Atomic file writes (temp file + rename) for JSON, safetensors and Parquet, so readers never see half a file;
readers whose errors name the file (and a JSON-lines reader that survives a torn last line); content hashes; and an
exclusive lock file, so concurrent processes sharing a cache build each entry once."""

from __future__ import annotations

import contextlib
import hashlib
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


class FileFormatError(ValueError):
    """A file that cannot be read as what it should be; the message names the file."""


def read_json(path: Path) -> Any:
    """The JSON in `path`; FileFormatError naming the file when it is not valid JSON (FileNotFoundError if absent)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise FileFormatError(f"{path}: not valid JSON ({_first_line(err)})") from None


def read_jsonl(path: Path) -> tuple[list[Any], str | None]:
    """The records of a JSON-lines file, and a warning when its last line was torn (cut off by a crash) and left out;
    FileFormatError naming file and line for a bad line anywhere else."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError as err:
        raise FileFormatError(f"{path}: not text ({_first_line(err)})") from None
    records, warning = [], None
    content = [(i, line) for i, line in enumerate(lines, 1) if line.strip()]
    for k, (number, line) in enumerate(content):
        try:
            records.append(json.loads(line))
        except ValueError as err:
            if k == len(content) - 1:
                warning = f"{path}: dropped a torn last line {number} ({_first_line(err)})"
                break
            raise FileFormatError(f"{path}:{number}: not valid JSON ({_first_line(err)})") from None
    return records, warning


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """Hex SHA-256 of tensors' names, dtypes, shapes and bytes, in name order (what a file's tensors hold, however
    it was serialised)."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> Path:
    flat = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    return _atomic(path, lambda tmp: save_file(flat, tmp, metadata=metadata))


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors in a safetensors file; FileFormatError naming the file when it is not one."""
    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise
    except Exception as err:  # SafetensorError derives from Exception only
        raise FileFormatError(f"{path}: not a readable safetensors file ({_first_line(err)})") from None


def read_parquet(path: Path) -> pd.DataFrame:
    """The table in a Parquet file; FileFormatError naming the file when it is not one."""
    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise
    except Exception as err:  # pyarrow raises ArrowInvalid / OSError subclasses
        raise FileFormatError(f"{path}: not a readable Parquet file ({_first_line(err)})") from None


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
