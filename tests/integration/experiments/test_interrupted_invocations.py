"""What an interrupted or refused invocation leaves behind, on micro runs of a few steps: `run --resume` finds the run
whatever spelling of `--runs-dir` started it; an invocation that fails or is refused records the work it did (none:
`trained: null, measured: 0`), so it neither makes the run's precision `mixed` nor lends it its `code_drift`; and a
kill right after a checkpoint's training state is saved loses none of the train log (a crash simulated by an
exception raised there)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments import runner as run_driver
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.train import precision, trainer

STEPS = ["train.steps=4", "train.checkpoint_steps=[2,4]", "train.log_every=1", "train.tensorboard=false"]
QUIET = Console(quiet=True)

# `make test` (--dist loadgroup): one worker builds this module's module-scoped run, once
pytestmark = pytest.mark.xdist_group("interrupted-invocations")


def _fp32_without_drift(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(precision, "cpu_has_native_bf16", lambda: False)  # fp32, unless a test says otherwise
    patch.setattr(run_driver, "drift_for", lambda kind: [])  # whatever this work tree's code says


@pytest.fixture(autouse=True)
def _one_thread(probe_cache, monkeypatch):
    _fp32_without_drift(monkeypatch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def finished(tmp_path_factory, probe_cache) -> Path:
    """A finished micro run of 4 steps (fp32), trained uninterrupted: copy it before changing it."""
    run = tmp_path_factory.mktemp("finished") / "run"
    with pytest.MonkeyPatch.context() as patch:
        _fp32_without_drift(patch)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        run_experiment(load_config("micro", STEPS), run, progress=False, console=QUIET)
        torch.set_num_threads(threads)
    return run


def _log(run: Path) -> list[tuple[int, float]]:
    return [(r["step"], r["loss"]) for r in map(json.loads, (run / "train_log.jsonl").read_text().splitlines())]


def test_run_resume_finds_the_run_whatever_spelling_of_runs_dir_started_it(tmp_path, monkeypatch, finished):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs5" / "0001-micro"  # as `run micro … --runs-dir runs5` made it, stopped before its summary
    shutil.copytree(finished, run)
    config = run / "config.yaml"
    config.write_text(config.read_text().replace("runs_dir: runs\n", "runs_dir: runs5\n"))
    assert "runs_dir: runs5\n" in config.read_text()
    (run / "summary.json").unlink()
    again = CliRunner().invoke(app, ["run", "micro", *STEPS, "--runs-dir", str(tmp_path / "runs5"), "--resume",
                                     "--no-progress", "--threads", "1"], terminal_width=400)
    assert again.exit_code == 0, again.output
    assert "no unfinished run" not in again.output, again.output
    assert sorted(p.name for p in (tmp_path / "runs5").glob("0*")) == ["0001-micro"]
    assert (tmp_path / "runs5" / "0001-micro" / "summary.json").is_file()


DAMAGE = {  # each makes `resume` refuse: one before training starts, one after it found nothing to train
    "train state truncated": "train_state.safetensors",
    "training.json torn": "training.json",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_refused_invocation_records_no_work_so_it_neither_mixes_the_precision_nor_lends_its_drift(
        tmp_path, monkeypatch, finished, damage):
    cfg, run = load_config("micro", STEPS), tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "summary.json").unlink()
    damaged = run / DAMAGE[damage]
    intact = damaged.read_bytes()
    damaged.write_bytes(intact[: len(intact) // 2])
    with monkeypatch.context() as elsewhere:  # the refused attempt: on a bf16 machine, with drifted code
        elsewhere.setattr(precision, "cpu_has_native_bf16", lambda: True)
        elsewhere.setattr(run_driver, "drift_for", lambda kind: ["study:shapes"])
        with pytest.raises(ValueError, match=DAMAGE[damage]):
            run_experiment(cfg, run, progress=False, console=QUIET)
    damaged.write_bytes(intact)
    summary = run_experiment(cfg, run, progress=False, console=QUIET)
    assert summary["precision"] == "fp32"
    assert summary["provenance"]["code_drift"] == []
    invocations = json.loads((run / "provenance.json").read_text())["invocations"]
    assert [(i["bf16"], i.get("trained", "unrecorded"), i.get("measured", "unrecorded")) for i in invocations] == [
        (False, [0, 4], 2), (True, None, 0), (False, None, 0)]


def _killed_after_step_2(cfg, run: Path, monkeypatch) -> None:
    """Train `run` until its training state at step 2 is saved, then stop it as a kill -9 would, as far as the folder
    sees it: nothing after that save is written (a BaseException no `except Exception` stops)."""

    class Killed(BaseException):
        pass

    saved = trainer.save_training_state

    def save_then_die(path, tensors, sidecar):
        saved(path, tensors, sidecar)
        if sidecar["step"] == 2:
            raise Killed

    with monkeypatch.context() as crashing:
        crashing.setattr(trainer, "save_training_state", save_then_die)
        with pytest.raises(Killed):
            run_experiment(cfg, run, progress=False, console=QUIET)


def test_a_kill_right_after_a_checkpoints_training_state_is_saved_loses_no_train_log_line(tmp_path, monkeypatch,
                                                                                          finished):
    cfg = load_config("micro", STEPS)
    _killed_after_step_2(cfg, tmp_path / "run", monkeypatch)
    assert [s for s, _ in _log(tmp_path / "run")] == [1, 2]
    run_experiment(cfg, tmp_path / "run", progress=False, console=QUIET)
    assert _log(tmp_path / "run") == _log(finished)  # every step once, the resumed losses the uninterrupted ones


def test_temp_files_a_killed_write_left_are_removed_when_the_run_continues(tmp_path, finished):
    """An atomic write killed between its temp file and the rename (SIGKILL) left `.<name>.<12 hex>` beside the run's
    files for good; the next invocation, holding the folder's lock, removes them and says so — but the temps of
    status.json, report.html and config.yaml, which others write without that lock, and a user's own hidden file
    stay."""
    from io import StringIO

    run = tmp_path / "run"
    shutil.copytree(finished, run)
    (run / "summary.json").unlink()
    stale = [run / ".summary.json.0123456789ab", run / "checkpoints" / ".step_000004.safetensors.a1b2c3d4e5f6"]
    kept = [run / ".status.json.0123456789ab", run / ".report.html.0123456789ab", run / ".config.yaml.0123456789ab",
            run / ".my-notes", run / ".notes.txt.0123456789"]
    for path in stale + kept:
        path.write_text("half")
    out = StringIO()
    run_experiment(load_config("micro", STEPS), run, progress=False, console=Console(file=out, width=200))
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
    assert "removed 2 temporary files an earlier invocation left mid-write" in out.getvalue()
    assert (run / "summary.json").is_file()


def test_a_config_edited_under_a_saved_training_state_is_refused_before_resuming(tmp_path, monkeypatch):
    """`conceptlab resume` on a run whose config.yaml was edited in a training key printed "resuming training from
    step 2" and then failed deep in the trainer (an audit, 2026-12-07); it is refused first, in one line naming the
    state file, and the folder is left as it was."""
    import yaml

    cfg = load_config("micro", STEPS)
    _killed_after_step_2(cfg, tmp_path / "run", monkeypatch)
    config = tmp_path / "run" / "config.yaml"
    edited = yaml.safe_load(config.read_text())
    edited["train"]["lr"] = edited["train"]["lr"] * 2
    config.write_text(yaml.safe_dump(edited))
    log = (tmp_path / "run" / "train_log.jsonl").read_text()
    result = CliRunner().invoke(app, ["resume", str(tmp_path / "run"), "--no-progress", "--threads", "1"])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "resuming" not in text and "was saved under another training config than config.yaml" in text, text
    assert (tmp_path / "run" / "train_log.jsonl").read_text() == log
