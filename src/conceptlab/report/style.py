"""The one figure style of the package: sizes that read at a paper's column width, fonts, a colour-blind-safe
palette, one line style and marker per seed, and the `styled` decorator every plotting function wears.

Sizes are in inches at the widths of a two-column paper (`COLUMN` one column, `PAGE` both); fonts are set so the
text is 7–8 pt once a figure is printed at that width. Nothing here sets the matplotlib backend.
"""

from __future__ import annotations

import math

import functools
from typing import Any, Callable, TypeVar

COLUMN = 3.4  # inches: one column of a two-column paper (~86 mm)
PAGE = 7.0  # inches: the full text width (~178 mm)

# Okabe & Ito's colour-blind-safe palette, black first
PALETTE = ("#000000", "#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442")
SEQUENTIAL = "viridis"  # training step and other ordered quantities
REFERENCE = "0.45"  # thresholds, chance levels and other reference lines

SEED_STYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 2)))
SEED_MARKERS = ("o", "s", "^", "D", "v", "P")

RC: dict[str, Any] = {
    "font.size": 7.5,
    "axes.titlesize": 8,
    "axes.labelsize": 7.5,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "legend.fontsize": 6.5,
    "legend.title_fontsize": 6.5,
    "legend.frameon": False,
    "figure.titlesize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.0,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "axes.prop_cycle": None,  # set below (needs cycler)
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.03,
    "pdf.fonttype": 42,  # TrueType in PDFs: editable text, accepted by publishers
    "svg.fonttype": "none",
}


def rc() -> dict[str, Any]:
    """The style's rcParams (with the palette as the colour cycle)."""
    from cycler import cycler

    return {**RC, "axes.prop_cycle": cycler(color=list(PALETTE))}


def color(k: int) -> str:
    """The k-th colour of the palette (wrapping)."""
    return PALETTE[k % len(PALETTE)]


NAMED_COLORS = {"red": ("#8E1B10", "#E2553F"), "blue": ("#08427A", "#4A98D4"), "green": ("#00593C", "#3DB37D"),
                "yellow": ("#8A6D00", "#E6B800"), "orange": ("#9C4A00", "#F08A24"), "purple": ("#4B2173", "#9A6BC8")}


def class_colors(codes: list[str], names: dict[str, str] | None = None) -> dict[str, str]:
    """A colour per class: where a class's name starts with a colour word (red large, blue small) a dark or light
    shade of that colour (first and second class of that colour), else the palette in code order (without black)."""
    out: dict[str, str] = {}
    used: dict[str, int] = {}
    for k, code in enumerate(sorted(codes)):
        word = ((names or {}).get(code) or "").split(" ")[0]
        if word in NAMED_COLORS and used.get(word, 0) < len(NAMED_COLORS[word]):
            out[code] = NAMED_COLORS[word][used.get(word, 0)]
            used[word] = used.get(word, 0) + 1
    if len(out) < len(codes):  # any class without a colour name: the palette for all (one rule per figure)
        return {code: color(1 + k) for k, code in enumerate(sorted(codes))}
    return out


def seed_style(k: int) -> dict[str, Any]:
    """Line style and marker of the k-th seed, so seeds stay apart in one colour and in greyscale."""
    return {"ls": SEED_STYLES[k % len(SEED_STYLES)], "marker": SEED_MARKERS[k % len(SEED_MARKERS)]}


def panel_grid(n: int, max_columns: int = 2) -> tuple[int, int]:
    """(rows, columns) for n panels at most `max_columns` wide (never a 1×n strip wider than the page)."""
    columns = max(1, min(n, max_columns))
    return -(-n // columns), columns


F = TypeVar("F", bound=Callable[..., Any])


def styled(fn: F) -> F:
    """Draw the figure `fn` returns under the package style (an rc context: global matplotlib state is left as it
    was, and the style is recorded on the figure for the saver)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import matplotlib.pyplot as plt

        with plt.rc_context(rc()):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def wide_positive(values) -> bool:
    """Whether a log axis suits `values`: every one positive and together spanning at least a factor of 10. Within
    a decade a log axis shows nothing a linear one does not, and matplotlib labels its minor ticks (5.4×10⁻¹, …),
    each label a mathtext parse."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return bool(v.size) and bool((v > 0).all()) and float(v.max()) >= 10 * float(v.min())


def caption(fig, text: str, below=None) -> None:
    """A caption (wrapped to the figure's width) under the axes, or under `below` (a legend): what a legend cannot
    hold — a rule, what is hidden and why. Saved with the figure (the saver crops to everything drawn)."""
    import textwrap

    y = 0.0
    if below is not None and hasattr(fig.canvas, "get_renderer"):
        fig.draw_without_rendering()  # lay the figure out, so the legend's box is where it will be drawn
        box = below.get_window_extent(fig.canvas.get_renderer()).transformed(fig.transFigure.inverted())
        y = box.y0 - 0.01
    wrapped = "\n".join(textwrap.wrap(text, width=max(40, int(fig.get_figwidth() * 19))))
    fig.text(0.01, y, wrapped, ha="left", va="top", fontsize=6.5, color="0.2")


def arrows(ax, xs, ys, colour="0.35", every: int = 1, lw: float = 0.8, zorder: int = 4) -> None:
    """Arrow heads at the middle of a trajectory's segments (every `every`-th), pointing forward in time; segments
    shorter than 0.03 get none."""
    for i in range(0, len(xs) - 1, every):
        x0, y0, x1, y1 = xs[i], ys[i], xs[i + 1], ys[i + 1]
        if math.hypot(x1 - x0, y1 - y0) < 0.03:
            continue
        mx, my = (x0 + x1) / 2, (y0 + y1) / 2
        ax.annotate("", xy=(mx + (x1 - x0) * 0.05, my + (y1 - y0) * 0.05), xytext=(mx, my),
                    arrowprops=dict(arrowstyle="-|>", color=colour, lw=lw, mutation_scale=7), zorder=zorder)
