"""The command line end to end: a micro run, show, resume, and one-line errors with exit code 2."""

import json
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from conceptlab.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _probe_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


def test_presets_lists_the_builtin_presets():
    result = runner.invoke(app, ["preset", "ls"])
    assert result.exit_code == 0
    assert "concept-space-tiny" in result.output and "paper" in result.output


def test_dry_run_prints_the_resolved_config():
    result = runner.invoke(app, ["run", "micro", "train.steps=3", "--dry-run"])
    assert result.exit_code == 0 and "steps: 3" in result.output


def test_an_unknown_vector_figure_format_is_refused_before_any_work(tmp_path, monkeypatch):
    """CONCEPTLAB_VECTOR_FIGURES is read when a figure is saved, at a run's end: a typo is refused first, by every
    command (one line, exit 2) and by `prepare_run` (what a run, a sweep's runs and `--dry-run` check first)."""
    from conceptlab.experiments.loading import ConfigError, load_config
    from conceptlab.experiments.runner import prepare_run

    monkeypatch.setenv("CONCEPTLAB_VECTOR_FIGURES", "pdf,eps")
    result = runner.invoke(app, ["run", "micro", "--runs-dir", str(tmp_path), "--no-progress"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: CONCEPTLAB_VECTOR_FIGURES='pdf,eps': unknown format 'eps'"), result.output
    assert list(tmp_path.iterdir()) == []  # nothing started
    with pytest.raises(ConfigError, match="unknown format 'eps'"):
        prepare_run(load_config("micro"))


def test_figures_none_draws_no_figure_and_another_value_is_refused_before_any_work(tmp_path, monkeypatch):
    """CONCEPTLAB_FIGURES=none (the test suite's setting): the run finishes with no figure drawn or listed; a value
    that is neither `none` nor `all` is refused like a bad vector format."""
    from conceptlab.experiments.loading import ConfigError, load_config
    from conceptlab.experiments.runner import prepare_run

    monkeypatch.setenv("CONCEPTLAB_FIGURES", "some")
    result = runner.invoke(app, ["run", "micro", "--runs-dir", str(tmp_path / "refused"), "--no-progress"])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.startswith("error: CONCEPTLAB_FIGURES='some': choose all"), result.output
    assert not (tmp_path / "refused").exists()
    with pytest.raises(ConfigError, match="CONCEPTLAB_FIGURES='some'"):
        prepare_run(load_config("micro"))
    monkeypatch.setenv("CONCEPTLAB_FIGURES", "none")
    result = runner.invoke(app, ["run", "micro", "train.steps=4", "train.checkpoint_steps=[2,4]", "--runs-dir",
                                 str(tmp_path / "runs"), "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    assert json.loads((run / "summary.json").read_text())["figures"] == [] and not list(run.rglob("*.png"))
    assert "figures:" not in result.output and (run / "report.html").is_file()


@pytest.mark.slow
def test_micro_run_end_to_end_then_show_and_resume(tmp_path, figures):
    result = runner.invoke(app, ["run", "micro", "--runs-dir", str(tmp_path), "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert run_dir.name == "0001-micro"
    for name in ["config.yaml", "data.json", "train_log.jsonl", "summary.json", "concept_space.parquet",
                 "learning_times.parquet", "figures/concept_space.png", "figures/accuracy.png", "figures/loss.png",
                 "checkpoints/step_0000010.safetensors", "checkpoints/step_0000020.json"]:
        assert (run_dir / name).is_file(), name
    table = pd.read_parquet(run_dir / "concept_space.parquet")
    assert len(table) == 2 * 4 * 2  # checkpoints × classes × concepts
    assert set(table["split"]) == {"train", "held_out"} and table["accuracy"].between(0, 1).all()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["concept_signal"]["size"] > 0 and summary["checkpoints"] == 2
    data = json.loads((run_dir / "data.json").read_text())
    assert data["held_out_classes"] == ["11"]

    shown = runner.invoke(app, ["runs", "show", str(run_dir)])
    assert shown.exit_code == 0 and "learning time" in shown.output

    again = runner.invoke(app, ["resume", str(run_dir), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert "resuming" not in again.output  # finished: nothing retrained
    log_steps = [json.loads(line)["step"] for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    assert log_steps == sorted(set(log_steps))  # no duplicated log lines

    second = runner.invoke(app, ["run", "micro", "--runs-dir", str(tmp_path), "--dry-run"])
    assert second.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["0001-micro"]  # dry run: nothing


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "no-such-preset"], "unknown preset 'no-such-preset'"),
        (["run", "micro", "train.no_such_key=1"], "unknown config key 'train.no_such_key'"),
        (["run", "micro", "data.color_separation=-0.2"], "bad value for data.color_separation: -0.2"),
        (["run", "micro", "data.held_out_classes=[00,01,10,11]"], "removes every training class"),
        (["runs", "show", "/nonexistent/run"], "/nonexistent/run: no such run folder"),
        (["resume", "/nonexistent/run"], "not a run folder"),
    ],
)
def test_bad_input_gives_one_line_and_exit_code_2(args, message, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "conceptlab.cli", *args, "--runs-dir", str(tmp_path)]
                          if args[0] == "run" else [sys.executable, "-m", "conceptlab.cli", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    output = (proc.stdout + proc.stderr).strip()
    assert message in output
    assert "Traceback" not in output and len(output.splitlines()) == 1


def test_report_and_show_on_the_wrong_kind_of_folder_say_what_it_is(tmp_path, monkeypatch):
    """An audit's findings (2026-12-07): `report` on a sweep whose manifest is not a manifest gave a traceback, on a
    shipped sweep not yet run exit 1 with a FileNotFoundError; `runs show` on a sweep folder said 'run unfinished?
    resume it'. Each is now one line and exit 2, naming what the folder is."""
    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "s"
    sweep.mkdir()
    (sweep / "sweep.yaml").write_text("base: micro\n")
    cases = [
        (["report", "hidden-emergence-tiny"], "the sweep has not run there yet"),
        (["runs", "show", str(sweep)], "is a sweep folder, not a run"),
        (["runs", "show", str(tmp_path)], "is not a run folder (no config.yaml)"),
    ]
    for manifest, message in [("[]", "is not a sweep manifest (no 'runs' list)"),
                              ('{"runs": [{"run_id": "../x"}]}', "runs[0] must be {run_id, values}")]:
        (sweep / "manifest.json").write_text(manifest)
        result = runner.invoke(app, ["report", str(sweep)])
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split()), result.output
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.output.split()) and "Traceback" not in result.output, (args, result.output)
