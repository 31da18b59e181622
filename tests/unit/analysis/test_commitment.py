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
)

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


def test_departure_refuses_bad_input():
    with pytest.raises(ValueError, match="same length"):
        departure(GRID21, GRID21[:5], 0.1)
    with pytest.raises(ValueError, match="alpha"):
        departure(GRID21, GRID21, 0.1, alpha=0.0)
    with pytest.raises(ValueError, match="stderr"):
        departure(GRID21, GRID21, 0.1, torch.ones(3))
