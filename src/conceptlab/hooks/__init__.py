"""Read and edit a model's named activations: list hook points, run with hooks, cache activations.

Hooks are global state on the model, so both context managers always remove
what they attached on exit, even when the body raises.
"""

from __future__ import annotations

import difflib
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, Union

import torch
from torch import nn

from conceptlab.hooks.hook_point import HookFn, HookPoint, name_hook_points

NameFilter = Union[str, Sequence[str], Callable[[str], bool], None]

__all__ = [
    "HookFn",
    "HookPoint",
    "NameFilter",
    "cache_activations",
    "hook_points",
    "name_hook_points",
    "run_with_hooks",
]


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """All hook points of `model` by module path, in module registration order."""
    return {name: m for name, m in model.named_modules() if isinstance(m, HookPoint)}


def _select(points: dict[str, HookPoint], names_filter: NameFilter) -> dict[str, HookPoint]:
    """Hook points matching a name, a list of names, a predicate on names, or everything (None)."""
    if names_filter is None:
        return dict(points)
    if callable(names_filter):
        return {name: hp for name, hp in points.items() if names_filter(name)}
    names = [names_filter] if isinstance(names_filter, str) else list(names_filter)
    for name in names:
        if name not in points:
            near = difflib.get_close_matches(name, points, n=5, cutoff=0.5) or list(points)[:5]
            raise KeyError(f"no hook point {name!r}; {len(points)} exist, e.g. {near}")
    return {name: points[name] for name in names}


@contextmanager
def run_with_hooks(
    model: nn.Module,
    fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]],
    context: Any = None,
) -> Iterator[nn.Module]:
    """Attach `fn` to every hook point matching each `(name or predicate, fn)` for the `with` block.

    `context`, when given, is set as `hook_point.context` on all hook points for
    the block so hooks can read caller state (e.g. the current diffusion time).
    """
    points = hook_points(model)
    targets = [(hp, fn) for name_filter, fn in fwd_hooks for hp in _select(points, name_filter).values()]
    saved_context = {name: hp.context for name, hp in points.items()}
    removers: list[Callable[[], None]] = []
    try:
        if context is not None:
            for hp in points.values():
                hp.context = context
        for hp, fn in targets:
            removers.append(hp.add_hook(fn))
        yield model
    finally:
        for remove in removers:
            remove()
        for name, hp in points.items():
            hp.context = saved_context[name]


@contextmanager
def cache_activations(model: nn.Module, names_filter: NameFilter = None) -> Iterator[dict[str, list[torch.Tensor]]]:
    """Collect a detached copy of each matching activation on every forward call: `{name: [per call]}`."""
    names = list(_select(hook_points(model), names_filter))
    cache: dict[str, list[torch.Tensor]] = {name: [] for name in names}

    def store(name: str) -> HookFn:
        def fn(x: torch.Tensor, hook: HookPoint) -> None:
            cache[name].append(x.detach().clone())

        return fn

    with run_with_hooks(model, [(name, store(name)) for name in names]):
        yield cache
