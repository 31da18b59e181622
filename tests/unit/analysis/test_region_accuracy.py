"""Generation accuracy per region across a bump-world sweep: final checkpoint per run, mean ± sd over seeds, and the
sweep-report section that prints and draws it (toy run folders, no training)."""

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from conceptlab.analysis.region_accuracy import final_region_accuracy, region_accuracy_by_axis
from conceptlab.cli import app
from conceptlab.experiments.loading import config_to_yaml, load_config
from conceptlab.store.files import write_json, write_parquet, write_text

# scope → held-out joint accuracy at the last step, per seed
HELD_OUT = {"2d": {0: 0.9, 1: 0.8}, "all": {0: 0.3, 1: 0.1}}


def toy_bump_run(root: Path, scope: str, seed: int) -> None:
    run_dir = root / f"{scope}-{seed}"
    cfg = load_config("bumps-micro", [f"data.held_out.scope={scope}", "data.held_out.kind=x_band",
                                      "data.held_out.low=3", "data.held_out.high=5",
                                      f"data.data_seed={seed}", f"train.train_seed={seed}"])
    write_text(run_dir / "config.yaml", config_to_yaml(cfg))
    rows = []
    for step in (10, 20):
        final = step == 20
        rows.append({"run": run_dir.name, "step": step, "region": "train", "x": 1.0, "y": 1.0, "joint": 1.0, "n": 8})
        acc = HELD_OUT[scope][seed] if final else 0.0
        rows.append({"run": run_dir.name, "step": step, "region": "held_out", "x": acc, "y": 1.0, "joint": acc, "n": 8})
    write_parquet(run_dir / "composition.parquet", pd.DataFrame(rows))
    write_json(run_dir / "summary.json", {"run": run_dir.name, "name": "toy", "kind": "bumps"})


def _sweep(tmp_path: Path) -> Path:
    root = tmp_path / "sweep"
    for scope in HELD_OUT:
        for seed in (0, 1):
            toy_bump_run(root / "runs", scope, seed)
    (root / "manifest.json").write_text("{}")
    return root


def test_final_accuracy_per_setting_and_region_averages_seeds(tmp_path):
    from conceptlab.store.index import open_store

    root = _sweep(tmp_path)
    with open_store(root) as store:
        final = final_region_accuracy(store.runs(), store.table("composition"))
    assert set(final["step"]) == {20} and len(final) == 8
    assert "data.held_out.scope" in final.columns and "data.data_seed" in final.columns
    summary = region_accuracy_by_axis(final).set_index(["data.held_out.scope", "region"])
    assert list(summary.index.names) == ["data.held_out.scope", "region"]  # seeds averaged, not an axis
    assert summary.loc[("2d", "held_out"), "joint_mean"] == pytest.approx(0.85)
    assert summary.loc[("all", "held_out"), "joint_mean"] == pytest.approx(0.2)
    assert summary.loc[("all", "held_out"), "joint_std"] == pytest.approx(0.1414, abs=1e-3)
    assert summary.loc[("2d", "train"), "runs"] == 2


def test_sweep_report_prints_and_draws_region_accuracy(tmp_path):
    root = _sweep(tmp_path)
    result = CliRunner().invoke(app, ["sweep-report", str(root)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "0.85 ± 0.07" in result.output and "0.20 ± 0.14" in result.output
    assert (root / "figures" / "region_accuracy.png").is_file() and (root / "region_accuracy.parquet").is_file()


def test_empty_composition_is_one_clear_error():
    with pytest.raises(ValueError, match="no generation-accuracy rows"):
        final_region_accuracy(pd.DataFrame({"run_id": []}), pd.DataFrame())
