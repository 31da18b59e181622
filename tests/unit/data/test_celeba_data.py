"""The `celeba` data process on a small folder in CelebA's layout (`write_fake_celeba`, tests/conftest.py): reading
the attribute and partition files, classes and prompts, training and test sets, the centre crop, the cache, the
concept signal against a label nothing in the images shows, and one-line errors."""

import numpy as np
import pytest
import torch

from conceptlab.data import celeba
from conceptlab.data.celeba import CelebADataConfig, CelebADGP, read_attributes

COUNTS = {"00": (12, 4), "01": (10, 4), "10": (14, 4), "11": (9, 4)}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CONCEPTLAB_CELEBA", raising=False)


@pytest.fixture
def folder(tmp_path, fake_celeba):
    return fake_celeba(tmp_path / "celeba", COUNTS)


def dgp(folder, **kw) -> CelebADGP:
    return CelebADGP(CelebADataConfig(root=str(folder), image_size=16, **kw))


def test_the_official_text_and_kaggles_csv_give_the_same_table(tmp_path, fake_celeba):
    txt = read_attributes(fake_celeba(tmp_path / "a", COUNTS))
    csv = read_attributes(fake_celeba(tmp_path / "b", COUNTS, csv=True))
    assert txt.ids == csv.ids and txt.names == csv.names and len(txt.names) == 40
    assert np.array_equal(txt.values, csv.values) and set(np.unique(txt.values)) == {0, 1}
    male = txt.names.index("Male")
    assert txt.values[:, male].sum() == COUNTS["10"][0] + COUNTS["10"][1] + COUNTS["11"][0] + COUNTS["11"][1]


def test_classes_prompts_and_the_training_set(folder):
    d = dgp(folder, images_per_class=100)
    assert d.classes == ["00", "01", "10", "11"] and d.train_classes == ["00", "10", "11"]
    assert d.held_out_classes == ["01"] and d.class_name("01") == "not male, wearing hat"
    assert d.class_prompt("01").tolist() == [1.0, 0.0, 0.0, 1.0] and d.prompt_dim == 4
    assert d.canonical_prompt("Wearing_Hat", 1, 0.45).tolist() == pytest.approx([0, 0, 0.05, 0.95])
    assert d.canonical_prompt("Male", 0, 0.15).tolist() == pytest.approx([0.65, 0.35, 0, 0])
    over = d.make_prompt({"Wearing_Hat": torch.tensor([1.5])})  # past the one-hot value; Male left out: null
    assert over.tolist() == [[-1.0, -1.0, -0.5, 1.5]]
    data = d.training_set()
    assert data.images.dtype == torch.uint8 and data.images.shape[1:] == (3, 16, 16)
    # balanced: every training class gets the smallest one's training-partition count (11 has 9)
    counts = torch.bincount(data.class_index, minlength=4).tolist()
    assert counts == [9, 0, 9, 9]
    assert torch.equal(data.prompts, torch.stack([d.class_prompt(d.classes[i]) for i in data.class_index]))
    unbalanced = dgp(folder, images_per_class=100, balance=False).training_set()
    assert torch.bincount(unbalanced.class_index, minlength=4).tolist() == [12, 0, 14, 9]


def test_test_images_come_from_outside_the_training_partition_and_draws_are_reproducible(folder):
    d = dgp(folder, images_per_class=5)
    train = {i for ids in d.train_ids.values() for i in ids}
    other = set(d._ids("01", False)) | set(d._ids("00", False))
    assert not train & other
    test = d.test_set(3)
    assert test.images.dtype == torch.float32 and torch.bincount(test.class_index).tolist() == [3, 3, 3, 3]
    assert torch.equal(dgp(folder, images_per_class=5).training_set().images, d.training_set().images)
    assert dgp(folder, images_per_class=5, data_seed=1).train_ids != d.train_ids
    images, prompts = d.sample_class("01", 6, torch.Generator().manual_seed(0))
    assert images.shape == (6, 3, 16, 16) and prompts.tolist() == [[1.0, 0.0, 0.0, 1.0]] * 6


def test_without_a_partition_file_ids_hash_into_ninety_percent_training(tmp_path, fake_celeba):
    d = dgp(fake_celeba(tmp_path / "c", COUNTS, partition=False))
    assert d.partition.startswith("hash") and 0.6 < d.in_training.mean() < 1.0
    assert np.array_equal(CelebADGP(d.cfg).in_training, d.in_training)


def test_the_centre_crop_keeps_the_middle_square(tmp_path):
    from PIL import Image

    pixels = np.zeros((218, 178, 3), np.uint8)
    pixels[:20] = (255, 0, 0)  # the 20 rows above and below the centred 178-pixel square
    pixels[-20:] = (0, 0, 255)
    pixels[20:-20] = (0, 255, 0)
    Image.fromarray(pixels).save(tmp_path / "x.png")
    out = celeba._load_one(tmp_path / "x.png", None, 16)
    assert out.shape == (3, 16, 16) and out[1].min() > 250 and out[0].max() < 5 and out[2].max() < 5
    cropped = celeba._load_one(tmp_path / "x.png", 100, 16)  # a 100-pixel square, all green
    assert cropped[1].min() > 250


def test_decoded_images_are_cached(folder, monkeypatch):
    first = dgp(folder).training_set().images
    decode = celeba._load_one

    def no_decoding(*args):
        raise AssertionError("decoded again")

    monkeypatch.setattr(celeba, "_load_one", no_decoding)
    assert torch.equal(dgp(folder).training_set().images, first)
    with pytest.raises(AssertionError, match="decoded again"):  # another size is another cache entry
        CelebADGP(CelebADataConfig(root=str(folder), image_size=8)).training_set()
    monkeypatch.setattr(celeba, "_load_one", decode)
    cache = folder.parent / "cache" / "celeba"
    entries = sorted(cache.glob("*.safetensors"))
    assert len(entries) == 1  # the training set (the 8-pixel attempt stopped before writing one)
    assert dgp(folder).sample_class("01", 5, torch.Generator().manual_seed(3))[0].shape == (5, 3, 16, 16)  # one-off
    assert sorted(cache.glob("*.safetensors")) == entries


def test_the_concept_signal_sees_what_the_images_show_and_not_a_label_they_do_not(tmp_path, fake_celeba):
    folder = fake_celeba(tmp_path / "big", {c: (120, 1) for c in COUNTS})
    shown = dgp(folder, images_per_class=120).concept_signal()
    # `Young` is a random label in these images (nothing is drawn for it): its signal is the difference of two means
    # of one distribution, sampling noise alone (≈ 1 here: it shrinks as 1/√n, so it is small on CelebA's counts)
    young = dgp(folder, concepts=["Young", "Male"], held_out_classes=["11"], images_per_class=120).concept_signal()
    assert shown["Male"] > 3 * young["Young"] and young["Male"] > 3 * young["Young"]
    assert dgp(folder).describe()["concept_signal_definition"] == celeba.SIGNAL_DEFINITION


@pytest.mark.parametrize("change, message", [
    ({"root": None}, "neither is $CONCEPTLAB_CELEBA"),
    ({"root": "/nowhere/at/all"}, "does not exist"),
    ({"concepts": ["Male", "Wearing_Hats"], "held_out_classes": ["01"]}, "not attributes of"),
    ({"images_dir": "imgs"}, "does not exist"),
])
def test_what_cannot_work_is_one_clear_line(folder, change, message):
    fields = {"root": str(folder), **change}
    with pytest.raises(ValueError, match=message.replace("$", r"\$")) as err:
        CelebADGP(CelebADataConfig(**fields))
    assert "\n" not in str(err.value)


def test_the_config_refuses_bad_class_codes_and_takes_the_folder_from_the_environment(folder, monkeypatch):
    with pytest.raises(ValueError, match="2 digits of 0/1"):
        CelebADataConfig(held_out_classes=["1"])
    assert CelebADataConfig(held_out_classes=[1]).held_out_classes == ["01"]  # YAML's reading of an unquoted 01
    with pytest.raises(ValueError, match="nothing is left to train on"):
        CelebADataConfig(held_out_classes=["00", "01", "10", "11"])
    monkeypatch.setenv("CONCEPTLAB_CELEBA", str(folder))
    assert CelebADGP(CelebADataConfig()).root == folder


def test_a_missing_image_or_a_malformed_attribute_file_is_named(folder):
    (folder / "img_align_celeba" / "000003.jpg").unlink()
    with pytest.raises(ValueError, match="not in .*000003.jpg"):
        dgp(folder, images_per_class=100).training_set()
    text = (folder / "list_attr_celeba.txt").read_text().splitlines()
    (folder / "list_attr_celeba.txt").write_text("\n".join(text[:3] + [text[3] + " 1"] + text[4:]))
    with pytest.raises(ValueError, match="row 2 has 41 values for 40 attributes"):
        dgp(folder)
