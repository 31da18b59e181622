"""The `shapes3d` data-generating process: Shapes3D scenes whose chosen attributes vary and are prompted.

`Shapes3DWorld(cfg)` turns a `Shapes3DDataConfig` into the training set the runner trains on: every combination of
the levels of `cfg.attributes` (each factor restricted to `cfg.levels` if given; every other factor at its `fixed`
level), rendered by `data.shapes3d.render_shapes3d` or read from the real `3dshapes.h5`, `copies` times.

Images are held as uint8 (as in the real file): the full Shapes3D world is 480,000 × 3 × 64 × 64 = 5.9 GB in uint8
against 24 GB in float32; `images(rows)` and the training loop convert batches to float in [0, 1] when used.

Prompts are one-hot blocks per attribute (`data.attribute_prompt.AttributePrompt`); an attribute's class is the
*position* of its level among the chosen levels (0..K−1), so H(V) = ln K. `attribute_sizes` tells the VE process
where the blocks are, for attribute-wise label dropout.
"""

from __future__ import annotations

import itertools
import os
from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor

from conceptlab.config_base import DataSection
from conceptlab.data.attribute_prompt import AttributePrompt
from conceptlab.data.labelled import LabelledImages, unit_float
from conceptlab.data.shapes3d import FACTOR_SIZES as LEVELS_PER_FACTOR
from conceptlab.data.shapes3d import (
    FACTOR_VALUES,
    FACTORS,
    HUE_NAMES,
    SHAPE_NAMES,
    check_shapes3d_h5,
    index_from_factors,
    load_shapes3d_h5,
    render_shapes3d,
)

Factor = Literal["floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation"]
FACTOR_SIZES = dict(zip(FACTORS, LEVELS_PER_FACTOR))


class Shapes3DDataConfig(DataSection):
    """Shapes3D scenes (floor, wall, object): the procedural renderer or the real `3dshapes.h5`.

    `attributes` are the factors that vary and are prompted (one-hot block each); every other factor stays at
    its `fixed` level. `levels` may restrict a factor to some of its levels (default: all).
    """

    kind: Literal["shapes3d"] = "shapes3d"
    source: Literal["render", "h5"] = Field("render", description="render: procedural; h5: the real file")
    h5_path: str | None = Field(None, description="path of 3dshapes.h5 (source=h5; a leading ~ is your home folder)")
    attributes: list[Factor] = Field(default_factory=lambda: ["wall_hue", "shape"], min_length=1)
    fixed: dict[Factor, int] = Field(
        default_factory=lambda: {"floor_hue": 0, "wall_hue": 6, "object_hue": 3, "scale": 5, "shape": 0, "orientation": 7},
        description="level of each factor that is not an attribute",
    )
    levels: dict[Factor, list[int]] = Field(default_factory=dict, description="restrict factors to these levels")
    image_size: int = Field(16, ge=8, le=64)
    copies: int = Field(1, ge=1, description="times each combination is repeated in the training set")
    null_value: float = Field(0.0, description="prompt value of a dropped attribute (all-zero one-hot block)")
    data_seed: int = Field(0, ge=0)

    @field_validator("h5_path")
    @classmethod
    def _home(cls, v: str | None) -> str | None:
        return os.path.expanduser(v) if v else v

    @field_validator("attributes")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"attributes must be distinct, got {v}")
        return v

    @model_validator(mode="after")
    def _levels_valid(self) -> "Shapes3DDataConfig":
        if self.source == "h5" and not self.h5_path:
            raise ValueError("source h5 needs h5_path (the path of 3dshapes.h5)")
        for factor, level in self.fixed.items():
            if not 0 <= level < FACTOR_SIZES[factor]:
                raise ValueError(f"fixed.{factor} = {level} is not a level (0..{FACTOR_SIZES[factor] - 1})")
        for factor, chosen in self.levels.items():
            bad = [v for v in chosen if not 0 <= v < FACTOR_SIZES[factor]]
            if bad or len(set(chosen)) != len(chosen) or len(chosen) < 2:
                raise ValueError(f"levels.{factor} must be ≥ 2 distinct levels in 0..{FACTOR_SIZES[factor] - 1}, got {chosen}")
        return self

    def attribute_levels(self, factor: str) -> list[int]:
        return list(self.levels.get(factor, range(FACTOR_SIZES[factor])))


CHUNK = 256  # images rendered or read per call


def level_name(factor: str, level: int) -> str:
    """A factor's level in words: hue names for the hues, the shape's name, the scale and the orientation's degrees."""
    if factor.endswith("_hue"):
        return HUE_NAMES[level]
    if factor == "shape":
        return SHAPE_NAMES[level]
    value = float(FACTOR_VALUES[factor][level])
    return f"scale {value:.2f}" if factor == "scale" else f"{value:+.0f}°"


def to_uint8(images: Tensor) -> Tensor:
    """Float images in [0, 1] → uint8 0..255 (rounded)."""
    return (images.clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)


class Shapes3DWorld:
    """Shapes3D renders over the combinations of the prompted attributes (see the module docstring)."""

    channels = 3

    def __init__(self, cfg: Shapes3DDataConfig):
        self.cfg = cfg
        self.image_size = cfg.image_size
        self.null_label = cfg.null_value  # a dropped attribute block
        self.attributes = tuple(cfg.attributes)
        self.concepts = self.attributes
        self.levels = {a: cfg.attribute_levels(a) for a in self.attributes}
        self.prompt = AttributePrompt(self.attributes, tuple(len(self.levels[a]) for a in self.attributes),
                                      cfg.null_value)
        self.prompt_dim = self.prompt.dim
        self.attribute_sizes = self.prompt.sizes
        self.fixed = {f: cfg.fixed.get(f, 0) for f in FACTORS if f not in self.attributes}
        combos = list(itertools.product(*[range(len(self.levels[a])) for a in self.attributes]))
        self.classes = torch.tensor(combos, dtype=torch.long)  # [M, A] class of each attribute
        self._images: Tensor | None = None

    def check_source(self) -> None:
        """With `source: h5`, ValueError (one line) unless the file is there, reads as HDF5 in the `3dshapes.h5`
        layout and holds every image this world's scenes index: what a run checks before its folder is made (the
        world itself reads the file only when it first needs an image, so a finished run loads without it)."""
        if self.cfg.source != "h5":
            return
        rows = check_shapes3d_h5(self.cfg.h5_path)
        needed = int(index_from_factors(self.factors(self.classes)).max()) + 1
        if rows < needed:
            raise ValueError(f"data.h5_path {self.cfg.h5_path}: {rows:,} images, but this config's scenes need the "
                             f"full 3dshapes.h5 layout up to image {needed:,}")

    def factors(self, classes: Tensor) -> Tensor:
        """Shapes3D factor levels `[N, 6]` of attribute classes `[N, A]` (the other factors at their fixed level)."""
        classes = torch.as_tensor(classes, dtype=torch.long)
        if classes.ndim != 2 or classes.shape[1] != len(self.attributes):
            raise ValueError(f"classes must be [N, {len(self.attributes)}] for {list(self.attributes)}")
        out = torch.empty(len(classes), len(FACTORS), dtype=torch.long)
        for j, name in enumerate(FACTORS):
            if name in self.attributes:
                i = self.attributes.index(name)
                levels = torch.tensor(self.levels[name])
                if bool(((classes[:, i] < 0) | (classes[:, i] >= len(levels))).any()):
                    raise ValueError(f"{name} classes must lie in 0..{len(levels) - 1}")
                out[:, j] = levels[classes[:, i]]
            else:
                out[:, j] = self.fixed[name]
        return out

    def render(self, classes: Tensor) -> Tensor:
        """Images `[N, 3, S, S]` in [0, 1] of attribute classes `[N, A]` (procedural or from the h5 file)."""
        return unit_float(self._render(classes))

    def _render(self, classes: Tensor) -> Tensor:
        """uint8 images `[N, 3, S, S]` of attribute classes `[N, A]`, rendered (or read) 256 at a time."""
        factors = self.factors(classes)
        out = torch.empty(len(factors), 3, self.image_size, self.image_size, dtype=torch.uint8)
        for i in range(0, len(factors), CHUNK):
            part = factors[i : i + CHUNK]
            if self.cfg.source == "h5":
                images = load_shapes3d_h5(self.cfg.h5_path, index_from_factors(part), self.image_size).images
            else:
                images = render_shapes3d(part, self.image_size)
            out[i : i + len(part)] = to_uint8(images)
        return out

    def make_prompt(self, classes: Tensor, given: list[str] | None = None) -> Tensor:
        """Prompts `[N, prompt_dim]` of attribute classes `[N, A]`; attributes not `given` are null."""
        return self.prompt.encode(torch.as_tensor(classes, dtype=torch.long), given)

    def all_images(self) -> Tensor:
        """One uint8 image `[3, S, S]` per combination, in the order of `classes` (rendered once, then cached)."""
        if self._images is None:
            self._images = self._render(self.classes)
        return self._images

    def images(self, rows: Tensor) -> Tensor:
        """Float images in [0, 1] of the combinations at `rows` (indices into `classes`)."""
        return unit_float(self.all_images()[torch.as_tensor(rows, dtype=torch.long)])

    def training_set(self) -> LabelledImages:
        """Every combination `copies` times: uint8 images, one-hot prompts, attribute classes as labels."""
        copies = self.cfg.copies
        images = self.all_images().repeat(copies, 1, 1, 1)
        classes = self.classes.repeat(copies, 1)
        return LabelledImages(images, self.make_prompt(classes), classes)

    def describe(self) -> dict:
        """A JSON-able summary for the run record."""
        return {
            "kind": "shapes3d",
            "source": self.cfg.source,
            "attributes": list(self.attributes),
            "levels": {a: list(v) for a, v in self.levels.items()},
            "fixed": dict(self.fixed),
            "combinations": len(self.classes),
            "training_images": len(self.classes) * self.cfg.copies,
            "image_size": self.image_size,
            "prompt_dim": self.prompt_dim,
            "attribute_sizes": list(self.attribute_sizes),
            "level_names": {a: [level_name(a, v) for v in self.levels[a]] for a in self.attributes},
        }
