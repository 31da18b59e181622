"""The `shapes` data-generating process: ground-truth concept images and their prompts (Park et al. 2024)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field, field_validator, model_validator
from torch import Tensor

from conceptlab.config_base import DataSection

ATTRIBUTES = ("color", "size", "background", "shape")  # what the renderer draws; the concepts are a subset
Concept = Literal["color", "size", "background", "shape"]
COLOR, SIZE, BACKGROUND, SHAPE = range(len(ATTRIBUTES))  # columns of an attribute-value matrix
NUISANCE_BACKGROUND = (0.8, 1.0)  # per-channel range of the background when it is not a concept
TEST_BACKGROUND = 0.9
NOISE_STD = 0.001
RADIUS_MEAN = 0.45
RADIUS_FLOOR = 0.1
BLUR_SIGMA = 1.0  # pixels
MAX_JITTER = 4 / 3  # above it the size jitter (±3/8·Δs·jitter) passes Δs/2: large and small sizes overlap
RENDER_PEAK = 4  # rendering N images holds about 4× their float32 bytes at its peak (mask, blur, noise: 3.6×)
PROMPT_WIDTH = {"color": 3, "size": 1, "background": 1, "shape": 2}  # natural width of each concept's value
PAPER11_SLICES = {"shape": slice(0, 2), "color": slice(4, 7), "size": slice(7, 8), "background": slice(8, 11)}
NEUTRAL = {"color": 0.5, "size": RADIUS_MEAN, "background": 0.5, "shape": 0.5}  # midway between a concept's values
VALUE_NAMES = {"color": ("red", "blue"), "size": ("large", "small"), "background": ("light", "dark"),
               "shape": ("circle", "triangle")}  # what a concept's value 0 and 1 are


def binary_codes(n: int) -> list[str]:
    """Every class code of n binary concepts, in binary order: "00", "01", "10", "11" for n = 2."""
    return [format(i, f"0{n}b") for i in range(2**n)]


def code_as_string(code, width: int):
    """A class code as a string: an int (YAML reads an unquoted 10 or 11 as one) is padded to `width` digits; a
    string, or anything else, is returned as given (a string is never padded: "10" for three concepts is refused,
    not read as 010; the loader keeps zero-led codes such as 010 as strings)."""
    return format(code, f"0{width}d") if isinstance(code, int) and not isinstance(code, bool) else code


def check_class_code(where: str, code: str, concepts: list[str]) -> None:
    """Refuse (ValueError, one line naming `where`) a class code that is not one 0/1 digit per concept."""
    n = len(concepts)
    if not isinstance(code, str) or len(code) != n or set(code) - {"0", "1"}:
        raise ValueError(f"{where}: {code!r} is not a class code: it must be {n} digits of 0/1 (one per concept "
                         f"{concepts})")


def check_class_list(where: str, codes: list[str], concepts: list[str]) -> None:
    """Refuse (ValueError, one line naming `where`) a list of class codes with a code that is not one 0/1 digit per
    concept, or a code listed twice (it would count twice: a doubled class weight, a target evaluated twice)."""
    for code in codes:
        check_class_code(where, code, concepts)
    twice = sorted({c for c in codes if codes.count(c) > 1})
    if twice:
        raise ValueError(f"{where}: class codes {twice} are listed more than once; list each class once")


def codes_as_strings(data, fields: tuple[str, ...], default_width: int):
    """A raw data section with the class codes of `fields` as strings (`code_as_string`): YAML reads a code such
    as 10 or 11 as an int, turned back into one digit per concept (`concepts`' length, else `default_width`)."""
    if not isinstance(data, dict):
        return data
    width = len(data.get("concepts") or [None] * default_width)
    for name in fields:
        codes = data.get(name)
        if isinstance(codes, list):
            data = {**data, name: [code_as_string(c, width) for c in codes]}  # a boolean stays one, to be refused
    return data


class ShapesDataConfig(DataSection):
    """The `shapes` data-generating process (Park et al. 2024, generalised to n concepts).

    Each concept has two values, "0" (default) and "1"; a class is a code such as
    "01" giving the value of each concept in `concepts` order.
    """

    added_fields = ("mask_value",)

    labels_survive_hflip: ClassVar[bool] = True  # color, size, background, shape: a mirrored scene keeps them (the
    # centre is drawn from a symmetric range and is in no prompt; circles and apex-up triangles are mirror-symmetric)

    kind: Literal["shapes"] = "shapes"
    concepts: list[Concept] = Field(default_factory=lambda: ["color", "size"], min_length=1)
    color_separation: float = Field(0.4, ge=0.0, le=1.0, description="Δc: red/blue mean distance per channel")
    size_separation: float = Field(0.4, ge=0.0, le=0.7, description="Δs: large/small radius difference")
    background_separation: float = Field(0.4, ge=0.0, le=1.0, description="Δb: light/dark grey difference")
    jitter: float = Field(
        1.0, ge=0.0, description="scale of the per-image concept jitter (1 = the paper's); at most "
        "4/3, above which large and small sizes overlap (a size no longer tells its class)"
    )
    train_classes: list[str] | None = Field(
        None, description="class codes to train on (distinct, none of them held out); default: when "
        "held_out_classes is set, every class not held out; when neither is set, the classes with at most one "
        "non-default concept. The resolved list is in the run's data.json and summary.json (train_classes)"
    )
    held_out_classes: list[str] | None = Field(
        None, description="class codes never trained on, evaluated as out-of-distribution (distinct); default: "
        "every class not trained on. Setting it alone trains on every other class, multi-concept ones included"
    )
    images_per_class: int = Field(2048, ge=1)
    image_size: int = Field(32, ge=8)
    prompt_layout: Literal["compact", "paper11"] = Field(
        "compact", description="compact: only active concepts' values; paper11: the authors' 11-dim layout"
    )
    prompt_mask_fraction: dict[Concept, float] = Field(
        default_factory=dict, description="per concept, fraction of training prompts whose entries are masked"
    )
    null_value: float = Field(
        0.0, description="the null prompt's value (every entry): classifier-free-guidance dropout in training and "
        "the unconditional branch of guidance (the authors': −1); also masked entries unless mask_value is set"
    )
    mask_value: float | None = Field(
        None, description="value of masked prompt entries (prompt_mask_fraction) and of concepts a prompt leaves "
        "out; None: null_value"
    )
    data_seed: int = Field(0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _class_codes_as_strings(cls, data):
        return codes_as_strings(data, ("train_classes", "held_out_classes"), 2)

    @field_validator("concepts")
    @classmethod
    def _unique_concepts(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"concepts must be distinct, got {v}")
        return v

    @field_validator("prompt_mask_fraction")
    @classmethod
    def _fractions(cls, v: dict[str, float]) -> dict[str, float]:
        for k, f in v.items():
            if not 0.0 <= f <= 1.0:
                raise ValueError(f"prompt_mask_fraction.{k} must be in [0, 1], got {f}")
        return v

    @field_validator("jitter")
    @classmethod
    def _jitter_keeps_sizes_apart(cls, v: float) -> float:
        if v > MAX_JITTER:
            raise ValueError(f"jitter {v} is above 4/3: the size jitter (±3/8·Δs·jitter) would pass Δs/2, so "
                             "large and small sizes overlap; use at most 4/3")
        return v

    @model_validator(mode="after")
    def _classes_valid(self) -> "ShapesDataConfig":
        for field in ("train_classes", "held_out_classes"):
            codes = getattr(self, field)
            if codes is not None:
                check_class_list(field, codes, self.concepts)
        if self.train_classes is not None and self.held_out_classes is not None:
            both = sorted(set(self.train_classes) & set(self.held_out_classes))
            if both:
                raise ValueError(f"classes {both} are in both train_classes and held_out_classes; a class is "
                                 "trained on or held out, not both")
        if not self.resolved_train_classes():
            raise ValueError("the held-out set removes every training class: nothing left to train on")
        for k in self.prompt_mask_fraction:
            if k not in self.concepts:
                raise ValueError(f"prompt_mask_fraction names {k!r}, not one of concepts {self.concepts}")
        return self

    def all_classes(self) -> list[str]:
        return binary_codes(len(self.concepts))

    def resolved_train_classes(self) -> list[str]:
        """`train_classes` as given; else every class not held out when `held_out_classes` is set; else the
        classes with at most one non-default concept."""
        if self.train_classes is not None:
            return list(self.train_classes)
        if self.held_out_classes is not None:
            held = set(self.held_out_classes)
            return [c for c in self.all_classes() if c not in held]
        return [c for c in self.all_classes() if c.count("1") <= 1]

    def resolved_held_out_classes(self) -> list[str]:
        if self.held_out_classes is not None:
            return list(self.held_out_classes)
        train = set(self.resolved_train_classes())
        return [c for c in self.all_classes() if c not in train]


def seeded_generator(*parts: object) -> torch.Generator:
    """A CPU generator seeded by a stable hash of `parts` (independent streams for independent uses)."""
    digest = hashlib.sha256(repr(parts).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


@dataclass
class Scene:
    """Per-image render parameters."""

    color: Tensor  # [N, 3] RGB of the object
    radius: Tensor  # [N] circumradius, canvas half-width = 1
    background: Tensor  # [N, 3]
    shape: Tensor  # [N] long, 0 circle / 1 triangle
    center: Tensor  # [N, 2] (x, y)

    def render(
        self, image_size: int, noise_std: float = NOISE_STD, generator: torch.Generator | None = None
    ) -> Tensor:
        return render(
            self.color, self.radius, self.background, self.shape, self.center, image_size, noise_std, generator
        )


@dataclass
class ConceptDataset:
    """Images with their prompts and classes; `class_index` points into `class_codes`."""

    images: Tensor  # float32 [N, 3, S, S] in [0, 1]
    prompts: Tensor  # float32 [N, D]
    class_index: Tensor  # long [N]
    class_codes: list[str]

    def __len__(self) -> int:
        return self.images.shape[0]


def blur_matrix(size: int, sigma: float = BLUR_SIGMA) -> Tensor:
    """[S, S] matrix B such that B @ X @ B.T blurs X with a Gaussian of `sigma` px (edges replicated)."""
    half = max(1, int(round(3 * sigma)))
    offsets = torch.arange(-half, half + 1)
    taps = torch.exp(-0.5 * (offsets.float() / sigma) ** 2)
    rows = torch.arange(size).view(-1, 1).expand(-1, offsets.numel())
    cols = (rows + offsets).clamp(0, size - 1)
    return torch.zeros(size, size).index_put_((rows, cols), (taps / taps.sum()).expand_as(rows), accumulate=True)


def render(
    color: Tensor,
    radius: Tensor,
    background: Tensor,
    shape: Tensor,
    center: Tensor,
    image_size: int,
    noise_std: float = NOISE_STD,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Render one object per image: hard mask (circle, or equilateral triangle of the same circumradius),
    blurred with a Gaussian of σ = 1 px, composited on a flat background, plus pixel noise, clipped to [0, 1].

    Shapes: color [N,3], radius [N], background [N,3], shape [N] (0/1), center [N,2] → [N, 3, S, S].
    """
    n, s = color.shape[0], image_size
    axis = (torch.arange(s, dtype=torch.float32) + 0.5) * (2.0 / s) - 1.0  # pixel centres in (-1, 1)
    dx = axis.view(1, 1, s) - center[:, 0].float().view(n, 1, 1)
    dy = axis.view(1, s, 1) - center[:, 1].float().view(n, 1, 1)  # rows grow downwards
    r = radius.float().view(n, 1, 1)
    circle = dx**2 + dy**2 <= r**2
    # apex up; inside iff the projection on each outward edge normal is at most the inradius r/2
    half_r, c30 = r / 2, 3**0.5 / 2
    triangle = (dy <= half_r) & (c30 * dx - 0.5 * dy <= half_r) & (-c30 * dx - 0.5 * dy <= half_r)
    mask = torch.where(shape.view(n, 1, 1).bool(), triangle, circle).float()
    blur = blur_matrix(s)
    mask = (blur @ mask @ blur.T).unsqueeze(1)  # separable Gaussian blur as two small matmuls
    bg = background.float().view(n, 3, 1, 1)
    images = bg + mask * (color.float().view(n, 3, 1, 1) - bg)
    if noise_std > 0:
        images = images + noise_std * torch.randn(images.shape, generator=generator)
    return images.clamp_(0.0, 1.0)


def sample_scene(
    values: Tensor,
    separation: Tensor,
    jitter: Tensor | float,
    background_concept: bool,
    test_background: Tensor | bool,
    generator: torch.Generator | None = None,
) -> Scene:
    """Draw render parameters for given attribute values.

    values [N,4] long: 0/1 per attribute (ATTRIBUTES order); separation [N,4] or [4]: Δ per attribute
    (shape's is unused); jitter: scale of the uniform jitter (0 = exact means); background_concept: whether the
    background is a concept (grey 0.5 ± Δb/2) or a nuisance (uniform [0.8, 1] per channel, or exactly 0.9 where
    `test_background`). The same random numbers are drawn whatever the jitter, so scenes stay aligned.
    """
    n = values.shape[0]
    sep = separation.float().expand(n, len(ATTRIBUTES))
    jit = torch.as_tensor(jitter, dtype=torch.float32).expand(n).view(n, 1)

    def uniform(*shape: int) -> Tensor:  # in [-1, 1]
        return 2 * torch.rand(n, *shape, generator=generator) - 1

    center = 0.5 * uniform(2)
    color_jitter, size_jitter, bg_jitter = uniform(3), uniform(), uniform()
    nuisance = torch.rand(n, 3, generator=generator)

    is_blue = values[:, COLOR].float().view(n, 1)
    dc = sep[:, COLOR : COLOR + 1]
    red = torch.cat([0.5 + dc / 2, 0.5 - dc / 2, 0.5 - dc / 2], 1)
    blue = torch.cat([0.5 - dc / 2, 0.5 - dc / 2, 0.5 + dc / 2], 1)
    color = red + is_blue * (blue - red) + jit * dc / 8 * color_jitter

    ds, sign = sep[:, SIZE], 1 - 2 * values[:, SIZE].float()
    radius = (RADIUS_MEAN + sign * ds / 2 + jit[:, 0] * 3 * ds / 8 * size_jitter).clamp(min=RADIUS_FLOOR)

    if background_concept:
        db, sign = sep[:, BACKGROUND], 1 - 2 * values[:, BACKGROUND].float()
        grey = 0.5 + sign * db / 2 + jit[:, 0] * db / 8 * bg_jitter
        background = grey.view(n, 1).expand(n, 3).clone()
    else:
        lo, hi = NUISANCE_BACKGROUND
        at_test = torch.as_tensor(test_background).view(-1, 1)
        background = torch.where(at_test, TEST_BACKGROUND, lo + (hi - lo) * nuisance).expand(n, 3).clone()
    return Scene(color, radius, background, values[:, SHAPE].long(), center)


class ShapesDGP:
    """The `shapes` DGP for `cfg.concepts`: one object whose concepts are color, size, background and/or shape.

    Attributes not among the concepts sit at their default (red, large, light-grey nuisance background, circle).
    """

    channels = 3
    attribute_sizes = None  # concept values are continuous entries, not one-hot blocks
    null_label = None  # no prompt value is reserved for "dropped" (the null prompt is only a training target)

    def __init__(self, cfg: ShapesDataConfig):
        self.cfg = cfg
        self.image_size = cfg.image_size
        self.concepts: list[str] = list(cfg.concepts)
        self.classes: list[str] = cfg.all_classes()
        self.train_classes: list[str] = cfg.resolved_train_classes()
        self.held_out_classes: list[str] = cfg.resolved_held_out_classes()
        self.mask_value = cfg.null_value if cfg.mask_value is None else cfg.mask_value
        self.separation = torch.tensor(  # Δ per attribute, ATTRIBUTES order (shape has none)
            [cfg.color_separation, cfg.size_separation, cfg.background_separation, 0.0], dtype=torch.float32
        )
        if cfg.prompt_layout == "compact":
            self._slices, start = {}, 0
            for c in self.concepts:
                self._slices[c] = slice(start, start + PROMPT_WIDTH[c])
                start += PROMPT_WIDTH[c]
            self.prompt_dim = start
        else:
            self._slices = {c: PAPER11_SLICES[c] for c in self.concepts}
            self.prompt_dim = 11

    # -- classes and prompts -------------------------------------------------------------------------------------
    def class_name(self, code: str) -> str:
        """A class code in words, e.g. "11" → "blue small" (the value of each concept, in concept order)."""
        self._check_code(code)
        return " ".join(VALUE_NAMES[c][int(d)] for c, d in zip(self.concepts, code))

    def _check_code(self, code: str) -> None:
        if code not in self.classes:
            raise ValueError(f"unknown class code {code!r}; classes for concepts {self.concepts} are {self.classes}")

    def _values(self, code: str, n: int) -> Tensor:
        """[n, 4] attribute values of class `code` (defaults 0 for attributes that are not concepts)."""
        self._check_code(code)
        row = torch.zeros(len(ATTRIBUTES), dtype=torch.long)
        for concept, digit in zip(self.concepts, code):
            row[ATTRIBUTES.index(concept)] = int(digit)
        return row.expand(n, -1).clone()

    def prompt_slices(self) -> dict[str, slice]:
        """Where each concept's entries sit in a prompt."""
        return dict(self._slices)

    def make_prompt(self, values: dict[str, Tensor]) -> Tensor:
        """Build prompts [N, D] from concept values: color [N,3] RGB, size [N] radius, background [N] grey level,
        shape [N,2] one-hot (any real values allowed, e.g. beyond the training range). Concepts left out are
        masked (set to the mask value: `cfg.mask_value`, else `cfg.null_value`); every other entry is 0."""
        unknown = set(values) - set(self.concepts)
        if unknown:
            raise ValueError(f"make_prompt: {sorted(unknown)} are not concepts of this DGP ({self.concepts})")
        if not values:
            raise ValueError("make_prompt needs at least one concept value to know the batch size")
        n = next(iter(values.values())).shape[0]
        prompt = torch.zeros(n, self.prompt_dim)
        for c in self.concepts:
            sl = self._slices[c]
            if c not in values:
                prompt[:, sl] = self.mask_value
                continue
            v = values[c].float().reshape(n, -1)
            if v.shape[1] != PROMPT_WIDTH[c]:
                raise ValueError(f"make_prompt: {c} needs {PROMPT_WIDTH[c]} entries per image, got {v.shape[1]}")
            prompt[:, sl] = v.expand(n, sl.stop - sl.start)  # paper11 repeats the grey level over background RGB
        return prompt

    def scene_prompts(self, scene: Scene) -> Tensor:
        """The prompts of rendered scenes: each image's own (jittered) concept values."""
        own = {
            "color": scene.color,
            "size": scene.radius,
            "background": scene.background[:, 0],
            "shape": F.one_hot(scene.shape, 2),
        }
        return self.make_prompt({c: own[c] for c in self.concepts})

    def class_prompt(self, code: str) -> Tensor:
        """The prompt [D] of class `code` at its exact concept means. The scene behind it still draws a position and
        nuisances, which the prompt does not depend on: from a generator of its own, so the global random state, which
        a caller may be reproducing, is left as it was (as in `canonical_prompt`)."""
        scene = self._scene(self._values(code, 1), exact=True, generator=seeded_generator("exact prompt"))
        return self.scene_prompts(scene)[0]

    def canonical_prompt(self, concept: str, value: int, offset: float) -> Tensor:
        """A prompt [D] with only `concept`'s entries set and every other entry 0 (the authors' canonical prompts of
        the linear latent intervention): each entry at the concept's neutral value (`NEUTRAL`: mid-grey 0.5 for color
        and background, the mean radius 0.45 for size, 0.5 for shape) moved by `offset` towards the value's class
        mean — blue at 0.45 is (0.05, 0.05, 0.95), large at 0.15 is a radius of 0.6."""
        if concept not in self.concepts:
            raise ValueError(f"canonical_prompt: {concept!r} is not a concept of this DGP ({self.concepts})")
        if value not in (0, 1):
            raise ValueError(f"canonical_prompt: a concept's value is 0 or 1, got {value!r}")
        row = torch.zeros(1, len(ATTRIBUTES), dtype=torch.long)
        row[0, ATTRIBUTES.index(concept)] = value
        sl = self._slices[concept]
        mean = self.scene_prompts(self._scene(row, exact=True, generator=seeded_generator("exact prompt")))[0, sl]
        prompt = torch.zeros(self.prompt_dim)
        prompt[sl] = NEUTRAL[concept] + offset * torch.sign(mean - NEUTRAL[concept])
        return prompt

    # -- sampling ------------------------------------------------------------------------------------------------
    def _scene(self, values: Tensor, exact: bool, generator: torch.Generator | None = None) -> Scene:
        return sample_scene(
            values,
            self.separation,
            0.0 if exact else self.cfg.jitter,
            "background" in self.concepts,
            exact,
            generator,
        )

    def sample_class(
        self, code: str, n: int, generator: torch.Generator | None = None, jitter: bool = True
    ) -> tuple[Tensor, Tensor]:
        """n images of class `code` and their (unmasked) prompts; jitter=False gives test images at exact means."""
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        scene = self._scene(self._values(code, n), exact=not jitter, generator=generator)
        return scene.render(self.cfg.image_size, generator=generator), self.scene_prompts(scene)

    def _dataset(self, codes: list[str], n_per_class: int, exact: bool, generator: torch.Generator) -> ConceptDataset:
        if n_per_class <= 0:
            raise ValueError(f"images per class must be positive, got {n_per_class}")
        values = torch.cat([self._values(c, n_per_class) for c in codes])
        scene = self._scene(values, exact, generator)
        index = torch.tensor([self.classes.index(c) for c in codes]).repeat_interleave(n_per_class)
        images = scene.render(self.cfg.image_size, generator=generator)
        return ConceptDataset(images, self.scene_prompts(scene), index, list(self.classes))

    def training_set(self) -> ConceptDataset:
        """`cfg.images_per_class` jittered images per training class; prompts masked per `cfg.prompt_mask_fraction`."""
        seed = self.cfg.data_seed
        data = self._dataset(self.train_classes, self.cfg.images_per_class, False, seeded_generator(seed))
        n = len(data)
        for concept, fraction in self.cfg.prompt_mask_fraction.items():
            chosen = torch.randperm(n, generator=seeded_generator(seed, "mask", concept))
            data.prompts[chosen[: round(fraction * n)], self._slices[concept]] = self.mask_value
        return data

    def test_set(self, n_per_class: int, seed: int = 0) -> ConceptDataset:
        """n_per_class images of every class (held-out included) at exact means, test background."""
        return self._dataset(self.classes, n_per_class, True, seeded_generator(seed, "test"))

    # -- concept signal ------------------------------------------------------------------------------------------
    def concept_signal(self, n: int = 256, seed: int = 0) -> dict[str, float]:
        """σ_i = |∂G/∂z_i|: mean L2 pixel distance between noise-free renders with concept i at 0 vs 1, sharing
        the centre, the other concepts' values (random classes) and the background."""
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        g = seeded_generator(seed, "signal")
        values = torch.zeros(n, len(ATTRIBUTES), dtype=torch.long)
        for c in self.concepts:
            values[:, ATTRIBUTES.index(c)] = torch.randint(0, 2, (n,), generator=g)
        signal = {}
        for c in self.concepts:
            renders = []
            for v in (0, 1):
                at_v = values.clone()
                at_v[:, ATTRIBUTES.index(c)] = v
                scene = self._scene(at_v, exact=True, generator=seeded_generator(seed, "scene"))  # same draws
                renders.append(scene.render(self.cfg.image_size, noise_std=0.0))
            signal[c] = (renders[1] - renders[0]).flatten(1).norm(dim=1).mean().item()
        return signal

    def describe(self) -> dict:
        """A JSON-able summary for the run record."""
        seps = {"color": self.cfg.color_separation, "size": self.cfg.size_separation,
                "background": self.cfg.background_separation}
        return {
            "kind": "shapes",
            "concepts": self.concepts,
            "separations": {c: seps[c] for c in self.concepts if c in seps},
            "jitter": self.cfg.jitter,
            "image_size": self.cfg.image_size,
            "classes": self.classes,
            "value_names": {c: list(VALUE_NAMES[c]) for c in self.concepts},
            "class_names": {c: self.class_name(c) for c in self.classes},
            "train_classes": self.train_classes,
            "held_out_classes": self.held_out_classes,
            "prompt_layout": self.cfg.prompt_layout,
            "prompt_dim": self.prompt_dim,
            "prompt_slices": {c: [s.start, s.stop] for c, s in self._slices.items()},
            "prompt_mask_fraction": dict(self.cfg.prompt_mask_fraction),
            "class_prompts": {c: [round(x, 6) for x in self.class_prompt(c).tolist()] for c in self.classes},
            "concept_signal": self.concept_signal(),
        }
