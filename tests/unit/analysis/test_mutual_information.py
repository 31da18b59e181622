"""Tests for the two mutual-information estimators (denoiser difference, model-posterior lower bound) on an analytic
Gaussian mixture."""

import math

import pytest
import torch

from conceptlab.analysis.mutual_information import (
    GaussianMixture,
    GeometricSchedule,
    mutual_information_curve,
    posterior_bound_curve,
)

SCHEDULE = GeometricSchedule(sigma_min=0.01, sigma_max=50.0)
SQUARE = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])


def curve(mixture: GaussianMixture, **kw):
    return mutual_information_curve(
        mixture.denoise_cond, mixture.denoise_uncond, mixture.sample, SCHEDULE, samples_per_point=256, **kw
    )


def test_estimate_matches_reference_mutual_information_along_generation():
    mixture = GaussianMixture(1.5 * SQUARE, std=0.7)
    c = curve(mixture)  # paper's 999 midpoints
    assert c.mi[0] == 0 and bool((c.integrand >= 0).all())
    assert c.units.shape == (1000, 256) and torch.allclose(c.units.mean(1), c.mi)  # each draw's running sum
    assert torch.allclose(c.sigma[[0, -1]], torch.tensor([50.0, 0.01], dtype=torch.float64))
    for tau in (0.3, 0.45, 0.6, 0.8, 1.0):
        sigma = float(SCHEDULE.sigma(torch.tensor(1.0 - tau)))
        reference = mixture.mutual_information(sigma)
        assert abs(float(c.at(tau)) - reference) < 0.05 * reference, (tau, float(c.at(tau)), reference)


def test_saturates_at_entropy_when_classes_are_well_separated():
    mixture = GaussianMixture(8.0 * SQUARE, std=0.3)
    c = curve(mixture, points=199)
    assert float(c.at(1.0)) == pytest.approx(math.log(4), rel=0.03)
    assert mixture.mutual_information(0.01) == pytest.approx(math.log(4), abs=1e-6)
    assert float(c.at(0.0)) == 0.0 and bool((c.mi.diff() >= 0).all())


def test_snr_and_logsnr_follow_sigma():
    c = curve(GaussianMixture(SQUARE, std=0.5), points=9)
    assert torch.allclose(c.snr, c.sigma**-2) and torch.allclose(c.logsnr, -2 * c.sigma.log())
    assert c.tau.numel() == 10 and c.integrand.numel() == 9


@pytest.mark.parametrize("tau", [-0.1, 1.5])
def test_tau_outside_unit_interval_is_rejected(tau):
    c = curve(GaussianMixture(SQUARE, std=0.5), points=9)
    with pytest.raises(ValueError, match="tau"):
        c.at(tau)


@pytest.mark.parametrize("kw", [{"points": 0}, {"points": -3}, {"samples_per_point": 0}])
def test_non_positive_points_are_rejected(kw):
    mixture = GaussianMixture(SQUARE, std=0.5)
    with pytest.raises(ValueError, match="positive"):
        mutual_information_curve(mixture.denoise_cond, mixture.denoise_uncond, mixture.sample, SCHEDULE, **kw)


def test_bad_schedule_and_mixture_are_rejected():
    with pytest.raises(ValueError):
        GeometricSchedule(sigma_min=1.0, sigma_max=0.5)
    with pytest.raises(ValueError):
        GaussianMixture(SQUARE[:1], std=0.5)


def bound(mixture: GaussianMixture, **kw):
    return posterior_bound_curve(mixture.denoise_cond, mixture.sample, SCHEDULE, mixture.num_classes, **kw)


def test_posterior_bound_matches_reference_and_never_exceeds_entropy():
    mixture = GaussianMixture(1.5 * SQUARE, std=0.7)
    c = bound(mixture, points=100, paths=2000)
    assert c.units.shape == (101, 2000) and torch.allclose(c.units.mean(1), c.mi)  # each path's bound
    assert torch.allclose(c.units[1:].std(1) / 2000**0.5, c.stderr[1:])
    assert c.mi[0] == pytest.approx(0.0, abs=1e-12) and bool((c.mi <= mixture.entropy + 1e-9).all())
    for tau in (0.45, 0.6, 0.8, 1.0):
        sigma = float(SCHEDULE.sigma(torch.tensor(1.0 - tau)))
        reference = mixture.mutual_information(sigma)
        assert abs(float(c.at(tau)) - reference) < 0.05 * reference, (tau, float(c.at(tau)), reference)
    assert float(c.at(0.3)) == pytest.approx(mixture.mutual_information(float(SCHEDULE.sigma(torch.tensor(0.7)))),
                                             abs=0.03)


def test_bound_saturates_where_an_imperfect_denoiser_pair_makes_the_difference_estimate_overshoot():
    mixture = GaussianMixture(8.0 * SQUARE, std=0.3)
    error = torch.tensor([0.03, -0.03], dtype=torch.float64)  # a small fixed error of the unconditional denoiser

    def uncond_with_error(x, sigma):
        return mixture.denoise_uncond(x, sigma) + error

    over = mutual_information_curve(mixture.denoise_cond, uncond_with_error, mixture.sample, SCHEDULE, points=199,
                                    samples_per_point=64)
    assert float(over.at(1.0)) > 2 * mixture.entropy  # ‖error‖²/(2σ²) piles up as σ → σ_min
    c = bound(mixture, points=100, paths=400)
    assert float(c.at(1.0)) == pytest.approx(mixture.entropy, rel=0.01)
    assert float(c.at(1.0)) <= mixture.entropy + 1e-9


def test_bound_uses_the_prior_it_is_given_and_rejects_bad_input():
    mixture = GaussianMixture(8.0 * SQUARE, std=0.3)
    default = bound(mixture, points=20, paths=64)
    assert torch.allclose(bound(mixture, points=20, paths=64, prior=torch.full((4,), 3.0)).mi, default.mi)
    skewed = bound(mixture, points=20, paths=64, prior=torch.tensor([0.7, 0.1, 0.1, 0.1]))
    assert not torch.allclose(skewed.mi, default.mi)
    with pytest.raises(ValueError, match="prior has 3 entries"):
        bound(mixture, points=20, paths=8, prior=torch.ones(3))
    with pytest.raises(ValueError, match="num_classes"):
        posterior_bound_curve(mixture.denoise_cond, mixture.sample, SCHEDULE, 1)
    with pytest.raises(ValueError, match="positive"):
        bound(mixture, points=0)
