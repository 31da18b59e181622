"""Finding 1 (Park et al. 2024): the concept with the larger concept signal is learned first.

Two CI-sized runs of the shipped presets: with Δc large and Δs small the held-out
class (blue-small) gets its color right before its size; with them swapped, its
size first. The test fails if the order flips or the strong concept is never learned, by the authors' learning
time (`analysis.concept_space.authors_learning_times`, what the findings suite reads) or by our trailing variant
(the summary's `learning_time`).
"""

import math

import pytest

from conceptlab.analysis.concept_space import authors_learning_times
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.store.files import read_parquet
from conceptlab.store.run_folder import RunFolder

CI_SIZE = [  # fewer steps, checkpoints every 50 steps from 150 (nothing is learned before ~175) and 16 generations
    "train.steps=500",  # per class, same data and model
    "train.checkpoint_start=150",
    "train.checkpoint_count=8",
    "eval.samples_per_class=16",
]


def _time(value: float) -> float:
    return math.inf if math.isnan(value) else value


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset, strong, weak",
    [("concept-signal-color-first-tiny", "color", "size"), ("concept-signal-size-first-tiny", "size", "color")],
)
def test_larger_concept_signal_is_learned_first(preset, strong, weak, tmp_path):
    cfg = load_config(preset, CI_SIZE)
    summary = run_experiment(cfg, tmp_path / preset, progress=False)
    signal = summary["concept_signal"]
    assert signal[strong] > 1.4 * signal[weak]
    times = summary["learning_time"]
    held_strong, held_weak = times[f"held_out/{strong}"], times[f"held_out/{weak}"]
    assert held_strong is not None, f"{strong} never learned on the held-out class: {times}"
    assert held_strong < _time(float("nan") if held_weak is None else held_weak), times
    table = read_parquet(RunFolder(tmp_path / preset).table("concept_space"))
    authors = authors_learning_times(table, threshold=cfg.eval.accuracy_threshold)
    held = authors[authors["split"] == "held_out"].set_index("concept")["learning_time"]
    assert not math.isnan(held[strong]), f"{strong} never learned on the held-out class (authors' time): {authors}"
    assert held[strong] < _time(held[weak]), authors
    mean = summary["mean_accuracy"]
    assert mean[f"held_out/{strong}"] > mean[f"held_out/{weak}"] + 0.1, mean
    # The training classes have learned the strong concept by the end.
    train_acc = [v for k, v in summary["final_accuracy"].items()
                 if k.split("/")[0] in summary["train_classes"] and k.endswith(f"/{strong}")]
    assert min(train_acc) >= 0.9, summary["final_accuracy"]
