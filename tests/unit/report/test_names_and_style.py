"""Human names and the shared style's small rules."""

from conceptlab.report import names as nm
from conceptlab.report.style import class_colors, panel_grid, seed_style


def test_names_replace_codes_and_identifiers():
    assert nm.intervention("over_prompting") == "over-prompting"
    assert nm.intervention("my_new_one") == "my new one"
    assert nm.class_label("11", {"11": "blue small"}) == "blue small"
    assert nm.class_label("11", {"11": "blue small"}, with_code=True) == "blue small (11)"
    assert nm.class_label("11") == "class 11"
    assert nm.config_key("data.color_separation") == "colour separation Δc"
    assert nm.config_key("model.dropout") == "dropout"
    assert nm.config_key("data.held_out.scope") == "held-out scope" and nm.config_key("data.fraction").startswith("fraction")
    assert nm.config_key("eval.geometry.label_density") == "label density"  # nested keys by their last part
    assert nm.value_name("color", 1, {"color": ["red", "blue"]}) == "blue"
    assert nm.human("wall_hue") == "wall hue"


def test_layouts_wrap_and_seeds_differ():
    assert panel_grid(4) == (2, 2) and panel_grid(1) == (1, 1) and panel_grid(3) == (2, 2)
    assert len({(s["ls"], s["marker"]) for s in map(seed_style, range(6))}) == 6


def test_classes_named_by_colour_get_shades_of_their_colour():
    colours = class_colors(["00", "01", "10", "11"], {"00": "red large", "01": "red small", "10": "blue large",
                                                      "11": "blue small"})
    assert len(set(colours.values())) == 4
    assert colours["00"].startswith("#8E") and colours["10"].startswith("#08")  # dark red, dark blue
    assert len(set(class_colors(["a", "b"]).values())) == 2  # no names: the palette
