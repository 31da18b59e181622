"""Latent interventions on the concept embeddings (`*.hook_concept`): the authors' linear intervention, our
embedding shift, and embedder patching.

All act on the output of the concept embedders — per ResBlock in the paper's design, or the single shared one —
through the hook points, for the rows of their own variant only.

- `LinearLatentIntervention` (`linear`, the authors' released algorithm; Park et al. 2024): in every block, with E
  the block's concept embedder and h = E(p) the embedding it gives the target's prompt p, u = E(p_boost)/‖E(p_boost)‖
  and v = E(p_suppress)/‖E(p_suppress)‖: h₁ = h + α (h·u) u, then h₂ = h₁ − β (h₁·v) v (v's component taken after
  the first edit); score = best over the (α, β) grid. The canonical prompts set one concept's entries and every
  other entry 0 (`InterventionContext.canonical_prompt`): p_boost the boosted concept at the *target's* value pushed
  beyond the training range, each entry `boost_offset` = 0.45 from the concept's neutral value (mid-grey 0.5 for
  color and background, the mean radius 0.45 for size) towards the value's class mean — blue → (0.05, 0.05, 0.95),
  the authors'; p_suppress the suppressed concept at its *other* value, `suppress_offset` = 0.15 from neutral —
  large → 0.6, the authors'. With several boosted or suppressed concepts the edits apply in turn (boosted ones
  first, in the listed order), each projection taken after the edits before it.
- `EmbeddingShift` (`embedding_shift`, our variant): h ← h + α·Σ_{boost} Δ_c + β·Σ_{suppress} Δ_c with
  Δ_c = E(p) − E(p_c̄), p_c̄ the class differing from the target only in concept c: a translation of the
  embedding towards the target value. For a (near-)linear embedder this is over-prompting by another route, so it
  is not independent evidence of a hidden capability; kept under its own name because the fast variant's recorded
  numbers were measured with it.
- `EmbedderPatching`: the concept embeddings of the target prompt computed by a reference checkpoint (default the
  run's final one) replace the current ones — equivalent to loading the reference's concept embedders into the
  current network, for these rows only.
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


def _placed_like():
    """`like(t, h)`: t on h's device and in h's dtype, moved once per (tensor, device, dtype) and kept: an edit's
    directions and embeddings are computed once on the CPU, and its hook runs at every sampler step."""
    memo: dict[tuple, Tensor] = {}

    def like(t: Tensor, h: Tensor) -> Tensor:
        key = (id(t), h.device, h.dtype)
        if key not in memo:
            memo[key] = t.to(device=h.device, dtype=h.dtype)
        return memo[key]

    return like


def _shift_edit(shift: dict[str, Tensor]) -> LatentEdit:
    like = _placed_like()

    def fn(h: Tensor, hook: HookPoint) -> Tensor:
        return h + like(shift[hook.name], h)

    return LatentEdit(sites=lambda name: name in shift, fn=fn)


def _replace_edit(values: dict[str, Tensor]) -> LatentEdit:
    like = _placed_like()

    def fn(h: Tensor, hook: HookPoint) -> Tensor:
        return like(values[hook.name], h).expand_as(h)

    return LatentEdit(sites=lambda name: name in values, fn=fn)


def _check_concepts(name: str, boost: Sequence[str], suppress: Sequence[str]) -> None:
    if not boost and not suppress:
        raise InterventionError(f"{name} needs at least one concept in boost or suppress")
    overlap = set(boost) & set(suppress)
    if overlap:
        raise InterventionError(f"{name}: concepts {sorted(overlap)} are both boosted and suppressed")


def _unit(e: Tensor, site: str, what: str) -> Tensor:
    norm = e.norm()
    if not bool(norm > 0):
        raise InterventionError(f"linear: the concept embedding of {what} is zero at {site}; no direction to edit along")
    return e / norm


def _project_edit(boost: dict[str, list[Tensor]], suppress: dict[str, list[Tensor]], alpha: float, beta: float) -> LatentEdit:
    """h → h + α (h·u) u for each boost direction u, then − β (h·v) v for each suppress direction v, in turn."""

    like = _placed_like()

    def fn(h: Tensor, hook: HookPoint) -> Tensor:
        for u in boost.get(hook.name, []):
            u = like(u, h)
            h = h + alpha * (h @ u)[:, None] * u
        for v in suppress.get(hook.name, []):
            v = like(v, h)
            h = h - beta * (h @ v)[:, None] * v
        return h

    return LatentEdit(sites=lambda name: name in boost or name in suppress, fn=fn)


@dataclass(frozen=True)
class LinearLatentIntervention:
    """The authors' linear latent intervention: h₁ = h + α (h·u) u, h₂ = h₁ − β (h₁·v) v per block, over (α, β)."""

    boost: Sequence[str] = ("color",)
    suppress: Sequence[str] = ("size",)
    alphas: Sequence[float] = (0.1, 1.0, 2.0)
    betas: Sequence[float] = (0.1,)
    boost_offset: float = 0.45
    suppress_offset: float = 0.15
    sites: Sequence[str] | None = None
    name: str = "linear"

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphas", tuple(check_grid("linear.alphas", self.alphas)))
        object.__setattr__(self, "betas", tuple(check_grid("linear.betas", self.betas) if self.suppress else (0.0,)))
        _check_concepts("linear intervention", self.boost, self.suppress)

    def canonical_prompts(self, target: str, context: InterventionContext) -> list[tuple[str, str, Tensor]]:
        """(role, concept, prompt) of every direction: boosted concepts at the target's value, suppressed ones at
        their other value."""
        if context.canonical_prompt is None:
            raise InterventionError("linear: this data has no canonical prompts (InterventionContext.canonical_prompt)")
        out = []
        for role, concepts, offset in (("boost", self.boost, self.boost_offset),
                                       ("suppress", self.suppress, self.suppress_offset)):
            for c in concepts:
                if c not in context.concepts:
                    raise InterventionError(f"unknown concept {c!r}; this data's concepts are {context.concepts}")
                value = int(target[context.concepts.index(c)])
                value = value if role == "boost" else 1 - value
                out.append((role, c, context.canonical_prompt(c, value, offset)))
        return out

    def directions(self, target: str, context: InterventionContext) -> dict[str, dict[str, list[Tensor]]]:
        """{"boost" | "suppress": {site: [unit directions, in the order they are applied]}}."""
        canon = self.canonical_prompts(target, context)
        emb = _select_sites(context.embed(torch.stack([p for _, _, p in canon])), self.sites)
        out: dict[str, dict[str, list[Tensor]]] = {"boost": {}, "suppress": {}}
        for site, e in emb.items():
            for k, (role, concept, _) in enumerate(canon):
                out[role].setdefault(site, []).append(_unit(e[k], site, f"{role}ed {concept}"))
        return out

    def variants(self, target: str, context: InterventionContext) -> list[Variant]:
        directions = self.directions(target, context)
        prompt = context.class_prompt(target)
        out = []
        for a in self.alphas:
            for b in self.betas:
                label = f"a{a:g}" + (f",b{b:g}" if self.suppress else "")
                edit = _project_edit(directions["boost"], directions["suppress"], a, b)
                out.append(Variant(self.name, label, prompt, edits=(edit,)))
        return out


@dataclass(frozen=True)
class EmbeddingShift:
    """Our translation of the concept embedding: h ← h + α·ΣΔ_boost + β·ΣΔ_suppress, over an (α, β) grid."""

    boost: Sequence[str] = ("color",)
    suppress: Sequence[str] = ("size",)
    alphas: Sequence[float] = (0.1, 1.0, 2.0)
    betas: Sequence[float] = (0.1,)
    sites: Sequence[str] | None = None
    name: str = "embedding_shift"

    def __post_init__(self) -> None:
        object.__setattr__(self, "alphas", tuple(check_grid("embedding_shift.alphas", self.alphas)))
        object.__setattr__(self, "betas",
                           tuple(check_grid("embedding_shift.betas", self.betas) if self.suppress else (0.0,)))
        _check_concepts("embedding shift", self.boost, self.suppress)

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
