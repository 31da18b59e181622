"""The concept probe: a small CNN that reads each concept's value, and whether a valid object is present."""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import Tensor

from conceptlab.config_base import StrictConfig, config_hash
from conceptlab.data.labelled import unit_float
from conceptlab.data.shapes import ATTRIBUTES, RENDER_PEAK, sample_scene, seeded_generator
from conceptlab.models.footprint import module_peak
from conceptlab.probes.trunk import PooledConvClassifier
from conceptlab.store.files import (
    FileFormatError,
    cache_root,
    exclusive_lock,
    read_json,
    read_tensors,
    write_json,
    write_tensors,
)

PROBE_VERSION = 1  # bump whenever training data or architecture change, so cached probes are retrained
SEPARATION_GRID = (0.2, 0.4, 0.6, 0.8)  # exact-mean test separations reported (those inside the probe's range)
EVAL_IMAGES = 4000  # fresh valid (and as many invalid) renders the probe is evaluated on
READ_BATCH = 512  # images per pass when reading generations


class ProbeConfig(StrictConfig):
    """The concept classifier used to read generations (trained once, cached by config hash)."""

    width: int = Field(16, ge=4, description="channels of the first conv stage (then 2x)")
    images_per_class: int = Field(1500, ge=10)
    invalid_images: int = Field(3000, ge=10, description="blank / background / noise images labelled invalid")
    separation_min: float = Field(0.1, gt=0.0, le=1.0)
    separation_max: float = Field(0.8, gt=0.0, le=1.0)
    epochs: int = Field(6, ge=1)
    batch_size: int = Field(128, ge=1)
    lr: float = Field(2e-3, gt=0.0)
    seed: int = Field(1234, ge=0)
    min_accuracy: float = Field(0.99, ge=0.0, le=1.0, description="held-out accuracy the probe must reach")

    @model_validator(mode="after")
    def _range(self) -> "ProbeConfig":
        if self.separation_min > self.separation_max:
            raise ValueError("separation_min must not exceed separation_max")
        return self


class ProbeAccuracyError(ValueError):
    """The trained probe does not reach `ProbeConfig.min_accuracy`."""


class ConceptProbe(PooledConvClassifier):
    """The shared classifier trunk (`probes.trunk`) with one 2-way head per concept and a validity head."""

    def __init__(self, concepts: list[str], width: int = 16):
        unknown = set(concepts) - set(ATTRIBUTES)
        if unknown or not concepts:
            raise ValueError(f"concepts must be a non-empty subset of {ATTRIBUTES}, got {concepts}")
        super().__init__({name: 2 for name in [*concepts, "valid"]}, width)
        self.concepts = list(concepts)


@dataclass
class ConceptReading:
    """What the probe reads from N images."""

    p_valid: Tensor  # [N] probability that a valid object is present
    p_one: dict[str, Tensor]  # concept → [N] probability of value "1"
    predicted: dict[str, Tensor]  # concept → [N] long, the more likely value
    valid: Tensor  # [N] bool, p_valid > 0.5


# -- probe training data --------------------------------------------------------------------------------------------
MAX_JITTER = 1.0  # the probe trains on jitter drawn from [0, MAX_JITTER) (of the DGP's; `valid_images`)


def valid_images(
    n: int, concepts: list[str], image_size: int, cfg: ProbeConfig, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """n ground-truth renders of random classes, each with its own separations in [separation_min, separation_max]
    (every attribute), random jitter (0..1 of the DGP's), a training-style or test (0.9) background, and for half
    of them extra pixel noise of std 0.002..0.05 (generations are noisier than the DGP).
    Returns images and labels [n, len(concepts)] (each concept's value)."""
    values = torch.zeros(n, len(ATTRIBUTES), dtype=torch.long)
    for c in concepts:
        values[:, ATTRIBUTES.index(c)] = torch.randint(0, 2, (n,), generator=generator)
    separation = cfg.separation_min + (cfg.separation_max - cfg.separation_min) * torch.rand(
        n, len(ATTRIBUTES), generator=generator
    )
    jitter = MAX_JITTER * torch.rand(n, generator=generator)  # × 1.0: the same floats
    test_background = torch.rand(n, generator=generator) < 0.5
    scene = sample_scene(values, separation, jitter, "background" in concepts, test_background, generator)
    noisy = torch.rand(n, 1, 1, 1, generator=generator) < 0.5
    extra_std = torch.where(noisy, 0.002 * 25 ** torch.rand(n, 1, 1, 1, generator=generator), 0.0)
    images = scene.render(image_size, generator=generator)
    images = (images + extra_std * torch.randn(images.shape, generator=generator)).clamp(0.0, 1.0)
    return images, values[:, [ATTRIBUTES.index(c) for c in concepts]]


def exact_images(
    concepts: list[str], image_size: int, separation: float, n_per_class: int, seed: int
) -> tuple[Tensor, Tensor]:
    """n_per_class renders of every class (binary order of codes) at exact means (no jitter, test background),
    every separation = `separation`. Returns images and labels [N, len(concepts)]."""
    g = seeded_generator(seed, "exact", separation)
    k = len(concepts)
    codes = torch.arange(2**k).repeat_interleave(n_per_class)
    labels = torch.stack([(codes >> (k - 1 - j)) & 1 for j in range(k)], 1)
    values = torch.zeros(codes.numel(), len(ATTRIBUTES), dtype=torch.long)
    values[:, [ATTRIBUTES.index(c) for c in concepts]] = labels
    scene = sample_scene(values, torch.full((len(ATTRIBUTES),), separation), 0.0, "background" in concepts, True, g)
    return scene.render(image_size, generator=g), labels


def invalid_images(n: int, image_size: int, generator: torch.Generator) -> Tensor:
    """n images without a valid object, in five kinds: blank canvases (uniform random colours, reddish/bluish greys,
    the nuisance background range), such canvases with pixel noise of std 0.005..0.5, pure uniform noise,
    low-frequency random fields, and smooth Gaussian blobs without a crisp edge."""
    g, s = generator, image_size

    def rand(*shape: int) -> Tensor:
        return torch.rand(*shape, generator=g)

    kind = torch.randint(0, 5, (n,), generator=g).view(n, 1, 1, 1)
    tinted_grey = rand(n, 1) + (0.3 * rand(n, 1) - 0.15) * torch.tensor([1.0, 0.0, -1.0])
    palette = torch.stack([rand(n, 3), tinted_grey, 0.8 + 0.2 * rand(n, 3)], 1).clamp(0, 1)
    flat = palette[torch.arange(n), torch.randint(0, 3, (n,), generator=g)].view(n, 3, 1, 1)

    noise_std = torch.where(kind == 1, 0.005 * 100 ** rand(n, 1, 1, 1), 0.001)  # log-uniform 0.005..0.5
    images = flat + noise_std * torch.randn(n, 3, s, s, generator=g)
    images = torch.where(kind == 2, rand(n, 3, s, s), images)

    grid = torch.randint(0, 3, (n,), generator=g).view(n, 1, 1, 1)
    amplitude = 0.1 + 0.4 * rand(n, 1, 1, 1)
    for i, k in enumerate((2, 4, 8)):
        field = F.interpolate(torch.randn(n, 3, k, k, generator=g), size=(s, s), mode="bicubic", align_corners=False)
        images = torch.where((kind == 3) & (grid == i), images + amplitude * field, images)

    axis = (torch.arange(s, dtype=torch.float32) + 0.5) * (2.0 / s) - 1.0
    for _ in range(3):
        center = 1.6 * rand(n, 2) - 0.8
        width = (2.5 + 3.5 * rand(n)) * (2.0 / s)  # σ of 2.5..6 px
        d2 = (axis.view(1, 1, s) - center[:, :1, None]) ** 2 + (axis.view(1, s, 1) - center[:, 1:, None]) ** 2
        bump = torch.exp(-d2 / (2 * width.view(n, 1, 1) ** 2)).unsqueeze(1)
        present = (kind == 4) & (rand(n, 1, 1, 1) < 0.7)
        images = torch.where(present, images + bump * (rand(n, 3, 1, 1) - flat), images)
    return images.clamp(0.0, 1.0)


# -- training -------------------------------------------------------------------------------------------------------
def _epoch_data(
    concepts: list[str], image_size: int, cfg: ProbeConfig, generator: torch.Generator
) -> tuple[Tensor, Tensor, Tensor]:
    """A fresh shuffled epoch: images, concept labels (-1 for invalid images), validity labels."""
    n_valid = cfg.images_per_class * 2 ** len(concepts)
    good, labels = valid_images(n_valid, concepts, image_size, cfg, generator)
    bad = invalid_images(cfg.invalid_images, image_size, generator)
    images = torch.cat([good, bad])
    labels = torch.cat([labels, torch.full((cfg.invalid_images, len(concepts)), -1)])
    valid = torch.cat([torch.ones(n_valid, dtype=torch.long), torch.zeros(cfg.invalid_images, dtype=torch.long)])
    order = torch.randperm(images.shape[0], generator=generator)
    return images[order], labels[order], valid[order]


def _loss(logits: dict[str, Tensor], labels: Tensor, valid: Tensor, concepts: list[str]) -> Tensor:
    """Validity CE on all images; per concept, CE on valid images and CE towards 50/50 on invalid ones."""
    loss = F.cross_entropy(logits["valid"], valid)
    is_valid = valid.bool()
    for j, c in enumerate(concepts):
        log_p = F.log_softmax(logits[c], 1)
        per_image = torch.where(is_valid, -log_p.gather(1, labels[:, j : j + 1].clamp(min=0))[:, 0], -log_p.mean(1))
        loss = loss + per_image.mean()
    return loss


def train_probe(
    cfg: ProbeConfig, concepts: list[str], image_size: int, progress: bool = True
) -> tuple[ConceptProbe, dict]:
    """Train a probe on fresh renders each epoch (all classes, held-out included, plus invalid images);
    returns it in eval mode with its evaluation report (see `evaluate_probe`)."""
    with torch.random.fork_rng(devices=[]):  # seeded weight init, caller's global RNG untouched
        torch.manual_seed(cfg.seed)
        probe = ConceptProbe(concepts, cfg.width)
    g = seeded_generator(cfg.seed, "train")
    per_epoch = cfg.images_per_class * 2 ** len(concepts) + cfg.invalid_images
    steps_per_epoch = math.ceil(per_epoch / cfg.batch_size)
    optimizer = torch.optim.AdamW(probe.parameters(), lr=cfg.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, cfg.lr, total_steps=cfg.epochs * steps_per_epoch, pct_start=0.15
    )
    columns = (TextColumn("probe {task.description}"), BarColumn(), TextColumn("{task.fields[loss]}"),
               TimeElapsedColumn(), TimeRemainingColumn())
    start = time.perf_counter()
    probe.train()
    with Progress(*columns, disable=not progress, transient=True) as bar:
        task = bar.add_task("training", total=cfg.epochs * steps_per_epoch, loss="")
        for epoch in range(cfg.epochs):
            images, labels, valid = _epoch_data(concepts, image_size, cfg, g)
            for i in range(0, images.shape[0], cfg.batch_size):
                sl = slice(i, i + cfg.batch_size)
                loss = _loss(probe(images[sl]), labels[sl], valid[sl], concepts)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                schedule.step()
                bar.update(task, advance=1, description=f"epoch {epoch + 1}/{cfg.epochs}", loss=f"{loss.item():.3f}")
    probe.eval()
    report = evaluate_probe(probe, cfg, image_size)
    report["train_seconds"] = round(time.perf_counter() - start - report["eval_seconds"], 2)
    return probe, report


# -- reading and scoring --------------------------------------------------------------------------------------------
def read_concepts(probe: ConceptProbe, images: Tensor, batch_size: int = READ_BATCH) -> ConceptReading:
    """Read validity and every concept from images [N, 3, S, S] in [0, 1], or uint8 0..255 (divided by 255; results
    on the CPU)."""
    probe.eval()
    device = next(probe.parameters()).device
    parts: dict[str, list[Tensor]] = {name: [] for name in probe.heads}
    with torch.inference_mode():
        for i in range(0, images.shape[0], batch_size):
            for name, logits in probe(unit_float(images[i : i + batch_size]).to(device, torch.float32)).items():
                parts[name].append(logits.softmax(1)[:, 1].cpu())
    p = {name: torch.cat(chunks) if chunks else torch.zeros(0) for name, chunks in parts.items()}
    p_valid = p.pop("valid")
    return ConceptReading(p_valid, p, {c: (q > 0.5).long() for c, q in p.items()}, p_valid > 0.5)


def _correct(reading: ConceptReading, labels: Tensor, concepts: list[str]) -> dict[str, Tensor]:
    """Per concept (and "joint"), [N] bool: read as valid AND with the labelled value."""
    right = {c: reading.valid & (reading.predicted[c] == labels[:, j]) for j, c in enumerate(concepts)}
    return {**right, "joint": torch.stack(list(right.values())).all(0)}


def accuracy(reading: ConceptReading, target_code: str, concepts: list[str]) -> dict[str, float]:
    """Per concept, the fraction of images read as valid AND with the target value; "joint": all concepts right."""
    if len(target_code) != len(concepts) or set(target_code) - {"0", "1"}:
        raise ValueError(f"target code {target_code!r} must be {len(concepts)} digits of 0/1 for {concepts}")
    labels = torch.tensor([int(d) for d in target_code]).expand(reading.valid.numel(), -1)
    return {k: v.float().mean().item() for k, v in _correct(reading, labels, concepts).items()}


def evaluate_probe(probe: ConceptProbe, cfg: ProbeConfig, image_size: int, n: int = EVAL_IMAGES) -> dict:
    """Scores on images the probe never saw; invalid readings count as failures in every concept accuracy.

    `held_out_accuracy`: n fresh renders drawn like the training ones; `accuracy_by_separation`: the worst class
    at exact means (test background) for each separation of SEPARATION_GRID inside the probe's range;
    `validity_accuracy`: all those valid images plus n fresh invalid ones; `invalid_read_valid`: the fraction of
    the invalid ones read as valid."""
    start, concepts = time.perf_counter(), probe.concepts
    g = seeded_generator(cfg.seed, "evaluate")
    images, labels = valid_images(n, concepts, image_size, cfg, g)
    reading = read_concepts(probe, images)
    held_out = {k: v.float().mean().item() for k, v in _correct(reading, labels, concepts).items()}
    valid_flags, by_separation = [reading.valid], {}
    for sep in [s for s in SEPARATION_GRID if cfg.separation_min <= s <= cfg.separation_max]:
        images, labels = exact_images(concepts, image_size, sep, max(1, 256 >> len(concepts)), cfg.seed)
        reading = read_concepts(probe, images)
        valid_flags.append(reading.valid)
        right = _correct(reading, labels, concepts)  # images are grouped by class, 2^k groups
        by_separation[str(sep)] = {  # the worst class
            k: v.view(2 ** len(concepts), -1).float().mean(1).min().item() for k, v in right.items()
        }
    invalid = read_concepts(probe, invalid_images(n, image_size, g)).valid
    flags = torch.cat([*valid_flags, ~invalid])
    return {
        "held_out_accuracy": held_out,
        "accuracy_by_separation": by_separation,
        "validity_accuracy": flags.float().mean().item(),
        "invalid_read_valid": invalid.float().mean().item(),
        "eval_seconds": round(time.perf_counter() - start, 2),
    }


def probe_memory(cfg: ProbeConfig, concepts: list[str], image_size: int) -> int:
    """Peak bytes of training and evaluating a probe: its largest set of renders (an epoch, or the evaluation's valid
    and invalid images) with their render intermediates, plus its largest pass (a training step, or a reading
    batch), measured on the meta device."""
    image = 3 * image_size**2 * 4
    epoch = cfg.images_per_class * 2 ** len(concepts) + cfg.invalid_images
    renders = max(epoch, 2 * EVAL_IMAGES) * image * RENDER_PEAK
    return renders + _probe_pass_peak(tuple(concepts), cfg.width, image_size, cfg.batch_size)


@functools.lru_cache(maxsize=256)
def _probe_pass_peak(concepts: tuple[str, ...], width: int, image_size: int, batch_size: int) -> int:
    """The larger of a probe's training step at `batch_size` and its reading pass, on the meta device (a sweep asks
    for the same probe once per run)."""
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        probe = ConceptProbe(list(concepts), width)

    def images(n: int) -> Tensor:
        return torch.empty(n, 3, image_size, image_size, device="meta")

    training = module_peak(probe.train(), (images(batch_size),), backward=True)
    reading = module_peak(probe.eval(), (images(READ_BATCH),), backward=False)
    return max(training, reading)


def probe_score(report: dict) -> float:
    """The figure checked against `min_accuracy`: the worst of every concept's held-out accuracy and validity."""
    concept_acc = [v for k, v in report["held_out_accuracy"].items() if k != "joint"]
    return min([*concept_acc, report["validity_accuracy"]])


# -- cache ----------------------------------------------------------------------------------------------------------
def probe_key(cfg: ProbeConfig, concepts: list[str], image_size: int) -> str:
    return config_hash(
        {"probe": cfg.model_dump(), "concepts": list(concepts), "image_size": image_size, "version": PROBE_VERSION}
    )


def default_cache_dir() -> Path:
    """`$CONCEPTLAB_CACHE/probes`, else `~/.cache/conceptlab/probes`."""
    return cache_root() / "probes"


def cached_classifier(cache: Path, name: str, build, train) -> tuple[torch.nn.Module, dict]:
    """A classifier cached as `<name>.safetensors` + `<name>.json` under `cache`: loaded (`build(sidecar)` makes the
    module, its weights are read into it) when both files exist, else `train()` → (module, report, sidecar fields) is
    called — it raises when the classifier falls short — and its weights are written before the sidecar, which marks
    a complete entry. One process trains a missing entry; others asking for it (sweep workers) wait on its lock, then
    load it. The report says `source`: "cache" or "trained"; an entry file that cannot be read is a FileFormatError
    naming it (deleting it has the classifier trained again)."""
    weights, sidecar = cache / f"{name}.safetensors", cache / f"{name}.json"
    with exclusive_lock(cache / f"{name}.lock"):
        if weights.exists() and sidecar.exists():
            try:
                meta = read_json(sidecar)
                tensors = read_tensors(weights)
            except FileFormatError as err:
                raise FileFormatError(f"cached classifier {err}; delete it to train the classifier again") from None
            module = build(meta)
            module.load_state_dict(tensors)
            return module.eval(), {**meta["report"], "source": "cache"}
        module, report, meta = train()
        cache.mkdir(parents=True, exist_ok=True)
        write_tensors(weights, module.state_dict())
        write_json(sidecar, {**meta, "report": report})
        return module, {**report, "source": "trained"}


def load_or_train_probe(
    cfg: ProbeConfig,
    concepts: list[str],
    image_size: int,
    cache_dir: Path | None = None,
    progress: bool = True,
) -> tuple[ConceptProbe, dict]:
    """The probe for (cfg, concepts, image_size): loaded from the cache if there, else trained, checked against
    `cfg.min_accuracy` (ProbeAccuracyError if below) and cached as `<key>.safetensors` + `<key>.json`
    (`cached_classifier`). The returned report says `source`: "cache" or "trained"."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = probe_key(cfg, concepts, image_size)

    def train() -> tuple[ConceptProbe, dict, dict]:
        probe, report = train_probe(cfg, concepts, image_size, progress)
        score = probe_score(report)
        if score < cfg.min_accuracy:
            raise ProbeAccuracyError(
                f"concept probe for {concepts} reached {score:.4f} (worst of held-out concept accuracy and validity), "
                f"below min_accuracy={cfg.min_accuracy}: {report}. Train longer (epochs, images_per_class) or widen it."
            )
        return probe, report, {"key": key, "version": PROBE_VERSION, "concepts": list(concepts), "width": cfg.width,
                               "image_size": image_size, "probe_config": cfg.model_dump()}

    return cached_classifier(cache, key, lambda meta: ConceptProbe(meta["concepts"], meta["width"]), train)
