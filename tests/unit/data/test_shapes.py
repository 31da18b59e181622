"""Tests for the `shapes` DGP: pixels, class means, prompts, masking, determinism, concept signal."""

import json

import pytest
import torch

from conceptlab.data import ShapesDGP
from conceptlab.studies import build_data
from conceptlab.data.shapes import TEST_BACKGROUND, render
from conceptlab.data.shapes import ShapesDataConfig


def dgp(**kw) -> ShapesDGP:
    return build_data(ShapesDataConfig(images_per_class=64, **kw))


def object_colour(images: torch.Tensor) -> torch.Tensor:
    """[N,3]: the colour of each image's pixel farthest from the test background (inside the object)."""
    flat = images.flatten(2)  # [N, 3, P]
    far = (flat - TEST_BACKGROUND).norm(dim=1).argmax(1)
    return flat[torch.arange(flat.shape[0]), :, far]


def test_render_pixels_far_and_inside():
    n = 4
    images = render(
        color=torch.tensor([[0.7, 0.3, 0.3]]).expand(n, 3),
        radius=torch.full((n,), 0.4),
        background=torch.full((n, 3), 0.85),
        shape=torch.tensor([0, 1, 0, 1]),
        center=torch.tensor([[0.5, 0.5]]).expand(n, 2),
        image_size=32,
        generator=torch.Generator().manual_seed(0),
    )
    assert images.shape == (n, 3, 32, 32) and images.dtype == torch.float32
    assert torch.allclose(images[:, :, 0, 0], torch.tensor(0.85), atol=0.006)  # far corner = background ± noise
    centre = images[:, :, 24, 24]  # pixel nearest (0.5, 0.5)
    assert torch.allclose(centre[0::2], torch.tensor([0.7, 0.3, 0.3]), atol=0.006)  # circles: fully covered
    # triangles (inradius 3.2 px): the σ=1 px blur lets ~1% background into the centre pixel
    assert torch.allclose(centre[1::2], torch.tensor([0.7, 0.3, 0.3]), atol=0.012)
    mask = (images - 0.85).abs().sum(1).gt(0.2).float().flatten(1).sum(1)  # object pixels
    ratio = (mask[1] / mask[0]).item()  # triangle / circle of the same circumradius: 1.299 / π ≈ 0.41
    assert 0.3 < ratio < 0.55


def test_background_and_object_colour_of_test_images():
    d = dgp(size_separation=0.3)
    test = d.test_set(8, seed=3)
    corners = test.images[:, :, [0, 0, -1, -1], [0, -1, 0, -1]]
    small = test.class_index == d.classes.index("01")
    assert torch.allclose(corners[small], torch.tensor(TEST_BACKGROUND), atol=0.006)
    colours = object_colour(test.images)
    for i, code in enumerate(test.class_codes):
        expected = d.class_prompt(code)[:3]
        assert torch.allclose(colours[test.class_index == i], expected, atol=0.01), code


@pytest.mark.parametrize("dc", [0.2, 0.6])
def test_class_means_follow_color_separation(dc):
    d = dgp(color_separation=dc)
    lo, hi = 0.5 - dc / 2, 0.5 + dc / 2
    assert torch.allclose(d.class_prompt("00")[:3], torch.tensor([hi, lo, lo]))
    assert torch.allclose(d.class_prompt("10")[:3], torch.tensor([lo, lo, hi]))
    images, _ = d.sample_class("10", 8, torch.Generator().manual_seed(0), jitter=False)
    assert torch.allclose(object_colour(images), torch.tensor([lo, lo, hi]), atol=0.01)


def test_training_jitter_within_bounds_and_radius_floor():
    d = dgp(size_separation=0.7, color_separation=0.4)
    train = d.training_set()
    colour, radius = train.prompts[:, :3], train.prompts[:, 3]
    red = train.class_index == d.classes.index("00")
    assert (colour[red] - torch.tensor([0.7, 0.3, 0.3])).abs().max() <= 0.4 / 8 + 1e-6
    small = train.class_index == d.classes.index("01")
    assert radius.min() >= 0.1 and torch.isclose(radius[small].min(), torch.tensor(0.1))
    assert (radius[~small] - 0.8).abs().max() <= 3 * 0.7 / 8 + 1e-6


def test_background_values():
    d = dgp()
    train = d.training_set()
    corners = train.images[train.class_index == d.classes.index("01"), :, 0, 0]  # small objects never reach it
    assert corners.min() > 0.79 and corners.max() < 1.0 and corners.std() > 0.03  # uniform [0.8, 1] per channel
    d = dgp(concepts=["size", "background"], size_separation=0.5, background_separation=0.4)
    test = d.test_set(4)
    dark = test.images[test.class_index == d.classes.index("11")]  # small, dark
    assert torch.allclose(dark[:, :, 0, 0], torch.tensor(0.3), atol=0.006)
    train = d.training_set()  # background as a concept: one jittered grey for all channels, prompt = that grey
    small_light = train.class_index == d.classes.index("10")  # small objects never reach the corners
    corner, grey = train.images[small_light, :, 0, 0], train.prompts[small_light, 1]
    assert torch.allclose(corner, grey[:, None].expand(-1, 3), atol=0.006)
    assert (grey - 0.7).abs().max() <= 0.4 / 8 + 1e-6 and grey.std() > 0.01


def test_deterministic_from_data_seed():
    a, b, c = dgp(data_seed=5).training_set(), dgp(data_seed=5).training_set(), dgp(data_seed=6).training_set()
    assert torch.equal(a.images, b.images) and torch.equal(a.prompts, b.prompts)
    assert not torch.equal(a.images, c.images) and not torch.equal(a.prompts, c.prompts)
    assert torch.equal(dgp().test_set(4, seed=1).images, dgp().test_set(4, seed=1).images)


def test_held_out_classes_never_trained_on():
    d = dgp(concepts=["color", "size", "shape"])
    assert d.held_out_classes == ["011", "101", "110", "111"]
    seen = {d.classes[i] for i in d.training_set().class_index.unique().tolist()}
    assert seen == set(d.train_classes) == {"000", "001", "010", "100"}
    assert {d.classes[i] for i in d.test_set(2).class_index.tolist()} == set(d.classes)


def test_compact_prompt_layout():
    d = dgp(concepts=["size", "color", "background", "shape"])
    assert d.prompt_dim == 7
    slices = {"size": slice(0, 1), "color": slice(1, 4), "background": slice(4, 5), "shape": slice(5, 7)}
    assert d.prompt_slices() == slices
    assert torch.allclose(d.class_prompt("0111"), torch.tensor([0.65, 0.3, 0.3, 0.7, 0.3, 0.0, 1.0]))


def test_paper11_prompt_layout():
    d = dgp(prompt_layout="paper11")
    assert d.prompt_dim == 11
    assert torch.allclose(d.class_prompt("11"), torch.tensor([0, 0, 0, 0, 0.3, 0.3, 0.7, 0.25, 0, 0, 0]))
    d = dgp(concepts=["color", "size", "background", "shape"], prompt_layout="paper11")
    expected = torch.tensor([0, 1, 0, 0, 0.7, 0.3, 0.3, 0.65, 0.3, 0.3, 0.3])
    assert torch.allclose(d.class_prompt("0011"), expected)


def test_make_prompt_over_range_and_masked_concepts():
    d = dgp(null_value=-1.0)
    p = d.make_prompt({"color": torch.tensor([[0.3, 0.3, 0.95]])})  # over-prompted blue, size left out
    assert torch.allclose(p, torch.tensor([[0.3, 0.3, 0.95, -1.0]]))
    with pytest.raises(ValueError, match="not concepts"):
        d.make_prompt({"shape": torch.zeros(1, 2)})
    with pytest.raises(ValueError, match="entries"):
        d.make_prompt({"color": torch.zeros(2, 2)})


def test_prompt_masking_fraction_and_null_value():
    d = dgp(prompt_mask_fraction={"color": 0.5}, null_value=-1.0)
    prompts = d.training_set().prompts
    masked = (prompts[:, :3] == -1.0).all(1)
    assert (prompts[:, :3] == -1.0).any(1).eq(masked).all()  # all color entries masked together
    assert abs(masked.float().mean().item() - 0.5) < 0.01
    assert not (prompts[:, 3] == -1.0).any()
    assert torch.equal(prompts, dgp(prompt_mask_fraction={"color": 0.5}, null_value=-1.0).training_set().prompts)


def test_concept_signal_follows_separations():
    colour = [dgp(color_separation=dc).concept_signal(n=64)["color"] for dc in (0.1, 0.3, 0.5, 0.7)]
    assert colour == sorted(colour) and colour[0] > 0
    strong_colour = dgp(color_separation=0.8, size_separation=0.1).concept_signal(n=64)
    strong_size = dgp(color_separation=0.1, size_separation=0.7).concept_signal(n=64)
    assert strong_colour["color"] > strong_colour["size"]
    assert strong_size["size"] > strong_size["color"]


def test_describe_is_json_and_registry():
    info = dgp(concepts=["color", "shape"]).describe()
    assert json.loads(json.dumps(info))["prompt_slices"] == {"color": [0, 3], "shape": [3, 5]}
    assert set(info["concept_signal"]) == {"color", "shape"}
    assert isinstance(build_data(ShapesDataConfig()), ShapesDGP)


def test_nonsense_input_raises():
    d = dgp()
    with pytest.raises(ValueError, match="unknown class code"):
        d.sample_class("2", 4)
    with pytest.raises(ValueError, match="positive"):
        d.sample_class("01", 0)
    with pytest.raises(ValueError, match="positive"):
        d.test_set(0)
    with pytest.raises(ValueError, match="positive"):
        d.concept_signal(n=-1)


def test_exact_prompts_leave_the_global_random_state_alone():
    """A class's prompt and a canonical prompt are at exact means: the scene behind them still draws a position and
    nuisances, from a generator of its own, so a caller reproducing the global random state is not moved on."""
    d = dgp(concepts=["color", "size", "background"])
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    prompts = {code: d.class_prompt(code) for code in d.classes}
    canonical = d.canonical_prompt("color", 1, 0.45)
    assert torch.equal(torch.rand(3), expected)  # nothing drawn from the global generator
    torch.manual_seed(123)  # and the prompts do not depend on it
    assert all(torch.equal(d.class_prompt(code), p) for code, p in prompts.items())
    assert torch.equal(d.canonical_prompt("color", 1, 0.45), canonical)
