"""Benchmark: evaluating every intervention of a checkpoint in batched passes vs one prompt at a time.

Builds the model of a preset (default hidden-emergence-tiny; weights from a run
folder's last checkpoint if given, else freshly initialised — throughput does
not depend on the weights), asks its `eval.interventions` for all variants of
the held-out targets, and generates + scores them with the concept probe:

- batched: all variants in passes of up to `max_batch` images (what runs do,
  with the preset's `eval.interventions.max_batch`), and passes of 2 and 4
  variants (`--variants-per-pass`);
- one prompt at a time: each variant's n images in its own sampling pass.

Prints images generated and scored per second, seconds per checkpoint, and
the ratio to one prompt at a time, measured in one process, one after the
other, on the same threads, in the precision runs use (bf16 where native).

    .venv/bin/python bench/eval_interventions.py [--preset hidden-emergence-tiny] [--run RUN_DIR] [--n 32]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from conceptlab.studies import build_data
from conceptlab.experiments.loading import load_config
from conceptlab.studies.emergence import intervention_context
from conceptlab.interventions import build_interventions, evaluate_interventions
from conceptlab.models.diffusion_model import build_model
from conceptlab.probes.concept_classifier import load_or_train_probe
from conceptlab.train.checkpoints import list_checkpoints, load_checkpoint
from conceptlab.train.precision import autocast, resolve_bf16
from conceptlab.train.trainer import load_weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="hidden-emergence-tiny")
    parser.add_argument("--run", type=Path, default=None, help="run folder whose last checkpoint to load")
    parser.add_argument("--n", type=int, default=None, help="images per variant (default: the preset's)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument(
        "--variants-per-pass", type=int, nargs="*", default=[2, 4], help="pass sizes to time besides 1 and the preset's"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    cfg = load_config(str(args.run / "config.yaml") if args.run else args.preset)
    iv = cfg.eval.interventions
    if iv is None:
        raise SystemExit(f"{args.preset} has no eval.interventions")
    n = args.n or iv.samples
    dgp = build_data(cfg.data)
    model = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, cfg.data.image_size).eval()
    if args.run:
        load_weights(model, load_checkpoint(list_checkpoints(args.run / "checkpoints")[-1][1])[0])
    probe, _ = load_or_train_probe(cfg.eval.probe, list(dgp.concepts), cfg.data.image_size, progress=False)
    context = intervention_context(cfg, dgp, model, reference=model)  # patching reads the same weights
    interventions = build_interventions(iv, cfg.diffusion.guidance_convention)
    targets = list(iv.targets or dgp.held_out_classes)
    steps = cfg.eval.sample_steps or cfg.diffusion.sample_steps

    bf16 = resolve_bf16(cfg.train.bf16)

    def timed(max_batch: int) -> tuple[float, int]:
        began = time.perf_counter()
        with autocast(bf16):  # as runs evaluate
            table, _ = evaluate_interventions(
                model, interventions, targets, context, probe, n, steps, torch.Generator().manual_seed(0), max_batch
            )
        return time.perf_counter() - began, len(table) * n

    timed(iv.max_batch)  # warm-up (allocator, oneDNN kernels)
    passes = sorted({n, *(k * n for k in args.variants_per_pass), iv.max_batch})
    seconds = {}
    for max_batch in passes:
        seconds[max_batch], images = timed(max_batch)
    variants = images // n
    print(
        f"preset {cfg.name}: {variants} variants × {n} images, {steps} sampler steps, {args.threads} threads, "
        f"{'bf16' if bf16 else 'fp32'}"
    )
    single = seconds[n]
    for max_batch in passes:
        label = "one prompt at a time" if max_batch == n else f"≤{max_batch} images/pass"
        label += " (preset)" if max_batch == iv.max_batch else ""
        print(
            f"  {label:<32} {seconds[max_batch]:6.2f} s/checkpoint {images / seconds[max_batch]:7.1f} images/s"
            f"  {single / seconds[max_batch]:5.2f}× one at a time"
        )
    fastest = min(seconds, key=seconds.get)
    print(f"  fastest: ≤{fastest} images/pass, {seconds[iv.max_batch] / seconds[fastest]:.2f}× the preset's setting")

if __name__ == "__main__":
    main()
