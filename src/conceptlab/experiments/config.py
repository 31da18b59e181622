"""Typed run configuration: one pydantic model per stage of config → data → model → train → evaluate.

Every field has a default, a range where one makes sense, and a one-line
description; `RunConfig` is what is saved (resolved) in every run folder.
Loading YAML, presets and `key=value` overrides lives in `experiments.loading`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CONCEPT_NAMES = ("color", "size", "background", "shape")
Concept = Literal["color", "size", "background", "shape"]


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

    process: Literal["vdm", "cosine"] = Field("vdm", description="vdm: learned linear log-SNR; cosine: fixed")
    prediction: Literal["eps", "v"] = Field("eps", description="network target (vdm supports eps only)")
    gamma_min: float = Field(-5.0, description="vdm: initial log(σ²/α²) at t=0")
    gamma_max: float = Field(10.0, description="vdm: initial log(σ²/α²) at t=1")
    learn_schedule: bool = Field(True, description="vdm: learn the endpoints of the linear log-SNR")
    logsnr_min: float = Field(-15.0, description="cosine: log-SNR at t=1")
    logsnr_max: float = Field(15.0, description="cosine: log-SNR at t=0")
    sample_steps: int = Field(50, ge=1, description="ancestral sampling steps")
    cfg_dropout: float = Field(0.0, ge=0.0, le=1.0, description="probability the whole prompt is nulled in training")
    guidance_scale: float = Field(0.0, ge=0.0, description="classifier-free guidance w: (1+w)·cond − w·uncond")

    @model_validator(mode="after")
    def _vdm_eps(self) -> "DiffusionConfig":
        if self.process == "vdm" and self.prediction != "eps":
            raise ValueError("process vdm uses eps prediction; use process=cosine for v prediction")
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


class EvalConfig(_Strict):
    """Concept-space evaluation of checkpoints."""

    samples_per_class: int = Field(32, ge=1)
    sample_steps: int | None = Field(None, ge=1, description="override diffusion.sample_steps for evaluation")
    use_ema: bool = True
    accuracy_threshold: float = Field(0.9, gt=0.0, le=1.0)
    smoothing: int = Field(3, ge=1, description="moving-average window over checkpoints")
    stay: int = Field(3, ge=1, description="checkpoints the smoothed accuracy must stay above threshold")
    eval_seed: int = Field(0, ge=0)
    probe: ProbeConfig = Field(default_factory=ProbeConfig)


class RunConfig(_Strict):
    """Everything a run needs; saved resolved as `config.yaml` in the run folder."""

    name: str = "run"
    runs_dir: str = "runs"
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    diffusion: DiffusionConfig = Field(default_factory=DiffusionConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    def training_hash(self) -> str:
        """Hash of what determines the trained weights (data, model, diffusion, train)."""
        return config_hash(self.model_dump(include={"data", "model", "diffusion", "train"}))


def config_hash(obj: dict) -> str:
    """Stable short hash of a JSON-able dict."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
