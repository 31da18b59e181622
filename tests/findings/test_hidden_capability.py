"""Findings 2–3 (Park et al. 2024): a capability latent interventions reveal before naive prompting shows it.

One CI-sized run of the shipped hidden-emergence-tiny preset (seed 0, its first 300
training steps — in the full 3-seed run over-prompting emerges at 300–400 and naive
prompting at 700–800 or not at all; only that checkpoint evaluated, with over-prompting
as the intervention): over-prompting along color passes the emergence bar (Wilson lower
bound of its held-out score ≥ 0.5) while the naive prompt does not, and beats it by at
least 0.25. The test fails if the gap closes (no hidden capability, or naive prompting
already generalises) or if over-prompting stops reaching the class.
"""

import pytest

from conceptlab.analysis.emergence import wilson_interval
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment


@pytest.mark.slow
def test_over_prompting_reveals_the_held_out_class_before_naive_prompting(tmp_path, hidden_emergence_at_step_300):
    cfg = load_config("hidden-emergence-tiny", hidden_emergence_at_step_300)
    summary = run_experiment(cfg, tmp_path / "hidden", progress=False)
    final = summary["emergence"]["targets"]["11"]["final_score"]
    n = cfg.eval.interventions.samples
    lower = {k: float(wilson_interval(v, n)[0]) for k, v in final.items()}
    assert lower["over_prompting"] >= 0.5, (final, lower)  # the capability is there ...
    assert lower["naive"] < 0.5, (final, lower)  # ... the behavior is not yet
    assert final["over_prompting"] >= final["naive"] + 0.25, final
