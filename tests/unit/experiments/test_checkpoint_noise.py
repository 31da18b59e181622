"""Checkpoint-to-checkpoint noise of a run's trajectories (`experiments.checkpoint_noise`) on hand-written run folders."""

import numpy as np
import pandas as pd
import pytest

from conceptlab.experiments.checkpoint_noise import NoiseInputError, measure_run, noise_frame

CLASSES = {"00": ("train", (0.02, 0.02)), "01": ("train", (0.02, 0.98)), "10": ("train", (0.98, 0.02)),
           "11": ("held_out", (0.9, 0.9))}


def _noise(kind: str, n: int, rng: np.random.Generator, sigma: float = 0.01) -> np.ndarray:
    """[n, 2] noise: independent per checkpoint, or AR(1) with φ = 0.8 (the same stationary variance)."""
    e = rng.normal(0, sigma, size=(n, 2))
    if kind == "independent":
        return e
    phi, x = 0.8, np.zeros((n, 2))
    x[0] = e[0]
    for i in range(1, n):
        x[i] = phi * x[i - 1] + np.sqrt(1 - phi ** 2) * e[i]
    return x


def _run(tmp_path, kind: dict[str, str], n: int = 400, naive: str | None = "independent", seed: int = 0):
    """A run folder whose concept-space table has one converged point per class plus noise of `kind[class]`, and
    (unless `naive` is None) an interventions table with five naive streams of the held-out target."""
    rng = np.random.default_rng(seed)
    steps = 250 * np.arange(1, n + 1)
    rows = []
    for code, (split, centre) in CLASSES.items():
        path = np.clip(np.array(centre) + _noise(kind.get(code, "independent"), n, rng), 0, 1)
        for i, step in enumerate(steps):
            for c, concept in enumerate(("color", "size")):
                rows.append({"run": "r", "step": int(step), "class": code, "split": split, "concept": concept,
                             "target": code[c], "p_one": path[i, c], "accuracy": 1.0, "valid_fraction": 1.0,
                             "n": 32, "class_name": f"class {code}"})
    folder = tmp_path / "run"
    folder.mkdir()
    pd.DataFrame(rows).to_parquet(folder / "concept_space.parquet")
    if naive is not None:
        shared = _noise(naive, n, rng)  # the network's wandering: every stream sees it
        rows = []
        for s in range(5):
            path = np.clip(0.9 + shared + rng.normal(0, 0.002, size=(n, 2)), 0, 1)  # plus each stream's own noise
            for i, step in enumerate(steps):
                rows.append({"step": int(step), "target": "11", "intervention": "naive" if s == 0 else "naive_repeats",
                             "variant": "prompt" if s == 0 else f"stream {s}", "stream": s, "n": 24, "score": 0.8,
                             "valid_fraction": 1.0, "p_color": path[i, 0], "p_size": path[i, 1]})
        pd.DataFrame(rows).to_parquet(folder / "interventions.parquet")
    return folder


def test_independent_noise_persists_one_checkpoint_and_ar1_noise_several(tmp_path):
    folder = _run(tmp_path, {"01": "ar1"}, naive="ar1")
    results = {r.name: r for r in measure_run(folder, from_step=0, max_lag=16)}
    assert sorted(results) == ["concept space 00 (class 00)", "concept space 01 (class 01)",
                               "concept space 10 (class 10)", "concept space 11 (class 11)", "naive 11 pooled"]
    assert results["concept space 00 (class 00)"].persistence == 1
    assert results["concept space 11 (class 11)"].persistence == 1
    # AR(1) with φ = 0.8 reaches 90% of its plateau near ln(0.1)/ln(0.8) ≈ 10 lags
    assert results["concept space 01 (class 01)"].persistence >= 5
    assert results["naive 11 pooled"].persistence >= 5
    independent = results["concept space 10 (class 10)"].gamma
    # independent noise of σ = 0.01 on each of two concepts: γ = 2σ² at every lag (clipping at 0 halves some)
    assert independent == pytest.approx(np.full(16, independent.mean()), rel=0.25)
    assert results["concept space 00 (class 00)"].spacing == 250
    assert results["concept space 11 (class 11)"].split == "held_out"


def test_from_step_keeps_the_tail_and_the_frame_has_a_row_per_trajectory_and_lag(tmp_path):
    folder = _run(tmp_path, {}, n=40)
    results = measure_run(folder, from_step=5_000, max_lag=4)
    assert all(r.steps[0] == 5_000 and len(r.steps) == 21 for r in results)
    frame = noise_frame(results)
    assert len(frame) == 5 * 4
    assert frame["lag_steps"].tolist()[:4] == [250.0, 500.0, 750.0, 1000.0]
    assert set(frame.columns) >= {"trajectory", "split", "lag", "gamma", "persistence", "persistence_steps"}


def test_a_run_without_interventions_reads_only_its_concept_space(tmp_path):
    folder = _run(tmp_path, {}, n=30, naive=None)
    assert [r.name for r in measure_run(folder, max_lag=4)][-1] == "concept space 11 (class 11)"


def test_too_few_checkpoints_or_no_table_is_refused_with_what_to_change(tmp_path):
    folder = _run(tmp_path, {}, n=12)
    with pytest.raises(NoiseInputError, match="lags up to 8 need at least 10"):
        measure_run(folder, from_step=1_000, max_lag=8)  # 9 checkpoints from step 1,000
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NoiseInputError, match="no concept_space.parquet"):
        measure_run(empty)
    with pytest.raises(ValueError, match="max_lag"):
        measure_run(folder, max_lag=0)
    table = pd.read_parquet(folder / "concept_space.parquet")
    table[table["step"] != 1_500].to_parquet(folder / "concept_space.parquet")  # a checkpoint missing
    with pytest.raises(NoiseInputError, match="not evenly spaced"):
        measure_run(folder, max_lag=4)
    assert measure_run(folder, from_step=1_750, max_lag=4)  # past the gap
    table = pd.read_parquet(folder / "concept_space.parquet")
    table.loc[(table["step"] == 2_250) & (table["class"] == "01"), "p_one"] = float("nan")  # no valid image there
    table.to_parquet(folder / "concept_space.parquet")
    with pytest.raises(NoiseInputError, match=r"concept space 01 \(class 01\)'s checkpoints .* not evenly spaced"):
        measure_run(folder, from_step=1_750, max_lag=3)


def test_runs_noise_prints_each_trajectory_and_saves_the_figure(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.cli import app

    folder = _run(tmp_path, {"01": "ar1"}, n=60)
    figure = tmp_path / "noise.png"
    out = CliRunner().invoke(app, ["runs", "noise", str(folder), "--from-step", "2500", "--max-lag", "6",
                                   "--figure", str(figure)], terminal_width=200)
    assert out.exit_code == 0, out.output
    assert "naive 11 pooled" in out.output and "concept space 01 (class 01)" in out.output
    assert "γ(6)" in out.output and "(250 steps)" in out.output  # the independent ones persist one checkpoint
    assert "from step 2,500 to 15,000" in out.output
    assert figure.is_file() and figure.stat().st_size > 10_000
    refused = CliRunner().invoke(app, ["runs", "noise", str(folder), "--from-step", "14000"])
    assert refused.exit_code == 2 and "need at least 10" in refused.output
    assert CliRunner().invoke(app, ["runs", "noise", str(folder), "--share", "1.5"]).exit_code == 2


def _emergence(folder, scores: dict[int, float]) -> None:
    pd.DataFrame([{"step": s, "target": "11", "intervention": "naive", "variant": "prompt", "score": v}
                  for s, v in scores.items()]).to_parquet(folder / "emergence.parquet")


def test_window_spread_compares_single_checkpoints_with_window_medians(tmp_path):
    """Steady scores with one checkpoint's swing: single checkpoints spread wide, the medians of three checkpoints
    1,000 steps apart do not (the swing is outvoted), and every window counted lies wholly in the stretch."""
    from conceptlab.experiments.checkpoint_noise import window_spread

    folder = tmp_path / "run"
    folder.mkdir()
    scores = {250 * i: 0.8 for i in range(1, 41)}  # steps 250 … 10,000
    scores[6_000] = 0.05  # one swing
    _emergence(folder, scores)
    spread = window_spread(folder, "11", window=3, spacing=1000, from_step=2_000)
    assert spread.single.n == 33 and spread.single.low == 0.05 and spread.single.sd > 0.1
    assert spread.medians.n == 25 and spread.medians.low == spread.medians.high == 0.8  # ends 4,000 … 10,000
    assert spread.single_at_ends.n == 25 and spread.single_at_ends.low == 0.05
    with pytest.raises(NoiseInputError, match="fewer than two windows"):
        window_spread(folder, "11", window=3, spacing=1000, from_step=9_000)
    with pytest.raises(NoiseInputError, match="no naive score for target 01"):
        window_spread(folder, "01", window=3, spacing=1000)
    with pytest.raises(NoiseInputError, match="no emergence.parquet"):
        window_spread(tmp_path, "11", window=3, spacing=1000)


def test_runs_noise_window_prints_the_window_medians_spread(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.cli import app

    folder = _run(tmp_path, {}, n=60)
    _emergence(folder, {250 * i: (0.05 if i == 30 else 0.8) for i in range(1, 61)})
    out = CliRunner().invoke(app, ["runs", "noise", str(folder), "--from-step", "2500", "--max-lag", "6",
                                   "--window", "3", "--spacing", "1000"], terminal_width=300)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "median of 3 checkpoints 1,000 steps apart sd 0.000, range 0.800–0.800" in text, text
