"""Linear probes: how linearly decodable each attribute is from the network's activations at generation time τ.

At every τ of a grid, a multinomial logistic regression (torch, full-batch L-BFGS, L2 penalty, features standardised
on the training split) is fitted on activations [N, ...] of one hook point to an attribute's class labels, and scored
on a held-out split of the N rows (the same split at every τ). The result per attribute is a curve of held-out
accuracy over τ, with the chance level (1/classes) and the majority-class frequency of the held-out split beside it.

Activations come from `noisy_activations` (the network's activations at a hook point on forward-noised data
z_τ = noise(x_0, t = 1 − τ) under a given prompt — use the null prompt, or the label leaks through the conditioning)
or from any [T, N, ...] stack, e.g. `hooks.run_with_cache` over a sampler, with labels of the generated images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from conceptlab.hooks import cache_activations
from conceptlab.models.forking import check_taus


@dataclass
class ProbeScore:
    """One fitted probe: accuracies on the training and held-out rows."""

    train_accuracy: float
    test_accuracy: float
    majority: float  # frequency of the most common class among the held-out rows
    test_correct: Tensor | None = None  # [n_test] bool: each held-out row classified correctly


@dataclass
class LinearProbeCurve:
    """Held-out linear-probe accuracy of one attribute on a τ grid (0 = noise, 1 = data)."""

    tau: Tensor  # [T]
    accuracy: Tensor  # [T] held-out accuracy
    train_accuracy: Tensor  # [T]
    chance: float  # 1 / num_classes
    majority: float  # most common held-out class frequency
    num_classes: int
    n_train: int
    n_test: int
    sigma: Tensor | None = None  # [T] VE σ at each τ, where known
    stderr: Tensor | None = None  # [T] standard error of `accuracy` (`accuracy_stderr`: clustered by group)
    test_correct: Tensor | None = None  # [T, n_test] bool: each held-out row classified correctly at each τ
    test_groups: Tensor | None = None  # [n_test] each held-out row's group (None: every row its own)


def pooled_features(activation: Tensor, pool: int | None = None) -> Tensor:
    """Activations [N, ...] as features [N, D]: spatial maps [N, C, H, W] average-pooled to pool×pool (None: as is)."""
    if activation.dim() == 4 and pool is not None:
        if pool < 1:
            raise ValueError(f"pool must be ≥ 1 or None, got {pool}")
        activation = F.adaptive_avg_pool2d(activation, pool)
    return activation.reshape(activation.shape[0], -1).float()


def train_test_split(n: int, test_fraction: float, seed: int, groups: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Disjoint random (train, test) row indices of n rows. With `groups` [n] (e.g. each row's combination of
    attribute values), whole groups go to one side: a test row's group is never seen in training, so a probe
    cannot score by recognising a training row again (in a world of 100 combinations repeated, any labelling of the
    100 templates is linearly separable in 256 dimensions)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    if groups is not None:
        if groups.shape != (n,):
            raise ValueError(f"groups must be [{n}], got {tuple(groups.shape)}")
        ids = torch.unique(groups)
        order = ids[torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))]
        n_test = round(len(ids) * test_fraction)
        if n_test < 1 or n_test >= len(ids):
            raise ValueError(f"cannot split {len(ids)} groups with test_fraction {test_fraction}")
        is_test = torch.isin(groups, order[:n_test])
        return torch.nonzero(~is_test).flatten(), torch.nonzero(is_test).flatten()
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_test = round(n * test_fraction)
    if n_test < 1 or n_test >= n:
        raise ValueError(f"cannot split {n} rows with test_fraction {test_fraction}")
    return order[n_test:], order[:n_test]


def fit_linear_probe(
    features: Tensor,
    labels: Tensor,
    num_classes: int,
    train: Tensor,
    test: Tensor,
    l2: float = 1e-3,
    max_iter: int = 200,
) -> ProbeScore:
    """Multinomial logistic regression on features[train] → labels[train]; accuracy on train and test rows.

    Loss: mean cross-entropy + l2·‖W‖² (bias unpenalised), L-BFGS from zero weights (deterministic).
    """
    if num_classes < 2:
        raise ValueError(f"num_classes must be ≥ 2, got {num_classes}")
    if features.dim() != 2 or labels.shape != (features.shape[0],):
        raise ValueError(f"need features [N, D] and labels [N], got {tuple(features.shape)}, {tuple(labels.shape)}")
    if bool(((labels < 0) | (labels >= num_classes)).any()):
        raise ValueError(f"labels must lie in [0, {num_classes}), got {labels.min().item()}..{labels.max().item()}")
    x = features.double()
    mean, std = x[train].mean(0), x[train].std(0).clamp_min(1e-8)
    x = (x - mean) / std
    y = labels.long()
    weight = torch.zeros(x.shape[1], num_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], lr=1.0, max_iter=max_iter, history_size=20,
                            tolerance_grad=1e-9, tolerance_change=1e-12, line_search_fn="strong_wolfe")
    x_train, y_train = x[train], y[train]

    def closure() -> Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(x_train @ weight + bias, y_train) + l2 * weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    with torch.no_grad():
        pred = (x @ weight + bias).argmax(1)
    majority = torch.bincount(y[test], minlength=num_classes).max().item() / len(test)
    correct = pred[test] == y[test]
    return ProbeScore(
        train_accuracy=(pred[train] == y[train]).double().mean().item(),
        test_accuracy=correct.double().mean().item(),
        majority=majority,
        test_correct=correct,
    )


def accuracy_stderr(correct: Tensor, groups: Tensor | None = None) -> float:
    """Standard error of a held-out accuracy from its rows' correctness `[N]`, clustered by `groups` `[N]`.

    Rows of one group (e.g. noised copies of one held-out combination) are not independent trials, so the error is
    the cluster-robust one of a mean over G clusters, √(G/(G − 1) · Σ_g (c_g − n_g·p)²) / N with c_g a cluster's
    correct rows and n_g its size — for G = N singleton clusters ≈ the binomial √(p(1 − p)/N). It is floored by
    the binomial error at the plus-two estimate (k + 1)/(N + 2), so an accuracy of 0 or 1 still carries some noise.
    The probe's own fit (which rows trained it) is not counted.
    """
    c = correct.double().flatten()
    n = c.numel()
    if n < 2:
        raise ValueError(f"need at least 2 held-out rows, got {n}")
    p = float(c.mean())
    if groups is None:
        ids = torch.arange(n)
    else:
        if groups.shape != c.shape:
            raise ValueError(f"groups must be [{n}], got {tuple(groups.shape)}")
        ids = torch.unique(groups, return_inverse=True)[1]
    g = int(ids.max()) + 1
    hits = torch.zeros(g, dtype=torch.float64).index_add_(0, ids, c)
    sizes = torch.zeros(g, dtype=torch.float64).index_add_(0, ids, torch.ones_like(c))
    clustered = math.sqrt(g / (g - 1) * float(((hits - sizes * p) ** 2).sum())) / n if g > 1 else math.inf
    plus_two = (p * n + 1) / (n + 2)
    return max(clustered, math.sqrt(plus_two * (1 - plus_two) / n))


def cluster_totals(correct: Tensor, groups: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Held-out correctness `[T, N]` (one row per τ) as per-cluster units: correct rows `[T, G]` and cluster sizes
    `[G]` (clusters in the order of their group ids; `groups` None: every row its own), so the accuracy at each τ is
    Σ totals / Σ sizes and `analysis.commitment.paired_stderr` gives the clustered error of a difference."""
    c = correct.double()
    if c.dim() != 2:
        raise ValueError(f"correct must be [T, N], got {tuple(c.shape)}")
    n = c.shape[1]
    if groups is None:
        return c, torch.ones(n, dtype=torch.float64)
    if groups.shape != (n,):
        raise ValueError(f"groups must be [{n}], got {tuple(groups.shape)}")
    ids = torch.unique(groups, return_inverse=True)[1]
    g = int(ids.max()) + 1
    totals = torch.zeros(c.shape[0], g, dtype=torch.float64).index_add_(1, ids, c)
    return totals, torch.zeros(g, dtype=torch.float64).index_add_(0, ids, torch.ones(n, dtype=torch.float64))


def linear_probe_curves(
    activations: Tensor,
    taus: Sequence[float],
    labels: Mapping[str, Tensor],
    num_classes: Mapping[str, int],
    test_fraction: float = 0.5,
    pool: int | None = None,
    l2: float = 1e-3,
    seed: int = 0,
    sigma: Tensor | None = None,
    groups: Tensor | None = None,
) -> dict[str, LinearProbeCurve]:
    """Probe curves per attribute from activations [T, N, ...] at τ = taus[T] and labels {attribute: [N]}; with
    `groups` [N] the held-out rows are whole groups never seen in training (`train_test_split`)."""
    tau_list = check_taus(taus)
    if activations.shape[0] != len(tau_list):
        raise ValueError(f"activations have {activations.shape[0]} time rows, taus {len(tau_list)}")
    missing = set(labels) ^ set(num_classes)
    if missing:
        raise ValueError(f"labels and num_classes must name the same attributes, differ in {sorted(missing)}")
    n = activations.shape[1]
    train, test = train_test_split(n, test_fraction, seed, groups)
    features = [pooled_features(activations[i], pool) for i in range(len(tau_list))]
    curves = {}
    for name, y in labels.items():
        if y.shape != (n,):
            raise ValueError(f"labels[{name!r}] must be [{n}], got {tuple(y.shape)}")
        scores = [fit_linear_probe(f, y, num_classes[name], train, test, l2) for f in features]
        curves[name] = LinearProbeCurve(
            tau=torch.tensor(tau_list, dtype=torch.float64),
            accuracy=torch.tensor([s.test_accuracy for s in scores], dtype=torch.float64),
            train_accuracy=torch.tensor([s.train_accuracy for s in scores], dtype=torch.float64),
            chance=1.0 / num_classes[name],
            majority=scores[0].majority,
            num_classes=num_classes[name],
            n_train=len(train),
            n_test=len(test),
            sigma=sigma,
            stderr=torch.tensor([accuracy_stderr(s.test_correct, None if groups is None else groups[test])
                                 for s in scores], dtype=torch.float64),
            test_correct=torch.stack([s.test_correct for s in scores]),
            test_groups=None if groups is None else groups[test],
        )
    return curves


@torch.no_grad()
def noisy_activations(
    process,
    net: nn.Module,
    hook: str,
    x0: Tensor,
    taus: Sequence[float],
    prompt: Tensor,
    generator: torch.Generator | None = None,
    batch_size: int = 256,
    pool: int | None = None,
) -> Tensor:
    """Activations [T, N, ...] of `net` at hook point `hook` on z = process.noise(x0, 1 − τ, ε) (model-space x0)
    under `prompt` [N, P], one fresh ε per row and τ; spatial maps pooled to pool×pool when `pool` is given."""
    if prompt.shape[0] != x0.shape[0]:
        raise ValueError(f"prompt has {prompt.shape[0]} rows, x0 {x0.shape[0]}")
    rows: list[list[Tensor]] = []
    with cache_activations(net, hook) as cache:
        for k, i, z, t in _noised(process, x0, taus, generator, batch_size):
            if i == 0:
                rows.append([])
            process.network_output(net, z, t, prompt[i : i + batch_size])
            rows[k].append(pooled_features(cache[hook].pop(), pool) if pool is not None else cache[hook].pop())
    return torch.stack([torch.cat(parts) for parts in rows])


def noisy_inputs(process, x0: Tensor, taus: Sequence[float], generator: torch.Generator | None = None,
                 batch_size: int = 256) -> Tensor:
    """The network's inputs [T, N, C·H·W] that `noisy_activations` feeds it, flattened: z = process.noise(x0, 1 − τ,
    ε) with the same noise draws (the same generator state gives the same z) — the `pixels` control of a probe."""
    rows: list[list[Tensor]] = []
    for k, i, z, _ in _noised(process, x0, taus, generator, batch_size):
        if i == 0:
            rows.append([])
        rows[k].append(z.flatten(1))
    return torch.stack([torch.cat(parts) for parts in rows])


def _noised(process, x0: Tensor, taus: Sequence[float], generator, batch_size: int):
    """(τ index, first row, z, t) per batch and τ, ε drawn fresh per batch in this order."""
    for k, tau in enumerate(check_taus(taus)):
        for i in range(0, x0.shape[0], batch_size):
            x = x0[i : i + batch_size]
            t = torch.full((x.shape[0],), 1.0 - tau, device=x.device)
            eps = torch.randn(x.shape, generator=generator, device=x.device)
            yield k, i, process.noise(x, t, eps), t
