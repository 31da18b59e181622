"""Keep the version numbers in run ids honest (`conceptlab.experiments.code_versions`).

    .venv/bin/python scripts/code_versions.py check                 # what changed since the record (exit 1 if any)
    .venv/bin/python scripts/code_versions.py record                # after a version bump: record the new code
    .venv/bin/python scripts/code_versions.py record --reason "..." # a change that alters no stored number
    .venv/bin/python scripts/code_versions.py verify                # micro runs of HEAD and of this tree, compared

`verify [--against REV] [--kinds ...]` backs a `--reason`: it trains and evaluates one micro run of each data kind
(the schema doc's runs: every intervention, homology over training, bump counting, the abstractions analyses, drawn
faces for celeba) with the code of REV (a temporary worktree) and with this tree's code, in fp32 on one thread,
each side with its own probe cache, and compares every table, every checkpoint's tensors and the summary (its
timings, paths and provenance aside) bit for bit. Same machine, same packages: any difference is the code's. A
micro run does not reach every branch (the paper presets, every config switch), so a pass is evidence, not proof.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from conceptlab.experiments import code_versions  # noqa: E402

IGNORED = {"run", "provenance", "invocations", "disk_bytes", "threads", "device", "figures", "path", "root"}

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


def compare_runs(ours: Path, reference: Path) -> list[str]:
    """Every difference between two run folders' tables, tensors and summaries (empty: identical)."""
    import pandas as pd
    from safetensors.torch import load_file

    found = []
    for pattern in ("**/*.parquet", "**/*.safetensors"):
        mine = {p.relative_to(ours) for p in ours.glob(pattern)}
        theirs = {p.relative_to(reference) for p in reference.glob(pattern)}
        for missing in sorted(mine ^ theirs):
            found.append(f"{missing}: only in {'this tree' if missing in mine else 'the reference'}'s run")
        for rel in sorted(mine & theirs):
            if rel.suffix == ".parquet":
                a, b = pd.read_parquet(ours / rel), pd.read_parquet(reference / rel)
                if not a.equals(b):
                    found.append(f"{rel}: the tables differ")
            else:
                a, b = load_file(ours / rel), load_file(reference / rel)
                diff = sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or not a[k].equal(b[k]))
                if diff:
                    found.append(f"{rel}: tensors differ ({', '.join(diff[:5])}{', …' if len(diff) > 5 else ''})")
    for name in ("summary.json", "data.json"):
        a, b = (json.loads((side / name).read_text()) for side in (ours, reference))
        if _scrub(a) != _scrub(b):
            keys = sorted(k for k in _scrub(a).keys() | _scrub(b).keys() if _scrub(a).get(k) != _scrub(b).get(k))
            found.append(f"{name}: differs in {', '.join(keys)}")
    return found


def verify(against: str, kinds: list[str]) -> int:
    from schema_doc import RUNS

    with tempfile.TemporaryDirectory(prefix="code-versions-") as scratch:
        scratch = Path(scratch)
        git("worktree", "add", "--detach", "-q", str(scratch / "reference"), against)
        try:
            sides = {"this tree": REPO / "src", f"reference {against}": scratch / "reference" / "src"}
            failed = 0
            for kind in kinds:
                preset, overrides = RUNS[kind]
                overrides = [*overrides, "train.bf16=false"]
                if kind == "celeba":
                    from conceptlab.data.celeba import write_drawn_celeba

                    files = write_drawn_celeba(scratch / "celeba-files", {c: (12, 4) for c in ("00", "01", "10", "11")})
                    overrides.append(f"data.root={files}")
                folders = {}
                for n, (side, src) in enumerate(sides.items()):
                    folders[side] = scratch / f"side{n}" / kind
                    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1",
                           "CONCEPTLAB_CACHE": str(scratch / f"side{n}" / "cache"), "MPLBACKEND": "Agg"}
                    done = subprocess.run([sys.executable, "-c", DRIVER, str(src), preset, str(folders[side]),
                                           json.dumps(overrides)], env=env, capture_output=True, text=True)
                    if done.returncode != 0:
                        print(f"{kind}: the {side}'s run failed:\n{done.stderr.strip()[-2000:]}")
                        return 2
                differences = compare_runs(*folders.values())
                failed += bool(differences)
                print(f"{kind} ({preset}): " + ("identical" if not differences else
                                                 "DIFFERENT\n  " + "\n  ".join(differences)))
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
    args = parser.parse_args(argv)
    if args.command == "check":
        return check()
    if args.command == "record":
        return record(args.reason)
    return verify(args.against, args.kinds)


if __name__ == "__main__":
    raise SystemExit(main())
