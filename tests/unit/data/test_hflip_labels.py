"""train.hflip only for data kinds whose labels survive a horizontal flip (a flipped bump keeps its x label)."""

import pytest

from conceptlab.config_base import DataSection
from conceptlab.data.celeba import CelebADataConfig
from conceptlab.experiments.loading import ConfigError, load_config


@pytest.mark.parametrize("preset, kind", [("bumps-micro", "bumps"), ("concept-space-tiny", "shapes"),
                                          ("micro", "shapes"), ("abstractions-micro", "shapes3d")])
def test_hflip_is_refused_for_kinds_whose_labels_hold_a_position_or_orientation(preset, kind):
    with pytest.raises(ConfigError) as err:
        load_config(preset, ["train.hflip=0.5"])
    message = str(err.value)
    assert "train.hflip=0.5" in message and f"data.kind={kind}" in message and "\n" not in message
    assert load_config(preset, ["train.hflip=0"]).train.hflip == 0.0  # off: as before


@pytest.mark.parametrize("preset", ["celeba-micro", "celeba-lli-tiny", "celeba-lli-paper"])
def test_the_celeba_presets_flip_as_the_authors_loader_does(preset):
    cfg = load_config(preset)
    assert cfg.data.kind == "celeba" and cfg.train.hflip == 0.5


def test_a_data_kind_must_opt_in():
    class PluginData(DataSection):
        kind: str = "plugin"

    assert not PluginData.labels_survive_hflip and not DataSection.labels_survive_hflip
    assert CelebADataConfig.labels_survive_hflip
    assert "labels_survive_hflip" not in CelebADataConfig().model_dump()  # a class fact, not a config key
