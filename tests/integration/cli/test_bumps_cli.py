"""The bumps pipeline end to end through the CLI on the bumps-micro preset, and its one-line hook error."""

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from conceptlab.cli import app

runner = CliRunner()


@pytest.mark.slow
def test_bumps_micro_run_end_to_end(tmp_path, figures):
    result = runner.invoke(app, ["run", "bumps-micro", "--runs-dir", str(tmp_path), "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    for name in ["config.yaml", "data.json", "summary.json", "composition.parquet", "geometry.parquet",
                 "homology.json", "composition/step_0000010.parquet", "geometry/step_0000020.parquet",
                 "figures/generation_accuracy.png", "figures/effective_dimension.png", "figures/pca_projection.png",
                 "figures/barcode.png", "figures/generations.png", "figures/loss.png", "geometry_controls.parquet",
                 "figures/controls.png"]:
        assert (run_dir / name).is_file(), name
    acc = pd.read_parquet(run_dir / "composition.parquet")
    assert len(acc) == 2 * 2 and set(acc["region"]) == {"train", "held_out"}  # checkpoints × regions
    assert acc[["x", "y", "joint"]].stack().between(0, 1).all() and (acc["run"] == run_dir.name).all()
    geo = pd.read_parquet(run_dir / "geometry.parquet")
    assert list(geo["step"]) == [10, 20] and (geo["points"] == 64).all()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["kind"] == "bumps" and summary["checkpoints"] == 2
    assert set(summary["final_accuracy"]) == {"train", "held_out"} and len(summary["betti"]) == 3
    assert summary["seconds"]["composition"] > 0 and summary["seconds"]["geometry"] > 0
    # the final checkpoint beside its controls, through the same analyses, on the same labels
    controls = pd.read_parquet(run_dir / "geometry_controls.parquet")
    assert list(controls["source"]) == ["trained", "untrained", "pixels", "encoding", "encoding_map"]
    assert (controls["step"] == 20).all() and (controls["points"] == controls["points"].iloc[0]).all()
    assert controls["additive_share"].between(0, 1 + 1e-9).all() and set(controls["torus"]) <= {0, 1}
    assert controls.set_index("source").loc["encoding", "additive_share"] == pytest.approx(1.0)  # additive by design
    assert set(summary["controls"]) == set(controls["source"])

    again = runner.invoke(app, ["resume", str(run_dir), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "summary.json").read_text())["seconds"]["composition"] == 0.0


def test_unknown_geometry_hook_fails_before_training_with_one_line(tmp_path):
    args = ["run", "bumps-micro", "eval.geometry.hook=mid.blocks.7.hook_out", "--runs-dir", str(tmp_path),
            "--no-progress", "--threads", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "mid.blocks.7.hook_out" in lines[0] and "Traceback" not in result.output
    assert not list(tmp_path.iterdir())  # refused before any work: not even a run folder


@pytest.mark.parametrize("override, message", [
    ("eval.geometry.controls=[text]", "'untrained', 'random_init', 'pixels', 'encoding' or 'encoding_map'"),
    ("eval.geometry.controls=[encoding,encoding]", "named twice"),
    ("eval.abstractions.controls=[pixels]", "eval.abstractions"),  # bumps runs no abstractions: refused
])
def test_a_control_the_study_cannot_compute_is_one_line(override, message):
    result = runner.invoke(app, ["run", "bumps-micro", override, "--dry-run"])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
    assert len([line for line in result.output.strip().splitlines() if line.startswith("error")]) == 1
