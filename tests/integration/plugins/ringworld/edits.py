"""An intervention plug-in: prompt the target class past its mean, away from the null prompt."""

from __future__ import annotations

from conceptlab.interventions import Variant


class Exaggerate:
    """The target's mean prompt p moved to null + factor·(p − null): every concept pushed further out."""

    def __init__(self, factor: float = 1.5):
        self.name = "exaggerate"
        self.factor = float(factor)

    def variants(self, target, context):
        p, null = context.class_prompt(target), context.null_prompt
        return [Variant(self.name, f"x{self.factor:g}", null + self.factor * (p - null))]
