"""Representations over a label grid on a micro UNet: known clouds at the prompt, direct-call equality, checkpoints."""

import pytest
import torch

from conceptlab.analysis.geometry import clifford_torus, effective_dimension
from conceptlab.analysis.representation import (
    PointCloud,
    collect_representations,
    effective_dimension_over_training,
)
from conceptlab.data.bumps import lattice, render
from conceptlab.models.unet import ModelConfig
from conceptlab.hooks import HookNameError, cache_activations
from conceptlab.models.ddpm import build_ddpm
from conceptlab.models.encodings import SinusoidalEncoding
from conceptlab.models.unet import ConceptUNet

TINY = dict(widths=[16, 32], blocks_per_level=1, norm_groups=4, attention_heads=2, dropout=0.1)
SHAPE = (1, 16, 16)
LABELS = lattice((4.0, 4.0), (0.0, 32.0)).float()  # 8 × 8 grid on the 32-px torus


def micro_net(encoder=None, seed=0) -> ConceptUNet:
    torch.manual_seed(seed)
    net = ConceptUNet(ModelConfig(**TINY), prompt_dim=2, image_channels=1, prompt_encoder=encoder)
    with torch.no_grad():  # wake the zero-initialised convs so the output depends on everything
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return net


PROC = build_ddpm(100, "cosine")


def test_prompt_cloud_is_the_clifford_torus_with_an_encoder_and_the_grid_without():
    enc = SinusoidalEncoding(2, n_frequencies=1, period=32.0)
    cloud = collect_representations(micro_net(enc), PROC, LABELS, "hook_prompt", 0.5, SHAPE)
    assert isinstance(cloud, PointCloud) and cloud.points.shape == (64, 4) and torch.equal(cloud.labels, LABELS)
    assert effective_dimension(cloud.points) == pytest.approx(4.0, abs=1e-6)
    ref = clifford_torus(LABELS.double(), 32.0).float()  # (cos, sin, cos, sin); the encoding is (sin, cos, sin, cos)
    assert torch.allclose(cloud.points, ref[:, [1, 0, 3, 2]], atol=1e-5)
    raw = collect_representations(micro_net(), PROC, LABELS, "hook_prompt", 0.5, SHAPE)
    assert torch.equal(raw.points, LABELS) and effective_dimension(raw.points) == pytest.approx(2.0, abs=1e-6)


def test_block_concept_embedding_matches_the_embedder_called_directly():
    net = micro_net(SinusoidalEncoding(2, n_frequencies=3, period=32.0))
    name = "mid.blocks.0.concept_embedder"
    cloud = collect_representations(net, PROC, LABELS, "mid.blocks.0.hook_concept", 0.3, SHAPE)
    with torch.no_grad():
        direct = net.concept_embedders()[name](net.normalised_prompt(LABELS))
    assert torch.allclose(cloud.points, direct, atol=1e-5)


def test_forward_mode_equals_a_direct_call_on_the_noised_images():
    net = micro_net(SinusoidalEncoding(2, n_frequencies=2, period=32.0))
    images = render("bump", LABELS.double(), size=16, sigma=(1.5, 1.5)).unsqueeze(1)  # [M, 1, 16, 16]
    t, hook = 0.4, "mid.blocks.1.hook_out"
    cloud = collect_representations(net, PROC, LABELS, hook, t, images=images, seed=3, batch_size=20)
    eps = torch.randn((1, *SHAPE), generator=torch.Generator().manual_seed(3))
    tt = torch.full((64,), t)
    z = PROC.noise(PROC.to_model_space(images), tt, eps.expand(64, -1, -1, -1))
    net.eval()
    with cache_activations(net, hook) as cache, torch.no_grad():
        net(z, tt, LABELS)
    direct = cache[hook][0]
    assert cloud.points.shape == (64, 32 * 8 * 8)
    assert torch.allclose(cloud.points, direct.flatten(1), atol=1e-4)
    pooled = collect_representations(net, PROC, LABELS, hook, t, images=images, seed=3, pool="mean")
    assert torch.allclose(pooled.points, direct.mean(dim=(2, 3)), atol=1e-4)
    # without images every label sees the same noise: equal labels → equal rows, different labels → different rows
    same = collect_representations(net, PROC, LABELS[[5, 5, 9]], hook, 1.0, SHAPE)
    assert torch.equal(same.points[0], same.points[1]) and not torch.allclose(same.points[0], same.points[2])


def test_sample_mode_reads_the_nearest_sampler_step_and_restores_training_mode():
    net = micro_net()
    net.train()
    a = collect_representations(net, PROC, LABELS[:6], "mid.blocks.1.hook_out", 0.43, SHAPE, mode="sample",
                                steps=10, pool="mean", seed=1)
    b = collect_representations(net, PROC, LABELS[:6], "mid.blocks.1.hook_out", 0.43, SHAPE, mode="sample",
                                steps=10, pool="mean", seed=1)
    assert a.t == pytest.approx(0.4) and a.points.shape == (6, 32) and torch.equal(a.points, b.points)
    assert net.training


def test_effective_dimension_per_checkpoint():
    checkpoints = [(0, micro_net()), (250, micro_net(SinusoidalEncoding(2, n_frequencies=1, period=32.0)))]
    table = effective_dimension_over_training(checkpoints, PROC, LABELS, "hook_prompt", 0.5, image_shape=SHAPE)
    assert table["step"].tolist() == [0, 250]
    assert table["effective_dimension"].tolist() == pytest.approx([2.0, 4.0], abs=1e-6)
    assert table["explained_variance_top4"].tolist() == pytest.approx([1.0, 1.0])  # the geometry table's name
    assert table["features"].tolist() == [2, 4]


def test_effective_dimension_over_training_feeds_its_figure():
    import matplotlib

    matplotlib.use("Agg")
    from conceptlab.report.composition_figures import plot_effective_dimension

    checkpoints = [(0, micro_net()), (250, micro_net(SinusoidalEncoding(2, n_frequencies=1, period=32.0)))]
    table = effective_dimension_over_training(checkpoints, PROC, LABELS, "hook_prompt", 0.5, image_shape=SHAPE)
    fig = plot_effective_dimension(table)
    twin = fig.axes[-1]
    assert twin.get_ylabel() == "explained variance, top 4 PCs"
    assert list(twin.lines[0].get_ydata()) == pytest.approx([1.0, 1.0])
    matplotlib.pyplot.close(fig)


def test_bad_input():
    net = micro_net()
    with pytest.raises(HookNameError, match="no hook point 'mid.blocks.7.hook_out'") as info:
        collect_representations(net, PROC, LABELS, "mid.blocks.7.hook_out", 0.5, SHAPE)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="diffusion time"):
        collect_representations(net, PROC, LABELS, "hook_prompt", 0.0, SHAPE)
    with pytest.raises(ValueError, match="image_shape"):
        collect_representations(net, PROC, LABELS, "hook_prompt", 0.5)
    with pytest.raises(ValueError, match="mode"):
        collect_representations(net, PROC, LABELS, "hook_prompt", 0.5, SHAPE, mode="cache")
    with pytest.raises(ValueError, match="no checkpoints"):
        effective_dimension_over_training([], PROC, LABELS, "hook_prompt", 0.5, image_shape=SHAPE)
