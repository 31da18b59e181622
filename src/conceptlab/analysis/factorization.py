"""How factorized a representation of a 2D label grid is: its additive (two-way) variance share and the principal
angles between the subspaces its x and y labels move it in.

A representation R[i, j] ∈ ℝ^D of the labels (x_i, y_j) of a full grid (`analysis.geometry.as_grid`) decomposes
exactly, as a two-way ANOVA without replication, into

    R[i, j] = μ + f(i) + g(j) + h(i, j),   f(i) = mean_j R[i, j] − μ,   g(j) = mean_i R[i, j] − μ,

with f, g and h mutually orthogonal over the grid (Σ_ij f(i)·g(j) = 0, …), so the total variance V = Σ_ij ‖R − μ‖²
splits into the x part Ny Σ_i ‖f(i)‖², the y part Nx Σ_j ‖g(j)‖² and the interaction Σ_ij ‖h‖².

- **additive share** = (x part + y part) / V ∈ [0, 1]: 1 when R is f(x) + g(y) (a factorized code: a Clifford torus,
  a concatenation of an x code and a y code), near 0 for a pure interaction (e.g. narrow bumps in pixel space, an
  outer product). `chance_share` is its expectation for i.i.d. random vectors per label, (Nx + Ny − 2)/(Nx Ny − 1):
  a representation with no additive structure at all scores about that.
- **principal angles** between the x subspace (the span of the f(i)) and the y subspace (the span of the g(j)), each
  taken at the dimension k_x (k_y) of the fewest principal components holding ≥ `variance` (90%) of its variance:
  the cosines are the singular values of U_xᵀ U_y (orthonormal bases), k = min(k_x, k_y) of them, largest first;
  `overlap` = their mean square (0: orthogonal subspaces, 1: one subspace) and `max_cosine` the largest.

A 3D-embedded torus ((R + r cos b) cos a, (R + r cos b) sin a, r sin b) is partly interacting (share < 1); the
Clifford torus is additive with orthogonal subspaces (share 1, overlap 0). A cloud with no spread (every label at one
point, up to rounding) has no decomposition: its shares, overlap and largest cosine are NaN, so a claim measured
against it fails as unmeasured instead of passing against a 0 (until 2026-12-03 they were 0; no recorded run had
such a cloud). Pure functions, numpy in and out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Factorization:
    additive_share: float
    x_share: float
    y_share: float
    interaction_share: float
    chance_share: float
    k_x: int
    k_y: int
    cosines: tuple[float, ...]
    overlap: float
    max_cosine: float

    def as_dict(self) -> dict:
        return {"additive_share": self.additive_share, "x_share": self.x_share, "y_share": self.y_share,
                "interaction_share": self.interaction_share, "chance_share": self.chance_share, "k_x": self.k_x,
                "k_y": self.k_y, "cosines": list(self.cosines), "overlap": self.overlap,
                "max_cosine": self.max_cosine}


def _basis(vectors: np.ndarray, variance: float) -> np.ndarray:
    """Orthonormal basis [D, k] of the fewest principal directions of `vectors` [n, D] (already centred) holding
    ≥ `variance` of their summed square norm."""
    u, s, vt = np.linalg.svd(vectors, full_matrices=False)
    power = s**2
    if power.sum() <= 0:
        return np.zeros((vectors.shape[1], 0))
    k = int(np.searchsorted(np.cumsum(power) / power.sum(), variance - 1e-12) + 1)
    return vt[: min(k, len(s))].T


def factorization(grid: np.ndarray, variance: float = 0.9) -> Factorization:
    """The additive decomposition and x/y subspace angles of a grid representation [Nx, Ny, D] (see the module)."""
    grid = np.asarray(grid, dtype=float)
    if grid.ndim != 3 or grid.shape[0] < 2 or grid.shape[1] < 2:
        raise ValueError(f"need a grid representation [Nx ≥ 2, Ny ≥ 2, D], got shape {grid.shape}")
    if not 0 < variance <= 1:
        raise ValueError(f"variance must be in (0, 1], got {variance}")
    nx, ny, _ = grid.shape
    centred = grid - grid.mean(axis=(0, 1), keepdims=True)
    f = centred.mean(axis=1)  # [Nx, D]
    g = centred.mean(axis=0)  # [Ny, D]
    h = centred - f[:, None, :] - g[None, :, :]
    total = float((centred**2).sum())
    chance = (nx + ny - 2) / (nx * ny - 1)
    if total <= 1e-12 * float((grid**2).sum()) or total <= 0:  # every label at one point, up to rounding
        nan = float("nan")
        return Factorization(nan, nan, nan, nan, chance, 0, 0, (), nan, nan)
    x_part, y_part = ny * float((f**2).sum()) / total, nx * float((g**2).sum()) / total
    ux, uy = _basis(f, variance), _basis(g, variance)
    cosines = np.linalg.svd(ux.T @ uy, compute_uv=False) if ux.size and uy.size else np.zeros(0)
    cosines = np.clip(np.sort(cosines)[::-1], 0.0, 1.0)
    return Factorization(
        additive_share=x_part + y_part, x_share=x_part, y_share=y_part,
        interaction_share=float((h**2).sum()) / total, chance_share=chance, k_x=ux.shape[1], k_y=uy.shape[1],
        cosines=tuple(float(c) for c in cosines), overlap=float((cosines**2).mean()) if cosines.size else 0.0,
        max_cosine=float(cosines.max()) if cosines.size else 0.0,
    )
