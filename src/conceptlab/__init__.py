"""conceptlab: an experimental bench for the science of how diffusion models learn concepts."""

__version__ = "0.1.0"
