"""Training-time augmentation of the drawn batch: left-right flips and colour jitter (`train.hflip`,
`train.color_jitter`), on images in [0, 1], drawing from the trainer's data generator (so resumes stay exact).

Colour jitter follows the definition of torchvision's `ColorJitter(b, c, s, h)` applied image by image, as the
authors' CelebA loader does (their `ColorJitter(0.1, 0.1, 0.1, 0.1)` in the dataset's transform): per image a
brightness, contrast and saturation factor drawn uniformly from [max(0, 1 − x), 1 + x], a hue shift from [−h, h],
and the four adjustments applied in a random order of that image's own, each clamped to [0, 1]:

- brightness f: f·x;
- contrast f: f·x + (1 − f)·m, m the mean over the image of its grey value (0.2989 R + 0.587 G + 0.114 B);
- saturation f: f·x + (1 − f)·g, g the image's grey value per pixel;
- hue δ: in HSV, h ← (h + δ) mod 1.

Written from that definition, not from torchvision's code (not a dependency here). At strength 0 nothing is drawn.
"""

from __future__ import annotations

import torch
from torch import Tensor

GREY = (0.2989, 0.587, 0.114)


def hflip(images: Tensor, p: float, generator: torch.Generator) -> Tensor:
    """Each image flipped left to right with probability p (one draw per image; none at p = 0)."""
    if p <= 0:
        return images
    flip = torch.rand(images.shape[0], generator=generator) < p
    return torch.where(flip[:, None, None, None], images.flip(3), images)


def grey(images: Tensor) -> Tensor:
    """Grey value `[N, 1, H, W]` of RGB images `[N, 3, H, W]`."""
    r, g, b = images.unbind(1)
    return (GREY[0] * r + GREY[1] * g + GREY[2] * b)[:, None]


def rgb_to_hsv(images: Tensor) -> Tensor:
    """RGB in [0, 1] → HSV, every channel in [0, 1] (hue 0 where the pixel is grey)."""
    r, g, b = images.unbind(1)
    value, _ = images.max(1)
    low, _ = images.min(1)
    delta = value - low
    sat = torch.where(value > 0, delta / value.clamp_min(1e-12), torch.zeros_like(value))
    safe = delta.clamp_min(1e-12)
    hue = torch.where(value == r, (g - b) / safe,
                      torch.where(value == g, 2.0 + (b - r) / safe, 4.0 + (r - g) / safe))
    hue = torch.where(delta > 0, torch.remainder(hue / 6.0, 1.0), torch.zeros_like(hue))
    return torch.stack([hue, sat, value], 1)


def hsv_to_rgb(hsv: Tensor) -> Tensor:
    """HSV (every channel in [0, 1]) → RGB in [0, 1]."""
    hue, sat, value = hsv.unbind(1)
    h6 = torch.remainder(hue, 1.0) * 6.0
    sector = torch.floor(h6).long() % 6
    frac = h6 - torch.floor(h6)
    p = value * (1 - sat)
    q = value * (1 - sat * frac)
    t = value * (1 - sat * (1 - frac))
    # (r, g, b) per sector 0..5: (v,t,p) (q,v,p) (p,v,t) (p,q,v) (t,p,v) (v,p,q)
    table = torch.stack([torch.stack(c, 1) for c in ((value, t, p), (q, value, p), (p, value, t),
                                                        (p, q, value), (t, p, value), (value, p, q))], 0)
    return table.gather(0, sector[None, :, None].expand(1, -1, 3, *sector.shape[1:])).squeeze(0)


def adjust(images: Tensor, op: int, factor: Tensor) -> Tensor:
    """One adjustment (0 brightness, 1 contrast, 2 saturation, 3 hue) with per-image factors `[N]`."""
    f = factor[:, None, None, None]
    if op == 0:
        out = f * images
    elif op == 1:
        out = f * images + (1 - f) * grey(images).mean((2, 3), keepdim=True)
    elif op == 2:
        out = f * images + (1 - f) * grey(images)
    else:
        hsv = rgb_to_hsv(images)
        hsv = torch.cat([torch.remainder(hsv[:, :1] + f, 1.0), hsv[:, 1:]], 1)
        out = hsv_to_rgb(hsv)
    return out.clamp(0.0, 1.0)


def color_jitter(images: Tensor, strength: float, generator: torch.Generator) -> Tensor:
    """ColorJitter(strength, strength, strength, strength) per image on RGB `[N, 3, H, W]` in [0, 1]; at 0 the
    images are returned untouched and nothing is drawn."""
    if strength <= 0:
        return images
    if strength > 0.5:
        raise ValueError(f"color_jitter strength {strength} > 0.5: a hue shift is at most half the colour circle")
    if images.ndim != 4 or images.shape[1] != 3:
        raise ValueError(f"train.color_jitter needs RGB images [N, 3, H, W]; these are {tuple(images.shape)}")
    n = images.shape[0]
    low = max(0.0, 1.0 - strength)
    factors = torch.empty(4, n)
    factors[:3] = low + torch.rand(3, n, generator=generator) * (1.0 + strength - low)
    factors[3] = (torch.rand(n, generator=generator) * 2 - 1) * strength
    order = torch.rand(n, 4, generator=generator).argsort(1)  # a random order of the four per image
    out = images
    for position in range(4):
        ops = order[:, position]
        for op in range(4):
            rows = (ops == op).nonzero().squeeze(1)
            if len(rows):
                out = out.index_copy(0, rows, adjust(out[rows], op, factors[op, rows].to(out)))
    return out
