"""The abstractions study's control summary: a trained curve departs from a control only beyond the margin *and*
beyond the two curves' noise; probe accuracies carry a binomial standard error."""

import math

import pandas as pd
import pytest
import torch

from conceptlab.studies.abstractions import control_summary, probe_stderr

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


def test_probe_stderr_is_binomial_at_the_plus_two_estimate():
    se = probe_stderr(torch.tensor([0.5, 1.0, 0.0]), 98)
    assert float(se[0]) == pytest.approx(math.sqrt(0.25 / 98))
    assert float(se[1]) == pytest.approx(math.sqrt((99 / 100) * (1 / 100) / 98)) and float(se[1]) > 0
    assert float(se[2]) == pytest.approx(float(se[1]))
