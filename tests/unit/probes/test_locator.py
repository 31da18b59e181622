"""Locator and generation accuracy: 100% on ground-truth images, periodic and extended canvases, bad input."""

import math

import pytest
import torch

from conceptlab.data.bumps import image_type, lattice, render, wrap
from conceptlab.probes.locator import count_peaks, generation_accuracy, locate, within_tolerance


def test_bump_lattice_is_recovered_exactly():
    labels = lattice()
    pred = locate(render("bump", labels, sigma=(1.0, 1.5)), "bump")
    assert (pred - labels).abs().max() < 1e-3
    assert generation_accuracy(pred, labels, tolerance=1.0) == {"x": 1.0, "y": 1.0, "joint": 1.0}


def test_periodic_bumps_near_the_border():
    g = torch.Generator().manual_seed(0)
    edge = torch.rand(200, 2, generator=g, dtype=torch.float64) - 0.5  # within half a pixel of the seam
    labels = torch.cat([torch.remainder(edge, 32.0), torch.rand(200, 2, generator=g, dtype=torch.float64) * 32])
    pred = locate(render("bump", labels, periodic=True), "bump", periodic=True)
    assert wrap(pred - labels, 32.0).abs().max() < 1e-3
    assert generation_accuracy(pred, labels, 1.0, period=32.0)["joint"] == 1.0


def test_sum_of_stripes_on_the_extended_canvas():
    labels = lattice(extent=(0.0, 44.0))
    kind = image_type(labels, size=32, border=6)
    pred = locate(render("sos", labels, border=6), "sos", border=6)
    two_d = kind == 2
    assert generation_accuracy(pred[two_d], labels[two_d], 1.0)["joint"] == 1.0
    inside = (labels >= 6) & (labels < 38)
    assert ((pred - labels).abs()[inside] <= 1.0).all()  # every visible coordinate, also on 1D images
    found = ~pred.isnan()
    assert ((pred - labels).abs()[found] <= 1.0).all()  # centres just outside the frame: from the stripe's tail
    far = (labels < 3) | (labels >= 41)  # more than 3σ outside the frame: nothing to see, no estimate
    assert pred[far].isnan().all()


def test_single_stripe_leaves_the_other_coordinate_undefined():
    labels = torch.tensor([[7.5, 3.0], [20.25, 9.0]], dtype=torch.float64)
    pred = locate(render("vertical", labels), "vertical")
    assert torch.allclose(pred[:, 0], labels[:, 0], atol=0.05) and pred[:, 1].isnan().all()


def test_generation_accuracy_counts_and_errors():
    true = torch.zeros(3, 2)
    pred = torch.tensor([[0.5, 0.0], [0.0, 2.0], [math.nan, 0.0]])
    acc = generation_accuracy(pred, true, tolerance=1.0)
    assert acc == pytest.approx({"x": 2 / 3, "y": 2 / 3, "joint": 1 / 3})
    assert generation_accuracy(torch.tensor([[31.8, 1.0]]), torch.tensor([[0.3, 1.0]]), 1.0, period=32.0)["x"] == 1.0
    for tol in (0.0, -1.0):
        with pytest.raises(ValueError, match="tolerance"):
            generation_accuracy(pred, true, tol)
    with pytest.raises(ValueError):
        generation_accuracy(pred, torch.zeros(2, 2), 1.0)


@pytest.mark.parametrize("tol", [0.0, -0.5, math.nan])
def test_tolerance_must_be_positive(tol):
    with pytest.raises(ValueError, match="tolerance must be > 0"):
        generation_accuracy(torch.zeros(2, 2), torch.zeros(2, 2), tol)


@pytest.mark.parametrize("kind", ["bump", "sos", "vertical", "product"])
def test_count_peaks_tells_one_bump_from_two(kind):
    labels = torch.tensor([[8.0, 8.0], [3.5, 12.2], [0.2, 0.3]])
    one = render(kind, labels, 16, (1.0, 1.0), 0, False)
    two = one + 0.8 * render(kind, torch.tensor([[12.0, 3.0]] * 3), 16, (1.0, 1.0), 0, False)
    assert count_peaks(one, kind).tolist() == [1, 1, 1]
    assert count_peaks(two, kind).tolist() == [2, 2, 2]
    faint = one + 0.3 * render(kind, torch.tensor([[12.0, 3.0]] * 3), 16, (1.0, 1.0), 0, False)
    assert count_peaks(faint, kind).tolist() == [1, 1, 1]  # under half the contrast: not a second bump
    assert count_peaks(torch.zeros(2, 16, 16), kind).tolist() == [0, 0]  # blank: no peak


def test_count_peaks_wraps_on_a_torus_and_refuses_bad_input():
    edge = render("bump", torch.tensor([[0.2, 8.0]]), 16, (1.0, 1.0), 0, True)  # split across the seam
    assert count_peaks(edge, "bump", periodic=True).tolist() == [1]
    assert count_peaks(edge, "bump", periodic=False).tolist() == [2]
    with pytest.raises(ValueError, match="rel_height"):
        count_peaks(edge, "bump", rel_height=0.0)
    with pytest.raises(ValueError, match="images"):
        count_peaks(torch.zeros(16, 16), "bump")


def test_within_tolerance_is_per_coordinate_and_nan_is_wrong():
    ok = within_tolerance(torch.tensor([[1.0, float("nan")], [5.0, 5.5]]), torch.tensor([[1.5, 2.0], [5.0, 7.0]]))
    assert ok.tolist() == [[True, False], [True, False]]
