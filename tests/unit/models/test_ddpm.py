"""Discrete DDPM: textbook schedules, the sampler step is Ho et al.'s posterior, oracle sampling, training, CFG."""

import math

import numpy as np
import pytest
import torch
from torch import nn

from conceptlab.models.unet import ModelConfig
from conceptlab.models.ddpm import DDPM, build_ddpm, drop_labels
from conceptlab.models.diffusion_model import DiffusionModel
from conceptlab.models.sampling import ancestral_sample
from conceptlab.models.unet import ConceptUNet


def test_linear_schedule_matches_the_textbook_chain():
    proc = build_ddpm(1000, "linear", 1e-4, 0.02)
    betas = np.linspace(1e-4, 0.02, 1000)
    abar = np.cumprod(1.0 - betas)
    assert abar[-1] == pytest.approx(4.0358e-5, rel=1e-3)  # the well-known ᾱ_T of Ho et al.'s schedule
    k = torch.tensor([1, 10, 250, 500, 999, 1000])
    alpha, sigma = proc.alpha_sigma(k.float() / 1000)
    assert np.allclose(alpha.numpy(), np.sqrt(abar[k - 1]), rtol=1e-5)
    assert np.allclose(sigma.numpy(), np.sqrt(1 - abar[k - 1]), rtol=1e-4)
    lam = proc.logsnr(torch.linspace(0, 1, 101))
    assert math.isinf(lam[0].item()) and lam[0] > 0 and (torch.diff(lam[1:]) < 0).all()
    assert lam[-1].item() == pytest.approx(math.log(abar[-1] / (1 - abar[-1])), rel=1e-5)
    assert proc.step_of_time(torch.tensor([0.25])).item() == 250


def test_cosine_schedule_follows_the_squared_cosine():
    proc = build_ddpm(200, "cosine")
    f = lambda k: math.cos((k / 200 + 0.008) / 1.008 * math.pi / 2) ** 2  # noqa: E731
    for k in (1, 50, 100, 150):
        assert proc.alphas_cumprod[k].item() == pytest.approx(f(k) / f(0), rel=1e-9)
    assert proc.betas.max().item() == pytest.approx(0.999)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_sampler_step_is_the_ddpm_posterior(schedule):
    """c = 1 − SNR(t)/SNR(s) = β_k/(1−ᾱ_k) and c·σ_s² = β̃_k for t = k/T, s = (k−1)/T (see models.sampling)."""
    T = 50
    proc = build_ddpm(T, schedule)
    betas, abar = proc.betas, proc.alphas_cumprod
    for k in (2, 10, 25, 50):
        t, s = torch.tensor([k / T]), torch.tensor([(k - 1) / T])
        c = -torch.expm1(proc.logsnr(t).double() - proc.logsnr(s).double())
        var = c * proc.alpha_sigma(s)[1].double() ** 2
        assert c.item() == pytest.approx((betas[k - 1] / (1 - abar[k])).item(), rel=1e-4)
        assert var.item() == pytest.approx((betas[k - 1] * (1 - abar[k - 1]) / (1 - abar[k])).item(), rel=1e-4)


class GaussianOracle(nn.Module):
    """The exact ε̂ for data with i.i.d. N(m, s²) pixels: ε̂ = (z − α·E[x|z]) / σ."""

    def __init__(self, proc: DDPM, m: float, s: float):
        super().__init__()
        self.proc, self.m, self.s = proc, m, s

    def forward(self, z, t, prompt):
        alpha, sigma = (v.view(-1, 1, 1, 1) for v in self.proc.alpha_sigma(t))
        gain = alpha * self.s**2 / (alpha**2 * self.s**2 + sigma**2)
        x_hat = self.m + gain * (z - alpha * self.m)
        return (z - alpha * x_hat) / sigma


def ddpm_chain_moments(abar: np.ndarray, steps: int, m: float, s: float) -> tuple[float, float]:
    """Mean and std of Ho et al.'s ancestral chain (σ_k² = β̃_k, strided over `steps`) driven by the Gaussian
    oracle, propagated exactly (the chain is linear-Gaussian); `abar` = ᾱ_0..ᾱ_T from the textbook βs."""
    T = len(abar) - 1
    grid = [round(i * T / steps) for i in range(steps, -1, -1)]
    mean, var = 0.0, 1.0  # z_T ~ N(0, 1)
    for k, j in zip(grid[:-1], grid[1:]):
        a_k = abar[k]
        gain = np.sqrt(a_k) * s**2 / (a_k * s**2 + 1 - a_k)  # x̂ = m + gain·(z − √ᾱ_k m)
        if j == 0:
            return m + gain * (mean - np.sqrt(a_k) * m), gain * np.sqrt(var)
        a_j = abar[j]
        beta = 1 - a_k / a_j
        c1, c2 = np.sqrt(a_j) * beta / (1 - a_k), np.sqrt(1 - beta) * (1 - a_j) / (1 - a_k)
        mean = c1 * (m + gain * (mean - np.sqrt(a_k) * m)) + c2 * mean
        var = (c1 * gain + c2) ** 2 * var + beta * (1 - a_j) / (1 - a_k)
    raise AssertionError("unreachable")


@pytest.mark.parametrize("T, steps", [(100, 100), (100, 20), (1000, 1000)])
def test_oracle_denoiser_samples_what_the_ddpm_chain_predicts(T, steps):
    """Gaussian data, exact denoiser: sample moments match the textbook chain; at T = steps = 1000 the data's."""
    proc = build_ddpm(T, "linear", 1e-4, 0.02 * 1000 / T)
    abar = np.concatenate([[1.0], np.cumprod(1 - np.linspace(1e-4, 0.02 * 1000 / T, T))])
    m, s = 0.2, 0.2
    x = ancestral_sample(proc, GaussianOracle(proc, m, s), torch.zeros(8, 1), (1, 32, 32), steps,
                         torch.Generator().manual_seed(0))
    x = proc.to_model_space(x)  # back to [-1, 1], where the data lives
    mean, std = ddpm_chain_moments(abar, steps, m, s)
    assert x.mean().item() == pytest.approx(mean, abs=0.006)
    assert x.std().item() == pytest.approx(std, rel=0.02)
    if steps == 1000:
        assert x.std().item() == pytest.approx(s, rel=0.03)


def test_oracle_on_a_single_data_point_samples_that_point():
    proc = build_ddpm(100, "linear", 1e-4, 0.2)
    point = torch.rand(1, 1, 8, 8, generator=torch.Generator().manual_seed(3)) * 1.6 - 0.8
    proc_net = GaussianOracle(proc, 0.0, 1e-6)
    proc_net.m = point  # E[x | z] = the point itself
    out = ancestral_sample(proc, proc_net, torch.zeros(4, 1), (1, 8, 8), 100, torch.Generator().manual_seed(1))
    assert torch.allclose(proc.to_model_space(out), point.expand(4, -1, -1, -1), atol=1e-4)


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 16, 3, padding=1), nn.GELU(), nn.Conv2d(16, 1, 3, padding=1))

    def forward(self, z, t, prompt):
        return self.net(torch.cat([z, t.view(-1, 1, 1, 1).expand_as(z)], 1))


def test_loss_decreases_on_a_toy_problem():
    torch.manual_seed(0)
    proc, net = build_ddpm(100, "cosine"), SmallNet()
    data = torch.zeros(16, 1, 8, 8)
    data[:, :, 2:6, 2:6] = 1.0  # one fixed square
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(150):
        loss, metrics = proc.loss(net, proc.to_model_space(data), torch.zeros(16, 1), g)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(metrics["loss"].item())
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])


def test_ddpm_drives_the_concept_unet_with_guidance():
    torch.manual_seed(0)
    cfg = ModelConfig(widths=[16, 32], blocks_per_level=1, norm_groups=4, attention_heads=2, dropout=0.0)
    model = DiffusionModel(ConceptUNet(cfg, prompt_dim=2, image_channels=1), build_ddpm(20, "cosine"), (1, 16, 16))
    images, prompts = torch.rand(4, 1, 16, 16), torch.rand(4, 2) * 16
    loss, _ = model.loss(images, drop_labels(prompts, 0.5, -1.0, torch.Generator().manual_seed(0)),
                         torch.Generator().manual_seed(0))
    loss.backward()
    assert torch.isfinite(loss)
    out = model.sample(prompts, steps=5, generator=torch.Generator().manual_seed(0), guidance_scale=1.0,
                       null_prompt=torch.full((1, 2), -1.0))
    assert out.shape == (4, 1, 16, 16) and out.min() >= 0 and out.max() <= 1


def test_drop_labels_nulls_whole_rows_at_the_given_rate():
    prompts = torch.rand(4000, 3) + 1.0
    out = drop_labels(prompts, 0.1, -1.0, torch.Generator().manual_seed(0))
    dropped = (out == -1.0).all(dim=1)
    assert ((out == -1.0).any(dim=1) == dropped).all()  # a row is nulled whole or not at all
    assert torch.equal(out[~dropped], prompts[~dropped])
    assert dropped.float().mean().item() == pytest.approx(0.1, abs=0.015)
    assert drop_labels(prompts, 0.0) is prompts


def test_bad_input():
    with pytest.raises(ValueError, match="schedule"):
        build_ddpm(10, "sigmoid")
    with pytest.raises(ValueError, match="steps"):
        build_ddpm(0)
    with pytest.raises(ValueError, match="betas"):
        DDPM(torch.tensor([0.1, 1.0]))
    with pytest.raises(ValueError, match="beta_start"):
        build_ddpm(10, "linear", 0.02, 1e-4)
    with pytest.raises(ValueError, match="dropout"):
        drop_labels(torch.zeros(2, 2), 1.5)


def _ddpm_recording_steps():
    """A micro DDPM model (T = 100) and the list its network appends each queried chain step k = t·T to."""
    from conceptlab.models.diffusion_model import build_model
    from conceptlab.models.processes import DiffusionConfig

    torch.manual_seed(0)
    model = build_model(ModelConfig(widths=[8], blocks_per_level=1, norm_groups=4, mid_attention=False),
                        DiffusionConfig(process="ddpm", ddpm_steps=100, sample_steps=10), 2, 4, 1).eval()
    queried = []
    forward = model.net.forward
    model.net.forward = lambda z, t, p: (queried.append(float(t[0]) * 100), forward(z, t, p))[1]
    return model, queried


def test_sample_steps_that_do_not_divide_T_are_refused_wherever_a_grid_is_built():
    from conceptlab.models.forking import fork_sample, network_denoiser

    model, queried = _ddpm_recording_steps()
    with pytest.raises(ValueError, match=r"sample steps \(7\) must divide the chain's T = 100 steps"):
        model.sample(torch.zeros(1, 2), steps=7, generator=torch.Generator().manual_seed(0))
    assert not queried  # refused before the network is asked anything
    out = model.sample(torch.zeros(1, 2), steps=10, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 1, 4, 4)
    assert queried == pytest.approx([100.0 - 10 * i for i in range(10)])  # k = 100, 90, …, 10: trained steps
    with pytest.raises(ValueError, match=r"sample steps \(7\)"):
        ancestral_sample(model.process, model.net, torch.zeros(1, 2), (1, 4, 4), 7)
    with pytest.raises(ValueError, match=r"sample steps \(7\)"):
        fork_sample(model.process, network_denoiser(model.process, model.net), torch.zeros(1, 2), (1, 4, 4), 0.5, 2,
                    steps=7)
    model.process.check_sample_steps(25)  # divisors of T pass


def test_fork_times_between_the_chains_steps_are_refused_on_trained_ones_the_network_sees_only_trained_steps():
    """The forking sampler inserts each fork time 1 − τ into its grid: under a DDPM a τ between two of the chain's
    steps would query the network at a step it never trained on (0.555 of T = 100 is step 44.5); refused, before the
    network is asked anything. A τ on the chain (0.55: step 45) forks, and every time the network sees is a step."""
    from conceptlab.models.forking import fork_sample, network_denoiser

    model, queried = _ddpm_recording_steps()
    denoiser = network_denoiser(model.process, model.net)
    with pytest.raises(ValueError, match=r"fork time\(s\) tau = 0.555 fall between the chain's T = 100 steps"):
        fork_sample(model.process, denoiser, torch.zeros(1, 2), (1, 4, 4), 0.555, 2, steps=10)
    assert not queried
    fork_sample(model.process, denoiser, torch.zeros(1, 2), (1, 4, 4), 0.55, 2, steps=10,
                generator=torch.Generator().manual_seed(0))
    assert any(abs(k - 45.0) < 1e-4 for k in queried), queried  # the fork's step (t in float32: 1e-6 off)
    assert all(abs(k - round(k)) < 1e-4 for k in queried), queried
