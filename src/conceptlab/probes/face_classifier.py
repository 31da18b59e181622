"""The face-attribute probe of `celeba` runs: the concept probe's trunk (`probes.trunk`) trained on labelled real images.

The authors score CelebA generations with a classifier trained on CelebA's own labels (every attribute combination,
the one held out of the diffusion model's training included). This probe does the same on the run's data: one 2-way
head per concept plus the validity head the concept-space reading expects, trained on `eval.probe.images_per_class`
labelled images per class from the training partition (each epoch with the authors' augmentation: colour jitter
0.1 and random horizontal flips, `train.augment`) and
`eval.probe.invalid_images` blank / noise images (`probes.concept_classifier.invalid_images`) labelled invalid,
then tested on images outside the training partition: per concept, per class and validity accuracy. `load_or_train_
face_probe` caches it by the probe config, the data's files, size, crop and train/test partition, and checks
`eval.probe.min_accuracy` (the worst of the concepts' test accuracy and validity; CelebA's own labels are not
perfect, so presets ask less than the synthetic probe's 0.99). `eval.probe.separation_min/max` have no meaning here.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from rich.progress import Progress

from conceptlab.config_base import config_hash
from conceptlab.data.labelled import unit_float
from conceptlab.data.shapes import seeded_generator
from conceptlab.probes.concept_classifier import (
    ProbeAccuracyError,
    ProbeConfig,
    cached_classifier,
    default_cache_dir,
    invalid_images,
    probe_score,
    read_concepts,
)
from conceptlab.probes.trunk import PooledConvClassifier
from conceptlab.train.augment import color_jitter, hflip

FACE_PROBE_VERSION = 2  # bump when its training data or architecture change: cached probes are retrained (2: jitter)
AUTHORS_JITTER = 0.1  # their classifier trains with ColorJitter(0.1, 0.1, 0.1, 0.1), as their diffusion model
TEST_IMAGES_PER_CLASS = 500  # labelled test images per class (fewer when a class has fewer outside training)


class FaceProbe(PooledConvClassifier):
    """One 2-way head per concept (any attribute names) and a validity head."""

    def __init__(self, concepts: list[str], width: int = 16):
        if not concepts:
            raise ValueError("a face probe needs at least one concept")
        super().__init__({name: 2 for name in [*concepts, "valid"]}, width)
        self.concepts = list(concepts)


def _labels(index: torch.Tensor, classes: list[str]) -> torch.Tensor:
    """[N, K] 0/1 concept values of class indices."""
    return torch.tensor([[int(d) for d in classes[i]] for i in index.tolist()], dtype=torch.long).reshape(
        len(index), len(classes[0]))


def _loss(logits: dict[str, torch.Tensor], labels: torch.Tensor, valid: torch.Tensor, concepts: list[str]):
    """Validity CE on every image; each concept's CE on valid images and towards 50/50 on invalid ones."""
    loss = F.cross_entropy(logits["valid"], valid)
    for j, c in enumerate(concepts):
        log_p = F.log_softmax(logits[c], 1)
        per = torch.where(valid.bool(), -log_p.gather(1, labels[:, j:j + 1].clamp(min=0))[:, 0], -log_p.mean(1))
        loss = loss + per.mean()
    return loss


def evaluate_face_probe(probe: FaceProbe, dgp, cfg: ProbeConfig) -> dict:
    """Accuracy on labelled images outside the training partition (per concept, jointly and per class) and
    validity accuracy on those images and as many fresh invalid ones."""
    began = time.perf_counter()
    test = dgp.labelled_set(TEST_IMAGES_PER_CLASS, training=False, seed=cfg.seed)
    if len(test) == 0:
        raise ValueError("no labelled images outside the training partition to test the face probe on")
    images, labels = unit_float(test.images), _labels(test.class_index, test.class_codes)
    reading = read_concepts(probe, images)
    right = {c: reading.predicted[c] == labels[:, j] for j, c in enumerate(probe.concepts)}
    joint = torch.stack(list(right.values())).all(0)
    per_class = {}
    for k, code in enumerate(test.class_codes):
        rows = test.class_index == k
        if rows.any():
            per_class[code] = {**{c: round(float(right[c][rows].float().mean()), 4) for c in probe.concepts},
                               "n": int(rows.sum())}
    bad = invalid_images(len(test), dgp.image_size, seeded_generator(cfg.seed, "face-probe-invalid-test"))
    validity = torch.cat([reading.valid, ~read_concepts(probe, bad).valid]).float().mean()
    return {
        "held_out_accuracy": {**{c: round(float(v.float().mean()), 4) for c, v in right.items()},
                              "joint": round(float(joint.float().mean()), 4)},
        "per_class_accuracy": per_class,
        "validity_accuracy": round(float(validity), 4),
        "test_images": len(test),
        "eval_seconds": round(time.perf_counter() - began, 2),
    }


def train_face_probe(cfg: ProbeConfig, dgp, progress: bool = False) -> tuple[FaceProbe, dict]:
    """Train on labelled images of every class (and invalid images); returns it in eval mode with its report."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        probe = FaceProbe(list(dgp.concepts), cfg.width)
    data = dgp.labelled_set(cfg.images_per_class, training=True, seed=cfg.seed)
    if len(data) == 0:
        raise ValueError("no labelled images in the training partition to train the face probe on")
    g = seeded_generator(cfg.seed, "face-probe")
    good, labels = data.images, _labels(data.class_index, data.class_codes)
    n_good, n = len(data), len(data) + cfg.invalid_images
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    optimizer = torch.optim.AdamW(probe.parameters(), lr=cfg.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, cfg.lr, total_steps=cfg.epochs * steps_per_epoch,
                                                   pct_start=0.15)
    began = time.perf_counter()
    probe.train()
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("face probe", total=cfg.epochs * steps_per_epoch)
        for _ in range(cfg.epochs):
            bad = invalid_images(cfg.invalid_images, dgp.image_size, g)
            order = torch.randperm(n, generator=g)
            for i in range(0, n, cfg.batch_size):
                rows = order[i:i + cfg.batch_size]
                real = rows < n_good
                batch = torch.empty(len(rows), 3, dgp.image_size, dgp.image_size)
                batch[real] = color_jitter(unit_float(good[rows[real]]), AUTHORS_JITTER, g)
                batch[~real] = bad[rows[~real] - n_good]
                batch = hflip(batch, 0.5, g)
                y = torch.where(real.view(-1, 1), labels[rows.clamp(max=n_good - 1)], -1)
                loss = _loss(probe(batch), y, real.long(), probe.concepts)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                bar.advance(task)
    probe.eval()
    report = evaluate_face_probe(probe, dgp, cfg)
    report.update(train_images=n_good, train_seconds=round(time.perf_counter() - began - report["eval_seconds"], 2))
    return probe, report


def face_probe_key(cfg: ProbeConfig, dgp) -> str:
    """The cache key of the face probe: its config, the concepts, the data's files, size and crop (`dgp.key`) and
    the train/test partition (`dgp.partition_key`), so a cached probe is never tested on images it trained on."""
    return config_hash({"probe": cfg.model_dump(), "concepts": list(dgp.concepts), "data": dgp.key,
                        "partition": dgp.partition_key, "version": FACE_PROBE_VERSION})


def load_or_train_face_probe(cfg: ProbeConfig, dgp, cache_dir: Path | None = None,
                             progress: bool = False) -> tuple[FaceProbe, dict]:
    """The face probe of (cfg, the data's files, size and partition): from the cache, else trained, checked against
    `cfg.min_accuracy` (ProbeAccuracyError below it) and cached; the report says `source`: cache or trained."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = face_probe_key(cfg, dgp)

    def train() -> tuple[FaceProbe, dict, dict]:
        probe, report = train_face_probe(cfg, dgp, progress)
        score = probe_score(report)
        if score < cfg.min_accuracy:
            raise ProbeAccuracyError(
                f"face probe for {list(dgp.concepts)} reached {score:.4f} (worst of test concept accuracy and "
                f"validity), below eval.probe.min_accuracy={cfg.min_accuracy}: {report}. Train longer "
                "(eval.probe.epochs, images_per_class), widen it (eval.probe.width) or lower min_accuracy.")
        return probe, report, {"key": key, "version": FACE_PROBE_VERSION, "concepts": list(dgp.concepts),
                               "width": cfg.width, "probe_config": cfg.model_dump()}

    return cached_classifier(cache, f"face-{key}", lambda meta: FaceProbe(meta["concepts"], meta["width"]), train)
