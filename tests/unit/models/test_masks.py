"""Dropout keep-masks from SFC64 words (`models.masks`): the distribution, the definition, and a mask that depends on
torch's random state only (not on the thread count), so a resumed run draws the same masks."""

import multiprocessing

import numpy as np
import pytest
import torch

from conceptlab.models.masks import CHUNKS, drop_threshold, sfc64_keep_mask
from conceptlab.models.unet import MaskDropout, ModelConfig


def _mask(shape, p, seed=0, threads=None):
    before = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        return sfc64_keep_mask(shape, p)
    finally:
        torch.set_num_threads(before)


def test_units_are_dropped_with_probability_p_and_kept_ones_scaled():
    x = torch.ones(400, 500)
    torch.manual_seed(0)
    out = MaskDropout(0.1, "sfc64").train()(x)
    assert abs((out == 0).float().mean().item() - 0.1) < 0.005  # 200,000 draws: 4 standard errors
    assert sorted(out.unique().tolist()) == [0.0, pytest.approx(1 / 0.9)]
    # each chunk on its own has the rate too (a chunk of all-kept or all-dropped units would pass the line above)
    halves = (out == 0).flatten().float().chunk(2)
    assert all(abs(h.mean().item() - 0.1) < 0.007 for h in halves)
    torch.manual_seed(0)
    bf16 = MaskDropout(0.1, "sfc64").train()(x.bfloat16())
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16 == 0, out == 0)  # the same mask whatever the dtype
    assert torch.equal(MaskDropout(0.3, "sfc64").eval()(x), x) and torch.equal(MaskDropout(0.0, "sfc64").train()(x), x)


def test_the_mask_is_sfc64_words_seeded_by_one_draw_from_torch_and_compared_with_the_rounded_threshold():
    shape, p = (3, 7), 0.3  # 21 elements: an odd count, so the last 64-bit word gives one element
    torch.manual_seed(5)
    seed = int(torch.randint(0, 2**63 - 1, (), dtype=torch.int64))
    after_one_draw = torch.rand(4)
    words = (21 + 1) // 2
    bounds = [words * k // CHUNKS for k in range(CHUNKS + 1)]
    bits = np.concatenate([
        np.random.Generator(np.random.SFC64(np.random.SeedSequence([seed, k])))
        .integers(0, 2**64 - 1, size=bounds[k + 1] - bounds[k], dtype=np.uint64, endpoint=True).view(np.uint32)
        for k in range(CHUNKS)
    ])[:21]
    expected = torch.from_numpy(bits >= np.uint32(round(p * 2**32))).view(shape)
    torch.manual_seed(5)
    assert torch.equal(sfc64_keep_mask(shape, p), expected)
    assert torch.equal(torch.rand(4), after_one_draw)  # it took exactly one draw from torch's generator
    assert drop_threshold(0.1) == 429496730 and drop_threshold(0.0) == 0
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        drop_threshold(1.0)


def test_the_mask_does_not_depend_on_the_thread_count_and_follows_torchs_random_state():
    shape = (64, 32, 16, 16)  # 524,288 elements: large enough to be drawn on two threads
    one, two = _mask(shape, 0.1, threads=1), _mask(shape, 0.1, threads=2)
    assert torch.equal(one, two)
    assert not torch.equal(one, _mask(shape, 0.1, seed=1))
    assert _mask((5,), 0.0).all() and _mask((1,), 0.5).shape == (1,) and _mask((), 0.5).shape == ()


def _child(queue):  # counted by numpy: a torch reduction on two threads would meet OpenMP's own fork problem
    queue.put(int(_mask((64, 32, 16, 16), 0.1, threads=2).numpy().sum()))


def test_a_forked_process_draws_masks_on_its_own_threads():
    expected = int(_mask((64, 32, 16, 16), 0.1, threads=2).numpy().sum())  # the parent's pool exists now
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5) == expected  # no hang on the parent's dead threads


def test_the_config_accepts_sfc64_and_the_paper_presets_use_it():
    from conceptlab.experiments.loading import load_config

    assert ModelConfig(dropout_mask="sfc64").dropout_mask == "sfc64"
    for preset in ("paper", "hidden-emergence-paper", "celeba-lli-paper"):  # GPU scale: no recorded runs
        assert load_config(preset).model.dropout_mask == "sfc64"
    with pytest.raises(ValueError, match="sfc64"):
        MaskDropout(0.1, "philox")
