"""The command line's noun groups: `--version`, `python -m conceptlab`, `preset ls|show`, `sweep run|status|ls`,
`runs ls|show` (with `latest`), one `report` for runs and sweeps, help text that is not broken mid-sentence, and
every old spelling: it still works, prints exactly one deprecation line naming the new spelling, and otherwise
says what the new spelling says."""

import os
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from conceptlab import __version__
from conceptlab.cli import app
from conceptlab.experiments.loading import config_to_yaml, load_config
from conceptlab.store.files import write_json, write_parquet

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
def test_old_spellings_work_with_one_deprecation_line(folders, tmp_path):
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
    # now parts of `report`, each on a folder of its kind of run: the old spelling prints exactly its part of what
    # `report` prints. `report` on a sweep then writes report.html and says so (one last line), and puts a blank line
    # before the controls part; on a folder of runs that is not a sweep it writes no page
    emergence, controls = _emergence_runs(tmp_path / "emergence"), _controls_sweep(tmp_path / "controls")
    folded = [("sweep-report", sweep, [], [f"report: {sweep / 'report.html'}"]),
              ("emergence-report", emergence, [], []),
              ("controls-report", controls, [""], [f"report: {controls / 'report.html'}"])]
    for old, folder, before, after in folded:
        old_code, old_text = _out([old, str(folder)])
        new_code, new_text = _out(["report", str(folder)])
        lines = old_text.splitlines()
        notes = [l for l in lines if l.startswith(DEPRECATED)]
        assert len(notes) == 1 and "use `conceptlab report`" in notes[0], (old, old_text)
        assert old_code == new_code == 0, (old, old_text, new_text)
        part = [l for l in lines if not l.startswith(DEPRECATED)]
        assert len(part) > 2 and [*before, *part, *after] == new_text.splitlines(), (old, old_text, new_text)


def _emergence_runs(folder):
    """Two finished hidden-emergence runs written by hand (as tests/unit/experiments/test_emergence_report.py does):
    what the emergence report reads, without training."""
    for seed, (naive, over) in {0: (250.0, 200.0), 1: (None, 175.0)}.items():
        run = folder / f"run{seed}"
        run.mkdir(parents=True)
        cfg = load_config("micro", [f"train.train_seed={seed}", f"data.data_seed={seed}"])
        (run / "config.yaml").write_text(config_to_yaml(cfg))
        write_parquet(run / "emergence.parquet", pd.DataFrame(
            [{"target": "11", "intervention": name, "step": s, "variant": "v",
              "score": float(at is not None and s >= at), "hit_rate": 0.0, "valid_fraction": 1.0, "n": 24}
             for name, at in (("naive", naive), ("over_prompting", over)) for s in (50, 100, 150, 200, 250, 300)]))
        write_json(run / "summary.json", {"emergence": {"threshold": 0.5, "targets": {"11": {
            "emergence_step": {"naive": naive, "over_prompting": over},
            "final_score": {"naive": 1.0 if naive else 0.0, "over_prompting": 1.0},
            "memorization": {"start": 50.0, "end": 75.0, "read_as": "01"}, "turn": {"step": 150.0, "angle": 90.0},
            "capability_gap": None if naive is None else naive - over}}}})
    return folder


def _controls_sweep(root):
    """A finished sweep declaring a controls block, written by hand (as tests/unit/experiments/test_controls_report.py
    does): two report seeds, a trained and an untrained measure each, one claim."""
    root.mkdir(parents=True)
    claim = {"name": "beats-untrained", "statement": "more additive than at initialisation",
             "measure": "additive_share", "control": "untrained", "direction": "greater", "margin": 0.1}
    spec = {"name": "toy", "base": "micro", "axes": {"seeds": [100, 101]}, "settings_seeds": [0],
            "controls": {"sources": ["trained", "untrained"], "measures": ["additive_share"], "claims": [claim]}}
    (root / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    runs = []
    for seed, (trained, untrained) in {100: (0.9, 0.4), 101: (0.85, 0.5)}.items():
        run = root / f"run{seed}"
        run.mkdir()
        cfg = load_config("micro", [f"train.train_seed={seed}", f"data.data_seed={seed}"])
        (run / "config.yaml").write_text(config_to_yaml(cfg))
        write_json(run / "summary.json", {"controls": {"trained": {"additive_share": trained},
                                                       "untrained": {"additive_share": untrained}}})
        runs.append({"run_id": run.name, "values": {"seed": seed}})
    write_json(root / "manifest.json", {"sweep": "toy", "runs": runs})
    return root
