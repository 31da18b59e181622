"""Tests for linear probes on synthetic activations with a known linear signal (Bayes accuracy Φ(μ))."""

import math

import pytest
import torch
from torch import nn

from conceptlab.analysis.linear_probes import cluster_totals, linear_probe_curves, noisy_activations, pooled_features
from conceptlab.hooks import HookPoint, name_hook_points
from conceptlab.models.variance_exploding import VarianceExploding


def phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def test_held_out_accuracy_matches_bayes_accuracy_along_tau():
    g = torch.Generator().manual_seed(0)
    n, d = 4000, 10
    binary = torch.randint(0, 2, (n,), generator=g)
    three = torch.randint(0, 3, (n,), generator=g)
    signal = [0.0, 0.5, 1.0, 2.0]  # separation μ along one direction for the binary attribute
    triangle = torch.tensor([[1.0, 0.0], [-0.5, 0.866], [-0.5, -0.866]]) * 6
    acts = torch.randn(len(signal), n, d, generator=g)
    for i, mu in enumerate(signal):
        acts[i, :, 0] += (2.0 * binary - 1.0) * mu
        acts[i, :, 1:3] += triangle[three] * (i / 3)  # the 3-class attribute appears linearly with τ
    taus = [0.0, 0.3, 0.6, 0.9]
    curves = linear_probe_curves(acts, taus, {"b": binary, "t": three}, {"b": 2, "t": 3}, test_fraction=0.5)
    b, t = curves["b"], curves["t"]
    assert b.n_test == 2000 and b.chance == 0.5 and t.chance == pytest.approx(1 / 3)
    assert 0.45 < b.majority < 0.55
    for i, mu in enumerate(signal):
        assert float(b.accuracy[i]) == pytest.approx(phi(mu), abs=0.035), (mu, float(b.accuracy[i]), phi(mu))
    assert float(t.accuracy[0]) == pytest.approx(1 / 3, abs=0.04)
    assert float(t.accuracy[-1]) > 0.99


def test_pooling_and_noisy_activations_of_a_network():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 1)
            self.hook_mid = HookPoint()
            name_hook_points(self)

        def forward(self, z, t, prompt):
            return self.hook_mid(self.conv(z))

    net = Net()
    x0 = torch.ones(6, 1, 4, 4)
    acts = noisy_activations(VarianceExploding(), net, "hook_mid", x0, [0.0, 1.0], torch.zeros(6, 3),
                             torch.Generator().manual_seed(0), batch_size=4)
    assert acts.shape == (2, 6, 2, 4, 4)
    assert pooled_features(acts[0], pool=2).shape == (6, 8) and pooled_features(acts[0]).shape == (6, 32)
    pooled = noisy_activations(VarianceExploding(), net, "hook_mid", x0, [0.5], torch.zeros(6, 3), pool=1)
    assert pooled.shape == (1, 6, 2)


def test_bad_input_is_rejected():
    acts = torch.randn(2, 20, 3)
    y = torch.randint(0, 2, (20,))
    with pytest.raises(ValueError, match="tau"):
        linear_probe_curves(acts, [0.0, 1.3], {"a": y}, {"a": 2})
    with pytest.raises(ValueError, match="time rows"):
        linear_probe_curves(acts, [0.5], {"a": y}, {"a": 2})
    with pytest.raises(ValueError, match="same attributes"):
        linear_probe_curves(acts, [0.0, 1.0], {"a": y}, {"b": 2})
    with pytest.raises(ValueError, match="test_fraction"):
        linear_probe_curves(acts, [0.0, 1.0], {"a": y}, {"a": 2}, test_fraction=1.0)
    with pytest.raises(ValueError, match="labels must lie"):
        linear_probe_curves(acts, [0.0, 1.0], {"a": y + 5}, {"a": 2})


def test_a_group_split_holds_out_whole_groups_and_a_probe_cannot_score_by_recognising_templates():
    from conceptlab.analysis.linear_probes import train_test_split

    groups = torch.arange(20).repeat(8)  # 20 templates, each repeated 8 times
    train, test = train_test_split(160, 0.3, seed=0, groups=groups)
    assert len(train) + len(test) == 160 and not set(groups[train].tolist()) & set(groups[test].tolist())
    assert len(set(groups[test].tolist())) == 6
    # labels that are a random function of the template: nothing to generalise, only templates to recognise
    g = torch.Generator().manual_seed(0)
    templates, labels_of = torch.randn(20, 64, generator=g), torch.randint(0, 2, (20,), generator=g)
    acts = (templates[groups] + 0.01 * torch.randn(160, 64, generator=g))[None]
    row_split = linear_probe_curves(acts, [1.0], {"a": labels_of[groups]}, {"a": 2}, test_fraction=0.3, seed=0)
    group_split = linear_probe_curves(acts, [1.0], {"a": labels_of[groups]}, {"a": 2}, test_fraction=0.3, seed=0,
                                      groups=groups)
    assert row_split["a"].accuracy[0] == 1.0  # every test row's template was in training: memorised
    assert group_split["a"].accuracy[0] < 0.9  # unseen templates: about chance
    curve = group_split["a"]  # its held-out rows as per-template units: 6 templates × 8 copies
    totals, sizes = cluster_totals(curve.test_correct, curve.test_groups)
    assert totals.shape == (1, 6) and sizes.tolist() == [8.0] * 6
    assert float(totals.sum() / sizes.sum()) == pytest.approx(float(curve.accuracy[0]))
    with pytest.raises(ValueError, match="groups must be"):
        cluster_totals(curve.test_correct, curve.test_groups[:3])
    with pytest.raises(ValueError, match="groups must be"):
        train_test_split(160, 0.3, seed=0, groups=groups[:10])
    with pytest.raises(ValueError, match="cannot split 2 groups"):
        train_test_split(4, 0.1, seed=0, groups=torch.tensor([0, 0, 1, 1]))
