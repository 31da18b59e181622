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
