"""Cross-seed hidden-emergence report over run folders written by hand (no training)."""

import json
import math

import pandas as pd
import pytest

from conceptlab.experiments.emergence_report import emergence_report
from conceptlab.experiments.loading import config_to_yaml, load_config
from conceptlab.store.files import write_json, write_parquet

# seed → (naive step, over-prompting step, memorization start, turn step)
SEEDS = {0: (250.0, 200.0, 50.0, 150.0), 1: (None, 175.0, 75.0, 125.0), 2: (300.0, 225.0, 50.0, 200.0)}


def _fake_run(folder, seed, naive, over, mem_start, turn):
    """mem_start None: the run had no memorization phase."""
    folder.mkdir(parents=True)
    cfg = load_config("micro", [f"train.train_seed={seed}", f"data.data_seed={seed}"])
    (folder / "config.yaml").write_text(config_to_yaml(cfg))
    steps = [50, 100, 150, 200, 250, 300]
    curves = pd.DataFrame(
        [{"target": "11", "intervention": name, "step": s, "variant": "v", "score": float(at is not None and s >= at),
          "hit_rate": 0.0, "valid_fraction": 1.0, "n": 24}
         for name, at in (("naive", naive), ("over_prompting", over)) for s in steps]
    )
    write_parquet(folder / "emergence.parquet", curves)
    write_json(folder / "summary.json", {"emergence": {"threshold": 0.5, "targets": {"11": {
        "emergence_step": {"naive": naive, "over_prompting": over},
        "final_score": {"naive": 1.0 if naive else 0.0, "over_prompting": 1.0},
        "memorization": None if mem_start is None else {"start": mem_start, "end": mem_start + 25, "read_as": "01"},
        "turn": {"step": turn, "angle": 90.0},
        "capability_gap": None if naive is None else naive - over}}}})


def test_report_aggregates_seeds_and_states_the_verdicts(tmp_path):
    for seed, values in SEEDS.items():
        _fake_run(tmp_path / f"run{seed}", seed, *values)
    (tmp_path / "unfinished").mkdir()  # no summary: ignored
    verdicts = emergence_report(tmp_path)
    v = verdicts["targets"]["11"]
    assert verdicts["seeds"] == 3
    assert v["naive_emerged_in"] == 2 and v["intervention_emerged_in"] == 3
    assert v["capability_first_where_naive_emerged"] is True
    assert v["memorization_precedes_turn_in"] == 3 and v["runs_with_memorization_and_turn"] == 3
    assert v["naive_step_mean_std"] == [275.0, pytest.approx(35.4, abs=0.05)]
    assert v["earliest_intervention_step_mean_std"] == [200.0, 25.0]
    assert v["final_score_mean_std"]["naive"] == [0.667, 0.577] and v["final_score_mean_std"]["over_prompting"] == [1.0, 0.0]
    by_seed = {row["seed"]: row for row in v["per_seed"]}
    assert sorted(by_seed) == [0, 1, 2]
    assert by_seed[1]["emergence_step"] == {"naive": None, "over_prompting": 175.0}
    assert by_seed[1]["memorization"] == [75.0, 100.0] and by_seed[1]["turn_step"] == 125.0
    per_run = pd.read_parquet(tmp_path / "emergence_seeds.parquet")
    assert len(per_run) == 6 and math.isnan(per_run.query("seed == 1 and intervention == 'naive'")["emergence_step"].iloc[0])
    spread = pd.read_parquet(tmp_path / "emergence_across_seeds.parquet").set_index("intervention")
    assert spread.loc["naive", "occurred"] == 2 and spread.loc["over_prompting", "mean"] == 200.0
    assert (tmp_path / "emergence_seeds.png").is_file()


def _run_with_matched_baseline(folder, seed, over, baseline, naive):
    """A run whose over-prompting (2 variants) emerged at `over`, its bias-matched baseline at `baseline`, naive
    prompting at `naive` (None: never), with per-image naive scores stored for the null."""
    _fake_run(folder, seed, naive, over, None, 150.0)
    data = json.loads((folder / "summary.json").read_text())
    gap = {"k": 2, "step": over, "baseline_step": baseline}
    gap.update({"gap_low": baseline - over, "gap_high": baseline - over} if baseline is not None else
               {"gap_low": 300.0 - over, "gap_high": None})
    data["emergence"]["targets"]["11"]["matched"] = {"over_prompting": gap}
    data["emergence"].update(stay=2, confidence=True)
    write_json(folder / "summary.json", data)
    rows = []
    for s in [50, 100, 150, 200, 250, 300]:
        for name, stream in (("naive", 0), ("naive_repeats", 1)):
            scores = [0.9 if s >= 200 else 0.1] * 24
            rows.append({"step": s, "target": "11", "intervention": name, "variant": f"s{stream}", "stream": stream,
                         "n": 24, "score": sum(scores) / 24, "image_scores": scores})
    write_parquet(folder / "interventions.parquet", pd.DataFrame(rows))


def test_report_gives_bias_matched_gaps_with_intervals_and_null_rates(tmp_path):
    for seed, (over, baseline, naive) in {0: (150.0, 200.0, 250.0), 1: (175.0, None, None), 2: (200.0, 200.0, 250.0),
                                          3: (150.0, 250.0, 250.0), 4: (100.0, 150.0, None)}.items():
        _run_with_matched_baseline(tmp_path / f"run{seed}", seed, over, baseline, naive)
    v = emergence_report(tmp_path, null_replicates=200)["targets"]["11"]
    g = v["matched"]["over_prompting"]
    assert g["k"] == 2 and (g["positive"], g["negative"], g["untested"]) == (4, 0, 1)  # seed 2: a tie
    assert g["p_one_sided"] == pytest.approx(1 / 16)
    assert g["median_low"] == 50.0 and g["median_high"] == 50.0 and g["ci_low"] == 0.0 and g["ci_high"] == math.inf
    gaps = {r["seed"]: r["gap"] for r in v["per_seed_gaps"]}
    assert gaps[1] == [125.0, math.inf] and gaps[2] == [0.0, 0.0]
    null = v["null"]
    assert null["replicates"] == 200 and null["runs"] == 5 and null["design"] == {"over_prompting": 2}
    # every naive image scores 0.1 before step 200 and 0.9 from it: every resampled curve emerges at 200 exactly
    assert null["old_per_seed"] == 0.0 and null["new_per_seed"]["over_prompting"] == 0.0
    assert null["p_resampled"]["over_prompting"] == pytest.approx(1 / 201)  # no null replicate has net 4 of 5
    table = pd.read_parquet(tmp_path / "emergence_gaps.parquet")
    assert table.set_index("intervention").loc["over_prompting", "positive"] == 4
    # the seeds' spread (the findings suite's "steadier than behavior"): over-prompting 150, 175, 200, 150, 100
    # (median 150, deviations 0, 25, 50, 0, 50: 25); its baseline 200, never, 200, 250, 150 (median 200: 50, the same
    # with the never-emerged seed anywhere from 250 to ∞): ranges, as the suite decides on them
    assert (g["spread"], g["baseline_spread"]) == ([25.0, 25.0], [50.0, 50.0])
    assert null["spread_steadier"]["over_prompting"] == 0.0  # every resampled curve emerges at 200: no spread


def test_report_says_when_naive_is_not_beaten(tmp_path):
    _fake_run(tmp_path / "a", 0, 150.0, 200.0, 50.0, 100.0)
    assert emergence_report(tmp_path)["targets"]["11"]["capability_first_where_naive_emerged"] is False


def test_no_runs_is_one_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no finished run with hidden-emergence results"):
        emergence_report(tmp_path)


def test_sweep_report_gives_the_emergence_report_of_a_hidden_emergence_sweep(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.cli import app
    from conceptlab.experiments.sweep_state import MANIFEST

    sweep = tmp_path / "sweep"
    for seed, values in SEEDS.items():
        _fake_run(sweep / "runs" / f"run{seed}", seed, *values)
    (sweep / MANIFEST).write_text("{}")
    result = CliRunner().invoke(app, ["sweep-report", str(sweep)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "held-out 11 over 3 seeds" in result.output and (sweep / "emergence_seeds.png").is_file()
    seed_rows = {line.split()[0]: line.split() for line in result.output.splitlines() if line.split()[:1] in (["0"], ["1"], ["2"])}
    assert seed_rows["1"] == ["1", "never", "175", "75–100", "125"]  # naive, over-prompting, memorized, turn
    assert seed_rows["0"] == ["0", "250", "200", "50–75", "150"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / MANIFEST).write_text("{}")
    result = CliRunner().invoke(app, ["sweep-report", str(tmp_path / "empty")])
    assert result.exit_code == 2 and "no finished concept-space, hidden-emergence or bump-world runs" in result.output


def test_report_says_memorization_vs_turn_is_untested_when_no_run_memorized(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.cli import app

    for seed in (0, 1):
        _fake_run(tmp_path / f"run{seed}", seed, 250.0, 200.0, None, 150.0)
    v = emergence_report(tmp_path)["targets"]["11"]
    assert v["runs_with_memorization_and_turn"] == 0 and v["memorization_precedes_turn_in"] == 0
    result = CliRunner().invoke(app, ["emergence-report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "untested (no run had both a memorization phase and a turn)" in " ".join(result.output.split())


def test_a_sweep_folder_reports_only_the_runs_its_manifest_lists(tmp_path):
    """After a sweep's spec changed (new run ids), its folder keeps the earlier runs beside the new ones: the report
    must read the manifest's runs only, not pool both generations of the same seeds."""
    for seed, values in SEEDS.items():
        _fake_run(tmp_path / f"new{seed}", seed, *values)
        _fake_run(tmp_path / f"old{seed}", seed, *values)  # the same seeds under the spec's earlier run ids
    write_json(tmp_path / "manifest.json", {"runs": [{"run_id": f"new{seed}", "values": {}} for seed in SEEDS]})
    verdicts = emergence_report(tmp_path)
    assert verdicts["seeds"] == len(SEEDS)
    assert sorted(row["seed"] for row in verdicts["targets"]["11"]["per_seed"]) == sorted(SEEDS)


def test_runs_sharing_a_seed_are_counted_as_runs_and_never_read_against_each_other(tmp_path):
    """Two evaluations of one seed's training (here: over-prompting before naive in one, after it in the other) are
    two runs, not two seeds: the counts say runs, the verdicts name the shared seed and the key the runs differ in,
    and capability-before-behavior is read within each run (it once took the last run's step per intervention of a
    seed, mixing the two)."""
    _fake_run(tmp_path / "a", 0, 150.0, 300.0, 50.0, 150.0)
    _fake_run(tmp_path / "b", 0, 250.0, 200.0, 50.0, 150.0)
    cfg = load_config("micro", ["train.train_seed=0", "data.data_seed=0", "eval.samples_per_class=8"])
    (tmp_path / "b" / "config.yaml").write_text(config_to_yaml(cfg))
    _fake_run(tmp_path / "c", 1, None, 175.0, 75.0, 125.0)
    verdicts = emergence_report(tmp_path)
    assert (verdicts["seeds"], verdicts["runs"]) == (2, 3)
    assert verdicts["shared_seeds"] == {"seeds": {"0": ["a", "b"]}, "differ_in": ["eval.samples_per_class"]}
    v = verdicts["targets"]["11"]
    assert (v["naive_emerged_in"], v["naive_emerged_in_seeds"], v["intervention_emerged_in"]) == (2, 1, 3)
    assert v["capability_first_where_naive_emerged"] is False  # run a: naive at 150, over-prompting at 300
    alone = tmp_path / "alone"
    for seed, values in SEEDS.items():
        _fake_run(alone / f"run{seed}", seed, *values)
    assert emergence_report(alone)["shared_seeds"] is None
    data = tmp_path / "data-seeds"  # one training seed, two data seeds: two seeds' runs, not a shared seed
    for k, data_seed in enumerate((0, 1)):
        _fake_run(data / f"r{k}", 0, *SEEDS[k])
        cfg = load_config("micro", ["train.train_seed=0", f"data.data_seed={data_seed}"])
        (data / f"r{k}" / "config.yaml").write_text(config_to_yaml(cfg))
    report = emergence_report(data)
    assert report["shared_seeds"] is None and (report["seeds"], report["runs"]) == (2, 2)  # seeds are the pairs
    for k in range(4):  # two pairs of seeds, each shared by two runs: both named
        _fake_run(data / f"s{k}", 0, *SEEDS[0])
        cfg = load_config("micro", ["train.train_seed=0", f"data.data_seed={k % 2}", f"eval.samples_per_class={4 + k}"])
        (data / f"s{k}" / "config.yaml").write_text(config_to_yaml(cfg))
    shared = emergence_report(data)["shared_seeds"]["seeds"]
    assert shared == {"0": ["r0", "s0", "s2"], "0 (data 1)": ["r1", "s1", "s3"]}
