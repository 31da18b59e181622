"""TensorBoard's cost on a run: the same short run with `train.tensorboard` on and off, alternated in one process
(on, off, on, off, …), training and evaluation seconds compared as a same-run ratio.

    python bench/tensorboard_overhead.py [--repeats 2] [--steps 150] [--preset concept-space-tiny]

Prints one line per run, then per part min/median/max seconds with TensorBoard on and off and the on/off ratio of
each back-to-back pair (min/median/max); numbers are this machine's, today.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import torch

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="concept-space-tiny")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    checkpoints = [args.steps // 3, 2 * args.steps // 3, args.steps]
    base = [f"train.steps={args.steps}", "train.checkpoint_schedule=list",
            f"train.checkpoint_steps={checkpoints}", "eval.samples_per_class=8"]
    seconds: dict[bool, list[dict]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            for on in (True, False):
                cfg = load_config(args.preset, [*base, f"train.tensorboard={str(on).lower()}"])
                summary = run_experiment(cfg, Path(tmp) / f"{k}-{on}", progress=False)
                s = summary["seconds"]
                seconds[on].append(s)
                print(f"tensorboard {'on ' if on else 'off'} repeat {k}: train {s['train']:.2f} s, "
                      f"evaluation {s['concept_space']:.2f} s, total {s['total']:.2f} s", flush=True)
    for part in ("train", "concept_space", "total"):
        on = [x[part] for x in seconds[True]]
        off = [x[part] for x in seconds[False]]
        pairs = sorted(a / b for a, b in zip(on, off))  # each repeat's on / off, run back to back
        print(f"{part}: on min/median/max {min(on):.2f}/{statistics.median(on):.2f}/{max(on):.2f} s, off "
              f"{min(off):.2f}/{statistics.median(off):.2f}/{max(off):.2f} s; on/off per pair min/median/max "
              f"{pairs[0]:.3f}/{statistics.median(pairs):.3f}/{pairs[-1]:.3f}")


if __name__ == "__main__":
    main()
