"""A stochastic (ancestral) sampler that forks: run roots from noise to generation time τ, then K independent endings.

Generation time τ = 1 − t (τ = 0 pure noise, τ = 1 data; t is the process's time, t = 0 data). The time grid is the
uniform grid of `steps` steps on t ∈ [0, 1] with every fork time t = 1 − τ inserted, so each fork happens exactly at
the requested τ. One root trajectory per prompt row is run once; at each fork τ (in increasing order) its state z_τ is
copied K times and each copy continues to t = 0 with its own noise. The step from t to s < t samples the posterior
q(z_s | z_t, x = x̂) of the process (needs only `logsnr` and `alpha_sigma`, so VE in its VP form, VDM and cosine all
work):
    c = 1 − SNR(t)/SNR(s),  z_s = (α_s/α_t)(1 − c) z_t + α_s c x̂ + √c σ_s ξ,
and the last step returns x̂ (model space). Given a `torch.Generator` everything is deterministic: the root noise,
then for each fork in τ order the endings' noise, are drawn in a fixed order.

The denoiser is any callable (z [M, ...], t [M], prompt [M, P]) → x̂_0 [M, ...]; `network_denoiser` builds one from
a process and a network (via `models.sampling.guided_output`, so hook points see a `SamplingContext`), and
`VarianceExploding.model_denoiser` one from an exact VE denoiser.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Callable, Iterator, Protocol, Sequence

import torch
from torch import Tensor

from conceptlab.models.diffusion import Network
from conceptlab.models.sampling import ancestral_step, check_sample_steps, guided_output

Denoiser = Callable[[Tensor, Tensor, Tensor], Tensor]  # (z [M, ...], t [M], prompt [M, P]) → x̂_0 [M, ...]


class Schedule(Protocol):
    """What the forking sampler needs from a diffusion process."""

    def logsnr(self, t: Tensor) -> Tensor: ...

    def alpha_sigma(self, t: Tensor) -> tuple[Tensor, Tensor]: ...


@dataclass
class Fork:
    """The K endings of every root forked at generation time τ."""

    tau: float
    t: float  # process time 1 − τ
    roots: Tensor  # [R, ...] the roots' state z at the fork
    endings: Tensor  # [R, K, ...] final samples x̂_0 (model space)


def check_taus(taus: Sequence[float]) -> list[float]:
    """Fork times as floats; ValueError if any lies outside [0, 1] or they are not strictly increasing."""
    values = [float(x) for x in taus]
    if not values:
        raise ValueError("need at least one fork time tau")
    bad = [x for x in values if not 0.0 <= x <= 1.0]
    if bad:
        raise ValueError(f"fork times tau must lie in [0, 1] (0 = noise, 1 = data), got {bad}")
    if any(b <= a for a, b in pairwise(values)):
        raise ValueError(f"fork times tau must be strictly increasing, got {values}")
    return values


def time_grid(steps: int, taus: Sequence[float]) -> list[float]:
    """Process times from 1 to 0: the uniform grid of `steps` steps with every 1 − τ inserted (duplicates merged)."""
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    points = {round(i / steps, 12) for i in range(steps + 1)} | {round(1.0 - x, 12) for x in taus}
    return sorted(points, reverse=True)


def _step(
    schedule: Schedule, denoiser: Denoiser, z: Tensor, t: float, s: float, prompt: Tensor,
    generator: torch.Generator | None, clip: bool,
) -> Tensor:
    """One ancestral step t → s (s = 0: return x̂), the denoiser evaluated at t; `models.sampling.ancestral_step`."""
    n = z.shape[0]
    t_rows = torch.full((n,), t, device=z.device)
    x_hat = denoiser(z, t_rows, prompt)
    if clip:
        x_hat = x_hat.clamp(-1.0, 1.0)
    return ancestral_step(schedule, z, x_hat, t, s, generator)


def _run(
    schedule: Schedule, denoiser: Denoiser, z: Tensor, grid: list[float], prompt: Tensor,
    generator: torch.Generator | None, clip: bool,
) -> Tensor:
    for t, s in pairwise(grid):
        z = _step(schedule, denoiser, z, t, s, prompt, generator, clip)
    return z


@torch.inference_mode()
def iter_forks(
    process: Schedule,
    denoiser: Denoiser,
    prompt: Tensor,
    image_shape: tuple[int, ...],
    taus: Sequence[float],
    forks: int,
    steps: int = 50,
    generator: torch.Generator | None = None,
    clip_denoised: bool = True,
) -> Iterator[Fork]:
    """For each fork time τ (increasing), the K = `forks` endings of every root (one root per prompt row)."""
    if forks < 2:
        raise ValueError(f"forks (K) must be ≥ 2, got {forks}")
    if prompt.dim() != 2:
        raise ValueError(f"prompt must be [roots, P], got {tuple(prompt.shape)}")
    fork_taus = check_taus(taus)
    check_sample_steps(process, steps)
    grid = time_grid(steps, fork_taus)
    check_times = getattr(process, "check_sample_times", None)  # a DDPM: every time a step of its chain
    if check_times is not None:
        check_times(grid)
    roots, device = prompt.shape[0], prompt.device
    z = torch.randn((roots, *image_shape), generator=generator, device=device)
    position = 0  # index in grid of the roots' current time
    fork_prompt = prompt.repeat_interleave(forks, dim=0)
    for tau in fork_taus:
        target = grid.index(round(1.0 - tau, 12))
        z = _run(process, denoiser, z, grid[position : target + 1], prompt, generator, clip_denoised)
        position = target
        if target == len(grid) - 1:  # τ = 1: the root is finished, every ending is the root
            endings = z.unsqueeze(1).expand(roots, forks, *z.shape[1:]).clone()
        else:
            copies = z.repeat_interleave(forks, dim=0)
            endings = _run(process, denoiser, copies, grid[target:], fork_prompt, generator, clip_denoised)
            endings = endings.reshape(roots, forks, *endings.shape[1:])
        yield Fork(tau=tau, t=grid[target], roots=z.clone(), endings=endings)


def fork_sample(
    process: Schedule,
    denoiser: Denoiser,
    prompt: Tensor,
    image_shape: tuple[int, ...],
    tau: float,
    forks: int,
    steps: int = 50,
    generator: torch.Generator | None = None,
    clip_denoised: bool = True,
) -> Fork:
    """Run every root to τ, then K independent endings: `Fork.endings` is [roots, K, ...]."""
    return next(iter_forks(process, denoiser, prompt, image_shape, [tau], forks, steps, generator, clip_denoised))


def network_denoiser(
    process, net: Network, guidance_scale: float = 0.0, null_prompt: Tensor | None = None
) -> Denoiser:
    """x̂_0 of a network under a process (`raw_to_x_eps` of the guided output), publishing the sampling context."""

    def denoiser(z: Tensor, t: Tensor, prompt: Tensor) -> Tensor:
        out = guided_output(process, net, z, t, prompt, guidance_scale, null_prompt)
        x_hat, _ = process.raw_to_x_eps(out, z, t)
        return x_hat

    return denoiser
