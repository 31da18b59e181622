"""The bumps and shapes3d DGPs the runner trains on: training sets, held-out regions, prompts, errors."""

import pytest
import torch

from conceptlab.data import BumpWorld, Shapes3DWorld
from conceptlab.studies import build_data
from conceptlab.data.bumps import image_type, render
from conceptlab.experiments.config import BumpsDataConfig, Shapes3DDataConfig


def band(scope: str) -> BumpsDataConfig:
    return BumpsDataConfig(image="sos", border=6, held_out={"kind": "x_band", "low": 19, "high": 25, "scope": scope})


def test_build_dgp_picks_the_kind():
    assert isinstance(build_data(BumpsDataConfig()), BumpWorld)
    assert isinstance(build_data(Shapes3DDataConfig()), Shapes3DWorld)


def test_bump_training_set_is_one_image_per_label_with_label_prompts():
    world = BumpWorld(BumpsDataConfig(image_size=8, copies=2))
    data = world.training_set()
    assert data.images.shape == (128, 1, 8, 8) and data.prompts.shape == (128, 2)
    assert torch.equal(data.prompts, data.labels.float())
    assert torch.allclose(data.images[:, 0], render("bump", data.labels, 8))
    assert torch.equal(data.images[:64], data.images[64:])  # copies repeat the set


def test_composition_split_keeps_stripes_over_the_band_interpolation_removes_them():
    compose, interpolate = BumpWorld(band("2d")), BumpWorld(band("all"))
    for world in (compose, interpolate):
        held = world.regions()["held_out"]
        assert len(held) == 6 * 32 and bool(((held[:, 0] >= 19) & (held[:, 0] <= 25)).all())
        train_2d = world.regions()["train"]
        assert not bool(((train_2d[:, 0] >= 19) & (train_2d[:, 0] <= 25)).any())
    def band_1d(world):
        labels = world.train_labels
        kinds = image_type(labels, 32, 6)
        return int(((kinds == 1) & (labels[:, 0] >= 19) & (labels[:, 0] <= 25)).sum())
    assert band_1d(compose) == 6 * 12  # vertical stripes at every band x, y outside the frame
    assert band_1d(interpolate) == 0  # no image shows a band x
    assert len(compose.train_labels) - len(interpolate.train_labels) == 72


def test_subsampling_is_seeded_and_keeps_the_fraction():
    a = BumpWorld(BumpsDataConfig(image_size=16, fraction=0.25, data_seed=3))
    b = BumpWorld(BumpsDataConfig(image_size=16, fraction=0.25, data_seed=3))
    c = BumpWorld(BumpsDataConfig(image_size=16, fraction=0.25, data_seed=4))
    assert len(a.train_labels) == 64 and torch.equal(a.train_labels, b.train_labels)
    assert not torch.equal(a.train_labels, c.train_labels)


def test_periodic_world_has_its_period():
    assert BumpWorld(BumpsDataConfig(periodic=True, image_size=16)).period == 16.0
    assert BumpWorld(BumpsDataConfig(image_size=16)).period is None


@pytest.mark.parametrize(
    "held_out, fragment",
    [
        ({"kind": "lesion", "width": 16, "centre": (8, 8)}, "no training data left"),
        ({"kind": "x_band", "low": 8.1, "high": 8.2}, "contains no 2D label"),
        ({"kind": "lesion", "width": 100}, r"must lie inside the visible frame \[0, 16\]"),
        ({"kind": "lesion", "width": 4}, r"around \(16.0, 16.0\) must lie inside .* frame's centre is \(8, 8\)"),
        ({"kind": "x_band", "low": 100, "high": 200}, r"x_band \[100, 200\] must lie inside the visible frame"),
    ],
)
def test_bad_splits_are_one_clear_error(held_out, fragment):
    """Including the held-out region's defaults, made for the 32-pixel frame: on a 16-pixel one the default lesion
    would hold out a corner; and a region off the frame holds out nothing."""
    scope = {"scope": "all"} if held_out["kind"] == "lesion" else {}
    with pytest.raises(ValueError, match=fragment):
        BumpWorld(BumpsDataConfig(image_size=16, held_out={**held_out, **scope}))


def test_a_torus_on_an_extended_canvas_is_refused():
    """A torus wraps the visible frame; with a border the drawn canvas would wrap instead, and the locator, the label
    refinement and the chord tests would disagree on the period."""
    with pytest.raises(ValueError, match="periodic needs border 0"):
        BumpsDataConfig(image_size=16, border=3, periodic=True)
    assert BumpsDataConfig(image_size=16, periodic=True).periodic


def test_shapes3d_world_enumerates_the_attribute_combinations():
    world = Shapes3DWorld(Shapes3DDataConfig(attributes=["wall_hue", "shape"], levels={"wall_hue": [2, 5, 7]}, image_size=8))
    assert world.attribute_sizes == (3, 4) and world.prompt_dim == 7
    data = world.training_set()
    assert data.images.shape == (12, 3, 8, 8) and len(set(map(tuple, data.labels.tolist()))) == 12
    factors = world.factors(data.labels)
    assert set(factors[:, 1].tolist()) == {2, 5, 7}  # wall hue levels chosen
    assert set(factors[:, 0].tolist()) == {0} and set(factors[:, 3].tolist()) == {5}  # floor hue, scale fixed
    assert torch.equal(data.prompts[:, :3].argmax(1), data.labels[:, 0])
    only_shape = world.make_prompt(data.labels, given=["shape"])
    assert only_shape[:, :3].abs().sum() == 0 and torch.equal(only_shape[:, 3:].argmax(1), data.labels[:, 1])


def test_shapes3d_world_keeps_uint8_images_and_hands_out_float_rows():
    world = Shapes3DWorld(Shapes3DDataConfig(attributes=["wall_hue", "shape"], image_size=8))
    stored = world.all_images()
    assert stored.dtype == torch.uint8 and stored.shape == (40, 3, 8, 8)  # a quarter of float32's memory
    assert world.training_set().images.dtype == torch.uint8
    rows = torch.tensor([3, 0, 3])
    picked = world.images(rows)
    assert picked.dtype == torch.float32 and torch.equal(picked, stored[rows].float() / 255)
    rendered = world.render(world.classes[rows])  # the same pixels as a fresh render, to within 8-bit rounding
    assert torch.equal(rendered, picked)
    from conceptlab.data.shapes3d import render_shapes3d
    exact = render_shapes3d(world.factors(world.classes[rows]), 8)
    assert (exact - picked).abs().max() <= 0.5 / 255 + 1e-6


def test_shapes3d_world_refuses_classes_out_of_range():
    world = Shapes3DWorld(Shapes3DDataConfig(image_size=8))
    with pytest.raises(ValueError, match="shape classes"):
        world.factors(torch.tensor([[0, 4]]))


def test_shapes3d_prompts_for_the_analyses_null_a_block_as_training_does():
    """The unconditional and one-attribute prompts the analyses give the network (MI, forking roots, probes) write a
    dropped block with `data.null_value`, as the VE process's label dropout does in training — not zeros."""
    from conceptlab.models.variance_exploding import drop_attribute_blocks

    for null in (0.0, -1.0):
        world = Shapes3DWorld(Shapes3DDataConfig(attributes=["wall_hue", "shape"], image_size=8, null_value=null))
        full = world.prompt.encode(torch.tensor([[3, 1]]))
        dropped = drop_attribute_blocks(full, world.prompt.blocks, 1.0, None, world.null_label)
        assert torch.equal(world.prompt.null(1), dropped)
        only = world.prompt.only("shape", torch.tensor([1]))
        wall, shape = world.prompt.blocks
        assert torch.equal(only[:, wall], dropped[:, wall]) and torch.equal(only[:, shape], full[:, shape])


def test_bumps_plus_stripes_draws_a_bump_in_the_frame_and_stripes_outside_it():
    world = BumpWorld(BumpsDataConfig(image="bump+stripes", image_size=8, border=2))
    labels = torch.tensor([[4.5, 5.5], [4.5, 0.5], [0.5, 5.5], [0.5, 11.5]], dtype=torch.float64)
    images = world.render(labels)[:, 0]
    assert torch.allclose(images[0], render("bump", labels[:1], 8, border=2)[0])
    assert torch.allclose(images[1], render("vertical", labels[1:2], 8, border=2)[0])
    assert torch.allclose(images[2], render("horizontal", labels[2:3], 8, border=2)[0])
    assert images[3].abs().sum() == 0
    with pytest.raises(ValueError, match="border"):
        BumpsDataConfig(image="bump+stripes")


def test_subsampling_leaves_an_unseen_region_of_the_dropped_2d_labels():
    world = BumpWorld(BumpsDataConfig(image_size=8, fraction=0.25, held_out={"kind": "x_band", "low": 0, "high": 1}))
    regions = world.regions()
    assert set(regions) == {"train", "held_out", "unseen"}
    assert sum(len(v) for v in regions.values()) == 64
    assert len(regions["held_out"]) == 8 and len(regions["train"]) == round(0.25 * 56)
    assert "unseen" not in BumpWorld(BumpsDataConfig(image_size=8)).regions()


def test_fraction_scope_2d_thins_only_the_bumps_and_keeps_every_stripe():
    base = dict(image="bump+stripes", image_size=8, border=2, fraction=0.25, data_seed=1)
    everything, bumps_only = BumpWorld(BumpsDataConfig(**base)), BumpWorld(BumpsDataConfig(**base, fraction_scope="2d"))
    full = BumpWorld(BumpsDataConfig(**{**base, "fraction": 1.0}))
    types_full = image_type(full.train_labels, 8, 2)
    types_2d = image_type(bumps_only.train_labels, 8, 2)
    # every 1D and 0D label of the full lattice is still there; a quarter of the 2D ones
    assert int((types_2d < 2).sum()) == int((types_full < 2).sum())
    assert int((types_2d == 2).sum()) == round(0.25 * int((types_full == 2).sum()))
    # with the default scope λ thins the stripes too
    assert int((image_type(everything.train_labels, 8, 2) < 2).sum()) < int((types_full < 2).sum())
    assert bumps_only.describe()["fraction_scope"] == "2d"
    # the dropped 2D labels are the unseen region, the kept ones the trained region
    regions = bumps_only.regions()
    assert len(regions["train"]) + len(regions["unseen"]) == 64
    # a bumps-only world (every label 2D) is thinned the same under both scopes
    plain = dict(image_size=8, fraction=0.25, data_seed=1)
    assert torch.equal(BumpWorld(BumpsDataConfig(**plain)).train_labels,
                       BumpWorld(BumpsDataConfig(**plain, fraction_scope="2d")).train_labels)
