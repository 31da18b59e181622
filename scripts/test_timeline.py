#!/usr/bin/env python3
"""Read back a test run's timeline (`CONCEPTLAB_TEST_TIMELINE=DIR make test`, tests/conftest.py): per worker its
first start, last end, busy time and largest gaps between tests; the tests over `--long` seconds in the order they
ran; the time per test module. What keeps `make test` in its budget is seen here: a worker idle between tests, or a
long test started late.

    scripts/test_timeline.py DIR [--long 20] [--modules 25]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path


def read(folder: Path) -> dict[str, list[tuple[float, float, str]]]:
    """{worker: [(start, end, test id)] in start order}, times in seconds from the first start of any worker; the
    controller's own file (`main.jsonl`, reports replayed as they arrive) is left out when workers wrote files."""
    files = sorted(folder.glob("*.jsonl"))
    if any(f.stem != "main" for f in files):
        files = [f for f in files if f.stem != "main"]
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for f in files:
        started: dict[str, float] = {}
        rows = spans.setdefault(f.stem, [])
        for line in f.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:  # a torn last line of a run killed mid-write
                continue
            if event["event"] == "start":
                started[event["test"]] = event["time"]
            elif event["test"] in started:
                rows.append((started.pop(event["test"]), event["time"], event["test"]))
    if not any(spans.values()):
        raise SystemExit(f"no finished test in {folder} (set CONCEPTLAB_TEST_TIMELINE={folder} for a test run)")
    t0 = min(a for rows in spans.values() for a, _, _ in rows)
    return {w: sorted((a - t0, b - t0, t) for a, b, t in rows) for w, rows in spans.items() if rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--long", type=float, default=20.0, help="list the tests that took longer (seconds)")
    parser.add_argument("--modules", type=int, default=25, help="how many modules to list, largest first")
    args = parser.parse_args(argv)
    spans = read(args.folder)
    modules: collections.Counter[str] = collections.Counter()
    for worker, rows in sorted(spans.items()):
        busy = sum(b - a for a, b, _ in rows)
        end = max(b for _, b, _ in rows)
        gaps = sorted(((rows[i + 1][0] - rows[i][1], rows[i][1]) for i in range(len(rows) - 1)), reverse=True)
        print(f"{worker}: {len(rows)} tests, {rows[0][0]:.1f}–{end:.1f} s, busy {busy:.1f} s "
              f"({busy / max(end - rows[0][0], 1e-9):.0%}); largest gaps: "
              + (", ".join(f"{g:.1f} s at {at:.0f}" for g, at in gaps[:3]) or "none"))
        for a, b, test in rows:
            modules[test.split("::")[0]] += b - a
            if b - a >= args.long:
                print(f"  {a:7.1f} +{b - a:6.1f} s  {test}")
    print(f"per module ({sum(modules.values()):.0f} worker-seconds in all):")
    for module, seconds in modules.most_common(args.modules):
        print(f"  {seconds:7.1f} s  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
