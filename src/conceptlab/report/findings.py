"""The findings report: the evaluated suite (`experiments.findings.evaluate_suite`'s dict) as Markdown, as one
self-contained HTML page, and one figure per finding.

Pure renderers: they take the plain dict (verdicts, per-seed values, runs, machines, times) and return text or a
matplotlib Figure; `experiments.findings.write_findings` writes them. Nothing here reads a run folder except the
figure PNGs the HTML page embeds.
"""

from __future__ import annotations

import html
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from conceptlab.report.html import image_html, page, table_html
from conceptlab.report.style import COLUMN, PAGE, REFERENCE, color, panel_grid, styled

VERDICT_MARK = {"reproduced": "✓ reproduced", "mixed": "◐ mixed", "not reproduced": "✗ not reproduced",
                "incomplete": "… incomplete", "not run": "— not run"}
SETUP = {"paper": "paper", "fast": "fast variant", None: "—"}
# a run read by several findings (one run set serves memorization, the turn and the gated flow; a gap-width set holds
# copies of composition's runs) counts in each of them, so the findings' run times do not add up to the suite's
SHARED_RUNS = "; a run another finding reads too, or copied from a twin, counts in each"


def _num(x: Any, digits: int = 3, undefined: str = "—") -> str:
    if x is None:
        return undefined
    if isinstance(x, bool):
        return "true" if x else "false"
    x = float(x)
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "never (∞)" if x > 0 else "−∞"
    if abs(x) < 1e-12:  # float rounding of a difference that is 0 (e.g. ρ 0.8 against a threshold of 0.8)
        x = 0.0
    rounded = float(f"{x:.{digits}g}")
    if 1e3 <= abs(rounded) < 1e7:  # steps and image counts: 4,330 and 18,000, not 4.33e+03 and 1.8e+04
        return f"{rounded:,.0f}"
    return f"{x:.{digits}g}"


def _spread(s: dict | None) -> str:
    if not s or not s.get("n"):
        return "—" if not s or not s.get("censored") else f"censored in {s['censored']}"
    text = _num(s["mean"])
    if s["n"] > 1:
        text += f" [{_num(s['min'])}, {_num(s['max'])}]"
    if s.get("censored"):
        text += f"; censored in {s['censored']}"
    return text


STATISTIC_NAMES = {"median_absolute_deviation": "median absolute deviation"}
STATISTIC_SHORT = {"median_absolute_deviation": "MAD"}


def stat_text(stat: dict, side: str) -> str:
    """One side's statistic over the seeds: a range "0–200" where its censored seeds leave it open (the criterion is
    decided at its least favourable end), one number where they do not, "undefined" where it has none."""
    low_high = stat.get(f"{side}_range")
    if low_high and None not in low_high and low_high[0] != low_high[1]:
        return "–".join("∞" if math.isinf(x) else _num(x) for x in low_high)  # a spread, not a step: no "never"
    return _num(stat[side], undefined="undefined")


def _over_seeds(c: dict, side: str) -> str:
    stat = c["statistic"]
    return f"{stat_text(stat, side)} ({STATISTIC_SHORT.get(stat['name'], stat['name'])} over {len(c['seeds'])} seeds)"


def value_text(c: dict) -> str:
    """A criterion's values over its report seeds, as its tables show them: mean [min, max]; censored in k — or, for
    a criterion over the seeds, its statistic ("500 (MAD over 5 seeds)": the median absolute deviation)."""
    if c.get("statistic"):
        return _over_seeds(c, "value")
    return _spread(c.get("values"))


def control_text(c: dict) -> str:
    """What a criterion's values are compared with: its control's spread over the seeds, or its threshold (for a
    criterion over the seeds, the control's statistic)."""
    if c.get("statistic") and c.get("control"):
        return _over_seeds(c, "control")
    return _spread(c.get("controls")) if c.get("control") else _num(c.get("threshold"))


def hms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def _rule(c: dict) -> str:
    if c["direction"] == "holds":
        return "holds (true on the seed)"
    value, against = "value", ("its control" if c.get("control") else _num(c.get("threshold")))
    if c.get("over_seeds"):
        value = f"the values' {STATISTIC_NAMES.get(c['over_seeds'], c['over_seeds'])} over the seeds"
        if c.get("control"):
            against = "its controls' (the same)"
    sign = f"{value} − {against}" if c["direction"] == "greater" else f"{against} − {value}"
    return f"{sign} ≥ {_num(c['margin'])}"


def _passed(c: dict) -> str:
    return f"{c['passed']}/{c['of']}" + (f" ({c['no_run']} no run)" if c.get("no_run") else "")


def passing(f: dict) -> str:
    return ", ".join(_passed(c) for c in f["criteria"]) or "—"


def has_runs(f: dict) -> bool:
    """Whether any report seed of any criterion of the finding has a finished run (else: nothing to show yet)."""
    return any(s.get("note") != "no run" for c in f["criteria"] for s in c["seeds"])


def _whole_line(whole: dict) -> str:
    """How many report seeds show the whole finding (every criterion passing on the same seed)."""
    seeds = ", ".join(map(str, whole["seeds"])) or "none"
    unrun = f"; {whole['no_run']} without a finished run" if whole.get("no_run") else ""
    return f"Every criterion on the same seed: {whole['passed']}/{whole['of']} (seeds: {seeds}{unrun})."


def _no_runs_yet(f: dict) -> str:
    sets = ", ".join(f"{n} (seeds {', '.join(map(str, s['seeds']))})" for n, s in f.get("run_sets", {}).items())
    return (f"No finished run yet: every report seed of its run sets ({sets}) is 'no run'. "
            f"Run it with `{f['command']}`.")


def control_label(f: dict, width: int = 90) -> str:
    """The binding control as the verdict table names it: the finding's `control_label`, else its control text cut at
    a word boundary to `width` characters (the whole text is in the finding's own section)."""
    if f.get("control_label"):
        return str(f["control_label"])
    text = " ".join(str(f.get("control") or "—").split())
    return text if len(text) <= width else textwrap.shorten(text, width, placeholder=" …")


def verdict_table(result: dict) -> pd.DataFrame:
    rows = []
    for f in result["findings"]:
        ran = has_runs(f)
        rows.append({"finding": f["name"], "paper": f["paper"], "setup": SETUP.get(f.get("setup")),
                     "binding control": control_label(f),
                     "verdict": VERDICT_MARK[f["verdict"]] + (" (no runs yet)" if f["criteria"] and not ran else ""),
                     "seeds passing (per criterion)": passing(f),
                     "run time": hms(f.get("run_seconds")) if ran else "—"})
    return pd.DataFrame(rows)


def criteria_table(f: dict) -> pd.DataFrame:
    rows = []
    for c in f["criteria"]:
        rows.append({"criterion": c["name"], "rule": _rule(c), "passed": _passed(c),
                     "verdict": VERDICT_MARK[c["verdict"]], "value": value_text(c), "control": control_text(c),
                     "difference": _spread(c.get("differences"))})
    return pd.DataFrame(rows)


def seeds_table(f: dict) -> pd.DataFrame:
    rows = []
    for c in f["criteria"]:
        for s in c["seeds"]:
            rows.append({"criterion": c["name"], "seed": s["seed"], "value": _num(s["value"]),
                         "control": _num(s["control"]), "difference": _num(s["difference"]),
                         "passed": ("yes" if s["passed"] else "no") + (f" ({s['note']})" if s.get("note") else "")})
    return pd.DataFrame(rows)


def _md_table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return ""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in frame.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|").replace("\n", " ") for v in r) + " |")
    return "\n".join(lines)


def _threads(f: dict) -> str:
    """"threads: 1; " — the torch threads its runs used (fp32 results depend on it), or nothing if unknown."""
    return f"threads: {', '.join(map(str, f['threads']))}; " if f.get("threads") else ""


def _code(f: dict) -> str:
    """"a1b2c3d, e4f5a6b" — the commits that made a finding's runs, and how many of them ran while code they depend
    on differed from its recorded version (`code_drift`)."""
    text = ", ".join(f["code"]) or "—"
    drift = f.get("code_drift")
    if drift:
        n = drift["runs"]
        text += (f" ({n} run{'' if n == 1 else 's'} made while the code of {', '.join(drift['keys'])} differed from "
                 f"{'its' if len(drift['keys']) == 1 else 'their'} recorded version)")
    return text


def _provenance_line(result: dict) -> str:
    code = result.get("code", {})
    commit = (code.get("git_commit") or "unknown")[:10] + (" (uncommitted changes)" if code.get("git_dirty") else "")
    wall = f"; wall time of this invocation {hms(result.get('wall_seconds'))}" if result.get("wall_seconds") else ""
    runs = result.get("runs")
    if runs and "not_finished" in runs:
        wall = (f"; `--evaluate-only`: nothing run, {runs['reused']} of {runs['total']} runs finished and read, "
                f"{runs['not_finished']} not finished (their seeds count as 'no run')")
    elif runs:
        wall += (f" ({runs['done']} of {runs['total']} runs made now, {runs['reused']} reused from earlier invocations "
                 "or records with the same run id (its config and analysis versions)"
                 + (f", {runs['copied']} copied from a twin in another run set" if runs.get("copied") else "")
                 + (f", {runs['trained_elsewhere']} of the runs made now evaluating another run's training (its "
                    "summary names it)" if runs.get("trained_elsewhere") else "")
                 + (f", {runs['deferred']} left for later with `--seeds`" if runs.get("deferred") else "")
                 + "; each finding's run time is its runs' own)")
    if result.get("records"):
        wall += (f"; {result['records']} of the runs read are run records (summary, config and tables without "
                 "weights, gathered from the sessions and machines each finding lists)")
    smoke = (" The quick scale runs CI-size presets on one report seed: a smoke run of the machinery, not evidence."
             if result["scale"] == "quick" else "")
    return (f"Scale `{result['scale']}`; conceptlab {code.get('conceptlab')} at {commit}; evaluated "
            f"{result['created']} on {result['machine']['cpu']} ({result['machine']['host']}){wall}.{smoke}")


def findings_markdown(result: dict) -> str:
    """The whole report as Markdown (what `docs/findings.md` is, generated, never edited by hand)."""
    out = ["# Findings: every claim of this bench beside its binding control", "",
           "<!-- Generated by `conceptlab findings` (experiments.findings, report.findings); do not edit by hand. -->",
           "", _provenance_line(result), "",
           "A criterion passes on a seed when its rule holds there; a criterion is *reproduced* when it passes on "
           "at least its declared number of seeds (every report seed unless stated), *not reproduced* when it passes "
           "on none, *mixed* otherwise (*incomplete* while report seeds without a finished run could still change it); "
           "a finding is reproduced when all its criteria are. Criteria, margins, "
           "controls and report seeds were declared in the suite (`src/conceptlab/experiments/findings.yaml`) "
           "before the report seeds were run.", "", _md_table(verdict_table(result)), ""]
    for f in result["findings"]:
        out += [f"## {f['name']}", "", f"**{f['claim']}** ({f['paper']}; setup: {SETUP.get(f.get('setup'))})", "",
                f"Verdict: **{VERDICT_MARK[f['verdict']]}**."]
        if f["verdict"] == "not run":
            out += ["", f"Not run: {f.get('reason')}", ""]
            continue
        control = f.get("control")
        out += ["", f"Binding control: {control}" + (f" — {f['reason']}" if control == "none" else "") + ".", ""]
        if not has_runs(f):
            out += [_no_runs_yet(f), ""]
            continue
        out += [_md_table(criteria_table(f)), ""]
        if f.get("all_on_one_seed") is not None:
            out += [_whole_line(f["all_on_one_seed"]), ""]
        for c in f["criteria"]:
            out.append(f"- `{c['name']}`: {c['statement']}")
            if c["verdict"] != "reproduced" and c.get("restated"):
                out.append(f"  Restated: {c['restated']}")
        out += ["", "<details><summary>per seed</summary>", "", _md_table(seeds_table(f)), "", "</details>", ""]
        if f.get("figure"):
            out += [f"![{f['name']}]({f['figure']})", ""]
        sets = "; ".join(f"{n}: seeds {', '.join(map(str, s['seeds']))}"
                         + (f" ({len(s['missing'])} run{'' if len(s['missing']) == 1 else 's'} not finished)" if s["missing"] else "")
                         for n, s in f["run_sets"].items())
        out += [f"Command: `{f['command']}`. Runs: {sets}. Machine: {', '.join(f['machines']) or '—'}; "
                f"precision: {', '.join(f['precision']) or '—'}; {_threads(f)}code: {_code(f)}; "
                f"run time (sum over the runs it reads{SHARED_RUNS}): {hms(f.get('run_seconds'))}.", ""]
    return "\n".join(out).rstrip() + "\n"


def code_html(text: str) -> str:
    """Markdown-ish text as HTML: escaped, its `code spans` as <code> (the page shares sentences with findings.md)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def findings_html(result: dict, root: Path) -> str:
    """The whole report as one self-contained page (figures embedded)."""
    sections = [("verdicts", "Verdicts", f"<p>{code_html(_provenance_line(result))}</p>"
                 + table_html(verdict_table(result), "verdicts"))]
    for f in result["findings"]:
        body = [f"<p><b>{html.escape(f['claim'])}</b> ({html.escape(f['paper'])}; setup: "
                f"{html.escape(SETUP.get(f.get('setup')))})</p>"]
        if f["verdict"] == "not run":  # as in the Markdown: why (not implemented, or not at this scale)
            body.append(f"<p>Verdict: <b>{html.escape(VERDICT_MARK['not run'])}</b>. Not run: "
                        f"{html.escape(str(f.get('reason') or ''))}</p>")
            sections.append((f["name"], f["name"], "".join(body)))
            continue
        body.append(f"<p>Verdict: <b>{html.escape(VERDICT_MARK[f['verdict']])}</b>. Binding control: "
                    f"{html.escape(str(f.get('control') or '—'))}"
                    + (f" — {html.escape(f.get('reason') or '')}" if f.get("control") in ("none", None) else "")
                    + "</p>")
        if f["criteria"] and not has_runs(f):
            body.append(f"<p>{code_html(_no_runs_yet(f))}</p>")
        elif f["criteria"]:
            body.append(table_html(criteria_table(f), f"{f['name']}-criteria"))
            if f.get("all_on_one_seed") is not None:
                body.append(f"<p>{html.escape(_whole_line(f['all_on_one_seed']))}</p>")
            body.append("<ul>" + "".join(
                f"<li><code>{html.escape(c['name'])}</code>: {html.escape(c['statement'])}"
                + (f"<br><i>Restated:</i> {html.escape(c['restated'])}" if c["verdict"] != "reproduced"
                   and c.get("restated") else "") + "</li>" for c in f["criteria"]) + "</ul>")
            body.append(f"<details><summary>per seed</summary>{table_html(seeds_table(f), f['name'] + '-seeds')}"
                        "</details>")
            if f.get("figure") and (Path(root) / f["figure"]).is_file():
                body.append(image_html(Path(root) / f["figure"], f"{f['name']}: value and control per seed"))
            body.append(f"<p class=\"muted\">Command: <code>{html.escape(f['command'])}</code>. Machine: "
                        f"{html.escape(', '.join(f['machines']) or '—')}; precision: "
                        f"{html.escape(', '.join(f['precision']) or '—')}; {html.escape(_threads(f))}code: "
                        f"{html.escape(_code(f))}; run time (sum over the runs it reads"
                        f"{html.escape(SHARED_RUNS)}): {hms(f.get('run_seconds'))}.</p>")
        sections.append((f["name"], f["name"], "".join(body)))
    return page("Findings", f"scale {html.escape(result['scale'])}", sections)


GENERIC_FIELDS = {"step", "baseline_step", "p", "r2", "naive", "joint", "value", "level"}  # say little alone


def value_label(value: dict) -> str:
    """The y label of a criterion's panel: what its value reads (a summary field, a table column, Spearman's ρ
    across a config key, or the computing function's name)."""
    if value.get("across"):
        return f"Spearman ρ vs {value['across'].split('.')[-1]}"
    if value.get("column"):
        window = value.get("step") if isinstance(value.get("step"), dict) else {}
        label = str(value["column"]).replace("_", " ")
        return f"{label} (median of last {window['last']})" if "last" in window else label
    if value.get("path"):  # the field; a generic one with what it belongs to ("over_prompting.step", not "step")
        parts = str(value["path"]).split(".")
        owner = next((q for q in reversed(parts[:-1]) if not q.isdigit()), None)  # a target id is not an owner
        label = f"{owner}.{parts[-1]}" if owner and parts[-1] in GENERIC_FIELDS else parts[-1]
        return label.replace(".", " ").replace("_", " ")
    if value.get("compute"):  # the function, and which of its parts (a p-value, the observed value, a level)
        part = (value.get("args") or {}).get("part")
        name = str(value["compute"]).split(":")[-1].replace("_", " ")
        return f"{name}: {part}" if part is not None else name
    return "value"


@styled
def finding_figure(f: dict) -> Figure:
    """One panel per criterion: the value (black) and its control or threshold (colour) on every seed; a censored
    value is drawn at the panel's edge, on its labelled 'never' (or −∞) line; the seeds that pass are filled, those
    that fail open (censored or not); a seed without a run or whose run could not measure the value is named as
    such, so every report seed is accounted for."""
    crit = f["criteria"]
    rows, cols = panel_grid(len(crit), max_columns=3)
    width = COLUMN if cols == 1 else PAGE
    fig, axes = plt.subplots(rows, cols, figsize=(width, 1.9 * rows + 0.35), squeeze=False)
    for ax, c in zip(axes.flat, crit):
        seeds = [s["seed"] for s in c["seeds"]]
        xs = list(range(len(seeds)))
        finite = [v for s in c["seeds"] for v in (s["value"], s["control"])
                  if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
        pad = (hi - lo) * 0.15 or 0.15 * max(abs(hi), abs(lo)) or 0.5
        edge = {1: hi + pad, -1: lo - pad}
        edges_used: set[int] = set()
        for i, s in enumerate(c["seeds"]):
            if s.get("note") == "no run" or s["value"] is None:  # no run, or a run that could not measure it:
                ax.text(i, 0.03, s.get("note") or "not measured", transform=ax.get_xaxis_transform(),  # said,
                        ha="center", va="bottom", fontsize=5.5, color="0.45", rotation=90)  # not drawn
                if s.get("note") == "no run":
                    continue
            for key, colour, marker in (("value", "black", "o"), ("control", color(1), "s")):
                if key == "control" and not c.get("control"):
                    continue  # a threshold: drawn once, as a dashed line
                v = s[key]
                if c["direction"] == "holds" and key == "value":
                    v = 1.0 if v is True else 0.0 if v is False else None
                if v is None or isinstance(v, bool):
                    continue
                censored = math.isinf(v)
                if censored:
                    edges_used.add(1 if v > 0 else -1)
                y = edge[1 if v > 0 else -1] if censored else v
                filled = bool(s["passed"])  # filled = passes, censored or not: a censored one is told by its place
                ax.scatter([i + (0.08 if key == "control" else -0.08)], [y], marker=marker, s=22, zorder=3,
                           facecolors=colour if filled else "none", edgecolors=colour, linewidths=1.0)
        for side in edges_used:  # where "never" is drawn: a labelled edge, not a number on the axis
            ax.axhline(edge[side], color="0.7", lw=0.6, ls=":")
            ax.text(1.0, edge[side], " never" if side > 0 else " −∞", transform=ax.get_yaxis_transform(),
                    ha="left", va="center", fontsize=5.5, color="0.4")
        if c.get("threshold") is not None:
            ax.axhline(c["threshold"], color=REFERENCE, lw=0.8, ls="--")
        if c["direction"] == "holds":  # a truth value per seed
            ax.set_ylim(-0.4, 1.4)
            ax.set_yticks([0, 1], ["false", "true"])
        else:
            ax.ticklabel_format(axis="y", useOffset=False)
            if not finite:  # only censored values: the axis has no scale to show
                ax.set_yticks([])
        ax.set_xticks(xs, [str(s) for s in seeds])
        ax.set_xlim(-0.6, len(seeds) - 0.4)
        ax.set_xlabel("report seed")
        ax.set_ylabel(value_label(c.get("value") or {}), fontsize=6)  # a truth value too: what holds or not
        name = textwrap.fill(c["name"], int(width / cols * 72 / 4.0))  # ~4 pt a character at 7 pt: no overlap
        line = f"passed {_passed(c)}"
        if c.get("statistic"):  # decided over the seeds: say on what
            stat = c["statistic"]
            line += f"; spread (MAD) {stat_text(stat, 'value')} vs {stat_text(stat, 'control')}"
        ax.set_title(f"{name}\n{line}", fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(crit):]:
        ax.axis("off")
    legend = ("black: value; colour: control (square) or threshold (dashed); filled: the seed passes, open: it "
              "fails (a criterion over the seeds: all pass or fail together); on the 'never' line: censored (never "
              "happened)")
    fig.text(0.01, 0.0, textwrap.fill(legend, int(width * 72 / 3.3)), ha="left", va="top", fontsize=6, color="0.25")
    fig.tight_layout()
    return fig
