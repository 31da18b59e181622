"""The TensorBoard writer: sample grids, scalars and images read back with TensorBoard's event reader."""

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conceptlab.train.tensorboard import TensorBoardLog, sample_grid


def test_sample_grid_tiles_uint8_and_float_images():
    grid = sample_grid(torch.zeros(3, 1, 4, 4, dtype=torch.uint8))
    assert grid.shape == (4 + 2, 3 * 5 + 1, 3) and grid.dtype == torch.uint8
    assert int(grid[0, 0, 0]) == 255 and int(grid[1, 1, 0]) == 0  # border white, image black
    assert sample_grid(torch.ones(10, 3, 2, 2), columns=5).shape == (2 * 3 + 1, 5 * 3 + 1, 3)
    with pytest.raises(ValueError, match="N, C, H, W"):
        sample_grid(torch.zeros(2, 2))


def test_the_log_writes_what_the_event_reader_reads(tmp_path):
    with TensorBoardLog(tmp_path) as log:
        log.config("train:\n  steps: 3\n")
        for step in (1, 2, 3):
            log.train(step, 1.0 / step, {"loss": 9.0, "grad_norm": 0.5}, 1e-3, 0.01)
        log.scalars("concept_space", 3, {"accuracy/train": 0.75})
        log.samples("concept_space", 3, {"step_0000003": torch.rand(2, 3, 4, 4),
                                         "step_0000003/held_out": torch.zeros(1, 1, 4, 4, dtype=torch.uint8),
                                         "ignored": torch.zeros(5)})
    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    assert [e.value for e in events.Scalars("train/loss")] == pytest.approx([1.0, 0.5, 1 / 3])  # not the metric
    assert events.Scalars("concept_space/accuracy/train")[0].value == pytest.approx(0.75)
    assert set(events.Tags()["images"]) == {"concept_space/samples", "concept_space/samples/held_out"}
