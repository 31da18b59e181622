"""Device and numeric precision: where to run, whether bf16 autocast pays off there, and the autocast context."""

from __future__ import annotations

import contextlib
import functools

import torch


@functools.lru_cache(maxsize=None)
def cpu_has_native_bf16() -> bool:
    """True when the CPU has bf16 instructions (AVX512-BF16 or AMX); elsewhere bf16 is emulated and slower than fp32."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def native_bf16(device: torch.device | str = "cpu") -> bool:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_native_bf16()


def resolve_bf16(setting: bool | None, device: torch.device | str = "cpu") -> bool:
    """`None` (auto) → bf16 exactly where the hardware supports it natively."""
    return native_bf16(device) if setting is None else bool(setting)


def resolve_device(setting: str = "auto") -> torch.device:
    """`auto` → cuda when available, else cpu; asking for cuda without one is an error."""
    if setting == "cuda" and not torch.cuda.is_available():
        raise ValueError("train.device=cuda but no CUDA device is available")
    return torch.device("cuda" if setting == "cuda" or (setting == "auto" and torch.cuda.is_available()) else "cpu")


def autocast(enabled: bool, device: torch.device | str = "cpu"):
    """bf16 autocast on `device` when enabled, else a no-op context."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
