"""conceptlab: an experimental bench for the science of how diffusion models learn concepts.

The Python API (`conceptlab.api`, imported on first use so `import conceptlab` stays cheap and changes nothing):
`load_run(path)`, `run(preset_or_config, **overrides)`, `list_presets()` and the `Run` they return.
"""

__version__ = "0.1.0"
__all__ = ["Run", "list_presets", "load_run", "run"]


def __getattr__(name: str):
    if name in __all__:
        from conceptlab import api

        return getattr(api, name)
    raise AttributeError(f"module 'conceptlab' has no attribute {name!r}")
