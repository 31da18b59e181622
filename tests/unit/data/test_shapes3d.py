"""Tests for the Shapes3D renderer (factor indexing, distinctness, determinism) and the `3dshapes.h5` loader."""

import h5py
import numpy as np
import pytest
import torch

from conceptlab.data.shapes3d import (
    FACTOR_SIZES,
    FACTORS,
    NUM_IMAGES,
    factors_from_index,
    factors_from_labels,
    index_from_factors,
    labels_from_factors,
    load_shapes3d_h5,
    render_indices,
    render_shapes3d,
)


def as_uint8(images: torch.Tensor) -> torch.Tensor:
    return (images * 255).round().to(torch.uint8).flatten(1)


def test_index_factor_round_trip_in_shapes3d_order():
    assert NUM_IMAGES == 480_000
    assert factors_from_index(torch.tensor([0, 1, 15, NUM_IMAGES - 1])).tolist() == [
        [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 1, 0], [9, 9, 9, 7, 3, 14]]
    index = torch.randperm(NUM_IMAGES, generator=torch.Generator().manual_seed(0))[:5000]
    factors = factors_from_index(index)
    assert torch.equal(index_from_factors(factors), index)
    assert torch.equal(factors_from_labels(labels_from_factors(factors)), factors)
    with pytest.raises(ValueError):
        factors_from_index(torch.tensor([NUM_IMAGES]))


def test_sampled_factor_combinations_render_distinct_images():
    index = torch.randperm(NUM_IMAGES, generator=torch.Generator().manual_seed(1))[:1500]
    images = as_uint8(render_indices(index, image_size=16).images)
    assert torch.unique(images, dim=0).shape[0] == len(index)


@pytest.mark.parametrize("factor", range(len(FACTORS)))
def test_every_level_of_every_factor_is_visible(factor):
    for shape in range(4):  # including the rotationally symmetric sphere and cylinder for orientation
        base = torch.tensor([1, 4, 7, 3, shape, 5])
        factors = base.repeat(FACTOR_SIZES[factor], 1)
        factors[:, factor] = torch.arange(FACTOR_SIZES[factor])
        images = as_uint8(render_shapes3d(factors, image_size=32))
        assert torch.unique(images, dim=0).shape[0] == FACTOR_SIZES[factor], (FACTORS[factor], shape)


def test_render_is_deterministic_and_sized():
    factors = factors_from_index(torch.arange(0, NUM_IMAGES, 4801))
    for size in (16, 32, 64):
        a, b = render_shapes3d(factors, size), render_shapes3d(factors, size)
        assert a.shape == (len(factors), 3, size, size) and torch.equal(a, b)
        assert a.min() >= 0 and a.max() <= 1


def test_shapes_differ_in_pixels():
    factors = torch.tensor([[0, 3, 6, 4, shape, 7] for shape in range(4)])
    images = render_shapes3d(factors, 64)
    for i in range(4):
        for j in range(i + 1, 4):
            changed = (images[i] - images[j]).abs().amax(0) > 0.1
            assert changed.sum() >= 40, (i, j, int(changed.sum()))


def write_h5(path, images, labels, **kw):
    with h5py.File(path, "w") as h5:
        h5.create_dataset("images", data=images, **kw)
        h5.create_dataset("labels", data=labels)


def test_h5_loader_round_trip(tmp_path):
    factors = factors_from_index(torch.tensor([3, 77_777, 123_456, 479_999, 240_000]))
    pixels = (render_shapes3d(factors, 64) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    path = tmp_path / "3dshapes.h5"
    write_h5(path, pixels, labels_from_factors(factors).numpy())
    data = load_shapes3d_h5(path)
    assert torch.equal(data.factors, factors)
    assert torch.equal((data.images * 255).round().to(torch.uint8).permute(0, 2, 3, 1), torch.from_numpy(pixels))
    picked = load_shapes3d_h5(path, indices=torch.tensor([4, 1, 4]), image_size=16)
    assert picked.images.shape == (3, 3, 16, 16) and torch.equal(picked.factors, factors[[4, 1, 4]])


@pytest.mark.parametrize(
    "images, labels",
    [
        (np.zeros((2, 64, 64, 3), np.float32), np.zeros((2, 6))),  # wrong image dtype
        (np.zeros((2, 32, 32, 3), np.uint8), np.zeros((2, 6))),  # wrong image size
        (np.zeros((2, 64, 64, 3), np.uint8), np.zeros((2, 5))),  # wrong label width
        (np.zeros((2, 64, 64, 3), np.uint8), np.full((2, 6), 0.37)),  # labels off the factor grid
    ],
)
def test_h5_with_wrong_layout_is_rejected(tmp_path, images, labels):
    path = tmp_path / "bad.h5"
    write_h5(path, images, labels)
    with pytest.raises(ValueError):
        load_shapes3d_h5(path)


def test_h5_without_datasets_is_rejected(tmp_path):
    path = tmp_path / "empty.h5"
    with h5py.File(path, "w") as h5:
        h5.create_dataset("imgs", data=np.zeros((1, 64, 64, 3), np.uint8))
    with pytest.raises(ValueError, match="images"):
        load_shapes3d_h5(path)
