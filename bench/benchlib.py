"""What the benchmarks share: the machine's description, interleaved timing, ratio lines, a dense-kernel peak, and
the reference: the paper's network and loss in the authors' regime, written here from the spec
(`specs/concept_space.md`), not taken from their code.

The rule every bench follows: a speed claim is a ratio against a reference measured in the same process, the two
interleaved (A B A B …, at least 3 repetitions each), reported as min / median / max, never a constant measured
elsewhere. The reference regime (the authors' code as the spec describes it):

- the same network (`build_network` of the preset's `model`, with torch's Bernoulli dropout whatever
  `model.dropout_mask` says), fp32, eager, default memory format;
- the VDM loss: antithetic times, learned linear γ(t) = b + |w|t, ε̂ = UNet(z_t, (γ_t − γ_min)/(γ_max − γ_min)) + z_t,
  diffusion + prior + Gaussian reconstruction terms in bits per dim;
- AdamW (the preset's lr and weight decay, torch's default implementation), global grad-norm clip (the preset's);
- sampling: 50-step ancestral sampler under `torch.no_grad`, one class at a time in batches of 32, fp32.
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from conceptlab.experiments.loading import load_config
from conceptlab.studies import build_data
from conceptlab.train.precision import cpu_has_native_bf16

ROOT = Path(__file__).resolve().parent.parent


# -- the machine ----------------------------------------------------------------------------------------------------
def cpu_model() -> str:
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "") if out.returncode == 0 else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def print_environment(threads: int) -> None:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cpu: {cpu_model()}, native bf16: {'yes' if cpu_has_native_bf16() else 'no (bf16 emulated)'}, "
          f"{os.cpu_count()} logical cores, load average {load:.2f} at start")
    print(f"torch {torch.__version__}, {threads} threads, python {sys.version.split()[0]}, "
          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {git_commit()}")


def add_common_arguments(parser, preset: str) -> None:
    parser.add_argument("--preset", default=preset, help=f"run config whose network and settings to use ({preset})")
    parser.add_argument("--set", dest="overrides", nargs="*", default=[], metavar="KEY=VALUE",
                        help="config overrides, as `conceptlab` takes them (e.g. model.widths=[16,32])")
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions of each side (≥ 3 for a claim)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--quick", action="store_true", help="the smallest mode: seconds, for tests; no claim")


def load(preset: str, overrides: list[str]):
    """(config, data-generating process) of a preset plus overrides."""
    cfg = load_config(preset, list(overrides))
    return cfg, build_data(cfg.data)


# -- timing ---------------------------------------------------------------------------------------------------------
def interleaved(sides: dict[str, Callable[[], object]], reps: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of each call, the sides run in turn (A B A B …) `reps` times after `warmup` untimed rounds."""
    for _ in range(warmup):
        for fn in sides.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for rep in range(reps):
        for name, fn in sides.items():
            began = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - began)
        print(f"  round {rep + 1}/{reps}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()),
              file=sys.stderr, flush=True)
    return times


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def fmt_spread(values: list[float], unit: str, scale: float = 1.0, digits: int = 3) -> str:
    lo, mid, hi = (v * scale for v in spread(values))
    return f"min {lo:.{digits}f} / median {mid:.{digits}f} / max {hi:.{digits}f} {unit}"


def ratio_line(what: str, reference: list[float], ours: list[float]) -> str:
    """reference seconds / ours seconds: median over median, and the range from the worst pairing (the reference's
    fastest over our slowest) to the best (its slowest over our fastest)."""
    mid = statistics.median(reference) / statistics.median(ours)
    low, high = min(reference) / max(ours), max(reference) / min(ours)
    return f"ratio {what} (reference/ours): {mid:.2f}x median/median, range {low:.2f}-{high:.2f}x (min/max-based)"


# -- a dense-kernel peak --------------------------------------------------------------------------------------------
def dense_peak(dtype: torch.dtype, n: int, reps: int) -> dict[str, float]:
    """Best GFLOP/s of an n×n matmul (BLAS) and of a 1×1 convolution of the same work (oneDNN) in `dtype`, in this
    process. Both, because on some CPUs one library is much slower than the other (on an AMD EPYC MKL's fp32 matmul
    reached less than the UNet's own convolutions)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    rows = max(1, n // 64)
    x, w = torch.randn(rows, n, 8, 8, dtype=dtype), torch.randn(n, n, 1, 1, dtype=dtype)
    kernels = {"matmul": (lambda: a @ b, 2 * n**3), "conv1x1": (lambda: nn.functional.conv2d(x, w), 2 * rows * 64 * n * n)}
    out = {}
    for name, (fn, flops) in kernels.items():
        fn()
        best = math.inf
        for _ in range(reps):
            began = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - began)
        out[name] = flops / best / 1e9
    return out


# -- the reference (the authors' regime, from the spec) ---------------------------------------------------------------
class ReferenceVDM(nn.Module):
    """The spec's VDM around a network: learned linear γ, ε-prediction with the output added to the input, the
    network given the normalised log-SNR, continuous-time VLB with a Gaussian reconstruction term."""

    def __init__(self, net: nn.Module, gamma_min: float, gamma_max: float, data_noise: float):
        super().__init__()
        self.net, self.gamma_min, self.gamma_max, self.data_noise = net, gamma_min, gamma_max, data_noise
        self.b = nn.Parameter(torch.tensor(float(gamma_min)))
        self.w = nn.Parameter(torch.tensor(float(gamma_max - gamma_min)))

    def gamma(self, t: Tensor) -> Tensor:
        return self.b + self.w.abs() * t

    def eps_hat(self, z: Tensor, gamma_t: Tensor, p: Tensor) -> Tensor:
        return self.net(z, (gamma_t - self.gamma_min) / (self.gamma_max - self.gamma_min), p) + z

    def loss(self, x: Tensor, p: Tensor) -> Tensor:
        """x in [−1, 1]; mean over the batch of the VLB in bits per dim."""
        n = x.shape[0]
        t = (torch.rand(()) / n + torch.arange(n) / n) % 1.0
        g = self.gamma(t)[:, None, None, None]
        alpha, sigma = torch.sigmoid(-g).sqrt(), torch.sigmoid(g).sqrt()
        eps = torch.randn_like(x)
        pred = self.eps_hat(alpha * x + sigma * eps, g.flatten(), p)
        diffusion = 0.5 * self.w.abs() * (pred - eps).pow(2).flatten(1).sum(1)
        s1_sq = torch.sigmoid(self.gamma(torch.ones(1)))
        prior = 0.5 * (s1_sq + (1 - s1_sq) * x**2 - torch.log(s1_sq) - 1).flatten(1).sum(1)
        g0 = self.gamma(torch.zeros(1))
        a0, s0 = torch.sigmoid(-g0).sqrt(), torch.sigmoid(g0).sqrt()
        z0 = a0 * x + s0 * torch.randn_like(x)
        recon = -torch.distributions.Normal(z0 / a0, self.data_noise).log_prob(x).flatten(1).sum(1)
        return ((diffusion + prior + recon) / (x[0].numel() * math.log(2))).mean()

    @torch.no_grad()
    def sample(self, p: Tensor, steps: int, shape: tuple[int, int, int]) -> Tensor:
        """Ancestral sampling from t = 1 to 0 on a uniform grid; images in [0, 1]."""
        z = torch.randn(p.shape[0], *shape)
        grid = torch.linspace(1.0, 0.0, steps + 1)
        for i in range(steps):
            g_t, g_s = self.gamma(grid[i]), self.gamma(grid[i + 1])
            c = -torch.expm1(g_s - g_t)
            a_t, a_s = torch.sigmoid(-g_t).sqrt(), torch.sigmoid(-g_s).sqrt()
            s_t, s_s = torch.sigmoid(g_t).sqrt(), torch.sigmoid(g_s).sqrt()
            eps = self.eps_hat(z, g_t.expand(z.shape[0]), p)
            z = a_s / a_t * (z - c * s_t * eps) + s_s * c.sqrt() * torch.randn_like(z)
        return ((z + 1) / 2).clamp(0, 1)


def reference_model(cfg, net: nn.Module) -> ReferenceVDM:
    d = cfg.diffusion
    return ReferenceVDM(net, d.gamma_min, d.gamma_max, d.data_noise)


def ours_and_reference(cfg, dgp):
    """Our model as a run builds it and the reference VDM around a second network holding the same weights, with
    torch's dropout (a Bernoulli mask) as the authors use it, whatever speed option the preset's `model.dropout_mask`
    picks for ours."""
    from conceptlab.models.diffusion_model import build_model, build_network

    size, channels = cfg.data.image_size, dgp.channels
    ours = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, size, channels, dgp.attribute_sizes, dgp.null_label)
    authors = cfg.model.model_copy(update={"dropout_mask": "bernoulli"})
    net = build_network(authors, dgp.prompt_dim, channels, dgp.null_label)
    net.load_state_dict(ours.net.state_dict())
    return ours, reference_model(cfg, net)


def reference_step(model: ReferenceVDM, optimizer: torch.optim.Optimizer, x: Tensor, p: Tensor,
                   grad_clip: float) -> float:
    """One training step the authors' way: fp32 loss, zero_grad, backward, clip the global grad norm, step."""
    loss = model.loss(x * 2 - 1, p)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return float(loss.detach())
