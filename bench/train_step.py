"""Benchmark: the trainer's own training step against the authors' regime, interleaved in one process.

- ours: `conceptlab.train.trainer.train_step`, what `iter_training` calls every step, on the preset's model
  (`build_model`), optimizer (`build_optimizer`), gradient clip and precision (`train.bf16`: bf16 autocast where
  the CPU has it natively), default memory format as the trainer uses;
- reference: the same network with the same initial weights and the spec's VDM loss in the authors' regime: fp32,
  eager, default memory format, AdamW with the preset's lr / weight decay, the preset's global grad-norm clip
  (`bench/benchlib.py`).

Both take a fixed batch of `--batch` images (speed does not depend on the pixels). A repetition is `--steps` steps
of one side; sides alternate A B A B for `--reps` repetitions. Prints min / median / max s/step of each, their
ratio, GFLOP/s (FLOPs counted by torch.utils.flop_counter) and the fraction of a dense bf16 / fp32 peak measured in
this run.

    .venv/bin/python bench/train_step.py [--preset paper] [--batch 64] [--reps 3] [--steps 2] [--threads N]
    .venv/bin/python bench/train_step.py --quick --preset micro --batch 2 --reps 1     # seconds; no claim
    .venv/bin/python bench/train_step.py --preset hidden-emergence-paper-tiny --levers channels_last compile

`--levers` adds our step under a lever as further interleaved sides, each with its ratio to the reference:
`channels_last` (weights and images in channels-last memory format), `compile` (`torch.compile` of the network;
its compile time, the first call, is printed apart and not in the step times), `uniform_dropout` (dropout masks
drawn as a uniform ≥ p, `model.dropout_mask=uniform`), `sfc64_dropout` (from SFC64 words, `model.dropout_mask=sfc64`,
the `paper` preset's) and `fused_attention` (q, k, v packed so torch runs its fused
attention kernel forward and backward, `models.unet.use_fused_attention`; evaluation has it as
`eval.fused_attention`, training has no such setting).

`--profile N` then profiles N of our steps (`torch.profiler`, after the timed rounds) and prints where the step's
time goes: the operators with the most self time, and the convolutions' own throughput — their FLOPs over their
self time, i.e. the step's GFLOP/s if everything but the convolutions took no time (the ceiling the levers outside
the convolution kernels can reach).
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch.utils.flop_counter import FlopCounterMode

import benchlib
from conceptlab.models.diffusion_model import build_model
from conceptlab.models.unet import count_parameters
from conceptlab.train.precision import native_bf16, resolve_bf16
from conceptlab.train.trainer import build_optimizer, train_step


LEVERS = {"channels_last", "compile", "uniform_dropout", "sfc64_dropout", "fused_attention"}
CONV_OPS = ("convolution", "convolution_backward")  # aten ops whose FLOPs flop_counter counts as convolutions


def conv_flops(counter: FlopCounterMode) -> int:
    """FLOPs of the convolutions (forward and backward) among those `counter` counted."""
    return sum(n for op, n in counter.get_flop_counts().get("Global", {}).items()
               if str(op).removeprefix("aten.").split(".")[0] in CONV_OPS)


def profile_steps(step, n: int, conv_gflop: float, peak: float, top: int = 12) -> None:
    """Profile `n` calls of `step` and print the operators with the most self CPU time, their share of the steps,
    and the convolution kernels' own GFLOP/s (their counted FLOPs over their self time) against `peak`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            step()
    rows = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in rows)  # microseconds, over the n steps
    rows.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    print(f"profile of {n} of our steps: {total / 1e6 / n:.3f} s of operator self time a step; the top {top}:")
    for e in rows[:top]:
        print(f"  {e.key:<40} {e.self_cpu_time_total / total:6.1%}  ({e.count // n} calls a step)")
    conv = [e for e in rows if e.key.startswith("aten::")  # oneDNN's, and torch's own (fp32, small batches)
            and any(k in e.key for k in ("convolution", "mkldnn_conv", "slow_conv", "thnn_conv"))]
    conv_s = sum(e.self_cpu_time_total for e in conv) / 1e6 / n
    if conv_s > 0:
        inside = conv_gflop / conv_s
        print(f"convolutions: {conv_s:.3f} s a step ({conv_s * 1e6 * n / total:.0%} of it), {conv_gflop:.1f} GFLOP: "
              f"{inside:.0f} GFLOP/s inside their kernels = {inside / peak:.0%} of the peak (the step's ceiling if "
              f"nothing else took time)")


def lever_side(name: str, ours, cfg, images, prompts, noise, bf16: bool, clip, steps: int):
    """Our train_step on a copy of `ours` (same weights, its own optimizer) under one lever; returns (the side's
    function, seconds of its first call: the compile time for `compile`, one step otherwise)."""
    import copy
    import time

    model = copy.deepcopy(ours)
    x = images
    if name == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = images.contiguous(memory_format=torch.channels_last)
    elif name == "compile":
        model.net = torch.compile(model.net)
    elif name == "fused_attention":  # models.unet.use_fused_attention: torch's fused attention kernel, backward too
        from conceptlab.models.unet import Attention, use_fused_attention

        if not any(isinstance(m, Attention) for m in model.modules()):
            raise SystemExit("--levers fused_attention: the preset's network has no attention (model.mid_attention)")
        use_fused_attention(model)
    elif name in ("uniform_dropout", "sfc64_dropout"):  # model.dropout_mask: the same distribution, another stream
        from conceptlab.models.unet import MaskDropout

        for module in model.modules():
            if isinstance(module, MaskDropout):
                module.mask = name.removesuffix("_dropout")
    opt = build_optimizer(model, cfg.train)
    began = time.perf_counter()
    train_step(model, opt, x, prompts, noise, bf16, "cpu", clip)
    first = time.perf_counter() - began

    def run() -> None:
        for _ in range(steps):
            train_step(model, opt, x, prompts, noise, bf16, "cpu", clip)

    return run, first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    benchlib.add_common_arguments(parser, "paper")
    parser.add_argument("--batch", type=int, default=None, help="images per step (default: the preset's)")
    parser.add_argument("--steps", type=int, default=2, help="training steps per repetition")
    parser.add_argument("--peak-size", type=int, default=2048, help="matmul size of the dense peak")
    parser.add_argument("--levers", nargs="*", default=[], choices=sorted(LEVERS),
                        help="our step under these levers as further sides (channels_last, compile, uniform_dropout, "
                        "sfc64_dropout, fused_attention)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="after the timed rounds, profile N of our steps: where the time goes")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.peak_size = 1, 256
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    cfg, dgp = benchlib.load(args.preset, args.overrides)
    batch = args.batch or cfg.train.batch_size
    size, channels = cfg.data.image_size, dgp.channels
    ours, reference = benchlib.ours_and_reference(cfg, dgp)
    ours.train(), reference.train()
    bf16 = resolve_bf16(cfg.train.bf16)
    clip = cfg.train.grad_clip

    g = torch.Generator().manual_seed(0)
    images = torch.rand(batch, channels, size, size, generator=g)
    prompts = torch.stack([dgp.class_prompt(c) for c in dgp.train_classes])[torch.arange(batch) % len(dgp.train_classes)]
    noise = torch.Generator().manual_seed(1)
    opt_ours, opt_ref = build_optimizer(ours, cfg.train), torch.optim.AdamW(
        reference.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)

    def run_ours() -> None:
        for _ in range(args.steps):
            train_step(ours, opt_ours, images, prompts, noise, bf16, "cpu", clip)

    def run_reference() -> None:
        for _ in range(args.steps):
            benchlib.reference_step(reference, opt_ref, images, prompts, clip if clip is not None else float("inf"))

    flops_model = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, size, channels, dgp.attribute_sizes,
                              dgp.null_label).train()
    with FlopCounterMode(display=False) as counter:
        train_step(flops_model, build_optimizer(flops_model, cfg.train), images, prompts, noise, False, "cpu", clip)
    step_flops = counter.get_total_flops()
    step_conv_flops = conv_flops(counter)
    del flops_model

    benchlib.print_environment(args.threads)
    print(f"preset {cfg.name}: {count_parameters(ours.net):,} network parameters (+{count_parameters(ours.process)} "
          f"schedule), batch {batch}, {channels}x{size}x{size}, prompt_dim {dgp.prompt_dim}")
    print(f"ours: trainer.train_step, {'bf16 autocast' if bf16 else 'fp32'}, {type(opt_ours).__name__} "
          f"lr {cfg.train.lr:g} wd {cfg.train.weight_decay:g}, clip {clip}; reference: fp32 eager, AdamW, clip {clip}")
    print(f"train step {step_flops / 1e9:.1f} GFLOP (forward + backward, flop_counter)")
    print(f"{args.reps} interleaved repetitions of {args.steps} steps per side, then a dense-kernel peak, in turn "
          f"(after 1 untimed round)", flush=True)

    peaks: list[dict] = []
    # the bf16 peak only where bf16 is native: emulated, a 2048² bf16 matmul runs at ~1 GFLOP/s and one peak
    # measurement took 200 s on a CPU without AVX512-BF16 (2026-12-02), to report a number no run would use
    dtypes = (torch.float32, torch.bfloat16) if native_bf16("cpu") or bf16 else (torch.float32,)
    if torch.bfloat16 not in dtypes:
        print("dense peak bf16: not measured (this CPU has no native bf16, so runs use fp32)")

    def run_peak() -> None:  # a third side, so the peak sees the same machine state as the steps
        peaks.append({dt: benchlib.dense_peak(dt, args.peak_size, 2) for dt in dtypes})

    sides = {"ours": run_ours, "reference": run_reference}
    for lever in args.levers:
        run, first = lever_side(lever, ours, cfg, images, prompts, noise, bf16, clip, args.steps)
        what = "compile time (first call)" if lever == "compile" else "first call"
        print(f"lever {lever}: {what} {first:.1f} s, not in the step times", flush=True)
        sides[f"ours+{lever}"] = run
    times = benchlib.interleaved({**sides, "peak": run_peak}, args.reps)
    per_step = {k: [t / args.steps for t in v] for k, v in times.items() if k != "peak"}
    peak = {dt: {k: max(p[dt][k] for p in peaks) for k in peaks[0][dt]} for dt in dtypes}
    best = {dt: max(p.values()) for dt, p in peak.items()}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))[:len(dtypes)]:
        p = peak[dtype]
        print(f"dense peak {name} ({args.peak_size}² matmul / 1x1 conv of the same work, best of the rounds): "
              f"{p['matmul']:.0f} / {p['conv1x1']:.0f} GFLOP/s")
    for name, dtype in (("ours", torch.bfloat16 if bf16 else torch.float32), ("reference", torch.float32)):
        median = statistics.median(per_step[name])
        gflops = step_flops / median / 1e9
        label = "bf16" if dtype is torch.bfloat16 else "fp32"
        print(f"{name:<10} s/step: {benchlib.fmt_spread(per_step[name], 's')}; {gflops:.0f} GFLOP/s at the median = "
              f"{gflops / best[dtype]:.0%} of the {label} peak ({gflops / peak[dtype]['matmul']:.0%} of its matmul)")
    print(benchlib.ratio_line("training step", per_step["reference"], per_step["ours"]))
    for lever in args.levers:
        name = f"ours+{lever}"
        print(f"{name:<10} s/step: {benchlib.fmt_spread(per_step[name], 's')}")
        print(benchlib.ratio_line(f"training step, {lever}", per_step["reference"], per_step[name]))
    if args.profile:
        dtype = torch.bfloat16 if bf16 else torch.float32
        profile_steps(lambda: train_step(ours, opt_ours, images, prompts, noise, bf16, "cpu", clip), args.profile,
                      step_conv_flops / 1e9, best[dtype])


if __name__ == "__main__":
    main()
