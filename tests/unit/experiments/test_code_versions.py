"""The version numbers in run ids stand for recorded code (`experiments.code_versions`): the committed source matches
its record, an edit under the same version is caught and needs a bump or a stated reason, and comments, docstrings
and layout never count."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from conceptlab.experiments import code_versions as cv
from conceptlab.studies import builtin_studies

REPO = Path(__file__).resolve().parents[3]


def test_every_version_matches_the_code_it_was_recorded_with():
    drifts = cv.compare()
    assert not drifts, "\n".join(d.message() for d in drifts)


def test_every_built_in_study_and_cached_probe_has_its_keys_and_the_training_key_holds_the_trainer():
    keys = {k.name: k for k in cv.current_keys()}
    for study in builtin_studies():
        assert {f"data:{study.kind}", f"study:{study.kind}"} <= keys.keys()
        assert keys[f"study:{study.kind}"].version == study.version
        assert type(study).__module__ in keys[f"study:{study.kind}"].modules
        assert study.data_config.__module__ in keys[f"data:{study.kind}"].modules
    assert {"probe:concept", "probe:attribute", "probe:face"} <= keys.keys()
    assert {"conceptlab.train.trainer", "conceptlab.models.unet", "conceptlab.models.sampling",
            "conceptlab.experiments.runner"} <= set(keys["training"].modules)
    # a study's key leaves out what the training key holds (a training bump already makes every run stale)
    assert not set(keys["study:shapes"].modules) & set(keys["training"].modules)
    assert "conceptlab.models.footprint" not in keys["study:shapes"].modules  # memory estimates, never stored
    # the concept-space evaluation reaches its analyses through function-level imports too
    assert {"conceptlab.analysis.emergence", "conceptlab.interventions.evaluate"} <= set(keys["study:shapes"].modules)


def test_comments_docstrings_and_layout_do_not_count_code_and_constants_do():
    base = '"""Module."""\nimport math\n\ndef f(x):\n    """Doc."""\n    return math.sqrt(x) * 2\n'
    same = [
        '"""Another module docstring."""\nimport math\n\n\ndef f(x):  # a comment\n'
        '    return math.sqrt(\n        x) * 2\n',
        'import math\ndef f(x):\n    """Other words."""\n    # only a comment changed\n    return math.sqrt(x) * 2\n',
    ]
    different = [
        base.replace("* 2", "* 3"),
        base.replace("sqrt", "exp"),
        base.replace("def f(x):", "def f(x, y=0):"),
        base.replace('"""Doc."""', '"""Doc."""\n    x = x + 1'),
        base + "\nSCALE = 1.0\n",
        base.replace('"""Doc."""\n', '"Doc."\n    "a string that is not the docstring"\n'),
    ]
    assert all(cv.fingerprint_source(s) == cv.fingerprint_source(base) for s in same)
    assert len({cv.fingerprint_source(s) for s in [base, *different]}) == len(different) + 1


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "conceptlab"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_closure_follows_absolute_relative_and_function_level_imports_within_the_given_packages(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/top.py": "from conceptlab.a import mid\nfrom . import sib\n",
        "a/mid.py": "def f():\n    from conceptlab.b.deep import g\n    import conceptlab.c.far\n",
        "a/sib.py": "from .mid import f\n",
        "b/__init__.py": "",
        "b/deep.py": "import os\ndef g():\n    pass\n",
        "c/__init__.py": "",
        "c/far.py": "",
    })
    assert cv.imported_modules("conceptlab.a.mid", root) == {"conceptlab.b.deep", "conceptlab.c.far"}
    assert cv.imported_modules("conceptlab.a.sib", root) == {"conceptlab.a.mid"}
    found = cv.closure(["conceptlab.a.top"], ("conceptlab.a", "conceptlab.b"), root)
    assert found == {"conceptlab.a.top", "conceptlab.a.mid", "conceptlab.a.sib", "conceptlab.b.deep"}
    with pytest.raises(ValueError, match="no module"):
        cv.imported_modules("conceptlab.a.missing", root)


def test_an_edit_under_the_same_version_needs_a_bump_or_a_reason_and_a_version_never_goes_back(tmp_path):
    root = _package(tmp_path, {"__init__.py": "", "m.py": "X = 1\n", "n.py": "def f():\n    return 2\n"})
    key = cv.Key("study:toy", 1, "toy.py: version", ("conceptlab.m", "conceptlab.n"))
    assert [d.recorded_version for d in cv.compare({}, root, [key])] == [None]  # never recorded
    ledger = cv.record(cv.compare({}, root, [key]), None, "abc", {}, root, today="2026-12-06")
    assert cv.compare(ledger, root, [key]) == []
    assert ledger["history"][-1] == {"date": "2026-12-06", "based_on": "abc", "key": "study:toy", "version": 1,
                                     "changed": [], "reason": "first record"}

    (root / "n.py").write_text("# a comment\ndef f():\n    '''Now documented.'''\n    return 2\n")
    assert cv.compare(ledger, root, [key]) == []  # comments and docstrings do not count

    (root / "n.py").write_text("def f():\n    return 3\n")
    drifts = cv.compare(ledger, root, [key])
    assert [(d.changed, d.bumped) for d in drifts] == [(("conceptlab.n",), False)]
    message = drifts[0].message()
    assert "changed (conceptlab.n)" in message and "bump it (toy.py: version)" in message and "--reason" in message
    with pytest.raises(ValueError, match="bump it, or give --reason"):
        cv.record(drifts, None, "abc", ledger, root)
    neutral = cv.record(drifts, "f is only called by a figure", "def", ledger, root, today="2026-12-07")
    assert cv.compare(neutral, root, [key]) == []
    assert neutral["history"][-1]["changed"] == ["conceptlab.n"]
    assert neutral["history"][-1]["reason"] == "f is only called by a figure"

    bumped = cv.Key("study:toy", 2, "toy.py: version", ("conceptlab.m", "conceptlab.n"))
    (root / "m.py").write_text("X = 2\n")
    drifts = cv.compare(neutral, root, [bumped])
    assert drifts[0].bumped and "1 → 2" in drifts[0].message() and "not recorded yet" in drifts[0].message()
    after = cv.record(drifts, None, "ghi", neutral, root)
    assert after["keys"]["study:toy"]["version"] == 2 and after["history"][-1]["reason"] == "version 1 → 2"
    assert cv.compare(after, root, [bumped]) == []

    back = cv.Key("study:toy", 1, "toy.py: version", ("conceptlab.m", "conceptlab.n"))
    drifts = cv.compare(after, root, [back])
    assert "never goes back" in drifts[0].message()
    with pytest.raises(ValueError, match="never goes back"):
        cv.record(drifts, "any reason", "jkl", after, root)

    # a module newly reached by the key's imports counts as a change too
    grown = cv.Key("study:toy", 2, "toy.py: version", ("conceptlab.m", "conceptlab.n", "conceptlab.__init__"))
    assert cv.compare(after, root, [grown])[0].changed == ("conceptlab.__init__",)


def _script():
    spec = importlib.util.spec_from_file_location("code_versions_script", REPO / "scripts" / "code_versions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "scripts"))
    return module


def test_verify_compares_configs_tables_tensors_and_summaries_but_not_timings_or_provenance(tmp_path):
    import pandas as pd
    import torch
    from safetensors.torch import save_file

    script = _script()

    def run(folder: Path, weight: float, accuracy: float, seconds: float, steps: int = 20, learned=200) -> Path:
        (folder / "checkpoints").mkdir(parents=True)
        (folder / "eval").mkdir()
        (folder / "config.yaml").write_text(f"name: micro\nruns_dir: runs\ntrain:\n  steps: {steps}\n")
        save_file({"w": torch.full((2, 2), weight)}, folder / "checkpoints" / "step_0000010.safetensors")
        pd.DataFrame({"step": [10], "accuracy": [accuracy]}).to_parquet(folder / "concept_space.parquet")
        pd.DataFrame({"step": [10], "score": [accuracy]}).to_parquet(folder / "eval" / "step_0000010.parquet")
        summary = {"final_accuracy": accuracy, "learning_time": {"held_out/color": learned}, "seconds": seconds,
                   "probe": {"accuracy": 0.9, "train_seconds": seconds}, "provenance": {"host": str(folder)}}
        (folder / "summary.json").write_text(json.dumps(summary))
        (folder / "data.json").write_text(json.dumps({"concepts": ["color", "size"]}))
        return folder

    a = run(tmp_path / "a", 1.0, 0.5, 10.0)
    assert script.compare_runs(a, run(tmp_path / "b", 1.0, 0.5, 99.0)) == script.Comparison()  # timings, provenance
    found = script.compare_runs(a, run(tmp_path / "c", 1.0 + 1e-6, 0.75, 10.0))  # one float32 ulp ≈ 1.2e-7
    assert found.changed == ["concept_space.parquet: 1 cell differs in accuracy (largest gap 0.25)",
                             "eval/step_0000010.parquet: 1 cell differs in score (largest gap 0.25)",
                             "checkpoints/step_0000010.safetensors: tensors differ: w",
                             "summary.json: differs in final_accuracy (by 0.25)"] and found.added == []
    # a value censored in one run (null) and not in the other is a changed number, not a new field
    censored = script.compare_runs(run(tmp_path / "g", 1.0, 0.5, 10.0, learned=None), a)
    assert censored.changed == ["summary.json: differs in learning_time.held_out/color"] and censored.added == []
    assert script.compare_runs(a, tmp_path / "g").changed == ["summary.json: differs in learning_time.held_out/color"]
    d = run(tmp_path / "d", 1.0, 0.5, 10.0)
    (d / "concept_space.parquet").unlink()
    assert script.compare_runs(a, d) == script.Comparison([], ["concept_space.parquet: only in this tree's run"])
    assert script.compare_runs(d, a) == script.Comparison(["concept_space.parquet: only in the reference's run"], [])
    # a new column or summary field is a new output, not a changed number; one the reference has and ours lost is
    e = run(tmp_path / "e", 1.0, 0.5, 10.0)
    pd.DataFrame({"step": [10], "accuracy": [0.5], "valid": [1.0]}).to_parquet(e / "concept_space.parquet")
    summary = json.loads((e / "summary.json").read_text())
    (e / "summary.json").write_text(json.dumps({**summary, "new": 1}))
    assert script.compare_runs(e, a) == script.Comparison(
        [], ["concept_space.parquet: columns only in this tree's: valid", "summary.json: only in this tree's: new"])
    assert script.compare_runs(a, e) == script.Comparison(
        ["concept_space.parquet: columns differ (only in a: —; only in b: ['valid'])",
         "summary.json: differs in new"], [])
    assert script.compare_runs(a, run(tmp_path / "f", 1.0, 0.5, 10.0, steps=30)).changed == [
        "config.yaml: the two runs' configs differ (train.steps)"]  # a preset edited between the two codes


def test_a_run_of_each_kind_depends_on_the_training_its_data_its_study_and_the_probes_it_imports():
    keys = cv.current_keys()
    names = {kind: [k.name for k in cv.relevant_keys(kind, keys)] for kind in ("shapes", "shapes3d", "celeba", "bumps")}
    assert names["shapes"] == ["training", "data:shapes", "study:shapes", "probe:concept"]
    assert names["shapes3d"] == ["training", "data:shapes3d", "study:shapes3d", "probe:concept", "probe:attribute"]
    assert names["celeba"] == ["training", "data:celeba", "study:celeba", "probe:concept", "probe:face"]
    assert names["bumps"] == ["training", "data:bumps", "study:bumps"]
    assert [k.name for k in cv.relevant_keys("mypkg.studies:Ring", keys)] == ["training"]  # a plug-in kind
    assert cv.drift_for("shapes") == []


def test_a_run_made_by_code_that_changed_under_its_versions_warns_records_it_and_shows_it(tmp_path, monkeypatch):
    from rich.console import Console
    from typer.testing import CliRunner

    from conceptlab.cli import app
    from conceptlab.experiments.loading import load_config
    from conceptlab.experiments.runner import run_experiment

    ledger = cv.read_ledger()
    module = sorted(ledger["keys"]["study:shapes"]["modules"])[0]
    ledger["keys"]["study:shapes"]["modules"][module] = "0" * 16  # as if that module had changed since its record
    cv.write_ledger(ledger, tmp_path / "ledger.json")
    monkeypatch.setattr(cv, "LEDGER", tmp_path / "ledger.json")
    assert cv.drift_for("shapes") == ["study:shapes"] and cv.drift_for("bumps") == []

    console = Console(record=True, width=200)
    cfg = load_config("micro", ["train.steps=2", "train.checkpoint_schedule=list", "train.checkpoint_steps=[2]",
                                "eval.samples_per_class=2", "eval.interventions=null", "train.bf16=false"])
    summary = run_experiment(cfg, tmp_path / "run", progress=False, console=console)
    assert "warning: code changed since its version number was recorded: study:shapes" in console.export_text()
    assert summary["provenance"]["code_drift"] == ["study:shapes"]
    assert json.loads((tmp_path / "run" / "provenance.json").read_text())["invocations"][-1]["code_drift"] == [
        "study:shapes"]
    shown = CliRunner().invoke(app, ["runs", "show", str(tmp_path / "run")])
    assert "code changed since those versions were recorded: study:shapes" in shown.output, shown.output

    monkeypatch.setattr(cv, "LEDGER", tmp_path / "absent.json")  # no record to compare with: not known, not []
    assert cv.drift_for("shapes") is None


def test_a_recorded_key_the_source_no_longer_has_is_named_and_dropped_by_a_record():
    ledger = cv.read_ledger()
    ledger["keys"]["study:ring"] = {"version": 2, "modules": {"conceptlab.studies.ring": "0" * 16}}
    (gone,) = cv.compare(ledger)
    assert gone.gone and gone.key.name == "study:ring" and "no longer a key of this source" in gone.message()
    after = cv.record([gone], None, "abc", ledger)
    assert "study:ring" not in after["keys"] and after["history"][-1]["reason"] == "dropped: no longer in the source"
    assert cv.compare(after) == []


def test_a_runs_drift_is_every_invocations_not_only_the_last():
    from conceptlab.experiments.provenance import run_code_drift

    trained_drifting, evaluated_clean = {"code_drift": ["training"]}, {"code_drift": []}
    assert run_code_drift([trained_drifting, evaluated_clean]) == ["training"]
    both = {"code_drift": ["study:shapes", "training"]}
    assert run_code_drift([evaluated_clean, both]) == ["study:shapes", "training"]
    assert run_code_drift([evaluated_clean]) == []
    assert run_code_drift([{"git_commit": "abc"}]) is None  # made before the field: not known
    assert run_code_drift([{"git_commit": "abc"}, evaluated_clean]) == []


def test_a_python_whose_nodes_carry_extra_empty_fields_hashes_the_same_code_the_same_way(monkeypatch):
    """Python 3.12 added `type_params` (an empty list unless used) to functions and classes; a newer Python may add
    more. The writer skips empty and None fields, so such a Python gives the fingerprints recorded with this one."""
    import ast

    source = "class A:\n    def f(self, x: int = 1) -> int:\n        return x + 1\n"
    before = cv.fingerprint_source(source)
    for node_type in (ast.FunctionDef, ast.ClassDef):
        monkeypatch.setattr(node_type, "_fields", (*node_type._fields, "type_params"))
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            node.type_params = []
    assert cv._hash_tree(tree) == before
