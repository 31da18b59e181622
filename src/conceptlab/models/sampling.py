"""Ancestral sampling with classifier-free guidance, as a generator that yields every step.

`iter_ancestral` walks t from 1 to 0 on a uniform grid and yields a `SamplerStep`
{step, t, z, denoised} after each update (k-diffusion's callback idea,
smalldiffusion's generator idea): analysis code sees every x_t without forking
the sampler. `ancestral_sample` runs it to the end and returns images in [0,1].

The step from t to s < t (`ancestral_step`, also the forking sampler's) samples q(z_s | z_t, x = x̂):
    c = 1 − SNR(t)/SNR(s),  mean = (α_s/α_t)(1 − c) z_t + α_s c x̂,  var = c σ_s².
Guidance mixes the conditional and unconditional network outputs as
(1 + w)·cond − w·uncond (w = 0: plain conditional sampling), evaluated in one
batched forward pass over [cond; uncond]. Each pass publishes a
`hooks.SamplingContext` (t, step, which rows are the conditional branch) to the
network's hook points, so hooks can be restricted by time and branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import torch
from torch import Tensor

from conceptlab.hooks import SamplingContext, sampling_context
from conceptlab.models.diffusion import DiffusionProcess, Network


class NoiseStreams:
    """Independent noise per block of rows: `generators[i]` draws the noise of the i-th block of `rows[i]` rows, so
    one block's images do not depend on what the other blocks are (e.g. one stream per intervention variant in a
    batched pass). Pass it where a sampler takes a `torch.Generator`."""

    def __init__(self, generators: list[torch.Generator], rows: list[int]):
        if len(generators) != len(rows) or not generators:
            raise ValueError(f"need one generator per block of rows, got {len(generators)} and {len(rows)}")
        self.generators, self.rows = list(generators), [int(r) for r in rows]

    def randn(self, shape: tuple[int, ...], device=None, dtype=None) -> Tensor:
        if shape[0] != sum(self.rows):
            raise ValueError(f"noise for {shape[0]} rows asked of streams covering {sum(self.rows)}")
        return torch.cat([torch.randn((r, *shape[1:]), generator=g, device=device, dtype=dtype)
                          for g, r in zip(self.generators, self.rows)])


def draw_noise(shape: tuple[int, ...], generator: torch.Generator | NoiseStreams | None, device=None,
               dtype=None) -> Tensor:
    """Standard normal noise of `shape` from a generator, per-block `NoiseStreams`, or the global generator."""
    if isinstance(generator, NoiseStreams):
        return generator.randn(tuple(shape), device=device, dtype=dtype)
    return torch.randn(shape, generator=generator, device=device, dtype=dtype)


def check_sample_steps(process, steps: int) -> None:
    """ValueError unless `steps` ≥ 1 and the process can be sampled on a uniform grid of that many steps (its
    `check_sample_steps`, where it has one: a DDPM asks that they divide its T); every sampler's grid is checked."""
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    check = getattr(process, "check_sample_steps", None)
    if check is not None:
        check(steps)


@dataclass
class SamplerStep:
    step: int
    t: float
    z: Tensor
    denoised: Tensor


def guided_output(
    process: DiffusionProcess,
    net: Network,
    z: Tensor,
    t: Tensor,
    prompt: Tensor,
    guidance_scale: float = 0.0,
    null_prompt: Tensor | None = None,
    step: int | None = None,
) -> Tensor:
    """The (guided) network output at z_t, one forward pass for both CFG branches (t: one time for all rows)."""
    n = z.shape[0]
    if guidance_scale == 0.0:
        with sampling_context(net, SamplingContext(t=float(t.reshape(-1)[0]), step=step, n_rows=n, n_cond=n)):
            return process.network_output(net, z, t, prompt)
    if null_prompt is None:
        raise ValueError("classifier-free guidance needs a null prompt")
    null = null_prompt.expand_as(prompt)
    with sampling_context(net, SamplingContext(t=float(t.reshape(-1)[0]), step=step, n_rows=2 * n, n_cond=n)):
        out = process.network_output(net, torch.cat([z, z]), torch.cat([t, t]), torch.cat([prompt, null]))
    cond, uncond = out.chunk(2)
    return (1.0 + guidance_scale) * cond - guidance_scale * uncond


def ancestral_step(
    process, z: Tensor, x_hat: Tensor, t: float, s: float, generator: torch.Generator | None = None
) -> Tensor:
    """One ancestral step from time t to s < t given the denoised estimate x̂: a draw from q(z_s | z_t, x = x̂);
    s = 0 returns x̂ itself. `process` needs only `logsnr` and `alpha_sigma` (any `DiffusionProcess`). The one
    step both samplers take (`iter_ancestral` here, the forking sampler of `models.forking`)."""
    if s <= 0.0:
        return x_hat
    tt = torch.tensor([t], device=z.device)
    ss = torch.tensor([s], device=z.device)
    c = -torch.expm1(process.logsnr(tt) - process.logsnr(ss))
    alpha_t, _ = process.alpha_sigma(tt)
    alpha_s, sigma_s = process.alpha_sigma(ss)
    mean = (alpha_s / alpha_t) * (1.0 - c) * z + alpha_s * c * x_hat
    noise = draw_noise(z.shape, generator, device=z.device, dtype=z.dtype)
    return mean + (c.sqrt() * sigma_s) * noise


@torch.inference_mode()
def iter_ancestral(
    process: DiffusionProcess,
    net: Network,
    prompt: Tensor,
    image_shape: tuple[int, int, int],
    steps: int = 50,
    generator: torch.Generator | None = None,
    guidance_scale: float = 0.0,
    null_prompt: Tensor | None = None,
    clip_denoised: bool = True,
) -> Iterator[SamplerStep]:
    """Yield every step of ancestral sampling for a batch of prompts (one image per prompt)."""
    check_sample_steps(process, steps)
    n = prompt.shape[0]
    device = prompt.device
    z = draw_noise((n, *image_shape), generator, device=device)
    for i in range(steps, 0, -1):
        t_val, s_val = i / steps, (i - 1) / steps
        t = torch.full((n,), t_val, device=device)
        out = guided_output(process, net, z, t, prompt, guidance_scale, null_prompt, step=steps - i)
        x_hat, _ = process.raw_to_x_eps(out, z, t)
        if clip_denoised:
            x_hat = x_hat.clamp(-1.0, 1.0)
        z = ancestral_step(process, z, x_hat, t_val, s_val, generator)
        yield SamplerStep(step=steps - i, t=s_val, z=z, denoised=x_hat)


def ancestral_sample(
    process: DiffusionProcess,
    net: Network,
    prompt: Tensor,
    image_shape: tuple[int, int, int],
    steps: int = 50,
    generator: torch.Generator | None = None,
    guidance_scale: float = 0.0,
    null_prompt: Tensor | None = None,
) -> Tensor:
    """Generate one image per prompt row; returns images in [0, 1]."""
    last = None
    for last in iter_ancestral(process, net, prompt, image_shape, steps, generator, guidance_scale, null_prompt):
        pass
    assert last is not None
    return process.to_image_space(last.z)
