"""`eval.channels_last`: a run evaluated with the network in channels-last memory format, for every built-in kind of
study, runs end to end and names a run of its own."""

import pytest
import torch

from conceptlab.experiments import runner
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.experiments.sweep import run_id


@pytest.mark.parametrize("preset", ["micro", "bumps-micro", "abstractions-micro"])
def test_a_micro_run_evaluates_in_channels_last_end_to_end(preset, tmp_path, monkeypatch):
    formats = []
    load = runner.load_weights

    def loading(model, tensors, use_ema=True):
        out = load(model, tensors, use_ema=use_ema)
        convs = [p for p in model.parameters() if p.dim() == 4]
        formats.append(all(p.is_contiguous(memory_format=torch.channels_last) for p in convs) and bool(convs))
        return out

    monkeypatch.setattr(runner, "load_weights", loading)
    cfg = load_config(preset, ["eval.channels_last=true"])
    assert run_id(cfg) != run_id(load_config(preset, []))  # its outputs differ by rounding: a run of its own
    run_experiment(cfg, tmp_path / "run", progress=False)
    assert formats and all(formats)  # every checkpoint measured in channels-last
    assert (tmp_path / "run" / "summary.json").is_file()
