"""Results store: a DuckDB index over every run folder under a root, queried with SQL into pandas DataFrames.

The files are the source of truth. Opening a store scans the root for run folders
(any folder holding a `config.yaml`; hidden folders are skipped; the layout is
`store.run_folder.RunFolder`'s) and builds, in an embedded in-memory DuckDB database:

A file that does not read (a corrupt Parquet table, a torn summary) is left out with a warning naming it
(`RunStore.warnings`), so one damaged run never breaks a query over the others.

- `runs`: one row per run folder — `run_id` (the folder's path relative to the root),
  `status`, the config flattened into columns (`data.color_separation` →
  `data_color_separation`, `train.train_seed` → `train_train_seed`, ...), and the summary's
  scalars (`concept_signal_color`, `learning_time_train_color`, `final_step`, ...).
- views over the per-run Parquet tables, each the union of every run's file with a
  `run_id` column first: the built-in studies' `concept_space`, `learning_times`,
  `interventions`, `emergence`, `composition`, `geometry`, `abstractions`, `commitment`
  (always defined, empty where no run has one), any other run-level `<name>.parquet`
  a study writes (a plug-in's tables are queryable without registering them here), and
  `eval_steps` (the per-checkpoint `eval/step_*.parquet`, so unfinished runs are queryable too).

Writers never touch the index: each run writes its own files atomically (temp + rename),
so any number of pool workers or SLURM tasks can write while stores are opened, and a
store opened later sees every row exactly once. `refresh()` rescans; `save(path)`
writes a standalone DuckDB file (atomically) for other tools.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import yaml

from conceptlab.store.run_folder import CONFIG, INNER_FOLDERS, RunFolder

TABLES = {
    "concept_space": "concept_space.parquet",
    "learning_times": "learning_times.parquet",
    "interventions": "interventions.parquet",  # hidden-emergence runs: target × intervention × variant × step
    "emergence": "emergence.parquet",  # hidden-emergence runs: best variant per target × intervention × step
    "composition": "composition.parquet",  # bumps runs: generation accuracy per step × region
    "geometry": "geometry.parquet",  # bumps runs: representation geometry per step
    "abstractions": "abstractions.parquet",  # shapes3d runs: curves per measure × attribute × τ
    "commitment": "commitment.parquet",  # shapes3d runs: commitment τ per measure × attribute
}
EVAL_TABLE = "eval_steps"
_SKIP_DIRS = INNER_FOLDERS | {"__pycache__", "node_modules"}
_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StoreError(ValueError):
    """A store problem (missing root, bad SQL) in one line."""


def find_run_dirs(root: Path) -> list[Path]:
    """Every run folder (holding config.yaml) under root, not descending into runs or hidden folders."""
    root = Path(root)
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        if CONFIG in filenames:
            found.append(Path(dirpath))
            dirnames[:] = []
            continue
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
    return sorted(found)


def flatten(obj: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict → one level with `_`-joined keys; lists become JSON text."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}_{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def _read(path: Path, parse, warnings: list[str] | None = None) -> Any:
    """The parsed file, None if absent; None and a warning naming the file if it does not parse."""
    if not path.is_file():
        return None
    try:
        return parse(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError) as err:
        if warnings is not None:
            warnings.append(f"{path}: unreadable, left out ({str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__})")
        return None


def _readable_parquet(path: Path, warnings: list[str]) -> bool:
    """True when the whole Parquet file reads; else False and a warning naming it."""
    try:
        pq.read_table(path)
        return True
    except Exception as err:  # ArrowInvalid, OSError, …
        warnings.append(f"{path}: not a readable Parquet file, left out ({str(err).strip().splitlines()[0]})")
        return False


def run_row(root: Path, run_dir: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """The `runs` row of one run folder: id, status, flattened config, summary scalars (an unreadable file of the
    folder is left out, with a warning naming it)."""
    folder = RunFolder(run_dir)
    config = _read(folder.config, lambda t: yaml.load(t, Loader=_Loader), warnings) or {}
    if not isinstance(config, dict):
        config = {}
    summary = _read(folder.summary, json.loads, warnings)
    if summary is not None and not isinstance(summary, dict):
        summary = None
    status = _read(folder.status, json.loads, warnings) or {}
    state = "done" if summary is not None else status.get("state", "incomplete")
    if state == "done" and summary is None:
        state = "incomplete"
    row: dict[str, Any] = {
        "run_id": run_dir.relative_to(root).as_posix() if run_dir != root else run_dir.name,
        "status": state,
        "error": status.get("error") if state != "done" else None,
        "path": str(run_dir),
    }
    row.update(flatten({k: v for k, v in config.items() if k not in ("runs_dir",)}))
    if summary:
        for key in ("kind", "final_step", "checkpoints", "parameters", "device", "config_hash", "training_images"):
            if key in summary:
                row[key] = summary[key]
        for concept, value in (summary.get("concept_signal") or {}).items():
            row[f"concept_signal_{concept}"] = value
        for group in ("learning_time", "mean_accuracy"):
            for key, value in (summary.get(group) or {}).items():
                row[f"{group}_{key.replace('/', '_')}"] = value
        for stage, value in (summary.get("seconds") or {}).items():
            row[f"seconds_{stage}"] = value
    return row


class RunStore:
    """An index of the runs under `root`; `query(sql)` and `runs()` return pandas DataFrames."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise StoreError(f"results root {self.root} does not exist")
        self.con = duckdb.connect(":memory:")
        self.refresh()

    def refresh(self) -> None:
        """Rescan the root and rebuild the `runs` table and the Parquet views from the files."""
        run_dirs = find_run_dirs(self.root)
        self.warnings: list[str] = []
        rows = [run_row(self.root, d, self.warnings) for d in run_dirs]
        runs = pd.DataFrame(rows, columns=None if rows else ["run_id", "status", "error", "path"])
        self.con.register("_runs_df", runs)
        self.con.execute("CREATE OR REPLACE TABLE runs AS SELECT * FROM _runs_df")
        self.con.unregister("_runs_df")
        ids = {str(d): r["run_id"] for d, r in zip(run_dirs, rows)}
        self.tables = dict(TABLES)
        for d in run_dirs:  # run-level tables of other studies (e.g. plug-ins)
            for path in sorted(d.glob("*.parquet")):
                if _TABLE_NAME.match(path.stem) and path.stem not in (*self.tables, EVAL_TABLE, "runs"):
                    self.tables[path.stem] = path.name
        for view, name in self.tables.items():
            files = {str(d / name): ids[str(d)] for d in run_dirs
                     if (d / name).is_file() and _readable_parquet(d / name, self.warnings)}
            self._view(view, files)
        eval_files = {str(p): ids[str(d)] for d in run_dirs for _, p in RunFolder(d).step_files("eval")
                      if _readable_parquet(p, self.warnings)}
        self._view(EVAL_TABLE, eval_files)

    def _view(self, view: str, files: dict[str, str]) -> None:
        """`view` := union of the Parquet files, each row tagged with its run's id."""
        table = f"_{view}_files"
        frame = pd.DataFrame({"filename": list(files), "run_id": list(files.values())}, dtype="string")
        self.con.register("_files_df", frame)
        self.con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM _files_df")
        self.con.unregister("_files_df")
        if not files:
            self.con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT NULL::VARCHAR AS run_id WHERE false")
            return
        paths = "[" + ", ".join(_sql_str(p) for p in files) + "]"
        source = f"read_parquet({paths}, filename = true, union_by_name = true)"
        columns = [r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
        drop = [c for c in ("filename", "run", "run_id") if c in columns]
        self.con.execute(
            f"CREATE OR REPLACE VIEW {view} AS SELECT f.run_id, t.* EXCLUDE ({', '.join(drop)}) "
            f"FROM {source} t JOIN {table} f USING (filename)"
        )

    def query(self, sql: str) -> pd.DataFrame:
        """Run SQL over `runs`, `concept_space`, `learning_times`, `eval_steps`; returns a DataFrame."""
        try:
            return self.con.execute(sql).df()
        except duckdb.Error as err:
            raise StoreError(f"query failed: {str(err).splitlines()[0]}") from None

    def runs(self) -> pd.DataFrame:
        return self.query("SELECT * FROM runs ORDER BY run_id")

    def table(self, name: str) -> pd.DataFrame:
        if name not in (*self.tables, EVAL_TABLE, "runs"):
            raise StoreError(f"unknown table {name!r}; tables: runs, {', '.join(self.tables)}, {EVAL_TABLE}")
        return self.query(f"SELECT * FROM {name}")

    def save(self, path: Path) -> Path:
        """Write the index as a standalone DuckDB file (runs table + views), atomically."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
        try:
            self.con.execute(f"ATTACH {_sql_str(tmp)} AS out")
            for name in ("runs", *(f"_{v}_files" for v in (*self.tables, EVAL_TABLE))):
                self.con.execute(f"CREATE TABLE out.{name} AS SELECT * FROM {name}")
            for view in (*self.tables, EVAL_TABLE):
                (sql,) = self.con.execute(
                    "SELECT sql FROM duckdb_views() WHERE view_name = ? AND database_name = 'memory'", [view]
                ).fetchone()
                self.con.execute("USE out")
                self.con.execute(sql)
                self.con.execute("USE memory")
            self.con.execute("DETACH out")
            os.replace(tmp, path)
        except BaseException:
            self.con.execute("USE memory")
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sql_str(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def open_store(root: Path | str) -> RunStore:
    """Index every run under `root` (files are the source of truth); see `RunStore`."""
    return RunStore(Path(root))
