"""A micro sweep (2 runs, seconds each) shared by the local and SLURM executor tests."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from conceptlab.experiments.executors import LocalExecutor
from conceptlab.experiments.sweep_state import read_status
from conceptlab.experiments.sweep import expand, run_sweep
from conceptlab.experiments.sweep_state import sweep_status

MICRO_SWEEP = {
    "description": "two micro runs for executor tests",
    "base": "micro",
    "overrides": {
        "train.steps": 30,
        "train.batch_size": 16,
        "train.checkpoint_steps": [10, 20, 30],
        "train.log_every": 5,
    },
    "axes": {"grid": {"data.color_separation": [0.3, 0.8]}},
    "executor": {"kind": "local", "workers": 2, "slurm": {"cpus_per_task": 1, "mem_gb": 1, "time_min": 10}},
}


@pytest.fixture(scope="session")
def micro_spec(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "micro-sweep.yaml"
    path.write_text(yaml.safe_dump(MICRO_SWEEP))
    return path


def _kill_worker_mid_run(run_dir, killed: dict, deadline: float) -> None:
    """Once the run has saved a training state (and not finished), SIGKILL the pool worker running it."""
    while time.time() < deadline:
        status = read_status(run_dir)
        if (run_dir / "train_state.safetensors").is_file() and status.get("state") == "running" \
                and not (run_dir / "summary.json").is_file():
            os.kill(int(status["pid"]), signal.SIGKILL)
            killed["pid"] = status["pid"]
            killed["log_steps"] = len((run_dir / "train_log.jsonl").read_text().splitlines())
            return
        time.sleep(0.02)


@pytest.fixture(scope="session")
def local_sweep(micro_spec, probe_cache, tmp_path_factory):
    """Run the micro sweep locally, killing one worker mid-run, then rerun it; returns what happened."""
    root = tmp_path_factory.mktemp("local-sweep")
    sweep = expand(str(micro_spec), root=root)
    victim = sweep.root / sweep.runs[1].run_id
    killed: dict = {}
    killer = threading.Thread(target=_kill_worker_mid_run, args=(victim, killed, time.time() + 120))
    killer.start()
    first = run_sweep(sweep, LocalExecutor(workers=2), progress=False)
    killer.join()
    states_after_kill = {r["run_id"]: (r["state"], r["error"]) for r in sweep_status(sweep.root)}
    second = run_sweep(expand(str(micro_spec), root=root), LocalExecutor(workers=2), progress=False)
    return {"sweep": sweep, "first": first, "second": second, "killed": killed, "victim": victim,
            "states_after_kill": states_after_kill}
