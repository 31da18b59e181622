"""Code versions kept honest: which source a version number stands for, and whether that source changed since.

A run id carries version numbers, not the code (`experiments.provenance.analysis_versions`): the training code's
`TRAINING_VERSION`, each study's `version` and the first version whose training data are generated as now
(`data_since`). A sweep or the findings suite reuses a finished run whenever its config and these numbers match,
so a change that alters a stored number without a bump would let stale results stand. This module ties each
number to the source it stands for and says when that source moved:

    training          TRAINING_VERSION: the trainer, the network, the processes and samplers (train/, models/,
                      hooks/ as the trainer and `models.diffusion_model` import them) and the run driver
    data:<kind>       a study's `data_since or version`: its data section's module and what it imports from data/
    study:<kind>      a study's `version`: its module and every module of analysis/, probes/, interventions/,
                      studies/ and data/ it imports (at module level or inside a function), less the two above
    probe:<name>      a cached probe's version (`PROBE_VERSION`, …): its module and what it imports from probes/,
                      data/ (its training images) and `train.augment` (a cached probe is trained once per
                      machine and reused while its version stands)

A module's fingerprint is a hash of its syntax tree without docstrings, so comments, docstrings and layout never
count. `code_versions.json` (beside this module) records, per key, the version and every module's fingerprint when
it was last recorded, and a history of each record with its reason. `compare()` lists every key whose source
moved while its version stood still (or whose version moved without a record); the unit test fails on any, and
`scripts/code_versions.py record` writes a new record: after a bump, or with `--reason` for a change that alters
no stored number (`scripts/code_versions.py verify` checks that claim bit for bit on micro runs of the code before
and after). `drift_for(kind)` names the keys a run of that kind depends on whose code moved: the run driver records
it in every invocation's provenance (`code_drift`) and warns. `studies/base.py` (with `NOISE_SEEDING_VERSION`) is in
every study key. Built-in studies only; a plug-in study keeps its own `version`.
"""

from __future__ import annotations

import ast
import datetime
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = "conceptlab"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
LEDGER = Path(__file__).with_name("code_versions.json")

TRAINING_ROOTS = ("conceptlab.train.trainer", "conceptlab.models.diffusion_model")
TRAINING_FILES = ("conceptlab.experiments.runner",)  # the file alone: its imports reach every study
TRAINING_PACKAGES = ("conceptlab.train", "conceptlab.models", "conceptlab.hooks", "conceptlab.data")
DATA_PACKAGES = ("conceptlab.data",)
STUDY_PACKAGES = ("conceptlab.analysis", "conceptlab.data", "conceptlab.hooks", "conceptlab.interventions",
                  "conceptlab.models", "conceptlab.probes", "conceptlab.studies", "conceptlab.train")
PROBES = {  # key → (module, its version constant)
    "probe:concept": ("conceptlab.probes.concept_classifier", "PROBE_VERSION"),
    "probe:attribute": ("conceptlab.probes.attribute_classifier", "CLASSIFIER_VERSION"),
    "probe:face": ("conceptlab.probes.face_classifier", "FACE_PROBE_VERSION"),
}
PROBE_PACKAGES = ("conceptlab.probes", "conceptlab.data", "conceptlab.train.augment")
NEVER_A_NUMBER = frozenset({"conceptlab.models.footprint"})  # memory estimates before a run, never stored


def module_file(name: str, root: Path = PACKAGE_DIR) -> Path | None:
    """The source file of module `name` (a package's `__init__.py`) under the package folder `root`, or None."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return None
    path = root.joinpath(*parts[1:])
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else None


def imported_modules(name: str, root: Path = PACKAGE_DIR) -> set[str]:
    """The package's modules that module `name` imports anywhere in its source (function-level imports too; not
    those under `if TYPE_CHECKING:`, which never run), itself left out. `tests/unit/test_layering.py` walks the
    package's import graph with it."""
    path = module_file(name, root)
    if path is None:
        raise ValueError(f"no module {name!r} under {root}")
    return set(_imports(name, root, path, *_stamp(path)))


@functools.lru_cache(maxsize=1024)
def _imports(name: str, root: Path, path: Path, mtime_ns: int, size: int) -> frozenset[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = _parsed(path, mtime_ns, size)
    type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:  # `from pkg import module` names a module, `from module import name` not
                sub = f"{module}.{alias.name}"
                found.add(sub if module_file(sub, root) else module)
    return frozenset(m for m in found if m != name and module_file(m, root) is not None)


def closure(roots: tuple[str, ...] | list[str], packages: tuple[str, ...], root: Path = PACKAGE_DIR) -> set[str]:
    """`roots` and every module of `packages` they reach by imports through modules of `packages`."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(m for m in imported_modules(name, root)
                    if any(m == p or m.startswith(p + ".") for p in packages))
    return seen


class _Canonical:
    """A syntax tree written out with docstrings dropped and empty fields skipped (so that Python versions which
    add empty fields, e.g. `type_params`, write the same code the same way)."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def visit(self, node: Any) -> None:
        if isinstance(node, ast.AST):
            self.parts.append(type(node).__name__ + "(")
            for field in node._fields:
                value = getattr(node, field, None)
                if value is None or value == []:
                    continue
                if field == "body" and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                         ast.AsyncFunctionDef)):
                    value = _without_docstring(value)
                self.parts.append(field + "=")
                self.visit(value)
                self.parts.append(",")
            self.parts.append(")")
        elif isinstance(node, list):
            self.parts.append("[")
            for item in node:
                self.visit(item)
                self.parts.append(",")
            self.parts.append("]")
        else:
            self.parts.append(repr(node))


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def fingerprint_source(source: str) -> str:
    """A short hash of the code in `source`: unchanged by comments, docstrings and layout."""
    return _hash_tree(ast.parse(source))


def _hash_tree(tree: ast.AST) -> str:
    writer = _Canonical()
    writer.visit(tree)
    return hashlib.sha256("".join(writer.parts).encode()).hexdigest()[:16]


def fingerprint(name: str, root: Path = PACKAGE_DIR) -> str:
    path = module_file(name, root)
    if path is None:
        raise ValueError(f"no module {name!r} under {root}")
    return _fingerprint(path, *_stamp(path))


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=1024)
def _parsed(path: Path, mtime_ns: int, size: int) -> ast.Module:  # a file is parsed once while it stays the same
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.lru_cache(maxsize=1024)
def _fingerprint(path: Path, mtime_ns: int, size: int) -> str:
    return _hash_tree(_parsed(path, mtime_ns, size))


@dataclass(frozen=True)
class Key:
    """One version number and the modules whose code it stands for."""

    name: str
    version: int
    where: str  # where the number is set, for messages
    modules: tuple[str, ...]


def _module_of(obj: Any) -> str:
    return type(obj).__module__ if not isinstance(obj, type) else obj.__module__


def current_keys(root: Path = PACKAGE_DIR) -> list[Key]:
    """Every guarded version number of this source tree with its modules (the built-in studies in config order,
    then the probes)."""
    import importlib

    from conceptlab.experiments.provenance import TRAINING_VERSION
    from conceptlab.studies import builtin_studies

    training = closure(TRAINING_ROOTS, TRAINING_PACKAGES, root) | set(TRAINING_FILES)
    keys = [Key("training", TRAINING_VERSION, "experiments/provenance.py: TRAINING_VERSION",
                tuple(sorted(training)))]
    for study in builtin_studies():
        module = _module_of(study)
        where = f"{module.removeprefix(PACKAGE + '.').replace('.', '/')}.py"
        data = closure([study.data_config.__module__], DATA_PACKAGES, root) - training
        evaluation = closure([module], STUDY_PACKAGES, root) - training - data - NEVER_A_NUMBER
        data_version = study.data_since if study.data_since is not None else study.version
        keys.append(Key(f"data:{study.kind}", data_version, f"{where}: data_since (or version)",
                        tuple(sorted(data))))
        keys.append(Key(f"study:{study.kind}", study.version, f"{where}: version", tuple(sorted(evaluation))))
    for name, (module, constant) in PROBES.items():
        version = getattr(importlib.import_module(module), constant)
        where = f"{module.removeprefix(PACKAGE + '.').replace('.', '/')}.py: {constant}"
        keys.append(Key(name, version, where, tuple(sorted(closure([module], PROBE_PACKAGES, root)))))
    return keys


def fingerprints(key: Key, root: Path = PACKAGE_DIR) -> dict[str, str]:
    return {name: fingerprint(name, root) for name in key.modules}


def read_ledger(path: Path | None = None) -> dict[str, Any]:
    path = LEDGER if path is None else path
    if not path.is_file():
        return {"keys": {}, "history": []}
    return json.loads(path.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Drift:
    """A key whose recorded state and the source disagree."""

    key: Key
    recorded_version: int | None
    changed: tuple[str, ...]  # modules added, removed or edited since the record
    gone: bool = False  # recorded, but no longer a key of the source (a study or probe removed or renamed)

    @property
    def bumped(self) -> bool:
        return self.recorded_version is not None and self.key.version > self.recorded_version

    def message(self) -> str:
        k = self.key
        if self.gone:
            return (f"{k.name}: recorded (version {self.recorded_version}) but no longer a key of this source (a study "
                    "or probe removed or renamed): `scripts/code_versions.py record` drops its record")
        if self.recorded_version is None:
            return f"{k.name}: not recorded yet (version {k.version}): `scripts/code_versions.py record`"
        if k.version < self.recorded_version:
            return (f"{k.name}: version {k.version} is below the recorded {self.recorded_version} ({k.where}): a "
                    "version never goes back")
        changed = ", ".join(self.changed) if self.changed else "no module"
        if self.bumped:
            return (f"{k.name}: version {self.recorded_version} → {k.version} ({k.where}) is not recorded yet "
                    f"(changed: {changed}): `scripts/code_versions.py record`")
        return (f"{k.name}: the code of version {k.version} changed ({changed}). If the change alters any number a "
                f"run stores, bump it ({k.where}) so that runs made before are not reused, then `scripts/"
                "code_versions.py record`; if it alters none, say so: `scripts/code_versions.py record --reason "
                "'...'` (`scripts/code_versions.py verify` compares micro runs of the code before and after)")


def compare(ledger: dict[str, Any] | None = None, root: Path = PACKAGE_DIR,
            keys: list[Key] | None = None) -> list[Drift]:
    """Every key (default: `current_keys`) whose source or version differs from its record in `ledger` (default:
    the committed one)."""
    ledger = read_ledger() if ledger is None else ledger
    drifts = []
    if keys is None:
        keys = current_keys(root)
        names = {k.name for k in keys}
        for name, old in ledger.get("keys", {}).items():
            if name not in names:
                drifts.append(Drift(Key(name, old["version"], "", ()), old["version"], tuple(old["modules"]), True))
    for key in keys:
        record = ledger.get("keys", {}).get(key.name)
        if record is None:
            drifts.append(Drift(key, None, key.modules))
            continue
        now, then = fingerprints(key, root), record["modules"]
        changed = tuple(sorted(m for m in set(now) | set(then) if now.get(m) != then.get(m)))
        if changed or key.version != record["version"]:
            drifts.append(Drift(key, record["version"], changed))
    return drifts


def record(drifts: list[Drift], reason: str | None, commit: str | None, ledger: dict[str, Any] | None = None,
           root: Path = PACKAGE_DIR, today: str | None = None) -> dict[str, Any]:
    """The ledger with `drifts` recorded. A key whose code changed under the same version needs `reason` (the
    change alters no stored number); a version that went back is refused. ValueError (one line) otherwise."""
    ledger = read_ledger() if ledger is None else json.loads(json.dumps(ledger))
    ledger.setdefault("keys", {})
    ledger.setdefault("history", [])
    today = today or datetime.date.today().isoformat()
    for drift in drifts:
        key = drift.key
        if drift.gone:
            ledger["keys"].pop(key.name, None)
            ledger["history"].append({"date": today, "based_on": commit, "key": key.name, "version": key.version,
                                      "changed": [], "reason": reason or "dropped: no longer in the source"})
            continue
        if drift.recorded_version is not None and key.version < drift.recorded_version:
            raise ValueError(drift.message())
        same = drift.recorded_version == key.version
        if same and not reason:
            raise ValueError(f"{key.name}: its code changed under version {key.version} ({', '.join(drift.changed)}):"
                             " bump it, or give --reason why no stored number changes")
        if reason:
            why = reason
        elif drift.recorded_version is None:
            why = "first record"
        else:
            why = f"version {drift.recorded_version} → {key.version}"
        ledger["keys"][key.name] = {"version": key.version, "modules": fingerprints(key, root)}
        ledger["history"].append({
            "date": today, "based_on": commit, "key": key.name, "version": key.version,
            "changed": list(drift.changed) if drift.recorded_version is not None else [], "reason": why,
        })
    ledger["keys"] = dict(sorted(ledger["keys"].items()))
    return ledger


def write_ledger(ledger: dict[str, Any], path: Path | None = None) -> None:
    target = LEDGER if path is None else path
    target.write_text(json.dumps(ledger, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def relevant_keys(kind: str, keys: list[Key]) -> list[Key]:
    """The keys a run of data kind `kind` depends on: the training key, the kind's data and study keys and the cached
    probes its study imports (a plug-in kind: the training key alone)."""
    names = {"training", f"data:{kind}", f"study:{kind}"}
    by_name = {k.name: k for k in keys}
    study = by_name.get(f"study:{kind}")
    if study is not None:
        names |= {name for name, (module, _) in PROBES.items() if module in study.modules}
    return [k for k in keys if k.name in names]


def drift_for(kind: str) -> list[str] | None:
    """The keys a run of `kind` depends on whose code differs from its record (sorted; [] when every one matches),
    or None when that cannot be told (no ledger, a source file that does not read or parse). Recorded in every
    invocation's provenance (`code_drift`)."""
    if not LEDGER.is_file():
        return None
    try:
        return sorted(d.key.name for d in compare(keys=relevant_keys(kind, current_keys())))
    except (OSError, SyntaxError, ValueError, KeyError):
        return None
