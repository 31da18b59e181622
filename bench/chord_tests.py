"""The geometry analysis's chord tests (`conceptlab.analysis.geometry.chord_tests`) against their previous form.

The GPU device check (docs/benchmarks.md, "On a GPU") found factorize-torus-paper's evaluation bound by CPU-side
analysis, not by network passes: the chord tests' explicit chords and `np.einsum` cosine tables took 42 s of a
171-second profile there. They now take every cosine from the Gram matrix of the points (one matrix product). This
bench times both on a random grid cloud of the paper preset's size (32 × 32 labels, 4,096 activation dims of
`mid.blocks.1.hook_out` flattened), interleaved in one process, and checks that they agree to 1e-12.

    .venv/bin/python bench/chord_tests.py [--reps 3] [--size 32] [--dims 4096]
    .venv/bin/python bench/chord_tests.py --quick      # seconds; no claim
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import benchlib
from conceptlab.analysis import geometry


def chord_tests_explicit(grid: np.ndarray, periodic: bool = True) -> dict[str, float]:
    """The reference: the chord tests as written until 2026-12-04: every chord formed in D dimensions, normalised,
    and the cosine tables taken with `np.einsum`."""

    def unit(v: np.ndarray) -> np.ndarray:
        return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)

    def chords(axis: int) -> np.ndarray:
        n = grid.shape[axis]
        out = []
        for s in (range(1, n // 2 + 1) if periodic else range(1, n)):
            d = np.roll(grid, -s, axis=axis) - grid
            if not periodic:  # chords that would run off the grid are zeroed (and skipped)
                idx = [slice(None)] * 3
                idx[axis] = slice(n - s, n)
                d[tuple(idx)] = 0.0
            out.append(d)
        return unit(np.stack(out, axis=2))

    def parallelism(c: np.ndarray, valid: np.ndarray) -> float:
        cos = np.einsum("ijsd,iksd->ijks", c, c)
        pairs = valid[:, :, None, :] & valid[:, None, :, :] & ~np.eye(c.shape[1], dtype=bool)[None, :, :, None]
        return float(cos[pairs].mean())

    cx, cy = chords(0), chords(1)
    vx, vy = np.linalg.norm(cx, axis=-1) > 0.5, np.linalg.norm(cy, axis=-1) > 0.5
    ortho = np.abs(np.einsum("ijsd,ijtd->ijst", cx, cy))[vx[:, :, :, None] & vy[:, :, None, :]]
    px = parallelism(cx, vx)
    py = parallelism(cy.transpose(1, 0, 2, 3), vy.transpose(1, 0, 2))
    return {"orthogonality": float(ortho.mean()), "parallelism_x": px, "parallelism_y": py, "parallelism": (px + py) / 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions of each side (≥ 3 for a claim)")
    parser.add_argument("--size", type=int, default=32, help="labels along each axis of the grid")
    parser.add_argument("--dims", type=int, default=4096, help="activation dimensions")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quick", action="store_true", help="a small grid: seconds, for tests; no claim")
    args = parser.parse_args()
    if args.quick:
        args.size, args.dims, args.reps = 8, 64, 1
    torch.set_num_threads(args.threads)
    benchlib.print_environment(args.threads)
    grid = np.random.default_rng(0).normal(size=(args.size, args.size, args.dims))
    ours, ref = geometry.chord_tests(grid), chord_tests_explicit(grid)
    gap = max(abs(ours[k] - ref[k]) for k in ref)
    print(f"grid {args.size} x {args.size} x {args.dims} (periodic): largest difference between the two {gap:.1e}")
    if gap > 1e-12:
        raise SystemExit("the two forms disagree")
    times = benchlib.interleaved({"reference": lambda: chord_tests_explicit(grid),
                                  "ours": lambda: geometry.chord_tests(grid)}, args.reps)
    print(f"reference (explicit chords, einsum cosine tables: before): {benchlib.fmt_spread(times['reference'], 's')}")
    print(f"ours (cosines from the Gram matrix: now): {benchlib.fmt_spread(times['ours'], 's')}")
    print(benchlib.ratio_line("chord tests", times["reference"], times["ours"]))


if __name__ == "__main__":
    main()
