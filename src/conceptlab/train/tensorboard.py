"""TensorBoard logging of a run (`train.tensorboard`, on by default): one writer per stage under
`<run>/tensorboard/`, written with `torch.utils.tensorboard` (the `tensorboard` package).

What is logged, by tag:

    config                          the resolved config (text, each invocation)
    train/loss, train/<metric>      every `train.log_every` steps, as in train_log.jsonl (grad_norm among them when
                                    gradients are clipped)
    train/learning_rate             the optimizer's learning rate at those steps
    train/seconds_per_step
    <measurement>/<name>            per checkpoint, the scalars a study's measurement reports (`StepResult.scalars`:
                                    accuracies, intervention scores, effective dimension, …)
    <measurement>/samples[/<part>]  per checkpoint, the kept samples as one image grid

`TensorBoardLog` is a thin wrapper: it imports TensorBoard only when a writer is opened (importing the package stays
cheap), turns sample tensors into grids, and closes the writer on exit. A resumed run's writer purges the events
past the step it resumes from, so the curves have no duplicates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import torch
from torch import Tensor

FOLDER = "tensorboard"


def sample_grid(images: Tensor, columns: int | None = None) -> Tensor:
    """Tile [N, C, H, W] images (uint8, or float in [0, 1]) into one uint8 [H', W', 3] grid, 1-pixel white border."""
    if images.ndim != 4:
        raise ValueError(f"samples must be [N, C, H, W], got shape {tuple(images.shape)}")
    x = images.detach().cpu()
    x = x.float() / 255.0 if x.dtype == torch.uint8 else x.float().clamp(0, 1)
    if x.shape[1] == 1:
        x = x.repeat(1, 3, 1, 1)
    n, c, h, w = x.shape
    columns = columns or min(n, 8)
    rows = -(-n // columns)
    grid = torch.ones(c, rows * (h + 1) + 1, columns * (w + 1) + 1)
    for i in range(n):
        r, k = divmod(i, columns)
        grid[:, 1 + r * (h + 1): 1 + r * (h + 1) + h, 1 + k * (w + 1): 1 + k * (w + 1) + w] = x[i, :3]
    return (grid.permute(1, 2, 0) * 255).round().to(torch.uint8)


class TensorBoardLog:
    """A TensorBoard writer for one stage of a run (training or evaluation); a context manager."""

    def __init__(self, run_root: Path, purge_step: int | None = None):
        from torch.utils.tensorboard import SummaryWriter

        self.folder = Path(run_root) / FOLDER
        self.writer = SummaryWriter(str(self.folder), purge_step=purge_step, flush_secs=30)

    def __enter__(self) -> "TensorBoardLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def config(self, yaml_text: str) -> None:
        """The resolved config, as a text summary (shown in a code block)."""
        self.writer.add_text("config", "```yaml\n" + yaml_text + "\n```", 0)

    def train(self, step: int, loss: float, metrics: Mapping[str, float], lr: float | None, seconds: float) -> None:
        self.writer.add_scalar("train/loss", loss, step)
        for name, value in metrics.items():
            if name != "loss":  # the loss is logged once, above
                self.writer.add_scalar(f"train/{name}", float(value), step)
        if lr is not None:
            self.writer.add_scalar("train/learning_rate", float(lr), step)
        self.writer.add_scalar("train/seconds_per_step", float(seconds), step)

    def scalars(self, prefix: str, step: int, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self.writer.add_scalar(f"{prefix}/{name}", float(value), step)

    def samples(self, prefix: str, step: int, samples: Mapping[str, Tensor]) -> None:
        """Each kept-samples tensor (name `step_XXXXXXX` or `step_XXXXXXX/<part>`) as one grid image."""
        for key, images in samples.items():
            if not isinstance(images, Tensor) or images.ndim != 4 or images.shape[1] not in (1, 3):
                continue
            part = key.split("/", 1)[1] if "/" in key else ""
            tag = f"{prefix}/samples" + (f"/{part}" if part else "")
            self.writer.add_image(tag, sample_grid(images), step, dataformats="HWC")

    def text(self, tag: str, text: str, step: int = 0) -> None:
        self.writer.add_text(tag, text, step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()
