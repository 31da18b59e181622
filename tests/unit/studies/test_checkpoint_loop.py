"""The run driver's one resumable checkpoint loop (`experiments.runner.measure_checkpoints`) and its one "every k-th
checkpoint" rule (`studies.due_checkpoints`), on a toy model and toy measurements."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from rich.console import Console
from torch import nn

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import measure_checkpoints
from conceptlab.store.files import read_tensors
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies import Measurement, StepResult, due_checkpoints
from conceptlab.train.checkpoints import CheckpointMismatchError, prefixed, save_checkpoint


def test_every_rule_takes_the_first_every_kth_and_always_the_last():
    ckpts = [(s, f"p{s}") for s in (10, 20, 30, 40, 50, 60, 70)]
    assert [s for s, _ in due_checkpoints(ckpts, 1)] == [10, 20, 30, 40, 50, 60, 70]
    assert [s for s, _ in due_checkpoints(ckpts, 3)] == [10, 40, 70]
    assert [s for s, _ in due_checkpoints(ckpts, 4)] == [10, 50, 70]
    assert [s for s, _ in due_checkpoints(ckpts, 100)] == [10, 70]
    assert due_checkpoints(ckpts, None) == [(70, "p70")]
    assert due_checkpoints([], 2) == [] and due_checkpoints([], None) == []
    with pytest.raises(ValueError, match="every must be"):
        due_checkpoints(ckpts, 0)


class Toy(nn.Module):
    """A one-weight model; the weight says which checkpoint (and which of model/EMA) is loaded."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))


def _folder(tmp_path, cfg, steps=(10, 20, 30), config_hash=None):
    for step in steps:
        weights = {**prefixed("model.", {"w": torch.tensor(float(step))}),
                   **prefixed("ema.", {"w": torch.tensor(-float(step))})}
        save_checkpoint(tmp_path / "checkpoints", step, weights,
                        {"config_hash": config_hash or cfg.training_hash(), "has_ema": True})
    return RunFolder(tmp_path)


def _recorder(name, model, seen, every=1, use_ema=True, **kw):
    def measure(step):
        w = float(model.w.detach())
        seen.append((name, step, w))
        return StepResult(pd.DataFrame({"step": [step], "w": [w]}), info="ok")

    return Measurement(name, measure, every=every, use_ema=use_ema, **kw)


def test_each_due_checkpoint_is_measured_once_with_the_weights_each_measurement_asks_for(tmp_path):
    cfg = load_config("micro")
    run = _folder(tmp_path, cfg)
    model = Toy()
    seen: list = []
    measurements = [_recorder("a", model, seen), _recorder("b", model, seen, every=2, use_ema=False),
                    _recorder("c", model, seen, every=None, piece="c", directory="shared", suffix=".parquet")]
    seconds = measure_checkpoints(cfg, run, model, measurements, Console(quiet=True), progress=False)
    assert set(seconds) == {"a", "b", "c"}
    # in checkpoint order; EMA weights (−step) for a and c, model weights (+step) for b
    assert seen == [("a", 10, -10.0), ("b", 10, 10.0), ("a", 20, -20.0), ("a", 30, -30.0), ("b", 30, 30.0),
                    ("c", 30, -30.0)]
    assert [s for s, _ in run.step_files("a")] == [10, 20, 30]
    assert [s for s, _ in run.step_files("b")] == [10, 30]
    assert run.step_files("shared", "c")[0][1] == tmp_path / "shared" / "step_0000030" / "c.parquet"

    # resumable: nothing again; a lost file is measured again, alone
    seen.clear()
    measure_checkpoints(cfg, run, model, measurements, Console(quiet=True), progress=False)
    assert seen == []
    run.step_file("b", 10).unlink()
    measure_checkpoints(cfg, run, model, measurements, Console(quiet=True), progress=False)
    assert seen == [("b", 10, 10.0)]


def test_a_checkpoint_from_another_config_is_refused_before_any_measurement(tmp_path):
    cfg = load_config("micro")
    run = _folder(tmp_path, cfg, config_hash="0123456789abcdef")
    model = Toy()
    seen: list = []
    with pytest.raises(CheckpointMismatchError, match="trained with a different config") as err:
        measure_checkpoints(cfg, run, model, [_recorder("a", model, seen)], Console(quiet=True), progress=False)
    assert seen == [] and "\n" not in str(err.value)


def test_results_go_where_the_run_folder_says_samples_merge_and_tensors_are_written_before_rows(tmp_path):
    cfg = load_config("micro")
    run = _folder(tmp_path, cfg, steps=(10, 20))
    model = Toy()

    def measure(step):
        return StepResult({"step": step}, samples={f"step_{step:07d}": torch.full((2,), float(step))},
                          tensors={"points": torch.ones(3)})

    m = Measurement("j", measure, suffix=".json", samples_file="j_samples.safetensors")
    measure_checkpoints(cfg, run, model, [m], Console(quiet=True), progress=False)
    assert json.loads(run.step_file("j", 20, suffix=".json").read_text()) == {"step": 20}
    assert run.step_tensors("j", 20).is_file() and run.step_tensors("j", 10).is_file()
    assert sorted(read_tensors(run.file("j_samples.safetensors"))) == ["step_0000010", "step_0000020"]
