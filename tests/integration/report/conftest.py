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
    """A finished `micro` run folder (TensorBoard on, the default), with its report and, as outside the tests, its
    figures, each with a PDF beside it (the report links them)."""
    from conceptlab.experiments.loading import load_config
    from conceptlab.experiments.runner import run_experiment

    run_dir = tmp_path_factory.mktemp("report-run") / "0001-micro"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("CONCEPTLAB_VECTOR_FIGURES", raising=False)
        patch.delenv("CONCEPTLAB_FIGURES", raising=False)
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


@pytest.fixture(scope="session")
def synthetic_findings(tmp_path_factory):
    """A findings report (`experiments.findings.write_findings`) over hand-written run folders of a micro suite: three
    seeds, one criterion that passes on two of them against its control and one on a threshold; no training."""
    import json

    from conceptlab.experiments.findings import evaluate_suite, plan, write_findings
    from conceptlab.experiments.findings_spec import load_suite

    folder = tmp_path_factory.mktemp("synthetic-findings")
    suite = {
        "runs": {"a": {"preset": "micro", "seeds": [100, 101, 102]}, "b": {"preset": "micro", "seeds": [100, 101, 102],
                                                                          "overrides": ["train.steps=30"]}},
        "findings": [{"name": "a-beats-b", "paper": "test", "claim": "a beats b", "setup": "fast", "control": "b",
                      "criteria": [
                          {"name": "beats", "statement": "a's accuracy beats b's by 0.1",
                           "value": {"runs": "a", "path": "final_accuracy.11/color"},
                           "control": {"runs": "b", "path": "final_accuracy.11/color"}, "direction": "greater",
                           "margin": 0.1, "restated": "a is not better than b on every seed"},
                          {"name": "learns", "statement": "a learns color by step 300",
                           "value": {"runs": "a", "path": "learning_time.held_out/color", "censored": "high"},
                           "threshold": 300, "direction": "less"}]}],
    }
    (folder / "suite.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
    p = plan(load_suite(str(folder / "suite.yaml")), None, "full", folder / "out")
    values = {"a": {100: (0.9, 200), 101: (0.7, None), 102: (0.95, 250)}, "b": {100: 0.6, 101: 0.65, 102: 0.5}}
    for name, s in p.sets.items():
        for r in s.sweep.runs:
            seed = r.config.train.train_seed
            v = values[name][seed]
            acc, lt = v if isinstance(v, tuple) else (v, 100)
            run = r.directory(s.sweep.root)
            run.mkdir(parents=True)
            (run / "summary.json").write_text(json.dumps({
                "kind": "shapes", "bf16": True, "seconds": {"total": 5.0},
                "provenance": {"cpu": "test CPU", "git_commit": "0123456789"},
                "final_accuracy": {"11/color": acc}, "learning_time": {"held_out/color": lt}}))
    write_findings(evaluate_suite(p), folder / "out", wall_seconds=1.0)
    return folder / "out"
