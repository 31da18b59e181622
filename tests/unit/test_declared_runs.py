"""The sweep specs declared in docs/findings-runs/ (checks and reruns committed before their runs, made over later
sessions) expand into valid runs with stable ids: a typo there would otherwise surface only when someone starts them,
perhaps sessions later. The reruns of a suite run set differ from it only by their declared overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from conceptlab.experiments.findings import plan
from conceptlab.experiments.findings_spec import load_suite
from conceptlab.experiments.sweep import expand, parse_spec

DECLARED = sorted((Path(__file__).resolve().parents[2] / "docs" / "findings-runs").glob("*.yaml"))


def test_there_are_declared_specs():
    assert len(DECLARED) >= 5, DECLARED


@pytest.mark.parametrize("spec", DECLARED, ids=lambda p: p.stem)
def test_a_declared_spec_expands_into_runs(spec, tmp_path):
    sweep = expand(str(spec), root=tmp_path / spec.stem)
    assert sweep.runs and len({r.run_id for r in sweep.runs}) == len(sweep.runs)
    assert parse_spec(str(spec)).description.strip()  # says what it is and when it was declared


def test_the_suites_paper_setup_sets_are_the_declared_32_per_class_reruns(tmp_path):
    # the declared reruns became the suite's run sets (recorded when all eleven were made): the same runs, seed for
    # seed, so their run ids (config and analysis versions) are the ones recorded
    p = plan(load_suite(), None, "full", tmp_path / "suite")
    for stem, run_set in (("hidden-emergence-paper-setup-32", "hidden-emergence-paper-setup"),
                          ("hidden-emergence-paper-setup-dense", "hidden-emergence-paper-setup-dense"),
                          ("underspecified-paper-setup-32", "underspecified-paper-setup"),
                          ("guidance-paper-setup-32", "guidance-paper-setup")):
        spec = next(q for q in DECLARED if q.stem == stem)
        rerun = {r.config.train.train_seed: r.run_id for r in expand(str(spec), root=tmp_path / stem).runs}
        suite = {r.config.train.train_seed: r.run_id for r in p.sets[run_set].sweep.runs}
        assert rerun == suite, stem
        assert all(r.config.eval.samples_per_class == 32 and r.config.eval.noise_per_run
                   for r in p.sets[run_set].sweep.runs), stem


def test_the_dense_rerun_is_the_pilots_configuration_on_the_report_seeds(tmp_path):
    # the dense-checkpoint pilot chose the test; its runs on the report seeds must be the pilot's config but the seed,
    # and the 32-per-class rerun's but the checkpoints
    specs = {q.stem: q for q in DECLARED}
    pilot = expand(str(specs["paper-setup-dense-checkpoints-pilot"]), root=tmp_path / "pilot").runs[0].config
    dense = {r.config.train.train_seed: r.config for r in
             expand(str(specs["hidden-emergence-paper-setup-dense"]), root=tmp_path / "dense").runs}
    sparse = {r.config.train.train_seed: r.config for r in
              expand(str(specs["hidden-emergence-paper-setup-32"]), root=tmp_path / "sparse").runs}
    assert sorted(dense) == sorted(sparse) == [200, 201, 202, 203, 204]

    def dump(cfg, drop=()):
        out = cfg.model_dump(mode="json", exclude={"runs_dir", "name"})
        for section in ("data", "train"):
            for key in ("data_seed", "train_seed", *drop):
                out[section].pop(key, None)
        return out

    for seed, cfg in dense.items():
        assert cfg.train.checkpoint_count == 80 and cfg.train.checkpoint_start == 250
        assert dump(cfg) == dump(pilot), seed
        assert dump(cfg, ("checkpoint_start", "checkpoint_count")) == dump(sparse[seed], ("checkpoint_start",
                                                                                          "checkpoint_count")), seed


def test_the_declared_data_efficiency_seeds_are_the_suites_run_set_on_seeds_101_and_102(tmp_path):
    # seeds 101 and 102 of the data-efficiency set, declared before their runs: the suite's runs of those seeds,
    # run for run and id for id (so the runs made from the declaration are the ones recorded)
    p = plan(load_suite(), None, "full", tmp_path / "suite")
    spec = next(q for q in DECLARED if q.stem == "data-efficiency-seeds-101-102")
    declared = expand(str(spec), root=tmp_path / "declared").runs
    suite = p.sets["data-efficiency"].sweep.runs
    assert len(declared) == 72 and len(suite) == 108
    assert {r.config.train.train_seed for r in declared} == {101, 102}
    assert {r.config.train.train_seed for r in suite} == {100, 101, 102}
    assert {r.run_id for r in declared} == {r.run_id for r in suite if r.config.train.train_seed != 100}
