"""Latent interventions on the concept embeddings (`*.hook_concept`): linear shifts and embedder patching.

Both act on the output of the concept embedders — per ResBlock in the paper's
design, or the single shared one — through the hook points, for the rows of
their own variant only.

- `LinearLatentIntervention` (Park et al.'s "add α along blue, remove β along
  large"): in every block, with E the block's concept embedder, p the target's
  prompt and p_c̄ the prompt of the class differing from it only in concept c,
  Δ_c = E(p) − E(p_c̄) is the block's embedding change from c's other value to the
  target's (directions from canonical prompts through the same block embedder).
  The edit is h ← h + α·Σ_{c ∈ boost} Δ_c + β·Σ_{c ∈ suppress} Δ_c: α pushes the
  boosted concepts further towards the target value, β moves the suppressed
  ones away from their non-target value ("remove large"). Score = best over the
  (α, β) grid. We translate along Δ_c instead of rescaling the projection (h·u)u
  written in the paper's text because a projection of an uncentred embedding on
  a direction has an arbitrary sign (the embedders' biases dominate it), so the
  rescaling could push either way; the translation is always towards the target.
- `EmbedderPatching`: the concept embeddings of the target prompt computed by a
  reference checkpoint (default the run's final one) replace the current ones —
  equivalent to loading the reference's concept embedders into the current
  network, for these rows only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from conceptlab.hooks import HookPoint
from conceptlab.interventions.base import InterventionContext, InterventionError, LatentEdit, Variant, check_grid


def _select_sites(embeddings: dict[str, Tensor], sites: Sequence[str] | None) -> dict[str, Tensor]:
    if not embeddings:
        raise InterventionError("the network has no concept embedding sites (hook_concept); nothing to intervene on")
    if sites is None:
        return embeddings
    missing = [s for s in sites if s not in embeddings]
    if missing:
        raise InterventionError(f"no concept embedding site {missing[0]!r}; sites are {sorted(embeddings)}")
    if not sites:
        raise InterventionError("sites is empty; leave it unset for every concept embedding site")
    return {s: embeddings[s] for s in sites}


def _shift_edit(shift: dict[str, Tensor]) -> LatentEdit:
    def fn(h: Tensor, hook: HookPoint) -> Tensor:
        return h + shift[hook.name].to(h.dtype)

    return LatentEdit(sites=lambda name: name in shift, fn=fn)


def _replace_edit(values: dict[str, Tensor]) -> LatentEdit:
    def fn(h: Tensor, hook: HookPoint) -> Tensor:
        return values[hook.name].to(h.dtype).expand_as(h)

    return LatentEdit(sites=lambda name: name in values, fn=fn)


@dataclass(frozen=True)
class LinearLatentIntervention:
    """h ← h + α·ΣΔ_boost + β·ΣΔ_suppress at every concept embedding site, over an (α, β) grid."""

    boost: Sequence[str] = ("color",)
    suppress: Sequence[str] = ("size",)
    alphas: Sequence[float] = (0.1, 1.0, 2.0)
    betas: Sequence[float] = (0.1,)
    sites: Sequence[str] | None = None
    name: str = "linear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphas", tuple(check_grid("linear.alphas", self.alphas)))
        object.__setattr__(self, "betas", tuple(check_grid("linear.betas", self.betas) if self.suppress else (0.0,)))
        if not self.boost and not self.suppress:
            raise InterventionError("linear intervention needs at least one concept in boost or suppress")
        overlap = set(self.boost) & set(self.suppress)
        if overlap:
            raise InterventionError(f"concepts {sorted(overlap)} are both boosted and suppressed")

    def directions(self, target: str, context: InterventionContext) -> dict[str, dict[str, Tensor]]:
        """{concept: {site: Δ_c}} for every boosted and suppressed concept."""
        concepts = [*self.boost, *self.suppress]
        prompts = [context.class_prompt(target)] + [context.class_prompt(context.flipped(target, c)) for c in concepts]
        emb = _select_sites(context.embed(torch.stack(prompts)), self.sites)
        return {c: {site: e[0] - e[1 + k] for site, e in emb.items()} for k, c in enumerate(concepts)}

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        delta = self.directions(target, context)
        prompt = context.class_prompt(target)
        sites = next(iter(delta.values())).keys()
        out = []
        for a in self.alphas:
            for b in self.betas:
                shift = {
                    site: a * sum((delta[c][site] for c in self.boost), torch.zeros(()))
                    + b * sum((delta[c][site] for c in self.suppress), torch.zeros(()))
                    for site in sites
                }
                label = f"a{a:g}" + (f",b{b:g}" if self.suppress else "")
                out.append(Variant(self.name, label, prompt, edits=(_shift_edit(shift),)))
        return out


@dataclass(frozen=True)
class EmbedderPatching:
    """The target prompt's concept embeddings taken from the reference checkpoint (default: the final one)."""

    sites: Sequence[str] | None = None
    name: str = "patching"

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        if context.embed_reference is None:
            raise InterventionError("embedder patching needs a reference checkpoint; none was given")
        prompt = context.class_prompt(target)
        reference = _select_sites(context.embed_reference(prompt[None]), self.sites)
        return [Variant(self.name, "reference", prompt, edits=(_replace_edit(reference),))]
