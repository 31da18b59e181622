"""Figures for a run: concept-space trajectories, accuracy per concept over training, the loss curve, samples.

Every function takes tables (pandas) and returns a matplotlib Figure drawn in the package style
(`report.style`); classes are named by the table's `class_name` column where it has one; saving is the caller's job.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.offsetbox import AnnotationBbox, OffsetImage

from conceptlab.analysis.concept_space import smooth, trajectories
from conceptlab.report import names as nm
from conceptlab.report.style import (COLUMN, PAGE, REFERENCE, SEQUENTIAL, arrows, caption, class_colors, color,
                                     panel_grid, styled, wide_positive)

MIN_VALID_FRACTION = 0.25  # concept-space points read from fewer valid images than this share are hidden


def _class_color(classes: list[str], code: str, names: dict[str, str] | None = None):
    return class_colors(classes, names)[code]


def valid_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per (class, step): valid images (valid_fraction × n) and n, as read by the concept probe."""
    g = table.groupby(["class", "step"]).agg(valid_fraction=("valid_fraction", "first"), n=("n", "first"))
    g["valid"] = (g["valid_fraction"] * g["n"]).round().astype(int)
    return g.reset_index()


@styled
def plot_concept_space(
    table: pd.DataFrame,
    concepts: list[str],
    thumbnails: dict[str, np.ndarray] | None = None,
    value_names: dict[str, list[str]] | None = None,
    min_valid_fraction: float = MIN_VALID_FRACTION,
) -> Figure:
    """Trajectories of every class prompt in concept space (2 or 3 concepts), targets at the corners.

    Time: points are coloured by training step (one colour bar) and arrows point forward in training. Each class
    has its colour (held-out solid, training dashed), its target corner a star. A point's area is proportional to
    the valid images it was read from; points read from fewer than `min_valid_fraction` of the images are hidden
    (the rule and the count hidden are written under the figure). `thumbnails` (class code → HxWx3 image): the last
    generations, drawn next to each target corner (2 concepts only).
    """
    if len(concepts) < 2:
        raise ValueError("a concept-space plot needs at least 2 concepts")
    class_names = nm.class_names_of(table)
    traj = trajectories(table).merge(valid_counts(table), on=["class", "step"], how="left")
    classes = sorted(table["class"].unique())
    three_d = len(concepts) >= 3
    axes_c = concepts[:3] if three_d else concepts[:2]
    fig = plt.figure(figsize=(COLUMN + 0.4, COLUMN + 1.1))
    ax = fig.add_subplot(111, projection="3d" if three_d else None)
    steps_all = traj["step"].to_numpy()
    norm = plt.Normalize(steps_all.min(), steps_all.max() if steps_all.max() > steps_all.min() else steps_all.min() + 1)
    cmap = plt.get_cmap(SEQUENTIAL)
    hidden = 0
    n_max = int(traj["n"].max()) if traj["n"].notna().any() else 1
    sc = None
    handles = []
    for code in classes:
        rows = traj[traj["class"] == code].sort_values("step")
        held = rows["split"].iloc[0] == "held_out"
        colour = _class_color(classes, code, class_names)
        enough = rows["valid"] >= np.maximum(1, np.ceil(min_valid_fraction * rows["n"]))
        readable = rows[enough & rows[axes_c].notna().all(axis=1)]
        hidden += int(len(rows) - len(readable))
        coords = [readable[c].to_numpy() for c in axes_c]
        ax.plot(*coords, "-" if held else "--", color=colour, lw=1.6 if held else 1.0, alpha=0.9, zorder=2)
        sizes = 4 + 26 * readable["valid"].to_numpy() / max(1, n_max)
        sc = ax.scatter(*coords, c=readable["step"].to_numpy(), cmap=cmap, norm=norm, s=sizes,
                        edgecolors=colour, linewidths=0.6, zorder=3)
        if not three_d and len(readable) >= 2:
            arrows(ax, coords[0], coords[1], colour)
        target = [float(code[concepts.index(c)]) for c in axes_c]
        ax.scatter(*[[v] for v in target], marker="*", s=110, color=colour, edgecolors="black", linewidths=0.5,
                   zorder=5)
        label = nm.class_label(code, class_names) + (" (held out)" if held else "")
        handles.append(Line2D([], [], color=colour, ls="-" if held else "--", lw=1.6 if held else 1.0, label=label))
        if thumbnails and code in thumbnails and not three_d:
            offset = [(-0.13 if v < 0.5 else 0.13) for v in target]
            box = AnnotationBbox(OffsetImage(thumbnails[code], zoom=0.75), (target[0] + offset[0], target[1] + offset[1]),
                                 frameon=True, pad=0.08)
            ax.add_artist(box)
    for setter, concept in zip((ax.set_xlabel, ax.set_ylabel, getattr(ax, "set_zlabel", None)), axes_c):
        if setter is not None:
            setter(f"P({nm.value_name(concept, 1, value_names)})" if value_names else f"P({nm.human(concept)} = 1)")
    lim = (-0.28, 1.28) if not three_d else (-0.05, 1.05)
    ax.set_xlim(*lim)
    ax.set_ylim(*lim)
    if three_d:
        ax.set_zlim(*lim)
    else:
        ax.add_patch(plt.Rectangle((0, 0), 1, 1, fill=False, lw=0.6, ls=":", color=REFERENCE))
        ax.set_aspect("equal")
        ax.grid(False)
    handles += [Line2D([], [], marker="*", ls="none", color="0.6", markeredgecolor="black", ms=8,
                       label="target corner of each class")]
    if not three_d:
        handles.append(Line2D([], [], marker=r"$\rightarrow$", ls="none", color="0.3", ms=8,
                              label="direction of training"))
    handles.append(Line2D([], [], marker="o", ls="none", color="0.6", ms=5, label="point area ∝ valid images"))
    legend = ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize=6)
    if sc is not None:
        bar = fig.colorbar(sc, ax=ax, fraction=0.045, pad=0.02, shrink=0.8)
        bar.set_label("training step")
    ax.set_title("Concept space over training")
    fig.tight_layout()
    rule = (f"Points read from fewer than {min_valid_fraction:.0%} of the images as valid objects are hidden "
            f"({hidden} of {len(traj)} hidden; up to {n_max} images per point).")
    caption(fig, rule, below=legend)
    return fig


def rule_name(threshold: float, smoothing: int, stay: int) -> str:
    """The learning-time rule in words (the paper's rule is the smoothed one: `smoothing` > 1)."""
    if smoothing > 1:
        return (f"paper's smoothed rule: trailing mean over {smoothing} checkpoints ≥ {threshold:g} "
                f"for {stay} checkpoints")
    return f"unsmoothed rule: accuracy ≥ {threshold:g} for {stay} checkpoints"


@styled
def plot_accuracy(
    table: pd.DataFrame,
    threshold: float | None = None,
    times: pd.DataFrame | None = None,
    smoothing: int = 1,
    stay: int | None = None,
) -> Figure:
    """Accuracy (invalid images count as failures) vs step: one panel per concept (at most two across), one line
    per class (held-out solid). With `times` (the `learning_times` table) each split's learning time is marked
    where the rule places it, on the split's mean accuracy smoothed as the rule smooths it (drawn thin), and the
    rule is named in the legend."""
    concepts = list(dict.fromkeys(table["concept"]))
    classes = sorted(table["class"].unique())
    class_names = nm.class_names_of(table)
    rows_n, cols_n = panel_grid(len(concepts))
    fig, axes = plt.subplots(rows_n, cols_n, figsize=(PAGE if cols_n > 1 else COLUMN + 0.3, 2.4 * rows_n + 0.8),
                             squeeze=False, sharey=True)
    split_styles = {"train": "--", "held_out": "-"}
    for ax, concept in zip(axes.flat, concepts):
        part = table[table["concept"] == concept]
        for code, rows in part.groupby("class"):
            rows = rows.sort_values("step")
            held = rows["split"].iloc[0] == "held_out"
            ax.plot(rows["step"], rows["accuracy"], "-" if held else "--", color=_class_color(classes, code, class_names),
                    lw=1.5 if held else 1.0, marker="o", ms=2,
                    label=nm.class_label(code, class_names) + (" (held out)" if held else ""))
        if threshold is not None:
            ax.axhline(threshold, color=REFERENCE, lw=0.7, ls=":", label=f"threshold {threshold:g}")
        if times is not None:
            for split, group in part.groupby("split"):
                curve = group.groupby("step")["accuracy"].mean().sort_index()
                smoothed = smooth(curve.to_numpy(), smoothing)
                ax.plot(curve.index, smoothed, split_styles.get(split, "-"), color="black", lw=0.7, alpha=0.7,
                        label=f"{nm.split(split)}: mean" + (f", smoothed ({smoothing})" if smoothing > 1 else ""))
                row = times[(times["split"] == split) & (times["concept"] == concept)]
                lt = float(row["learning_time"].iloc[0]) if len(row) else math.nan
                if not math.isnan(lt):
                    ax.axvline(lt, color="black", lw=0.9, ls=split_styles.get(split, "-"), alpha=0.8)
                    y = float(np.interp(lt, curve.index, smoothed))
                    ax.plot([lt], [y], marker="v", color="black", ms=5, ls="none",
                            label=f"learning time, {nm.split(split)}")
                    ax.annotate(f"{lt:g}", (lt, 1.02), fontsize=6, ha="center", va="bottom")
        ax.set_title(nm.human(concept))
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.08)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy")
    for ax in list(axes.flat)[len(concepts):]:
        ax.axis("off")
    seen = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    fig.tight_layout()
    legend = fig.legend(seen.values(), seen.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3)
    if times is not None and threshold is not None and stay is not None:
        caption(fig, f"Learning time (▼ and vertical line): {rule_name(threshold, smoothing, stay)}; the thin black "
                     "line is the split's mean accuracy as the rule reads it. Invalid images count as failures.",
                below=legend)
    return fig


@styled
def plot_loss(log: pd.DataFrame) -> Figure:
    """Training loss vs step (raw and smoothed); a log axis when every logged loss is positive and they span at
    least a factor of 10, a linear one when they span less (a log axis adds nothing there and labels its minor ticks
    as 5.4×10⁻¹, …), else symmetric-log (a VDM's loss in bits per dimension goes negative once the reconstruction term
    falls below 0)."""
    fig, ax = plt.subplots(figsize=(COLUMN, 2.3))
    ax.plot(log["step"], log["loss"], color="0.7", lw=0.6, label="loss (logged steps)")
    if len(log) >= 5:
        window = max(3, len(log) // 20)
        ax.plot(log["step"], log["loss"].rolling(window, min_periods=1).mean(), color=color(1), lw=1.3,
                label=f"moving average over {window} logged steps")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss")
    if wide_positive(log["loss"]):
        ax.set_yscale("log")
    elif not (log["loss"].dropna() > 0).all():  # a VDM's loss in bits/dim goes below 0 (Gaussian reconstruction term)
        ax.set_yscale("symlog", linthresh=1.0)
    ax.legend()
    fig.tight_layout()
    return fig


@styled
def plot_vlb_terms(log: pd.DataFrame, phase_end: int | None) -> Figure:
    """A VDM's loss terms (bits per dimension, symmetric-log axis: the Gaussian reconstruction term goes below 0)
    and the learned schedule's γ(0), γ(1) over training; the end of the reconstruction-dominated phase marked
    (`analysis.vlb_terms.reconstruction_phase`)."""
    fig, ax = plt.subplots(figsize=(COLUMN, 2.7))
    names = {"diffusion_bpd": "diffusion", "prior_bpd": "prior", "recon_bpd": "reconstruction"}
    for k, (column, label) in enumerate(names.items()):
        if column in log.columns:
            ax.plot(log["step"], log[column], color=color(k + 1), lw=0.9, label=label)
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_xlabel("training step")
    ax.set_ylabel("loss term (bits / dim)")
    if phase_end is not None:
        ax.axvline(phase_end, color=REFERENCE, ls=":", lw=0.9)
        ax.annotate(f"reconstruction ≤ diffusion\nfrom step {phase_end:,}", (phase_end, 0.97),
                    xycoords=("data", "axes fraction"), ha="left", va="top", fontsize=6, color=REFERENCE)
    handles, labels = ax.get_legend_handles_labels()
    if {"gamma_0", "gamma_1"} <= set(log.columns):
        twin = ax.twinx()
        twin.grid(False)
        twin.spines["right"].set_visible(True)
        for column, style in (("gamma_0", "--"), ("gamma_1", "-.")):
            twin.plot(log["step"], log[column], color="0.3", ls=style, lw=0.9, label=f"γ({column[-1]})")
        twin.set_ylabel("learned γ = −log SNR")
        more_h, more_l = twin.get_legend_handles_labels()
        handles, labels = handles + more_h, labels + more_l
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=5, handlelength=1.6,
              columnspacing=1.0)
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


@styled
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
        ax.grid(False)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
        ax.set_ylabel(f"step {step}", rotation=0, ha="right", va="center", fontsize=6.5)
    if rotate_labels:
        axes[0, 0].set_xticks(centres, labels, fontsize=6, rotation=60, ha="left")
    else:
        axes[0, 0].set_xticks(centres, labels, fontsize=6.5)
    axes[0, 0].xaxis.tick_top()
    fig.tight_layout()
    return fig


@styled
def plot_checkpoint_noise(frame: pd.DataFrame, title: str | None = None) -> Figure:
    """Each trajectory's semivariogram γ against the lag in training steps (`experiments.checkpoint_noise.noise_frame`):
    solid for training classes, dashed for the held-out class; a ring marks the lag where its noise persistence is
    read (a log axis where γ spans a decade or more). A flat line is noise independent from one checkpoint to the
    next; a rising one, noise that lasts."""
    if frame.empty:
        raise ValueError("no trajectories to plot")
    names = frame["trajectory"].unique()
    fig, ax = plt.subplots(figsize=(COLUMN, 2.4 + 0.16 * math.ceil(len(names) / 2)))
    for k, (name, rows) in enumerate(frame.groupby("trajectory", sort=False)):
        rows = rows.sort_values("lag")
        line, = ax.plot(rows["lag_steps"], rows["gamma"], color=color(k), lw=1.2, marker=".",
                        ls="--" if rows["split"].iloc[0] != "train" else "-", label=name)
        at = rows[rows["lag"] == rows["persistence"].iloc[0]]
        ax.plot(at["lag_steps"], at["gamma"], "o", mfc="none", color=line.get_color(), ms=7)
    if wide_positive(frame["gamma"]):
        ax.set_yscale("log")
    ax.set_xlabel("lag (training steps between the two checkpoints)")
    ax.set_ylabel("semivariogram γ")
    if title:
        ax.set_title(title)
    ax.legend(fontsize="x-small", ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)
    fig.tight_layout()
    return fig
