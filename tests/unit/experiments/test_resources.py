"""The memory estimate of a run and the limit it is checked against: parts that follow the config, the hard cap
from the environment, and refusals that name the keys driving the estimate."""

import pytest

from conceptlab.experiments.loading import ConfigError, load_config
from conceptlab.experiments.resources import (
    CAP_ENV,
    ResourceError,
    available_memory,
    check_memory,
    estimate_memory,
    memory_cap,
    study_memory,
)
from conceptlab.studies import study_for


def _estimate(preset, overrides=()):
    cfg = load_config(preset, list(overrides))
    return estimate_memory(cfg, study_for(cfg.data.kind).build_data(cfg.data))


def test_every_part_is_counted_and_follows_its_keys():
    base = _estimate("micro")
    assert set(base.parts) == {"runtime", "data", "model", "training", "evaluation"}
    assert all(v > 0 for v in base.parts.values())
    assert base.peak == base.parts["runtime"] + base.parts["data"] + base.parts["model"] + max(
        base.parts["training"], base.parts["evaluation"])
    more_data = _estimate("micro", ["data.images_per_class=640"])
    assert more_data.parts["data"] == pytest.approx(10 * base.parts["data"], rel=1e-6)
    bigger_batch = _estimate("micro", ["train.batch_size=256"])
    assert 3 < bigger_batch.parts["training"] / base.parts["training"] < 5
    wider = _estimate("micro", ["model.widths=[32,64]"])
    assert 3 < wider.parts["model"] / base.parts["model"] < 5  # about 4× the parameters


def test_a_network_is_sized_once_per_process_and_again_for_anything_it_depends_on(monkeypatch):
    import conceptlab.experiments.resources as resources

    calls = []
    real = resources.network_footprint

    def counted(net, *args):
        calls.append(args)
        return real(net, *args)

    monkeypatch.setattr(resources, "network_footprint", counted)
    monkeypatch.setattr(resources, "_FOOTPRINTS", {})
    first, again = _estimate("micro"), _estimate("micro", ["train.lr=0.01"])  # another run, the same network
    assert len(calls) == 1 and again.parts["training"] == first.parts["training"]
    for other in (["model.widths=[32,64]"], ["train.batch_size=256"], ["data.image_size=16"]):
        _estimate("micro", other)
    assert len(calls) == 4  # the widths, the batch and the image shape each size it anew


def test_the_study_part_is_known_before_the_data_is_built():
    cfg = load_config("bumps-micro", ["data.spacing=[0.01,0.01]"])
    needs = study_memory(cfg)
    assert needs.data > 1e9 and "data.spacing" in needs.data_keys  # 10⁶ labels' renders, from the config alone
    early = estimate_memory(cfg, needs=needs)
    assert early.parts["model"] == early.parts["training"] == 0


def test_the_cap_from_the_environment(monkeypatch):
    monkeypatch.delenv(CAP_ENV, raising=False)
    assert memory_cap() is None
    monkeypatch.setenv(CAP_ENV, "2.5")
    assert memory_cap() == int(2.5e9) and available_memory().bytes <= 2.5e9
    assert CAP_ENV in available_memory().source
    for bad in ("0", "-1", "nan", "inf", "lots"):
        monkeypatch.setenv(CAP_ENV, bad)
        with pytest.raises(ConfigError, match=CAP_ENV):
            memory_cap()


def test_a_run_over_the_cap_is_refused_naming_its_keys_and_values(monkeypatch):
    monkeypatch.setenv(CAP_ENV, "1")
    cfg = load_config("micro", ["data.images_per_class=100000"])
    with pytest.raises(ResourceError) as err:
        check_memory(cfg)
    line = str(err.value)
    assert "needs about" in line and "1.00 GB" in line and "data.images_per_class=100000" in line
    assert "\n" not in line
    monkeypatch.setenv(CAP_ENV, "100")
    estimate = check_memory(load_config("micro"))  # but for this process's own memory, which earlier tests grew
    assert estimate.peak - estimate.parts["runtime"] < 1e9, estimate


def test_the_largest_evaluation_pass_is_the_one_a_cpu_run_samples(monkeypatch):
    """hidden-emergence-paper on a CPU samples the interventions `cpu_max_batch` images at a time, and its diffusers
    scale 1.0 is plain conditional sampling (no unconditional pass): its largest pass is not doubled, nor sized at the
    GPU's `max_batch`; classifier-free guidance variants do double it."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = load_config("hidden-emergence-paper")
    iv = cfg.eval.interventions
    assert iv.cpu_max_batch is not None and iv.cpu_max_batch < iv.max_batch and iv.cfg is None
    needs = study_for("shapes").memory_needs(cfg)
    largest = max(cfg.eval.samples_per_class * 2 ** len(cfg.data.concepts), iv.cpu_max_batch, iv.samples)
    assert needs.eval_batch == largest <= 128
    guided = load_config("hidden-emergence-paper", ["eval.interventions.cfg={scales: [3.0]}", "diffusion.cfg_dropout=0.1"])
    assert study_for("shapes").memory_needs(guided).eval_batch == 2 * largest


def test_training_flops_follow_steps_batch_and_network():
    from conceptlab.experiments.resources import training_flops

    base = training_flops(load_config("micro"))
    assert base is not None and base > 0
    assert training_flops(load_config("micro", ["train.steps=40"])) == pytest.approx(2 * base)
    assert training_flops(load_config("micro", ["train.batch_size=128"])) == pytest.approx(2 * base)
    wider = training_flops(load_config("micro", ["model.widths=[32,64]"]))
    assert 3 < wider / base < 5  # convolutions' arithmetic grows with the square of the width
    larger = training_flops(load_config("micro", ["data.image_size=64"]))
    assert 3 < larger / base < 5  # and with the pixels


@pytest.mark.parametrize("preset", ["micro", "bumps-micro", "abstractions-micro", "paper"])
def test_every_built_in_data_kind_and_the_paper_network_are_sized(preset):
    from conceptlab.experiments.resources import training_flops

    cfg = load_config(preset)
    flops = training_flops(cfg)
    assert flops is not None and flops > 0, preset
    if preset == "paper":  # 460 GFLOP a step of 64 images (bench/train_step.py counts the same)
        assert flops / cfg.train.steps == pytest.approx(460e9, rel=0.01)


def test_a_run_whose_data_cannot_be_built_here_is_not_sized(tmp_path):
    from conceptlab.experiments.resources import training_flops

    cfg = load_config("celeba-micro", [f"data.root={tmp_path}"])  # no CelebA files there
    assert training_flops(cfg) is None
    narrow = load_config("micro", ["data.image_size=10"])  # 5 × 5 after unshuffling: the network cannot halve it
    assert training_flops(narrow) is None


def test_a_bug_in_sizing_is_raised_not_taken_for_missing_data(monkeypatch):
    import conceptlab.experiments.resources as resources

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(resources, "build_data", broken)
    monkeypatch.setattr(resources, "_DATA_SHAPES", {})
    with pytest.raises(KeyError):
        resources.training_flops(load_config("micro", ["data.images_per_class=65"]))
