"""The fuzz suite's harness: run one bad-input case through the CLI in-process and check the contract, and derive
values a config field must refuse from its type and bounds.

The contract for every bad input: exit status 2, exactly one output line `error: ...` that names the key, argument,
file or value at fault, no traceback, and nothing written (the temporary root the case runs in is unchanged).
`Fuzzer.refuse` checks it and tallies each case (cases, tracebacks, exits 0, unclear messages, writes), so the suite
can report its counts (`CONCEPTLAB_FUZZ_TALLY`).
"""

from __future__ import annotations

import json
import os
import typing
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.config_base import StrictConfig

TALLY = Counter()  # every case of this process, by outcome (read by conftest's terminal summary)
MAX_LINE = 800  # an error line longer than this counts as unclear (the CLI bounds its lines at 600 characters)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file and folder under `root`, by relative path."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            stat = path.lstat()
            out[str(path.relative_to(root))] = (stat.st_size if name in filenames else -1, stat.st_mtime_ns)
    return out


@dataclass
class Outcome:
    """What one case did."""

    args: list[str]
    exit_code: int
    output: str
    traceback: bool
    wrote: list[str] = field(default_factory=list)

    @property
    def line(self) -> str:
        return self.output.strip()


class Fuzzer:
    """Runs CLI cases in-process (typer's CliRunner on `conceptlab.cli.app`) inside a temporary root."""

    def __init__(self, root: Path, group: str):
        self.root = root
        self.group = group
        self.runner = CliRunner()
        self.count = 0

    def invoke(self, args: list[str]) -> Outcome:
        before = snapshot(self.root)
        result = self.runner.invoke(app, args)
        after = snapshot(self.root)
        exc = result.exception
        traceback = (exc is not None and not isinstance(exc, SystemExit)) or "Traceback" in result.output
        wrote = sorted(k for k in after if before.get(k) != after[k]) + sorted(k for k in before if k not in after)
        return Outcome(list(args), result.exit_code, result.output, traceback, wrote)

    def refuse(self, args: list[str], culprits: list[str]) -> Outcome:
        """Run `args`, tally the outcome, and assert the bad-input contract; `culprits`: strings of which the error
        line must contain at least one (the key, argument, file name or value at fault)."""
        out = self.invoke(args)
        lines = out.line.splitlines()
        one_line = len(lines) == 1 and lines[0].startswith("error: ") and len(lines[0]) <= MAX_LINE
        named = one_line and any(c and c in lines[0] for c in culprits)
        self.count += 1
        TALLY["cases"] += 1
        TALLY[f"cases:{self.group}"] += 1
        TALLY["tracebacks"] += out.traceback
        TALLY["exit 0 on bad input"] += out.exit_code == 0
        TALLY["unclear messages"] += not named
        TALLY["wrote files"] += bool(out.wrote)
        _record(self.group, out, named)
        shown = f"{out.args!r} → exit {out.exit_code}: {out.output[:500]!r}"
        assert not out.traceback, f"traceback: {shown}"
        assert out.exit_code == 2, f"exit code: {shown}"
        assert one_line, f"not one error line: {shown}"
        assert named, f"names none of {culprits!r}: {shown}"
        assert not out.wrote, f"wrote {out.wrote[:5]}: {shown}"
        return out


def _record(group: str, out: Outcome, named: bool) -> None:
    """Append the case to `$CONCEPTLAB_FUZZ_TALLY` (JSON lines), when set, for the suite's report."""
    path = os.environ.get("CONCEPTLAB_FUZZ_TALLY")
    if not path:
        return
    entry = {"group": group, "args": [a[:200] for a in out.args], "exit": out.exit_code, "traceback": out.traceback,
             "named": named, "wrote": bool(out.wrote), "line": out.line[:300]}
    with open(path, "a") as handle:
        handle.write(json.dumps(entry) + "\n")


# ---------------------------------------------------------------- config fields and the values they must refuse


def leaf_fields(cfg: BaseModel, prefix: str = "") -> list[tuple[str, Any, list]]:
    """(dotted key, annotation, metadata) of every leaf field of a resolved config (sections set in it descended)."""
    out = []
    for name, info in type(cfg).model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        value = getattr(cfg, name)
        if isinstance(value, StrictConfig):
            out += leaf_fields(value, key)
        else:
            out.append((key, info.annotation, list(info.metadata)))
    return out


def _strip_optional(annotation: Any) -> tuple[Any, bool]:
    args = get_args(annotation)
    if get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return annotation, False


def _base(annotation: Any) -> Any:
    """The type inside `Annotated[...]`."""
    while get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _bounds(metadata: list) -> dict[str, float]:
    out = {}
    for item in metadata:
        for name in ("gt", "ge", "lt", "le"):
            if isinstance(item, getattr(annotated_types, name.capitalize())):
                out[name] = getattr(item, name)
    return out


def _out_of_range(bounds: dict[str, float], integer: bool) -> list[str]:
    step = 1 if integer else 0.5
    values = []
    if "ge" in bounds:
        values.append(bounds["ge"] - step)
    if "gt" in bounds:
        values.append(bounds["gt"])
    if "le" in bounds:
        values.append(bounds["le"] + step)
    if "lt" in bounds:
        values.append(bounds["lt"])
    return [str(int(v)) if integer else repr(float(v)) for v in values]


NON_FINITE = [".nan", ".inf", "-.inf", "1e999", "-1e999", "NaN", "inf"]
HUGE_INT = "1" + "0" * 40


def bad_values(annotation: Any, metadata: list) -> list[tuple[str, str]]:
    """(override text, what is wrong) pairs a field with this annotation must refuse; [] for fields whose bad values
    cannot be told from the type (free text, import paths, arbitrary mappings)."""
    inner, _ = _strip_optional(_base(annotation))
    inner = _base(inner)
    origin, args = get_origin(inner), get_args(inner)
    bounds = _bounds(metadata)
    if inner is bool:
        return [("maybe", "not a bool"), ("[true]", "a list"), ("2", "not 0/1")]
    if inner is float:
        return ([(v, "non-finite") for v in NON_FINITE] + [(v, "out of range") for v in _out_of_range(bounds, False)]
                + [("not_a_number", "text"), ("[1.0, 2.0]", "a list"), ("{a: 1}", "a mapping")])
    if inner is int:
        return ([(v, "out of range") for v in _out_of_range(bounds, True)]
                + [("1.5", "fractional"), ("not_a_number", "text"), (HUGE_INT, "beyond 64 bits"), ("-" + HUGE_INT, "beyond 64 bits"),
                   (".nan", "non-finite"), (".inf", "non-finite"), ("[1, 2]", "a list")])
    if origin is Literal:
        return [("zz_not_a_choice", "not a choice"), ("[1]", "a list"), ("3.5", "a number")]
    if origin in (list, tuple):
        item = _base(args[0]) if args else Any
        item_meta = getattr(args[0], "__metadata__", ()) if args else ()
        item_bounds = [m for a in item_meta for m in getattr(a, "metadata", [a])]
        out = [("{a: 1}", "a mapping"), ("not_a_list", "text")]
        if item is float:
            out += [("[1.0, .nan]", "non-finite item"), ("[.inf]", "non-finite item"), ("[1.0, -.inf]", "non-finite item")]
        elif item is int:
            out += [("[1.5]", "fractional item"), (f"[{HUGE_INT}]", "item beyond 64 bits"), ("[.nan]", "non-finite item")]
            out += [(f"[{v}]", "item out of range") for v in _out_of_range(_bounds(item_bounds), True)]
        elif get_origin(item) is Literal:
            out += [("[zz_not_a_choice]", "not a choice")]
        return out
    if origin is dict and len(args) == 2 and _base(args[1]) is float:
        key = get_args(args[0])[0] if get_origin(args[0]) is Literal else "a"
        return [(f"{{{key}: .nan}}", "non-finite value"), (f"{{{key}: .inf}}", "non-finite value"), ("[1]", "a list")]
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return [("5", "not a mapping"), ("[1, 2]", "a list"), ("not_a_section", "text")]
    return []


def all_sections() -> list[type[StrictConfig]]:
    """Every config section class reachable from `RunConfig` (the built-in studies' data and eval sections included)."""
    from conceptlab.experiments.config import RunConfig
    from conceptlab.studies import builtin_studies

    found: list[type] = []

    def walk(model: type) -> None:
        if model in found:
            return
        found.append(model)
        for info in model.model_fields.values():
            for part in _classes(info.annotation):
                walk(part)

    walk(RunConfig)
    for study in builtin_studies():
        walk(study.data_config)
    return [m for m in found if issubclass(m, StrictConfig)]


def _classes(annotation: Any) -> list[type]:
    annotation = _base(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [c for arg in get_args(annotation) for c in _classes(arg)]


def float_fields(model: type[BaseModel]) -> list[tuple[str, Any]]:
    """(name, annotation) of every field of `model` that holds floats (alone, optional, or inside a container)."""
    def holds_float(annotation: Any) -> bool:
        annotation = _base(annotation)
        return annotation is float or any(holds_float(a) for a in get_args(annotation))

    return [(name, info.annotation) for name, info in model.model_fields.items() if holds_float(info.annotation)]
