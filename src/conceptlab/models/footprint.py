"""A network's memory footprint, measured on the `meta` device: its parameter count and the peak bytes its
activations hold for a batch (a training step's forward and backward, or a no-grad forward), with nothing allocated.

The run driver builds the network on `meta` from the config and passes meta inputs through it; every tensor an
operation creates is counted while it lives (its storage, once, however many views share it), so the peak is what
the real pass would hold at its busiest moment, in float32 (bf16 autocast holds less).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode


class _LiveBytes(TorchDispatchMode):
    """Counts the bytes of every storage an operation creates while it is alive, and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(tensor, torch.Tensor):
                self._count(tensor)
        return out

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self._sizes:
            return
        size = storage.nbytes()
        self._sizes[key] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._free, key)

    def _free(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)


def activation_peak(run: Callable[[], object], inputs: tuple[torch.Tensor, ...] = ()) -> int:
    """Peak bytes alive while `run()` executes on meta tensors: its inputs plus everything it creates."""
    counter = _LiveBytes()
    extra = sum(t.untyped_storage().nbytes() for t in inputs)
    with counter:
        run()
    return counter.peak + extra


def module_peak(module: nn.Module, inputs: tuple[torch.Tensor, ...], backward: bool) -> int:
    """Peak bytes of `module(*inputs)` on meta tensors (module and inputs on `meta`), with a backward pass through the
    sum of its outputs (a tensor, or a dict / tuple of them) when `backward`; the module's mode is left as it was."""
    def run() -> None:
        with torch.set_grad_enabled(backward):
            out = module(*inputs)
            if backward:
                values = out.values() if isinstance(out, dict) else out if isinstance(out, (tuple, list)) else (out,)
                sum(v.float().sum() for v in values).backward()

    try:
        return activation_peak(run, inputs)
    finally:
        module.zero_grad(set_to_none=True)


def network_footprint(net: nn.Module, image_shape: tuple[int, int, int], prompt_dim: int, train_batch: int,
                      eval_batch: int) -> dict[str, int]:
    """`parameters` (a count), `training` (peak bytes of a training step's forward + backward at `train_batch`) and
    `evaluation` (peak bytes of a no-grad forward at `eval_batch`) of a network built on the meta device, called as
    `net(x [B, C, S, S], t [B], prompts [B, prompt_dim])`."""
    if any(p.device.type != "meta" for p in net.parameters()):
        raise ValueError("network_footprint measures a network built on the meta device (with torch.device('meta'))")

    def inputs(batch: int) -> tuple[torch.Tensor, ...]:
        return (torch.empty(batch, *image_shape, device="meta"), torch.empty(batch, device="meta"),
                torch.empty(batch, prompt_dim, device="meta"))

    def step(args: tuple[torch.Tensor, ...]) -> None:
        net(*args).float().pow(2).mean().backward()

    def forward(args: tuple[torch.Tensor, ...]) -> None:
        with torch.no_grad():
            net(*args)

    was_training = net.training
    try:
        net.train()
        train_args = inputs(train_batch)
        training = activation_peak(lambda: step(train_args), train_args)
        net.eval()
        eval_args = inputs(max(1, eval_batch))
        evaluation = activation_peak(lambda: forward(eval_args), eval_args) if eval_batch > 0 else 0
    finally:
        net.train(was_training)
        net.zero_grad(set_to_none=True)
    return {"parameters": sum(p.numel() for p in net.parameters()), "training": training, "evaluation": evaluation}
