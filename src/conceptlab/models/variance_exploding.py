"""The variance-exploding (VE) diffusion process, with attribute-label dropout so one network is both denoisers.

Schedule (forward time t ∈ [0, 1], t = 0 data): x_t = x_0 + σ(t) ε with the geometric σ(t) = σ_min (σ_max/σ_min)^t
of Song et al.'s VE SDE, g(t)² = dσ²/dt = 2σ² ln(σ_max/σ_min). Generation time is τ = 1 − t (τ = 0 noise).

Choice: VE is implemented **through the variance-preserving form** of `models.diffusion.DiffusionProcess`. The VE
state x_ve = x + σ ε is rescaled to z = x_ve / √(1 + σ²) = α x + σ_vp ε with α = 1/√(1+σ²), σ_vp = σ/√(1+σ²), i.e.
log-SNR λ(t) = −2 log σ(t). The network therefore sees unit-scale inputs at every σ (EDM's input scaling), the
ancestral sampler of `models.sampling` and the forking sampler of `models.forking` work unchanged (the rescaling is a
fixed per-time map, so an ancestral step in z is exactly the VE ancestral step in x_ve), and `denoise_ve` gives the
VE denoiser D(x_ve, σ, prompt) = E[x_0 | x_ve] that the mutual-information estimator needs. `sigma(t)` and `g2(t)`
make the process itself a `analysis.mutual_information.VESchedule`.

Parameterisations (`prediction`), all trained with an unweighted MSE on a uniform (antithetic) t, i.e. log σ uniform:
  eps  network output ε̂; loss ‖ε̂ − ε‖² (= ‖x̂ − x‖²/σ², SNR weighting)
  v    network output v̂ = α ε − σ_vp x; loss ‖v̂ − v‖² (= ‖x̂ − x‖² (1+σ²)/σ², EDM's denoiser-matching weight, σ_data=1)
  x    network output x̂ directly; loss ‖x̂ − x‖² (1+σ²)/σ² (the same denoiser-matching weight)

Conditioning: the prompt is a concatenation of attribute blocks (`AttributePrompt`: one-hot per attribute, all-zero
block = attribute not given). During training (`loss`) each attribute block of each row is nulled independently with
probability `label_dropout`, so the one network learns E[x_0 | z, any subset of attributes]: the null prompt gives the
unconditional denoiser, a prompt with a single attribute the conditional denoiser of that attribute alone.
"""

from __future__ import annotations

import math
from typing import Callable, Literal, Sequence

import torch
from torch import Tensor

from conceptlab.data.attribute_prompt import AttributePrompt, attribute_blocks  # noqa: F401  (re-exported)
from conceptlab.models.diffusion import DiffusionProcess, Network, antithetic_times

Prediction = Literal["eps", "v", "x"]
PREDICTIONS: tuple[str, ...] = ("eps", "v", "x")
VEDenoiser = Callable[[Tensor, Tensor], Tensor]  # (x_ve [N, ...], σ [N]) → x̂_0 [N, ...]
ModelDenoiser = Callable[[Tensor, Tensor, Tensor], Tensor]  # (z [N, ...], t [N], prompt [N, P]) → x̂_0 [N, ...]


def _rows(v: Tensor, like: Tensor) -> Tensor:
    return v.reshape(-1, *([1] * (like.dim() - 1)))


def drop_attribute_blocks(
    prompt: Tensor, blocks: Sequence[slice], p: float, generator: torch.Generator | None, null_value: float = 0.0
) -> Tensor:
    """Null each attribute block of each row independently with probability p."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"label dropout must lie in [0, 1], got {p}")
    if p == 0.0:
        return prompt
    drop = torch.rand(prompt.shape[0], len(blocks), generator=generator, device=prompt.device) < p
    mask = torch.zeros_like(prompt, dtype=torch.bool)
    for j, block in enumerate(blocks):
        mask[:, block] = drop[:, j : j + 1]
    return torch.where(mask, torch.full_like(prompt, null_value), prompt)


class VarianceExploding(DiffusionProcess):
    """VE diffusion σ(t) = σ_min (σ_max/σ_min)^t, run in VP coordinates (λ = −2 log σ); eps / v / x prediction."""

    def __init__(
        self,
        sigma_min: float = 0.01,
        sigma_max: float = 50.0,
        prediction: Prediction = "v",
        label_dropout: float = 0.0,
        attribute_sizes: Sequence[int] | None = None,
        null_value: float = 0.0,
    ) -> None:
        super().__init__()
        if not 0.0 < sigma_min < sigma_max:
            raise ValueError(f"need 0 < sigma_min < sigma_max, got {sigma_min}, {sigma_max}")
        if prediction not in PREDICTIONS:
            raise ValueError(f"prediction must be one of {PREDICTIONS}, got {prediction!r}")
        if not 0.0 <= label_dropout <= 1.0:
            raise ValueError(f"label_dropout must lie in [0, 1], got {label_dropout}")
        if attribute_sizes is not None and (not attribute_sizes or any(k < 1 for k in attribute_sizes)):
            raise ValueError(f"attribute_sizes must be positive block widths, got {list(attribute_sizes)}")
        self.sigma_min, self.sigma_max = float(sigma_min), float(sigma_max)
        self.prediction = prediction
        self.label_dropout = float(label_dropout)
        self.attribute_sizes = None if attribute_sizes is None else tuple(int(k) for k in attribute_sizes)
        self.null_value = float(null_value)

    # -- schedule ---------------------------------------------------------------------------------------------------
    def sigma(self, t: Tensor) -> Tensor:
        """VE noise level σ(t)."""
        t = torch.as_tensor(t)
        return self.sigma_min * (self.sigma_max / self.sigma_min) ** t

    def g2(self, t: Tensor) -> Tensor:
        """g(t)² = dσ²/dt."""
        return 2.0 * self.sigma(t) ** 2 * math.log(self.sigma_max / self.sigma_min)

    def time_of_sigma(self, sigma: Tensor) -> Tensor:
        """Inverse of σ(t); ValueError outside [σ_min, σ_max]."""
        sigma = torch.as_tensor(sigma)
        tol = 1e-6 * self.sigma_max
        if bool(((sigma < self.sigma_min * (1 - 1e-6)) | (sigma > self.sigma_max + tol)).any()):
            raise ValueError(f"sigma must lie in [{self.sigma_min}, {self.sigma_max}], got {sigma.flatten()[:5].tolist()}")
        t = torch.log(sigma / self.sigma_min) / math.log(self.sigma_max / self.sigma_min)
        return t.clamp(0.0, 1.0)

    def logsnr(self, t: Tensor) -> Tensor:
        return -2.0 * torch.log(self.sigma(t))

    # -- parameterisation -------------------------------------------------------------------------------------------
    def raw_to_x_eps(self, out: Tensor, z: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
        if self.prediction != "x":
            return super().raw_to_x_eps(out, z, t)
        alpha, sigma = (_rows(v, z) for v in self.alpha_sigma(t))
        return out, (z - alpha * out) / sigma

    def _target(self, x: Tensor, eps: Tensor, t: Tensor) -> tuple[Tensor, Tensor | None]:
        """(regression target of the raw output, per-row weight or None)."""
        if self.prediction == "eps":
            return eps, None
        alpha, sigma = (_rows(v, x) for v in self.alpha_sigma(t))
        if self.prediction == "v":
            return alpha * eps - sigma * x, None
        return x, 1.0 / sigma**2  # (1 + σ²)/σ² = 1/σ_vp²

    def loss(self, net: Network, x: Tensor, prompt: Tensor, generator: torch.Generator | None):
        """Unweighted MSE on the raw output (see the module docstring); attribute blocks dropped with
        `label_dropout` (the whole prompt is one block when `attribute_sizes` is None)."""
        n = x.shape[0]
        if self.label_dropout > 0:
            sizes = self.attribute_sizes or (prompt.shape[1],)
            if sum(sizes) != prompt.shape[1]:
                raise ValueError(f"attribute_sizes {list(sizes)} sum to {sum(sizes)}, the prompt has {prompt.shape[1]}")
            blocks = attribute_blocks(sizes)
            prompt = drop_attribute_blocks(prompt, blocks, self.label_dropout, generator, self.null_value)
        t = antithetic_times(n, generator, x.device)
        eps = torch.randn(x.shape, generator=generator, device=x.device)
        z = self.noise(x, t, eps)
        out = self.network_output(net, z, t, prompt)
        target, weight = self._target(x, eps, t)
        sq = (out - target).pow(2)
        if weight is not None:
            sq = sq * weight
        total = sq.mean()
        return total, {"loss": total.detach()}

    # -- VE coordinates ---------------------------------------------------------------------------------------------
    def to_vp(self, x_ve: Tensor, sigma: Tensor) -> Tensor:
        """z = x_ve / √(1 + σ²) (σ: one per row)."""
        return x_ve / _rows((1.0 + sigma**2).sqrt(), x_ve)

    def to_ve(self, z: Tensor, t: Tensor) -> Tensor:
        """x_ve = z √(1 + σ(t)²)."""
        return z * _rows((1.0 + self.sigma(t) ** 2).sqrt(), z)

    def denoise_ve(self, net: Network, x_ve: Tensor, sigma: Tensor, prompt: Tensor) -> Tensor:
        """The VE denoiser D(x_ve, σ, prompt) = x̂_0 of the network (model space), σ [N]."""
        t = self.time_of_sigma(sigma).to(x_ve.dtype)
        x_hat, _ = self.denoise(net, self.to_vp(x_ve, sigma.to(x_ve.dtype)), t, prompt)
        return x_hat

    def model_denoiser(self, denoise_ve: VEDenoiser) -> ModelDenoiser:
        """Wrap a VE denoiser D(x_ve, σ) (e.g. an exact one) as a sampler denoiser (z, t, prompt) → x̂_0."""

        def denoiser(z: Tensor, t: Tensor, prompt: Tensor) -> Tensor:
            t = t.expand(z.shape[0]) if t.dim() == 0 or t.numel() == 1 else t
            return denoise_ve(self.to_ve(z, t), self.sigma(t).to(z.dtype)).to(z.dtype)

        return denoiser

    def extra_repr(self) -> str:
        return (f"sigma_min={self.sigma_min}, sigma_max={self.sigma_max}, prediction={self.prediction!r}, "
                f"label_dropout={self.label_dropout}, attribute_sizes={self.attribute_sizes}")
