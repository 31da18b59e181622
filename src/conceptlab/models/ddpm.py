"""Discrete DDPM (Ho et al. 2020) as a `DiffusionProcess`: T steps, linear or cosine β, ε-prediction, MSE loss.

The discrete chain has β_1..β_T and ᾱ_k = Π_{i≤k} (1 − β_i), ᾱ_0 = 1, with
z_k = √ᾱ_k x + √(1 − ᾱ_k) ε. It is exposed on the continuous time axis of
`models.diffusion` by **t = k / T**: `logsnr(k/T)` = log(ᾱ_k / (1 − ᾱ_k)) exactly on
the grid, and between grid points log ᾱ is interpolated linearly in k (so λ is
continuous and decreasing, λ(0) = +∞, λ(1) = λ_T). The network receives t = k/T.

Why this makes `models.sampling` a DDPM sampler: the sampler's step from t = k/T
to s = (k−1)/T draws q(z_s | z_t, x̂) with c = 1 − SNR(t)/SNR(s) = β_k / (1 − ᾱ_k),
i.e. mean √ᾱ_{k−1} β_k/(1−ᾱ_k) x̂ + √α_k (1−ᾱ_{k−1})/(1−ᾱ_k) z_k and variance
c σ_s² = β̃_k = β_k (1−ᾱ_{k−1})/(1−ᾱ_k): Ho et al.'s ancestral step with σ_k² = β̃_k.
With `steps = T` the sampler is exactly that chain; with `steps` dividing T it is
the strided chain over every (T/steps)-th step (the same formula on the subsequence).
Other step counts would query the network between grid points, at steps k it never
trained on: `check_sample_steps` refuses them, and the samplers call it.

Training: k uniform on {1..T}, loss = mean ‖ε − ε̂(z_k, k/T, prompt)‖² (Ho's
"simple" loss); the network output is ε̂ itself (no residual, like `CosineDiffusion`).

Classifier-free label dropout is applied where it is for every other process:
by the training loop (`train.trainer`, `DiffusionConfig.cfg_dropout`), which
replaces the whole prompt of a dropped row by the null value; `drop_labels` is the
same operation for loops written by hand. The loss itself never drops labels, so
the two cannot stack. With continuous coordinates as prompts pick a null value
outside the label range and give the same value to `SinusoidalEncoding(null_value=…)`.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import torch
from torch import Tensor

from conceptlab.models.diffusion import DiffusionProcess, Network

Schedule = Literal["linear", "cosine"]


def linear_betas(steps: int, beta_start: float = 1e-4, beta_end: float = 0.02) -> Tensor:
    """β_1..β_T evenly spaced from `beta_start` to `beta_end` (Ho et al.: 1e-4..0.02 for T = 1000), float64."""
    if not 0.0 < beta_start <= beta_end < 1.0:
        raise ValueError(f"need 0 < beta_start ≤ beta_end < 1, got {beta_start}, {beta_end}")
    return torch.linspace(beta_start, beta_end, steps, dtype=torch.float64)


def cosine_betas(steps: int, offset: float = 0.008, max_beta: float = 0.999) -> Tensor:
    """β_k = 1 − ᾱ_k/ᾱ_{k−1} with ᾱ(k) ∝ cos²(π/2 · (k/T + s)/(1 + s)) (Nichol & Dhariwal), clipped to max_beta."""
    if offset < 0 or not 0.0 < max_beta < 1.0:
        raise ValueError(f"need offset ≥ 0 and 0 < max_beta < 1, got {offset}, {max_beta}")
    k = torch.arange(steps + 1, dtype=torch.float64)
    f = torch.cos((k / steps + offset) / (1 + offset) * math.pi / 2) ** 2
    return (1.0 - f[1:] / f[:-1]).clamp(min=0.0, max=max_beta)


class DDPM(DiffusionProcess):
    """Discrete DDPM with fixed β_1..β_T; time t = k/T; ε-prediction; unweighted MSE ("simple") loss."""

    prediction = "eps"

    def __init__(self, betas: Tensor) -> None:
        super().__init__()
        betas = torch.as_tensor(betas, dtype=torch.float64).flatten()
        if len(betas) < 1 or not bool(((betas > 0) & (betas < 1)).all()):
            raise ValueError("betas must be a non-empty sequence of values in (0, 1)")
        self.steps = len(betas)
        log_abar = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(torch.log1p(-betas), 0)])
        self.register_buffer("betas", betas, persistent=False)
        self.register_buffer("log_alphas_cumprod", log_abar, persistent=False)  # [T + 1], entry k = log ᾱ_k

    @property
    def alphas_cumprod(self) -> Tensor:
        """ᾱ_0..ᾱ_T (ᾱ_0 = 1), float64."""
        return self.log_alphas_cumprod.exp()

    def time_of_step(self, k: Tensor | int) -> Tensor:
        """t = k / T."""
        return torch.as_tensor(k, dtype=torch.float32, device=self.betas.device) / self.steps

    def check_sample_steps(self, steps: int) -> None:
        """ValueError unless `steps` divides T, so every time a sampler visits is a step k the network trained on."""
        if steps < 1 or self.steps % steps:
            raise ValueError(f"ddpm: sample steps ({steps}) must divide the chain's T = {self.steps} steps "
                             f"(diffusion.ddpm_steps); other grids query the network at steps it never trained on")

    def check_sample_times(self, times: Sequence[float]) -> None:
        """ValueError unless every process time t is a step k/T of the chain (the forking sampler inserts each fork
        time 1 − τ into its grid: one between two steps would query the network at a step it never trained on)."""
        off = [t for t in times if abs(t * self.steps - round(t * self.steps)) > 1e-6]
        if off:
            taus = ", ".join(f"{1.0 - t:g}" for t in off)
            raise ValueError(f"ddpm: fork time(s) tau = {taus} fall between the chain's T = {self.steps} steps "
                             f"(diffusion.ddpm_steps); pick taus that are multiples of 1/{self.steps}")

    def step_of_time(self, t: Tensor) -> Tensor:
        """The nearest discrete step k = round(t·T) (long)."""
        return torch.round(t.double() * self.steps).long()

    def _log_abar(self, t: Tensor) -> Tensor:
        """log ᾱ at continuous t, linear in k = t·T between grid points (float64)."""
        k = (t.double() * self.steps).clamp(0.0, float(self.steps))
        k0 = k.floor().clamp(max=self.steps - 1)
        frac = k - k0
        table = self.log_alphas_cumprod.to(t.device)
        idx = k0.long()
        return table[idx] * (1.0 - frac) + table[idx + 1] * frac

    def _out_dtype(self, t: Tensor) -> torch.dtype:
        return t.dtype if t.is_floating_point() else torch.float32

    def logsnr(self, t: Tensor) -> Tensor:
        la = self._log_abar(t)
        return (la - torch.log(-torch.expm1(la))).to(self._out_dtype(t))

    def alpha_sigma(self, t: Tensor) -> tuple[Tensor, Tensor]:
        la = self._log_abar(t)
        dtype = self._out_dtype(t)
        return (0.5 * la).exp().to(dtype), (-torch.expm1(la)).sqrt().to(dtype)

    def loss(self, net: Network, x: Tensor, prompt: Tensor, generator: torch.Generator | None):
        """Ho et al.'s simple loss: k ~ U{1..T}, mean ‖ε − ε̂‖²; returns (loss, {"loss"})."""
        n = x.shape[0]
        k = torch.randint(1, self.steps + 1, (n,), generator=generator, device=x.device)
        t = k.float() / self.steps
        eps = torch.randn(x.shape, generator=generator, device=x.device)
        z = self.noise(x, t, eps)
        total = (self.network_output(net, z, t, prompt) - eps).pow(2).mean()
        return total, {"loss": total.detach()}


def build_ddpm(
    steps: int = 1000,
    schedule: Schedule = "linear",
    beta_start: float = 1e-4,
    beta_end: float = 0.02,
    cosine_offset: float = 0.008,
) -> DDPM:
    """A DDPM with T = `steps` and a linear (beta_start..beta_end) or cosine (offset s) β schedule."""
    if steps < 1:
        raise ValueError(f"steps T must be ≥ 1, got {steps}")
    if schedule == "linear":
        return DDPM(linear_betas(steps, beta_start, beta_end))
    if schedule == "cosine":
        return DDPM(cosine_betas(steps, cosine_offset))
    raise ValueError(f"unknown β schedule {schedule!r}; expected 'linear' or 'cosine'")


def drop_labels(
    prompts: Tensor, probability: float, null_value: float = 0.0, generator: torch.Generator | None = None
) -> Tensor:
    """Classifier-free label dropout: each row replaced by the null prompt (all `null_value`) with `probability`.

    The same operation `train.trainer` applies for `DiffusionConfig.cfg_dropout`, for hand-written loops.
    """
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"label dropout probability must be in [0, 1], got {probability}")
    if probability == 0.0:
        return prompts
    device = generator.device if generator is not None else prompts.device
    drop = (torch.rand(prompts.shape[0], generator=generator, device=device) < probability).to(prompts.device)
    return torch.where(drop[:, None], torch.full_like(prompts, null_value), prompts)
