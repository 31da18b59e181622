"""Figures for a run: concept-space trajectories, accuracy per concept over training, the loss curve.

Every function takes tables (pandas) and returns a matplotlib Figure; saving is the caller's job.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.offsetbox import AnnotationBbox, OffsetImage

from conceptlab.analysis.concept_space import trajectories

_CLASS_COLORS = plt.get_cmap("tab10")


def _class_color(classes: list[str], code: str):
    return _CLASS_COLORS(sorted(classes).index(code) % 10)


def plot_concept_space(
    table: pd.DataFrame, concepts: list[str], thumbnails: dict[str, np.ndarray] | None = None
) -> Figure:
    """Trajectories of every class prompt in concept space (2 or 3 concepts), targets at the corners.

    Training classes are dashed, held-out classes solid; the marker fill goes light → dark with
    training step; `thumbnails` (class code → HxWx3 image) are drawn next to each target corner.
    """
    traj = trajectories(table)
    classes = sorted(table["class"].unique())
    three_d = len(concepts) >= 3
    fig = plt.figure(figsize=(6.4, 6.0))
    ax = fig.add_subplot(111, projection="3d" if three_d else None)
    axes = concepts[:3] if three_d else concepts[:2]
    if len(axes) == 1:
        raise ValueError("a concept-space plot needs at least 2 concepts")
    for code in classes:
        rows = traj[traj["class"] == code]
        split = rows["split"].iloc[0]
        color = _class_color(classes, code)
        style = "-" if split == "held_out" else "--"
        coords = [rows[c].to_numpy() for c in axes]
        ax.plot(*coords, style, color=color, lw=2 if split == "held_out" else 1.2, alpha=0.9,
                label=f"{code} ({'held out' if split == 'held_out' else 'train'})")
        shade = np.linspace(0.25, 1.0, len(rows))
        ax.scatter(*coords, c=[(*color[:3], a) for a in shade], s=18, edgecolors="none")
        target = [float(code[concepts.index(c)]) for c in axes]
        ax.scatter(*[[v] for v in target], marker="*", s=220, color=color, edgecolors="black", zorder=5)
        if thumbnails and code in thumbnails and not three_d:
            offset = [(-0.12 if v < 0.5 else 0.12) for v in target]
            box = AnnotationBbox(OffsetImage(thumbnails[code], zoom=1.4), (target[0] + offset[0], target[1] + offset[1]),
                                 frameon=True, pad=0.1)
            ax.add_artist(box)
    for setter, name in zip((ax.set_xlabel, ax.set_ylabel, getattr(ax, "set_zlabel", None)), axes):
        if setter is not None:
            setter(f"P({name} = 1)")
    lim = (-0.25, 1.25) if not three_d else (-0.05, 1.05)
    ax.set_xlim(*lim)
    ax.set_ylim(*lim)
    if three_d:
        ax.set_zlim(*lim)
    else:
        ax.add_patch(plt.Rectangle((0, 0), 1, 1, fill=False, lw=0.8, ls=":", color="grey"))
        ax.set_aspect("equal")
    ax.set_title("Concept-space learning dynamics")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=max(1, min(4, len(classes))), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def plot_accuracy(table: pd.DataFrame, threshold: float | None = None) -> Figure:
    """Accuracy (invalid images count as failures) vs step: one panel per concept, one line per class."""
    concepts = list(dict.fromkeys(table["concept"]))
    classes = sorted(table["class"].unique())
    fig, axes = plt.subplots(1, len(concepts), figsize=(4.2 * len(concepts), 3.4), squeeze=False, sharey=True)
    for ax, concept in zip(axes[0], concepts):
        part = table[table["concept"] == concept]
        for code, rows in part.groupby("class"):
            rows = rows.sort_values("step")
            held = rows["split"].iloc[0] == "held_out"
            ax.plot(rows["step"], rows["accuracy"], "-" if held else "--", color=_class_color(classes, code),
                    lw=2 if held else 1.2, label=f"{code}{' (held out)' if held else ''}")
        if threshold is not None:
            ax.axhline(threshold, color="grey", lw=0.8, ls=":")
        ax.set_title(concept)
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.03)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_loss(log: pd.DataFrame) -> Figure:
    """Training loss vs step (raw and smoothed)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.plot(log["step"], log["loss"], color="0.75", lw=0.8, label="loss")
    if len(log) >= 5:
        window = max(3, len(log) // 20)
        ax.plot(log["step"], log["loss"].rolling(window, min_periods=1).mean(), color="C0", lw=1.5,
                label=f"moving average ({window})")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def image_grid(images: np.ndarray, columns: int) -> np.ndarray:
    """Tile N×H×W×3 images into one array with a 1-pixel white border."""
    n, h, w, c = images.shape
    rows = -(-n // columns)
    grid = np.ones((rows * (h + 1) + 1, columns * (w + 1) + 1, c), dtype=images.dtype)
    for i, img in enumerate(images):
        r, k = divmod(i, columns)
        grid[1 + r * (h + 1): 1 + r * (h + 1) + h, 1 + k * (w + 1): 1 + k * (w + 1) + w] = img
    return grid


def plot_samples(samples: dict[int, np.ndarray], labels: list[str], column_width: float = 0.7,
                 rotate_labels: bool = False) -> Figure:
    """One image per column label (a class, an intervention variant…) at each checkpoint (rows);
    samples: step → [columns, H, W, 3] in [0, 1]."""
    steps = sorted(samples)
    extra = 0.6 if not rotate_labels else 1.2
    fig, axes = plt.subplots(len(steps), 1, figsize=(1.0 + column_width * len(labels), 0.75 * len(steps) + extra),
                             squeeze=False)
    width = samples[steps[0]].shape[2]
    centres = [1 + k * (width + 1) + width / 2 for k in range(len(labels))]
    for ax, step in zip(axes[:, 0], steps):
        ax.imshow(image_grid(samples[step], len(labels)))
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_ylabel(f"step {step}", rotation=0, ha="right", va="center", fontsize=7)
    if rotate_labels:
        axes[0, 0].set_xticks(centres, labels, fontsize=6, rotation=60, ha="left")
    else:
        axes[0, 0].set_xticks(centres, labels, fontsize=7)
    axes[0, 0].xaxis.tick_top()
    fig.tight_layout()
    return fig
