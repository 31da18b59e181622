"""Benchmark: does a shorter ancestral sampler read the same? Probe scores at several step counts vs 50 steps.

For checkpoints of a finished run, generates n images per class with each step
count (same seeds), reads them with the run's concept probe, and prints per
class × concept accuracy, the largest difference from the reference step count,
and the sampling seconds. A shorter sampler is acceptable for evaluation only
where every difference stays within 2 points (0.02).

    .venv/bin/python bench/sampler_steps.py RUN_DIR [--steps 50 25 20] [--n 128] [--checkpoints 3]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from conceptlab.analysis.concept_space import evaluate_generations, generation_prompts
from conceptlab.studies import build_data
from conceptlab.experiments.loading import load_config
from conceptlab.models.diffusion_model import build_model
from conceptlab.probes.concept_classifier import load_or_train_probe
from conceptlab.train.checkpoints import list_checkpoints, load_checkpoint
from conceptlab.train.precision import autocast, resolve_bf16
from conceptlab.train.trainer import load_weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--steps", type=int, nargs="+", default=[50, 25, 20])
    parser.add_argument("--n", type=int, default=128, help="generations per class")
    parser.add_argument("--checkpoints", type=int, default=3, help="evenly spaced checkpoints to test")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(str(args.run_dir / "config.yaml"))
    dgp = build_data(cfg.data)
    model = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, cfg.data.image_size).eval()
    probe, _ = load_or_train_probe(cfg.eval.probe, list(dgp.concepts), cfg.data.image_size, progress=False)
    classes = list(dgp.classes)
    splits = {c: ("train" if c in dgp.train_classes else "held_out") for c in classes}
    prompts = generation_prompts(torch.stack([dgp.class_prompt(c) for c in classes]), args.n)
    ckpts = list_checkpoints(args.run_dir / "checkpoints")
    picks = [ckpts[round(i)] for i in np.linspace(0, len(ckpts) - 1, min(args.checkpoints, len(ckpts)))]
    reference = args.steps[0]
    worst = {s: 0.0 for s in args.steps[1:]}
    worst_z = {s: 0.0 for s in args.steps[1:]}  # the same difference in binomial standard errors
    for step, path in picks:
        load_weights(model, load_checkpoint(path)[0], cfg.eval.use_ema)
        tables = {}
        for steps in args.steps:
            began = time.perf_counter()
            with autocast(resolve_bf16(cfg.train.bf16)):
                images = model.sample(prompts, steps, torch.Generator().manual_seed(0))
            seconds = time.perf_counter() - began
            tables[steps] = evaluate_generations(images.float(), classes, splits, list(dgp.concepts), probe, step)
            print(f"checkpoint {step}: {steps:3d} steps, {seconds:6.1f} s, "
                  f"accuracy {tables[steps]['accuracy'].round(3).tolist()}")
        for steps in args.steps[1:]:
            a, b = tables[steps]["accuracy"].to_numpy(), tables[reference]["accuracy"].to_numpy()
            diff = np.abs(a - b)
            se = np.sqrt((a * (1 - a) + b * (1 - b)) / args.n)  # two independent sets of n images
            worst[steps] = max(worst[steps], float(diff.max()))
            worst_z[steps] = max(worst_z[steps], float((diff / np.maximum(se, 1e-12)).max()))
    for steps, diff in worst.items():
        verdict = "within 2 points" if diff <= 0.02 else "NOT within 2 points"
        print(f"{steps} steps vs {reference}: largest accuracy difference {diff:.3f} ({verdict}; n={args.n}/class; "
              f"largest difference in standard errors {worst_z[steps]:.1f}: "
              f"{'within sampling noise' if worst_z[steps] < 2 else 'beyond sampling noise'})")


if __name__ == "__main__":
    main()
