"""Interventions that reveal hidden capabilities: composable objects evaluated together in batched passes.

Built in: `NaivePrompting`, `OverPrompting`, `LinearLatentIntervention` (the
authors'), `EmbeddingShift` (ours), `EmbedderPatching`, `ClassifierFreeGuidance`. Each turns a target class into
`Variant`s (prompt, latent edits on its own rows, guidance scale);
`evaluate_interventions` samples all of them in as few passes as possible and
scores them with the concept probe. Your own intervention is any object with a
`name` and `variants(target, context)`; pass it in the list, nothing else
changes; or name it in a config (`eval.interventions.custom`, by import path).
`build_interventions(cfg)` builds the list a run's `eval.interventions` config
asks for (`interventions.config`).
"""

from __future__ import annotations

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
from conceptlab.interventions.config import InterventionsConfig, build_interventions
from conceptlab.interventions.guidance import ClassifierFreeGuidance
from conceptlab.interventions.latent import EmbedderPatching, EmbeddingShift, LinearLatentIntervention
from conceptlab.interventions.prompting import NaivePrompting, OverPrompting

__all__ = [
    "ClassifierFreeGuidance",
    "EmbedderPatching",
    "EmbeddingShift",
    "Intervention",
    "InterventionContext",
    "InterventionError",
    "InterventionsConfig",
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
