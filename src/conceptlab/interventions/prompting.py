"""Input-space interventions: naive prompting and over-prompting beyond the training range.

- `NaivePrompting`: the target class's mean prompt, as a user would type it.
- `NaiveRepeats`: the same prompt again on other noise streams (1, 2, …): with
  naive prompting (stream 0) they are the k independent naive batches an
  intervention with k variants is compared with (the bias-matched baseline of
  `analysis.emergence_stats`), not an intervention of their own.
- `OverPrompting`: for each chosen concept c, prompts p + s·(p − p_c̄) where p is
  the target's mean prompt and p_c̄ the prompt of the class that differs from
  the target only in c; s = 0 is naive prompting, s = 0.5 moves c half a
  separation beyond the target value (with Δc = 0.4 the blue channel goes from
  0.7 to 0.9). Only c's prompt entries change. The score of the intervention is
  the best over the grid (Park et al.: blue channel pushed 0.65 → 0.95).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from conceptlab.interventions.base import InterventionContext, InterventionError, Variant, check_grid


@dataclass(frozen=True)
class NaivePrompting:
    """The target class's mean prompt, unchanged."""

    name: str = "naive"

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        return [Variant(self.name, "prompt", context.class_prompt(target))]


@dataclass(frozen=True)
class NaiveRepeats:
    """The target's mean prompt on noise streams 1..`count` (naive prompting itself is stream 0)."""

    count: int = 1
    name: str = "naive_repeats"

    def __post_init__(self) -> None:
        if self.count < 1:
            raise InterventionError(f"naive_repeats needs count ≥ 1, got {self.count}")

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        prompt = context.class_prompt(target)
        return [Variant(self.name, f"stream {j}", prompt, stream=j) for j in range(1, self.count + 1)]


@dataclass(frozen=True)
class OverPrompting:
    """Prompts pushed beyond the target value along each concept in `concepts`, by `scales` separations."""

    concepts: Sequence[str] = ("color",)
    scales: Sequence[float] = (0.25, 0.5, 0.75, 1.0)
    name: str = "over_prompting"

    def __post_init__(self) -> None:
        if not self.concepts:
            raise InterventionError("over_prompting.concepts is empty; name at least one concept to push along")
        object.__setattr__(self, "scales", tuple(check_grid("over_prompting.scales", self.scales)))

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        prompt = context.class_prompt(target)
        out = []
        for concept in self.concepts:
            direction = prompt - context.class_prompt(context.flipped(target, concept))
            for s in self.scales:
                out.append(Variant(self.name, f"{concept}{s:+.2f}", prompt + s * direction))
        return out
