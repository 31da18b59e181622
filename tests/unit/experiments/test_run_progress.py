"""How far an unfinished run got, as `sweep status`, `findings --evaluate-only` and `runs show` say it
(experiments.sweep_state.run_progress): its training step with the time left at its own rate, then its evaluation;
nothing for a finished run or one never started; `runs show` tells a running run from a stopped one by its lock."""

from __future__ import annotations

import json

from conceptlab.experiments.sweep_state import run_progress


def _run(tmp_path, steps=20000, logged=None, saved=None, timings=(), checkpoints=(), measured=(), summary=False):
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(f"train:\n  steps: {steps}\n")
    if logged is not None:
        lines = [json.dumps({"step": s, "loss": 1.0}) for s in range(10, logged + 1, 10)]
        (run / "train_log.jsonl").write_text("\n".join(lines) + "\n" + '{"step": 99999, "lo')  # a torn last line
    if saved is not None:
        (run / "training.json").write_text(json.dumps({"step": saved}))
    if timings:
        (run / "timings.jsonl").write_text("".join(json.dumps({"seconds": {"train": t}}) + "\n" for t in timings))
    for step in checkpoints:
        (run / "checkpoints").mkdir(exist_ok=True)
        (run / "checkpoints" / f"step_{step:07d}.safetensors").write_bytes(b"")
        (run / "checkpoints" / f"step_{step:07d}.json").write_text("{}")
    for step in measured:
        (run / "eval").mkdir(exist_ok=True)
        (run / "eval" / f"step_{step:07d}.parquet").write_bytes(b"")
    if summary:
        (run / "summary.json").write_text("{}")
    return run


def test_training_progress_and_the_time_left_at_the_runs_own_rate(tmp_path):
    # 6,000 steps saved in 600 + 450 s over two invocations (0.175 s a step); logged to 6,310: 13,690 steps left
    run = _run(tmp_path, logged=6310, saved=6000, timings=(600.0, 450.0), checkpoints=(1000, 6000))
    assert run_progress(run) == "training 6,310/20,000 (31%), ~40 min left"
    # a run whose process is gone resumes from its last saved state: that is where it stands
    assert run_progress(run, live=False) == "training 6,000/20,000 (30%), ~41 min left"


def test_no_rate_before_the_first_saved_state(tmp_path):
    run = _run(tmp_path, logged=420)
    assert run_progress(run) == "training 420/20,000 (2%)"


def test_evaluation_progress_once_trained(tmp_path):
    run = _run(tmp_path, steps=3000, logged=3000, saved=3000, timings=(300.0,), checkpoints=(1000, 2000, 3000),
               measured=(1000,))
    assert run_progress(run) == "evaluating: 1/3 checkpoints measured"
    for step in (2000, 3000):
        (run / "eval" / f"step_{step:07d}.parquet").write_bytes(b"")
    assert run_progress(run) == "evaluating: all 3 checkpoints begun, finishing their measurements and the summary"


def test_evaluation_of_another_runs_training_says_whose(tmp_path):
    run = _run(tmp_path, steps=3000, logged=3000, saved=3000, timings=(300.0,), checkpoints=(1000, 2000, 3000),
               measured=(1000,))
    (run / "training.json").write_text(json.dumps({"step": 3000, "trained_in": {"run_id": "abc123"}}))
    assert run_progress(run) == "evaluating (the training of abc123): 1/3 checkpoints measured"


def test_evaluation_time_left_at_the_rate_its_checkpoints_were_measured(tmp_path):
    import os

    run = _run(tmp_path, steps=8000, logged=8000, saved=8000, timings=(300.0,),
               checkpoints=tuple(range(1000, 8001, 1000)), measured=(1000, 2000, 3000, 4000))
    for i, step in enumerate((1000, 2000, 3000, 4000)):  # 15 s apart, with a 600-s pause (stopped, resumed)
        stamp = 1_000_000 + 15 * i + (600 if i >= 3 else 0)
        os.utime(run / "eval" / f"step_{step:07d}.parquet", (stamp, stamp))
    (run / "interventions").mkdir()
    (run / "interventions" / "step_0001000.parquet").write_bytes(b"")  # a later file of the first: its newest time
    os.utime(run / "interventions" / "step_0001000.parquet", (1_000_005, 1_000_005))
    # gaps 10, 15, 615: the median 15 s; 4 checkpoints left → 60 s
    assert run_progress(run) == "evaluating: 4/8 checkpoints measured, ~1 min left"
    assert run_progress(run, live=False) == "evaluating: 4/8 checkpoints measured"  # stopped: no rate to go on


def test_nothing_for_a_finished_run_and_starting_for_a_fresh_one(tmp_path):
    assert run_progress(_run(tmp_path / "a", summary=True, logged=100)) == ""
    assert run_progress(_run(tmp_path / "b")) == "starting"
    interrupted = _run(tmp_path / "d", logged=120)  # logged, but killed before its first saved state
    assert run_progress(interrupted, live=False) == "no training state saved yet: it restarts from step 0"
    (tmp_path / "c").mkdir()
    assert run_progress(tmp_path / "c") == ""  # not even a config: nothing to say


def test_runs_show_on_an_unfinished_run_says_how_far_it_got_and_how_to_resume(tmp_path):
    import socket

    from typer.testing import CliRunner

    from conceptlab.cli import app

    run = _run(tmp_path, steps=40, logged=30, saved=10)  # resumes from its saved step 10, not the logged 30
    (run / "status.json").write_text(json.dumps({"state": "running", "host": socket.gethostname(), "pid": 2**22 + 7}))
    out = CliRunner().invoke(app, ["runs", "show", str(run)])
    text = " ".join(out.output.split())
    assert out.exit_code == 2, text
    assert "is not finished (stopped, training 10/40 (25%)): no summary to show yet" in text, text  # no lock held
    assert "resume it with conceptlab resume" in text
    from conceptlab.store.run_folder import RunFolder

    import multiprocessing

    ready, done = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.get_context("fork").Process(target=_hold_lock, args=(str(run), ready, done))
    holder.start()
    try:
        assert ready.wait(30)
        text = " ".join(CliRunner().invoke(app, ["runs", "show", str(run)]).output.split())
        assert f"is not finished (running, PID {holder.pid} on host" in text and "training 30/40 (75%)" in text, text
        assert "resume it" not in text
    finally:
        done.set()
        holder.join(30)
    assert RunFolder(run).holder() is None


def _hold_lock(run, ready, done):
    """A process running the folder, as far as its lock shows: holds it until told to stop."""
    from conceptlab.store.run_folder import RunFolder

    with RunFolder(run).lock():
        ready.set()
        done.wait(30)
