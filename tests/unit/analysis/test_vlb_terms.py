"""When a VDM's reconstruction term stops dominating its loss, read off a training log."""

import math

import pandas as pd
import pytest

from conceptlab.analysis.vlb_terms import has_vlb_terms, reconstruction_phase
from conceptlab.models.diffusion import VariationalDiffusion


def log_of(steps, recon, diffusion, gamma_0=None):
    frame = pd.DataFrame({"step": steps, "recon_bpd": recon, "diffusion_bpd": diffusion,
                          "prior_bpd": [0.0] * len(steps)})
    if gamma_0 is not None:
        frame["gamma_0"] = gamma_0
        frame["gamma_1"] = [10.0] * len(steps)
    return frame


def test_the_phase_ends_after_the_last_step_the_reconstruction_term_dominated():
    # dominated, a dip below, dominated again at 40, then below for good from 50
    log = log_of([10, 20, 30, 40, 50, 60], [4800, 100, 0.2, 1.5, -3, -8], [0.9, 0.8, 0.7, 0.6, 0.5, 0.5],
                 gamma_0=[-5, -8, -10, -10.5, -11.5, -12])
    phase = reconstruction_phase(log)
    assert phase["end"] == 50 and phase["dominated_from_start"]
    assert phase["gamma_0_first"] == -5 and phase["gamma_0_at_end"] == -11.5 and phase["gamma_0_last"] == -12
    assert phase["recon_bpd_first"] == 4800 and phase["recon_bpd_last"] == -8 and phase["gamma_1_last"] == 10


def test_never_dominated_ends_at_the_first_step_and_still_dominating_has_no_end():
    never = reconstruction_phase(log_of([5, 10], [-8, -8], [0.5, 0.4]))
    assert never["end"] == 5 and not never["dominated_from_start"] and never["gamma_0_first"] is None
    still = reconstruction_phase(log_of([5, 10, 15], [4800, 300, 1.0], [0.9, 0.8, 0.7], gamma_0=[-5, -7, -9]))
    assert still["end"] is None and still["gamma_0_at_end"] is None


def test_unsorted_and_resumed_logs_are_read_by_step_and_other_logs_are_refused():
    log = log_of([30, 10, 20, 20], [0.1, 50, 40, 0.3], [0.5, 0.5, 0.5, 0.5])  # step 20 logged twice: the last counts
    assert reconstruction_phase(log)["end"] == 20
    cosine = pd.DataFrame({"step": [1, 2], "loss": [0.3, 0.2]})
    assert not has_vlb_terms(cosine) and not has_vlb_terms(None) and has_vlb_terms(log)
    with pytest.raises(ValueError, match="no VDM loss terms"):
        reconstruction_phase(cosine)


def test_the_authors_reconstruction_term_is_thousands_of_bits_at_their_initial_schedule():
    """The mechanism the phase reads (docs/setups.md): at γ(0) = −5 the Gaussian term with σ_d = 1e-3 is
    e^{−5}/(2σ_d² ln 2) − log₂(1/(σ_d √(2π))) ≈ 4,852 bits per dimension; the model's own loss agrees."""
    import torch

    process = VariationalDiffusion(-5.0, 10.0, time_input="normalized_gamma", reconstruction="gaussian",
                                   data_noise=1e-3)

    class Zero(torch.nn.Module):
        def forward(self, z, t, p):
            return -z  # ε̂ = 0 after the process adds z back

    x = torch.rand(256, 3, 8, 8) * 2 - 1
    _, metrics = process.loss(Zero(), x, torch.zeros(256, 1), torch.Generator().manual_seed(0))
    expected = math.exp(-5.0) / (2e-6 * math.log(2)) - math.log2(1 / (1e-3 * math.sqrt(2 * math.pi)))
    assert float(metrics["recon_bpd"]) == pytest.approx(expected, rel=0.02)
    assert float(metrics["recon_bpd"]) > 100 * float(metrics["diffusion_bpd"])


def test_a_gamma_not_logged_at_the_phase_end_is_none_not_nan():
    """summary.json has no NaN: a γ(0) missing (NaN) at the end step reads None, as the docstring promises."""
    log = log_of([10, 20, 30], [4800, 0.2, -3], [0.9, 0.8, 0.7], gamma_0=[-5, float("nan"), -12])
    phase = reconstruction_phase(log)
    assert phase["end"] == 20 and phase["gamma_0_at_end"] is None and phase["gamma_0_last"] == -12
