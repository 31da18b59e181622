"""What an intervention is: a recipe that turns a target class into sampling variants (prompt, latent edits, guidance).

An `Intervention` is a small object with a `name` and one method,
`variants(target, context) -> list[Variant]`. A `Variant` says how to generate
the target class one way: the prompt row fed to the network, optional
`LatentEdit`s (a hook-point filter and a function applied to the activation
rows of this variant only, on the conditional branch) and a guidance scale.
The batched evaluator (`interventions.batched`) packs the variants of every
intervention and every target class into as few sampling passes as possible,
so a new intervention plugs in by returning variants; the loop never changes.

`InterventionContext` is what an intervention may ask about the model at the
checkpoint being evaluated: the concepts and class prompts of the data, the
null prompt, and the concept embeddings a batch of prompts gets at every
`hook_concept` site, under the current weights or under a reference checkpoint
(read through the hook points, never through the network's internals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence, Union, runtime_checkable

import torch
from torch import Tensor

from conceptlab.hooks import HookPoint

EditFn = Callable[[Tensor, HookPoint], Tensor]
HookFilter = Union[str, Callable[[str], bool]]


class InterventionError(ValueError):
    """An intervention that cannot be built as asked (unknown concept, empty grid, missing CFG training, ...)."""


@dataclass(frozen=True)
class LatentEdit:
    """Apply `fn(activation_rows, hook_point) -> new rows` at every hook point matching `sites`."""

    sites: HookFilter
    fn: EditFn


@dataclass(frozen=True)
class Variant:
    """One way of generating a target class: a prompt, latent edits on its rows, and a guidance scale.

    `stream` is the noise stream its images draw from when variants get their own noise (`eval.interventions.noise:
    per_variant`): by default its position among its intervention's variants, so the j-th variant of every
    intervention shares stream j with the j-th naive batch (paired comparisons)."""

    intervention: str
    label: str
    prompt: Tensor
    edits: tuple[LatentEdit, ...] = ()
    guidance_scale: float | None = None  # None: plain conditional sampling; else w in diffusion.guidance_convention
    stream: int | None = None


@dataclass
class InterventionContext:
    """The data's concepts and prompts plus access to concept embeddings at the checkpoint under evaluation.

    `embed(prompts)` → {hook name: [N, C]} concept embeddings under the current
    weights; `embed_reference(prompts)` the same under the reference checkpoint
    (default: the run's final one), or None when no reference was given;
    `canonical_prompt(concept, value, offset)` a prompt with only that concept's
    entries set (the data's, e.g. `ShapesDGP.canonical_prompt`), or None;
    `prompt_slices` where each concept's entries sit in a prompt (the data's
    `prompt_slices()`), or None.
    """

    concepts: list[str]
    classes: list[str]
    train_classes: list[str]
    class_prompt: Callable[[str], Tensor]
    null_prompt: Tensor
    embed: Callable[[Tensor], dict[str, Tensor]]
    embed_reference: Callable[[Tensor], dict[str, Tensor]] | None = None
    trained_with_null_prompt: bool = False
    canonical_prompt: Callable[[str, int, float], Tensor] | None = None
    prompt_slices: dict[str, slice] | None = None

    def flipped(self, code: str, concept: str) -> str:
        """The class code with `concept`'s value flipped (the concept's other value)."""
        if concept not in self.concepts:
            raise InterventionError(f"unknown concept {concept!r}; this data's concepts are {self.concepts}")
        i = self.concepts.index(concept)
        return code[:i] + ("1" if code[i] == "0" else "0") + code[i + 1 :]


@runtime_checkable
class Intervention(Protocol):
    """Anything with a `name` and `variants(target, context)` is an intervention."""

    name: str

    def variants(self, target: str, context: InterventionContext) -> list[Variant]: ...


def check_grid(name: str, values: Sequence[float]) -> list[float]:
    """A non-empty list of finite floats, or an InterventionError naming the grid."""
    values = [float(v) for v in values]
    if not values:
        raise InterventionError(f"{name} is empty; give at least one value")
    if not all(torch.isfinite(torch.tensor(values))):
        raise InterventionError(f"{name} must be finite numbers, got {values}")
    return values
