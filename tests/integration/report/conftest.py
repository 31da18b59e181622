"""One micro run and one micro sweep (2 runs), made once per session, shared by the report, TensorBoard and
browser tests (seconds each at one thread)."""

import pytest
import yaml

MICRO_SWEEP = {
    "description": "two micro runs for the report tests",
    "base": "micro",
    "axes": {"grid": {"data.color_separation": [0.3, 0.8]}},
    "executor": {"kind": "local", "workers": 1},
}


@pytest.fixture(scope="session")
def micro_run(tmp_path_factory, probe_cache):
    """A finished `micro` run folder (TensorBoard on, the default), with its report."""
    from conceptlab.experiments.loading import load_config
    from conceptlab.experiments.runner import run_experiment

    run_dir = tmp_path_factory.mktemp("report-run") / "0001-micro"
    run_experiment(load_config("micro"), run_dir, progress=False)
    return run_dir


@pytest.fixture(scope="session")
def micro_sweep(tmp_path_factory, probe_cache):
    """A finished two-run micro sweep (one worker), with its report and its runs' reports."""
    from conceptlab.experiments.executors import LocalExecutor
    from conceptlab.experiments.sweep import expand, run_sweep

    folder = tmp_path_factory.mktemp("report-sweep")
    spec = folder / "micro-report-sweep.yaml"
    spec.write_text(yaml.safe_dump(MICRO_SWEEP))
    sweep = expand(str(spec), root=folder / "sweep")
    result = run_sweep(sweep, LocalExecutor(workers=1, threads=1), progress=False)
    assert result["done"] == 2 and not result["failed"], result
    return sweep.root
