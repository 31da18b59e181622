"""Checkpoint schedules and checkpoint / training-state files."""

import pytest
import torch

from conceptlab.store.files import file_sha256, tensors_sha256
from conceptlab.train.config import TrainConfig
from conceptlab.train.checkpoints import (
    CheckpointIntegrityError,
    CheckpointMismatchError,
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
    assert explicit == [5, 40, 50]  # past the run's end: not saved (a preset's list serves a shorter run)
    with pytest.raises(ValueError, match=r"checkpoint_steps \[0, -5\]: .*count from 1"):  # were dropped silently
        TrainConfig(steps=50, checkpoint_schedule="list", checkpoint_steps=[0, -5, 50])


def test_checkpoint_round_trip(tmp_path):
    tensors = {"model.w": torch.randn(3, 4), "ema.w": torch.randn(3, 4)}
    path = save_checkpoint(tmp_path, 42, tensors, {"config_hash": "abc", "metrics": {"loss": 0.5}})
    assert path.name == "step_0000042.safetensors" and path.with_suffix(".json").is_file()
    loaded, sidecar = load_checkpoint(path)
    assert sidecar == {"step": 42, "config_hash": "abc", "metrics": {"loss": 0.5}, "sha256": file_sha256(path)}
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
    assert meta == {"step": 7, "optimizer": {"x": [1]}, "tensors_sha256": tensors_sha256(tensors)}
    assert tensors["rng"].tolist() == [0, 1, 2, 3, 4]
    assert training_state_step(path) == 7
    assert [p.name for p in tmp_path.iterdir()] == ["state.safetensors"]  # no temp files left behind


def test_a_damaged_checkpoint_or_sidecar_or_state_is_refused_with_one_line_naming_the_file(tmp_path):
    path = save_checkpoint(tmp_path, 3, {"w": torch.arange(64, dtype=torch.float32)}, {"config_hash": "abc"})
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # a flipped byte inside the tensor data: still a valid safetensors file
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointIntegrityError, match="does not match its sidecar's content hash") as err:
        load_checkpoint(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    other = save_checkpoint(tmp_path / "b", 3, {"w": torch.zeros(2)}, {"config_hash": "abc"})
    with pytest.raises(CheckpointMismatchError, match="different config"):
        load_checkpoint(other, expected_hash="xyz")
    other.with_suffix(".json").write_text('{"step": 3, "config_ha')  # torn sidecar
    with pytest.raises(CheckpointIntegrityError, match="not valid JSON"):
        load_checkpoint(other)
    other.with_suffix(".json").unlink()
    with pytest.raises(CheckpointIntegrityError, match="has no sidecar"):
        load_checkpoint(other)
    state = tmp_path / "state.safetensors"
    save_training_state(state, {"w": torch.arange(64, dtype=torch.float32)}, {"step": 7})
    data = bytearray(state.read_bytes())
    data[-5] ^= 0xFF
    state.write_bytes(bytes(data))
    with pytest.raises(CheckpointIntegrityError, match="training state .* does not match its content hash"):
        load_training_state(state)
    state.write_bytes(b"not a state")
    with pytest.raises(CheckpointIntegrityError, match="is not readable"):
        training_state_step(state)
