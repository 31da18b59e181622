"""Representation geometry on analytic clouds: effective dimension, persistent homology, torus chord tests."""

import math

import numpy as np
import pytest
import torch

from conceptlab.analysis.geometry import (
    as_grid,
    betti_by_gap,
    chord_tests,
    clifford_torus,
    cut_splits_eigenspace,
    effective_dimension,
    eigenspectrum,
    explained_variance,
    label_angles,
    participation_ratio,
    persistent_homology,
    torus_3d,
    whole_eigenspaces,
)
from conceptlab.data.bumps import lattice

GRID = lattice((2.0, 2.0))  # 16 × 16 label grid on the 32-periodic canvas


def rotate_into(points: torch.Tensor, dim: int, seed: int = 0) -> np.ndarray:
    """The cloud placed in `dim` dimensions by a random orthogonal map (geometry must not change)."""
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    return points.numpy() @ q[: points.shape[1]]


def test_effective_dimension_of_the_references():
    assert effective_dimension(clifford_torus(GRID)) == pytest.approx(4.0, abs=1e-10)
    assert effective_dimension(rotate_into(clifford_torus(GRID), 32)) == pytest.approx(4.0, abs=1e-10)
    # standard (R + r cos φ) embedding: eigenvalues a, a, b with a = (R² + r²/2)/2, b = r²/2 → PR < 3 ...
    a, b = (4 + 0.5) / 2, 0.5
    torus = torus_3d(GRID, R=2.0, r=1.0)
    assert effective_dimension(torus) == pytest.approx((2 * a + b) ** 2 / (2 * a**2 + b**2), abs=1e-10)
    assert np.allclose(eigenspectrum(torus, 5), [a, a, b, 0, 0], atol=1e-10)  # ... it has rank 3 ...
    spindle = torus_3d(GRID, R=1 / math.sqrt(2), r=1.0)  # ... and PR = 3 only when R = r/√2
    assert effective_dimension(spindle) == pytest.approx(3.0, abs=1e-10)
    assert explained_variance(clifford_torus(GRID), k=4) == pytest.approx(1.0)
    assert explained_variance(clifford_torus(GRID), k=2) == pytest.approx(0.5)


def test_persistent_homology_of_a_sampled_torus():
    g = torch.Generator().manual_seed(0)
    labels = lattice((32 / 14, 32 / 14))
    jittered = labels + 0.3 * torch.randn(labels.shape, generator=g, dtype=torch.float64)  # 196 points
    assert persistent_homology(rotate_into(clifford_torus(jittered), 16))["betti"] == (1, 2, 1)
    ring = torus_3d(lattice((32 / 20, 32 / 10)), R=1.5, r=1.0)  # 200 points, denser around the long circle
    assert persistent_homology(ring, threshold=0.15)["betti"] == (1, 2, 1)


def test_persistent_homology_of_a_circle_with_subsampling():
    g = torch.Generator().manual_seed(1)
    angle = torch.rand(400, generator=g, dtype=torch.float64) * 2 * math.pi
    circle = rotate_into(torch.stack([angle.cos(), angle.sin()], dim=1), 20)
    result = persistent_homology(circle, n_components=4, n_points=120, seed=2)
    assert result["betti"] == (1, 1, 0) and result["scale"] == pytest.approx(2.0, abs=0.05)


def test_chord_tests_separate_clifford_from_3d_torus():
    clifford = chord_tests(as_grid(rotate_into(clifford_torus(GRID), 12), GRID))
    ring = chord_tests(as_grid(torus_3d(GRID), GRID))
    assert clifford["orthogonality"] == pytest.approx(0.0, abs=1e-9)
    assert clifford["parallelism_x"] == pytest.approx(1.0) and clifford["parallelism_y"] == pytest.approx(1.0)
    assert ring["orthogonality"] > 0.3  # finite x- and y-chords of the ring torus are not orthogonal
    assert ring["parallelism_x"] == pytest.approx(1.0)  # x-chords only scale with R + r cos φ ...
    assert ring["parallelism_y"] < 0.6  # ... but y-chords turn with θ
    assert ring["parallelism"] < clifford["parallelism"] - 0.2


def _chord_tests_by_definition(grid: np.ndarray, periodic: bool) -> dict[str, float]:
    """The docstring's definition, written as loops over explicit chords (small grids only)."""
    nx, ny, _ = grid.shape

    def chord(i, j, axis, s):
        i2, j2 = (i + s, j) if axis == 0 else (i, j + s)
        if not periodic and (i2 >= nx or j2 >= ny):
            return None
        d = grid[i2 % nx, j2 % ny] - grid[i, j]
        return d / np.linalg.norm(d)

    steps = {axis: range(1, (n // 2 if periodic else n - 1) + 1) for axis, n in ((0, nx), (1, ny))}
    ortho, par = [], {0: [], 1: []}
    for i in range(nx):
        for j in range(ny):
            for s in steps[0]:
                for t in steps[1]:
                    a, b = chord(i, j, 0, s), chord(i, j, 1, t)
                    if a is not None and b is not None:
                        ortho.append(abs(a @ b))
    for axis in (0, 1):  # chords along `axis` from the same index on it, at different indices on the other axis
        n_own, n_other = (nx, ny) if axis == 0 else (ny, nx)
        at = (lambda own, other: (own, other)) if axis == 0 else (lambda own, other: (other, own))
        for s in steps[axis]:
            for own in range(n_own):
                for j in range(n_other):
                    for k in range(n_other):
                        a, b = chord(*at(own, j), axis, s), chord(*at(own, k), axis, s)
                        if j != k and a is not None and b is not None:
                            par[axis].append(a @ b)
    px, py = float(np.mean(par[0])), float(np.mean(par[1]))
    return {"orthogonality": float(np.mean(ortho)), "parallelism_x": px, "parallelism_y": py,
            "parallelism": (px + py) / 2}


@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_chord_tests_match_their_definition_on_explicit_chords(periodic, offset):
    """The Gram-matrix form agrees with explicit chords, on a non-square grid, also far from the origin."""
    grid = offset + np.random.default_rng(3).normal(size=(5, 4, 7))
    got, expected = chord_tests(grid, periodic=periodic), _chord_tests_by_definition(grid, periodic)
    for key in expected:
        assert got[key] == pytest.approx(expected[key], abs=1e-9), key


def test_a_cloud_of_coinciding_points_has_dimension_zero():
    point = np.tile(np.linspace(-1.0, 2.0, 32), (50, 1))  # 50 labels, one activation: an untrained network
    assert effective_dimension(point) == 0.0 and effective_dimension(np.zeros((50, 32))) == 0.0
    assert effective_dimension(point + 1e-9 * np.eye(50, 32)) == 0.0  # rounding-sized spread is still a point
    line = np.outer(np.arange(50.0), np.ones(32))
    assert effective_dimension(line) == pytest.approx(1.0)
    assert effective_dimension(line + point) == pytest.approx(1.0)  # an offset changes nothing
    assert participation_ratio(np.zeros(8)) == 0.0  # the spectrum alone: only an exactly zero one is a point


def test_bad_input():
    with pytest.raises(ValueError, match="full grid"):
        as_grid(clifford_torus(GRID)[:-1], GRID[:-1])
    with pytest.raises(ValueError, match="threshold"):
        persistent_homology(clifford_torus(GRID), threshold=0.0)
    with pytest.raises(ValueError, match="point cloud"):
        effective_dimension(np.zeros(5))


def test_gap_rule_counts_one_component_on_a_coarse_lattice_where_a_fixed_cut_counts_many():
    """A coarse 16×16 Clifford-torus lattice: every point's H0 bar is a sizeable fraction of the diameter, so a low
    fixed cut counts them all; the gap rule keeps the one component and still finds β1 = 2, β2 = 1."""
    coarse = rotate_into(clifford_torus(GRID), 12)
    result = persistent_homology(coarse, threshold=0.05, rule="gap")
    gap = result["betti"]
    fixed = tuple(int(((d[:, 1] - d[:, 0]) > result["threshold"]).sum()) for d in result["diagrams"])  # same diagrams
    assert fixed[0] > 1 and gap == (1, 2, 1)
    g = torch.Generator().manual_seed(1)
    angle = torch.rand(400, generator=g, dtype=torch.float64) * 2 * math.pi
    circle = rotate_into(torch.stack([angle.cos(), angle.sin()], dim=1), 20)
    assert persistent_homology(circle, n_components=4, n_points=120, seed=2, rule="gap")["betti"] == (1, 1, 0)
    sheet = rotate_into(torch.cat([GRID, torch.zeros(len(GRID), 1, dtype=torch.float64)], dim=1), 8)
    assert persistent_homology(sheet, threshold=0.2, rule="gap")["betti"][1:] == (0, 0)
    with pytest.raises(ValueError, match="rule"):
        persistent_homology(coarse, rule="nope")


def test_hybrid_rule_counts_both_loops_of_a_torus_whose_loops_differ_in_size():
    """A flat torus with radii 1 and 0.5 on the coarse 16×16 lattice: its two H1 bars differ by more than the smaller
    one stands above the lattice's noise bars, so the gap rule counts one loop; a fixed cut counts every point's H0
    bar; the hybrid rule (H0 by gap, H1 and H2 by the cut) gives the torus."""
    theta, phi = label_angles(GRID, 32.0)
    uneven = rotate_into(torch.stack([theta.cos(), theta.sin(), 0.5 * phi.cos(), 0.5 * phi.sin()], dim=1), 12)
    hybrid = persistent_homology(uneven, n_components=4, threshold=0.15, rule="hybrid")
    # the other rules on the same diagrams (one Rips computation instead of three)
    dgms, cut, scale = hybrid["diagrams"], hybrid["threshold"], hybrid["scale"]
    betti = {"hybrid": hybrid["betti"], "gap": tuple(betti_by_gap(d, cut, scale) for d in dgms),
             "threshold": tuple(int(((d[:, 1] - d[:, 0]) > cut).sum()) for d in dgms)}
    assert betti["hybrid"] == (1, 2, 1), betti
    assert betti["gap"][1] == 1 and betti["threshold"][0] > 1, betti


def test_homology_of_coinciding_points_is_one_component():
    point = np.tile(np.linspace(-1.0, 2.0, 32), (50, 1))
    for rule in ("threshold", "gap", "hybrid"):
        result = persistent_homology(point, rule=rule)
        assert result["betti"] == (1, 0, 0) and result["scale"] == 0.0
    assert persistent_homology(point + 1e-9 * np.eye(50, 32), rule="gap")["betti"] == (1, 0, 0)
    assert persistent_homology(np.zeros((50, 8)), rule="hybrid")["betti"] == (1, 0, 0)


def test_whole_eigenspaces_never_cuts_between_eigenvalues_pca_cannot_order():
    n = 200  # North's rule: the k-th cut needs λ_k − λ_{k+1} ≥ λ_k √(2/200) = 0.1 λ_k
    assert whole_eigenspaces(np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.2]), 4, n) == 6  # a 6-fold eigenspace
    assert whole_eigenspaces(np.array([4.0, 3.0, 2.0, 1.0, 0.5]), 2, n) == 2  # separated: the cut stays
    assert whole_eigenspaces(np.array([1.0, 0.8, 0.75, 0.3]), 2, n) == 3  # a 6% gap is inside the band
    assert whole_eigenspaces(np.array([1.0, 0.8, 0.75, 0.3]), 2, 5000) == 2  # with 5,000 points it is not (2%)
    assert whole_eigenspaces(np.ones(40), 4, n, max_components=32) == 32  # at most max_components ...
    assert whole_eigenspaces(np.ones(5), 4, n, max_components=32) == 5  # ... and the eigenvalues there are
    assert whole_eigenspaces(np.array([1.0, 1.0, 1e-15, 1e-15, 1e-15]), 2, n) == 2  # zeros at rounding: no block
    assert whole_eigenspaces(np.zeros(6), 3, n) == 3  # a cloud with no spread keeps its cut
    assert whole_eigenspaces(np.array([1.0, 1e-15, 1e-15, 1e-15]), 2, n) == 2  # a rounding-level block is not kept
    assert whole_eigenspaces(np.ones(8), 4, n, max_components=2) == 4  # never below k
    with pytest.raises(ValueError, match="k ≥ 1"):
        whole_eigenspaces(np.ones(4), 0, n)


def test_cut_splits_eigenspace_reads_the_gap_at_the_cut_by_north_s_rule():
    n = 200  # the band: λ_k − λ_{k+1} < 0.1 λ_k
    assert cut_splits_eigenspace(np.array([1.0, 1.0, 1.0, 0.5]), 2, n)
    assert not cut_splits_eigenspace(np.array([1.0, 1.0, 1.0, 0.5]), 3, n)
    assert not cut_splits_eigenspace(np.array([1.0, 1.0]), 2, n)  # every eigenvalue kept: nothing split
    assert not cut_splits_eigenspace(np.array([1.0, 1e-15, 1e-15]), 2, n)  # zeros at rounding are no eigenspace
    with pytest.raises(ValueError, match="k ≥ 1"):
        cut_splits_eigenspace(np.ones(3), 0, n)


def test_homology_keeps_a_degenerate_eigenspace_whole():
    """The exact Clifford torus has four equal eigenvalues: two fixed PCs are two arbitrary axes of that eigenspace
    (a disc or a circle, never a torus); the whole eigenspace is the torus.

    The whole eigenspace's complex is built on all 256 points: greedy landmarks of an exact lattice choose among
    tied distances by their rounding, which differs between CPUs (BLAS kernels), and a landmark set with holes adds
    loops — 150 landmarks gave β1 = 4 on an AMD EPYC Zen 3 (two extra bars of 0.56 over a cut of 0.42) and 2 on the
    other CPUs. The full Rips diagram does not depend on how ties are ordered."""
    cloud = rotate_into(clifford_torus(GRID), 16)  # 256 points, spectrum (½, ½, ½, ½, 0, …)
    fixed = persistent_homology(cloud, n_components=2, threshold=0.15, n_perm=150, rule="hybrid")
    whole = persistent_homology(cloud, n_components=2, threshold=0.15, rule="hybrid",
                                 components_rule="whole_eigenspaces")
    assert fixed["components"] == 2 and fixed["betti"] != (1, 2, 1)
    assert whole["components"] == 4 and whole["betti"] == (1, 2, 1)
    separated = rotate_into(torch.cat([clifford_torus(GRID), 0.3 * clifford_torus(GRID)[:, :1]], dim=1), 16)
    assert persistent_homology(separated, max_dim=0, n_components=4,
                               components_rule="whole_eigenspaces")["components"] == 4
    assert persistent_homology(cloud, max_dim=0, n_components=None)["components"] is None
    # the cut is flagged where it still splits an eigenspace: a fixed cut inside one, or the whole rule at its cap
    assert fixed["cut_splits_eigenspace"] is True and whole["cut_splits_eigenspace"] is False
    capped = persistent_homology(cloud, max_dim=0, n_components=2, components_rule="whole_eigenspaces",
                                 max_components=3)
    assert capped["components"] == 3 and capped["cut_splits_eigenspace"] is True
    assert persistent_homology(cloud, max_dim=0, n_components=None)["cut_splits_eigenspace"] is None
    with pytest.raises(ValueError, match="components_rule"):
        persistent_homology(cloud, components_rule="gap")
