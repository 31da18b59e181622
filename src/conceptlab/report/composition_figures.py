"""Figures of a `bumps` run: generation accuracy per region, effective dimension over training, the final
representation cloud in its top PCs, its persistence barcode, and generations per region over training.

Every function takes tables / arrays and returns a matplotlib Figure; saving is the caller's job
(`studies.factorization`).
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from conceptlab.report import names as nm
from conceptlab.report.figures import plot_samples
from conceptlab.report.style import COLUMN, PAGE, REFERENCE, color, styled

_REGION_STYLE = {"train": (color(1), "--"), "held_out": (color(2), "-")}


@styled
def plot_generation_accuracy(table: pd.DataFrame, tolerance: float | None = None) -> Figure:
    """Accuracy vs step: one panel each for x, y and joint, one line per region (held out solid)."""
    fig, axes = plt.subplots(1, 3, figsize=(PAGE, 2.4), sharey=True)
    titles = {"x": "x position", "y": "y position", "joint": "both (joint)"}
    for ax, key in zip(axes, ("x", "y", "joint")):
        for k, (region, rows) in enumerate(table.groupby("region", sort=False)):
            rows = rows.sort_values("step")
            colour, style = _REGION_STYLE.get(region, (color(k + 3), "-"))
            ax.plot(rows["step"], rows[key], style, marker="o", ms=2.5, color=colour, label=nm.region(region))
        ax.set_title(titles[key] + (f", within ±{tolerance:g} px" if tolerance else ""))
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.03)
    axes[0].set_ylabel("generation accuracy")
    axes[-1].legend()
    fig.tight_layout()
    return fig


@styled
def plot_effective_dimension(table: pd.DataFrame, cut: float | None = None) -> Figure:
    """Effective dimension (participation ratio) and explained variance of the top k PCs (the table's
    `explained_variance_top<k>` column: the geometry table's top 4, or `analysis.representation`'s) vs step; with
    homology over training (`betti_*` columns), a second panel: the longest H1 and H2 bars (as fractions of the diameter,
    with the persistence `cut` when given) and the Betti numbers vs step."""
    rows = table.sort_values("step")
    with_homology = "betti_1" in rows and rows["betti_1"].notna().any()
    fig, axes = plt.subplots(1, 2 if with_homology else 1, figsize=(PAGE if with_homology else COLUMN + 0.4, 2.6),
                             squeeze=False)
    ax = axes[0, 0]
    ax.plot(rows["step"], rows["effective_dimension"], "-o", ms=3, color="C0", label="effective dimension")
    ax.axhline(4, color=REFERENCE, lw=0.8, ls=":", label="4 (a torus in R⁴)")
    ax.set_xlabel("training step")
    ax.set_ylabel("effective dimension", color="C0")
    twin = ax.twinx()
    column = next((c for c in rows.columns if re.fullmatch(r"explained_variance_top\d+", str(c))), None)
    if column is None:
        raise ValueError("the table has no explained_variance_top<k> column (the share of the variance in the top "
                         "k principal components); give the geometry table or analysis.representation's")
    k = column.removeprefix("explained_variance_top")
    twin.plot(rows["step"], rows[column], "--", color="C1", label=f"explained var. top {k}")
    twin.set_ylim(0, 1.02)
    twin.set_ylabel(f"explained variance, top {k} PCs", color="C1")
    twin.grid(False)
    lines = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(lines, [h.get_label() for h in lines], loc="upper right")
    hook = rows["hook"].iloc[0] if "hook" in rows else ""
    ax.set_title(f"{hook}, t = {rows['t'].iloc[0]:g}" if "t" in rows else hook, fontsize=9)
    if with_homology:
        h = rows.dropna(subset=["betti_1"])
        ax = axes[0, 1]
        for dim, colour in ((1, "C2"), (2, "C3")):
            for i, style in ((1, "-o"), (2, "--"), (3, ":")):
                col = f"h{dim}_bar_{i}"
                if col in h:
                    ax.plot(h["step"], h[col], style, ms=3, color=colour, alpha=1.0 if i == 1 else 0.7,
                            label=f"H{dim} bar {i}")
        ax.set_xlabel("training step")
        ax.set_ylabel("bar length / diameter")
        ax.set_xscale("symlog", linthresh=max(1.0, float(h["step"].min())))
        top = float(h[[c for c in h.columns if c.startswith(("h1_bar", "h2_bar"))]].to_numpy().max())
        if cut is not None:
            ax.axhline(cut, color=REFERENCE, lw=0.8, ls=":", label="persistence cut")
            top = max(top, cut)
        for r in h.itertuples():  # the Betti numbers (β0 β1 β2) of each checkpoint, above its bars
            ax.annotate(f"{int(r.betti_0)}{int(r.betti_1)}{int(r.betti_2)}", (r.step, top * 1.08), fontsize=6,
                        ha="center", rotation=90)
        ax.set_ylim(0, top * 1.25 if top > 0 else 1.0)
        ax.set_title("longest bars; Betti numbers β0β1β2 above (a torus: 121)", fontsize=8)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


@styled
def plot_pca_projection(projected: np.ndarray, labels: np.ndarray, cyclic: bool = False) -> Figure:
    """The cloud in its top 3 PCs (3D scatter), coloured by μx (left) and μy (right); a cyclic colour map for
    periodic labels."""
    fig = plt.figure(figsize=(PAGE, 3.4))
    dims = min(3, projected.shape[1])
    for k, (name, values) in enumerate((("label μx", labels[:, 0]), ("label μy", labels[:, 1]))):
        ax = fig.add_subplot(1, 2, k + 1, projection="3d" if dims == 3 else None)
        coords = [projected[:, i] for i in range(dims)]
        sc = ax.scatter(*coords, c=values, cmap="twilight" if cyclic else "viridis", s=4)
        ax.set_title(f"coloured by {name}")
        ax.set_xlabel("PC1", labelpad=-2)
        ax.set_ylabel("PC2", labelpad=-2)
        if dims == 3:
            ax.set_zlabel("PC3", labelpad=-2)
            ax.tick_params(labelsize=5, pad=0)
        # the colour bar goes under the panel, so it never covers an axis label
        bar = fig.colorbar(sc, ax=ax, orientation="horizontal", shrink=0.6, pad=0.08, aspect=30)
        bar.set_label(name + (" (periodic)" if cyclic else ""))
    fig.tight_layout()
    return fig


@styled
def plot_barcode(diagrams: list[np.ndarray], threshold: float, betti: list[int] | None = None,
                 infinite: list[int] | None = None) -> Figure:
    """Persistence barcode per homology dimension (finite bars, longest first). The bars counted in the Betti
    numbers are dark: the longest β − (infinite bars) of each dimension when `betti` is given, else those longer
    than `threshold`; the dotted line is the threshold."""
    fig, axes = plt.subplots(len(diagrams), 1, figsize=(COLUMN + 0.4, 0.8 + 1.0 * len(diagrams)), squeeze=False)
    top = max([float(d[:, 1].max()) for d in diagrams if len(d)] + [threshold, 1e-9])
    for dim, (ax, d) in enumerate(zip(axes[:, 0], diagrams)):
        d = d[np.argsort(d[:, 0] - d[:, 1])] if len(d) else d
        counted = None if betti is None else betti[dim] - (infinite[dim] if infinite else 0)
        for i, (b, e) in enumerate(d[:60]):
            dark = i < counted if counted is not None else e - b > threshold
            ax.plot([b, e], [i, i], color=color(1) if dark else "0.75", lw=1.2)
        extra = f", {infinite[dim]} infinite" if infinite else ""
        beta = f" — β{dim} = {betti[dim]}" if betti else ""
        ax.set_ylabel(f"H{dim}")
        ax.set_title(f"H{dim}: {len(d)} finite bars{extra}{beta}")
        ax.set_yticks([])
        ax.grid(False)
        ax.set_xlim(0, top * 1.05)
    axes[-1, 0].set_xlabel(f"filtration radius (dark: counted; persistence cut {threshold:.3g})")
    fig.tight_layout()
    return fig


def plot_generations(samples: dict[str, torch.Tensor], max_rows: int = 6) -> Figure:
    """Generations per region over training; `samples` maps 'step_NNNNNNN/region' → uint8 `[n, 1, H, W]`."""
    by_step: dict[int, dict[str, torch.Tensor]] = {}
    for key, images in samples.items():
        step, region = key.split("/", 1)
        by_step.setdefault(int(step.split("_")[1]), {})[region] = images
    steps = sorted(by_step)
    steps = [steps[round(i)] for i in np.linspace(0, len(steps) - 1, min(max_rows, len(steps)))]
    regions = sorted({r for s in steps for r in by_step[s]}, key=lambda r: (r != "train", r))
    columns = []
    for region in regions:
        n = max(len(by_step[s].get(region, [])) for s in steps)
        columns += [(region, i) for i in range(n)]
    grids = {}
    for s in dict.fromkeys(steps):
        tiles = []
        for region, i in columns:
            imgs = by_step[s].get(region)
            tile = imgs[i, 0].float().numpy() / 255 if imgs is not None and i < len(imgs) else None
            tiles.append(tile)
        shape = next(t.shape for t in tiles if t is not None)
        tiles = [np.zeros(shape) if t is None else t for t in tiles]
        grids[s] = np.repeat(np.stack(tiles)[..., None], 3, axis=-1)
    labels = [f"{nm.region(region)} {i}" if i else nm.region(region) for region, i in columns]
    return plot_samples(grids, labels, rotate_labels=True)
