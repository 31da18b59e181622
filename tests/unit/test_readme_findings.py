"""The README's findings table shows the generated report's verdicts (docs/findings.md), never its own: a row that
links to a finding of the report must carry that finding's verdict, so a rerun that changes a verdict cannot leave
the first page behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def report_verdicts(report: str) -> dict[str, str]:
    """Finding name → verdict, from the report's verdict table (the table under the `| finding | paper |` header)."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| finding | paper | setup |"))
    verdicts = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        verdicts[cells[0]] = re.sub(r"^[^a-z—]+", "", cells[4])  # "◐ mixed" → "mixed"; "— not run" stays
    return verdicts


def mismatches(readme: str, report: str) -> list[str]:
    """Each way the README's table disagrees with the report: a row linking no or several findings, a finding the
    report lacks, another verdict, or a finding with a verdict that no row shows."""
    verdicts = report_verdicts(report)
    wrong, linked = [], set()
    for line in readme.splitlines():
        if not line.startswith("| ") or "docs/findings.md#" not in line:
            continue
        cells = _cells(line)
        names = re.findall(r"docs/findings\.md#([a-z0-9-]+)", cells[-1])
        if len(names) != 1:
            wrong.append(f"README row {cells[0]!r} links {names}: one finding a row")
            continue
        (name,) = names
        linked.add(name)
        if name not in verdicts:
            wrong.append(f"README row {cells[0]!r} links docs/findings.md#{name}, which is no finding there")
        elif cells[2] != verdicts[name]:
            wrong.append(f"README row {cells[0]!r} says {cells[2]!r}; docs/findings.md says {verdicts[name]!r} "
                         f"for {name}")
    unshown = sorted(n for n, v in verdicts.items() if "not run" not in v and n not in linked)
    wrong += [f"{n} has a verdict in docs/findings.md and no README row" for n in unshown]
    return wrong


def test_every_readme_row_that_links_a_finding_shows_its_generated_verdict():
    readme, report = (REPO / "README.md").read_text(), (REPO / "docs" / "findings.md").read_text()
    assert len(report_verdicts(report)) >= 19  # the suite's findings, real-data LLI included
    assert mismatches(readme, report) == []


@pytest.mark.parametrize("old, new, expected", [
    ("| fast | reproduced | held-out accuracy", "| fast | mixed | held-out accuracy",
     "says 'mixed'; docs/findings.md says 'reproduced' for composition-vs-interpolation"),
    ("[findings](docs/findings.md#percolation)", "[findings](docs/findings.md#percolaton)",
     "links docs/findings.md#percolaton, which is no finding there"),
])
def test_the_check_fails_on_a_row_that_disagrees(old, new, expected):
    readme, report = (REPO / "README.md").read_text(), (REPO / "docs" / "findings.md").read_text()
    stale = readme.replace(old, new, 1)
    assert stale != readme
    assert any(expected in m for m in mismatches(stale, report)), mismatches(stale, report)


def test_the_check_fails_when_a_finding_has_no_row():
    readme, report = (REPO / "README.md").read_text(), (REPO / "docs" / "findings.md").read_text()
    without = "\n".join(line for line in readme.splitlines() if "docs/findings.md#percolation" not in line)
    assert "percolation has a verdict in docs/findings.md and no README row" in mismatches(without, report)
