"""Gaussian bump worlds: exact pixel values, extended canvas, periodic wrap, lattices, subsampling, splits."""

import math

import pytest
import torch

from conceptlab.data.bumps import (
    SplitSpec,
    held_out_mask,
    image_type,
    lattice,
    pixel_centres,
    render,
    split,
    subsample,
)


def lab(*xy: float) -> torch.Tensor:
    return torch.tensor([xy], dtype=torch.float64)


def test_pixel_convention_and_exact_bump_values():
    assert pixel_centres(3).tolist() == [0.5, 1.5, 2.5]
    img = render("bump", lab(3.5, 10.5), sigma=(1.0, 2.0))[0]
    assert img.shape == (32, 32) and img.dtype == torch.float32
    assert img[10, 3] == 1.0  # row = y, column = x; centre on a pixel centre → exact peak
    assert img[10, 4].item() == pytest.approx(math.exp(-0.5))
    assert img[12, 3].item() == pytest.approx(math.exp(-0.5))  # σy = 2: two rows away is one σ
    assert img[11, 5].item() == pytest.approx(math.exp(-2.0) * math.exp(-0.125))
    assert img.min() >= 0 and img.max() <= 1


def test_stripes_sum_and_product():
    mu = lab(5.5, 20.5)
    v, h = render("vertical", mu)[0], render("horizontal", mu)[0]
    assert torch.equal(v, v[0].expand(32, 32)) and v[0, 5] == 1.0
    assert torch.equal(h, h[:, 0:1].expand(32, 32)) and h[20, 0] == 1.0
    sos = render("sos", mu)[0]
    assert sos[20, 5] == 1.0  # the crossing saturates at 1
    assert torch.allclose(sos[3, 9], v[3, 9] + h[3, 9])  # away from it the stripes add
    assert torch.equal(render("product", mu), render("bump", mu))
    assert torch.allclose(render("product", mu)[0], v * h)


def test_extended_canvas_crop_and_image_type():
    mu = torch.tensor([[9.5, 22.5], [2.0, 30.0], [40.0, 1.0]], dtype=torch.float64)
    ext = render("sos", mu, size=32, border=6)
    full = render("sos", mu, size=44)
    assert ext.shape == (3, 32, 32) and torch.equal(ext, full[:, 6:38, 6:38])
    assert ext[0, 16, 3] == 1.0  # extended (9.5, 22.5) → visible pixel (row 16, col 3)
    assert image_type(mu, size=32, border=6).tolist() == [2, 1, 0]
    edges = torch.tensor([[6.0, 37.9], [38.0, 6.0]], dtype=torch.float64)
    assert image_type(edges, size=32, border=6).tolist() == [2, 1]  # frame is [6, 38)


def test_periodic_wrap():
    near_edge = render("bump", lab(0.5, 16.5), periodic=True)[0]
    assert near_edge[16, 31].item() == pytest.approx(math.exp(-0.5))  # one pixel away across the border
    assert render("bump", lab(0.5, 16.5))[0, 16, 31] == 0.0  # exp(-31²/2) underflows float32
    assert torch.allclose(near_edge, render("bump", lab(32.5, 16.5), periodic=True)[0])
    centre = render("bump", lab(16.5, 16.5), periodic=True)[0]
    assert torch.allclose(near_edge, torch.roll(centre, -16, dims=1))


def test_lattice_and_subsampling():
    grid = lattice()
    assert grid.shape == (1024, 2) and grid[0].tolist() == [0.5, 0.5] and grid[-1].tolist() == [31.5, 31.5]
    assert lattice((2.0, 4.0)).shape == (16 * 8, 2)
    kept = subsample(grid, 0.25, seed=3)
    assert len(kept) == 256 and torch.equal(kept, subsample(grid, 0.25, seed=3))
    assert not torch.equal(kept, subsample(grid, 0.25, seed=4))
    assert set(map(tuple, kept.tolist())) <= set(map(tuple, grid.tolist()))
    for bad in (0.0, 1.5, 1e-4):
        with pytest.raises(ValueError):
            subsample(grid, bad)


def test_named_splits():
    grid = lattice()
    train, held = split(grid, SplitSpec("x_band", low=13, high=19))
    assert len(held) == 6 * 32 and ((held[:, 0] > 13) & (held[:, 0] < 19)).all() and len(train) == 1024 - 192
    assert len(split(grid, SplitSpec("lesion", width=1.0))[1]) == 4  # 15.5, 16.5 in x and y
    assert len(split(grid, SplitSpec("lesion", width=8.0))[1]) == 64
    assert len(split(grid, SplitSpec("exterior", width=8.0))[0]) == 64
    assert not held_out_mask(grid, SplitSpec()).any()


@pytest.mark.parametrize(
    "spec, message",
    [
        (SplitSpec("x_band", low=0, high=32), "no training data"),
        (SplitSpec("exterior", width=0.5), "no training data"),
        (SplitSpec("lesion", width=0.5), "holds out no label"),
    ],
)
def test_split_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        split(lattice(), spec)


def test_bad_input():
    with pytest.raises(ValueError, match="unknown image kind"):
        render("blob", lab(1, 1))
    with pytest.raises(ValueError, match="sigma"):
        render("bump", lab(1, 1), sigma=(0.0, 1.0))
    with pytest.raises(ValueError, match="unknown split kind"):
        split(lattice(), SplitSpec("ring"))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SplitSpec("x_band", low=19, high=13), "low ≤ high"),
        (lambda: SplitSpec("lesion", width=0.0), "width > 0"),
        (lambda: SplitSpec("exterior", width=-2.0), "width > 0"),
        (lambda: SplitSpec("ring"), "unknown split kind"),
    ],
)
def test_impossible_split_specs_fail_at_construction(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_splits_that_leave_no_training_data():
    with pytest.raises(ValueError, match="no training data"):
        split(lattice()[:0], SplitSpec())
    sparse = subsample(lattice(), 0.01, seed=0)  # 10 labels
    band = SplitSpec("x_band", low=float(sparse[:, 0].min()), high=float(sparse[:, 0].max()))
    with pytest.raises(ValueError, match="no training data"):
        split(sparse, band)
    with pytest.raises(ValueError, match="no training data"):
        subsample(lattice((16.0, 16.0)), 0.1)  # 4 labels, λ = 0.1 keeps none
