"""Tests for the Shapes3D attribute classifiers: held-out accuracy ≥ 0.99 on small renders, caching, bad input."""

import pytest
import torch

from conceptlab.data.shapes3d import FACTORS, render_shapes3d
from conceptlab.probes.attribute_classifier import (
    AttributeClassifierConfig,
    attribute_accuracy,
    classifier_key,
    classify_attributes,
    load_or_train_attribute_classifier,
    num_classes,
    random_factors,
)

CFG = AttributeClassifierConfig(
    attributes=("wall_hue", "object_hue", "shape"), image_size=16, fixed={"scale": 4, "orientation": 7},
    width=12, train_images=3000, test_images=2000, epochs=6, lr=5e-3, seed=0,
)


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("attribute-classifier")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    model, report = load_or_train_attribute_classifier(CFG, cache)
    return model, report, cache


def test_reaches_099_on_held_out_renders(trained):
    model, report, _ = trained
    assert report["source"] == "trained"
    assert set(report["held_out_accuracy"]) == {"wall_hue", "object_hue", "shape"}
    assert report["min_accuracy"] >= 0.99, report
    # fresh renders of other factor combinations (floor hue varies), no noise
    g = torch.Generator().manual_seed(123)
    factors = random_factors(500, CFG.fixed, g)
    acc = attribute_accuracy(model, render_shapes3d(factors, 16), factors)
    assert min(acc.values()) >= 0.99, acc
    read = classify_attributes(model, render_shapes3d(factors[:7], 16))
    assert read["shape"].shape == (7,) and read["shape"].dtype == torch.long
    assert torch.equal(read["shape"], factors[:7, FACTORS.index("shape")])


def test_cached_classifier_reads_the_same(trained):
    model, report, cache = trained
    again, report2 = load_or_train_attribute_classifier(CFG, cache)
    assert report2["source"] == "cache" and report2["held_out_accuracy"] == report["held_out_accuracy"]
    images = render_shapes3d(random_factors(64, CFG.fixed, torch.Generator().manual_seed(5)), 16)
    a, b = classify_attributes(model, images), classify_attributes(again, images)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("kw, match", [
    ({"attributes": ("hue",)}, "hue"),
    ({"attributes": ("shape", "shape")}, "distinct"),
    ({"attributes": ("shape",), "fixed": {"shape": 1}}, "fixed"),
    ({"attributes": ("shape",), "fixed": {"scale": 8}}, "scale=8"),
])
def test_bad_config_is_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        AttributeClassifierConfig(**kw)
    with pytest.raises(ValueError, match="colour"):
        num_classes("colour")


def test_levels_restrict_the_training_factors():
    cfg = AttributeClassifierConfig(attributes=("wall_hue", "shape"), levels={"wall_hue": (0, 3, 6)})
    factors = random_factors(300, {"scale": 4}, torch.Generator().manual_seed(0), cfg.levels)
    assert set(factors[:, FACTORS.index("wall_hue")].tolist()) == {0, 3, 6}
    assert (factors[:, FACTORS.index("scale")] == 4).all()
    assert "levels" not in AttributeClassifierConfig().to_dict()  # unrestricted cache keys unchanged
    with pytest.raises(ValueError, match="levels wall_hue"):
        AttributeClassifierConfig(levels={"wall_hue": (0, 12)})


@pytest.mark.parametrize("train_images", [1, 128, 640])  # 1 to 5 optimisation steps: too few for a one-cycle schedule
def test_a_smoke_sized_classifier_trains_with_few_steps(train_images, tmp_path):
    cfg = AttributeClassifierConfig(
        attributes=("wall_hue", "shape"), image_size=8, width=4, train_images=train_images, test_images=8, epochs=1
    )
    model, report = load_or_train_attribute_classifier(cfg, tmp_path)
    assert set(report["held_out_accuracy"]) == {"wall_hue", "shape"}


def test_a_torn_cache_sidecar_is_one_line_naming_the_file_to_delete(tmp_path):
    cfg = AttributeClassifierConfig(attributes=("wall_hue", "shape"), image_size=8, width=4, epochs=1)
    sidecar = tmp_path / f"attributes-{classifier_key(cfg)}.json"
    sidecar.write_text('{"key": "abc", ')
    sidecar.with_suffix(".safetensors").write_bytes(b"")
    with pytest.raises(ValueError) as err:
        load_or_train_attribute_classifier(cfg, tmp_path)
    message = str(err.value)
    assert str(sidecar) in message and "delete it" in message and "\n" not in message
