"""The `celeba` data process: real CelebA faces whose binary attributes are the concepts (Park et al. 2024, §real data).

Read from a folder the user downloaded (nothing is downloaded here): `list_attr_celeba.txt` (the official format: a
count line, a line of the 40 attribute names, then `000001.jpg  -1  1 …`; Kaggle's `list_attr_celeba.csv` with an
`image_id` column works too), the aligned images under `img_align_celeba/` (178×218 JPEGs), and, if present,
`list_eval_partition.txt` / `.csv` (0 train, 1 validation, 2 test). The folder is `data.root`, else the environment
variable `CONCEPTLAB_CELEBA`. Given in the config, the path is part of the run's config (and id), as any config key;
taken from the environment it is not (the findings suite does that, so a run made on two machines with the files in
different places is the same run); either way `describe()` records the folder and a hash of the attribute file.

Concepts are attribute names (default Male × Wearing_Hat, the pair of the paper's figure); a class is a code with one
0/1 digit per concept, as for `shapes`. The held-out class (default "01": not Male, Wearing_Hat — the authors' held
out combination for this pair) is left out of training. Prompts are one-hot blocks of 2 entries per concept, as the
authors' (`v_conditioning_dims=[4]` for two attributes): value v ↦ (1 − v, v), so over-prompting past a value moves
outside [0, 1] and `canonical_prompt` sets one block to (0.5 ∓ offset, 0.5 ± offset), every other entry 0.

Images: a centred square crop (`crop` source pixels, default the full 178-pixel width), resized to `image_size` with
PIL's bicubic filter, held as uint8. Training uses the official training partition (or, without a partition file,
the images whose id hashes into the first 90%); `images_per_class` images of each training class are drawn with
`data_seed`, every class the same number when `balance` is on (the smallest class's count up to the cap). The other
partitions give the test images (`test_set`, the probe's held-out report). Decoded images are cached per machine
(`$CONCEPTLAB_CACHE/celeba`, keyed by the files, ids, size and crop), so a sweep decodes each JPEG once.

`concept_signal` has no generative parameter to differentiate on real data: here it is the L2 norm of the mean, over
pairs of training classes that differ in the concept alone, of the difference of their mean images — the image change
a unit change of the concept makes with the others fixed (as `shapes` measures it on renders), NaN when no such pair
is trained on; our definition for real data, named so in `describe()`. Sampling noise biases it up by about
σ·√(2d/n) for n images a class (small at CelebA's counts). Augmentation is the trainer's, as the authors' loader
does it: `train.hflip` flips (0.5 in the celeba presets), `train.color_jitter` jitters colour (0.1 there).
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor

from conceptlab.config_base import DataSection
from conceptlab.data.labelled import unit_float
from conceptlab.data.shapes import ConceptDataset, binary_codes, check_class_list, codes_as_strings, seeded_generator

ENV = "CONCEPTLAB_CELEBA"
ATTRIBUTE_FILES = ("list_attr_celeba.txt", "list_attr_celeba.csv")
PARTITION_FILES = ("list_eval_partition.txt", "list_eval_partition.csv")
CACHE_VERSION = 1  # bump when decoding, cropping or resizing change: cached images are rebuilt
CELEBA_ATTRIBUTES = (  # the 40 attributes of list_attr_celeba.txt, in its order
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs", "Big_Lips", "Big_Nose",
    "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair", "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses",
    "Goatee", "Gray_Hair", "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline", "Rosy_Cheeks",
    "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings", "Wearing_Hat", "Wearing_Lipstick",
    "Wearing_Necklace", "Wearing_Necktie", "Young",
)
SIGNAL_DEFINITION = ("L2 norm of the mean difference between the mean images of training classes that differ in "
                     "the concept alone (real data)")


class CelebADataConfig(DataSection):
    """The `celeba` data process: real faces, binary attributes as concepts (see the module docstring)."""

    labels_survive_hflip: ClassVar[bool] = True  # a mirrored face keeps its attributes (the authors' loader flips)

    kind: Literal["celeba"] = "celeba"
    root: str | None = Field(None, description=f"CelebA folder (list_attr_celeba.txt, img_align_celeba/); default "
                                               f"${ENV} (then not part of the config)")
    images_dir: str = Field("img_align_celeba", description="folder of the aligned images, under root")
    concepts: list[str] = Field(default_factory=lambda: ["Male", "Wearing_Hat"], min_length=1, max_length=4,
                                description="CelebA attribute names, one binary concept each")
    held_out_classes: list[str] = Field(default_factory=lambda: ["01"],
                                        description="class codes left out of training (one 0/1 digit per concept)")
    images_per_class: int = Field(5000, ge=1, description="training images per training class (at most)")
    balance: bool = Field(True, description="every training class gets the same number of images")
    image_size: int = Field(64, ge=8, le=256)
    crop: int | None = Field(None, ge=8, description="centred square crop in source pixels (None: the full width)")
    null_value: float = Field(-1.0, description="prompt value of a dropped label (classifier-free guidance)")
    data_seed: int = Field(0, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _codes_as_strings(cls, data):
        return codes_as_strings(data, ("held_out_classes",), 2)

    @field_validator("concepts")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"concepts must be distinct, got {v}")
        return v

    @model_validator(mode="after")
    def _classes_valid(self) -> "CelebADataConfig":
        n = len(self.concepts)
        check_class_list("held_out_classes", self.held_out_classes, self.concepts)
        if len(set(self.held_out_classes)) == 2**n:
            raise ValueError("held_out_classes holds out every class: nothing is left to train on")
        return self

    def all_classes(self) -> list[str]:
        return binary_codes(len(self.concepts))

    def resolved_held_out_classes(self) -> list[str]:
        return list(self.held_out_classes)

    def resolved_train_classes(self) -> list[str]:
        held = set(self.held_out_classes)
        return [c for c in self.all_classes() if c not in held]


# -- the files --------------------------------------------------------------------------------------------------------
@dataclass
class Attributes:
    """The attribute table of a CelebA folder: image ids (file names), attribute names, 0/1 values [N, A]."""

    ids: list[str]
    names: list[str]
    values: np.ndarray  # int8 [N, A]
    sha256: str  # of the file's bytes


def resolve_root(root: str | None) -> Path:
    """The CelebA folder: `root`, else $CONCEPTLAB_CELEBA; ValueError (one line saying what to do) if neither is set
    or the folder lacks the attribute file."""
    given = root or os.environ.get(ENV)
    if not given:
        raise ValueError(f"data.root is not set and neither is ${ENV}: download CelebA (img_align_celeba/ and "
                         f"list_attr_celeba.txt) and point data.root or ${ENV} at its folder")
    path = Path(given).expanduser()
    if not path.is_dir():
        raise ValueError(f"CelebA folder {path} does not exist (data.root or ${ENV})")
    if not any((path / name).is_file() for name in ATTRIBUTE_FILES):
        raise ValueError(f"{path} has no {' or '.join(ATTRIBUTE_FILES)}: is it the CelebA folder?")
    return path


def _rows(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header names, rows of fields) of a CelebA list file, official whitespace format or CSV with an id column."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path} is empty")
    if path.suffix == ".csv":
        header = [h.strip() for h in lines[0].split(",")]
        return header[1:], [[f.strip() for f in line.split(",")] for line in lines[1:]]
    first = lines[0].split()
    if len(first) == 1 and first[0].isdigit():  # list_attr_celeba.txt: a count, then the names
        return lines[1].split(), [line.split() for line in lines[2:]]
    return [], [line.split() for line in lines]  # list_eval_partition.txt: no header


def read_attributes(root: Path) -> Attributes:
    """The attribute table of `root` (the .txt if both exist); ValueError on a malformed file."""
    path = next(root / name for name in ATTRIBUTE_FILES if (root / name).is_file())
    names, rows = _rows(path)
    if not names:
        raise ValueError(f"{path}: no attribute names (expected a count line, then the names)")
    bad = next((i for i, r in enumerate(rows) if len(r) != len(names) + 1), None)
    if bad is not None:
        raise ValueError(f"{path}: row {bad + 1} has {len(rows[bad]) - 1} values for {len(names)} attributes")
    try:
        raw = np.array([[int(v) for v in r[1:]] for r in rows], dtype=np.int8).reshape(len(rows), len(names))
    except ValueError:
        raise ValueError(f"{path}: attribute values must be 1 or -1 (or 0)") from None
    if raw.size and not np.isin(raw, (-1, 0, 1)).all():
        raise ValueError(f"{path}: attribute values must be 1 or -1 (or 0)")
    return Attributes([r[0] for r in rows], names, (raw == 1).astype(np.int8),
                      hashlib.sha256(path.read_bytes()).hexdigest()[:16])


def read_partition(root: Path, ids: list[str]) -> tuple[np.ndarray, str]:
    """Per image: True for the training partition; and where it came from ("official" file, or "hash": an image is
    in training when its id hashes into the first 90%)."""
    path = next((root / name for name in PARTITION_FILES if (root / name).is_file()), None)
    if path is None:
        digest = [int.from_bytes(hashlib.sha256(i.encode()).digest()[:4], "little") / 2**32 for i in ids]
        return np.array(digest) < 0.9, "hash (90% training)"
    header, rows = _rows(path)
    of = {r[0]: r[-1] for r in rows}
    missing = [i for i in ids if i not in of]
    if missing:
        raise ValueError(f"{path} has no partition for {len(missing)} images (first {missing[0]})")
    return np.array([of[i] == "0" for i in ids]), f"official ({path.name})"


def _load_one(path: Path, crop: int | None, size: int) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        side = min(w, h) if crop is None else min(crop, w, h)
        left, top = (w - side) // 2, (h - side) // 2
        im = im.crop((left, top, left + side, top + side)).resize((size, size), Image.Resampling.BICUBIC)
        return np.asarray(im, dtype=np.uint8).transpose(2, 0, 1)


def _decode(folder: Path, ids: list[str], size: int, crop: int | None, progress: bool) -> Tensor:
    """uint8 [N, 3, size, size] of the images `ids` under `folder`, centre-cropped and resized."""
    from rich.progress import Progress

    missing = [i for i in ids if not (folder / i).is_file()]
    if missing:
        raise ValueError(f"{len(missing)} images listed in the attribute file are not in {folder} "
                         f"(first {missing[0]})")
    out = np.empty((len(ids), 3, size, size), dtype=np.uint8)
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(f"decoding {len(ids)} CelebA images", total=len(ids))
        for k, name in enumerate(ids):
            out[k] = _load_one(folder / name, crop, size)
            bar.advance(task)
    return torch.from_numpy(out)


def load_images(folder: Path, ids: list[str], size: int, crop: int | None, key: str,
                progress: bool = False, cache: bool = True) -> Tensor:
    """uint8 [N, 3, size, size] of the images `ids` under `folder`, centre-cropped and resized; with `cache`,
    kept under `$CONCEPTLAB_CACHE/celeba/<key>-<hash of ids>.safetensors` (concurrent callers decode once) —
    for the fixed sets a run reads again, not for one-off draws."""
    from conceptlab.store.files import cache_root, exclusive_lock, read_tensors, write_tensors

    if not ids:
        return torch.zeros(0, 3, size, size, dtype=torch.uint8)
    if not cache:
        return _decode(folder, ids, size, crop, progress)
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    where = cache_root() / "celeba"
    path = where / f"{key}-{digest}.safetensors"
    with exclusive_lock(where / f"{key}-{digest}.lock"):
        if path.is_file():
            return read_tensors(path)["images"]
        images = _decode(folder, ids, size, crop, progress)
        where.mkdir(parents=True, exist_ok=True)
        write_tensors(path, {"images": images})
        return images


# -- the process ------------------------------------------------------------------------------------------------------
def value_names(attribute: str) -> tuple[str, str]:
    """Words for an attribute's two values: "Wearing_Hat" → ("not wearing hat", "wearing hat")."""
    word = attribute.replace("_", " ").lower()
    return f"not {word}", word


class CelebADGP:
    """Real CelebA faces; the `shapes` protocol of `data/__init__.py` (classes, prompts, sets, concept signal)."""

    channels = 3
    attribute_sizes = None  # the one-hot blocks go through the concept MLP; no attribute-wise dropout
    null_label = None

    def __init__(self, cfg: CelebADataConfig, progress: bool | None = None):
        self.cfg = cfg
        self.progress = sys.stderr.isatty() if progress is None else progress  # decoding: a bar in a terminal
        self.root = resolve_root(cfg.root)
        self.folder = self.root / cfg.images_dir
        if not self.folder.is_dir():
            raise ValueError(f"{self.folder} does not exist (data.images_dir under the CelebA folder)")
        self.attributes = read_attributes(self.root)
        unknown = [c for c in cfg.concepts if c not in self.attributes.names]
        if unknown:
            raise ValueError(f"data.concepts: {unknown} are not attributes of {self.root}; it has "
                             f"{', '.join(self.attributes.names)}")
        self.image_size = cfg.image_size
        self.concepts = list(cfg.concepts)
        self.classes = cfg.all_classes()
        self.train_classes = cfg.resolved_train_classes()
        self.held_out_classes = cfg.resolved_held_out_classes()
        self.prompt_dim = 2 * len(self.concepts)
        self._slices = {c: slice(2 * i, 2 * i + 2) for i, c in enumerate(self.concepts)}
        columns = [self.attributes.names.index(c) for c in self.concepts]
        codes = self.attributes.values[:, columns]
        self.code_of = np.array(["".join(map(str, row)) for row in codes]) if len(codes) else np.array([], str)
        self.in_training, self.partition = read_partition(self.root, self.attributes.ids)
        # which images are in training: what a model trained on this data's partition (the face probe) is keyed by
        self.partition_key = hashlib.sha256(np.packbits(self.in_training).tobytes()).hexdigest()[:16]
        self.key = hashlib.sha256(repr((CACHE_VERSION, str(self.root.resolve()), cfg.images_dir,
                                        self.attributes.sha256, cfg.image_size, cfg.crop)).encode()).hexdigest()[:16]
        self.train_ids = self._training_ids()
        self._train: ConceptDataset | None = None
        self._signal: dict[str, float] | None = None

    # -- classes and prompts ------------------------------------------------------------------------------------
    def class_name(self, code: str) -> str:
        """A class code in words, e.g. "01" → "not male, wearing hat"."""
        self._check_code(code)
        return ", ".join(value_names(c)[int(d)] for c, d in zip(self.concepts, code))

    def _check_code(self, code: str) -> None:
        if code not in self.classes:
            raise ValueError(f"unknown class code {code!r}; classes for concepts {self.concepts} are {self.classes}")

    def prompt_slices(self) -> dict[str, slice]:
        return dict(self._slices)

    def make_prompt(self, values: dict[str, Tensor]) -> Tensor:
        """Prompts [N, D] from concept values: [N] (or [N, 1]) values v ↦ (1 − v, v), or [N, 2] block entries as
        given; concepts left out get the null value."""
        unknown = set(values) - set(self.concepts)
        if unknown:
            raise ValueError(f"make_prompt: {sorted(unknown)} are not concepts of this data ({self.concepts})")
        if not values:
            raise ValueError("make_prompt needs at least one concept value to know the batch size")
        n = next(iter(values.values())).shape[0]
        prompt = torch.full((n, self.prompt_dim), float(self.cfg.null_value))
        for c, v in values.items():
            v = v.float().reshape(n, -1)
            if v.shape[1] == 1:
                v = torch.cat([1 - v, v], 1)
            if v.shape[1] != 2:
                raise ValueError(f"make_prompt: {c} takes one value or 2 block entries per image, got {v.shape[1]}")
            prompt[:, self._slices[c]] = v
        return prompt

    def class_prompt(self, code: str) -> Tensor:
        """The one-hot prompt [D] of class `code`."""
        self._check_code(code)
        return self.make_prompt({c: torch.tensor([float(d)]) for c, d in zip(self.concepts, code)})[0]

    def canonical_prompt(self, concept: str, value: int, offset: float) -> Tensor:
        """A prompt [D] with only `concept`'s block set, each entry `offset` from 0.5 towards its one-hot value
        (value 1, offset 0.45: (0.05, 0.95)), every other entry 0 (the linear intervention's directions)."""
        if concept not in self.concepts:
            raise ValueError(f"canonical_prompt: {concept!r} is not a concept of this data ({self.concepts})")
        if value not in (0, 1):
            raise ValueError(f"canonical_prompt: a concept's value is 0 or 1, got {value!r}")
        prompt = torch.zeros(self.prompt_dim)
        prompt[self._slices[concept]] = torch.tensor([0.5 - offset, 0.5 + offset] if value else
                                                     [0.5 + offset, 0.5 - offset])
        return prompt

    # -- images -------------------------------------------------------------------------------------------------
    def _ids(self, code: str, training: bool) -> list[str]:
        mask = (self.code_of == code) & (self.in_training == training)
        return [self.attributes.ids[i] for i in np.flatnonzero(mask)]

    def _draw(self, ids: list[str], n: int, *parts: object) -> list[str]:
        """`n` of `ids` (all when fewer), drawn without replacement under a stream of `parts`, in file order."""
        if n >= len(ids):
            return list(ids)
        chosen = torch.randperm(len(ids), generator=seeded_generator(*parts))[:n].sort().values
        return [ids[i] for i in chosen.tolist()]

    def _training_ids(self) -> dict[str, list[str]]:
        available = {c: self._ids(c, True) for c in self.train_classes}
        empty = [c for c, ids in available.items() if not ids]
        if empty:
            raise ValueError(f"training class {empty[0]} ({self.class_name(empty[0])}) has no images in the "
                             f"training partition of {self.root}")
        n = self.cfg.images_per_class
        if self.cfg.balance:
            n = min(n, *(len(ids) for ids in available.values()))
        return {c: self._draw(ids, n, self.cfg.data_seed, "train", c) for c, ids in available.items()}

    def images(self, ids: list[str], cache: bool = True) -> Tensor:
        """uint8 [N, 3, S, S] of these images (with `cache`, decoded once per machine)."""
        return load_images(self.folder, ids, self.image_size, self.cfg.crop, self.key, self.progress, cache)

    def _dataset(self, ids_by_class: dict[str, list[str]]) -> ConceptDataset:
        ids = [i for code in ids_by_class for i in ids_by_class[code]]
        images = self.images(ids)
        prompts = torch.cat([self.class_prompt(c).expand(len(v), -1) for c, v in ids_by_class.items()]) if ids \
            else torch.zeros(0, self.prompt_dim)
        index = torch.tensor([self.classes.index(c) for c, v in ids_by_class.items() for _ in v], dtype=torch.long)
        return ConceptDataset(images, prompts, index, list(self.classes))

    def training_set(self) -> ConceptDataset:
        """The training classes' images (uint8; `images_per_class` each, balanced) with their one-hot prompts; read
        once per process (the run trains on it and `concept_signal` reads it)."""
        if self._train is None:
            self._train = self._dataset(self.train_ids)
        return self._train

    def test_set(self, n_per_class: int, seed: int = 0) -> ConceptDataset:
        """Up to n_per_class images of every class (held-out included) from outside the training partition, as
        float in [0, 1]."""
        if n_per_class <= 0:
            raise ValueError(f"images per class must be positive, got {n_per_class}")
        data = self._dataset({c: self._draw(self._ids(c, False), n_per_class, seed, "test", c) for c in self.classes})
        data.images = unit_float(data.images)
        return data

    def labelled_set(self, n_per_class: int, training: bool, seed: int = 0) -> ConceptDataset:
        """Up to n_per_class images of every class, held-out included (uint8), from the training partition or
        outside it: what a classifier of the attributes trains and is tested on (the held-out combination is held
        out of the diffusion model's training only, as in the authors' classifier)."""
        if n_per_class <= 0:
            raise ValueError(f"images per class must be positive, got {n_per_class}")
        part = "probe-train" if training else "probe-test"
        return self._dataset({c: self._draw(self._ids(c, training), n_per_class, seed, part, c)
                              for c in self.classes})

    def sample_class(self, code: str, n: int, generator: torch.Generator | None = None,
                     jitter: bool = True) -> tuple[Tensor, Tensor]:
        """n images of class `code` (float in [0, 1], drawn with replacement from all its images) and their
        prompts; `jitter` has no meaning for real images."""
        self._check_code(code)
        if n <= 0:
            raise ValueError(f"n must be positive, got {n}")
        ids = self._ids(code, True) + self._ids(code, False)
        if not ids:
            raise ValueError(f"class {code} ({self.class_name(code)}) has no images in {self.root}")
        picks = torch.randint(0, len(ids), (n,), generator=generator).tolist()
        unique = sorted(set(picks))
        images = unit_float(self.images([ids[i] for i in unique], cache=False))  # a one-off draw
        at = {i: k for k, i in enumerate(unique)}
        return images[[at[i] for i in picks]], self.class_prompt(code).expand(n, -1).clone()

    # -- concept signal ----------------------------------------------------------------------------------------
    def concept_signal(self) -> dict[str, float]:
        """Per concept: `SIGNAL_DEFINITION` over the training set (our definition for real data)."""
        if self._signal is None:
            data = self.training_set()
            means = {c: unit_float(data.images[data.class_index == self.classes.index(c)]).mean(0)
                     for c in self.train_classes}
            signal = {}
            for i, concept in enumerate(self.concepts):
                pairs = [(means[c], means[c[:i] + "0" + c[i + 1:]]) for c in means
                         if c[i] == "1" and c[:i] + "0" + c[i + 1:] in means]
                signal[concept] = (float(torch.stack([a - b for a, b in pairs]).mean(0).norm()) if pairs
                                   else float("nan"))
            self._signal = signal
        return dict(self._signal)

    def describe(self) -> dict:
        """A JSON-able summary for the run record."""
        counts = {c: {"training": int(((self.code_of == c) & self.in_training).sum()),
                      "other": int(((self.code_of == c) & ~self.in_training).sum())} for c in self.classes}
        return {
            "kind": "celeba",
            "root": str(self.root),
            "attribute_file_sha256": self.attributes.sha256,
            "partition": self.partition,
            "concepts": self.concepts,
            "image_size": self.image_size,
            "crop": self.cfg.crop,
            "classes": self.classes,
            "value_names": {c: list(value_names(c)) for c in self.concepts},
            "class_names": {c: self.class_name(c) for c in self.classes},
            "train_classes": self.train_classes,
            "held_out_classes": self.held_out_classes,
            "images_available": counts,
            "training_images": sum(len(v) for v in self.train_ids.values()),
            "training_images_per_class": {c: len(v) for c, v in self.train_ids.items()},
            "prompt_dim": self.prompt_dim,
            "prompt_slices": {c: [s.start, s.stop] for c, s in self._slices.items()},
            "class_prompts": {c: self.class_prompt(c).tolist() for c in self.classes},
            "concept_signal": self.concept_signal(),
            "concept_signal_definition": SIGNAL_DEFINITION,
        }


# -- a folder in CelebA's layout ------------------------------------------------------------------------------------
def write_drawn_celeba(root: Path, per_class: dict[str, tuple[int, int]], concepts=("Male", "Wearing_Hat"),
                       seed: int = 0, partition: bool = True, csv: bool = False) -> Path:
    """A folder laid out like CelebA — NOT CelebA: drawn faces, for tests and for trying the pipeline without the
    data (list_attr_celeba.txt or .csv, img_align_celeba/ of 178×218 JPEGs, optionally list_eval_partition.txt):
    `per_class[code]` = (training, other) image counts of each class of `concepts`. Faces are drawn so the
    attributes show: a skin-toned oval on a random background; Male darkens the jaw (a beard); Wearing_Hat puts a
    saturated band over the head; Smiling a light mouth. Every other attribute is a random label nothing shows."""
    from PIL import Image, ImageDraw

    root = Path(root)
    rng = np.random.default_rng(seed)
    folder = root / "img_align_celeba"
    folder.mkdir(parents=True, exist_ok=True)
    rows, parts, k = [], [], 0
    for code, (n_train, n_other) in sorted(per_class.items()):
        for j in range(n_train + n_other):
            k += 1
            name = f"{k:06d}.jpg"
            values = rng.integers(0, 2, len(CELEBA_ATTRIBUTES))
            for c, d in zip(concepts, code):
                values[CELEBA_ATTRIBUTES.index(c)] = int(d)
            on = {n: bool(v) for n, v in zip(CELEBA_ATTRIBUTES, values)}
            im = Image.new("RGB", (178, 218), tuple(int(x) for x in rng.integers(40, 220, 3)))
            draw = ImageDraw.Draw(im)
            skin = tuple(int(x) for x in np.array([225, 185, 160]) + rng.integers(-20, 20, 3))
            cx, cy = 89 + int(rng.integers(-6, 7)), 120 + int(rng.integers(-6, 7))
            draw.ellipse([cx - 45, cy - 60, cx + 45, cy + 60], fill=skin)
            if on["Male"]:
                draw.chord([cx - 45, cy - 10, cx + 45, cy + 60], 0, 180, fill=(60, 45, 35))
            if on["Smiling"]:
                draw.rectangle([cx - 20, cy + 25, cx + 20, cy + 33], fill=(250, 250, 250))
            if on["Wearing_Hat"]:
                hat = tuple(int(x) for x in rng.permutation([230, 30, int(rng.integers(30, 230))]))
                draw.rectangle([cx - 55, cy - 85, cx + 55, cy - 35], fill=hat)
            pixels = np.asarray(im, dtype=np.int16) + rng.integers(-8, 9, (218, 178, 3))
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(folder / name, quality=92)
            rows.append((name, values))
            parts.append((name, 0 if j < n_train else 2))
    if csv:
        lines = ["image_id," + ",".join(CELEBA_ATTRIBUTES)]
        lines += [name + "," + ",".join("1" if v else "-1" for v in values) for name, values in rows]
        (root / "list_attr_celeba.csv").write_text("\n".join(lines) + "\n")
    else:
        lines = [str(len(rows)), " ".join(CELEBA_ATTRIBUTES)]
        lines += [name + " " + " ".join(f"{'1' if v else '-1':>2}" for v in values) for name, values in rows]
        (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    if partition:
        (root / "list_eval_partition.txt").write_text("".join(f"{n} {p}\n" for n, p in parts))
    return root
