"""The `paper` preset is the authors' network and VDM exactly: the parameter count (10,913,861 with the schedule's
two), the part-by-part layout of the spec (`shared/specs/concept_space.md`), the MLPs ending in GELU, their time
input, reconstruction term, null prompt and guidance convention; and the switches that cannot combine."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.experiments.runner import build_run_model
from conceptlab.models.diffusion import VariationalDiffusion
from conceptlab.models.processes import guidance_offset
from conceptlab.models.unet import count_parameters
from conceptlab.studies import build_data

# part → parameters, from the spec's table of the authors' network
SPEC_PARTS = {
    "input conv": 1_792,
    "level 0": 215_744,
    "level 1": 726_400,
    "level 2": 2_763_520,
    "middle": 3_026_944,
    "up 0": 2_894_464,
    "up 1": 939_712,
    "up 2": 260_992,
    "output": 1_859,
    "shared time embedding": 82_432,
}


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("paper-network")


@pytest.fixture(scope="module")
def paper():
    cfg = load_config("paper")
    return cfg, build_run_model(cfg, build_data(cfg.data))


def test_parameter_count_is_the_authors_with_the_schedules_two(paper):
    cfg, model = paper
    assert count_parameters(model) == 10_913_861
    assert count_parameters(model.net) == 10_913_859 and count_parameters(model.process) == 2
    assert sum(count_parameters(m) for m in model.net.concept_embedders().values()) == 505_088


def test_layer_sequence_matches_the_spec_part_by_part(paper):
    _, model = paper
    net = model.net
    parts = {
        "input conv": net.in_conv,
        "level 0": net.down[0], "level 1": net.down[1], "level 2": net.down[2],
        "middle": net.mid,
        "up 0": net.up[0], "up 1": net.up[1], "up 2": net.up[2],
        "output": nn.ModuleList([net.out_norm, net.out_conv]),
        "shared time embedding": net.time_embedder,
    }
    assert {k: count_parameters(m) for k, m in parts.items()} == SPEC_PARTS
    assert count_parameters(net.mid.blocks[0]) == count_parameters(net.mid.blocks[1]) == 1_381_632
    assert count_parameters(net.mid.attn) == 263_680
    assert [type(m).__name__ for m in net.time_embedder] == ["Linear", "GELU", "Linear", "GELU"]
    for block in [*net.down[0].blocks, *net.mid.blocks, *net.up[2].blocks]:
        assert [type(m).__name__ for m in block.concept_embedder] == ["Linear", "GELU", "Linear", "GELU"]
        assert [type(m).__name__ for m in block.time_mlp] == ["Linear", "GELU", "Linear", "GELU"]
        assert block.concept_embedder[0].in_features == 11 and block.norm1.eps == 1e-6
    assert net.down[0].blocks[0].concept_embedder[0].out_features == 64
    assert net.mid.blocks[0].time_mlp[0].in_features == 256


def test_the_vdm_is_the_authors(paper):
    cfg, model = paper
    process = model.process
    assert isinstance(process, VariationalDiffusion) and process.gamma_range == (-5.0, 10.0)
    assert process.time_input == "normalized_gamma" and process.reconstruction == "gaussian"
    assert process.data_noise == 1e-3
    t = torch.tensor([0.0, 0.5, 1.0])
    with torch.no_grad():
        process.gamma_bias.fill_(-7.0)  # a learned endpoint moved: the normalisation keeps the configured constants
        assert torch.allclose(process.network_time(t), (process.gamma(t) + 5.0) / 15.0)
        process.gamma_bias.fill_(-5.0)
    assert cfg.data.null_value == -1.0 and cfg.data.mask_value == 0.0
    assert cfg.diffusion.guidance_convention == "diffusers" and guidance_offset(cfg.diffusion.guidance_scale, "diffusers") == 0
    assert cfg.train.lr == 1e-3 and cfg.train.weight_decay == 0.01 and cfg.train.batch_size == 64
    assert cfg.train.grad_clip == 0.01 and cfg.train.ema_decay is None and cfg.eval.use_ema is False


def test_the_authors_reconstruction_term_is_their_gaussian():
    """With the schedule at γ(0) = −5 the term is −log N(x; z_0/α_0, 1e-3²), far larger than the discretised one."""
    torch.manual_seed(0)
    x = torch.rand(2, 3, 4, 4) * 2 - 1
    zero = lambda z, t, p: torch.zeros_like(z)  # noqa: E731 - a network that predicts ε̂ = z (the residual)
    theirs = VariationalDiffusion(reconstruction="gaussian", data_noise=1e-3)
    ours = VariationalDiffusion()
    _, m1 = theirs.loss(zero, x, torch.zeros(2, 1), torch.Generator().manual_seed(1))
    _, m2 = ours.loss(zero, x, torch.zeros(2, 1), torch.Generator().manual_seed(1))
    a0, s0 = (v.item() for v in theirs.alpha_sigma(torch.zeros(1)))
    g = torch.Generator().manual_seed(1)
    torch.rand((), generator=g)  # the loss's draws in order: times, ε, then the reconstruction's noise
    torch.randn(x.shape, generator=g)
    z0 = a0 * x + s0 * torch.randn(x.shape, generator=g)
    expected = -torch.distributions.Normal(z0 / a0, 1e-3).log_prob(x).flatten(1).sum(1).mean() / (48 * torch.log(
        torch.tensor(2.0)))
    assert m1["recon_bpd"] == pytest.approx(float(expected), rel=1e-5)
    assert m1["recon_bpd"] > 10 * m2["recon_bpd"]


def test_the_fast_variant_keeps_its_own_side_of_every_switch():
    cfg = load_config("concept-space-tiny")
    assert not cfg.model.embedding_final_gelu and cfg.model.norm_eps == 1e-5
    assert (cfg.diffusion.time_input, cfg.diffusion.reconstruction) == ("t", "discretized_gaussian")
    assert cfg.diffusion.guidance_convention == "ho_salimans" and cfg.data.mask_value is None
    dumped = cfg.model_dump()  # the new switches at their defaults are not in the saved config (same run ids)
    assert "embedding_final_gelu" not in dumped["model"] and "time_input" not in dumped["diffusion"]
    assert "mask_value" not in dumped["data"]


@pytest.mark.parametrize("overrides, keys", [
    (["diffusion.process=cosine", "diffusion.prediction=v", "diffusion.time_input=normalized_gamma"],
     ["diffusion.time_input", "diffusion.process"]),
    (["diffusion.process=cosine", "diffusion.prediction=v", "diffusion.reconstruction=gaussian"],
     ["diffusion.reconstruction", "diffusion.process"]),
    (["diffusion.guidance_convention=diffusers"], ["diffusion.guidance_scale", "diffusion.cfg_dropout"]),
    (["diffusion.guidance_scale=2"], ["diffusion.guidance_scale", "diffusion.cfg_dropout"]),
    (["diffusion.data_noise=0"], ["diffusion.data_noise"]),
])
def test_switch_combinations_that_cannot_work_are_one_line_naming_both_keys(overrides, keys):
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides)
    message = str(err.value)
    assert all(k.split(".")[-1] in message for k in keys) and "\n" not in message, message
