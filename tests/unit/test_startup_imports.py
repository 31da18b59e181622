"""What a command pays before it works. Importing the config (and with it the studies) must not import the heavy
libraries only some analyses use — ripser (and scikit-learn, which it imports), scipy.stats, scipy.integrate,
scipy.optimize, scipy.ndimage — each is imported where it is used, nor torch's dynamo (about a second; the SFC64
dropout masks import it only under `torch.compile`, `models.masks`); and the commands that only read files (`runs
show`, `runs ls`, `runs query`, `sweep status`) must import neither torch nor the studies nor matplotlib
(`bench/startup.py`, docs/benchmarks.md "Command start-up"). Checked in fresh processes, whose modules nothing else
has imported."""

import json
import subprocess
import sys

HEAVY = ("ripser", "sklearn", "scipy.stats", "scipy.integrate", "scipy.optimize", "scipy.ndimage", "torch._dynamo")


def test_importing_the_config_imports_no_heavy_analysis_library():
    code = ("import sys, json, conceptlab.experiments.config, conceptlab.cli; "
            f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], done.stdout


def test_the_analyses_that_use_them_still_run():
    """The moved imports resolve where they are used (one small call each)."""
    import numpy as np
    import pandas as pd

    from conceptlab.analysis import commitment, concept_space, emergence_stats, finding_criteria, geometry, phenomenology

    assert emergence_stats.sign_test([(1, 2), (1, 3), (-2, -1)])["positive"] == 2
    assert emergence_stats.median_interval([(0, 1), (1, 2), (2, 3)])["median_low"] == 1
    assert finding_criteria.trend([1, 2, 3], [3, 2, 1]) == -1
    agreement = commitment.measure_agreement(pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [1.0, 3.0, 2.0]}))
    assert agreement["spearman"].iloc[0] == 0.5
    curve = [0.0, 0.25, 0.5, 0.75, 1.0]
    assert commitment.departure(curve, [c + 0.5 for c in curve], margin=0.1, trained_stderr=[0.01] * 5,
                                control_stderr=[0.01] * 5)["departs"]
    assert concept_space.authors_learning_index(np.array([0, 0, 0, 1, 1, 1, 1.0]), sigma=0.0, consistent=3) == 4
    steps = np.linspace(0, 100, 8)
    path = phenomenology.simulate(phenomenology.GatedFlowParams(a=2.0, k=0.2, t0=50.0, eta=0.1), steps)
    assert path.shape == (8, 2) and phenomenology.fit_independent_sigmoids(steps, path) is not None
    angle = np.linspace(0, 2 * np.pi, 40, endpoint=False)
    circle = np.stack([np.cos(angle), np.sin(angle)], axis=1)
    assert geometry.persistent_homology(circle, max_dim=1, n_components=2)["betti"] == (1, 1)


# `runs show` reads the summary's JSON and `runs ls` / `runs query` the index: none needs torch, the studies or
# matplotlib (2.7 s → 0.35 s and 0.9 s here, docs/benchmarks.md "Command start-up")
SHOW_DRIVER = """
import json, sys
sys.argv = ["conceptlab", *sys.argv[1:]]
from conceptlab.cli import main
try:
    main()
except SystemExit as stop:
    code = stop.code or 0
else:
    code = 0
print(json.dumps({"code": code, "loaded": [m for m in ("torch", "matplotlib", "conceptlab.studies", "pandas")
                                           if m in sys.modules]}))
"""


def _command(*args: str) -> tuple[str, dict]:
    done = subprocess.run([sys.executable, "-c", SHOW_DRIVER, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout.strip().splitlines()
    return "\n".join(out[:-1]), json.loads(out[-1])


CONCEPT_SPACE_SUMMARY = {  # the concept-space study's fields (what shapes and celeba runs write), abridged
    "name": "hand-written", "kind": "shapes", "concept_signal": {"color": 0.4, "size": 0.2},
    "learning_time": {"train/color": 150, "held_out/size": None}, "final_step": 300,
    "final_accuracy": {"00/color": 1.0}, "precision": "fp32", "device": "cpu", "threads": 1,
}
FIELDS_SUMMARY = {  # any other study's: printed field by field
    "name": "hand-written", "kind": "bumps", "final_step": 300, "final_accuracy": {"held_out": {"joint": 0.25}},
    "bf16": False, "device": "cpu", "threads": 1,  # written before `precision`: named from `bf16`
}


def test_runs_show_of_a_finished_run_imports_neither_torch_nor_the_studies(tmp_path):
    """A built-in kind's layout is known without importing its study (`cli.CONCEPT_SPACE_KINDS`); the precision of a
    summary written before `precision` is named from its `bf16` without importing torch either."""
    for summary, expected in [(CONCEPT_SPACE_SUMMARY, ["learning time", "train/color", "150", "not learned",
                                                       "precision: fp32 (cpu, 1 thread)"]),
                              (FIELDS_SUMMARY, ["final_accuracy.held_out.joint: 0.25", "precision: fp32"])]:
        run = tmp_path / summary["kind"]
        run.mkdir()
        (run / "summary.json").write_text(json.dumps(summary))
        text, state = _command("runs", "show", str(run))
        assert state == {"code": 0, "loaded": []}, (text, state)
        assert all(line in text for line in expected), text
        assert ("learning time" in text) == (summary is CONCEPT_SPACE_SUMMARY), text


def test_runs_ls_and_query_import_no_torch(tmp_path):
    run = tmp_path / "runs" / "0001-hand-written"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("name: hand-written\n")
    (run / "summary.json").write_text(json.dumps(FIELDS_SUMMARY))
    for args, shows in ((["runs", "ls", "--root", str(tmp_path / "runs")], "0001-hand-written  done"),
                        (["runs", "query", "select count(*) * 7 as n from runs", "--root", str(tmp_path / "runs")],
                         " 7")):
        text, state = _command(*args)
        assert state["code"] == 0 and shows in text, (args, text)
        assert not {"torch", "matplotlib", "conceptlab.studies"} & set(state["loaded"]), (args, state)


def test_the_concept_space_kinds_the_cli_knows_are_the_studies_built_on_it():
    from conceptlab.cli import CONCEPT_SPACE_KINDS
    from conceptlab.studies import builtin_studies
    from conceptlab.studies.concept_space import ConceptSpaceStudy

    assert CONCEPT_SPACE_KINDS == {s.kind for s in builtin_studies() if isinstance(s, ConceptSpaceStudy)}


def test_sweep_status_of_a_running_sweep_imports_no_torch(tmp_path):
    """`sweep status` reads the manifest, each run's status and how far it got — a saved training state's step from
    its metadata (`train.checkpoints.training_state_step` reads no tensor) — without torch or the sweep machinery."""
    import os

    import torch

    from conceptlab.store.run_folder import RunFolder
    from conceptlab.train.checkpoints import save_training_state

    sweep = tmp_path / "sweep"
    done, going = sweep / "run-done", sweep / "run-going"
    for run in (done, going):
        run.mkdir(parents=True)
        (run / "config.yaml").write_text("train:\n  steps: 200\n")
    (done / "summary.json").write_text(json.dumps(FIELDS_SUMMARY))
    save_training_state(RunFolder(going).train_state, {"w": torch.zeros(2)}, {"step": 50})
    (going / "status.json").write_text(json.dumps({"state": "running", "pid": os.getpid(), "host": "elsewhere"}))
    (sweep / "manifest.json").write_text(json.dumps({"runs": [{"run_id": "run-done", "values": {"seed": 0}},
                                                              {"run_id": "run-going", "values": {"seed": 1}}]}))
    text, state = _command("sweep", "status", str(sweep))
    flat = " ".join(text.split())  # the console wraps at its width: the sweep's tmp path moves the break
    assert state["code"] == 0 and "training 50/200 (25%)" in flat and "1 done, 1 running" in flat, (text, state)
    assert not {"torch", "matplotlib", "conceptlab.studies"} & set(state["loaded"]), state


def test_importing_the_package_and_its_commands_leaves_pythons_random_stream_as_it_was():
    """rich draws from Python's global `random` when its styles are first imported: a user's `random.seed(0)` then
    `import conceptlab.api` gave another stream than without the import (an audit, 2026-12-07)."""
    code = ("import random; random.seed(0); {imports}; print(random.random())")
    values = []
    for imports in ("pass", "import conceptlab", "import conceptlab.api, conceptlab.cli, rich.progress"):
        done = subprocess.run([sys.executable, "-c", code.format(imports=imports)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        values.append(done.stdout.strip().splitlines()[-1])
    assert len(set(values)) == 1, values
