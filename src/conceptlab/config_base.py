"""The base of every typed config section (strict pydantic: unknown keys, ill-typed values, booleans given for numbers,
non-finite numbers and integers beyond 64 bits are errors) and the stable hash of a config.

Each section lives beside the code that reads it (`data/`, `models/`, `train/`, `probes/`, `interventions/`, and
the studies' evaluation sections); `experiments.config.RunConfig` composes them. This module imports nothing from
the package, so every layer may use it.
"""

from __future__ import annotations

import hashlib
import json
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, field_validator, model_serializer

INT_LIMIT = 2**63 - 1  # the largest integer a config may hold: what torch, numpy and safetensors take as an int64


def check_int_range(value):
    """`value` unchanged, or ValueError when it is (or holds, in a list, tuple or dict) an integer past ±INT_LIMIT."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) > INT_LIMIT:
        raise ValueError(f"integer out of range (at most 2^63 − 1 in size), got {len(str(abs(value)))} digits")
    if isinstance(value, (list, tuple)):
        for item in value:
            check_int_range(item)
    elif isinstance(value, dict):
        for item in value.values():
            check_int_range(item)
    return value


def refuse_bool_numbers(given, parsed):
    """`parsed` unchanged, or ValueError where `given` holds a boolean (also in a list, tuple or dict, keys included)
    that validation made a number: pydantic's lax mode reads true as 1, and YAML reads yes and on as true."""
    if isinstance(given, bool):
        if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
            raise ValueError("expected a number, got a boolean")
    elif isinstance(given, (list, tuple)) and isinstance(parsed, (list, tuple)) and len(given) == len(parsed):
        for item, parsed_item in zip(given, parsed):
            refuse_bool_numbers(item, parsed_item)
    elif isinstance(given, dict) and isinstance(parsed, dict) and len(given) == len(parsed):
        for item, parsed_item in zip(given.items(), parsed.items()):
            refuse_bool_numbers(item, parsed_item)
    return parsed


class StrictConfig(BaseModel):
    """Base of every config section: unknown keys are errors, assignments are validated, a number field (also inside
    lists, tuples, dicts and optional types) refuses booleans (`true`, `yes`, `on`), every float field must be
    finite (`.inf` and `.nan` are refused at load, before they could reach the weights) and every integer must fit in
    64 bits.

    `added_fields` names fields added to a section after configs were first saved: at their default they are left
    out of the dump (`config.yaml`, and so of run ids and config hashes), so a new switch left at its default
    describes exactly the run it described before the switch existed.
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
    added_fields: ClassVar[tuple[str, ...]] = ()

    @field_validator("*", mode="wrap")
    @classmethod
    def _numbers_checked(cls, value, handler):
        return check_int_range(refuse_bool_numbers(value, handler(value)))

    @model_serializer(mode="wrap")
    def _omit_added_defaults(self, handler):
        data = handler(self)
        if not self.added_fields or not isinstance(data, dict):
            return data
        for name in self.added_fields:
            field = type(self).model_fields[name]
            if name in data and getattr(self, name) == field.get_default(call_default_factory=True):
                del data[name]
        return data


class DataSection(StrictConfig):
    """Base of every `data` section: `kind` names the data-generating process (and so the study that evaluates it).

    A data section also has `null_value` (the prompt value of a dropped label, used by classifier-free-guidance
    dropout in training) and `data_seed`; each data kind sets their defaults. `labels_survive_hflip` says whether an
    image flipped left to right still shows what its prompt and labels say (true for faces; false where they hold an x
    position or an orientation): `train.hflip` is refused for a kind that does not say so, a plug-in's included.
    """

    labels_survive_hflip: ClassVar[bool] = False

    kind: str


def config_hash(obj: dict) -> str:
    """Stable short hash of a JSON-able dict."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
