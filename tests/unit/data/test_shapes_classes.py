"""The `shapes` data's class lists: what train_classes and held_out_classes resolve to, as their descriptions say,
and the refusals of overlapping, repeated or short codes and of a jitter that makes the size classes overlap."""

import pytest
from pydantic import ValidationError

from conceptlab.data.shapes import ShapesDataConfig
from conceptlab.experiments.loading import ConfigError, load_config

THREE = ["color", "size", "background"]


def description(field: str) -> str:
    return ShapesDataConfig.model_fields[field].description


def test_held_out_classes_alone_trains_on_every_other_class_as_described():
    """Holding out 111 of three concepts trains on the six others, multi-concept ones included (not only the
    classes with at most one non-default concept, the default when neither list is set): as the fields say."""
    held = ShapesDataConfig(concepts=THREE, held_out_classes=["111"])
    assert held.resolved_train_classes() == ["000", "001", "010", "011", "100", "101", "110"]
    assert held.resolved_held_out_classes() == ["111"]
    assert "when held_out_classes is set, every class not held out" in description("train_classes")
    assert "Setting it alone trains on every other class, multi-concept ones included" in description(
        "held_out_classes")
    neither = ShapesDataConfig(concepts=THREE)
    assert neither.resolved_train_classes() == ["000", "001", "010", "100"]
    assert "when neither is set, the classes with at most one non-default concept" in description("train_classes")


def test_a_class_both_trained_on_and_held_out_is_refused():
    with pytest.raises(ValidationError, match=r"classes \['11'\] are in both train_classes and held_out_classes"):
        ShapesDataConfig(train_classes=["00", "01", "10", "11"], held_out_classes=["11"])
    with pytest.raises(ConfigError, match="in both train_classes and held_out_classes") as err:
        load_config("micro", ["data.train_classes=[00, 01, 10]", "data.held_out_classes=[10, 11]"])
    assert "\n" not in str(err.value)
    both = ShapesDataConfig(train_classes=["00", "01"], held_out_classes=["11"])  # disjoint: 10 is neither
    assert both.resolved_train_classes() == ["00", "01"] and both.resolved_held_out_classes() == ["11"]


@pytest.mark.parametrize("field", ["train_classes", "held_out_classes"])
def test_a_class_listed_twice_is_refused(field):
    with pytest.raises(ValidationError, match=rf"{field}: class codes \['00'\] are listed more than once"):
        ShapesDataConfig(**{field: ["00", "00", "01"]})


def test_only_an_int_code_is_padded():
    """YAML reads an unquoted 11 as an int: padded to one digit per concept; a string is taken as written."""
    assert load_config("micro", ["data.concepts=[color, size, background]", "data.held_out_classes=[11]"]) \
        .data.held_out_classes == ["011"]
    with pytest.raises(ConfigError, match=r"held_out_classes: '11' is not a class code: it must be 3 digits of 0/1"):
        load_config("micro", ["data.concepts=[color, size, background]", 'data.held_out_classes=["11"]'])


def test_jitter_above_four_thirds_is_refused():
    """Above 4/3 the size jitter (±3/8·Δs·jitter) passes Δs/2: large and small sizes overlap."""
    assert ShapesDataConfig(jitter=4 / 3).jitter == pytest.approx(4 / 3)
    with pytest.raises(ConfigError, match=r"data\.jitter.*above 4/3.*large and small sizes overlap") as err:
        load_config("micro", ["data.jitter=1.4"])
    assert "\n" not in str(err.value)
