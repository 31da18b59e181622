"""The local executor end to end: a micro sweep in a process pool, a worker killed mid-run, a rerun that completes it."""

import json
import os
import signal
import time

import pytest
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.sweep_state import read_status
from conceptlab.store.index import open_store

CHECKPOINTS, CLASSES, CONCEPTS = 3, 4, 2


# `make test` (--dist loadgroup): one worker builds sweeps/conftest.py's session-scoped sweep, once
pytestmark = pytest.mark.xdist_group("local-sweep")


@pytest.mark.slow
def test_killed_worker_fails_only_its_runs_and_a_rerun_completes_without_duplicates(local_sweep):
    sweep, first, second = local_sweep["sweep"], local_sweep["first"], local_sweep["second"]
    victim = local_sweep["victim"]
    assert local_sweep["killed"], "the worker was never killed mid-run"
    # First pass: the killed run is recorded as failed with the reason; the sweep itself carried on.
    assert victim.name in first["failed"] and "worker process died" in first["failed"][victim.name]
    assert first["done"] + len(first["failed"]) == 2
    state, error = local_sweep["states_after_kill"][victim.name]
    assert state == "failed" and "worker process died" in error
    # Rerun: only the unfinished runs run again, and they resume from their saved state.
    assert second["skipped"] == first["done"] and second["done"] == 2 - first["done"] and not second["failed"]
    assert "resuming training from step" in (victim / "run.log").read_text()
    assert read_status(victim)["attempt"] == 2 and read_status(victim)["state"] == "done"
    for run in sweep.runs:
        log_steps = [json.loads(line)["step"] for line in (sweep.root / run.run_id / "train_log.jsonl").read_text().splitlines()]
        assert log_steps == sorted(set(log_steps)) and log_steps[-1] == 30
    with open_store(sweep.root) as store:
        runs = store.runs()
        assert sorted(runs["run_id"]) == sorted(r.run_id for r in sweep.runs)
        assert set(runs["status"]) == {"done"} and sorted(runs["data.color_separation"]) == [0.3, 0.8]
        counts = store.query("SELECT run_id, count(*) AS n, count(DISTINCT (step, class, concept)) AS k "
                             "FROM concept_space GROUP BY run_id")
        assert set(counts["n"]) == {CHECKPOINTS * CLASSES * CONCEPTS} and (counts["n"] == counts["k"]).all()
        steps = store.query("SELECT DISTINCT step FROM eval_steps ORDER BY step")["step"].tolist()
        assert steps == [10, 20, 30]
        assert store.query("SELECT count(*) AS n FROM learning_times")["n"][0] == 2 * 2 * CONCEPTS


@pytest.mark.slow
def test_a_complete_sweep_reruns_nothing_and_status_shows_done(local_sweep, micro_spec):
    sweep = local_sweep["sweep"]
    summaries = {r.run_id: (sweep.root / r.run_id / "summary.json").stat().st_mtime_ns for r in sweep.runs}
    result = CliRunner().invoke(app, ["sweep", "run", str(micro_spec), "--root", str(sweep.root), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 runs: 2 already complete, 0 done now, 0 failed" in result.output
    assert {r.run_id: (sweep.root / r.run_id / "summary.json").stat().st_mtime_ns for r in sweep.runs} == summaries
    status = CliRunner().invoke(app, ["sweep", "status", str(sweep.root)])
    assert status.exit_code == 0 and "2 done" in status.output


def test_bump_world_sweep_runs_on_the_local_pool(tmp_path):
    """Non-shapes runs need no concept probe: the pool runs a bumps sweep and sweep-report reads it."""
    import yaml

    spec = tmp_path / "bumps.yaml"
    spec.write_text(yaml.safe_dump({
        "description": "two bump-world runs", "base": "bumps-micro",
        "axes": {"grid": {"data.held_out.scope": ["2d", "all"]}},
        "executor": {"kind": "local", "workers": 2, "threads": 1},
    }))
    root = tmp_path / "sweep"
    result = CliRunner().invoke(app, ["sweep", "run", str(spec), "--root", str(root), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 done now, 0 failed" in result.output
    report = CliRunner().invoke(app, ["sweep-report", str(root)], terminal_width=200)
    assert report.exit_code == 0, report.output
    assert "held_out" in report.output and (root / "figures" / "region_accuracy.png").is_file()


def test_sigterm_to_the_sweep_stops_its_pool_workers_too(micro_spec, tmp_path):
    """A sweep process told to stop (SIGTERM: `kill`, a job manager) takes its workers with it, rather than leaving
    them training, orphaned, in folders the next invocation finds locked; it exits with status 143."""
    import subprocess
    import sys

    spec = yaml.safe_load(micro_spec.read_text())
    spec["overrides"] = {**spec["overrides"], "train.steps": 100000, "train.checkpoint_steps": [100000]}
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(spec))
    root = tmp_path / "sweep"
    script = ("import sys; from pathlib import Path; from conceptlab.experiments.executors import LocalExecutor; "
              "from conceptlab.experiments.sweep import expand, run_sweep; "
              "run_sweep(expand(sys.argv[1], root=Path(sys.argv[2])), LocalExecutor(workers=1, threads=1), "
              "progress=False)")
    log = tmp_path / "stderr.txt"  # a file, not a pipe: an orphaned worker would hold a pipe open
    with open(log, "w") as err:
        parent = subprocess.Popen([sys.executable, "-c", script, str(path), str(root)], stderr=err)
    pid, deadline = None, time.time() + 120
    while pid is None and time.time() < deadline and parent.poll() is None:
        for status in root.glob("*/status.json"):
            state = json.loads(status.read_text() or "{}")
            if state.get("state") == "running" and (status.parent / "train_log.jsonl").is_file():
                pid = int(state["pid"])
        time.sleep(0.1)
    assert pid is not None, log.read_text() if parent.poll() is not None else "no run started in 120 s"
    parent.send_signal(signal.SIGTERM)
    try:
        code = parent.wait(timeout=60)
        deadline = time.time() + 30
        while time.time() < deadline and _alive(pid):
            time.sleep(0.1)
        assert not _alive(pid), f"worker {pid} still running after its sweep was terminated"
        assert code == 143, log.read_text()
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie (exited, not yet reaped) is not running
        return stat.read().split(")")[-1].split()[0] != "Z"
