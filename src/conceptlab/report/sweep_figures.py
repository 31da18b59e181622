"""Sweep figures: learning time per concept vs the swept key and vs concept signal, runs as points, the median over
every run (a run that never learned counts as later than any time); region accuracy; data efficiency.

Every function takes tables (from `analysis.concept_signal`) and returns a matplotlib Figure; saving is the caller's job.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from conceptlab.report import names as nm
from conceptlab.report.style import PAGE, color, styled


@styled
def plot_learning_time_vs_signal(runs: pd.DataFrame, summary: pd.DataFrame, axis: str = "data.color_separation") -> Figure:
    """Left: learning time vs the swept value per concept: runs as dots (▲ at the top = not learned), the line the
    median over every run as `analysis.concept_signal.learning_time_by_axis` gives it (the `conceptlab runs
    learning-time` table's number: a run that never learned counts as later than any time); where half or more
    never learned that median is only "later than the last checkpoint", drawn as a hollow ▲ at the top.
    Right: learning time vs concept signal, every run and concept."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(PAGE, 2.8))
    concepts = sorted(runs["concept"].unique())
    colors = {c: color(1 + i) for i, c in enumerate(concepts)}
    learned_max = runs["learning_time"].max()
    ceiling = (learned_max if np.isfinite(learned_max) else 1.0) * 1.12
    for concept in concepts:
        colour = colors[concept]
        rows = runs[runs["concept"] == concept]
        stats = summary[summary["concept"] == concept].sort_values("axis_value")
        late = stats["median_censored"].astype(bool).to_numpy()
        median = np.where(late, ceiling, stats["learning_time_median"].to_numpy(dtype=float))
        xs = stats["axis_value"].to_numpy(dtype=float)
        for k in range(len(xs) - 1):  # dotted into and out of a median not reached
            left.plot(xs[k:k + 2], median[k:k + 2], color=colour, lw=1.5 if not late[k:k + 2].any() else 1.0,
                      ls=":" if late[k:k + 2].any() else "-")
        left.plot([], [], color=colour, lw=1.5, marker="o", ms=5,
                  label=f"{nm.human(concept)}: median over all runs (unlearned = later)")
        left.plot(stats["axis_value"][~late], median[~late], "o", color=colour, ms=5)
        if late.any():
            left.plot(stats["axis_value"][late], median[late], "^", color=colour, mfc="none", mew=1.3, ms=8)
        jitter = (np.random.default_rng(0).random(len(rows)) - 0.5) * 0.01
        learned = rows["learning_time"].notna().to_numpy()
        left.scatter(rows["axis_value"].to_numpy()[learned] + jitter[learned], rows["learning_time"][learned],
                     color=colour, alpha=0.45, s=16)
        if (~learned).any():
            left.scatter(rows["axis_value"].to_numpy()[~learned] + jitter[~learned], [ceiling] * int((~learned).sum()),
                         color=colour, marker="^", alpha=0.6, s=28)
        right.scatter(rows["concept_signal"][learned], rows["learning_time"][learned], color=colour, s=14,
                      label=nm.human(concept))
        if (~learned).any():
            right.scatter(rows["concept_signal"][~learned], [ceiling] * int((~learned).sum()), color=colour,
                          marker="^", s=28, alpha=0.6)
    censored = bool(runs["learning_time"].isna().any())
    if censored:
        left.axhline(ceiling, color="grey", lw=0.6, ls=":")
    left.set_xlabel(nm.config_key(axis))
    left.set_ylabel("learning time (step)")
    left.set_title("learning time across the sweep (dots: runs)")
    handles, labels = left.get_legend_handles_labels()
    if bool(summary["median_censored"].any()):
        handles.append(Line2D([], [], ls="none", marker="^", mfc="none", mew=1.3, ms=8, color="0.3"))
        labels.append("median not reached: half or more never learned")
    left.legend(handles, labels, title="▲ = run not learned (censored)" if censored else None)
    if censored:
        right.axhline(ceiling, color="grey", lw=0.6, ls=":")
    right.set_xlabel("concept signal")
    right.set_ylabel("learning time (step)")
    right.set_title("learning time vs concept signal (every run and concept)")
    right.legend(title="▲ = not learned (censored)" if censored else None)
    fig.tight_layout()
    return fig


@styled
def plot_region_accuracy(summary: pd.DataFrame) -> Figure:
    """Bump-world sweeps: final generation accuracy (x, y, joint) per setting of the swept keys and per region,
    mean ± sd over seeds (the output of `analysis.region_accuracy.region_accuracy_by_axis`); a setting with one run
    has no error bar (said under the figure), settings are named `key = value` in words."""
    axes_cols = [c for c in summary.columns if c not in ("region", "runs") and not c.endswith(("_mean", "_std"))]
    keys = {c: nm.config_key(c) for c in axes_cols}
    label = (summary[axes_cols].apply(lambda r: ", ".join(f"{keys[c]} = {r[c]}" for c in axes_cols), axis=1)
             if axes_cols else pd.Series("all runs", index=summary.index))
    settings = list(dict.fromkeys(label))
    regions = list(dict.fromkeys(summary["region"]))
    fig, axs = plt.subplots(1, 3, figsize=(PAGE, 2.8), sharey=True)
    width = 0.8 / max(1, len(regions))
    colors = {"train": color(1), "held_out": color(2)}
    runs = summary["runs"] if "runs" in summary.columns else pd.Series(1, index=summary.index)
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
                one = int(runs[row.index[0]]) < 2
                errs.append(np.nan if pd.isna(std) or one else float(std))
            ax.bar(xs, heights, width, yerr=errs, capsize=2, label=nm.region(region), color=colors.get(region),
                   error_kw={"lw": 0.8})
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels([textwrap.fill(t, 24) for t in settings], rotation=20, ha="right")
        ax.set_ylim(0, 1.05)
        ax.set_title({"x": "x position", "y": "y position", "joint": "both (joint)"}[metric])
    axs[0].set_ylabel("generation accuracy, final checkpoint")
    axs[-1].legend()
    fig.tight_layout()
    n_runs = sorted(set(int(r) for r in runs))
    note = ("error bars: ± sd over seeds" + (" (none where a setting has one run)" if 1 in n_runs else "")
            + f"; runs per setting: {', '.join(map(str, n_runs))}")
    fig.text(0.01, 0.0, note, ha="left", va="top", fontsize=6.5, color="0.2")
    return fig


@styled
def plot_data_efficiency(runs: pd.DataFrame, sizes: pd.DataFrame, target: float) -> Figure:
    """Left: accuracy vs dataset size per family and N (mean over seeds, runs as dots). Right: the dataset size
    reaching `target` vs N per family, log-log (the output of `analysis.data_efficiency.size_to_reach`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(PAGE, 2.9))
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
    left.legend(fontsize=6)
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
    right.set_title("▼ = reached already at the smallest size; hollow = training-limited (not fitted)", fontsize=6.5)
    right.legend()
    fig.tight_layout()
    return fig
