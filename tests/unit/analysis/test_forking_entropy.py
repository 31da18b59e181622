"""Tests for forking entropy: the histogram entropy, and the curve on a Gaussian mixture with an exact denoiser,
where the expected value is H(V | X_τ) = ln K − I(V; X_τ)."""

import math

import pytest
import torch

from conceptlab.analysis.forking_entropy import forking_entropy_curve, forking_entropy_curves, histogram_entropy
from conceptlab.analysis.mutual_information import GaussianMixture
from conceptlab.models.variance_exploding import VarianceExploding

VE = VarianceExploding(0.01, 50.0)
CORNERS = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])


def test_histogram_entropy_known_values():
    classes = torch.tensor([[0, 0, 0, 0], [0, 1, 0, 1], [0, 1, 2, 3]])
    assert histogram_entropy(classes, 4).tolist() == pytest.approx([0.0, math.log(2), math.log(4)])
    curve = forking_entropy_curve([classes, classes[:1]], [0.0, 1.0], 4, normalise=True)
    assert curve.entropy.tolist() == pytest.approx([(0.5 + 1.0) / 3, 0.0])
    assert curve.prior_entropy == 1.0 and curve.forks == 4
    assert curve.per_root is None  # roots differ in number across τ: no units to pair
    units = forking_entropy_curve([classes, classes], [0.0, 1.0], 4).per_root
    assert units.shape == (2, 3) and units[1].tolist() == pytest.approx([0.0, math.log(2), math.log(4)])
    with pytest.raises(ValueError, match="4"):
        histogram_entropy(torch.tensor([[0, 4]]), 4)
    with pytest.raises(ValueError, match="K ≥ 2"):
        histogram_entropy(torch.tensor([[0], [1]]), 4)
    with pytest.raises(ValueError, match="tau"):
        forking_entropy_curve([classes], [1.2], 4)


def test_curve_falls_from_prior_entropy_to_zero_as_conditional_entropy():
    mixture = GaussianMixture(6.0 * CORNERS, std=0.3)

    def classify(x):
        return {"corner": torch.cdist(x.double(), mixture.means).argmin(1),
                "side": (x[:, 0] > 0).long()}

    taus = [0.0, 0.2, 0.25, 0.3, 1.0]
    curves = forking_entropy_curves(
        VE, VE.model_denoiser(mixture.denoise_uncond), torch.zeros(200, 1), (2,), taus, forks=128,
        classify=classify, num_classes={"corner": 4, "side": 2}, steps=100,
        generator=torch.Generator().manual_seed(0), clip_denoised=False,
    )
    corner = curves["corner"]
    assert corner.entropy[0] == pytest.approx(math.log(4), abs=0.04)  # τ = 0: the prior's entropy
    assert float(corner.entropy[-1]) == 0.0  # τ = 1: committed
    assert torch.allclose(corner.sigma, VE.sigma(1 - torch.tensor(taus, dtype=torch.float64)))
    for i, tau in enumerate(taus[1:-1], start=1):
        sigma = float(VE.sigma(torch.tensor(1.0 - tau)))
        expected = math.log(4) - mixture.mutual_information(sigma, samples=100_000)
        assert float(corner.entropy[i]) == pytest.approx(expected, abs=0.05), (tau, expected)  # plug-in bias ≤ 0.03
    assert 0.2 < float(corner.entropy[2]) < 1.2  # a genuinely intermediate point
    side = curves["side"]
    assert side.entropy[0] == pytest.approx(math.log(2), abs=0.03) and float(side.entropy[-1]) == 0.0
    assert bool((corner.entropy.diff() <= 0.03).all())
