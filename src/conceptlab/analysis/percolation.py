"""Percolation model of manifold formation (Liang et al. 2024): largest-cluster mass ratio of a subsampled bump lattice.

Model. The training images are Gaussian bumps centred on a lattice with spacing
(dx, dy) over an N×N canvas (`data.bumps.lattice`), M = (N/dx)(N/dy) nodes. Two
bumps at displacement (Δx, Δy) overlap by their normalised inner product

    overlap = ∫ g₁ g₂ / √(∫ g₁² ∫ g₂²) = exp(−Δx²/4σx² − Δy²/4σy²),

and are linked when overlap > `threshold` (the paper uses 0.005 and 0.05), i.e.
when the σ-scaled distance √((Δx/σx)² + (Δy/σy)²) < 2 √(ln(1/threshold)).
Every node is kept independently with probability λ (site percolation;
`mode="fixed"` keeps exactly round(λM) nodes, as `data.bumps.subsample` does).
The **largest-cluster mass ratio** is |largest connected cluster| / |kept nodes|
(0 when nothing is kept); `fraction_of_all` divides by M instead. Displacements
wrap around the canvas when `periodic`.

The dataset size is λ·M, so sweeping λ and N gives the mass ratio as a function
of dataset size and N (`percolation_curve`); `critical_dataset_size` reads off
the size where the mean ratio first reaches a target (interpolated in log size).

Computed by Monte Carlo (`trials` independent subsamples, seeded) or, for
lattices of at most 20 nodes, exactly by enumerating every subset (`exact_mass_ratio`).
"""

from __future__ import annotations

import itertools
import math
from typing import Literal, Sequence

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from conceptlab.analysis.data_efficiency import threshold_crossing

Mode = Literal["bernoulli", "fixed"]


def overlap(dx: float | np.ndarray, dy: float | np.ndarray, sigma: tuple[float, float] = (1.0, 1.0)) -> np.ndarray:
    """Normalised overlap exp(−Δx²/4σx² − Δy²/4σy²) of two Gaussian bumps at displacement (Δx, Δy)."""
    return np.exp(-np.square(dx) / (4 * sigma[0] ** 2) - np.square(dy) / (4 * sigma[1] ** 2))


def link_radius(threshold: float) -> float:
    """σ-scaled distance below which two bumps overlap by more than `threshold`: 2√(ln 1/threshold)."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"overlap threshold must be in (0, 1), got {threshold}")
    return 2.0 * math.sqrt(math.log(1.0 / threshold))


def lattice_nodes(size: float, spacing: tuple[float, float]) -> np.ndarray:
    """Lattice centres `[M, 2]` covering [0, size)² with spacings (dx, dy), half a spacing in (as `data.bumps.lattice`)."""
    if size <= 0 or min(spacing) <= 0:
        raise ValueError(f"need size > 0 and spacings > 0, got size={size}, spacing={spacing}")
    xs, ys = (np.arange(d / 2, size, d) for d in spacing)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel()], axis=1)


def _links(nodes: np.ndarray, size: float, sigma: tuple[float, float], threshold: float, periodic: bool) -> np.ndarray:
    """Pairs `[L, 2]` of node indices whose bumps overlap by more than `threshold`."""
    if min(sigma) <= 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    scale = np.array(sigma, dtype=float)
    pts = nodes / scale
    radius = link_radius(threshold)
    if periodic:
        box = size / scale
        tree = cKDTree(np.remainder(pts, box), boxsize=box)
    else:
        tree = cKDTree(pts)
    pairs = tree.query_pairs(radius * (1 - 1e-12), output_type="ndarray")  # strict: overlap > threshold
    return pairs.reshape(-1, 2)


def largest_cluster(n_nodes: int, links: np.ndarray, kept: np.ndarray) -> int:
    """Size of the largest connected cluster among the `kept` nodes (boolean `[n_nodes]`)."""
    idx = np.flatnonzero(kept)
    if len(idx) == 0:
        return 0
    keep_links = links[kept[links[:, 0]] & kept[links[:, 1]]] if len(links) else links
    position = np.full(n_nodes, -1)
    position[idx] = np.arange(len(idx))
    a, b = position[keep_links[:, 0]], position[keep_links[:, 1]]
    graph = coo_matrix((np.ones(len(a)), (a, b)), shape=(len(idx), len(idx)))
    _, labels = connected_components(graph, directed=False)
    return int(np.bincount(labels).max())


def _check_fraction(fraction: float) -> None:
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"keep probability λ must be in [0, 1], got {fraction}")


def mass_ratio_samples(
    size: float,
    spacing: tuple[float, float],
    sigma: tuple[float, float],
    fraction: float,
    threshold: float = 0.005,
    trials: int = 20,
    periodic: bool = False,
    mode: Mode = "bernoulli",
    seed: int = 0,
) -> pd.DataFrame:
    """One row per trial: kept (dataset size), largest (cluster), mass_ratio (of kept), fraction_of_all (of M)."""
    _check_fraction(fraction)
    if trials < 1:
        raise ValueError(f"trials must be ≥ 1, got {trials}")
    if mode not in ("bernoulli", "fixed"):
        raise ValueError(f"unknown subsampling mode {mode!r}; expected 'bernoulli' or 'fixed'")
    nodes = lattice_nodes(size, spacing)
    m = len(nodes)
    links = _links(nodes, size, sigma, threshold, periodic)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(trials):
        if mode == "bernoulli":
            kept = rng.random(m) < fraction
        else:
            kept = np.zeros(m, dtype=bool)
            kept[rng.choice(m, round(fraction * m), replace=False)] = True
        n_kept = int(kept.sum())
        big = largest_cluster(m, links, kept)
        rows.append({"kept": n_kept, "largest": big, "mass_ratio": big / n_kept if n_kept else 0.0,
                     "fraction_of_all": big / m})
    return pd.DataFrame(rows)


def exact_mass_ratio(
    size: float,
    spacing: tuple[float, float],
    sigma: tuple[float, float],
    fraction: float,
    threshold: float = 0.005,
    periodic: bool = False,
) -> float:
    """E[largest-cluster mass ratio] under Bernoulli(λ) keeping, by enumerating all 2^M subsets (M ≤ 20)."""
    _check_fraction(fraction)
    nodes = lattice_nodes(size, spacing)
    m = len(nodes)
    if m > 20:
        raise ValueError(f"exact enumeration is limited to 20 nodes, this lattice has {m}")
    links = _links(nodes, size, sigma, threshold, periodic)
    total = 0.0
    for bits in itertools.product((False, True), repeat=m):
        kept = np.array(bits)
        k = int(kept.sum())
        if k == 0:
            continue
        weight = fraction**k * (1 - fraction) ** (m - k)
        total += weight * largest_cluster(m, links, kept) / k
    return total


def percolation_curve(
    sizes: Sequence[int],
    fractions: Sequence[float],
    spacing: tuple[float, float] = (1.0, 1.0),
    sigma: tuple[float, float] = (1.0, 1.0),
    threshold: float = 0.005,
    trials: int = 20,
    periodic: bool = False,
    mode: Mode = "bernoulli",
    seed: int = 0,
) -> pd.DataFrame:
    """Mean/std mass ratio per (N, λ): columns N, fraction, nodes (M), dataset_size (λM), mass_ratio, mass_ratio_std,
    fraction_of_all, threshold."""
    rows = []
    for i, n in enumerate(sizes):
        for j, lam in enumerate(fractions):
            # an independent stream per (seed, N, λ): seed + 1000 i + j made seed s at λ index j + 1 replay seed s + 1
            stream = int(np.random.SeedSequence([seed, i, j]).generate_state(1)[0])
            s = mass_ratio_samples(n, spacing, sigma, lam, threshold, trials, periodic, mode, stream)
            m = len(lattice_nodes(n, spacing))
            rows.append({"N": n, "fraction": lam, "nodes": m, "dataset_size": lam * m,
                         "mass_ratio": s["mass_ratio"].mean(), "mass_ratio_std": s["mass_ratio"].std(ddof=0),
                         "fraction_of_all": s["fraction_of_all"].mean(), "threshold": threshold})
    return pd.DataFrame(rows)


def critical_dataset_size(curve: pd.DataFrame, target: float = 0.5, column: str = "mass_ratio") -> pd.DataFrame:
    """Per N: the dataset size beyond which the mean `column` (mass_ratio or fraction_of_all) stays ≥ `target`,
    interpolated in log size (NaN if it ends below; the smallest size, flagged `censored`, if it never dips below).

    "Stays", not "first reaches": a tiny subsample is trivially one cluster (one kept node is its own largest
    cluster, ratio 1), so the mass ratio starts high, dips, and rises again through percolation; the crossing that
    matters is the last one from below.
    """
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target mass ratio must be in (0, 1], got {target}")
    if column not in ("mass_ratio", "fraction_of_all"):
        raise ValueError(f"column must be mass_ratio or fraction_of_all, got {column!r}")
    out = []
    for n, g in curve.groupby("N", sort=True):
        g = g[g["dataset_size"] > 0].sort_values("dataset_size")
        size, ratio = g["dataset_size"].to_numpy(float), g[column].to_numpy(float)
        below = np.flatnonzero(ratio < target)
        start = int(below[-1]) if len(below) else 0
        out.append({"N": n, "critical_dataset_size": threshold_crossing(size[start:], ratio[start:], target),
                    "censored": not len(below)})
    return pd.DataFrame(out)
