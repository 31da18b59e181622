"""Messages for users, kept to one bounded line: a value shown short, control characters escaped, long text clipped.

Every error a user sees is one line naming the key or argument and the value; a value can be anything a file or a
command line holds (a 300 MB list from a YAML alias bomb, a name with a newline in it), so it is shown through
`shown`, and the whole line through `one_line`. This module imports nothing from the package.
"""

from __future__ import annotations

import re

VALUE_LIMIT = 120  # characters of a value shown in a message
LINE_LIMIT = 600  # characters of a whole message line

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    rest = len(text) - limit
    return f"{text[:limit]}… ({rest} more characters)"


def shown(value: object, limit: int = VALUE_LIMIT) -> str:
    """`repr(value)` for a message: bounded in length (containers are summarised before they are printed, so a huge
    value costs no more than its first items) and on one line."""
    text = _escape(_short_repr(value, limit))
    return text if len(text) <= limit else text[:limit] + "…"


def one_line(text: str, limit: int = LINE_LIMIT) -> str:
    """`text` as a single line: newlines and other control characters escaped, clipped to `limit` characters."""
    return clip(_escape(str(text)), limit)


def _escape(text: str) -> str:
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


def _short_repr(value: object, limit: int, depth: int = 0) -> str:
    """A repr that stops once `limit` characters are reached (never builds the repr of a whole huge container, nor
    follows a self-containing one further than a few levels)."""
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if depth >= 8:
            return "…"
        opening, closing = {list: "[]", tuple: "()", dict: "{}"}.get(type(value), "{}")  # two characters: two names
        items = value.items() if isinstance(value, dict) else value
        parts: list[str] = []
        used = 0
        for i, item in enumerate(items):
            if used > limit:
                parts.append(f"… {len(value) - i} more")
                break
            text = (f"{_short_repr(item[0], limit, depth + 1)}: {_short_repr(item[1], limit, depth + 1)}"
                    if isinstance(value, dict) else _short_repr(item, limit, depth + 1))
            parts.append(text)
            used += len(text) + 2
        return opening + ", ".join(parts) + ("," if isinstance(value, tuple) and len(value) == 1 else "") + closing
    if isinstance(value, str) and len(value) > 4 * limit:
        return repr(value[: 4 * limit]) + "…"
    if isinstance(value, (bytes, bytearray)) and len(value) > 4 * limit:
        return repr(bytes(value[: 4 * limit])) + "…"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    return repr(value)
