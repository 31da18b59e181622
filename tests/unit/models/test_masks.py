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
    assert abs((out == 0).float().mean().item() - 0.1) < 0.005  # 200,000 draws: 4 standard errors
    assert sorted(out.unique().tolist()) == [0.0, pytest.approx(1 / 0.9)]
    # the two words of each 64-bit output are both used, each at the rate (a slip to one word per output, or to one
    # half of it, would pass the line above with every other element repeated or constant)
    even, odd = (out == 0).flatten().float().view(-1, 2).unbind(1)
    assert abs(even.mean().item() - 0.1) < 0.007 and abs(odd.mean().item() - 0.1) < 0.007
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
    words = np.random.Generator(np.random.SFC64(np.random.SeedSequence(seed))).integers(
        0, 2**64 - 1, size=11, dtype=np.uint64, endpoint=True)
    expected = torch.from_numpy(words.view(np.uint32)[:21] >= np.uint32(round(p * 2**32))).view(shape)
    torch.manual_seed(5)
    assert torch.equal(sfc64_keep_mask(shape, p), expected)
    assert torch.equal(torch.rand(4), after_one_draw)  # it took exactly one draw from torch's generator
    assert drop_threshold(0.1) == 429496730 and drop_threshold(0.0) == 0
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        drop_threshold(1.0)
    assert sfc64_keep_mask((5,), 0.0).all() and sfc64_keep_mask((), 0.5).shape == ()


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


def test_the_config_accepts_sfc64_and_the_paper_presets_use_it():
    from conceptlab.experiments.loading import load_config

    assert ModelConfig(dropout_mask="sfc64").dropout_mask == "sfc64"
    for preset in ("paper", "hidden-emergence-paper", "celeba-lli-paper"):  # GPU scale: no recorded runs
        assert load_config(preset).model.dropout_mask == "sfc64"
    with pytest.raises(ValueError, match="sfc64"):
        MaskDropout(0.1, "philox")
