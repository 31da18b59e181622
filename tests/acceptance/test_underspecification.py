"""Finding 4 (Park et al. 2024): underspecified prompts hurt generalization, which interventions still elicit.

Two CI-sized twins differing only in the data: `hidden-underspecified-tiny` (half of the training prompts have
their color entries masked) and its fully specified parent `hidden-emergence-tiny`, both trained 300 steps
(seed 0) with concept-space-tiny's prompt mapping (p − 0.5)·4, under which the fully specified model's naive
prompt already reaches the held-out class (blue-small) by step 250. The shipped presets use (p − 0.5)·2 and need
~1,000 steps to show the same thing (README). At step 300 the fully specified twin's naive prompt passes the
emergence bar (Wilson lower bound ≥ 0.5); the masked twin's does not and scores at least 0.3 lower, while
over-prompting along color on the masked twin passes it. The test fails if masking stops hurting naive prompting
or if over-prompting stops eliciting the class under masking.

What this one seed shows, and does not (2026-12-07, session 49; docs/findings-suite.md, "The findings tests under
other seeds and thread counts"): a regression check of seed 0's trajectory, not evidence for the finding. The same
twins on the settings seeds 1 and 2 (bf16 on an AMD EPYC Zen 4, one thread and two) fail it: on seed 1
over-prompting does not reach the masked class (0.29 at one thread, 0.37 at two; 0.05 by step 600), on seed 2 the
fully specified twin has not generalised (naive 0.11 / 0.22; 0.37 by step 600). Seed 0 at two threads gave
over-prompting 0.63 on the masked twin, a Wilson lower bound of 0.491 at 48 generations (0.68 at 96); the findings
tests now take one thread in every invocation, so a test run alone computes what `make test` computes. The evidence
is the findings suite's, on fresh seeds at the preset's length (docs/findings.md: masking lowers naive prompting on
3/3 report seeds, over-prompting reaches the masked class on 1/3: mixed). Twins at the preset's 1,000 steps and
prompt mapping might carry the first half across seeds, as on those report seeds (not measured at test size), at
about three times this test's training, which the 15-minute budget does not hold today.
"""

import pytest

from conceptlab.analysis.emergence import wilson_interval
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment


def _final(preset: str, overrides: list[str], folder) -> tuple[dict[str, float], dict[str, float]]:
    """Held-out scores at the last checkpoint per intervention, and their Wilson lower bounds."""
    cfg = load_config(preset, overrides)
    summary = run_experiment(cfg, folder, progress=False)
    final = summary["emergence"]["targets"]["11"]["final_score"]
    n = cfg.eval.interventions.samples
    return final, {k: float(wilson_interval(v, n)[0]) for k, v in final.items()}


@pytest.mark.slow
def test_masked_color_prompts_hide_the_held_out_class_from_naive_prompting_but_not_from_over_prompting(
    tmp_path, hidden_emergence_at_step_300
):
    # concept-space-tiny's mapping and color separation (hidden-underspecified-tiny pins the latter; its parent is 0.2)
    size = hidden_emergence_at_step_300 + ["model.prompt_scale=4.0", "data.color_separation=0.4"]
    full, full_lower = _final(
        "hidden-emergence-tiny", size + ["eval.interventions.over_prompting=null"], tmp_path / "full"
    )
    masked, masked_lower = _final("hidden-underspecified-tiny", size, tmp_path / "masked")
    assert full_lower["naive"] >= 0.5, full  # fully specified: naive prompting generalises by now ...
    assert masked_lower["naive"] < 0.5, masked  # ... with half the color prompts masked it does not,
    assert masked["naive"] <= full["naive"] - 0.3, (full, masked)
    assert masked_lower["over_prompting"] >= 0.5, masked  # and over-prompting still reaches the class
