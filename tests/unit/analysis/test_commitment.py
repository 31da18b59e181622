"""Tests for commitment times (curves with known crossing points) and the agreement between measures."""

import math

import pytest
import torch

from conceptlab.analysis.commitment import (
    commitment_order,
    commitment_table,
    commitment_time,
    departure,
    measure_agreement,
    paired_stderr,
)
from conceptlab.analysis.linear_probes import accuracy_stderr, cluster_totals

TAU = torch.linspace(0, 1, 11)


def test_commitment_time_of_known_curves():
    # linear ramp 0 → 2 on τ ∈ [0.2, 0.6]: half of the final value at τ = 0.4, a quarter at 0.3
    ramp = ((TAU - 0.2) / 0.4).clamp(0, 1) * 2
    assert commitment_time(TAU, ramp) == pytest.approx(0.4)
    assert commitment_time(TAU, ramp, fraction=0.25) == pytest.approx(0.3)
    # interpolation between grid points: a step from 0 to 1 between τ = 0.5 and 0.6 crosses ½ at 0.55
    step = (TAU > 0.55).double()
    assert commitment_time(TAU, step) == pytest.approx(0.55)
    # falling entropy ln 4 → 0, logistic centred at 0.7
    entropy = math.log(4) * torch.sigmoid(-(torch.linspace(0, 1, 201) - 0.7) * 40)
    assert commitment_time(torch.linspace(0, 1, 201), entropy, start=math.log(4), end=0.0) == pytest.approx(0.7, abs=1e-3)
    # probe accuracy from chance 0.25 to 1.0 (first value noisy): start at chance
    acc = torch.tensor([0.27, 0.24, 0.26, 0.4, 0.625, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert commitment_time(TAU, acc, start=0.25) == pytest.approx(0.4)
    assert math.isnan(commitment_time(TAU, torch.ones(11)))
    assert math.isnan(commitment_time(TAU, ramp, end=5.0))  # never gets there


def test_a_curve_that_ends_on_the_wrong_side_of_its_start_is_never_committed():
    """A probe at chance whose last value is a little below it would read its dips below chance as progress; with
    the measure's direction it has no commitment time, and a curve moving the right way is unaffected."""
    at_chance = torch.tensor([0.5, 0.47, 0.52, 0.49, 0.48])
    grid = torch.linspace(0, 1, 5)
    assert not math.isnan(commitment_time(grid, at_chance, start=0.5))  # no direction: the dips count
    assert math.isnan(commitment_time(grid, at_chance, start=0.5, direction=1))
    entropy = torch.tensor([1.0, 1.1, 1.2, 1.3, 1.4])  # a forking entropy that rises
    assert math.isnan(commitment_time(grid, entropy, direction=-1))
    assert commitment_time(grid, entropy.flip(0), direction=-1) == pytest.approx(0.5)
    acc = torch.tensor([0.27, 0.24, 0.26, 0.4, 0.625, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0])
    assert commitment_time(TAU, acc, start=0.25, direction=1) == commitment_time(TAU, acc, start=0.25)
    table = commitment_table({"linear_probe": {"a": (grid, at_chance), "b": (grid, grid)}}, starts={
        "linear_probe": {"a": 0.5, "b": 0.0}}, directions={"linear_probe": 1})
    assert math.isnan(table.loc["a", "linear_probe"]) and table.loc["b", "linear_probe"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="direction"):
        commitment_time(grid, at_chance, direction=0)


def test_table_order_and_agreement():
    logistic = lambda centre: torch.sigmoid((TAU - centre) * 30)
    curves = {
        "mutual_information": {"wall_hue": (TAU, logistic(0.4)), "object_hue": (TAU, logistic(0.5)),
                               "shape": (TAU, logistic(0.62))},
        "forking_entropy": {"wall_hue": (TAU, 1 - logistic(0.35)), "object_hue": (TAU, 1 - logistic(0.52)),
                            "shape": (TAU, 1 - logistic(0.6))},
        "linear_probe": {"wall_hue": (TAU, logistic(0.7)), "object_hue": (TAU, logistic(0.5)),
                         "shape": (TAU, logistic(0.3))},
    }
    table = commitment_table(curves)
    assert table.loc["wall_hue", "mutual_information"] == pytest.approx(0.4, abs=0.01)
    assert table.loc["shape", "forking_entropy"] == pytest.approx(0.6, abs=0.01)
    assert commitment_order(table, "mutual_information") == ["wall_hue", "object_hue", "shape"]
    agreement = measure_agreement(table).set_index(["measure_a", "measure_b"])["spearman"]
    assert agreement["mutual_information", "forking_entropy"] == pytest.approx(1.0)
    assert agreement["mutual_information", "linear_probe"] == pytest.approx(-1.0)
    # overriding the end level: MI overshooting to 2 ln 4 at τ = 1, committed at H(V) = ln 4 half-way
    mi = torch.cat([torch.linspace(0, math.log(4), 10), torch.tensor([2 * math.log(4)])])
    override = commitment_table({"mi": {"shape": (TAU, mi)}}, ends={"mi": {"shape": math.log(4)}})
    assert override.loc["shape", "mi"] == pytest.approx(0.45)
    assert commitment_table({"mi": {"shape": (TAU, mi)}}).loc["shape", "mi"] == pytest.approx(0.9)
    table.loc["shape", "linear_probe"] = float("nan")
    ag = measure_agreement(table).set_index(["measure_a", "measure_b"])
    assert ag.loc[("mutual_information", "linear_probe"), "attributes"] == 2
    assert ag.loc[("mutual_information", "linear_probe"), "spearman"] == pytest.approx(-1.0)


@pytest.mark.parametrize("kw, match", [
    ({"tau": [0.0, 1.5], "values": [0.0, 1.0]}, "tau"),
    ({"tau": [0.5, 0.2], "values": [0.0, 1.0]}, "increasing"),
    ({"tau": [0.0, 1.0], "values": [0.0, 1.0], "fraction": 1.0}, "fraction"),
    ({"tau": [0.0, 1.0], "values": [0.0]}, "same length"),
])
def test_bad_input_is_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        commitment_time(**kw)
    with pytest.raises(ValueError, match="measure"):
        commitment_order(commitment_table({"a": {"x": (TAU, TAU)}}), "b")


GRID21 = torch.linspace(0, 1, 21, dtype=torch.float64)


def test_departure_needs_the_margin_and_the_noise():
    trained = torch.sigmoid(12 * (GRID21 - 0.5))  # range ≈ 1
    shifted = torch.sigmoid(12 * (GRID21 - 0.7))  # a real departure: up to 0.46 apart
    se = torch.full_like(GRID21, 0.02)
    d = departure(trained, shifted, 0.1, se, se)
    assert d["departs"] and d["departs_margin"] and d["z"] > d["z_needed"]
    # the same gap measured with noise as large as it (se 0.2 each): beyond the margin, not beyond the noise
    noisy = departure(trained, shifted, 0.1, torch.full_like(GRID21, 0.2), torch.full_like(GRID21, 0.2))
    assert noisy["departs_margin"] and not noisy["departs"]
    # within the margin: no departure however small the noise
    close = departure(trained, trained + 0.05, 0.1, se, se)
    assert not close["departs"] and not close["departs_margin"] and close["z"] is None
    # no stderr: the margin alone (the test before 2026-12-04); an exactly flat control with se 0 departs
    assert departure(trained, shifted, 0.1)["departs"]
    assert departure(trained, torch.zeros_like(GRID21), 0.1)["z"] == math.inf
    # a NaN stderr where the curves differ: that τ cannot pass (it once read as z = inf and passed)
    unknown = torch.full_like(GRID21, math.nan)
    assert not departure(trained, shifted, 0.1, unknown, unknown)["departs"]
    assert departure(trained, shifted, 0.1, unknown, unknown)["z"] is None
    assert not departure(torch.tensor([0.0, 0.5, 1.0]), torch.tensor([0.0, 0.0, 1.0]), 0.1,
                         [0.0, math.nan, 0.0], [0.0, 0.0, 0.0])["departs"]
    partly = se.clone()
    partly[10] = math.nan  # one unknown τ: the others still decide
    assert departure(trained, shifted, 0.1, partly, se)["departs"]
    # Bonferroni over the grid: z for 21 points at α = 0.05
    assert d["z_needed"] == pytest.approx(3.0381, abs=1e-3)


def test_departure_holds_its_level_on_controls_equal_in_expectation():
    """A control that is the trained curve plus noise of the stated stderr, with a margin of 0, departs in about α of
    1,000 draws (≈ 0.049 with Bonferroni over 21 independent points; without the correction it would be ≈ 0.66)."""
    g = torch.Generator().manual_seed(0)
    trained = torch.sigmoid(12 * (GRID21 - 0.5))
    se = torch.full_like(GRID21, 0.05)
    hits = sum(departure(trained, trained + 0.05 * 2**0.5 * torch.randn(21, generator=g, dtype=torch.float64), 0.0,
                         se, se)["departs"] for _ in range(1000))
    assert 5 <= hits <= 71  # α·1000 + 3 binomial sd; ≥ 5: the test is not dead


def _paired_units(g, offset: float, shared: float = 0.3, own: float = 0.02, units: int = 64):
    """Per-unit totals [21, units] of a trained curve and a control measured on the same draws: each unit carries a
    large noise both share (the same image, noise or root) and a small one of its own; `offset` apart in mean."""
    trained = torch.sigmoid(12 * (GRID21 - 0.5))[:, None]
    common = shared * torch.randn(21, units, generator=g, dtype=torch.float64)
    t = trained + common + own * torch.randn(21, units, generator=g, dtype=torch.float64)
    c = trained + offset + common + own * torch.randn(21, units, generator=g, dtype=torch.float64)
    return t, c


def test_paired_stderr_is_the_error_of_the_mean_difference_and_cancels_shared_noise():
    g = torch.Generator().manual_seed(1)
    t, c = _paired_units(g, offset=0.03)
    se = paired_stderr(t, c)
    assert torch.allclose(se, (t - c).std(1) / 8)  # units of size 1: std of the differences / √G
    unpaired = (t.std(1) ** 2 / 64 + c.std(1) ** 2 / 64).sqrt()
    assert bool((se < unpaired / 5).all())  # the shared noise (0.3) cancels; the own noise (0.02) remains
    # an offset of 0.03 at every τ: lost in the unpaired noise (≈ 0.05), clear in the paired (≈ 0.004)
    args = (t.mean(1), c.mean(1), 0.0, t.std(1) / 8, c.std(1) / 8)
    assert not departure(*args)["departs"]
    d = departure(*args, difference_stderr=se)
    assert d["departs"] and d["z"] > 2 * d["z_needed"]
    # clusters: equal to the clustered accuracy error where the control scores nothing (same formula on d = hits)
    groups = torch.arange(10).repeat_interleave(8)
    correct = torch.rand(3, 80, generator=g) < torch.linspace(0.2, 0.9, 10).repeat_interleave(8)
    totals, sizes = cluster_totals(correct, groups)
    assert torch.equal(totals.sum(1) / sizes.sum(), correct.double().mean(1))
    se = paired_stderr(totals, torch.zeros_like(totals), sizes)
    for i in range(3):  # accuracy_stderr: the same clustered error, floored at the plus-two binomial one
        k = float(correct[i].sum())
        plus_two = (k + 1) / 82
        assert accuracy_stderr(correct[i], groups) == pytest.approx(
            max(float(se[i]), math.sqrt(plus_two * (1 - plus_two) / 80)), rel=1e-9)
    assert float(se.max()) > math.sqrt(0.25 / 80)  # the clustered error is the binding one somewhere
    assert float(paired_stderr(totals, totals, sizes, floor=1 / 80)[0]) == pytest.approx(1 / 80)  # identical: floor


def test_the_paired_test_holds_its_level_where_the_control_equals_the_trained_curve_in_expectation():
    """Same draws, no offset: the paired test departs in about α of 400 draws — pairing sharpens, not loosens."""
    g = torch.Generator().manual_seed(2)
    hits = normal = 0
    for _ in range(400):
        t, c = _paired_units(g, offset=0.0)
        se = paired_stderr(t, c)
        hits += departure(t.mean(1), c.mean(1), 0.0, difference_stderr=se, df=63)["departs"]
        normal += departure(t.mean(1), c.mean(1), 0.0, difference_stderr=se)["departs"]
    assert 2 <= hits <= 33  # α·400 + 3 binomial sd; ≥ 2: not dead
    assert normal > hits  # the normal quantile ignores that se is estimated from 64 units


def test_paired_stderr_refuses_units_that_do_not_pair():
    with pytest.raises(ValueError, match="same shape"):
        paired_stderr(torch.zeros(3, 8), torch.zeros(3, 7))
    with pytest.raises(ValueError, match="G ≥ 2"):
        paired_stderr(torch.zeros(3, 1), torch.zeros(3, 1))
    with pytest.raises(ValueError, match="sizes"):
        paired_stderr(torch.zeros(3, 8), torch.zeros(3, 8), torch.zeros(8))


def test_departure_refuses_bad_input():
    with pytest.raises(ValueError, match="same length"):
        departure(GRID21, GRID21[:5], 0.1)
    with pytest.raises(ValueError, match="alpha"):
        departure(GRID21, GRID21, 0.1, alpha=0.0)
    with pytest.raises(ValueError, match="stderr"):
        departure(GRID21, GRID21, 0.1, torch.ones(3))
