"""What an interrupted command says, and refusals made before any work (an audit of the user-facing surface,
2026-12-07): Ctrl-C in `run` and `sweep run` names how to continue (it ended in a bare exit 130); a probe cache that
cannot be written is refused before training (it failed once the model was trained); `sweep run --dry-run` checks
its root as the run would; `--slurm` options with the local executor are refused (they were ignored); a spec's own
override of a key an axis varies is refused (the axis overruled it silently)."""

import pytest
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import ConfigError

runner = CliRunner()


@pytest.fixture(autouse=True)
def _probe_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


def _spec(path, **changes) -> str:
    spec = {"description": "test sweep", "base": "micro", "overrides": {"train.steps": 2},
            "axes": {"seeds": [0, 1]}, **changes}
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def _one_line(output: str) -> str:
    return " ".join(output.split())  # rich wraps a long line at the terminal's width


def test_ctrl_c_in_a_run_says_how_to_resume_it(tmp_path, monkeypatch):
    """Once the run wrote its config there is something to resume, and the line names the command (the folder
    quoted for the shell); before that the line says there is nothing to continue."""
    import conceptlab.experiments.runner as run_driver

    def interrupted(cfg, run_dir, **kwargs):
        run_dir.mkdir(parents=True, exist_ok=True)
        if written:
            (run_dir / "config.yaml").write_text("name: micro\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(run_driver, "run_experiment", interrupted)
    for written in (True, False):
        runs = tmp_path / f"my runs {written}"
        result = runner.invoke(app, ["run", "micro", "train.steps=2", "--runs-dir", str(runs), "--no-progress"])
        assert result.exit_code == 130, result.output
        (run_dir,) = [p for p in runs.iterdir() if not p.name.startswith(".")]
        said = _one_line(result.output)
        if written:
            assert f"conceptlab resume '{run_dir}'" in said, result.output  # quoted: a space
        else:
            assert "resume" not in said and "interrupted before" in said, result.output


def test_ctrl_c_in_a_sweep_says_the_same_command_continues_it(tmp_path, monkeypatch):
    import conceptlab.experiments.sweep as sweeps

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweeps, "run_sweep", interrupted)
    result = runner.invoke(app, ["sweep", "run", _spec(tmp_path / "s.yaml"), "--root", str(tmp_path / "out"),
                                 "--no-progress"])
    assert result.exit_code == 130, result.output
    assert "interrupted:" in result.output and "run the same command again to continue" in _one_line(result.output)


def test_a_cache_folder_that_cannot_be_written_is_refused_before_training(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(blocker / "cache"))
    result = runner.invoke(app, ["run", "micro", "train.steps=2", "--runs-dir", str(tmp_path / "runs"),
                                 "--no-progress"])
    assert result.exit_code == 2, result.output
    assert "the cache folder ($CONCEPTLAB_CACHE" in _one_line(result.output) and "not a folder" in result.output
    assert not (tmp_path / "runs").exists()


def test_an_unwritable_cache_refuses_a_local_sweep_but_not_a_kind_that_keeps_nothing_there(tmp_path, monkeypatch):
    """A local sweep trains its shared probe in its own process before the workers start: the cache is checked
    before that (a traceback once it failed); a data kind that keeps nothing in the cache (bumps) is not refused."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(blocker / "cache"))
    result = runner.invoke(app, ["sweep", "run", _spec(tmp_path / "s.yaml"), "--root", str(tmp_path / "out"),
                                 "--no-progress"])
    assert result.exit_code == 2 and "the cache folder ($CONCEPTLAB_CACHE" in _one_line(result.output), result.output
    assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["run", "bumps-micro", "--dry-run"])
    assert result.exit_code == 0, result.output


def test_sweep_dry_run_refuses_the_roots_the_run_refuses(tmp_path):
    run = tmp_path / "a-run"
    run.mkdir()
    (run / "config.yaml").write_text("name: x\n")
    (run / "summary.json").write_text("{}")
    for root, message in ((run, "is a run folder, not a sweep folder"), (tmp_path / "s.yaml" / "x", "not a folder")):
        source = _spec(tmp_path / "s.yaml")
        result = runner.invoke(app, ["sweep", "run", source, "--root", str(root), "--dry-run"])
        assert result.exit_code == 2 and message in _one_line(result.output), result.output
    result = runner.invoke(app, ["sweep", "run", _spec(tmp_path / "s.yaml"), "--root", str(tmp_path / "new"),
                                 "--dry-run"])
    assert result.exit_code == 0 and not (tmp_path / "new").exists(), result.output  # still writes nothing


def test_slurm_options_with_the_local_executor_are_refused(tmp_path):
    result = runner.invoke(app, ["sweep", "run", _spec(tmp_path / "s.yaml"), "--slurm", "partition=gpu",
                                 "--root", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert "this sweep runs on the local executor" in _one_line(result.output)


def test_a_specs_own_override_of_an_axis_key_is_refused(tmp_path):
    from conceptlab.experiments.sweep import expand

    source = _spec(tmp_path / "s.yaml", overrides={"train.steps": 2, "data.color_separation": 0.3},
                   axes={"grid": {"data.color_separation": [0.2, 0.6]}})
    with pytest.raises(ConfigError, match="the spec's override 'data.color_separation=0.3' sets "
                                          "'data.color_separation', which an axis of the sweep varies"):
        expand(source)
    seeded = _spec(tmp_path / "t.yaml", overrides={"train.train_seed": 3})  # the seeds axis sets it
    with pytest.raises(ConfigError, match="train.train_seed"):
        expand(seeded)
