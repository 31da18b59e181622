"""Data efficiency over runs: the dataset size needed to reach a target accuracy, per N and data family, and its scaling.

Input: a table with one row per run, columns `N` (canvas size), `dataset_size`,
`accuracy` and `family` (e.g. "bumps" for bumps only, "bumps+stripes"); several
runs at the same (family, N, dataset_size) are averaged first.

`size_to_reach` gives, per (family, N), the smallest dataset size at which the
mean accuracy reaches `target` (0.6, the paper's choice): the first size whose
accuracy is ≥ target, interpolated linearly in log size from the point before it
(`threshold_crossing`). It is NaN when the target is never reached and equals the
smallest size when that already reaches it (flagged `censored`).

With an optional `train_accuracy` column (each run's accuracy on the labels it
was trained on), a (family, N) where fewer than half the runs reach `target` on
their own training labels is flagged `training_limited`: there the model did not
fit its data, so a missing or late crossing measures the training budget, not
data efficiency.

`scaling_fit` fits log size* = log c + b log N per family by least squares
(censored, NaN and training-limited points excluded): the paper reports b ≈ 2
for bumps only and b ≈ 1 with stripes added.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from conceptlab.analysis.power_law import fit_power_law

REQUIRED = ("family", "N", "dataset_size", "accuracy")


def threshold_crossing(sizes: np.ndarray, values: np.ndarray, target: float) -> float:
    """Smallest size where `values` first reach `target`, linear in log size between the bracketing points.

    `sizes` must be > 0 and increasing; NaN if the target is never reached.
    """
    sizes, values = np.asarray(sizes, dtype=float), np.asarray(values, dtype=float)
    if sizes.shape != values.shape or sizes.ndim != 1:
        raise ValueError(f"sizes and values must be 1D of equal length, got {sizes.shape} and {values.shape}")
    if len(sizes) and (sizes[0] <= 0 or np.any(np.diff(sizes) <= 0)):
        raise ValueError("sizes must be positive and strictly increasing")
    hit = np.flatnonzero(values >= target)
    if len(hit) == 0:
        return float("nan")
    i = int(hit[0])
    if i == 0:
        return float(sizes[0])
    x0, x1 = math.log(sizes[i - 1]), math.log(sizes[i])
    y0, y1 = values[i - 1], values[i]
    return float(math.exp(x0 + (target - y0) / (y1 - y0) * (x1 - x0)))


def _check_table(runs: pd.DataFrame) -> None:
    missing = [c for c in REQUIRED if c not in runs.columns]
    if missing:
        raise ValueError(f"runs table lacks columns {missing}; needs {list(REQUIRED)}")
    if len(runs) == 0:
        raise ValueError("runs table is empty")
    if (runs["dataset_size"] <= 0).any():
        raise ValueError("dataset_size must be > 0 in every run")


def size_to_reach(runs: pd.DataFrame, target: float = 0.6) -> pd.DataFrame:
    """Per (family, N): columns family, N, size_to_reach, censored (reached already at the smallest size),
    fit_fraction (share of runs reaching `target` on their own training labels; NaN without a `train_accuracy`
    column) and training_limited (fit_fraction < 0.5)."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target accuracy must be in (0, 1], got {target}")
    _check_table(runs)
    mean = runs.groupby(["family", "N", "dataset_size"], as_index=False)["accuracy"].mean()
    if "train_accuracy" in runs.columns:
        fits = (runs["train_accuracy"] >= target).groupby([runs["family"], runs["N"]]).mean()
    else:
        fits = pd.Series(dtype=float)
    rows = []
    for (family, n), g in mean.groupby(["family", "N"], sort=True):
        g = g.sort_values("dataset_size")
        sizes, acc = g["dataset_size"].to_numpy(float), g["accuracy"].to_numpy(float)
        size = threshold_crossing(sizes, acc, target)
        fit = float(fits.get((family, n), float("nan")))
        rows.append({"family": family, "N": n, "size_to_reach": size,
                     "censored": bool(acc[0] >= target), "fit_fraction": fit,
                     "training_limited": bool(fit < 0.5)})  # NaN < 0.5 is False: unflagged without the column
    return pd.DataFrame(rows)


def scaling_fit(sizes: pd.DataFrame) -> pd.DataFrame:
    """Per family, fit size_to_reach = c·N^b in log-log: columns family, exponent (b), prefactor (c), r2, points."""
    needed = ("family", "N", "size_to_reach", "censored")
    if any(c not in sizes.columns for c in needed):
        raise ValueError(f"expected the output of size_to_reach with columns {list(needed)}")
    rows = []
    for family, g in sizes.groupby("family", sort=True):
        g = g[~g["censored"] & g["size_to_reach"].notna()]
        if "training_limited" in g.columns:
            g = g[~g["training_limited"].astype(bool)]
        if g["N"].nunique() < 2:
            rows.append({"family": family, "exponent": float("nan"), "prefactor": float("nan"),
                         "r2": float("nan"), "points": len(g)})
            continue
        fit = fit_power_law(g["N"].to_numpy(float), g["size_to_reach"].to_numpy(float))
        rows.append({"family": family, "exponent": fit.exponent, "prefactor": fit.prefactor, "r2": fit.r2,
                     "points": fit.points})
    return pd.DataFrame(rows)


FAMILIES = {"bump": "bumps", "bump+stripes": "bumps+stripes"}


def family_name(image: str, fraction_scope: str = "all") -> str:
    """The data family of a run: bumps, bumps+stripes, or the image kind; "(λ on 2D)" when λ thinned only the 2D
    labels (`data.fraction_scope=2d`, every stripe kept)."""
    name = FAMILIES.get(image, image)
    return f"{name} (λ on 2D)" if fraction_scope == "2d" and image != "bump" else name


def data_efficiency_runs(runs: pd.DataFrame, composition: pd.DataFrame, regions: tuple[str, ...] = ("train", "unseen")) -> pd.DataFrame:
    """The input of `size_to_reach` from a bump-world sweep: one row per run with family (from `data.image`: bumps,
    bumps+stripes, or the image kind; see `family_name`), N (`data.image_size`), dataset_size (training images), accuracy (final
    joint accuracy over the 2D labels of `regions` — trained on and dropped by subsampling — weighted by region size)
    and train_accuracy (the same on the "train" region alone; NaN if the run has none).
    """
    needed = {"run_id", "data.image", "data.image_size", "training_images"}
    missing = needed - set(runs.columns)
    if missing:
        raise ValueError(f"runs table lacks {sorted(missing)}: not a finished bump-world sweep")
    if composition.empty:
        raise ValueError("no generation-accuracy rows (composition table empty)")
    last = composition.groupby("run_id")["step"].transform("max")
    final = composition[(composition["step"] == last) & composition["region"].isin(regions)].copy()
    weight = final["region_size"] if "region_size" in final.columns else final["n"]
    final["weight"] = weight.fillna(final["n"]).astype(float)
    final["weighted"] = final["joint"] * final["weight"]
    per_run = final.groupby("run_id")[["weighted", "weight"]].sum()
    accuracy = (per_run["weighted"] / per_run["weight"]).rename("accuracy").reset_index()
    trained = final[final["region"] == "train"].groupby("run_id")[["weighted", "weight"]].sum()
    accuracy = accuracy.merge((trained["weighted"] / trained["weight"]).rename("train_accuracy").reset_index(),
                              on="run_id", how="left")
    columns = ["run_id", "data.image", "data.image_size", "training_images"]
    scope = runs["data.fraction_scope"] if "data.fraction_scope" in runs.columns else pd.Series("all", index=runs.index)
    table = runs[columns].assign(scope=scope.fillna("all")).merge(accuracy, on="run_id")
    return pd.DataFrame({
        "run_id": table["run_id"],
        "family": [family_name(image, scope) for image, scope in zip(table["data.image"], table["scope"])],
        "N": table["data.image_size"].astype(int),
        "dataset_size": table["training_images"].astype(float),
        "accuracy": table["accuracy"].astype(float),
        "train_accuracy": table["train_accuracy"].astype(float),
    })
