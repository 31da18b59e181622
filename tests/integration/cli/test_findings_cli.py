"""`conceptlab findings` end to end on a micro suite: the verdicts follow the numbers (a true claim reproduces, a
false one does not), the outputs are written, a rerun reuses every run, and a rerun with reuse off trains every
run afresh and gives the same numbers (timings excepted); bad input is one line and exit 2."""

import json
import re

import pytest
from typer.testing import CliRunner

from conceptlab.cli import app

# `make test` runs `--dist loadgroup`:
# two tests read the session-scoped micro findings run, so they run on one worker (built once)
pytestmark = pytest.mark.xdist_group("micro-findings")

runner = CliRunner()


@pytest.fixture(autouse=True)
def _probe_cache(probe_cache):
    return probe_cache


def _numbers(result: dict) -> list:
    return [(f["name"], f["verdict"], [(c["name"], c["verdict"], [(s["seed"], s["value"], s["control"], s["passed"])
                                                                  for s in c["seeds"]]) for c in f["criteria"]])
            for f in result["findings"]]


@pytest.mark.slow
def test_findings_runs_the_suite_and_a_rerun_without_reuse_gives_the_same_numbers(micro_findings, tmp_path):
    out = micro_findings["out"]
    first = json.loads((out / "findings.json").read_text())
    verdicts = {f["name"]: f["verdict"] for f in first["findings"]}
    assert verdicts == {"shorter-runs-end-earlier": "reproduced", "shorter-runs-end-later": "not reproduced",
                        "twenty-steps-learn-nothing": "reproduced"}
    assert "4 runs: 0 reused, 4 done now, 0 failed" in micro_findings["output"]
    for name in ("findings.md", "report.html", "figures/shorter-runs-end-earlier.png"):
        assert (out / name).is_file(), name
    earlier = first["findings"][0]
    assert earlier["run_sets"]["short"]["seeds"] == [100, 101] and earlier["run_sets"]["short"]["missing"] == []
    assert earlier["command"] == "conceptlab findings shorter-runs-end-earlier" and earlier["machines"]
    never = next(f for f in first["findings"] if f["name"] == "twenty-steps-learn-nothing")["criteria"][0]["seeds"]
    # read as censored, not as "not measured"; findings.json is strict JSON, so the infinity is the text "inf"
    assert [s["value"] for s in never] == ["inf"] * 2, never

    docs = tmp_path / "docs" / "findings.md"
    again = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                "--workers", "1", "--threads", "1", "--no-progress", "--markdown", str(docs)])
    assert again.exit_code == 0 and "4 runs: 4 reused, 0 done now" in again.output, again.output
    # --markdown: the same report where the docs keep it, figure links relative to it
    text = docs.read_text()
    assert "![shorter-runs-end-earlier](figures/findings/shorter-runs-end-earlier.png)" in text
    assert (docs.parent / "figures" / "findings" / "shorter-runs-end-earlier.png").is_file()
    assert _numbers(json.loads((out / "findings.json").read_text())) == _numbers(first)

    fresh = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                "--workers", "1", "--threads", "1", "--no-progress", "--no-reuse"])
    assert fresh.exit_code == 0 and "4 runs: 0 reused, 4 done now" in fresh.output, fresh.output
    redone = json.loads((out / "findings.json").read_text())
    assert _numbers(redone) == _numbers(first)  # same seeds, fresh runs: the same values, seed by seed
    assert redone["findings"][0]["run_sets"]["short"]["folder"] != first["findings"][0]["run_sets"]["short"]["folder"]


@pytest.mark.slow
def test_train_from_evaluates_a_finished_training_again_with_another_evaluation(micro_findings, tmp_path):
    """A suite whose runs differ from the micro suite's only in their evaluation (more generations per class) trains
    nothing with --train-from the micro suite's root: every run evaluates its training's checkpoints, says so, and
    the verdicts follow the numbers as before."""
    import yaml

    suite = yaml.safe_load(micro_findings["suite"].read_text())
    for spec in suite["runs"].values():
        spec["overrides"] = [*spec["overrides"], "eval.samples_per_class=6"]
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    out = tmp_path / "out"
    # the cost lines foresee it: every run to go evaluates a training the root lends, none trains
    planned = runner.invoke(app, ["findings", "--suite", str(path), "--root", str(out), "--dry-run",
                                  "--train-from", str(micro_findings["out"])])
    assert planned.exit_code == 0, planned.output
    text = " ".join(planned.output.split())
    assert text.count(" to run;") == 2 and text.count("2 to run;") == 2, planned.output
    assert text.count("2 of them evaluate another run's training") == 2, planned.output
    alone = runner.invoke(app, ["findings", "--suite", str(path), "--root", str(out), "--dry-run"])
    assert alone.exit_code == 0 and "another run's training" not in alone.output  # no lender: every run trains
    result = runner.invoke(app, ["findings", "--suite", str(path), "--root", str(out), "--workers", "1",
                                 "--threads", "1", "--no-progress", "--train-from", str(micro_findings["out"])])
    assert result.exit_code == 0, result.output
    assert "4 runs: 0 reused, 4 done now (4 of them evaluating another run's training)" in " ".join(result.output.split())
    evaluated = json.loads((out / "findings.json").read_text())
    assert {f["name"]: f["verdict"] for f in evaluated["findings"]} == {
        "shorter-runs-end-earlier": "reproduced", "shorter-runs-end-later": "not reproduced",
        "twenty-steps-learn-nothing": "reproduced"}
    summaries = [json.loads(p.read_text()) for p in out.rglob("summary.json")]
    assert len(summaries) == 4 and all(s["seconds"]["train"] == 0.0 for s in summaries)
    assert all(str(micro_findings["out"].resolve()) in s["provenance"]["trained_in"]["folder"] for s in summaries)


@pytest.mark.parametrize("args, message", [
    (["--scale", "huge"], "--scale must be quick, full or paper"),
    (["--executor", "cloud"], "unknown executor 'cloud'"),
    (["--workers", "0"], "--workers must be between 1"),
    (["--quick", "--scale", "paper"], "contradict"),
    (["no-such-finding", "--dry-run"], "unknown finding 'no-such-finding'"),
    (["--suite", "/no/such/suite.yaml"], "findings suite"),
    (["hidden-emergence", "--seeds", "a,b"], "--seeds must be report seeds separated by commas"),
    (["hidden-emergence", "--seeds", "100,999"], "--seeds 999: not a report seed"),
    (["hidden-emergence", "--seeds", "100", "--evaluate-only"], "--evaluate-only runs nothing"),
    (["hidden-emergence", "--seeds", "100", "--no-reuse"], "use one or the other"),
    (["--setup", "both"], "--setup must be fast or paper"),
    (["--train-from", ".", "--no-reuse"], "--train-from lends finished training"),
    (["--train-from", "/no/such/runs", "--dry-run"], "--train-from '/no/such/runs': no such folder"),
    (["hidden-emergence-paper-setup", "--setup", "fast", "--dry-run"], "is not a fast-setup finding"),
    (["no-such-finding", "--setup", "fast", "--dry-run"], "unknown finding 'no-such-finding'"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    result = runner.invoke(app, ["findings", "--root", str(tmp_path / "out"), *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output


def test_list_and_dry_run_name_every_finding_and_run_set_without_running(tmp_path):
    listed = runner.invoke(app, ["findings", "--list"])
    assert listed.exit_code == 0 and "commitment-hier" in listed.output and "real-data-lli" in listed.output
    dry = runner.invoke(app, ["findings", "--quick", "--dry-run", "--root", str(tmp_path / "q")])
    assert dry.exit_code == 0, dry.output
    assert "hidden-emergence" in dry.output and "not run: data-efficiency" in dry.output
    assert not list((tmp_path / "q").rglob("summary.json"))


def test_setup_chooses_the_findings_of_one_setup(tmp_path):
    """`make findings` runs the fast variant's findings (minutes a run) and `make findings-paper-setup` the paper
    setup's (hours a run on a CPU): --setup keeps only that setup's findings and run sets."""
    dry = {}
    for setup in ("fast", "paper"):
        result = runner.invoke(app, ["findings", "--setup", setup, "--dry-run", "--root", str(tmp_path / setup)])
        assert result.exit_code == 0, result.output
        dry[setup] = " ".join(result.output.split())
    assert "hidden-emergence-pap" not in dry["fast"] and "underspecified-pap" not in dry["fast"]
    assert "torus-controls" in dry["fast"] and "hierarchy-controls" in dry["fast"]
    assert "hidden-emergence-pap" in dry["paper"] and "guidance-paper" in dry["paper"]
    assert "torus-controls" not in dry["paper"] and "compose-interpolate" not in dry["paper"]
    # a fresh root without --record is timed by the records committed in the repository, and reuses none of them
    assert "min a run (median of" in dry["paper"] and "they are not reused without --record" in dry["paper"]
    assert "hidden-emergence-paper-setup: 5 to run" in dry["paper"]
    assert re.search(r"run-hours: about \d+\.\d h of wall time on \d+ workers?", dry["paper"]), dry["paper"]
    # a --record folder of one's own (e.g. a precision variant's records) is timed by the committed records too
    own = runner.invoke(app, ["findings", "--setup", "paper", "--dry-run", "--root", str(tmp_path / "own"),
                              "--record", str(tmp_path / "variant")])
    assert own.exit_code == 0, own.output
    own_dry = " ".join(own.output.split())
    assert "hidden-emergence-paper-setup: 5 to run" in own_dry and "min a run (median of" in own_dry, own_dry
    listed = runner.invoke(app, ["findings", "--list", "--setup", "paper"])
    assert listed.exit_code == 0 and "hidden-emergence-p" in listed.output and "commitment-hier" not in listed.output
    one = runner.invoke(app, ["findings", "guidance-after-transition", "--setup", "fast", "--dry-run",
                              "--root", str(tmp_path / "one")])
    assert one.exit_code == 0 and "guidance" in one.output and "torus-controls" not in one.output, one.output


@pytest.mark.slow
def test_paper_scale_on_a_cpu_predicts_the_wall_time_and_runs_nothing_without_yes(micro_findings, tmp_path):
    """The micro suite's `short` set has a paper variant (micro at 40 steps, so the prediction takes seconds): the
    finding on it alone is planned, the findings that also need `long` (no paper variant) are not, and say why."""
    result = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--scale", "paper",
                                 "--root", str(tmp_path / "paper")])
    assert result.exit_code == 0, result.output
    assert "no paper-scale run set for long" in result.output
    if "no bench/predict_run_time.py" not in result.output:  # an installed copy has no bench/
        assert "run set short: 2 runs" in result.output and "predicted wall time on this CPU" in result.output
        assert "rerun with --yes" in result.output
    assert not list((tmp_path / "paper").rglob("summary.json"))


@pytest.mark.slow
def test_evaluate_only_reads_the_finished_runs_runs_nothing_and_says_what_is_missing(micro_findings, tmp_path):
    """A suite run piecewise (hours-long runs over several sessions): `--evaluate-only` on a copy of the micro
    suite's runs with one run unfinished reads the other three, starts nothing, and leaves the seed without a run
    out of every verdict it could change."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(micro_findings["out"] / "runs", out / "runs")
    unfinished = sorted((out / "runs" / "short").glob("*/summary.json"))[0]
    unfinished.unlink()
    result = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                 "--evaluate-only", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "4 runs: 3 finished and read, 1 not finished (nothing run: --evaluate-only)" in result.output
    assert not unfinished.exists()  # nothing was run
    saved = json.loads((out / "findings.json").read_text())
    earlier = next(f for f in saved["findings"] if f["name"] == "shorter-runs-end-earlier")
    assert earlier["verdict"] == "incomplete" and len(earlier["run_sets"]["short"]["missing"]) == 1
    notes = [s["note"] for c in earlier["criteria"] for s in c["seeds"]]
    assert notes.count("no run") == len(earlier["criteria"])  # one seed per criterion
    assert "`--evaluate-only`: nothing run" in (out / "findings.md").read_text()
    refused = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                  "--evaluate-only", "--no-reuse"])
    assert refused.exit_code == 2 and "--evaluate-only reads finished runs" in refused.output


@pytest.mark.slow
def test_seeds_runs_part_of_the_suite_and_the_rest_is_incomplete_not_censored(micro_findings, tmp_path):
    """`--seeds 100` on a fresh root runs the two runs of seed 100 and leaves seed 101's for later. The censoring
    finding (a 20-step run never learns color: censored +∞ beyond step 1,000) passes on seed 100; seed 101 has no
    run, which the evaluator must not read as "never learned" (that would reproduce it): it is incomplete."""
    out = tmp_path / "out"
    result = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                 "--workers", "1", "--threads", "1", "--no-progress", "--seeds", "100",
                                 "--record", str(tmp_path / "rec")])
    assert result.exit_code == 0, result.output
    assert "4 runs: 0 reused, 2 done now, 0 failed, 2 left for later (--seeds)" in result.output, result.output
    # each run was recorded when the pool reported it done, not only after the evaluation
    assert "2 runs recorded now (2 as they finished), 0 recorded earlier, 2 not finished" in " ".join(
        result.output.split()), result.output
    # the cost line prices only the runs it starts, and says what it leaves for later
    assert "1 to run (1 more of other report seeds left for later); no finished run to time" in " ".join(
        result.output.split()), result.output
    saved = json.loads((out / "findings.json").read_text())
    never = next(f for f in saved["findings"] if f["name"] == "twenty-steps-learn-nothing")
    (criterion,) = never["criteria"]
    assert [(s["seed"], s["passed"], s["note"]) for s in criterion["seeds"]] == [(100, True, ""), (101, False, "no run")]
    assert never["verdict"] == "incomplete"
    assert "2 left for later with `--seeds`" in (out / "findings.md").read_text()
    # before the rest runs, each set says what its finished run took (measured here, never guessed)
    dry = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out), "--dry-run"])
    flat = " ".join(dry.output.split())
    assert dry.exit_code == 0 and "1 to run; " in flat and "min a run (median of 1; " in flat, dry.output
    assert "at the measured times, 2 of the runs to go take" in flat, dry.output


@pytest.mark.slow
def test_record_keeps_the_runs_without_weights_and_the_records_evaluate_to_the_same_numbers(micro_findings, tmp_path):
    """`--record DIR` after an evaluation keeps each finished run as a record (no checkpoints); `--evaluate-only
    --root DIR` then gives the same verdicts and values seed by seed, and says it read records. Recording into the
    findings root itself is refused."""
    import shutil

    out = tmp_path / "out"
    shutil.copytree(micro_findings["out"] / "runs", out / "runs")
    rec = tmp_path / "records"
    first = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                "--evaluate-only", "--no-progress", "--record", str(rec)])
    assert first.exit_code == 0, first.output
    assert "4 runs recorded now, 0 recorded earlier, 0 not finished" in " ".join(first.output.split()), first.output
    assert not list(rec.rglob("*.safetensors")) and len(list(rec.rglob("record.json"))) == 4
    again = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(rec),
                                "--evaluate-only", "--no-progress"])
    assert again.exit_code == 0, again.output
    original = json.loads((out / "findings.json").read_text())
    from_records = json.loads((rec / "findings.json").read_text())
    assert _numbers(from_records) == _numbers(original) and from_records["records"] == 4
    assert "4 of the runs read are run records" in (rec / "findings.md").read_text()
    # a later session on a fresh root with the same records: nothing to run, every run read from its record
    later = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(tmp_path / "later"),
                                "--workers", "1", "--threads", "1", "--no-progress", "--record", str(rec)])
    assert later.exit_code == 0, later.output
    flat = " ".join(later.output.split())
    assert "4 runs not finished here are recorded in" in flat and "4 runs: 4 reused, 0 done now" in flat, later.output
    assert _numbers(json.loads((tmp_path / "later" / "findings.json").read_text())) == _numbers(original)
    refused = runner.invoke(app, ["findings", "--suite", str(micro_findings["suite"]), "--root", str(out),
                                  "--evaluate-only", "--record", str(out)])
    assert refused.exit_code == 2 and "is the findings root itself" in refused.output


def test_paper_scale_prices_every_run_config_of_a_sweep_set_not_its_base(tmp_path, monkeypatch):
    """A paper set that is a sweep overriding train.steps and varying the widths is priced config by config: each
    distinct config (its runs up to their seeds) once, with the sweep's overrides and axis values, times its runs."""
    import yaml
    from rich.console import Console

    from conceptlab import cli
    from conceptlab.experiments.findings import plan
    from conceptlab.experiments.findings_spec import load_suite
    from conceptlab.experiments.loading import load_config

    sweep = tmp_path / "paper-sweep.yaml"
    sweep.write_text(yaml.safe_dump({"name": "paper-sweep", "base": "micro", "overrides": ["train.steps=40"],
                                     "axes": {"grid": {"model.widths": [[8, 16], [16, 32]]}}}))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "description": "a paper set that is a sweep",
        "runs": {"set": {"preset": "micro", "seeds": [100, 101, 102], "paper": {"sweep": str(sweep)}}},
        "findings": [{"name": "ends", "paper": "test", "claim": "c", "setup": "fast", "control": "none",
                      "reason": "a test", "criteria": [{"name": "ends", "statement": "s",
                                                        "value": {"runs": "set", "path": "final_step"},
                                                        "threshold": 1, "direction": "greater"}]}],
    }))
    p = plan(load_suite(str(suite)), None, "paper", tmp_path / "out", "runs")
    priced = []

    def fake_predict(base, overrides, steps):
        cfg = load_config(base, list(overrides))
        priced.append((cfg.train.steps, tuple(cfg.model.widths)))
        return {"training": 3600.0 * len(priced)}

    monkeypatch.setattr(cli, "_paper_predictor", lambda path: fake_predict, raising=False)
    console = Console(record=True, width=200)
    total = cli._predict_paper_scale(p, console)
    assert sorted(priced) == [(40, (8, 16)), (40, (16, 32))]  # each config once, as the sweep sets it
    assert total == 3 * 3600.0 + 3 * 7200.0  # three seeds of each
    assert "3 runs" in console.export_text()
