"""Two evaluations of the findings suite compared (experiments.findings_compare, `conceptlab findings-compare`):
every difference both hold is found, what differs between two makings of one run without being a result is not."""

from __future__ import annotations

import copy
import json
import math
import os

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.findings_compare import (
    IGNORED, CompareError, Tolerance, compare_evaluations, compare_runs, compare_summaries, compare_tables, evaluation_ids,
    ignored, leaves, load_evaluation, run_folders, same_value,
)


def _criterion(name, values, passed, verdict, runs):
    seeds = [{"seed": s, "value": v, "control": 1.0, "difference": None if v is None else v - 1.0, "passed": p,
              "note": ""} for s, v, p in zip((100, 101, 102), values, passed)]
    return {"name": name, "seeds": seeds, "passed": sum(passed), "of": 3, "verdict": verdict,
            "runs": {str(s): [r] for s, r in zip((100, 101, 102), runs)}}


def _evaluation():
    return {"created": "2026-12-05 10:00:00", "code": {"git_commit": "a" * 40}, "machine": {"cpu": "test"},
            "runs": {"total": 3},
            "findings": [
                {"name": "orders", "verdict": "mixed", "run_seconds": 60.0, "criteria": [
                    _criterion("first", [2.0, 3.0, math.inf], [True, True, False], "mixed",
                               ["0000000000000001", "0000000000000002", "0000000000000003"]),
                    _criterion("second", [0.5, 0.25, 0.125], [True, True, True], "reproduced",
                               ["0000000000000001", "0000000000000002", "0000000000000003"])]},
                {"name": "analytic", "verdict": "reproduced", "run_seconds": None, "criteria": [
                    _criterion("holds", [True, True, True], [True, True, True], "reproduced", [None, None, None])]},
            ]}


def test_tolerance_exact_by_default_and_relative_when_asked():
    exact = Tolerance()
    assert exact.same(0.1, 0.1) and not exact.same(0.1, 0.1 + 1e-12)
    assert exact.same(math.nan, math.nan) and not exact.same(math.nan, 0.0)
    assert exact.same(math.inf, math.inf) and not exact.same(math.inf, -math.inf) and not exact.same(math.inf, 1e308)
    assert exact.same(None, None) and not exact.same(None, 0.0)
    assert not exact.same(True, 1) and exact.same(np.bool_(True), True)  # a pass is not a count
    assert exact.same(np.float32(0.5), 0.5) and exact.same(3, 3.0)
    loose = Tolerance(rtol=1e-3)
    assert loose.same(1000.0, 1000.9) and not loose.same(1000.0, 1001.1)
    assert Tolerance(atol=0.01).same(0.0, 0.009)
    with pytest.raises(ValueError, match="rtol"):
        Tolerance(rtol=-1)
    with pytest.raises(ValueError, match="atol"):
        Tolerance(atol=math.nan)


def test_identical_evaluations_compare_equal():
    pairs = compare_evaluations(_evaluation(), _evaluation())
    assert [p.name for p in pairs] == ["orders", "analytic"]
    assert all(p.same for p in pairs)
    assert all(s.same and s.same_runs for p in pairs for c in p.criteria for s in c.seeds)


def test_every_kind_of_difference_is_found():
    a, b = _evaluation(), _evaluation()
    b["findings"][0]["criteria"][1]["seeds"][2]["value"] = 0.126  # one seed's value
    pairs = compare_evaluations(a, b)
    orders = pairs[0]
    assert not orders.same and orders.verdict == ("mixed", "mixed")
    assert orders.criteria[0].same and not orders.criteria[1].same
    assert [s.same for s in orders.criteria[1].seeds] == [True, True, False]
    assert pairs[1].same

    b = _evaluation()  # a pass that flips moves the count and the verdict
    second = b["findings"][0]["criteria"][1]
    second["seeds"][0]["passed"], second["passed"], second["verdict"] = False, 2, "mixed"
    c = compare_evaluations(a, b)[0].criteria[1]
    assert c.passed == ("3/3", "2/3") and c.verdict == ("reproduced", "mixed") and not c.same

    b = _evaluation()  # a censored value (∞) read as a number elsewhere
    b["findings"][0]["criteria"][0]["seeds"][2]["value"] = 900.0
    assert not compare_evaluations(a, b)[0].criteria[0].seeds[2].same

    b = _evaluation()  # the same numbers from another run id: another config or analysis version
    b["findings"][0]["criteria"][0]["runs"]["100"] = ["00000000000000ff"]
    seed = compare_evaluations(a, b)[0].criteria[0].seeds[0]
    assert seed.same and not seed.same_runs


def test_a_finding_or_seed_only_one_side_holds():
    a, b = _evaluation(), _evaluation()
    del b["findings"][1]
    b["findings"].append({"name": "new", "verdict": "reproduced", "criteria": []})
    pairs = compare_evaluations(a, b)
    assert [(p.name, p.only_in) for p in pairs] == [("orders", None), ("analytic", "a"), ("new", "b")]
    assert not pairs[1].same and not pairs[2].same

    b = _evaluation()
    del b["findings"][0]["criteria"][0]["seeds"][2]
    seed = compare_evaluations(a, b)[0].criteria[0].seeds[2]
    assert seed.seed == 102 and not seed.same and seed.b == {}


def test_ignored_fields_and_list_items():
    assert ignored("seconds.train", ("seconds.*",)) and ignored("probe.eval_seconds", ("*_seconds",))
    assert ignored("classifier_source", ("*source",)) and not ignored("learning_time.train/size", ("*source",))
    assert ignored("times[3]", ("times",))
    assert leaves({"a": {"b": [1, {"c": 2}]}, "d": []}) == {"a.b[0]": 1, "a.b[1].c": 2, "d": []}

    base = {"seconds": {"train": 1.0}, "provenance": {"cpu": "x"}, "disk_bytes": 5, "probe": {"source": "trained"},
            "tau": {"shape": 0.4}, "steps": [100, 200]}
    other = copy.deepcopy(base)
    other.update(seconds={"train": 9.0}, provenance={"cpu": "y"}, disk_bytes=7, probe={"source": "cache"})
    n, diff = compare_summaries(base, other)
    assert n == 3 and diff == []  # tau.shape, steps[0], steps[1]

    other["tau"]["shape"], other["steps"] = 0.41, [100, 250, 300]
    other["new"] = 1
    n, diff = compare_summaries(base, other)
    assert {d[0] for d in diff} == {"tau.shape", "steps[1]", "steps[2]", "new"}
    assert ("steps[2]", None, 300) in diff and ("new", None, 1) in diff
    assert compare_summaries(base, other, IGNORED + ("tau.*", "steps", "new"))[1] == []


def test_tables_compared_cell_by_cell():
    t = pd.DataFrame({"step": [0, 100], "accuracy": [0.5, 0.75], "ok": [True, False], "name": ["x", None],
                      "curve": [np.array([0.1, 0.2]), np.array([0.3, 0.4])], "seconds": [1.0, 2.0]})
    u = t.copy()
    u["seconds"] = [5.0, 6.0]
    assert compare_tables(t, u) is None  # timings left out; None equals None
    u.loc[1, "accuracy"] = 0.7501
    what = compare_tables(t, u)
    assert what is not None and "1 cell differs in accuracy" in what and "largest gap 0.0001" in what
    assert compare_tables(t, u, tol=Tolerance(rtol=1e-3)) is None
    u = t.copy()
    u["curve"] = [np.array([0.1, 0.2]), np.array([0.3, 0.41])]
    assert "curve" in compare_tables(t, u)
    assert "rows" in compare_tables(t, t.iloc[:1])
    assert "only in b: ['extra']" in compare_tables(t, t.assign(extra=1))
    u = t.copy()
    u["ok"] = [True, True]
    assert "in ok" in compare_tables(t, u)
    assert same_value([1.0, [2.0, None]], (1.0, [2.0, math.nan])) and not same_value([1.0], [1.0, 2.0])
    assert same_value({"a": 1}, {"a": 1}) and not same_value({"a": 1}, {"b": 1})


def _run(root, run_set, run_id, summary, table, mtime=None):
    folder = root / run_set / run_id
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    table.to_parquet(folder / "learning_times.parquet")
    if mtime is not None:
        os.utime(folder / "summary.json", (mtime, mtime))
    return folder


def test_runs_paired_by_run_id(tmp_path):
    table = pd.DataFrame({"step": [0, 100], "accuracy": [0.5, 0.75]})
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a / "runs", "orders", "0000000000000001", {"tau": 0.25, "seconds": {"total": 1}}, table)
    _run(a / "runs", "orders", "0000000000000002", {"tau": 0.5}, table)
    _run(a / "runs", "orders", "0000000000000009", {"tau": 0.5}, table)  # only in a
    (a / "runs" / "orders" / "not-a-run").mkdir()
    (a / "runs" / "orders" / "not-a-run" / "summary.json").write_text("{}")
    _run(b / "runs-20261205-134721", "orders", "0000000000000001", {"tau": 0.25, "seconds": {"total": 9}}, table)
    _run(b / "runs-20261205-134721", "orders", "0000000000000002", {"tau": 0.5},
         table.assign(accuracy=[0.5, 0.8]))
    # the same id twice under b (a twin in another run set): the most recently written summary is read
    _run(b / "runs-20261205-134721", "twin", "0000000000000002", {"tau": 0.6}, table, mtime=1)
    assert set(run_folders(a)) == {"0000000000000001", "0000000000000002", "0000000000000009"}
    assert run_folders(b)["0000000000000002"].parent.name == "orders"

    pairs, only = compare_runs(a, b)
    assert only == {"a": ["0000000000000009"], "b": []}
    by_id = {p.run_id: p for p in pairs}
    assert by_id["0000000000000001"].same and by_id["0000000000000001"].fields == 1
    second = by_id["0000000000000002"]
    assert not second.same and second.differing == [] and second.tables == 1
    assert "accuracy" in second.differing_tables["learning_times.parquet"]
    pairs, only = compare_runs(a, b, ids={"0000000000000001"})
    assert [p.run_id for p in pairs] == ["0000000000000001"] and only == {"a": [], "b": []}


def test_a_record_without_precision_compares_by_its_bf16(tmp_path):
    """Summaries written before runs recorded `precision` name only `bf16`: a run made since compares equal on it
    when the precision is the same, and differs (on `precision` and `bf16`) when it is not."""
    table = pd.DataFrame({"step": [0], "accuracy": [0.5]})
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _run(a / "runs", "orders", "0000000000000001", {"tau": 0.25, "bf16": False}, table)
    _run(b / "runs", "orders", "0000000000000001", {"tau": 0.25, "bf16": False, "precision": "fp32"}, table)
    _run(c / "runs", "orders", "0000000000000001", {"tau": 0.25, "bf16": True, "precision": "bf16 autocast"}, table)
    (same,), _ = compare_runs(a, b)
    assert same.same and same.fields == 3
    (other,), _ = compare_runs(a, c)
    assert [d[0] for d in other.differing] == ["bf16", "precision"]


def test_evaluation_loaded_with_clear_errors(tmp_path):
    with pytest.raises(CompareError, match="no findings.json.*--evaluate-only"):
        load_evaluation(tmp_path)
    (tmp_path / "findings.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(CompareError, match="not an evaluation"):
        load_evaluation(tmp_path)
    (tmp_path / "findings.json").write_text(json.dumps(_evaluation()))
    assert load_evaluation(tmp_path / "findings.json")["findings"][0]["name"] == "orders"
    # findings.json written strict (a censored value as the text "inf") and one written before, with a bare
    # Infinity, load to the same numbers and compare equal
    from conceptlab.store.files import write_json

    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    (old / "findings.json").write_text(json.dumps(_evaluation()))
    write_json(new / "findings.json", _evaluation(), strict=True)
    assert '"inf"' in (new / "findings.json").read_text() and "Infinity" in (old / "findings.json").read_text()
    assert load_evaluation(new)["findings"][0]["criteria"][0]["seeds"][2]["value"] == math.inf
    assert all(p.same for p in compare_evaluations(load_evaluation(old), load_evaluation(new)))
    assert evaluation_ids(_evaluation()) == {"0000000000000001", "0000000000000002", "0000000000000003"}


def test_cli_prints_and_checks(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        (root / "findings.json").write_text(json.dumps(_evaluation()))
        _run(root / "runs", "orders", "0000000000000001", {"tau": 0.25}, pd.DataFrame({"x": [1.0]}))
    runner = CliRunner()
    out = runner.invoke(app, ["findings-compare", str(a), str(b), "--check", "--json", str(tmp_path / "c.json")])
    assert out.exit_code == 0, out.output
    assert "2 findings in both: 2 with the same verdict" in out.output
    assert "1 runs in both under one run id: 1 identical" in out.output
    saved = json.loads((tmp_path / "c.json").read_text())
    assert saved["findings"][0]["same"] and saved["runs"][0]["same"]
    assert saved["findings"][0]["criteria"][0]["seeds"][2]["a"]["value"] == "inf"

    evaluation = _evaluation()
    evaluation["findings"][0]["criteria"][1]["seeds"][0]["value"] = 0.75
    (b / "findings.json").write_text(json.dumps(evaluation))
    (b / "runs" / "orders" / "0000000000000001" / "summary.json").write_text(json.dumps({"tau": 0.3}))
    out = runner.invoke(app, ["findings-compare", str(a), str(b)])
    assert out.exit_code == 0, out.output  # a difference is printed, not an error, without --check
    assert "≠ orders" in out.output and "orders / second seed 100" in out.output
    assert "tau 0.25 → 0.3" in out.output
    assert runner.invoke(app, ["findings-compare", str(a), str(b), "--check"]).exit_code == 1
    assert runner.invoke(app, ["findings-compare", str(a), str(b), "--check", "--no-runs", "--rtol", "0.5"]
                         ).exit_code == 0
    evaluation = _evaluation()  # the same numbers read from another run id: not the same experiment
    evaluation["findings"][0]["criteria"][0]["runs"]["100"] = ["00000000000000ff"]
    (b / "findings.json").write_text(json.dumps(evaluation))
    out = runner.invoke(app, ["findings-compare", str(a), str(b), "--check", "--no-runs"])
    assert out.exit_code == 1 and "1 read from different run ids" in out.output
    out = runner.invoke(app, ["findings-compare", str(a), str(tmp_path / "missing")])
    assert out.exit_code == 2 and "no findings.json" in out.output
    out = runner.invoke(app, ["findings-compare", str(a), str(b), "--rtol", "-1"])
    assert out.exit_code == 2 and "rtol must be" in out.output
