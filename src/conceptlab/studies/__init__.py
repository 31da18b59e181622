"""Kinds of study by `data.kind`: the registry from a data kind to the `Study` that builds its data and evaluates it.

Built in (one module each, found by looking for a module-level `STUDY` in this package):

- `shapes` → `studies.concept_space`: concept space, learning times, hidden emergence (Park et al. 2024);
- `bumps` → `studies.factorization`: composition / interpolation accuracy and representation geometry (Liang et
  al. 2024);
- `shapes3d` → `studies.abstractions`: when along generation each attribute is committed (Franzese et al. 2024).

Any other `data.kind` must be an import path `package.module:Name` naming a study (a class, instantiated without
arguments, or an instance) in your own package; it is imported when the config is loaded and its interface
checked, one line on failure. The protocol is in `studies.base`; `docs/extending.md` walks through a new kind.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from conceptlab.plugins import PluginError, is_import_path, require, resolve
from conceptlab.studies.base import (
    DataProcess,
    Evaluation,
    Measurement,
    MemoryNeeds,
    StepResult,
    Study,
    StudyBase,
    Summary,
    due_checkpoints,
    eval_noise_seed,
    read_step_tables,
    run_due_checkpoints,
)

__all__ = [
    "DataProcess",
    "Evaluation",
    "Measurement",
    "MemoryNeeds",
    "StepResult",
    "Study",
    "StudyBase",
    "Summary",
    "build_data",
    "builtin_studies",
    "due_checkpoints",
    "eval_noise_seed",
    "read_step_tables",
    "run_due_checkpoints",
    "study_for",
]

_INTERFACE = ("kind", "data_config", "eval_fields", "exclusive_sections")
_METHODS = ("complete_config", "build_data", "check", "headline", "prepare_shared", "evaluation")


@functools.lru_cache(maxsize=None)
def builtin_studies() -> tuple[Study, ...]:
    """The studies shipped in this package, in config order (their `order`, then kind)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        study = getattr(module, "STUDY", None)
        if study is not None:
            found.append(study)
    kinds = [s.kind for s in found]
    if len(set(kinds)) != len(kinds):
        raise RuntimeError(f"two built-in studies serve the same data kind: {sorted(kinds)}")
    return tuple(sorted(found, key=lambda s: (getattr(s, "order", 100), s.kind)))


def builtin_kinds() -> list[str]:
    return [s.kind for s in builtin_studies()]


@functools.lru_cache(maxsize=None)
def _plugin(path: str) -> Study:
    obj = resolve(path, "data kind")
    if isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as err:
            raise PluginError(f"data kind {path!r}: cannot instantiate {obj.__name__} without arguments ({err})") from None
    return require(obj, path, "data kind (a study)", _INTERFACE, _METHODS)


def study_for(kind: str) -> Study:
    """The study serving `data.kind` = `kind` (a built-in name or a plug-in's import path); ValueError (one line)
    for an unknown kind, PluginError for a plug-in that does not import or lacks the interface."""
    for study in builtin_studies():
        if study.kind == kind:
            return study
    if is_import_path(kind):
        return _plugin(kind)
    raise ValueError(
        f"unknown data kind {kind!r}; built in: {', '.join(builtin_kinds())}, "
        "or a plug-in study's import path package.module:Name"
    )


def build_data(cfg) -> DataProcess:
    """The data-generating process of a `data` section (`cfg.kind` names its study)."""
    return study_for(cfg.kind).build_data(cfg)
