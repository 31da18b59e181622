"""Representation geometry over a label grid: PCA, effective dimension, persistent homology, torus chord tests.

A point cloud is `[M, D]` (rows = labels, columns = features: activations, or an ideal reference). The ideal
references — the 3D torus ((R + r cos φ) cos θ, (R + r cos φ) sin θ, r sin φ) and the 4D Clifford torus
(cos θ, sin θ, cos φ, sin φ) — are built from the same label grid (θ, φ = 2π μx/period, 2π μy/period) and
go through the same functions as the activations.

Effective dimension = participation ratio (Σλ)² / Σλ² of the PCA eigenvalues. For the Clifford torus on a
uniform grid it is exactly 4. For the standard 3D torus it is (2a + b)² / (2a² + b²) with a = (R² + r²/2)/2,
b = r²/2 (≈ 2.41 for R = 2, r = 1); it equals 3 only when R = r/√2 — the "3" of a 3D torus is its rank.

Persistent homology: Vietoris–Rips (ripser) on the cloud reduced to its top PCA components and optionally
subsampled; β_k counts the bars of dimension k whose persistence (death − birth, ∞ for the essential H0 bar)
exceeds `threshold` × the cloud's scale, where scale = its diameter (largest pairwise distance) after PCA
reduction. The default 0.25 must sit above the sampling gaps (H0 bars die at the spacing of neighbouring points,
≈ 0.16 × diameter for a 14 × 14 grid on the Clifford torus) and below the features' bars (≈ 0.4–0.5 there);
a thin ring torus needs a denser sampling or a lower threshold.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch import Tensor

Cloud = Tensor | np.ndarray


def _array(points: Cloud) -> np.ndarray:
    a = points.detach().cpu().double().numpy() if isinstance(points, Tensor) else np.asarray(points, dtype=float)
    if a.ndim != 2 or len(a) < 2:
        raise ValueError(f"a point cloud must be [M ≥ 2, D], got shape {a.shape}")
    return a


def pca(points: Cloud) -> tuple[np.ndarray, np.ndarray]:
    """(eigenvalues descending `[K]`, principal axes `[K, D]`) of the covariance of the centred cloud."""
    a = _array(points)
    a = a - a.mean(axis=0)
    _, s, vt = np.linalg.svd(a, full_matrices=False)
    return s**2 / len(a), vt


def eigenspectrum(points: Cloud, k: int = 15) -> np.ndarray:
    """The top-k PCA eigenvalues (zero-padded to k)."""
    lam = pca(points)[0][:k]
    return np.pad(lam, (0, k - len(lam)))


def explained_variance(points: Cloud, k: int = 4) -> float:
    """Fraction of the total variance in the top k principal components."""
    lam = pca(points)[0]
    return float(lam[:k].sum() / lam.sum())


def participation_ratio(eigenvalues: np.ndarray, mean_square_norm: float = 0.0) -> float:
    """(Σλ)² / Σλ² of a spectrum; 0 for a cloud with no spread, where the ratio would be 0/0.

    No spread: Σλ = 0, or Σλ ≤ 1e-12 × `mean_square_norm` (the points' mean ‖x‖², when given) — rounding. Such a
    cloud is a point, dimension 0: e.g. a network's activations over the label grid at initialisation, when
    zero-initialised residual branches give every label the same activation.
    """
    lam = np.asarray(eigenvalues, dtype=float)
    if lam.sum() <= 1e-12 * mean_square_norm:
        return 0.0
    return float(lam.sum() ** 2 / (lam**2).sum())


def effective_dimension(points: Cloud) -> float:
    """Effective dimension of a cloud: the participation ratio of its PCA eigenvalues (0 if the points coincide)."""
    a = _array(points)
    return participation_ratio(pca(a)[0], float(np.mean(np.sum(a**2, axis=1))))


def whole_eigenspaces(eigenvalues: np.ndarray, k: int, n: int, max_components: int | None = None) -> int:
    """`k`, raised until the k-th principal component is separated from the next by North's rule of thumb.

    North, Bell, Cahalan & Moeng (1982): a sample eigenvalue λ of `n` points has a sampling error of about λ√(2/n);
    when the gap to its neighbour, λ_k − λ_{k+1}, is smaller than λ_k√(2/n) the two eigenvectors are not
    separable — any rotation within their span fits the sample about as well, and which one PCA returns is an
    accident. Keeping the top k PCs then keeps an arbitrary projection of that eigenspace (for the exact torus of a
    sinusoidal label encoding, whose 16 eigenvalues are equal, a fixed 4 keeps 4 arbitrary axes of 16). The cut is
    moved down the spectrum to the first separated gap, to at most `max_components` (and the number of
    eigenvalues; never below `k`); eigenvalues at rounding level (≤ 1e-12 × the largest) count as one block of zeros.
    """
    lam = np.asarray(eigenvalues, dtype=float)
    if k < 1 or n < 2:
        raise ValueError(f"need k ≥ 1 and n ≥ 2 points, got k={k}, n={n}")
    k = min(k, len(lam))
    top = max(k, min(len(lam), max_components if max_components is not None else len(lam)))
    floor = 1e-12 * (lam[0] if len(lam) else 0.0)
    spread = np.sqrt(2.0 / n)
    while k < top and _unseparated(lam, k, spread, floor):
        k += 1
    return k


def _unseparated(lam: np.ndarray, k: int, spread: float, floor: float) -> bool:
    return bool(k < len(lam) and lam[k - 1] > floor and lam[k - 1] - lam[k] < lam[k - 1] * spread)


def cut_splits_eigenspace(eigenvalues: np.ndarray, k: int, n: int) -> bool:
    """Whether keeping the top `k` of these sample eigenvalues (of `n` points) cuts inside an eigenspace PCA cannot
    order: the k-th is not separated from the next by North's rule (`whole_eigenspaces`). Then the kept PCs are an
    arbitrary projection of that eigenspace — for a fixed `k`, or where `whole_eigenspaces` stopped at its cap."""
    lam = np.asarray(eigenvalues, dtype=float)
    if k < 1 or n < 2:
        raise ValueError(f"need k ≥ 1 and n ≥ 2 points, got k={k}, n={n}")
    return _unseparated(lam, min(k, len(lam)), np.sqrt(2.0 / n), 1e-12 * (lam[0] if len(lam) else 0.0))


def persistent_homology(
    points: Cloud,
    max_dim: int = 2,
    n_components: int | None = 10,
    n_points: int | None = None,
    threshold: float = 0.25,
    seed: int = 0,
    n_perm: int | None = None,
    rule: Literal["threshold", "gap", "hybrid"] = "threshold",
    components_rule: Literal["fixed", "whole_eigenspaces"] = "fixed",
    max_components: int | None = 32,
) -> dict:
    """Betti numbers and Vietoris–Rips diagrams of a cloud reduced to `n_components` PCs, `n_points` kept.

    `n_perm` uses ripser's greedy landmarks (keep H2 on ≤ 300 points). A bar counts when it persists longer than
    `threshold` × diameter (`rule="threshold"`), and with `rule="gap"` it must also lie above the largest gap in the
    sorted bar lengths (`betti_by_gap`); `rule="hybrid"` counts H0 by the gap rule and higher dimensions by the
    threshold alone (every point's H0 bar measures the sampling, so only the widest gap marks a component, while
    the loops of a torus may differ in size, so a gap between them is not a gap to noise).
    `components_rule="whole_eigenspaces"` raises `n_components` past eigenvalues PCA cannot order
    (`whole_eigenspaces`, to at most `max_components`); "fixed" keeps exactly `n_components`.
    Returns {"betti": (β0, …), "diagrams": [array[n_k, 2]], "scale": diameter,
    "threshold": absolute persistence cut, "components": PCs kept (None: no reduction), "cut_splits_eigenspace":
    whether that cut lies inside an eigenspace PCA cannot order (`cut_splits_eigenspace`; None: no reduction)}.
    """
    if rule not in ("threshold", "gap", "hybrid"):
        raise ValueError(f"rule must be 'threshold', 'gap' or 'hybrid', got {rule!r}")
    if components_rule not in ("fixed", "whole_eigenspaces"):
        raise ValueError(f"components_rule must be 'fixed' or 'whole_eigenspaces', got {components_rule!r}")
    a = _array(points)
    if threshold <= 0:
        raise ValueError(f"threshold must be > 0, got {threshold}")
    if n_points is not None and n_points < len(a):
        a = a[np.sort(np.random.default_rng(seed).choice(len(a), n_points, replace=False))]
    mean_square_norm = float(np.mean(np.sum(a**2, axis=1)))
    kept, split = None, None
    if n_components is not None:
        lam, axes = pca(a)
        kept = min(n_components, len(lam))
        if components_rule == "whole_eigenspaces":
            kept = whole_eigenspaces(lam, n_components, len(a), max_components)
        split = cut_splits_eigenspace(lam, kept, len(a))
        a = (a - a.mean(axis=0)) @ axes[:kept].T
    diff = a[:, None, :] - a[None, :, :]
    scale = float(np.sqrt((diff**2).sum(-1)).max())
    if scale**2 <= 1e-12 * mean_square_norm:  # every point in one place (or all at 0): one component, no holes
        # the diameter is rounding noise (a centred or projected copy of one point differs from it by ~1e-16): 0
        dgms = [np.array([[0.0, np.inf]])] + [np.zeros((0, 2)) for _ in range(max_dim)]
        return {"betti": (1,) + (0,) * max_dim, "diagrams": dgms, "scale": 0.0, "threshold": 0.0, "components": kept,
                "cut_splits_eigenspace": split}
    kwargs = {"n_perm": n_perm} if n_perm is not None and n_perm < len(a) else {}
    from ripser import ripser  # lazy: docs/benchmarks.md, "Command start-up"

    dgms = ripser(a, maxdim=max_dim, **kwargs)["dgms"]
    cut = threshold * scale
    if rule == "gap":
        betti = tuple(betti_by_gap(d, cut, scale) for d in dgms)
    elif rule == "hybrid":
        betti = (betti_by_gap(dgms[0], cut, scale),) + tuple(int(((d[:, 1] - d[:, 0]) > cut).sum()) for d in dgms[1:])
    else:
        betti = tuple(int(((d[:, 1] - d[:, 0]) > cut).sum()) for d in dgms)
    return {"betti": betti, "diagrams": dgms, "scale": scale, "threshold": cut, "components": kept,
            "cut_splits_eigenspace": split}


def betti_by_gap(diagram: np.ndarray, cut: float, scale: float) -> int:
    """Bars of one persistence diagram that are real features: longer than `cut` and above the largest gap.

    Bar lengths are sorted longest first (an infinite bar has length `scale`, the diameter); among the bars longer
    than `cut` the count is where the drop to the next bar (or to 0) is largest. On a coarsely sampled cloud every
    point's H0 bar can outlive a fixed cut (the sampling gap is a sizeable fraction of the diameter), while the one
    real component still stands apart from them by the widest margin.
    """
    lengths = np.sort(np.minimum(diagram[:, 1] - diagram[:, 0], scale))[::-1]
    above = int((lengths > cut).sum())
    if above == 0:
        return 0
    following = np.append(lengths[1:], 0.0)
    return int(np.argmax((lengths - following)[:above])) + 1


def label_angles(labels: Tensor, period: float = 32.0) -> tuple[Tensor, Tensor]:
    """(θ, φ) = 2π (μx, μy) / period for labels `[M, 2]`."""
    ang = 2 * torch.pi * labels.double() / period
    return ang[:, 0], ang[:, 1]


def torus_3d(labels: Tensor, period: float = 32.0, R: float = 2.0, r: float = 1.0) -> Tensor:
    """Ideal 3D torus `[M, 3]` over the label grid."""
    th, ph = label_angles(labels, period)
    rho = R + r * torch.cos(ph)
    return torch.stack([rho * torch.cos(th), rho * torch.sin(th), r * torch.sin(ph)], dim=1)


def clifford_torus(labels: Tensor, period: float = 32.0) -> Tensor:
    """Ideal 4D Clifford torus `[M, 4]` over the label grid (x and y on orthogonal planes)."""
    th, ph = label_angles(labels, period)
    return torch.stack([torch.cos(th), torch.sin(th), torch.cos(ph), torch.sin(ph)], dim=1)


def as_grid(points: Cloud, labels: Tensor) -> np.ndarray:
    """Points `[M, D]` arranged as `[nx, ny, D]` by their labels; the labels must form a full grid."""
    a = _array(points)
    xs, ix = np.unique(labels[:, 0].cpu().numpy(), return_inverse=True)
    ys, iy = np.unique(labels[:, 1].cpu().numpy(), return_inverse=True)
    if len(xs) * len(ys) != len(a) or len(set(zip(ix.tolist(), iy.tolist()))) != len(a):
        raise ValueError(f"labels do not form a full grid: {len(xs)} x {len(ys)} values for {len(a)} points")
    grid = np.empty((len(xs), len(ys), a.shape[1]))
    grid[ix.ravel(), iy.ravel()] = a
    return grid


def _chord_ends(nx: int, ny: int, axis: int, periodic: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat indices of every chord's start `[nx, ny, 1]` and end `[nx, ny, S]` for steps s = 1..S along `axis` of an
    `nx × ny` grid, and whether it exists (`[nx, ny, S]`; off the grid when not periodic)."""
    n = (nx, ny)[axis]
    steps = np.arange(1, n // 2 + 1) if periodic else np.arange(1, n)
    i, j = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    moved = (i if axis == 0 else j)[:, :, None] + steps
    inside = moved < n
    moved = moved % n
    end = moved * ny + j[:, :, None] if axis == 0 else i[:, :, None] * ny + moved
    start = (i * ny + j)[:, :, None]
    return start, np.where(inside | periodic, end, start), inside | periodic


def _chord_lengths(gram: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths of chords from the Gram matrix, and whether each is there: a chord counts as absent (as one off the
    grid) when it is no longer than 1e-12 or than the Gram matrix's rounding noise at its two ends."""
    diag = np.diag(gram)
    sq = diag[start] + diag[end] - 2 * gram[start, end]
    noise = 64 * np.finfo(gram.dtype).eps * (diag[start] + diag[end])
    length = np.sqrt(np.maximum(sq, 0.0))
    return length, (sq > noise) & (length > 1e-12)


def _chord_cos(gram: np.ndarray, a1, b1, a2, b2, l1, l2) -> np.ndarray:
    """cos between chords a1→b1 and a2→b2 (flat indices, broadcast): (g_b1 − g_a1)·(g_b2 − g_a2) from Gram entries."""
    dot = gram[b1, b2] - gram[b1, a2] - gram[a1, b2] + gram[a1, a2]
    return dot / (l1 * l2)


def _parallelism(gram: np.ndarray, start, end, length, valid) -> float:
    """Mean cos between chords `[n0, n1, S]` with the same index on axis 0 and the same step, at different axis-1
    indices."""
    a1, b1, l1, v1 = start[:, :, None, :], end[:, :, None, :], length[:, :, None, :], valid[:, :, None, :]
    a2, b2, l2, v2 = start[:, None, :, :], end[:, None, :, :], length[:, None, :, :], valid[:, None, :, :]
    cos = _chord_cos(gram, a1, b1, a2, b2, np.where(v1, l1, 1.0), np.where(v2, l2, 1.0))  # [n0, n1, n1, S]
    pairs = v1 & v2 & ~np.eye(start.shape[1], dtype=bool)[None, :, :, None]
    return float(cos[pairs].mean())


def chord_tests(grid: np.ndarray, periodic: bool = True) -> dict[str, float]:
    """Orthogonality and parallelism tests on a grid cloud `[nx, ny, D]`.

    - orthogonality: mean |cos| between x-displacement and y-displacement chords from the same base point,
      over all step sizes (0 = x and y move the representation in orthogonal directions);
    - parallelism_x: mean cos between the same x-displacement (same start x, same step) at different y;
      parallelism_y likewise for y-displacements at different x; parallelism = their mean (1 = parallel).
    The Clifford torus gives 0 and 1, 1; the 3D torus has |cos| > 0 and y-chords that turn with x.

    The cosines come from the Gram matrix of the centred points (one matrix product): a chord's dot product with
    another is four of its entries, so no chord of D dimensions is ever formed. (Before 2026-12-04 the chords were
    formed and normalised explicitly; the two agree to rounding, `bench/chord_tests.py`.)
    """
    nx, ny, _ = grid.shape
    flat = grid.reshape(nx * ny, -1).astype(np.float64)
    flat = flat - flat.mean(axis=0)  # chords do not see the mean; centring keeps the Gram entries' rounding small
    gram = flat @ flat.T
    sx, ex, okx = _chord_ends(nx, ny, 0, periodic)
    sy, ey, oky = _chord_ends(nx, ny, 1, periodic)
    lx, vx = _chord_lengths(gram, sx, ex)
    ly, vy = _chord_lengths(gram, sy, ey)
    vx, vy = vx & okx, vy & oky
    lx1, ly1 = np.where(vx, lx, 1.0), np.where(vy, ly, 1.0)
    cos = _chord_cos(gram, sx[:, :, :, None], ex[:, :, :, None], sy[:, :, None, :], ey[:, :, None, :],
                     lx1[:, :, :, None], ly1[:, :, None, :])  # [nx, ny, S, T]
    ortho = np.abs(cos)[vx[:, :, :, None] & vy[:, :, None, :]]
    px = _parallelism(gram, sx, ex, lx, vx)
    py = _parallelism(gram, sy.transpose(1, 0, 2), ey.transpose(1, 0, 2), ly.transpose(1, 0, 2),
                      vy.transpose(1, 0, 2))
    return {"orthogonality": float(ortho.mean()), "parallelism_x": px, "parallelism_y": py,
            "parallelism": (px + py) / 2}
