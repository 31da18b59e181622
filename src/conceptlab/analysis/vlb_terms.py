"""The variational bound's terms over training: when the reconstruction term stops dominating a VDM's loss.

Pure functions on a training log (a DataFrame with `step` and the per-term bits per dimension the VDM logs:
`diffusion_bpd`, `prior_bpd`, `recon_bpd`, and the learned schedule's ends `gamma_0`, `gamma_1`).

Why it matters (docs/setups.md): with the authors' reconstruction term −log N(x; z₀/α₀, σ_d²), σ_d = 1e-3, the
term is e^{γ(0)}/(2σ_d² ln 2) − log₂(1/(σ_d√(2π))) ≈ e^{γ(0)}·7.2e5 − 8.6 bits per dimension (σ₀²/α₀² = e^{γ(0)}) —
thousands at the initial γ(0) = −5, below the diffusion term only once γ(0) ≲ −11 — and its gradient, which
reaches only the two schedule parameters, fills the global gradient norm that training clips to 0.01, so the
network's own updates shrink below Adam's ε until γ(0) has fallen far enough. `reconstruction_phase` reads off the
log when that phase ended: the first logged step from which the reconstruction term stays at or below the
diffusion term (the network's) for the rest of the log.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

TERMS = ("diffusion_bpd", "prior_bpd", "recon_bpd")


def has_vlb_terms(log: pd.DataFrame | None) -> bool:
    """True when the log holds the VDM's per-term losses (other processes log only their loss)."""
    return log is not None and not log.empty and {"step", "diffusion_bpd", "recon_bpd"} <= set(log.columns)


def reconstruction_phase(log: pd.DataFrame) -> dict[str, Any]:
    """When the reconstruction term dominated the loss. Returns

    - `end`: the first logged step from which recon_bpd ≤ diffusion_bpd at every later logged step; the first
      logged step when it never dominated; None when it still dominates at the last logged step;
    - `dominated_from_start`: whether it dominated at the first logged step;
    - `recon_bpd_first` / `recon_bpd_last`, `diffusion_bpd_last`: the terms at the first and last logged steps;
    - `gamma_0_first` / `gamma_0_at_end` / `gamma_0_last` and `gamma_1_last`: the schedule's ends (None when not
      logged or not a finite number at that step — never NaN, which JSON has no word for; a fixed schedule logs
      them too, so they are constant there).
    """
    if not has_vlb_terms(log):
        raise ValueError("the log has no VDM loss terms (columns diffusion_bpd, recon_bpd)")
    rows = log.dropna(subset=["recon_bpd", "diffusion_bpd"]).sort_values("step").drop_duplicates("step", keep="last")
    if rows.empty:
        raise ValueError("the log has no step with both loss terms")
    steps = rows["step"].to_numpy()
    above = (rows["recon_bpd"] > rows["diffusion_bpd"]).to_numpy()
    if not above.any():
        end_index: int | None = 0
    elif above[-1]:
        end_index = None
    else:
        end_index = max(i for i, a in enumerate(above) if a) + 1
    end = None if end_index is None else int(steps[end_index])

    def at(column: str, index: int) -> float | None:
        if column not in rows.columns:
            return None
        value = float(rows[column].iloc[index])
        return value if math.isfinite(value) else None

    return {
        "end": end,
        "dominated_from_start": bool(above[0]),
        "recon_bpd_first": at("recon_bpd", 0),
        "recon_bpd_last": at("recon_bpd", -1),
        "diffusion_bpd_last": at("diffusion_bpd", -1),
        "gamma_0_first": at("gamma_0", 0),
        "gamma_0_at_end": None if end_index is None else at("gamma_0", end_index),  # None, never NaN
        "gamma_0_last": at("gamma_0", -1),
        "gamma_1_last": at("gamma_1", -1),
    }

