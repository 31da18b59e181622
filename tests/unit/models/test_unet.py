"""Tests for ConceptUNet: the paper's parameter count, shapes, initialisation, conditioning and hook points."""

import pytest
import torch

from conceptlab.models.unet import ModelConfig
from conceptlab.hooks import cache_activations, hook_points, run_with_hooks
from conceptlab.models.unet import ConceptUNet, count_parameters

TINY = dict(widths=[32, 64], blocks_per_level=1, pixel_unshuffle=2, dropout=0.0)


def tiny_model(seed: int = 0, perturb: bool = True, **overrides) -> ConceptUNet:
    """A tiny UNet; `perturb` adds noise to all weights so zero-initialised convs do not hide the conditioning."""
    torch.manual_seed(seed)
    model = ConceptUNet(ModelConfig(**{**TINY, **overrides}), prompt_dim=4)
    if perturb:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def inputs(n: int = 2, size: int = 32, prompt_dim: int = 4):
    g = torch.Generator().manual_seed(1)
    return torch.randn(n, 3, size, size, generator=g), torch.rand(n, generator=g), torch.rand(n, prompt_dim, generator=g)


def test_paper_parameter_count():
    model = ConceptUNet(ModelConfig(), prompt_dim=11)
    assert count_parameters(model) == 10_913_859
    assert sum(count_parameters(m) for m in model.concept_embedders().values()) == 505_088
    assert len(model.concept_embedders()) == 14  # 3 levels × 2 × (down, up) + 2 middle


@pytest.mark.parametrize("widths", [[32], [32, 64], [32, 64, 64], [32, 32, 64, 64]])
@pytest.mark.parametrize("pixel_unshuffle", [1, 2])
def test_output_shape(widths, pixel_unshuffle):
    model = tiny_model(widths=widths, pixel_unshuffle=pixel_unshuffle, mid_attention=len(widths) % 2 == 0)
    x, t, p = inputs()
    assert model(x, t, p).shape == x.shape


def test_image_size_must_divide():
    model = tiny_model(widths=[32, 64, 64])
    x, t, p = inputs(size=36)
    with pytest.raises(ValueError, match="divisible"):
        model(x, t, p)


def test_fresh_model_outputs_zeros():
    x, t, p = inputs()
    assert torch.equal(tiny_model(perturb=False)(x, t, p), torch.zeros_like(x))


def test_prompt_and_time_change_output():
    model = tiny_model()
    x, t, p = inputs()
    with torch.no_grad():
        out = model(x, t, p)
        assert not torch.allclose(out, model(x, t, p + 0.5))
        assert not torch.allclose(out, model(x, 1 - t, p))


def test_noop_hooks_leave_output_bit_identical():
    model = tiny_model()
    x, t, p = inputs()
    with torch.no_grad():
        base = model(x, t, p)
        with run_with_hooks(model, [(lambda name: True, lambda a, h: None)]):
            assert torch.equal(model(x, t, p), base)


def test_cache_shapes_per_call_and_concept_embedding():
    model = tiny_model()
    x, t, p = inputs(n=3)
    names = ["hook_prompt", "down.0.blocks.0.hook_concept", "mid.attn.hook_out", "up.1.blocks.0.hook_in", "hook_out"]
    with torch.no_grad(), cache_activations(model, names) as cache:
        for _ in range(2):
            model(x, t, p)
    shapes = {name: [tuple(a.shape) for a in acts] for name, acts in cache.items()}
    assert shapes == {
        "hook_prompt": [(3, 4)] * 2,
        "down.0.blocks.0.hook_concept": [(3, 32)] * 2,
        "mid.attn.hook_out": [(3, 64, 8, 8)] * 2,
        "up.1.blocks.0.hook_in": [(3, 64, 16, 16)] * 2,
        "hook_out": [(3, 3, 32, 32)] * 2,
    }
    embedder = model.concept_embedders()["down.0.blocks.0.concept_embedder"]
    with torch.no_grad():
        assert torch.allclose(embedder(model.normalised_prompt(p)), cache["down.0.blocks.0.hook_concept"][0])


def test_editing_concept_embeddings_changes_output():
    model = tiny_model()
    x, t, p = inputs()
    with torch.no_grad():
        base = model(x, t, p)
        with run_with_hooks(model, [(lambda name: name.endswith("hook_concept"), lambda a, h: a + 1.0)]):
            assert not torch.allclose(model(x, t, p), base)


def test_hooks_removed_after_exception_in_model():
    model = tiny_model()
    x, t, p = inputs()
    with pytest.raises(RuntimeError, match="stop"):
        with run_with_hooks(model, [("mid.blocks.0.hook_out", lambda a, h: a * 0)]):
            raise RuntimeError("stop")
    assert not any(hp.has_hooks for hp in hook_points(model).values())


def test_unknown_hook_name_lists_valid_names():
    model = tiny_model()
    with pytest.raises(KeyError, match="down.0.blocks.0.hook_concept"):
        with run_with_hooks(model, [("down.0.block.0.hook_concept", lambda a, h: None)]):
            pass


def test_shared_concept_embedder():
    model = tiny_model(concept_embedder="shared")
    assert list(model.concept_embedders()) == ["concept_embedder"]
    names = list(hook_points(model))
    assert "hook_concept" in names and not any(n.endswith(".hook_concept") for n in names)
    x, t, p = inputs()
    with torch.no_grad():
        assert not torch.allclose(model(x, t, p), model(x, t, p + 0.5))


def test_bf16_autocast_and_backward():
    model = tiny_model().train()
    x, t, p = inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = (model(x, t, p) + x - torch.randn_like(x)).pow(2).mean()
    loss.backward()
    grads = [q.grad for q in model.concept_embedders()["mid.blocks.0.concept_embedder"].parameters()]
    assert all(g is not None and g.abs().sum() > 0 for g in grads)


def test_uniform_dropout_masks_have_the_distribution_of_torchs_and_leave_existing_run_ids_alone():
    import torch.nn.functional as F

    from conceptlab.experiments.loading import load_config
    from conceptlab.models.unet import MaskDropout

    x = torch.ones(400, 500)
    torch.manual_seed(0)
    uniform = MaskDropout(0.1, "uniform").train()(x)
    assert abs((uniform == 0).float().mean().item() - 0.1) < 0.005  # 200,000 draws: 7.5 standard errors (0.00067)
    assert sorted(uniform.unique().tolist()) == [0.0, pytest.approx(1 / 0.9)]  # kept units scaled by 1/(1 − p)
    torch.manual_seed(1)
    ours = MaskDropout(0.1, "bernoulli").train()(x)
    torch.manual_seed(1)
    assert torch.equal(ours, F.dropout(x, 0.1, True))  # the default is torch's dropout, bit for bit
    for mask in ("bernoulli", "uniform"):
        assert torch.equal(MaskDropout(0.3, mask).eval()(x), x) and torch.equal(MaskDropout(0.0, mask).train()(x), x)
    with pytest.raises(ValueError, match="bernoulli"):
        MaskDropout(0.1, "gaussian")
    # at its default the new key is left out of the training hash, so recorded runs keep their ids
    tiny = "hidden-emergence-paper-tiny"  # recorded runs, default masks
    assert load_config(tiny).training_hash() == load_config(tiny, ["model.dropout_mask=bernoulli"]).training_hash()
    assert load_config(tiny).training_hash() != load_config(tiny, ["model.dropout_mask=uniform"]).training_hash()
    assert load_config(tiny).training_hash() != load_config(tiny, ["model.dropout_mask=sfc64"]).training_hash()



def test_attention_runs_the_math_kernel_by_default_and_the_fused_kernel_when_asked(monkeypatch):
    import torch.nn.functional as F

    from conceptlab.models.unet import Attention, use_fused_attention

    attention, math_kernel, packed = F.scaled_dot_product_attention, torch.ops.aten._scaled_dot_product_attention_math, []
    model = tiny_model(mid_attention=True)
    x, t, p = inputs(n=4)
    with torch.no_grad():
        default = model(x, t, p)
        # off by default: strided q/k/v, which torch runs through its math kernel — the numbers runs always had
        monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, k, v: math_kernel(q, k, v)[0])
        assert torch.equal(model(x, t, p), default)

        def recording(q, k, v):
            packed.append(all(a.stride(-1) == 1 for a in (q, k, v)))  # what the fused kernel needs
            return attention(q, k, v)

        monkeypatch.setattr(F, "scaled_dot_product_attention", recording)
        model(x, t, p)
        assert not any(m.fused for m in model.modules() if isinstance(m, Attention))  # off in a fresh network
        fused = use_fused_attention(model)(x, t, p)
        assert all(m.fused for m in model.modules() if isinstance(m, Attention))
        use_fused_attention(model, False)
    assert packed == [False, True]  # strided views by default, packed (unit last stride) when fused
    assert default.abs().max() > 0.01  # the perturbed network's output is not trivially equal
    torch.testing.assert_close(fused, default, rtol=1e-4, atol=1e-5)  # the same attention up to rounding
    assert not any(m.fused for m in model.modules() if isinstance(m, Attention))
