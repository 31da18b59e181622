"""conceptlab: an experimental bench for the science of how diffusion models learn concepts.

The Python API (`conceptlab.api`, imported on first use so `import conceptlab` stays cheap and changes nothing):
`load_run(path)`, `run(preset_or_config, **overrides)`, `list_presets()` and the `Run` they return.
"""

import random as _random

__version__ = "0.1.0"

# rich (every command's console and progress bars) draws from Python's global `random` when `rich.style` is first
# imported (an id counter's start): imported here with the caller's random state put back, so importing conceptlab
# leaves a seeded `random` stream as it was (≈ 30 ms)
_state = _random.getstate()
import rich.style  # noqa: E402,F401

_random.setstate(_state)
del _state
__all__ = ["Run", "list_presets", "load_run", "run"]


def __getattr__(name: str):
    if name in __all__:
        from conceptlab import api

        return getattr(api, name)
    raise AttributeError(f"module 'conceptlab' has no attribute {name!r}")
