"""Percolation model of manifold formation: overlap formula, exact small lattices, the site-percolation threshold."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from conceptlab.analysis.percolation import (
    critical_dataset_size,
    exact_mass_ratio,
    lattice_nodes,
    link_radius,
    mass_ratio_samples,
    overlap,
    percolation_curve,
)
from conceptlab.data.bumps import render

NN = 0.7  # overlap threshold between exp(-1/4) (spacing 1, σ 1) and exp(-2/4) (diagonal): nearest neighbours only


def c4(lam: float) -> float:
    """E[mass ratio] on a 4-cycle, by hand: k=1 → 1; k=2 → 1 (4 adjacent pairs) or ½ (2 diagonals); k=3, 4 → 1."""
    q = 1 - lam
    return 4 * lam * q**3 + lam**2 * q**2 * (4 + 2 * 0.5) + 4 * lam**3 * q + lam**4


def test_overlap_is_the_normalised_inner_product_of_two_bumps():
    a = render("bump", torch.tensor([[40.0, 40.0]]), size=80, sigma=(1.5, 2.0))[0].double()
    for dx, dy in [(1.0, 0.0), (2.0, 3.0), (0.0, 4.0)]:
        b = render("bump", torch.tensor([[40.0 + dx, 40.0 + dy]]), size=80, sigma=(1.5, 2.0))[0].double()
        numeric = (a * b).sum() / torch.sqrt((a * a).sum() * (b * b).sum())
        assert overlap(dx, dy, (1.5, 2.0)) == pytest.approx(numeric.item(), rel=1e-6)
    assert link_radius(0.005) == pytest.approx(2 * math.sqrt(math.log(200)))


@pytest.mark.parametrize("lam", [0.2, 0.5, 0.9])
def test_exact_enumeration_on_a_four_cycle(lam):
    square = exact_mass_ratio(2, (1.0, 1.0), (1.0, 1.0), lam, threshold=NN)  # 2×2 lattice, no diagonals
    ring = exact_mass_ratio(4, (1.0, 4.0), (1.0, 1.0), lam, threshold=NN, periodic=True)  # 4 nodes on a ring
    assert square == pytest.approx(c4(lam), abs=1e-12)
    assert ring == pytest.approx(c4(lam), abs=1e-12)


def test_chain_differs_from_ring_and_monte_carlo_agrees():
    chain = exact_mass_ratio(4, (1.0, 4.0), (1.0, 1.0), 0.5, threshold=NN)
    assert chain == pytest.approx((4 + 4.5 + (2 + 4 / 3) + 1) / 16, abs=1e-12)  # 4-node path, enumerated by hand
    mc = mass_ratio_samples(2, (1.0, 1.0), (1.0, 1.0), 0.5, threshold=NN, trials=4000, seed=1)
    assert mc["mass_ratio"].mean() == pytest.approx(c4(0.5), abs=0.015)  # an empty draw counts 0, as in the sum


def test_link_threshold_is_strict_and_links_reach_the_radius():
    m = len(lattice_nodes(6, (1.0, 1.0)))
    at = math.exp(-0.25)  # exactly the overlap of nearest neighbours: not linked
    assert mass_ratio_samples(6, (1.0, 1.0), (1.0, 1.0), 1.0, threshold=at, trials=1)["largest"][0] == 1
    assert mass_ratio_samples(6, (1.0, 1.0), (1.0, 1.0), 1.0, threshold=at * 0.999, trials=1)["largest"][0] == m
    # spacing 3σ: overlap exp(-9/4) ≈ 0.105 links at 0.05 but not at 0.2
    assert mass_ratio_samples(12, (3.0, 3.0), (1.0, 1.0), 1.0, threshold=0.05, trials=1)["mass_ratio"][0] == 1.0
    assert mass_ratio_samples(12, (3.0, 3.0), (1.0, 1.0), 1.0, threshold=0.2, trials=1)["largest"][0] == 1


def test_site_percolation_threshold_of_the_square_lattice():
    """Nearest-neighbour site percolation on the square lattice has p_c ≈ 0.5927."""
    below = mass_ratio_samples(64, (1.0, 1.0), (1.0, 1.0), 0.45, threshold=NN, trials=4, seed=0)
    above = mass_ratio_samples(64, (1.0, 1.0), (1.0, 1.0), 0.75, threshold=NN, trials=4, seed=0)
    assert below["fraction_of_all"].max() < 0.05
    assert above["mass_ratio"].min() > 0.9
    fixed = mass_ratio_samples(64, (1.0, 1.0), (1.0, 1.0), 0.75, threshold=NN, trials=2, mode="fixed")
    assert (fixed["kept"] == round(0.75 * 64 * 64)).all()


def test_critical_dataset_size_scales_with_the_number_of_lattice_nodes():
    """At fixed spacing the critical λ is size-independent, so the critical dataset size grows like M ∝ N²."""
    fractions = np.linspace(0.4, 0.8, 9)
    curve = percolation_curve([16, 32], fractions, threshold=NN, trials=6, seed=0)
    assert np.allclose(curve["dataset_size"], curve["fraction"] * curve["nodes"])
    crit = critical_dataset_size(curve, target=0.5).set_index("N")["critical_dataset_size"]
    lam_c = crit / curve.groupby("N")["nodes"].first()
    assert ((lam_c > 0.5) & (lam_c < 0.7)).all()
    assert 3.0 < crit[32] / crit[16] < 5.0


def test_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        link_radius(0.0)
    with pytest.raises(ValueError, match="λ"):
        mass_ratio_samples(8, (1.0, 1.0), (1.0, 1.0), 1.5)
    with pytest.raises(ValueError, match="20 nodes"):
        exact_mass_ratio(8, (1.0, 1.0), (1.0, 1.0), 0.5)
    with pytest.raises(ValueError, match="sigma"):
        mass_ratio_samples(8, (1.0, 1.0), (0.0, 1.0), 0.5)
    with pytest.raises(ValueError, match="mode"):
        mass_ratio_samples(8, (1.0, 1.0), (1.0, 1.0), 0.5, mode="exact")


def test_critical_size_is_where_the_ratio_stays_above_target_not_the_trivial_small_subsamples():
    """One kept node is its own largest cluster: the ratio starts at 1, dips, then percolates; the critical size is
    the last crossing from below."""
    curve = pd.DataFrame({"N": 8, "dataset_size": [1.0, 2.0, 8.0, 16.0, 32.0, 64.0],
                          "mass_ratio": [1.0, 0.8, 0.2, 0.3, 0.7, 1.0], "fraction_of_all": 0.0})
    crit = critical_dataset_size(curve, 0.5)["critical_dataset_size"].iloc[0]
    assert 16.0 < crit < 32.0
    never = curve.assign(mass_ratio=[1.0, 0.8, 0.2, 0.3, 0.4, 0.45])
    assert np.isnan(critical_dataset_size(never, 0.5)["critical_dataset_size"].iloc[0])
    with pytest.raises(ValueError, match="column"):
        critical_dataset_size(curve, 0.5, column="nope")


def test_percolation_command_writes_tables_and_figure(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.cli import app

    out = tmp_path / "perc"
    result = CliRunner().invoke(app, ["percolation", "--sizes", "16,32", "--fractions", "0.02,0.05,0.1,0.3,1",
                                      "--thresholds", "0.05", "--trials", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "λ_c" in result.output and "critical size ∝ N^" in result.output
    critical = pd.read_parquet(out / "critical.parquet")
    assert list(critical["N"]) == [16.0, 32.0] and (out / "percolation.png").is_file()
    bad = CliRunner().invoke(app, ["percolation", "--sizes", "a,b", "--out", str(out)])
    assert bad.exit_code == 2 and "comma-separated numbers" in bad.output
