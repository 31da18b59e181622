"""Benchmark one training step of the paper's ConceptUNet on CPU: s/step, GFLOP/s, fraction of a dense-kernel peak."""

from __future__ import annotations

import argparse
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch.utils.flop_counter import FlopCounterMode

from conceptlab.models.unet import ModelConfig
from conceptlab.models.unet import ConceptUNet, count_parameters
from conceptlab.train.precision import cpu_has_native_bf16

REFERENCE_S_PER_STEP = 2.7  # authors' code, batch 64, measured on this machine
PROMPT_DIM, IMAGE_SIZE = 11, 32


@dataclass(frozen=True)
class Variant:
    name: str
    bf16: bool
    channels_last: bool


VARIANTS = [
    Variant("fp32 eager", bf16=False, channels_last=False),
    Variant("fp32 channels_last", bf16=False, channels_last=True),
    Variant("bf16 autocast", bf16=True, channels_last=False),
    Variant("bf16 autocast channels_last", bf16=True, channels_last=True),
]


def cpu_description() -> str:
    """CPU model and whether it has native bf16 instructions (AVX512-BF16 or AMX), from /proc/cpuinfo."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return "unknown CPU"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    return f"{model}, native bf16: {'yes' if cpu_has_native_bf16() else 'no (bf16 is emulated: slow)'}"


def dense_peak_gflops(dtype: torch.dtype, n: int = 4096, reps: int = 5) -> float:
    """Best GFLOP/s of two dense kernels in `dtype`: an n² matmul (BLAS: MKL) and a 1×1 convolution of the same
    work (oneDNN). On some CPUs one library is much slower than the other (on an AMD EPYC MKL's fp32 matmul
    reached less than the UNet's own convolutions), so a peak read off one of them can be exceeded."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    x = torch.randn(n // 64, n, 8, 8, dtype=dtype)  # n//64 images × 64 pixels = n rows of n channels
    w = torch.randn(n, n, 1, 1, dtype=dtype)
    best = 0.0
    for kernel in (lambda: a @ b, lambda: torch.nn.functional.conv2d(x, w)):
        kernel()
        start = time.perf_counter()
        for _ in range(reps):
            kernel()
        best = max(best, 2 * n**3 * reps / (time.perf_counter() - start) / 1e9)
    return best


def make_batch(batch: int, channels_last: bool) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    z = torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
    eps = torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE, generator=g)
    if channels_last:
        z, eps = z.contiguous(memory_format=torch.channels_last), eps.contiguous(memory_format=torch.channels_last)
    return z, torch.rand(batch, generator=g), torch.rand(batch, PROMPT_DIM, generator=g), eps


def loss_fn(net: ConceptUNet, z: torch.Tensor, t: torch.Tensor, p: torch.Tensor, eps: torch.Tensor, bf16: bool):
    with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
        out = net(z, t, p)
    return ((out + z - eps) ** 2).mean()


def time_variant(variant: Variant, state: dict, batch: int, steps: int, warmup: int) -> tuple[float, float]:
    """(best, median) seconds per training step: forward + loss + backward + grad-norm clip + AdamW."""
    net = ConceptUNet(ModelConfig(), PROMPT_DIM).train()
    net.load_state_dict(state)
    if variant.channels_last:
        net = net.to(memory_format=torch.channels_last)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01, fused=True)
    z, t, p, eps = make_batch(batch, variant.channels_last)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(net, z, t, p, eps, variant.bf16).backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 0.01)
        opt.step()

    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return min(times), sorted(times)[len(times) // 2]


def count_flops(batch: int) -> tuple[float, float]:
    """(forward FLOPs per image, FLOPs of one forward+backward step) counted by FlopCounterMode."""
    net = ConceptUNet(ModelConfig(), PROMPT_DIM).train()
    z, t, p, eps = make_batch(batch, channels_last=False)
    with FlopCounterMode(display=False) as counter:
        with torch.no_grad():
            net(z, t, p)
    forward = counter.get_total_flops() / batch
    with FlopCounterMode(display=False) as counter:
        loss_fn(net, z, t, p, eps, bf16=False).backward()
    return forward, counter.get_total_flops()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per variant (best and median reported)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    state = ConceptUNet(ModelConfig(), PROMPT_DIM).state_dict()
    forward_flops, step_flops = count_flops(args.batch)
    peak = {False: dense_peak_gflops(torch.float32), True: dense_peak_gflops(torch.bfloat16)}
    print(f"ConceptUNet paper config: {count_parameters(ConceptUNet(ModelConfig(), PROMPT_DIM)):,} parameters")
    print(f"cpu: {cpu_description()}")
    print(f"threads {args.threads}, batch {args.batch}, {IMAGE_SIZE}×{IMAGE_SIZE}, prompt_dim {PROMPT_DIM}")
    print(f"forward {forward_flops / 1e9:.2f} GFLOP/image (spec: 2.33); train step {step_flops / 1e9:.1f} GFLOP")
    print(
        f"dense-kernel peak (best of a 4096² matmul and a 1×1 conv): fp32 {peak[False]:.0f} GFLOP/s, "
        f"bf16 {peak[True]:.0f} GFLOP/s"
    )
    print(f"reference: authors' code {REFERENCE_S_PER_STEP} s/step measured on this machine (batch 64)")
    print("s/step: best (median) of --steps; GFLOP/s, fraction of that peak and speedup use the best")
    print(f"{'variant':<30}{'s/step':>16}{'GFLOP/s':>9}{'of peak':>9}{'speedup':>9}")
    results = {}
    for variant in VARIANTS:
        best, median = results[variant.name] = time_variant(variant, state, args.batch, args.steps, args.warmup)
        gflops = step_flops / best / 1e9
        print(
            f"{variant.name:<30}{best:>7.2f} ({median:>6.2f}){gflops:>9.0f}{gflops / peak[variant.bf16]:>9.0%}"
            f"{REFERENCE_S_PER_STEP / best:>8.2f}×",
            flush=True,
        )
    fastest = min(results, key=lambda name: results[name][0])
    best = results[fastest][0]
    print(f"fastest: {fastest}, {best:.2f} s/step = {REFERENCE_S_PER_STEP / best:.2f}× faster than the reference")


if __name__ == "__main__":
    main()
