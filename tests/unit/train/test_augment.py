"""Training-time augmentation: colour jitter by torchvision's ColorJitter definition, per image, and flips."""

import colorsys

import pytest
import torch

from conceptlab.train.augment import adjust, color_jitter, grey, hflip, hsv_to_rgb, rgb_to_hsv
from conceptlab.train.config import TrainConfig


def _images(n=6, seed=0):
    return torch.rand(n, 3, 5, 4, generator=torch.Generator().manual_seed(seed))


def test_hsv_round_trip_and_agreement_with_colorsys():
    x = _images()
    x[0, :, 0, 0] = torch.tensor([0.3, 0.3, 0.3])  # grey: hue 0
    x[0, :, 0, 1] = 0.0  # black
    hsv = rgb_to_hsv(x)
    assert torch.allclose(hsv_to_rgb(hsv), x, atol=1e-6)
    for (n, i, j) in ((0, 0, 0), (0, 0, 1), (1, 2, 3), (4, 1, 1), (5, 4, 0)):
        expected = colorsys.rgb_to_hsv(*x[n, :, i, j].tolist())
        assert hsv[n, :, i, j].tolist() == pytest.approx(expected, abs=1e-6)


def test_each_adjustment_by_its_definition():
    x = _images(2)
    f = torch.tensor([1.1, 0.9])
    assert torch.allclose(adjust(x, 0, f), (f[:, None, None, None] * x).clamp(0, 1))
    m = grey(x).mean((2, 3), keepdim=True)
    assert torch.allclose(adjust(x, 1, f), (f[:, None, None, None] * (x - m) + m).clamp(0, 1), atol=1e-6)
    zero = torch.zeros(2)
    assert torch.allclose(adjust(x, 2, zero), grey(x).expand_as(x), atol=1e-6)  # saturation 0: grey
    assert torch.allclose(adjust(x, 3, zero), x, atol=1e-6)  # no hue shift: unchanged
    red = torch.zeros(1, 3, 1, 1)
    red[0, 0] = 1.0
    assert adjust(red, 3, torch.tensor([1 / 3])).flatten().tolist() == pytest.approx([0, 1, 0], abs=1e-6)  # → green


def test_color_jitter_varies_per_image_stays_in_range_and_is_reproducible():
    x = _images(32)
    a = color_jitter(x, 0.1, torch.Generator().manual_seed(1))
    b = color_jitter(x, 0.1, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and a.shape == x.shape and a.min() >= 0 and a.max() <= 1
    change = (a - x).abs().mean((1, 2, 3))
    assert (change > 1e-4).all() and change.std() > 0  # every image changed, not all alike
    assert (change < 0.15).all()  # a small jitter stays small
    assert not torch.equal(a, color_jitter(x, 0.1, torch.Generator().manual_seed(2)))


def test_zero_strength_changes_nothing_and_draws_nothing():
    x = _images()
    g = torch.Generator().manual_seed(3)
    state = g.get_state()
    assert color_jitter(x, 0.0, g) is x and hflip(x, 0.0, g) is x
    assert torch.equal(g.get_state(), state)


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="RGB"):
        color_jitter(torch.rand(2, 1, 4, 4), 0.1, torch.Generator())
    with pytest.raises(ValueError, match="0.5"):
        color_jitter(_images(), 0.6, torch.Generator())
    with pytest.raises(Exception, match="less than or equal to 0.5"):
        TrainConfig(color_jitter=0.7)
    # at its default the key is left out of the saved config (so of every run id)
    assert "color_jitter" not in TrainConfig().model_dump()
    assert TrainConfig(color_jitter=0.1).model_dump()["color_jitter"] == 0.1
