"""StrictConfig, the base of every config section: a boolean is not a number, in any field type or section."""

from typing import Any, Literal

import pytest
from pydantic import ValidationError

from conceptlab.config_base import StrictConfig
from conceptlab.experiments.loading import ConfigError, load_config

REFUSED = "expected a number, got a boolean"


class Section(StrictConfig):
    count: int = 1
    rate: float | None = 0.5
    pair: tuple[float, float] = (0.0, 1.0)
    steps: list[int] = []
    by_code: dict[int, float] = {}
    source: Literal["final"] | int = "final"
    switch: bool | None = False
    options: dict[str, Any] = {}


@pytest.mark.parametrize("override, key", [
    ("train.steps=yes", "train.steps"),
    ("train.lr=true", "train.lr"),
    ("train.checkpoint_steps=[true, 4]", "train.checkpoint_steps"),
    ("train.grad_clip=on", "train.grad_clip"),
    ("data.prompt_mask_fraction={color: false}", "data.prompt_mask_fraction"),
    ("eval.probe.epochs=true", "eval.probe.epochs"),
])
def test_a_boolean_override_of_a_number_is_one_line_naming_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        load_config("micro", [override])
    message = str(err.value)
    assert f"{key}:" in message and REFUSED in message and "\n" not in message


@pytest.mark.parametrize("field, value", [
    ("count", True), ("rate", False), ("pair", (1.0, True)), ("steps", [2, True]), ("by_code", {1: True}),
    ("by_code", {True: 1.0}), ("source", True),
])
def test_every_number_type_refuses_a_boolean_at_load_and_on_assignment(field, value):
    with pytest.raises(ValidationError, match=REFUSED):
        Section.model_validate({field: value})
    with pytest.raises(ValidationError, match=REFUSED):
        setattr(Section(), field, value)


def test_booleans_stay_accepted_where_a_boolean_is_meant():
    section = Section(switch=True, options={"flag": False}, count=3, rate=1, source=7)
    assert section.switch is True and section.options == {"flag": False}
    assert (section.count, section.rate, section.source) == (3, 1.0, 7)
    cfg = load_config("micro", ["train.bf16=yes", "train.tensorboard=false"])
    assert cfg.train.bf16 is True and cfg.train.tensorboard is False


@pytest.mark.parametrize("override", ["data.held_out_classes=[true]", "eval.interventions.targets=[true]"])
def test_a_boolean_is_no_class_code(override):
    """YAML reads a code such as 01 as an int, which the config turns back into digits; a boolean must not become
    the code 01 (true is an int in Python) or "True", but one line naming the key."""
    with pytest.raises(ConfigError, match=rf"bad value for {override.split('=')[0]}(\.0: True|: \[True\] \(item 0 is "
                                          r"True, a boolean, not a class code)"):
        load_config("micro", [override])
    assert load_config("micro", [override.replace("true", "11")]).model_dump() is not None
