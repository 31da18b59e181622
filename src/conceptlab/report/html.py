"""The HTML report of a run or a sweep: one self-contained `report.html` — no server, no network, nothing fetched.

A run's report: the headline numbers, every figure under `figures/` (embedded as base64 PNG, with a relative link to
its PDF or SVG where one was written), the run-level tables (sortable by clicking a column; the main ones open, the
rest folded), the kept samples of every `*samples.safetensors` by checkpoint with a slider, the resolved config,
every summary field and the provenance. A sweep's report: its description and axes, a sortable table of its runs
(state as `sweep status` shows it, axis values, the headline numbers any finished run has, a link to each run's own
report), the sweep-level figures and tables.

`write_run_report(run_dir)` and `write_sweep_report(sweep_root)` read the folder (through `store`) and write
`report.html` into it; the run driver calls the first at the end of every run, `run_sweep` the second at the end
of every sweep. The `run_report_html` / `sweep_report_html` functions return the page as text.
"""

from __future__ import annotations

import base64
import fnmatch
import html
import io
import json
import math
import re
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from conceptlab.store.files import read_json, read_parquet, read_tensors, write_text
from conceptlab.store.run_folder import SUMMARY_UNREADABLE, RunFolder

REPORT = "report.html"
MAX_ROWS = 500  # rows shown per table (the Parquet file has them all)
MAIN_TABLES = ("learning_times", "emergence", "composition", "geometry", "commitment", "geometry_controls",
               "emergence_seeds", "emergence_across_seeds", "region_accuracy", "data_efficiency", "controls")
HEADLINE = (
    "final_step", "checkpoints", "training_images", "parameters", "learning_time.*", "final_accuracy.*",
    "emergence.targets.*.name", "emergence.targets.*.emergence_step.*", "emergence.targets.*.capability_gap",
    "emergence.targets.*.final_score.*", "emergence.targets.*.turn.step", "emergence.targets.*.gated_flow_fit.r2",
    "effective_dimension.final", "explained_variance_top4_final", "betti", "commitment_order.*", "signal_order",
    "conditional_accuracy.*", "seconds.total", "disk_bytes",
)
SKIP_FIELDS = ("provenance", "figures", "seconds_all_invocations")
SWEEP_SKIP = ("parameters", "disk_bytes", "training_images")  # the same in every run of a sweep, as a rule
SWEEP_PER_PATTERN = 8  # the sweep's runs table: at most this many columns per `HEADLINE` pattern
_STEP_KEY = re.compile(r"^step_(\d+)(?:/(.+))?$")

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:0 18px 60px;color:#1b1b1b}
h1{font-size:22px;margin:22px 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
h3{font-size:14px;margin:16px 0 6px}.muted{color:#666}code,pre{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
pre{background:#f6f6f6;padding:10px;overflow:auto;max-height:420px}
table{border-collapse:collapse;font-size:12px;margin:6px 0 4px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left}
th{background:#f0f0f0;cursor:pointer;user-select:none;white-space:nowrap}th[data-dir=asc]:after{content:" \\25B2"}
th[data-dir=desc]:after{content:" \\25BC"}td.num{text-align:right;font-variant-numeric:tabular-nums}
.wrap{overflow-x:auto}figure{margin:14px 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12px;color:#555}.samples img{image-rendering:pixelated;border:1px solid #ccc;max-width:100%}
.slider{display:flex;gap:12px;align-items:center;margin:6px 0}.slider input{width:320px}
nav a{margin-right:12px}details summary{cursor:pointer;margin:6px 0}
"""

JS = """
function cellValue(td){var v=td.getAttribute('data-v');if(v!==null&&v!==''&&!isNaN(+v))return +v;return td.textContent.trim().toLowerCase();}
function sortTable(th){var table=th.closest('table'),body=table.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th);
var dir=th.getAttribute('data-dir')==='asc'?'desc':'asc';Array.prototype.forEach.call(th.parentNode.children,function(h){h.removeAttribute('data-dir');});
th.setAttribute('data-dir',dir);var rows=Array.prototype.slice.call(body.rows);
rows.sort(function(a,b){var x=cellValue(a.cells[i]),y=cellValue(b.cells[i]);if(typeof x!==typeof y){x=String(x);y=String(y);}
var c=x<y?-1:x>y?1:0;return dir==='asc'?c:-c;});rows.forEach(function(r){body.appendChild(r);});}
document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){sortTable(th);});});
document.querySelectorAll('.samples').forEach(function(box){var frames=JSON.parse(box.querySelector('script[type="application/json"]').textContent);
var img=box.querySelector('img'),input=box.querySelector('input'),label=box.querySelector('.step');
function show(k){img.src=frames[k].src;label.textContent='step '+frames[k].step;}input.addEventListener('input',function(){show(+input.value);});show(+input.value);});
"""


# -- values and tables -----------------------------------------------------------------------------------------------

def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists of scalars joined; other leaves as they are."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
    elif isinstance(obj, list) and all(not isinstance(x, (dict, list)) for x in obj):
        out[prefix[:-1]] = ", ".join(_text(x) for x in obj) if obj else "—"
    else:
        out[prefix[:-1]] = obj
    return out


def headline(summary: dict) -> dict[str, Any]:
    """The summary fields a reader looks at first (`HEADLINE` patterns), in pattern order."""
    flat = {k: v for k, v in flatten(summary).items() if not isinstance(v, (dict, list))}
    out: dict[str, Any] = {}
    for pattern in HEADLINE:
        for key, value in flat.items():
            if key not in out and fnmatch.fnmatchcase(key, pattern):
                out[key] = value
    return out


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if value.is_integer() and abs(value) < 1e15:  # a step or a count stored as a float: all its digits
            return str(int(value))
        return f"{value:.4g}"
    if isinstance(value, (np.floating,)):
        return _text(float(value))
    if isinstance(value, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_text(x) for x in list(value)[:8]) + (", …" if len(value) > 8 else "") + "]"
    return str(value)


def _cell(value: Any) -> str:
    number = None
    if isinstance(value, (bool, np.bool_)):
        number = None
    elif isinstance(value, (int, float, np.integer, np.floating)) and not (isinstance(value, float) and math.isnan(value)):
        number = float(value)
    attrs = f' data-v="{number!r}" class="num"' if number is not None and math.isfinite(number) else ""
    return f"<td{attrs}>{html.escape(_text(value))}</td>"


def table_html(frame: pd.DataFrame, name: str, max_rows: int = MAX_ROWS, raw_html: Iterable[str] = ()) -> str:
    """A sortable table (click a column header); columns in `raw_html` hold markup (links), the rest is escaped."""
    raw = set(raw_html)
    shown = frame.head(max_rows)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in shown.columns)
    rows = []
    for record in shown.itertuples(index=False):
        cells = [f"<td>{v}</td>" if c in raw else _cell(v) for c, v in zip(shown.columns, record)]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    note = (f'<div class="muted">first {max_rows} of {len(frame)} rows</div>' if len(frame) > max_rows else "")
    return (f'<div class="wrap"><table class="sortable" data-name="{html.escape(name)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{note}')


def _displayable(frame: pd.DataFrame) -> pd.DataFrame:
    """Drop columns holding arrays or lists (per-image scores and the like): they do not read as cells."""
    keep = [c for c in frame.columns
            if not (frame[c].dtype == object and frame[c].map(lambda v: isinstance(v, (list, np.ndarray, dict))).any())]
    return frame[keep]


# -- figures and samples ---------------------------------------------------------------------------------------------

def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def image_html(path: Path, caption: str = "") -> str:
    """One PNG embedded (the report stays one self-contained file), with a caption."""
    uri = _data_uri(Path(path).read_bytes())
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f'<figure><img alt="{html.escape(Path(path).stem)}" src="{uri}">{cap}</figure>'


def figures_html(folder: Path, base: Path) -> str:
    """Every PNG in `folder`, embedded, with a relative link to its vector file where there is one."""
    parts = []
    for path in sorted(Path(folder).glob("*.png")):
        vectors = [p for p in (path.with_suffix(".pdf"), path.with_suffix(".svg")) if p.is_file()]
        links = " · ".join(f'<a href="{html.escape(str(p.relative_to(base)))}">{p.suffix[1:].upper()}</a>'
                           for p in vectors)
        parts.append(f'<figure id="fig-{html.escape(path.stem)}"><img alt="{html.escape(path.name)}" '
                     f'src="{_data_uri(path.read_bytes())}"><figcaption>{html.escape(path.name)}'
                     f'{" — vector: " + links if links else ""}</figcaption></figure>')
    return "".join(parts)


def _to_uint8_hwc(images) -> np.ndarray:
    """[N, C, H, W] uint8 or float in [0, 1] → [N, H, W, 3] uint8."""
    x = images.detach().cpu()
    if x.dtype.is_floating_point:
        x = (x.float().clamp(0, 1) * 255).round()
    arr = np.transpose(x.numpy().astype(np.uint8), (0, 2, 3, 1))
    return np.repeat(arr, 3, axis=-1) if arr.shape[-1] == 1 else arr[..., :3]


def _grid_png(tiles: list[np.ndarray], columns: int, scale: int) -> bytes:
    from PIL import Image

    h, w = tiles[0].shape[:2]
    rows = -(-len(tiles) // columns)
    canvas = np.full((rows * (h + 1) + 1, columns * (w + 1) + 1, 3), 255, dtype=np.uint8)
    for i, tile in enumerate(tiles):
        r, k = divmod(i, columns)
        canvas[1 + r * (h + 1): 1 + r * (h + 1) + h, 1 + k * (w + 1): 1 + k * (w + 1) + w] = tile
    image = Image.fromarray(canvas).resize((canvas.shape[1] * scale, canvas.shape[0] * scale), Image.NEAREST)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def sample_frames(tensors: dict, max_columns: int = 16) -> tuple[list[dict[str, Any]], list[str]]:
    """One grid image per checkpoint from a kept-samples file (keys `step_XXXXXXX` or `step_XXXXXXX/<part>`):
    [{step, src}] in step order, and the parts' names (rows of the grid when there are several)."""
    by_step: dict[int, dict[str, Any]] = {}
    for key, images in tensors.items():
        match = _STEP_KEY.match(key)
        if match is None or images.ndim != 4 or images.shape[1] not in (1, 3):
            continue
        by_step.setdefault(int(match.group(1)), {})[match.group(2) or ""] = images
    parts = sorted({p for s in by_step.values() for p in s}, key=lambda p: (p != "train", p))
    frames = []
    for step in sorted(by_step):
        tiles: list[np.ndarray] = []
        columns = 0
        for part in parts:
            if part not in by_step[step]:
                continue
            these = list(_to_uint8_hwc(by_step[step][part]))[:max_columns]
            columns = max(columns, len(these))
            tiles += these
        if not tiles:
            continue
        if len(parts) > 1:  # one row per part: pad short rows
            rows = [list(_to_uint8_hwc(by_step[step][p]))[:max_columns] for p in parts if p in by_step[step]]
            tiles = [t for row in rows for t in row + [np.full_like(tiles[0], 255)] * (columns - len(row))]
        else:
            columns = min(columns, max_columns)
        scale = max(1, 48 // tiles[0].shape[0])
        frames.append({"step": step, "src": _data_uri(_grid_png(tiles, columns, scale))})
    return frames, [p for p in parts if p]


def samples_html(path: Path, title: str, labels: list[str] | None = None) -> str:
    """A slider over checkpoints showing the kept samples of one file (empty when it holds no images)."""
    frames, parts = sample_frames(read_tensors(path))
    if not frames:
        return ""
    info = []
    if labels:
        info.append("columns: " + ", ".join(labels))
    if parts:
        info.append("rows: " + ", ".join(parts))
    data = json.dumps(frames).replace("</", "<\\/")
    last = len(frames) - 1
    return (f'<div class="samples" data-file="{html.escape(path.name)}"><h3>{html.escape(title)}</h3>'
            f'<div class="muted">{html.escape("; ".join(info))}</div>'
            f'<div class="slider"><input type="range" min="0" max="{last}" value="{last}" step="1" '
            f'aria-label="checkpoint"><span class="step"></span> <span class="muted">({len(frames)} checkpoints)</span>'
            f'</div><img alt="samples of {html.escape(path.name)}" src="{frames[-1]["src"]}">'
            f'<script type="application/json">{data}</script></div>')


# -- pages -----------------------------------------------------------------------------------------------------------

def page(title: str, subtitle: str, sections: list[tuple[str, str, str]]) -> str:
    """A self-contained HTML page: title, subtitle (markup), a navigation bar and (key, heading, markup) sections
    (empty ones left out), with the sortable-table script."""
    return _page(title, subtitle, sections)


def _page(title: str, subtitle: str, sections: list[tuple[str, str, str]]) -> str:
    nav = "".join(f'<a href="#{key}">{html.escape(name)}</a>' for key, name, body in sections if body)
    body = "".join(f'<section id="{key}"><h2>{html.escape(name)}</h2>{content}</section>'
                   for key, name, content in sections if content)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" '
            f'content="width=device-width, initial-scale=1"><title>{html.escape(title)}</title><style>{CSS}</style>'
            f'</head><body><h1>{html.escape(title)}</h1><div class="muted">{subtitle}</div><nav>{nav}</nav>{body}'
            f'<script>{JS}</script></body></html>')


def _key_values(values: dict[str, Any], name: str) -> str:
    shown = [v if isinstance(v, (int, float)) and not isinstance(v, bool) else _text(v) for v in values.values()]
    frame = pd.DataFrame({"quantity": pd.Series(list(values), dtype=object),   # object: an int stays an int
                          "value": pd.Series(shown, dtype=object)})            # beside floats (no 4.865e+05)
    return table_html(frame, name, max_rows=10_000)


def _run_tables(root: Path) -> str:
    paths = sorted(root.glob("*.parquet"), key=lambda p: (p.stem not in MAIN_TABLES,
                                                          MAIN_TABLES.index(p.stem) if p.stem in MAIN_TABLES else 0,
                                                          p.stem))
    parts = []
    for path in paths:
        frame = _displayable(read_parquet(path))
        block = f"<h3>{html.escape(path.stem)} <span class='muted'>({len(frame)} rows)</span></h3>" \
                + table_html(frame, path.stem)
        parts.append(block if path.stem in MAIN_TABLES else f"<details><summary>{html.escape(path.stem)} "
                                                            f"({len(frame)} rows)</summary>{block}</details>")
    return "".join(parts)


def _labels_for(path: Path, data: dict) -> list[str] | None:
    if path.name == "samples.safetensors" and data.get("classes"):
        names = data.get("class_names", {})
        return [names.get(c, c) for c in data["classes"]]
    return None


def run_report_html(run_dir: Path) -> str:
    """The report of a finished run folder (its summary.json written), as one HTML page."""
    run = RunFolder(run_dir)
    if not run.summary.is_file():
        raise FileNotFoundError(f"{run.root}: no {run.summary.name}; the run has not finished")
    summary = read_json(run.summary)
    data = read_json(run.data) if run.data.is_file() else {}
    samples = "".join(samples_html(p, p.stem.replace("_", " "), _labels_for(p, data))
                      for p in sorted(run.root.glob("*samples.safetensors")))
    provenance = summary.get("provenance", {})
    board = run.root / "tensorboard"
    extras = (f"<p>TensorBoard: <code>tensorboard --logdir {html.escape(str(board))}</code></p>"
              if board.is_dir() else "")
    held = ", ".join(f"{c} ({data.get('class_names', {}).get(c, c)})" for c in summary.get("held_out_classes") or [])
    subtitle = (f"{html.escape(str(summary.get('name', '')))} · kind {html.escape(str(summary.get('kind', '')))}"
                f"{' · held out ' + html.escape(held) if held else ''} · written {time.strftime('%Y-%m-%d %H:%M')}")
    all_fields = {k: v for k, v in flatten({k: v for k, v in summary.items() if k not in SKIP_FIELDS}).items()}
    sections = [
        ("headline", "Headline numbers", _key_values(headline(summary), "headline")),
        ("figures", "Figures", figures_html(run.figures, run.root)),
        ("tables", "Tables", _run_tables(run.root)),
        ("samples", "Samples by checkpoint", samples),
        ("config", "Config", f"<pre>{html.escape(run.config.read_text())}</pre>" if run.config.is_file() else ""),
        ("summary", "Every summary field", "<details><summary>show all "
         f"{len(all_fields)}</summary>{_key_values(all_fields, 'summary')}</details>" + extras),
        ("provenance", "Provenance", _key_values(flatten(provenance), "provenance") if provenance else ""),
    ]
    return _page(f"Run {summary.get('run', run.name)}", subtitle, sections)


def write_run_report(run_dir: Path) -> Path:
    """Write `<run_dir>/report.html` (self-contained) and return its path."""
    return write_text(Path(run_dir) / REPORT, run_report_html(run_dir))


CLAIMS_FILE = "controls_claims.json"  # written by the controls report (`conceptlab report SWEEP`)
UNREADABLE = SUMMARY_UNREADABLE  # a sweep row whose summary.json is there but not JSON (a torn write)


def claims_html(path: Path) -> str:
    """The verdict of each claim against its binding control (a sweep's controls report), or "" when there is none."""
    if not path.is_file():
        return ""
    found = read_json(path)
    rows = [{"claim": c["name"], "statement": c.get("statement", ""), "control": c.get("control") or "—",
             "direction": c["direction"], "margin": c.get("margin"), "passed": f"{c['passed']}/{c['of']}",
             "verdict": c["verdict"], "holds instead": c.get("restated") or ""}
            for c in found.get("claims", [])]
    seeds = ", ".join(str(s) for s in found.get("seeds", []))
    note = (f"<p>Report seeds {html.escape(seeds)}; settings chosen on "
            f"{html.escape(', '.join(str(s) for s in found.get('settings_seeds') or []) or 'undeclared seeds')}.</p>")
    return note + table_html(pd.DataFrame(rows), "claims") if rows else ""


def sweep_columns(headlines: list[dict[str, Any]]) -> tuple[list[str], int]:
    """The headline columns of a sweep's runs table: every key any finished run has (a failed or pending run has
    none), in `HEADLINE` pattern order, at most `SWEEP_PER_PATTERN` per pattern so that each kind of number (the
    learning times, the final accuracies, the emergence steps, turns and capability gaps…) gets columns; and how
    many keys were left out."""
    keys = list(dict.fromkeys(k for h in headlines for k in h if k not in SWEEP_SKIP))
    by_pattern: dict[int, list[str]] = {}
    for key in keys:
        first = next(i for i, pattern in enumerate(HEADLINE) if fnmatch.fnmatchcase(key, pattern))
        by_pattern.setdefault(first, []).append(key)
    shown = [k for i in sorted(by_pattern) for k in by_pattern[i][:SWEEP_PER_PATTERN]]
    return shown, len(keys) - len(shown)


def sweep_report_html(sweep_root: Path) -> str:
    """The report of a sweep folder (its manifest.json written), as one HTML page."""
    root = Path(sweep_root)
    manifest_path = root / "manifest.json"
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{root} is not a sweep folder (no manifest.json)")
    manifest = read_json(manifest_path)
    rows, headlines, unreadable = [], [], []
    for entry in manifest["runs"]:
        folder = root / entry["run_id"]
        state, error = RunFolder(folder).state()
        report = folder / REPORT
        link = (f'<a href="{html.escape(entry["run_id"])}/{REPORT}">{html.escape(entry["run_id"])}</a>'
                if report.is_file() else html.escape(entry["run_id"]))
        numbers = {}
        if state == UNREADABLE:  # a torn summary.json: the row says so, the other runs are still reported
            unreadable.append(error or "")
        elif state == "done":
            try:
                numbers = headline(RunFolder(folder).read_summary())
            except (ValueError, OSError) as err:  # torn, or gone, since its state was read
                state = UNREADABLE
                unreadable.append(str(err))
        headlines.append(numbers)
        rows.append({"run": link, "state": state, **entry["values"]})
    shown, left_out = sweep_columns(headlines)
    for row, numbers in zip(rows, headlines):
        row.update({k: numbers.get(k) for k in shown})
    runs = table_html(pd.DataFrame(rows, dtype=object), "runs", max_rows=10_000, raw_html=("run",)) if rows else ""
    if runs and left_out:
        runs += (f'<div class="muted">{left_out} more headline numbers (at most {SWEEP_PER_PATTERN} columns per kind '
                 "of number here) are in each run's own report</div>")
    if unreadable:
        runs = ("<p>" + "<br>".join(html.escape(f"the run finished but its summary cannot be read: {line}")
                                    for line in unreadable if line) + "</p>" + runs)
    counts = pd.Series([r["state"] for r in rows]).value_counts().to_dict() if rows else {}
    tables = "".join(f"<h3>{html.escape(p.stem)}</h3>" + table_html(_displayable(read_parquet(p)), p.stem)
                     for p in sorted(root.glob("*.parquet")))
    figures = figures_html(root, root) + figures_html(root / "figures", root)
    about = {"sweep": manifest.get("sweep"), "description": manifest.get("description"), "base": manifest.get("base"),
             "overrides": manifest.get("overrides"), "axes": manifest.get("axes"),
             "runs": len(rows), **{f"runs {k}": v for k, v in counts.items()}}
    spec = root / "sweep.yaml"
    sections = [
        ("about", "Sweep", _key_values(flatten(about), "about")),
        ("claims", "Claims against controls", claims_html(root / CLAIMS_FILE)),
        ("runs", "Runs", runs),
        ("figures", "Figures", figures),
        ("tables", "Tables", tables),
        ("spec", "Spec", f"<pre>{html.escape(spec.read_text())}</pre>" if spec.is_file() else ""),
    ]
    subtitle = (f"{len(rows)} runs ({', '.join(f'{n} {s}' for s, n in counts.items())}) · "
                f"written {time.strftime('%Y-%m-%d %H:%M')}")
    return _page(f"Sweep {manifest.get('sweep', root.name)}", subtitle, sections)


def write_sweep_report(sweep_root: Path) -> Path:
    """Write `<sweep_root>/report.html` (self-contained, linking to each run's report) and return its path."""
    return write_text(Path(sweep_root) / REPORT, sweep_report_html(sweep_root))
