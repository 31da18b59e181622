"""Percolation figure: largest-cluster mass ratio vs dataset size, one line per canvas size N, a panel per threshold.

Takes the tables of `analysis.percolation` (`percolation_curve`, `critical_dataset_size`) and returns a Figure.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def plot_percolation(curve: pd.DataFrame, critical: pd.DataFrame, target: float) -> Figure:
    """Mass ratio (mean ± sd over trials) vs dataset size λM per N; the critical size per N marked on the target line."""
    thresholds = sorted(curve["threshold"].unique())
    fig, axes = plt.subplots(1, len(thresholds), figsize=(5.2 * len(thresholds), 4.0), squeeze=False)
    sizes = sorted(curve["N"].unique())
    colors = {n: plt.get_cmap("viridis")(i / max(1, len(sizes) - 1)) for i, n in enumerate(sizes)}
    for ax, threshold in zip(axes[0], thresholds):
        part = curve[curve["threshold"] == threshold]
        for n in sizes:
            g = part[part["N"] == n].sort_values("dataset_size")
            g = g[g["dataset_size"] > 0]
            ax.plot(g["dataset_size"], g["mass_ratio"], "o-", ms=3, color=colors[n], label=f"N = {n:g}")
            ax.fill_between(g["dataset_size"], g["mass_ratio"] - g["mass_ratio_std"],
                            g["mass_ratio"] + g["mass_ratio_std"], color=colors[n], alpha=0.15, lw=0)
            row = critical[(critical["threshold"] == threshold) & (critical["N"] == n)]
            if len(row) and np.isfinite(row["critical_dataset_size"].iloc[0]):
                ax.plot(row["critical_dataset_size"].iloc[0], target, "kx", ms=7)
        ax.axhline(target, color="0.5", ls=":", lw=1)
        ax.set_xscale("log")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("dataset size λ·M (bumps kept)")
        ax.set_ylabel("largest-cluster mass ratio")
        ax.set_title(f"overlap threshold {threshold:g}")
        ax.legend(fontsize=8, loc="lower right")
    fig.suptitle("percolation of the bump lattice: × = critical dataset size")
    fig.tight_layout()
    return fig
