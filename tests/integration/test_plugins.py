"""Out-of-tree plug-ins end to end: a new data kind with its study (`plugins/ringworld/world.py`) and a new
intervention (`plugins/ringworld/edits.py`), named only by import path in a config and run through `conceptlab run`;
wrong paths and wrong interfaces are one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.experiments.loading import ConfigError, load_config

PLUGINS = Path(__file__).parent / "plugins"
runner = CliRunner()
RING = {
    "name": "ring",
    "data": {"kind": "ringworld.world:RingStudy", "image_size": 8, "angles": 8, "copies": 4},
    "model": {"widths": [16, 32], "blocks_per_level": 1, "mid_attention": False},
    "diffusion": {"process": "cosine", "prediction": "v", "sample_steps": 4},
    "train": {"steps": 12, "batch_size": 16, "lr": 0.002, "checkpoint_schedule": "list", "checkpoint_steps": [6, 12],
              "log_every": 6},
    "eval": {"ring": {"angles": 6}},
}


@pytest.fixture(autouse=True)
def _plugins_importable(monkeypatch, tmp_path_factory):
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


def _write(path: Path, config: dict) -> str:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return str(path)


def test_the_ring_worlds_reader_recovers_the_angle_of_ground_truth_renders():
    from ringworld.world import RingDataConfig, RingWorld, angular_error_deg, read_angle

    world = RingWorld(RingDataConfig(image_size=16))
    theta = torch.linspace(-3.0, 3.0, 25)
    assert angular_error_deg(read_angle(world.render(theta)), theta).max() < 2.0
    blank = torch.zeros(3, 1, 16, 16)
    assert torch.isfinite(read_angle(blank)).all()


def test_a_new_data_kind_runs_end_to_end_through_the_cli_and_its_table_is_queryable(tmp_path, figures):
    config = _write(tmp_path / "ring.yaml", RING)
    result = runner.invoke(app, ["run", config, "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                                 "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    table = pd.read_parquet(run_dir / "ring.parquet")
    assert list(table.columns[:3]) == ["run", "step", "angle"] and sorted(table["step"].unique()) == [6, 12]
    assert len(table) == 2 * 6 and table["error_deg"].between(0, 180).all()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["kind"] == "ringworld.world:RingStudy" and summary["final_step"] == 12
    assert 0.0 <= summary["final_hit_rate"] <= 1.0
    assert {"figures/ring_hits.png", "figures/loss.png"} <= set(summary["figures"])
    assert all((run_dir / f).is_file() for f in summary["figures"])
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["eval"]["ring"]["angles"] == 6

    # the store finds the plug-in's table without being told about it
    result = runner.invoke(app, ["runs", "query", "select count(*) as n, max(step) as last from ring",
                                 "--root", str(tmp_path / "runs"), "--csv"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "12,12"

    # resuming a finished run measures nothing again
    result = runner.invoke(app, ["resume", str(run_dir), "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    again = json.loads((run_dir / "summary.json").read_text())
    assert again["seconds"]["ring"] == 0.0 and again["final_hit_rate"] == summary["final_hit_rate"]


def test_a_new_intervention_named_by_import_path_is_evaluated_beside_the_built_in_ones(tmp_path):
    config = _write(tmp_path / "edit.yaml", {
        "extends": "micro",
        "eval": {"interventions": {"samples": 2, "over_prompting": None, "linear": None, "patching": None,
                                   "custom": [{"path": "ringworld.edits:Exaggerate", "options": {"factor": 2.0}}]}},
    })
    result = runner.invoke(app, ["run", config, "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                                 "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    table = pd.read_parquet(run_dir / "interventions.parquet")
    assert set(table["intervention"]) == {"naive", "exaggerate"} and len(table) == 2 * 2
    assert set(table[table["intervention"] == "exaggerate"]["variant"]) == {"x2"}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary["emergence"]["targets"]["11"]["emergence_step"]) == {"naive", "exaggerate"}
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())["eval"]["interventions"]["custom"]
    assert saved == [{"path": "ringworld.edits:Exaggerate", "options": {"factor": 2.0}}]


def test_configs_without_plug_ins_dump_as_before_so_run_ids_stay():
    assert "custom" not in load_config("hidden-emergence-tiny").model_dump()["eval"]["interventions"]


@pytest.mark.parametrize("data, message", [
    ({"kind": "noringworld.world:RingStudy"}, "cannot import noringworld.world"),
    ({"kind": "ringworld.world:Nope"}, "ringworld.world has no attribute 'Nope'"),
    ({"kind": "ringworld.world:RingWorld"}, "cannot instantiate RingWorld without arguments"),
    ({"kind": "ringworld.world:read_angle"}, "lacks kind, data_config, eval_fields, exclusive_sections"),
    ({"kind": "ringworld.world:RingStudy", "radius": 2.0}, "data.radius"),
])
def test_a_bad_data_kind_plug_in_is_one_line(data, message):
    with pytest.raises(ConfigError) as err:
        load_config("micro", [f"data={json.dumps(data)}"])
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("custom, message", [
    ({"path": "ringworld.edits:Nope"}, "ringworld.edits has no attribute 'Nope'"),
    ({"path": "ringworld.edits:Exaggerate", "options": {"scale": 2}}, "cannot be built with options"),
    ({"path": "ringworld.world:RingEvalConfig"}, "lacks name, variants"),
    ({"path": "not a path"}, "is not an import path"),
])
def test_a_bad_intervention_plug_in_is_one_line(custom, message):
    with pytest.raises(ConfigError) as err:
        load_config("micro", [f"eval.interventions={json.dumps({'custom': [custom]})}"])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_plug_in_errors_reach_the_cli_as_one_line_and_exit_2(tmp_path):
    result = runner.invoke(app, ["run", "micro", "data.kind=nowhere.at.all:Study", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 2 and "cannot import nowhere.at.all" in result.output
    assert "Traceback" not in result.output and not list(tmp_path.iterdir())


class ProtocolOnlyStudy:
    """A plug-in study with the `Study` protocol's methods only (no `StudyBase`), delegating to the ring world's:
    the optional parts (`sample_step_settings`, `config_warnings`, `memory_needs`…) are optional."""

    def __init__(self):
        from ringworld.world import RingStudy

        self._ring = RingStudy()
        self.kind = f"{__name__}:ProtocolOnlyStudy"
        self.data_config = self._ring.data_config
        self.eval_fields = self._ring.eval_fields
        self.exclusive_sections = self._ring.exclusive_sections

    def __getattr__(self, name):
        if name in ("complete_config", "build_data", "check", "headline", "prepare_shared", "evaluation"):
            return getattr(self._ring, name)
        raise AttributeError(name)


@pytest.mark.parametrize("process", [["diffusion.process=cosine", "diffusion.prediction=v"],
                                     ["diffusion.process=ddpm", "diffusion.prediction=eps", "diffusion.ddpm_steps=100"]])
def test_a_protocol_only_study_loads_and_is_prepared(process):
    from conceptlab.experiments.runner import prepare_run

    data = {**RING["data"], "kind": f"{__name__}:ProtocolOnlyStudy"}
    cfg = load_config("micro", [f"data={json.dumps(data)}", "model.widths=[16,32]", "model.blocks_per_level=1",
                                "model.mid_attention=false", "diffusion.sample_steps=4", *process])
    assert prepare_run(cfg).model is not None
