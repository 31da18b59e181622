"""`data.source: h5` end to end: the world, the attribute classifier and a micro run read the real file's layout.

The fixture is a file of the real layout (480,000 rows, uint8 [N, 64, 64, 3] images, float [N, 6] labels) in which
only the rows the micro world uses hold images — renders with the colour channels reversed, so that anything read
from the file is told apart from a fresh render. Unwritten chunks are never stored, so the file stays small.
"""

import json

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from conceptlab.cli import app
from conceptlab.data import Shapes3DWorld
from conceptlab.data.shapes3d import (
    NUM_IMAGES,
    factors_from_index,
    index_from_factors,
    labels_from_factors,
    load_shapes3d_h5,
    render_shapes3d,
)
from conceptlab.experiments.config import Shapes3DDataConfig
from conceptlab.experiments.loading import load_config
from conceptlab.probes.attribute_classifier import AttributeClassifierConfig, classifier_key, ground_truth_images

WORLD = {"attributes": ["wall_hue", "shape"], "levels": {"wall_hue": [0, 3, 6]}, "image_size": 8}


# `make test` (--dist loadgroup): one worker builds this module's module-scoped fixture, once
pytestmark = pytest.mark.xdist_group("shapes3d-h5-source")


def reversed_render(factors: torch.Tensor) -> np.ndarray:
    images = render_shapes3d(factors, 64).flip(1)  # RGB → BGR: not what the renderer draws
    return (images * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()


@pytest.fixture(scope="module")
def h5_file(tmp_path_factory):
    world = Shapes3DWorld(Shapes3DDataConfig(**WORLD))
    rows = index_from_factors(world.factors(world.classes)).sort().values
    path = tmp_path_factory.mktemp("h5") / "3dshapes.h5"
    with h5py.File(path, "w") as h5:
        images = h5.create_dataset("images", shape=(NUM_IMAGES, 64, 64, 3), dtype="uint8", chunks=(1, 64, 64, 3),
                                   compression="gzip")
        images[rows.numpy()] = reversed_render(factors_from_index(rows))
        labels = labels_from_factors(factors_from_index(torch.arange(NUM_IMAGES))).numpy()
        h5.create_dataset("labels", data=labels, compression="gzip")
    return path


def test_h5_world_and_classifier_images_come_from_the_file(h5_file):
    world = Shapes3DWorld(Shapes3DDataConfig(**WORLD, source="h5", h5_path=str(h5_file)))
    rendered = Shapes3DWorld(Shapes3DDataConfig(**WORLD))
    factors = world.factors(world.classes)
    from_file = load_shapes3d_h5(h5_file, index_from_factors(factors), 8).images
    assert torch.equal(world.all_images(), (from_file * 255).round().to(torch.uint8))
    assert (world.images(torch.arange(len(factors))) - rendered.images(torch.arange(len(factors)))).abs().max() > 0.3
    cfg = AttributeClassifierConfig(attributes=("wall_hue", "shape"), image_size=8, fixed=dict(world.fixed),
                                    levels={"wall_hue": (0, 3, 6)}, h5_path=str(h5_file))
    assert torch.allclose(ground_truth_images(cfg, factors), world.images(torch.arange(len(factors))), atol=0.5 / 255)
    renders = AttributeClassifierConfig(**{**cfg.__dict__, "h5_path": None})
    assert not torch.allclose(ground_truth_images(renders, factors), ground_truth_images(cfg, factors), atol=0.1)
    assert classifier_key(cfg) != classifier_key(renders)


@pytest.mark.slow
def test_micro_run_on_the_h5_source_trains_its_classifier_on_the_file(h5_file, tmp_path, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path / "cache"))
    overrides = ["data.source=h5", f"data.h5_path={h5_file}"]
    assert load_config("abstractions-micro", overrides).data.source == "h5"
    result = CliRunner().invoke(app, ["run", "abstractions-micro", *overrides, "--runs-dir", str(tmp_path / "runs"),
                                      "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["classifier_trained_on"] == "h5" and json.loads((run_dir / "data.json").read_text())["source"] == "h5"


@pytest.mark.parametrize("make", ["missing", "not-hdf5", "other-layout", "too-few-rows"])
def test_a_bad_h5_path_is_refused_before_the_run_folder_is_made(make, tmp_path):
    path = tmp_path / "3dshapes.h5"
    if make == "not-hdf5":
        path.write_text("not an HDF5 file\n")
    elif make == "other-layout":
        with h5py.File(path, "w") as h5:
            h5.create_dataset("pixels", data=np.zeros((2, 64, 64, 3), dtype="uint8"))
    elif make == "too-few-rows":  # the layout, but a subset of the rows: the world's scenes lie past its end
        with h5py.File(path, "w") as h5:
            h5.create_dataset("images", data=np.zeros((10, 64, 64, 3), dtype="uint8"))
            h5.create_dataset("labels", data=np.zeros((10, 6), dtype="float64"))
    result = CliRunner().invoke(app, ["run", "abstractions-micro", "data.source=h5", f"data.h5_path={path}",
                                      "--runs-dir", str(tmp_path / "runs"), "--no-progress"])
    assert result.exit_code == 2, result.output
    line = " ".join(result.output.split())  # rich wraps long paths
    assert line.startswith("error:") and {"missing": "no such file", "not-hdf5": "not an HDF5 file",
                                          "other-layout": "need datasets 'images' and 'labels'",
                                          "too-few-rows": "10 images"}[make] in line, result.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_leading_tilde_in_h5_path_is_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config("abstractions-micro", ["data.source=h5", "data.h5_path=~/3dshapes.h5"])
    assert cfg.data.h5_path == str(tmp_path / "3dshapes.h5")
