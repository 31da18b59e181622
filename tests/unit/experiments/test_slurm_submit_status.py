"""What a SLURM submission writes in each run's status.json, with submitit's executor replaced by a stand-in (no
SLURM needed): a run a stopped local sweep had queued (its host and dead pid in the status) is not read as
"interrupted" while its job array is submitted, and the job id is written beside the state a task that started
already wrote, not over it (a review of session 51)."""

import json
import socket
import subprocess
import sys
from types import SimpleNamespace

from conceptlab.experiments import executors
from conceptlab.experiments.executors import RunTask, SlurmExecutor
from conceptlab.experiments.loading import load_config
from conceptlab.store.run_folder import RunFolder


def test_a_submission_clears_a_local_attempts_process_and_keeps_a_started_tasks_state(tmp_path, monkeypatch):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a process id no process holds now: the stopped local sweep's
    runs = [tmp_path / "a", tmp_path / "b"]
    for run in runs:
        run.mkdir()
        (run / "train_state.safetensors").write_bytes(b"")  # an earlier local attempt saved a state: it had started
        (run / "status.json").write_text(json.dumps({"state": "queued", "host": socket.gethostname(),
                                                     "pid": gone.pid, "slurm_job": None}))
    assert RunFolder(runs[0]).state()[0] == "interrupted"  # as `sweep status` read it after the local Ctrl-C
    seen = {}

    class StandIn:  # submitit.SlurmExecutor's two calls the submission makes
        def __init__(self, folder, max_num_timeout):
            pass

        def update_parameters(self, **params):
            pass

        def map_array(self, fn, run_dirs, threads, donors):
            seen["while submitting"] = [RunFolder(r).state()[0] for r in runs]
            status = json.loads((runs[1] / "status.json").read_text())  # task b starts before the ids are written
            (runs[1] / "status.json").write_text(json.dumps({**status, "state": "running"}))
            return [SimpleNamespace(job_id=f"7_{i}") for i in range(len(run_dirs))]

    monkeypatch.setattr(executors, "slurm_reachable", lambda: (True, ""))
    monkeypatch.setattr(executors.submitit, "SlurmExecutor", StandIn)
    cfg = load_config("micro")
    SlurmExecutor(tmp_path / "slurm").submit([RunTask(r.name, r, cfg) for r in runs])
    assert seen["while submitting"] == ["queued", "queued"]
    written = [json.loads((r / "status.json").read_text()) for r in runs]
    assert [(w["state"], w["slurm_job"], w.get("pid")) for w in written] == [("queued", "7_0", None),
                                                                             ("running", "7_1", None)]
