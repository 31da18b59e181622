"""Attribute classifiers for Shapes3D-like images: a small CNN with one head per factor, trained on ground-truth images.

They read the attributes of generated images (e.g. the K forked endings of `models.forking`). Training data are
renders (`data.shapes3d.render_shapes3d`), or the images of a real `3dshapes.h5` when `h5_path` is set (so a model
trained on the real file is read by a classifier of the real file), of random factor combinations — every factor drawn uniformly unless
`fixed` pins it to one level or `levels` restricts it to some levels, as the data a model was trained on may — with Gaussian pixel noise of a random std in
[0, noise_std_max] per image (generations are noisier than renders), fresh noise every epoch. The held-out report is
the accuracy per attribute on `test_images` images of independently drawn factor combinations with their own noise.
Trained classifiers are cached by config hash (`load_or_train_attribute_classifier`), like the concept probe.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from conceptlab.data.shapes3d import FACTOR_SIZES, FACTORS, index_from_factors, load_shapes3d_h5, render_shapes3d
from conceptlab.config_base import config_hash
from conceptlab.probes.concept_classifier import cached_classifier, default_cache_dir
from conceptlab.probes.trunk import PooledConvClassifier

CLASSIFIER_VERSION = 1  # bump when the training data or architecture change, so cached classifiers are retrained


@dataclass(frozen=True)
class AttributeClassifierConfig:
    """What an attribute classifier is trained on and how (all fields enter the cache key)."""

    attributes: tuple[str, ...] = ("wall_hue", "shape")
    image_size: int = 16
    fixed: Mapping[str, int] = field(default_factory=dict)  # factor → level held fixed in the training renders
    levels: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # factor → the only levels drawn (default all)
    width: int = 16
    train_images: int = 6000
    test_images: int = 2000
    epochs: int = 10
    batch_size: int = 128
    lr: float = 3e-3
    noise_std_max: float = 0.05
    seed: int = 0
    h5_path: str | None = None  # train and test on this Shapes3D file's images instead of renders

    def __post_init__(self) -> None:
        check_attributes(self.attributes)
        for name, level in self.fixed.items():
            check_attributes([name])
            if not 0 <= level < FACTOR_SIZES[FACTORS.index(name)]:
                raise ValueError(f"fixed {name}={level} out of range [0, {FACTOR_SIZES[FACTORS.index(name)]})")
        for name, chosen in self.levels.items():
            check_attributes([name])
            k = FACTOR_SIZES[FACTORS.index(name)]
            if len(set(chosen)) != len(chosen) or len(chosen) < 2 or not all(0 <= v < k for v in chosen):
                raise ValueError(f"levels {name}={list(chosen)} must be ≥ 2 distinct levels in [0, {k})")
        pinned = set(self.attributes) & set(self.fixed)
        if pinned:
            raise ValueError(f"attributes {sorted(pinned)} are fixed to one level; a classifier needs them to vary")
        if self.image_size < 8 or self.width < 4 or self.train_images < 1 or self.test_images < 1 or self.epochs < 1:
            raise ValueError(f"need image_size ≥ 8, width ≥ 4 and positive image counts/epochs, got {self}")

    def to_dict(self) -> dict:
        out = {**asdict(self), "attributes": list(self.attributes), "fixed": dict(self.fixed)}
        out.pop("levels")  # only when set, so the cache keys of unrestricted classifiers stay as they were
        if self.levels:
            out["levels"] = {k: list(v) for k, v in self.levels.items()}
        out.pop("h5_path")  # likewise
        if self.h5_path is not None:
            out["h5_path"] = str(Path(self.h5_path).resolve())
        return out


def check_attributes(names) -> list[str]:
    """The names as a list; ValueError for names that are not Shapes3D factors or repeat."""
    names = list(names)
    unknown = [n for n in names if n not in FACTORS]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"attributes must be distinct Shapes3D factors {list(FACTORS)}, got {names}")
    return names


def num_classes(attribute: str) -> int:
    """Number of levels of a Shapes3D factor."""
    check_attributes([attribute])
    return FACTOR_SIZES[FACTORS.index(attribute)]


class AttributeClassifier(PooledConvClassifier):
    """The shared classifier trunk (`probes.trunk`) with one head per attribute (logits over its levels)."""

    def __init__(self, attributes: tuple[str, ...] | list[str], width: int = 16) -> None:
        attributes = check_attributes(attributes)
        super().__init__({a: num_classes(a) for a in attributes}, width)
        self.attributes = attributes


def random_factors(
    n: int, fixed: Mapping[str, int], generator: torch.Generator, levels: Mapping[str, tuple[int, ...]] | None = None
) -> Tensor:
    """Factor levels [n, 6]: uniform per factor (over its `levels` where given), except `fixed` factors at their
    level."""
    cols = [torch.randint(0, k, (n,), generator=generator) for k in FACTOR_SIZES]
    for name, chosen in (levels or {}).items():
        pick = torch.randint(0, len(chosen), (n,), generator=generator)
        cols[FACTORS.index(name)] = torch.tensor(list(chosen), dtype=torch.long)[pick]
    for name, level in fixed.items():
        cols[FACTORS.index(name)] = torch.full((n,), int(level))
    return torch.stack(cols, 1)


def _noisy(images: Tensor, noise_std_max: float, generator: torch.Generator) -> Tensor:
    std = noise_std_max * torch.rand(images.shape[0], 1, 1, 1, generator=generator)
    return (images + std * torch.randn(images.shape, generator=generator)).clamp(0.0, 1.0)


def ground_truth_images(cfg: AttributeClassifierConfig, factors: Tensor, batch: int = 2048) -> Tensor:
    """Images [N, 3, S, S] in [0, 1] of factor levels [N, 6]: renders, or the rows of `cfg.h5_path`."""
    parts = []
    for i in range(0, len(factors), batch):
        part = factors[i : i + batch]
        if cfg.h5_path is not None:
            parts.append(load_shapes3d_h5(cfg.h5_path, index_from_factors(part), cfg.image_size).images)
        else:
            parts.append(render_shapes3d(part, cfg.image_size))
    return torch.cat(parts)


@torch.no_grad()
def classify_attributes(model: AttributeClassifier, images: Tensor, batch_size: int = 512) -> dict[str, Tensor]:
    """Predicted level [N] of every attribute for images [N, 3, S, S] in [0, 1] (on the CPU)."""
    model.eval()
    device = next(model.parameters()).device
    parts: dict[str, list[Tensor]] = {a: [] for a in model.attributes}
    for i in range(0, images.shape[0], batch_size):
        for a, logits in model(images[i : i + batch_size].to(device, torch.float32)).items():
            parts[a].append(logits.argmax(1).cpu())
    return {a: torch.cat(p) for a, p in parts.items()}


def attribute_accuracy(model: AttributeClassifier, images: Tensor, factors: Tensor) -> dict[str, float]:
    """Per attribute, the fraction of images whose level is read right (factors [N, 6], Shapes3D order)."""
    read = classify_attributes(model, images)
    return {a: (read[a] == factors[:, FACTORS.index(a)]).float().mean().item() for a in model.attributes}


def train_attribute_classifier(cfg: AttributeClassifierConfig) -> tuple[AttributeClassifier, dict]:
    """Train on renders (see the module docstring); returns the classifier in eval mode and its report
    {held_out_accuracy: {attribute: acc}, min_accuracy, train_seconds}."""
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = AttributeClassifier(cfg.attributes, cfg.width)
    g = torch.Generator().manual_seed(cfg.seed)
    factors = random_factors(cfg.train_images, cfg.fixed, g, cfg.levels)
    clean = ground_truth_images(cfg, factors)
    labels = factors[:, [FACTORS.index(a) for a in cfg.attributes]]
    steps_per_epoch = math.ceil(cfg.train_images / cfg.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=1e-4)
    total_steps = cfg.epochs * steps_per_epoch
    if total_steps > 5:  # one-cycle needs ≥ 1 warm-up step (0.2·total − 1 > 0)
        schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, cfg.lr, total_steps=total_steps, pct_start=0.2)
    else:  # a smoke-sized run: constant rate
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    model.train()
    for _ in range(cfg.epochs):
        order = torch.randperm(cfg.train_images, generator=g)
        images = _noisy(clean[order], cfg.noise_std_max, g)
        for i in range(0, cfg.train_images, cfg.batch_size):
            logits = model(images[i : i + cfg.batch_size])
            y = labels[order[i : i + cfg.batch_size]]
            loss = sum(F.cross_entropy(logits[a], y[:, j]) for j, a in enumerate(cfg.attributes))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    model.eval()
    train_seconds = time.perf_counter() - start
    test_g = torch.Generator().manual_seed(cfg.seed + 1_000_003)
    test_factors = random_factors(cfg.test_images, cfg.fixed, test_g, cfg.levels)
    test_images = _noisy(ground_truth_images(cfg, test_factors), cfg.noise_std_max, test_g)
    held_out = attribute_accuracy(model, test_images, test_factors)
    return model, {
        "held_out_accuracy": held_out,
        "min_accuracy": min(held_out.values()),
        "train_seconds": round(train_seconds, 2),
        "trained_on": "h5" if cfg.h5_path is not None else "renders",
    }


def classifier_key(cfg: AttributeClassifierConfig) -> str:
    """Cache key: the config (and, for an h5 source, the file's size and modification time, so a replaced file
    retrains)."""
    key = {"attribute_classifier": cfg.to_dict(), "version": CLASSIFIER_VERSION}
    if cfg.h5_path is not None:
        stat = Path(cfg.h5_path).stat()
        key["h5_file"] = {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return config_hash(key)


def load_or_train_attribute_classifier(
    cfg: AttributeClassifierConfig, cache_dir: Path | None = None
) -> tuple[AttributeClassifier, dict]:
    """The classifier for `cfg`: from the cache (`attributes-<key>.safetensors` + `.json`) if there, else trained
    and cached (`concept_classifier.cached_classifier`). The report says `source`: "cache" or "trained"."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = classifier_key(cfg)

    def train() -> tuple[AttributeClassifier, dict, dict]:
        model, report = train_attribute_classifier(cfg)
        return model, report, {"key": key, "version": CLASSIFIER_VERSION, "attributes": list(cfg.attributes),
                               "width": cfg.width, "config": cfg.to_dict()}

    return cached_classifier(cache, f"attributes-{key}",
                             lambda meta: AttributeClassifier(meta["attributes"], meta["width"]), train)
