"""Resolve a run configuration from a preset name or YAML file plus `key=value` overrides.

Presets are YAML files shipped in `conceptlab/experiments/presets/`; a preset or
user YAML may say `extends: OTHER_PRESET` to start from another one. Every
failure raises `ConfigError` with one line naming the key, the bad value and
what is allowed.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

if TYPE_CHECKING:
    from conceptlab.experiments.config import RunConfig


class ConfigError(ValueError):
    """A configuration problem, described in one line for the user."""


class _Loader(yaml.SafeLoader):
    """YAML loader that keeps zero-led digit strings (class codes like 01, 011) as strings, not octal ints."""


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode):
    text = loader.construct_scalar(node)
    if len(text) > 1 and text.startswith("0") and text.isdigit():
        return text
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _yaml_load(text: str):
    return yaml.load(text, Loader=_Loader)


def preset_names() -> list[str]:
    folder = resources.files("conceptlab.experiments") / "presets"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def preset_description(name: str) -> str:
    return str(_read_preset(name).get("description", "")).strip()


def _read_preset(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise ConfigError(f"unknown preset {name!r}; available: {', '.join(preset_names())}")
    text = (resources.files("conceptlab.experiments") / "presets" / f"{name}.yaml").read_text()
    return _parse_yaml(text, f"preset {name}")


def _parse_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        data = _yaml_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def _load_source(source: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """Raw dict for a preset name or YAML path, with `extends` chains merged."""
    if source in seen:
        raise ConfigError(f"preset cycle: {' -> '.join(seen + (source,))}")
    path = Path(source)
    if source.endswith((".yaml", ".yml")) or path.is_file():
        if not path.is_file():
            raise ConfigError(f"config file {source!r} does not exist")
        data = _parse_yaml(path.read_text(), source)
    else:
        data = _read_preset(source)
    data = dict(data)
    data.pop("description", None)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    return deep_merge(_load_source(str(parent), seen + (source,)), data)


def deep_merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b.c=value` → (['a','b','c'], parsed value); values are YAML scalars/lists."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key=value (e.g. train.steps=500)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {text!r} has an empty key")
    try:
        value = _yaml_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def set_key(data: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted `key` (e.g. `train.steps`) to `value` in the nested dict `data`, creating missing sections (each
    section on the way is copied, so dicts shared with the caller are not changed); ConfigError when a prefix of
    the key is a value, not a section. The one override walk (`key=value` overrides and sweep axes)."""
    path = key.split(".")
    node = data
    for depth, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(path[: depth + 1])
            raise ConfigError(f"cannot set {key}: {where} is a value, not a section")
        else:
            child = node[part] = dict(child)
        node = child
    node[path[-1]] = value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    out = deep_merge({}, data)
    for text in overrides:
        path, value = parse_override(text)
        set_key(out, ".".join(path), value)
    return out


def validate(data: dict[str, Any]) -> RunConfig:
    from conceptlab.experiments.config import RunConfig  # the studies' sections: imported when first validating

    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_one_line(err, data)) from None


def _one_line(err: ValidationError, data: dict[str, Any]) -> str:
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    key = ".".join(loc) if loc else "config"
    kind = first["type"]
    if kind == "extra_forbidden":
        from conceptlab.experiments.config import section_model

        section = section_model(loc[:-1], data)
        allowed = ", ".join(section.model_fields) if section is not None else "?"
        return f"unknown config key {key!r}; allowed here: {allowed}"
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind in ("value_error", "assertion_error") and "input" not in first:
        return f"config error at {key}: {msg}"
    bad = first.get("input", "?")
    if isinstance(bad, dict):
        return f"config error at {key}: {msg}"
    return f"bad value for {key}: {bad!r} ({msg})"


def load_config(source: str, overrides: list[str] | None = None) -> RunConfig:
    """Resolve preset/YAML + overrides into a validated `RunConfig`."""
    data = _load_source(source)
    data.setdefault("name", Path(source).stem if source.endswith((".yaml", ".yml")) else source)
    return validate(apply_overrides(data, overrides or []))


def config_to_yaml(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
