"""Human names for what figures and reports show: classes, concepts, attributes, interventions, measures, regions
and config keys, in the papers' words (never a class code or a snake_case identifier alone on a figure).

Every function takes a machine name (and, where a name depends on the data, the data's own naming: `data.json`'s
`class_names` / `value_names`, or a table's `class_name` / `target_name` column) and returns text.
"""

from __future__ import annotations

from typing import Mapping

INTERVENTIONS = {
    "naive": "naive prompting",
    "naive_repeats": "naive prompting (repeats)",
    "over_prompting": "over-prompting",
    "linear": "linear latent intervention",
    "embedding_shift": "embedding shift",
    "patching": "embedder patching",
    "cfg": "classifier-free guidance",
}

MEASURES = {
    "mutual_information": "mutual information",
    "mutual_information_bound": "mutual information (lower bound)",
    "forking_entropy": "forking entropy",
    "linear_probe": "linear probe",
    "effective_dimension": "effective dimension",
}

SPLITS = {"train": "training classes", "held_out": "held-out classes"}
REGIONS = {"train": "training region", "held_out": "held-out region"}

CONFIG_KEYS = {
    "data.color_separation": "colour separation Δc",
    "data.size_separation": "size separation Δs",
    "data.held_out.scope": "held-out scope",
    "data.fraction": "fraction of training data λ",
    "data.image_size": "image size N",
    "train.steps": "training steps",
    "train.train_seed": "training seed",
    "data.data_seed": "data seed",
}


def human(name: str) -> str:
    """A machine name as words: `wall_hue` → `wall hue`, `held_out` → `held out`."""
    return str(name).replace("_", " ").strip()


def intervention(name: str) -> str:
    return INTERVENTIONS.get(name, human(name))


def measure(name: str) -> str:
    return MEASURES.get(name, human(name))


def split(name: str) -> str:
    return SPLITS.get(name, human(name))


def region(name: str) -> str:
    return REGIONS.get(name, human(name))


def config_key(key: str) -> str:
    """A swept config key, spelled as in the config, in words (`data.color_separation` → `colour separation Δc`);
    unknown keys by their last part (`model.dropout` → `dropout`)."""
    if key in CONFIG_KEYS:
        return CONFIG_KEYS[key]
    return human(str(key).rsplit(".", 1)[-1])


def class_label(code: str, names: Mapping[str, str] | None = None, with_code: bool = False) -> str:
    """A class by its name (`blue small`), falling back to `class 11`; `with_code` appends the code in brackets."""
    name = (names or {}).get(str(code))
    if not name:
        return f"class {code}"
    return f"{name} ({code})" if with_code else name


def class_names_of(table, code_column: str = "class", name_column: str = "class_name") -> dict[str, str]:
    """code → name from a table's name column (the concept-space and interventions tables carry one); {} without."""
    if table is None or name_column not in getattr(table, "columns", ()):
        return {}
    pairs = table[[code_column, name_column]].dropna().drop_duplicates(code_column)
    return {str(c): str(n) for c, n in zip(pairs[code_column], pairs[name_column])}


def value_name(concept: str, value: int, value_names: Mapping[str, list[str]] | None = None) -> str:
    """A concept's value by name (`color`, 1 → `blue`) when the data names it, else `color = 1`."""
    names = (value_names or {}).get(concept)
    if names and 0 <= int(value) < len(names):
        return str(names[int(value)])
    return f"{human(concept)} = {value}"
