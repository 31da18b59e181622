"""Config loading: presets, YAML files, key=value overrides, and one-line errors."""

import pytest

from conceptlab.data.shapes import ShapesDataConfig
from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import ConfigError, apply_overrides, load_config, preset_names


def test_every_preset_loads():
    names = preset_names()
    assert {"concept-space-tiny", "paper", "micro", "concept-signal-color-first-tiny"} <= set(names)
    for name in names:
        cfg = load_config(name)
        assert isinstance(cfg, RunConfig)
        assert cfg.name == name


def test_extends_merges_nested_sections():
    base = load_config("concept-space-tiny")
    child = load_config("concept-signal-color-first-tiny")
    assert child.data.color_separation == 0.8 and child.data.size_separation == 0.1
    assert child.model == base.model and child.diffusion == base.diffusion
    assert child.train.lr == base.train.lr and child.train.checkpoint_count == 24


def test_overrides_nested_keys_and_types():
    cfg = load_config("micro", ["train.steps=7", "data.concepts=[color, size, background]", "train.ema_decay=null"])
    assert cfg.train.steps == 7
    assert cfg.data.concepts == ["color", "size", "background"]
    assert cfg.train.ema_decay is None


def test_yaml_file_source(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("extends: micro\ntrain:\n  steps: 3\n")
    cfg = load_config(str(path))
    assert cfg.name == "mine" and cfg.train.steps == 3 and cfg.data.images_per_class == 64


def test_a_missing_parent_is_named_with_the_file_that_extends_it(tmp_path):
    """`extends: missing.yaml` said only that the missing file does not exist, not which config asked for it."""
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: gone.yaml\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(tmp_path / "a.yaml"))
    message = str(err.value)
    assert "a.yaml' extends 'b.yaml'" in message and "b.yaml' extends 'gone.yaml'" in message, message
    assert "gone.yaml' does not exist" in message and "\n" not in message
    (tmp_path / "c.yaml").write_text("extends: no-such-preset\n")
    with pytest.raises(ConfigError, match="c.yaml' extends 'no-such-preset': unknown preset 'no-such-preset'"):
        load_config(str(tmp_path / "c.yaml"))


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["train.stepz=5"], "unknown config key 'train.stepz'; allowed here: steps"),
        (["train.steps=many"], "bad value for train.steps: 'many'"),
        (["data.color_separation=-0.1"], "bad value for data.color_separation: -0.1"),
        (["data.held_out_classes=[00, 01, 10, 11]"], "removes every training class"),
        (["data.concepts=[color, smell]"], "data.concepts.1"),
        (["steps"], "must look like key=value"),
        (["train.steps.x=1"], "train.steps is a value"),
        (["eval.interventions.targets=[]"], "bad value for eval.interventions.targets: [] (is empty: name at least one class code"),
    ],
)
def test_bad_input_is_one_clear_line(overrides, fragment):
    with pytest.raises(ConfigError) as err:
        load_config("micro", overrides)
    message = str(err.value)
    assert fragment in message
    assert "\n" not in message


def test_unknown_preset_lists_the_available_ones():
    with pytest.raises(ConfigError, match="unknown preset 'nope'; available: .*concept-space-tiny"):
        load_config("nope")


def test_default_concept_graph_holds_out_multi_concept_classes():
    assert ShapesDataConfig().resolved_held_out_classes() == ["11"]
    three = ShapesDataConfig(concepts=["color", "size", "background"])
    assert three.resolved_train_classes() == ["000", "001", "010", "100"]
    assert three.resolved_held_out_classes() == ["011", "101", "110", "111"]


def test_training_hash_ignores_evaluation_settings():
    a = load_config("micro")
    b = load_config("micro", ["eval.samples_per_class=9"])
    c = load_config("micro", ["train.lr=0.01"])
    assert a.training_hash() == b.training_hash() != c.training_hash()


def test_apply_overrides_does_not_mutate_input():
    data = {"train": {"steps": 1}}
    apply_overrides(data, ["train.steps=2"])
    assert data == {"train": {"steps": 1}}


def test_a_mapping_for_a_section_changes_only_the_keys_it_names():
    """`eval.probe={epochs: 2}` keeps the preset's other probe keys (it reset them to the section's defaults); a
    dict-valued field is set whole, and so is a data section of another kind."""
    probe = load_config("micro").eval.probe
    assert load_config("micro", ["eval.probe={epochs: 2}"]).eval.probe == probe.model_copy(update={"epochs": 2})
    nested = load_config("micro", ["train={steps: 4}", "eval={probe: {epochs: 2}}"])
    assert nested.model_dump() == load_config("micro", ["train.steps=4", "eval.probe.epochs=2"]).model_dump()
    masked = load_config("micro", ["data.prompt_mask_fraction={color: 0.5}", "data.prompt_mask_fraction={size: 0.2}"])
    assert masked.data.prompt_mask_fraction == {"size": 0.2}
    assert load_config("abstractions-shapes3d", ["data.fixed={wall_hue: 1}"]).data.fixed == {"wall_hue": 1}
    assert load_config("micro", ["data={kind: bumps}"]).data.kind == "bumps"
    with pytest.raises(ConfigError, match="unknown config key 'train.stepz'"):
        load_config("micro", ["train={stepz: 4}"])


def test_class_codes_survive_yaml_number_parsing():
    cfg = load_config("micro", ["data.concepts=[color, size, background]", "data.held_out_classes=[011, 101, 110]"])
    assert cfg.data.held_out_classes == ["011", "101", "110"]
    assert "111" in cfg.data.resolved_train_classes()
    cfg2 = load_config("micro", ["data.held_out_classes=[01]"])
    assert cfg2.data.resolved_train_classes() == ["00", "10", "11"]


def test_run_folders_get_unique_numbers_across_names_and_processes(tmp_path):
    import multiprocessing as mp

    from conceptlab.experiments.runner import new_run_dir

    first = new_run_dir(tmp_path, "alpha")
    second = new_run_dir(tmp_path, "beta gamma")
    assert (first.name, second.name) == ("0001-alpha", "0002-beta-gamma")
    with mp.get_context("spawn").Pool(2) as pool:  # each spawned child imports torch: two are enough to race
        made = pool.starmap(new_run_dir, [(tmp_path, f"run{i}") for i in range(8)])
    numbers = [p.name.split("-")[0] for p in made]
    assert len(set(numbers)) == 8 and min(numbers) == "0003"
