"""The performance bench's reference (the authors' regime, bench/benchlib.py): torch's Bernoulli dropout in every
block, whatever speed option a preset's `model.dropout_mask` picks for our network."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_the_reference_network_drops_out_as_torch_does_for_the_paper_preset(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.delitem(sys.modules, "benchlib", raising=False)
    import benchlib
    from conceptlab.models.unet import MaskDropout

    cfg, dgp = benchlib.load("paper", ["model.widths=[16,32]", "data.images_per_class=4"])
    assert cfg.model.dropout_mask == "sfc64"  # the preset's speed option, for our network only
    ours, reference = benchlib.ours_and_reference(cfg, dgp)
    masks = [m.mask for m in reference.modules() if isinstance(m, MaskDropout)]
    assert masks and set(masks) == {"bernoulli"}
    assert {m.mask for m in ours.modules() if isinstance(m, MaskDropout)} == {"sfc64"}
