"""Classifier-free guidance as an intervention: the target prompt sampled at guidance scales w.

A scale w means what `convention` says (`diffusion.guidance_convention`):
ho_salimans (1 + w)·cond − w·uncond, w = 0 conditional; diffusers (the authors')
uncond + w·(cond − uncond), w = 1 conditional; each variant's label names it.
Guidance only means something when the model was trained with label dropout
(`diffusion.cfg_dropout > 0`), so the context must say the null prompt was
trained. Park et al. (finding 5): CFG helps only after the capability transition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from conceptlab.interventions.base import InterventionContext, InterventionError, Variant, check_grid


@dataclass(frozen=True)
class ClassifierFreeGuidance:
    """The target's prompt at each guidance scale in `scales`."""

    scales: Sequence[float] = (1.0, 3.0)
    convention: str = "ho_salimans"
    name: str = "cfg"

    def __post_init__(self) -> None:
        if self.convention not in ("ho_salimans", "diffusers"):
            raise InterventionError(f"cfg convention must be ho_salimans or diffusers, got {self.convention!r}")
        scales = tuple(check_grid("cfg.scales", self.scales))
        if any(w < 0 for w in scales):
            raise InterventionError(f"cfg.scales must be ≥ 0, got {list(scales)}")
        object.__setattr__(self, "scales", scales)

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        if not context.trained_with_null_prompt:
            raise InterventionError(
                "classifier-free guidance needs a model trained with label dropout; set diffusion.cfg_dropout > 0"
            )
        prompt = context.class_prompt(target)
        return [Variant(self.name, f"w{w:g} ({self.convention})", prompt, guidance_scale=w) for w in self.scales]
