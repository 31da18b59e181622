"""A criterion's values per report seed (`experiments.findings.seed_values`) on hand-written run records: a value
nobody measured is `NOT_MEASURED`, never read as censored; a trend over runs of which one did not measure the value
is no trend; a value read from one run a seed refuses several. No training."""

import math

import pandas as pd
import pytest

from conceptlab.analysis import finding_criteria as fc
from conceptlab.analysis.finding_criteria import NOT_MEASURED
from conceptlab.experiments.findings import RunRecord, seed_values
from conceptlab.experiments.findings_spec import Selector
from conceptlab.experiments.loading import ConfigError

MATCHED = "conceptlab.experiments.finding_measures:matched_naive_score"
MEAN = "conceptlab.experiments.finding_measures:final_accuracy"


def _record(run_id: str, seed: int, config: dict | None = None, summary: dict | None = None, folder=None):
    return RunRecord(run_id, seed, config or {}, summary or {}, folder)


def test_a_config_filter_that_picks_no_run_is_not_measured_and_a_censored_control_never_passes_on_it():
    recs = [_record(f"r{s}", s, {"data.image_size": 24}, {"emergence": {"step": None}}) for s in (100, 101)]
    sel = Selector(runs="s", path="emergence.step", config={"data.image_size": 32}, censored="high")
    values, used = seed_values(sel, recs, [100, 101])
    assert values == {100: NOT_MEASURED, 101: NOT_MEASURED} and used == {100: [], 101: []}
    result = fc.evaluate({100: 500.0, 101: 500.0}, values, "less", 1, control_censored="high")
    assert result["verdict"] == "not reproduced" and [s["note"] for s in result["seeds"]] == ["not measured"] * 2
    # the run that picked, measured and never saw the event: censored, as before
    hit, _ = seed_values(sel.model_copy(update={"config": {"data.image_size": 24}}), recs, [100, 101])
    assert hit == {100: None, 101: None} and fc.uncensor(hit[100], "high") == math.inf


def test_a_compute_function_that_returns_nothing_for_a_seed_leaves_it_not_measured(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    rows = [{"step": 100, "target": "11", "intervention": i, "variant": "v", "stream": 0, "score": 0.5}
            for i in ("naive", "cfg")]
    pd.DataFrame(rows).to_parquet(folder / "interventions.parquet")
    sel = Selector(runs="s", compute=MATCHED, args={"intervention": "cfg"}, censored="high")
    values, _ = seed_values(sel, [_record("run", 100, folder=folder)], [100, 101])  # no run of seed 101 selected
    assert values[100] == 0.5 and values[101] is NOT_MEASURED


def test_a_table_value_nobody_measured_is_not_measured_while_a_missing_cell_is_censored(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    pd.DataFrame([{"step": 100, "target": "11", "intervention": "naive", "score": 0.2},
                  {"step": 200, "target": "11", "intervention": "naive", "score": None}]
                 ).to_parquet(folder / "emergence.parquet")
    rec = _record("run", 100, folder=folder)
    other = tmp_path / "bare"
    other.mkdir()  # a finished run without the table
    base = dict(runs="s", table="emergence", column="score", censored="high")

    def value(rec, **kw):
        return seed_values(Selector(**{**base, **kw}), [rec], [100])[0][100]

    assert value(rec, where={"intervention": "naive"}, step="first") == 0.2
    assert value(rec, where={"intervention": "naive"}, step="last") is None  # the run wrote it as missing
    assert value(rec, where={"intervention": "cfg"}, step="last") is NOT_MEASURED  # no row: never measured
    assert value(rec, where={"intervention": "naive"}, step=300) is NOT_MEASURED  # no such checkpoint
    assert value(_record("bare", 100, folder=other), where={"intervention": "naive"}) is NOT_MEASURED
    assert value(_record("mem", 100), where={"intervention": "naive"}) is NOT_MEASURED  # no folder at all
    # a StepBefore rule whose quantity reaches its level at the first checkpoint: no checkpoint before it
    before = {"where": {"intervention": "naive"}, "column": "score", "reaches": 0.1}
    assert value(rec, where={"intervention": "naive"}, step=before) is NOT_MEASURED
    # a window longer than the run's checkpoints
    assert value(rec, where={"intervention": "naive"}, step={"last": 3}) is NOT_MEASURED


def test_a_trend_over_runs_of_which_one_did_not_measure_the_value_is_not_measured():
    # the reviewer's case: four gap widths, the run at low = 2 lacks the measure; over the other three ρ = 1.0,
    # where with it measured (0.9) ρ = 0.4
    acc = {1.0: 0.2, 2.0: 0.9, 3.0: 0.5, 4.0: 0.8}
    recs = [_record(f"r{x}", 100, {"data.held_out.low": x},
                    {"final_accuracy": {"held_out": {"joint": a}}} if x != 2.0 else {"final_accuracy": {}})
            for x, a in acc.items()]
    sel = Selector(runs="s", path="final_accuracy.held_out.joint", across="data.held_out.low")
    values, used = seed_values(sel, recs, [100])
    assert values == {100: NOT_MEASURED} and len(used[100]) == 4
    assert fc.evaluate(values, 0.8, "greater")["seeds"][0]["note"] == "not measured"
    # every run measured: the trend over all four
    full = [_record(f"r{x}", 100, {"data.held_out.low": x}, {"final_accuracy": {"held_out": {"joint": a}}})
            for x, a in acc.items()]
    assert seed_values(sel, full, [100])[0][100] == pytest.approx(0.4)
    # a null under censored: none is not measured either, and a trend over too few runs is no value at all
    nulls = [*full[:3], _record("r4.0", 100, {"data.held_out.low": 4.0}, {"final_accuracy": {"held_out": {"joint": None}}})]
    assert seed_values(sel, nulls, [100])[0][100] is NOT_MEASURED
    censored = sel.model_copy(update={"censored": "high"})
    assert seed_values(censored, full[:2], [100])[0][100] is NOT_MEASURED  # not +inf under censored: high


def test_a_compute_value_read_from_one_run_a_seed_refuses_several_unless_it_reads_them_together(tmp_path):
    recs = []
    for i, size in enumerate((16, 24)):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        pd.DataFrame([{"step": 100, "target": "11", "intervention": n, "variant": "v", "stream": 0,
                       "score": 0.1 * (i + 1)} for n in ("naive", "cfg")]).to_parquet(folder / "interventions.parquet")
        recs.append(_record(f"run{i}", 100, {"data.image_size": size},
                            {"final_accuracy": {"held_out": {"joint": 0.5 + i / 10}}}, folder))
    sel = Selector(runs="s", compute=MATCHED, args={"intervention": "cfg"})
    with pytest.raises(ConfigError) as err:
        seed_values(sel, recs, [100])
    assert "2 runs for seed 100; pick one with config:" in str(err.value) and "data.image_size" in str(err.value)
    assert "\n" not in str(err.value)
    one, _ = seed_values(sel.model_copy(update={"config": {"data.image_size": 24}}), recs, [100])
    assert one[100] == pytest.approx(0.2)
    mean, _ = seed_values(Selector(runs="s", compute=MEAN), recs, [100])  # aggregates: a mean over the seed's runs
    assert mean[100] == pytest.approx(0.55)
