"""Evaluate every intervention on every target class at one checkpoint, in batched sampling passes.

`evaluate_interventions(model, interventions, targets, context, probe, ...)`
asks each intervention for its variants of each target, packs all variants
that share a guidance scale into sampling passes of at most `max_batch` images
(n per variant), applies each variant's latent edits to its own rows through
one dispatching hook per touched hook point, reads the images with the concept
probe and returns a tidy table, one row per (target, intervention, variant):

    target, intervention, variant, guidance_scale, stream, n, score, hit_rate,
    valid_fraction, p_<concept>…, image_scores (the n per-image scores)

`score` is the mean over images of Π_k P(concept k = target value), an image
the probe reads as invalid (blank, no object) counting 0; `hit_rate` the
fraction of valid images with every concept read as the target value;
`p_<concept>` the mean probability of the concept's "1" value over valid
images (the concept-space coordinate). `concept_embeddings(model, prompts)`
reads the concept embedding at every `hook_concept` site for a batch of
prompts (what linear interventions and patching need).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Callable, Sequence

import pandas as pd
import torch
from torch import Tensor

from conceptlab.hooks import HookNameError, HookPoint, cache_activations, hook_points, restrict_hook, run_with_hooks
from conceptlab.interventions.base import Intervention, InterventionContext, Variant
from conceptlab.models.sampling import NoiseStreams
from conceptlab.probes.concept_classifier import read_concepts

CONCEPT_SITE_SUFFIX = "hook_concept"


def concept_embeddings(model, prompts: Tensor) -> dict[str, Tensor]:
    """{site: [N, C]} concept embeddings of `prompts` at every `*hook_concept` site (they do not depend on x or t)."""
    net = model.net
    device = next(net.parameters()).device
    x = torch.zeros((prompts.shape[0], *model.image_shape), device=device)
    t = torch.full((prompts.shape[0],), 0.5, device=device)
    with torch.inference_mode(), cache_activations(net, lambda name: name.endswith(CONCEPT_SITE_SUFFIX)) as cache:
        net(x, t, prompts.to(device))
    return {name: acts[0].float().cpu() for name, acts in cache.items() if acts}


def _matching(names: Sequence[str], sites) -> list[str]:
    if callable(sites):
        return [n for n in names if sites(n)]
    if sites not in names:
        raise HookNameError(f"no hook point {sites!r}; e.g. {[n for n in names if n.endswith('hook_concept')][:4]}")
    return [sites]


def _dispatching_hooks(net, chunk: Sequence[Variant], n: int) -> list[tuple[str, Callable]]:
    """One hook per touched hook point applying each variant's edits to its own conditional rows."""
    names = list(hook_points(net))
    table: dict[str, list[tuple[int, int, Callable]]] = {}
    for k, variant in enumerate(chunk):
        for edit in variant.edits:
            for name in _matching(names, edit.sites):
                table.setdefault(name, []).append((k * n, (k + 1) * n, edit.fn))

    def dispatch(x: Tensor, hook: HookPoint) -> Tensor:
        out = x.clone()
        for start, stop, fn in table[hook.name]:
            out[start:stop] = fn(out[start:stop], hook)
        return out

    return [(name, restrict_hook(dispatch, branch="cond")) for name in table]


def _chunks(variants: list[tuple[int, Variant]], per_pass: int) -> list[list[tuple[int, Variant]]]:
    return [variants[i : i + per_pass] for i in range(0, len(variants), per_pass)]


def stream_seed(seed: int, target: str, stream: int) -> int:
    """The seed of noise stream `stream` for target `target` under base seed `seed` (a stable hash)."""
    digest = hashlib.sha256(repr(("intervention-stream", int(seed), str(target), int(stream))).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def sample_variants(
    model,
    variants: Sequence[Variant],
    n: int,
    steps: int,
    generator: torch.Generator | None,
    null_prompt: Tensor | None = None,
    max_batch: int = 1024,
    on_pass: Callable[[int], None] | None = None,
    seeds: Sequence[int] | None = None,
) -> Tensor:
    """n images per variant, [len(variants)·n, C, H, W] in variant order; passes grouped by guidance scale.

    With `seeds` (one per variant) each variant's rows draw their noise from their own generator, so its images do
    not depend on the other variants or on how they are packed into passes; else every pass draws from
    `generator` in turn."""
    if n < 1:
        raise ValueError(f"n (images per variant) must be ≥ 1, got {n}")
    if not variants:
        raise ValueError("no variants to sample")
    if seeds is not None and len(seeds) != len(variants):
        raise ValueError(f"need one seed per variant, got {len(seeds)} for {len(variants)}")
    per_pass = max(1, max_batch // n)
    device = next(model.parameters()).device
    out: list[Tensor | None] = [None] * len(variants)
    scales = sorted({v.guidance_scale for v in variants}, key=lambda w: (w is not None, w or 0.0))  # plain first
    for w in scales:
        group = [(i, v) for i, v in enumerate(variants) if v.guidance_scale == w]
        for chunk in _chunks(group, per_pass):
            prompts = torch.stack([v.prompt for _, v in chunk]).repeat_interleave(n, dim=0).to(device)
            null = None if null_prompt is None else null_prompt.reshape(1, -1).to(device)
            hooks = _dispatching_hooks(model.net, [v for _, v in chunk], n)
            noise = generator
            if seeds is not None:
                noise = NoiseStreams([torch.Generator(device=device).manual_seed(int(seeds[i])) for i, _ in chunk],
                                     [n] * len(chunk))
            with run_with_hooks(model.net, hooks):
                images = model.sample(prompts, steps, noise, w, null).float().cpu()
            for k, (i, _) in enumerate(chunk):
                out[i] = images[k * n : (k + 1) * n]
            if on_pass is not None:
                on_pass(len(chunk) * n)
    return torch.cat(out)  # type: ignore[arg-type]


def score_images(images: Tensor, target: str, concepts: list[str], probe) -> dict[str, float]:
    """Joint score, hit rate, valid fraction and concept coordinates of generations meant to be class `target`."""
    reading = read_concepts(probe, images)
    valid = reading.valid
    p_target = torch.stack(
        [reading.p_one[c] if target[k] == "1" else 1.0 - reading.p_one[c] for k, c in enumerate(concepts)], dim=1
    )
    hit = valid & torch.stack([reading.predicted[c] == int(target[k]) for k, c in enumerate(concepts)], 1).all(1)
    per_image = torch.where(valid, p_target.prod(1), torch.zeros(()))
    row = {
        "score": float(per_image.mean()),
        "hit_rate": float(hit.float().mean()),
        "valid_fraction": float(valid.float().mean()),
    }
    for c in concepts:
        p = reading.p_one[c][valid]
        row[f"p_{c}"] = float(p.mean()) if p.numel() else math.nan
    row["image_scores"] = [float(x) for x in per_image]
    return row


def build_variants(
    interventions: Sequence[Intervention], targets: Sequence[str], context: InterventionContext
) -> list[tuple[str, Variant]]:
    """(target, variant) for every intervention and target, in that order; a variant without a `stream` gets its
    position among its intervention's variants."""
    names = [i.name for i in interventions]
    if len(set(names)) != len(names):
        raise ValueError(f"intervention names must be unique, got {names}")
    out = []
    for target in targets:
        if target not in context.classes:
            raise ValueError(f"unknown target class {target!r}; classes are {context.classes}")
        for intervention in interventions:
            for j, v in enumerate(intervention.variants(target, context)):
                out.append((target, v if v.stream is not None else dataclasses.replace(v, stream=j)))
    return out


def evaluate_interventions(
    model,
    interventions: Sequence[Intervention],
    targets: Sequence[str],
    context: InterventionContext,
    probe,
    n: int,
    steps: int,
    generator: torch.Generator | None,
    max_batch: int = 1024,
    on_pass: Callable[[int], None] | None = None,
    noise_seed: int | None = None,
) -> tuple[pd.DataFrame, Tensor]:
    """Tidy table (one row per target × intervention × variant) and the images [variants·n, C, H, W].

    With `noise_seed` every variant draws from its own noise stream (`stream_seed(noise_seed, target, stream)`):
    variants with the same stream index share their noise (paired), and no variant's images depend on which others
    are evaluated; without it the passes draw from `generator` in turn."""
    pairs = build_variants(interventions, targets, context)
    seeds = None if noise_seed is None else [stream_seed(noise_seed, t, v.stream) for t, v in pairs]
    images = sample_variants(
        model, [v for _, v in pairs], n, steps, generator, context.null_prompt, max_batch, on_pass, seeds
    )
    rows = []
    for k, (target, variant) in enumerate(pairs):
        scored = score_images(images[k * n : (k + 1) * n], target, context.concepts, probe)
        rows.append(
            {
                "target": target,
                "intervention": variant.intervention,
                "variant": variant.label,
                # NaN: plain conditional sampling (no guidance); else w in diffusion.guidance_convention
                "guidance_scale": float("nan") if variant.guidance_scale is None else float(variant.guidance_scale),
                "stream": variant.stream,
                "n": n,
                **scored,
            }
        )
    return pd.DataFrame(rows), images
