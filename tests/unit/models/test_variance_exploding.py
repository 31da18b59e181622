"""Tests for the variance-exploding process: schedule, VP mapping, parameterisations, label dropout, one-network
conditional + unconditional denoising."""

import math

import pytest
import torch
from torch import nn

from conceptlab.analysis.mutual_information import GaussianMixture, GeometricSchedule, mutual_information_curve
from conceptlab.models.variance_exploding import (
    AttributePrompt,
    VarianceExploding,
    drop_attribute_blocks,
)


def test_schedule_is_geometric_and_maps_to_vp_logsnr():
    ve = VarianceExploding(0.01, 50.0)
    t = torch.linspace(0, 1, 11, dtype=torch.float64)
    ref = GeometricSchedule(0.01, 50.0)
    assert torch.allclose(ve.sigma(t), ref.sigma(t)) and torch.allclose(ve.g2(t), ref.g2(t))
    assert float(ve.sigma(torch.tensor(0.0))) == pytest.approx(0.01)
    assert float(ve.sigma(torch.tensor(1.0))) == pytest.approx(50.0)
    assert torch.allclose(ve.logsnr(t), -2 * ve.sigma(t).log())
    assert torch.allclose(ve.time_of_sigma(ve.sigma(t)), t)
    # g² = dσ²/dt, by finite differences
    h = 1e-6
    fd = (ve.sigma(t[1:-1] + h) ** 2 - ve.sigma(t[1:-1] - h) ** 2) / (2 * h)
    assert torch.allclose(ve.g2(t[1:-1]), fd, rtol=1e-5)
    # z_vp = (x + σε)/√(1+σ²)
    x, eps = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    tt = torch.rand(5, dtype=torch.float64)
    s = ve.sigma(tt)[:, None]
    assert torch.allclose(ve.noise(x, tt, eps), (x + s * eps) / (1 + s**2).sqrt())
    assert torch.allclose(ve.to_ve(ve.noise(x, tt, eps), tt), x + s * eps)


@pytest.mark.parametrize("prediction", ["eps", "v", "x"])
def test_oracle_output_denoises_exactly_and_has_zero_loss(prediction):
    """With one training point x*, the exact network output for each parameterisation gives x̂ = x* and loss 0."""
    ve = VarianceExploding(0.01, 50.0, prediction=prediction)
    x_star = torch.tensor([[0.3, -0.7, 0.5]])

    def oracle(z, t, prompt):
        alpha, sigma = (v[:, None] for v in ve.alpha_sigma(t))
        eps = (z - alpha * x_star) / sigma
        return {"eps": eps, "v": alpha * eps - sigma * x_star, "x": x_star.expand_as(z)}[prediction]

    x = x_star.expand(64, 3)
    loss, _ = ve.loss(oracle, x, torch.zeros(64, 1), torch.Generator().manual_seed(0))
    assert float(loss) < 1e-8
    z = ve.noise(x, torch.full((64,), 0.4), torch.randn(64, 3))
    x_hat, _ = ve.denoise(oracle, z, torch.full((64,), 0.4), torch.zeros(64, 1))
    assert torch.allclose(x_hat, x, atol=1e-4)
    wrong, _ = ve.loss(lambda z, t, p: torch.zeros_like(z), x, torch.zeros(64, 1), torch.Generator().manual_seed(0))
    assert float(wrong) > 0.05


def test_denoise_ve_round_trips_an_exact_ve_denoiser():
    ve = VarianceExploding(0.01, 50.0, prediction="x")
    mixture = GaussianMixture(torch.tensor([[2.0, 0.0], [-2.0, 0.0]]), std=0.5)
    as_model = ve.model_denoiser(mixture.denoise_uncond)

    def net(z, t, prompt):  # an x-predicting "network" that is the exact denoiser
        return as_model(z, t, prompt)

    x = torch.randn(50, 2, dtype=torch.float64) * 3
    sigma = torch.rand(50, dtype=torch.float64) * 10 + 0.05
    got = ve.denoise_ve(net, x, sigma, torch.zeros(50, 1))
    assert torch.allclose(got.double(), mixture.denoise_uncond(x, sigma), atol=1e-4)  # network outputs are float32


def test_attribute_prompt_encodes_one_hot_blocks_with_null_labels():
    ap = AttributePrompt(("wall_hue", "shape"), (10, 4))
    labels = torch.tensor([[3, 1], [9, 0]])
    p = ap.encode(labels)
    assert p.shape == (2, 14) and p[0, 3] == 1 and p[0, 11] == 1 and p.sum() == 4
    only = ap.only("shape", torch.tensor([2, 3]))
    assert only[:, :10].abs().sum() == 0 and only[0, 12] == 1 and only[1, 13] == 1
    assert ap.null(3).abs().sum() == 0
    with pytest.raises(ValueError, match="colour"):
        ap.only("colour", torch.tensor([0]))
    with pytest.raises(ValueError, match="out of range"):
        ap.encode(torch.tensor([[10, 0]]))


def test_label_dropout_nulls_each_attribute_block_independently():
    ap = AttributePrompt(("a", "b"), (3, 2))
    prompt = ap.encode(torch.tensor([[1, 1]]).expand(20000, 2))
    out = drop_attribute_blocks(prompt, ap.blocks, 0.3, torch.Generator().manual_seed(0))
    dropped = torch.stack([out[:, b].sum(1) == 0 for b in ap.blocks], 1).float()
    assert dropped.mean(0).tolist() == pytest.approx([0.3, 0.3], abs=0.015)
    assert float((dropped[:, 0] * dropped[:, 1]).mean()) == pytest.approx(0.09, abs=0.01)  # independent
    assert torch.equal(drop_attribute_blocks(prompt, ap.blocks, 0.0, None), prompt)
    assert drop_attribute_blocks(prompt, ap.blocks, 1.0, None).abs().sum() == 0
    with pytest.raises(ValueError, match="1.5"):
        drop_attribute_blocks(prompt, ap.blocks, 1.5, None)

    seen = []
    ve = VarianceExploding(label_dropout=0.5, attribute_sizes=(3, 2))
    ve.loss(lambda z, t, p: seen.append(p) or torch.zeros_like(z), torch.zeros(4000, 1), prompt[:4000],
            torch.Generator().manual_seed(1))
    null_rows = float((seen[0].abs().sum(1) == 0).float().mean())
    assert null_rows == pytest.approx(0.25, abs=0.03)  # both blocks dropped: p²
    with pytest.raises(ValueError, match="sum to 6"):
        VarianceExploding(label_dropout=0.5, attribute_sizes=(3, 3)).loss(
            lambda z, t, p: z, torch.zeros(4, 1), prompt[:4], None)


class TinyDenoiser(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1 + 16 + 2, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1))
        self.register_buffer("freq", torch.exp(torch.linspace(0, math.log(100), 8)))

    def forward(self, z, t, prompt):
        a = t[:, None] * self.freq
        return self.net(torch.cat([z, a.sin(), a.cos(), prompt], 1))


def test_one_network_learns_conditional_and_unconditional_denoisers():
    """x ∈ {−1, +1} with a binary label: after training with label dropout, D(x_σ, v) ≈ v and
    D(x_σ, null) ≈ E[x | x_σ] = tanh(x_σ/σ²) at moderate σ."""
    torch.manual_seed(0)
    ve = VarianceExploding(0.05, 20.0, prediction="v", label_dropout=0.5, attribute_sizes=(2,))
    net = TinyDenoiser()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(700):
        v = torch.randint(0, 2, (256,), generator=g)
        x = (2.0 * v - 1.0)[:, None]
        loss, _ = ve.loss(net, x, nn.functional.one_hot(v, 2).float(), g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    sigma = torch.full((200,), 0.8)
    v = torch.randint(0, 2, (200,), generator=g)
    x_ve = (2.0 * v - 1.0)[:, None] + sigma[:, None] * torch.randn(200, 1, generator=g)
    with torch.no_grad():
        cond = ve.denoise_ve(net, x_ve, sigma, nn.functional.one_hot(v, 2).float())
        uncond = ve.denoise_ve(net, x_ve, sigma, torch.zeros(200, 2))
    exact = torch.tanh(x_ve / 0.8**2)
    assert float((cond - (2.0 * v - 1.0)[:, None]).abs().mean()) < 0.1
    assert float((uncond - exact).abs().mean()) < 0.1
    assert float((uncond - (2.0 * v - 1.0)[:, None]).abs().mean()) > 0.2  # really unconditional


def test_mi_estimator_accepts_the_process_as_its_schedule():
    ve = VarianceExploding(0.01, 50.0)
    mixture = GaussianMixture(6.0 * torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]]), 0.3)
    curve = mutual_information_curve(mixture.denoise_cond, mixture.denoise_uncond, mixture.sample, ve,
                                     points=99, samples_per_point=64)
    assert float(curve.at(1.0)) == pytest.approx(math.log(4), rel=0.05)


@pytest.mark.parametrize("kw, match", [
    ({"sigma_min": 1.0, "sigma_max": 0.5}, "sigma_min"),
    ({"prediction": "score"}, "score"),
    ({"label_dropout": -0.1}, "-0.1"),
    ({"attribute_sizes": ()}, "attribute_sizes"),
])
def test_bad_arguments_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        VarianceExploding(**kw)
    with pytest.raises(ValueError, match="sigma must lie"):
        VarianceExploding(0.01, 50.0).time_of_sigma(torch.tensor([100.0]))
