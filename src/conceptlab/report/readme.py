"""The README's findings table, generated from an evaluation of the findings suite: one row per finding (its title,
setup, verdict, its headline rendered from the evaluation, links), findings sharing a title grouped ("the same"),
written between two markers of the README so that no number in it is typed by hand (`conceptlab findings --readme`,
run by `make findings-page`).

A headline is a template over the finding's evaluated criteria (`render_headline`): `{criterion}` is its pass count
("3 of 3"; "holds" or "does not hold" for a criterion over the seeds), `{criterion:value}` and `{criterion:control}`
the spread of its values or controls over the report seeds ("mean [min, max]; censored in k"), `{criterion:failing}`
the seeds it fails on, and `{glob*}` the weakest pass count among the criteria matching a glob. The suite is checked
at load for fields that name no criterion (`experiments.findings_spec.load_suite`).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

HEADLINE_FIELD = re.compile(r"\{([a-z0-9*-]+)(?::(value|control|failing))?\}")
BEGIN = ("<!-- findings table: generated from the run records by `make findings-page` (conceptlab findings --readme); "
         "each row's title and headline template are in src/conceptlab/experiments/findings.yaml: edit those, not "
         "these rows -->")
END = "<!-- end of the generated findings table -->"


class ReadmeError(ValueError):
    """The README cannot take the table (its markers are missing or out of order); the message says which."""


def _count(c: dict[str, Any]) -> str:
    """Its pass count ("3 of 5"); for a criterion over the seeds (decided once) whether it holds."""
    if c.get("over_seeds"):
        return "incomplete" if c.get("no_run") else "holds" if c["passed"] else "does not hold"
    return f"{c['passed']} of {c['of']}"


def render_headline(f: dict[str, Any]) -> str:
    """The finding's headline template filled from its evaluated criteria (a field whose criterion has no result
    reads "—")."""
    from conceptlab.report.findings import control_text, value_text

    crit = {c["name"]: c for c in f.get("criteria") or []}

    def field(match: re.Match) -> str:
        name, part = match.group(1), match.group(2)
        if "*" in name:
            matched = [crit[n] for n in fnmatch.filter(list(crit), name)]
            return _count(min(matched, key=lambda c: c["passed"] / max(c["of"], 1))) if matched else "—"
        c = crit.get(name)
        if c is None:
            return "—"
        if part == "value":
            return value_text(c)
        if part == "control":
            return control_text(c)
        if part == "failing":
            seeds = [str(s["seed"]) for s in c.get("seeds", []) if not s["passed"]]
            return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(seeds) if seeds else "no seed"
        return _count(c)

    return HEADLINE_FIELD.sub(field, f.get("headline") or "")


def _setup(f: dict[str, Any]) -> str:
    if f.get("precision") and all(str(p).startswith("analytic") for p in f["precision"]):
        return "analytic"
    return str(f.get("setup"))


def readme_table(result: dict[str, Any], page: str = "docs/findings.md") -> str:
    """The Markdown table: a row per finding with a title, in the order of each title's first finding in the suite,
    the later findings of a title right after it as "the same"."""
    titled = [f for f in result["findings"] if f.get("title")]
    order: dict[str, list[dict]] = {}
    for f in titled:
        order.setdefault(f["title"], []).append(f)
    lines = ["| finding (paper) | setup | verdict | headline | details |", "|---|---|---|---|---|"]
    for title, group in order.items():
        for i, f in enumerate(group):
            headline = render_headline(f) or "—"
            details = ", ".join([f"[findings]({page}#{f['name']})", *f.get("see_also", [])])
            cells = [title if i == 0 else "the same", _setup(f), f["verdict"], headline, details]
            lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def _markers(readme: str) -> tuple[int, int]:
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < 0 or end < start:
        raise ReadmeError("the README has no findings-table markers (a line with each of "
                          f"{BEGIN[:40]!r}… and {END!r}, in that order): add them where the table goes")
    return start, end


def with_table(readme: str, table: str) -> str:
    """The README text with the block between its markers replaced by the table."""
    start, end = _markers(readme)
    return readme[: start + len(BEGIN)] + "\n" + table + "\n" + readme[end:]


def table_in(readme: str) -> str:
    """The table the README holds between its markers."""
    start, end = _markers(readme)
    return readme[start + len(BEGIN): end].strip("\n")


def write_readme_table(result: dict[str, Any], readme: Path | str) -> Path:
    """Rewrite the README's generated findings table from this evaluation (atomically)."""
    from conceptlab.store.files import write_text

    readme = Path(readme)
    return write_text(readme, with_table(readme.read_text(), readme_table(result)))
