"""The findings suite as data: the shipped suite loads and lists every finding; a bad suite is refused at load with
one line naming the problem; a plan evaluated on synthetic run folders gives the verdicts its numbers imply; the
report has the structure docs/findings.md is generated with. No training: run folders are written by hand."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conceptlab.experiments.findings import evaluate_suite, plan, write_findings
from conceptlab.experiments.findings_spec import load_suite
from conceptlab.experiments.loading import ConfigError
from conceptlab.report.findings import findings_markdown

ISSUE_FINDINGS = {  # the findings the suite must list (Park, Liang, Franzese)
    "concept-signal-orders-learning", "memorization-then-turn", "hidden-emergence", "underspecification",
    "guidance-after-transition", "gated-flow-fit", "real-data-lli", "factorization-against-controls",
    "composition-vs-interpolation", "interpolation-vs-gap-width", "percolation", "data-efficiency",
    "commitment-hierarchy",
}


def test_the_shipped_suite_loads_and_lists_every_finding_with_a_control_or_a_reason():
    suite = load_suite()
    names = {f.name for f in suite.findings}
    assert ISSUE_FINDINGS <= names, ISSUE_FINDINGS - names
    for f in suite.findings:
        if f.status == "implemented":
            assert f.setup in ("paper", "fast")
            assert f.control and (f.control != "none" or f.reason)
    real = next(f for f in suite.findings if f.name == "real-data-lli")  # runs where the CelebA files are
    assert real.status == "implemented" and suite.runs["celeba-lli"].data_env == "CONCEPTLAB_CELEBA"
    for name, runs in suite.runs.items():
        assert not set(runs.seeds) & set(runs.settings_seeds), name  # report seeds are not the settings seeds
        assert min(runs.seeds) >= 100, name  # fresh seeds, declared before they were run


def test_the_hidden_emergence_finding_reports_on_at_least_five_seeds_and_the_others_on_three():
    suite = load_suite()
    assert len(suite.runs["hidden-emergence"].seeds) >= 5
    for name, runs in suite.runs.items():
        if name != "data-efficiency":  # 36 runs per seed: one report seed (docs/findings-history.md says so)
            assert len(runs.seeds) >= 3, name


def test_quick_and_full_plans_cover_the_same_findings_except_the_ones_too_large_for_quick(tmp_path):
    suite = load_suite()
    quick = plan(suite, None, "quick", tmp_path / "q")
    full = plan(suite, None, "full", tmp_path / "f")
    paper_setup = {f.name for f in suite.findings if f.setup == "paper"}  # hours per run: no CI-size variant
    assert paper_setup >= {"hidden-emergence-paper-setup", "concept-signal-orders-learning-paper-setup",
                           "memorization-then-turn-paper-setup", "underspecification-paper-setup",
                           "guidance-after-transition-paper-setup"}
    # a claim about the seeds as a group cannot be read from the one seed --quick runs
    assert set(quick.skipped) == {"real-data-lli", "data-efficiency", "capability-steadier-than-behavior"} | paper_setup
    assert "as a group" in quick.skipped["capability-steadier-than-behavior"]
    assert set(full.skipped) == {"real-data-lli"}
    assert all(len(s.seeds) == 1 for s in quick.sets.values())
    assert full.sets["hidden-emergence"].seeds == [100, 101, 102, 103, 104]
    # the same run set in both plans shares nothing on disk with the other's overrides: the run ids differ
    ids_q = {r.run_id for r in quick.sets["hidden-emergence"].sweep.runs}
    ids_f = {r.run_id for r in full.sets["hidden-emergence"].sweep.runs}
    assert not ids_q & ids_f
    with pytest.raises(ConfigError, match="unknown finding 'nope'"):
        plan(suite, ["nope"], "full", tmp_path / "x")
    with pytest.raises(ConfigError, match="scale must be"):
        plan(suite, None, "huge", tmp_path / "x")


# -- a small suite of our own ------------------------------------------------------------------------------------------

def _suite(**changes) -> dict:
    base = {
        "runs": {
            "a": {"preset": "micro", "seeds": [100, 101, 102], "overrides": ["train.steps=20"]},
            "b": {"preset": "micro", "seeds": [100, 101, 102], "overrides": ["train.steps=30"]},
        },
        "findings": [{
            "name": "toy", "paper": "test", "claim": "a beats b", "setup": "fast", "control": "run set b",
            "criteria": [{"name": "a-beats-b", "statement": "a's color accuracy beats b's",
                          "value": {"runs": "a", "path": "final_accuracy.11/color"},
                          "control": {"runs": "b", "path": "final_accuracy.11/color"},
                          "direction": "greater", "margin": 0.1},
                         {"name": "a-learns-color", "statement": "a learns color before size",
                          "value": {"runs": "a", "path": "learning_time.held_out/color", "censored": "high"},
                          "control": {"runs": "a", "path": "learning_time.held_out/size", "censored": "high"},
                          "direction": "less", "margin": 1}],
        }],
    }
    for key, value in changes.items():
        node = base
        parts = key.split("__")
        for p in parts[:-1]:
            node = node[int(p)] if p.isdigit() else node[p]
        if value is None:
            node.pop(parts[-1])
        else:
            node[parts[-1]] = value
    return base


def _write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_a_suite_of_our_own_loads(tmp_path):
    suite = load_suite(_write(tmp_path, _suite()))
    assert [f.name for f in suite.findings] == ["toy"]


@pytest.mark.parametrize("changes, message", [
    ({"runs__a__preset": "no-such-preset"}, r"run set a: unknown preset 'no-such-preset'"),
    ({"findings__0__criteria__0__value__path": "final_acuracy.11/color"},
     r"a shapes run's summary has no section 'final_acuracy'"),
    ({"findings__0__criteria__0__value": {"runs": "a", "table": "emergence", "column": "scroe"}},
     r"table emergence has no column 'scroe'"),
    ({"findings__0__criteria__0__value": {"runs": "a", "table": "emergnce", "column": "score"}},
     r"writes no table 'emergnce'"),
    ({"findings__0__control": None}, r"name its binding control, or write 'control: none' with a reason"),
    ({"findings__0__control": "none"}, r"'control: none' needs a reason"),
    ({"findings__0__setup": "paper"}, r"declared setup 'paper', but run set a's config is the 'fast' setup"),
    ({"findings__0__setup": None}, r"say which setup made it"),
    ({"findings__0__criteria__0__value__runs": "c"}, r"unknown run set 'c'"),
    ({"runs__c": {"preset": "micro", "seeds": [100]}}, r"run set 'c' is used by no finding"),
    ({"runs__a__settings_seeds": [100]}, r"seeds \[100\] chose the settings"),
    ({"findings__0__criteria__0__threshold": 0.5}, r"needs exactly one of control .* or threshold"),
    ({"findings__0__criteria__0__direction": "holds"}, r"a 'holds' criterion has no control or threshold"),
    ({"findings__0__criteria__0__margin": ".nan"}, r"margin"),
    ({"findings__0__criteria__0__value__compute": "no.such.module:fn"}, r"exactly one of path, table or compute"),
    ({"findings__0__criteria__0__min_seeds": 4}, r"min_seeds 4 > the 3 report seeds of run set a"),
    ({"findings__0__criteria__0__min_seeds": 3, "runs__a__paper": {"preset": "micro", "seeds": [100, 101]}},
     r"min_seeds 3 > the 2 paper-scale seeds of run set a: never reproduced at that scale"),
    ({"findings__0__criteria__0__over_seeds": "variance"}, r"over_seeds"),
    ({"findings__0__criteria__0__over_seeds": "median_absolute_deviation", "findings__0__criteria__0__min_seeds": 2},
     r"over_seeds is decided once over every seed; drop min_seeds"),
    ({"findings__0__criteria__0__over_seeds": "median_absolute_deviation", "findings__0__criteria__0__direction":
      "holds", "findings__0__criteria__0__control": None}, r"over_seeds compares .*direction must be greater or less"),
    # refused at load, not after every run has finished (or silently making every seed not measured)
    ({"runs__a__settings_seeds": [1], "runs__a__quick": {"seeds": [1]}}, r"quick.seeds \[1\] chose the settings"),
    ({"runs__a__settings_seeds": [1], "runs__a__paper": {"preset": "micro", "seeds": [1, 100, 101]}},
     r"paper.seeds \[1\] chose the settings"),
    ({"runs__a__seeds": [100, 101], "runs__b__seeds": [100, 101],
      "findings__0__criteria__0__over_seeds": "median_absolute_deviation"},
     r"over_seeds needs at least 3 seeds, run set a has 2 report seeds: it could only be undefined"),
    ({"runs__a__paper": {"preset": "micro", "seeds": [100, 101]},
      "findings__0__criteria__0__over_seeds": "median_absolute_deviation"},
     r"over_seeds needs at least 3 seeds, run set a has 2 paper-scale seeds"),
    ({"findings__0__criteria__0__control__config": {"train.step": 30}},
     r"criterion a-beats-b control: config key 'train.step' is not a key of run set b's configs \(did you mean "
     r"train.steps"),
    ({"findings__0__criteria__0__value__across": "data.colour_separation"},
     r"config key 'data.colour_separation' is not a key of run set a's configs \(did you mean data.color_separation"),
])
def test_a_bad_suite_is_refused_at_load_with_one_line_naming_the_problem(tmp_path, changes, message):
    data = _suite(**changes)
    text = yaml.safe_dump(data, sort_keys=False).replace("'.nan'", ".nan")
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_suite(str(path))
    assert re.search(message, str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


def test_a_compute_function_that_does_not_resolve_is_refused(tmp_path):
    data = _suite()
    data["findings"][0]["criteria"][0]["value"] = {"runs": "a", "compute": "no.such.module:fn"}
    with pytest.raises(ConfigError, match="cannot import no.such.module"):
        load_suite(_write(tmp_path, data))


def test_an_import_path_that_is_not_a_function_is_refused(tmp_path):
    data = _suite()
    data["findings"][0]["criteria"][0]["value"] = {"runs": "a", "compute": "math:pi"}
    with pytest.raises(ConfigError, match=r"compute 'math:pi' is not a function"):
        load_suite(_write(tmp_path, data))
    data = _suite(runs__b={"analytic": "math:pi", "seeds": [100, 101, 102]})
    with pytest.raises(ConfigError, match=r"analytic 'math:pi' is not a function"):
        load_suite(_write(tmp_path, data))


def test_a_claims_from_claim_asking_more_seeds_than_the_set_has_is_refused_at_load(tmp_path):
    sweep = {"name": "toy", "base": "micro", "axes": {"seeds": [100, 101, 102]}, "settings_seeds": [0],
             "controls": {"sources": ["trained", "untrained"], "measures": ["additive_share"],
                          "claims": [{"name": "beats", "statement": "x", "measure": "additive_share",
                                      "control": "untrained", "direction": "greater", "min_seeds": 5}]}}
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(sweep))
    data = {"runs": {"t": {"sweep": str(tmp_path / "toy.yaml"), "seeds": [100, 101, 102]}},
            "findings": [{"name": "f", "paper": "x", "claim": "x", "setup": "fast", "control": "untrained",
                          "claims_from": "t"}]}
    with pytest.raises(ConfigError) as err:
        load_suite(_write(tmp_path, data))
    assert re.search(r"finding f: criterion beats: min_seeds 5 > the 3 report seeds of run set t", str(err.value))
    data["runs"]["t"] = {"preset": "micro", "seeds": [100, 101, 102]}  # not a sweep: one line, not a traceback
    with pytest.raises(ConfigError, match="claims_from 't' must be a run set of a sweep with a controls block"):
        load_suite(_write(tmp_path, data))


def test_a_control_whose_config_filter_picks_no_run_is_not_measured_and_never_passes_as_censored(tmp_path):
    """A criterion "before the control, which never happened (censored high)" whose control's config filter matches
    no finished run (a value no run has): every seed's control is not measured, and the criterion fails, where
    reading the missing control as +inf passed it on every seed."""
    data = _suite()
    data["findings"][0]["criteria"] = [{
        "name": "before-control", "statement": "a learns color before b learns size",
        "value": {"runs": "a", "path": "learning_time.held_out/color", "censored": "high"},
        "control": {"runs": "b", "path": "learning_time.held_out/size", "censored": "high",
                    "config": {"train.steps": 31}},
        "direction": "less", "margin": 1}]
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {s: _acc(0.9, 200, 300) for s in (100, 101, 102)},
                   "b": {s: _acc(0.9, 1, None) for s in (100, 101, 102)}})
    (toy,) = evaluate_suite(p)["findings"]
    (c,) = toy["criteria"]
    assert [s["note"] for s in c["seeds"]] == ["not measured"] * 3
    assert (c["passed"], c["verdict"]) == (0, "not reproduced")
    data["findings"][0]["criteria"][0]["control"]["config"] = {"train.steps": 30}  # the set's own: read, censored
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    (toy,) = evaluate_suite(p)["findings"]
    assert toy["criteria"][0]["verdict"] == "reproduced"


def _fake_runs(p, values: dict[str, dict[int, dict]]) -> None:
    """Write a summary.json into each planned run folder of the sets in `values` (set → seed → summary fields)."""
    for name, by_seed in values.items():
        s = p.sets[name]
        for r in s.sweep.runs:
            seed = r.config.train.train_seed
            if seed not in by_seed:
                continue
            folder = r.directory(s.sweep.root)
            folder.mkdir(parents=True, exist_ok=True)
            summary = {"kind": "shapes", "bf16": False, "seconds": {"total": 10.0},
                       "provenance": {"cpu": "test CPU", "gpu": None, "git_commit": "abcdef0123"}, **by_seed[seed]}
            (folder / "summary.json").write_text(json.dumps(summary))


def test_a_run_that_evaluated_another_runs_training_names_its_trainer_among_machines_and_code(tmp_path):
    """`provenance.trained_in` (experiments.training_reuse): the machine and commit that trained the weights count
    among the finding's machines and code, beside the evaluating run's own."""
    suite = load_suite(_write(tmp_path, _suite()))
    p = plan(suite, None, "full", tmp_path / "out")
    trained = {"provenance": {"cpu": "test CPU", "gpu": None, "git_commit": "abcdef0123",
                              "trained_in": {"run_id": "x", "folder": "/elsewhere/x", "invocations": [
                                  {"cpu": "trainer CPU", "gpu": "a GPU", "git_commit": "1234567890"}]}}}
    _fake_runs(p, {"a": {100: {**_acc(0.9, 200, 300), **trained}, 101: _acc(0.85, None, 300)},
                   "b": {100: _acc(0.6, 1, 1)}})
    (toy,) = evaluate_suite(p)["findings"]
    assert toy["machines"] == ["test CPU", "trainer CPU, GPU a GPU"] and toy["code"] == ["1234567", "abcdef0"]


def test_runs_made_while_their_code_differed_from_its_recorded_version_are_counted_and_said(tmp_path):
    """`code_drift` in a run's provenance (experiments.code_versions), or in the invocation that trained it: the
    finding counts those runs and names the keys; runs without the field (older records) or with [] add nothing."""
    from conceptlab.report.findings import findings_markdown

    suite = load_suite(_write(tmp_path, _suite()))
    p = plan(suite, None, "full", tmp_path / "out")
    made = {"cpu": "test CPU", "gpu": None, "git_commit": "abcdef0123"}
    drift = {"provenance": {**made, "code_drift": ["study:shapes"]}}
    lent = {"provenance": {**made, "code_drift": [], "trained_in": {"run_id": "x", "folder": "/x", "invocations": [
        {"cpu": "test CPU", "gpu": None, "git_commit": "1234567890", "code_drift": ["training"]}]}}}
    _fake_runs(p, {"a": {100: {**_acc(0.9, 200, 300), **drift}, 101: {**_acc(0.85, None, 300), **lent}},
                   "b": {100: _acc(0.6, 1, 1)}})
    result = evaluate_suite(p)
    (toy,) = result["findings"]
    assert toy["code_drift"] == {"runs": 2, "keys": ["study:shapes", "training"]}
    assert ("code: 1234567, abcdef0 (2 runs made while the code of study:shapes, training differed from their "
            "recorded version)") in findings_markdown(result)
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300), 101: {**_acc(0.85, None, 300), "provenance": {**made,
                                                                                                   "code_drift": []}}}})
    (clean,) = evaluate_suite(p)["findings"]
    assert "code_drift" not in clean


def _acc(color: float, lt_color, lt_size) -> dict:
    return {"final_accuracy": {"11/color": color},
            "learning_time": {"held_out/color": lt_color, "held_out/size": lt_size}}


def test_a_plan_on_synthetic_runs_gives_the_verdicts_its_numbers_imply_and_the_report_says_so(tmp_path, vector_figures):
    suite = load_suite(_write(tmp_path, _suite()))
    p = plan(suite, None, "full", tmp_path / "out")
    # seed 100: a beats b by 0.3 and learns color first; 101: by 0.05 (fails) and color never learned (censored,
    # fails); 102: run b missing (fails); color learned, size never (passes)
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300), 101: _acc(0.85, None, 300), 102: _acc(0.9, 200, None)},
                   "b": {100: _acc(0.6, 1, 1), 101: _acc(0.8, 1, 1)}})
    result = evaluate_suite(p)
    (toy,) = result["findings"]
    beats, learns = toy["criteria"]
    assert [s["passed"] for s in beats["seeds"]] == [True, False, False]
    assert beats["seeds"][2]["note"] == "no run" and beats["verdict"] == "mixed"  # 1 pass + 1 unrun < 3
    assert [s["passed"] for s in learns["seeds"]] == [True, False, True] and learns["verdict"] == "mixed"
    assert toy["verdict"] == "mixed"
    assert toy["run_sets"]["b"]["missing"] and not toy["run_sets"]["a"]["missing"]
    assert toy["machines"] == ["test CPU"] and toy["precision"] == ["fp32"] and toy["code"] == ["abcdef0"]
    assert toy["run_seconds"] == 50.0  # 3 runs of a + 2 of b, 10 s each
    paths = write_findings(result, tmp_path / "out", wall_seconds=12.0)
    md = (tmp_path / "out" / "findings.md").read_text()
    assert "do not edit by hand" in md and "| toy | test | fast variant | run set b | ◐ mixed | 1/3 (1 no run), 2/3 |" in md
    assert "## toy" in md and "`a-beats-b`" in md and "![toy](figures/toy.png)" in md
    assert (tmp_path / "out" / "figures" / "toy.png").is_file() and (tmp_path / "out" / "figures" / "toy.pdf").is_file()
    page = (tmp_path / "out" / "report.html").read_text()
    assert '<section id="verdicts">' in page and '<section id="toy">' in page and "data:image/png;base64," in page
    saved = json.loads((tmp_path / "out" / "findings.json").read_text())
    assert saved["findings"][0]["verdict"] == "mixed" and saved["wall_seconds"] == 12.0
    assert len(paths) == 3


def test_a_run_two_sets_of_a_finding_share_counts_once_in_its_run_time(tmp_path):
    # set b is set a's config on seed 100 (one run id, as a gap width that is also a composition control): that run
    # ran once, so the finding's run time counts its 10 s once (a: 3 runs, b: the shared one)
    data = _suite(runs__b={"preset": "micro", "seeds": [100, 101, 102], "overrides": ["train.steps=20"]})
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    assert {r.run_id for r in p.sets["a"].sweep.runs} == {r.run_id for r in p.sets["b"].sweep.runs}
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300), 101: _acc(0.9, 200, 300), 102: _acc(0.9, 200, 300)},
                   "b": {100: _acc(0.6, 1, 1)}})
    (toy,) = evaluate_suite(p)["findings"]
    assert toy["run_sets"]["b"]["finished"] >= 1
    assert toy["run_seconds"] == 30.0


def test_a_criterion_over_the_seeds_compares_the_spreads_once_and_the_report_and_readme_say_so(tmp_path):
    from conceptlab.report.readme import render_headline

    data = _suite()
    data["findings"][0]["criteria"] = [{
        "name": "color-steadier", "statement": "a's color learning time varies less across seeds than its size's",
        "value": {"runs": "a", "path": "learning_time.held_out/color", "censored": "high"},
        "control": {"runs": "a", "path": "learning_time.held_out/size", "censored": "high"},
        "direction": "less", "margin": 1, "over_seeds": "median_absolute_deviation"}]
    data["findings"][0].update(headline="color steadier: {color-steadier} ({color-steadier:value} against "
                                        "{color-steadier:control})", title="toy")
    data["runs"].pop("b")
    data["findings"][0]["control"] = "size's spread"
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    # color at 200, 210, never (spread 0 to 10, whenever seed 102 learns it after step 210); size at 300, 600, 900
    # (spread 300): decided whatever the censored seed's true step is
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300), 101: _acc(0.9, 210, 600), 102: _acc(0.9, None, 900)}})
    (toy,) = evaluate_suite(p)["findings"]
    (c,) = toy["criteria"]
    assert (c["passed"], c["of"], c["verdict"], toy["verdict"]) == (1, 1, "reproduced", "reproduced")
    assert c["statistic"]["value"] == 10.0 and c["statistic"]["control"] == 300.0
    assert c["statistic"]["value_range"] == [0.0, 10.0]
    assert toy["all_on_one_seed"] is None  # one criterion
    md = findings_markdown(evaluate_suite(p))
    rule = "its controls' (the same) − the values' median absolute deviation over the seeds ≥ 1"
    assert f"| color-steadier | {rule} | 1/1 |" in md and "0–10 (MAD over 3 seeds)" in md
    assert "| color-steadier | 102 | never (∞) | 900 | — | yes (over the seeds) |" in md
    assert render_headline(toy) == "color steadier: holds (0–10 (MAD over 3 seeds) against 300 (MAD over 3 seeds))"
    # size steadier instead: the same spreads, the claim the other way round, fails once
    data["findings"][0]["criteria"][0]["direction"] = "greater"
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    (toy,) = evaluate_suite(p)["findings"]
    assert toy["verdict"] == "not reproduced" and render_headline(toy).startswith("color steadier: does not hold")


def _size_late_plan(tmp_path):
    """A threshold criterion where a censored value passes: "a's size learning time is later than step 100"."""
    data = _suite()
    data["findings"][0]["criteria"] = [{
        "name": "size-late", "statement": "size is learned after step 100",
        "value": {"runs": "a", "path": "learning_time.held_out/size", "censored": "high"},
        "threshold": 100, "direction": "greater", "margin": 1}]
    data["findings"][0].update(control="none", reason="a threshold, not a control")
    data["runs"].pop("b")
    return plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")


def test_unfinished_runs_are_no_run_never_censored_and_leave_the_verdict_incomplete(tmp_path):
    p = _size_late_plan(tmp_path)
    _fake_runs(p, {"a": {100: _acc(0.9, 200, None), 101: _acc(0.9, 200, 300)}})  # 102 not finished
    (toy,) = evaluate_suite(p)["findings"]
    (late,) = toy["criteria"]
    assert [s["passed"] for s in late["seeds"]] == [True, True, False]  # 100 never learned size: censored, passes
    assert late["seeds"][2]["note"] == "no run" and late["no_run"] == 1
    assert late["verdict"] == "incomplete" and toy["verdict"] == "incomplete"
    md = findings_markdown(evaluate_suite(p))
    assert "… incomplete" in md and "2/3 (1 no run)" in md and "no (no run)" in md
    _fake_runs(p, {"a": {102: _acc(0.9, 200, None)}})  # it finishes, never learning size: now it passes
    (toy,) = evaluate_suite(p)["findings"]
    assert toy["criteria"][0]["passed"] == 3 and toy["verdict"] == "reproduced"
    # findings.json is strict JSON (jq, JavaScript): a censored value is the text "inf", not a bare Infinity
    result = evaluate_suite(p)
    write_findings(result, tmp_path / "written")

    def refuse(token):
        raise ValueError(f"bare {token} in findings.json")

    saved = json.loads((tmp_path / "written" / "findings.json").read_text(), parse_constant=refuse)
    assert [s["value"] for s in saved["findings"][0]["criteria"][0]["seeds"]] == ["inf", 300, "inf"]


def test_a_path_the_summary_lacks_is_not_measured_never_censored(tmp_path):
    # "size learned after step 100", censored high: a null there (never learned) passes; a run whose summary has no
    # such key at all (a typo, or a run made without the measure) is "not measured" and fails
    p = _size_late_plan(tmp_path)
    no_key = {"final_accuracy": {"11/color": 0.9}, "learning_time": {"held_out/color": 200}}
    _fake_runs(p, {"a": {100: _acc(0.9, 200, None), 101: no_key, 102: {"final_accuracy": {"11/color": 0.9}}}})
    (late,) = evaluate_suite(p)["findings"][0]["criteria"]
    assert [s["passed"] for s in late["seeds"]] == [True, False, False]
    assert [s["note"] for s in late["seeds"][1:]] == ["not measured", "not measured"]
    assert late["seeds"][1]["value"] is None and late["verdict"] == "mixed"


def test_evaluate_only_counts_finished_and_unfinished_runs_and_runs_nothing(tmp_path):
    from conceptlab.experiments.findings import finished_counts

    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}, "b": {100: _acc(0.5, 1, 1), 101: _acc(0.5, 1, 1)}})
    counts = finished_counts(p)
    assert counts == {"runs": 6, "skipped": 3, "done": 0, "not_finished": 3, "failed": {}}
    assert sorted(q.name for q in (tmp_path / "out" / "runs").rglob("summary.json")) == ["summary.json"] * 3
    result = evaluate_suite(p)
    result["runs"] = {"total": 6, "reused": 3, "done": 0, "not_finished": 3}
    assert "`--evaluate-only`: nothing run, 3 of 6 runs finished and read, 3 not finished" in findings_markdown(result)


def test_all_seeds_passing_is_reproduced_and_none_is_not_reproduced(tmp_path):
    suite = load_suite(_write(tmp_path, _suite()))
    p = plan(suite, None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {s: _acc(0.9, 200, 300) for s in (100, 101, 102)},
                   "b": {s: _acc(0.5, 1, 1) for s in (100, 101, 102)}})
    assert evaluate_suite(p)["findings"][0]["verdict"] == "reproduced"
    _fake_runs(p, {"a": {s: _acc(0.5, 400, 300) for s in (100, 101, 102)}})
    f = evaluate_suite(p)["findings"][0]
    assert f["verdict"] == "not reproduced" and [c["passed"] for c in f["criteria"]] == [0, 0]


def test_a_step_rule_reads_the_last_checkpoint_before_another_quantity_reaches_its_bar(tmp_path):
    """`step: {where: ..., column: score, reaches: 0.5}`: the last checkpoint before over-prompting's score first
    reaches 0.5 (none when it is there at the first checkpoint; the last when it never is)."""
    import pandas as pd

    from conceptlab.experiments.findings import step_before

    def table(op_scores):
        rows = []
        for step, op in zip((100, 200, 300, 400), op_scores):
            rows += [{"step": step, "intervention": "over_prompting", "score": op},
                     {"step": step, "intervention": "cfg", "score": step / 1000}]
        return pd.DataFrame(rows)

    op = lambda t: t[t["intervention"] == "over_prompting"]  # noqa: E731
    assert step_before(op(table([0.0, 0.2, 0.6, 0.9])), "score", 0.5) == 200
    assert step_before(op(table([0.7, 0.2, 0.6, 0.9])), "score", 0.5) is None
    assert step_before(op(table([0.0, 0.1, 0.2, 0.3])), "score", 0.5) == 400
    assert step_before(op(table([0.0, 0.1, 0.2, 0.3]))[:0], "score", 0.5) is None

    data = _suite()
    data["findings"][0]["criteria"][0]["value"] = {
        "runs": "a", "table": "emergence", "column": "score", "where": {"intervention": "cfg"},
        "step": {"where": {"intervention": "over_prompting"}, "column": "scroe", "reaches": 0.5}}
    with pytest.raises(ConfigError, match="table emergence has no column 'scroe'"):
        load_suite(_write(tmp_path, data))
    data["findings"][0]["criteria"][0]["value"]["step"]["column"] = "score"
    suite = load_suite(_write(tmp_path, data))
    p = plan(suite, None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {s: _acc(0.9, 200, 300) for s in (100, 101, 102)},
                   "b": {s: _acc(0.5, 1, 1) for s in (100, 101, 102)}})
    for r in p.sets["a"].sweep.runs:  # the emergence table of each run of `a`
        table([0.0, 0.2, 0.6, 0.9]).assign(target="11").to_parquet(r.directory(p.sets["a"].sweep.root)
                                                                     / "emergence.parquet")
    beats = evaluate_suite(p)["findings"][0]["criteria"][0]
    assert [s["value"] for s in beats["seeds"]] == [0.2, 0.2, 0.2]  # cfg's score at step 200


def test_a_step_window_reads_the_median_of_the_last_checkpoints(tmp_path):
    """`step: {last: 3}`: the median of the last three checkpoints' values, so one checkpoint's swing (0.05 at the
    last step here) does not decide the reading alone; fewer checkpoints than the window, or a missing value in it:
    not measured; several rows a checkpoint: a clear error."""
    import pandas as pd

    data = _suite()
    data["findings"][0]["criteria"][0]["value"] = {
        "runs": "a", "table": "emergence", "column": "score", "where": {"intervention": "naive"},
        "step": {"last": 3}}
    data["findings"][0]["criteria"][0]["control"] = {"runs": "b", "table": "emergence", "column": "score",
                                                     "where": {"intervention": "naive"}, "step": "last"}
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {s: _acc(0.9, 200, 300) for s in (100, 101, 102)},
                   "b": {s: _acc(0.5, 1, 1) for s in (100, 101, 102)}})
    series = {100: [0.1, 0.8, 0.9, 0.7, 0.05], 101: [0.2, 0.3], 102: [0.1, 0.8, 0.9, None, 0.6]}
    for name in ("a", "b"):  # the same tables in both sets: the control reads the last checkpoint alone
        for r in p.sets[name].sweep.runs:
            scores = series[r.config.train.train_seed]
            pd.DataFrame({"step": [100 * (i + 1) for i in range(len(scores))], "intervention": "naive",
                          "target": "11", "score": scores}).to_parquet(r.directory(p.sets[name].sweep.root)
                                                                       / "emergence.parquet")
    crit = evaluate_suite(p)["findings"][0]["criteria"][0]
    assert [(s["seed"], s["value"], s["control"]) for s in crit["seeds"]] == [(100, 0.7, 0.05), (101, None, 0.3),
                                                                               (102, None, 0.6)]
    # a checkpoint of the window without a matching row (only another intervention measured there): not measured,
    # never a window moved to earlier checkpoints
    gappy = p.sets["a"].sweep.runs[1].directory(p.sets["a"].sweep.root) / "emergence.parquet"
    pd.DataFrame({"step": [100, 200, 300, 400, 500], "intervention": ["naive"] * 3 + ["cfg", "naive"],
                  "target": "11", "score": [0.5, 0.6, 0.7, 0.1, 0.8]}).to_parquet(gappy)
    assert evaluate_suite(p)["findings"][0]["criteria"][0]["seeds"][1]["value"] is None
    doubled = p.sets["a"].sweep.runs[0].directory(p.sets["a"].sweep.root) / "emergence.parquet"
    frame = pd.read_parquet(doubled)
    pd.concat([frame, frame]).to_parquet(doubled)
    with pytest.raises(ConfigError, match="narrow where to one row a checkpoint"):
        evaluate_suite(p)
    data["findings"][0]["criteria"][0]["value"]["step"] = {"last": 0}
    with pytest.raises(ConfigError):
        load_suite(_write(tmp_path, data))


class Recorder:
    """An executor that runs nothing and says every task is done; it keeps the tasks in the order given."""

    def __init__(self):
        self.tasks = []

    def run(self, tasks, progress=True, console=None):
        from types import SimpleNamespace

        self.tasks += tasks
        return [SimpleNamespace(run_id=t.run_id, state="done", error=None) for t in tasks]


def test_seeds_runs_only_those_report_seeds_defers_the_rest_and_refuses_unknown_ones(tmp_path):
    from conceptlab.experiments.findings import run_plan

    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}})  # finished earlier: neither run nor deferred
    executor = Recorder()
    result = run_plan(p, executor, progress=False, seeds={101})
    assert sorted((t.config.train.train_seed, t.run_dir.parent.name) for t in executor.tasks) == [(101, "a"), (101, "b")]
    assert (result["runs"], result["skipped"], result["done"], result["deferred"]) == (6, 1, 2, 3)
    everything = Recorder()
    assert run_plan(p, everything, progress=False)["deferred"] == 0 and len(everything.tasks) == 5
    with pytest.raises(ConfigError, match=r"--seeds 999: not a report seed .* \(their seeds: 100, 101, 102\)"):
        run_plan(p, Recorder(), progress=False, seeds={101, 999})


def test_the_suite_hands_its_pool_the_largest_trainings_first_across_its_sets(tmp_path):
    from conceptlab.experiments.findings import run_plan

    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "out")  # a: 20 steps, b: 30
    executor = Recorder()
    run_plan(p, executor, progress=False)
    assert [(t.run_dir.parent.name, t.config.train.train_seed) for t in executor.tasks] == [
        ("b", 100), ("b", 101), ("b", 102), ("a", 100), ("a", 101), ("a", 102)]  # the suite lists a first


def test_a_run_two_sets_share_runs_once_and_the_other_set_gets_a_copy(tmp_path):
    from types import SimpleNamespace

    from conceptlab.experiments.findings import run_plan

    class Finisher:  # an executor that "runs" each task by writing its summary
        def __init__(self):
            self.tasks = []

        def run(self, tasks, progress=True, console=None):
            self.tasks += tasks
            for t in tasks:
                (t.run_dir / "summary.json").write_text(json.dumps({"ran_in": t.run_dir.parent.name}))
                (t.run_dir / "checkpoints").mkdir(exist_ok=True)
                (t.run_dir / "checkpoints" / "step_0000020.json").write_text("{}")
            return [SimpleNamespace(run_id=t.run_id, state="done", error=None) for t in tasks]

    # b is a's twin: the same config (steps 20) under another set name, so the same run ids
    p = plan(load_suite(_write(tmp_path, _suite(runs__b__overrides=["train.steps=20"]))), None, "full", tmp_path / "o")
    a, b = p.sets["a"].sweep, p.sets["b"].sweep
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}})  # seed 100 finished earlier in a
    partial = b.runs[1].directory(b.root)  # an unfinished earlier attempt of seed 101 in b: replaced by the copy
    partial.mkdir(parents=True)
    (partial / "train_log.jsonl").write_text('{"step": 10}\n')
    executor = Finisher()
    result = run_plan(p, executor, progress=False)
    assert sorted((t.config.train.train_seed, t.run_dir.parent.name) for t in executor.tasks) == [(101, "a"), (102, "a")]
    assert (result["runs"], result["skipped"], result["done"], result["copied"], result["queued"]) == (6, 1, 2, 3, 0)
    for ra, rb in zip(a.runs, b.runs):
        da, db = ra.directory(a.root), rb.directory(b.root)
        assert (db / "summary.json").read_text() == (da / "summary.json").read_text()  # the finished twin's results
        assert "name: b" in (db / "config.yaml").read_text() and "name: a" in (da / "config.yaml").read_text()
        status = json.loads((db / "status.json").read_text())
        assert status["state"] == "done" and status["copied_from"] == str(da)
    assert not (partial / "train_log.jsonl").exists() and (partial / "checkpoints" / "step_0000020.json").is_file()
    assert not [p.name for p in b.root.iterdir() if p.name.startswith(".")]  # no staging folder left behind
    again = Finisher()
    assert run_plan(p, again, progress=False)["skipped"] == 6 and again.tasks == []


def test_a_twin_is_not_copied_over_a_folder_another_process_is_running(tmp_path):
    import subprocess
    import sys

    from conceptlab.experiments.sweep import adopt_finished_twin

    source, dest = tmp_path / "src", tmp_path / "dest"
    source.mkdir()
    (source / "summary.json").write_text("{}")
    assert not adopt_finished_twin(dest, source)  # an unfinished source is never copied
    dest.mkdir()
    (dest / "train_log.jsonl").write_text("mine\n")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX); f.write('PID x'); "
        "f.flush(); print('held', flush=True); time.sleep(60)"), str(dest / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not adopt_finished_twin(source, dest)
        assert (dest / "train_log.jsonl").read_text() == "mine\n" and not (dest / "summary.json").exists()
        # the holder takes the folder between the check and the copy: the copy takes the lock, so it still refuses
        from conceptlab.store.run_folder import RunFolder

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(RunFolder, "holder", lambda self: None)
            assert not adopt_finished_twin(source, dest)
        assert (dest / "train_log.jsonl").read_text() == "mine\n" and not (dest / "summary.json").exists()
    finally:
        holder.kill()
        holder.wait()
    assert adopt_finished_twin(source, dest) and (dest / "summary.json").is_file()
    assert not adopt_finished_twin(source, dest)  # complete by now: nothing to adopt, nothing touched


def test_a_difference_that_is_zero_up_to_float_rounding_prints_as_zero():
    from conceptlab.report.findings import _num

    assert _num(0.8 - 0.8000000000000002) == "0" and _num(-1.11e-16) == "0"
    assert _num(0.2) == "0.2" and _num(1e-9) == "1e-09" and _num(float("inf")) == "never (∞)"


# -- run records: runs gathered from several sessions, evaluated again -----------------------------------------------

def _with_heavy_files(p, name: str) -> None:
    """Give every finished run of set `name` what a real run folder also holds: weights, a table, a log, figures."""
    for r in p.sets[name].sweep.runs:
        folder = r.directory(p.sets[name].sweep.root)
        if not (folder / "summary.json").is_file():
            continue
        (folder / "config.yaml").write_text(f"name: {name}\n")
        (folder / "checkpoints").mkdir(exist_ok=True)
        (folder / "checkpoints" / "step_0000020.safetensors").write_bytes(b"\0" * 4096)
        (folder / "train_state.safetensors").write_bytes(b"\0" * 2048)
        (folder / "run.log").write_text("training…\n")
        (folder / ".lock").write_text("")
        pd.DataFrame({"run": [r.run_id], "step": [20], "score": [0.5]}).to_parquet(folder / "emergence.parquet")


def test_records_keep_what_evaluation_reads_and_evaluate_to_the_same_verdicts(tmp_path):
    from conceptlab.experiments.findings import record_plan
    from conceptlab.store.records import RECORD, is_record, verify_record

    suite = load_suite(_write(tmp_path, _suite()))
    p = plan(suite, None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300), 101: _acc(0.85, None, 300), 102: _acc(0.9, 200, None)},
                   "b": {100: _acc(0.6, 1, 1), 101: _acc(0.8, 1, 1)}})  # b's seed 102 unfinished
    for name in ("a", "b"):
        _with_heavy_files(p, name)
    assert record_plan(p, tmp_path / "rec") == {"recorded": 5, "already": 0, "not_finished": 1, "code_drift": 0}
    run = p.sets["a"].sweep.runs[0]
    kept = tmp_path / "rec" / "runs" / "a" / run.run_id
    assert is_record(kept) and not is_record(run.directory(p.sets["a"].sweep.root))
    assert {q.name for q in kept.iterdir()} == {RECORD, "config.yaml", "emergence.parquet", "summary.json"}
    manifest = json.loads((kept / RECORD).read_text())
    assert {f["name"] for f in manifest["left_out"]} == {"checkpoints/", "train_state.safetensors", "run.log"}
    assert manifest["source"] == str(run.directory(p.sets["a"].sweep.root).resolve()) and verify_record(kept) == []
    # the records folder is a findings root: evaluated there, the same verdicts and numbers as from the runs
    again = plan(suite, None, "full", tmp_path / "rec")
    original, from_records = evaluate_suite(p), evaluate_suite(again)
    assert original["records"] == 0 and from_records["records"] == 5
    for key in ("verdict", "criteria", "machines", "precision", "code", "run_seconds"):
        assert from_records["findings"][0][key] == original["findings"][0][key], key
    assert "5 of the runs read are run records" in findings_markdown({**from_records, "runs": None})
    # recording again keeps the first record; the run that finished since is recorded now
    (kept / "summary.json").write_text("{}")  # an edited record is caught
    assert verify_record(kept) == ["summary.json: changed since it was recorded"]
    _fake_runs(p, {"b": {102: _acc(0.7, 1, 1)}})
    assert record_plan(p, tmp_path / "rec") == {"recorded": 1, "already": 5, "not_finished": 0, "code_drift": 0}
    assert (kept / "summary.json").read_text() == "{}"
    assert not [q for q in (tmp_path / "rec" / "runs" / "b").iterdir() if q.name.startswith(".")]  # no staging left
    with pytest.raises(ConfigError, match="is the findings root itself"):
        record_plan(p, tmp_path / "out")


def test_a_run_made_while_its_code_differed_from_its_recorded_version_is_not_kept_as_a_record(tmp_path):
    """`code_drift` in the run's provenance, or in the invocations that trained the training it reuses: its numbers
    belong to no recorded code, so `--record` leaves it out and counts it; [] or a run from before the field is
    recorded as ever."""
    from conceptlab.experiments.findings import made_with_code_drift, record_plan

    suite = load_suite(_write(tmp_path, _suite()))
    p = plan(suite, None, "full", tmp_path / "out")
    made = {"cpu": "test CPU", "gpu": None, "git_commit": "abcdef0123"}
    lent = {**made, "code_drift": [], "trained_in": {"run_id": "x", "folder": "/x", "invocations": [
        {**made, "code_drift": ["training"]}]}}
    _fake_runs(p, {"a": {100: {**_acc(0.9, 200, 300), "provenance": {**made, "code_drift": ["study:shapes"]}},
                         101: {**_acc(0.85, None, 300), "provenance": lent},
                         102: {**_acc(0.9, 200, None), "provenance": {**made, "code_drift": []}}},
                   "b": {100: _acc(0.6, 1, 1), 101: _acc(0.8, 1, 1), 102: _acc(0.7, 1, 1)}})  # b: before the field
    for name in ("a", "b"):
        _with_heavy_files(p, name)
    folders = [r.directory(p.sets["a"].sweep.root) for r in p.sets["a"].sweep.runs]
    assert [made_with_code_drift(f) for f in folders] == [True, True, False]
    assert record_plan(p, tmp_path / "rec") == {"recorded": 4, "already": 0, "not_finished": 0, "code_drift": 2}
    assert sorted(q.name for q in (tmp_path / "rec" / "runs" / "a").iterdir()) == [p.sets["a"].sweep.runs[2].run_id]


def test_a_record_replaces_an_unfinished_leftover_and_is_never_made_of_an_unfinished_run(tmp_path):
    from conceptlab.store.records import record_run

    source, dest = tmp_path / "run", tmp_path / "rec" / "run"
    source.mkdir()
    (source / "train_log.jsonl").write_text('{"step": 1}\n')
    assert record_run(source, dest) is None and not dest.exists()  # no summary: not finished, nothing recorded
    (source / "summary.json").write_text('{"done": true}')
    (source / "huge.parquet").write_bytes(b"\0" * 100)
    dest.mkdir(parents=True)
    (dest / "stale.json").write_text("{}")  # an interrupted attempt from before records were made atomically
    manifest = record_run(source, dest, max_file_bytes=50)
    assert manifest is not None and not (dest / "stale.json").exists()
    assert [f["name"] for f in manifest["files"]] == ["summary.json"]
    assert {"name": "huge.parquet", "bytes": 100, "why": "larger than 50 bytes"} in manifest["left_out"]


def test_an_analytic_set_reports_its_machine_time_and_precision_and_is_recorded(tmp_path):
    from conceptlab.experiments.findings import record_plan, run_plan

    data = {"runs": {"perc": {"analytic": "conceptlab.experiments.finding_measures:percolation_scaling",
                              "args": {"sizes": [16, 32], "threshold": 0.05, "trials": 1}, "seeds": [100]}},
            "findings": [{"name": "perc", "paper": "test", "claim": "an exponent", "setup": "fast", "control": "none",
                          "reason": "analytic", "criteria": [{
                              "name": "positive", "statement": "the exponent is positive",
                              "value": {"runs": "perc", "path": "exponent"}, "threshold": 0, "direction": "greater"}]}]}
    suite = load_suite(_write(tmp_path, data))
    p = plan(suite, None, "full", tmp_path / "out")
    run_plan(p, None, progress=False)  # an analytic set only: nothing for an executor
    (f,) = evaluate_suite(p)["findings"]
    assert f["verdict"] == "reproduced" and f["precision"] == ["analytic (no network)"]
    assert f["machines"] != ["None"] and f["code"] != ["None"] and f["run_seconds"] > 0
    assert record_plan(p, tmp_path / "rec") == {"recorded": 1, "already": 0, "not_finished": 0, "code_drift": 0}
    assert record_plan(p, tmp_path / "rec") == {"recorded": 0, "already": 1, "not_finished": 0, "code_drift": 0}
    (again,) = evaluate_suite(plan(suite, None, "full", tmp_path / "rec"))["findings"]
    assert again["criteria"] == f["criteria"] and again["machines"] == f["machines"]
    # the suite's arguments change: the results computed from the old ones are not read (not run yet), here or in
    # the records, until it is computed again
    data["runs"]["perc"]["args"]["trials"] = 2
    changed = load_suite(_write(tmp_path, data))
    for root in ("out", "rec"):
        (stale,) = evaluate_suite(plan(changed, None, "full", tmp_path / root))["findings"]
        assert stale["verdict"] == "incomplete" and stale["criteria"][0]["seeds"][0]["note"] == "no run", root


def test_a_finding_with_no_finished_run_says_so_in_one_line_and_gets_no_figure(tmp_path):
    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "out")
    result = evaluate_suite(p)
    write_findings(result, tmp_path / "out", markdown=tmp_path / "docs" / "page.md")
    md = (tmp_path / "docs" / "page.md").read_text()
    assert "No finished run yet: every report seed of its run sets (a (seeds 100, 101, 102), b (seeds 100, 101, " in md
    assert "Run it with `conceptlab findings toy`." in md and "<summary>per seed</summary>" not in md
    assert not list(tmp_path.rglob("*.png"))
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}})  # one run: the tables and the figure are back
    write_findings(evaluate_suite(p), tmp_path / "out", markdown=tmp_path / "docs" / "page.md")
    md = (tmp_path / "docs" / "page.md").read_text()
    assert "No finished run yet" not in md and "![toy](figures/page/toy.png)" in md
    assert (tmp_path / "docs" / "figures" / "page" / "toy.png").is_file()


def test_a_regenerated_page_whose_content_did_not_change_is_left_as_it_was(tmp_path):
    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}})
    page = tmp_path / "docs" / "page.md"
    write_findings(evaluate_suite(p), tmp_path / "out", markdown=page)
    first = page.read_text()
    page.write_text(first.replace("Scale `full`;", "Scale `full`; (an older evaluation)"))  # its provenance line
    kept = page.read_text()
    write_findings(evaluate_suite(p), tmp_path / "out", markdown=page)
    assert page.read_text() == kept  # only the provenance line would differ: the page is not rewritten
    _fake_runs(p, {"a": {101: _acc(0.9, 200, 300)}})  # a new run: the content changes, the page is rewritten
    write_findings(evaluate_suite(p), tmp_path / "out", markdown=page)
    assert page.read_text() != kept and "(an older evaluation)" not in page.read_text()


def test_a_suite_gathered_over_sessions_runs_only_what_is_not_recorded(tmp_path):
    """Session 1 finished two runs and recorded them, then its folder was lost; session 2, on a fresh root with the
    same records, restores those two from their records and runs only the other four."""
    from conceptlab.experiments.findings import record_plan, restore_records, run_plan
    from conceptlab.store.records import is_record

    suite = load_suite(_write(tmp_path, _suite()))
    first = plan(suite, None, "full", tmp_path / "session1")
    _fake_runs(first, {"a": {100: _acc(0.9, 200, 300)}, "b": {100: _acc(0.6, 1, 1)}})
    assert record_plan(first, tmp_path / "results")["recorded"] == 2
    second = plan(suite, None, "full", tmp_path / "session2")
    held = second.sets["a"].sweep.runs[1]  # seed 101 of a: unrecorded, so nothing to restore there
    assert restore_records(second, tmp_path / "results") == 2
    restored = second.sets["a"].sweep.runs[0].directory(second.sets["a"].sweep.root)
    assert is_record(restored) and json.loads((restored / "status.json").read_text())["state"] == "done"
    assert not held.directory(second.sets["a"].sweep.root).exists()

    class Recorder:
        tasks: list = []

        def run(self, tasks, progress=True, console=None):
            self.tasks = list(tasks)
            return []

    executor = Recorder()
    counts = run_plan(second, executor, progress=False)
    assert counts["skipped"] == 2 and sorted((t.config.train.train_seed, t.run_dir.parent.name)
                                             for t in executor.tasks) == [(101, "a"), (101, "b"), (102, "a"), (102, "b")]
    (toy,) = evaluate_suite(second)["findings"]
    assert toy["criteria"][0]["seeds"][0]["passed"] and evaluate_suite(second)["records"] == 2
    assert restore_records(second, tmp_path / "results") == 0  # restored once: finished now


def test_run_costs_time_the_runs_to_go_from_finished_and_recorded_runs_and_guess_nothing(tmp_path):
    """Before a suite starts, each set says how many runs are still to run and the median time of its finished
    runs (here or recorded, with the machines that made them); a set with no finished run gets no time."""
    from conceptlab.experiments.findings import record_plan, run_costs

    suite = load_suite(_write(tmp_path, _suite()))
    first = plan(suite, None, "full", tmp_path / "session1")
    _fake_runs(first, {"a": {100: {**_acc(0.9, 200, 300), "seconds": {"total": 60.0}},
                             101: {**_acc(0.9, 200, 300), "seconds": {"total": 100.0},
                                   "seconds_all_invocations": {"total": 180.0}}}})
    costs = run_costs(first)
    assert costs["a"].pending == 1 and costs["a"].median_seconds == 120.0 and costs["a"].runs == 2
    # a run that evaluated another run's training took no training time: it does not time a run still to go
    _fake_runs(first, {"a": {102: {**_acc(0.9, 200, 300), "seconds": {"total": 5.0},
                                   "provenance": {"cpu": "test CPU", "trained_in": {"run_id": "x"}}}}})
    assert run_costs(first)["a"].median_seconds == 120.0 and run_costs(first)["a"].runs == 2
    (first.sets["a"].sweep.runs[2].directory(first.sets["a"].sweep.root) / "summary.json").unlink()
    assert costs["a"].machines == ["test CPU, fp32, ? threads"] and "2.0 min a run (median of 2" in costs["a"].describe()
    assert costs["b"].pending == 3 and costs["b"].median_seconds is None
    assert costs["b"].describe() == "no finished run to time"
    record_plan(first, tmp_path / "results")
    later = plan(suite, None, "full", tmp_path / "session2")  # a fresh root: the recorded runs are not to run again
    assert run_costs(later)["a"].pending == 3 and run_costs(later)["a"].median_seconds is None
    from_records = run_costs(later, tmp_path / "results")["a"]
    assert from_records.pending == 1 and from_records.median_seconds == 120.0
    fresh = run_costs(later, tmp_path / "results", reuse=False)["a"]  # --no-reuse: timed by the records, all to run
    assert fresh.pending == 3 and fresh.median_seconds == 120.0
    # records read for timing only (the repository's committed results/ when no --record is given): timed, none done
    timed_only = run_costs(later, timing=tmp_path / "results")["a"]
    assert timed_only.pending == 3 and timed_only.median_seconds == 120.0 and timed_only.runs == 2


def test_run_costs_price_a_set_only_by_finished_runs_of_its_configs_up_to_the_seeds(tmp_path):
    """A CI-size `--quick` run is not priced by the full-size runs of its set, nor a run by an older config of its
    set: only a finished run whose config.yaml is a planned run's but for its seeds times the runs to go (the quick
    suite on a 2-core fp32 CPU was once priced at 1.1 h by the full-size records, for a run of 26 min)."""
    from conceptlab.experiments.findings import config_shape, run_costs

    suite = load_suite(_write(tmp_path, _suite(runs__a__quick={"overrides": ["train.steps=5"]})))
    full = plan(suite, None, "full", tmp_path / "full")
    _fake_runs(full, {"a": {100: {"seconds": {"total": 60.0}}, 101: {"seconds": {"total": 80.0}}},
                      "b": {100: {"seconds": {"total": 40.0}}}})
    for name, count in (("a", 2), ("b", 1)):
        for r in full.sets[name].sweep.runs[:count]:
            (r.directory(full.sets[name].sweep.root) / "config.yaml").write_text(
                yaml.safe_dump(r.config.model_dump(mode="json"), sort_keys=False))
    runs = full.sets["a"].sweep.runs
    assert len({config_shape(r.config.model_dump(mode="json")) for r in runs}) == 1  # the seeds aside, one config
    assert (run_costs(full)["a"].median_seconds, run_costs(full)["a"].runs) == (70.0, 2)
    older = runs[1].directory(full.sets["a"].sweep.root) / "config.yaml"  # seed 101 made by an older config
    older.write_text(older.read_text().replace("steps: 20", "steps: 30"))
    assert (run_costs(full)["a"].median_seconds, run_costs(full)["a"].runs) == (60.0, 1)
    quick = plan(suite, None, "quick", tmp_path / "quick")  # a: 5 steps, b: its full config, one seed
    costs = run_costs(quick, timing=tmp_path / "full")
    assert (costs["a"].pending, costs["a"].median_seconds) == (1, None) and costs["a"].describe() == \
        "no finished run to time"
    assert (costs["b"].pending, costs["b"].median_seconds) == (1, 40.0)  # the same config: it prices the quick run


def test_run_costs_time_a_set_by_the_runs_made_at_the_precision_its_runs_will_use_here(tmp_path):
    """bf16 and fp32 runs of one set differ about twofold on one CPU: a set whose runs will use fp32 here is timed by
    its fp32 runs only; a set with no run at its precision is timed by the others, and says so."""
    from conceptlab.experiments.findings import run_costs

    suite = load_suite(_write(tmp_path, _suite(runs__a__overrides=["train.steps=20", "train.bf16=false"],
                                               runs__b__overrides=["train.steps=30", "train.bf16=true"])))
    p = plan(suite, None, "full", tmp_path / "o")
    _fake_runs(p, {"a": {100: {"seconds": {"total": 60.0}}, 101: {"bf16": True, "seconds": {"total": 20.0}}},
                   "b": {100: {"seconds": {"total": 60.0}}}})
    costs = run_costs(p)
    assert (costs["a"].median_seconds, costs["a"].runs, costs["a"].other_precision) == (60.0, 1, None)
    assert costs["a"].machines == ["test CPU, fp32, ? threads"] and "none timed" not in costs["a"].describe()
    assert (costs["b"].median_seconds, costs["b"].other_precision) == (60.0, "bf16 autocast")
    assert costs["b"].describe().endswith("none timed at bf16 autocast, which these runs will use here")


def test_each_panel_of_a_finding_figure_names_what_its_value_reads():
    from conceptlab.report.findings import finding_figure, value_label

    assert value_label({"path": "emergence.targets.11.matched.over_prompting.step"}) == "over prompting step"
    assert value_label({"path": "learning_time.held_out/color"}) == "held out/color"
    assert value_label({"path": "emergence.targets.11.turn.toward_target"}) == "toward target"
    assert value_label({"path": "emergence.targets.11.step"}) == "targets step"  # a target id is not an owner
    assert value_label({"path": "emergence.targets.11.final_score.naive"}) == "final score naive"
    assert value_label({"path": "departures.linear_probe.shape"}) == "shape"
    assert value_label({"path": "accuracy"}) == "accuracy"
    assert value_label({"compute": "m:checkpoint_noise_turn", "args": {"target": "11", "part": "p"}}) == \
        "checkpoint noise turn: p"
    assert value_label({"table": "composition", "column": "joint_accuracy"}) == "joint accuracy"
    assert value_label({"table": "emergence", "column": "score", "step": {"last": 3, "statistic": "median"}}) == \
        "score (median of last 3)"
    assert value_label({"table": "emergence", "column": "score", "step": "last"}) == "score"
    assert value_label({"path": "x.acc", "across": "data.gap_width"}) == "Spearman ρ vs gap_width"
    assert value_label({"compute": "pkg.mod:fit_r2"}) == "fit r2"
    seeds = [{"seed": 100, "value": 500.0, "control": float("inf"), "passed": True, "note": ""}]
    crit = {"name": "c", "direction": "less", "control": {"path": "a.b"}, "threshold": None, "seeds": seeds,
            "passed": 1, "of": 1, "value": {"path": "emergence.step"}}
    fig = finding_figure({"criteria": [crit]})
    assert fig.axes[0].get_ylabel() == "emergence step"


def test_run_costs_count_a_run_two_sets_share_once_as_run_plan_runs_it(tmp_path):
    """b is a's twin (same run ids): seed 100 finished in a, so b's copy of it is not a run to go either; of the
    other two seeds, both pending in both sets, only a's are run (b's are copied): 2 runs to go, not 5."""
    from conceptlab.experiments.findings import run_costs

    p = plan(load_suite(_write(tmp_path, _suite(runs__b__overrides=["train.steps=20"]))), None, "full", tmp_path / "o")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}})
    costs = run_costs(p)
    assert (costs["a"].pending, costs["b"].pending) == (2, 0)
    assert costs["a"].median_seconds == 10.0 and costs["b"].median_seconds is None
    later = run_costs(p, seeds={101})  # the twins of seed 102 are left for later once, not once per set
    assert (later["a"].pending, later["a"].deferred, later["b"].pending, later["b"].deferred) == (1, 1, 0, 0)
    crashed = p.sets["a"].sweep.root / ".x.copying-123"  # a half-made copy a crash left: not a finished run
    crashed.mkdir()
    (crashed / "summary.json").write_text(json.dumps({"seconds": {"total": 99.0}}))
    assert run_costs(p)["a"].runs == 1 and run_costs(p)["a"].median_seconds == 10.0


def test_run_costs_with_chosen_seeds_count_only_their_runs_and_leave_the_rest_for_later(tmp_path):
    """`--seeds 101` runs one seed per set now: the cost line counts those runs, and says how many are left for a
    later invocation instead of pricing runs that will not start."""
    from conceptlab.experiments.findings import run_costs

    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "o")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}})
    costs = run_costs(p, seeds={101})
    assert (costs["a"].pending, costs["a"].deferred) == (1, 1)
    assert (costs["b"].pending, costs["b"].deferred) == (1, 2)
    assert (run_costs(p)["a"].pending, run_costs(p)["a"].deferred) == (2, 0)


def test_a_finding_figure_accounts_for_every_seed_and_labels_a_truth_value():
    """A truth-valued criterion names what holds on its y axis; a seed whose run could not measure the value (no
    turn, say) and one without a run are written on the panel, not silently left out."""
    from conceptlab.report.findings import finding_figure

    seeds = [{"seed": 100, "value": True, "control": None, "passed": True, "note": ""},
             {"seed": 101, "value": None, "control": None, "passed": False, "note": "not measured"},
             {"seed": 102, "value": None, "control": None, "passed": False, "note": "no run"}]
    crit = {"name": "c", "direction": "holds", "control": None, "threshold": None, "seeds": seeds, "passed": 1,
            "of": 3, "value": {"path": "emergence.targets.11.memorization_precedes_turn"}}
    ax = finding_figure({"criteria": [crit]}).axes[0]
    assert ax.get_ylabel() == "memorization precedes turn"
    assert sorted(t.get_text() for t in ax.texts) == ["no run", "not measured"]
    assert len(ax.collections) == 1  # one drawn value: seed 100's


def test_with_record_each_run_is_recorded_as_it_finishes_even_if_the_invocation_dies_after(tmp_path):
    """A suite of hours killed (or failing) after some runs finished keeps those runs: run_plan records each one
    when the executor reports it done, not only at the end."""
    from conceptlab.experiments.executors import RunOutcome
    from conceptlab.experiments.findings import run_plan
    from conceptlab.store.records import is_record

    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "o")

    class DiesAfterTwo:
        def run(self, tasks, progress=True, console=None, on_outcome=None):
            for t in tasks[:2]:
                t.run_dir.mkdir(parents=True, exist_ok=True)
                (t.run_dir / "summary.json").write_text(json.dumps({"kind": "shapes", **_acc(0.9, 200, 300)}))
                on_outcome(RunOutcome(t.run_id, "done"))
            on_outcome(RunOutcome(tasks[2].run_id, "failed", "boom"))  # failed: nothing to record
            raise KeyboardInterrupt  # the session ends here

    with pytest.raises(KeyboardInterrupt):
        run_plan(p, DiesAfterTwo(), progress=False, record=tmp_path / "results")
    kept = sorted(f.name for f in (tmp_path / "results" / "runs").glob("*/*") if is_record(f))
    ran = sorted(r.run_id for s in p.sets.values() for r in s.sweep.runs if (r.directory(s.sweep.root) /
                                                                            "summary.json").is_file())
    assert len(kept) == 2 and kept == ran


def test_a_run_recorded_under_one_set_is_restored_into_its_twin_in_another(tmp_path):
    """b is a's twin (same run ids). Seed 100 was recorded under a only; a later plan restores it into both sets'
    folders (and does not price it as a run to go), instead of training b's copy again."""
    from conceptlab.experiments.findings import record_plan, restore_records, run_costs
    from conceptlab.experiments.sweep import is_complete

    suite = load_suite(_write(tmp_path, _suite(runs__b__overrides=["train.steps=20"])))
    first = plan(suite, None, "full", tmp_path / "s1")
    _fake_runs(first, {"a": {100: _acc(0.9, 200, 300)}})
    assert record_plan(first, tmp_path / "results")["recorded"] == 1  # b's folder never ran: only a's record
    later = plan(suite, None, "full", tmp_path / "s2")
    assert (run_costs(later, tmp_path / "results")["a"].pending, run_costs(later, tmp_path / "results")["b"].pending) \
        == (2, 0)
    assert restore_records(later, tmp_path / "results") == 2
    for name in ("a", "b"):
        s = later.sets[name]
        assert is_complete(s.sweep.runs[0].directory(s.sweep.root)), name


def test_the_html_report_says_why_a_finding_is_not_run(tmp_path):
    from conceptlab.report.findings import findings_html

    result = evaluate_suite(plan(load_suite(), ["real-data-lli"], "full", tmp_path / "out"))
    (f,) = result["findings"]
    page = findings_html(result, tmp_path / "out")
    assert f["verdict"] == "not run" and f"Not run: {f['reason']}" in html.unescape(page)


def test_a_control_without_the_values_report_seeds_is_refused_at_load(tmp_path):
    with pytest.raises(ConfigError, match=r"criterion a-beats-b: the control's run set b lacks report seeds \[102\]"):
        load_suite(_write(tmp_path, _suite(runs__b__seeds=[100, 101])))


def test_each_finding_says_the_thread_count_its_runs_used(tmp_path):
    """fp32 sums are ordered by the thread count, so a run is reproduced only at the same count: the report says it."""
    from conceptlab.report.findings import findings_markdown

    p = plan(load_suite(_write(tmp_path, _suite())), None, "full", tmp_path / "o")
    _fake_runs(p, {"a": {100: {**_acc(0.9, 200, 300), "threads": 2}}, "b": {100: {**_acc(0.6, 1, 1), "threads": 1}}})
    result = evaluate_suite(p)
    assert result["findings"][0]["threads"] == [1, 2]
    assert "precision: fp32; threads: 1, 2; code: abcdef0" in findings_markdown({**result, "runs": None})


def test_setup_of_needs_every_training_switch_on_the_authors_side():
    from conceptlab.experiments.findings_spec import paper_setup_differences, setup_of
    from conceptlab.experiments.loading import load_config

    assert setup_of(load_config("concept-space-paper-tiny")) == "paper"
    assert setup_of(load_config("hidden-emergence-paper-tiny")) == "paper"
    assert setup_of(load_config("concept-space-tiny")) == "fast"
    # the five switches the label used to check, all on the paper side, with the fast variant's learning rate
    almost = load_config("concept-space-paper-tiny", ["train.lr=0.002"])
    assert setup_of(almost) == "fast"
    assert paper_setup_differences(almost) == ["train.lr: 0.002 (paper: 0.001)"]
    assert setup_of(load_config("compose-vs-interpolate-tiny")) is None  # not a concept-space run


def test_a_finding_on_real_data_is_skipped_with_what_to_set_when_the_data_is_absent(tmp_path, monkeypatch):
    from conceptlab.experiments.findings import plan

    suite = load_suite()
    monkeypatch.delenv("CONCEPTLAB_CELEBA", raising=False)
    p = plan(suite, ["real-data-lli"], root=tmp_path)
    assert p.skipped["real-data-lli"] == ("needs the real data: set $CONCEPTLAB_CELEBA to its folder "
                                          "(run set celeba-lli)") and not p.sets
    monkeypatch.setenv("CONCEPTLAB_CELEBA", str(tmp_path / "nowhere"))
    assert "is not a folder" in plan(suite, ["real-data-lli"], root=tmp_path).skipped["real-data-lli"]
    monkeypatch.setenv("CONCEPTLAB_CELEBA", str(tmp_path))  # a folder: the runs are planned (not checked further)
    p = plan(suite, ["real-data-lli"], root=tmp_path)
    assert not p.skipped and [s.seeds for s in p.sets.values()] == [[300, 301, 302]]


def test_the_verdict_table_names_each_control_briefly_and_the_section_in_full(tmp_path):
    from conceptlab.report.findings import control_label, findings_html, findings_markdown, verdict_table

    long = "a straight path: " + "the segment redrawn at the run's noise, " * 8 + "and more"
    assert control_label({"control": long}).endswith(" …") and len(control_label({"control": long})) <= 90
    assert control_label({"control": "bumps alone"}) == "bumps alone"
    assert control_label({"control": long, "control_label": "straight paths"}) == "straight paths"
    assert control_label({"control": None}) == "—"
    data = _suite()
    data["findings"][0].update(control=long, control_label="run set b (shorter training)")
    p = plan(load_suite(_write(tmp_path, data)), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {100: _acc(0.9, 200, 300)}, "b": {100: _acc(0.6, 1, 1)}})
    result = evaluate_suite(p)
    assert list(verdict_table(result)["binding control"]) == ["run set b (shorter training)"]
    md = findings_markdown({**result, "runs": None})
    assert "| run set b (shorter training) |" in md and f"Binding control: {long}." in md
    page = findings_html(result, tmp_path / "out")
    assert "run set b (shorter training)" in page and html.escape(long) in page
    # the page's sentences shared with the Markdown show code spans as code, never as backticks
    assert "Scale <code>full</code>" in page and "`" not in page.split("<section")[1].split("</p>")[0]


def test_every_shipped_finding_has_a_short_control_label():
    for f in load_suite().findings:
        if f.status == "implemented" and f.control != "none":
            assert f.control_label, f.name


def test_evaluate_only_says_how_far_each_started_run_got(tmp_path):
    # a suite made over sessions: --evaluate-only lists every started, unfinished run with its state and progress
    import socket

    from typer.testing import CliRunner

    from conceptlab.cli import app

    path = _write(tmp_path, _suite())
    p = plan(load_suite(path), None, "full", tmp_path / "out")
    _fake_runs(p, {"a": {101: _acc(0.9, 200, 300)}})
    s = p.sets["a"]
    run = next(r for r in s.sweep.runs if r.config.train.train_seed == 100)
    folder = run.directory(s.sweep.root)
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text("train:\n  steps: 20\n")
    (folder / "train_log.jsonl").write_text('{"step": 10, "loss": 1.0}\n{"step": 12, "loss": 1.0}\n')
    (folder / "training.json").write_text('{"step": 10}')  # its last saved state: where a resume starts
    (folder / "status.json").write_text(json.dumps({"state": "running", "host": socket.gethostname(), "pid": 2**22 + 7}))
    out = CliRunner().invoke(app, ["findings", "--suite", path, "--root", str(tmp_path / "out"), "--evaluate-only",
                                   "--no-progress"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert f"a seed 100 ({run.run_id}): interrupted, training 10/20 (50%)" in text, text  # its process is gone
    assert "a seed 101" not in text and "a seed 102" not in text  # finished, and never started


def test_report_numbers_read_as_numbers():
    from conceptlab.report.findings import _num

    assert [_num(v) for v in (4333.33, 20000, 11200.0, -1500.4, 999.5, 76.7, 0.0123, 1e8)] == \
        ["4,330", "20,000", "11,200", "-1,500", "1,000", "76.7", "0.0123", "1e+08"]
    assert [_num(v) for v in (None, True, float("nan"), float("inf"), 1e-15)] == ["—", "true", "—", "never (∞)", "0"]


def test_the_wall_time_of_runs_on_a_pool_is_its_makespan_not_run_hours_over_workers():
    from conceptlab.experiments.findings import wall_seconds

    assert wall_seconds([60.0] * 5, 2) == 180.0  # three rounds, not 150
    assert wall_seconds([40.0, 100.0, 50.0, 60.0], 2) == 140.0  # longest first: 100 | 60, then 50 → 60+50, 40 → 100+40
    assert wall_seconds([30.0, 20.0], 4) == 30.0 and wall_seconds([], 3) == 0.0
    with pytest.raises(ValueError, match="workers"):
        wall_seconds([1.0], 0)


def test_runs_made_outside_the_suite_are_adopted_by_run_id(tmp_path):
    # a run set's runs made by `conceptlab sweep run` elsewhere (the same config, so the same run ids) are taken by
    # --adopt instead of being run again; a folder of other runs adopts nothing
    from typer.testing import CliRunner

    from conceptlab.cli import app
    from conceptlab.experiments.findings import adopt_runs
    from conceptlab.experiments.sweep import is_complete

    path = _write(tmp_path, _suite())
    elsewhere = plan(load_suite(path), None, "full", tmp_path / "elsewhere")
    _fake_runs(elsewhere, {"a": {100: _acc(0.9, 200, 300), 101: _acc(0.9, 200, 300)}})
    here = plan(load_suite(path), None, "full", tmp_path / "here")
    assert adopt_runs(here, [tmp_path / "elsewhere" / "runs" / "a"]) == {str(tmp_path / "elsewhere" / "runs" / "a"): 2}
    adopted = [r for r in here.sets["a"].sweep.runs if is_complete(r.directory(here.sets["a"].sweep.root))]
    assert sorted(r.config.train.train_seed for r in adopted) == [100, 101]
    status = json.loads((adopted[0].directory(here.sets["a"].sweep.root) / "status.json").read_text())
    assert status["state"] == "done" and "elsewhere" in status["copied_from"]
    assert adopt_runs(here, [tmp_path / "elsewhere"]) == {str(tmp_path / "elsewhere"): 0}  # finished here already
    with pytest.raises(ConfigError, match="not a folder"):
        adopt_runs(here, [tmp_path / "nowhere"])
    out = CliRunner().invoke(app, ["findings", "--suite", path, "--root", str(tmp_path / "cli"), "--evaluate-only",
                                   "--no-progress", "--adopt", str(tmp_path / "elsewhere")])
    assert out.exit_code == 0, out.output
    assert "2 runs adopted from" in " ".join(out.output.split())
    refused = CliRunner().invoke(app, ["findings", "--suite", path, "--root", str(tmp_path / "cli"), "--no-reuse",
                                       "--adopt", str(tmp_path / "elsewhere"), "--dry-run"])
    assert refused.exit_code == 2 and "use one or the other" in refused.output


def test_run_costs_price_a_run_that_will_evaluate_another_runs_training_without_its_training(tmp_path):
    """b differs from a only in its evaluation (eval.samples_per_class): of each pending seed's pair, run_plan
    trains one and the other evaluates its checkpoints, so the cost lines price the second at the timed runs' time
    outside training; with --no-reuse (reuse=False) every run trains and is priced whole."""
    from conceptlab.experiments.findings import run_costs

    p = plan(load_suite(_write(tmp_path, _suite(runs__b__overrides=["train.steps=20", "eval.samples_per_class=6"]))),
             None, "full", tmp_path / "o")
    assert p.sets["a"].sweep.runs[1].config.training_hash() == p.sets["b"].sweep.runs[1].config.training_hash()
    _fake_runs(p, {"a": {100: {"seconds": {"total": 100.0, "train": 80.0}}},
                   "b": {100: {"seconds": {"total": 30.0, "train": 0.0},
                               "provenance": {"cpu": "test CPU", "trained_in": {"run_id": "x"}}}}})
    costs = run_costs(p)
    # seeds 101 and 102: a's run trains (listed first), b's borrows; seed 100 is done in both sets
    assert (costs["a"].pending, costs["a"].borrowing, costs["b"].pending, costs["b"].borrowing) == (2, 0, 2, 2)
    assert costs["a"].durations() == [100.0, 100.0] and costs["a"].median_eval_seconds == 20.0
    assert costs["b"].median_seconds is None and costs["b"].median_eval_seconds == 30.0
    assert costs["b"].durations() == [30.0, 30.0]
    # no run can lend them yet: both wait for a's runs to train, in the second wave run_plan runs after the first
    assert costs["b"].waiting == 2 and costs["b"].durations(1) == [] and costs["b"].durations(2) == [30.0, 30.0]
    assert costs["a"].durations(1) == [100.0, 100.0] and costs["a"].durations(2) == []
    assert "2 of them evaluate another run's training: 0.5 min each outside training" in costs["b"].describe()
    fresh = run_costs(p, reuse=False)
    assert fresh["b"].borrowing == 0 and fresh["b"].durations() == []  # b has no run that trained to time it by
    assert run_costs(p, seeds={101})["b"].borrowing == 1
