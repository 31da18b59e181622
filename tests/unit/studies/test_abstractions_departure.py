"""The abstractions study's control summary: a trained curve departs from a control only beyond the margin *and*
beyond the two curves' noise; probe accuracies carry a binomial standard error."""

import math

import pandas as pd
import pytest
import torch

from conceptlab.studies.abstractions import control_summary

TAUS = [i / 10 for i in range(11)]


def _curve(source, measure, values, stderr):
    return pd.DataFrame({"source": source, "measure": measure, "attribute": "shape", "tau": TAUS,
                         "value": values, "stderr": stderr})


def test_a_control_departs_only_beyond_margin_and_noise():
    rise = [1 / (1 + math.exp(-12 * (t - 0.5))) for t in TAUS]
    late = [1 / (1 + math.exp(-12 * (t - 0.7))) for t in TAUS]
    curves = pd.concat([
        _curve("trained", "linear_probe", rise, 0.02), _curve("random_init", "linear_probe", late, 0.02),
        _curve("trained", "mutual_information", rise, 0.3), _curve("random_init", "mutual_information", late, 0.3),
    ], ignore_index=True)
    commit = pd.DataFrame({"source": ["trained", "trained", "random_init", "random_init"],
                           "measure": ["linear_probe", "mutual_information"] * 2, "attribute": "shape",
                           "commitment_tau": [0.5, 0.5, 0.7, 0.7]})
    out = control_summary(curves, commit, margin=0.1)
    block = out["random_init"]
    assert block["departs"]["linear_probe"]["shape"] and block["departs_margin"]["linear_probe"]["shape"]
    # the same curves measured with noise of 0.3: beyond the margin only
    assert block["departs_margin"]["mutual_information"]["shape"]
    assert not block["departs"]["mutual_information"]["shape"]
    assert out["trained_departs_from_every_control"] == {"linear_probe": {"shape": True},
                                                         "mutual_information": {"shape": False}}
    assert block["departure_z"]["linear_probe"]["shape"] > 5


def test_probe_stderr_is_clustered_by_held_out_combination():
    from conceptlab.analysis.linear_probes import accuracy_stderr

    # 10 combinations × 8 copies; every copy of a combination right or wrong together: 10 trials, not 80
    groups = torch.arange(10).repeat_interleave(8)
    together = torch.tensor([True] * 40 + [False] * 40)
    independent = torch.tensor([True, False] * 40)  # every combination half right
    p = 0.5
    assert accuracy_stderr(together, groups) == pytest.approx(math.sqrt(10 / 9 * 10 * (8 * 0.5) ** 2) / 80)
    assert accuracy_stderr(together, groups) == pytest.approx(math.sqrt(p * (1 - p) / 9), rel=1e-9)  # ≈ √(pq/(G−1))
    assert accuracy_stderr(independent, groups) == pytest.approx(math.sqrt((41 / 82) * (41 / 82) / 80))  # the floor
    assert accuracy_stderr(together, None) == pytest.approx(math.sqrt(80 / 79 * 80 * 0.25) / 80)
    assert accuracy_stderr(torch.ones(80, dtype=torch.bool), groups) > 0  # 1.0 still carries noise (plus-two)
    with pytest.raises(ValueError, match="groups"):
        accuracy_stderr(together, groups[:5])


def _units_and_curves(offset: float, seed: int = 0):
    """A trained probe curve and a pixel-probe control measured on the same 16 held-out combinations × 8 copies: each
    combination's difficulty (shared) sets both curves' correctness, and each curve's rows carry noise of their own;
    the control is `offset` lower in mean."""
    g = torch.Generator().manual_seed(seed)
    sizes = torch.full((16,), 8.0)
    base = torch.sigmoid(12 * (torch.tensor(TAUS, dtype=torch.float64) - 0.5))[:, None]
    shared = 0.25 * torch.randn(1, 16, generator=g, dtype=torch.float64)  # per combination, both networks

    def own():  # each curve's own noise: a row more or less per combination
        return torch.randint(-1, 2, (len(TAUS), 16), generator=g).double()

    t = ((8 * (base + shared).clamp(0, 1)).round() + own()).clamp(0, 8)
    c = ((8 * (base + shared - offset).clamp(0, 1)).round() + own()).clamp(0, 8)
    rows = []
    for source, totals in (("trained", t), ("pixels", c)):
        value = totals.sum(1) / 128
        rows.append(_curve(source, "linear_probe", value.tolist(), [0.1] * len(TAUS)))  # unpaired: large noise
    commit = pd.DataFrame({"source": ["trained", "pixels"], "measure": "linear_probe", "attribute": "shape",
                           "commitment_tau": [0.5, 0.55]})
    units = {"trained": {"linear_probe/shape/totals": t, "linear_probe/shape/sizes": sizes},
             "pixels": {"linear_probe/shape/totals": c, "linear_probe/shape/sizes": sizes}}
    return pd.concat(rows, ignore_index=True), commit, units


def test_with_units_the_departure_is_paired_and_shared_noise_cancels():
    curves, commit, units = _units_and_curves(offset=0.25)
    unpaired = control_summary(curves, commit, margin=0.1)["pixels"]
    paired = control_summary(curves, commit, margin=0.1, units=units)["pixels"]
    assert not unpaired["departs"]["linear_probe"]["shape"] and not unpaired["departure_paired"]["linear_probe"]["shape"]
    assert paired["departs"]["linear_probe"]["shape"] and paired["departure_paired"]["linear_probe"]["shape"]
    assert paired["departure_z_unpaired"]["linear_probe"]["shape"] == unpaired["departure_z"]["linear_probe"]["shape"]
    assert paired["departure_z"]["linear_probe"]["shape"] > 3 * paired["departure_z_unpaired"]["linear_probe"]["shape"]
    # control: without the offset (each curve's own noise only) departures at about the test's level, α = 0.05
    hits = 0
    for seed in range(100):
        curves, commit, units = _units_and_curves(offset=0.0, seed=seed)
        same = control_summary(curves, commit, margin=0.0, units=units)["pixels"]
        assert same["departure_paired"]["linear_probe"]["shape"]
        assert same["departure_z"]["linear_probe"]["shape"] is not None  # the curves differ: the noise test decides
        hits += same["departs"]["linear_probe"]["shape"]
    assert hits <= 12  # α·100 + 3 binomial sd (measured: 7 of 200)


def test_units_that_do_not_pair_are_refused():
    from conceptlab.studies.abstractions import difference_stderr

    curves, commit, units = _units_and_curves(offset=0.25)
    assert difference_stderr(units, "random_init", "linear_probe", "shape") is None  # no such control: unpaired
    one = {source: {"forking_entropy/shape/totals": torch.zeros(11, 1)} for source in ("trained", "pixels")}
    assert difference_stderr(one, "pixels", "forking_entropy", "shape") is None  # one root: no error to pair
    units["pixels"]["linear_probe/shape/sizes"] = torch.full((16,), 4.0)
    with pytest.raises(ValueError, match="do not pair"):
        control_summary(curves, commit, margin=0.1, units=units)
