"""Run records: a finished run folder reduced to what an evaluation reads, small enough to keep in version control.

A record keeps the run folder's top-level JSON, YAML and Parquet files (config, summary, provenance, status, the data
process's summary, the run-level tables) and leaves out the weights, samples, logs, figures and per-checkpoint
folders. Its `record.json` lists every file kept with its size and SHA-256, and every file left out with its size, so
a reader can tell what the record is and check that it was not edited. A record is itself a complete run folder for
anything that reads summaries and tables (`experiments.findings` evaluates it like the original), not for anything
that needs weights (resuming, sampling, re-running an analysis).

Records are how runs made in different sessions or on different machines are gathered in one place: the run id names
the config and the analysis versions that made it, so a record is found again exactly when the same run is asked for.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

from conceptlab.store.files import read_json, write_json
from conceptlab.store.run_folder import RunFolder

RECORD = "record.json"
KEPT_SUFFIXES = (".json", ".yaml", ".parquet")
MAX_FILE_BYTES = 4 * 2**20  # a table larger than this is left out (and listed as such), not committed


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _folder_bytes(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def is_record(folder: Path | str) -> bool:
    """Whether `folder` is a run record (made by `record_run`), not a full run folder."""
    return (Path(folder) / RECORD).is_file()


def record_run(source: Path | str, dest: Path | str, max_file_bytes: int = MAX_FILE_BYTES) -> dict[str, Any] | None:
    """Make `dest` the record of the finished run at `source`; returns what `record.json` says, or None (touching
    nothing) when `source` is not finished or `dest` already holds a finished run or record (the same run id recorded
    earlier: the first record of a run is kept). The record is built in a hidden sibling of `dest` and renamed into
    place, so an interruption never leaves half a record; an unfinished leftover at `dest` is replaced."""
    source, dest = Path(source), Path(dest)
    if not RunFolder(source).is_complete() or RunFolder(dest).is_complete():
        return None
    staging = dest.with_name(f".{dest.name}.recording-{os.getpid()}")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    kept, left_out = [], []
    for path in sorted(source.iterdir(), key=lambda p: p.name):
        if path.name.startswith("."):  # the run's lock, editors' leftovers
            continue
        if path.is_dir():
            n, size = _folder_bytes(path)
            left_out.append({"name": f"{path.name}/", "files": n, "bytes": size})
            continue
        size = path.stat().st_size
        if path.suffix not in KEPT_SUFFIXES or size > max_file_bytes:
            left_out.append({"name": path.name, "bytes": size}
                            | ({"why": f"larger than {max_file_bytes} bytes"} if path.suffix in KEPT_SUFFIXES else {}))
            continue
        shutil.copyfile(path, staging / path.name)
        kept.append({"name": path.name, "bytes": size, "sha256": _sha256(staging / path.name)})
    manifest = {"format": 1, "source": str(source.resolve()), "recorded": time.strftime("%Y-%m-%d %H:%M:%S"),
                "files": kept, "left_out": left_out}
    write_json(staging / RECORD, manifest)
    if RunFolder(dest).is_complete():  # another process recorded it meanwhile: theirs is kept
        shutil.rmtree(staging)
        return None
    if dest.exists():  # an unfinished leftover (checked above): replaced
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(staging, dest)
    except OSError:
        if not RunFolder(dest).is_complete():
            raise
        shutil.rmtree(staging)  # recorded by another process between the check and the rename: theirs is kept
        return None
    return manifest


def verify_record(folder: Path | str) -> list[str]:
    """The problems with a record: kept files missing or changed since it was made (empty when it is intact)."""
    folder = Path(folder)
    problems = []
    for f in read_json(folder / RECORD)["files"]:
        path = folder / f["name"]
        if not path.is_file():
            problems.append(f"{f['name']}: missing")
        elif _sha256(path) != f["sha256"]:
            problems.append(f"{f['name']}: changed since it was recorded")
    return problems
