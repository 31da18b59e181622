"""The shapes3d study (`studies.abstractions`, latent abstractions) piece by piece on the micro preset's untrained model: table shapes
and columns, the τ grids, commitment rows, the classifier's level mapping and one-line errors."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import build_run_model, run_experiment
from conceptlab.hooks import HookNameError
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies import abstractions as stage
from conceptlab.studies import build_data
from conceptlab.report.abstraction_figures import plot_abstractions


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("abstractions")


@pytest.fixture(autouse=True)
def _one_thread_private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def micro():
    cfg = load_config("abstractions-micro", ["eval.abstractions.taus=[0.0,0.3,1.0]"])
    dgp = build_data(cfg.data)
    torch.manual_seed(0)
    model = build_run_model(cfg, dgp).eval()
    return cfg, dgp, model


def test_measurement_tables_follow_the_tau_grids(micro):
    cfg, dgp, model = micro
    a = cfg.eval.abstractions
    mi = stage.mutual_information_table(a, dgp, model)
    assert len(mi) == 2 * (a.mi_points + 1)
    for name, g in mi.groupby("attribute"):
        assert np.allclose(g["tau"], np.linspace(0, 1, a.mi_points + 1))
        assert g["value"].iloc[0] == 0.0 and g["reference"].iloc[0] == pytest.approx(math.log(len(dgp.levels[name])))
    read = stage.attribute_reader(_tiny_classifier(cfg, dgp), dgp)
    bound = stage.mutual_information_bound_table(a, dgp, model)
    assert len(bound) == 2 * (a.mi_points + 1) and (bound["value"] <= bound["reference"] + 1e-9).all()
    fe = stage.forking_entropy_table(a, dgp, model, read)
    lp = stage.linear_probe_table(a, dgp, model)
    for table, ref in [(fe, {"wall_hue": 1.0, "shape": 1.0}), (lp, {"wall_hue": 1 / 3, "shape": 1 / 4})]:
        assert len(table) == 2 * 3
        for name, g in table.groupby("attribute"):
            assert g["tau"].tolist() == [0.0, 0.3, 1.0]
            assert g["value"].between(0, 1).all() and g["reference"].iloc[0] == pytest.approx(ref[name])
    for table in (mi, bound, fe, lp):
        assert list(table.columns) == stage.COLUMNS[2:]
        # σ and log-SNR of each τ: σ_max at τ = 0 (noise), σ_min at τ = 1 (data)
        assert table[table["tau"] == 0.0]["sigma"].iloc[0] == pytest.approx(cfg.diffusion.sigma_max)
        assert table[table["tau"] == 1.0]["sigma"].iloc[0] == pytest.approx(cfg.diffusion.sigma_min)
        assert np.allclose(table["logsnr"], -2 * np.log(table["sigma"]))

    curves = pd.concat([mi, bound, fe, lp], ignore_index=True)
    commit = stage.commitment(curves, 0.5, model.process)
    assert set(commit["measure"]) == {*stage.MEASURES, "mutual_information_final"}
    assert len(commit) == 5 * 2 and commit["primary"].sum() == 4 * 2
    timed = commit.dropna(subset=["commitment_tau"])
    assert timed["commitment_tau"].between(0, 1).all()
    assert np.allclose(timed["commitment_sigma"], model.process.sigma(torch.tensor(1 - timed["commitment_tau"].values)))

    fig = plot_abstractions(curves, commit, title="micro")
    assert len([ax for ax in fig.axes if ax.get_xlabel().startswith("generation time")]) == 4


def _tiny_classifier(cfg, dgp):
    return stage.load_classifier(cfg, dgp)[0]  # micro: classifier_min_accuracy 0


def test_reader_gives_positions_among_the_chosen_levels(micro):
    cfg, dgp, _ = micro
    assert dict(stage.classifier_config(cfg, dgp).levels) == {"wall_hue": (0, 3, 6)}
    read = stage.attribute_reader(_tiny_classifier(cfg, dgp), dgp)(dgp.all_images())
    assert read["wall_hue"].max() <= 2 and read["shape"].max() <= 3 and read["shape"].shape == (len(dgp.classes),)


def test_classifier_below_min_accuracy_is_one_clear_error(micro):
    cfg, dgp, _ = micro
    strict = cfg.model_copy(deep=True)
    strict.eval.abstractions.classifier_min_accuracy = 0.99
    with pytest.raises(ValueError, match=r"classifier held-out accuracy 0\.\d+ .* below eval\.abstractions\.classifier_min_accuracy 0\.99") as err:
        stage.load_classifier(strict, dgp)
    assert "\n" not in str(err.value)


def test_unknown_probe_hook_fails_before_training(tmp_path):
    cfg = load_config("abstractions-micro", ["eval.abstractions.probe_hook=mid.blocks.7.hook_out"])
    with pytest.raises(HookNameError, match="no hook point 'mid.blocks.7.hook_out'"):
        run_experiment(cfg, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "checkpoints").exists() and not (tmp_path / "run" / "train_log.jsonl").exists()


def test_footprint_and_probe_rows(micro):
    _, dgp, _ = micro
    footprint = stage.pixel_footprint(dgp, bases=4)
    assert footprint["wall_hue"] > footprint["shape"] > 0
    signal = stage.attribute_signal(dgp, bases=4)
    assert signal["wall_hue"] > signal["shape"] > 0


def test_signal_orders_wall_hue_object_hue_shape_where_the_footprint_does_not():
    from conceptlab.data.shapes3d_world import Shapes3DDataConfig

    dgp = build_data(Shapes3DDataConfig(attributes=["wall_hue", "object_hue", "shape"], image_size=16,
                                       levels={"wall_hue": [0, 2, 4, 6, 8], "object_hue": [1, 3, 5, 7, 9]}))
    signal = stage.attribute_signal(dgp, bases=8)
    assert signal["wall_hue"] > signal["object_hue"] > signal["shape"] > 0
    footprint = stage.pixel_footprint(dgp, bases=8)  # a shape change touches more pixels (shading), each slightly
    assert footprint["shape"] > footprint["object_hue"]
    times = pd.Series({"wall_hue": 0.2, "object_hue": 0.3, "shape": 0.4})
    assert stage._order_spearman(signal, times) == 1.0 and stage._order_spearman(footprint, times) == 0.5
    assert stage._order_spearman(signal, pd.Series({"wall_hue": 0.2, "object_hue": float("nan"), "shape": 0.2})) is None
    # an attribute that never commits: the order of the other two says nothing about it (was ρ = 1 before)
    assert stage._order_spearman(signal, pd.Series({"wall_hue": 0.2, "object_hue": 0.3, "shape": float("nan")})) is None
    rows = stage.probe_rows(30, 12, seed=0)
    assert len(rows) == 30 and torch.bincount(rows, minlength=12).min() >= 2
    assert len(set(stage.probe_rows(5, 12, seed=0).tolist())) == 5


def test_a_pruned_run_summarised_again_keeps_every_evaluated_checkpoint(tmp_path):
    """Retention (`train.keep_checkpoints: evaluated`) deletes the checkpoints no measurement used; summarising the
    finished run again (a resume) must pick every k-th checkpoint among those the run wrote, not among those left —
    picked among 1, 3, 5, every 2nd would be 1, 5, and step 3 would drop out of the tables."""
    cfg = load_config("abstractions-micro", ["train.steps=5", "train.checkpoint_schedule=list",
                                             "train.checkpoint_steps=[1,2,3,4,5]", "eval.abstractions.every=2",
                                             "train.keep_checkpoints=evaluated", "eval.abstractions.taus=[0.0,1.0]"])
    first = run_experiment(cfg, tmp_path / "run", progress=False)
    assert sorted(s for s, _ in RunFolder(tmp_path / "run").list_checkpoints()) == [1, 3, 5]
    again = run_experiment(cfg, tmp_path / "run", progress=False)
    assert first["evaluated_steps"] == again["evaluated_steps"] == [1, 3, 5]
    assert sorted(pd.read_parquet(tmp_path / "run" / "commitment.parquet")["step"].unique()) == [1, 3, 5]
