"""The command line's noun groups: `--version`, `python -m conceptlab`, `preset ls|show`, `sweep run|status|ls`,
`runs ls|show` (with `latest`), one `report` for runs and sweeps, help text that is not broken mid-sentence, and
every old spelling: it still works, prints exactly one deprecation line naming the new spelling, and otherwise
says what the new spelling says."""

import os
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from conceptlab import __version__
from conceptlab.cli import app

# `make test` runs `--dist loadgroup`:
# the tests share one module-scoped set of micro runs, so they run on one worker (built once)
pytestmark = pytest.mark.xdist_group("cli-groups")

runner = CliRunner()
DEPRECATED = "deprecated:"
ONE_RUN_SWEEP = {
    "description": "one micro run for the CLI tests",
    "base": "micro",
    "axes": {"grid": {"data.color_separation": [0.8]}},
    "executor": {"kind": "local", "workers": 1},
}


@pytest.fixture(autouse=True)
def _probe_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Two finished micro runs under <tmp>/runs (the second newer) and a finished one-run micro sweep."""
    base = tmp_path_factory.mktemp("cli-groups")
    mp = pytest.MonkeyPatch()
    mp.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    try:
        for _ in range(2):
            done = runner.invoke(app, ["run", "micro", "--runs-dir", str(base / "runs"), "--no-progress",
                                       "--threads", "1"])
            assert done.exit_code == 0, done.output
        spec = base / "one-run.yaml"
        spec.write_text(yaml.safe_dump(ONE_RUN_SWEEP))
        done = runner.invoke(app, ["sweep", "run", str(spec), "--root", str(base / "sweep"), "--workers", "1",
                                   "--no-progress"])
        assert done.exit_code == 0, done.output
    finally:
        mp.undo()
    return base


def _out(args, **kw):
    result = runner.invoke(app, args, terminal_width=200, **kw)
    return result.exit_code, result.output


def test_version_and_python_dash_m():
    code, text = _out(["--version"])
    assert code == 0 and text.strip() == f"conceptlab {__version__}"
    proc = subprocess.run([sys.executable, "-m", "conceptlab", "--help"], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for group in ("run", "resume", "report", "preset", "runs", "sweep", "percolation"):
        assert f" {group} " in proc.stdout, (group, proc.stdout)
    for old in ("presets", "sweeps", "sweep-status", "sweep-report", "emergence-report", "controls-report"):
        assert f" {old} " not in proc.stdout, (old, proc.stdout)  # hidden: listed nowhere, still accepted


def test_help_is_not_broken_where_the_docstring_breaks():
    # the percolation docstring breaks its first paragraph after "vs dataset"; help rewraps the paragraph at the
    # terminal's width (80 columns here) instead of keeping that break
    code, text = _out(["--help"])
    assert code == 0 and "vs dataset size" in text, text


def test_preset_ls_and_show():
    code, text = _out(["preset", "ls"])
    assert code == 0 and "micro" in text and "concept-space-tiny" in text
    code, text = _out(["preset", "show", "micro", "train.steps=7"])
    assert code == 0
    body = yaml.safe_load(text)
    assert body["name"] == "micro" and body["train"]["steps"] == 7 and "eval" in body
    assert text.startswith("# ")  # the preset's description, as a YAML comment
    code, text = _out(["preset", "show", "zz-no-such-preset"])
    assert code == 2 and text.startswith("error:") and len(text.strip().splitlines()) == 1


@pytest.mark.slow
def test_runs_show_latest_and_ls(folders, monkeypatch):
    monkeypatch.chdir(folders)
    code, text = _out(["runs", "show", "latest"])
    assert code == 0 and "0002-micro" in text and "0001-micro" not in text, text
    code, text = _out(["runs", "ls", "--root", "runs"])
    assert code == 0 and "2 runs under runs" in text
    monkeypatch.chdir(folders / "sweep")  # no runs/ here
    code, text = _out(["runs", "show", "latest"])
    assert code == 2 and "no run folders under runs/" in text


@pytest.mark.slow
def test_report_of_a_run_and_of_a_sweep_writes_report_html(folders, monkeypatch):
    run = folders / "runs" / "0001-micro"
    (run / "report.html").unlink()
    code, text = _out(["report", str(run)])
    assert code == 0 and (run / "report.html").is_file(), text
    assert "learning time" in text and f"report: {run / 'report.html'}" in text
    sweep = folders / "sweep"
    (sweep / "report.html").unlink()
    code, text = _out(["report", str(sweep)])
    assert code == 0 and (sweep / "report.html").is_file(), text
    assert "concept signal" in text and (sweep / "figures" / "concept_signal.png").is_file()
    monkeypatch.chdir(folders)
    code, text = _out(["report", "latest"])
    assert code == 0 and str(folders / "runs" / "0002-micro") not in text and "0002-micro" in text
    empty = folders / "empty"
    empty.mkdir()
    code, text = _out(["report", str(empty)])
    assert code == 2 and text.startswith("error:") and len(text.strip().splitlines()) == 1


@pytest.mark.slow
def test_old_spellings_work_with_one_deprecation_line(folders):
    run, sweep, spec = folders / "runs" / "0001-micro", folders / "sweep", folders / "one-run.yaml"
    same = [  # old → new: the same output but for the one deprecation line, the same exit code
        (["presets"], ["preset", "ls"]),
        (["sweeps"], ["sweep", "ls"]),
        (["show", str(run)], ["runs", "show", str(run)]),
        (["sweep", str(spec), "--dry-run"], ["sweep", "run", str(spec), "--dry-run"]),
        (["sweep-status", str(sweep)], ["sweep", "status", str(sweep)]),
        (["runs", "ls", str(folders / "runs")], ["runs", "ls", "--root", str(folders / "runs")]),
    ]
    for old, new in same:
        old_code, old_text = _out(old)
        new_code, new_text = _out(new)
        lines = old_text.splitlines()
        notes = [l for l in lines if l.startswith(DEPRECATED)]
        assert len(notes) == 1 and f"`conceptlab {' '.join(new[:2])}" in notes[0], (old, notes)
        assert old_code == new_code == 0, (old, old_text)
        assert [l for l in lines if not l.startswith(DEPRECATED)] == new_text.splitlines(), (old, old_text)
    folded = [["sweep-report", str(sweep)], ["emergence-report", str(folders / "runs")],
              ["controls-report", str(sweep)]]  # now parts of `report`
    for old in folded:
        code, text = _out(old)
        notes = [l for l in text.splitlines() if l.startswith(DEPRECATED)]
        assert len(notes) == 1 and "use `conceptlab report`" in notes[0], (old, text)
    assert _out(folded[0])[0] == 0  # the sweep's learning-time table, as before
