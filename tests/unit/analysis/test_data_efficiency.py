"""Data efficiency: size to reach 60% accuracy (log-interpolated) and its N-scaling on synthetic tables with known answers."""

import math

import numpy as np
import pandas as pd
import pytest

from conceptlab.analysis.data_efficiency import scaling_fit, size_to_reach, threshold_crossing

TRUE = {"bumps": lambda n: 3.0 * n**2, "bumps+stripes": lambda n: 5.0 * n}  # S*(N): the paper's N² vs N


def synthetic_runs(ns=(8, 16, 32, 64), seeds=2) -> pd.DataFrame:
    """accuracy = 0.6 + 0.25·ln(S/S*), linear in log size, so the log-interpolated crossing is exactly S*;
    two seeds at ±0.03 that average out."""
    rows = []
    for family, s_star in TRUE.items():
        for n in ns:
            for size in np.geomspace(4, 4 * 2**16, 17):  # factor-2 grid that never hits S* exactly
                base = 0.6 + 0.25 * math.log(size / s_star(n))
                for seed in range(seeds):
                    acc = float(np.clip(base + (0.03 if seed else -0.03), 0.0, 1.0))
                    rows.append({"family": family, "N": n, "dataset_size": size, "accuracy": acc, "seed": seed})
    return pd.DataFrame(rows)


def test_size_to_reach_recovers_the_crossing_exactly():
    sizes = size_to_reach(synthetic_runs(), target=0.6)
    assert len(sizes) == 8 and not sizes["censored"].any()
    for row in sizes.itertuples():
        assert row.size_to_reach == pytest.approx(TRUE[row.family](row.N), rel=1e-9)


def test_scaling_fit_gives_n_squared_for_bumps_and_n_with_stripes():
    fit = scaling_fit(size_to_reach(synthetic_runs())).set_index("family")
    assert fit.loc["bumps", "exponent"] == pytest.approx(2.0, abs=1e-9)
    assert fit.loc["bumps+stripes", "exponent"] == pytest.approx(1.0, abs=1e-9)
    assert fit.loc["bumps", "prefactor"] == pytest.approx(3.0, rel=1e-9)
    assert fit.loc["bumps+stripes", "prefactor"] == pytest.approx(5.0, rel=1e-9)
    assert (fit["r2"] > 0.999999).all() and (fit["points"] == 4).all()


def test_other_targets_move_the_crossing_as_expected():
    sizes = size_to_reach(synthetic_runs(), target=0.7)  # 0.7 = 0.6 + 0.25·ln(S/S*) → S = S*·e^0.4
    row = sizes[(sizes["family"] == "bumps") & (sizes["N"] == 16)].iloc[0]
    assert row["size_to_reach"] == pytest.approx(3.0 * 256 * math.exp(0.4), rel=1e-9)


def test_first_crossing_unreached_and_censored():
    assert threshold_crossing(np.array([1.0, 10.0, 100.0]), np.array([0.1, 0.5, 0.7]), 0.6) == pytest.approx(
        10 ** 1.5, rel=1e-12)
    # a non-monotone curve: the first crossing counts
    assert threshold_crossing(np.array([1.0, 10.0, 100.0]), np.array([0.6, 0.2, 0.9]), 0.6) == 1.0
    assert math.isnan(threshold_crossing(np.array([1.0, 10.0]), np.array([0.1, 0.5]), 0.6))
    runs = pd.DataFrame({"family": ["a"] * 4, "N": [8, 8, 16, 16], "dataset_size": [10, 20, 10, 20],
                         "accuracy": [0.7, 0.9, 0.1, 0.2]})
    sizes = size_to_reach(runs).set_index("N")
    assert sizes.loc[8, "censored"] and sizes.loc[8, "size_to_reach"] == 10
    assert not sizes.loc[16, "censored"] and math.isnan(sizes.loc[16, "size_to_reach"])
    fit = scaling_fit(sizes.reset_index())
    assert fit["points"][0] == 0 and math.isnan(fit["exponent"][0])


def test_bad_input():
    runs = synthetic_runs(ns=(8,), seeds=1)
    with pytest.raises(ValueError, match="target"):
        size_to_reach(runs, target=0.0)
    with pytest.raises(ValueError, match="columns"):
        size_to_reach(runs.drop(columns="family"))
    with pytest.raises(ValueError, match="dataset_size"):
        size_to_reach(runs.assign(dataset_size=0))
    with pytest.raises(ValueError, match="empty"):
        size_to_reach(runs.iloc[:0])
    with pytest.raises(ValueError, match="increasing"):
        threshold_crossing(np.array([2.0, 1.0]), np.array([0.0, 1.0]), 0.5)


def _toy_efficiency_sweep(root):
    """Bumps need N²/4 images to reach 60%, bumps + stripes 4N: accuracy rises linearly in log size to 1."""
    from conceptlab.experiments.loading import config_to_yaml, load_config
    from conceptlab.store.files import write_json, write_parquet, write_text

    for n in (8, 16):
        for family, border in (("bump", 0), ("bump+stripes", 2)):
            for fraction in (0.125, 0.25, 0.5, 1.0):
                cfg = load_config("data-efficiency-tiny", [f"data.image_size={n}", f"data.fraction={fraction}",
                                                           f"data.image={family}", f"data.border={border}"])
                run = root / "runs" / f"{family}-{n}-{fraction}"
                write_text(run / "config.yaml", config_to_yaml(cfg))
                size = fraction * (n + 2 * border) ** 2
                needed = n * n / 4 if family == "bump" else 4 * n
                accuracy = float(np.clip(0.6 + 0.4 * np.log2(size / needed), 0.0, 1.0))
                rows = [{"run": run.name, "step": 1500, "region": region, "x": accuracy, "y": accuracy,
                         "joint": accuracy, "n": 64, "region_size": count}
                        for region, count in (("train", round(fraction * n * n)), ("unseen", n * n - round(fraction * n * n)))
                        if count]
                rows.append({"run": run.name, "step": 500, "region": "train", "x": 0.0, "y": 0.0, "joint": 0.0,
                             "n": 64, "region_size": 1})
                write_parquet(run / "composition.parquet", pd.DataFrame(rows))
                write_json(run / "summary.json", {"run": run.name, "name": "toy", "kind": "bumps",
                                                  "training_images": size})
    (root / "manifest.json").write_text("{}")
    return root


def test_data_efficiency_over_a_bump_world_sweep(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.analysis.data_efficiency import data_efficiency_runs
    from conceptlab.cli import app
    from conceptlab.store.index import open_store

    root = _toy_efficiency_sweep(tmp_path / "sweep")
    with open_store(root) as store:
        table = data_efficiency_runs(store.runs(), store.table("composition"))
    assert set(table["family"]) == {"bumps", "bumps+stripes"} and len(table) == 16
    sizes = size_to_reach(table, 0.6).set_index(["family", "N"])["size_to_reach"]
    assert sizes[("bumps", 16)] == pytest.approx(64.0) and sizes[("bumps+stripes", 16)] == pytest.approx(64.0)
    result = CliRunner().invoke(app, ["sweep-report", str(root)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "bumps: images to reach 60% ∝ N^2.00" in result.output
    assert "bumps+stripes: images to reach 60% ∝ N^1.00" in result.output
    assert (root / "figures" / "data_efficiency.png").is_file() and (root / "data_efficiency.parquet").is_file()


def test_family_names_say_when_lambda_thinned_only_the_bumps():
    from conceptlab.analysis.data_efficiency import family_name

    assert family_name("bump") == family_name("bump", "2d") == "bumps"  # every label is 2D: nothing to tell apart
    assert family_name("bump+stripes") == "bumps+stripes"
    assert family_name("bump+stripes", "2d") == "bumps+stripes (λ on 2D)"
    assert family_name("sos", "all") == "sos"


def test_a_size_where_the_model_did_not_fit_its_training_labels_is_flagged_and_left_out_of_the_fit():
    runs = synthetic_runs(ns=(8, 16, 32, 64), seeds=1)
    runs["train_accuracy"] = 1.0
    big = (runs["family"] == "bumps") & (runs["N"] == 64)
    runs.loc[big, "accuracy"] = 0.05  # the model failed at N = 64 ...
    runs.loc[big, "train_accuracy"] = np.where(runs.loc[big, "dataset_size"] < 20, 0.9, 0.1)  # ... even on its data
    sizes = size_to_reach(runs).set_index(["family", "N"])
    assert sizes.loc[("bumps", 64), "training_limited"] and math.isnan(sizes.loc[("bumps", 64), "size_to_reach"])
    assert sizes.loc[("bumps", 64), "fit_fraction"] == pytest.approx(3 / 17)  # sizes 4, 8, 16 fit; 14 others do not
    assert not sizes["training_limited"].drop(("bumps", 64)).any()
    fit = scaling_fit(sizes.reset_index()).set_index("family")
    assert fit.loc["bumps", "points"] == 3 and fit.loc["bumps", "exponent"] == pytest.approx(2.0, abs=1e-9)
    without = size_to_reach(runs.drop(columns="train_accuracy"))  # no column: nothing is flagged
    assert not without["training_limited"].any() and without["fit_fraction"].isna().all()


def test_the_figure_leaves_a_training_limited_point_off_the_fitted_line():
    from conceptlab.report.sweep_figures import plot_data_efficiency

    runs = synthetic_runs(ns=(8, 16, 32), seeds=1)
    runs["train_accuracy"] = np.where(runs["N"] == 32, 0.1, 1.0)
    sizes = size_to_reach(runs)
    fig = plot_data_efficiency(runs, sizes, 0.6)
    right = fig.axes[1]
    family_lines = [line for line in right.get_lines() if not line.get_label().startswith("_")]
    assert sorted(len(line.get_xdata()) for line in family_lines) == [2, 2]  # N = 8, 16 only
    hollow = [line for line in right.get_lines() if line.get_markerfacecolor() == "none"]
    assert len(hollow) == 2  # one per family, at N = 32
