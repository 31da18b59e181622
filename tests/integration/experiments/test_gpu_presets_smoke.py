"""The GPU-scale presets run end to end on the CPU at their full network size, with everything else shrunk.

CI has no GPU and a lent one has minutes counted (one H200 check ran on 2026-12-04: `bench/device_check.sh`,
docs/benchmarks.md), so these presets are checked here first. Each keeps its architecture and diffusion process but trains 1 step on a few images and
measures with the smallest settings the configs allow; the test checks the whole path (data → model → train →
evaluate → store → figures) completes and writes its summary. Running it found a bug the tiny presets could not
show: the attribute classifier's one-cycle schedule divided by zero below 6 optimisation steps. What only a GPU
shows (tensors left on the CPU) is checked where it was found, e.g. the latent edits on the meta device
(`tests/unit/interventions`).
"""

import json

import pytest

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment

ONE_STEP = ["train.steps=1", "train.batch_size=4", "train.checkpoint_schedule=list", "train.checkpoint_steps=[1]"]
TINY_PROBE = [  # the concept probe the shapes presets need, at the micro preset's size
    "eval.probe.images_per_class=60",
    "eval.probe.invalid_images=120",
    "eval.probe.epochs=1",
    "eval.probe.min_accuracy=0.0",
]
BUMPS = ["diffusion.sample_steps=2", "eval.composition.labels_per_region=2", "eval.geometry.labels=16",
         "eval.geometry.homology_points=20", "eval.geometry.homology_landmarks=20"]
SHAPES3D = [f"data.levels.{factor}=[0,{last}]" for factor, last in
            [("floor_hue", 9), ("wall_hue", 9), ("object_hue", 9), ("scale", 7), ("shape", 3), ("orientation", 14)]] + [
    "eval.abstractions.taus=[0.0,1.0]", "eval.abstractions.mi_points=2", "eval.abstractions.mi_samples=1",
    "eval.abstractions.mi_paths=2", "eval.abstractions.mi_bound_points=2", "eval.abstractions.roots=1",
    "eval.abstractions.forks=2", "eval.abstractions.sample_steps=2", "eval.abstractions.probe_images=8",
    "eval.abstractions.conditional_samples=1", "eval.abstractions.classifier_images=50",
    "eval.abstractions.classifier_epochs=1", "eval.abstractions.batch_size=4",
    "eval.abstractions.classifier_min_accuracy=0.0",
    "eval.abstractions.controls=[pixels]",  # the controls' path without a second full-size network's passes (the
    # untrained control's code is architecture-agnostic, and runs in the hierarchy tests at tiny size): 85 s → ~45 s
]
SHAPES = ["data.images_per_class=8", "eval.samples_per_class=2", "diffusion.sample_steps=2"] + TINY_PROBE

PRESETS = {
    "paper": SHAPES,
    "hidden-emergence-paper": SHAPES + ["eval.interventions.samples=2"],
    "factorize-torus-paper": BUMPS,
    "compose-vs-interpolate-paper": BUMPS,
    "interpolate-lesion-paper": BUMPS,
    "abstractions-shapes3d": SHAPES3D,
}


@pytest.fixture(autouse=True)
def _private_probe_cache(tmp_path_factory, monkeypatch, figures):  # and the figures drawn: the whole path
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_gpu_scale_preset_runs_end_to_end_on_the_cpu(preset, tmp_path):
    cfg = load_config(preset, ONE_STEP + PRESETS[preset])
    shipped = load_config(preset)
    assert cfg.model == shipped.model and cfg.diffusion.process == shipped.diffusion.process  # the real network
    run = tmp_path / preset
    run_experiment(cfg, run, progress=False)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["name"] == cfg.name
    assert list((run / "checkpoints").glob("*.safetensors")), "no checkpoint written"
    assert list((run / "figures").glob("*.png")), "no figure written"
