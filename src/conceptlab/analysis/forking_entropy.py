"""Forking entropy: how undecided an attribute still is at generation time τ, from the classes of K forked endings.

For each root trajectory forked at τ into K endings (`models.forking`), an attribute classifier reads each ending's
class; the entropy of the class histogram of the K endings is computed per root (plug-in estimate, nats) and averaged
over roots. As a curve over τ it falls from about the prior entropy H(V) (fork at pure noise, τ = 0) to 0 once the
attribute is committed (τ → 1); with an exact sampler its expectation is H(V | X_τ) = H(V) − I(V; X_τ), minus the
plug-in bias ≈ (classes seen − 1)/(2K). With `normalise=True` it is divided by ln(number of classes), so attributes
with different numbers of classes share the [0, 1] scale.

`forking_entropy_curves` runs the whole measurement: forks at every τ, classification of the endings, one curve per
attribute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from conceptlab.models.forking import Denoiser, Schedule, check_taus, iter_forks

Classify = Callable[[Tensor], Mapping[str, Tensor]]  # endings [M, ...] (model space) → {attribute: class [M] long}


def histogram_entropy(classes: Tensor, num_classes: int) -> Tensor:
    """Plug-in entropy (nats) of the class histogram of each row of classes [R, K] (long in [0, num_classes))."""
    if num_classes < 2:
        raise ValueError(f"num_classes must be ≥ 2, got {num_classes}")
    if classes.dim() != 2 or classes.shape[1] < 2:
        raise ValueError(f"classes must be [roots, K ≥ 2], got {tuple(classes.shape)}")
    if bool(((classes < 0) | (classes >= num_classes)).any()):
        raise ValueError(f"class labels must lie in [0, {num_classes}), got {classes.min().item()}..{classes.max().item()}")
    counts = torch.zeros(classes.shape[0], num_classes, dtype=torch.float64)
    counts.scatter_add_(1, classes.long(), torch.ones_like(classes, dtype=torch.float64))
    p = counts / classes.shape[1]
    return -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(1)


@dataclass
class ForkingEntropyCurve:
    """Forking entropy of one attribute on a τ grid (0 = noise, 1 = data); `sigma` where the process has one."""

    tau: Tensor  # [T]
    entropy: Tensor  # [T] mean over roots (nats, or fraction of ln num_classes if normalised)
    stderr: Tensor  # [T] standard error over roots
    num_classes: int
    forks: int
    normalised: bool
    sigma: Tensor | None = None  # [T] VE σ at each τ
    per_root: Tensor | None = None  # [T, R] each root's entropy (the units whose mean is `entropy`)

    @property
    def prior_entropy(self) -> float:
        """ln(num_classes), or 1 when normalised: the uniform-prior value at τ = 0."""
        return 1.0 if self.normalised else math.log(self.num_classes)


def forking_entropy_curve(
    classes_per_tau: Sequence[Tensor],
    taus: Sequence[float],
    num_classes: int,
    normalise: bool = False,
    sigma: Tensor | None = None,
) -> ForkingEntropyCurve:
    """The curve from the classes [R, K] of the endings at each τ."""
    tau_list = check_taus(taus)
    if len(classes_per_tau) != len(tau_list):
        raise ValueError(f"got {len(classes_per_tau)} class tables for {len(tau_list)} fork times")
    means, errors, roots = [], [], []
    for classes in classes_per_tau:
        h = histogram_entropy(classes, num_classes)
        if normalise:
            h = h / math.log(num_classes)
        roots.append(h)
        means.append(h.mean())
        errors.append(h.std() / math.sqrt(h.numel()) if h.numel() > 1 else torch.zeros((), dtype=h.dtype))
    return ForkingEntropyCurve(
        tau=torch.tensor(tau_list, dtype=torch.float64),
        entropy=torch.stack(means),
        stderr=torch.stack(errors),
        num_classes=num_classes,
        forks=int(classes_per_tau[0].shape[1]),
        normalised=normalise,
        sigma=sigma,
        per_root=torch.stack(roots) if len({r.numel() for r in roots}) == 1 else None,
    )


def forking_entropy_curves(
    process: Schedule,
    denoiser: Denoiser,
    prompt: Tensor,
    image_shape: tuple[int, ...],
    taus: Sequence[float],
    forks: int,
    classify: Classify,
    num_classes: Mapping[str, int],
    steps: int = 50,
    generator: torch.Generator | None = None,
    normalise: bool = False,
    clip_denoised: bool = True,
    batch_size: int = 2048,
) -> dict[str, ForkingEntropyCurve]:
    """Fork every root (prompt row) at each τ into K endings, classify them, one forking-entropy curve per attribute.

    `classify(endings)` gets endings in model space [M, ...] and returns {attribute: classes [M]}; only the
    attributes of `num_classes` are kept (ValueError if classify does not return one of them).
    """
    tau_list = check_taus(taus)
    per_tau: dict[str, list[Tensor]] = {name: [] for name in num_classes}
    for fork in iter_forks(process, denoiser, prompt, image_shape, tau_list, forks, steps, generator, clip_denoised):
        flat = fork.endings.flatten(0, 1)
        read: dict[str, list[Tensor]] = {name: [] for name in num_classes}
        for i in range(0, flat.shape[0], batch_size):
            out = classify(flat[i : i + batch_size])
            for name in num_classes:
                if name not in out:
                    raise ValueError(f"classify returned {sorted(out)}, missing attribute {name!r}")
                read[name].append(out[name].long().cpu())
        for name in num_classes:
            per_tau[name].append(torch.cat(read[name]).reshape(fork.endings.shape[0], forks))
    sigma_fn = getattr(process, "sigma", None)
    sigma = sigma_fn(1.0 - torch.tensor(tau_list, dtype=torch.float64)) if callable(sigma_fn) else None
    return {
        name: forking_entropy_curve(per_tau[name], tau_list, k, normalise, sigma) for name, k in num_classes.items()
    }
