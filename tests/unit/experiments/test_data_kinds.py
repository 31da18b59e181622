"""Data kinds in the typed config: `data.kind` selects shapes / bumps / shapes3d, each with its own keys,
its evaluation section filled in, and one-line errors that name the key without the union tag."""

import pytest

from conceptlab.experiments.config import BumpsDataConfig, RunConfig, Shapes3DDataConfig
from conceptlab.experiments.loading import ConfigError, validate

VE = {"process": "ve", "prediction": "v"}


def test_missing_kind_means_shapes():
    cfg = validate({"data": {"concepts": ["color"]}})
    assert cfg.data.kind == "shapes" and cfg.eval.composition is None and cfg.eval.abstractions is None


def test_bumps_kind_gets_its_evaluation_defaults():
    cfg = validate({"data": {"kind": "bumps", "image": "sos", "border": 6}})
    assert isinstance(cfg.data, BumpsDataConfig) and cfg.data.drawn_size == 44
    assert cfg.eval.composition is not None and cfg.eval.geometry is not None
    assert cfg.eval.abstractions is None


def test_shapes3d_kind_gets_its_evaluation_defaults():
    cfg = validate({"data": {"kind": "shapes3d"}, "diffusion": VE})
    assert isinstance(cfg.data, Shapes3DDataConfig) and cfg.eval.abstractions is not None
    assert cfg.eval.abstractions.taus[0] == 0.0 and cfg.eval.abstractions.taus[-1] == 1.0


def test_resolved_config_round_trips():
    cfg = validate({"data": {"kind": "bumps", "held_out": {"kind": "x_band", "low": 19, "high": 25}}})
    again = RunConfig.model_validate(cfg.model_dump(mode="json"))
    assert again == cfg


@pytest.mark.parametrize(
    "data, fragment",
    [
        ({"data": {"kind": "bumps", "concepts": ["color"]}}, "unknown config key 'data.concepts'; allowed here: kind, image"),
        ({"data": {"kind": "bumps", "sigma": [0, 1]}}, "data.sigma"),
        ({"data": {"kind": "bumps", "held_out": {"kind": "x_band", "low": 5, "high": 2}}}, "low ≤ high"),
        ({"data": {"kind": "bumps", "fraction": 0}}, "data.fraction"),
        ({"data": {"kind": "nope"}}, "unknown data kind 'nope'; built in: shapes, bumps, shapes3d"),
        ({"data": {"kind": "shapes3d", "attributes": ["hue"]}, "diffusion": VE}, "data.attributes.0"),
        ({"data": {"kind": "shapes3d", "fixed": {"shape": 9}}, "diffusion": VE}, "fixed.shape = 9"),
        ({"data": {"kind": "shapes3d", "levels": {"shape": [0]}}, "diffusion": VE}, "levels.shape"),
        ({"data": {"kind": "shapes3d", "source": "h5"}, "diffusion": VE}, "h5_path"),
        ({"data": {"kind": "shapes3d"}}, "diffusion.process=ve"),
        ({"data": {"kind": "shapes3d"}, "diffusion": VE, "eval": {"abstractions": {"taus": [0.0, 1.5]}}}, "[0, 1]"),
        ({"data": {"kind": "shapes3d"}, "diffusion": VE, "eval": {"abstractions": {"forks": 1}}}, "forks"),
        ({"data": {"kind": "bumps"}, "eval": {"composition": {"tolerance": 0}}}, "eval.composition.tolerance"),
        ({"eval": {"composition": {}}}, "eval.composition needs data.kind=bumps"),
        ({"data": {"kind": "bumps"}, "eval": {"abstractions": {}}}, "eval.abstractions needs data.kind=shapes3d"),
        ({"data": {"kind": "bumps", "image_size": 30}}, "divisible"),
    ],
)
def test_bad_input_is_one_clear_line(data, fragment):
    with pytest.raises(ConfigError) as err:
        validate(data)
    message = str(err.value)
    assert fragment in message and "\n" not in message


def test_run_model_is_shaped_by_the_data():
    from conceptlab.studies import build_data
    from conceptlab.experiments.runner import build_run_model

    small = {"widths": [8, 16], "blocks_per_level": 1, "mid_attention": False, "norm_groups": 4}
    cfg = validate({"data": {"kind": "shapes3d", "image_size": 8}, "diffusion": {**VE, "label_dropout": 0.5}, "model": small})
    model = build_run_model(cfg, build_data(cfg.data))
    assert model.image_shape == (3, 8, 8) and model.process.attribute_sizes == (10, 4)
    cfg = validate({"data": {"kind": "bumps", "image_size": 8},
                    "model": {**small, "prompt_encoding": "sinusoidal", "prompt_period": 8}})
    model = build_run_model(cfg, build_data(cfg.data))
    assert model.image_shape == (1, 8, 8) and model.net.prompt_encoder.null_value == -1.0
