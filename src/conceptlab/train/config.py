"""The `train` config section: optimisation, checkpoint schedule, precision, device and seeds."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from conceptlab.config_base import StrictConfig


class TrainConfig(StrictConfig):
    """Optimisation, checkpoint schedule and seeds."""

    added_fields = ("keep_training_state", "keep_checkpoints", "tensorboard", "hflip", "color_jitter")

    steps: int = Field(20000, ge=1)
    batch_size: int = Field(64, ge=1)
    lr: float = Field(1e-3, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    grad_clip: float | None = Field(0.01, gt=0.0, description="global grad-norm clip (None = off)")
    ema_decay: float | None = Field(None, ge=0.0, lt=1.0, description="EMA of weights (None = off)")
    bf16: bool | None = Field(
        None, description="bf16 autocast; null = auto (on where the device has native bf16, else fp32)"
    )
    device: Literal["auto", "cpu", "cuda"] = Field("auto", description="auto: cuda when available, else cpu")
    checkpoint_schedule: Literal["sqrt", "log", "linear", "list"] = "sqrt"
    checkpoint_count: int = Field(60, ge=1)
    checkpoint_start: int = Field(500, ge=1)
    checkpoint_steps: list[int] | None = Field(
        None, description="explicit steps, each ≥ 1 (read under schedule=list only; a step past train.steps is not "
        "saved, so a preset's list serves a shorter run)")
    train_seed: int = Field(0, ge=0)
    log_every: int = Field(10, ge=1)
    keep_training_state: bool = Field(
        True, description="keep train_state.safetensors (optimizer, RNG) once the run is done; false frees ~3× a "
        "checkpoint but the run can no longer be trained further"
    )
    keep_checkpoints: Literal["all", "evaluated"] = Field(
        "all", description="once the run is done, keep every checkpoint, or only those a measurement evaluated"
    )

    hflip: float = Field(0.0, ge=0.0, le=1.0, description="probability of flipping a training image left to right "
                         "when it is drawn (augmentation; the authors' CelebA loader flips with 0.5); 0: never, and "
                         "no random number is drawn for it. Only for data kinds whose labels survive a flip (celeba, "
                         "shapes; not bumps or shapes3d, whose labels hold a position or an orientation)")
    color_jitter: float = Field(0.0, ge=0.0, le=0.5, description="strength x of a colour jitter of each drawn RGB "
                                "training image: brightness, contrast and saturation factors from [1 − x, 1 + x] and a "
                                "hue shift from [−x, x], in a random order per image (torchvision's ColorJitter(x, x, x, "
                                "x) by its definition; the authors' CelebA loader uses 0.1); 0: none, and no random "
                                "number is drawn for it")
    tensorboard: bool = Field(
        True, description="log loss, grad norm, learning rate, per-checkpoint measurements and sample grids to "
        "<run>/tensorboard (TensorBoard); does not change the trained weights"
    )

    @model_validator(mode="after")
    def _schedule(self) -> "TrainConfig":
        if self.checkpoint_schedule == "list" and not self.checkpoint_steps:
            raise ValueError("checkpoint_schedule=list needs checkpoint_steps")
        below = [step for step in self.checkpoint_steps or [] if step < 1]
        if below:
            raise ValueError(f"checkpoint_steps {below}: a checkpoint is saved after a step, so steps count from 1")
        return self
