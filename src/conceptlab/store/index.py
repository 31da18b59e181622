"""Results store: a DuckDB index over every run folder under a root, queried with SQL into pandas DataFrames.

The files are the source of truth. Opening a store scans the root for run folders
(any folder holding a `config.yaml`; hidden folders are skipped; the layout is
`store.run_folder.RunFolder`'s) and builds, in an embedded in-memory DuckDB database:

A file that does not read (a corrupt Parquet table, a torn summary) is left out with a warning naming it
(`RunStore.warnings`), so one damaged run never breaks a query over the others.

- `runs`: one row per run folder — `run_id` (the folder's path relative to the root),
  `status`, one column per config key spelled exactly as in the config (`data.color_separation`,
  `train.train_seed`, ...: quote them in SQL, `SELECT "data.color_separation" FROM runs`), and the
  summary's scalars (`concept_signal_color`, `learning_time_train_color`, `final_step`, ...).
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

The store is read-only and confined to its root: once the views are built, the connection may
read only the Parquet files they name (DuckDB's `allowed_paths` with `enable_external_access`
off, no spilling to a temp folder, configuration locked), and `query` runs exactly one SELECT
statement — no COPY, ATTACH, INSTALL, SET or CREATE, and no file function reaches a file outside
the views. A run folder's own files are read with bounds (size; YAML without aliases), so a
hostile folder under the root cannot make opening the store expensive.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import yaml

from conceptlab.messages import one_line, shown
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
MAX_FILE_BYTES = 16 << 20  # a run folder's config.yaml / summary.json / status.json read by the index
MAX_ROWS = 1_000_000  # rows `runs query` returns (add a LIMIT for more)
_MISSING_COLUMN = re.compile(r'(?:Referenced column|does not have a column named) "([^"]+)"')
_MISSING_TABLE = re.compile(r'Referenced table "([^"]+)" not found')


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
    """Nested dict → one level with `.`-joined keys, the config's own spelling (`{"data": {"data_seed": 0}}` →
    `data.data_seed`); lists become JSON text."""
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, dict):
            out.update(flatten(value, name))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def _read(path: Path, parse, warnings: list[str] | None = None) -> Any:
    """`parse(text)` of a run folder's small file; None when it is missing, and None and a warning naming the file
    when it is too large, not UTF-8 or malformed."""
    if not path.is_file():
        return None
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            if warnings is not None:
                warnings.append(f"{path}: larger than {MAX_FILE_BYTES:,} bytes, left out")
            return None
        return parse(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as err:
        if warnings is not None:
            text = str(err).strip()
            warnings.append(f"{path}: unreadable, left out ({text.splitlines()[0] if text else type(err).__name__})")
        return None


def _yaml_without_aliases(text: str) -> Any:
    """A YAML document that uses no alias (the configs conceptlab writes use none; followed aliases can expand a few
    hundred bytes to gigabytes), else None."""
    if "*" in text and any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_Loader)):
        return None
    return yaml.load(text, Loader=_Loader)


def _readable_parquet(path: Path, warnings: list[str]) -> bool:
    """True when the whole Parquet file reads; else False and a warning naming it."""
    try:
        pq.read_table(path)
        return True
    except Exception as err:  # ArrowInvalid, OSError, …
        text = str(err).strip()
        warnings.append(f"{path}: not a readable Parquet file, left out ({text.splitlines()[0] if text else type(err).__name__})")
        return False


def run_row(root: Path, run_dir: Path, warnings: list[str] | None = None) -> dict[str, Any]:
    """The `runs` row of one run folder: id, status, flattened config, summary scalars (an unreadable file of the
    folder is left out, with a warning naming it)."""
    folder = RunFolder(run_dir)
    config = _read(folder.config, _yaml_without_aliases, warnings)
    summary = _read(folder.summary, json.loads, warnings)
    status = _read(folder.status, json.loads, warnings)
    config = config if isinstance(config, dict) else {}
    summary = summary if isinstance(summary, dict) else None
    status = status if isinstance(status, dict) else {}
    state = "done" if summary is not None else _scalar(status.get("state", "incomplete"))
    if state == "done" and summary is None:
        state = "incomplete"
    row: dict[str, Any] = {
        "run_id": run_dir.relative_to(root).as_posix() if run_dir != root else run_dir.name,
        "status": state,
        "error": _scalar(status.get("error")) if state != "done" else None,
        "path": str(run_dir),
    }
    try:
        row.update(flatten({str(k): v for k, v in config.items() if k not in ("runs_dir",)}))
    except RecursionError:  # a config nested past Python's stack: its columns are left out
        pass
    if summary:
        for key in ("kind", "final_step", "checkpoints", "parameters", "device", "config_hash", "training_images"):
            if key in summary:
                row[key] = _scalar(summary[key])
        for prefix, group in (("concept_signal", "concept_signal"), ("learning_time", "learning_time"),
                              ("mean_accuracy", "mean_accuracy"), ("seconds", "seconds")):
            values = summary.get(group)
            for key, value in (values.items() if isinstance(values, dict) else ()):
                row[f"{prefix}_{str(key).replace('/', '_')}"] = _scalar(value)
    return row


def _scalar(value: Any) -> Any:
    """A value for one cell: None, a bool, a number or a string (anything else as its JSON text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)[:200]


def _uniform(frame: pd.DataFrame) -> pd.DataFrame:
    """The runs table as DuckDB can hold it, whatever a run folder's files say: column names differing only in case
    kept once, and every column holding values of more than one kind (text, number, bool) or integers past 64 bits
    as text."""
    seen: set[str] = set()
    keep = []
    for column in frame.columns:  # DuckDB's names are case-insensitive: the first spelling wins
        if str(column).lower() not in seen:
            seen.add(str(column).lower())
            keep.append(column)
    frame = frame[keep].copy()
    for column in frame.columns:
        if frame[column].dtype != object:
            continue
        values = frame[column].dropna()
        kinds = {"bool" if isinstance(v, bool) else "number" if isinstance(v, (int, float)) else "text" for v in values}
        if len(kinds) > 1 or any(isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**63 for v in values):
            frame[column] = frame[column].map(lambda v: v if v is None or v != v else str(v))
    return frame


class RunStore:
    """An index of the runs under `root`; `query(sql)` and `runs()` return pandas DataFrames."""

    def __init__(self, root: Path):
        self.root = Path(root)
        if not self.root.exists():
            raise StoreError(f"results root {shown(str(self.root))} does not exist")
        if not self.root.is_dir():
            raise StoreError(f"results root {shown(str(self.root))} is not a folder")
        self.con: duckdb.DuckDBPyConnection | None = None
        self.refresh()

    def refresh(self) -> None:
        """Rescan the root and rebuild the `runs` table and the Parquet views from the files, in a new connection
        that is then locked to them (a locked connection cannot be widened to read new files)."""
        con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False,
                                                 "autoload_known_extensions": False})
        try:
            allowed = self._build(con)
            _lock(con, allowed)
        except BaseException:
            con.close()
            raise
        if self.con is not None:
            self.con.close()
        self.con = con

    def _build(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        """Fill `con` with the runs table and the views; returns every Parquet file the views read."""
        run_dirs = find_run_dirs(self.root)
        self.warnings: list[str] = []
        rows = [run_row(self.root, d, self.warnings) for d in run_dirs]
        runs = _uniform(pd.DataFrame(rows, columns=None if rows else ["run_id", "status", "error", "path"]))
        con.register("_runs_df", runs)
        con.execute("CREATE OR REPLACE TABLE runs AS SELECT * FROM _runs_df")
        con.unregister("_runs_df")
        ids = {str(d): r["run_id"] for d, r in zip(run_dirs, rows)}
        self.tables = dict(TABLES)
        for d in run_dirs:  # run-level tables of other studies (e.g. plug-ins)
            for path in sorted(d.glob("*.parquet")):
                if _TABLE_NAME.match(path.stem) and path.stem not in (*self.tables, EVAL_TABLE, "runs"):
                    self.tables[path.stem] = path.name
        allowed: list[str] = []
        for view, name in self.tables.items():
            files = {str(d / name): ids[str(d)] for d in run_dirs
                     if (d / name).is_file() and _readable_parquet(d / name, self.warnings)}
            allowed += self._view(con, view, files)
        eval_files = {str(p): ids[str(d)] for d in run_dirs for _, p in RunFolder(d).step_files("eval")
                      if _readable_parquet(p, self.warnings)}
        allowed += self._view(con, EVAL_TABLE, eval_files)
        return allowed

    def _view(self, con: duckdb.DuckDBPyConnection, view: str, files: dict[str, str]) -> list[str]:
        """`view` := union of the Parquet files, each row tagged with its run's id; returns the files it reads."""
        table = f"_{view}_files"
        frame = pd.DataFrame({"filename": list(files), "run_id": list(files.values())}, dtype="string")
        con.register("_files_df", frame)
        con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM _files_df")
        con.unregister("_files_df")
        if not files:
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT NULL::VARCHAR AS run_id WHERE false")
            return []
        paths = "[" + ", ".join(_sql_str(p) for p in files) + "]"
        source = f"read_parquet({paths}, filename = true, union_by_name = true)"
        try:
            columns = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
        except duckdb.Error as err:
            raise StoreError(f"cannot read the {view} tables under {shown(str(self.root))}: "
                             f"{one_line(str(err).splitlines()[0])}") from None
        drop = [c for c in ("filename", "run", "run_id") if c in columns]
        con.execute(
            f"CREATE OR REPLACE VIEW {view} AS SELECT f.run_id, t.* EXCLUDE ({', '.join(drop)}) "
            f"FROM {source} t JOIN {table} f USING (filename)"
        )
        return [str(Path(p).resolve()) for p in files]

    def query(self, sql: str, max_rows: int | None = None) -> pd.DataFrame:
        """Run one SELECT statement over `runs`, the views and `eval_steps`; returns a DataFrame. StoreError (one line)
        when it is not exactly one SELECT, fails, or returns more than `max_rows` rows (None: no limit)."""
        if not isinstance(sql, str) or not sql.strip():
            raise StoreError("query is empty: give one SELECT statement, e.g. \"SELECT * FROM runs\"")
        try:
            statements = self.con.extract_statements(sql)
        except duckdb.Error as err:
            raise StoreError(f"query failed: {one_line(str(err).splitlines()[0])}") from None
        kinds = [s.type.name for s in statements]
        if kinds != ["SELECT"]:
            got = ", ".join(kinds) or "nothing"
            raise StoreError(f"query must be one SELECT statement (the store is read-only), got {got}")
        try:
            result = self.con.execute(sql)
            if max_rows is None:
                return result.df()
            chunks, rows = [], 0
            while True:  # chunk by chunk, so a huge result is refused before it is all held
                chunk = result.fetch_df_chunk(16)
                if chunk.empty:
                    chunks = chunks or [chunk]  # no rows: the empty frame keeps the columns
                    break
                chunks.append(chunk)
                rows += len(chunk)
                if rows > max_rows:
                    raise StoreError(f"query returned more than {max_rows:,} rows; add a LIMIT (or aggregate)")
            return pd.concat(chunks, ignore_index=True) if len(chunks) > 1 else chunks[0]
        except StoreError:
            raise
        except Exception as err:  # DuckDB's errors, and a result pandas cannot hold: the query's failure, one line
            hint = self._spelling_hint(str(err), sql) if isinstance(err, duckdb.BinderException) else None
            if hint:
                raise StoreError(hint) from None
            lines = [line for line in str(err).splitlines() if line.strip()]
            raise StoreError(f"query failed: {one_line(lines[0] if lines else type(err).__name__)}") from None

    def _spelling_hint(self, message: str, sql: str) -> str | None:
        """For DuckDB's "no such column / table" binder error about a config key spelled the old way
        (`data_color_separation`) or left unquoted (`data.color_separation` reads as table `data`), the one-line
        message naming the quoted column; else None."""
        try:
            columns = [r[0] for r in self.con.execute("DESCRIBE runs").fetchall()]
        except duckdb.Error:
            return None
        dotted = {c.lower(): c for c in columns if "." in c}
        missing = _MISSING_COLUMN.search(message)
        if missing:
            name = missing.group(1)
            same = [c for low, c in dotted.items() if low.replace(".", "_") == name.lower()]
            if same:
                return (f"no column {one_line(name)}: config keys are spelled as in the config, quote them: "
                        f'"{same[0]}"')
        section = _MISSING_TABLE.search(message) or missing
        if section:
            prefix = section.group(1).lower()
            for match in re.finditer(rf'(?<![\w"]){re.escape(prefix)}((?:\.\w+)+)', sql, flags=re.IGNORECASE):
                key = dotted.get(prefix + match.group(1).lower())
                if key:
                    return (f"no table or column {one_line(section.group(1))}: {one_line(match.group(0))} is one config "
                            f'key, quote it: "{key}"')
        return None

    def runs(self) -> pd.DataFrame:
        return self.query("SELECT * FROM runs ORDER BY run_id")

    def table(self, name: str) -> pd.DataFrame:
        if name not in (*self.tables, EVAL_TABLE, "runs"):
            raise StoreError(f"unknown table {shown(name)}; tables: runs, {', '.join(self.tables)}, {EVAL_TABLE}")
        return self.query(f"SELECT * FROM {name}")

    def save(self, path: Path) -> Path:
        """Write the index as a standalone DuckDB file (runs table + views), atomically. The tables are copied through
        a second connection that writes only that file (the store's own connection reads its views and nothing else)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}"
        try:
            out = duckdb.connect(str(tmp))
            try:
                for name in ("runs", *(f"_{v}_files" for v in (*self.tables, EVAL_TABLE))):
                    out.register("_copy", self.con.sql(f"SELECT * FROM {name}").to_arrow_table())
                    out.execute(f"CREATE TABLE {name} AS SELECT * FROM _copy")
                    out.unregister("_copy")
                for view in (*self.tables, EVAL_TABLE):
                    (sql,) = self.con.execute(
                        "SELECT sql FROM duckdb_views() WHERE view_name = ? AND database_name = 'memory'", [view]
                    ).fetchone()
                    out.execute(sql)
            finally:
                out.close()
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            Path(f"{tmp}.wal").unlink(missing_ok=True)
            raise
        return path

    def close(self) -> None:
        if self.con is not None:
            self.con.close()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _lock(con: duckdb.DuckDBPyConnection, allowed: list[str]) -> None:
    """Confine `con` to reading the files in `allowed`: no other file, no extension, no temp folder, locked."""
    con.execute(f"SET allowed_paths = [{', '.join(_sql_str(p) for p in allowed)}]")
    con.execute("SET temp_directory = ''")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")


def _sql_str(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def open_store(root: Path | str) -> RunStore:
    """Index every run under `root` (files are the source of truth); see `RunStore`."""
    return RunStore(Path(root))
