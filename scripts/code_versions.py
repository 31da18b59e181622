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


@dataclass
class Comparison:
    """Two run folders compared: what changed (or is missing from this tree's run) and what this tree's run adds
    (a new table, column or summary field: new outputs, no stored number altered)."""

    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)


def compare_runs(ours: Path, reference: Path) -> Comparison:
    """Every difference between two run folders' configs, tables (per checkpoint too), tensors and summaries, exact,
    leaving out what differs between two makings of one run (`findings_compare.IGNORED`: timings, provenance, …)."""
    import yaml
    from safetensors.torch import load_file

    from conceptlab.experiments.findings_compare import IGNORED, compare_summaries, compare_tables, ignored, leaves
    from conceptlab.store.files import read_json, read_parquet

    out = Comparison()
    _, differing = compare_summaries(*(yaml.safe_load((side / "config.yaml").read_text()) for side in (ours, reference)))
    if differing:  # e.g. a preset edited between the two codes: then not a comparison of code alone
        out.changed.append(f"config.yaml: the two runs' configs differ ({', '.join(p for p, _, _ in differing)})")
    for pattern in ("**/*.parquet", "**/*.safetensors"):
        mine = {p.relative_to(ours) for p in ours.glob(pattern)}
        theirs = {p.relative_to(reference) for p in reference.glob(pattern)}
        out.added += [f"{rel}: only in this tree's run" for rel in sorted(mine - theirs)]
        out.changed += [f"{rel}: only in the reference's run" for rel in sorted(theirs - mine)]
        for rel in sorted(mine & theirs):
            if rel.suffix == ".parquet":
                x, y = read_parquet(ours / rel), read_parquet(reference / rel)
                new = [c for c in x.columns if c not in y.columns]  # a new column is a new output
                out.added += _named(f"{rel}: columns only in this tree's:", new)
                difference = compare_tables(x.drop(columns=new), y)
                out.changed += [f"{rel}: {difference}"] if difference else []
            else:
                x, y = load_file(ours / rel), load_file(reference / rel)
                out.added += _named(f"{rel}: tensors only in this tree's:", sorted(x.keys() - y.keys()))
                out.changed += _named(f"{rel}: tensors differ:",
                                      sorted(k for k in y.keys() if k not in x or not x[k].equal(y[k])), most=5)
    for name in ("summary.json", "data.json"):
        x, y = read_json(ours / name), read_json(reference / name)
        theirs = {p for p in leaves(y) if not ignored(p, IGNORED)}  # a field only ours has is a new output
        _, differing = compare_summaries(x, y)
        out.added += _named(f"{name}: only in this tree's:", [p for p, _, _ in differing if p not in theirs])
        out.changed += _named(f"{name}: differs in", [p + _gap(a, b) for p, a, b in differing if p in theirs])
    return out


def _gap(a, b) -> str:
    """` (by x)`: how far apart two numbers are, else nothing."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return f" (by {abs(a - b):.2g})" if numbers else ""


def _named(what: str, names: list[str], most: int = 8) -> list[str]:
    shown = ", ".join(map(str, names[:most])) + (f", … ({len(names)} in all)" if len(names) > most else "")
    return [f"{what} {shown}"] if names else []


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
