"""Dropout keep-masks from SFC64 words (`models.masks`): the distribution, the definition, and a mask that depends on
torch's random state only (not on the thread count), so a resumed run draws the same masks (the resume itself:
tests/unit/train/test_trainer.py)."""

import numpy as np
import pytest
import torch

from conceptlab.models.masks import drop_threshold, sfc64_keep_mask
from conceptlab.models.unet import MaskDropout, ModelConfig


def test_units_are_dropped_with_probability_p_and_kept_ones_scaled():
    x = torch.ones(400, 500)
    torch.manual_seed(0)
    out = MaskDropout(0.1, "sfc64").train()(x)
    assert abs((out == 0).float().mean().item() - 0.1) < 0.005  # 200,000 draws: 7.5 standard errors (0.00067)
    assert sorted(out.unique().tolist()) == [0.0, pytest.approx(1 / 0.9)]
    # the two words of each 64-bit output are both used, each at the rate (a slip to one word per output, or to one
    # half of it, would pass the line above with every other element repeated or constant)
    even, odd = (out == 0).flatten().float().view(-1, 2).unbind(1)
    assert abs(even.mean().item() - 0.1) < 0.007 and abs(odd.mean().item() - 0.1) < 0.007  # 100,000 each: 7.4
    assert (even != odd).float().mean().item() > 0.1  # 2p(1 − p) = 0.18 if independent
    torch.manual_seed(0)
    bf16 = MaskDropout(0.1, "sfc64").train()(x.bfloat16())
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16 == 0, out == 0)  # the same mask whatever the dtype
    assert torch.equal(MaskDropout(0.3, "sfc64").eval()(x), x) and torch.equal(MaskDropout(0.0, "sfc64").train()(x), x)


def test_the_mask_is_sfc64_words_seeded_by_one_draw_from_torch_and_compared_with_the_rounded_threshold():
    shape, p = (3, 7), 0.3  # 21 elements: an odd count, so the last 64-bit output gives one element
    torch.manual_seed(5)
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    after_one_draw = torch.rand(4)
    words = np.random.SFC64(np.random.SeedSequence(seed)).random_raw(11)  # the raw stream, stable across numpy
    low, high = words & 0xFFFFFFFF, words >> 32  # the two 32-bit words of each output, low first
    interleaved = np.stack([low, high], axis=1).reshape(-1)[:21]
    expected = torch.from_numpy(interleaved >= round(p * 2**32)).view(shape)
    torch.manual_seed(5)
    assert torch.equal(sfc64_keep_mask(shape, p), expected)
    assert torch.equal(torch.rand(4), after_one_draw)  # it took exactly one draw from torch's generator
    assert drop_threshold(0.1) == 429496730 and drop_threshold(0.0) == 0
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        drop_threshold(1.0)
    assert sfc64_keep_mask((5,), 0.0).all() and sfc64_keep_mask((), 0.5).shape == ()
    assert sfc64_keep_mask((0, 5), 0.5).shape == (0, 5)
    with pytest.raises(ValueError, match="rounds to 1"):
        drop_threshold(1 - 2**-40)
    # pinned: these 32 mask values (seed 3, p 0.5) change if numpy's SFC64 stream or the seeding ever does
    torch.manual_seed(3)
    assert sfc64_keep_mask((4, 8), 0.5).flatten().int().tolist() == [
        1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1]


def test_the_mask_does_not_depend_on_the_thread_count_and_follows_torchs_random_state():
    before = torch.get_num_threads()
    masks = []
    try:
        for threads, seed in ((1, 0), (2, 0), (2, 1)):
            torch.set_num_threads(threads)
            torch.manual_seed(seed)
            masks.append(sfc64_keep_mask((64, 32, 16, 16), 0.1))
    finally:
        torch.set_num_threads(before)
    assert torch.equal(masks[0], masks[1]) and not torch.equal(masks[0], masks[2])


def test_gradients_pass_through_kept_units_only_and_compiled_code_draws_the_eager_mask():
    x = torch.randn(6, 70, requires_grad=True)
    torch.manual_seed(0)
    out = MaskDropout(0.25, "sfc64").train()(x)
    out.sum().backward()
    keep = out.detach() != 0
    assert torch.allclose(x.grad, keep.float() / 0.75) and torch.allclose(out[keep], x[keep] / 0.75)
    module = MaskDropout(0.1, "sfc64").train()
    torch.manual_seed(1)
    eager = module(torch.ones(6, 70))
    torch.manual_seed(1)
    compiled = torch.compile(module, backend="aot_eager")(torch.ones(6, 70))  # the mask left out of the graph
    assert torch.equal(compiled, eager)


def test_on_other_devices_the_mask_is_drawn_as_uniform(monkeypatch):
    import conceptlab.models.unet as unet

    def refuse(*args, **kwargs):
        raise AssertionError("the SFC64 path is for CPU tensors only")

    monkeypatch.setattr(unet, "sfc64_keep_mask", refuse)
    out = MaskDropout(0.1, "sfc64").train()(torch.ones(4, 5, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 5)


def test_the_config_accepts_sfc64_and_the_paper_presets_use_it():
    from conceptlab.experiments.loading import load_config

    assert ModelConfig(dropout_mask="sfc64").dropout_mask == "sfc64"
    for preset in ("paper", "hidden-emergence-paper", "celeba-lli-paper"):  # GPU scale: no recorded runs
        assert load_config(preset).model.dropout_mask == "sfc64"
    with pytest.raises(ValueError, match="sfc64"):
        MaskDropout(0.1, "philox")
    with pytest.raises(ValueError, match="rounds to 1"):  # refused as the model is built, before any training
        MaskDropout(1 - 2**-40, "sfc64")
