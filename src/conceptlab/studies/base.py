"""The study protocol: what one kind of study (a data kind and its evaluation) gives the run driver.

A run is config → data → model → train → evaluate → store → report. The run driver (`experiments.runner`) owns
that sequence and the one resumable loop over checkpoints; a study fills in what depends on the kind of data:

- `kind`: the `data.kind` it serves; `data_config`: its `data` section (a `config_base.DataSection`);
- `eval_fields`: the fields it adds to the `eval` section (name → (annotation, pydantic `Field`)), and
  `exclusive_sections`, the ones only runs of this kind may set;
- `complete_config(cfg)`: at config load, fill in its defaults and refuse what cannot work (raise ValueError);
- `build_data(data_cfg)`: its data-generating process (a `DataProcess`);
- `check(cfg, dgp, model)`: before training, fail fast on what would only break the evaluation (a hook name);
- `memory_needs(cfg)` (optional): the memory its data and evaluation will take, from the config alone
  (`MemoryNeeds`), so the run driver can refuse a run that cannot fit before allocating anything;
- `headline(cfg, dgp)`: one line for the console;
- `prepare_shared(cfg, progress)`: once per sweep, before parallel workers start (e.g. train the cached concept probe);
- `uses_cache` (default False): True when its runs keep something in the per-machine cache (`store.files.cache_root`),
  so a run (and a local sweep) checks that folder is writable before training;
- `evaluation(cfg, dgp, model, run, console, progress)`: an `Evaluation` — its per-checkpoint `Measurement`s,
  which the driver runs resumably (one rule for "every k-th checkpoint", the checkpoint's config hash checked on
  every load), and `summarize()`, which turns the measurements into run-level tables, summary fields and figures.

`StudyBase` gives the optional parts their defaults. Register a study by putting a module with a module-level
`STUDY` in `conceptlab.studies`, or name it in a config by import path (`data.kind: mypkg.worlds:RingStudy`);
see `docs/extending.md`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, runtime_checkable

import pandas as pd
import torch
from torch import nn
from rich.console import Console
from torch import Tensor

from conceptlab.config_base import DataSection
from conceptlab.store.files import read_parquet
from conceptlab.store.run_folder import RunFolder


@runtime_checkable
class DataProcess(Protocol):
    """What the run driver needs from any data-generating process (each study asks its own DGP for more)."""

    prompt_dim: int
    channels: int
    image_size: int
    attribute_sizes: tuple[int, ...] | None  # one-hot prompt blocks (attribute-wise dropout), or None
    null_label: float | None  # a prompt value the network's encoder must recognise as "dropped", or None

    def training_set(self) -> Any:  # `.images` [N, C, S, S] in [0, 1] (or uint8), `.prompts` [N, prompt_dim]
        ...

    def describe(self) -> dict: ...


NOISE_SEEDING_VERSION = 1  # bump when `run_noise_seed` derives other seeds: enters run ids (experiments.provenance)


def run_noise_seed(seed: int, cfg) -> int:
    """`seed` made the run's own: a stable hash of (`seed`, `train.train_seed`), 62 bits (so call sites may still add
    small offsets). A hash, not an affine map: seed · k + train_seed reduces to train_seed at the default seed 0, and
    offsets added at the call sites (+j per attribute, +k per region) then collide with the neighbouring run's."""
    digest = hashlib.sha256(repr(("eval-noise", int(seed), int(cfg.train.train_seed))).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 2


def eval_noise_seed(seed: int, cfg) -> int:
    """The seed an evaluation noise stream or sample draws from: `seed` (every run of a preset draws the same), or
    with `eval.noise_per_run` the run's own (`run_noise_seed`)."""
    return run_noise_seed(seed, cfg) if cfg.eval.noise_per_run else seed


@dataclass
class MemoryNeeds:
    """What a study's data and evaluation will hold at their peaks, in bytes, estimated from the config alone.

    `data`: building and holding the training set (renders and their intermediates); `evaluation`: what the
    evaluation holds besides the network's own passes (ground truth, generated images, a probe trained on renders);
    `eval_batch`: images in the largest single network pass of the evaluation (0: none known). `data_keys` and
    `eval_keys` name the config keys that drive each, for the message that refuses a run."""

    data: int = 0
    evaluation: int = 0
    eval_batch: int = 0
    data_keys: str = ""
    eval_keys: str = ""


@dataclass
class StepResult:
    """What a measurement records at one checkpoint; the run driver writes it into the run folder.

    `rows` go to the measurement's step file (a DataFrame as Parquet, a dict as JSON); `samples` (name → tensor)
    are merged into the study's samples file; `tensors` (name → tensor), if any, are written beside the rows as
    `step_XXXXXXX.safetensors` before them; `info` is shown on the progress bar; `scalars` (name → number: an
    accuracy, a score) are what the run's TensorBoard log shows for this measurement at this checkpoint.
    """

    rows: pd.DataFrame | dict
    samples: dict[str, Tensor] = field(default_factory=dict)
    tensors: dict[str, Tensor] | None = None
    info: str = ""
    scalars: dict[str, float] = field(default_factory=dict)


@dataclass
class Measurement:
    """One resumable per-checkpoint measurement of a study.

    `measure(step)` is called while the model holds that checkpoint's weights (EMA weights when `use_ema` and the
    checkpoint has them). Checkpoints measured: every `every`-th (the first, the (k+1)-th, …) and always the last;
    `every=None` the last only. A checkpoint whose step file exists is skipped, so an interrupted evaluation
    resumes. Files: `<directory>/step_XXXXXXX<suffix>`, or `<directory>/step_XXXXXXX/<piece><suffix>` with a
    `piece`; kept samples go to the run-level file `samples_file`.
    """

    name: str
    measure: Callable[[int], StepResult]
    every: int | None = 1
    use_ema: bool = True
    directory: str | None = None  # default: name
    piece: str | None = None
    suffix: str = ".parquet"
    samples_file: str | None = None

    @property
    def folder(self) -> str:
        return self.directory or self.name


@dataclass
class Summary:
    """What a study's `summarize()` returns; the run driver writes it into the run folder.

    `fields` go into summary.json; `tables` (name → DataFrame) become run-level `<name>.parquet`; `files`
    (file name → JSON-able object) run-level JSON files; `figures` (file name → matplotlib figure) PNGs under
    figures/; `seconds` time any expensive parts (the driver times the whole call as well).
    """

    fields: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    files: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class Evaluation:
    """A study's evaluation of one run: its measurements (run by the driver) and the run-level summary after them.

    `setup_seconds` are the seconds the study spent getting ready (e.g. loading or training a probe)."""

    measurements: list[Measurement]
    summarize: Callable[[], Summary]
    setup_seconds: dict[str, float] = field(default_factory=dict)


@runtime_checkable
class Study(Protocol):
    """A kind of study: see the module docstring. Duck-typed; `StudyBase` supplies the optional parts."""

    kind: str
    data_config: type[DataSection]
    eval_fields: Mapping[str, tuple[Any, Any]]
    exclusive_sections: frozenset[str]

    def complete_config(self, cfg) -> None: ...

    def build_data(self, cfg: DataSection) -> DataProcess: ...

    def check(self, cfg, dgp, model) -> None: ...

    def headline(self, cfg, dgp) -> str: ...

    def prepare_shared(self, cfg, progress: bool = False) -> None: ...

    def evaluation(self, cfg, dgp, model, run: RunFolder, console: Console, progress: bool) -> Evaluation: ...


class StudyBase:
    """Defaults for the optional parts of a study; subclasses set `kind`, `data_config`, `build_data` and
    `evaluation`."""

    kind: str = ""
    version: int = 1  # bump when a change alters the study's numbers: enters run ids (no stale run is reused)
    # the first `version` whose training data are generated as now (None: `version` itself). A bump that changes only
    # the evaluation leaves it, so the stale runs' training is reused and only their evaluation runs again
    # (experiments.training_reuse); a change to the data process sets it to the new version.
    data_since: int | None = None
    order: int = 100  # position of its eval fields in a saved config (built-in studies first)
    data_config: type[DataSection] = DataSection
    eval_fields: Mapping[str, tuple[Any, Any]] = {}
    exclusive_sections: frozenset[str] = frozenset()
    # what a findings criterion may read (experiments.findings checks a suite against these at load): the top-level
    # sections the study adds to summary.json (empty: not declared, not checked) and its run-level tables with their
    # columns (`<name>` in a column stands for a name part, e.g. `p_<concept>`)
    summary_sections: frozenset[str] = frozenset()
    run_tables: Mapping[str, tuple[str, ...]] = {}
    # whether its runs keep something in the per-machine cache (`store.files.cache_root`: a trained probe or
    # classifier, decoded images): a run then checks that folder is writable before it trains
    uses_cache: bool = False

    def complete_config(self, cfg) -> None:
        """Fill in defaults and refuse impossible combinations at config load (raise ValueError)."""

    def check(self, cfg, dgp, model) -> None:
        """Fail before training on what would only break the evaluation."""

    def config_warnings(self, cfg) -> list[str]:
        """Lines the run prints (on stderr) before training about a config that runs but may mislead: e.g. data
        outside what the study's probe was trained on. Default: none."""
        return []

    def sample_step_settings(self, cfg) -> dict[str, int]:
        """The sampler step counts the evaluation uses, by the key that sets each (e.g. {"eval.sample_steps": 50}):
        the config refuses, at load, one a DDPM chain cannot take (`diffusion.ddpm_steps` must be a multiple).
        Default: none beyond `diffusion.sample_steps`, which the diffusion section checks itself."""
        return {}

    def memory_needs(self, cfg) -> MemoryNeeds:
        """The memory of this study's data and evaluation from the config (default: unknown, counted as nothing; the
        run's estimate then covers the model and its training only)."""
        return MemoryNeeds()

    def headline(self, cfg, dgp) -> str:
        described = dgp.describe()
        return f"{described['training_images']} training images" if "training_images" in described else cfg.data.kind

    def prepare_shared(self, cfg, progress: bool = False) -> None:
        """Build shared cached resources once before parallel workers start (default: nothing)."""

    def build_data(self, cfg: DataSection) -> DataProcess:  # pragma: no cover - every study overrides it
        raise NotImplementedError

    def evaluation(self, cfg, dgp, model, run, console, progress) -> Evaluation:  # pragma: no cover
        raise NotImplementedError


def due_checkpoints(checkpoints: list[tuple[int, Any]], every: int | None) -> list[tuple[int, Any]]:
    """The checkpoints a measurement with `every` covers: the 1st, (k+1)-th, (2k+1)-th, … and always the last;
    `every=None` the last only. The one "every k-th checkpoint" rule of the package."""
    if not checkpoints:
        return []
    if every is None:
        return [checkpoints[-1]]
    if every < 1:
        raise ValueError(f"every must be ≥ 1 (or None: the last checkpoint only), got {every}")
    chosen = list(checkpoints[::every])
    if chosen[-1] != checkpoints[-1]:
        chosen.append(checkpoints[-1])
    return chosen


def run_due_checkpoints(run: RunFolder, every: int | None) -> list[tuple[int, Any]]:
    """The checkpoints on disk of `run` that a measurement with `every` covers (`due_checkpoints`), counted over every
    checkpoint the run wrote — those retention pruned too (`RunFolder.pruned_steps`) — so pruning does not shift
    which ones the rule picks."""
    listed = run.list_checkpoints()
    pruned = run.pruned_steps() - {s for s, _ in listed}
    written = sorted([*listed, *((s, None) for s in pruned)], key=lambda c: c[0])
    return [c for c in due_checkpoints(written, every) if c[0] not in pruned]


def read_step_tables(run: RunFolder, directory: str, piece: str | None = None) -> pd.DataFrame:
    """Every checkpoint's Parquet rows of one measurement, concatenated in step order (stable, index reset);
    RuntimeError when no checkpoint has been measured."""
    parts = run.step_files(directory, piece)
    if not parts:
        raise RuntimeError(f"no evaluated checkpoints in {run.root / directory}")
    out = pd.concat([read_parquet(path) for _, path in parts], ignore_index=True)
    return out.sort_values("step", kind="stable").reset_index(drop=True) if "step" in out.columns else out


def once_each(controls: list[str]) -> list[str]:
    """A config's list of controls, refused when one is named twice (it would be measured twice under one name)."""
    twice = sorted({c for c in controls if controls.count(c) > 1})
    if twice:
        raise ValueError(f"control {twice[0]!r} named twice")
    return controls


def untrained_model(cfg, dgp, like, redraw_zeros: bool = False):
    """The network at initialisation — a control of every representation analysis: the run's architecture built
    under its training seed, exactly as training started (the global random state is left as it was); on `like`'s
    device, in eval mode.

    With `redraw_zeros` (the `random_init` control), every convolution and linear layer that training starts at
    zero — the last convolution of each residual branch and the output convolution — is drawn like the others
    (PyTorch's default initialisation), under the same seed. Exactly as training starts, those zeros make each
    residual block the identity on its skip path and the output 0 whatever the input: the label never reaches a
    block's output and the denoiser is the same for every prompt, so measures of the label's effect (mutual
    information, forking, the label's share of a representation) are trivially 0. The random network has no such
    blind spot."""
    from conceptlab.models.diffusion_model import build_model

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.train.train_seed)
        model = build_model(cfg.model, cfg.diffusion, dgp.prompt_dim, dgp.image_size, dgp.channels,
                            dgp.attribute_sizes, dgp.null_label)
        if redraw_zeros:
            for module in model.modules():
                weight = getattr(module, "weight", None)
                if (isinstance(module, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)) and weight is not None
                        and not bool(weight.detach().any())):
                    module.reset_parameters()
    return model.to(next(like.parameters()).device).eval()


def random_init_model(cfg, dgp, like):
    """The `random_init` control: the run's architecture with random weights in every layer (`untrained_model`
    with its zero-initialised layers redrawn)."""
    return untrained_model(cfg, dgp, like, redraw_zeros=True)
