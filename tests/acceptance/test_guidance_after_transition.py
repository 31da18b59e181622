"""Finding 5 (Park et al. 2024): classifier-free guidance does not help before the capability transition.

One CI-sized run of the shipped hidden-guidance-tiny preset (10% label dropout; seed 0, its 1,000 training steps,
evaluated at steps 200, 300, 600 and 1,000 with naive prompting, over-prompting along color as the capability
probe, and CFG at the preset's scales w = 1, 3), eliciting the held-out class 11 and, as a control, the training
class 00 (the one sharing no concept value with it). "CFG helps" at a checkpoint means its best scale scores ≥ 0.1
above the naive prompt; a checkpoint is *before the transition* when it comes before over-prompting first scores
0.5 and over-prompting's Wilson upper bound there is under 0.5 (the capability is clearly not there; a score near
0.5 is within the noise of 48 generations; at 48 generations the bound is under 0.5 up to a score of 0.35). The test
fails unless
- the first checkpoint is before the transition and over-prompting reaches the class (score ≥ 0.5) at a later one:
  the run spans the transition (where it does not, the finding cannot be read on it, and the test fails rather than
  pass vacuously);
- CFG does not help at any checkpoint before the transition;
- the control: at every checkpoint CFG produces the training class 00 not clearly worse than naive prompting does
  (CFG's Wilson upper bound at least naive prompting's lower bound: a loose bound, about 2.8 standard deviations of
  the difference; at step 200 on seed 0, naive 0.66, it passes CFG down to about 0.38, and near 1 it allows about
  0.15) and at the last one with a score ≥ 0.9, so its failure on the held-out class is that class's, not a
  guidance that produces nothing (a CFG scoring 0 on class 00 fails both; without the control the test would pass
  on a broken CFG).

On seed 0 (one thread, the way every invocation runs it) the one checkpoint before the transition is step 200
(over-prompting 0.10; at 300 it scores 0.40, upper bound 0.54, within reach of the bar): the claim is read at the
start of the capability's approach, where CFG scores 0.00 on the held-out class and 0.80 on class 00 (naive 0.66).

What this test does not rule out: a CFG that ignored its scale (sampling the plain conditional model) would pass
it too — the training class 00 comes out of conditional sampling, and "no help before the transition" holds
where CFG never helps. That the scale reaches the sampler and combines the two predictions is tested apart, in the
unit tests `models/test_diffusion.py::test_guidance_zero_is_conditional_and_needs_null_prompt_otherwise` (at w = 2
the output is 3·cond − 2·uncond) and `interventions/test_interventions.py::
test_batching_groups_guidance_scales_and_chunks_without_changing_shapes` (the CFG variant's images at w = 2 differ
from those at w = 0).

That CFG then *helps* after the transition is the finding's seed-dependent half: the findings suite reports it on
fresh seeds (`cfg-helps-after`, mixed: 1 of 3 on the bf16 records, docs/findings.md), so this one-seed test does
not assert it.

Why these checkpoints and this reading (2026-12-07, session 49; docs/findings-suite.md, "The findings tests under
other seeds and thread counts"). Until then the test read steps 300, 600, 800 and 1,000, asked over-prompting's
Wilson lower bound to be under 0.5 at step 300 and to rise by ≥ 0.2 over the run, and CFG to help only where
over-prompting scored ≥ 0.5 — set on seed 0, where it held at one thread. It failed elsewhere: run alone at two
threads on an AMD EPYC Zen 4 (bf16), seed 0's trajectory had no transition by step 1,000 (over-prompting 0.20 → 0.37
→ 0.32); at seed 1, two threads, CFG helped at step 600 (0.46 against naive 0.26) where over-prompting scored 0.49,
within the noise of the 0.5 bar; and three of the six recorded runs of the preset (seeds 103–105 and three earlier)
would have failed its rise, their over-prompting already at 0.51–0.64 at step 300. Read every 100 steps from 200
(seeds 0–2 at one thread, seeds 1–2 at two; bf16 on the Zen 4), over-prompting was 0.03–0.13 at step 200 (0.07–0.21
in the six records) and reached 0.5 at steps 600–700 (300–800 in the records), and CFG helped at no checkpoint
before the transition as read here, in any of them or of the six records (24 generations); CFG on class 00 at step
200 scored 0.45–0.93, never more than 0.04 under naive prompting (a difference of two 48-generation scores near 0.5
has a standard deviation of about 0.1, hence the control's Wilson bounds rather than a fixed slack). The transition
read on a point score instead (the suite's `cfg-no-help-before`) would fail seed 1 at two threads, at the one
checkpoint where over-prompting sat at 0.49. The reading here would still fail seed 0 at two threads (inferred from
that run's reads at 300–1,000: no score ≥ 0.5 to read a transition from); at one thread, which the findings tests
now take in every invocation (tests/acceptance/conftest.py), seed 0 passes.
"""

import pandas as pd
import pytest

from conceptlab.analysis.emergence import wilson_interval
from conceptlab.experiments.loading import load_config
from conceptlab.experiments.runner import run_experiment

CHECKPOINTS = [200, 300, 600, 1000]
HELD_OUT, TRAINED = "11", "00"
HELPS = 0.1  # CFG's best scale above the naive prompt
CONTROL_LAST = 0.9  # CFG's score on the training class at the last checkpoint


@pytest.mark.slow
def test_guidance_does_not_help_before_over_prompting_reaches_the_held_out_class(tmp_path, naive_and_over_prompting_at):
    cfg = load_config("hidden-guidance-tiny", naive_and_over_prompting_at(CHECKPOINTS)
                      + [f'eval.interventions.targets=["{HELD_OUT}","{TRAINED}"]'])
    assert cfg.train.steps == load_config("hidden-guidance-tiny").train.steps  # the preset's full length
    run_experiment(cfg, tmp_path / "guidance", progress=False)
    table = pd.read_parquet(tmp_path / "guidance" / "emergence.parquet")
    table["target"] = table["target"].astype(str)
    best = table.pivot_table(index=["target", "step"], columns="intervention", values="score")  # best variant
    scores, control = best.loc[HELD_OUT], best.loc[TRAINED]
    assert scores.index.tolist() == CHECKPOINTS == control.index.tolist(), best
    n = cfg.eval.interventions.samples
    reached = [s for s in CHECKPOINTS if scores.loc[s, "over_prompting"] >= 0.5]
    assert reached, best  # over-prompting reaches the class within the run ...
    before = [s for s in CHECKPOINTS if s < reached[0] and wilson_interval(scores.loc[s, "over_prompting"], n)[1] < 0.5]
    assert CHECKPOINTS[0] in before, best  # ... after a first checkpoint clearly before it
    helps = scores["cfg"] >= scores["naive"] + HELPS
    assert not helps[before].any(), (before, best)  # before the transition CFG does not help ...
    # ... though at every checkpoint it produces a training class not clearly worse than naive prompting does
    cfg_upper = wilson_interval(control["cfg"].to_numpy(), n)[1]
    naive_lower = wilson_interval(control["naive"].to_numpy(), n)[0]
    assert (cfg_upper >= naive_lower).all(), best
    assert control.loc[CHECKPOINTS[-1], "cfg"] >= CONTROL_LAST, best
