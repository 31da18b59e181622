"""`run --resume`'s search (experiments.runner.find_unfinished_run): the newest unfinished folder with the same config,
found whatever spelling of `runs_dir` saved it, past a folder whose config no longer loads (warned, naming it) —
on folders written by hand, no training."""

from __future__ import annotations

from conceptlab.experiments.loading import config_to_yaml, load_config
from conceptlab.experiments.runner import _same_config, find_unfinished_run
from conceptlab.store.run_folder import RunFolder

OVERRIDES = ["train.steps=4", "train.checkpoint_steps=[2,4]"]


def _folder(runs_dir, name, config_text, finished=False):
    path = runs_dir / name
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(config_text)
    if finished:
        (path / "summary.json").write_text("{}")
    return path


def test_a_folder_whose_config_no_longer_loads_is_skipped_with_a_warning_naming_it(tmp_path, capsys):
    runs = tmp_path / "runs"
    cfg = load_config("micro", [*OVERRIDES, f"runs_dir={runs}"])
    wanted = _folder(runs, "0001-micro", config_to_yaml(cfg))
    stale = _folder(runs, "0002-micro", config_to_yaml(cfg).replace("train:\n", "train:\n  old_removed_key: 1\n"))
    _folder(runs, "0003-micro", "data: [unclosed")
    assert find_unfinished_run(runs, cfg) == wanted  # as `run --resume` calls it: the warnings go to stderr
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and all(line.startswith("warning: ") for line in said), said
    assert str(stale) in said[1] and "train.old_removed_key" in said[1] and "skipped" in said[1], said
    assert str(runs / "0003-micro") in said[0], said


def test_the_run_is_found_whatever_spelling_of_runs_dir_saved_it(tmp_path, monkeypatch):
    """`runs_dir` says where a run is, not what it is (the run id leaves it out too): a run started with
    `--runs-dir runs5` is continued by `--resume --runs-dir /abs/runs5`; another config's run is not."""
    monkeypatch.chdir(tmp_path)
    saved = load_config("micro", [*OVERRIDES, "runs_dir=runs5"])
    run = _folder(tmp_path / "runs5", "0001-micro", config_to_yaml(saved))
    _folder(tmp_path / "runs5", "0002-micro", config_to_yaml(load_config("micro", [*OVERRIDES, "train.lr=0.01"])))
    absolute = load_config("micro", [*OVERRIDES, f"runs_dir={tmp_path / 'runs5'}"])
    assert find_unfinished_run(tmp_path / "runs5", absolute) == run
    _same_config(absolute, RunFolder(run))  # the driver continues it too (no "different config")
    assert find_unfinished_run(tmp_path / "runs5", load_config("micro", [*OVERRIDES, "train.lr=0.02"])) is None
