"""Sinusoidal encodings of continuous coordinates (e.g. bump centres (μx, μy)) for the UNet's concept embedders.

`SinusoidalEncoding` maps prompts `[B, d]` to `[B, d·2F]` (or `[B, d·2F + d]` with
`include_raw`): for each coordinate u and each of F wavelengths w_f it emits
sin(2π u / w_f) and cos(2π u / w_f). Layout: coordinate by coordinate, each block
[sin w_1..w_F, cos w_1..w_F]; the raw coordinates, if kept, come last.

- **Non-periodic** (default): wavelengths log-spaced from `max_wavelength` down to
  `min_wavelength` (label units; default 64 → 2 for a 32-px canvas, so the longest
  wave is unambiguous over the canvas and the shortest resolves one pixel).
- **Periodic** (torus data): wavelengths period / f for f = 1..F, so the encoding is
  exactly periodic in the canvas period (u and u + period encode identically); with
  F = 1 and no raw coordinates a 2D label grid maps onto the Clifford torus.
  `include_raw` breaks this periodicity and is refused for periodic encodings.
- Explicit `wavelengths` override both rules.
- **Null prompt** (classifier-free guidance): rows whose entries all equal
  `null_value` map to the zero vector, which no label reaches (every sin/cos pair
  has norm 1), so "no label" stays distinct from every coordinate. The rows are
  told on the prompt as given (`raw`): the UNet encodes its shifted and scaled
  prompt, on which the null value would have moved (and, on a torus, could land
  on a label's code).

It holds no parameters (the wavelengths are a non-persistent buffer); `out_dim`
tells the UNet the width its concept embedders read.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from torch import Tensor, nn


def wavelengths_for(
    n_frequencies: int,
    period: float | None = None,
    min_wavelength: float = 2.0,
    max_wavelength: float = 64.0,
) -> Tensor:
    """The F wavelengths used by `SinusoidalEncoding`: period/f (periodic) or log-spaced max → min."""
    if n_frequencies < 1:
        raise ValueError(f"n_frequencies must be ≥ 1, got {n_frequencies}")
    if period is not None:
        if period <= 0:
            raise ValueError(f"period must be > 0, got {period}")
        return period / torch.arange(1, n_frequencies + 1, dtype=torch.float64)
    if not 0 < min_wavelength <= max_wavelength:
        raise ValueError(f"need 0 < min_wavelength ≤ max_wavelength, got {min_wavelength}, {max_wavelength}")
    if n_frequencies == 1:
        return torch.tensor([max_wavelength], dtype=torch.float64)
    return torch.logspace(math.log10(max_wavelength), math.log10(min_wavelength), n_frequencies, dtype=torch.float64)


class SinusoidalEncoding(nn.Module):
    """[B, d] continuous coordinates → [B, d·2F (+ d)] sin/cos features; null rows → zeros."""

    takes_raw_prompt = True  # the UNet passes the prompt as given (`raw`), on which null rows are told

    def __init__(
        self,
        dim: int,
        n_frequencies: int = 8,
        period: float | None = None,
        min_wavelength: float = 2.0,
        max_wavelength: float = 64.0,
        include_raw: bool = False,
        null_value: float | None = None,
        wavelengths: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"dim must be ≥ 1, got {dim}")
        if period is not None and include_raw:
            raise ValueError("include_raw would break the periodicity of a periodic encoding")
        if wavelengths is not None:
            w = torch.as_tensor(list(wavelengths), dtype=torch.float64)
            if w.numel() < 1 or not bool((w > 0).all()):
                raise ValueError(f"wavelengths must be a non-empty list of values > 0, got {list(wavelengths)}")
        else:
            w = wavelengths_for(n_frequencies, period, min_wavelength, max_wavelength)
        self.dim = dim
        self.period = period
        self.include_raw = include_raw
        self.null_value = null_value
        self.n_frequencies = int(w.numel())
        self.out_dim = dim * 2 * self.n_frequencies + (dim if include_raw else 0)
        self.register_buffer("angular", (2 * math.pi / w).float(), persistent=False)  # [F] radians per label unit

    def forward(self, coords: Tensor, raw: Tensor | None = None) -> Tensor:
        """Features of `coords`; a row is null where `raw` (the prompt `coords` were normalised from; default
        `coords` itself) holds `null_value` in every entry."""
        if coords.ndim != 2 or coords.shape[1] != self.dim:
            raise ValueError(f"expected coordinates [B, {self.dim}], got shape {tuple(coords.shape)}")
        if raw is not None and raw.shape != coords.shape:
            raise ValueError(f"raw prompt of shape {tuple(raw.shape)} for coordinates {tuple(coords.shape)}")
        u = coords.float()
        if self.period is not None:
            u = torch.remainder(u, self.period)  # exact periodicity despite float32 phases of large u
        phase = u[:, :, None] * self.angular[None, None, :]  # [B, d, F]
        feats = torch.cat([phase.sin(), phase.cos()], dim=2).flatten(1)  # [B, d·2F]
        if self.include_raw:
            feats = torch.cat([feats, u], dim=1)
        if self.null_value is not None:
            null = ((coords if raw is None else raw) == self.null_value).all(dim=1, keepdim=True)
            feats = torch.where(null, torch.zeros_like(feats), feats)
        return feats

    def extra_repr(self) -> str:
        return (f"dim={self.dim}, n_frequencies={self.n_frequencies}, period={self.period}, "
                f"include_raw={self.include_raw}, null_value={self.null_value}, out_dim={self.out_dim}")
