"""Atomic file writes (temp file + rename) for JSON, safetensors and Parquet, so readers never see half a file;
readers whose errors name the file (and a JSON-lines reader that survives a torn last line); content hashes; appends
that refuse to follow a symlink; and an exclusive lock file, so concurrent processes sharing a cache build each entry
once. Files are created with the permissions the process umask gives (0666 & ~umask), like any other program's."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

try:  # POSIX; elsewhere the lock is a no-op and concurrent processes may each build the same entry
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

import numpy as np
import yaml

if TYPE_CHECKING:
    import pandas as pd
    import torch
# torch, safetensors and pandas are imported where tensors and tables are read or written, so commands that only read
# JSON (`runs show`, `runs ls`) start without them (lazy: docs/benchmarks.md, "Command start-up")


def _is_tensor(obj: Any) -> bool:
    """Whether `obj` is a torch tensor (without importing torch: none exists before it is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def cache_root() -> Path:
    """The per-machine cache (trained probes, decoded real images): `$CONCEPTLAB_CACHE`, else `~/.cache/conceptlab`."""
    root = os.environ.get("CONCEPTLAB_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "conceptlab"


def _new_temp(path: Path) -> str:
    """Create an empty hidden temp file beside `path` (exclusively, never through a symlink), mode 0666 & ~umask."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp
    raise FileExistsError(f"could not create a temporary file beside {path}")  # pragma: no cover


_TEMP_NAME = re.compile(r"^\..+\.[0-9a-f]{12}$")  # `_new_temp`'s names: .<file name>.<12 hex digits>


def remove_stale_temps(folder: Path, keep: tuple[str, ...] = ()) -> int:
    """Delete the temp files of atomic writes (`_new_temp`) under `folder` and return how many: a write killed
    between creating its temp and renaming it (SIGKILL, a lost machine) leaves one. Only for a folder no other
    process writes in (a run folder under its lock), but for the files named in `keep`, whose temps are left."""
    removed = 0
    for path in Path(folder).rglob(".*"):
        if any(path.name.startswith(f".{name}.") for name in keep):
            continue
        if _TEMP_NAME.match(path.name) and path.is_file() and not path.is_symlink():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _atomic(path: Path, write) -> Path:
    """`path` written by `write(tmp)` to a temp file beside it, then renamed over it; the file keeps the temp's mode
    0666 & ~umask also when `write` makes it anew (safetensors writes 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_temp(path)
    try:
        mode = stat.S_IMODE(os.stat(tmp).st_mode)
        write(tmp)
        os.chmod(tmp, mode)
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
    with append_text(path) as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class SymlinkRefused(OSError):
    """An append to a path that is a symbolic link (it would write wherever the link points)."""


def append_text(path: Path):
    """`path` opened for appending text (created if missing, mode 0666 & ~umask); SymlinkRefused when `path` is a
    symbolic link, so a log in a run folder cannot be pointed at a file elsewhere."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, 0o666)
    except OSError as err:
        if path.is_symlink():
            raise SymlinkRefused(f"refusing to append to {path}: it is a symbolic link") from None
        raise err
    return os.fdopen(fd, "a")


def write_text(path: Path, text: str) -> Path:
    return _atomic(path, lambda tmp: Path(tmp).write_text(text))


def write_json(path: Path, obj: Any, strict: bool = False) -> Path:
    """`obj` as indented JSON. Python's JSON writes an infinity or NaN as a bare `Infinity`/`NaN`, which strict
    readers (jq, JavaScript, R) refuse; `strict` writes them as the text "inf", "-inf" and "nan" instead
    (`finite_json`), for files meant to be read outside this package; `read_json(..., nonfinite=True)` reads them
    back as numbers."""
    if strict:
        obj = finite_json(obj)
    return write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=_jsonable, allow_nan=not strict) + "\n")


NONFINITE_TEXT = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}


def finite_json(obj: Any) -> Any:
    """`obj` with every non-finite number (float, NumPy or tensor scalar, inside dicts, lists and tuples) as the text
    "inf", "-inf" or "nan", so strict JSON can hold it; everything else as it was (tuples become lists)."""
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    if _is_tensor(obj) or isinstance(obj, np.ndarray):
        return finite_json(obj.tolist())
    if isinstance(obj, np.generic):  # a NumPy scalar
        obj = obj.item()
    if isinstance(obj, float) and obj != obj:
        return "nan"
    if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
        return "inf" if obj > 0 else "-inf"
    return obj


def nonfinite_numbers(obj: Any) -> Any:
    """The inverse of `finite_json`: every string "inf", "-inf" or "nan" (anywhere in dicts and lists) as the number."""
    if isinstance(obj, dict):
        return {k: nonfinite_numbers(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [nonfinite_numbers(v) for v in obj]
    if isinstance(obj, str) and obj in NONFINITE_TEXT:
        return NONFINITE_TEXT[obj]
    return obj


class FileFormatError(ValueError):
    """A file that cannot be read as what it should be; the message names the file."""


def read_json(path: Path, nonfinite: bool = False) -> Any:
    """The JSON in `path`; FileFormatError naming the file when it is not valid JSON (FileNotFoundError if absent).
    `nonfinite`: the text "inf", "-inf" and "nan" anywhere in it read as numbers (what `write_json(strict=True)`
    wrote; a bare `Infinity` is read as a number either way)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return nonfinite_numbers(data) if nonfinite else data
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
    import torch

    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def write_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> Path:
    from safetensors.torch import save_file

    flat = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    return _atomic(path, lambda tmp: save_file(flat, tmp, metadata=metadata))


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors in a safetensors file; FileFormatError naming the file when it is not one."""
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except FileNotFoundError:
        raise
    except Exception as err:  # SafetensorError derives from Exception only
        raise FileFormatError(f"{path}: not a readable safetensors file ({_first_line(err)})") from None


def read_parquet(path: Path) -> pd.DataFrame:
    """The table in a Parquet file; FileFormatError naming the file when it is not one."""
    import pandas as pd

    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise
    except Exception as err:  # pyarrow raises ArrowInvalid / OSError subclasses
        raise FileFormatError(f"{path}: not a readable Parquet file ({_first_line(err)})") from None


def write_parquet(path: Path, table: pd.DataFrame) -> Path:
    return _atomic(path, lambda tmp: table.to_parquet(tmp, index=False))


def _jsonable(obj: Any) -> Any:
    if _is_tensor(obj):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # ~10× faster than PyYAML's own: hundreds of configs


def yaml_without_aliases(text: str) -> Any:
    """A YAML document that uses no alias (the configs conceptlab writes use none; followed aliases can expand a few
    hundred bytes to gigabytes), else None."""
    if "*" in text and any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=YAML_LOADER)):
        return None
    return yaml.load(text, Loader=YAML_LOADER)
