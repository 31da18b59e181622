"""Shared by the studies' unit tests."""

import pytest
import torch

from conceptlab.studies import build_data


class _Called(Exception):
    pass


@pytest.fixture
def intervention_call(monkeypatch):
    """`call(cfg)`: the arguments the hidden-emergence study's per-checkpoint measurement passes to
    `evaluate_interventions` for `cfg` (a dict by parameter name; nothing is sampled)."""
    from conceptlab.studies import emergence

    def evaluate(model, interventions, targets, context, probe, n, steps, generator, max_batch, noise_seed):
        raise _Called(dict(generator=generator, max_batch=max_batch, noise_seed=noise_seed))

    monkeypatch.setattr(emergence, "intervention_context", lambda cfg, dgp, model, reference: None)
    monkeypatch.setattr(emergence, "_reference_model", lambda cfg, model, checkpoints: None)
    monkeypatch.setattr(emergence, "with_naive_repeats", lambda interventions, targets, context: interventions)
    monkeypatch.setattr(emergence, "evaluate_interventions", evaluate)

    def call(cfg) -> dict:
        measurement = emergence.intervention_measurement(cfg, build_data(cfg.data), torch.nn.Linear(1, 1), None, [])
        with pytest.raises(_Called) as called:
            measurement.measure(100)
        return called.value.args[0]

    return call
