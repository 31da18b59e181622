"""The bumps study (`studies.factorization`) through the run driver's evaluation: accuracy rows per region, geometry rows per checkpoint, resumability, one-line hook errors."""

import json

import pandas as pd
import pytest
import torch

from conceptlab.analysis.geometry import as_grid, chord_tests
from conceptlab.experiments.loading import validate
from conceptlab.experiments.runner import build_run_model, evaluate_run
from conceptlab.hooks import HookNameError
from conceptlab.store.files import read_json, read_tensors
from conceptlab.studies import build_data, factorization
from conceptlab.train.checkpoints import prefixed, save_checkpoint

SMALL = {
    "data": {"kind": "bumps", "image": "sos", "image_size": 8, "border": 2,
             "held_out": {"kind": "x_band", "low": 5, "high": 6, "scope": "2d"}},
    "model": {"widths": [8, 16], "blocks_per_level": 1, "norm_groups": 4, "attention_heads": 2,
              "prompt_encoding": "sinusoidal", "prompt_frequencies": 2},
    "diffusion": {"process": "ddpm", "ddpm_steps": 20, "sample_steps": 2},
    "eval": {"composition": {"labels_per_region": 10}, "geometry": {"labels": 16, "homology_points": 30,
                                                                     "homology_landmarks": None}},
}


def _setup(tmp_path, overrides=None, steps=(5, 10)):
    cfg = validate({**SMALL, **(overrides or {})})
    dgp = build_data(cfg.data)
    torch.manual_seed(0)
    model = build_run_model(cfg, dgp)
    for step in steps:
        save_checkpoint(tmp_path / "checkpoints", step, prefixed("model.", model.state_dict()),
                        {"config_hash": cfg.training_hash()})
    return cfg, dgp, model


def _perfect_sampler(dgp):
    """A model.sample stand-in that returns the ground-truth render of each prompt's label."""
    def sample(prompts, steps=50, generator=None, guidance_scale=0.0, null_prompt=None):
        return dgp.render(prompts.double())
    return sample


def test_ground_truth_generations_score_one_and_geometry_rows_exist(tmp_path, monkeypatch, figures):
    cfg, dgp, model = _setup(tmp_path)
    monkeypatch.setattr(model, "sample", _perfect_sampler(dgp))
    summary, seconds = evaluate_run(cfg, tmp_path, dgp, model, progress=False)
    acc = pd.read_parquet(tmp_path / "composition.parquet")
    assert list(acc.columns[:3]) == ["run", "step", "region"]
    assert set(acc["region"]) == {"train", "held_out"} and sorted(acc["step"].unique()) == [5, 10]
    assert (acc[["x", "y", "joint"]] == 1.0).all().all()
    assert acc.set_index("region")["n"].to_dict() == {"train": 10, "held_out": 8}  # x = 5.5 only: 8 labels
    assert summary["final_accuracy"]["held_out"] == {"x": 1.0, "y": 1.0, "joint": 1.0, "n": 8}

    geo = pd.read_parquet(tmp_path / "geometry.parquet")
    assert len(geo) == 2 and geo["run"].iloc[0] == tmp_path.name
    assert (geo["hook"] == cfg.eval.geometry.hook).all() and (geo["points"] == 16).all()
    assert (geo["effective_dimension"] >= 1).all() and geo["explained_variance_top4"].between(0, 1.0001).all()
    assert [f"eigenvalue_{i}" for i in range(1, 16)] == [c for c in geo.columns if c.startswith("eigenvalue_")]
    ed = summary["effective_dimension"]
    assert ed["first_step"] == 5 and ed["max"] >= ed["final"] and len(summary["eigenvalues_final"]) == 15
    assert len(summary["betti"]) == 3 and set(summary["chord_tests"]) >= {"orthogonality", "parallelism"}
    assert summary["chord_reference"]["clifford"]["orthogonality"] == pytest.approx(0.0, abs=1e-6)
    for name in summary["figures"]:
        assert (tmp_path / name).is_file(), name
    assert {"figures/generation_accuracy.png", "figures/effective_dimension.png", "figures/pca_projection.png",
            "figures/barcode.png", "figures/generations.png"} <= set(summary["figures"])
    json.dumps(summary)  # JSON-able
    assert read_json(tmp_path / "homology.json")["homology"]["betti"] == summary["betti"]

    # a rerun evaluates nothing again
    again, seconds = evaluate_run(cfg, tmp_path, dgp, model, progress=False)
    assert seconds["composition"] == 0.0 and seconds["geometry"] == 0.0
    assert again["final_accuracy"] == summary["final_accuracy"]


def test_torus_accuracy_wraps_and_every_skips_checkpoints(tmp_path, monkeypatch):
    data = {"kind": "bumps", "image": "bump", "image_size": 8, "periodic": True}
    cfg, dgp, model = _setup(tmp_path, {"data": data, "eval": {"composition": {"every": 2, "labels_per_region": 64},
                                                                "geometry": {"every": 2, "homology": False}}},
                                 steps=(5, 10, 15, 20))
    monkeypatch.setattr(model, "sample", _perfect_sampler(dgp))
    summary, _ = evaluate_run(cfg, tmp_path, dgp, model, progress=False)
    # every=2 over 5, 10, 15, 20: the first, every 2nd after it (15) and always the last (20), never 10
    acc = pd.read_parquet(tmp_path / "composition.parquet")
    assert list(acc["step"]) == [5, 15, 20] and list(acc["region"]) == ["train"] * 3 and (acc["joint"] == 1.0).all()
    geo = pd.read_parquet(tmp_path / "geometry.parquet")
    assert list(geo["step"]) == [5, 15, 20]
    assert "betti" not in summary
    # the summary's chord tests are those of the last checkpoint's cloud (to the summary's 4 decimals),
    # and orthogonality is a mean |cos|: within [0, 1]
    cloud = read_tensors(tmp_path / "geometry" / "step_0000020.safetensors")
    ortho = summary["chord_tests"]["orthogonality"]
    assert 0.0 <= ortho <= 1.0 and ortho == pytest.approx(
        chord_tests(as_grid(cloud["points"], cloud["labels"]), periodic=True)["orthogonality"], abs=1e-4)


def test_grid_sublattice_keeps_a_full_grid():
    labels = torch.cartesian_prod(torch.arange(10.0) + 0.5, torch.arange(10.0) + 0.5)
    sub = factorization.grid_sublattice(labels, 30)
    assert len(sub) == 25 and len(sub[:, 0].unique()) == 5 and len(sub[:, 1].unique()) == 5
    assert factorization.grid_sublattice(labels, 100).shape == labels.shape


def test_unknown_hook_is_one_clear_error():
    cfg = validate({**SMALL, "eval": {"geometry": {"hook": "mid.blocks.9.hook_out"}}})
    model = build_run_model(cfg, build_data(cfg.data))
    with pytest.raises(HookNameError) as err:
        factorization.STUDY.check(cfg, build_data(cfg.data), model)
    assert "mid.blocks.9.hook_out" in str(err.value) and "\n" not in str(err.value)


def test_sample_steps_that_do_not_divide_the_chain_are_refused_at_load():
    with pytest.raises(ValueError, match="eval.composition.sample_steps=3 must divide diffusion.ddpm_steps"):
        validate({**SMALL, "eval": {"composition": {"sample_steps": 3}}})


def test_refine_grid_inserts_labels_between_neighbours_and_wraps_on_a_torus():
    lattice = torch.cartesian_prod(torch.arange(4.0) * 2, torch.arange(3.0) * 3)  # x 0, 2, 4, 6; y 0, 3, 6
    flat = factorization.refine_grid(lattice, 2)
    assert flat[:, 0].unique().tolist() == [0, 1, 2, 3, 4, 5, 6]  # nothing past the last value
    assert flat[:, 1].unique().tolist() == [0, 1.5, 3, 4.5, 6] and len(flat) == 35
    torus = factorization.refine_grid(lattice, 2, period=8.0)  # x wraps 6 → 8 ≡ 0: 7 inserted
    assert torus[:, 0].unique().tolist() == [0, 1, 2, 3, 4, 5, 6, 7]
    assert torus[:, 1].unique().tolist() == [0, 1.5, 3, 4.5, 6, 7]  # y: 6 → 8 ≡ 0 gives 7 (0..6 is not the period)
    assert factorization.refine_grid(lattice, 3, period=8.0)[:, 0].unique().numel() == 12
    assert torch.equal(torus[:, 0], torus[:, 0].sort(stable=True).values)  # x-major, like grid_labels
    assert factorization.refine_grid(lattice, 1) is lattice
    with pytest.raises(ValueError, match="density"):
        factorization.refine_grid(lattice, 0)


def test_homology_over_training_adds_betti_numbers_per_checkpoint_on_the_refined_grid(tmp_path, monkeypatch, figures):
    data = {"kind": "bumps", "image": "bump", "image_size": 8, "periodic": True}
    geometry = {"labels": 256, "label_density": 2, "homology_over_training": True, "homology_points": 256,
                "homology_landmarks": 60, "homology_dims": 4, "betti_rule": "hybrid"}
    cfg, dgp, model = _setup(tmp_path, {"data": data, "eval": {"composition": {"labels_per_region": 8},
                                                                "geometry": geometry}})
    monkeypatch.setattr(model, "sample", _perfect_sampler(dgp))
    summary, _ = evaluate_run(cfg, tmp_path, dgp, model, progress=False)
    geo = pd.read_parquet(tmp_path / "geometry.parquet")
    assert (geo["points"] == 256).all()  # the 8×8 lattice refined to 16×16
    assert {"betti_0", "betti_1", "betti_2", "h1_bar_1", "h1_bar_3", "h2_bar_1"} <= set(geo.columns)
    assert geo["h1_bar_1"].between(0, 1).all() and (geo["h1_bar_1"] >= geo["h1_bar_2"]).all()
    assert sorted(summary["betti_by_step"]) == [5, 10]
    assert summary["betti_by_step"][10] == summary["betti"]  # the final row and the run's topology agree
    assert "figures/effective_dimension.png" in summary["figures"]
    cloud = read_tensors(tmp_path / "geometry" / "step_0000010.safetensors")
    assert len(cloud["labels"][:, 0].unique()) == 16


def test_a_refined_grid_over_the_labels_cap_is_refused_before_training():
    data = {"kind": "bumps", "image": "bump", "image_size": 8, "periodic": True}
    cfg = validate({**SMALL, "data": data, "eval": {"geometry": {"labels": 100, "label_density": 2}}})
    model = build_run_model(cfg, build_data(cfg.data))
    with pytest.raises(ValueError, match="reads 256 labels") as err:
        factorization.STUDY.check(cfg, build_data(cfg.data), model)
    assert "eval.geometry.labels=256" in str(err.value) and "\n" not in str(err.value)
    fine = validate({**SMALL, "data": data, "eval": {"geometry": {"labels": 256, "label_density": 2}}})
    factorization.STUDY.check(fine, build_data(fine.data), model)
