"""Shapes3D: a procedural renderer with the real dataset's factor structure, and a loader for the real `3dshapes.h5`.

Factors, in Shapes3D order (index = mixed radix over these, orientation fastest, as in the real file):

  factor       values  real label value (h5 `labels` column)   procedural rendering
  floor_hue    10      0.0, 0.1, …, 0.9                         floor colour HSV(h, 1, 1)
  wall_hue     10      0.0, 0.1, …, 0.9                         back-wall colour HSV(h, 1, 1)
  object_hue   10      0.0, 0.1, …, 0.9                         object colour HSV(h, 1, 1)
  scale         8      linspace(0.75, 1.25, 8)                  object size multiplier
  shape         4      0 cube, 1 cylinder, 2 sphere, 3 capsule  silhouette + shading per shape
  orientation  15      linspace(−30, 30, 15) degrees            turn about the vertical axis

The scene is a fake-3D room seen from the front: a floor (lower band, brighter towards the viewer), a back wall made
of two planes meeting in a vertical corner, and a centred object standing on the floor, all Lambert-shaded under one
fixed light. Orientation turns the object relative to the room (cube faces and capsule axis rotate) and moves the room
corner with it, so, as in the real renders, orientation is visible for every shape, including the rotationally
symmetric sphere and cylinder. Rendering is vectorised over images with `supersample`² samples per pixel.

`load_shapes3d_h5` reads the real file (datasets `images` uint8 [N, 64, 64, 3] and `labels` float64 [N, 6] in the
order above) into the same `Shapes3DData` the renderer produces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

FACTORS = ("floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation")
FACTOR_SIZES = (10, 10, 10, 8, 4, 15)
SHAPE_NAMES = ("cube", "cylinder", "sphere", "capsule")
HUE_NAMES = ("red", "orange", "yellow", "lime", "spring green", "cyan", "azure", "blue", "violet", "magenta")  # hue 0.0..0.9
NUM_IMAGES = math.prod(FACTOR_SIZES)  # 480,000
FACTOR_VALUES = {  # the real dataset's label value of each factor level
    "floor_hue": torch.arange(10, dtype=torch.float64) / 10,
    "wall_hue": torch.arange(10, dtype=torch.float64) / 10,
    "object_hue": torch.arange(10, dtype=torch.float64) / 10,
    "scale": torch.linspace(0.75, 1.25, 8, dtype=torch.float64),
    "shape": torch.arange(4, dtype=torch.float64),
    "orientation": torch.linspace(-30.0, 30.0, 15, dtype=torch.float64),
}
REAL_IMAGE_SIZE = 64
HORIZON = -0.15  # floor/wall boundary at the corner (canvas y ∈ [−1, 1], up positive)
FLOOR_LEVEL = -0.6  # where the object stands
OBJECT_SIZE = 0.3  # half-size of the object at scale 1
LIGHT = torch.tensor([-0.45, 0.55, 0.7])  # direction towards the light (x right, y up, z towards the viewer)
AMBIENT = 0.35


@dataclass
class Shapes3DData:
    """Images with their factor levels (indices into each factor's values, Shapes3D order)."""

    images: Tensor  # float32 [N, 3, S, S] in [0, 1]
    factors: Tensor  # long [N, 6]

    def __len__(self) -> int:
        return self.images.shape[0]


def _strides() -> Tensor:
    return torch.tensor([math.prod(FACTOR_SIZES[i + 1 :]) for i in range(len(FACTORS))])


def factors_from_index(index: Tensor) -> Tensor:
    """Factor levels [N, 6] of flat Shapes3D indices [N] (0 ≤ index < 480,000)."""
    index = torch.as_tensor(index, dtype=torch.long)
    if bool(((index < 0) | (index >= NUM_IMAGES)).any()):
        raise ValueError(f"Shapes3D indices must lie in [0, {NUM_IMAGES})")
    return (index.unsqueeze(-1) // _strides()) % torch.tensor(FACTOR_SIZES)


def index_from_factors(factors: Tensor) -> Tensor:
    """Flat Shapes3D indices [N] of factor levels [N, 6]."""
    _check_factors(factors)
    return (factors.long() * _strides()).sum(-1)


def labels_from_factors(factors: Tensor) -> Tensor:
    """The real file's float64 `labels` [N, 6] of factor levels [N, 6]."""
    _check_factors(factors)
    return torch.stack([FACTOR_VALUES[name][factors[:, i]] for i, name in enumerate(FACTORS)], dim=1)


def factors_from_labels(labels: Tensor) -> Tensor:
    """Factor levels [N, 6] of the real file's `labels` [N, 6]; ValueError if a label is off the factor grid."""
    columns = []
    for i, name in enumerate(FACTORS):
        dist = (labels[:, i, None].double() - FACTOR_VALUES[name]).abs()
        err, level = dist.min(1)
        if bool((err > 1e-3 * (1 + FACTOR_VALUES[name].abs().max())).any()):
            raise ValueError(f"labels column {i} ({name}) has values off the Shapes3D grid")
        columns.append(level)
    return torch.stack(columns, dim=1)


def _check_factors(factors: Tensor) -> None:
    if factors.dim() != 2 or factors.shape[1] != len(FACTORS):
        raise ValueError(f"factors must be [N, {len(FACTORS)}], got {tuple(factors.shape)}")
    if bool(((factors < 0) | (factors >= torch.tensor(FACTOR_SIZES))).any()):
        raise ValueError(f"factor levels out of range; sizes are {dict(zip(FACTORS, FACTOR_SIZES))}")


def hue_to_rgb(hue: Tensor) -> Tensor:
    """Full-saturation, full-value HSV colour [N, 3] of hues in [0, 1)."""
    k = (torch.tensor([5.0, 3.0, 1.0]) + 6.0 * hue.unsqueeze(-1)) % 6.0
    return 1.0 - torch.clamp(torch.minimum(k, 4.0 - k), 0.0, 1.0)


def _lambert(normal: Tensor) -> Tensor:
    light = LIGHT / LIGHT.norm()
    return AMBIENT + (1 - AMBIENT) * (normal * light).sum(-1).clamp_min(0.0)


def _vec(x: Tensor, y: Tensor, z: Tensor) -> Tensor:
    x, y, z = torch.broadcast_tensors(x, y, z)
    return torch.stack([x, y, z], -1)


def _object(shape: int, scale: Tensor, theta: Tensor, x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """(inside mask, unit normal [..., 3]) of one shape on the canvas; per-image scale and θ are [N, 1, 1]."""
    a = OBJECT_SIZE * scale
    cos, sin = theta.cos(), theta.sin()
    if shape == 0:  # cube: two visible side faces meeting at x = edge; the side face is on the far side of the turn
        sign = torch.where(theta >= 0, 1.0, -1.0)
        edge = a * (sin.abs() - cos) * sign
        side = (x - edge) * sign < 0
        inside = (x.abs() <= a * (cos + sin.abs())) & (y >= FLOOR_LEVEL) & (y <= FLOOR_LEVEL + 2 * a)
        normal = torch.where(side.unsqueeze(-1), _vec(-sign * cos, 0 * x, sin.abs()), _vec(sin, 0 * x, cos))
        return inside, normal
    if shape == 1:  # cylinder: vertical axis, radius 0.8a, height 2a
        u = (x / (0.8 * a)).clamp(-1, 1)
        inside = (x.abs() <= 0.8 * a) & (y >= FLOOR_LEVEL) & (y <= FLOOR_LEVEL + 2 * a)
        return inside, _vec(u, 0 * x, (1 - u**2).sqrt())
    if shape == 2:  # sphere: radius a resting on the floor
        r, centre_x = a, 0 * x
    else:  # capsule: lying on the floor, axis half-length a turned by θ (foreshortened to a·cos θ), radius 0.55a
        r = 0.55 * a
        centre_x = torch.maximum(torch.minimum(x, a * cos), -a * cos)
    dx, dy = (x - centre_x) / r, (y - FLOOR_LEVEL - r) / r
    rho2 = dx**2 + dy**2
    return rho2 <= 1, _vec(dx, dy, (1 - rho2).clamp_min(0).sqrt())


def render_shapes3d(factors: Tensor, image_size: int = REAL_IMAGE_SIZE, supersample: int = 2) -> Tensor:
    """Images [N, 3, S, S] in [0, 1] of factor levels [N, 6] (Shapes3D order); deterministic."""
    _check_factors(factors)
    if image_size < 4 or supersample < 1:
        raise ValueError(f"need image_size ≥ 4 and supersample ≥ 1, got {image_size}, {supersample}")
    f = factors.long()
    n, hi = f.shape[0], image_size * supersample
    hues = f[:, :3].float() / 10
    floor_rgb, wall_rgb, object_rgb = (hue_to_rgb(hues[:, i]).reshape(n, 3, 1, 1) for i in range(3))
    scale = FACTOR_VALUES["scale"].float()[f[:, 3]].reshape(n, 1, 1)
    theta = torch.deg2rad(FACTOR_VALUES["orientation"].float()[f[:, 5]]).reshape(n, 1, 1)
    coords = (torch.arange(hi, dtype=torch.float32) + 0.5) / hi * 2 - 1
    y, x = -coords.reshape(1, hi, 1), coords.reshape(1, 1, hi)
    # room: two wall planes meeting in a corner that moves with the turn; floor boundary slopes down from the corner
    corner = -0.9 * torch.tan(theta)
    horizon = HORIZON - 0.25 * (x - corner).abs()
    left = x < corner
    wall_angle = theta + torch.where(left, math.pi / 4, -math.pi / 4)
    wall_normal = _vec(wall_angle.sin(), 0 * wall_angle, wall_angle.cos())
    wall_shade = _lambert(wall_normal) * (0.9 + 0.1 * (y - horizon) / (1 - horizon))
    floor_shade = 0.55 + 0.45 * (horizon - y) / (horizon + 1)
    image = torch.where(
        (y < horizon).unsqueeze(1), floor_shade.unsqueeze(1) * floor_rgb, wall_shade.unsqueeze(1) * wall_rgb
    )
    for shape in range(len(SHAPE_NAMES)):
        rows = (f[:, 4] == shape).nonzero().squeeze(1)
        if rows.numel():
            mask, normal = _object(shape, scale[rows], theta[rows], x, y)
            shaded = _lambert(normal).unsqueeze(1) * object_rgb[rows]
            image[rows] = torch.where(mask.unsqueeze(1), shaded, image[rows])
    return F.avg_pool2d(image, supersample).clamp(0.0, 1.0) if supersample > 1 else image.clamp(0.0, 1.0)


def render_indices(index: Tensor, image_size: int = REAL_IMAGE_SIZE, batch: int = 256) -> Shapes3DData:
    """Rendered images of flat Shapes3D indices, in batches."""
    factors = factors_from_index(index)
    images = torch.cat([render_shapes3d(factors[i : i + batch], image_size) for i in range(0, len(factors), batch)])
    return Shapes3DData(images=images, factors=factors)


def check_shapes3d_h5(path: str | Path) -> int:
    """The number of images in a Shapes3D file of the `3dshapes.h5` layout, read from its header only; ValueError
    (one line naming the path) when it is missing, not HDF5, or not that layout. What a run checks before its folder
    is made."""
    import h5py

    if not Path(path).is_file():
        raise ValueError(f"Shapes3D file {path}: " + ("not a regular file" if Path(path).exists() else "no such file"))
    try:
        with h5py.File(path, "r") as h5:
            return len(_layout(h5, path)[0])
    except OSError as err:  # h5py's "unable to open file (file signature not found)" and its kin
        raise ValueError(f"Shapes3D file {path} is not an HDF5 file that reads ({str(err).splitlines()[0][:160]})") from None


def _layout(h5, path):
    """(images, labels) datasets of an open Shapes3D file; ValueError naming what is wrong with its layout."""
    if "images" not in h5 or "labels" not in h5:
        raise ValueError(f"{path}: not a Shapes3D file; need datasets 'images' and 'labels', found {sorted(h5)}")
    images, labels = h5["images"], h5["labels"]
    if images.dtype != "uint8" or images.ndim != 4 or images.shape[1:] != (REAL_IMAGE_SIZE, REAL_IMAGE_SIZE, 3):
        raise ValueError(f"{path}: 'images' must be uint8 [N, 64, 64, 3], got {images.dtype} {images.shape}")
    if labels.ndim != 2 or labels.shape != (images.shape[0], len(FACTORS)) or labels.dtype.kind != "f":
        raise ValueError(f"{path}: 'labels' must be float [N, 6] with N = {images.shape[0]}, got {labels.shape}")
    return images, labels


def load_shapes3d_h5(path: str | Path, indices: Tensor | None = None, image_size: int | None = None) -> Shapes3DData:
    """The real `3dshapes.h5` (or a file of the same layout): all images, or those at `indices`, optionally resized."""
    import h5py

    with h5py.File(path, "r") as h5:
        images, labels = _layout(h5, path)
        if indices is None:
            pixels, values = images[()], labels[()]
        else:
            order = torch.as_tensor(indices, dtype=torch.long)
            if bool(((order < 0) | (order >= images.shape[0])).any()):
                raise ValueError(f"{path}: indices out of range [0, {images.shape[0]})")
            unique, inverse = torch.unique(order, return_inverse=True)  # h5py needs increasing indices
            pixels, values = images[unique.numpy()][inverse.numpy()], labels[unique.numpy()][inverse.numpy()]
    out = torch.from_numpy(pixels).permute(0, 3, 1, 2).float() / 255.0
    if image_size is not None and image_size != REAL_IMAGE_SIZE:
        out = F.interpolate(out, size=(image_size, image_size), mode="area")
    return Shapes3DData(images=out.contiguous(), factors=factors_from_labels(torch.from_numpy(values)))
