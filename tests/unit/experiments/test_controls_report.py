"""The controls block of a sweep spec and the controls report over run folders written by hand (no training)."""

import json

import pandas as pd
import pytest
import yaml

from conceptlab.experiments.claims import ControlsSpec
from conceptlab.experiments.controls_report import controls_report
from conceptlab.experiments.loading import ConfigError, config_to_yaml, load_config
from conceptlab.experiments.sweep import parse_spec
from conceptlab.store.files import write_json

CONTROLS = {
    "sources": ["trained", "untrained", "encoding_map"],
    "measures": ["additive_share", "betti_1"],
    "claims": [
        {"name": "beats-map", "statement": "more additive than a random map of the encoding",
         "measure": "additive_share", "control": "encoding_map", "direction": "greater", "margin": 0.1,
         "restated": "the encoding alone is as additive"},
        {"name": "beats-untrained", "statement": "more additive than at initialisation",
         "measure": "additive_share", "control": "untrained", "direction": "greater", "margin": 0.1},
        {"name": "departs", "statement": "the trained curve departs", "value": "departs.{source}",
         "direction": "holds"},
    ],
}
# seed → (trained, untrained, encoding_map) additive share
VALUES = {100: (0.9, 0.4, 0.95), 101: (0.85, 0.5, 0.7), 102: (0.8, 0.45, 0.9)}


def _sweep(root, finished=(100, 101, 102), pending=()):
    root.mkdir(parents=True)
    spec = {"name": "toy", "base": "micro", "axes": {"seeds": list(finished) + list(pending)},
            "settings_seeds": [0, 1], "controls": CONTROLS}
    (root / "sweep.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    runs = []
    for seed in [*finished, *pending]:
        run = root / f"run{seed}"
        run.mkdir()
        cfg = load_config("micro", [f"train.train_seed={seed}", f"data.data_seed={seed}"])
        (run / "config.yaml").write_text(config_to_yaml(cfg))
        runs.append({"run_id": run.name, "values": {"seed": seed}})
        if seed in finished:
            t, u, m = VALUES[seed]
            write_json(run / "summary.json", {
                "controls": {"trained": {"additive_share": t, "betti_1": 2},
                             "untrained": {"additive_share": u, "betti_1": 0},
                             "encoding_map": {"additive_share": m}},  # betti_1 not measured on the map
                "departs": {"trained": seed != 102}})
    write_json(root / "manifest.json", {"sweep": "toy", "runs": runs})
    return root


def test_report_tabulates_every_source_and_evaluates_each_claim(tmp_path):
    root = _sweep(tmp_path / "s")
    report = controls_report(root)
    claims = {c["name"]: c for c in report["claims"]}
    assert report["seeds"] == [100, 101, 102] and report["settings_seeds"] == [0, 1] and report["missing_runs"] == []
    assert claims["beats-map"]["passed"] == 1 and claims["beats-map"]["verdict"] == "mixed"
    assert claims["beats-untrained"]["verdict"] == "reproduced"
    assert claims["beats-untrained"]["min_difference"] == pytest.approx(0.35)
    assert claims["departs"]["passed"] == 2 and claims["departs"]["verdict"] == "mixed"
    table = pd.read_parquet(root / "controls_seeds.parquet")
    assert len(table) == 3 * 3 * 2 and table.query("source == 'encoding_map' and measure == 'betti_1'")["value"].isna().all()
    across = pd.read_parquet(root / "controls_across_seeds.parquet").set_index(["source", "measure"])
    assert across.loc[("trained", "additive_share"), "mean"] == pytest.approx(0.85)
    assert across.loc[("trained", "additive_share"), "n"] == 3
    assert ("encoding_map", "betti_1") not in across.index  # never measured: no row, not a zero
    md = (root / "controls.md").read_text()
    assert "| beats-map: more additive" in md and "1/3 | mixed |" in md
    assert "What holds instead: the encoding alone is as additive" in md
    assert (root / "controls.png").is_file()
    saved = json.loads((root / "controls_claims.json").read_text())
    assert saved["claims"][0]["seeds"][0]["seed"] == 100 and "git_commit" in saved["report_made_by"]


def test_an_unfinished_run_is_listed_and_fails_no_claim_silently(tmp_path):
    root = _sweep(tmp_path / "s", finished=(100, 101), pending=(102,))
    report = controls_report(root)
    claims = {c["name"]: c for c in report["claims"]}
    md = (root / "controls.md").read_text()
    # both finished seeds pass beats-untrained; the unfinished seed is a report seed that has not run: not 2/2
    untrained = claims["beats-untrained"]
    assert (untrained["passed"], untrained["of"], untrained["verdict"]) == (2, 3, "incomplete")
    assert untrained["no_run"] == 1 and "2/3 | incomplete |" in md
    assert [(s["seed"], s["passed"], s["note"]) for s in untrained["seeds"]] == [
        (100, True, ""), (101, True, ""), (102, False, "no run")]
    # one pass of two finished and a seed to come cannot reach 3 of 3: mixed whatever seed 102 does
    assert claims["beats-map"]["verdict"] == "mixed"
    assert "What holds instead: the encoding alone is as additive" in md  # settled: mixed, restated
    assert report["missing_runs"] == ["run102"] and report["seeds"] == [100, 101, 102]  # every report seed
    assert "runs not finished: run102" in md and "Report seeds: 100, 101, 102" in md


def test_a_claim_that_needs_fewer_seeds_than_the_sweep_has_is_decided_without_the_unfinished_one(tmp_path):
    controls = {**CONTROLS, "claims": [{**CONTROLS["claims"][1], "min_seeds": 2}]}
    root = _sweep(tmp_path / "s", finished=(100, 101), pending=(102,))
    spec = yaml.safe_load((root / "sweep.yaml").read_text())
    (root / "sweep.yaml").write_text(yaml.safe_dump({**spec, "controls": controls}, sort_keys=False))
    claim = controls_report(root)["claims"][0]
    assert (claim["passed"], claim["of"], claim["verdict"]) == (2, 3, "reproduced")


@pytest.mark.parametrize("change, message", [
    ({"sources": ["untrained"]}, "must include 'trained'"),
    ({"claims": [{**CONTROLS["claims"][0], "control": "pixels"}]}, "not one of the sources"),
    ({"claims": [{**CONTROLS["claims"][0], "control": None}]}, "needs a binding control"),
    ({"claims": [{**CONTROLS["claims"][0], "control": "trained"}]}, "cannot be the trained model"),
    ({"claims": [{**CONTROLS["claims"][2], "control": "untrained"}]}, "has no control"),
    ({"claims": [{**CONTROLS["claims"][0], "value": "a.b"}]}, "exactly one of measure or value"),
    ({"claims": [CONTROLS["claims"][0], CONTROLS["claims"][0]]}, "claim names repeat"),
    ({"claims": [{**CONTROLS["claims"][0], "margin": -1}]}, "greater than or equal"),
    ({"claims": [{**CONTROLS["claims"][0], "direction": "bigger"}]}, "direction"),
    ({"path": "controls.{run}.{measure}"}, "only {source} and {measure}"),
])
def test_a_bad_controls_block_is_one_line_naming_the_culprit(tmp_path, change, message):
    spec = {"name": "toy", "base": "micro", "axes": {"seeds": [100]}, "controls": {**CONTROLS, **change}}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(ConfigError) as err:
        parse_spec(str(path))
    assert message in str(err.value) and "\n" not in str(err.value) and "controls" in str(err.value)


def test_a_sweep_without_a_controls_block_is_refused(tmp_path):
    root = _sweep(tmp_path / "s")
    text = yaml.safe_load((root / "sweep.yaml").read_text())
    text.pop("controls")
    (root / "sweep.yaml").write_text(yaml.safe_dump(text))
    with pytest.raises(ConfigError, match="declares no controls block"):
        controls_report(root)


def test_value_paths_substitute_source_and_measure():
    spec = ControlsSpec.model_validate(CONTROLS)
    assert spec.value_path(spec.claims[0], "untrained") == ["controls", "untrained", "additive_share"]
    assert spec.value_path(spec.claims[2], "trained") == ["departs", "trained"]
