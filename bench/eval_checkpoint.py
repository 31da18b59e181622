"""Benchmark: the full evaluation of one checkpoint of a hidden-emergence run, ours against the authors' way.

- ours: the run's own per-checkpoint measurements, `studies.concept_space.concept_space_measurement` (every class,
  `eval.samples_per_class` each, one pass) and `studies.emergence.intervention_measurement` (every intervention
  variant of every target, `eval.interventions.samples` each, in passes of `max_batch`, at most `cpu_max_batch` on
  a CPU), bf16 where native;
- reference (the authors' way): the same images, one class prompt (or one intervention variant's prompt) at a
  time in batches of `--ref-batch` (32), the spec's ancestral sampler in fp32 eager under no_grad, each batch then
  read by the same concept probe in fp32. Latent edits are not applied on the reference side (editing a per-block
  bias of [batch, channels] costs nothing next to a UNet pass), so it times sampling + scoring of the same count.

The network and the probe are freshly initialised (throughput does not depend on the weights); the patching
reference is the same weights, saved once as the run's final checkpoint in a scratch folder. Sides alternate
A B A B for `--reps` repetitions. Prints min / median / max seconds per checkpoint, images generated and scored per
second, and the ratio.

    .venv/bin/python bench/eval_checkpoint.py [--preset hidden-emergence-paper] [--sample-steps 50] [--reps 3]
    .venv/bin/python bench/eval_checkpoint.py --channels-last --fused-attention   # the eval levers as further sides
    .venv/bin/python bench/eval_checkpoint.py --quick --reps 1              # seconds; no claim
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path

import torch

import benchlib
from conceptlab.interventions import build_interventions, build_variants
from conceptlab.models.unet import use_fused_attention
from conceptlab.probes.concept_classifier import ConceptProbe, read_concepts
from conceptlab.studies.concept_space import concept_space_measurement
from conceptlab.studies.emergence import (images_per_pass, intervention_context, intervention_measurement,
                                         with_naive_repeats)
from conceptlab.train.checkpoints import prefixed, save_checkpoint

# the evaluation's levers (each an `eval` key and a flag of its name): how the run's checkpoint loop sets the network
LEVERS = {"channels_last": lambda net: net.to(memory_format=torch.channels_last),
          "fused_attention": use_fused_attention}

QUICK = ["model.widths=[16,32]", "eval.samples_per_class=2", "eval.interventions.samples=2"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_common_arguments(parser, "hidden-emergence-paper")
    parser.add_argument("--sample-steps", type=int, default=None, help="eval.sample_steps (default: the preset's)")
    parser.add_argument("--ref-batch", type=int, default=32, help="the reference's images per sampling batch")
    parser.add_argument("--max-batch", type=int, default=None,
                        help="also time ours in passes of exactly this many images (a third side: "
                        "eval.interventions.max_batch set to it, no CPU cap)")
    parser.add_argument("--channels-last", action="store_true",
                        help="also time ours with eval.channels_last (the network in channels-last memory format; "
                        "a further side)")
    parser.add_argument("--fused-attention", action="store_true",
                        help="also time ours with eval.fused_attention (self-attention on torch's fused kernel; a "
                        "further side)")
    args = parser.parse_args()
    overrides = list(args.overrides)
    if args.quick:
        overrides = QUICK + overrides
        args.sample_steps = args.sample_steps or 2
    if args.sample_steps:
        overrides.append(f"eval.sample_steps={args.sample_steps}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    cfg, dgp = benchlib.load(args.preset, overrides)
    iv = cfg.eval.interventions
    steps = cfg.eval.sample_steps or cfg.diffusion.sample_steps
    size, channels = cfg.data.image_size, dgp.channels
    model, reference = benchlib.ours_and_reference(cfg, dgp)
    model.eval(), reference.eval()
    probe = ConceptProbe(list(dgp.concepts), cfg.eval.probe.width).eval()

    scratch = tempfile.TemporaryDirectory(prefix="eval-checkpoint-")
    path = save_checkpoint(Path(scratch.name), 1, prefixed("model.", model.state_dict()),
                           {"config_hash": cfg.training_hash(), "metrics": {}, "has_ema": False})

    def measurements_of(extra: list[str], net=model) -> list:
        """The run's per-checkpoint measurements under the preset plus `extra` overrides, on `net`."""
        run_cfg = benchlib.load(args.preset, [*overrides, *extra])[0] if extra else cfg
        out = [concept_space_measurement(run_cfg, dgp, net, probe)]
        if iv is not None:
            out.append(intervention_measurement(run_cfg, dgp, net, probe, [(1, path)]))
        return out

    measurements = measurements_of([])
    batched = None
    if args.max_batch and iv is not None:
        batched = measurements_of([f"eval.interventions.max_batch={args.max_batch}",
                                 "eval.interventions.cpu_max_batch=null"])
    # each lever asked for: the measurements under its eval key, on a copy of the network set as the run's
    # checkpoint loop sets it
    levers = {}
    for name in [name for name in LEVERS if getattr(args, name)]:
        levers[name] = measurements_of([f"eval.{name}=true"], LEVERS[name](copy.deepcopy(model)))

    # what the reference generates: every class's samples, then every variant's (the same list ours samples)
    jobs = [(dgp.class_prompt(c), cfg.eval.samples_per_class) for c in dgp.classes]
    if iv is not None:
        context = intervention_context(cfg, dgp, model, reference=model)
        interventions = build_interventions(iv, cfg.diffusion.guidance_convention)
        targets = list(iv.targets or dgp.held_out_classes)
        if iv.matched_naive:
            interventions = with_naive_repeats(interventions, targets, context)
        variants = build_variants(interventions, targets, context)
        jobs += [(v.prompt, iv.samples) for _, v in variants]
        if any(v.guidance_scale for _, v in variants):
            print("note: guided variants take two network passes on our side, one on the reference's")
    images = sum(n for _, n in jobs)

    def run_ours() -> None:
        for m in measurements:
            m.measure(1)

    def run_reference() -> None:
        for prompt, n in jobs:
            for start in range(0, n, args.ref_batch):
                rows = min(args.ref_batch, n - start)
                generated = reference.sample(prompt.expand(rows, -1).contiguous(), steps, (channels, size, size))
                read_concepts(probe, generated)

    benchlib.print_environment(args.threads)
    print(f"preset {cfg.name}: {len(dgp.classes)} classes x {cfg.eval.samples_per_class} + "
          f"{len(jobs) - len(dgp.classes)} intervention variants x {iv.samples if iv else 0} = {images} images per "
          f"checkpoint, {steps} sampler steps; reference in batches of {args.ref_batch}, fp32")
    print(f"{args.reps} interleaved repetitions per side (after 1 untimed)", flush=True)
    sides = {"ours": run_ours, "reference": run_reference}
    if batched is not None:
        sides[f"ours max_batch {args.max_batch}"] = lambda: [m.measure(1) for m in batched]
        print(f"third side: ours in passes of {args.max_batch} images (the preset's on this machine: "
              f"{images_per_pass(iv, torch.device('cpu'))})")
    for name, under in levers.items():
        sides[f"ours+{name}"] = lambda under=under: [m.measure(1) for m in under]
        print(f"further side: ours with eval.{name}")
    times = benchlib.interleaved(sides, args.reps)
    for name in sides:
        print(f"{name:<10} s/checkpoint: {benchlib.fmt_spread(times[name], 's', digits=2)}; "
              f"{images / min(times[name]):.1f} images generated and scored per second at the fastest")
    print(benchlib.ratio_line("checkpoint evaluation", times["reference"], times["ours"]))
    if batched is not None:
        name = f"ours max_batch {args.max_batch}"
        print(benchlib.ratio_line(f"checkpoint evaluation, max_batch {args.max_batch}", times["reference"],
                                  times[name]))
    for name in levers:
        print(benchlib.ratio_line(f"checkpoint evaluation, {name}", times["reference"], times[f"ours+{name}"]))
    scratch.cleanup()


if __name__ == "__main__":
    main()
