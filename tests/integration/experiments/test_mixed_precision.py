"""A run whose invocations ran in different precisions says so: `train.bf16: null` follows the machine, so a run
resumed where bf16 resolves the other way mixes both. Each invocation records what it did (`trained`, `measured`),
the resume warns, and the summary's `precision` (what `runs show` and the findings report print) names the mix —
checked on a micro run whose last checkpoint is measured again, first on a machine like its own (the control: one
precision, no warning), then on one with native bf16 (simulated by the CPU check the resolution asks)."""

from __future__ import annotations

import json

from rich.console import Console
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment
from conceptlab.train import precision

STEPS = ["train.steps=20", "train.checkpoint_steps=[10,20]", "train.tensorboard=false"]
WARNING = "earlier work on this run ran in fp32, this invocation runs in bf16 autocast"


def _resume_measuring_the_last_checkpoint(cfg, run) -> tuple[dict, str]:
    (run / "eval" / "step_0000020.parquet").unlink()
    (run / "summary.json").unlink()
    console = Console(record=True, width=400)
    summary = run_experiment(cfg, run, progress=False, console=console)
    return summary, " ".join(console.export_text().split())


def test_a_run_resumed_where_bf16_resolves_the_other_way_is_warned_and_named_mixed(tmp_path, probe_cache,
                                                                                   monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    cfg, run = load_config("micro", STEPS), tmp_path / "run"
    assert cfg.train.bf16 is None and cfg.train.device == "auto"
    first = run_experiment(cfg, run, progress=False)
    assert (first["bf16"], first["precision"]) == (False, "fp32")

    again, said = _resume_measuring_the_last_checkpoint(cfg, run)  # the control: the same machine
    assert again["precision"] == "fp32" and "warning" not in said, said

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    mixed, said = _resume_measuring_the_last_checkpoint(cfg, run)
    assert WARNING in said and "its summary's precision will say so" in said, said
    assert mixed["bf16"] is True and mixed["precision"] == "mixed: trained in fp32, evaluated in bf16 autocast + fp32"
    invocations = json.loads((run / "provenance.json").read_text())["invocations"]
    assert [(i["bf16"], i["trained"], i["measured"]) for i in invocations] == [
        (False, [0, 20], 2), (False, None, 1), (True, None, 1)]

    shown = " ".join(CliRunner().invoke(app, ["runs", "show", str(run)]).output.split())
    assert "precision: mixed: trained in fp32, evaluated in bf16 autocast + fp32 (cpu, " in shown, shown
