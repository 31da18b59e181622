"""Benchmark: wall time of one preset run (default: concept-space-tiny, the core pipeline), by stage.

Runs the preset into a temporary runs folder and prints seconds for training,
probe (cached or trained), evaluation and the total, plus the training
throughput and whether the training classes reached the accuracy bar.

    .venv/bin/python bench/demo_time.py [PRESET] [key=value ...] [--fresh-probe]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import new_run_dir, run_experiment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("preset", nargs="?", default="concept-space-tiny")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--fresh-probe", action="store_true", help="train the probe instead of using the cache")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.fresh_probe:
            os.environ["CONCEPTLAB_CACHE"] = str(Path(tmp) / "cache")
        cfg = load_config(args.preset, args.overrides)
        run_dir = new_run_dir(Path(tmp) / "runs", cfg.name)
        began = time.perf_counter()
        summary = run_experiment(cfg, run_dir, progress=False)
        wall = time.perf_counter() - began
    s = summary["seconds"]
    train_classes = summary["train_classes"]
    worst = min(v for k, v in summary["final_accuracy"].items() if k.split("/")[0] in train_classes)
    print(f"preset {args.preset} ({summary['parameters'] / 1e6:.2f} M params), {args.threads} threads")
    print(f"  train     {s['train']:8.1f} s  ({cfg.train.steps / max(s['train'], 1e-9):.1f} steps/s)")
    print(f"  probe     {s['probe']:8.1f} s  ({'trained' if args.fresh_probe else 'cached unless first use'})")
    print(f"  evaluate  {s['evaluate']:8.1f} s  ({summary['checkpoints']} checkpoints)")
    print(f"  total     {wall:8.1f} s wall")
    print(f"  worst training-class accuracy at the last checkpoint: {worst:.3f}")
    print(f"  learning times: {summary['learning_time']}")


if __name__ == "__main__":
    main()
