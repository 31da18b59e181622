"""The `celeba` study end to end on a folder in CelebA's layout (`write_fake_celeba`): the face probe reads the
attributes of real (here: drawn) faces of every class, the held-out one included, and gives an untrained network's
samples no credit; a micro run writes the concept-space and intervention tables the findings suite reads; the folder
can come from $CONCEPTLAB_CELEBA and then stays out of the saved config."""

import json

import pytest
import torch
import yaml
from typer.testing import CliRunner

import conceptlab
from conceptlab.analysis.concept_space import evaluate_generations
from conceptlab.cli import app
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import build_run_model, run_experiment
from conceptlab.probes.concept_classifier import ProbeAccuracyError, ProbeConfig
from conceptlab.probes.face_classifier import FaceProbe, load_or_train_face_probe
from conceptlab.studies import build_data

# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("celeba")

PROBE = ProbeConfig(images_per_class=60, invalid_images=120, epochs=20, batch_size=32, min_accuracy=0.95)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "celeba-cache"))
    monkeypatch.delenv("CONCEPTLAB_CELEBA", raising=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, fake_celeba):
    return fake_celeba(tmp_path_factory.mktemp("celeba"), {c: (60, 20) for c in ("00", "01", "10", "11")})


def test_the_face_probe_reads_every_class_and_gives_an_untrained_network_no_credit(folder):
    cfg = load_config("celeba-micro", [f"data.root={folder}"])
    dgp = build_data(cfg.data)
    probe, report = load_or_train_face_probe(PROBE, dgp)
    assert report["source"] == "trained" and report["validity_accuracy"] >= 0.95
    assert min(report["held_out_accuracy"].values()) >= 0.95, report
    assert report["per_class_accuracy"]["01"]["Wearing_Hat"] >= 0.9  # the combination the model never sees
    assert load_or_train_face_probe(PROBE, dgp)[1]["source"] == "cache"
    classes = list(dgp.classes)
    splits = {c: "train" if c in dgp.train_classes else "held_out" for c in classes}
    test = dgp.test_set(8)
    real = evaluate_generations(test.images, classes, splits, dgp.concepts, probe, 0)
    assert real["accuracy"].min() >= 0.75 and real["valid_fraction"].min() == 1.0
    # the null: an untrained network's samples are read as no face at all
    torch.manual_seed(0)
    model = build_run_model(cfg, dgp).eval()
    prompts = torch.stack([dgp.class_prompt(c) for c in classes]).repeat_interleave(8, 0)
    with torch.no_grad():
        noise = model.sample(prompts, 5, torch.Generator().manual_seed(0), 1.0, torch.full_like(prompts[:1], -1.0))
    untrained = evaluate_generations(noise.float().clamp(0, 1), classes, splits, dgp.concepts, probe, 0)
    assert untrained["accuracy"].max() <= 0.25 and untrained["valid_fraction"].mean() <= 0.25
    with pytest.raises(ProbeAccuracyError, match="eval.probe.min_accuracy"):
        load_or_train_face_probe(ProbeConfig(images_per_class=10, invalid_images=10, epochs=1, min_accuracy=0.999), dgp)


def test_a_micro_run_writes_what_the_findings_suite_reads(folder, tmp_path, monkeypatch, figures):
    monkeypatch.setenv("CONCEPTLAB_CELEBA", str(folder))  # the folder from the environment: not in the config
    cfg = load_config("celeba-micro")
    run = tmp_path / "run"
    summary = run_experiment(cfg, run, progress=False)
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["root"] is None
    assert summary["concepts"] == ["Male", "Wearing_Hat"] and summary["held_out_classes"] == ["01"]
    assert set(summary["concept_signal"]) == {"Male", "Wearing_Hat"}
    target = summary["emergence"]["targets"]["01"]
    assert target["name"] == "not male, wearing hat" and "linear" in target["matched"]
    for table in ("concept_space", "interventions", "learning_times", "emergence"):
        assert (run / f"{table}.parquet").is_file(), table
    # its figures, with the faces' attribute names (the only run of this kind that draws them)
    assert {"figures/accuracy.png", "figures/intervention_scores.png"} <= set(summary["figures"]), summary["figures"]
    assert all((run / f).is_file() for f in summary["figures"])
    data = json.loads((run / "data.json").read_text())
    assert data["root"] == str(folder) and data["partition"].startswith("official")
    assert data["training_images_per_class"] == {"00": 32, "10": 32, "11": 32}
    loaded = conceptlab.load_run(run)  # the Python front door gives the run's face probe and its prompts
    assert isinstance(loaded.probe(), FaceProbe) and loaded.class_prompts(["01"]).tolist() == [[1.0, 0.0, 0.0, 1.0]]


def test_the_command_line_runs_and_sizes_a_celeba_preset(folder, tmp_path):
    out = CliRunner().invoke(app, ["run", "celeba-micro", f"data.root={folder}", "--dry-run"])
    assert out.exit_code == 0, out.output
    assert "# memory: this run needs about" in out.output
    out = CliRunner().invoke(app, ["run", "celeba-micro", "--dry-run"])
    assert out.exit_code == 2 and "$CONCEPTLAB_CELEBA" in out.output
