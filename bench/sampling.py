"""Benchmark: 50-step ancestral sampling of 32 images, our sampler against the authors' regime, interleaved.

- ours: `DiffusionModel.sample` (`models.sampling.ancestral_sample`: inference mode, one batched pass per step)
  under bf16 autocast where the CPU has it natively, as evaluation runs it (`train.bf16`);
- reference: the same network and weights, the spec's ancestral sampler in fp32, eager, under `torch.no_grad`
  (`bench/benchlib.py`).

Both generate `--images` images of one class prompt (the first held-out class) with `--sample-steps` steps; sides
alternate A B A B for `--reps` repetitions. Prints min / median / max seconds of each and the ratio.

`--levers` adds our sampler under a lever as further interleaved sides, each with its ratio to the reference:
`compile` (`torch.compile` of the network; the compile time, its first sampling, is printed apart and not in the
times), `channels_last` (the network's weights in channels-last memory format, as `eval.channels_last` runs it;
the convolutions' outputs follow) and `fused_attention` (self-attention on torch's fused kernel instead of its math
kernel, as `eval.fused_attention` runs it).

    .venv/bin/python bench/sampling.py [--preset paper] [--images 32] [--sample-steps 50] [--reps 3]
    .venv/bin/python bench/sampling.py --levers compile channels_last fused_attention
    .venv/bin/python bench/sampling.py --quick --preset micro --reps 1      # seconds; no claim
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

import benchlib
from conceptlab.models.unet import use_fused_attention
from conceptlab.train.precision import autocast, resolve_bf16


LEVERS = {"channels_last", "compile", "fused_attention"}


def lever_side(name: str, ours, sample):
    """`sample(model)` on a copy of `ours` (same weights) under one lever; returns (the side's function, seconds of
    its first call: the compile time for `compile`)."""
    model = copy.deepcopy(ours)
    if name == "compile":
        model.net = torch.compile(model.net)
    elif name == "channels_last":
        model = model.to(memory_format=torch.channels_last)
    elif name == "fused_attention":
        use_fused_attention(model)
    began = time.perf_counter()
    sample(model)
    return (lambda: sample(model)), time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_common_arguments(parser, "paper")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--sample-steps", type=int, default=50)
    parser.add_argument("--levers", nargs="*", default=[], choices=sorted(LEVERS),
                        help="our sampler under these levers as further sides (compile, channels_last, fused_attention)")
    args = parser.parse_args()
    if args.quick:
        args.images, args.sample_steps = min(args.images, 4), min(args.sample_steps, 3)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    cfg, dgp = benchlib.load(args.preset, args.overrides)
    size, channels = cfg.data.image_size, dgp.channels
    ours, reference = benchlib.ours_and_reference(cfg, dgp)
    ours.eval(), reference.eval()
    bf16 = resolve_bf16(cfg.train.bf16)
    target = (list(dgp.held_out_classes) or list(dgp.classes))[0]
    prompts = dgp.class_prompt(target).expand(args.images, -1).contiguous()
    null = torch.full_like(prompts[:1], cfg.data.null_value)

    def sample(model) -> None:
        with autocast(bf16):
            model.sample(prompts, args.sample_steps, torch.Generator().manual_seed(0), cfg.diffusion.guidance_scale,
                         null)

    def run_ours() -> None:
        sample(ours)

    def run_reference() -> None:
        reference.sample(prompts, args.sample_steps, (channels, size, size))

    benchlib.print_environment(args.threads)
    print(f"preset {cfg.name}: {args.images} images of class {target}, {args.sample_steps} ancestral steps; ours "
          f"{'bf16 autocast' if bf16 else 'fp32'} (DiffusionModel.sample), reference fp32 eager no_grad")
    print(f"{args.reps} interleaved repetitions per side (after 1 untimed)", flush=True)
    sides = {"ours": run_ours, "reference": run_reference}
    for lever in args.levers:
        run, first = lever_side(lever, ours, sample)
        what = "compile time (first sampling)" if lever == "compile" else "first sampling"
        print(f"lever {lever}: {what} {first:.1f} s, not in the times", flush=True)
        sides[f"ours+{lever}"] = run
    times = benchlib.interleaved(sides, args.reps)
    for name in sides:
        print(f"{name:<10} s/sampling: {benchlib.fmt_spread(times[name], 's')}; "
              f"{args.images / min(times[name]):.1f} images/s at the fastest")
    print(benchlib.ratio_line("sampling", times["reference"], times["ours"]))
    for lever in args.levers:
        print(benchlib.ratio_line(f"sampling, {lever}", times["reference"], times[f"ours+{lever}"]))


if __name__ == "__main__":
    main()
