"""Latent-abstractions evaluation end to end through the CLI on the micro preset: tables, summary, figure, resuming
piece by piece, and one-line errors."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.studies.abstractions import COLUMNS, MEASURES

runner = CliRunner()


@pytest.fixture(autouse=True)
def _probe_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


@pytest.mark.slow
def test_micro_run_writes_tables_summary_and_figure_then_resumes_one_piece(tmp_path, figures):
    result = runner.invoke(app, ["run", "abstractions-micro", "--runs-dir", str(tmp_path), "--no-progress",
                                 "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    table = pd.read_parquet(run_dir / "abstractions.parquet")
    assert list(table.columns) == [*COLUMNS, "source"] and set(table["run"]) == {run_dir.name}
    assert set(table["source"]) == {"trained", "untrained", "pixels"}  # the controls, at the final checkpoint
    assert set(table[table["source"] == "pixels"]["measure"]) == {"linear_probe"}
    assert set(table[table["source"] == "untrained"]["measure"]) == set(MEASURES)
    table = table[table["source"] == "trained"]
    assert set(table["measure"]) == set(MEASURES) and set(table["attribute"]) == {"wall_hue", "shape"}
    assert set(table[~table["measure"].str.startswith("mutual_information")]["tau"]) == {0.0, 0.5, 1.0}
    assert (table["step"] == 20).all()
    commit = pd.read_parquet(run_dir / "commitment.parquet")
    assert list(commit.columns[:5]) == ["run", "step", "measure", "attribute", "commitment_tau"]
    trained = commit[commit["source"] == "trained"]
    assert len(trained) == (len(MEASURES) + 1) * 2  # + mutual_information_final
    # the untrained network: every measure (+ its final MI); pixels: the linear probe only
    assert len(commit[commit["source"] == "untrained"]) == (len(MEASURES) + 1) * 2
    assert len(commit[commit["source"] == "pixels"]) == 2
    for attribute, mi in summary_mi(run_dir).items():  # the bound cannot exceed H(V) (it may be < 0 untrained)
        assert mi["mutual_information_bound"] <= mi["H(V)"] + 1e-9, (attribute, mi)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["kind"] == "shapes3d" and summary["final_step"] == 20
    assert set(summary["commitment_tau"]) == set(MEASURES)
    assert set(summary["controls"]) == {"trained", "untrained", "pixels", "trained_departs_from_every_control"}
    assert set(summary["commitment_order_claimed"]) == set(MEASURES)
    assert set(summary["controls"]["pixels"]["departs"]) == {"linear_probe"}
    # every departure paired on the units the two curves share (each piece keeps them beside its table)
    for source in ("untrained", "pixels"):
        assert all(all(per.values()) for per in summary["controls"][source]["departure_paired"].values()), source
    pieces = run_dir / "abstractions" / "step_0000020"
    assert {p.name for p in pieces.glob("*.safetensors")} == {
        f"{prefix}{m}.safetensors" for m in MEASURES for prefix in ("", "untrained__")} | {
        "pixels__linear_probe.safetensors"}
    assert set(summary["conditional_accuracy"]) == {"wall_hue", "shape"}
    assert summary["largest_footprint"] == "wall_hue" and summary["signal_order"] == ["wall_hue", "shape"]
    assert set(summary["seconds"]) >= {"train", "classifier", "conditional", *MEASURES, "total"}
    assert summary["figures"] == ["figures/abstractions.png", "figures/loss.png"]  # the driver adds every run's loss
    assert all((run_dir / f).is_file() for f in summary["figures"])
    assert "commitment_order.linear_probe" in result.output

    # resume after losing one piece: only that piece is measured again
    kept = {p.name: p.stat().st_mtime_ns for p in pieces.iterdir() if not p.name.startswith("forking_entropy.")}
    (pieces / "forking_entropy.parquet").unlink()
    (run_dir / "summary.json").unlink()
    result = runner.invoke(app, ["resume", str(run_dir), "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    assert (pieces / "forking_entropy.parquet").is_file()
    assert {p.name: p.stat().st_mtime_ns for p in pieces.iterdir() if p.name in kept} == kept
    again = json.loads((run_dir / "summary.json").read_text())
    assert again["commitment_tau"] == summary["commitment_tau"]  # seeded: the same curves again
    assert again["controls"] == summary["controls"]  # and the same units, so the same paired departures
    assert again["seconds"]["mutual_information"] == 0 and again["seconds"]["forking_entropy"] > 0
    # the seconds of both invocations are kept
    assert summary["invocations"] == 1 and again["invocations"] == 2
    assert again["seconds_all_invocations"]["train"] == pytest.approx(summary["seconds"]["train"], abs=0.02)
    assert again["seconds_all_invocations"]["total"] == pytest.approx(
        summary["seconds"]["total"] + again["seconds"]["total"], abs=0.02)


def summary_mi(run_dir):
    return json.loads((run_dir / "summary.json").read_text())["mi_at_data"]


def test_unknown_probe_hook_is_one_line_before_training(tmp_path):
    result = runner.invoke(app, ["run", "abstractions-micro", "eval.abstractions.probe_hook=mid.blocks.9.hook_out",
                                 "--runs-dir", str(tmp_path), "--no-progress", "--threads", "1"])
    assert result.exit_code == 2, result.output
    assert "no hook point 'mid.blocks.9.hook_out'" in result.output and "Traceback" not in result.output
    assert not list(tmp_path.glob("*/checkpoints"))


@pytest.mark.parametrize("override, message", [
    ("eval.abstractions.taus=[0.0,1.2]", "[0, 1]"),
    ("eval.abstractions.forks=1", "forks"),
    ("data.attributes=[wall_hue,colour]", "data.attributes.1"),
    # a control this kind of study cannot compute: one line naming the ones it can
    ("eval.abstractions.controls=[encoding]", "'untrained', 'random_init' or 'pixels'"),
    ("eval.abstractions.controls=[pixels,pixels]", "twice"),
    ("eval.geometry.controls=[untrained]", "eval.geometry"),  # shapes3d runs no geometry: the section is refused
])
def test_bad_abstractions_config_is_one_line(override, message):
    result = runner.invoke(app, ["run", "abstractions-micro", override, "--dry-run"])
    assert result.exit_code == 2 and message in result.output
