"""The training loop: AdamW + grad clipping + optional EMA, dense checkpoints, exact resume.

`iter_training` is a generator (smalldiffusion's idea): it yields a `TrainRecord`
after every optimisation step, so the caller decides what to log or show. It
saves weights at the scheduled checkpoint steps and, at each of them, the full
resumable state (model, EMA, optimizer, data-order and dropout RNG). Started
again with the same paths it continues from the last saved state, and the
result is bit-identical to an uninterrupted run on the same machine.

At a checkpoint step the record is yielded after the weights are saved and
before the state (taken before the yield) is: what the caller does with it —
the run driver writes its log line — is on disk before the state marks the step
done, so a kill in between repeats the step on resume instead of losing its
line (the driver drops log lines past the resumed step: none is doubled).

A non-finite loss or gradient stops training with `TrainingDiverged` naming the step, before the optimizer
applies it (`train_step` does not step, and the EMA is not updated: the model and its EMA keep the weights of the
step before); weights are checked again before every checkpoint, so the checkpoints on disk are the finite ones.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import torch
from torch import Tensor, nn

from conceptlab.data.labelled import unit_float
from conceptlab.train.augment import color_jitter, hflip
from conceptlab.train.config import TrainConfig
from conceptlab.train.precision import autocast, resolve_bf16
from conceptlab.train.checkpoints import (
    checkpoint_schedule,
    load_optimizer_tensors,
    load_training_state,
    optimizer_tensors,
    prefixed,
    save_checkpoint,
    save_training_state,
    unprefixed,
)


class TrainingDiverged(RuntimeError):
    """Training met a non-finite loss, gradient or weight; the message names the step (one line). `what` is the
    part that says what was not finite (e.g. "the loss is nan")."""

    def __init__(self, message: str, what: str = ""):
        super().__init__(message)
        self.what = what or message


@dataclass
class TrainRecord:
    step: int
    loss: float
    metrics: dict[str, float]
    seconds: float
    checkpoint: Path | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class TrainingData:
    """What the loop needs from a dataset: images (float in [0, 1] or uint8 0..255), prompts, the null prompt value."""

    images: Tensor
    prompts: Tensor
    null_value: float = 0.0


def build_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


class EMA:
    """Exponential moving average of a model's weights (with the usual warm-up of the decay)."""

    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay
        self.model = copy.deepcopy(model).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, model: nn.Module, step: int) -> None:
        decay = min(self.decay, (1.0 + step) / (10.0 + step))
        for ema_p, p in zip(self.model.parameters(), model.parameters()):
            ema_p.lerp_(p.detach(), 1.0 - decay)
        for ema_b, b in zip(self.model.buffers(), model.buffers()):
            ema_b.copy_(b)


def training_batch(data: TrainingData, cfg: TrainConfig, cfg_dropout: float,
                   generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """One step's (images, prompts) as `iter_training` draws them from `generator`: indices, unit-float images, the
    classifier-free label dropout (a dropped row's whole prompt set to the null value), then flip and colour jitter."""
    idx = torch.randint(data.images.shape[0], (cfg.batch_size,), generator=generator)
    images, prompts = unit_float(data.images[idx]), data.prompts[idx]
    if cfg_dropout > 0:
        drop = torch.rand(cfg.batch_size, generator=generator) < cfg_dropout
        prompts = torch.where(drop[:, None], torch.full_like(prompts, data.null_value), prompts)
    return color_jitter(hflip(images, cfg.hflip, generator), cfg.color_jitter, generator), prompts


def iter_training(
    model: nn.Module,
    data: TrainingData,
    cfg: TrainConfig,
    checkpoint_dir: Path,
    state_path: Path,
    cfg_dropout: float = 0.0,
    config_hash: str = "",
) -> Iterator[TrainRecord]:
    """Train `model` (a `DiffusionModel`) for cfg.steps steps, resuming from `state_path` if it exists."""
    if data.images.shape[0] == 0:
        raise ValueError("the training set is empty")
    device = next(model.parameters()).device
    optimizer = build_optimizer(model, cfg)
    ema = EMA(model, cfg.ema_decay) if cfg.ema_decay is not None else None
    generator = torch.Generator(device="cpu").manual_seed(cfg.train_seed)  # data order, CFG dropout
    noise = torch.Generator(device=device).manual_seed(cfg.train_seed + 1)  # diffusion times and noise
    torch.manual_seed(cfg.train_seed)  # dropout draws from the global generator
    schedule = set(checkpoint_schedule(cfg))
    bf16 = resolve_bf16(cfg.bf16, device)
    start = 0
    resumed = load_training_state(state_path)
    if resumed is not None:
        tensors, meta = resumed
        if meta.get("config_hash") != config_hash:
            raise ValueError(
                f"{state_path} belongs to a different configuration (hash {meta.get('config_hash')} != {config_hash})"
            )
        model.load_state_dict(unprefixed("model.", tensors))
        if ema is not None:
            ema.model.load_state_dict(unprefixed("ema.", tensors))
        load_optimizer_tensors(optimizer, unprefixed("optim.", tensors), meta["optimizer"])
        generator.set_state(tensors["rng.data"])
        noise.set_state(tensors["rng.noise"])
        torch.set_rng_state(tensors["rng.global"])
        if device.type == "cuda":
            torch.cuda.set_rng_state(tensors["rng.cuda"], device)
        start = int(meta["step"])
    last_saved = start or None
    model.train()
    for step in range(start + 1, cfg.steps + 1):
        began = time.perf_counter()
        images, prompts = training_batch(data, cfg, cfg_dropout, generator)
        try:  # a non-finite loss or gradient: no step taken, so no EMA update and no checkpoint of it either
            loss, metrics, grad_norm = train_step(model, optimizer, images, prompts, noise, bf16, device,
                                                  cfg.grad_clip)
        except TrainingDiverged as err:
            raise TrainingDiverged(_diverged(step, err.what, last_saved), err.what) from None
        if ema is not None:
            ema.update(model, step)
        floats = {k: float(v) for k, v in metrics.items()}
        if grad_norm is not None:
            floats["grad_norm"] = float(grad_norm)
        loss_value = float(loss.detach())
        record = TrainRecord(step, loss_value, floats, time.perf_counter() - began,
                             extra={"lr": optimizer.param_groups[0]["lr"]})
        if step in schedule:
            bad = _first_non_finite(model) or (_first_non_finite(ema.model) if ema is not None else None)
            if bad is not None:
                raise TrainingDiverged(_diverged(step, f"weight {bad} is not finite", last_saved))
            sidecar = {"config_hash": config_hash, "metrics": floats, "has_ema": ema is not None}
            weights = prefixed("model.", model.state_dict())
            if ema is not None:
                weights.update(prefixed("ema.", ema.model.state_dict()))
            record.checkpoint = save_checkpoint(checkpoint_dir, step, weights, sidecar)
            last_saved = step
            opt_tensors, opt_meta = optimizer_tensors(optimizer)
            state = dict(weights)
            state.update(prefixed("optim.", opt_tensors))
            state["rng.data"] = generator.get_state()
            state["rng.noise"] = noise.get_state()
            state["rng.global"] = torch.get_rng_state()
            if device.type == "cuda":
                state["rng.cuda"] = torch.cuda.get_rng_state(device)
            yield record  # before the state that marks this step done: what the caller does with it (its log line)
            save_training_state(state_path, state, {"step": step, "config_hash": config_hash, "optimizer": opt_meta})
            continue
        yield record


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: Tensor,
    prompts: Tensor,
    noise: torch.Generator | None,
    bf16: bool,
    device: torch.device | str = "cpu",
    grad_clip: float | None = None,
) -> tuple[Tensor, dict[str, Tensor], Tensor | None]:
    """One optimisation step as `iter_training` takes it: the model's loss on a batch of [0, 1] images under bf16
    autocast (when `bf16`), backward, the global grad-norm clip (when `grad_clip`), the optimizer's step.
    Returns (loss, metrics, the gradient norm before clipping or None). Also what `bench/train_step.py` times.
    When the loss or the gradient norm is not finite the optimizer does not step (the weights stay as they were)
    and `TrainingDiverged` says which; checking costs one scalar read per step."""
    with autocast(bf16, device):
        loss, metrics = model.loss(images.to(device), prompts.to(device), noise)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip) if grad_clip is not None else None
    norm = grad_norm if grad_norm is not None else _grad_norm(model)
    if not bool(torch.isfinite(loss.detach()) & torch.isfinite(norm)):
        loss_value = float(loss.detach())
        what = f"the loss is {loss_value}" if not math.isfinite(loss_value) else f"the gradient norm is {float(norm)}"
        raise TrainingDiverged(f"training step not taken: {what}", what)
    optimizer.step()
    return loss, metrics, grad_norm


def _grad_norm(model: nn.Module) -> Tensor:
    """The global L2 norm of the gradients (what clipping measures; a 0-d tensor), for runs without clipping; read
    only."""
    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    if not grads:
        return torch.zeros(())
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads]))


def _first_non_finite(model: nn.Module) -> str | None:
    """The name of the first parameter holding a NaN or an infinity, else None."""
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p.detach()).all()):
            return name
    return None


def _diverged(step: int, what: str, last_saved: int | None) -> str:
    kept = f"the last checkpoint, step {last_saved}, is kept" if last_saved else "no checkpoint was saved"
    return f"training diverged at step {step}: {what}; {kept} (lower train.lr, or set train.grad_clip)"


def load_weights(model: nn.Module, checkpoint_tensors: dict[str, Tensor], use_ema: bool = True) -> nn.Module:
    """Load model (or EMA, when present and asked for) weights from a checkpoint's tensors."""
    prefix = "ema." if use_ema and any(k.startswith("ema.") for k in checkpoint_tensors) else "model."
    model.load_state_dict(unprefixed(prefix, checkpoint_tensors))
    return model
