"""The evaluation's speed levers, `eval.channels_last` (the network in channels-last memory format) and
`eval.fused_attention` (self-attention on torch's fused kernel): a run evaluated under both, for every built-in kind
of study, runs end to end with both set at every checkpoint it measures, and each lever names a run of its own."""

import pytest
import torch

from conceptlab.experiments import runner
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.experiments.sweep import run_id
from conceptlab.models.unet import Attention

LEVERS = ["eval.channels_last=true", "eval.fused_attention=true"]


@pytest.mark.parametrize("preset", ["micro", "bumps-micro", "abstractions-micro"])
def test_a_micro_run_evaluates_under_both_levers_end_to_end(preset, tmp_path, monkeypatch):
    formats, fused = [], []
    load = runner.load_weights

    def loading(model, tensors, use_ema=True):
        out = load(model, tensors, use_ema=use_ema)
        convs = [p for p in model.parameters() if p.dim() == 4]
        formats.append(all(p.is_contiguous(memory_format=torch.channels_last) for p in convs) and bool(convs))
        fused.append([m.fused for m in model.modules() if isinstance(m, Attention)])
        return out

    monkeypatch.setattr(runner, "load_weights", loading)
    cfg = load_config(preset, LEVERS)
    plain = run_id(load_config(preset, []))
    for lever in LEVERS:  # each changes outputs by rounding: a run of its own
        assert run_id(load_config(preset, [lever])) != plain
    run_experiment(cfg, tmp_path / "run", progress=False)
    assert formats and all(formats)  # every checkpoint measured in channels-last
    assert all(f == [True] * cfg.model.mid_attention for f in fused), fused  # and on the fused kernel where attention is
    assert (tmp_path / "run" / "summary.json").is_file()
