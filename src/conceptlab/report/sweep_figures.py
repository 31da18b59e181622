"""Sweep figures: learning time per concept vs the swept key and vs concept signal, seeds as points, mean ± sd.

Every function takes tables (from `analysis.concept_signal`) and returns a matplotlib Figure; saving is the caller's job.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.ticker

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

_AXIS_LABELS = {"data.color_separation": "color separation Δc", "data.size_separation": "size separation Δs"}


def plot_learning_time_vs_signal(runs: pd.DataFrame, summary: pd.DataFrame, axis: str = "data.color_separation") -> Figure:
    """Left: learning time vs the swept value per concept (mean ± sd, seeds as dots; ▲ at the top = not learned).
    Right: learning time vs concept signal, every run and concept."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.2))
    concepts = sorted(runs["concept"].unique())
    colors = {c: plt.get_cmap("tab10")(i) for i, c in enumerate(concepts)}
    learned_max = runs["learning_time"].max()
    ceiling = (learned_max if np.isfinite(learned_max) else 1.0) * 1.12
    for concept in concepts:
        color = colors[concept]
        rows = runs[runs["concept"] == concept]
        stats = summary[summary["concept"] == concept].sort_values("axis_value")
        have = stats[stats["n_learned"] > 0]
        left.errorbar(have["axis_value"], have["learning_time_mean"], yerr=have["learning_time_std"], color=color,
                      marker="o", lw=2, capsize=4, label=f"{concept} (mean ± sd)")
        jitter = (np.random.default_rng(0).random(len(rows)) - 0.5) * 0.01
        learned = rows["learning_time"].notna().to_numpy()
        left.scatter(rows["axis_value"].to_numpy()[learned] + jitter[learned], rows["learning_time"][learned],
                     color=color, alpha=0.45, s=16)
        if (~learned).any():
            left.scatter(rows["axis_value"].to_numpy()[~learned] + jitter[~learned], [ceiling] * int((~learned).sum()),
                         color=color, marker="^", alpha=0.6, s=28)
        right.scatter(rows["concept_signal"][learned], rows["learning_time"][learned], color=color, s=22, label=concept)
        if (~learned).any():
            right.scatter(rows["concept_signal"][~learned], [ceiling] * int((~learned).sum()), color=color,
                          marker="^", s=28, alpha=0.6)
    censored = bool(runs["learning_time"].isna().any())
    if censored:
        left.axhline(ceiling, color="grey", lw=0.6, ls=":")
    left.set_xlabel(_AXIS_LABELS.get(axis, axis))
    left.set_ylabel("learning time (step)")
    left.set_title("learning time across the sweep (seeds)")
    left.legend(fontsize=8)
    if censored:
        right.axhline(ceiling, color="grey", lw=0.6, ls=":")
    right.set_xlabel("concept signal")
    right.set_ylabel("learning time (step)")
    right.set_title("larger concept signal → learned earlier")
    right.legend(fontsize=8, title="▲ = not learned" if censored else None, title_fontsize=8)
    fig.tight_layout()
    return fig


def plot_region_accuracy(summary: pd.DataFrame) -> Figure:
    """Bump-world sweeps: final generation accuracy (x, y, joint) per setting of the swept keys and per region,
    mean ± sd over seeds (the output of `analysis.region_accuracy.region_accuracy_by_axis`)."""
    axes_cols = [c for c in summary.columns if c not in ("region", "runs") and not c.endswith(("_mean", "_std"))]
    label = summary[axes_cols].astype(str).agg(", ".join, axis=1) if axes_cols else pd.Series("all", index=summary.index)
    settings = list(dict.fromkeys(label))
    regions = list(dict.fromkeys(summary["region"]))
    fig, axs = plt.subplots(1, 3, figsize=(4.0 * 3, 3.8), sharey=True)
    width = 0.8 / max(1, len(regions))
    colors = {"train": "tab:blue", "held_out": "tab:red"}
    for ax, metric in zip(axs, ("x", "y", "joint")):
        for j, region in enumerate(regions):
            xs, heights, errs = [], [], []
            for i, setting in enumerate(settings):
                row = summary[(label == setting) & (summary["region"] == region)]
                if row.empty:
                    continue
                xs.append(i + (j - (len(regions) - 1) / 2) * width)
                heights.append(float(row[f"{metric}_mean"].iloc[0]))
                std = row[f"{metric}_std"].iloc[0]
                errs.append(0.0 if pd.isna(std) else float(std))
            ax.bar(xs, heights, width, yerr=errs, capsize=3, label=region, color=colors.get(region))
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(settings, rotation=20, ha="right", fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{metric} accuracy")
    axs[0].set_ylabel("generation accuracy (final checkpoint)")
    axs[-1].legend(fontsize=8)
    fig.suptitle(" / ".join(c.replace("_", ".", 1) for c in axes_cols) or "runs", fontsize=10)
    fig.tight_layout()
    return fig


def plot_data_efficiency(runs: pd.DataFrame, sizes: pd.DataFrame, target: float) -> Figure:
    """Left: accuracy vs dataset size per family and N (mean over seeds, runs as dots). Right: the dataset size
    reaching `target` vs N per family, log-log (the output of `analysis.data_efficiency.size_to_reach`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.2))
    families = sorted(runs["family"].unique())
    ns = sorted(runs["N"].unique())
    styles = {f: s for f, s in zip(families, ("-", "--", ":", "-."))}
    colors = {n: plt.get_cmap("viridis")(i / max(1, len(ns) - 1)) for i, n in enumerate(ns)}
    for (family, n), g in runs.groupby(["family", "N"]):
        mean = g.groupby("dataset_size")["accuracy"].mean()
        left.plot(mean.index, mean.values, styles[family], marker="o", ms=3, color=colors[n], label=f"{family}, N={n}")
        left.scatter(g["dataset_size"], g["accuracy"], s=8, color=colors[n], alpha=0.4)
    left.axhline(target, color="0.5", ls=":", lw=1)
    left.set_xscale("log")
    left.set_ylim(-0.02, 1.02)
    left.set_xlabel("training images")
    left.set_ylabel("generation accuracy (2D grid, final checkpoint)")
    left.legend(fontsize=7)
    for family, g in sizes.groupby("family"):
        g = g[g["size_to_reach"].notna()]
        limited = g["training_limited"].astype(bool) if "training_limited" in g.columns else pd.Series(False, g.index)
        fitted = g[~limited]
        right.plot(fitted["N"], fitted["size_to_reach"], styles[family], color="k", lw=1, label=family)
        for x, y, censored, lim in zip(g["N"], g["size_to_reach"], g["censored"], limited):
            right.plot(x, y, "v" if censored else "o", ms=5, color="0.6" if lim else "k", mfc="none" if lim else "k")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xticks(ns, [str(n) for n in ns])
    right.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    right.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    right.yaxis.set_minor_formatter(matplotlib.ticker.ScalarFormatter())
    right.set_xlabel("canvas size N")
    right.set_ylabel(f"training images to reach {target:.0%}")
    right.set_title("▼ = reached already at the smallest size; hollow = training-limited (not fitted)", fontsize=8)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig
