"""Diffusion processes (noise schedule + loss + output parameterisation), separate from the network.

Every process is described by its log signal-to-noise ratio λ(t) on t ∈ [0, 1]
(λ decreasing, z_t = α_t x + σ_t ε with α² = sigmoid(λ), σ² = sigmoid(−λ)) and by
what the network predicts. The interface (`DiffusionProcess`) is:

- `logsnr(t)`                      → λ(t)
- `denoise(net, z, t, prompt)`     → (x̂, ε̂), the network's reading of z_t
- `loss(net, x, prompt, generator)` → (scalar loss, metrics)
- `to_model_space(images)` / `to_image_space(x)` between [0,1] pixels and [−1,1]

so ancestral sampling (`models.sampling`) works for any of them. A discrete
DDPM or a variance-exploding process plugs in by implementing the same four.

Implemented:
- `VariationalDiffusion`: Kingma et al.'s VDM as used by Park et al. — learned
  linear γ(t) = −λ(t) = b + |w|·t (init γ_min..γ_max), ε-prediction with the
  network output added to its input (ε̂ = net(z_t) + z_t), continuous-time VLB
  (diffusion + prior + reconstruction terms, bits per dim) and antithetic time
  sampling. Two of the authors' choices are switches: the time the network sees
  (`time_input`: t, or their normalised log-SNR) and the reconstruction term
  (Kingma et al.'s discretised Gaussian, or their N(x; z_0/α_0, data_noise²)).
- `CosineDiffusion`: fixed cosine log-SNR λ(t) = −2 log tan(πt/2) clipped to
  [λ_min, λ_max], ε- or v-prediction with an unweighted MSE loss.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import Tensor, nn

Network = Callable[[Tensor, Tensor, Tensor], Tensor]


def antithetic_times(n: int, generator: torch.Generator | None, device=None) -> Tensor:
    """n times in [0,1) evenly spaced with one random offset (low-variance Monte Carlo)."""
    u0 = torch.rand((), generator=generator, device=device)
    return (u0 + torch.arange(n, device=device) / n) % 1.0


def _broadcast(v: Tensor, like: Tensor) -> Tensor:
    return v.reshape(-1, *([1] * (like.dim() - 1)))


class DiffusionProcess(nn.Module):
    """Base class: shared conversions; subclasses define λ(t), the loss and the parameterisation."""

    prediction: str = "eps"

    def logsnr(self, t: Tensor) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_sample_steps(self, steps: int) -> None:
        """ValueError unless a sampler may walk this process on the uniform grid of `steps` steps from t = 1 to 0:
        any number here (continuous time); a discrete chain (`models.ddpm.DDPM`) asks for its own grid."""

    def alpha_sigma(self, t: Tensor) -> tuple[Tensor, Tensor]:
        lam = self.logsnr(t)
        return torch.sigmoid(lam).sqrt(), torch.sigmoid(-lam).sqrt()

    @staticmethod
    def to_model_space(images: Tensor) -> Tensor:
        return images * 2.0 - 1.0

    @staticmethod
    def to_image_space(x: Tensor) -> Tensor:
        return ((x + 1.0) / 2.0).clamp(0.0, 1.0)

    def noise(self, x: Tensor, t: Tensor, eps: Tensor) -> Tensor:
        alpha, sigma = self.alpha_sigma(t)
        return _broadcast(alpha, x) * x + _broadcast(sigma, x) * eps

    def raw_to_x_eps(self, out: Tensor, z: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
        """Network output → (x̂, ε̂) under this process's parameterisation."""
        alpha, sigma = (_broadcast(v, z) for v in self.alpha_sigma(t))
        if self.prediction == "v":
            return alpha * z - sigma * out, sigma * z + alpha * out
        eps = out
        return (z - sigma * eps) / alpha, eps

    def network_output(self, net: Network, z: Tensor, t: Tensor, prompt: Tensor) -> Tensor:
        return net(z, t, prompt).float()

    def denoise(self, net: Network, z: Tensor, t: Tensor, prompt: Tensor) -> tuple[Tensor, Tensor]:
        return self.raw_to_x_eps(self.network_output(net, z, t, prompt), z, t)

    def loss(self, net: Network, x: Tensor, prompt: Tensor, generator: torch.Generator | None):
        raise NotImplementedError  # pragma: no cover


class VariationalDiffusion(DiffusionProcess):
    """VDM with a learned linear noise schedule γ(t) = b + |w|·t and the continuous-time VLB."""

    prediction = "eps"

    def __init__(
        self,
        gamma_min: float = -5.0,
        gamma_max: float = 10.0,
        learn_schedule: bool = True,
        time_input: str = "t",
        reconstruction: str = "discretized_gaussian",
        data_noise: float = 1e-3,
    ):
        super().__init__()
        if time_input not in ("t", "normalized_gamma"):
            raise ValueError(f"time_input must be 't' or 'normalized_gamma', got {time_input!r}")
        if reconstruction not in ("discretized_gaussian", "gaussian"):
            raise ValueError(f"reconstruction must be 'discretized_gaussian' or 'gaussian', got {reconstruction!r}")
        self.time_input, self.reconstruction, self.data_noise = time_input, reconstruction, float(data_noise)
        self.gamma_range = (float(gamma_min), float(gamma_max))  # the configured constants, fixed
        b = torch.tensor(float(gamma_min))
        w = torch.tensor(float(gamma_max - gamma_min))
        if learn_schedule:
            self.gamma_bias, self.gamma_slope = nn.Parameter(b), nn.Parameter(w)
        else:
            self.register_buffer("gamma_bias", b)
            self.register_buffer("gamma_slope", w)

    def gamma(self, t: Tensor) -> Tensor:
        return self.gamma_bias + self.gamma_slope.abs() * t

    def logsnr(self, t: Tensor) -> Tensor:
        return -self.gamma(t)

    def network_time(self, t: Tensor) -> Tensor:
        """The time the network is given: t, or (γ(t) − γ_min)/(γ_max − γ_min) with the configured γ_min, γ_max
        (`time_input="normalized_gamma"`, the authors'; γ is the learned schedule, so its gradient flows)."""
        if self.time_input == "t":
            return t
        lo, hi = self.gamma_range
        return (self.gamma(t) - lo) / (hi - lo)

    def network_output(self, net: Network, z: Tensor, t: Tensor, prompt: Tensor) -> Tensor:
        return net(z, self.network_time(t), prompt).float() + z

    def loss(self, net: Network, x: Tensor, prompt: Tensor, generator: torch.Generator | None):
        n, dims = x.shape[0], x[0].numel()
        t = antithetic_times(n, generator, x.device)
        eps = torch.randn(x.shape, generator=generator, device=x.device)
        z = self.noise(x, t, eps)
        eps_hat = self.network_output(net, z, t, prompt)
        # Diffusion term: ½ γ'(t) ‖ε − ε̂‖² (γ linear, so γ' = |w|).
        diffusion = 0.5 * self.gamma_slope.abs() * (eps - eps_hat).pow(2).flatten(1).sum(1)
        # Prior term: KL(q(z_1|x) ‖ N(0, I)).
        one = torch.ones(n, device=x.device)
        a1, s1 = (_broadcast(v, x) for v in self.alpha_sigma(one))
        prior = 0.5 * (s1**2 + (a1 * x) ** 2 - torch.log(s1**2) - 1.0).flatten(1).sum(1)
        # Reconstruction term −log p(x | z_0): a Gaussian discretised to 256 bins, or the authors' N(z_0/α_0, data_noise²).
        zero = torch.zeros(n, device=x.device)
        a0, s0 = (_broadcast(v, x) for v in self.alpha_sigma(zero))
        z0 = a0 * x + s0 * torch.randn(x.shape, generator=generator, device=x.device)
        if self.reconstruction == "gaussian":
            recon = -torch.distributions.Normal(z0 / a0, self.data_noise).log_prob(x).flatten(1).sum(1)
        else:
            recon = -discretised_gaussian_log_likelihood(x, z0 / a0, s0 / a0).flatten(1).sum(1)
        scale = 1.0 / (dims * math.log(2.0))
        total = ((diffusion + prior + recon) * scale).mean()
        metrics = {
            "loss": total.detach(),
            "diffusion_bpd": (diffusion * scale).mean().detach(),
            "prior_bpd": (prior * scale).mean().detach(),
            "recon_bpd": (recon * scale).mean().detach(),
            "gamma_0": self.gamma(zero[:1]).detach()[0],
            "gamma_1": self.gamma(one[:1]).detach()[0],
        }
        return total, metrics


def discretised_gaussian_log_likelihood(x: Tensor, mean: Tensor, std: Tensor, bins: int = 256) -> Tensor:
    """log P(x) for x on a grid of `bins` values in [−1, 1] under N(mean, std²) integrated over each bin."""
    half = 1.0 / (bins - 1)
    normal = torch.distributions.Normal(mean, std)
    upper = torch.where(x > 1.0 - half, torch.ones_like(x), normal.cdf(x + half))
    lower = torch.where(x < -1.0 + half, torch.zeros_like(x), normal.cdf(x - half))
    return torch.log((upper - lower).clamp_min(1e-12))


class CosineDiffusion(DiffusionProcess):
    """Fixed cosine log-SNR schedule with ε- or v-prediction and an unweighted MSE loss."""

    def __init__(self, prediction: str = "v", logsnr_min: float = -15.0, logsnr_max: float = 15.0):
        super().__init__()
        if prediction not in ("eps", "v"):
            raise ValueError(f"prediction must be 'eps' or 'v', got {prediction!r}")
        self.prediction = prediction
        self.t_min = 2.0 / math.pi * math.atan(math.exp(-0.5 * logsnr_max))
        self.t_max = 2.0 / math.pi * math.atan(math.exp(-0.5 * logsnr_min))

    def logsnr(self, t: Tensor) -> Tensor:
        angle = math.pi / 2 * (self.t_min + t * (self.t_max - self.t_min))
        return -2.0 * torch.log(torch.tan(angle))

    def loss(self, net: Network, x: Tensor, prompt: Tensor, generator: torch.Generator | None):
        t = antithetic_times(x.shape[0], generator, x.device)
        eps = torch.randn(x.shape, generator=generator, device=x.device)
        z = self.noise(x, t, eps)
        out = self.network_output(net, z, t, prompt)
        if self.prediction == "v":
            alpha, sigma = (_broadcast(v, x) for v in self.alpha_sigma(t))
            target = alpha * eps - sigma * x
        else:
            target = eps
        total = (out - target).pow(2).mean()
        return total, {"loss": total.detach()}
