"""Interventions that reveal hidden capabilities: composable objects evaluated together in batched passes.

Built in: `NaivePrompting`, `OverPrompting`, `LinearLatentIntervention`,
`EmbedderPatching`, `ClassifierFreeGuidance`. Each turns a target class into
`Variant`s (prompt, latent edits on its own rows, guidance scale);
`evaluate_interventions` samples all of them in as few passes as possible and
scores them with the concept probe. Your own intervention is any object with a
`name` and `variants(target, context)`; pass it in the list, nothing else
changes. `build_interventions(cfg)` builds the list a run's
`eval.interventions` config asks for.
"""

from __future__ import annotations

from conceptlab.experiments.config import InterventionsConfig
from conceptlab.interventions.base import (
    Intervention,
    InterventionContext,
    InterventionError,
    LatentEdit,
    Variant,
)
from conceptlab.interventions.evaluate import (
    build_variants,
    concept_embeddings,
    evaluate_interventions,
    sample_variants,
    score_images,
)
from conceptlab.interventions.guidance import ClassifierFreeGuidance
from conceptlab.interventions.latent import EmbedderPatching, LinearLatentIntervention
from conceptlab.interventions.prompting import NaivePrompting, OverPrompting

__all__ = [
    "ClassifierFreeGuidance",
    "EmbedderPatching",
    "Intervention",
    "InterventionContext",
    "InterventionError",
    "LatentEdit",
    "LinearLatentIntervention",
    "NaivePrompting",
    "OverPrompting",
    "Variant",
    "build_interventions",
    "build_variants",
    "concept_embeddings",
    "evaluate_interventions",
    "sample_variants",
    "score_images",
]


def build_interventions(cfg: InterventionsConfig) -> list[Intervention]:
    """The interventions `cfg` enables, naive prompting first."""
    out: list[Intervention] = []
    if cfg.naive:
        out.append(NaivePrompting())
    if cfg.over_prompting is not None:
        out.append(OverPrompting(tuple(cfg.over_prompting.concepts), tuple(cfg.over_prompting.scales)))
    if cfg.linear is not None:
        lin = cfg.linear
        sites = tuple(lin.sites) if lin.sites is not None else None
        out.append(LinearLatentIntervention(tuple(lin.boost), tuple(lin.suppress), lin.alphas, lin.betas, sites))
    if cfg.patching is not None:
        sites = tuple(cfg.patching.sites) if cfg.patching.sites is not None else None
        out.append(EmbedderPatching(sites))
    if cfg.cfg is not None:
        out.append(ClassifierFreeGuidance(tuple(cfg.cfg.scales)))
    return out
