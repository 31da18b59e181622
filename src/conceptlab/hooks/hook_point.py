"""HookPoint: a named identity module through which an activation passes, so it can be read or edited."""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn

HookFn = Callable[[torch.Tensor, "HookPoint"], Optional[torch.Tensor]]


class HookPoint(nn.Module):
    """Identity unless hooks are attached; each hook may replace the activation.

    A hook is `fn(activation, hook_point) -> activation | None` (None keeps the
    activation). Hooks run in the order they were added. `name` is the module
    path inside the model (set by `name_hook_points`); `context` is an object the
    caller may set (e.g. the sampler's diffusion time or CFG branch) for hooks
    to read; it is None unless a caller sets it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.name = ""
        self.context: Any = None
        self._fns: dict[int, HookFn] = {}
        self._next_id = 0

    def add_hook(self, fn: HookFn) -> Callable[[], None]:
        """Attach `fn`; returns a function that removes exactly this hook."""
        key, self._next_id = self._next_id, self._next_id + 1
        self._fns[key] = fn
        return lambda: self._fns.pop(key, None)

    @property
    def has_hooks(self) -> bool:
        return bool(self._fns)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for fn in list(self._fns.values()):
            out = fn(x, self)
            if out is not None:
                x = out
        return x

    def extra_repr(self) -> str:
        return f"name={self.name!r}"


def name_hook_points(model: nn.Module) -> None:
    """Set every HookPoint's `name` to its module path in `model` (call at the end of `__init__`)."""
    for path, module in model.named_modules():
        if isinstance(module, HookPoint):
            module.name = path
