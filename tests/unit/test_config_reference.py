"""docs/configuration.md is generated from the config models by scripts/config_reference.py: the committed file
must be what the script prints now, and it must name every key a run config can hold."""

from __future__ import annotations

import functools
import importlib.util
import typing
from pathlib import Path

from pydantic import BaseModel

from conceptlab.experiments.config import RunConfig
from conceptlab.studies import builtin_studies

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "configuration.md"


@functools.lru_cache(maxsize=None)
def _rendered() -> str:
    spec = importlib.util.spec_from_file_location("config_reference", REPO / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.render()


def test_the_committed_reference_is_what_the_script_prints():
    assert REFERENCE.read_text() == _rendered(), (
        "docs/configuration.md is out of date: PYTHONPATH=src python scripts/config_reference.py > docs/configuration.md"
    )


def _models_in(tp) -> list[tuple[type, bool]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [(tp, False)]
    if typing.get_origin(tp) is list:
        return [(m, True) for m, _ in _models_in(typing.get_args(tp)[0])]
    return [found for arg in typing.get_args(tp) for found in _models_in(arg)]


def _keys(model: type, prefix: str) -> list[str]:
    keys = []
    for name, field in model.model_fields.items():
        key = f"{prefix}.{name}" if prefix else name
        keys.append(key)
        for nested, entry in _models_in(field.annotation):
            keys += _keys(nested, f"{key}[]" if entry else key)
    return keys


def test_every_key_of_run_config_and_of_every_data_kind_is_in_the_reference():
    keys = _keys(RunConfig, "")
    for study in builtin_studies():
        keys += _keys(study.data_config, "data")
    assert {"name", "train.steps", "eval.interventions.linear.alphas", "data.held_out.kind", "data.h5_path"} <= set(keys)
    text = _rendered()
    missing = [key for key in keys if f"| `{key}` |" not in text]
    assert not missing, f"keys missing from docs/configuration.md: {missing}"
