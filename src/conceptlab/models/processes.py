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

    added_fields = ("guidance_convention", "time_input", "reconstruction", "data_noise")

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
    guidance_scale: float = Field(
        0.0, ge=0.0, description="classifier-free guidance w in `guidance_convention`'s units (ho_salimans: 0 = "
        "plain conditional sampling; diffusers: 1)"
    )
    guidance_convention: Literal["ho_salimans", "diffusers"] = Field(
        "ho_salimans", description="what a guidance scale w means — ho_salimans: (1 + w)·cond − w·uncond (w = 0: "
        "conditional); diffusers: uncond + w·(cond − uncond) (w = 1: conditional; the authors' code). Both for "
        "diffusion.guidance_scale and every eval guidance scale"
    )
    time_input: Literal["t", "normalized_gamma"] = Field(
        "t", description="vdm: the time the network is given — t itself, or the authors' normalised log-SNR "
        "(γ(t) − gamma_min)/(gamma_max − gamma_min) with the configured (not the learned) gamma_min/gamma_max"
    )
    reconstruction: Literal["discretized_gaussian", "gaussian"] = Field(
        "discretized_gaussian", description="vdm: reconstruction term −log p(x | z_0) — a Gaussian discretised to "
        "256 bins (Kingma et al.), or the authors' log N(x; z_0/α_0, data_noise²)"
    )
    data_noise: float = Field(1e-3, gt=0.0, description="vdm, reconstruction gaussian: its standard deviation")

    @model_validator(mode="after")
    def _vdm_eps(self) -> "DiffusionConfig":
        for key in ("time_input", "reconstruction"):
            if getattr(self, key) != type(self).model_fields[key].default and self.process != "vdm":
                raise ValueError(f"diffusion.{key}={getattr(self, key)} works with diffusion.process=vdm only "
                                 f"(it reads the VDM's γ), but diffusion.process is {self.process}")
        if self.label_dropout > 0 and self.process != "ve":
            raise ValueError(f"diffusion.label_dropout={self.label_dropout:g} works with diffusion.process=ve only "
                             f"(the VE loss drops attribute blocks), but diffusion.process is {self.process}; to drop "
                             "whole prompts use diffusion.cfg_dropout")
        if guidance_offset(self.guidance_scale, self.guidance_convention) != 0.0 and self.cfg_dropout <= 0:
            raise ValueError(
                f"diffusion.guidance_scale={self.guidance_scale:g} under diffusion.guidance_convention="
                f"{self.guidance_convention} mixes in unconditional predictions, which need a model trained with "
                f"diffusion.cfg_dropout > 0" + (" (plain conditional sampling is w = 1 in this convention)"
                                                if self.guidance_convention == "diffusers" else "")
            )
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


def guidance_offset(w: float, convention: str) -> float:
    """A guidance scale w of `convention` as the sampler's offset w' in (1 + w')·cond − w'·uncond (0: plain
    conditional sampling, no unconditional pass): w itself under ho_salimans, w − 1 under diffusers."""
    if convention == "ho_salimans":
        return float(w)
    if convention == "diffusers":
        return float(w) - 1.0
    raise ValueError(f"unknown guidance convention {convention!r}; ho_salimans or diffusers")


def build_process(
    cfg: DiffusionConfig, attribute_sizes: Sequence[int] | None = None, null_value: float = 0.0
) -> DiffusionProcess:
    """The process `cfg.process` names; `attribute_sizes`/`null_value` serve the VE process's attribute dropout."""
    if cfg.process == "vdm":
        return VariationalDiffusion(cfg.gamma_min, cfg.gamma_max, cfg.learn_schedule, cfg.time_input,
                                    cfg.reconstruction, cfg.data_noise)
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
