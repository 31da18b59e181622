"""Findings against controls written as data, in a sweep spec: which numbers to tabulate and which claims to test.

A sweep spec may carry a `controls` block (declared before its report seeds are run):

    controls:
      path: "controls.{source}.{measure}"        # where each run's summary.json keeps a source's measure
      sources: [trained, untrained, pixels, encoding, encoding_map]
      measures: [additive_share, subspace_overlap, betti_1]
      claims:
        - name: additive-beyond-encoding-map
          statement: "the trained code is more additive than a random layer on its encoding"
          measure: additive_share
          control: encoding_map                  # the binding control
          direction: greater                     # greater | less | holds
          margin: 0.05                           # fixed before the report seeds were run
          restated: "..."                        # what the finding says instead when it does not reproduce

`conceptlab report SWEEP` reads the finished runs, tabulates every source × measure over the seeds and
evaluates each claim (`analysis.control_claims`). A `holds` claim reads a truth value of the trained model at
`path` with `source: trained` (or at its own `value` path) and has no control.
"""

from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import Field, model_validator

from conceptlab.config_base import StrictConfig as _Strict

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


class ClaimSpec(_Strict):
    """One finding's pass criterion against its binding control."""

    name: str
    statement: str
    measure: str | None = Field(None, description="the measure substituted into the block's path")
    value: str | None = Field(None, description="a full summary path instead of the block's path ({source} allowed)")
    control: str | None = Field(None, description="the binding control (a source); none for `holds`")
    direction: Literal["greater", "less", "holds"]
    margin: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    min_seeds: int | None = Field(None, ge=1, description="seeds that must pass (default: every report seed)")
    restated: str = Field("", description="what holds instead when the claim is not reproduced")

    @model_validator(mode="after")
    def _consistent(self) -> "ClaimSpec":
        if not _NAME.match(self.name):
            raise ValueError(f"claim name {self.name!r}: letters, digits, '_', '-', '.' only")
        if (self.measure is None) == (self.value is None):
            raise ValueError(f"claim {self.name}: give exactly one of measure or value")
        if self.direction == "holds":
            if self.control is not None:
                raise ValueError(f"claim {self.name}: a 'holds' claim has no control")
        elif self.control is None:
            raise ValueError(f"claim {self.name}: direction {self.direction!r} needs a binding control")
        return self


class ControlsSpec(_Strict):
    """The controls block of a sweep spec: the table to tabulate and the claims to evaluate."""

    path: str = "controls.{source}.{measure}"
    sources: list[str] = Field(min_length=1)
    measures: list[str] = Field(default_factory=list)
    claims: list[ClaimSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> "ControlsSpec":
        fields = {f for _, f, _, _ in string.Formatter().parse(self.path) if f is not None}
        if fields - {"source", "measure"}:
            raise ValueError(f"path {self.path!r}: only {{source}} and {{measure}} may be substituted")
        if "trained" not in self.sources:
            raise ValueError("sources must include 'trained' (the model the controls are compared with)")
        names = [c.name for c in self.claims]
        if len(set(names)) != len(names):
            raise ValueError(f"claim names repeat: {names}")
        for c in self.claims:
            if c.control is not None and c.control not in self.sources:
                raise ValueError(f"claim {c.name}: control {c.control!r} is not one of the sources {self.sources}")
            if c.control == "trained":
                raise ValueError(f"claim {c.name}: the binding control cannot be the trained model itself")
        return self

    def value_path(self, claim: ClaimSpec, source: str) -> list[str]:
        """The summary keys of `claim`'s value for `source`."""
        text = claim.value.format(source=source) if claim.value else self.path.format(source=source,
                                                                                      measure=claim.measure)
        return text.split(".")

    def table_path(self, source: str, measure: str) -> list[str]:
        return self.path.format(source=source, measure=measure).split(".")


def summary_value(summary: dict, keys: list[str]) -> float | bool | None:
    """The number or truth value at `keys` in a run's summary; None where the path is missing or holds anything
    else (a list, a string, null)."""
    node = summary
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    if isinstance(node, bool):
        return node
    if isinstance(node, (int, float)):
        return float(node)
    return None
