"""Figure of a representation beside its controls: one panel per measure, one column per source.

Takes a tidy table (source, measure, value; one row per seed or run) and returns a matplotlib Figure; nothing here
reads or writes files.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure


def plot_controls(table: pd.DataFrame, sources: list[str], measures: list[str], title: str = "") -> Figure:
    """One panel per measure: each source's value on each seed (dots), its mean (bar), the trained model in black."""
    n = max(1, len(measures))
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows), squeeze=False)
    colors = {s: ("black" if s == "trained" else plt.get_cmap("tab10")(i % 10)) for i, s in enumerate(sources)}
    for ax, m in zip(axes.flat, measures):
        part = table[table["measure"] == m]
        for i, s in enumerate(sources):
            v = part[part["source"] == s]["value"].dropna().to_numpy()
            if len(v):
                ax.bar(i, v.mean(), color=colors[s], alpha=0.25, width=0.7)
                ax.scatter([i] * len(v), v, color=colors[s], s=14, zorder=3)
        ax.set_xticks(range(len(sources)), sources, rotation=35, ha="right", fontsize=7)
        ax.set_title(m, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(measures):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
