"""Hooks restricted by diffusion time and CFG branch, and activations cached over sampling steps (tiny ConceptUNet)."""

import pytest
import torch

from conceptlab.models.unet import ModelConfig
from conceptlab.hooks import (
    HookNameError,
    SamplingContext,
    hook_points,
    restrict_hook,
    run_with_cache,
    run_with_hooks,
)
from conceptlab.models.diffusion import CosineDiffusion
from conceptlab.models.sampling import ancestral_sample, iter_ancestral
from conceptlab.models.unet import ConceptUNet

STEPS, N, SHAPE = 5, 3, (3, 8, 8)
NAME = "down.0.blocks.0.hook_concept"


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("sampling-hooks")


@pytest.fixture(scope="module")
def net() -> ConceptUNet:
    torch.manual_seed(0)
    cfg = ModelConfig(
        widths=[8, 16], blocks_per_level=1, mid_attention=False, dropout=0.0, pixel_unshuffle=2, norm_groups=4
    )
    model = ConceptUNet(cfg, prompt_dim=4)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # zero-initialised output convs would hide every edit
    return model.eval()


def sample(net, guidance: float = 0.0) -> torch.Tensor:
    prompt = torch.rand(N, 4, generator=torch.Generator().manual_seed(2))
    null = torch.zeros(1, 4) if guidance else None
    generator = torch.Generator().manual_seed(3)
    return ancestral_sample(CosineDiffusion("v"), net, prompt, SHAPE, STEPS, generator, guidance, null)


def clean(net) -> bool:
    return not any(hp.has_hooks or hp.context is not None for hp in hook_points(net).values())


def test_noop_hooks_leave_samples_bit_identical(net):
    base = sample(net, 1.5)
    noop = restrict_hook(lambda a, h: None, t_range=(0.2, 0.8), branch="cond")
    with run_with_hooks(net, [(lambda name: True, noop), (NAME, restrict_hook(lambda a, h: a, branch="uncond"))]):
        assert torch.equal(sample(net, 1.5), base)
    assert clean(net)


def test_context_published_per_step(net):
    seen: list[SamplingContext] = []
    with run_with_hooks(net, [("hook_out", lambda a, h: seen.append(h.context))]):
        prompt = torch.rand(N, 4)
        list(iter_ancestral(CosineDiffusion("v"), net, prompt, SHAPE, STEPS, None, 2.0, torch.zeros(1, 4)))
    assert [c.step for c in seen] == list(range(STEPS))
    assert [c.t for c in seen] == pytest.approx([i / STEPS for i in range(STEPS, 0, -1)])
    assert seen[0].is_cond.tolist() == [True] * N + [False] * N
    assert clean(net)


def test_cache_is_stacked_over_steps(net):
    images, cache = run_with_cache(net, lambda: sample(net, 2.0), [NAME, "hook_out"])
    assert images.shape == (N, *SHAPE)
    assert cache.activations[NAME].shape == (STEPS, N, 8)
    assert cache.activations["hook_out"].shape == (STEPS, N, *SHAPE)
    assert cache.t.tolist() == pytest.approx([i / STEPS for i in range(STEPS, 0, -1)])
    assert cache.step == list(range(STEPS))
    _, both = run_with_cache(net, lambda: sample(net, 2.0), NAME, t_range=(0.3, 0.7), branch="both")
    assert both.activations[NAME].shape == (2, 2 * N, 8)  # t = 0.6, 0.4
    assert torch.equal(both.activations[NAME][:, :N], cache.activations[NAME][1:3])
    assert clean(net)


def test_t_range_edits_only_steps_inside(net):
    def zero(a, h):
        return torch.zeros_like(a)

    _, base = run_with_cache(net, lambda: sample(net), "hook_out")
    hooks = [(NAME, restrict_hook(zero, (0.5, 0.8)))]
    _, edited = run_with_cache(net, lambda: sample(net), "hook_out", fwd_hooks=hooks)
    same = [torch.equal(a, b) for a, b in zip(base.activations["hook_out"], edited.activations["hook_out"])]
    assert same == [True, False, False, False, False]  # t = 1.0 untouched; later steps differ by the trajectory
    _, late = run_with_cache(net, lambda: sample(net), NAME, fwd_hooks=[(NAME, restrict_hook(zero, (0.0, 0.5)))])
    zeroed = [bool((a == 0).all()) for a in late.activations[NAME]]
    assert zeroed == [False, False, False, True, True]  # t = 0.4, 0.2


def test_branch_edits_only_cond_rows(net):
    _, base = run_with_cache(net, lambda: sample(net, 2.0), NAME, branch="both")
    hooks = [(NAME, restrict_hook(lambda a, h: a + 1.0, (1.0, 1.0), branch="cond"))]
    _, edited = run_with_cache(net, lambda: sample(net, 2.0), NAME, branch="both", fwd_hooks=hooks)
    first, after = base.activations[NAME][0], edited.activations[NAME][0]
    assert torch.allclose(after[:N], first[:N] + 1.0)
    assert torch.equal(after[N:], first[N:])


def test_hooks_removed_after_exception(net):
    def boom(a, h):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_with_cache(net, lambda: sample(net), NAME, fwd_hooks=[("hook_out", restrict_hook(boom, (0.0, 0.5)))])
    assert clean(net)


def test_bad_input_errors(net):
    with pytest.raises(HookNameError, match="down.0.blocks.0.hook_concept"):
        run_with_cache(net, lambda: sample(net), "down.0.block.0.hook_concept")
    with pytest.raises(ValueError, match="unknown branch"):
        restrict_hook(lambda a, h: None, branch="negative")
    with pytest.raises(ValueError, match="t_range"):
        run_with_cache(net, lambda: sample(net), NAME, t_range=(0.5, 1.5))
    with pytest.raises(ValueError, match="nothing cached"):
        run_with_cache(net, lambda: sample(net), NAME, t_range=(0.05, 0.1))
    with pytest.raises(RuntimeError, match="SamplingContext"):
        with run_with_hooks(net, [(NAME, restrict_hook(lambda a, h: None, (0.0, 1.0)))]):
            net(torch.randn(1, *SHAPE), torch.full((1,), 0.5), torch.rand(1, 4))
    assert clean(net)
