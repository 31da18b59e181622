"""Sinusoidal coordinate encodings: exact values, periodicity, null prompt, and the UNet's optional prompt encoder."""

import math

import pytest
import torch

from conceptlab.models.unet import ModelConfig
from conceptlab.hooks import cache_activations
from conceptlab.models.encodings import SinusoidalEncoding, wavelengths_for
from conceptlab.models.unet import ConceptUNet, count_parameters


def test_exact_values_and_layout():
    enc = SinusoidalEncoding(2, wavelengths=[32.0, 8.0], include_raw=True)
    assert enc.out_dim == 2 * 2 * 2 + 2
    out = enc(torch.tensor([[8.0, 2.0]]))[0]
    # μx = 8: [sin(2π·8/32), sin(2π·8/8), cos(2π·8/32), cos(2π·8/8)], then μy = 2, then the raw coordinates
    expected = [1.0, 0.0, 0.0, 1.0, math.sin(math.pi / 8), 1.0, math.cos(math.pi / 8), 0.0, 8.0, 2.0]
    assert out.tolist() == pytest.approx(expected, abs=1e-6)


def test_default_wavelengths():
    w = wavelengths_for(4, min_wavelength=2.0, max_wavelength=64.0)
    r = 32 ** (1 / 3)
    assert w.tolist() == pytest.approx([64.0, 64 / r, 64 / r**2, 2.0])  # log-spaced 64 → 2
    assert wavelengths_for(3, period=44.0).tolist() == pytest.approx([44.0, 22.0, 44.0 / 3])
    assert SinusoidalEncoding(2, n_frequencies=6).out_dim == 24


def test_periodic_encoding_wraps_and_non_periodic_does_not():
    per = SinusoidalEncoding(2, n_frequencies=5, period=32.0)
    u = torch.rand(50, 2, generator=torch.Generator().manual_seed(0)) * 32
    assert torch.allclose(per(u), per(u + 32.0), atol=1e-5)
    assert torch.allclose(per(u), per(u - 64.0), atol=1e-5)
    flat = SinusoidalEncoding(2, n_frequencies=5)
    assert (flat(u) - flat(u + 32.0)).abs().max() > 0.5


def test_distinct_pixel_coordinates_get_distinct_codes():
    enc = SinusoidalEncoding(1, n_frequencies=6)
    u = torch.arange(0.5, 32.0, 1.0)[:, None]
    d = torch.cdist(enc(u), enc(u))
    off = d + torch.eye(len(u)) * 1e9
    assert off.min() > 0.3  # every pair of pixel centres is told apart by a clear margin


def test_one_periodic_frequency_is_the_clifford_torus():
    enc = SinusoidalEncoding(2, n_frequencies=1, period=32.0)
    g = torch.stack(torch.meshgrid(torch.arange(16.0) * 2, torch.arange(16.0) * 2, indexing="ij"), -1).reshape(-1, 2)
    out = enc(g)
    th, ph = 2 * math.pi * g[:, 0] / 32, 2 * math.pi * g[:, 1] / 32
    assert torch.allclose(out, torch.stack([th.sin(), th.cos(), ph.sin(), ph.cos()], 1), atol=1e-5)


def test_null_rows_encode_to_zero():
    enc = SinusoidalEncoding(2, n_frequencies=3, null_value=-1.0, include_raw=True)
    out = enc(torch.tensor([[-1.0, -1.0], [-1.0, 5.0], [0.0, 0.0]]))
    assert torch.equal(out[0], torch.zeros(enc.out_dim))
    assert out[1].abs().sum() > 0 and out[2].abs().sum() > 0  # only whole null rows; (0, 0) is a real label


def test_bad_input():
    with pytest.raises(ValueError, match="periodicity"):
        SinusoidalEncoding(2, period=32.0, include_raw=True)
    with pytest.raises(ValueError, match="n_frequencies"):
        SinusoidalEncoding(2, n_frequencies=0)
    with pytest.raises(ValueError, match="wavelength"):
        SinusoidalEncoding(2, min_wavelength=8.0, max_wavelength=2.0)
    with pytest.raises(ValueError, match=r"\[B, 2\]"):
        SinusoidalEncoding(2)(torch.zeros(3, 3))


TINY = dict(widths=[16, 32], blocks_per_level=1, norm_groups=4, attention_heads=2, dropout=0.0)


def test_unet_default_is_unchanged_and_encoder_feeds_the_concept_embedders():
    assert count_parameters(ConceptUNet(ModelConfig(), prompt_dim=11)) == 10_913_859
    torch.manual_seed(0)
    enc = SinusoidalEncoding(2, n_frequencies=4, period=32.0)
    net = ConceptUNet(ModelConfig(**TINY), prompt_dim=2, image_channels=1, prompt_encoder=enc).eval()
    assert all(m[0].in_features == enc.out_dim for m in net.concept_embedders().values())
    assert not list(enc.parameters()) and "prompt_encoder.angular" not in net.state_dict()
    labels = torch.tensor([[3.0, 7.0], [35.0, 39.0]])  # the same point on the torus
    x = torch.randn(1, 1, 16, 16).expand(2, -1, -1, -1)
    with cache_activations(net, "hook_prompt") as cache, torch.no_grad():
        out = net(x, torch.full((2,), 0.5), labels)
    assert torch.allclose(cache["hook_prompt"][0], enc(labels))
    assert torch.allclose(net.normalised_prompt(labels), enc(labels))
    assert torch.allclose(out[0], out[1], atol=1e-5)
    shared = ConceptUNet(ModelConfig(**TINY, concept_embedder="shared"), 2, 1, prompt_encoder=enc)
    assert shared.concept_embedder[0].in_features == enc.out_dim


@pytest.mark.parametrize("period", [None, 32.0])
def test_null_rows_are_told_on_the_prompt_before_the_unets_shift_and_scale(period):
    from conceptlab.models.diffusion_model import build_network

    cfg = ModelConfig(**TINY, prompt_encoding="sinusoidal", prompt_frequencies=2, prompt_period=period,
                      prompt_shift=0.5, prompt_scale=2.0)
    net = build_network(cfg, prompt_dim=2, channels=1, null_value=-1.0)
    null = torch.full((3, 2), -1.0)
    assert torch.equal(net.normalised_prompt(null), torch.zeros(3, net.prompt_encoder.out_dim))
    # real labels read exactly as before: the encoding of the shifted, scaled prompt; (0, 0) normalises to the null
    # value (−1, −1) but is a label, and (−1, 3) holds the null value in one entry only
    labels = torch.tensor([[0.0, 0.0], [31.0, 31.0], [-1.0, 3.0], [7.5, 12.0]])
    plain = SinusoidalEncoding(2, n_frequencies=2, period=period)  # no null value: the encoding of every row
    assert torch.equal(net.normalised_prompt(labels), plain((labels - 0.5) * 2.0))
    assert (net.normalised_prompt(labels).abs().sum(1) > 0).all()


def test_a_raw_prompt_of_another_shape_is_refused():
    with pytest.raises(ValueError, match="raw prompt"):
        SinusoidalEncoding(2, null_value=-1.0)(torch.zeros(3, 2), raw=torch.zeros(2, 2))


def test_any_module_can_be_the_prompt_encoder():
    """Only an encoder that says it takes the raw prompt (`takes_raw_prompt`) is given it; any other module (a plain
    linear map) is called on the normalised prompt alone."""
    from torch import nn

    from conceptlab.models.unet import ConceptUNet

    net = ConceptUNet(ModelConfig(widths=[8], blocks_per_level=1, mid_attention=False), 2, 1,
                      prompt_encoder=nn.Linear(2, 6))
    assert net.normalised_prompt(torch.zeros(3, 2)).shape == (3, 6)
