"""Diffusion processes and the ancestral sampler, on a stand-in network (no UNet needed)."""

import math

import pytest
import torch
from torch import nn

from conceptlab.models.processes import DiffusionConfig
from conceptlab.models.diffusion import CosineDiffusion, VariationalDiffusion, antithetic_times
from conceptlab.models.processes import build_process
from conceptlab.models.sampling import ancestral_sample, guided_output, iter_ancestral


class PromptNet(nn.Module):
    """A minimal conditional net: conv of the input plus a per-channel prompt bias."""

    def __init__(self, prompt_dim=2):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.cond = nn.Linear(prompt_dim + 1, 3)

    def forward(self, x, t, prompt):
        return self.conv(x) + self.cond(torch.cat([prompt, t[:, None]], 1))[:, :, None, None]


def test_antithetic_times_cover_the_unit_interval_evenly():
    t = antithetic_times(8, torch.Generator().manual_seed(0)).sort().values
    assert t.min() >= 0 and t.max() < 1
    assert torch.allclose(torch.diff(t), torch.full((7,), 1 / 8), atol=1e-6)


def test_vdm_schedule_starts_at_its_endpoints_and_is_learnable():
    vdm = VariationalDiffusion(-5.0, 10.0)
    assert vdm.gamma(torch.tensor([0.0, 1.0])).tolist() == [-5.0, 10.0]
    alpha, sigma = vdm.alpha_sigma(torch.tensor([0.3]))
    assert torch.allclose(alpha**2 + sigma**2, torch.ones(1))
    net = PromptNet()
    loss, metrics = vdm.loss(net, torch.rand(4, 3, 8, 8) * 2 - 1, torch.rand(4, 2), torch.Generator().manual_seed(0))
    loss.backward()
    assert torch.isfinite(loss) and vdm.gamma_slope.grad is not None and vdm.gamma_bias.grad is not None
    assert set(metrics) >= {"diffusion_bpd", "prior_bpd", "recon_bpd"}


def test_vdm_fixed_schedule_has_no_parameters():
    assert list(VariationalDiffusion(learn_schedule=False).parameters()) == []


@pytest.mark.parametrize("prediction", ["eps", "v"])
def test_cosine_parameterisations_recover_x_and_eps_from_the_true_target(prediction):
    proc = CosineDiffusion(prediction)
    x, eps, t = torch.rand(5, 3, 4, 4) * 2 - 1, torch.randn(5, 3, 4, 4), torch.rand(5) * 0.9 + 0.05
    z = proc.noise(x, t, eps)
    alpha, sigma = (v.view(-1, 1, 1, 1) for v in proc.alpha_sigma(t))
    target = eps if prediction == "eps" else alpha * eps - sigma * x
    x_hat, eps_hat = proc.raw_to_x_eps(target, z, t)
    assert torch.allclose(x_hat, x, atol=1e-4) and torch.allclose(eps_hat, eps, atol=1e-4)


def test_cosine_logsnr_is_clipped_and_decreasing():
    proc = CosineDiffusion("v", -15.0, 15.0)
    lam = proc.logsnr(torch.linspace(0, 1, 11))
    assert math.isclose(lam[0].item(), 15.0, abs_tol=1e-3) and math.isclose(lam[-1].item(), -15.0, abs_tol=1e-3)
    assert (torch.diff(lam) < 0).all()


def test_build_process_from_config():
    assert isinstance(build_process(DiffusionConfig(process="vdm")), VariationalDiffusion)
    cos = build_process(DiffusionConfig(process="cosine", prediction="v"))
    assert isinstance(cos, CosineDiffusion) and cos.prediction == "v"


def test_sampler_yields_every_step_and_is_seeded():
    proc, net = CosineDiffusion("v"), PromptNet()
    prompt = torch.rand(3, 2)
    steps = list(iter_ancestral(proc, net, prompt, (3, 8, 8), steps=6, generator=torch.Generator().manual_seed(1)))
    assert [s.step for s in steps] == list(range(6)) and steps[-1].t == 0.0
    a = ancestral_sample(proc, net, prompt, (3, 8, 8), 6, torch.Generator().manual_seed(1))
    b = ancestral_sample(proc, net, prompt, (3, 8, 8), 6, torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and a.min() >= 0 and a.max() <= 1
    assert torch.allclose(a, proc.to_image_space(steps[-1].z))


def test_sampler_matches_the_data_for_an_oracle_denoiser():
    """With a network that predicts the true ε for a single data point, sampling returns that point."""
    proc = CosineDiffusion("eps")
    x0 = torch.rand(1, 3, 4, 4) * 1.6 - 0.8

    def oracle(z, t, prompt):
        alpha, sigma = (v.view(-1, 1, 1, 1) for v in proc.alpha_sigma(t))
        return (z - alpha * x0) / sigma

    out = ancestral_sample(proc, oracle, torch.zeros(2, 1), (3, 4, 4), 20, torch.Generator().manual_seed(0))
    assert torch.allclose(out, proc.to_image_space(x0).expand(2, -1, -1, -1), atol=1e-3)


def test_guidance_zero_is_conditional_and_needs_null_prompt_otherwise():
    proc, net = CosineDiffusion("v"), PromptNet()
    z, t, p = torch.randn(2, 3, 4, 4), torch.full((2,), 0.5), torch.rand(2, 2)
    assert torch.equal(guided_output(proc, net, z, t, p, 0.0), proc.network_output(net, z, t, p))
    with pytest.raises(ValueError, match="null prompt"):
        guided_output(proc, net, z, t, p, 2.0)
    null = torch.zeros(1, 2)
    cond, uncond = proc.network_output(net, z, t, p), proc.network_output(net, z, t, null.expand(2, 2))
    assert torch.allclose(guided_output(proc, net, z, t, p, 2.0, null), 3 * cond - 2 * uncond, atol=1e-5)
