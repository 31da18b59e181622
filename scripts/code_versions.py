"""Keep the version numbers in run ids honest (`conceptlab.experiments.code_versions`).

    .venv/bin/python scripts/code_versions.py check                 # what changed since the record (exit 1 if any)
    .venv/bin/python scripts/code_versions.py record                # after a version bump: record the new code
    .venv/bin/python scripts/code_versions.py record --reason "..." # a change that alters no stored number
    .venv/bin/python scripts/code_versions.py verify                # micro runs of HEAD and of this tree, compared
    .venv/bin/python scripts/code_versions.py verify --against REV --preset hidden-emergence-paper-tiny \
        --set train.steps=40 train.checkpoint_schedule=list "train.checkpoint_steps=[20,40]"

`verify [--against REV] [--kinds ...]` backs a `--reason`: it trains and evaluates one micro run of each data kind
(the schema doc's runs: every intervention, homology over training, bump counting, the abstractions analyses, drawn
faces for celeba; `--plain`: the presets alone; `--preset` with `--set`: any one config) with the code of REV (a
temporary worktree, its own presets) and with this tree's code, in fp32 on one thread, each side with its own probe
cache, and compares the two resolved configs (a preset edited between the two codes makes it no comparison of code
alone, and says so), every table, every checkpoint's tensors and the summary (its timings, paths and provenance
aside) bit for bit. Same machine, same packages: any difference is the code's. A micro run does not reach every
branch (the paper presets, every config switch), so a pass is evidence, not proof.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conceptlab.experiments import code_versions  # noqa: E402

IGNORED = {"run", "runs_dir", "provenance", "invocations", "disk_bytes", "threads", "device", "figures", "path", "root"}

DRIVER = """
import json, sys
from pathlib import Path
import conceptlab
assert Path(conceptlab.__file__).resolve().is_relative_to(Path(sys.argv[1]).resolve()), conceptlab.__file__
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
preset, folder, overrides = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
run_experiment(load_config(preset, overrides), Path(folder), progress=False)
"""


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def check() -> int:
    drifts = code_versions.compare()
    for drift in drifts:
        print(drift.message())
    if not drifts:
        print(f"every version matches its recorded code ({len(code_versions.current_keys())} keys)")
    return 1 if drifts else 0


def record(reason: str | None) -> int:
    drifts = code_versions.compare()
    if not drifts:
        print("nothing to record: every version matches its recorded code")
        return 0
    try:
        ledger = code_versions.record(drifts, reason, commit=git("rev-parse", "HEAD"))
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    code_versions.write_ledger(ledger)
    for drift in drifts:
        print(f"recorded {drift.key.name} version {drift.key.version} ({len(drift.changed)} module(s) changed)")
    return 0


def _scrub(value):
    """A summary without what differs between any two runs of the same code (timings, paths, provenance)."""
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if k not in IGNORED and "seconds" not in k}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


@dataclass
class Comparison:
    """Two run folders compared: what changed (or is missing from this tree's run) and what this tree's run adds
    (a new table, column or summary field: new outputs, no stored number altered)."""

    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


def compare_runs(ours: Path, reference: Path) -> Comparison:
    """Every difference between two run folders' configs, tables, tensors and summaries."""
    import pandas as pd
    import yaml
    from safetensors.torch import load_file

    out = Comparison()
    a, b = (_scrub(yaml.safe_load((side / "config.yaml").read_text())) for side in (ours, reference))
    if a != b:  # e.g. a preset edited between the two codes: then not a comparison of code alone
        out.changed.append(f"config.yaml: the two runs' configs differ ({', '.join(_changed_keys(a, b))})")
    for pattern in ("**/*.parquet", "**/*.safetensors"):
        mine = {p.relative_to(ours) for p in ours.glob(pattern)}
        theirs = {p.relative_to(reference) for p in reference.glob(pattern)}
        out.added += [f"{rel}: only in this tree's run" for rel in sorted(mine - theirs)]
        out.changed += [f"{rel}: only in the reference's run" for rel in sorted(theirs - mine)]
        for rel in sorted(mine & theirs):
            if rel.suffix == ".parquet":
                x, y = pd.read_parquet(ours / rel), pd.read_parquet(reference / rel)
                out.added += _named(f"{rel}: columns only in this tree's:", sorted(set(x.columns) - set(y.columns)))
                out.changed += _named(f"{rel}: columns only in the reference's:",
                                      sorted(set(y.columns) - set(x.columns)))
                shared = [c for c in y.columns if c in x.columns]
                difference = _table_difference(x[shared], y[shared])
                out.changed += [f"{rel}: {difference}"] if difference else []
            else:
                x, y = load_file(ours / rel), load_file(reference / rel)
                out.added += _named(f"{rel}: tensors only in this tree's:", sorted(x.keys() - y.keys()))
                diff = sorted(k for k in y.keys() if k not in x or not x[k].equal(y[k]))
                if diff:
                    out.changed += _named(f"{rel}: tensors differ:", diff, most=5)
    for name in ("summary.json", "data.json"):
        x, y = (_flatten(_scrub(json.loads((side / name).read_text()))) for side in (ours, reference))
        out.added += _named(f"{name}: only in this tree's:", sorted(x.keys() - y.keys()))
        changed = _named("differs in", [k + _largest_change([x[k]], [y[k]]) for k in sorted(x.keys() & y.keys())
                                        if x[k] != y[k] and not (x[k] != x[k] and y[k] != y[k])])  # NaN = NaN
        changed += _named("only in the reference's:", sorted(y.keys() - x.keys()))
        out.changed += [f"{name}: {'; '.join(changed)}"] if changed else []
    return out


def _changed_keys(a: dict, b: dict) -> list[str]:
    """`section.key` (or `key` at the top level) of every value two configs disagree on."""
    keys = []
    for section in sorted(a.keys() | b.keys()):
        x, y = a.get(section), b.get(section)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            keys += [f"{section}.{k}" for k in sorted(x.keys() | y.keys()) if x.get(k) != y.get(k)]
        else:
            keys.append(section)
    return keys


def _flatten(value, prefix: str = "") -> dict:
    """A JSON value's leaves by dotted path (`controls.pixels.additive_share`, `checkpoints.3`); an empty dict or
    list is a leaf."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _flatten(item, f"{prefix}{key}.").items()}
    if isinstance(value, list) and value:
        return {k: v for i, item in enumerate(value) for k, v in _flatten(item, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def _named(what: str, names: list[str], most: int = 8) -> list[str]:
    shown = ", ".join(map(str, names[:most])) + (f", … ({len(names)} in all)" if len(names) > most else "")
    return [f"{what} {shown}"] if names else []


def _largest_change(a, b) -> str:
    """` (max |Δ| x)` for two numeric columns of one length, else ``."""
    import numpy as np

    try:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    except (TypeError, ValueError):
        return ""
    if x.shape != y.shape or x.ndim != 1:
        return ""
    both = ~(np.isnan(x) & np.isnan(y))
    delta = np.abs(x[both] - y[both])
    return f" (max |Δ| {np.nanmax(delta):.2g})" if delta.size and not np.isnan(delta).all() else " (NaN in one)"


def _table_difference(a, b) -> str:
    """What differs between two tables of the same columns: rows, or the columns whose values differ (with the
    largest change of a numeric one)."""
    if a.equals(b):
        return ""
    if len(a) != len(b):
        return f"{len(a)} rows against {len(b)}"
    a, b = a.reset_index(drop=True), b.reset_index(drop=True)
    differ = [c + _largest_change(a[c], b[c]) for c in b.columns if not a[c].equals(b[c])]
    return f"values differ in {', '.join(differ)}" if differ else "the tables differ (column types)"


def micro_runs(kinds: list[str], plain: bool) -> list[tuple[str, str, list[str]]]:
    """(label, preset, overrides) of the schema doc's micro run of each kind (`plain`: the preset alone)."""
    from schema_doc import RUNS

    return [(kind, RUNS[kind][0], [] if plain else list(RUNS[kind][1])) for kind in kinds]


def verify(against: str, runs: list[tuple[str, str, list[str]]]) -> int:
    """Each run made with REV's code and with this tree's, compared; 0 when no stored number differs."""
    from conceptlab.experiments.loading import load_config

    with tempfile.TemporaryDirectory(prefix="code-versions-") as scratch:
        scratch = Path(scratch)
        git("worktree", "add", "--detach", "-q", str(scratch / "reference"), against)
        try:
            sides = {"this tree": REPO / "src", f"reference {against}": scratch / "reference" / "src"}
            failed = 0
            for label, preset, overrides in runs:
                overrides = [*overrides, "train.bf16=false"]
                if load_config(preset, overrides).data.kind == "celeba":  # drawn faces in CelebA's layout
                    from conceptlab.data.celeba import write_drawn_celeba

                    files = write_drawn_celeba(scratch / "celeba-files", {c: (12, 4) for c in ("00", "01", "10", "11")})
                    overrides.append(f"data.root={files}")
                folders = {}
                for n, (side, src) in enumerate(sides.items()):
                    folders[side] = scratch / f"side{n}" / label
                    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1",
                           "CONCEPTLAB_CACHE": str(scratch / f"side{n}" / "cache"), "MPLBACKEND": "Agg"}
                    done = subprocess.run([sys.executable, "-c", DRIVER, str(src), preset, str(folders[side]),
                                           json.dumps(overrides)], env=env, capture_output=True, text=True)
                    if done.returncode != 0:
                        print(f"{label}: the {side}'s run failed:\n{done.stderr.strip()[-2000:]}")
                        return 2
                result = compare_runs(*folders.values())
                failed += bool(result.changed)
                verdict = ("DIFFERENT" if result.changed
                           else "identical" + (", with new outputs" if result.added else ""))
                print(f"{label} ({preset}): {verdict}" + "".join(f"\n  {line}" for line in result.changed)
                      + "".join(f"\n  new: {line}" for line in result.added))
            return 1 if failed else 0
        finally:
            git("worktree", "remove", "--force", str(scratch / "reference"))


def main(argv: list[str] | None = None) -> int:
    from schema_doc import KINDS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="list every version whose code changed since its record")
    rec = sub.add_parser("record", help="record the code of every changed version")
    rec.add_argument("--reason", help="why a change under the same version alters no stored number")
    ver = sub.add_parser("verify", help="micro runs of REV's code and this tree's, compared bit for bit")
    ver.add_argument("--against", default="HEAD", metavar="REV")
    ver.add_argument("--kinds", nargs="*", choices=KINDS, default=list(KINDS))
    ver.add_argument("--plain", action="store_true",
                     help="the micro presets without the schema doc's extra switches (for a REV older than them)")
    ver.add_argument("--preset", help="one run of this preset instead of the micro runs (shorten it with --set)")
    ver.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="overrides of --preset's config")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check()
    if args.command == "record":
        return record(args.reason)
    if args.set and not args.preset:
        parser.error("--set overrides a --preset's config")
    runs = [(args.preset, args.preset, args.set)] if args.preset else micro_runs(args.kinds, args.plain)
    return verify(args.against, runs)


if __name__ == "__main__":
    raise SystemExit(main())
