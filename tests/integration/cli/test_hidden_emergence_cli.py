"""Hidden-emergence evaluation end to end through the CLI on the micro preset, and its one-line errors."""

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.store.files import write_json

runner = CliRunner()
INTERVENTIONS = [
    "eval.interventions.samples=2",
    "eval.interventions.over_prompting.scales=[0.5]",
    "eval.interventions.linear.alphas=[1.0]",
    "diffusion.cfg_dropout=0.2",
    "eval.interventions.cfg.scales=[2.0]",
]


@pytest.fixture(autouse=True)
def _probe_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


@pytest.mark.slow
def test_micro_run_with_every_intervention_then_a_foreign_checkpoint_is_refused(tmp_path, figures):
    args = ["run", "micro", *INTERVENTIONS, "--runs-dir", str(tmp_path), "--no-progress", "--threads", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    table = pd.read_parquet(run_dir / "interventions.parquet")
    # 2 checkpoints × (naive 1 + over-prompting 1 + linear 1 + patching 1 + cfg 1) variants for held-out 11
    assert len(table) == 2 * 5 and set(table["target"]) == {"11"}
    assert set(table["intervention"]) == {"naive", "over_prompting", "linear", "patching", "cfg"}
    assert table["score"].between(0, 1).all() and (table["n"] == 2).all()
    best = pd.read_parquet(run_dir / "emergence.parquet")
    assert len(best) == 2 * 5
    summary = json.loads((run_dir / "summary.json").read_text())
    block = summary["emergence"]["targets"]["11"]
    assert set(block["emergence_step"]) == {"naive", "over_prompting", "linear", "patching", "cfg"}
    assert "turn" not in block or block["turn"]["step"] in (None, 10.0, 20.0)
    assert summary["seconds"]["interventions"] > 0
    for name in ["intervention_scores.png", "intervention_samples.png"]:
        assert (run_dir / "figures" / name).is_file(), name

    # a checkpoint trained with another config must be refused with one line, not evaluated
    for path in (run_dir / "interventions").glob("*.parquet"):
        path.unlink()
    sidecar = run_dir / "checkpoints" / "step_0000020.json"
    meta = json.loads(sidecar.read_text())
    write_json(sidecar, {**meta, "config_hash": "0123456789abcdef"})
    proc = subprocess.run([sys.executable, "-m", "conceptlab.cli", "resume", str(run_dir), "--no-progress"],
                          capture_output=True, text=True, timeout=300)
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, output
    assert "trained with a different config" in output and "Traceback" not in output


@pytest.mark.parametrize(
    "override, message",
    [
        ("eval.interventions.over_prompting.scales=[]", "eval.interventions.over_prompting.scales"),
        ("eval.interventions.linear.alphas=[]", "eval.interventions.linear.alphas"),
        ("eval.interventions.linear.boost=[shape]", "not one of data.concepts"),
        ("eval.interventions.cfg.scales=[1.0]", "cfg_dropout > 0"),
        ("eval.interventions.targets=[111]", "not a class code"),
    ],
)
def test_bad_intervention_config_is_one_clear_error(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config("micro", [override])


def test_unknown_embedding_site_fails_before_training_with_one_line(tmp_path):
    args = [sys.executable, "-m", "conceptlab.cli", "run", "micro", "eval.interventions.linear.sites=[down.7.hook_concept]",
            "--runs-dir", str(tmp_path), "--no-progress", "--threads", "1"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2, output
    assert "no concept embedding site 'down.7.hook_concept'" in output and "Traceback" not in output
    assert not list(tmp_path.iterdir())  # refused before any work: not even a run folder
