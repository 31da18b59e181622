"""The shapes study's config checks: intervention targets (an int padded, a string taken as written), the warning
where the data lie outside what the concept probe was trained on, and the headline's training classes."""

import pytest

from conceptlab.data.shapes import ShapesDGP
from conceptlab.experiments.loading import ConfigError, load_config, preset_names
from conceptlab.experiments.runner import prepare_run
from conceptlab.studies import concept_space

THREE = "data.concepts=[color, size, background]"


def test_an_int_target_is_padded_to_one_digit_per_concept():
    cfg = load_config("hidden-emergence-tiny", [THREE, "eval.interventions.targets=[11, 101]"])
    assert cfg.eval.interventions.targets == ["011", "101"]
    again = load_config("hidden-emergence-tiny", ["eval.interventions.targets=[11]"])  # two concepts: as written
    assert again.eval.interventions.targets == ["11"]


@pytest.mark.parametrize("target", ['"10"', '"11"', "01", "1010"])
def test_a_target_string_of_the_wrong_length_is_refused_as_data_refuses_it(target):
    """A string is never padded: "10" for three concepts would otherwise become 010, a training class."""
    with pytest.raises(ConfigError, match=r"eval\.interventions\.targets: '\d+' is not a class code: it must "
                                          r"be 3 digits of 0/1 \(one per concept") as err:
        load_config("hidden-emergence-tiny", [THREE, f"eval.interventions.targets=[{target}]"])
    assert "\n" not in str(err.value)


def test_every_shipped_shapes_preset_keeps_within_the_probe_range():
    shapes = [p for p in preset_names() if load_config(p).data.kind == "shapes"]
    assert shapes and all(concept_space.probe_range_warnings(load_config(p)) == [] for p in shapes)


def test_data_outside_the_probe_range_is_warned_of(capsys):
    cfg = load_config("micro", ["data.size_separation=0.02"])
    (line,) = concept_space.probe_range_warnings(cfg)
    assert "data.size_separation=0.02 lies outside [0.1, 0.8]" in line and "size readings" in line
    both = load_config("micro", ["data.color_separation=0.9", "data.jitter=1.2"])
    assert len(concept_space.probe_range_warnings(both)) == 2
    prepare_run(cfg)  # the checks before training (and --dry-run) print it
    assert "warning: data.size_separation=0.02 lies outside" in capsys.readouterr().err
    prepare_run(load_config("micro"))
    assert "warning" not in capsys.readouterr().err


def test_headline_names_the_training_classes():
    cfg = load_config("micro", [THREE, "data.held_out_classes=[111]"])
    line = concept_space.STUDY.headline(cfg, ShapesDGP(cfg.data))
    assert line.startswith("7 training classes (000, 001, 010, 011, 100, 101, 110), held out 111")


def test_the_celeba_study_checks_no_shapes_probe_range():
    """The celeba study shares the shapes study's check; its data have no separations or jitter (its face probe is
    trained on the data's own images), so the probe-range warning is the shapes study's alone."""
    from conceptlab.studies.celeba import STUDY as CELEBA

    assert CELEBA.config_warnings(load_config("celeba-micro")) == []


def test_a_float_target_is_no_class_code():
    with pytest.raises(ConfigError, match="item 0 is 1.0, a float, not a class code"):
        load_config("micro", ["eval.interventions.targets=[1.0]"])


def test_an_evaluation_sample_step_count_the_ddpm_chain_cannot_take_is_refused_at_load():
    """eval.sample_steps is checked with the diffusion section's when the config loads, not after training."""
    ddpm = ["diffusion.process=ddpm", "diffusion.ddpm_steps=100", "diffusion.sample_steps=10",
            "diffusion.prediction=eps"]
    with pytest.raises(ConfigError, match=r"eval.sample_steps=7 must divide diffusion.ddpm_steps=100"):
        load_config("micro", ddpm + ["eval.sample_steps=7"])
    assert load_config("micro", ddpm + ["eval.sample_steps=20"]).eval.sample_steps == 20


def test_the_factorization_refusal_names_the_key_that_set_the_steps():
    with pytest.raises(ConfigError, match=r"eval.sample_steps=7 must divide"):
        load_config("bumps-micro", ["eval.sample_steps=7"])
