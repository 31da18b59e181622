"""The one figure saver: write matplotlib figures as PNG and as a vector file (PDF) beside it, and close them
(every figure of the package goes through here, so resolution and formats are set in one place).

The vector formats written beside each PNG are PDF unless `CONCEPTLAB_VECTOR_FIGURES` says otherwise: a
comma-separated list among `pdf` and `svg`, or empty for none (PNG only). A PDF with its fonts embedded costs more than
the PNG beside it (a micro run's summary: 2.1 s of PDFs against 1.4 s of PNGs, docs/benchmarks.md); the test suite
sets the variable empty and checks the vector files where they are the subject.

`CONCEPTLAB_FIGURES=none` has runs draw no figures at all (the studies skip drawing them, `save_figures` writes
none): for sweeps of many small runs whose figures nobody opens, where drawing them is most of a run's summary (a
micro run's summary: 0.96 s with them, 0.15 s without, docs/benchmarks.md). The tests set it, and the tests of
figures unset it (`figures` fixture). Figures a run drew before stay in its folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

DPI = 200
VECTOR_ENV = "CONCEPTLAB_VECTOR_FIGURES"
VECTOR = (".pdf",)  # the default vector formats written beside each PNG
VECTOR_FORMATS = (".pdf", ".svg")


def vector_formats() -> tuple[str, ...]:
    """The vector formats to write beside each PNG: those `CONCEPTLAB_VECTOR_FIGURES` lists (e.g. "pdf,svg"; empty:
    none), else PDF. An unknown format raises ValueError naming the variable."""
    value = os.environ.get(VECTOR_ENV)
    if value is None:
        return VECTOR
    formats = tuple(dict.fromkeys("." + f.strip().lower().lstrip(".") for f in value.split(",") if f.strip()))
    unknown = [f for f in formats if f not in VECTOR_FORMATS]
    if unknown:
        raise ValueError(f"{VECTOR_ENV}={value!r}: unknown format {unknown[0][1:]!r} (choose among "
                         f"{', '.join(f[1:] for f in VECTOR_FORMATS)}, comma-separated, or leave it empty for PNG only)")
    return formats


FIGURES_ENV = "CONCEPTLAB_FIGURES"


def figures_wanted() -> bool:
    """False when `CONCEPTLAB_FIGURES` is `none` (runs draw no figures), True when it is unset or `all`; any other
    value raises ValueError naming the variable."""
    value = os.environ.get(FIGURES_ENV)
    if value is None or value.strip().lower() in ("", "all"):
        return True
    if value.strip().lower() == "none":
        return False
    raise ValueError(f"{FIGURES_ENV}={value!r}: choose all (the default: every run draws its figures) or none")


def save_figure(fig, path: Path, dpi: int = DPI, vector: tuple[str, ...] | None = None,
                remove_stale: bool = False) -> Path:
    """Write `fig` to `path` (a PNG; folders created) and to the same name with each `vector` suffix (default:
    `vector_formats()`), under the package style's save settings; closes the figure and returns the PNG's path.
    With `remove_stale` (folders the package owns, e.g. a run's `figures/`), a vector file of the same name in a
    format not written is removed: it would show an older figure. A path the user names keeps what lies beside it."""
    import matplotlib.pyplot as plt

    from conceptlab.report.style import rc

    path = Path(path)
    try:
        suffixes = vector_formats() if vector is None else vector
        path.parent.mkdir(parents=True, exist_ok=True)
        with plt.rc_context({k: v for k, v in rc().items() if k.startswith(("savefig.", "pdf.", "svg."))}):
            fig.savefig(path, dpi=dpi)
            for suffix in suffixes:
                if suffix != path.suffix.lower():
                    fig.savefig(path.with_suffix(suffix))
        if remove_stale:
            for stale in set(VECTOR_FORMATS) - set(suffixes) - {path.suffix.lower()}:
                path.with_suffix(stale).unlink(missing_ok=True)
    finally:
        plt.close(fig)
    return path


def save_figures(figures: Mapping[str, object], folder: Path, dpi: int = DPI) -> list[Path]:
    """Write each figure (file name → figure) into `folder`, a folder the package owns (vector files of formats no
    longer written are removed); returns the PNG paths in the mapping's order. Every figure is closed, also when
    one cannot be written (the error is raised); an unknown vector format is refused before any is written. Under
    `CONCEPTLAB_FIGURES=none` none is written (and none returned)."""
    import matplotlib.pyplot as plt

    try:
        if not figures_wanted():
            return []
        vector = vector_formats()
        return [save_figure(fig, Path(folder) / name, dpi, vector, remove_stale=True) for name, fig in figures.items()]
    finally:
        for fig in figures.values():
            plt.close(fig)  # (closing a closed figure does nothing)
