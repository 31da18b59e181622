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
  the best over the grid. This is our parametrisation (the fast variant's): it
  moves along the red–blue contrast, so green stays where both classes have it.
- `OverPrompting(colors=...)`: the authors' own over-prompting (Park et al.,
  `get_capability.py` of their released code): the target's color entries set to
  each listed RGB color, every other entry the target's; their grid is
  (1 − b, 1 − b, b) for b = 0.6, 0.65, 0.75, 0.85, 0.95 — a path through the blue
  class means (0.5 − Δc/2, 0.5 − Δc/2, 0.5 + Δc/2) of every Δc to (0.05, 0.05, 0.95),
  green falling with red (`AUTHORS_BLUE_COLORS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from conceptlab.interventions.base import InterventionContext, InterventionError, Variant, check_grid

# The authors' over-prompting colors for a blue target (Park et al.'s released get_capability.py), RGB
AUTHORS_BLUE_COLORS = ((0.4, 0.4, 0.6), (0.35, 0.35, 0.65), (0.25, 0.25, 0.75), (0.15, 0.15, 0.85),
                       (0.05, 0.05, 0.95))


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
    """Prompts pushed beyond the target value along each concept in `concepts`, by `scales` separations (ours); or,
    with `colors`, the target's color entries set to each of those RGB colors (the authors' grid)."""

    concepts: Sequence[str] = ("color",)
    scales: Sequence[float] = (0.25, 0.5, 0.75, 1.0)
    name: str = "over_prompting"
    colors: Sequence[Sequence[float]] | None = None

    def __post_init__(self) -> None:
        if not self.concepts:
            raise InterventionError("over_prompting.concepts is empty; name at least one concept to push along")
        if self.colors is not None:
            if tuple(self.concepts) != ("color",):
                raise InterventionError(f"over_prompting.colors sets the color entries: concepts must be [color], "
                                        f"got {list(self.concepts)}")
            if not self.colors:
                raise InterventionError("over_prompting.colors is empty; give at least one RGB color")
            colors = []
            for rgb in self.colors:
                values = check_grid("over_prompting.colors", rgb)
                if len(values) != 3:
                    raise InterventionError(f"over_prompting.colors: each color is 3 numbers (R, G, B), got {values}")
                colors.append(tuple(values))
            object.__setattr__(self, "colors", tuple(colors))
            return
        object.__setattr__(self, "scales", tuple(check_grid("over_prompting.scales", self.scales)))

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        prompt = context.class_prompt(target)
        if self.colors is not None:
            return self._color_variants(target, prompt, context)
        out = []
        for concept in self.concepts:
            direction = prompt - context.class_prompt(context.flipped(target, concept))
            for s in self.scales:
                out.append(Variant(self.name, f"{concept}{s:+.2f}", prompt + s * direction))
        return out

    def _color_variants(self, target: str, prompt, context: InterventionContext) -> list[Variant]:
        context.flipped(target, "color")  # an InterventionError when color is not a concept of this data
        entries = (context.prompt_slices or {}).get("color")
        if entries is None:
            raise InterventionError("over_prompting.colors needs to know where a prompt's color entries are; this "
                                    "data does not say (its DGP has no prompt_slices)")
        if entries.stop - entries.start != 3:
            raise InterventionError(f"over_prompting.colors sets 3 color entries (R, G, B); this data's prompts have "
                                    f"{entries.stop - entries.start}")
        own, other = prompt[entries], context.class_prompt(context.flipped(target, "color"))[entries]
        away = [rgb for rgb in self.colors
                if float((own.new_tensor(rgb) - own).norm()) >= float((own.new_tensor(rgb) - other).norm())]
        if away:
            raise InterventionError(
                f"over_prompting.colors: {[list(c) for c in away]} lie no nearer class {target}'s color "
                f"{[round(float(v), 3) for v in own]} than the other color value's {[round(float(v), 3) for v in other]}"
                f": for {target} they would prompt away from its color, not beyond it (the grid is for one color "
                "value: set eval.interventions.targets to the classes of that color, or give this one's grid)")
        out = []
        for rgb in self.colors:
            p = prompt.clone()
            p[entries] = p.new_tensor(rgb)
            out.append(Variant(self.name, "rgb(" + ",".join(f"{c:.2f}" for c in rgb) + ")", p))
        return out
