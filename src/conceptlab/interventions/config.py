"""The `eval.interventions` config section and `build_interventions`: the interventions a run evaluates.

Built in: naive prompting, over-prompting, the authors' linear latent intervention, our embedding shift, embedder
patching and classifier-free guidance, each switched on by its subsection; `custom` adds your own by import path.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from conceptlab.config_base import StrictConfig
from conceptlab.interventions.base import Intervention
from conceptlab.interventions.guidance import ClassifierFreeGuidance
from conceptlab.interventions.latent import EmbedderPatching, EmbeddingShift, LinearLatentIntervention
from conceptlab.interventions.prompting import NaivePrompting, OverPrompting
from conceptlab.plugins import PluginError, require, resolve


class OverPromptingConfig(StrictConfig):
    """Prompts pushed beyond the target value along concepts, in units of the concept's separation (`scales`,
    ours); or the target's color entries set to each RGB color of `colors` (the authors' grid)."""

    added_fields = ("colors",)

    concepts: list[str] = Field(default_factory=lambda: ["color"], min_length=1)
    scales: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75, 1.0], min_length=1)
    colors: list[list[float]] | None = Field(
        None, description="the authors' over-prompting (Park et al.'s get_capability.py): the target's color entries "
        "set to each of these RGB colors, absolute; when set, `scales` are not used. Their grid for a blue target is [[0.4, 0.4, "
        "0.6], [0.35, 0.35, 0.65], [0.25, 0.25, 0.75], [0.15, 0.15, 0.85], [0.05, 0.05, 0.95]] (green falls with "
        "red). Needs concepts [color]"
    )

    @model_validator(mode="after")
    def _colors_or_scales(self) -> "OverPromptingConfig":
        if self.colors is None:
            return self
        OverPrompting(tuple(self.concepts), colors=tuple(tuple(c) for c in self.colors))  # one clear line if not
        return self


class LinearInterventionConfig(StrictConfig):
    """The authors' linear latent intervention (`interventions.latent.LinearLatentIntervention`): per block,
    h₁ = h + α (h·u) u, h₂ = h₁ − β (h₁·v) v, u and v the unit embeddings of the boosted and suppressed concepts'
    canonical prompts."""

    boost: list[str] = Field(default_factory=lambda: ["color"])
    suppress: list[str] = Field(default_factory=lambda: ["size"])
    alphas: list[float] = Field(default_factory=lambda: [0.1, 1.0, 2.0], min_length=1)
    betas: list[float] = Field(default_factory=lambda: [0.1], min_length=1)
    boost_offset: float = Field(
        0.45, gt=0.0, description="canonical prompt of a boosted concept: its target value this far from the "
        "concept's neutral value per entry (0.45: blue = (0.05, 0.05, 0.95), the authors')"
    )
    suppress_offset: float = Field(
        0.15, gt=0.0, description="canonical prompt of a suppressed concept: its other value this far from neutral "
        "(0.15: large = radius 0.6, the authors')"
    )
    sites: list[str] | None = Field(None, description="hook_concept sites to edit (default: all)")


class EmbeddingShiftConfig(StrictConfig):
    """Our variant (`interventions.latent.EmbeddingShift`): shift every concept embedding by α·Δ(boosted concepts)
    + β·Δ(suppressed concepts), Δ the embedding change between the target's class prompt and the class differing
    in that concept."""

    boost: list[str] = Field(default_factory=lambda: ["color"])
    suppress: list[str] = Field(default_factory=lambda: ["size"])
    alphas: list[float] = Field(default_factory=lambda: [0.1, 1.0, 2.0], min_length=1)
    betas: list[float] = Field(default_factory=lambda: [0.1], min_length=1)
    sites: list[str] | None = Field(None, description="hook_concept sites to edit (default: all)")


class PatchingConfig(StrictConfig):
    """Concept embeddings taken from a reference checkpoint of the same run."""

    source: Literal["final"] | int = Field("final", description="'final' or the step of a checkpoint of this run")
    sites: list[str] | None = Field(None, description="hook_concept sites to patch (default: all)")


class GuidanceConfig(StrictConfig):
    """Classifier-free guidance scales w (needs diffusion.cfg_dropout > 0)."""

    scales: list[float] = Field(default_factory=lambda: [1.0, 3.0], min_length=1)


class CustomInterventionConfig(StrictConfig):
    """Your own intervention: `path` (`package.module:Name`) names a class or factory, called with `options` as
    keyword arguments; it must return an object with a `name` and `variants(target, context)` (see
    `interventions.base.Intervention`). Checked when the config is loaded."""

    path: str = Field(description="import path package.module:Name of the intervention class or factory")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments it is built with")

    @model_validator(mode="after")
    def _builds(self) -> "CustomInterventionConfig":
        self.build()
        return self

    def build(self) -> Intervention:
        """The intervention object (PluginError, one line, when the path or the object's interface is wrong)."""
        factory = resolve(self.path, "intervention")
        if not callable(factory):
            raise PluginError(f"intervention {self.path!r} is not a class or factory")
        try:
            obj = factory(**self.options)
        except TypeError as err:
            raise PluginError(f"intervention {self.path!r} cannot be built with options {self.options}: {err}") from None
        return require(obj, self.path, "intervention", ("name",), ("variants",))


class InterventionsConfig(StrictConfig):
    """Hidden-capability evaluation: interventions on target classes at every (k-th) checkpoint."""

    added_fields = ("embedding_shift", "custom", "cpu_max_batch")

    targets: list[str | int] | None = Field(
        None, description="class codes to elicit (default: the held-out classes); an unquoted YAML number such as 11 "
        "is padded to one digit per concept (011 for three concepts), a string is taken as written"
    )
    naive: bool = True
    over_prompting: OverPromptingConfig | None = Field(default_factory=OverPromptingConfig)
    linear: LinearInterventionConfig | None = Field(
        default_factory=LinearInterventionConfig, description="the authors' linear latent intervention"
    )
    embedding_shift: EmbeddingShiftConfig | None = Field(
        None, description="our translation of the concept embedding (the fast variant's former `linear`)"
    )
    patching: PatchingConfig | None = Field(default_factory=PatchingConfig)
    cfg: GuidanceConfig | None = None
    samples: int = Field(32, ge=1, description="images per variant and checkpoint")
    every: int = Field(1, ge=1, description="evaluate every k-th checkpoint (the last one always)")
    threshold: float = Field(0.5, gt=0.0, lt=1.0, description="score an intervention must reach to count")
    stay: int = Field(2, ge=1, description="checkpoints the score must stay above threshold")
    confidence: bool = Field(True, description="detect emergence on the Wilson lower bound, not the point value")
    max_batch: int = Field(512, ge=1, description="images per sampling pass")
    cpu_max_batch: int | None = Field(
        None, ge=1, description="on a CPU, images per sampling pass at most this under per_variant noise (null: "
        "max_batch), where the packing changes an image only by float rounding; passes of 256 images and more run "
        "slower per image on a CPU (the paper network: 1,024-image passes at 0.6× the images/s of 16–128, "
        "docs/benchmarks.md); shared noise keeps max_batch (there the packing moves the draws)"
    )
    seed: int = Field(1, ge=0)
    noise: Literal["per_variant", "shared"] = Field(
        "per_variant", description="per_variant: the j-th variant of every intervention draws noise stream j (seeded "
        "by seed, target and j), so variants are paired and no intervention's images depend on which others are "
        "evaluated; shared: every sampling pass draws from one generator in turn (before 2026-12-01)"
    )
    matched_naive: bool = Field(
        True, description="also sample naive prompting on streams 1..k−1 (`naive_repeats`, k = the most variants any "
        "intervention has), so each intervention is compared with the best of as many naive batches as it has variants"
    )
    custom: list[CustomInterventionConfig] = Field(
        default_factory=list, description="your own interventions, by import path"
    )

    @field_validator("targets", mode="before")
    @classmethod
    def _no_boolean_codes(cls, v):
        """A boolean (YAML's true, yes, on) or a float (1.0) is no class code, though Python would read either as an
        int. An empty list is refused: it reads as the default (the held-out classes) nowhere else."""
        if isinstance(v, list) and not v:
            raise ValueError("is empty: name at least one class code, or leave the key out for the held-out classes")
        if isinstance(v, list):
            for i, code in enumerate(v):
                if isinstance(code, (bool, float)):
                    kind = "a boolean" if isinstance(code, bool) else "a float"
                    raise ValueError(f"item {i} is {code}, {kind}, not a class code (one 0/1 digit per concept)")
        return v

    @model_validator(mode="after")
    def _distinct_custom_names(self) -> "InterventionsConfig":
        taken = {"naive", "naive_repeats", "over_prompting", "linear", "embedding_shift", "patching", "cfg"}
        for custom in self.custom:
            name = custom.build().name
            if name in taken:
                raise ValueError(f"custom intervention {custom.path} is named {name!r}, which another intervention uses")
            taken.add(name)
        return self


def build_interventions(cfg: InterventionsConfig, guidance_convention: str = "ho_salimans") -> list[Intervention]:
    """The interventions `cfg` enables, naive prompting first, custom ones last (in their listed order); CFG scales
    are in `guidance_convention` (`diffusion.guidance_convention`)."""
    out: list[Intervention] = []
    if cfg.naive:
        out.append(NaivePrompting())
    if cfg.over_prompting is not None:
        op = cfg.over_prompting
        colors = None if op.colors is None else tuple(tuple(c) for c in op.colors)
        out.append(OverPrompting(tuple(op.concepts), tuple(op.scales), colors=colors))
    if cfg.linear is not None:
        lin = cfg.linear
        sites = tuple(lin.sites) if lin.sites is not None else None
        out.append(LinearLatentIntervention(tuple(lin.boost), tuple(lin.suppress), lin.alphas, lin.betas,
                                            lin.boost_offset, lin.suppress_offset, sites))
    if cfg.embedding_shift is not None:
        shift = cfg.embedding_shift
        sites = tuple(shift.sites) if shift.sites is not None else None
        out.append(EmbeddingShift(tuple(shift.boost), tuple(shift.suppress), shift.alphas, shift.betas, sites))
    if cfg.patching is not None:
        sites = tuple(cfg.patching.sites) if cfg.patching.sites is not None else None
        out.append(EmbedderPatching(sites))
    if cfg.cfg is not None:
        out.append(ClassifierFreeGuidance(tuple(cfg.cfg.scales), guidance_convention))
    out.extend(custom.build() for custom in cfg.custom)
    return out
