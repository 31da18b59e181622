"""Two evaluations of the findings suite side by side: the committed run records against a fresh rerun, or one
machine's runs against another's.

`compare_evaluations` reads two `findings.json` (what `conceptlab findings` writes at its root) and pairs every
finding, criterion and report seed: verdicts, pass counts, each seed's value, control and pass, and whether both
read the same run ids (a different id is a different config or analysis version, so its numbers are not the same
experiment). `compare_runs` pairs the runs both roots hold under the same run id and compares them field by field
in `summary.json` and cell by cell in every run-level table (`*.parquet`), leaving out what differs between two
makings of one run without saying anything about it (timings, provenance, bytes on disk, where a classifier was
loaded from: `IGNORED`). Equality is exact unless a tolerance is given. `conceptlab findings-compare` prints it;
its `--check` turns any difference into a failing exit status, so "the same verdicts and numbers from fresh runs"
is one command anyone can rerun.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from conceptlab.store.files import finite_json, read_json, read_parquet

# summary fields (dotted paths, list items as `[i]`) and table columns that differ between two makings of the same
# run without being a result: wall-clock timings, provenance (commit, machine, versions), bytes on disk, how many
# invocations made it, whether a classifier was trained or loaded from its cache
IGNORED: tuple[str, ...] = ("seconds", "seconds.*", "seconds_*", "*_seconds", "*.*_seconds", "provenance.*",
                            "disk_bytes", "invocations", "*source")

RUN_ID = re.compile(r"^[0-9a-f]{16}$")


class CompareError(ValueError):
    """A root cannot be compared (no findings.json, or not a findings evaluation); the message says which."""


@dataclass(frozen=True)
class Tolerance:
    """Two numbers are the same when |a − b| ≤ atol + rtol·|b| (both 0: exactly equal); NaN equals NaN and an
    infinity only the same infinity."""

    rtol: float = 0.0
    atol: float = 0.0

    def __post_init__(self) -> None:
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number ≥ 0, got {value!r}")

    def same(self, a: Any, b: Any) -> bool:
        if _number(a) and _number(b):
            a, b = float(a), float(b)
            if math.isnan(a) or math.isnan(b):
                return math.isnan(a) and math.isnan(b)
            if math.isinf(a) or math.isinf(b):
                return a == b
            return abs(a - b) <= self.atol + self.rtol * abs(b)
        if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
            return isinstance(a, (bool, np.bool_)) and isinstance(b, (bool, np.bool_)) and bool(a) == bool(b)
        return a == b


def _number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def ignored(path: str, patterns: Iterable[str]) -> bool:
    """Whether a summary field or table column is left out of the comparison (`fnmatch` patterns on its dotted
    path; a list item's path without its `[i]` index)."""
    bare = re.sub(r"\[\d+\]", "", path)
    return any(fnmatch.fnmatchcase(bare, p) for p in patterns)


def leaves(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a JSON value by its dotted path, list items as `[i]` (so two lists compare item by item)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            out.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(obj, list):
        out = {}
        for i, value in enumerate(obj):
            out.update(leaves(value, f"{prefix}[{i}]"))
        return out if obj else {prefix: []}
    return {prefix: obj}


# ---------------------------------------------------------------- findings: verdicts, counts, seeds


@dataclass
class SeedPair:
    seed: int
    a: dict[str, Any]  # value, control, difference, passed, runs ({}: the seed is not in that evaluation)
    b: dict[str, Any]
    same: bool
    same_runs: bool


@dataclass
class CriterionPair:
    name: str
    verdict: tuple[str | None, str | None]
    passed: tuple[str | None, str | None]  # "2/3" on each side
    seeds: list[SeedPair]

    @property
    def same(self) -> bool:
        return self.verdict[0] == self.verdict[1] and self.passed[0] == self.passed[1] and all(
            s.same for s in self.seeds)


@dataclass
class FindingPair:
    name: str
    verdict: tuple[str | None, str | None]
    run_seconds: tuple[float | None, float | None]
    criteria: list[CriterionPair]
    only_in: str | None = None  # "a" or "b" when the other evaluation has no such finding

    @property
    def same(self) -> bool:
        return self.only_in is None and self.verdict[0] == self.verdict[1] and all(c.same for c in self.criteria)


SEED_FIELDS = ("value", "control", "difference", "passed")


def load_evaluation(root: Path | str) -> dict[str, Any]:
    """A root's `findings.json` (the root itself may be that file), with a clear error when there is none."""
    path = Path(root)
    path = path if path.is_file() else path / "findings.json"
    if not path.is_file():
        raise CompareError(f"{path}: no findings.json; evaluate the root first (conceptlab findings --evaluate-only "
                           f"--root {Path(root)})")
    data = read_json(path, nonfinite=True)  # a censored value is written as "inf" (strict JSON)
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        raise CompareError(f"{path}: not an evaluation of the findings suite (no 'findings' list)")
    return data


def _seed_side(criterion: dict[str, Any] | None, seed: int) -> dict[str, Any] | None:
    if criterion is None:
        return None
    row = next((s for s in criterion.get("seeds", []) if s.get("seed") == seed), None)
    if row is None:
        return None
    runs = (criterion.get("runs") or {}).get(str(seed))
    return {**{k: row.get(k) for k in SEED_FIELDS}, "runs": sorted(runs) if runs else None}


def _count(criterion: dict[str, Any] | None) -> str | None:
    return None if criterion is None else f"{criterion.get('passed')}/{criterion.get('of')}"


def compare_criterion(a: dict[str, Any] | None, b: dict[str, Any] | None, tol: Tolerance) -> CriterionPair:
    name = (a or b or {}).get("name", "?")
    seeds = sorted({s["seed"] for c in (a, b) if c for s in c.get("seeds", [])})
    pairs = []
    for seed in seeds:
        sa, sb = _seed_side(a, seed), _seed_side(b, seed)
        same = sa is not None and sb is not None and all(tol.same(sa[k], sb[k]) for k in SEED_FIELDS)
        pairs.append(SeedPair(seed, sa or {}, sb or {}, same,
                              sa is not None and sb is not None and sa["runs"] == sb["runs"]))
    return CriterionPair(name, ((a or {}).get("verdict"), (b or {}).get("verdict")), (_count(a), _count(b)), pairs)


def compare_evaluations(a: dict[str, Any], b: dict[str, Any], tol: Tolerance = Tolerance()) -> list[FindingPair]:
    """Every finding of either evaluation, in a's order then b's: verdicts, run time and its criteria paired by
    name (`compare_criterion`)."""
    by_a = {f["name"]: f for f in a["findings"]}
    by_b = {f["name"]: f for f in b["findings"]}
    out = []
    for name in list(by_a) + [n for n in by_b if n not in by_a]:
        fa, fb = by_a.get(name), by_b.get(name)
        ca = {c["name"]: c for c in (fa or {}).get("criteria", [])}
        cb = {c["name"]: c for c in (fb or {}).get("criteria", [])}
        criteria = [compare_criterion(ca.get(n), cb.get(n), tol) for n in list(ca) + [n for n in cb if n not in ca]]
        only = "a" if fb is None else "b" if fa is None else None
        out.append(FindingPair(name, ((fa or {}).get("verdict"), (fb or {}).get("verdict")),
                               ((fa or {}).get("run_seconds"), (fb or {}).get("run_seconds")), criteria, only))
    return out


# ---------------------------------------------------------------- runs: summaries and tables


@dataclass
class RunPair:
    run_id: str
    run_set: str
    fields: int = 0  # summary fields compared
    differing: list[tuple[str, Any, Any]] = field(default_factory=list)  # (path, a, b); a field missing: None
    tables: int = 0  # tables compared
    differing_tables: dict[str, str] = field(default_factory=dict)  # table → what differs

    @property
    def same(self) -> bool:
        return not self.differing and not self.differing_tables


def run_folders(root: Path | str) -> dict[str, Path]:
    """Every finished run folder under a findings root (its `runs/`, the `runs-*` of `--no-reuse` invocations, or
    a records folder), by run id; a run id found twice (a twin copied into a second run set, or two fresh
    invocations) keeps its most recently written summary."""
    found: dict[str, Path] = {}
    for summary in Path(root).rglob("summary.json"):
        folder = summary.parent
        if not RUN_ID.match(folder.name):
            continue
        kept = found.get(folder.name)
        if kept is None or summary.stat().st_mtime > (kept / "summary.json").stat().st_mtime:
            found[folder.name] = folder
    return found


def compare_summaries(a: dict[str, Any], b: dict[str, Any], patterns: Iterable[str] = IGNORED,
                      tol: Tolerance = Tolerance()) -> tuple[int, list[tuple[str, Any, Any]]]:
    """(fields compared, [(path, a, b) of each that differs]) over every leaf of either summary not `ignored`."""
    patterns = tuple(patterns)
    la = {k: v for k, v in leaves(a).items() if not ignored(k, patterns)}
    lb = {k: v for k, v in leaves(b).items() if not ignored(k, patterns)}
    paths = list(la) + [k for k in lb if k not in la]
    missing = object()
    differing = []
    for path in paths:
        va, vb = la.get(path, missing), lb.get(path, missing)
        if va is missing or vb is missing or not tol.same(va, vb):
            differing.append((path, None if va is missing else va, None if vb is missing else vb))
    return len(paths), differing


def compare_tables(a: pd.DataFrame, b: pd.DataFrame, patterns: Iterable[str] = IGNORED,
                   tol: Tolerance = Tolerance()) -> str | None:
    """None when two tables hold the same rows in the same order (columns `ignored` left out); else one line: what
    differs (columns, row count, or how many cells of which columns and the largest numeric gap)."""
    patterns = tuple(patterns)
    cols_a = [c for c in a.columns if not ignored(str(c), patterns)]
    cols_b = [c for c in b.columns if not ignored(str(c), patterns)]
    if cols_a != cols_b:
        only_a, only_b = sorted(set(cols_a) - set(cols_b)), sorted(set(cols_b) - set(cols_a))
        return f"columns differ (only in a: {only_a or '—'}; only in b: {only_b or '—'})" if (only_a or only_b) \
            else "columns in another order"
    if len(a) != len(b):
        return f"{len(a)} rows against {len(b)}"
    cells, worst, where = 0, 0.0, []
    for col in cols_a:
        x, y = a[col].reset_index(drop=True), b[col].reset_index(drop=True)
        if pd.api.types.is_numeric_dtype(x) and pd.api.types.is_numeric_dtype(y) and not (
                pd.api.types.is_bool_dtype(x) or pd.api.types.is_bool_dtype(y)):
            xv, yv = x.to_numpy(dtype=float), y.to_numpy(dtype=float)
            close = np.isclose(xv, yv, rtol=tol.rtol, atol=tol.atol, equal_nan=True)  # ∞ equals only the same ∞
            bad = int((~close).sum())
            if bad:
                gap = np.abs(xv - yv)[~close]
                finite = gap[np.isfinite(gap)]
                worst = max(worst, float(finite.max()) if finite.size else math.inf)
        else:
            bad = sum(not same_value(p, q, tol) for p, q in zip(x.tolist(), y.tolist()))
        if bad:
            cells += bad
            where.append(str(col))
    if not cells:
        return None
    counted = "1 cell differs" if cells == 1 else f"{cells} cells differ"
    return f"{counted} in {', '.join(where)}" + (f" (largest gap {worst:.3g})" if worst else "")


def _missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def same_value(p: Any, q: Any, tol: Tolerance = Tolerance()) -> bool:
    """A table cell of either table the same as the other's: missing (None, NaN) equals missing, sequences and
    arrays (a list-valued column) item by item, mappings key by key, everything else by `Tolerance.same`."""
    if _missing(p) and _missing(q):
        return True
    if isinstance(p, np.ndarray):
        p = p.tolist()
    if isinstance(q, np.ndarray):
        q = q.tolist()
    if isinstance(p, (list, tuple)) or isinstance(q, (list, tuple)):
        return (isinstance(p, (list, tuple)) and isinstance(q, (list, tuple)) and len(p) == len(q)
                and all(same_value(u, v, tol) for u, v in zip(p, q)))
    if isinstance(p, dict) or isinstance(q, dict):
        return (isinstance(p, dict) and isinstance(q, dict) and p.keys() == q.keys()
                and all(same_value(p[k], q[k], tol) for k in p))
    return tol.same(p, q)


def compare_run(a: Path, b: Path, patterns: Iterable[str] = IGNORED, tol: Tolerance = Tolerance()) -> RunPair:
    """One run made twice (two folders of the same run id): its summary field by field and every run-level table
    (`*.parquet` directly in the folder) both folders hold."""
    patterns = tuple(patterns)
    sa, sb = _with_precision(read_json(a / "summary.json")), _with_precision(read_json(b / "summary.json"))
    pair = RunPair(a.name, a.parent.name)
    pair.fields, pair.differing = compare_summaries(sa, sb, patterns, tol)
    names_a = {p.name for p in a.glob("*.parquet")}
    names_b = {p.name for p in b.glob("*.parquet")}
    for name in sorted(names_a ^ names_b):
        pair.differing_tables[name] = "only in a" if name in names_a else "only in b"
    for name in sorted(names_a & names_b):
        pair.tables += 1
        what = compare_tables(read_parquet(a / name), read_parquet(b / name), patterns, tol)
        if what is not None:
            pair.differing_tables[name] = what
    return pair


def _with_precision(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary written before runs recorded their `precision` names only its last invocation's `bf16`: read as
    that precision, so a record compares with a run made since on the precision, not on a field one of them lacks."""
    if isinstance(summary, dict) and "precision" not in summary and "bf16" in summary:
        from conceptlab.experiments.provenance import precision_name

        return {**summary, "precision": precision_name(bool(summary["bf16"]))}
    return summary


def compare_runs(root_a: Path | str, root_b: Path | str, patterns: Iterable[str] = IGNORED,
                 tol: Tolerance = Tolerance(), ids: Iterable[str] | None = None) -> tuple[list[RunPair], dict]:
    """Every run both roots hold (or those of `ids` they both hold), compared by `compare_run`; and the run ids only
    one of them holds, by side ({"a": [...], "b": [...]})."""
    fa, fb = run_folders(root_a), run_folders(root_b)
    wanted = set(fa) | set(fb) if ids is None else set(ids)
    shared = sorted(wanted & set(fa) & set(fb), key=lambda r: (fa[r].parent.name, r))
    pairs = [compare_run(fa[r], fb[r], patterns, tol) for r in shared]
    return pairs, {"a": sorted((wanted & set(fa)) - set(fb)), "b": sorted((wanted & set(fb)) - set(fa))}


def evaluation_ids(evaluation: dict[str, Any]) -> set[str]:
    """Every run id an evaluation read (its criteria's seeds)."""
    return {r for f in evaluation["findings"] for c in f.get("criteria", []) for ids in (c.get("runs") or {}).values()
            for r in ids if r}


def as_json(findings: list[FindingPair], runs: list[RunPair] | None, only: dict | None) -> dict[str, Any]:
    """The comparison as JSON-ready data (tuples become two-item lists; non-finite numbers as text)."""
    return finite_json({
        "findings": [{**asdict(f), "same": f.same,
                      "criteria": [{**asdict(c), "same": c.same} for c in f.criteria]} for f in findings],
        "runs": None if runs is None else [{**asdict(r), "same": r.same} for r in runs],
        "runs_only_in": only,
    })
