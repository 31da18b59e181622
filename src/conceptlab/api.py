"""The Python front door: load a finished run, sample from and look inside its checkpoints; run a preset or config.

    import conceptlab

    run = conceptlab.run("micro", **{"train.steps": 20})         # or conceptlab.load_run("runs/0001-micro")
    run.summary["learning_time"]                                  # what `conceptlab runs show` prints
    run.table("concept_space")                                    # any run-level table, as a DataFrame
    images = run.sample(run.class_prompts(["11"]), step=run.steps[-1])
    out, acts = run.run_with_cache("down.0.blocks.0.hook_out", run.class_prompts(["11"]), step=20, t=0.5)

Everything goes through the same code as the command line (the run driver, the run folder, the study registry);
nothing here changes torch's or matplotlib's global state (no matplotlib backend, no torch settings, and the global
torch RNG is left as it was: training, building a model and drawing prompts use their own seeded draws). Arguments
are checked before any work: prompts one row of the run's prompt width per image, a checkpoint step one the run
saved, a diffusion time in [0, 1] (on a DDPM's grid), guidance only for a model trained with prompt dropout.
"""

from __future__ import annotations

import copy
import math
import operator
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd
import torch
from rich.console import Console
from torch import Tensor

from conceptlab.experiments.config import RunConfig
from conceptlab.experiments.loading import load_config, preset_description, preset_names
from conceptlab.experiments.runner import build_run_model, new_run_dir, run_experiment
from conceptlab.hooks import NameFilter, cache_activations, hook_points
from conceptlab.models.diffusion_model import DiffusionModel
from conceptlab.models.processes import guidance_offset
from conceptlab.store.files import read_parquet
from conceptlab.store.run_folder import RunFolder
from conceptlab.studies import study_for
from conceptlab.train.checkpoints import load_checkpoint
from conceptlab.train.trainer import load_weights

__all__ = ["Run", "list_presets", "load_run", "run"]

MODELS_KEPT = 4  # checkpoints' models a Run keeps loaded (the most recently used)


def list_presets() -> dict[str, str]:
    """The shipped presets: name → description."""
    return {name: preset_description(name) for name in preset_names()}


@contextmanager
def _own_rng() -> Iterator[None]:
    """The caller's global torch RNG (CPU and every CUDA device) as it was, whatever is drawn or seeded inside."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        yield


def _overrides(overrides: dict[str, Any]) -> list[str]:
    """Keyword overrides as `key=value` strings: dotted keys as given (`**{"train.steps": 20}`), or `__` for the dots
    (`train__steps=20`)."""
    import json

    return [f"{key.replace('__', '.')}={json.dumps(value)}" for key, value in overrides.items()]


def run(config: str | Path | RunConfig, runs_dir: str | Path | None = None, progress: bool = False,
        **overrides: Any) -> Run:
    """Train and evaluate a run (a preset name, a YAML file or a `RunConfig`, plus overrides) in a new numbered folder
    under `runs_dir` (default: the config's `runs_dir`); returns it loaded."""
    if isinstance(config, RunConfig):
        cfg = config if not overrides else load_config_from(config, _overrides(overrides))
    else:
        cfg = load_config(str(config), _overrides(overrides))
    folder = new_run_dir(Path(runs_dir or cfg.runs_dir), cfg.name)
    with _own_rng():  # the run seeds the global RNG from its config
        run_experiment(cfg, folder, progress=progress, console=Console(quiet=not progress))
    return load_run(folder)


def load_config_from(cfg: RunConfig, overrides: list[str]) -> RunConfig:
    """`cfg` with `key=value` overrides applied (validated again)."""
    from conceptlab.experiments.loading import apply_overrides, validate

    return validate(apply_overrides(cfg.model_dump(mode="json"), overrides))


def load_run(path: str | Path) -> Run:
    """A run folder (finished or not) as a `Run`; FileNotFoundError / ConfigError in one line when it is not one."""
    folder = RunFolder(path)
    if not folder.config.is_file():
        raise FileNotFoundError(f"{folder.root} is not a run folder (no config.yaml)")
    return Run(folder, load_config(str(folder.config)))


class Run:
    """One run folder: its config, summary, tables and checkpoints, and the model at any checkpoint."""

    def __init__(self, folder: RunFolder, config: RunConfig):
        self.folder = folder
        self.config = config
        self.study = study_for(config.data.kind)
        self._data = None
        self._models: OrderedDict[tuple[int, bool], DiffusionModel] = OrderedDict()

    def __repr__(self) -> str:
        state = "finished" if self.folder.is_complete() else "unfinished"
        return f"Run({str(self.folder.root)!r}, {self.config.data.kind}, {len(self.steps)} checkpoints, {state})"

    @property
    def path(self) -> Path:
        return self.folder.root

    @property
    def summary(self) -> dict:
        """The run's summary.json (FileNotFoundError while it is unfinished)."""
        return self.folder.read_summary()

    @property
    def steps(self) -> list[int]:
        """The steps of its checkpoints."""
        return [step for step, _ in self.folder.list_checkpoints()]

    @property
    def tables(self) -> list[str]:
        """The names of its run-level tables (`table(name)` reads one)."""
        return sorted(p.stem for p in self.folder.root.glob("*.parquet"))

    def table(self, name: str) -> pd.DataFrame:
        path = self.folder.table(name)
        if not path.is_file():
            raise FileNotFoundError(f"{self.folder.root} has no table {name!r}; it has {self.tables}")
        return read_parquet(path)

    @property
    def data(self):
        """The run's data-generating process (built from its config)."""
        if self._data is None:
            self._data = self.study.build_data(self.config.data)
        return self._data

    def model(self, step: int | None = None, ema: bool | None = None) -> DiffusionModel:
        """The model at checkpoint `step` (default: the last), in eval mode on the CPU; its EMA weights when it has
        them, unless `ema=False`. The checkpoint is checked (content and config hash). Each call returns a copy of
        its own: move it (`.to()`), train it or hook it freely; `sample`, `run_with_cache` and the rest use the run's
        copy, on the CPU in eval mode, whatever is done to this one."""
        return copy.deepcopy(self._model(step, ema))

    def _model(self, step: int | None = None, ema: bool | None = None) -> DiffusionModel:
        """The run's own model at checkpoint `step` (never handed out; the `MODELS_KEPT` most recently used stay
        loaded, so a loop over a long run's checkpoints holds a few networks, not all)."""
        steps = self.steps
        if not steps:
            raise FileNotFoundError(f"{self.folder.root} has no checkpoints yet")
        if step is None:
            step = steps[-1]
        else:
            try:
                step = operator.index(step)
            except TypeError:
                raise TypeError(f"step must be an integer checkpoint step, got {step!r}; "
                                f"checkpoints: {steps}") from None
        if step not in steps:
            raise ValueError(f"no checkpoint at step {step}; checkpoints: {steps}")
        use_ema = self.config.eval.use_ema if ema is None else bool(ema)
        key = (step, use_ema)
        if key not in self._models:
            with _own_rng():  # the initial weights (overwritten) are drawn from it
                model = build_run_model(self.config, self.data)
            tensors, _ = load_checkpoint(dict(self.folder.list_checkpoints())[step], self.config.training_hash())
            load_weights(model, tensors, use_ema=use_ema)
            self._models[key] = model.eval()
            while len(self._models) > MODELS_KEPT:
                self._models.popitem(last=False)
        self._models.move_to_end(key)
        return self._models[key]

    def _prompts(self, prompts: Tensor) -> Tensor:
        """`prompts` as the network takes them — float32 [N, D], one row per image, D the run's prompt width, N ≥ 1
        — or a one-line error naming the shape wanted."""
        width = self.data.prompt_dim
        if not isinstance(prompts, Tensor):
            raise TypeError(f"prompts must be a tensor [N, {width}], got {type(prompts).__name__}")
        if prompts.dim() != 2 or prompts.shape[0] < 1 or prompts.shape[1] != width:
            raise ValueError(f"prompts must be [N, {width}] with N ≥ 1 (one row per image, this run's prompt width "
                             f"{width}; run.class_prompts makes them), got shape {list(prompts.shape)}")
        if prompts.is_complex():
            raise TypeError(f"prompts must be real numbers, got {prompts.dtype}")
        return prompts.to(torch.float32)

    def class_prompts(self, classes: Sequence[str]) -> Tensor:
        """Prompts [len(classes), D] of class codes (e.g. ["11"]) at their exact concept means (`shapes` data)."""
        if not hasattr(self.data, "class_prompt"):
            raise TypeError(f"data kind {self.config.data.kind} has no class prompts; build prompts with run.data")
        if isinstance(classes, str):
            raise TypeError(f"classes must be a list of class codes, e.g. [{classes!r}], not the string {classes!r}")
        if len(classes) == 0:
            raise ValueError("classes is empty: name at least one class code, e.g. ['11']")
        with _own_rng():  # a class prompt may draw from it
            return torch.stack([self.data.class_prompt(c) for c in classes])

    def sample(self, prompts: Tensor, step: int | None = None, guidance: float | None = None, steps: int | None = None,
               seed: int = 0) -> Tensor:
        """One image [N, C, S, S] in [0, 1] per prompt row from checkpoint `step`, `steps` sampler steps (default the
        config's), guidance w ≥ 0 in the config's convention (default `diffusion.guidance_scale`; a w that mixes in
        the unconditional prediction needs a run trained with `diffusion.cfg_dropout` > 0, as the config requires),
        seeded."""
        prompts = self._prompts(prompts)
        diffusion = self.config.diffusion
        guidance = diffusion.guidance_scale if guidance is None else float(guidance)
        if not math.isfinite(guidance) or guidance < 0:
            raise ValueError(f"guidance must be a finite w ≥ 0, got {guidance:g}")
        if guidance_offset(guidance, diffusion.guidance_convention) != 0.0 and diffusion.cfg_dropout <= 0:
            raise ValueError(f"guidance w = {guidance:g} ({diffusion.guidance_convention}) mixes in unconditional "
                             "predictions, which this run never learned (trained with diffusion.cfg_dropout = 0)")
        if steps is None:
            steps = diffusion.sample_steps
        else:
            try:
                steps = operator.index(steps)
            except TypeError:
                steps = -1
            if steps < 1:
                raise ValueError(f"steps must be an integer ≥ 1 (sampler steps), got {steps!r}")
        model = self._model(step)  # the checkpoint step checked, then loaded: after the cheap checks
        null = torch.full((1, prompts.shape[1]), self.config.data.null_value)
        generator = torch.Generator().manual_seed(seed)
        return model.sample(prompts, steps, generator, guidance, null)

    def hook_names(self) -> list[str]:
        """Every hook point of the network, in order (the names do not depend on the weights: a run without a
        checkpoint yet has them too)."""
        if not self.steps:
            with _own_rng():
                return list(hook_points(build_run_model(self.config, self.data).net))
        return list(hook_points(self._model().net))

    @torch.no_grad()
    def run_with_cache(self, names: NameFilter, prompts: Tensor, step: int | None = None, t: float = 0.5,
                       images: Tensor | None = None, seed: int = 0) -> tuple[Tensor, dict[str, Tensor]]:
        """One forward pass of the network at checkpoint `step` and diffusion time t (0 data, 1 noise) on `images`
        ([0, 1], noised to t; default: pure noise) with `prompts`; returns (the network output, {hook name:
        activation}) for the hook points `names` selects (a name, a list, a predicate). `images`, when given, are one
        per prompt row, each of the run's image shape; t must be in [0, 1] (on a DDPM, a step k/T of its chain)."""
        prompts = self._prompts(prompts)
        n = prompts.shape[0]
        t = float(t)
        if not 0.0 <= t <= 1.0:  # NaN fails too
            raise ValueError(f"t must be a diffusion time in [0, 1] (0 data, 1 noise), got {t:g}")
        model = self._model(step)
        on_grid = getattr(model.process, "check_sample_times", None)  # a DDPM: only its chain's steps were trained
        if on_grid is not None:
            try:
                on_grid([t])
            except ValueError:
                chain = model.process.steps
                raise ValueError(f"t = {t:g} falls between the DDPM chain's T = {chain} steps (diffusion.ddpm_steps), "
                                 f"where the network was never trained; use a multiple of 1/{chain}") from None
        if images is not None and (images.dim() != 4 or images.shape[0] != n
                                   or tuple(images.shape[1:]) != tuple(model.image_shape)):
            raise ValueError(f"images must be [{n}, {', '.join(map(str, model.image_shape))}] (one per prompt row, "
                             f"the run's image shape), got shape {list(images.shape)}")
        generator = torch.Generator().manual_seed(seed)
        eps = torch.randn((n, *model.image_shape), generator=generator)
        time = torch.full((n,), float(t))
        x = model.process.to_model_space(images) if images is not None else torch.zeros_like(eps)
        z = model.process.noise(x, time, eps) if images is not None else eps
        with cache_activations(model.net, names) as cache:
            out = model.process.network_output(model.net, z, time, prompts)
        return out, {name: acts[0] for name, acts in cache.items() if acts}

    def probe(self):
        """The probe that read the generations (the concept probe of `shapes` data, the face probe of `celeba`
        data), from the cache (trained if missing)."""
        if not hasattr(self.study, "probe"):
            raise TypeError(f"data kind {self.config.data.kind} has no concept probe")
        return self.study.probe(self.config, self.data)[0]

    def intervention_context(self, step: int | None = None, reference_step: int | None = None):
        """What interventions see at checkpoint `step` (`interventions.InterventionContext`): the data's classes and
        prompts, the concept embeddings of the model there and of the reference checkpoint (default the last)."""
        from conceptlab.studies.emergence import intervention_context

        if not hasattr(self.data, "class_prompt"):
            raise TypeError(f"data kind {self.config.data.kind} has no concepts to intervene on")
        reference = self._model(reference_step)
        return intervention_context(self.config, self.data, self._model(step), reference)
