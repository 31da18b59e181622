"""Benchmark: 50-step ancestral sampling of 32 images, our sampler against the authors' regime, interleaved.

- ours: `DiffusionModel.sample` (`models.sampling.ancestral_sample`: inference mode, one batched pass per step)
  under bf16 autocast where the CPU has it natively, as evaluation runs it (`train.bf16`);
- reference: the same network and weights, the spec's ancestral sampler in fp32, eager, under `torch.no_grad`
  (`bench/benchlib.py`).

Both generate `--images` images of one class prompt (the first held-out class) with `--sample-steps` steps; sides
alternate A B A B for `--reps` repetitions. Prints min / median / max seconds of each and the ratio.

    .venv/bin/python bench/sampling.py [--preset paper] [--images 32] [--sample-steps 50] [--reps 3]
    .venv/bin/python bench/sampling.py --quick --preset micro --reps 1      # seconds; no claim
"""

from __future__ import annotations

import argparse

import torch

import benchlib
from conceptlab.train.precision import autocast, resolve_bf16


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_common_arguments(parser, "paper")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--sample-steps", type=int, default=50)
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

    def run_ours() -> None:
        with autocast(bf16):
            ours.sample(prompts, args.sample_steps, torch.Generator().manual_seed(0), cfg.diffusion.guidance_scale,
                        null)

    def run_reference() -> None:
        reference.sample(prompts, args.sample_steps, (channels, size, size))

    benchlib.print_environment(args.threads)
    print(f"preset {cfg.name}: {args.images} images of class {target}, {args.sample_steps} ancestral steps; ours "
          f"{'bf16 autocast' if bf16 else 'fp32'} (DiffusionModel.sample), reference fp32 eager no_grad")
    print(f"{args.reps} interleaved repetitions per side (after 1 untimed)", flush=True)
    times = benchlib.interleaved({"ours": run_ours, "reference": run_reference}, args.reps)
    for name in ("ours", "reference"):
        print(f"{name:<10} s/sampling: {benchlib.fmt_spread(times[name], 's')}; "
              f"{args.images / min(times[name]):.1f} images/s at the fastest")
    print(benchlib.ratio_line("sampling", times["reference"], times["ours"]))


if __name__ == "__main__":
    main()
