"""Every relative link in the README and docs/ points at a file that exists, and every `file.md#anchor` at a heading
of that file (GitHub's slug rule), so a regenerated page (docs/findings.md) cannot silently break the README's links."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (not '-' or '_'), spaces to '-'."""
    text = re.sub(r"`|\*\*|\[|\]\([^)]*\)", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    out, seen = set(), {}
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_slug_follows_githubs_rule():
    assert slug(" hidden-emergence") == "hidden-emergence"
    assert slug(" The paper-setup findings: one run of 17 so far") == "the-paper-setup-findings-one-run-of-17-so-far"
    assert slug(" Run records: `--record`") == "run-records---record"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page):
    broken = []
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#") and not target[1:]:
            continue  # a URL (http:, mailto:) is not checked here: tests never go online
        path, _, anchor = target.partition("#")
        file = page if not path else (page.parent / path)
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)
