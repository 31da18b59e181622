"""Generation accuracy: recover (μx, μy) from bump / stripe images and score them against their labels.

Coordinates follow `data.bumps` (pixel i has centre i + 0.5; labels in drawn-canvas coordinates, so `border`
adds the extended-canvas offset back). Peaks are refined by a parabola through the log of three samples around
the maximum, which is exact for a Gaussian: the bump's row and column through its brightest pixel, or for
stripes / sums of stripes the column profile (mean over rows → μx) and row profile (mean over columns → μy).
A coordinate whose profile has contrast below `min_contrast` (no stripe along that axis) is NaN.

`count_peaks` tells one bump (or stripe) from several: `locate` reads the brightest one only, so a generation with
a second bump elsewhere would still score if the brightest is near its label. Bumps are counted as 2D local maxima
(3 × 3 neighbourhood) at least `rel_height` of the image's contrast above its minimum; stripes and sums of stripes
as 1D local maxima of each axis's profile (an axis without contrast counts 0).
"""

from __future__ import annotations

import torch
from torch import Tensor

from conceptlab.data.bumps import Kind, wrap

EPS = 1e-8


def refine_peak(values: Tensor, periodic: bool = False) -> Tensor:
    """Sub-pixel peak coordinate `[B]` of 1D signals `[B, n]` via a log-parabola through three samples.

    Non-periodic peaks on the edge use the three samples nearest the edge, which extrapolates a Gaussian
    tail to a centre outside the signal.
    """
    b, n = values.shape
    if n < 3:
        raise ValueError(f"need at least 3 samples per signal, got {n}")
    v = values.double()
    v = v - v.min(dim=1, keepdim=True).values
    k = v.argmax(dim=1)
    mid = k if periodic else k.clamp(1, n - 2)
    idx = torch.stack([mid - 1, mid, mid + 1], dim=1) % n
    lm, l0, lp = torch.log(v.gather(1, idx).clamp(min=EPS)).unbind(dim=1)
    curvature = lm - 2 * l0 + lp
    offset = torch.where(curvature < 0, 0.5 * (lm - lp) / curvature.clamp(max=-EPS), (k - mid).double())
    x = mid.double() + offset + 0.5
    return torch.remainder(x, n) if periodic else x


def locate(
    images: Tensor, kind: Kind = "bump", border: int = 0, periodic: bool = False, min_contrast: float = 0.05
) -> Tensor:
    """Estimated labels `[B, 2]` = (μx, μy) of images `[B, H, W]` (or `[B, 1, H, W]`) in drawn-canvas coordinates."""
    if images.ndim == 4:
        images = images[:, 0]
    if images.ndim != 3:
        raise ValueError(f"images must be [B, H, W] or [B, 1, H, W], got shape {tuple(images.shape)}")
    img = images.double()
    b, h, w = img.shape
    if kind in ("bump", "product"):
        flat = img.reshape(b, -1).argmax(dim=1)
        row, col = flat // w, flat % w
        x_signal = img[torch.arange(b), row]  # [B, W]: the row through the peak
        y_signal = img[torch.arange(b), :, col]  # [B, H]: the column through the peak
    else:
        x_signal, y_signal = img.mean(dim=1), img.mean(dim=2)
    out = []
    for signal in (x_signal, y_signal):
        coord = refine_peak(signal, periodic) + border
        contrast = signal.max(dim=1).values - signal.min(dim=1).values
        out.append(torch.where(contrast >= min_contrast, coord, torch.full_like(coord, float("nan"))))
    return torch.stack(out, dim=1)


def _profile_peaks(signal: Tensor, periodic: bool, rel_height: float, min_contrast: float) -> Tensor:
    """Local maxima `[B]` of 1D profiles `[B, n]` at least `rel_height` of their contrast above their minimum."""
    lo, hi = signal.min(dim=1, keepdim=True).values, signal.max(dim=1, keepdim=True).values
    if periodic:
        left, right = signal.roll(1, dims=1), signal.roll(-1, dims=1)
    else:
        pad = torch.full_like(signal[:, :1], float("-inf"))
        left, right = torch.cat([pad, signal[:, :-1]], 1), torch.cat([signal[:, 1:], pad], 1)
    peak = (signal > left) & (signal >= right) & (signal >= lo + rel_height * (hi - lo))
    return torch.where((hi - lo).squeeze(1) >= min_contrast, peak.sum(dim=1), torch.zeros_like(peak.sum(dim=1)))


def count_peaks(images: Tensor, kind: Kind = "bump", periodic: bool = False, rel_height: float = 0.5,
                min_contrast: float = 0.05) -> Tensor:
    """Peaks per image `[B]` (long): 2D local maxima for `bump` / `product`, for stripes and sums of stripes the
    larger of the two profiles' 1D counts. One image of one bump, or one stripe per axis, gives 1."""
    if images.ndim == 4:
        images = images[:, 0]
    if images.ndim != 3:
        raise ValueError(f"images must be [B, H, W] or [B, 1, H, W], got shape {tuple(images.shape)}")
    if not 0 < rel_height <= 1:
        raise ValueError(f"rel_height must be in (0, 1], got {rel_height}")
    img = images.double()
    if kind in ("bump", "product"):
        b = img.shape[0]
        flat = img.reshape(b, -1)
        lo, hi = flat.min(dim=1).values[:, None, None], flat.max(dim=1).values[:, None, None]
        padded = (torch.nn.functional.pad(img[:, None], (1, 1, 1, 1), mode="circular")[:, 0] if periodic
                  else torch.nn.functional.pad(img, (1, 1, 1, 1), value=float("-inf")))
        h, w = img.shape[1:]
        neighbours = torch.stack([padded[:, 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]
                                  for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)])
        # strictly above the earlier neighbours (in raster order), at least the later ones: a flat top counts once
        earlier, later = neighbours[:4], neighbours[4:]
        peak = (img > earlier).all(dim=0) & (img >= later).all(dim=0) & (img >= lo + rel_height * (hi - lo))
        counts = peak.reshape(b, -1).sum(dim=1)
        return torch.where((hi - lo).flatten() >= min_contrast, counts, torch.zeros_like(counts))
    x = _profile_peaks(img.mean(dim=1), periodic, rel_height, min_contrast)
    y = _profile_peaks(img.mean(dim=2), periodic, rel_height, min_contrast)
    return torch.maximum(x, y)


def within_tolerance(pred: Tensor, true: Tensor, tolerance: float = 1.0, period: float | None = None) -> Tensor:
    """`[B, 2]` bool: each coordinate within `tolerance` of its label (NaN = wrong; errors wrapped by `period`)."""
    if not tolerance > 0:  # also refuses NaN
        raise ValueError(f"tolerance must be > 0, got {tolerance}")
    if pred.shape != true.shape or pred.ndim != 2 or pred.shape[1] != 2 or len(pred) == 0:
        raise ValueError(f"pred and true must both be [B>0, 2], got {tuple(pred.shape)} and {tuple(true.shape)}")
    err = pred.double() - true.double()
    if period is not None:
        err = wrap(err, period)
    return err.abs() <= tolerance  # NaN compares False


def generation_accuracy(
    pred: Tensor, true: Tensor, tolerance: float = 1.0, period: float | None = None
) -> dict[str, float]:
    """Fraction of predictions within `tolerance` of the labels: x and y separately and jointly (NaN = wrong).

    `period` wraps errors on a periodic canvas (its drawn width).
    """
    ok = within_tolerance(pred, true, tolerance, period)
    return {"x": ok[:, 0].double().mean().item(), "y": ok[:, 1].double().mean().item(),
            "joint": ok.all(dim=1).double().mean().item()}
