"""The one figure saver: write matplotlib figures as PNG and as a vector file (PDF) beside it, and close them
(every figure of the package goes through here, so resolution and formats are set in one place)."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

DPI = 200
VECTOR = (".pdf",)  # vector formats written beside each PNG (".svg" works too)


def save_figure(fig, path: Path, dpi: int = DPI, vector: tuple[str, ...] = VECTOR) -> Path:
    """Write `fig` to `path` (a PNG; folders created) and to the same name with each `vector` suffix, under the
    package style's save settings; closes the figure and returns the PNG's path."""
    import matplotlib.pyplot as plt

    from conceptlab.report.style import rc

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with plt.rc_context({k: v for k, v in rc().items() if k.startswith(("savefig.", "pdf.", "svg."))}):
            fig.savefig(path, dpi=dpi)
            for suffix in vector:
                if suffix != path.suffix:
                    fig.savefig(path.with_suffix(suffix))
    finally:
        plt.close(fig)
    return path


def save_figures(figures: Mapping[str, object], folder: Path, dpi: int = DPI) -> list[Path]:
    """Write each figure (file name → figure) into `folder`; returns the PNG paths in the mapping's order."""
    return [save_figure(fig, Path(folder) / name, dpi) for name, fig in figures.items()]
