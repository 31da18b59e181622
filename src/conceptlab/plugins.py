"""Import paths in configs: `package.module:Name` resolved to the object it names, with one clear line on failure.

Configs name a user's own data kind (`data.kind: mypkg.worlds:RingStudy`) or intervention
(`eval.interventions.custom: [{path: mypkg.edits:MyEdit}]`) this way; the code that accepts the object checks its
interface (`require`) so a wrong object fails at config load, not mid-run.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class PluginError(ValueError):
    """An import path that does not resolve, or names an object without the interface asked for; one line."""


def is_import_path(text: object) -> bool:
    """True for `module.path:Name` (a colon between a dotted module path and a dotted attribute path)."""
    return isinstance(text, str) and bool(_PATH.match(text))


def resolve(path: str, what: str = "object") -> Any:
    """The object `module:attr.sub` names; PluginError (one line naming the path) when it does not resolve."""
    if not is_import_path(path):
        raise PluginError(f"{what} {path!r} is not an import path of the form package.module:Name")
    module_name, attr = path.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # ImportError, or the plug-in's own import-time error: one line either way
        raise PluginError(f"{what} {path!r}: cannot import {module_name} ({type(err).__name__}: {err})") from None
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise PluginError(f"{what} {path!r}: {module_name} has no attribute {attr!r}") from None
    return obj


def require(obj: Any, path: str, what: str, attributes: tuple[str, ...], callables: tuple[str, ...] = ()) -> Any:
    """`obj` if it has every attribute in `attributes` and every method in `callables`; else PluginError naming
    what is missing."""
    missing = [a for a in attributes if not hasattr(obj, a)]
    missing += [c for c in callables if not callable(getattr(obj, c, None))]
    if missing:
        raise PluginError(f"{what} {path!r} lacks {', '.join(missing)} (see docs/extending.md)")
    return obj
