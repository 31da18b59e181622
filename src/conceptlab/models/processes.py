"""The `diffusion` config section and `build_process`: the diffusion process a config names.

The processes themselves live in `models.diffusion` (the interface, VDM, cosine), `models.ddpm` and
`models.variance_exploding`; this module only chooses among them, so none of those imports another's builder.
"""

from __future__ import annotations

from typing import Literal, Sequence

from pydantic import Field, model_validator

from conceptlab.config_base import StrictConfig
from conceptlab.models.ddpm import build_ddpm
from conceptlab.models.diffusion import CosineDiffusion, DiffusionProcess, VariationalDiffusion
from conceptlab.models.variance_exploding import VarianceExploding


class DiffusionConfig(StrictConfig):
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


def build_process(
    cfg: DiffusionConfig, attribute_sizes: Sequence[int] | None = None, null_value: float = 0.0
) -> DiffusionProcess:
    """The process `cfg.process` names; `attribute_sizes`/`null_value` serve the VE process's attribute dropout."""
    if cfg.process == "vdm":
        return VariationalDiffusion(cfg.gamma_min, cfg.gamma_max, cfg.learn_schedule)
    if cfg.process == "cosine":
        return CosineDiffusion(cfg.prediction, cfg.logsnr_min, cfg.logsnr_max)
    if cfg.process == "ddpm":
        return build_ddpm(cfg.ddpm_steps, cfg.ddpm_schedule, cfg.ddpm_beta_start, cfg.ddpm_beta_end, cfg.ddpm_cosine_offset)
    if cfg.process == "ve":
        # without attribute_sizes the whole prompt is one block (dropped or kept as a whole)
        return VarianceExploding(
            cfg.sigma_min, cfg.sigma_max, cfg.prediction, cfg.label_dropout, attribute_sizes, null_value
        )
    raise ValueError(f"unknown diffusion process {cfg.process!r}")
