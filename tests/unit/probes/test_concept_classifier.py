"""Tests for the concept probe: reading ground truth, rejecting invalid images, caching."""

import json

import pytest
import torch

import conceptlab.probes.concept_classifier as cc
from conceptlab.studies import build_data
from conceptlab.data.shapes import ShapesDataConfig
from conceptlab.probes.concept_classifier import ProbeConfig

CONCEPTS = ["color", "size"]
MICRO = ProbeConfig(width=8, images_per_class=300, invalid_images=600, epochs=5, batch_size=64, lr=3e-3,
                    min_accuracy=0.9)


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("concept-classifier")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("probes")


@pytest.fixture(scope="module")
def trained(cache):
    return cc.load_or_train_probe(MICRO, CONCEPTS, 32, cache_dir=cache, progress=False)


def test_forward_heads():
    probe = cc.ConceptProbe(["color", "shape"], width=4)
    out = probe(torch.rand(2, 3, 32, 32))
    assert set(out) == {"color", "shape", "valid"} and all(v.shape == (2, 2) for v in out.values())
    with pytest.raises(ValueError):
        cc.ConceptProbe(["colour"])


def test_report(trained):
    _, report = trained
    assert report["source"] == "trained"
    assert min(report["held_out_accuracy"].values()) >= 0.95
    assert report["validity_accuracy"] >= 0.95 and report["train_seconds"] > 0


@pytest.mark.parametrize("dc,ds", [(0.2, 0.6), (0.4, 0.4), (0.7, 0.2)])
def test_reads_ground_truth_test_images(trained, dc, ds):
    probe, _ = trained
    d = build_data(ShapesDataConfig(color_separation=dc, size_separation=ds))
    test = d.test_set(32, seed=1)
    for i, code in enumerate(test.class_codes):
        acc = cc.accuracy(cc.read_concepts(probe, test.images[test.class_index == i]), code, CONCEPTS)
        assert acc["joint"] >= 0.95, (code, acc)


def test_blank_and_noise_images_are_invalid_failures(trained):
    probe, _ = trained
    g = torch.Generator().manual_seed(0)
    n = 32
    blank_grey = torch.full((n, 3, 32, 32), 0.9)
    blank_colour = torch.rand(n, 3, 1, 1, generator=g).expand(n, 3, 32, 32)
    noisy = (0.9 + 0.1 * torch.randn(n, 3, 32, 32, generator=g)).clamp(0, 1)
    pure_noise = torch.rand(n, 3, 32, 32, generator=g)
    reading = cc.read_concepts(probe, torch.cat([blank_grey, blank_colour, noisy, pure_noise]))
    assert (reading.p_valid < 0.5).all() and not reading.valid.any()
    assert set(reading.p_one) == set(CONCEPTS) and reading.p_one["color"].shape == (4 * n,)
    assert all(v == 0.0 for v in cc.accuracy(reading, "00", CONCEPTS).values())
    with pytest.raises(ValueError, match="digits"):
        cc.accuracy(reading, "0", CONCEPTS)


def test_second_call_loads_from_cache(trained, cache, monkeypatch):
    probe, report = trained
    monkeypatch.setattr(cc, "train_probe", lambda *a, **k: pytest.fail("trained again instead of loading"))
    loaded, loaded_report = cc.load_or_train_probe(MICRO, CONCEPTS, 32, cache_dir=cache, progress=False)
    assert loaded_report["source"] == "cache"
    assert loaded_report["held_out_accuracy"] == report["held_out_accuracy"]
    images = build_data(ShapesDataConfig()).test_set(4).images
    a, b = cc.read_concepts(probe, images), cc.read_concepts(loaded, images)
    assert torch.equal(a.p_valid, b.p_valid) and all(torch.equal(a.p_one[c], b.p_one[c]) for c in CONCEPTS)
    key = cc.probe_key(MICRO, CONCEPTS, 32)
    assert json.loads((cache / f"{key}.json").read_text())["concepts"] == CONCEPTS
    # no temp files left; the lock file stays (deleting it could let a waiting process lock a stale inode)
    assert sorted(p.name for p in cache.iterdir()) == [f"{key}.json", f"{key}.lock", f"{key}.safetensors"]


def test_cache_key_and_default_dir(monkeypatch, tmp_path):
    assert cc.probe_key(MICRO, CONCEPTS, 32) != cc.probe_key(MICRO, CONCEPTS, 16)
    assert cc.probe_key(MICRO, CONCEPTS, 32) != cc.probe_key(MICRO.model_copy(update={"seed": 1}), CONCEPTS, 32)
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path))
    assert cc.default_cache_dir() == tmp_path / "probes"


def test_below_min_accuracy_raises_and_caches_nothing(tmp_path):
    weak = ProbeConfig(width=4, images_per_class=10, invalid_images=10, epochs=1, min_accuracy=1.0)
    with pytest.raises(cc.ProbeAccuracyError, match="min_accuracy"):
        cc.load_or_train_probe(weak, CONCEPTS, 16, cache_dir=tmp_path, progress=False)
    assert [p.suffix for p in tmp_path.iterdir()] == [".lock"]


def _train_or_load(cache_dir):
    tiny = ProbeConfig(width=4, images_per_class=40, invalid_images=40, epochs=1, min_accuracy=0.0)
    return cc.load_or_train_probe(tiny, CONCEPTS, 16, cache_dir=cache_dir, progress=False)[1]["source"]


def test_concurrent_callers_train_a_missing_probe_once(tmp_path):
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(2) as pool:
        sources = pool.map(_train_or_load, [tmp_path, tmp_path])
    assert sorted(sources) == ["cache", "trained"]
    assert len(list(tmp_path.glob("*.safetensors"))) == 1


@pytest.mark.parametrize("torn", [".json", ".safetensors"])
def test_a_torn_cache_entry_is_one_line_naming_the_file_to_delete(tmp_path, torn):
    tiny = ProbeConfig(width=4, images_per_class=40, invalid_images=40, epochs=1, min_accuracy=0.0)
    key = cc.probe_key(tiny, CONCEPTS, 16)
    (tmp_path / f"{key}.json").write_text('{"report": {}}')
    (tmp_path / f"{key}.safetensors").write_bytes(b"")
    (tmp_path / f"{key}{torn}").write_text('{"key": "abc", ')
    with pytest.raises(ValueError) as err:
        cc.load_or_train_probe(tiny, CONCEPTS, 16, cache_dir=tmp_path, progress=False)
    message = str(err.value)
    assert str(tmp_path / f"{key}{torn}") in message and "delete it" in message and "\n" not in message
