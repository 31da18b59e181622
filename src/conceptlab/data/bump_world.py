"""The `bumps` data-generating process: a lattice of labels (μx, μy), a held-out region, one image per label.

`BumpWorld(cfg)` turns a `BumpsDataConfig` into the training set the runner trains on and the label sets the
evaluation generates at. Rendering, lattices, splits and subsampling are the functions of `data.bumps`; this
module only assembles them:

1. the lattice covers the *drawn* canvas [0, N + 2·border)² with spacings (dx, dy);
2. each label's image type is 0/1/2: how many of its centres fall inside the visible frame (`data.bumps.image_type`);
3. the held-out region removes labels from training — only 2D labels (`scope=2d`: the stripes of the other types
   still cover the region, the composition test) or every label in it (`scope=all`: interpolation);
4. a fraction λ of the remaining training labels is kept, chosen by `data_seed` — of all of them, or with
   `fraction_scope=2d` of the 2D ones only (every stripe kept).

Images are `[N, 1, S, S]` in [0, 1] (one channel); prompts are the labels themselves, `[N, 2]` float32.
The evaluation's regions are the 2D labels: `train` (trained on), `held_out` (in the held-out region) and `unseen`
(dropped by subsampling).
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor

from conceptlab.config_base import DataSection, StrictConfig
from conceptlab.data.bumps import SplitSpec, held_out_mask, image_type, lattice, render, subsample
from conceptlab.data.labelled import LabelledImages

BumpImage = Literal["bump", "vertical", "horizontal", "sos", "product", "bump+stripes"]


class HeldOutRegion(StrictConfig):
    """A region of label space (μx, μy) held out of training, in the labels' (drawn-canvas) coordinates.

    - `none`: nothing held out;
    - `x_band`: labels with low ≤ μx ≤ high;
    - `lesion`: the square |μ − centre| ≤ width/2 on both axes ("interior square");
    - `exterior`: everything outside that square (train on the interior only).

    `scope` says which images lose it: `2d` only images whose two centres are both inside the visible frame
    (1D stripes still cover the region: the composition test), `all` every image whatever its type (no image
    ever shows those coordinates: the interpolation test).
    """

    kind: Literal["none", "x_band", "lesion", "exterior"] = "none"
    low: float = 13.0
    high: float = 19.0
    width: float = 8.0
    centre: tuple[float, float] = (16.0, 16.0)
    scope: Literal["2d", "all"] = "2d"

    @model_validator(mode="after")
    def _shape(self) -> "HeldOutRegion":
        if self.kind == "x_band" and not self.low <= self.high:
            raise ValueError(f"x_band needs low ≤ high, got low={self.low}, high={self.high}")
        if self.kind in ("lesion", "exterior") and not self.width > 0:
            raise ValueError(f"{self.kind} needs width > 0, got {self.width}")
        return self


class BumpsDataConfig(DataSection):
    """Gaussian bump worlds (Liang et al. 2024): one grayscale image per label (μx, μy) of a lattice.

    Labels are in the coordinates of the drawn canvas: with `border` > 0 (the extended canvas, e.g. 6 for
    44×44 cropped to 32×32) the lattice covers the whole drawn canvas, so stripes and sums of stripes include
    images with one or both centres outside the visible frame (1D / 0D images). The prompt is (μx, μy).
    """

    kind: Literal["bumps"] = "bumps"
    image: BumpImage = Field(
        "bump",
        description="bump, vertical, horizontal, sos (sum of stripes), product, or bump+stripes (extended canvas: "
        "a bump where both centres are in the frame, a 1D stripe where one is)",
    )
    image_size: int = Field(32, ge=8, description="visible canvas N (N×N)")
    border: int = Field(0, ge=0, description="extended canvas: pixels drawn beyond each edge, then cropped")
    periodic: bool = Field(False, description="torus: distances wrap around the drawn canvas")
    sigma: tuple[float, float] = Field((1.0, 1.0), description="bump widths (σx, σy) in pixels")
    spacing: tuple[float, float] = Field((1.0, 1.0), description="lattice spacings (dx, dy) in pixels")
    fraction: float = Field(1.0, gt=0.0, le=1.0, description="λ: fraction of lattice points kept (subsampling)")
    fraction_scope: Literal["all", "2d"] = Field(
        "all",
        description="which training labels λ thins: all of them, or only the 2D ones (every 1D stripe and 0D image "
        "kept: the paper's 'all 1D stripes and a few 2D bumps')",
    )
    held_out: HeldOutRegion = Field(default_factory=HeldOutRegion)
    copies: int = Field(1, ge=1, description="times each training image is repeated in the training set")
    null_value: float = Field(-1.0, description="prompt value of a dropped label (outside every coordinate, all ≥ 0)")
    data_seed: int = Field(0, ge=0)

    @field_validator("sigma", "spacing")
    @classmethod
    def _positive(cls, v: tuple[float, float]) -> tuple[float, float]:
        if min(v) <= 0:
            raise ValueError(f"must be > 0 on both axes, got {v}")
        return v

    @model_validator(mode="after")
    def _stripes_need_a_border(self) -> "BumpsDataConfig":
        if self.image == "bump+stripes" and self.border == 0:
            raise ValueError("image bump+stripes needs border > 0: its stripes are the labels outside the frame")
        if self.periodic and self.border > 0:
            raise ValueError("periodic needs border 0: a torus wraps the visible frame, and an extended canvas would "
                             "wrap at the drawn one (the locator, label refinement and chord tests would disagree)")
        return self

    @model_validator(mode="after")
    def _held_out_inside_the_frame(self) -> "BumpsDataConfig":
        """The held-out region's defaults are for the 32-pixel frame without a border; on any other canvas they would
        hold out a corner, or nothing: the region must lie inside the visible frame, in label coordinates."""
        h, low, high = self.held_out, float(self.border), float(self.border + self.image_size)
        frame = f"the visible frame [{low:g}, {high:g}] (label coordinates: border {self.border} + image_size " \
                f"{self.image_size})"
        if h.kind == "x_band" and not low <= h.low <= h.high <= high:
            raise ValueError(f"held_out x_band [{h.low:g}, {h.high:g}] must lie inside {frame}: set held_out.low "
                             "and held_out.high")
        if h.kind in ("lesion", "exterior") and not all(low <= c - h.width / 2 and c + h.width / 2 <= high
                                                         for c in h.centre):
            middle = low + self.image_size / 2
            raise ValueError(f"held_out {h.kind}: the square of width {h.width:g} around {tuple(h.centre)} must lie "
                             f"inside {frame} on both axes (the frame's centre is ({middle:g}, {middle:g})): set "
                             "held_out.centre and held_out.width")
        return self

    @property
    def drawn_size(self) -> int:
        return self.image_size + 2 * self.border


class BumpWorld:
    """Gaussian bump / stripe images on a label lattice, with a held-out region (see the module docstring)."""

    channels = 1
    prompt_dim = 2
    attribute_sizes = None  # the prompt is one block (μx, μy)
    concepts = ("x", "y")

    def __init__(self, cfg: BumpsDataConfig):
        self.cfg = cfg
        self.image_size = cfg.image_size
        self.null_label = cfg.null_value  # a dropped label: the encoder maps it to zero features
        self.period = float(cfg.drawn_size) if cfg.periodic else None
        self.labels = lattice(cfg.spacing, (0.0, float(cfg.drawn_size)))
        self.types = image_type(self.labels, cfg.image_size, cfg.border)
        region = cfg.held_out
        spec = SplitSpec(region.kind, region.low, region.high, region.width, tuple(region.centre))
        in_region = held_out_mask(self.labels, spec)
        removed = in_region & (self.types == 2) if region.scope == "2d" else in_region
        if region.kind != "none" and not bool((in_region & (self.types == 2)).any()):
            raise ValueError(f"held-out region {region.model_dump()} contains no 2D label of this lattice")
        candidates = self.labels[~removed]
        if len(candidates) == 0:
            raise ValueError(f"held-out region {region.model_dump()} removes every label: no training data left")
        self.train_labels = self._subsample(candidates)
        train_types = image_type(self.train_labels, cfg.image_size, cfg.border)
        if not bool((train_types == 2).any()):
            raise ValueError("no 2D image (both centres inside the frame) is left for training")
        self.held_out_labels = self.labels[in_region & (self.types == 2)]
        self.train_2d_labels = self.train_labels[train_types == 2]

    def _subsample(self, candidates: Tensor) -> Tensor:
        """Keep a fraction λ of the candidate labels — of all of them, or (`fraction_scope=2d`) of the 2D ones only,
        every 1D / 0D label kept — in lattice order."""
        cfg = self.cfg
        if cfg.fraction >= 1:
            return candidates
        if cfg.fraction_scope == "all":
            return subsample(candidates, cfg.fraction, cfg.data_seed)
        is_2d = image_type(candidates, cfg.image_size, cfg.border) == 2
        keep = ~is_2d
        keep[subsample(torch.nonzero(is_2d).squeeze(1), cfg.fraction, cfg.data_seed)] = True
        return candidates[keep]

    # -- images -----------------------------------------------------------------------------------------------------
    def render(self, labels: Tensor) -> Tensor:
        """Images `[B, 1, S, S]` of labels `[B, 2]` (drawn-canvas coordinates).

        `bump+stripes` (the paper's "bumps + stripes" family): a 2D bump where both centres are inside the frame, a
        vertical stripe where only μx is, a horizontal stripe where only μy is, blank where neither is.
        """
        cfg = self.cfg
        args = (labels, cfg.image_size, tuple(cfg.sigma), cfg.border, cfg.periodic)
        if cfg.image != "bump+stripes":
            return render(cfg.image, *args)[:, None]
        inside = (labels >= cfg.border) & (labels < cfg.border + cfg.image_size)
        images = torch.zeros(len(labels), cfg.image_size, cfg.image_size)
        for kind, rows in (("bump", inside[:, 0] & inside[:, 1]), ("vertical", inside[:, 0] & ~inside[:, 1]),
                           ("horizontal", ~inside[:, 0] & inside[:, 1])):
            if bool(rows.any()):
                images[rows] = render(kind, labels[rows], *args[1:])
        return images[:, None]

    def make_prompt(self, labels: Tensor) -> Tensor:
        """Prompts `[B, 2]` of labels `[B, 2]`."""
        if labels.ndim != 2 or labels.shape[1] != 2:
            raise ValueError(f"labels must be [B, 2] (μx, μy), got shape {tuple(labels.shape)}")
        return labels.float()

    def training_set(self) -> LabelledImages:
        """Every training label's image, `copies` times."""
        labels = self.train_labels.repeat(self.cfg.copies, 1)
        return LabelledImages(self.render(labels), self.make_prompt(labels), labels)

    def regions(self) -> dict[str, Tensor]:
        """The 2D labels evaluated: `train` (trained on), `held_out` (in the held-out region) and `unseen` (dropped
        by subsampling λ < 1, outside the held-out region), each when it has labels."""
        out = {"train": self.train_2d_labels}
        if len(self.held_out_labels):
            out["held_out"] = self.held_out_labels
        grid = self.labels[self.types == 2]
        known = torch.cat([self.train_2d_labels, self.held_out_labels])
        unseen = grid[~(grid[:, None, :] == known[None, :, :]).all(dim=2).any(dim=1)]
        if len(unseen):
            out["unseen"] = unseen
        return out

    def grid_labels(self) -> Tensor:
        """All 2D labels of the lattice (trained or not), x-major: the grid representations are read over."""
        return self.labels[self.types == 2]

    def describe(self) -> dict:
        """A JSON-able summary for the run record."""
        cfg = self.cfg
        counts = {f"{d}d": int((self.types == d).sum()) for d in (0, 1, 2)}
        train_types = image_type(self.train_labels, cfg.image_size, cfg.border)
        return {
            "kind": "bumps",
            "image": cfg.image,
            "image_size": cfg.image_size,
            "drawn_size": cfg.drawn_size,
            "periodic": cfg.periodic,
            "sigma": list(cfg.sigma),
            "spacing": list(cfg.spacing),
            "fraction": cfg.fraction,
            "fraction_scope": cfg.fraction_scope,
            "held_out": cfg.held_out.model_dump(),
            "lattice_labels": {**counts, "total": len(self.labels)},
            "train_labels": {**{f"{d}d": int((train_types == d).sum()) for d in (0, 1, 2)}, "total": len(self.train_labels)},
            "held_out_2d_labels": len(self.held_out_labels),
            "training_images": len(self.train_labels) * cfg.copies,
            "prompt_dim": self.prompt_dim,
        }
