"""Figures of hidden emergence: intervention scores vs step and the held-out trajectory with its turn.

Samples per variant use `report.figures.plot_samples` (one column per variant).

All functions take tidy tables (as written by `studies.emergence`)
and return matplotlib Figures; nothing here reads or writes files.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from conceptlab.analysis.emergence import wilson_interval

INTERVENTION_COLORS = {
    "naive": "#444444",
    "over_prompting": "#1f77b4",
    "linear": "#d62728",
    "embedding_shift": "#ff7f0e",
    "patching": "#2ca02c",
    "cfg": "#9467bd",
}


def _color(name: str, k: int):
    return INTERVENTION_COLORS.get(name, plt.get_cmap("tab10")(k % 10))


def plot_intervention_scores(
    best: pd.DataFrame, threshold: float = 0.5, emergence: dict[str, dict[str, float | None]] | None = None
) -> Figure:
    """Held-out score (best variant) vs step, one panel per target, one colour per intervention, one line per seed.

    `best` has columns target, intervention, step, score, n (and optionally seed);
    `emergence` maps target → intervention → emergence step (drawn as a dotted line).
    """
    targets = sorted(best["target"].unique())
    fig, axes = plt.subplots(1, len(targets), figsize=(5.2 * len(targets), 3.6), squeeze=False, sharey=True)
    names = list(dict.fromkeys(best["intervention"]))
    seeds = sorted(best["seed"].unique()) if "seed" in best.columns else [None]
    for ax, target in zip(axes[0], targets):
        for k, name in enumerate(names):
            for j, seed in enumerate(seeds):
                rows = best[(best["target"] == target) & (best["intervention"] == name)]
                if seed is not None:
                    rows = rows[rows["seed"] == seed]
                rows = rows.sort_values("step")
                if rows.empty:
                    continue
                label = name if j == 0 else None
                ax.plot(rows["step"], rows["score"], "-o", ms=2.5, lw=1.6, color=_color(name, k), label=label,
                        alpha=1.0 if len(seeds) == 1 else 0.75)
                if len(seeds) == 1:
                    lo, hi = wilson_interval(rows["score"].to_numpy(), rows["n"].to_numpy())
                    ax.fill_between(rows["step"], lo, hi, color=_color(name, k), alpha=0.12, lw=0)
            step = (emergence or {}).get(target, {}).get(name)
            if step is not None and len(seeds) == 1:
                ax.axvline(step, color=_color(name, k), ls=":", lw=1.2)
        ax.axhline(threshold, color="grey", lw=0.8, ls="--")
        ax.set_title(f"target {target}" + (f" ({len(seeds)} seeds)" if len(seeds) > 1 else ""))
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.03)
    axes[0][0].set_ylabel("joint score (best variant)")
    axes[0][-1].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def plot_trajectory_turn(
    steps: np.ndarray,
    points: np.ndarray,
    concepts: list[str],
    target: str,
    turn_step: float | None = None,
    memorization: tuple[float, float] | None = None,
    fit: tuple[np.ndarray, np.ndarray, float] | None = None,
) -> Figure:
    """Left: the target's naive trajectory in concept space (1 = target value), turn and memorization marked.
    Right: both coordinates vs step with the gated-flow fit (`fit` = (steps, fitted [steps, 2], R²))."""
    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(9.6, 4.2))
    sc = ax.scatter(points[:, 0], points[:, 1], c=steps, cmap="viridis", s=22, zorder=3)
    ax.plot(points[:, 0], points[:, 1], "-", color="grey", lw=0.8, zorder=2)
    if memorization is not None:
        inside = (steps >= memorization[0]) & (steps <= memorization[1])
        ax.scatter(points[inside, 0], points[inside, 1], s=80, facecolors="none", edgecolors="orange", lw=1.5,
                   label="memorization phase", zorder=4)
    if turn_step is not None and turn_step in set(steps.tolist()):
        i = int(np.flatnonzero(steps == turn_step)[0])
        ax.scatter([points[i, 0]], [points[i, 1]], marker="*", s=220, color="red", label=f"turn (step {turn_step:g})",
                   zorder=5)
    ax.plot([1], [1], "s", color="black", ms=6)
    ax.annotate(f"target {target}", (1, 1), textcoords="offset points", xytext=(-60, -14), fontsize=8)
    ax.set_xlim(-0.03, 1.05)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel(f"P({concepts[0]} = target)")
    ax.set_ylabel(f"P({concepts[1]} = target)")
    fig.colorbar(sc, ax=ax, label="training step", fraction=0.046)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower left")
    for k, (concept, color) in enumerate(zip(concepts, ("#1f77b4", "#d62728"))):
        ax_t.plot(steps, points[:, k], "o", ms=3.5, color=color, label=f"{concept} (measured)")
        if fit is not None:
            ax_t.plot(fit[0], fit[1][:, k], "-", color=color, lw=1.4, label=f"{concept} (gated-flow fit)")
    if fit is not None:
        ax_t.set_title(f"gated-flow fit, R² = {fit[2]:.2f}", fontsize=9)
    if turn_step is not None:
        ax_t.axvline(turn_step, color="red", ls=":", lw=1)
    ax_t.set_xlabel("training step")
    ax_t.set_ylabel("P(concept = target)")
    ax_t.set_ylim(-0.03, 1.03)
    ax_t.legend(fontsize=7)
    fig.tight_layout()
    return fig
