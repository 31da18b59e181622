"""`execute_run` on a folder another process finished after it was queued: reported done, nothing rerun."""

import json

from conceptlab.experiments.executors import execute_run


def test_a_run_finished_before_its_worker_got_the_lock_is_done_and_left_alone(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"kind": "shapes"}))  # no config: a rerun would fail loudly
    (run / "status.json").write_text(json.dumps({"state": "done", "attempt": 1}))
    outcome = execute_run(run, threads=1)
    assert (outcome.state, outcome.error) == ("done", None)
    assert json.loads((run / "status.json").read_text()) == {"state": "done", "attempt": 1}
