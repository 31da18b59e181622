"""Gaussian bump worlds (Liang et al. 2024): bump, stripe, sum-of-stripes and product images, lattices and splits.

Conventions (used by every function here and by `probes.locator`):

- Images are grayscale `[B, size, size]` in [0, 1]; row index = y, column index = x (row 0 at the top).
- **Pixel convention**: pixel i covers the interval [i, i + 1) and its centre has coordinate **i + 0.5**,
  so a canvas of width N spans the continuous coordinates [0, N). A bump at μ = 3.5 peaks exactly (value 1)
  on pixel 3.
- A label is (μx, μy) in the coordinates of the canvas that is *drawn*. With `border > 0` (the **extended
  canvas**) the drawn canvas is `size + 2·border` wide (44 for 32 + 2·6), the central `size × size` is kept and
  labels stay in extended coordinates (0..44): the visible frame is [border, border + size).
- **Periodic** canvases wrap distances with the period of the drawn canvas (a torus).
- Kinds: `bump` (2D Gaussian), `vertical` stripe (depends on x only), `horizontal` stripe (y only), `sos`
  (sum of the two stripes, additive composition; clipped to 1 where they cross — a choice, the paper gives no
  rule), `product` (product of the two stripes, multiplicative composition; for axis-aligned Gaussians it is
  identical to `bump`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

Kind = Literal["bump", "vertical", "horizontal", "sos", "product"]
KINDS: tuple[str, ...] = ("bump", "vertical", "horizontal", "sos", "product")
SplitKind = Literal["none", "x_band", "lesion", "exterior"]


def pixel_centres(n: int) -> Tensor:
    """Coordinates of the centres of n pixels along one axis: i + 0.5."""
    return torch.arange(n, dtype=torch.float64) + 0.5


def wrap(d: Tensor, period: float) -> Tensor:
    """Signed displacement wrapped into [-period/2, period/2) (torus distance)."""
    return torch.remainder(d + period / 2, period) - period / 2


def stripe_profile(mu: Tensor, sigma: float, n: int, periodic: bool = False) -> Tensor:
    """Gaussian profiles exp(-d²/2σ²) along one axis of n pixels: `[B]` centres → `[B, n]`."""
    if sigma <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    d = pixel_centres(n)[None, :] - mu.to(torch.float64)[:, None]
    if periodic:
        d = wrap(d, float(n))
    return torch.exp(-0.5 * (d / sigma) ** 2)


def render(
    kind: Kind,
    labels: Tensor,
    size: int = 32,
    sigma: tuple[float, float] = (1.0, 1.0),
    border: int = 0,
    periodic: bool = False,
) -> Tensor:
    """Images `[B, size, size]` (float32, [0, 1]) of `kind` at labels `[B, 2]` = (μx, μy) on the drawn canvas."""
    if kind not in KINDS:
        raise ValueError(f"unknown image kind {kind!r}; known: {KINDS}")
    if labels.ndim != 2 or labels.shape[1] != 2:
        raise ValueError(f"labels must be [B, 2] (μx, μy), got shape {tuple(labels.shape)}")
    if size < 1 or border < 0:
        raise ValueError(f"need size ≥ 1 and border ≥ 0, got size={size}, border={border}")
    n = size + 2 * border
    vx = stripe_profile(labels[:, 0], sigma[0], n, periodic)[:, None, :]  # [B, 1, n]: varies along x (columns)
    vy = stripe_profile(labels[:, 1], sigma[1], n, periodic)[:, :, None]  # [B, n, 1]: varies along y (rows)
    ones = torch.ones(1, n, n, dtype=torch.float64)
    if kind in ("bump", "product"):
        img = vx * vy
    elif kind == "vertical":
        img = vx * ones
    elif kind == "horizontal":
        img = vy * ones
    else:
        img = (vx + vy).clamp(max=1.0)
    return img[:, border : border + size, border : border + size].float().contiguous()


def image_type(labels: Tensor, size: int = 32, border: int = 0) -> Tensor:
    """0/1/2 per label: how many of (μx, μy) fall inside the visible frame [border, border + size)."""
    inside = (labels >= border) & (labels < border + size)
    return inside.sum(dim=1)


def lattice(
    spacing: tuple[float, float] = (1.0, 1.0), extent: tuple[float, float] = (0.0, 32.0)
) -> Tensor:
    """Lattice of centres `[M, 2]` with spacings (dx, dy) covering [lo, hi)², starting half a spacing in.

    With spacing 1 on [0, N) the centres are the pixel centres; rows are ordered x-major (x slowest).
    """
    lo, hi = extent
    if min(spacing) <= 0 or hi <= lo:
        raise ValueError(f"need spacings > 0 and extent lo < hi, got spacing={spacing}, extent={extent}")
    xs, ys = (torch.arange(lo + d / 2, hi, d, dtype=torch.float64) for d in spacing)
    gx, gy = torch.meshgrid(xs, ys, indexing="ij")
    return torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1)


def subsample(labels: Tensor, fraction: float, seed: int = 0) -> Tensor:
    """Keep round(λ·M) of the M labels, chosen by `seed`, in their original order (subsampling fraction λ)."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"subsampling fraction λ must be in (0, 1], got {fraction}")
    keep = round(fraction * len(labels))
    if keep == 0:
        raise ValueError(f"λ = {fraction} of {len(labels)} labels keeps no training data")
    idx = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))[:keep]
    return labels[idx.sort().values]


@dataclass(frozen=True)
class SplitSpec:
    """A named held-out region of label space (coordinates as the labels, e.g. extended ones).

    - `none`: nothing held out;
    - `x_band`: labels with low ≤ μx ≤ high held out (composition test; 1D stripes covering the band are
      added to training by the caller, they are not split);
    - `lesion`: the central width × width square |μ − centre| ≤ width/2 held out (interpolation; this is also
      the "interior square" split);
    - `exterior`: everything outside that square held out (train on the interior W×W square only).
    """

    kind: SplitKind = "none"
    low: float = 13.0
    high: float = 19.0
    width: float = 8.0
    centre: tuple[float, float] = (16.0, 16.0)

    def __post_init__(self) -> None:
        if self.kind not in ("none", "x_band", "lesion", "exterior"):
            raise ValueError(f"unknown split kind {self.kind!r}; expected none, x_band, lesion or exterior")
        if self.kind == "x_band" and not self.low <= self.high:
            raise ValueError(f"x_band needs low ≤ high, got low={self.low}, high={self.high}")
        if self.kind in ("lesion", "exterior") and not self.width > 0:
            raise ValueError(f"{self.kind} needs width > 0, got {self.width}")


def held_out_mask(labels: Tensor, spec: SplitSpec) -> Tensor:
    """Boolean `[M]`: which labels `spec` holds out of training."""
    if spec.kind == "none":
        return torch.zeros(len(labels), dtype=torch.bool)
    if spec.kind == "x_band":
        return (labels[:, 0] >= spec.low) & (labels[:, 0] <= spec.high)
    if spec.kind in ("lesion", "exterior"):
        c = torch.tensor(spec.centre, dtype=labels.dtype)
        inside = ((labels - c).abs() <= spec.width / 2).all(dim=1)
        return inside if spec.kind == "lesion" else ~inside
    raise ValueError(f"unknown split kind {spec.kind!r}")


def split(labels: Tensor, spec: SplitSpec) -> tuple[Tensor, Tensor]:
    """(train labels, held-out labels); a split that leaves no training data, or holds out nothing it names, raises."""
    if len(labels) == 0:
        raise ValueError("no labels to split: no training data")
    mask = held_out_mask(labels, spec)
    if bool(mask.all()):
        raise ValueError(f"split {spec} holds out all {len(labels)} labels: no training data left")
    if spec.kind != "none" and not bool(mask.any()):
        raise ValueError(f"split {spec} holds out no label of this lattice")
    return labels[~mask], labels[mask]
