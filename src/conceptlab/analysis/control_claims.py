"""A finding against its binding control, over report seeds: per-seed margins and a verdict.

A claim compares one measure of the trained model with the same measure of a control (an untrained network, the
raw pixels, the label encoding, a random map of it) on every report seed, in a direction fixed in advance:

- `greater`: trained − control ≥ margin,
- `less`: control − trained ≥ margin,
- `holds`: the trained value itself is true (e.g. "the trained curve departs from every control"; no control).

A seed passes when its own difference clears the margin (a missing value fails it: a claim is never passed by a run
that did not measure it). The verdict over seeds: `reproduced` when at least `min_seeds` pass (all of them by
default), `not reproduced` when none does, `mixed` otherwise.

Pure functions on plain numbers; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

DIRECTIONS = ("greater", "less", "holds")
VERDICTS = ("reproduced", "mixed", "not reproduced")


@dataclass(frozen=True)
class SeedMargin:
    seed: int
    trained: float | bool | None
    control: float | None
    difference: float | None  # in the claim's direction: ≥ margin passes
    passed: bool


def _number(x) -> float | None:
    if x is None or isinstance(x, bool):
        return None
    x = float(x)
    return None if math.isnan(x) else x


def seed_margin(seed: int, trained, control, direction: str, margin: float) -> SeedMargin:
    """One seed's difference in the claim's direction and whether it clears `margin`."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if direction == "holds":
        ok = trained is True
        return SeedMargin(seed, trained if trained is None else bool(trained), None, None, ok)
    t, c = _number(trained), _number(control)
    if t is None or c is None:
        return SeedMargin(seed, t, c, None, False)
    diff = t - c if direction == "greater" else c - t
    return SeedMargin(seed, t, c, diff, diff >= margin)


def verdict(passed: Sequence[bool], min_seeds: int | None = None) -> str:
    """`reproduced` when ≥ `min_seeds` (default: all) seeds pass, `not reproduced` when none does, else `mixed`."""
    if not passed:
        raise ValueError("a verdict needs at least one seed")
    need = len(passed) if min_seeds is None else min_seeds
    if need < 1 or need > len(passed):
        raise ValueError(f"min_seeds must be in 1..{len(passed)} (the seeds measured), got {need}")
    n = sum(bool(p) for p in passed)
    return "reproduced" if n >= need else "not reproduced" if n == 0 else "mixed"


def evaluate(trained: Mapping[int, object], control: Mapping[int, object] | None, direction: str, margin: float,
             min_seeds: int | None = None) -> dict:
    """Per-seed margins and the verdict of one claim. `trained`, `control`: seed → value (the control may miss seeds,
    which then fail). Returns seeds (list of SeedMargin as dicts), passed (count), of (seeds), the verdict, and the
    smallest and largest difference where one was measured."""
    if margin < 0 or math.isnan(margin):
        raise ValueError(f"margin must be ≥ 0, got {margin}")
    control = control or {}
    rows = [seed_margin(s, trained[s], control.get(s), direction, margin) for s in sorted(trained)]
    diffs = [r.difference for r in rows if r.difference is not None]
    return {
        "seeds": [r.__dict__ for r in rows],
        "passed": sum(r.passed for r in rows),
        "of": len(rows),
        "verdict": verdict([r.passed for r in rows], min_seeds),
        "min_difference": min(diffs) if diffs else None,
        "max_difference": max(diffs) if diffs else None,
    }
