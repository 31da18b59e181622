"""A ring world: one bright dot on a circle, prompted by its angle as (cos θ, sin θ); its study asks, per
checkpoint, whether generations put the dot at the prompted angle."""

from __future__ import annotations

import math

import pandas as pd
import torch
from pydantic import Field

from conceptlab.config_base import DataSection, StrictConfig
from conceptlab.data.labelled import LabelledImages
from conceptlab.models.unet import check_image_size
from conceptlab.studies import (Evaluation, Measurement, StepResult, StudyBase, Summary, eval_noise_seed,
                                read_step_tables)


class RingDataConfig(DataSection):
    """`data` section of the ring world."""

    kind: str = "ringworld.world:RingStudy"
    image_size: int = Field(16, ge=8)
    angles: int = Field(24, ge=2, description="training angles, evenly spaced on the ring")
    radius: float = Field(0.6, gt=0.0, lt=1.0, description="ring radius, as a fraction of the half-width")
    width: float = Field(1.2, gt=0.0, description="dot width σ in pixels")
    copies: int = Field(8, ge=1)
    null_value: float = 0.0
    data_seed: int = Field(0, ge=0)


class RingEvalConfig(StrictConfig):
    """`eval.ring`: generations at `angles` evenly spaced angles (offset half a step from the training ones)."""

    angles: int = Field(16, ge=1)
    tolerance_deg: float = Field(15.0, gt=0.0)
    every: int = Field(1, ge=1)
    seed: int = Field(0, ge=0)


class RingWorld:
    """The data-generating process (`conceptlab.studies.DataProcess`)."""

    channels, prompt_dim, attribute_sizes, null_label = 1, 2, None, None

    def __init__(self, cfg: RingDataConfig):
        self.cfg, self.image_size = cfg, cfg.image_size

    def render(self, theta: torch.Tensor) -> torch.Tensor:
        s, c = self.image_size, (self.image_size - 1) / 2
        r = self.cfg.radius * s / 2
        x, y = c + r * torch.cos(theta), c + r * torch.sin(theta)
        grid = torch.arange(s, dtype=torch.float32)
        d2 = (grid[None, None, :] - x[:, None, None]) ** 2 + (grid[None, :, None] - y[:, None, None]) ** 2
        return torch.exp(-d2 / (2 * self.cfg.width**2))[:, None]

    def make_prompt(self, theta: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.cos(theta), torch.sin(theta)], 1)

    def training_set(self) -> LabelledImages:
        theta = (torch.arange(self.cfg.angles) * 2 * math.pi / self.cfg.angles).repeat(self.cfg.copies)
        return LabelledImages(self.render(theta), self.make_prompt(theta), theta[:, None].double())

    def describe(self) -> dict:
        return {"training_images": self.cfg.angles * self.cfg.copies, "angles": self.cfg.angles}


def read_angle(images: torch.Tensor) -> torch.Tensor:
    """The angle of each image's dot: the intensity-weighted centroid around the centre."""
    s = images.shape[-1]
    grid = torch.arange(s, dtype=torch.float32) - (s - 1) / 2
    w = images[:, 0].clamp_min(0) ** 2
    x, y = (w * grid[None, None, :]).sum((1, 2)), (w * grid[None, :, None]).sum((1, 2))
    return torch.atan2(y, x)


def angular_error_deg(estimate: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    return torch.rad2deg(torch.remainder(estimate - theta + math.pi, 2 * math.pi) - math.pi).abs()


class RingStudy(StudyBase):
    """Generation accuracy of the angle, per checkpoint."""

    kind = "ringworld.world:RingStudy"
    data_config = RingDataConfig
    eval_fields = {"ring": (RingEvalConfig, Field(default_factory=RingEvalConfig))}

    def complete_config(self, cfg) -> None:
        check_image_size(cfg.data.image_size, cfg.model)

    def build_data(self, cfg: RingDataConfig) -> RingWorld:
        return RingWorld(cfg)

    def evaluation(self, cfg, dgp: RingWorld, model, run, console, progress) -> Evaluation:
        ring = cfg.eval.ring
        theta = (torch.arange(ring.angles) + 0.5) * 2 * math.pi / ring.angles
        prompts = dgp.make_prompt(theta)

        def measure(step: int) -> StepResult:
            generator = torch.Generator().manual_seed(eval_noise_seed(ring.seed, cfg))  # eval.noise_per_run
            images = model.sample(prompts, cfg.diffusion.sample_steps, generator).float()
            error = angular_error_deg(read_angle(images), theta)
            rows = pd.DataFrame({"step": step, "angle": theta.numpy(), "error_deg": error.numpy(),
                                 "hit": (error <= ring.tolerance_deg).numpy()})
            return StepResult(rows, info=f"hit {rows['hit'].mean():.2f}")

        def summarize() -> Summary:
            table = read_step_tables(run, "ring")
            table.insert(0, "run", run.name)
            final = table[table["step"] == table["step"].max()]
            by_step = table.groupby("step")["hit"].mean()
            return Summary(
                fields={"final_step": int(final["step"].iloc[0]), "final_hit_rate": float(final["hit"].mean()),
                        "final_error_deg": round(float(final["error_deg"].median()), 2)},
                tables={"ring": table},
                figures={"ring_hits.png": _hits_figure(by_step)},
            )

        return Evaluation([Measurement("ring", measure, every=ring.every)], summarize)


def _hits_figure(by_step: pd.Series):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(by_step.index, by_step.values, marker="o")
    ax.set(xlabel="training step", ylabel="generations at the prompted angle", ylim=(0, 1))
    return fig
