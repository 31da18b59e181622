"""Figure of latent abstractions: the commitment measures along generation time τ, one panel per measure.

Takes the tidy tables of `studies.abstractions` (`abstractions.parquet` and `commitment.parquet`, one
checkpoint) and returns a matplotlib Figure; nothing here reads or writes files.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from conceptlab.report import names as nm
from conceptlab.report.style import PAGE, color, panel_grid, styled

PANELS = {
    "mutual_information": ("mutual information I(V; Y₀..τ) [nats]", "H(V)"),
    "mutual_information_bound": ("MI lower bound H(V) − E[−log q(v | x_τ)] [nats]", "H(V)"),
    "forking_entropy": ("forking entropy / ln K", "prior"),
    "linear_probe": ("linear probe held-out accuracy", "chance"),
}


CONTROL_STYLE = {"untrained": dict(ls=(0, (5, 2, 1, 2)), marker="s", mfc="none"),
                 "random_init": dict(ls=(0, (3, 1)), marker="^", mfc="none"),
                 "pixels": dict(ls=(0, (1, 1.5)), marker="x")}


@styled
def plot_abstractions(curves: pd.DataFrame, commitment: pd.DataFrame, title: str = "",
                      controls: pd.DataFrame | None = None) -> Figure:
    """One panel per measure (columns of `PANELS` present in `curves`), one line per attribute vs τ (0 = noise,
    1 = data), its reference level (H(V), prior entropy, chance) dashed in the same colour, its commitment τ marked by
    a dotted vertical line; the commitment order in each panel's title; a top axis in log-SNR where `curves` has it.

    `curves`: measure, attribute, tau, value (optional stderr, reference, logsnr); `commitment`: measure, attribute,
    commitment_tau (other measures, e.g. `mutual_information_final`, are ignored). `controls`: the same columns and
    a `source` (untrained, pixels, ...), drawn thin in each attribute's colour, one line style per source.
    Panels two across (a page-wide 2×2 for four measures); attributes and measures by name; every line style and
    marker is in the legend under the panels.
    """
    measures = [m for m in PANELS if m in set(curves["measure"])]
    if not measures:
        raise ValueError(f"no known measure in the curves; expected some of {list(PANELS)}")
    attributes = list(dict.fromkeys(curves["attribute"]))
    colors = {a: color(1 + i) for i, a in enumerate(attributes)}
    rows_n, cols_n = panel_grid(len(measures))
    fig, axes = plt.subplots(rows_n, cols_n, figsize=(PAGE, 2.6 * rows_n + 0.8), squeeze=False)
    for ax, measure in zip(axes.flat, measures):
        label = PANELS[measure][0]
        part = curves[curves["measure"] == measure]
        times = commitment[commitment["measure"] == measure].set_index("attribute")["commitment_tau"]
        for a in attributes:
            g = part[part["attribute"] == a].sort_values("tau")
            if g.empty:
                continue
            ax.plot(g["tau"], g["value"], color=colors[a], label=nm.human(a), marker="o" if len(g) <= 30 else None,
                    ms=3)
            if "stderr" in g and g["stderr"].notna().any():
                err = g["stderr"].fillna(0.0)
                ax.fill_between(g["tau"], g["value"] - err, g["value"] + err, color=colors[a], alpha=0.15, lw=0)
            if "reference" in g and g["reference"].notna().any():
                ax.axhline(float(g["reference"].iloc[0]), color=colors[a], ls="--", lw=0.9, alpha=0.7)
            if controls is not None and len(controls):
                for source, c in controls[(controls["measure"] == measure) & (controls["attribute"] == a)].groupby(
                        "source"):
                    c = c.sort_values("tau")
                    style = CONTROL_STYLE.get(source, dict(ls="--", marker="."))
                    ax.plot(c["tau"], c["value"], color=colors[a], lw=0.9, alpha=0.6, ms=3, **style)
            tau = float(times.get(a, math.nan))
            if not math.isnan(tau):
                ax.axvline(tau, color=colors[a], ls=":", lw=1.2)
                ax.plot([tau], [float(np.interp(tau, g["tau"], g["value"]))], marker="D", color=colors[a], ms=6)
        order = [nm.human(a) for a in times.sort_values().index if not math.isnan(float(times[a]))]
        ax.set_title(f"{nm.measure(measure)}; commits: {' → '.join(order) if order else 'none'}")
        ax.set_xlabel("generation time τ (0 = noise, 1 = data)")
        ax.set_ylabel(label)
        ax.set_xlim(0, 1)
        ax.grid(alpha=0.3)
        if "logsnr" in part and part["logsnr"].notna().all() and part["tau"].nunique() >= 2:
            g = part.drop_duplicates("tau").sort_values("tau")
            t, s = g["tau"].to_numpy(float), g["logsnr"].to_numpy(float)
            if np.all(np.diff(s) > 0):
                top = ax.secondary_xaxis("top", functions=(lambda x, t=t, s=s: np.interp(x, t, s),
                                                           lambda y, t=t, s=s: np.interp(y, s, t)))
                top.set_xlabel("log-SNR = −2 log σ", fontsize=6.5)
                top.tick_params(labelsize=6)
    for ax in list(axes.flat)[len(measures):]:
        ax.axis("off")
    handles = [Line2D([], [], color=colors[a], marker="o", ms=3, label=nm.human(a)) for a in attributes]
    handles += [Line2D([], [], color="0.4", ls="--", lw=0.9,
                       label="reference: " + ", ".join(dict.fromkeys(PANELS[m][1] for m in measures))),
                Line2D([], [], color="0.4", ls=":", marker="D", ms=4, lw=1.2, label="commitment τ (its colour)")]
    if "stderr" in curves and curves["stderr"].notna().any():
        from matplotlib.patches import Patch

        handles.append(Patch(color="0.5", alpha=0.3, label="± 1 standard error"))
    if controls is not None and len(controls):
        handles += [Line2D([], [], color="black", lw=1.5, label="source: trained")] + [
            Line2D([], [], color="gray", lw=0.9, ms=3, label=f"source: {nm.human(s)}",
                   **CONTROL_STYLE.get(s, dict(ls="--", marker="."))) for s in dict.fromkeys(controls["source"])]
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4)
    return fig
