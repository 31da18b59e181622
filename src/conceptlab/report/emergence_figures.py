"""Figures of hidden emergence: intervention scores vs step and the held-out trajectory with its turn.

Samples per variant use `report.figures.plot_samples` (one column per variant).

All functions take tidy tables (as written by `studies.emergence`) and return matplotlib Figures in the package
style (`report.style`), interventions and classes by their names (`report.names`); nothing here reads or writes
files.
"""

from __future__ import annotations


import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from conceptlab.analysis.emergence import wilson_interval
from conceptlab.report import names as nm
from conceptlab.report.style import (COLUMN, PAGE, PALETTE, REFERENCE, SEQUENTIAL, arrows, caption, panel_grid,
                                     seed_style, styled)

INTERVENTION_COLORS = {
    "naive": PALETTE[0],
    "over_prompting": PALETTE[1],
    "linear": PALETTE[2],
    "embedding_shift": PALETTE[4],
    "patching": PALETTE[3],
    "cfg": PALETTE[5],
}
POOR_FIT_R2 = 0.5  # a fit with R² below this is drawn as not describing the data


def _color(name: str, k: int):
    return INTERVENTION_COLORS.get(name, PALETTE[(k + 5) % len(PALETTE)])


@styled
def plot_intervention_scores(
    best: pd.DataFrame,
    threshold: float = 0.5,
    emergence: dict[str, dict[str, float | None]] | None = None,
    target_names: dict[str, str] | None = None,
) -> Figure:
    """Held-out score (best variant) vs step, one panel per target (two across at most), one colour per
    intervention; with several runs one line per run (`run` column, else one per `seed`), its line style and marker
    those of its seed (runs sharing a seed, e.g. under another evaluation setting, share a style but are never joined
    into one line); with one run the Wilson 95% interval as a band. The panel title counts the runs and the seeds.

    `best` has columns target, intervention, step, score, n (optionally run, seed, target_name); `emergence` maps
    target → intervention → emergence step (a dotted line in the intervention's colour, single run only).
    Every line, band and marker is in the legend.
    """
    targets = sorted(best["target"].unique())
    names = target_names or nm.class_names_of(best, "target", "target_name")
    rows_n, cols_n = panel_grid(len(targets))
    fig, axes = plt.subplots(rows_n, cols_n, figsize=(PAGE if cols_n > 1 else COLUMN + 0.6, 2.5 * rows_n + 0.9),
                             squeeze=False, sharey=True)
    interventions = list(dict.fromkeys(best["intervention"]))
    key = "run" if "run" in best.columns else "seed" if "seed" in best.columns else None
    lines = list(dict.fromkeys(best[key])) if key else [None]  # one line per run
    seed_of = (best.drop_duplicates(key).set_index(key)["seed"].to_dict() if key == "run" and "seed" in best.columns
               else {line: line for line in lines})
    seeds = sorted(set(seed_of.values()), key=lambda s: (s is None, s))
    runs_per_seed = {s: sum(v == s for v in seed_of.values()) for s in seeds}
    single = len(lines) == 1
    drew_line = drew_band = False
    for ax, target in zip(axes.flat, targets):
        for k, name in enumerate(interventions):
            for line in lines:
                rows = best[(best["target"] == target) & (best["intervention"] == name)]
                if line is not None:
                    rows = rows[rows[key] == line]
                rows = rows.sort_values("step")
                if rows.empty:
                    continue
                style = seed_style(0 if single else seeds.index(seed_of[line]))
                ax.plot(rows["step"], rows["score"], color=_color(name, k), lw=1.3, ms=2.5,
                        ls="-" if single else style["ls"], marker="o" if single else style["marker"],
                        alpha=1.0 if single else 0.85)
                if single:
                    lo, hi = wilson_interval(rows["score"].to_numpy(), rows["n"].to_numpy())
                    ax.fill_between(rows["step"], lo, hi, color=_color(name, k), alpha=0.12, lw=0)
                    drew_band = True
            step = (emergence or {}).get(target, {}).get(name)
            if step is not None and single:
                ax.axvline(step, color=_color(name, k), ls=":", lw=1.0)
                drew_line = True
        ax.axhline(threshold, color=REFERENCE, lw=0.7, ls="--")
        title = f"held-out {nm.class_label(target, names, with_code=True)}"
        count = ("" if single else f", {len(seeds)} seeds" if len(lines) == len(seeds)
                 else f", {len(lines)} runs of {len(seeds)} seed{'s' if len(seeds) > 1 else ''}")
        ax.set_title(title + count)
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.03)
    for ax in axes[:, 0]:
        ax.set_ylabel("score of the best variant")
    for ax in list(axes.flat)[len(targets):]:
        ax.axis("off")
    handles = [Line2D([], [], color=_color(n, k), lw=1.6, label=nm.intervention(n)) for k, n in enumerate(interventions)]
    if not single:
        handles += [Line2D([], [], color="0.35", **seed_style(j),
                           label=f"{'seed' if 'seed' in best.columns else 'run'} {s}"
                           + (f" ({runs_per_seed[s]} runs)" if runs_per_seed[s] > 1 else ""))
                    for j, s in enumerate(seeds)]
    handles.append(Line2D([], [], color=REFERENCE, ls="--", lw=0.7, label=f"threshold {threshold:g}"))
    if drew_band:
        handles.append(Patch(color="0.5", alpha=0.25, label="Wilson 95% interval"))
    if drew_line:
        handles.append(Line2D([], [], color="0.3", ls=":", lw=1.0, label="emergence step (its colour)"))
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3 if cols_n > 1 else 2)
    return fig


@styled
def plot_trajectory_turn(
    steps: np.ndarray,
    points: np.ndarray,
    concepts: list[str],
    target: str,
    turn_step: float | None = None,
    memorization: tuple[float, float] | None = None,
    fit: tuple | None = None,
    target_name: str | None = None,
    value_names: list[str] | None = None,
    hidden: int = 0,
    poor_r2: float = POOR_FIT_R2,
) -> Figure:
    """Left: the target's naive trajectory in concept space (1 = target value), coloured by step with arrows
    forward in training, turn and memorization marked. Right: both coordinates vs step with the gated-flow fit
    (`fit` = (steps, fitted [steps, 2], R²[, the parameters left at the fit's search bounds])), its R² in the title;
    a fit with R² < `poor_r2` is drawn thin and grey-dashed and flagged as not describing the data, and parameters
    at a bound are named (the best the search box allowed, not parameters found). `value_names`: the target's value of each concept (blue,
    small); `hidden`: checkpoints left out for want of a valid image (said under the figure)."""
    label = nm.class_label(target, {target: target_name} if target_name else None, with_code=True)
    values = value_names or [f"{nm.human(c)} = target" for c in concepts]
    fig, (ax, ax_t) = plt.subplots(1, 2, figsize=(PAGE, 2.9), gridspec_kw={"width_ratios": [1, 1.25]})
    ax.plot(points[:, 0], points[:, 1], "-", color="0.6", lw=0.8, zorder=1)
    arrows(ax, points[:, 0], points[:, 1], lw=0.7, zorder=2)
    sc = ax.scatter(points[:, 0], points[:, 1], c=steps, cmap=SEQUENTIAL, s=16, zorder=3, edgecolors="none")
    handles = [Line2D([], [], marker="o", ls="-", color="0.6", markerfacecolor="C0", ms=4,
                      label="naive prompt, coloured by step")]
    if memorization is not None:
        inside = (steps >= memorization[0]) & (steps <= memorization[1])
        ax.scatter(points[inside, 0], points[inside, 1], s=60, facecolors="none", edgecolors="#E69F00", lw=1.2,
                   zorder=4)
        handles.append(Line2D([], [], marker="o", ls="none", markerfacecolor="none", markeredgecolor="#E69F00", ms=7,
                              label=f"memorization, step {memorization[0]:g}" if memorization[0] == memorization[1]
                              else f"memorization, steps {memorization[0]:g}–{memorization[1]:g}"))
    if turn_step is not None and turn_step in set(steps.tolist()):
        i = int(np.flatnonzero(steps == turn_step)[0])
        ax.scatter([points[i, 0]], [points[i, 1]], marker="*", s=120, color="#D55E00", zorder=5)
        handles.append(Line2D([], [], marker="*", ls="none", color="#D55E00", ms=9,
                              label=f"largest turn, step {turn_step:g}"))
    ax.plot([1], [1], "s", color="black", ms=5)
    handles.append(Line2D([], [], marker="s", ls="none", color="black", ms=5, label=f"target: {label}"))
    ax.set_xlim(-0.03, 1.05)
    ax.set_ylim(-0.03, 1.05)
    ax.set_aspect("equal")
    ax.set_xlabel(f"P({values[0]})")
    ax.set_ylabel(f"P({values[1]})")
    bar = fig.colorbar(sc, ax=ax, fraction=0.046, pad=0.03)
    bar.set_label("training step")
    ax.set_title("naive prompting in concept space")
    colours = ("#0072B2", "#D55E00")
    poor = fit is not None and not (fit[2] >= poor_r2)
    for k, (value, colour) in enumerate(zip(values, colours)):
        ax_t.plot(steps, points[:, k], "o", ms=3, color=colour, label=f"P({value}), measured")
        if fit is not None:
            ax_t.plot(fit[0], fit[1][:, k], "--" if poor else "-", color="0.55" if poor else colour,
                      lw=0.9 if poor else 1.3, label=f"P({value}), gated-flow fit")
    if fit is not None:
        verdict = f"R² = {fit[2]:.2f}" + (f" < {poor_r2:g}: the fit does not describe the data" if poor else "")
        bound = list(fit[3]) if len(fit) > 3 else []
        if bound:
            verdict += f"; {', '.join(bound)} at the search bound"
        ax_t.set_title(f"gated-flow fit, {verdict}", color="#B00000" if poor or bound else "black")
    else:
        ax_t.set_title("coordinates over training (no fit)")
    if turn_step is not None:
        ax_t.axvline(turn_step, color="#D55E00", ls=":", lw=1, label=f"largest turn, step {turn_step:g}")
    ax_t.set_xlabel("training step")
    ax_t.set_ylabel("probability of the target value")
    ax_t.set_ylim(-0.03, 1.03)
    fig.tight_layout()
    below = ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=6)
    ax_t.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=6)
    if hidden:
        caption(fig, f"{hidden} checkpoint(s) without a single valid image are not drawn (no concept-space reading).",
                below=below)
    return fig
