"""train.hflip only for data kinds whose labels survive a horizontal flip (a flipped bump keeps its x label)."""

import pytest

from conceptlab.config_base import DataSection
from conceptlab.data.celeba import CelebADataConfig
from conceptlab.experiments.loading import ConfigError, load_config


@pytest.mark.parametrize("preset, kind", [("bumps-micro", "bumps"), ("abstractions-micro", "shapes3d")])
def test_hflip_is_refused_for_kinds_whose_labels_hold_a_position_or_orientation(preset, kind):
    with pytest.raises(ConfigError) as err:
        load_config(preset, ["train.hflip=0.5"])
    message = str(err.value)
    assert "train.hflip=0.5" in message and f"data.kind={kind}" in message and "\n" not in message
    assert load_config(preset, ["train.hflip=0"]).train.hflip == 0.0  # off: as before


def test_a_mirrored_shapes_scene_is_the_scene_drawn_at_the_mirrored_centre():
    """Shapes' labels (color, size, background, shape) survive a flip: the flipped render of a scene is the render
    of the same scene with its centre mirrored (drawn from a symmetric range; circles and apex-up triangles are
    mirror-symmetric), so train.hflip is allowed there."""
    import torch

    from conceptlab.data.shapes import ShapesDataConfig, render

    n = 6
    g = torch.Generator().manual_seed(0)
    color, radius = torch.rand(n, 3, generator=g), 0.2 + 0.3 * torch.rand(n, generator=g)
    background, shape = torch.rand(n, 3, generator=g), torch.tensor([0, 1] * 3)
    center = torch.rand(n, 2, generator=g) - 0.5
    flipped = render(color, radius, background, shape, center, 16, noise_std=0.0).flip(-1)
    mirrored = render(color, radius, background, shape, center * torch.tensor([-1.0, 1.0]), 16, noise_std=0.0)
    assert torch.allclose(flipped, mirrored, atol=1e-5)
    assert ShapesDataConfig.labels_survive_hflip and load_config("micro", ["train.hflip=0.5"]).train.hflip == 0.5


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
