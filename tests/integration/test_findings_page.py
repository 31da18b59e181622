"""docs/findings.md and the README's findings table are generated from the committed run records (results/runs)
and never edited by hand: evaluating a copy of the records gives the committed page, line for line (the line saying
when and where it was evaluated excepted), with the same figures, and the README's table exactly."""

from __future__ import annotations

import shutil
from pathlib import Path

from conceptlab.experiments.findings import evaluate_suite, finished_counts, plan, write_findings
from conceptlab.experiments.findings_spec import load_suite

REPO = Path(__file__).resolve().parents[2]


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("Scale `")]  # when, where, at which commit


def test_docs_findings_md_is_what_the_run_records_generate(tmp_path):
    root = tmp_path / "results"
    shutil.copytree(REPO / "results" / "runs", root / "runs")
    p = plan(load_suite(), None, "full", root)
    counts = finished_counts(p)
    result = evaluate_suite(p)
    result["runs"] = {"total": counts["runs"], "reused": counts["skipped"], "done": 0,
                      "not_finished": counts["not_finished"]}
    page = tmp_path / "docs" / "findings.md"
    write_findings(result, root, markdown=page)
    committed = (REPO / "docs" / "findings.md").read_text()
    assert _body(page.read_text()) == _body(committed), (
        "docs/findings.md is out of date with results/runs: regenerate it with `make findings-page`")
    figures = sorted(q.name for q in (page.parent / "figures" / "findings").glob("*.png"))
    assert figures == sorted(q.name for q in (REPO / "docs" / "figures" / "findings").glob("*.png"))
    # the README's findings table is generated from the same evaluation: no number in it is typed by hand
    from conceptlab.report.readme import readme_table, table_in

    assert table_in((REPO / "README.md").read_text()) == readme_table(result), (
        "README.md's findings table is out of date with results/runs: regenerate it with `make findings-page`")


def test_a_torn_record_is_a_warning_and_a_run_not_finished_and_a_dry_run_writes_nothing(tmp_path):
    """A record whose summary.json was cut short once stopped `findings --evaluate-only` with a traceback (an
    audit, 2026-12-07); now its run counts as not finished and one warning names the file. `--dry-run` wrote the
    sweep specs under `--root` (creating it): it writes nothing now."""
    from typer.testing import CliRunner

    from conceptlab.cli import app

    root = tmp_path / "results"
    shutil.copytree(REPO / "results" / "runs" / "hidden-emergence", root / "runs" / "hidden-emergence")
    torn = sorted((root / "runs" / "hidden-emergence").glob("*/summary.json"))[0]
    torn.write_bytes(torn.read_bytes()[:200])
    result = CliRunner().invoke(app, ["findings", "hidden-emergence", "--evaluate-only", "--root", str(root),
                                      "--no-progress"])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert f"warning: hidden-emergence: {torn} is not valid JSON" in " ".join(result.output.split())
    assert "no run" in result.output and "conceptlab resume" in result.output
    result = CliRunner().invoke(app, ["findings", "hidden-emergence", "--dry-run", "--root", str(root)])
    assert result.exit_code == 0 and result.exception is None, result.output  # pricing the runs reads the summaries
    dry = tmp_path / "new" / "sub"
    result = CliRunner().invoke(app, ["findings", "hidden-emergence", "--dry-run", "--root", str(dry)])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "new").exists()
