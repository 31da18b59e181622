"""The run configuration: `RunConfig` composes the typed sections from where they live and from the study registry.

    name, runs_dir
    data        the study's data section, chosen by `data.kind` (`studies.study_for`): `data.shapes`,
                `data.bump_world`, `data.shapes3d_world`, or a plug-in's
    model       `models.unet.ModelConfig`
    diffusion   `models.processes.DiffusionConfig`
    train       `train.config.TrainConfig`
    eval        `EvalConfig`: `noise_per_run` (`EvalBase`, every study's), then the fields every built-in study adds
                (`Study.eval_fields`), in study order; a plug-in study's own fields are added for runs of its kind
                only

Each study's `complete_config` runs after validation (defaults for its sections, cross-section checks), and an
eval section a study marks exclusive is refused for other data kinds. `RunConfig` is what is saved (resolved) as
`config.yaml` in every run folder; loading YAML, presets and `key=value` overrides lives in `experiments.loading`.
The section classes are re-exported here for convenience.
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

from pydantic import Field, SerializeAsAny, ValidationError, ValidationInfo, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from conceptlab.config_base import DataSection, StrictConfig, config_hash
from conceptlab.data.bump_world import BumpsDataConfig, HeldOutRegion
from conceptlab.data.shapes import ATTRIBUTES as CONCEPT_NAMES
from conceptlab.data.shapes import ShapesDataConfig
from conceptlab.data.shapes3d_world import FACTOR_SIZES, Shapes3DDataConfig
from conceptlab.interventions.config import (
    CustomInterventionConfig,
    EmbeddingShiftConfig,
    GuidanceConfig,
    InterventionsConfig,
    LinearInterventionConfig,
    OverPromptingConfig,
    PatchingConfig,
)
from conceptlab.models.processes import DiffusionConfig
from conceptlab.models.unet import ModelConfig
from conceptlab.plugins import PluginError
from conceptlab.probes.concept_classifier import ProbeConfig
from conceptlab.studies import Study, builtin_studies, study_for
from conceptlab.studies.abstractions import AbstractionsConfig
from conceptlab.studies.factorization import CompositionEvalConfig, GeometryConfig
from conceptlab.train.config import TrainConfig

DataConfig = ShapesDataConfig  # the name of the `shapes` section before each data kind had its own
DEFAULT_KIND = "shapes"

__all__ = [
    "AbstractionsConfig", "BumpsDataConfig", "CONCEPT_NAMES", "CompositionEvalConfig", "CustomInterventionConfig",
    "DataConfig", "DataSection", "DiffusionConfig", "EmbeddingShiftConfig", "EvalConfig", "FACTOR_SIZES", "GeometryConfig",
    "GuidanceConfig", "HeldOutRegion", "InterventionsConfig", "LinearInterventionConfig", "ModelConfig",
    "OverPromptingConfig", "PatchingConfig", "ProbeConfig", "RunConfig", "Shapes3DDataConfig",
    "ShapesDataConfig", "StrictConfig", "TrainConfig", "config_hash", "eval_config_for",
]


def _fields(studies) -> dict[str, tuple[Any, Any]]:
    fields: dict[str, tuple[Any, Any]] = {}
    owner: dict[str, str] = {}
    for study in studies:
        for name, spec in study.eval_fields.items():
            if name in fields:
                raise RuntimeError(f"eval.{name} is declared by two studies ({owner[name]}, {study.kind})")
            fields[name], owner[name] = spec, study.kind
    return fields


class EvalBase(StrictConfig):
    """What every `eval` section has, whatever the study: `noise_per_run`, `channels_last`, `fused_attention`."""

    added_fields: ClassVar[tuple[str, ...]] = ("noise_per_run", "channels_last", "fused_attention")
    noise_per_run: bool = Field(
        False,
        description="draw every evaluation noise stream and evaluation sample from the run's own seed "
        "(a hash of the section's seed and train.train_seed; `studies.base.eval_noise_seed`), so the runs of a sweep "
        "over seeds are independent replicates of the evaluation too; off: every run of a preset draws the same",
    )
    channels_last: bool = Field(
        False,
        description="evaluate checkpoints with the network in channels-last memory format, a speed lever on CPUs "
        "whose bf16 convolutions prefer it (a checkpoint's evaluation at 50 sampler steps 1.61× faster on "
        "an Intel Xeon with AMX, docs/benchmarks.md); it changes outputs by bf16 rounding (≤ 1e-3 there), so it is "
        "part of the run id",
    )
    fused_attention: bool = Field(
        False,
        description="evaluate checkpoints with the network's self-attention on torch's fused kernel (flash attention "
        "on a CPU) instead of its math kernel (`models.unet.use_fused_attention`), a speed lever for sampling "
        "(docs/benchmarks.md); it changes outputs by rounding, so it is part of the run id; training is unchanged",
    )


EvalConfig = create_model(
    "EvalConfig",
    __base__=EvalBase,
    __doc__="Evaluation of checkpoints: `noise_per_run`, then the fields each study adds (its `eval_fields`), in "
    "study order. A study's "
    "exclusive sections are filled with defaults for its data kind and refused for the others.",
    **_fields(builtin_studies()),
)


@functools.lru_cache(maxsize=None)
def eval_config_for(study: Study) -> type[StrictConfig]:
    """The `eval` section class of runs of `study`: `EvalConfig`, plus the fields a plug-in study adds (fields it
    inherits from a built-in study are that study's, already in `EvalConfig`)."""
    if study in builtin_studies():
        return EvalConfig
    builtin = {name: spec for s in builtin_studies() for name, spec in s.eval_fields.items()}
    clash = sorted(name for name, spec in study.eval_fields.items() if name in builtin and builtin[name] is not spec)
    if clash:
        raise PluginError(f"data kind {study.kind!r} declares eval fields built-in studies use: {clash}")
    extra = {name: spec for name, spec in study.eval_fields.items() if name not in builtin}
    if not extra:
        return EvalConfig
    return create_model(f"EvalConfig_{type(study).__name__}", __base__=EvalConfig, **extra)


def _one_error(kind: str, loc: tuple, value: Any, message: str) -> ValidationError:
    return ValidationError.from_exception_data(
        "RunConfig", [{"type": PydanticCustomError(kind, message), "loc": loc, "input": value}]
    )


def _study_of(value: Any) -> Study:
    """The study of a `data` section (a dict or a section object); a ValidationError at data.kind if none."""
    kind = value.get("kind", DEFAULT_KIND) if isinstance(value, dict) else getattr(value, "kind", DEFAULT_KIND)
    if not isinstance(kind, str):
        raise _one_error("data_kind", ("kind",), kind, "data.kind must be a string")
    try:
        return study_for(kind)
    except ValueError as err:  # unknown kind, or a plug-in that does not import (PluginError)
        raise _one_error("data_kind", ("kind",), kind, str(err)) from None


class RunConfig(StrictConfig):
    """Everything a run needs; saved resolved as `config.yaml` in the run folder."""

    name: str = "run"
    runs_dir: str = "runs"
    data: SerializeAsAny[DataSection] = Field(default_factory=ShapesDataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    diffusion: DiffusionConfig = Field(default_factory=DiffusionConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: SerializeAsAny[EvalConfig] = Field(default_factory=EvalConfig)  # type: ignore[valid-type]

    @field_validator("data", mode="wrap")
    @classmethod
    def _data_of_its_kind(cls, value, handler):
        """Validate the section with its study's data config (errors keep their location, e.g. data.sigma)."""
        section = _study_of(value).data_config
        if isinstance(value, section):
            return value
        if isinstance(value, DataSection):
            value = value.model_dump()
        return section.model_validate(value)

    @field_validator("eval", mode="wrap")
    @classmethod
    def _eval_of_its_kind(cls, value, handler, info: ValidationInfo):
        data = info.data.get("data")
        section = eval_config_for(study_for(data.kind)) if data is not None else EvalConfig
        if isinstance(value, section):
            return value
        if isinstance(value, StrictConfig):
            value = value.model_dump()
        return section.model_validate(value)

    @model_validator(mode="after")
    def _complete(self) -> "RunConfig":
        """Refuse other kinds' exclusive eval sections, then let the run's study fill in and check its own."""
        kind = self.data.kind
        study = study_for(kind)
        for other in builtin_studies():
            if isinstance(study, type(other)):  # its own sections (also those a plug-in subclass inherits)
                continue
            for section in sorted(other.exclusive_sections):
                if getattr(self.eval, section, None) is not None:
                    raise ValueError(f"eval.{section} needs data.kind={other.kind}, but data.kind is {kind}")
        if self.train.hflip > 0 and not type(self.data).labels_survive_hflip:
            raise ValueError(f"train.hflip={self.train.hflip:g} flips training images left to right, but the labels of "
                             f"data.kind={kind} do not survive a flip (a position or an orientation would no longer "
                             f"match the image): set train.hflip=0")
        study.complete_config(self)
        if self.diffusion.process == "ddpm":  # every sampler grid on the chain's steps, refused before training
            declared = getattr(study, "sample_step_settings", None)  # optional (a plug-in study may lack it)
            for key, steps in (declared(self) if declared else {}).items():
                if steps and self.diffusion.ddpm_steps % steps:
                    raise ValueError(f"{key}={steps} must divide diffusion.ddpm_steps={self.diffusion.ddpm_steps} "
                                     "(a DDPM sampler takes every (T/steps)-th step of the chain)")
        return self

    def training_hash(self) -> str:
        """Hash of what determines the trained weights (data, model, diffusion, train; not the logging switch
        `train.tensorboard`)."""
        return config_hash(self.model_dump(include={"data", "model", "diffusion", "train"},
                                           exclude={"train": {"tensorboard"}}))


def section_model(loc: list[str], data: dict[str, Any]) -> type | None:
    """The config class at location `loc` (e.g. ["data", "held_out"]) of the raw config `data`, resolving the data
    and eval sections through the run's study; None where `loc` is not a section."""
    model: type | None = RunConfig
    for depth, part in enumerate(loc):
        if depth == 0 and part in ("data", "eval"):
            section = data.get("data") if isinstance(data, dict) else None
            try:
                study = _study_of(section if section is not None else {})
            except ValidationError:
                return None
            model = study.data_config if part == "data" else eval_config_for(study)
            continue
        field = getattr(model, "model_fields", {}).get(part)
        model = _section_class(field.annotation) if field is not None else None
        if model is None:
            return None
    return model


def _section_class(annotation: Any) -> type | None:
    """The config class an annotation holds (`X`, `X | None`), else None."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and hasattr(arg, "model_fields"):
            return arg
    return None
