"""Findings 2–3 (Park et al. 2024): a capability latent interventions reveal before naive prompting shows it.

One CI-sized run of the shipped hidden-emergence-tiny preset (seed 0, the same 500
training steps; only the final checkpoint evaluated, with over-prompting as the
intervention): the held-out class (blue-small) is generated far more often under
over-prompting along color than under its naive prompt, which still produces
mostly the memorized training class red-small. The test fails if the gap closes
(no hidden capability, or naive prompting already generalises) or if over-prompting
stops reaching the class.
"""

import pytest

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment

CI_SIZE = [  # same data, model and training; evaluation of the final checkpoint only
    "train.checkpoint_schedule=list",
    "train.checkpoint_steps=[500]",
    "eval.samples_per_class=16",
    "eval.interventions.samples=48",
    "eval.interventions.linear=null",
    "eval.interventions.patching=null",
]


@pytest.mark.slow
def test_over_prompting_reveals_the_held_out_class_before_naive_prompting(tmp_path):
    cfg = load_config("hidden-emergence-tiny", CI_SIZE)
    summary = run_experiment(cfg, tmp_path / "hidden", progress=False)
    final = summary["emergence"]["targets"]["11"]["final_score"]
    assert final["over_prompting"] >= final["naive"] + 0.3, final
    assert final["naive"] < 0.5, final  # behavior has not emerged yet
    # the naive prompt's generations are valid objects, mostly small (size learned) but not blue
    acc = summary["final_accuracy"]
    assert acc["11/size"] >= 0.7 and acc["11/color"] < 0.6, acc
