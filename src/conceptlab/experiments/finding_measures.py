"""Values of findings that no single run's summary holds: functions the findings suite names by import path.

- `percolation_scaling(seed, ...)` (an `analytic` run set): the percolation model's critical dataset size per N and
  its power-law exponent over N (`analysis.percolation`; no training).
- `images_to_reach(runs, family, n, target)` (a `compute` value): per seed, the training images a bump-world family
  needs to reach `target` generation accuracy at canvas size N, read across a data-efficiency sweep's λ axis
  (`analysis.data_efficiency.size_to_reach`); NaN (never) when it does not reach it.

A compute function takes the run set's finished runs (`experiments.findings.RunRecord`: seed, flattened config,
summary, folder) and returns {seed: value}.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from conceptlab.analysis.data_efficiency import data_efficiency_runs, size_to_reach
from conceptlab.analysis.percolation import critical_dataset_size, percolation_curve
from conceptlab.analysis.power_law import fit_power_law
from conceptlab.store.files import read_parquet
from conceptlab.store.run_folder import RunFolder


def percolation_scaling(seed: int, sizes: Sequence[int] = (32, 64), threshold: float = 0.005, trials: int = 10,
                        fractions: Sequence[float] = (0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.1, 0.15, 0.2,
                                                      0.3, 0.5, 1.0),
                        target: float = 0.5, spacing: float = 1.0, sigma: float = 1.0) -> dict[str, Any]:
    """Critical dataset size (mass ratio ≥ `target`) per N and the exponent b of size* ∝ N^b over the sizes."""
    curve = percolation_curve(list(sizes), list(fractions), (spacing, spacing), (sigma, sigma), threshold, trials,
                              False, seed=seed)
    critical = critical_dataset_size(curve, target)
    ok = critical[np.isfinite(critical["critical_dataset_size"]) & ~critical["censored"]]
    exponent = (fit_power_law(ok["N"].astype(float), ok["critical_dataset_size"].astype(float)).exponent
                if ok["N"].nunique() >= 2 else None)
    nodes = curve.groupby("N")["nodes"].first()
    return {
        "critical_size": {str(int(r.N)): (None if not math.isfinite(r.critical_dataset_size)
                                          else float(r.critical_dataset_size)) for r in critical.itertuples()},
        "critical_fraction": {str(int(r.N)): (None if not math.isfinite(r.critical_dataset_size)
                                              else float(r.critical_dataset_size / nodes[r.N]))
                              for r in critical.itertuples()},
        "exponent": None if exponent is None else float(exponent),
        "threshold": threshold, "trials": trials, "sizes": list(sizes),
    }


def images_to_reach(runs: list, family: str, n: int, target: float = 0.6) -> dict[int, float | None]:
    """Per seed: training images the family needs to reach `target` final joint accuracy (trained + unseen 2D
    labels) at canvas size `n` (None when never reached, so a criterion reads it as censored)."""
    by_seed: dict[int, list] = {}
    for r in runs:
        by_seed.setdefault(r.seed, []).append(r)
    out: dict[int, float | None] = {}
    for seed, mine in by_seed.items():
        rows, comp = [], []
        for r in mine:
            if r.folder is None or not RunFolder(r.folder).table("composition").is_file():
                continue
            rows.append({"run_id": r.run_id, "data.image": r.config.get("data.image"),
                         "data.image_size": r.config.get("data.image_size"),
                         "data.fraction_scope": r.config.get("data.fraction_scope") or "all",
                         "training_images": r.summary.get("training_images")})
            comp.append(read_parquet(RunFolder(r.folder).table("composition")).assign(run_id=r.run_id))
        if not rows:
            out[seed] = None
            continue
        table = data_efficiency_runs(pd.DataFrame(rows), pd.concat(comp, ignore_index=True))
        at_n = table[table["N"] == int(n)]
        if at_n.empty:
            out[seed] = None
            continue
        sizes = size_to_reach(at_n, target)
        hit = sizes[sizes["family"] == family]
        value = None if hit.empty else hit["size_to_reach"].iloc[0]
        out[seed] = None if value is None or not math.isfinite(float(value)) else float(value)
    return out
