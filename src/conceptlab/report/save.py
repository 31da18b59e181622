"""The one figure saver: write matplotlib figures as PNG files and close them (every figure of the package goes
through here, so resolution and format are set in one place)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

DPI = 120


def save_figure(fig, path: Path, dpi: int = DPI) -> Path:
    """Write `fig` to `path` (folders created) and close it; returns the path."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
    return path


def save_figures(figures: Mapping[str, object], folder: Path, dpi: int = DPI) -> list[Path]:
    """Write each figure (file name → figure) into `folder`; returns the paths in the mapping's order."""
    return [save_figure(fig, Path(folder) / name, dpi) for name, fig in figures.items()]
