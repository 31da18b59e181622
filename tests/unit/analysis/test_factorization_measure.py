"""The factorization measure on analytic clouds with known answers: the Clifford torus and a concatenated code are
additive with orthogonal x and y subspaces; bumps in pixel space interact; i.i.d. random vectors per label have no
additive structure beyond chance; a 3D-embedded torus is in between."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conceptlab.analysis.factorization import factorization
from conceptlab.analysis.geometry import as_grid, clifford_torus, torus_3d
from conceptlab.data.bumps import render

N = 16
LABELS = torch.cartesian_prod(torch.arange(N) + 0.5, torch.arange(N) + 0.5).double()


def test_the_clifford_torus_is_additive_with_orthogonal_subspaces():
    f = factorization(as_grid(clifford_torus(LABELS, float(N)), LABELS))
    assert f.additive_share == pytest.approx(1.0, abs=1e-9) and f.interaction_share == pytest.approx(0.0, abs=1e-9)
    assert f.x_share == pytest.approx(0.5) and f.k_x == 2 and f.k_y == 2
    assert f.overlap == pytest.approx(0.0, abs=1e-9) and f.max_cosine == pytest.approx(0.0, abs=1e-6)


def test_a_concatenated_code_is_additive_and_orthogonal_whatever_its_parts():
    rng = np.random.default_rng(0)
    x_code, y_code = rng.normal(size=(N, 7)), rng.normal(size=(N, 5))
    grid = np.concatenate([np.repeat(x_code[:, None], N, 1), np.repeat(y_code[None], N, 0)], axis=-1)
    f = factorization(grid)
    assert f.additive_share == pytest.approx(1.0) and f.overlap == pytest.approx(0.0, abs=1e-12)
    rotated = grid @ np.linalg.qr(rng.normal(size=(12, 12)))[0]  # an isometry changes nothing
    assert factorization(rotated).additive_share == pytest.approx(1.0)
    assert factorization(rotated).overlap == pytest.approx(0.0, abs=1e-12)


def test_bump_images_in_pixel_space_interact_and_more_so_the_narrower_the_bump():
    """An image is an outer product b_x ⊗ b_y: its additive part is the product with the other axis's mean bump,
    which is flat on a torus, so the share falls with the width (0.18, 0.36, 0.61 at σ = 0.5, 1, 2 on 16×16)."""
    shares = []
    for sigma in (0.5, 1.0, 2.0):
        images = render("bump", LABELS, N, (sigma, sigma), periodic=True)
        shares.append(factorization(as_grid(images.reshape(len(LABELS), -1), LABELS)))
    assert shares[1].interaction_share > 0.6  # at the σ = 1 of the bump presets, interaction dominates
    assert shares[0].additive_share < shares[1].additive_share < shares[2].additive_share
    assert shares[0].additive_share < 0.2


def test_iid_random_vectors_per_label_score_about_chance():
    rng = np.random.default_rng(1)
    shares = [factorization(rng.normal(size=(N, N, 64))).additive_share for _ in range(20)]
    chance = (2 * N - 2) / (N * N - 1)
    assert np.mean(shares) == pytest.approx(chance, rel=0.1)


def test_a_3d_torus_is_partly_interacting_and_its_subspaces_are_orthogonal():
    f = factorization(as_grid(torus_3d(LABELS, float(N), R=2.0, r=1.0), LABELS))
    # f: (2 cos a, 2 sin a, 0), ‖f‖² = 4; g: (0, 0, sin b), mean 1/2; h: cos b (cos a, sin a, 0), mean 1/2
    assert f.additive_share == pytest.approx((4.0 + 0.5) / 5.0, abs=1e-9)
    assert f.overlap == pytest.approx(0.0, abs=1e-9)


def test_bad_input_and_a_collapsed_cloud():
    with pytest.raises(ValueError, match="grid representation"):
        factorization(np.zeros((1, 4, 3)))
    with pytest.raises(ValueError, match="variance"):
        factorization(np.zeros((2, 2, 3)), variance=0)
    flat = factorization(np.ones((4, 4, 3)))
    assert np.isnan(flat.additive_share) and np.isnan(flat.overlap) and flat.k_x == 0
    rounding = factorization(np.ones((4, 4, 3)) * 1e3 + np.random.default_rng(0).normal(0, 1e-12, (4, 4, 3)))
    assert np.isnan(rounding.additive_share)  # spread at rounding level is no spread


def test_a_claim_against_a_collapsed_control_fails_as_unmeasured():
    from conceptlab.analysis.control_claims import seed_margin

    flat = factorization(np.ones((4, 4, 3)))
    assert not seed_margin(100, 0.9, flat.additive_share, "greater", 0.05).passed
