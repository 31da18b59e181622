"""Who may lend a run its training (`experiments.training_reuse`): only a folder that trained the same training, with
the current training code and data, to the last step, every checkpoint kept — on folders written by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conceptlab.experiments.loading import config_to_yaml, load_config
from conceptlab.experiments.provenance import TRAINING_VERSION, analysis_versions
from conceptlab.experiments.sweep import training_waves
from conceptlab.experiments.executors import RunTask
from conceptlab.experiments import training_reuse
from conceptlab.experiments.training_reuse import data_versions, find_donor, reuse_training, run_folders_under
from conceptlab.store.run_folder import FORMAT, RunFolder
from conceptlab.studies import study_for

STEPS = ["train.steps=20", "train.checkpoint_steps=[10,20]"]


def _folder(path: Path, overrides=(), steps=(10, 20), trained=20, versions=None, pruned=(), invocations=None,
            lent=None) -> Path:
    """A run folder as the run driver leaves it after training (checkpoint files are placeholders); `lent`: the
    invocations of a training it reused itself."""
    cfg = load_config("micro", STEPS + list(overrides))
    run = RunFolder(path)
    run.checkpoints.mkdir(parents=True)
    run.config.write_text(config_to_yaml(cfg))
    run.provenance.write_text(json.dumps({"format": FORMAT, "versions": versions or analysis_versions(cfg),
                                          "invocations": invocations or [{"host": "lender", "git_commit": "abc"}]}))
    for step in steps:
        (run.checkpoints / f"step_{step:07d}.safetensors").write_bytes(b"weights")
        (run.checkpoints / f"step_{step:07d}.json").write_text("{}")
    record = {"step": trained, "pruned": list(pruned)}
    if lent is not None:
        record["trained_in"] = {"folder": "elsewhere", "run_id": "x", "invocations": lent}
    run.training.write_text(json.dumps(record))
    return path


def test_a_folder_that_trained_the_same_training_lends_it(tmp_path):
    donor = _folder(tmp_path / "A")
    cfg = load_config("micro", STEPS + ["eval.samples_per_class=6"])  # another evaluation, the same training
    found = find_donor(cfg, [tmp_path / "missing", donor])
    assert found is not None and found.folder == donor and found.invocations[0]["host"] == "lender"
    record = reuse_training(cfg, tmp_path / "B", [donor])
    assert record["folder"] == str(donor.resolve()) and record["invocations"][0]["git_commit"] == "abc"
    run = RunFolder(tmp_path / "B")
    assert run.trained_step() == 20 and [s for s, _ in run.list_checkpoints()] == [10, 20]
    assert json.loads(run.provenance.read_text())["versions"] == analysis_versions(cfg)
    # a run that reused B's (reused) training names the run that trained, not B
    again = reuse_training(cfg, tmp_path / "C", [tmp_path / "B"])
    assert again["folder"] == str(donor.resolve())


@pytest.mark.parametrize("why, kwargs", [
    ("another training seed", {"overrides": ["train.train_seed=3"]}),
    ("another model", {"overrides": ["model.dropout=0.1"]}),
    ("training not finished", {"trained": 10}),
    ("a checkpoint missing", {"steps": (20,)}),
    ("a checkpoint pruned by retention", {"pruned": (10,)}),
    ("another training loop", {"versions": {"study": 3, "training": TRAINING_VERSION + 1}}),
    ("a study version older than its data", {"versions": {"study": 0, "training": TRAINING_VERSION}}),
    ("a study version newer than this code", {"versions": {"study": 99, "training": TRAINING_VERSION}}),
])
def test_no_donor_when_training_or_its_code_differ(tmp_path, why, kwargs):
    donor = _folder(tmp_path / "A", **kwargs)
    cfg = load_config("micro", STEPS)
    assert find_donor(cfg, [donor]) is None, why
    assert reuse_training(cfg, tmp_path / "B", [donor]) is None and not (tmp_path / "B").exists()


def test_the_refusal_says_why_in_one_line(tmp_path):
    from conceptlab.experiments.training_reuse import donor_refusal

    cfg = load_config("micro", STEPS)
    assert donor_refusal(cfg, _folder(tmp_path / "ok")) is None
    cases = {
        "trains differently (model.dropout, train.train_seed)": {"overrides": ["train.train_seed=3",
                                                                               "model.dropout=0.1"]},
        "it has trained to step 10 of 20": {"trained": 10},
        "its checkpoints of steps [10] are missing": {"steps": (20,)},
        "retention pruned its checkpoints of steps [10]": {"pruned": (10,)},
        f"training code version {TRAINING_VERSION + 1} trained it": {
            "versions": {"study": 3, "training": TRAINING_VERSION + 1}},
        "study version 0 made it": {"versions": {"study": 0, "training": TRAINING_VERSION}},
    }
    for i, (message, kwargs) in enumerate(cases.items()):
        why = donor_refusal(cfg, _folder(tmp_path / str(i), **kwargs))
        assert why is not None and message in why and "\n" not in why, (message, why)
    assert "not a run folder" in donor_refusal(cfg, tmp_path)


def test_a_folder_trained_in_another_precision_does_not_lend(tmp_path):
    """`train.bf16: null` resolves per machine: a lender trained where it resolved the other way made other weights
    than this run would, so the run trains here instead; an evaluation-only invocation of the lender in this
    precision changes nothing, and a lender that reused a training itself is judged by that training's record."""
    from conceptlab.experiments.training_reuse import donor_refusal
    from conceptlab.train.precision import resolve_bf16

    cfg = load_config("micro", STEPS)
    here = resolve_bf16(cfg.train.bf16, "cpu")
    name = {True: "bf16 autocast", False: "fp32"}
    same, other = {"bf16": here}, {"bf16": not here}
    assert donor_refusal(cfg, _folder(tmp_path / "A", invocations=[{**same, "trained": [0, 20]}])) is None
    why = donor_refusal(cfg, _folder(tmp_path / "B", invocations=[{**other, "trained": [0, 20]},
                                                                   {**same, "trained": None, "measured": 2}]))
    assert why == f"it was trained in {name[not here]}; this run would train in {name[here]} here"
    assert find_donor(cfg, [tmp_path / "B", tmp_path / "A"]).folder == tmp_path / "A"
    # resumed on the other machine mid-training: both precisions trained it
    assert "trained in bf16 autocast + fp32" in donor_refusal(
        cfg, _folder(tmp_path / "C", invocations=[{**same, "trained": [0, 10]}, {**other}]))
    assert donor_refusal(cfg, _folder(tmp_path / "D", invocations=[{**other, "trained": None, "measured": 2}],
                                      lent=[{**same, "trained": [0, 20]}])) is None
    assert "it was trained in" in donor_refusal(
        cfg, _folder(tmp_path / "E", invocations=[{**same, "trained": None}], lent=[{**other, "trained": [0, 20]}]))
    bad = _folder(tmp_path / "F")
    RunFolder(bad).training.write_text(json.dumps({"step": 20, "trained_in": "not a record"}))
    assert donor_refusal(cfg, bad) == \
        "it cannot be read (its training.json names a lent training without its invocations)"  # not a traceback


def test_a_study_declares_since_which_version_its_data_are_the_same(tmp_path, monkeypatch):
    cfg = load_config("micro", STEPS)
    study = study_for(cfg.data.kind)
    assert list(data_versions(cfg)) == [study.version]  # by default: its own version only
    old = _folder(tmp_path / "A", versions={"study": study.version - 1, "training": TRAINING_VERSION})
    assert find_donor(cfg, [old]) is None
    monkeypatch.setattr(type(study), "data_since", study.version - 1, raising=False)
    assert list(data_versions(cfg)) == [study.version - 1, study.version]
    assert find_donor(cfg, [old]) is not None  # an evaluation-only bump keeps the training


def test_a_folder_with_training_of_its_own_is_never_seeded(tmp_path):
    donor = _folder(tmp_path / "A")
    cfg = load_config("micro", STEPS)
    own = _folder(tmp_path / "B", trained=10, steps=(10,))
    assert reuse_training(cfg, own, [donor]) is None
    with pytest.raises(ValueError, match="training of its own"):
        training_reuse.seed_from(find_donor(cfg, [donor]), own, cfg)


def test_waves_train_each_shared_training_once(tmp_path):
    a = load_config("micro", STEPS)
    b = load_config("micro", STEPS + ["eval.samples_per_class=6"])
    c = load_config("micro", STEPS + ["train.train_seed=5"])
    tasks = [RunTask(name, tmp_path / name, cfg) for name, cfg in (("a", a), ("b", b), ("c", c))]
    for t in tasks:
        RunFolder(t.run_dir).root.mkdir()
        RunFolder(t.run_dir).config.write_text(config_to_yaml(t.config))
    waves = training_waves(tasks, [t.run_dir for t in tasks])
    assert [[t.run_id for t in w] for w in waves] == [["a", "c"], ["b"]]
    assert waves[1][0].donors == (tmp_path / "a",)
    # with a finished lender among the candidates, everything runs at once
    lender = _folder(tmp_path / "lender")
    waves = training_waves(tasks, [lender] + [t.run_dir for t in tasks])
    assert [[t.run_id for t in w] for w in waves] == [["a", "b", "c"]]
    assert waves[0][1].donors[0] == lender
    # a sweep without shared training: one wave, no donors
    waves = training_waves([tasks[0], tasks[2]], [tasks[0].run_dir, tasks[2].run_dir])
    assert len(waves) == 1 and all(not t.donors for t in waves[0])


def test_run_folders_under_a_sweep_root_and_a_root_of_run_sets(tmp_path):
    _folder(tmp_path / "sweep" / "r1")
    _folder(tmp_path / "suite" / "runs" / "set" / "r2")
    (tmp_path / "suite" / ".hidden").mkdir()
    assert run_folders_under([tmp_path / "sweep", tmp_path / "suite"]) == [tmp_path / "sweep" / "r1",
                                                                           tmp_path / "suite" / "runs" / "set" / "r2"]
    assert run_folders_under([tmp_path / "sweep" / "r1"]) == [tmp_path / "sweep" / "r1"]  # a run folder itself


def test_a_sweep_without_reuse_runs_every_run_in_one_wave_without_donors(tmp_path):
    """`sweep run --no-reuse-training`: the executor gets every run at once and none may borrow a training."""
    import yaml

    from conceptlab.experiments.sweep import expand, run_sweep

    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"description": "d", "base": "micro", "overrides": STEPS,
                                    "axes": {"grid": {"eval.samples_per_class": [4, 6]}}}))
    seen = []

    class Recorder:
        name = "recorder"

        def run(self, tasks, progress=True, console=None, on_outcome=None):
            seen.append(list(tasks))
            return []

    sweep = expand(str(spec), root=tmp_path / "root")
    run_sweep(sweep, Recorder(), progress=False, reuse_training=False)
    assert len(seen) == 1 and len(seen[0]) == 2 and all(not t.donors for t in seen[0])
    seen.clear()
    run_sweep(sweep, Recorder(), progress=False)  # with reuse: the shared training first, then its other run
    assert [len(w) for w in seen] == [1, 1] and seen[1][0].donors == (seen[0][0].run_dir,)


@pytest.mark.parametrize("crash_at", ["checkpoint", "state"])
def test_a_seeding_a_crash_interrupts_leaves_a_folder_that_retrains_or_says_where_its_training_was_done(
        tmp_path, monkeypatch, crash_at):
    """Killed while linking a checkpoint, the folder has no training record and no state: the run driver trains it in
    place from step 0. Killed while linking the training state, the record is already written: training is done
    and `trained_in` names the lender (never a borrowed training that claims to have been trained in place)."""
    import torch

    from conceptlab.train.checkpoints import save_training_state

    donor = _folder(tmp_path / "A")
    save_training_state(RunFolder(donor).train_state, {"w": torch.zeros(1)}, {"step": 20})
    real = training_reuse._link_or_copy

    def link(source, dest):
        if (crash_at == "state") == (Path(source).name == RunFolder(donor).train_state.name):
            raise KeyboardInterrupt  # the process dies here
        real(source, dest)

    monkeypatch.setattr(training_reuse, "_link_or_copy", link)
    cfg = load_config("micro", STEPS + ["eval.samples_per_class=6"])
    with pytest.raises(KeyboardInterrupt):
        reuse_training(cfg, tmp_path / "B", [donor])
    run = RunFolder(tmp_path / "B")
    if crash_at == "checkpoint":
        assert not run.training.exists() and not run.train_state.exists() and run.trained_step() == 0
        assert training_reuse.trained_in(run.root) is None
    else:
        assert run.trained_step() == 20 and not run.train_state.exists()
        assert training_reuse.trained_in(run.root)["folder"] == str(donor.resolve())
        assert [s for s, _ in run.list_checkpoints()] == [10, 20]
