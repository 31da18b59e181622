"""Tests for the forking sampler: shapes, determinism, independence of forks, exact samples with an exact denoiser."""

import pytest
import torch

from conceptlab.analysis.mutual_information import GaussianMixture
from conceptlab.models.diffusion import CosineDiffusion
from conceptlab.models.forking import fork_sample, iter_forks, network_denoiser, time_grid
from conceptlab.models.variance_exploding import VarianceExploding

VE = VarianceExploding(0.01, 50.0)
CORNERS = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [1.0, -1.0], [-1.0, -1.0]])
MIXTURE = GaussianMixture(6.0 * CORNERS, std=0.3)
EXACT = VE.model_denoiser(MIXTURE.denoise_uncond)


def classes(x: torch.Tensor) -> torch.Tensor:
    return torch.cdist(x.double(), MIXTURE.means).argmin(-1)


def run(taus, roots=8, forks=4, seed=0, steps=40):
    prompt = torch.zeros(roots, 1)
    gen = torch.Generator().manual_seed(seed)
    return list(iter_forks(VE, EXACT, prompt, (2,), taus, forks, steps, gen, clip_denoised=False))


def test_endings_are_roots_by_forks_and_deterministic():
    a, b, c = run([0.0, 0.37, 1.0]), run([0.0, 0.37, 1.0]), run([0.0, 0.37, 1.0], seed=1)
    for fa, fb, fc in zip(a, b, c):
        assert fa.endings.shape == (8, 4, 2) and fa.roots.shape == (8, 2)
        assert torch.equal(fa.endings, fb.endings) and not torch.equal(fa.endings, fc.endings)
    assert [f.tau for f in a] == [0.0, 0.37, 1.0] and a[1].t == pytest.approx(0.63)
    # forks of one root differ (independent noise) before τ = 1; at τ = 1 every ending is the finished root
    assert bool((a[1].endings[:, 0] != a[1].endings[:, 1]).any(-1).all())
    assert torch.equal(a[2].endings, a[2].roots[:, None].expand(8, 4, 2))
    # the root trajectory is shared across fork times: forking at 0.37 alone reaches the same root state
    single = fork_sample(VE, EXACT, torch.zeros(8, 1), (2,), 0.37, 4, 40, torch.Generator().manual_seed(0), False)
    assert torch.equal(single.roots, run([0.37])[0].roots)


def test_fork_times_are_inserted_into_the_grid():
    grid = time_grid(4, [0.1, 0.5])
    assert grid == [1.0, 0.9, 0.75, 0.5, 0.25, 0.0]


def test_exact_denoiser_samples_the_mixture():
    """Forks at τ = 0 are independent samples: classes uniform, within-class std = the mixture's 0.3."""
    fork = run([0.0], roots=64, forks=64, steps=100)[0]
    x = fork.endings.reshape(-1, 2)
    k = classes(x)
    freq = torch.bincount(k, minlength=4).double() / k.numel()
    assert torch.allclose(freq, torch.full((4,), 0.25, dtype=torch.float64), atol=0.03)
    within = (x.double() - MIXTURE.means[k]).std(0)
    assert torch.allclose(within, torch.full((2,), 0.3, dtype=torch.float64), rtol=0.1)
    # late forks agree on the class: the class is committed
    late = run([0.9], roots=64, forks=8, steps=100)[0]
    assert bool((classes(late.endings) == classes(late.endings[:, :1])).all())


def test_works_with_a_network_under_another_process():
    process = CosineDiffusion("eps")
    net = lambda z, t, prompt: torch.zeros_like(z) + prompt[:, :1, None, None]
    fork = fork_sample(process, network_denoiser(process, net), torch.ones(3, 2), (1, 4, 4), 0.5, 2, 10,
                       torch.Generator().manual_seed(0))
    assert fork.endings.shape == (3, 2, 1, 4, 4) and torch.isfinite(fork.endings).all()


@pytest.mark.parametrize("kw, match", [
    ({"taus": [1.5]}, "tau"),
    ({"taus": [-0.1]}, "tau"),
    ({"taus": [0.5, 0.2]}, "increasing"),
    ({"forks": 1}, "K"),
    ({"steps": 0}, "steps"),
])
def test_bad_input_is_rejected(kw, match):
    args = {"taus": [0.5], "forks": 2, "steps": 5} | kw
    with pytest.raises(ValueError, match=match):
        list(iter_forks(VE, EXACT, torch.zeros(2, 1), (2,), args["taus"], args["forks"], args["steps"]))


@pytest.mark.parametrize("process", [CosineDiffusion("v"), VE], ids=["cosine", "ve"])
def test_forking_and_plain_ancestral_sampling_agree_step_for_step(process):
    """Both samplers take `models.sampling.ancestral_step`: with the same network, seed and grid, the roots the
    forking sampler holds at each fork τ are exactly the plain sampler's z at t = 1 − τ."""
    from conceptlab.models.sampling import iter_ancestral
    from conceptlab.models.unet import ConceptUNet, ModelConfig

    torch.manual_seed(0)
    net = ConceptUNet(ModelConfig(widths=[8, 16], blocks_per_level=1, norm_groups=4, attention_heads=2,
                                  dropout=0.0), prompt_dim=3, image_channels=1).eval()
    for p in net.parameters():  # zero-initialised output layers would make every step trivially equal
        p.data.add_(0.05 * torch.randn_like(p))
    prompt = torch.randn(4, 3)
    steps, taus = 10, [0.2, 0.5, 0.9]
    plain = {round(1.0 - s.t, 6): s.z for s in
             iter_ancestral(process, net, prompt, (1, 8, 8), steps, torch.Generator().manual_seed(3))}
    for tau in taus:  # (one fork time per call: after a fork the endings' noise shifts the generator's stream)
        single = fork_sample(process, network_denoiser(process, net), prompt, (1, 8, 8), tau, 2, steps,
                             torch.Generator().manual_seed(3))
        assert torch.equal(single.roots, plain[round(tau, 6)]), tau
