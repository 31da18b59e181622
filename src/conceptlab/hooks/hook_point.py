"""HookPoint: a named identity module through which an activation passes, so it can be read or edited."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional

import torch
from torch import nn

HookFn = Callable[[torch.Tensor, "HookPoint"], Optional[torch.Tensor]]
Branch = Literal["cond", "uncond", "both"]
BRANCHES: tuple[str, ...] = ("cond", "uncond", "both")


@dataclass(frozen=True)
class SamplingContext:
    """What the sampler publishes to every hook point for one network pass.

    `t` is the diffusion time the network sees, `step` the sampler step index
    (None outside a sampler loop). The batch is laid out [cond; uncond]: rows
    `0..n_cond-1` are the conditional CFG branch, the remaining `n_rows - n_cond`
    the unconditional one (n_cond == n_rows without guidance).
    """

    t: float
    step: int | None
    n_rows: int
    n_cond: int

    def rows(self, branch: Branch) -> slice:
        """The batch rows of one CFG branch ("cond", "uncond" or "both")."""
        if branch == "cond":
            return slice(0, self.n_cond)
        if branch == "uncond":
            return slice(self.n_cond, self.n_rows)
        if branch == "both":
            return slice(0, self.n_rows)
        raise ValueError(f"unknown branch {branch!r}; expected one of {BRANCHES}")

    @property
    def is_cond(self) -> torch.Tensor:
        """Per batch row: True for the conditional branch."""
        return torch.arange(self.n_rows) < self.n_cond


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
