"""docs/schema.md describes every column of every table the results store exposes, with its type: one micro run of
each data kind (the runs scripts/schema_doc.py makes the doc from) is opened as a store and each table's columns are
looked up in the committed doc, both ways, so the doc cannot drift from the store."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "schema.md"
CONFIGURATION = REPO / "docs" / "configuration.md"
ROW = re.compile(r"^\| `([^`]+)` \|(.*)\|$")


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("schema-doc")


def _script():
    spec = importlib.util.spec_from_file_location("schema_doc", REPO / "scripts" / "schema_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cells(rest: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", rest)]


def _sections(text: str) -> dict[str, dict[str, list[list[str]]]]:
    """table → subsection (`""` for a view's one table) → rows (column name first, then the cells)."""
    out: dict[str, dict[str, list[list[str]]]] = {}
    table = sub = None
    for line in text.splitlines():
        if m := re.match(r"^## `(\w+)`$", line):
            table, sub = m.group(1), ""
            out[table] = {}
        elif line.startswith("## "):
            table = None
        elif table and (m := re.match(r"^### (.+)$", line)):
            sub = m.group(1)
        elif table and (m := ROW.match(line)):
            out[table].setdefault(sub, []).append([m.group(1), *_cells(m.group(2))])
    return out


def _pattern(name: str) -> re.Pattern:
    return re.compile("^" + re.sub(r"<[a-z]+>", ".+", re.escape(name)) + "$")


def _find(column: str, rows: list[list[str]]) -> list[str] | None:
    exact = [r for r in rows if r[0] == column]
    return exact[0] if exact else next((r for r in rows if "<" in r[0] and _pattern(r[0]).match(column)), None)


def _same_type(documented: str, actual: str) -> bool:
    """A documented type is the actual one; NULL (no value in that run) stands for any."""
    return documented == actual or "NULL" in (documented, actual) or actual in documented.split(", ")


@pytest.fixture(scope="module")
def micro_store(tmp_path_factory):
    """The micro runs (shapes with interventions, bumps, shapes3d, celeba on drawn faces) and their columns as the store
    gives them."""
    old = os.environ.get("CONCEPTLAB_CACHE")
    os.environ["CONCEPTLAB_CACHE"] = str(tmp_path_factory.getbasetemp() / "probe-cache")
    try:
        script = _script()
        root = tmp_path_factory.mktemp("schema-runs")
        script.make_runs(root)
        runs, views = script.observe(root)
    finally:
        if old is None:
            os.environ.pop("CONCEPTLAB_CACHE", None)
        else:
            os.environ["CONCEPTLAB_CACHE"] = old
    return script, runs, views


@pytest.mark.slow
def test_every_column_of_every_table_is_described_in_the_schema_doc(micro_store):
    script, runs, views = micro_store
    doc = _sections(DOC.read_text())
    assert set(doc) == {"runs", *views}, "docs/schema.md's tables differ from the store's: regenerate it " \
        "(PYTHONPATH=src python scripts/schema_doc.py)"
    problems = []
    for view, columns in views.items():
        rows = doc[view][""]
        for column, actual in columns:
            row = _find(column, rows)
            if row is None or not row[-1]:
                problems.append(f"{view}.{column}: not described")
            elif not _same_type(row[1], actual):
                problems.append(f"{view}.{column}: documented {row[1]}, the store has {actual}")
        names = {c for c, _ in columns}
        problems += [f"{view}.{r[0]}: documented, not in the store" for r in rows if "<" not in r[0] and r[0] not in names]

    results, config = doc["runs"]["Results and state"], doc["runs"]["Config keys"]
    kinds = list(script.KINDS)
    for column, types in runs.items():
        row = _find(column, config if script.is_config(column) else results)
        if row is None or (not script.is_config(column) and not row[-1]):
            problems.append(f"runs.{column}: not described")
            continue
        offset = 1 if script.is_config(column) else 2  # results rows have `from` before the types
        for kind, actual in types.items():
            documented = row[offset + kinds.index(kind)]
            if not _same_type(documented, actual):
                problems.append(f"runs.{column} ({kind}): documented {documented}, the store has {actual}")
    problems += [f"runs.{r[0]}: documented, not in the store" for r in config + results
                 if "<" not in r[0] and r[0] not in runs]
    assert not problems, "docs/schema.md is out of date (PYTHONPATH=src python scripts/schema_doc.py):\n" + \
        "\n".join(problems)


@pytest.mark.slow
def test_config_columns_are_the_config_keys_dotted_and_documented(micro_store):
    script, runs, _ = micro_store
    keys = set(re.findall(r"^\| `([^`]+)` \|", CONFIGURATION.read_text(), flags=re.M))
    config = [c for c in runs if script.is_config(c)]
    assert {"data.color_separation", "data.data_seed", "train.train_seed", "eval.probe.seed",
            "data.held_out.scope", "data.levels.wall_hue", "eval.abstractions.taus"} <= set(config)
    assert not [c for c in runs if re.match(r"^(data|model|diffusion|train|eval)_", c)], "an old underscore spelling"
    # each column is a key of configuration.md, or a name under a mapping-valued key (data.levels.wall_hue)
    undocumented = [c for c in config
                    if not any(".".join(c.split(".")[:i]) in keys for i in range(len(c.split(".")), 1, -1))]
    assert not undocumented, undocumented


@pytest.mark.slow
def test_the_studies_declare_the_summary_sections_and_tables_their_runs_write(micro_store, tmp_path_factory):
    """The findings suite is checked at load against each study's `summary_sections` and `run_tables`
    (experiments.findings): every section and table column a micro run writes is declared, so a criterion naming
    one is accepted, and every declared table column is one a run writes (a declared pattern `<name>` matches a name
    part), so a criterion on a column no table has is refused."""
    import json

    from conceptlab.experiments.findings_spec import COMMON_SECTIONS, column_declared
    from conceptlab.studies import study_for

    root = tmp_path_factory.getbasetemp()
    problems = []
    for summary_path in sorted(root.rglob("schema-runs*/*/summary.json")):
        folder = summary_path.parent
        summary = json.loads(summary_path.read_text())
        study = study_for(summary["kind"])
        extra = set(summary) - set(study.summary_sections) - COMMON_SECTIONS
        problems += [f"{summary['kind']}: summary section {k!r} not in summary_sections" for k in sorted(extra)]
        for name, declared in study.run_tables.items():
            table = folder / f"{name}.parquet"
            if not table.is_file():
                continue
            import pandas as pd

            columns = list(pd.read_parquet(table).columns)
            problems += [f"{summary['kind']}: {name}.{c} not declared" for c in columns if not column_declared(c, declared)]
            problems += [f"{summary['kind']}: {name}.{d} declared, not written" for d in declared
                         if "<" not in d and d not in columns]
    assert len(list(root.rglob("schema-runs*/*/summary.json"))) >= 3
    assert not problems, problems
