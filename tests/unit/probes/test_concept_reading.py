"""read_concepts reads uint8 images (0..255) as the same images in [0, 1]."""

import torch

import conceptlab.probes.concept_classifier as cc
from conceptlab.data.shapes import ShapesDataConfig, ShapesDGP


def test_uint8_and_float_readings_agree():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        probe = cc.ConceptProbe(["color", "size"], width=4)
    images = ShapesDGP(ShapesDataConfig()).test_set(4, seed=1).images
    as_uint8 = (images * 255).round().to(torch.uint8)
    read_u8, read_float = cc.read_concepts(probe, as_uint8), cc.read_concepts(probe, as_uint8.float() / 255)
    assert torch.allclose(read_u8.p_valid, read_float.p_valid)
    for concept in ("color", "size"):
        assert torch.allclose(read_u8.p_one[concept], read_float.p_one[concept])
