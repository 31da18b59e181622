"""Run one bench several times, each in a fresh process, and report the spread of its ratios across the launches.

A bench's ratio is measured inside one process (the two sides interleaved, A B A B), so it holds one process's
luck: where its memory landed, which core the scheduler gave it, the CPU's clock at the time. The same bench on the
same machine launched again has given ratios from 1.79× to 1.98× (docs/benchmarks.md), wider than the levers being
measured. This runs the bench `--launches` times (one after another, never side by side), reads every ratio line
each launch prints, and prints per ratio its median/median value in each launch and the min / median / max over the
launches — a claim about a lever is safer on that spread than on one launch.

    .venv/bin/python bench/launches.py --launches 5 -- bench/train_step.py --reps 3 --threads 2

Everything after `--` is the bench and its arguments, run with this Python; each launch's own output is kept under
`--keep DIR` when given. Nothing is timed here: every number comes from the benches' own same-process ratios.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATIO = re.compile(r"^ratio (?P<what>.+) \(reference/ours\): (?P<mid>\d+(?:\.\d+)?)x median/median, "
                   r"range (?P<low>\d+(?:\.\d+)?)-(?P<high>\d+(?:\.\d+)?)x", re.M)


def ratios(output: str) -> dict[str, float]:
    """Each ratio line of a bench's output: what → its median/median ratio (the last, if a line repeats)."""
    return {m["what"]: float(m["mid"]) for m in RATIO.finditer(output)}


def summarize(launches: list[dict[str, float]]) -> list[str]:
    """Per ratio (in the order first seen): its value in each launch and min / median / max over the launches; a
    ratio missing from some launch says in how many it was printed."""
    names = list(dict.fromkeys(name for launch in launches for name in launch))
    lines = []
    for name in names:
        values = [launch[name] for launch in launches if name in launch]
        each = ", ".join(f"{launch[name]:.2f}" if name in launch else "—" for launch in launches)
        lo, mid, hi = min(values), statistics.median(values), max(values)
        seen = "" if len(values) == len(launches) else f" (printed by {len(values)} of {len(launches)} launches)"
        lines.append(f"ratio {name} over {len(values)} launches: min {lo:.2f}x / median {mid:.2f}x / max {hi:.2f}x "
                     f"[{each}]{seen}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--launches N] [--keep DIR] -- BENCH.py [its arguments]")
    parser.add_argument("--launches", type=int, default=5, help="fresh processes, one after another (≥ 2)")
    parser.add_argument("--keep", type=Path, default=None, help="write each launch's output here (launch-<k>.txt)")
    parser.add_argument("bench", nargs=argparse.REMAINDER, help="-- then the bench script and its arguments")
    args = parser.parse_args(argv)
    bench = args.bench[1:] if args.bench[:1] == ["--"] else args.bench
    if args.launches < 2:
        parser.error(f"--launches must be ≥ 2 (one launch is the bench itself), got {args.launches}")
    if not bench or not bench[0].endswith(".py") or not ((ROOT / bench[0]).is_file() or Path(bench[0]).is_file()):
        parser.error(f"name a bench script after `--`, e.g. -- bench/train_step.py --reps 3 (got {bench or 'none'})")
    script = Path(bench[0]).resolve() if Path(bench[0]).is_file() else ROOT / bench[0]  # it runs from the repo root
    bench = [str(script), *bench[1:]]
    threads = next((v for k, v in zip(bench, bench[1:]) if k == "--threads"), None)
    sys.path.insert(0, str(ROOT / "bench"))
    from benchlib import print_environment  # torch: imported only once the arguments are good

    print_environment(int(threads) if threads is not None and threads.isdigit() else os.cpu_count() or 1)
    print(f"bench: {' '.join([script.name, *bench[1:]])}; {args.launches} launches, one after another, each a fresh "
          "process")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    found: list[dict[str, float]] = []
    for k in range(1, args.launches + 1):
        print(f"launch {k}/{args.launches} running…", file=sys.stderr, flush=True)  # a bench takes minutes
        done = subprocess.run([sys.executable, *bench], cwd=ROOT, env=env, capture_output=True, text=True)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"launch-{k}.txt").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
        if done.returncode != 0:
            print(f"launch {k} failed (exit {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        found.append(ratios(done.stdout))
        if not found[-1]:
            print(f"launch {k} printed no ratio line: is {bench[0]} a ratio bench?", file=sys.stderr)
            return 1
        print(f"launch {k}/{args.launches}: " + ", ".join(f"{n} {v:.2f}x" for n, v in found[-1].items()), flush=True)
    for line in summarize(found):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
