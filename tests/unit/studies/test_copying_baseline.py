"""The copying model: the nearest trained label's image at every evaluated label, scored like a generation."""

import pytest
import torch

from conceptlab.data.bump_world import BumpWorld
from conceptlab.experiments.loading import load_config
from conceptlab.studies.factorization import copying_accuracy, nearest_training_labels


def _world(low: float, high: float, tolerance: float = 1.0):
    cfg = load_config("interpolate-lesion-tiny", [f"data.held_out.low={low}", f"data.held_out.high={high}",
                                                  f"eval.composition.tolerance={tolerance}",
                                                  "eval.composition.labels_per_region=1000"])
    return cfg, BumpWorld(cfg.data)


def test_nearest_training_label_is_across_the_band_edge():
    cfg, dgp = _world(9.0, 13.0)
    held = dgp.held_out_labels
    near = nearest_training_labels(dgp, held)
    assert not bool((near[:, None, :] == held[None]).all(dim=2).any())  # never a held-out label
    assert torch.equal(near[:, 1], held[:, 1])  # the band is in x only: y is copied exactly
    assert bool(((near[:, 0] < 9.0) | (near[:, 0] > 13.0)).all())
    assert torch.equal(nearest_training_labels(dgp, dgp.train_2d_labels), dgp.train_2d_labels)


@pytest.mark.parametrize("low, high, expected", [(11.0, 12.0, 1.0), (10.0, 12.0, 1.0), (9.0, 13.0, 0.5),
                                                 (8.0, 14.0, 2 / 6)])
def test_copying_scores_what_the_tolerance_grants_at_each_gap_width(low, high, expected):
    """With a tolerance of one lattice step, copying reaches the columns next to the band's edges only."""
    cfg, dgp = _world(low, high)
    table = copying_accuracy(cfg, dgp).set_index("region")
    assert table.loc["train", "joint"] == pytest.approx(1.0)  # a trained label copies itself
    assert table.loc["held_out", "joint"] == pytest.approx(expected, abs=1e-9)
    assert table.loc["held_out", "y"] == pytest.approx(1.0)


def test_copying_never_scores_under_a_half_step_tolerance():
    cfg, dgp = _world(11.0, 12.0, tolerance=0.5)
    table = copying_accuracy(cfg, dgp).set_index("region")
    assert table.loc["held_out", "joint"] == 0.0 and table.loc["train", "joint"] == pytest.approx(1.0)


def test_count_peaks_adds_single_and_joint_single_and_leaves_run_ids_alone():
    from conceptlab.experiments.loading import config_to_yaml
    from conceptlab.studies.factorization import accuracy_rows, region_labels

    assert "count_peaks" not in config_to_yaml(load_config("compose-vs-interpolate-tiny"))  # default: old run ids
    cfg = load_config("compose-vs-interpolate-tiny", ["eval.composition.count_peaks=true"])
    dgp = BumpWorld(cfg.data)
    regions = region_labels(dgp, 64, 0)
    labels = torch.cat(list(regions.values()))
    images = dgp.render(labels)
    far = labels.clone()
    far[:, 0] = torch.where(labels[:, 0] < 11, labels[:, 0] + 8, labels[:, 0] - 8)  # a second cross 8 columns away
    images[:32] = images[:32] + 0.8 * dgp.render(far[:32])
    table = accuracy_rows(cfg, dgp, regions, images, 0).set_index("region")
    assert table.loc["train", "joint"] == pytest.approx(1.0)  # the brightest cross is still at its label
    assert table.loc["train", "single"] == pytest.approx(1 - 32 / len(regions["train"]))
    assert table.loc["train", "joint_single"] == pytest.approx(table.loc["train", "single"])
    assert table.loc["held_out", "single"] == pytest.approx(1.0)
