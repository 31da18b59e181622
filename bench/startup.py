"""Start-up time of a command: a fresh process importing what every command imports, against another commit's code.

Every command that loads a config (a run, a sweep, the findings suite, every test process) imports the studies (a
config is validated against them), so what they import at module level is paid before any work; the commands that
only read a run's or a sweep's files (`runs show`, `runs ls`, `sweep status` of a sweep folder) import neither the
studies nor torch. This times fresh processes, wall clock, for each command below,
with this tree's source ("ours") and, with `--against REV`, that commit's source checked out in a temporary git
worktree ("reference"), the two interleaved A B A B for `--reps` rounds after one untimed round; it prints each
side's min / median / max and the ratio (reference/ours). Without `--against` it prints our times only (no claim).
Both sides run with this Python and its installed packages; only `src/` differs (`PYTHONPATH`).

    .venv/bin/python bench/startup.py --against HEAD~3 --reps 5
    .venv/bin/python bench/startup.py --quick          # one round, ours only: seconds, for tests
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import ROOT, fmt_spread, print_environment, ratio_line  # noqa: E402

COMMANDS = {
    "import": ["-c", "import conceptlab.experiments.config"],  # what `load_config` needs: every command's floor
    "help": ["-m", "conceptlab.cli", "--help"],
    "presets": ["-m", "conceptlab.cli", "presets"],
    "missing-run": ["-m", "conceptlab.cli", "runs", "show", "/nonexistent/run"],  # the error path: exit 2
}
# the reading commands on the run records committed in results/runs (a finished hidden-emergence run: the concept-space
# layout, with its emergence tables; the records of that set for `runs ls`)
RECORDS = ROOT / "results" / "runs" / "hidden-emergence"
SWEEP = "{scratch}/sweep"  # `sweep status` of a sweep folder made in the scratch folder from those records
if RECORDS.is_dir():
    COMMANDS["show-run"] = ["-m", "conceptlab.cli", "runs", "show", str(min(p for p in RECORDS.iterdir() if p.is_dir()))]
    COMMANDS["ls-runs"] = ["-m", "conceptlab.cli", "runs", "ls", "--root", str(RECORDS)]
    COMMANDS["sweep-status"] = ["-m", "conceptlab.cli", "sweep", "status", SWEEP]


def records_as_a_sweep(folder: Path) -> None:
    """A sweep folder holding the committed records' run folders (links) and a manifest naming them."""
    import json

    folder.mkdir()
    runs = sorted(p for p in RECORDS.iterdir() if p.is_dir())
    for run in runs:
        (folder / run.name).symlink_to(run, target_is_directory=True)
    (folder / "manifest.json").write_text(json.dumps({"runs": [{"run_id": r.name, "values": {}} for r in runs]}))


EXIT_CODES = {"missing-run": 2}  # the one-line error the missing-run command is meant to give; every other: 0


def time_once(src: Path, args: list[str], expected: int = 0) -> float:
    """Wall seconds of one fresh process running `args` with `src` first on the import path; SystemExit when it
    exits with another code than `expected` (a usage error, say, is not timed as the work)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    began = time.perf_counter()
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - began
    if done.returncode != expected:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}, not {expected}, under {src}:\n"
                         f"{done.stderr[-2000:]}")
    return seconds


def worktree(rev: str, where: Path) -> Path:
    """`rev` checked out (detached) at `where`; its `src/`."""
    done = subprocess.run(["git", "worktree", "add", "--detach", "-q", str(where), rev], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"cannot check out {rev!r} as the reference: {done.stderr.strip()}")
    return where / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="REV", help="the reference: this commit's src/ (a temporary worktree)")
    parser.add_argument("--reps", type=int, default=5, help="interleaved rounds (≥ 3 for a claim)")
    parser.add_argument("--commands", nargs="*", choices=list(COMMANDS), default=list(COMMANDS))
    parser.add_argument("--threads", type=int, default=1, help="OMP threads of each process")
    parser.add_argument("--quick", action="store_true", help="one round, the import only: seconds, for tests")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.commands = 1, ["import"]
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    print_environment(args.threads)
    with tempfile.TemporaryDirectory(prefix="startup-") as scratch:
        sides = {"ours": ROOT / "src"}
        if args.against:
            sides["reference"] = worktree(args.against, Path(scratch) / "reference")
            print(f"reference: src/ at {args.against}; ours: src/ of this tree")
        if "sweep-status" in args.commands:
            records_as_a_sweep(Path(scratch) / "sweep")
        try:
            for name in args.commands:
                command = [part.replace("{scratch}", scratch) for part in COMMANDS[name]]
                expected = EXIT_CODES.get(name, 0)
                for src in sides.values():  # one untimed round: the file cache warm for both
                    time_once(src, command, expected)
                times: dict[str, list[float]] = {side: [] for side in sides}
                for _ in range(args.reps):
                    for side, src in sides.items():
                        times[side].append(time_once(src, command, expected))
                print(f"{name}: python {' '.join(command)}")
                for side, values in times.items():
                    print(f"  {side:<9} {fmt_spread(values, 's')}")
                if "reference" in times:
                    print("  " + ratio_line(f"start-up, {name}", times["reference"], times["ours"]))
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(Path(scratch) / "reference")], cwd=ROOT,
                               capture_output=True)


if __name__ == "__main__":
    main()
