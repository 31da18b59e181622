"""Read and edit a model's named activations: list hook points, run with hooks, cache activations.

Hooks are global state on the model, so every entry point removes what it
attached on exit, even when the body raises.

- `hook_points(model)`: `{name: HookPoint}` in registration order.
- `run_with_hooks(model, [(name | predicate, fn)], context=None)`: context
  manager attaching hook fns `fn(activation, hook_point) -> activation | None`.
- `cache_activations(model, names_filter)`: context manager, `{name: [per call]}`.

During sampling (`models.sampling.guided_output`) the sampler publishes a
`SamplingContext(t, step, n_rows, n_cond)` as `hook_point.context` on every hook
point of the network for each forward pass (`sampling_context`); the batch is
laid out [cond; uncond] under classifier-free guidance. On top of that:

- `restrict_hook(fn, t_range=None, branch="both")`: a hook fn that calls `fn`
  only when t ∈ [t_min, t_max] (inclusive, up to float32 rounding) and only on the rows of `branch`
  ("cond", "uncond", "both"); `fn` sees those rows and its result replaces only
  them. Use it inside `run_with_hooks`.
- `run_with_cache(model, run, names_filter, t_range=None, branch="cond",
  fwd_hooks=())`: calls `run()` (e.g. `lambda: ancestral_sample(...)`) with
  `fwd_hooks` attached and returns `(run's result, SampledActivations)`, whose
  `activations[name]` is stacked over sampling steps, [steps, N, ...], with
  `t[i]` and `step[i]` the time and sampler step of row i. Edits in `fwd_hooks`
  run before the cache reads the activation.

Unknown hook names raise `HookNameError` (a KeyError and a ValueError) listing
close valid names.
"""

from __future__ import annotations

import difflib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar, Union

import torch
from torch import nn

from conceptlab.hooks.hook_point import BRANCHES, Branch, HookFn, HookPoint, SamplingContext, name_hook_points

NameFilter = Union[str, Sequence[str], Callable[[str], bool], None]
T = TypeVar("T")

__all__ = [
    "Branch",
    "HookFn",
    "HookNameError",
    "HookPoint",
    "NameFilter",
    "SampledActivations",
    "SamplingContext",
    "cache_activations",
    "hook_points",
    "name_hook_points",
    "restrict_hook",
    "run_with_cache",
    "run_with_hooks",
    "sampling_context",
]


class HookNameError(KeyError, ValueError):
    """A hook point name that the model does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


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
            raise HookNameError(f"no hook point {name!r}; {len(points)} exist, e.g. {near}")
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


@contextmanager
def sampling_context(net: Any, context: SamplingContext) -> Iterator[None]:
    """Publish `context` on every hook point of `net` (if it is a module) for the block; restores the previous one."""
    points = list(hook_points(net).values()) if isinstance(net, nn.Module) else []
    saved = [hp.context for hp in points]
    try:
        for hp in points:
            hp.context = context
        yield
    finally:
        for hp, old in zip(points, saved):
            hp.context = old


def _check_restriction(t_range: tuple[float, float] | None, branch: str) -> None:
    if branch not in BRANCHES:
        raise ValueError(f"unknown branch {branch!r}; expected one of {BRANCHES}")
    if t_range is not None:
        t_min, t_max = t_range
        if not 0.0 <= t_min <= t_max <= 1.0:
            raise ValueError(f"t_range must satisfy 0 ≤ t_min ≤ t_max ≤ 1, got {tuple(t_range)}")


def _in_range(t: float, t_range: tuple[float, float] | None) -> bool:
    return t_range is None or t_range[0] - 1e-6 <= t <= t_range[1] + 1e-6  # t arrives as float32


def _sampling_context(hook: HookPoint) -> SamplingContext:
    ctx = hook.context
    if not isinstance(ctx, SamplingContext):
        raise RuntimeError(
            f"hook at {hook.name!r} is restricted by diffusion time or CFG branch but no SamplingContext was "
            "published; call the network through models.sampling (guided_output / iter_ancestral)"
        )
    return ctx


def restrict_hook(fn: HookFn, t_range: tuple[float, float] | None = None, branch: Branch = "both") -> HookFn:
    """`fn` applied only when the sampler's t ∈ [t_min, t_max] and only to the rows of `branch`."""
    _check_restriction(t_range, branch)
    if t_range is None and branch == "both":
        return fn

    def restricted(x: torch.Tensor, hook: HookPoint) -> torch.Tensor | None:
        ctx = _sampling_context(hook)
        if x.shape[0] != ctx.n_rows:
            raise ValueError(f"activation at {hook.name!r} has {x.shape[0]} rows, the sampling context {ctx.n_rows}")
        rows = ctx.rows(branch)
        if not _in_range(ctx.t, t_range) or rows.start == rows.stop:
            return None
        if rows.stop - rows.start == ctx.n_rows:
            return fn(x, hook)
        out = fn(x[rows], hook)
        if out is None:
            return None
        edited = x.clone()
        edited[rows] = out
        return edited

    return restricted


@dataclass
class SampledActivations:
    """Activations stacked over sampling steps: `activations[name]` is [steps, N, ...]; `t`/`step` per row."""

    activations: dict[str, torch.Tensor]
    t: torch.Tensor
    step: list[int | None]


def run_with_cache(
    model: nn.Module,
    run: Callable[[], T],
    names_filter: NameFilter = None,
    t_range: tuple[float, float] | None = None,
    branch: Branch = "cond",
    fwd_hooks: Sequence[tuple[str | Callable[[str], bool], HookFn]] = (),
) -> tuple[T, SampledActivations]:
    """Call `run()` (a sampler pass over `model`'s network) and cache matching activations at every step in range."""
    _check_restriction(t_range, branch)
    names = list(_select(hook_points(model), names_filter))
    if not names:
        raise ValueError(f"names_filter {names_filter!r} matches no hook point")
    cache: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    times: dict[str, list[tuple[float, int | None]]] = {name: [] for name in names}

    def store(name: str) -> HookFn:
        def fn(x: torch.Tensor, hook: HookPoint) -> None:
            ctx = _sampling_context(hook)
            cache[name].append(x.detach().clone())
            times[name].append((ctx.t, ctx.step))

        return restrict_hook(fn, t_range, branch)

    with run_with_hooks(model, [*fwd_hooks, *((name, store(name)) for name in names)]):
        result = run()
    reference = times[names[0]]
    if not reference:
        raise ValueError(f"nothing cached: run() made no sampler network pass with t in {t_range or (0.0, 1.0)}")
    for name in names:
        if times[name] != reference:
            raise ValueError(f"hook point {name!r} was called {len(times[name])} times, {names[0]!r} {len(reference)}")
    return result, SampledActivations(
        activations={name: torch.stack(cache[name]) for name in names},
        t=torch.tensor([t for t, _ in reference]),
        step=[step for _, step in reference],
    )

