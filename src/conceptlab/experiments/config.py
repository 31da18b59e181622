"""Typed run configuration: one pydantic model per stage of config → data → model → train → evaluate.

Every field has a default, a range where one makes sense, and a one-line
description; `RunConfig` is what is saved (resolved) in every run folder.
Loading YAML, presets and `key=value` overrides lives in `experiments.loading`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

CONCEPT_NAMES = ("color", "size", "background", "shape")
Concept = Literal["color", "size", "background", "shape"]
BumpImage = Literal["bump", "vertical", "horizontal", "sos", "product", "bump+stripes"]
Factor = Literal["floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation"]
FACTOR_SIZES = {"floor_hue": 10, "wall_hue": 10, "object_hue": 10, "scale": 8, "shape": 4, "orientation": 15}


class _Strict(BaseModel):
    """Base: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DataConfig(_Strict):
    """The `shapes` data-generating process (Park et al. 2024, generalised to n concepts).

    Each concept has two values, "0" (default) and "1"; a class is a code such as
    "01" giving the value of each concept in `concepts` order.
    """

    kind: Literal["shapes"] = "shapes"
    concepts: list[Concept] = Field(default_factory=lambda: ["color", "size"], min_length=1)
    color_separation: float = Field(0.4, ge=0.0, le=1.0, description="Δc: red/blue mean distance per channel")
    size_separation: float = Field(0.4, ge=0.0, le=0.7, description="Δs: large/small radius difference")
    background_separation: float = Field(0.4, ge=0.0, le=1.0, description="Δb: light/dark grey difference")
    jitter: float = Field(1.0, ge=0.0, description="scale of the per-image concept jitter (1 = the paper's)")
    train_classes: list[str] | None = Field(
        None, description="class codes to train on; default: classes with at most one non-default concept"
    )
    held_out_classes: list[str] | None = Field(
        None, description="class codes evaluated as out-of-distribution; default: all classes not trained on"
    )
    images_per_class: int = Field(2048, ge=1)
    image_size: int = Field(32, ge=8)
    prompt_layout: Literal["compact", "paper11"] = Field(
        "compact", description="compact: only active concepts' values; paper11: the authors' 11-dim layout"
    )
    prompt_mask_fraction: dict[Concept, float] = Field(
        default_factory=dict, description="per concept, fraction of training prompts whose entries are masked"
    )
    null_value: float = Field(0.0, description="value written into masked / dropped prompt entries")
    data_seed: int = Field(0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _class_codes_as_strings(cls, data):
        """YAML reads a code such as 10 as an int: turn ints back into codes of one digit per concept."""
        if isinstance(data, dict):
            width = len(data.get("concepts") or ["color", "size"])
            for field in ("train_classes", "held_out_classes"):
                codes = data.get(field)
                if isinstance(codes, list):
                    data = {**data, field: [format(c, f"0{width}d") if isinstance(c, int) else c for c in codes]}
        return data

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

    @model_validator(mode="after")
    def _classes_valid(self) -> "DataConfig":
        n = len(self.concepts)
        for field in ("train_classes", "held_out_classes"):
            codes = getattr(self, field)
            if codes is None:
                continue
            for code in codes:
                if len(code) != n or set(code) - {"0", "1"}:
                    raise ValueError(
                        f"{field}: class code {code!r} must be {n} digits of 0/1 (one per concept {self.concepts})"
                    )
        train = set(self.resolved_train_classes())
        if not train:
            raise ValueError("the held-out set removes every training class: nothing left to train on")
        held = set(self.resolved_held_out_classes())
        if train & held:
            raise ValueError(f"classes both trained on and held out: {sorted(train & held)}")
        for k in self.prompt_mask_fraction:
            if k not in self.concepts:
                raise ValueError(f"prompt_mask_fraction names {k!r}, not one of concepts {self.concepts}")
        return self

    def all_classes(self) -> list[str]:
        n = len(self.concepts)
        return [format(i, f"0{n}b") for i in range(2**n)]

    def resolved_train_classes(self) -> list[str]:
        if self.train_classes is not None:
            held = set(self.held_out_classes or [])
            return [c for c in self.train_classes if c not in held]
        held = set(self.held_out_classes or [])
        if self.held_out_classes is not None:
            return [c for c in self.all_classes() if c not in held]
        return [c for c in self.all_classes() if c.count("1") <= 1]

    def resolved_held_out_classes(self) -> list[str]:
        if self.held_out_classes is not None:
            return list(self.held_out_classes)
        train = set(self.resolved_train_classes())
        return [c for c in self.all_classes() if c not in train]


class HeldOutRegion(_Strict):
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


class BumpsDataConfig(_Strict):
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
        return self

    @property
    def drawn_size(self) -> int:
        return self.image_size + 2 * self.border


class Shapes3DDataConfig(_Strict):
    """Shapes3D scenes (floor, wall, object): the procedural renderer or the real `3dshapes.h5`.

    `attributes` are the factors that vary and are prompted (one-hot block each); every other factor stays at
    its `fixed` level. `levels` may restrict a factor to some of its levels (default: all).
    """

    kind: Literal["shapes3d"] = "shapes3d"
    source: Literal["render", "h5"] = Field("render", description="render: procedural; h5: the real file")
    h5_path: str | None = Field(None, description="path of 3dshapes.h5 (source=h5)")
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


class ModelConfig(_Strict):
    """Conditional UNet with named hook points (see `models.unet`)."""

    widths: list[int] = Field(default_factory=lambda: [64, 128, 256], min_length=1)
    blocks_per_level: int = Field(2, ge=1)
    mid_attention: bool = True
    attention_heads: int = Field(4, ge=1)
    norm_groups: int = Field(8, ge=1)
    dropout: float = Field(0.1, ge=0.0, lt=1.0)
    pixel_unshuffle: int = Field(1, ge=1, description="space-to-depth factor applied to the input (1 = off)")
    concept_embedder: Literal["per_block", "shared"] = Field(
        "per_block", description="per_block: a small MLP per ResBlock (the paper); shared: one MLP for all blocks"
    )
    prompt_shift: float = Field(0.0, description="prompt entries are mapped to (p - prompt_shift) * prompt_scale")
    prompt_scale: float = Field(1.0, gt=0.0)
    prompt_encoding: Literal["raw", "sinusoidal"] = Field(
        "raw", description="raw: the (shifted, scaled) prompt; sinusoidal: sin/cos features of each entry"
    )
    prompt_frequencies: int = Field(8, ge=1, description="sinusoidal: frequencies per prompt entry")
    prompt_period: float | None = Field(
        None, gt=0.0, description="sinusoidal: period of each entry (periodic data, e.g. the canvas width)"
    )
    prompt_min_wavelength: float = Field(2.0, gt=0.0, description="sinusoidal, non-periodic: shortest wavelength")
    prompt_max_wavelength: float = Field(64.0, gt=0.0, description="sinusoidal, non-periodic: longest wavelength")
    prompt_include_raw: bool = Field(False, description="sinusoidal: also pass the raw entries")

    @model_validator(mode="after")
    def _groups_divide(self) -> "ModelConfig":
        for w in self.widths:
            if w % self.norm_groups:
                raise ValueError(f"every width must be divisible by norm_groups={self.norm_groups}, got {w}")
        if self.mid_attention and self.widths[-1] % self.attention_heads:
            raise ValueError(f"last width {self.widths[-1]} not divisible by attention_heads={self.attention_heads}")
        return self


class DiffusionConfig(_Strict):
    """The diffusion process (separate from the network) and its sampler."""

    process: Literal["vdm", "cosine", "ddpm", "ve"] = Field(
        "vdm",
        description="vdm: learned linear log-SNR; cosine: fixed; ddpm: discrete T-step chain; ve: variance exploding",
    )
    prediction: Literal["eps", "v", "x"] = Field(
        "eps", description="network target (vdm and ddpm: eps only; x: ve only)"
    )
    gamma_min: float = Field(-5.0, description="vdm: initial log(σ²/α²) at t=0")
    gamma_max: float = Field(10.0, description="vdm: initial log(σ²/α²) at t=1")
    learn_schedule: bool = Field(True, description="vdm: learn the endpoints of the linear log-SNR")
    logsnr_min: float = Field(-15.0, description="cosine: log-SNR at t=1")
    logsnr_max: float = Field(15.0, description="cosine: log-SNR at t=0")
    sigma_min: float = Field(0.01, gt=0.0, description="ve: noise level σ at t = 0")
    sigma_max: float = Field(50.0, gt=0.0, description="ve: noise level σ at t = 1")
    label_dropout: float = Field(
        0.0, ge=0.0, le=1.0, description="ve: probability each attribute block of the prompt is nulled in training"
    )
    ddpm_steps: int = Field(1000, ge=1, description="ddpm: number of discrete steps T")
    ddpm_schedule: Literal["linear", "cosine"] = Field("linear", description="ddpm: β schedule")
    ddpm_beta_start: float = Field(1e-4, gt=0.0, lt=1.0)
    ddpm_beta_end: float = Field(0.02, gt=0.0, lt=1.0)
    ddpm_cosine_offset: float = Field(0.008, ge=0.0)
    sample_steps: int = Field(50, ge=1, description="ancestral sampling steps")
    cfg_dropout: float = Field(0.0, ge=0.0, le=1.0, description="probability the whole prompt is nulled in training")
    guidance_scale: float = Field(0.0, ge=0.0, description="classifier-free guidance w: (1+w)·cond − w·uncond")

    @model_validator(mode="after")
    def _vdm_eps(self) -> "DiffusionConfig":
        if self.process == "vdm" and self.prediction != "eps":
            raise ValueError("process vdm uses eps prediction; use process=cosine for v prediction")
        if self.prediction == "x" and self.process != "ve":
            raise ValueError("x prediction is implemented for process ve only")
        if self.process == "ve" and self.sigma_min >= self.sigma_max:
            raise ValueError(f"sigma_min ({self.sigma_min}) must be below sigma_max ({self.sigma_max})")
        if self.process == "ddpm" and self.prediction != "eps":
            raise ValueError("process ddpm uses eps prediction; use process=cosine for v prediction")
        if self.process == "ddpm" and self.ddpm_steps % self.sample_steps:
            raise ValueError(f"ddpm: sample_steps ({self.sample_steps}) must divide ddpm_steps ({self.ddpm_steps})")
        if self.gamma_min >= self.gamma_max:
            raise ValueError(f"gamma_min ({self.gamma_min}) must be below gamma_max ({self.gamma_max})")
        if self.logsnr_min >= self.logsnr_max:
            raise ValueError(f"logsnr_min ({self.logsnr_min}) must be below logsnr_max ({self.logsnr_max})")
        return self


class TrainConfig(_Strict):
    """Optimisation, checkpoint schedule and seeds."""

    steps: int = Field(20000, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    grad_clip: float | None = Field(0.01, gt=0.0, description="global grad-norm clip (None = off)")
    ema_decay: float | None = Field(None, ge=0.0, lt=1.0, description="EMA of weights (None = off)")
    bf16: bool | None = Field(
        None, description="bf16 autocast; null = auto (on where the device has native bf16, else fp32)"
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available, else cpu")
    checkpoint_schedule: Literal["sqrt", "log", "linear", "list"] = "sqrt"
    checkpoint_count: int = Field(60, ge=1)
    checkpoint_start: int = Field(500, ge=1)
    checkpoint_steps: list[int] | None = Field(None, description="explicit steps (schedule=list)")
    train_seed: int = Field(0, ge=0)
    log_every: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _schedule(self) -> "TrainConfig":
        if self.checkpoint_schedule == "list" and not self.checkpoint_steps:
            raise ValueError("checkpoint_schedule=list needs checkpoint_steps")
        return self


class ProbeConfig(_Strict):
    """The concept classifier used to read generations (trained once, cached by config hash)."""

    width: int = Field(16, ge=4, description="channels of the first conv stage (then 2x)")
    images_per_class: int = Field(1500, ge=10)
    invalid_images: int = Field(3000, ge=10, description="blank / background / noise images labelled invalid")
    separation_min: float = Field(0.1, gt=0.0, le=1.0)
    separation_max: float = Field(0.8, gt=0.0, le=1.0)
    epochs: int = Field(6, ge=1)
    batch_size: int = Field(128, ge=1)
    lr: float = Field(2e-3, gt=0.0)
    seed: int = Field(1234, ge=0)
    min_accuracy: float = Field(0.99, ge=0.0, le=1.0, description="held-out accuracy the probe must reach")

    @model_validator(mode="after")
    def _range(self) -> "ProbeConfig":
        if self.separation_min > self.separation_max:
            raise ValueError("separation_min must not exceed separation_max")
        return self


def _data_kind(value) -> str:
    """The `kind` of a data section (missing kind = shapes, the default DGP)."""
    if isinstance(value, dict):
        return value.get("kind", "shapes")
    return getattr(value, "kind", "shapes")


AnyDataConfig = Annotated[
    Union[
        Annotated[DataConfig, Tag("shapes")],
        Annotated[BumpsDataConfig, Tag("bumps")],
        Annotated[Shapes3DDataConfig, Tag("shapes3d")],
    ],
    Discriminator(_data_kind, custom_error_type="data_kind", custom_error_message="data.kind must be shapes, bumps or shapes3d"),
]
DATA_CONFIGS = {"shapes": DataConfig, "bumps": BumpsDataConfig, "shapes3d": Shapes3DDataConfig}


class CompositionEvalConfig(_Strict):
    """Generation accuracy on bump worlds (data.kind=bumps): generate at labels, locate, score per region.

    Regions: `train` (2D labels trained on) and `held_out` (2D labels of the held-out region), each
    subsampled to at most `labels_per_region` labels, one generation per label.
    """

    labels_per_region: int = Field(64, ge=1)
    tolerance: float = Field(1.0, gt=0.0, description="a coordinate is correct within this many pixels")
    sample_steps: int | None = Field(None, ge=1, description="override diffusion.sample_steps")
    guidance_scale: float | None = Field(None, ge=0.0, description="override diffusion.guidance_scale")
    every: int = Field(1, ge=1, description="evaluate every k-th checkpoint (the last one always)")
    max_batch: int = Field(512, ge=1, description="images per sampling pass (all regions are sampled together)")
    use_ema: bool = True
    seed: int = Field(0, ge=0)


class GeometryConfig(_Strict):
    """Representation geometry over the label grid (data.kind=bumps): one activation vector per 2D label."""

    hook: str = Field("mid.blocks.1.hook_out", description="hook point read (the paper's 'layer 4': after the bottleneck)")
    t: float = Field(0.5, ge=0.0, le=1.0, description="diffusion time of the forward pass (0 = data, 1 = noise)")
    pool: Literal["flatten", "mean"] = Field("mean", description="spatial activations: flatten or mean over space")
    input: Literal["data", "noise"] = Field(
        "data", description="data: the noised ground-truth image of each label; noise: one shared noise image"
    )
    labels: int = Field(1024, ge=16, description="at most this many 2D labels (a sub-lattice) per checkpoint")
    label_density: int = Field(
        1, ge=1, le=8,
        description="read the grid refined k× per axis (k − 1 labels between lattice neighbours, wrapping on a "
        "torus): a denser cloud for homology; a refined grid over `labels` is refused before training",
    )
    every: int = Field(1, ge=1, description="every k-th checkpoint (the last one always)")
    homology: bool = Field(True, description="persistent homology of the final checkpoint's cloud")
    homology_over_training: bool = Field(
        False, description="also Betti numbers and the longest bars at every geometry checkpoint (a few s each)"
    )
    homology_points: int = Field(400, ge=20)
    homology_dims: int = Field(6, ge=2, description="PCA dimensions kept before Vietoris–Rips")
    homology_landmarks: int | None = Field(
        200, ge=20, description="ripser greedy landmarks (keeps H2 affordable); None: all homology_points"
    )
    persistence_threshold: float = Field(0.1, ge=0.0, description="bars shorter than this fraction of the diameter are noise")
    betti_rule: Literal["threshold", "gap", "hybrid"] = Field(
        "gap", description="threshold: every bar above the cut counts; gap: only those above the largest gap in "
        "lengths; hybrid: gap for H0, threshold for H1 and H2 (see analysis.geometry.persistent_homology)"
    )
    use_ema: bool = True
    seed: int = Field(0, ge=0)


class AbstractionsConfig(_Strict):
    """When along generation each attribute is committed (data.kind=shapes3d), three ways, at the final checkpoint.

    τ runs from 0 (pure noise) to 1 (data). Mutual information by the denoiser-difference estimator (midpoint rule
    over `mi_points` noise levels) and by the model-posterior lower bound (`mi_paths` paths), forking entropy (`roots` trajectories forked into `forks` continuations at each τ,
    read by an attribute classifier trained on ground-truth renders), linear probes on activations at `probe_hook`.
    """

    taus: list[float] = Field(default_factory=lambda: [round(0.1 * i, 1) for i in range(11)], min_length=2)
    mi_points: int = Field(200, ge=2, description="midpoint-rule points of the MI integral (paper: 999)")
    mi_samples: int = Field(64, ge=1, description="(image, noise) pairs per noise level and attribute")
    mi_paths: int = Field(64, ge=2, description="forward-noised data paths of the MI lower bound (K calls per level)")
    mi_bound_points: int | None = Field(
        None, ge=2, description="noise levels of the MI lower bound's paths (None: mi_points); coarser is cheaper, looser"
    )
    roots: int = Field(32, ge=1, description="forking: trajectories per τ")
    forks: int = Field(8, ge=2, description="forking: continuations per root (K)")
    sample_steps: int = Field(40, ge=2, description="steps of the stochastic sampler from τ=0 to 1")
    probe_hook: str = Field("mid.blocks.0.hook_out", description="hook point the linear probes read")
    probe_images: int = Field(512, ge=8, description="noised renders per τ for the linear probes")
    probe_test_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    commitment_level: float = Field(0.5, gt=0.0, lt=1.0, description="commitment: τ where a curve is this far from start to end")
    classifier_width: int = Field(12, ge=4)
    classifier_images: int = Field(3000, ge=50)
    classifier_epochs: int = Field(6, ge=1)
    classifier_min_accuracy: float = Field(0.99, ge=0.0, le=1.0, description="held-out accuracy the classifier must reach")
    classifier_lr: float = Field(5e-3, gt=0.0, description="peak learning rate of the attribute classifier")
    conditional_samples: int = Field(256, ge=1, description="prompted generations read by the classifier (sanity check)")
    probe_pool: int = Field(2, ge=1, description="linear probes: spatial maps average-pooled to pool×pool")
    probe_l2: float = Field(1e-3, ge=0.0, description="linear probes: L2 penalty of the logistic regression")
    batch_size: int = Field(512, ge=1, description="images per forward pass of the measurements")
    every: int | None = Field(None, ge=1, description="also every k-th checkpoint (None: the final checkpoint only)")
    use_ema: bool = True
    seed: int = Field(0, ge=0)

    @field_validator("taus")
    @classmethod
    def _unit_interval(cls, v: list[float]) -> list[float]:
        bad = [t for t in v if not 0.0 <= t <= 1.0]
        if bad:
            raise ValueError(f"every τ must be in [0, 1] (0 = noise, 1 = data), got {bad}")
        if sorted(set(v)) != list(v):
            raise ValueError(f"taus must be increasing and distinct, got {v}")
        return v


class EvalConfig(_Strict):
    """Evaluation of checkpoints. The top-level fields, `probe` and `interventions` are the concept-space
    evaluation of `shapes` data; `composition` and `geometry` serve `bumps` data, `abstractions` `shapes3d` data
    (filled with defaults for the data kind that uses them, and refused for the others)."""

    samples_per_class: int = Field(32, ge=1)
    sample_steps: int | None = Field(None, ge=1, description="override diffusion.sample_steps for evaluation")
    use_ema: bool = True
    accuracy_threshold: float = Field(0.9, gt=0.0, le=1.0)
    smoothing: int = Field(3, ge=1, description="moving-average window over checkpoints")
    stay: int = Field(3, ge=1, description="checkpoints the smoothed accuracy must stay above threshold")
    eval_seed: int = Field(0, ge=0)
    probe: ProbeConfig = Field(default_factory=ProbeConfig)
    interventions: InterventionsConfig | None = Field(
        None, description="hidden-capability evaluation (None: concept-space evaluation only)"
    )
    composition: CompositionEvalConfig | None = Field(None, description="bumps: generation accuracy per region")
    geometry: GeometryConfig | None = Field(None, description="bumps: representation geometry (None with bumps: default)")
    abstractions: AbstractionsConfig | None = Field(None, description="shapes3d: commitment along generation")


class OverPromptingConfig(_Strict):
    """Prompts pushed beyond the target value along concepts, in units of the concept's separation."""

    concepts: list[Concept] = Field(default_factory=lambda: ["color"], min_length=1)
    scales: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0], min_length=1)


class LinearInterventionConfig(_Strict):
    """Shift every concept embedding by α·Δ(boosted concepts) + β·Δ(suppressed concepts)."""

    boost: list[Concept] = Field(default_factory=lambda: ["color"])
    suppress: list[Concept] = Field(default_factory=lambda: ["size"])
    alphas: list[float] = Field(default_factory=lambda: [0.1, 1.0, 2.0], min_length=1)
    betas: list[float] = Field(default_factory=lambda: [0.1], min_length=1)
    sites: list[str] | None = Field(None, description="hook_concept sites to edit (default: all)")


class PatchingConfig(_Strict):
    """Concept embeddings taken from a reference checkpoint of the same run."""

    source: Literal["final"] | int = Field("final", description="'final' or the step of a checkpoint of this run")
    sites: list[str] | None = Field(None, description="hook_concept sites to patch (default: all)")


class GuidanceConfig(_Strict):
    """Classifier-free guidance scales w (needs diffusion.cfg_dropout > 0)."""

    scales: list[float] = Field(default_factory=lambda: [1.0, 3.0], min_length=1)


class InterventionsConfig(_Strict):
    """Hidden-capability evaluation: interventions on target classes at every (k-th) checkpoint."""

    targets: list[str] | None = Field(None, description="class codes to elicit (default: the held-out classes)")
    naive: bool = True
    over_prompting: OverPromptingConfig | None = Field(default_factory=OverPromptingConfig)
    linear: LinearInterventionConfig | None = Field(default_factory=LinearInterventionConfig)
    patching: PatchingConfig | None = Field(default_factory=PatchingConfig)
    cfg: GuidanceConfig | None = None
    samples: int = Field(32, ge=1, description="images per variant and checkpoint")
    every: int = Field(1, ge=1, description="evaluate every k-th checkpoint (the last one always)")
    threshold: float = Field(0.5, gt=0.0, lt=1.0, description="score an intervention must reach to count")
    stay: int = Field(2, ge=1, description="checkpoints the score must stay above threshold")
    confidence: bool = Field(True, description="detect emergence on the Wilson lower bound, not the point value")
    max_batch: int = Field(512, ge=1, description="images per sampling pass")
    seed: int = Field(1, ge=0)

    @field_validator("targets", mode="before")
    @classmethod
    def _codes_as_strings(cls, v):
        """YAML reads a code such as 11 as an int; RunConfig pads it to one digit per concept."""
        return [str(c) if isinstance(c, int) else c for c in v] if isinstance(v, list) else v


class RunConfig(_Strict):
    """Everything a run needs; saved resolved as `config.yaml` in the run folder."""

    name: str = "run"
    runs_dir: str = "runs"
    data: AnyDataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    diffusion: DiffusionConfig = Field(default_factory=DiffusionConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    @model_validator(mode="after")
    def _evaluation_matches_data(self) -> "RunConfig":
        """Each data kind has its evaluation: fill in its default, refuse the others' sections."""
        kind = self.data.kind
        owners = {"interventions": "shapes", "composition": "bumps", "geometry": "bumps", "abstractions": "shapes3d"}
        for section, owner in owners.items():
            if getattr(self.eval, section) is not None and kind != owner:
                raise ValueError(f"eval.{section} needs data.kind={owner}, but data.kind is {kind}")
        if kind == "bumps":
            if self.eval.composition is None:
                self.eval.composition = CompositionEvalConfig()
            if self.eval.geometry is None:
                self.eval.geometry = GeometryConfig()
        if kind == "shapes3d":
            if self.eval.abstractions is None:
                self.eval.abstractions = AbstractionsConfig()
            if self.diffusion.process != "ve":
                raise ValueError("data.kind=shapes3d measures commitment with a VE model: set diffusion.process=ve")
        if kind != "shapes" and self.data.image_size % (2 ** (len(self.model.widths) - 1) * self.model.pixel_unshuffle):
            raise ValueError(
                f"data.image_size {self.data.image_size} must be divisible by 2^(levels-1)·pixel_unshuffle "
                f"= {2 ** (len(self.model.widths) - 1) * self.model.pixel_unshuffle}"
            )
        return self

    @model_validator(mode="after")
    def _interventions_match_data(self) -> "RunConfig":
        iv = self.eval.interventions
        if iv is None:
            return self
        concepts = self.data.concepts
        named = {
            "over_prompting.concepts": iv.over_prompting.concepts if iv.over_prompting else [],
            "linear.boost": iv.linear.boost if iv.linear else [],
            "linear.suppress": iv.linear.suppress if iv.linear else [],
        }
        for where, values in named.items():
            for c in values:
                if c not in concepts:
                    raise ValueError(f"eval.interventions.{where} names {c!r}, not one of data.concepts {concepts}")
        classes = self.data.all_classes()
        if iv.targets is not None:
            padded = [c.zfill(len(concepts)) if c.isdigit() else c for c in iv.targets]
            if padded != iv.targets:
                iv.targets = padded
        for code in iv.targets or []:
            if code not in classes:
                raise ValueError(f"eval.interventions.targets: {code!r} is not a class code; classes are {classes}")
        if iv.targets is None and not self.data.resolved_held_out_classes():
            raise ValueError("eval.interventions has no targets: no class is held out; set eval.interventions.targets")
        if iv.cfg is not None and self.diffusion.cfg_dropout <= 0:
            raise ValueError("eval.interventions.cfg needs a model trained with label dropout: diffusion.cfg_dropout > 0")
        if not (iv.naive or iv.over_prompting or iv.linear or iv.patching or iv.cfg):
            raise ValueError("eval.interventions enables no intervention")
        return self

    def training_hash(self) -> str:
        """Hash of what determines the trained weights (data, model, diffusion, train)."""
        return config_hash(self.model_dump(include={"data", "model", "diffusion", "train"}))


def config_hash(obj: dict) -> str:
    """Stable short hash of a JSON-able dict."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
