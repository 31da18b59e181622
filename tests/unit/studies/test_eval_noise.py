"""`eval.noise_per_run`: every evaluation noise stream and sample of a run drawn from its own seed, so replicates of a
sweep over seeds are independent draws of the evaluation too; off (the default, as before the switch) every run of
a preset draws the same."""

import pytest
import torch

from conceptlab.experiments.loading import load_config
from conceptlab.studies import build_data
from conceptlab.studies.base import eval_noise_seed, run_noise_seed


class _Drawn(Exception):
    """Raised by the fake model's sampler with the first numbers its generator draws."""


class _FakeModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def sample(self, prompts, steps, generator, *args, **kwargs):
        raise _Drawn(torch.rand(4, generator=generator))


def _concept_space_draw(overrides):
    from conceptlab.studies.concept_space import concept_space_measurement

    cfg = load_config("hidden-emergence-tiny", overrides)
    measurement = concept_space_measurement(cfg, build_data(cfg.data), _FakeModel(), probe=None)
    with pytest.raises(_Drawn) as drawn:
        measurement.measure(100)
    return drawn.value.args[0]


def test_eval_noise_seed_is_the_sections_seed_or_the_runs_own():
    off = load_config("hidden-emergence-tiny", ["train.train_seed=7"])
    on = load_config("hidden-emergence-tiny", ["train.train_seed=7", "eval.noise_per_run=true"])
    assert eval_noise_seed(3, off) == 3
    assert eval_noise_seed(3, on) == run_noise_seed(3, on) != 3
    # a hash, not seed · k + train_seed: at seed 0 with small offsets added (as the call sites do) runs never share
    seeds = {eval_noise_seed(0, load_config("hidden-emergence-tiny", [f"train.train_seed={t}", "eval.noise_per_run=true"]))
             + offset for t in range(100, 110) for offset in range(50)}
    assert len(seeds) == 500 and max(seeds) < 2**63
    # at its default the switch is left out of the saved config, so earlier runs keep their ids
    assert "noise_per_run" not in off.model_dump()["eval"]
    assert on.model_dump()["eval"]["noise_per_run"] is True


def test_concept_space_generations_draw_per_run_noise_only_with_the_switch():
    shared = [_concept_space_draw([f"train.train_seed={s}"]) for s in (100, 101)]
    assert torch.equal(shared[0], shared[1])  # one draw per preset
    own = [_concept_space_draw([f"train.train_seed={s}", "eval.noise_per_run=true"]) for s in (100, 101, 100)]
    assert not torch.equal(own[0], own[1]) and torch.equal(own[0], own[2])  # each run its own, reproducibly


def test_composition_labels_and_copying_floor_follow_the_runs_own_seed(monkeypatch):
    from conceptlab.studies import factorization
    from conceptlab.studies.factorization import copying_accuracy, geometry_seed

    shared = [load_config("bumps-micro", [f"train.train_seed={s}"]) for s in (100, 101)]
    own = [load_config("bumps-micro", [f"train.train_seed={s}", "eval.noise_per_run=true"]) for s in (100, 101)]
    assert geometry_seed(shared[0]) == geometry_seed(shared[1])
    assert geometry_seed(own[0]) != geometry_seed(own[1])  # the general switch also reaches the geometry
    drawn = []
    real = factorization.region_labels
    monkeypatch.setattr(factorization, "region_labels", lambda dgp, n, seed: drawn.append(seed) or real(dgp, n, seed))
    tables = [copying_accuracy(c, build_data(c.data)) for c in shared + own]
    comp = shared[0].eval.composition.seed
    assert drawn == [comp, comp, run_noise_seed(comp, own[0]), run_noise_seed(comp, own[1])]
    assert tables[0].equals(tables[1])  # one sample of labels per preset


def test_abstractions_measurements_read_the_runs_own_seed(monkeypatch):
    from conceptlab.studies import abstractions

    seen = []
    monkeypatch.setattr(abstractions, "load_classifier", lambda cfg, dgp: (torch.nn.Linear(1, 1), {}))
    monkeypatch.setattr(abstractions, "attribute_reader", lambda classifier, dgp, batch_size: None)
    monkeypatch.setattr(abstractions, "conditional_accuracy", lambda a, dgp, model, read: seen.append(a.seed) or {})

    class _Run:
        def list_checkpoints(self):
            return [(100, None)]

        def pruned_steps(self):
            return set()

    for overrides in ([], ["eval.noise_per_run=true"]):
        cfg = load_config("abstractions-micro", ["train.train_seed=5", *overrides])
        evaluation = abstractions.STUDY.evaluation(cfg, None, _FakeModel(), _Run(), None, None)
        evaluation.measurements[0].measure(100)
    base = load_config("abstractions-micro", []).eval.abstractions.seed
    assert seen == [base, run_noise_seed(base, load_config("abstractions-micro", ["train.train_seed=5"]))]


def test_intervention_streams_draw_from_the_runs_own_seed(intervention_call):
    seen = []
    for overrides in ([], ["eval.noise_per_run=true"]):
        called = intervention_call(load_config("hidden-emergence-tiny", ["train.train_seed=9", *overrides]))
        seen.append((called["generator"].initial_seed(), called["noise_seed"]))
    base = load_config("hidden-emergence-tiny", []).eval.interventions.seed
    own = run_noise_seed(base, load_config("hidden-emergence-tiny", ["train.train_seed=9"]))
    assert seen == [(base, base), (own, own)]


def test_a_bump_of_the_noise_seeding_version_renames_only_runs_that_draw_per_run_noise(monkeypatch):
    from conceptlab.experiments.sweep import run_id
    from conceptlab.studies import base

    off = load_config("hidden-emergence-tiny", ["train.train_seed=7"])
    on = load_config("hidden-emergence-tiny", ["train.train_seed=7", "eval.noise_per_run=true"])
    before = run_id(off), run_id(on)
    monkeypatch.setattr(base, "NOISE_SEEDING_VERSION", base.NOISE_SEEDING_VERSION + 1)
    assert run_id(off) == before[0]  # the shared draw does not use the derivation
    assert run_id(on) != before[1]  # a run made by the older derivation is never reused as today's
