"""Resolve a run configuration from a preset name or YAML file plus `key=value` overrides.

Presets are YAML files shipped in `conceptlab/experiments/presets/`; a preset or
user YAML may say `extends: OTHER_PRESET` (or `extends: other.yaml`, read relative to
the file that says it) to start from another one. YAML is read defensively: a file is
at most 1 MiB of UTF-8, a key named twice in one mapping is refused, and so is a
document nested too deeply or whose aliases expand past `MAX_YAML_NODES` values.
Every failure raises `ConfigError` with one bounded line naming the key, the bad
value and what is allowed.
"""

from __future__ import annotations

import types
import typing
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import ValidationError

from conceptlab.messages import one_line, shown

if TYPE_CHECKING:
    from conceptlab.experiments.config import RunConfig


class ConfigError(ValueError):
    """A configuration problem, described in one line for the user."""


class YAMLSyntaxError(ConfigError):
    """A text that does not parse as YAML (an override value falls back to the plain string)."""


MAX_YAML_BYTES = 1 << 20  # a config or sweep spec file is at most 1 MiB (the largest shipped one is a few KiB)
MAX_YAML_NODES = 100_000  # values a document may expand to once its aliases are followed
MAX_YAML_DEPTH = 64  # nesting of sections and lists


class _Loader(yaml.SafeLoader):
    """YAML loader that keeps zero-led digit strings (class codes like 01, 011) as strings, not octal ints, and
    refuses a mapping that names a key twice (the later one would silently win)."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {shown(key)}", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode):
    text = loader.construct_scalar(node)
    if len(text) > 1 and text.startswith("0") and text.isdigit():
        return text
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _check_expansion(text: str, where: str) -> None:
    """ConfigError unless the document nests at most MAX_YAML_DEPTH deep and expands, aliases followed, to at most
    MAX_YAML_NODES values (a few hundred bytes of nested aliases can otherwise stand for gigabytes); an alias to a
    node that contains it is refused too. One pass over the parser's events, before anything is built."""
    sizes: dict[str, int] = {}  # expanded size of every finished anchored node
    stack: list[list] = [[0, None]]  # per open collection: [expanded size so far, its anchor]
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([1, event.anchor])
            if len(stack) - 1 > MAX_YAML_DEPTH:
                raise ConfigError(f"{where}: nested more than {MAX_YAML_DEPTH} levels deep "
                                  f"(line {event.start_mark.line + 1})")
            continue
        if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            size, anchor = stack.pop()
        elif isinstance(event, yaml.ScalarEvent):
            size, anchor = 1, event.anchor
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                open_anchors = {a for _, a in stack}
                problem = "refers to a node that contains it" if event.anchor in open_anchors else "is not defined"
                raise ConfigError(f"{where}: alias *{shown(event.anchor)} {problem} (line {event.start_mark.line + 1})")
            size, anchor = sizes[event.anchor], None
        else:
            continue
        if anchor is not None:
            sizes[anchor] = size
        stack[-1][0] += size
        if stack[-1][0] > MAX_YAML_NODES:
            raise ConfigError(f"{where}: expands to more than {MAX_YAML_NODES:,} values once its aliases are "
                              f"followed (line {event.start_mark.line + 1}); write the values out instead")


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What is wrong with a YAML text and where, in one line."""
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or getattr(err, "context", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def parse_yaml(text: str, where: str, limits: bool = True) -> Any:
    """The value of a YAML text (`_Loader`: class codes kept, duplicate keys refused); ConfigError naming `where` when
    it is not YAML, is over MAX_YAML_BYTES or expands past the limits (`_check_expansion`)."""
    if limits and len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{where}: {len(text):,} characters, over the {MAX_YAML_BYTES:,} a config file may have")
    try:
        if limits:
            _check_expansion(text, where)
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as err:
        raise YAMLSyntaxError(f"{where}: not valid YAML ({_yaml_problem(err)})") from None
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply") from None


def read_text_file(path: Path, what: str) -> str:
    """The UTF-8 text of the regular file `path` (at most MAX_YAML_BYTES); ConfigError naming `what` and the path when
    it is missing, not a regular file, too large, unreadable or not UTF-8."""
    path = Path(path)
    name = f"{what} {shown(str(path))}"
    try:
        if not path.exists():
            raise ConfigError(f"{name} does not exist")
        if not path.is_file():
            raise ConfigError(f"{name} is not a regular file")
        with open(path, "rb") as handle:
            raw = handle.read(MAX_YAML_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {name} ({err.strerror or type(err).__name__})") from None
    if len(raw) > MAX_YAML_BYTES:
        raise ConfigError(f"{name} is over {MAX_YAML_BYTES:,} bytes, the most a config file may have")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{name} is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})") from None


def preset_names() -> list[str]:
    folder = resources.files("conceptlab.experiments") / "presets"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def preset_description(name: str) -> str:
    return str(_read_preset(name).get("description", "")).strip()


def _read_preset(name: str) -> dict[str, Any]:
    if name not in preset_names():
        raise ConfigError(f"unknown preset {shown(name)}; available: {', '.join(preset_names())}")
    text = (resources.files("conceptlab.experiments") / "presets" / f"{name}.yaml").read_text()
    return _parse_yaml(text, f"preset {name}")


def _parse_yaml(text: str, where: str) -> dict[str, Any]:
    data = parse_yaml(text, where) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping of config keys, got {type(data).__name__}")
    return data


def is_file_source(source: str, path: Path | None = None) -> bool:
    """Whether a config source names a YAML file (by its suffix, or an existing file), not a preset."""
    return source.endswith((".yaml", ".yml")) or (Path(source) if path is None else path).is_file()


def _load_source(source: str, seen: tuple[str, ...] = (), folder: Path | None = None) -> dict[str, Any]:
    """Raw dict for a preset name or YAML path, with `extends` chains merged. A YAML path is read relative to
    `folder` (the folder of the file that `extends` it; None: the working directory); a preset extends presets."""
    path = Path(source) if folder is None or Path(source).is_absolute() else folder / source
    is_file = is_file_source(source, path)
    label = str(path.resolve()) if is_file else f"preset {source}"
    if label in seen:
        raise ConfigError(f"extends cycle: {' -> '.join(seen + (label,))}")
    if is_file:
        data = _parse_yaml(read_text_file(path, "config file"), f"config file {shown(str(path))}")
    else:
        data = _read_preset(source)
    data = dict(data)
    data.pop("description", None)
    parent = data.pop("extends", None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent.strip():
        raise ConfigError(f"{shown(source)}: extends must be a preset name or a YAML path, got {shown(parent)}")
    try:
        base = _load_source(parent, seen + (label,), path.parent if is_file else None)
    except ConfigError as err:
        if str(err).startswith("extends cycle"):
            raise
        where = f"config file {shown(str(path))}" if is_file else label
        raise ConfigError(f"{where} extends {shown(parent)}: {err}") from None
    return deep_merge(base, data)


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
        raise ConfigError(f"override {shown(text)} must look like key=value (e.g. train.steps=500)")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {shown(text)} has an empty key")
    try:
        value = parse_yaml(raw, f"override {shown(key)}") if raw.strip() else None
    except YAMLSyntaxError:
        value = raw
    return key.split("."), value


def set_key(data: dict[str, Any], key: str, value: Any) -> None:
    """Set dotted `key` (e.g. `train.steps`) to `value` in the nested dict `data`, creating missing sections (each
    section on the way is copied, so dicts shared with the caller are not changed); ConfigError when a prefix of
    the key is a value, not a section. A mapping given for a config section (`train={steps: 4}`) changes only the
    keys it names (`_merged`). The one override walk (`key=value` overrides and sweep axes)."""
    path = key.split(".")
    node = data
    for depth, part in enumerate(path[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            where = ".".join(path[: depth + 1])
            raise ConfigError(one_line(f"cannot set {key}: {where} is a value, not a section"))
        else:
            child = node[part] = dict(child)
        node = child
    node[path[-1]] = _merged(data, path, node.get(path[-1]), value)


def _merged(data: dict[str, Any], path: list[str], old: Any, new: Any) -> Any:
    """The value at `path` once `new` is set there: a mapping given for a config section that holds a mapping is
    merged into it key by key (sections inside it too); anything else, a dict-valued field among them
    (`data.prompt_mask_fraction`, a plug-in's `options`), is set whole, and so is a `data` mapping naming another
    kind (another kind is another section)."""
    if not (isinstance(new, dict) and isinstance(old, dict) and _is_section(data, path)):
        return new
    if path == ["data"]:
        from conceptlab.experiments.config import DEFAULT_KIND

        if new.get("kind", old.get("kind", DEFAULT_KIND)) != old.get("kind", DEFAULT_KIND):
            return new
    out = dict(old)
    for key, value in new.items():
        out[key] = _merged(data, [*path, str(key)], old.get(key), value)
    return out


def _is_section(data: dict[str, Any], path: list[str]) -> bool:
    """Whether `path` (e.g. ["eval", "probe"]) of the raw config `data` is a config section (a `StrictConfig`
    sub-model, optional or not), not a value (a dict-valued field, a list of sections)."""
    from conceptlab.config_base import StrictConfig
    from conceptlab.experiments.config import section_model

    parent = section_model(path[:-1], data)
    field = getattr(parent, "model_fields", {}).get(path[-1])
    if field is None:
        return False
    annotation = field.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
    else:
        options = [annotation]
    return len(options) == 1 and isinstance(options[0], type) and issubclass(options[0], StrictConfig)


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
        raise ConfigError(one_line(_first_error(err, data))) from None


def _first_error(err: ValidationError, data: dict[str, Any]) -> str:
    """The first validation error as `bad value for KEY: VALUE (why)` (the value shown short)."""
    first = err.errors()[0]
    loc = [str(p) for p in first["loc"]]
    key = ".".join(loc) if loc else "config"
    kind = first["type"]
    if kind == "extra_forbidden":
        from conceptlab.experiments.config import section_model

        section = section_model(loc[:-1], data)
        allowed = ", ".join(section.model_fields) if section is not None else "?"
        return f"unknown config key {shown(key)}; allowed here: {allowed}"
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    if kind in ("value_error", "assertion_error") and "input" not in first:
        return f"config error at {key}: {msg}"
    bad = first.get("input", "?")
    if isinstance(bad, dict):
        return f"config error at {key}: {msg}"
    return f"bad value for {key}: {shown(bad)} ({msg})"


def load_config(source: str, overrides: list[str] | None = None) -> RunConfig:
    """Resolve preset/YAML + overrides into a validated `RunConfig`."""
    data = _load_source(source)
    data.setdefault("name", Path(source).stem if source.endswith((".yaml", ".yml")) else source)
    return validate(apply_overrides(data, overrides or []))


def config_to_yaml(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False)
