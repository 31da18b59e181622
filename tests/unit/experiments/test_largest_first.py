"""A pool gets its runs largest training first (`sweep.largest_first`), from `run_sweep` and the findings suite
alike: the order the executor receives, ties kept, runs that cannot be sized first."""

from pathlib import Path

import pytest

from conceptlab.experiments.executors import RunOutcome, RunTask
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.sweep import expand, largest_first, run_sweep


def _task(name, overrides=(), preset="micro"):
    return RunTask(name, Path("/nonexistent") / name, load_config(preset, list(overrides)))


def test_largest_training_first_ties_in_order_and_the_unsized_before_all(tmp_path):
    tasks = [_task("short", ["train.steps=10"]), _task("long", ["train.steps=30"]),
             _task("mid", ["train.steps=20"]), _task("mid-twin", ["train.steps=20", "data.data_seed=3"]),
             _task("wide", ["train.steps=10", "model.widths=[32,64]"]),
             _task("unsized", [f"data.root={tmp_path}"], preset="celeba-micro")]
    order = [t.run_id for t in largest_first(tasks)]
    assert order == ["unsized", "wide", "long", "mid", "mid-twin", "short"]  # wide: 10 steps of ~4× the arithmetic
    assert largest_first([]) == []
    assert [t.run_id for t in largest_first(tasks, workers=6)] == [t.run_id for t in tasks]  # all start at once
    assert [t.run_id for t in largest_first(tasks, workers=5)][0] == "unsized"


def test_nothing_is_counted_where_the_order_cannot_matter(monkeypatch):
    import conceptlab.experiments.sweep as sweep

    def counted(cfg):
        raise AssertionError("a network was sized")

    monkeypatch.setattr(sweep, "training_flops", counted)
    seeds = [_task(f"seed-{s}", ["train.steps=10", f"data.data_seed={s}", f"train.train_seed={s}",
                                 f"eval.samples_per_class={2 + s}"]) for s in range(4)]  # seeds and eval keys only
    assert largest_first(seeds) == seeds
    separations = [_task(f"dc-{d}", ["train.steps=10", f"data.color_separation={d}"]) for d in (0.3, 0.5, 0.7)]
    assert largest_first(separations) == separations  # the data differs, the network and its input do not
    mixed = [_task("short", ["train.steps=10"]), _task("long", ["train.steps=30"])]
    assert largest_first(mixed, workers=2) == mixed
    with pytest.raises(AssertionError, match="sized"):
        largest_first(mixed, workers=1)


class _Recorder:
    """An executor that runs nothing: it keeps the order it was given and says every run is queued."""

    name = "recorder"

    def __init__(self):
        self.given: list[str] = []

    def run(self, tasks, progress=True, console=None, on_outcome=None):
        self.given += [t.run_id for t in tasks]
        return [RunOutcome(t.run_id, "queued") for t in tasks]


def test_a_sweep_hands_its_pool_the_longest_runs_first(tmp_path):
    spec = tmp_path / "steps.yaml"
    spec.write_text("base: micro\naxes:\n  grid:\n    train.steps: [10, 40, 20]\n  seeds: [0]\n")
    sweep = expand(str(spec), root=tmp_path / "runs")
    executor = _Recorder()
    run_sweep(sweep, executor, progress=False)
    steps = {r.run_id: r.config.train.steps for r in sweep.runs}
    assert [steps[i] for i in executor.given] == [40, 20, 10]
    import json

    manifest = json.loads((tmp_path / "runs" / "manifest.json").read_text())
    listed = [run["run_id"] for run in manifest["runs"]]
    assert [steps[i] for i in listed] == [10, 40, 20]  # the manifest keeps the spec's order


def test_a_slurm_array_starts_as_many_tasks_as_its_parallelism():
    from conceptlab.experiments.executors import SlurmExecutor, SlurmOptions

    executor = object.__new__(SlurmExecutor)  # without SLURM: only the options are read
    executor.options = SlurmOptions(array_parallelism=3)
    assert executor.workers == 3
