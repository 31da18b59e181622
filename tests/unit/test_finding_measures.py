"""The findings suite's compute functions on hand-written run folders, and the analytic percolation set."""

import math

import numpy as np
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
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    runs = [_run(tmp_path, 100, "bump", 24, k, a) for k, a in ((10, 0.2), (40, 0.5), (160, 0.7))]
    runs += [_run(tmp_path, 100, "bump+stripes", 24, k, a) for k, a in ((10, 0.7), (40, 0.8))]
    runs += [_run(tmp_path, 101, "bump", 24, k, a) for k, a in ((10, 0.1), (40, 0.2))]  # never reaches 0.6
    runs += [_run(tmp_path, 100, "bump", 8, 10, 0.9)]  # another N: not read at n = 24
    bumps = images_to_reach(runs, "bumps", 24)
    # 0.5 at 40 images, 0.7 at 160: 0.6 halfway in log size, at 80 images
    assert bumps[100] == pytest.approx(80.0)
    assert bumps[101] is None  # never reached: a criterion reads it as censored
    assert images_to_reach(runs, "bumps+stripes", 24)[100] == -math.inf  # already at the smallest size: ≤ 10
    # no run of the family, or none at that size (a family or size named wrong): not measured, never "not reached",
    # which a criterion censored high would read as +inf and pass a control that never ran
    assert images_to_reach(runs, "bumps+stripes", 24)[101] is NOT_MEASURED  # seed 101 has no stripes runs
    assert images_to_reach(runs, "bumps", 16) == {100: NOT_MEASURED, 101: NOT_MEASURED}  # no run at that size
    assert images_to_reach(runs, "bump", 24) == {100: NOT_MEASURED, 101: NOT_MEASURED}  # the family's name mistyped


def test_images_to_reach_is_not_measured_when_a_finished_run_lacks_its_table(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED

    runs = [_run(tmp_path, 100, "bump", 24, k, a) for k, a in ((10, 0.2), (40, 0.5), (160, 0.7))]
    (runs[1].folder / "composition.parquet").unlink()  # the 40-image run: without it the crossing would move
    assert images_to_reach(runs, "bumps", 24)[100] is NOT_MEASURED


def test_matched_naive_score_is_the_best_of_as_many_naive_streams_as_the_intervention_has_variants(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import matched_naive_score

    rows = []
    for step, naive, cfg in ((100, (0.1, 0.3, 0.9), (0.2, 0.1)), (200, (0.4, 0.6, 0.95), (0.7, 0.9))):
        for stream, score in enumerate(naive):  # stream 2 belongs to a 3-variant intervention's baseline only
            rows.append({"step": step, "target": "11", "intervention": "naive" if stream == 0 else "naive_repeats",
                         "variant": "prompt" if stream == 0 else f"stream {stream}", "stream": stream,
                         "score": score})
        for j, score in enumerate(cfg):
            rows.append({"step": step, "target": "11", "intervention": "cfg", "variant": f"w{j}", "stream": j,
                         "score": score})
        rows.append({"step": step, "target": "11", "intervention": "over_prompting", "variant": "a", "stream": 0,
                     "score": 0.2 if step == 100 else 0.8})
    folder = tmp_path / "run"
    folder.mkdir()
    pd.DataFrame(rows).to_parquet(folder / "interventions.parquet")
    runs = [RunRecord("run", 100, {}, {}, folder)]
    assert matched_naive_score(runs, "cfg", step="last") == {100: 0.6}  # best of streams 0, 1: not stream 2's 0.95
    assert matched_naive_score(runs, "cfg", step="first") == {100: 0.3}
    # the last checkpoint before over-prompting first scores 0.5: step 100
    assert matched_naive_score(runs, "cfg", before={"intervention": "over_prompting", "reaches": 0.5}) == {100: 0.3}
    assert matched_naive_score(runs, "cfg", before={"intervention": "over_prompting", "reaches": 0.1}) == {
        100: NOT_MEASURED}  # it scores 0.1 already at the first checkpoint: no checkpoint before
    # window: the median over the last checkpoints of the matched score (0.3 at 100, 0.6 at 200)
    assert matched_naive_score(runs, "cfg", window=2) == {100: pytest.approx(0.45)}
    assert matched_naive_score(runs, "cfg", window=1) == {100: 0.6}
    assert matched_naive_score(runs, "cfg", window=3) == {100: NOT_MEASURED}  # the run has two checkpoints
    with pytest.raises(ValueError, match="window reads the last checkpoints"):
        matched_naive_score(runs, "cfg", step="first", window=2)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert matched_naive_score([RunRecord("e", 101, {}, {}, empty)], "cfg") == {101: NOT_MEASURED}


def test_percolation_scaling_gives_a_critical_size_per_n_and_an_exponent_near_2_where_lambda_c_converged():
    out = percolation_scaling(seed=0, sizes=(64, 128), trials=4)
    assert set(out["critical_size"]) == {"64", "128"}
    assert 0.04 < out["critical_fraction"]["128"] < 0.08  # λ_c ≈ 0.06 (docs/findings-history.md)
    assert 1.8 <= out["exponent"] <= 2.2
    again = percolation_scaling(seed=0, sizes=(64, 128), trials=4)
    assert again == out  # seeded
    assert math.isfinite(out["critical_size"]["64"])


def _trajectory_run(tmp_path, name: str, seed: int, points, n: int = 8, valid=None) -> RunRecord:
    rows = []
    for i, (color, size) in enumerate(points):
        for concept, p in (("color", color), ("size", size)):
            for code in ("11", "00"):
                rows.append({"run": name, "step": 100 * (i + 1), "class": code, "split": "test" if code == "11"
                             else "train", "concept": concept, "target": int(code[0]), "p_one": p, "accuracy": p,
                             "valid_fraction": 1.0 if valid is None else valid[i], "n": n, "class_name": code})
    folder = tmp_path / name
    folder.mkdir()
    pd.DataFrame(rows).to_parquet(folder / "concept_space.parquet")
    return RunRecord(name, seed, {}, {}, folder)


def test_straight_path_turn_reads_the_trajectory_and_its_null_per_seed(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import straight_path_turn

    l_turn = [(0.05, 0.05), (0.05, 0.5), (0.05, 0.95), (0.05, 0.95), (0.5, 0.95), (0.95, 0.95), (0.95, 0.95)]
    line = [(0.05 + 0.15 * i, 0.05 + 0.15 * i) for i in range(7)]
    runs = [_trajectory_run(tmp_path, "turn", 100, l_turn, n=32), _trajectory_run(tmp_path, "line", 101, line, n=32)]
    observed = straight_path_turn(runs, part="observed")
    null = straight_path_turn(runs, part="null_q95")
    assert observed[100] == pytest.approx(0.9 / math.sqrt(2), abs=1e-6)  # (0.05, 0.95) from the diagonal
    assert observed[100] > null[100]  # the L turns beyond a redrawn straight path
    assert observed[101] == pytest.approx(0.0, abs=1e-9) and observed[101] < null[101]
    assert straight_path_turn(runs, part="null_q95", draws=998) != null  # a fresh test, not a stale cached one
    assert straight_path_turn(runs, part="null_q95") == null  # the null's stream is fixed per seed
    empty = tmp_path / "empty"
    empty.mkdir()
    assert straight_path_turn([RunRecord("e", 102, {}, {}, empty)]) == {102: NOT_MEASURED}
    assert straight_path_turn([_trajectory_run(tmp_path, "short", 103, l_turn[:2])]) == {103: NOT_MEASURED}  # too short to test: not measured, never censored
    with pytest.raises(ValueError, match="part"):
        straight_path_turn(runs, part="median")


def _streams_run(tmp_path, name: str, seed: int, path, streams: int = 5, n: int = 24, flip_size: bool = False,
                 valid=None, spread: float = 0.03) -> RunRecord:
    """A run folder whose interventions table holds naive prompting of target 11 on `streams` noise streams, each
    stream reading `path` plus its own offset, the same at every checkpoint (a stream reuses its noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    offsets = rng.normal(0, spread, size=(streams, 2))
    for i, (color, size) in enumerate(path):
        for s in range(streams):
            c, z = np.clip(np.array([color, size]) + offsets[s], 0, 1)
            rows.append({"step": 100 * (i + 1), "target": "11", "intervention": "naive" if s == 0 else
                         "naive_repeats", "variant": "prompt" if s == 0 else f"stream {s}", "stream": s, "n": n,
                         "score": c * z, "valid_fraction": 1.0 if valid is None else valid[i], "p_color": c,
                         "p_size": 1 - z if flip_size else z})
            rows.append({**rows[-1], "target": "00", "p_color": 0.5, "p_size": 0.5})  # another target: not read
    folder = tmp_path / name
    folder.mkdir()
    pd.DataFrame(rows).to_parquet(folder / "interventions.parquet")
    return RunRecord(name, seed, {}, {}, folder)


def test_replicate_stream_turn_pools_every_naive_stream_and_reads_its_sign_flip_null(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import naive_stream_readings, replicate_stream_turn

    l_turn = [(0.05, 0.05), (0.05, 0.5), (0.05, 0.95), (0.05, 0.95), (0.5, 0.95), (0.95, 0.95), (0.95, 0.95)]
    line = [(0.05 + 0.15 * i, 0.05 + 0.15 * i) for i in range(7)]
    runs = [_streams_run(tmp_path, "turn", 100, l_turn), _streams_run(tmp_path, "line", 101, line)]
    observed = replicate_stream_turn(runs, part="observed")
    critical = replicate_stream_turn(runs, part="critical")
    p, level = replicate_stream_turn(runs, part="p"), replicate_stream_turn(runs, part="level")
    assert observed[100] > 0.5 and observed[100] > critical[100]  # the L bows beyond its streams' noise
    assert p[100] <= level[100] == pytest.approx(1 / 16)
    assert observed[101] < 0.05 and not observed[101] > critical[101] and p[101] > level[101]  # the line does not
    # identical straight streams: p = 1, so the criterion (p ≤ level) fails, as it must (bow 0 ties critical 0)
    flat = _streams_run(tmp_path, "flat", 106, line, spread=0.0)
    assert replicate_stream_turn([flat], part="p") == {106: 1.0}
    # an axis whose target value is 0 is read as 1 − p: target 10's size reads 1 − p_size
    flipped = _streams_run(tmp_path, "flipped", 102, l_turn, flip_size=True)
    table = pd.read_parquet(flipped.folder / "interventions.parquet")
    table.loc[table["target"] == "11", "target"] = "10"
    table.to_parquet(flipped.folder / "interventions.parquet")
    stored = table[(table["target"] == "10") & (table["stream"] == 0)].sort_values("step")
    readings = naive_stream_readings(flipped.folder, "10", 0.0)[1]
    assert readings[0, :, 0] == pytest.approx(stored["p_color"].to_numpy())
    assert readings[0, :, 1] == pytest.approx(1 - stored["p_size"].to_numpy())
    # checkpoints with under 25% valid images are left out
    sparse = _streams_run(tmp_path, "sparse", 103, l_turn, valid=[0.2, 1, 1, 1, 1, 1, 1])
    assert list(naive_stream_readings(sparse.folder, "11", 0.25)[0]) == [200.0, 300.0, 400.0, 500.0, 600.0, 700.0]
    four = _streams_run(tmp_path, "four", 104, l_turn, streams=4)
    assert replicate_stream_turn([four]) == {104: NOT_MEASURED}  # 4 streams: 16 patterns, the test is not run
    empty = tmp_path / "empty"
    empty.mkdir()
    assert replicate_stream_turn([RunRecord("e", 105, {}, {}, empty)]) == {105: NOT_MEASURED}
    assert replicate_stream_turn(runs, target="01") == {100: NOT_MEASURED, 101: NOT_MEASURED}
    with pytest.raises(ValueError, match="part"):
        replicate_stream_turn(runs, part="null_q95")


def test_checkpoint_noise_turn_reads_the_pooled_streams_and_does_not_call_a_one_checkpoint_swing_a_turn(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import checkpoint_noise_turn

    rng = np.random.default_rng(0)
    n = 12
    wobble = rng.normal(0, 0.02, (n, 2))  # the network's own noise: every stream of a checkpoint shares it
    line = np.linspace([0.1, 0.1], [0.9, 0.9], n) + wobble
    l_turn = np.concatenate([np.linspace([0.1, 0.1], [0.1, 0.9], 5), np.linspace([0.1, 0.9], [0.9, 0.9], n - 5)])
    swung = line.copy()
    swung[6] = [0.05, 0.95]  # far off the diagonal at one checkpoint only
    runs = [_streams_run(tmp_path, "turn", 100, np.clip(l_turn + wobble, 0, 1), streams=2),
            _streams_run(tmp_path, "line", 101, np.clip(line, 0, 1), streams=2),
            _streams_run(tmp_path, "swung", 102, np.clip(swung, 0, 1), streams=2)]
    p = checkpoint_noise_turn(runs, part="p")
    observed, null = checkpoint_noise_turn(runs, part="observed"), checkpoint_noise_turn(runs, part="null_q95")
    assert p[100] <= 0.05 and observed[100] > null[100] and observed[100] > 0.4  # the L holds its bow
    assert p[101] > 0.05 and p[102] > 0.05  # a line, and a line with one swing, do not pass
    assert checkpoint_noise_turn(runs, part="p", hold=1)[102] <= 0.05  # without the hold the swing would
    assert checkpoint_noise_turn(runs, part="p") == p  # the null's stream is fixed per seed
    short = _streams_run(tmp_path, "short", 103, l_turn[:4], streams=2)
    assert checkpoint_noise_turn([short]) == {103: NOT_MEASURED}  # 4 checkpoints: undefined, not censored
    empty = tmp_path / "empty"
    empty.mkdir()
    assert checkpoint_noise_turn([RunRecord("e", 104, {}, {}, empty)]) == {104: NOT_MEASURED}
    with pytest.raises(ValueError, match="part"):
        checkpoint_noise_turn(runs, part="level")


def test_checkpoint_noise_turn_with_a_stride_reads_every_kth_checkpoint_counted_back_from_the_last(tmp_path):
    from conceptlab.experiments.finding_measures import checkpoint_noise_turn, naive_stream_readings

    rng = np.random.default_rng(1)
    n = 16
    l_turn = np.concatenate([np.linspace([0.1, 0.1], [0.1, 0.9], 7), np.linspace([0.1, 0.9], [0.9, 0.9], n - 7)])
    path = np.clip(l_turn + rng.normal(0, 0.02, (n, 2)), 0, 1)
    dense = _streams_run(tmp_path, "dense", 100, path, streams=2, valid=[0.1] + [1.0] * (n - 1))
    # steps 100 … 1,600: stride 3 keeps 1,600, 1,300, …, 100; step 100 then fails the valid-image filter, which
    # does not shift the phase
    kept = [100.0, 400.0, 700.0, 1000.0, 1300.0, 1600.0]
    assert list(naive_stream_readings(dense.folder, "11", 0.25, stride=3)[0]) == kept[1:]
    assert list(naive_stream_readings(dense.folder, "11", 0.0, stride=3)[0]) == kept
    assert list(naive_stream_readings(dense.folder, "11", 0.0, stride=1)[0]) == [100.0 * (i + 1) for i in range(n)]
    # the strided test is the test of the thinned run: same p, bow and null
    thinned = _streams_run(tmp_path, "thinned", 100, path[[0, 3, 6, 9, 12, 15]], streams=2,
                           valid=[0.1, 1, 1, 1, 1, 1])
    table = pd.read_parquet(thinned.folder / "interventions.parquet")
    table["step"] = table["step"].map(dict(zip([100, 200, 300, 400, 500, 600], kept)))
    table.to_parquet(thinned.folder / "interventions.parquet")
    for part in ("p", "observed", "null_q95"):
        got = checkpoint_noise_turn([dense], part=part, stride=3, hold=2)
        assert got[100] is not None and got == pytest.approx(checkpoint_noise_turn([thinned], part=part, hold=2))
        assert got != checkpoint_noise_turn([dense], part=part, hold=2)
    with pytest.raises(ValueError, match="stride"):
        checkpoint_noise_turn([dense], stride=0)


def _bump_run(tmp_path, seed: int, low: float, high: float, accuracy: float) -> RunRecord:
    from conceptlab.experiments.loading import config_to_yaml, load_config

    cfg = load_config("interpolate-lesion-tiny", [f"data.held_out.low={low}", f"data.held_out.high={high}",
                                                  f"train.train_seed={seed}", "eval.composition.labels_per_region=1000"])
    folder = tmp_path / f"{seed}-{low}"
    folder.mkdir()
    (folder / "config.yaml").write_text(config_to_yaml(cfg))
    summary = {"final_accuracy": {"held_out": {"joint": accuracy}, "train": {"joint": 1.0}}}
    return RunRecord(folder.name, seed, {"data.held_out.low": low}, summary, folder)


def test_copying_baseline_final_accuracy_and_the_trend_beyond_copying(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import copying_baseline, final_accuracy, trend_beyond_copying

    bands = ((11.0, 12.0), (10.0, 12.0), (9.0, 13.0), (8.0, 14.0))  # copying: 1, 1, 0.5, 1/3
    geometry_only = [_bump_run(tmp_path, 100, lo, hi, a) for (lo, hi), a in zip(bands, (0.8, 0.9, 0.2, 0.5 / 3))]
    beyond = [_bump_run(tmp_path, 101, lo, hi, a) for (lo, hi), a in zip(bands, (1.0, 0.8, 0.2, 0.0))]
    runs = geometry_only + beyond
    assert copying_baseline(runs)[100] == pytest.approx((1 + 1 + 0.5 + 1 / 3) / 4)
    assert final_accuracy(runs) == {100: pytest.approx((0.8 + 0.9 + 0.2 + 0.5 / 3) / 4), 101: pytest.approx(0.5)}
    rho = trend_beyond_copying(runs, across="data.held_out.low")
    assert rho[100] == pytest.approx(0.0)  # below copying by 0.2, 0.1, 0.3, 0.17: the fall is copying's
    assert rho[101] == pytest.approx(1.0)  # falls faster than copying at every wider gap
    (beyond[0].folder / "config.yaml").unlink()
    assert copying_baseline(beyond) == {101: NOT_MEASURED}
    assert trend_beyond_copying(beyond, across="data.held_out.low") == {101: NOT_MEASURED}


def test_independent_sigmoids_r2_is_read_from_the_held_out_trajectory(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import independent_sigmoids_r2

    steps = np.arange(1, 11)
    own = [(float(1 / (1 + np.exp(-(t - 4)))), float(1 / (1 + np.exp(-(t - 6) * 2)))) for t in steps]
    runs = [_trajectory_run(tmp_path, "own", 100, own)]
    # the fixture's checkpoints are at steps 100, 200, …: midpoints 400 and 600
    assert independent_sigmoids_r2(runs)[100] > 0.95
    assert independent_sigmoids_r2([_trajectory_run(tmp_path, "short", 101, own[:4])]) == {101: NOT_MEASURED}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert independent_sigmoids_r2([RunRecord("e", 102, {}, {}, empty)]) == {102: NOT_MEASURED}


def test_authors_learning_time_per_seed_at_the_runs_own_threshold(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import authors_learning_time

    def run(name: str, seed: int, color: list[float], threshold: float) -> RunRecord:
        rows = [{"run": name, "step": 100 * (i + 1), "class": "11", "split": "held_out", "concept": concept,
                 "target": 1, "p_one": a, "accuracy": a, "valid_fraction": 1.0, "n": 8, "class_name": "11"}
                for concept, curve in (("color", color), ("size", [0.0] * len(color))) for i, a in enumerate(curve)]
        folder = tmp_path / name
        folder.mkdir()
        pd.DataFrame(rows).to_parquet(folder / "concept_space.parquet")
        return RunRecord(name, seed, {"eval.accuracy_threshold": threshold}, {}, folder)

    plateau = [0.0] * 5 + [0.85] * 10  # above 0.8, never above 0.9
    runs = [run("a", 100, plateau, 0.8), run("b", 101, plateau, 0.9)]
    # smoothed, 0.85·Φ((i − 4.5)/1.5) passes 0.8 from index 7: the run 7, 8, 9, its centre 8, step 900
    assert authors_learning_time(runs, "color") == {100: 900.0, 101: None}
    assert authors_learning_time(runs, "color", threshold=0.9) == {100: None, 101: None}
    assert authors_learning_time(runs, "size") == {100: None, 101: None}
    assert authors_learning_time(runs, "shape") == {100: NOT_MEASURED, 101: NOT_MEASURED}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert authors_learning_time([RunRecord("e", 102, {}, {}, empty)], "color") == {102: NOT_MEASURED}


def test_authors_learning_time_trend_ranks_never_as_latest_and_a_constant_time_as_no_trend(tmp_path):
    from conceptlab.analysis.finding_criteria import NOT_MEASURED
    from conceptlab.experiments.finding_measures import authors_learning_time_trend

    def run(name: str, seed: int, delta: float, jump: int | None) -> RunRecord:
        curve = [0.0] * 20 if jump is None else [0.0] * jump + [1.0] * (20 - jump)
        rows = [{"run": name, "step": 100 * (i + 1), "class": "11", "split": "held_out", "concept": "color",
                 "target": 1, "p_one": a, "accuracy": a, "valid_fraction": 1.0, "n": 8, "class_name": "11"}
                for i, a in enumerate(curve)]
        folder = tmp_path / name
        folder.mkdir()
        pd.DataFrame(rows).to_parquet(folder / "concept_space.parquet")
        return RunRecord(name, seed, {"data.color_separation": delta, "eval.accuracy_threshold": 0.9}, {}, folder)

    falls = [run(f"a{i}", 100, d, j) for i, (d, j) in enumerate([(0.3, None), (0.5, 12), (0.7, 8), (0.9, 4)])]
    rises = [run(f"b{i}", 101, d, j) for i, (d, j) in enumerate([(0.3, 4), (0.5, 8), (0.7, 12), (0.9, 14)])]
    never = [run(f"c{i}", 102, d, None) for i, d in enumerate([0.3, 0.5, 0.7])]
    few = [run(f"d{i}", 103, d, 5) for i, d in enumerate([0.3, 0.5])]
    rho = authors_learning_time_trend(falls + rises + never + few, "color", "data.color_separation")
    assert rho[100] == pytest.approx(-1.0) and rho[101] == pytest.approx(1.0)
    assert rho[102] == 0.0 and rho[103] is NOT_MEASURED  # two runs: no trend to read, not "never"
    assert authors_learning_time_trend(falls, "size", "data.color_separation") == {100: NOT_MEASURED}
