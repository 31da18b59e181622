"""Representations over a label grid: activations at one hook point and diffusion time, and their geometry per checkpoint.

`collect_representations(net, process, labels, hook, t, …)` returns a `PointCloud`
(one activation vector per label, `[M, D]`, with the labels `[M, L]`), read with
`hooks.run_with_cache` from the network's named hook points
(`hooks.hook_points(net)`; e.g. `mid.blocks.1.hook_out`, the block just after the
bottleneck — the paper's "layer 4"). Two ways to drive the network:

- `mode="forward"` (default): one network pass at time t on z_t = α_t x + σ_t ε,
  with x the given `images` (e.g. the ground-truth image of each label) and one
  shared noise draw ε for all labels, so rows differ only through the label (and
  its image). Without `images` the input is the shared noise itself, z = ε (the
  sampler's starting point; the natural input at t = 1).
- `mode="sample"`: ancestral sampling with `steps` steps (`models.sampling`) and
  the activation of the network pass whose time is nearest t (one seeded noise
  draw per label).

Spatial activations are flattened (`pool="flatten"`) or averaged over space
(`pool="mean"`). The prompt of each label is the label itself unless `prompts`
is given. The network is run in eval mode (dropout off) and left as it was.

`effective_dimension_over_training(checkpoints, …)` does this for every
(step, network) and returns a table of effective dimension (participation ratio,
`analysis.geometry`) and explained variance of the top 4 PCs per checkpoint (the
columns `studies.factorization` writes to the geometry table, so
`report.composition_figures.plot_effective_dimension` draws either).

A hook name the network does not have raises `hooks.HookNameError` (one line,
with close valid names) before anything runs.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Iterable, Literal

import pandas as pd
import torch
from torch import Tensor, nn

from conceptlab.analysis.geometry import effective_dimension, explained_variance
from conceptlab.hooks import HookNameError, hook_points, run_with_cache
from conceptlab.models.diffusion import DiffusionProcess
from conceptlab.models.sampling import ancestral_sample, guided_output

Mode = Literal["forward", "sample"]
Pool = Literal["flatten", "mean"]


@dataclass
class PointCloud:
    """One activation vector per label: `points` `[M, D]`, `labels` `[M, L]`, read at `hook` and time `t`."""

    points: Tensor
    labels: Tensor
    hook: str
    t: float


def check_hook(net: nn.Module, hook: str) -> None:
    """Raise `HookNameError` (one line, close valid names) unless `net` has a hook point named `hook`."""
    points = hook_points(net)
    if not isinstance(hook, str) or hook not in points:
        near = difflib.get_close_matches(str(hook), points, n=5, cutoff=0.5) or list(points)[:5]
        raise HookNameError(f"no hook point {hook!r}; {len(points)} exist, e.g. {near}")


def _pool(x: Tensor, pool: Pool) -> Tensor:
    if x.ndim <= 2:
        return x.reshape(x.shape[0], -1)
    return x.flatten(1) if pool == "flatten" else x.flatten(2).mean(dim=2)


def _validate(labels: Tensor, prompts: Tensor, t: float, mode: str, pool: str, steps: int, batch_size: int) -> None:
    if labels.ndim != 2 or len(labels) == 0:
        raise ValueError(f"labels must be [M > 0, L], got shape {tuple(labels.shape)}")
    if prompts.ndim != 2 or len(prompts) != len(labels):
        raise ValueError(f"prompts must be [M, P] with M = {len(labels)}, got shape {tuple(prompts.shape)}")
    if not 0.0 < t <= 1.0:
        raise ValueError(f"diffusion time t must be in (0, 1], got {t}")
    if mode not in ("forward", "sample"):
        raise ValueError(f"unknown mode {mode!r}; expected 'forward' or 'sample'")
    if pool not in ("flatten", "mean"):
        raise ValueError(f"unknown pool {pool!r}; expected 'flatten' or 'mean'")
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be ≥ 1, got {steps}, {batch_size}")


def collect_representations(
    net: nn.Module,
    process: DiffusionProcess,
    labels: Tensor,
    hook: str,
    t: float,
    image_shape: tuple[int, int, int] | None = None,
    images: Tensor | None = None,
    prompts: Tensor | None = None,
    mode: Mode = "forward",
    steps: int = 50,
    pool: Pool = "flatten",
    seed: int = 0,
    batch_size: int = 256,
) -> PointCloud:
    """Activations at `hook` and diffusion time `t` for every label row; see the module docstring for the modes.

    `image_shape` (C, H, W) is needed unless `images` `[M, C, H, W]` in [0, 1] are given.
    """
    check_hook(net, hook)
    prompts = labels if prompts is None else prompts
    _validate(labels, prompts, t, mode, pool, steps, batch_size)
    if images is not None:
        if images.ndim != 4 or len(images) != len(labels):
            raise ValueError(f"images must be [M, C, H, W] with M = {len(labels)}, got {tuple(images.shape)}")
        if mode == "sample":
            raise ValueError("images are used by mode='forward' only; mode='sample' generates its own")
        image_shape = tuple(images.shape[1:])
    if image_shape is None:
        raise ValueError("give image_shape (C, H, W) or images")
    device = next(net.parameters(), torch.zeros(0)).device
    prompts = prompts.float().to(device)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    was_training = net.training
    net.eval()
    chunks: list[Tensor] = []
    try:
        if mode == "forward":
            eps = torch.randn((1, *image_shape), generator=generator).to(device)
            for start in range(0, len(labels), batch_size):
                p = prompts[start : start + batch_size]
                x = None if images is None else images[start : start + batch_size].float().to(device)

                def run(p: Tensor = p, x: Tensor | None = x) -> Tensor:
                    with torch.inference_mode():
                        tt = torch.full((len(p),), float(t), device=device)
                        if x is None:
                            z = eps.expand(len(p), *image_shape)
                        else:
                            x = process.to_model_space(x)
                            z = process.noise(x, tt, eps.expand_as(x))
                        return guided_output(process, net, z, tt, p)

                _, cache = run_with_cache(net, run, hook)
                chunks.append(_pool(cache.activations[hook][0], pool))
        else:
            t_grid = max(1, min(steps, round(t * steps))) / steps  # the sampler's network times are i/steps
            for start in range(0, len(labels), batch_size):
                p = prompts[start : start + batch_size]

                def run(p: Tensor = p) -> Tensor:
                    return ancestral_sample(process, net, p, image_shape, steps, generator)

                _, cache = run_with_cache(net, run, hook, t_range=(t_grid, t_grid))
                chunks.append(_pool(cache.activations[hook][0], pool))
            t = t_grid
    finally:
        net.train(was_training)
    return PointCloud(points=torch.cat(chunks).float().cpu(), labels=labels.detach().cpu(), hook=hook, t=float(t))


def effective_dimension_over_training(
    checkpoints: Iterable[tuple[int, nn.Module]],
    process: DiffusionProcess,
    labels: Tensor,
    hook: str,
    t: float,
    top_k: int = 4,
    **collect_kwargs,
) -> pd.DataFrame:
    """Per (step, network): columns step, effective_dimension, explained_variance_top{top_k} (the share of the
    variance in the top `top_k` PCs; explained_variance_top4 by default, as in the geometry table), points, features.

    `collect_kwargs` go to `collect_representations` (image_shape, images, prompts, mode, steps, pool, seed).
    """
    rows = []
    for step, net in checkpoints:
        cloud = collect_representations(net, process, labels, hook, t, **collect_kwargs)
        rows.append({"step": int(step), "effective_dimension": effective_dimension(cloud.points),
                     f"explained_variance_top{top_k}": explained_variance(cloud.points, top_k),
                     "points": cloud.points.shape[0], "features": cloud.points.shape[1]})
    if not rows:
        raise ValueError("no checkpoints given")
    return pd.DataFrame(rows)


CONTROLS = ("untrained", "random_init", "pixels", "encoding", "encoding_map")  # what a trained representation is compared with


def input_cloud(process: DiffusionProcess, images: Tensor, t: float, seed: int = 0) -> Tensor:
    """The `pixels` control: the network's input at time t, z_t = α_t x + σ_t ε with the shared noise draw of
    `collect_representations(mode="forward")` (the same seed gives the same ε), flattened to `[M, C·H·W]`."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    eps = torch.randn((1, *images.shape[1:]), generator=generator)
    x = process.to_model_space(images.float())
    tt = torch.full((len(images),), float(t))
    with torch.no_grad():
        return process.noise(x, tt, eps.expand_as(x)).flatten(1).float()


def encoding_cloud(net: nn.Module, prompts: Tensor) -> Tensor:
    """The `encoding` control: the label encoding the network's conditioning reads (its prompt normalisation and
    prompt encoder, e.g. sinusoidal features), `[M, E]`."""
    with torch.no_grad():
        return net.normalised_prompt(prompts.float()).float()


def encoding_map_cloud(encoding: Tensor, width: int, seed: int = 0) -> Tensor:
    """The `encoding_map` control: GELU(W e + b) of the encoding through one random, untrained linear layer of
    `width` units (PyTorch's default initialisation, seeded) — what any network reading the encoding starts from."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    bound = 1.0 / float(encoding.shape[1]) ** 0.5
    weight = (torch.rand((width, encoding.shape[1]), generator=generator) * 2 - 1) * bound
    bias = (torch.rand((width,), generator=generator) * 2 - 1) * bound
    return torch.nn.functional.gelu(encoding.float() @ weight.T + bias)