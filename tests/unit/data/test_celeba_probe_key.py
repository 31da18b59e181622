"""The face probe's cache key follows the train/test partition of the CelebA folder: a probe cached on one split is
not reused (and tested on images it trained on) after the partition file appears or changes."""

import shutil

import pytest

from conceptlab.data.celeba import CelebADataConfig, CelebADGP, PARTITION_FILES
from conceptlab.probes.concept_classifier import ProbeConfig
from conceptlab.probes.face_classifier import face_probe_key

COUNTS = {"00": (6, 3), "01": (6, 3), "10": (6, 3), "11": (6, 3)}


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CONCEPTLAB_CELEBA", raising=False)


def key(folder) -> str:
    return face_probe_key(ProbeConfig(), CelebADGP(CelebADataConfig(root=str(folder), image_size=16), progress=False))


def test_the_key_changes_when_a_partition_file_appears_or_changes(tmp_path, fake_celeba):
    official = fake_celeba(tmp_path / "official", COUNTS, partition=True)
    folder = fake_celeba(tmp_path / "folder", COUNTS, partition=False)  # the same images, split by id hash
    by_hash = key(folder)
    assert key(folder) == by_hash  # stable
    shutil.copy(official / PARTITION_FILES[0], folder / PARTITION_FILES[0])
    with_file = key(folder)
    assert with_file != by_hash
    lines = (folder / PARTITION_FILES[0]).read_text().splitlines()
    name, part = lines[0].split()
    assert part == "0"
    (folder / PARTITION_FILES[0]).write_text("\n".join([f"{name} 2", *lines[1:]]) + "\n")  # one image moves to test
    moved = key(folder)
    assert moved not in (with_file, by_hash)
    (folder / PARTITION_FILES[0]).write_text("\n".join(lines) + "\n")  # back: the first file's probe again
    assert key(folder) == with_file


def test_celeba_class_lists_are_checked_as_shapes_checks_them():
    """One check for a list of class codes (data.shapes.check_class_list): a code listed twice is refused for CelebA
    too (it evaluated the same target twice), and a wrong code in the same words."""
    from conceptlab.experiments.loading import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"held_out_classes: class codes \['01'\] are listed more than once"):
        load_config("celeba-micro", ['data.held_out_classes=["01","01"]'])
    with pytest.raises(ConfigError, match="'1' is not a class code"):
        load_config("celeba-micro", ['data.held_out_classes=["1"]'])
