"""The findings suite's compute functions on hand-written run folders, and the analytic percolation set."""

import math

import pandas as pd
import pytest

from conceptlab.experiments.finding_measures import images_to_reach, percolation_scaling
from conceptlab.experiments.findings import RunRecord


def _run(tmp_path, seed: int, image: str, n: int, images: int, accuracy: float) -> RunRecord:
    folder = tmp_path / f"{seed}-{image}-{n}-{images}"
    folder.mkdir()
    pd.DataFrame([{"step": 100, "region": "train", "joint": accuracy, "n": 16, "region_size": 10},
                  {"step": 100, "region": "unseen", "joint": accuracy, "n": 16, "region_size": 30}]
                 ).to_parquet(folder / "composition.parquet")
    config = {"data.image": image, "data.image_size": n, "data.fraction_scope": "all"}
    return RunRecord(folder.name, seed, config, {"training_images": images}, folder)


def test_images_to_reach_reads_the_crossing_across_the_dataset_sizes_per_seed_and_family(tmp_path):
    runs = [_run(tmp_path, 100, "bump", 24, k, a) for k, a in ((10, 0.2), (40, 0.5), (160, 0.7))]
    runs += [_run(tmp_path, 100, "bump+stripes", 24, k, a) for k, a in ((10, 0.7), (40, 0.8))]
    runs += [_run(tmp_path, 101, "bump", 24, k, a) for k, a in ((10, 0.1), (40, 0.2))]  # never reaches 0.6
    runs += [_run(tmp_path, 100, "bump", 8, 10, 0.9)]  # another N: not read at n = 24
    bumps = images_to_reach(runs, "bumps", 24)
    # 0.5 at 40 images, 0.7 at 160: 0.6 halfway in log size, at 80 images
    assert bumps[100] == pytest.approx(80.0)
    assert bumps[101] is None  # never reached: a criterion reads it as censored
    assert images_to_reach(runs, "bumps+stripes", 24)[100] == pytest.approx(10.0)  # already at the smallest size
    assert images_to_reach(runs, "bumps+stripes", 24)[101] is None  # seed 101 has no stripes runs
    assert images_to_reach(runs, "bumps", 16) == {100: None, 101: None}  # no run at that size


def test_percolation_scaling_gives_a_critical_size_per_n_and_an_exponent_near_2_where_lambda_c_converged():
    out = percolation_scaling(seed=0, sizes=(64, 128), trials=4)
    assert set(out["critical_size"]) == {"64", "128"}
    assert 0.04 < out["critical_fraction"]["128"] < 0.08  # λ_c ≈ 0.06 (docs/findings-history.md)
    assert 1.8 <= out["exponent"] <= 2.2
    again = percolation_scaling(seed=0, sizes=(64, 128), trials=4)
    assert again == out  # seeded
    assert math.isfinite(out["critical_size"]["64"])
