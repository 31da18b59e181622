"""Findings 2–3 (Park et al. 2024): a capability latent interventions reveal before naive prompting shows it.

One CI-sized run of hidden-emergence-tiny (seed 0) at concept-space-tiny's Δc 0.4 with the paper's raw prompt input
(shift 0, scale 1), trained 600 steps and evaluated at steps 300, 400, 500 and 600 with naive prompting and
over-prompting along color. The finding is about order, so the test compares emergence steps (the run's own: Wilson
lower bound of the held-out score ≥ 0.5 for two checkpoints in a row): over-prompting must emerge, naive prompting
later or not at all, and at the checkpoint where over-prompting emerges the naive prompt must score at least 0.25
lower. (The preset itself, at Δc 0.2, is the 3-seed demo; there over-prompting emerges at 500–800 steps.)

Why raw prompts and not the preset's (p − 0.5)·2: at ·2 and Δc 0.4 the naive prompt catches up early on some
machines, and a CI run at one seed becomes a coin flip. Measured on an AMD EPYC: seed 0 at ·2 in bf16 gave
over-prompting at 300 and naive at 350; seed 1 at ·2 in fp32 gave naive at 300 *before* over-prompting at 400. With
raw prompts, seed 0 gave over-prompting at 300 / naive at 600 (bf16) and over-prompting at 400 / naive never by 700
(fp32); on an Intel Xeon (fp32) over-prompting at 300 / naive at 800.
"""

import pandas as pd
import pytest

from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment

CHECKPOINTS = [300, 400, 500, 600]
RAW_PROMPTS_AT_DELTA_C_04 = [
    "data.color_separation=0.4",  # concept-space-tiny's, where this was measured (the preset's 0.2 learns slower)
    "model.prompt_shift=0.0",  # the paper's input: raw prompt values
    "model.prompt_scale=1.0",
]


@pytest.mark.slow
def test_over_prompting_reaches_the_held_out_class_before_naive_prompting(tmp_path, naive_and_over_prompting_at):
    cfg = load_config("hidden-emergence-tiny", RAW_PROMPTS_AT_DELTA_C_04 + naive_and_over_prompting_at(CHECKPOINTS))
    summary = run_experiment(cfg, tmp_path / "hidden", progress=False)
    target = summary["emergence"]["targets"]["11"]
    emerged = target["emergence_step"]
    scores = _held_out_scores(tmp_path / "hidden")
    capability, behavior = emerged["over_prompting"], emerged["naive"]
    assert capability is not None, scores  # the capability appears within the run ...
    assert behavior is None or behavior > capability, (emerged, scores)  # ... before the behavior
    at = CHECKPOINTS.index(int(capability))
    assert scores["naive"][at] <= scores["over_prompting"][at] - 0.25, scores  # and not as a tie


def _held_out_scores(run) -> dict[str, list[float]]:
    """Held-out score at each of CHECKPOINTS per intervention, from the run's emergence table."""
    table = pd.read_parquet(run / "emergence.parquet")
    table = table[table["target"].astype(str) == "11"].sort_values("step")
    assert table["step"].drop_duplicates().tolist() == CHECKPOINTS, table
    return {name: group["score"].tolist() for name, group in table.groupby("intervention")}
