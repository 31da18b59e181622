"""Checkpoint schedules and checkpoint / training-state files."""

import torch

from conceptlab.train.config import TrainConfig
from conceptlab.train.checkpoints import (
    checkpoint_schedule,
    list_checkpoints,
    load_checkpoint,
    load_training_state,
    save_checkpoint,
    save_training_state,
    training_state_step,
)


def test_sqrt_schedule_is_even_in_sqrt_step_and_ends_at_final_step():
    steps = checkpoint_schedule(TrainConfig(steps=20000, checkpoint_start=500, checkpoint_count=60))
    assert steps[0] == 500 and steps[-1] == 20000
    assert 55 <= len(steps) <= 60
    gaps = torch.diff(torch.tensor(steps, dtype=torch.float64).sqrt())
    assert gaps.max() - gaps.min() < 0.05  # evenly spaced in √step (up to rounding)


def test_log_linear_and_list_schedules():
    log = checkpoint_schedule(TrainConfig(steps=1000, checkpoint_schedule="log", checkpoint_start=10, checkpoint_count=3))
    assert log == [10, 100, 1000]
    lin = checkpoint_schedule(TrainConfig(steps=100, checkpoint_schedule="linear", checkpoint_start=25, checkpoint_count=4))
    assert lin == [25, 50, 75, 100]
    explicit = checkpoint_schedule(
        TrainConfig(steps=50, checkpoint_schedule="list", checkpoint_steps=[40, 5, 70, 5])
    )
    assert explicit == [5, 40, 50]


def test_checkpoint_round_trip(tmp_path):
    tensors = {"model.w": torch.randn(3, 4), "ema.w": torch.randn(3, 4)}
    path = save_checkpoint(tmp_path, 42, tensors, {"config_hash": "abc", "metrics": {"loss": 0.5}})
    assert path.name == "step_0000042.safetensors" and path.with_suffix(".json").is_file()
    loaded, sidecar = load_checkpoint(path)
    assert sidecar == {"step": 42, "config_hash": "abc", "metrics": {"loss": 0.5}}
    assert all(torch.equal(loaded[k], v) for k, v in tensors.items())
    assert list_checkpoints(tmp_path) == [(42, path)]


def test_incomplete_checkpoint_is_not_listed(tmp_path):
    save_checkpoint(tmp_path, 1, {"w": torch.zeros(1)}, {})
    (tmp_path / "step_0000002.safetensors").write_bytes(b"partial")  # no sidecar: interrupted write
    assert [s for s, _ in list_checkpoints(tmp_path)] == [1]


def test_training_state_is_one_self_describing_file(tmp_path):
    path = tmp_path / "state.safetensors"
    assert load_training_state(path) is None and training_state_step(path) == 0
    save_training_state(path, {"rng": torch.arange(5, dtype=torch.uint8)}, {"step": 7, "optimizer": {"x": [1]}})
    tensors, meta = load_training_state(path)
    assert meta == {"step": 7, "optimizer": {"x": [1]}} and tensors["rng"].tolist() == [0, 1, 2, 3, 4]
    assert training_state_step(path) == 7
    assert [p.name for p in tmp_path.iterdir()] == ["state.safetensors"]  # no temp files left behind
