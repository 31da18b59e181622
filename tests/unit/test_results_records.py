"""The committed run records (results/runs, the evidence docs/findings.md is generated from, and each variant's
results/variants/<variant>/runs: the same runs made another way, e.g. in fp32) are intact: every file a record lists
is there, unchanged since it was recorded, and every record says which code, machine and folder made its run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conceptlab.store.records import RECORD, verify_record

RESULTS = Path(__file__).resolve().parents[2] / "results" / "runs"
VARIANTS = sorted((RESULTS.parent / "variants").glob("*/runs"))
RECORDS = sorted(p.parent for root in (RESULTS, *VARIANTS) for p in root.glob(f"*/*/{RECORD}"))


def test_there_are_records_and_nothing_else_in_the_run_set_folders():
    assert RECORDS, f"no run records under {RESULTS}"
    for folder in (f for root in (RESULTS, *VARIANTS) for f in root.glob("*/*")):
        assert folder.is_dir() and (folder / RECORD).is_file() or folder.suffix == ".json", (
            f"{folder} is neither a run record nor an analytic set's result")


@pytest.mark.parametrize("folder", RECORDS, ids=[str(p.relative_to(RESULTS.parent)) for p in RECORDS])
def test_each_record_is_intact_and_traceable(folder):
    assert verify_record(folder) == []
    manifest = json.loads((folder / RECORD).read_text())
    assert manifest["source"] and manifest["recorded"]
    summary = json.loads((folder / "summary.json").read_text())
    provenance = summary.get("provenance") or {}
    assert provenance.get("git_commit") and provenance.get("cpu"), f"{folder}: summary without code or machine"
