"""Nothing lost, nothing silently wrong: every kind of damage to a finished run, followed by every reading command;
kill -9 during training and during evaluation, then resume, byte-identical and nothing lost; two processes on one
run folder; a stale run after an analysis-version bump; `runs migrate` of an old-format folder.

The contract checked for each (damage, command): the command either gives exactly the undamaged run's results, or
refuses with one line naming the damaged file — never a traceback, never different numbers with exit 0. The store's
commands leave a damaged table out with a warning naming it and answer for the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.store.files import read_tensors

runner = CliRunner()
MICRO = ["eval.interventions.samples=2", "eval.interventions.over_prompting.scales=[0.5]",
         "eval.interventions.linear=null", "eval.interventions.patching=null"]
RESULT_KEYS = ("learning_time", "mean_accuracy", "final_accuracy", "final_valid_fraction", "final_step", "checkpoints",
               "emergence")


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("integrity")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished micro run with interventions, and a second run of another config (a foreign checkpoint's source)."""
    import os as _os

    _os.environ.setdefault("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    root = tmp_path_factory.mktemp("finished")
    run_experiment(load_config("micro", MICRO), root / "run", progress=False)
    run_experiment(load_config("micro", ["data.color_separation=0.7"]), root / "other", progress=False)
    return root


def _results(summary: dict) -> dict:
    return {k: summary.get(k) for k in RESULT_KEYS}


def _flip(path: Path, offset: int = -9) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _last_ckpt(run: Path) -> Path:
    return sorted((run / "checkpoints").glob("step_*.safetensors"))[-1]


DAMAGE = {
    "checkpoint: a flipped byte in the tensor data": lambda r, o: _flip(_last_ckpt(r)),
    "checkpoint: truncated": lambda r, o: _truncate(_last_ckpt(r)),
    "checkpoint: sidecar deleted": lambda r, o: _last_ckpt(r).with_suffix(".json").unlink(),
    "checkpoint: sidecar torn": lambda r, o: _truncate(_last_ckpt(r).with_suffix(".json")),
    "checkpoint: weights of the middle one deleted": lambda r, o: sorted((r / "checkpoints").glob("*.safetensors"))[0].unlink(),
    "checkpoint: copied in from another run": lambda r, o: [
        shutil.copy(_last_ckpt(o), _last_ckpt(r)), shutil.copy(_last_ckpt(o).with_suffix(".json"),
                                                                _last_ckpt(r).with_suffix(".json"))],
    "checkpoint: a flipped byte, its evaluation lost (re-evaluation needed)": lambda r, o: [
        _flip(_last_ckpt(r)), sorted((r / "eval").glob("*.parquet"))[-1].unlink()],
    "checkpoint: copied in from another run, its evaluation lost (re-evaluation needed)": lambda r, o: [
        shutil.copy(_last_ckpt(o), _last_ckpt(r)), shutil.copy(_last_ckpt(o).with_suffix(".json"),
                                                                _last_ckpt(r).with_suffix(".json")),
        sorted((r / "eval").glob("*.parquet"))[-1].unlink()],
    "training state: a flipped byte": lambda r, o: _flip(r / "train_state.safetensors"),
    "training state: truncated": lambda r, o: _truncate(r / "train_state.safetensors"),
    "train log: torn last line": lambda r, o: (r / "train_log.jsonl").write_text(
        (r / "train_log.jsonl").read_text() + '{"step": 99, "lo'),
    "timings: torn last line": lambda r, o: (r / "timings.jsonl").write_text(
        (r / "timings.jsonl").read_text() + '{"finished": "20'),
    "summary: not JSON": lambda r, o: (r / "summary.json").write_text("{not json"),
    "run table concept_space.parquet: truncated": lambda r, o: _truncate(r / "concept_space.parquet"),
    "run table interventions.parquet: garbage": lambda r, o: (r / "interventions.parquet").write_bytes(b"garbage"),
    "per-checkpoint eval file: truncated": lambda r, o: _truncate(sorted((r / "eval").glob("*.parquet"))[-1]),
    "per-checkpoint interventions file: garbage": lambda r, o: sorted((r / "interventions").glob("*.parquet"))[-1]
    .write_bytes(b"PAR1 garbage"),
    "samples file: truncated": lambda r, o: _truncate(r / "samples.safetensors"),
    "provenance: not JSON": lambda r, o: (r / "provenance.json").write_text("[1, 2"),
    "data.json deleted": lambda r, o: (r / "data.json").unlink(),
    "config.yaml: not YAML": lambda r, o: (r / "config.yaml").write_text("data: [unclosed"),
}
# the file each damage is about: a refusal must name it (by path or file name)
NAMES = {
    "checkpoint": "checkpoints", "training state": "train_state", "train log": "train_log", "timings": "timings",
    "summary": "summary.json", "run table concept_space": "concept_space.parquet",
    "run table interventions": "interventions.parquet", "per-checkpoint eval": "eval/step_",
    "per-checkpoint interventions": "interventions/step_", "samples": "samples.safetensors",
    "provenance": "provenance.json", "data.json": "data.json", "config.yaml": "config.yaml",
}


def _named(damage: str) -> str:
    return next(v for k, v in NAMES.items() if damage.startswith(k))


def _invoke(args: list[str]):
    result = runner.invoke(app, args, terminal_width=400)
    text = result.output + (str(result.exception) if result.exception and not isinstance(result.exception,
                                                                                          SystemExit) else "")
    return result.exit_code, text, result.exception


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_then_every_reading_command_never_gives_silent_wrong_results(finished, tmp_path, damage):
    run = tmp_path / "root" / "run"
    shutil.copytree(finished / "run", run)
    truth = _results(json.loads((run / "summary.json").read_text()))
    DAMAGE[damage](run, finished / "other")
    name = _named(damage)
    outcomes = {}
    for command in (["runs", "show", str(run), "--json"], ["runs", "ls", "--root", str(tmp_path / "root")],
                    ["runs", "query", "select count(*) as n from concept_space", "--root", str(tmp_path / "root"),
                     "--csv"],
                    ["resume", str(run), "--no-progress", "--threads", "1"]):  # last: it may repair what it can
        code, text, exc = _invoke(command)
        label = command[0] if command[0] != "runs" else f"runs {command[1]}"
        assert exc is None or isinstance(exc, SystemExit), f"{damage} / {label}: traceback {exc!r}"
        assert "Traceback" not in text, (damage, label, text)
        if code == 0 and label in ("runs show", "resume"):
            summary = json.loads((run / "summary.json").read_text())
            assert _results(summary) == truth, f"{damage} / {label}: exit 0 with different results"
            outcomes[label] = "same results"
        elif code == 0:
            if "warning" in text:
                assert name.split("/")[-1].split("_")[0] in text, (damage, label, text)
            outcomes[label] = "answered" + (" with a warning" if "warning" in text else "")
        else:
            errors = [line for line in text.strip().splitlines() if line.startswith("error:")]
            assert code in (1, 2) and len(errors) == 1, (damage, label, text)
            assert name.split("/")[-1] in errors[0] or name in errors[0], f"{damage} / {label}: '{name}' not named: {text}"
            outcomes[label] = "refused, naming the file"
    # a damaged checkpoint that has to be evaluated again is refused, never evaluated as this run's
    if "re-evaluation needed" in damage:
        assert outcomes["resume"] == "refused, naming the file", outcomes
    COUNTS.setdefault(damage, outcomes)


COUNTS: dict[str, dict[str, str]] = {}


def test_kill_9_during_training_and_during_evaluation_then_resume_is_byte_identical_and_loses_nothing(tmp_path):
    args = ["micro", *MICRO, "train.steps=60", "train.checkpoint_steps=[20,40,60]", "eval.samples_per_class=4"]
    reference = tmp_path / "reference"
    run_experiment(load_config(args[0], args[1:]), reference, progress=False)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    kill_points = {"training, after the first checkpoint": "timings.jsonl",  # written just after the checkpoint
                   "evaluation, after the first checkpoint's measurements": "interventions/step_0000020.parquet",
                   "evaluation, after the last checkpoint's concept space": "eval/step_0000060.parquet"}
    for point, marker in kill_points.items():
        run = tmp_path / f"killed-in-{point.split(',')[0]}-{marker.split('/')[0].split('.')[0]}"
        config = tmp_path / f"{run.name}.yaml"
        config.write_text(yaml.safe_dump({"extends": "micro", **_nested(args[1:])}))
        code = ("import sys; from conceptlab.experiments.loading import load_config; "
                "from conceptlab.experiments.runner import run_experiment; "
                f"run_experiment(load_config({str(config)!r}), {str(run)!r}, progress=False)")
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + 240
        while not (run / marker).exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, f"the run ended before the kill point ({point})"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not (run / "summary.json").exists()
        kept = {p.relative_to(run) for p in run.rglob("step_*") if p.is_file()}
        summary = run_experiment(load_config(str(config)), run, progress=False)  # resume
        assert kept <= {p.relative_to(run) for p in run.rglob("step_*") if p.is_file()}, f"lost files ({point})"
        _assert_same_run(reference, run, point)
        # nor the killed invocation's training time: it was recorded at its checkpoints
        assert summary["invocations"] == 2, point
        assert summary["seconds_all_invocations"]["train"] > summary["seconds"]["train"], (point, summary)
        killed = json.loads((run / "timings.jsonl").read_text().splitlines()[0])
        assert killed.get("interrupted") is True and killed["seconds"]["train"] > 0, (point, killed)


def _nested(overrides: list[str]) -> dict:
    from conceptlab.experiments.loading import apply_overrides

    return apply_overrides({}, overrides)


def _assert_same_run(a: Path, b: Path, where: str) -> None:
    for table in ("concept_space", "learning_times", "interventions", "emergence"):
        x, y = pd.read_parquet(a / f"{table}.parquet"), pd.read_parquet(b / f"{table}.parquet")
        pd.testing.assert_frame_equal(x.drop(columns="run", errors="ignore"), y.drop(columns="run", errors="ignore"),
                                      obj=f"{table} ({where})")
    for ckpt in sorted((a / "checkpoints").glob("*.safetensors")):
        x, y = read_tensors(ckpt), read_tensors(b / "checkpoints" / ckpt.name)
        assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x), f"{ckpt.name} ({where})"
    samples = read_tensors(b / "samples.safetensors")
    assert sorted(samples) == ["step_0000020", "step_0000040", "step_0000060"], where
    sa, sb = json.loads((a / "summary.json").read_text()), json.loads((b / "summary.json").read_text())
    assert _results(sa) == _results(sb), where


def test_two_processes_on_one_run_folder_the_second_gets_one_line_naming_the_holder(tmp_path):
    run = tmp_path / "run"
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump({"extends": "micro", "train": {"steps": 4000, "checkpoint_steps": [4000]}}))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code = ("from conceptlab.experiments.loading import load_config; "
            "from conceptlab.experiments.runner import run_experiment; "
            f"run_experiment(load_config({str(config)!r}), {str(run)!r}, progress=False)")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (run / "train_log.jsonl").exists() and time.time() < deadline:
            time.sleep(0.05)
        result = runner.invoke(app, ["resume", str(run), "--no-progress"])
        assert result.exit_code == 2, result.output
        assert f"is in use by PID {proc.pid} on host" in result.output and "Traceback" not in result.output
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # the holder died: the kernel released its lock, so the folder is free again without any cleanup
    from conceptlab.store.run_folder import RunFolder

    assert RunFolder(run).holder() is None
    with RunFolder(run).lock():
        pass


def test_a_sweep_started_twice_runs_each_run_once(tmp_path):
    from conceptlab.experiments.executors import LocalExecutor
    from conceptlab.experiments.sweep import expand, run_sweep

    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"base": "micro", "overrides": {"train.steps": 200, "train.checkpoint_steps": [100, 200]},
                                    "axes": {"seeds": [0, 1]}}))
    sweep = expand(str(spec), root=tmp_path / "sweep")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    code = ("from conceptlab.experiments.sweep import expand, run_sweep; "
            "from conceptlab.experiments.executors import LocalExecutor; "
            f"run_sweep(expand({str(spec)!r}, root={str(tmp_path / 'sweep')!r}), LocalExecutor(2, 1), progress=False)")
    first = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not all((r.directory(sweep.root) / "train_log.jsonl").exists() for r in sweep.runs) \
                and time.time() < deadline:
            time.sleep(0.05)
        second = run_sweep(sweep, LocalExecutor(2, 1), progress=False)
        assert len(second["busy"]) == 2 and second["done"] == 0 and not second["failed"], second
    finally:
        first.wait(timeout=300)
    for r in sweep.runs:  # every logged step once: nobody trained a run twice
        steps = [json.loads(line)["step"] for line in (r.directory(sweep.root) / "train_log.jsonl").read_text().splitlines()]
        assert len(steps) == len(set(steps)) and (r.directory(sweep.root) / "summary.json").is_file()


def test_an_analysis_version_bump_gives_new_run_ids_and_refuses_to_continue_an_old_folder(tmp_path, monkeypatch):
    from conceptlab.experiments.sweep import run_id
    from conceptlab.studies import study_for

    cfg = load_config("micro", ["train.steps=10", "train.checkpoint_steps=[10]"])
    before = run_id(cfg)
    run_experiment(cfg, tmp_path / "run", progress=False)
    study = study_for("shapes")
    monkeypatch.setattr(type(study), "version", study.version + 1)
    assert run_id(cfg) != before  # a sweep would run it anew, not reuse the old folder
    result = runner.invoke(app, ["resume", str(tmp_path / "run"), "--no-progress"])
    assert result.exit_code == 2 and "was made by analysis versions" in result.output, result.output
    assert "start a new run" in result.output and len(result.output.strip().splitlines()) <= 2


def test_runs_migrate_upgrades_a_folder_of_the_old_format(finished, tmp_path):
    run = tmp_path / "old"
    shutil.copytree(finished / "run", run)
    (run / "provenance.json").unlink()  # what a folder written before 2026-12-01 looks like
    (run / "training.json").unlink()
    for sidecar in (run / "checkpoints").glob("*.json"):
        meta = json.loads(sidecar.read_text())
        meta.pop("sha256")
        sidecar.write_text(json.dumps(meta))
    result = runner.invoke(app, ["resume", str(run), "--no-progress"])
    assert result.exit_code == 2 and "runs migrate" in result.output, result.output
    result = runner.invoke(app, ["runs", "migrate", str(tmp_path)])
    assert result.exit_code == 0 and "format 1 → 2" in result.output and "hashed step_0000020" in result.output
    meta = json.loads((run / "checkpoints" / "step_0000020.json").read_text())
    assert "sha256" in meta
    assert json.loads((run / "provenance.json").read_text())["versions"] is None
    again = runner.invoke(app, ["runs", "migrate", str(tmp_path)])
    assert "already current" in again.output
    assert runner.invoke(app, ["runs", "show", str(run)]).exit_code == 0
    result = runner.invoke(app, ["resume", str(run), "--no-progress"])  # its code version is unknown: not continued
    assert result.exit_code == 2 and "unknown version" in result.output, result.output
