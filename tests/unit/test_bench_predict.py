"""The run-time predictor of bench/predict_run_time.py extends the evaluation linearly in the sampler's steps from
warm timings at 1 and 2 steps: a measurement's first-call cost (allocator, kernels, the patching reference's load),
which a run pays once, is not taken for a per-step cost."""

from __future__ import annotations

import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


class _Measurement:
    """Costs `first` seconds more on its first call, then `per_step` seconds per sampler step."""

    name, every = "interventions", None

    def __init__(self, steps: int, first: float = 0.3, per_step: float = 0.05):
        self.steps, self.first, self.per_step, self.calls = steps, first, per_step, 0

    def measure(self, _checkpoint) -> None:
        self.calls += 1
        time.sleep(self.per_step * self.steps + (self.first if self.calls == 1 else 0.0))


def test_the_evaluation_at_full_steps_is_a_fixed_part_plus_the_warm_per_step_cost(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    for name in ("predict_run_time", "benchlib"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import predict_run_time

    monkeypatch.setattr(predict_run_time, "measurements",
                        lambda preset, overrides, k, scratch: (None, None, None, [_Measurement(k)], None))
    terms = predict_run_time.predict("micro", ["diffusion.sample_steps=20"], 1)
    # 0 s fixed + 0.05 s × 20 steps at the one evaluated checkpoint; a cold 2-step time would give about 7 s
    assert 0.8 < terms["evaluation"] < 1.8, terms
