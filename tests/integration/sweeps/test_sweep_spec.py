"""Sweep specs: expansion into a manifest with stable ids, resume skips complete runs, one-line errors."""

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.executors import ExecutorError, RunOutcome, make_executor
from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.experiments.sweep import expand, pending_runs, run_sweep, sweep_names, write_manifest
from conceptlab.experiments.sweep_state import read_manifest, sweep_status

runner = CliRunner()


def write_spec(path: Path, **changes) -> str:
    spec = {
        "description": "test sweep",
        "base": "micro",
        "overrides": {"train.steps": 12},
        "axes": {
            "grid": {"data.color_separation": [0.2, 0.6]},
            "zip": [{"data.size_separation": [0.1, 0.3], "model.dropout": [0.0, 0.2]}],
            "seeds": {"data_seed": [0, 1], "train_seed": [5]},
        },
    }
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def test_expansion_crosses_grid_zip_and_seeds_with_stable_ids(tmp_path):
    source = write_spec(tmp_path / "s.yaml")
    sweep = expand(source, root=tmp_path / "out")
    assert len(sweep.runs) == 2 * 2 * 2  # grid 2 × zip group 2 × data seeds 2 (train seed 1)
    assert sweep.axes == ["data.color_separation", "data.size_separation", "model.dropout", "data.data_seed",
                          "train.train_seed"]
    combos = {(r.values["data.color_separation"], r.values["data.size_separation"], r.values["model.dropout"],
               r.values["data.data_seed"]) for r in sweep.runs}
    assert combos == {(c, s, d, seed) for c in (0.2, 0.6) for s, d in ((0.1, 0.0), (0.3, 0.2)) for seed in (0, 1)}
    for run in sweep.runs:
        cfg = run.config
        assert (cfg.data.color_separation, cfg.data.size_separation, cfg.model.dropout) == (
            run.values["data.color_separation"], run.values["data.size_separation"], run.values["model.dropout"])
        assert cfg.data.data_seed == run.values["data.data_seed"] and cfg.train.train_seed == 5
        assert cfg.train.steps == 12 and cfg.name == "s"
        assert re.fullmatch(r"[0-9a-f]{16}", run.run_id)
    ids = [r.run_id for r in sweep.runs]
    assert len(set(ids)) == len(ids)
    # Stable: same spec elsewhere, another root, or another order of expansion → same ids.
    assert [r.run_id for r in expand(source, root=tmp_path / "elsewhere").runs] == ids
    # The id is the config's: a command-line override that changes the config changes every id.
    changed = [r.run_id for r in expand(source, ["train.lr=0.01"], root=tmp_path / "out").runs]
    assert not set(changed) & set(ids)


def test_seeds_as_one_list_set_both_seeds(tmp_path):
    source = write_spec(tmp_path / "s.yaml", axes={"seeds": [3, 4, 7]})
    runs = expand(source).runs
    assert [(r.config.data.data_seed, r.config.train.train_seed) for r in runs] == [(3, 3), (4, 4), (7, 7)]


def test_manifest_and_configs_are_written_and_complete_runs_are_skipped(tmp_path):
    sweep = expand(write_spec(tmp_path / "s.yaml"), root=tmp_path / "out")
    write_manifest(sweep)
    manifest = read_manifest(sweep.root)
    assert [r["run_id"] for r in manifest["runs"]] == [r.run_id for r in sweep.runs]
    assert manifest["runs"][0]["values"] == sweep.runs[0].values
    for run in sweep.runs:
        saved = load_config(str(sweep.root / run.run_id / "config.yaml"))
        assert saved.model_dump() == run.config.model_dump()
    assert (sweep.root / "sweep.yaml").is_file()
    # Three runs complete: a rerun hands the other five to the executor, and nothing else.
    for run in sweep.runs[:3]:
        (sweep.root / run.run_id / "summary.json").write_text("{}")
    assert [r.run_id for r in pending_runs(sweep)] == [r.run_id for r in sweep.runs[3:]]

    class Recording:
        name = "recording"
        tasks = []

        def run(self, tasks, progress=True, console=None):
            self.tasks.extend(tasks)
            return [RunOutcome(t.run_id, "failed" if i == 0 else "done", "boom") for i, t in enumerate(tasks)]

    executor = Recording()
    result = run_sweep(sweep, executor, progress=False)
    assert [t.run_id for t in executor.tasks] == [r.run_id for r in sweep.runs[3:]]
    assert all(t.run_dir == sweep.root / t.run_id for t in executor.tasks)
    assert result["runs"] == 8 and result["skipped"] == 3 and result["done"] == 4
    assert result["failed"] == {sweep.runs[3].run_id: "boom"}
    states = {row["run_id"]: row["state"] for row in sweep_status(sweep.root)}
    assert [states[r.run_id] for r in sweep.runs] == ["done"] * 3 + ["pending"] * 5


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"axes": {"grid": {"data.colour_separation": [0.1, 0.2]}}},
         "axis data.colour_separation: unknown config key 'data.colour_separation'"),
        ({"axes": {"grid": {"data.color_separation": []}}}, "axis 'data.color_separation' is empty"),
        ({"axes": {"seeds": []}}, "axis 'seeds' is empty"),
        ({"axes": {"seeds": {"model_seed": [1]}}}, "seeds axis key 'model_seed' unknown"),
        ({"axes": {"zip": [{"data.color_separation": [0.1, 0.2], "data.size_separation": [0.1]}]}},
         "zip group lists differ in length"),
        ({"axes": {"grid": {"data.color_separation": [0.1, 2.0]}}}, "bad value for data.color_separation: 2.0"),
        ({"axes": {"grid": {"train.train_seed": [1]}, "seeds": [1, 2]}}, "'train.train_seed' is set by two axes"),
        ({"base": "no-such-preset"}, "base: unknown preset 'no-such-preset'"),
        ({"executor": {"kind": "cloud"}}, "bad value at executor.kind"),
        ({"axis": {}}, "unknown key 'axis'"),
        ({"settings_seeds": [1, 7]}, "seeds [1] were used to choose this sweep's settings (settings_seeds)"),
    ],
)
def test_bad_specs_fail_with_one_line_naming_the_problem(tmp_path, changes, message):
    source = write_spec(tmp_path / "bad.yaml", **changes)
    with pytest.raises(ConfigError, match=re.escape(message)):
        expand(source)
    result = runner.invoke(app, ["sweep", "run", source, "--dry-run"])
    assert result.exit_code == 2, result.output
    assert message in result.output and len(result.output.strip().splitlines()) == 1


def test_override_of_a_swept_key_and_unknown_sweep_are_errors(tmp_path):
    source = write_spec(tmp_path / "s.yaml")
    result = runner.invoke(app, ["sweep", "run", source, "data.color_separation=0.5"])
    assert result.exit_code == 2 and "which the sweep varies" in result.output
    result = runner.invoke(app, ["sweep", "run", "no-such-sweep"])
    assert result.exit_code == 2 and "unknown sweep 'no-such-sweep'" in result.output


def test_slurm_executor_without_slurm_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no sinfo / sbatch here
    with pytest.raises(ExecutorError, match="SLURM is not reachable"):
        make_executor("slurm", tmp_path)
    result = runner.invoke(app, ["sweep", "run", write_spec(tmp_path / "s.yaml"), "--executor", "slurm", "--root",
                                 str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "slurm executor: SLURM is not reachable (`sbatch` not found on PATH)" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_shipped_sweeps_expand():
    assert {"concept-signal-sweep-tiny", "concept-signal-sweep-paper"} <= set(sweep_names())
    tiny = expand("concept-signal-sweep-tiny")
    assert len(tiny.runs) == 8 and tiny.spec.executor.kind == "local"
    assert sorted({r.config.data.color_separation for r in tiny.runs}) == [0.3, 0.5, 0.7, 0.9]
    paper = expand("concept-signal-sweep-paper")
    assert len(paper.runs) == 100 and paper.spec.executor.kind == "slurm"
    assert paper.spec.executor.slurm.gpus_per_task == 1
    assert json.loads(json.dumps(paper.runs[0].values))  # axis values are JSON-able for the manifest


def test_a_sweep_folder_reexpands_to_the_same_runs_in_place(tmp_path):
    sweep = expand(write_spec(tmp_path / "s.yaml"), root=tmp_path / "elsewhere" / "mine")
    write_manifest(sweep)
    again = expand(str(sweep.root))
    assert again.root == sweep.root and again.spec.name == "s"
    assert [r.run_id for r in again.runs] == [r.run_id for r in sweep.runs]


def test_a_sweep_folder_reruns_with_the_base_and_overrides_it_records(tmp_path):
    """Rerun from its folder, a sweep made with command-line overrides and a base YAML beside its spec expands to
    the same runs (it took the spec's settings, and could not find the base); other overrides there are refused in
    one line."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "mybase.yaml").write_text("extends: micro\ntrain: {steps: 4}\n")
    sweep = expand(write_spec(specs / "s.yaml", base="mybase.yaml"), ["train.lr=0.001"], root=tmp_path / "out")
    write_manifest(sweep)
    again = expand(str(sweep.root))
    assert [r.run_id for r in again.runs] == [r.run_id for r in sweep.runs]
    assert (again.runs[0].config.train.lr, again.runs[0].config.train.steps) == (0.001, 12)
    assert [r.run_id for r in expand(str(sweep.root), ["train.lr=1e-3"]).runs] == [r.run_id for r in sweep.runs]
    result = runner.invoke(app, ["sweep", "run", str(sweep.root), "train.lr=0.003", "--dry-run"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "holds the runs of overrides 'train.lr=0.001', not 'train.lr=0.003'" in result.output
    write_manifest(again)
    assert read_manifest(sweep.root)["command_line_overrides"] == ["train.lr=0.001"]
    # the spec run into the same folder with other overrides is refused too (it would train new runs beside the old)
    with pytest.raises(ConfigError, match="holds the runs of overrides 'train.lr=0.001', not 'train.lr=0.003'"):
        write_manifest(expand(str(specs / "s.yaml"), ["train.lr=0.003"], root=sweep.root))
    write_manifest(expand(str(specs / "s.yaml"), ["train.lr=1e-3"], root=sweep.root))  # the same setting
    source = write_spec(tmp_path / "p.yaml")  # a manifest without the record: the spec and the overrides given
    old = expand(source, ["train.lr=0.001"], root=tmp_path / "old")
    write_manifest(old)
    manifest = read_manifest(old.root)
    del manifest["command_line_overrides"]
    (old.root / "manifest.json").write_text(json.dumps(manifest))
    assert [r.run_id for r in expand(str(old.root), ["train.lr=0.001"]).runs] == [r.run_id for r in old.runs]
    assert [r.run_id for r in expand(str(old.root)).runs] == [r.run_id for r in expand(source).runs]


def test_a_sweep_folder_holds_one_sweep_and_a_run_folder_holds_none(tmp_path):
    """Another sweep run into a sweep's folder took it over: its manifest and spec copy replaced, the first sweep's
    runs left beside the new ones for the folder's report to pool (an audit, 2026-12-07). Now refused, as a sweep
    run into a run folder is; the same sweep edited (same name) still reruns in place."""
    first = expand(write_spec(tmp_path / "a.yaml"), root=tmp_path / "out")
    write_manifest(first)
    other = expand(write_spec(tmp_path / "b.yaml", overrides={"train.steps": 6}), root=first.root)
    with pytest.raises(ConfigError, match="holds the runs of sweep 'a' .*one sweep"):
        write_manifest(other)
    assert read_manifest(first.root)["sweep"] == "a"
    write_manifest(expand(write_spec(tmp_path / "a.yaml", overrides={"train.steps": 6}), root=first.root))  # edited
    run = first.runs[0].directory(first.root)
    (run / "status.json").write_text("{}")  # a run's own file beside its config
    with pytest.raises(ConfigError, match="is a run folder, not a sweep folder"):
        write_manifest(expand(write_spec(tmp_path / "c.yaml"), root=run))
    project = tmp_path / "project"  # a folder that merely holds a config.yaml of the user's is a fine root
    project.mkdir()
    (project / "config.yaml").write_text("base: micro\n")
    write_manifest(expand(write_spec(tmp_path / "c.yaml"), root=project))


def test_a_mapping_in_the_overrides_changes_only_the_keys_it_names(tmp_path):
    """`overrides: {train: {steps: 12}}` is `train.steps: 12` (it reset the rest of the train section to its
    defaults); a mapping that sets a swept key is refused like a dotted override."""
    nested = expand(write_spec(tmp_path / "n.yaml", overrides={"train": {"steps": 12}}))
    dotted = expand(write_spec(tmp_path / "d.yaml"))
    assert [r.run_id for r in nested.runs] == [r.run_id for r in dotted.runs]
    assert nested.runs[0].config.train.lr == load_config("micro").train.lr
    with pytest.raises(ConfigError, match="override 'data={color_separation: 0.5}' sets 'data.color_separation'"):
        expand(write_spec(tmp_path / "s.yaml"), ["data={color_separation: 0.5}"])


def test_a_torn_summary_is_a_row_of_the_sweep_report_that_says_so_not_a_traceback(tmp_path, monkeypatch):
    """All runs handled, a finished run's summary.json torn: `sweep run` exits with its runs' status (it ended in a
    ValueError traceback, then in an unwritten report.html with a warning); the report is written, its row for that
    run reads "done (summary unreadable)" and a line names the file, the other runs reported as usual."""
    import conceptlab.experiments.executors as executors
    from conceptlab.report.html import UNREADABLE

    source = write_spec(tmp_path / "s.yaml", axes={"seeds": [0, 1, 2]})
    sweep = expand(source, root=tmp_path / "out")
    write_manifest(sweep)
    torn = sweep.root / sweep.runs[0].run_id / "summary.json"
    torn.write_text('{"learning')
    outcomes = {"state": "failed"}

    class Recording:
        def run(self, tasks, progress=True, console=None):
            return [RunOutcome(t.run_id, outcomes["state"] if i == 0 else "done", "boom") for i, t in enumerate(tasks)]

    monkeypatch.setattr(executors, "make_executor", lambda *args, **kwargs: Recording())
    report = sweep.root / "report.html"
    for state, code in (("failed", 1), ("done", 0)):
        outcomes["state"] = state
        report.unlink(missing_ok=True)
        result = runner.invoke(app, ["sweep", "run", source, "--root", str(sweep.root), "--no-progress"])
        assert result.exit_code == code, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert "report.html not written" not in result.output, result.output
        assert (state == "done") == ("0 failed" in result.output), result.output
        page = report.read_text()
        assert f"<td>{UNREADABLE}</td>" in page and f"{torn} is not valid JSON" in page
    assert run_sweep(sweep, Recording(), progress=False)["report_error"] is None


def test_slurm_options_from_the_command_line_override_the_spec(tmp_path):
    from conceptlab.experiments.executors import with_slurm_options

    plan = expand(write_spec(tmp_path / "s.yaml"))
    options = with_slurm_options(plan.spec.executor, ["partition=gpu", "time_min=240", "gpus_per_task=1"])
    assert (options.slurm.partition, options.slurm.time_min, options.slurm.gpus_per_task) == ("gpu", 240, 1)
    assert plan.spec.executor.slurm.partition is None  # the spec itself is untouched
    with pytest.raises(ConfigError, match="unknown slurm option 'gpu'"):
        with_slurm_options(plan.spec.executor, ["gpu=1"])
    with pytest.raises(ConfigError, match="bad slurm option time_min"):
        with_slurm_options(plan.spec.executor, ["time_min=0"])
    result = runner.invoke(app, ["sweep", "run", write_spec(tmp_path / "t.yaml"), "--slurm", "mem=4", "--dry-run"])
    assert result.exit_code == 2 and "unknown slurm option 'mem'" in result.output
