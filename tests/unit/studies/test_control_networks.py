"""The network controls of the representation analyses: `untrained` (exactly as training starts) and `random_init`
(random weights in every layer)."""

import torch
from torch import nn

from conceptlab.experiments.loading import load_config
from conceptlab.studies import build_data
from conceptlab.studies.base import random_init_model, untrained_model


def _zeroed(model) -> list[str]:
    return [name for name, m in model.named_modules()
            if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)) and not bool(m.weight.detach().any())]


def test_random_init_redraws_the_zero_initialised_layers_so_the_prompt_reaches_the_output():
    cfg = load_config("micro")
    dgp = build_data(cfg.data)
    like = nn.Linear(1, 1)
    untrained, random = untrained_model(cfg, dgp, like), random_init_model(cfg, dgp, like)
    assert _zeroed(untrained) and not _zeroed(random)  # residual branches' last convs and the output conv
    # every layer that was not zero is drawn the same (same seed, same order)
    same = [n for n, p in untrained.named_parameters() if p.detach().any() and torch.equal(p, dict(random.named_parameters())[n])]
    assert len(same) > 0.5 * sum(1 for _, p in untrained.named_parameters() if p.detach().any())
    prompts = torch.stack([dgp.class_prompt(c) for c in dgp.classes[:2]])
    z = torch.randn(1, *untrained.image_shape, generator=torch.Generator().manual_seed(0)).expand(2, -1, -1, -1)
    t = torch.full((2,), 0.5)
    with torch.no_grad():
        a, b = untrained.net(z, t, prompts), random.net(z, t, prompts)
    assert torch.equal(a[0], a[1]) and float(a.abs().max()) == 0.0  # the zero output whatever the prompt
    assert not torch.allclose(b[0], b[1])  # a random network's output depends on the prompt
    again = random_init_model(cfg, dgp, like)
    assert all(torch.equal(p, q) for p, q in zip(random.parameters(), again.parameters()))  # seeded
