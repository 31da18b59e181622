"""Training reuse end to end: a run evaluated from another run's training gives exactly the numbers of the same run
trained in place; a sweep over an evaluation key trains once; a run that trains differently is never given a donor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.experiments.training_reuse import reuse_training, trained_in
from conceptlab.store.files import read_json

STEPS = ["train.steps=20", "train.checkpoint_steps=[10,20]", "train.tensorboard=false"]
# numbers that do not depend on where or how fast the run ran
VOLATILE = {"run", "seconds", "seconds_all_invocations", "invocations", "provenance", "disk_bytes", "threads",
            "figures"}

pytestmark = pytest.mark.xdist_group("training-reuse")


def _tables(run: Path) -> dict[str, pd.DataFrame]:
    return {str(p.relative_to(run)): pd.read_parquet(p).drop(columns=["run"], errors="ignore")
            for p in sorted(run.rglob("*.parquet"))}


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory, probe_cache):
    """A: micro; B: micro with more generations per class (an evaluation key), trained in place; C: B's config
    evaluated from A's training."""
    root = tmp_path_factory.mktemp("reuse")
    a_cfg = load_config("micro", STEPS)
    b_cfg = load_config("micro", STEPS + ["eval.samples_per_class=6"])
    assert a_cfg.training_hash() == b_cfg.training_hash() and a_cfg != b_cfg
    run_experiment(a_cfg, root / "A", progress=False)
    run_experiment(b_cfg, root / "B", progress=False)
    reused = reuse_training(b_cfg, root / "C", [root / "B-missing", root / "A"])
    summary = run_experiment(b_cfg, root / "C", progress=False)
    return {"root": root, "reused": reused, "summary": summary}


def test_a_run_evaluated_from_another_runs_training_equals_the_run_trained_in_place(three_runs):
    root, summary = three_runs["root"], three_runs["summary"]
    assert three_runs["reused"]["folder"] == str((root / "A").resolve())
    assert summary["seconds"]["train"] == 0.0
    assert summary["provenance"]["trained_in"]["run_id"] == "A"
    in_place = read_json(root / "B" / "summary.json")
    assert {k: v for k, v in summary.items() if k not in VOLATILE} == \
        {k: v for k, v in in_place.items() if k not in VOLATILE}
    b, c = _tables(root / "B"), _tables(root / "C")
    assert b.keys() == c.keys() and len(b) > 3
    for name in b:
        pd.testing.assert_frame_equal(b[name], c[name], obj=name)
    # the checkpoints are the donor's files (hard links on one filesystem), and the run's own record says so
    a_ckpt, c_ckpt = root / "A" / "checkpoints", root / "C" / "checkpoints"
    for path in sorted(a_ckpt.glob("*.safetensors")):
        assert os.path.samefile(path, c_ckpt / path.name) or path.read_bytes() == (c_ckpt / path.name).read_bytes()
    assert trained_in(root / "C")["folder"] == str((root / "A").resolve())
    assert trained_in(root / "A") is None and trained_in(root / "B") is None


def test_a_run_with_a_different_training_gets_no_donor_and_a_trained_folder_is_not_reseeded(three_runs, tmp_path):
    root = three_runs["root"]
    other_seed = load_config("micro", STEPS + ["train.train_seed=1"])
    assert reuse_training(other_seed, tmp_path / "D", [root / "A", root / "B"]) is None
    assert not (tmp_path / "D").exists()
    # B trained itself: a second donor is never mixed into it
    b_cfg = load_config(str(root / "B" / "config.yaml"))
    assert reuse_training(b_cfg, root / "B", [root / "A"]) is None
    assert trained_in(root / "B") is None


def test_run_train_from_evaluates_a_finished_run_and_refuses_another_training_naming_the_keys(three_runs, tmp_path):
    a = three_runs["root"] / "A"
    ok = CliRunner().invoke(app, ["run", "micro", *STEPS, "eval.samples_per_class=6", "--runs-dir", str(tmp_path),
                                  "--train-from", str(a), "--no-progress"])
    assert ok.exit_code == 0, ok.output
    (made,) = [p for p in tmp_path.iterdir() if (p / "summary.json").is_file()]
    summary = json.loads((made / "summary.json").read_text())
    assert summary["provenance"]["trained_in"]["run_id"] == "A" and summary["seconds"]["train"] == 0.0
    in_place = read_json(three_runs["root"] / "B" / "summary.json")  # the same config, trained in place
    assert summary["learning_time"] == in_place["learning_time"]
    refused = CliRunner().invoke(app, ["run", "micro", *STEPS, "train.train_seed=1", "--runs-dir",
                                       str(tmp_path / "no"), "--train-from", str(a), "--no-progress"])
    assert refused.exit_code == 2 and "trains differently (train.train_seed)" in " ".join(refused.output.split())
    assert not (tmp_path / "no").exists() or not any((tmp_path / "no").glob("*/config.yaml"))
    # a dry run checks the lender too, and says which training the run would evaluate
    dry_refused = CliRunner().invoke(app, ["run", "micro", *STEPS, "train.train_seed=1", "--runs-dir",
                                           str(tmp_path / "dry"), "--train-from", str(a), "--dry-run"])
    assert dry_refused.exit_code == 2 and "trains differently" in " ".join(dry_refused.output.split())
    dry = CliRunner().invoke(app, ["run", "micro", *STEPS, "eval.samples_per_class=6", "--runs-dir",
                                   str(tmp_path / "dry"), "--train-from", str(a), "--dry-run"])
    assert dry.exit_code == 0 and "# training: lent by" in dry.output
    assert not any((tmp_path / "dry").glob("*/config.yaml"))


def test_a_sweep_over_an_evaluation_key_trains_once(probe_cache, tmp_path):
    spec = tmp_path / "eval-axis.yaml"
    spec.write_text(yaml.safe_dump({
        "description": "two evaluations of one training", "base": "micro",
        "overrides": STEPS, "axes": {"grid": {"eval.samples_per_class": [4, 6]}},
        "executor": {"kind": "local", "workers": 2, "threads": 1},
    }))
    root = tmp_path / "sweep"
    planned = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(root), "--dry-run"])
    assert planned.exit_code == 0, planned.output  # the dry run says which run trains and which borrows
    assert planned.output.count("trains") == 1 and planned.output.count("borrowed") == 1, planned.output
    result = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(root), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 done now (1 of them evaluating another run's training)" in " ".join(result.output.split())
    runs = sorted(p for p in root.iterdir() if (p / "summary.json").is_file())
    trainers = [p for p in runs if trained_in(p) is None]
    evaluators = [p for p in runs if trained_in(p) is not None]
    assert len(trainers) == 1 and len(evaluators) == 1
    assert trained_in(evaluators[0])["run_id"] == trainers[0].name
    assert "training reused from" in (evaluators[0] / "run.log").read_text()
    # a second root evaluates both trainings' one checkpoint set through --train-from, training nothing
    lent = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(tmp_path / "third"), "--dry-run",
                                    "--train-from", str(root)])
    assert lent.output.count("borrowed") == 2 and "trains" not in lent.output, lent.output
    alone = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(tmp_path / "third"), "--dry-run",
                                     "--no-reuse-training"])
    assert alone.output.count("trains") == 2 and "borrowed" not in alone.output, alone.output
    assert "complete" in CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(root), "--dry-run"]).output
    third = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(tmp_path / "third"), "--no-progress",
                                     "--train-from", str(root)])
    assert third.exit_code == 0, third.output
    assert "2 done now (2 of them evaluating another run's training)" in " ".join(third.output.split())
    for p in (tmp_path / "third").iterdir():
        if (p / "summary.json").is_file():
            summary = json.loads((p / "summary.json").read_text())
            assert summary["seconds"]["train"] == 0.0
            assert summary["provenance"]["trained_in"]["run_id"] == trainers[0].name  # who trained, not who lent
    refused = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(tmp_path / "x"), "--no-progress",
                                       "--train-from", str(root), "--no-reuse-training"])
    assert refused.exit_code == 2 and "reuses none" in refused.output
