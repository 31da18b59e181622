"""Mutual information between a latent attribute V and the noisy generative path, from VE denoiser differences.

Variance-exploding (VE) process, forward (diffusion) time t ∈ [0, 1]: x_t = x_0 + σ(t) ε with σ increasing from
σ_min (t = 0, data) to σ_max (t = 1, noise) and g(t)² = dσ²/dt. Generation runs backwards; we index it by the
**generation time τ = 1 − t**: τ = 0 is pure noise (σ_max), τ = 1 is data (σ_min).

The mutual information accumulated along generation up to τ is (Franzese et al., "Latent Abstractions in Generative
Diffusion Models")

    I(V; Y_{0..τ}) = ½ ∫_{1−τ}^{1} g(t)² E‖∇log p_t(x|v) − ∇log p_t(x)‖² dt
                   = ∫_{1−τ}^{1} g(t)² / (2σ(t)⁴) · E‖D(x_t, σ, v) − D(x_t, σ)‖² dt,

since a VE denoiser D gives the score (D − x)/σ², so the score difference is (D_cond − D_uncond)/σ². The expectation
is over (x_0, v) from the data and x_t = x_0 + σ(t) ε. The noisy path is Markov, so this equals
I(V; X_{σ(τ)}) − I(V; X_{σ_max}); the offset is ≈ ‖spread of the class means‖²/(2σ_max²) and vanishes for large
σ_max. It rises from 0 at τ = 0 towards H(V) (ln K for a uniform K-valued attribute) once V is committed.

The integral is taken by the midpoint rule over `points` equal τ-cells (paper: 999), each midpoint estimated by Monte
Carlo with `samples_per_point` fresh draws; the result is an `MICurve` over τ, σ and SNR = 1/σ².

With a trained network this estimate is biased upwards: any error of the network enters squared, and the weight
g²/(2σ⁴) grows without bound as σ → 0, so an imperfect pair of denoisers keeps adding information after V is
committed and the curve overshoots H(V) (measured on `abstractions-tiny`: 9 nats for a 10-valued hue after 3,000
steps, 17 after 1,000). `posterior_bound_curve` is the check that cannot overshoot: along forward-noised paths of the
data it computes the model's own posterior q(v | path) from the conditional denoisers' reverse (ancestral) kernels,
and H(V) − E[−log q(v | path)] is a lower bound on I(V; X_σ) for *any* q (Barber & Agakov), tight when q is the true
posterior. It saturates at H(V) when the model separates the classes, costs K denoiser calls per path and noise level
(K = number of values of V), and needs no unconditional denoiser.

`GaussianMixture` is an analytic test bed: K classes with means μ_k, isotropic std s, uniform prior; its exact
conditional and unconditional VE denoisers and its exact I(V; X_σ) (by Rao–Blackwellised Monte Carlo) check the
estimator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import torch
from torch import Tensor

DenoiseCond = Callable[[Tensor, Tensor, Tensor], Tensor]  # (x [N,...], σ [N], v [N,...]) → x̂_0 [N,...]
DenoiseUncond = Callable[[Tensor, Tensor], Tensor]  # (x [N,...], σ [N]) → x̂_0 [N,...]
PairSampler = Callable[[int, torch.Generator], tuple[Tensor, Tensor]]  # (n, generator) → (x_0 [n,...], v [n,...])


class VESchedule(Protocol):
    """A VE noise schedule on forward time t ∈ [0, 1]: σ(t) increasing, g(t)² = dσ²/dt."""

    def sigma(self, t: Tensor) -> Tensor: ...

    def g2(self, t: Tensor) -> Tensor: ...


@dataclass(frozen=True)
class GeometricSchedule:
    """σ(t) = σ_min (σ_max/σ_min)^t (Song et al.'s VE SDE), so g² = 2σ² ln(σ_max/σ_min)."""

    sigma_min: float = 0.01
    sigma_max: float = 50.0

    def __post_init__(self) -> None:
        if not 0 < self.sigma_min < self.sigma_max:
            raise ValueError(f"need 0 < sigma_min < sigma_max, got {self.sigma_min}, {self.sigma_max}")

    def sigma(self, t: Tensor) -> Tensor:
        return self.sigma_min * (self.sigma_max / self.sigma_min) ** t

    def g2(self, t: Tensor) -> Tensor:
        return 2.0 * self.sigma(t) ** 2 * math.log(self.sigma_max / self.sigma_min)


def _check_tau(tau: Tensor) -> None:
    if not bool(((tau >= 0) & (tau <= 1)).all()):
        raise ValueError(f"generation time tau must lie in [0, 1], got {tau.tolist()}")


@dataclass
class MICurve:
    """I(V; Y_{0..τ}) on the τ grid (cell edges, τ = 0 noise → τ = 1 data), with σ, SNR and Monte Carlo std error."""

    tau: Tensor  # [P+1] generation time, 0 … 1
    sigma: Tensor  # [P+1] σ(t = 1 − τ), σ_max … σ_min
    mi: Tensor  # [P+1] nats, mi[0] = 0, non-decreasing
    stderr: Tensor  # [P+1] Monte Carlo standard error of mi
    integrand: Tensor  # [P] dI/dτ per cell: g²/(2σ⁴) E‖D_c − D_u‖² at the midpoints (difference estimator)
    units: Tensor | None = None  # [P+1, U] per-unit contributions whose mean over U is `mi` (see the estimators)

    @property
    def snr(self) -> Tensor:
        return self.sigma**-2

    @property
    def logsnr(self) -> Tensor:
        return -2.0 * self.sigma.log()

    def at(self, tau: float | Tensor) -> Tensor:
        """The curve at generation time(s) τ ∈ [0, 1], linearly interpolated between grid edges."""
        tau = torch.as_tensor(tau, dtype=self.tau.dtype)
        _check_tau(tau)
        pos = tau * (self.tau.numel() - 1)
        lo = pos.floor().long().clamp(max=self.tau.numel() - 2)
        w = pos - lo
        return (1 - w) * self.mi[lo] + w * self.mi[lo + 1]


@torch.no_grad()
def mutual_information_curve(
    denoise_cond: DenoiseCond,
    denoise_uncond: DenoiseUncond,
    sample_pairs: PairSampler,
    schedule: VESchedule,
    points: int = 999,
    samples_per_point: int = 64,
    batch_size: int = 4096,
    seed: int = 0,
) -> MICurve:
    """The denoiser-difference estimate of I(V; Y_{0..τ}) along generation, midpoint rule over `points` τ-cells.

    The denoisers receive σ as a tensor [N] (one value per row, rows of several midpoints share a batch).
    `units` [P+1, samples_per_point]: the s-th draw of every cell summed along τ (its running midpoint sum), so `mi`
    is their mean; two networks measured with the same `seed` see the same draws at every (cell, s), so their units
    pair (`analysis.commitment.paired_stderr`).
    """
    if points <= 0 or samples_per_point <= 0 or batch_size <= 0:
        raise ValueError(f"points, samples_per_point and batch_size must be positive, got {points}, "
                         f"{samples_per_point}, {batch_size}")
    gen = torch.Generator().manual_seed(seed)
    tau_mid = (torch.arange(points, dtype=torch.float64) + 0.5) / points
    t_mid = 1.0 - tau_mid
    weight = schedule.g2(t_mid) / (2.0 * schedule.sigma(t_mid) ** 4)  # per unit τ (dt = −dτ)
    rows = t_mid.repeat_interleave(samples_per_point)
    sq = torch.empty(rows.numel(), dtype=torch.float64)
    for start in range(0, rows.numel(), batch_size):
        t = rows[start : start + batch_size]
        x0, v = sample_pairs(t.numel(), gen)
        sigma = schedule.sigma(t).to(x0.dtype)
        noise = torch.randn(x0.shape, generator=gen, dtype=x0.dtype).to(x0.device)
        x = x0 + sigma.to(x0.device).reshape(-1, *([1] * (x0.dim() - 1))) * noise
        s = sigma.to(x0.device)
        diff = denoise_cond(x, s, v) - denoise_uncond(x, s)
        sq[start : start + t.numel()] = diff.flatten(1).pow(2).sum(1).double().cpu()
    sq = sq.reshape(points, samples_per_point)
    integrand = weight * sq.mean(1)
    var = (weight**2 * sq.var(1) / samples_per_point) if samples_per_point > 1 else torch.zeros(points)
    zero = torch.zeros(1, dtype=torch.float64)
    tau = torch.linspace(0.0, 1.0, points + 1, dtype=torch.float64)
    return MICurve(
        tau=tau,
        sigma=schedule.sigma(1.0 - tau),
        mi=torch.cat([zero, (integrand / points).cumsum(0)]),
        stderr=torch.cat([zero, (var / points**2).cumsum(0).sqrt()]),
        integrand=integrand,
        units=torch.cat([torch.zeros(1, samples_per_point, dtype=torch.float64),
                         (weight[:, None] * sq / points).cumsum(0)]),
    )


@torch.no_grad()
def posterior_bound_curve(
    denoise_cond: DenoiseCond,
    sample_pairs: PairSampler,
    schedule: VESchedule,
    num_classes: int,
    points: int = 200,
    paths: int = 64,
    batch_size: int = 4096,
    seed: int = 0,
    prior: Tensor | None = None,
) -> MICurve:
    """Lower bound H(V) − E[−log q(v | x_σ, …, x_σmax)] on I(V; X_σ) along generation, on the τ grid of `points` cells.

    Each of `paths` data pairs (x_0, v) is noised forward along the grid (x at σ_max, …, σ_min: one Brownian path in
    σ²). Walking the path from σ_max down, every class k scores the step σ_i → σ_{i+1} with the ancestral kernel of its
    conditional denoiser, N(a x_i + (1 − a) D(x_i, σ_i, k), σ_{i+1}²(1 − a)) with a = σ_{i+1}²/σ_i²; the running sum
    of log-likelihoods plus log prior, normalised over k, is q(k | path so far). `prior` [K] defaults to uniform.
    The denoiser receives v as class indices [N] (all K values of every path, `batch_size` rows per call).
    `units` [P+1, paths]: each path's H(V) − (−log q(v | path)), whose mean is `mi`; paired across networks measured
    with the same `seed` (the same data pairs and noise).
    """
    if points <= 0 or paths <= 0 or batch_size <= 0 or num_classes < 2:
        raise ValueError(f"points, paths and batch_size must be positive and num_classes ≥ 2, got {points}, {paths}, "
                         f"{batch_size}, {num_classes}")
    k = num_classes
    log_prior = (torch.full((k,), -math.log(k), dtype=torch.float64) if prior is None
                 else torch.as_tensor(prior, dtype=torch.float64).clamp_min(1e-300).log())
    if log_prior.numel() != k:
        raise ValueError(f"prior has {log_prior.numel()} entries for {k} classes")
    log_prior = log_prior - torch.logsumexp(log_prior, 0)
    entropy = float(-(log_prior.exp() * log_prior).sum())
    gen = torch.Generator().manual_seed(seed)
    tau = torch.linspace(0.0, 1.0, points + 1, dtype=torch.float64)
    sigma = schedule.sigma(1.0 - tau)  # σ_max … σ_min
    ce = torch.empty(points + 1, paths, dtype=torch.float64)  # −log q(v_true | path down to σ_i)
    per_call = max(1, batch_size // k)
    for start in range(0, paths, per_call):
        n = min(per_call, paths - start)
        x0, v = sample_pairs(n, gen)
        v = v.cpu().long()
        # the forward path, from σ_min up to σ_max (independent Gaussian increments in σ²)
        path = [None] * (points + 1)
        x = x0 + float(sigma[points]) * torch.randn(x0.shape, generator=gen, dtype=x0.dtype).to(x0.device)
        path[points] = x
        for i in range(points - 1, -1, -1):
            step = float((sigma[i] ** 2 - sigma[i + 1] ** 2).sqrt())
            x = x + step * torch.randn(x0.shape, generator=gen, dtype=x0.dtype).to(x0.device)
            path[i] = x
        classes = torch.arange(k).repeat_interleave(n).to(x0.device)
        log_lik = log_prior.expand(n, k).clone()
        ce[0, start : start + n] = -log_lik[torch.arange(n), v]
        for i in range(points):
            a = float(sigma[i + 1] ** 2 / sigma[i] ** 2)
            var = float(sigma[i + 1] ** 2) * (1.0 - a)
            here = path[i].repeat(k, *([1] * (x0.dim() - 1)))
            s = sigma[i].to(x0.dtype).expand(n * k).to(x0.device)
            denoised = denoise_cond(here, s, classes)
            resid = path[i + 1].repeat(k, *([1] * (x0.dim() - 1))) - (a * here + (1.0 - a) * denoised)
            log_lik -= resid.flatten(1).pow(2).sum(1).double().cpu().reshape(k, n).T / (2.0 * var)
            ce[i + 1, start : start + n] = -torch.log_softmax(log_lik, 1)[torch.arange(n), v]
    mi = entropy - ce.mean(1)
    stderr = ce.std(1) / math.sqrt(paths) if paths > 1 else torch.zeros(points + 1, dtype=torch.float64)
    stderr[0] = 0.0
    return MICurve(tau=tau, sigma=sigma, mi=mi, stderr=stderr, integrand=mi.diff() * points, units=entropy - ce)


class GaussianMixture:
    """K classes, x_0 | v=k ~ N(μ_k, s² I), uniform prior: exact VE denoisers and exact I(V; X_σ)."""

    def __init__(self, means: Tensor, std: float) -> None:
        if means.dim() != 2 or means.shape[0] < 2 or std <= 0:
            raise ValueError(f"need means [K≥2, d] and std > 0, got {tuple(means.shape)}, {std}")
        self.means = means.double()
        self.std = float(std)

    @property
    def num_classes(self) -> int:
        return self.means.shape[0]

    @property
    def entropy(self) -> float:
        """H(V) = ln K."""
        return math.log(self.num_classes)

    def sample(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """(x_0 [n, d], v [n] long)."""
        v = torch.randint(self.num_classes, (n,), generator=generator)
        x0 = self.means[v] + self.std * torch.randn(n, self.means.shape[1], generator=generator, dtype=torch.float64)
        return x0, v

    def _shrink(self, sigma: Tensor) -> Tensor:
        return (self.std**2 / (self.std**2 + sigma.double() ** 2)).unsqueeze(-1)

    def posterior(self, x: Tensor, sigma: Tensor) -> Tensor:
        """p(v | x_σ) [N, K]."""
        var = (self.std**2 + sigma.double() ** 2).unsqueeze(-1)
        return torch.softmax(-torch.cdist(x.double(), self.means).pow(2) / (2 * var), dim=1)

    def denoise_cond(self, x: Tensor, sigma: Tensor, v: Tensor) -> Tensor:
        """E[x_0 | x_σ, v] = μ_v + s²/(s²+σ²)(x − μ_v)."""
        mu = self.means[v]
        return mu + self._shrink(sigma) * (x.double() - mu)

    def denoise_uncond(self, x: Tensor, sigma: Tensor) -> Tensor:
        """E[x_0 | x_σ] = Σ_k p(k|x) E[x_0 | x_σ, k]."""
        mean_mu = self.posterior(x, sigma) @ self.means
        return mean_mu + self._shrink(sigma) * (x.double() - mean_mu)

    def mutual_information(self, sigma: float, samples: int = 400_000, seed: int = 0) -> float:
        """I(V; X_σ) = ln K − E_x H(p(v|x_σ)), Monte Carlo over x_σ (std error ≤ ln K / √samples, ~1e-3 by default)."""
        gen = torch.Generator().manual_seed(seed)
        x0, _ = self.sample(samples, gen)
        x = x0 + sigma * torch.randn(x0.shape, generator=gen, dtype=torch.float64)
        post = self.posterior(x, torch.full((samples,), float(sigma)))
        cond_entropy = -(post * post.clamp_min(1e-300).log()).sum(1).mean()
        return self.entropy - float(cond_entropy)
