"""The TensorBoard log of a micro run, read back with TensorBoard's own event reader: training scalars, the
per-checkpoint measurements, sample grids and the config are there; the switch turns it off."""

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conceptlab.experiments.loading import load_config


# `make test` (--dist loadgroup): one worker builds report/conftest.py's session-scoped runs, once
pytestmark = pytest.mark.xdist_group("report-micro")


def _events(folder):
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    events.Reload()
    return events


@pytest.mark.slow
def test_a_micro_run_logs_scalars_images_and_config_to_tensorboard(micro_run):
    events = _events(micro_run / "tensorboard")
    tags = events.Tags()
    scalars = set(tags["scalars"])
    assert {"train/loss", "train/grad_norm", "train/learning_rate", "train/seconds_per_step"} <= scalars
    loss_steps = [e.step for e in events.Scalars("train/loss")]
    assert loss_steps == [5, 10, 15, 20]  # every train.log_every steps, each once
    lr = load_config(str(micro_run / "config.yaml")).train.lr
    assert [e.value for e in events.Scalars("train/learning_rate")] == pytest.approx([lr] * 4)
    # per checkpoint: mean accuracy per split and per class (by name) and concept
    assert {"concept_space/accuracy/train", "concept_space/accuracy/held_out",
            "concept_space/accuracy/blue small/color", "concept_space/valid_fraction/red large"} <= scalars
    assert [e.step for e in events.Scalars("concept_space/accuracy/train")] == [10, 20]
    assert all(0.0 <= e.value <= 1.0 for e in events.Scalars("concept_space/accuracy/train"))
    # sample grids per checkpoint: one image per checkpoint, 4 classes of 32×32 side by side
    assert "concept_space/samples" in tags["images"]
    grids = events.Images("concept_space/samples")
    assert [g.step for g in grids] == [10, 20]
    assert grids[0].width == 4 * 33 + 1 and grids[0].height == 33 + 1
    # the resolved config as text
    assert "config/text_summary" in tags["tensors"]
    text = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "steps: 20" in text and "tensorboard" not in text  # the default switch is left out of the dump


@pytest.mark.slow
def test_tensorboard_switched_off_writes_no_event_file_and_keeps_the_training_hash(tmp_path, probe_cache):
    from conceptlab.experiments.runner import run_experiment

    on = load_config("micro", ["train.steps=10", "train.checkpoint_steps=[10]"])
    off = load_config("micro", ["train.steps=10", "train.checkpoint_steps=[10]", "train.tensorboard=false"])
    assert on.training_hash() == off.training_hash()  # a logging switch does not change the weights' identity
    run_experiment(off, tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "summary.json").is_file() and not (tmp_path / "run" / "tensorboard").exists()
