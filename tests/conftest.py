"""Test order for two xdist workers (`make test`: `-n 2 --dist load --maxschedchunk 1`): the findings tests take
minutes each, everything else seconds. xdist hands each worker two tests first, then queues the next test on the
worker whose running test ends first, so the findings tests go first in an order that splits them evenly (seconds
at one thread, measured in one CI run on an Intel Xeon without native bf16; on an AMD EPYC with it every
findings test takes 0.3–0.4 of that):

- worker 1: color-first (≈170, plus ≈33 training the shared concept probe) + underspecification twins (≈150);
- worker 2: commitment-order hierarchy (≈165, no concept probe) + size-first (≈170; it asks for the probe after
  ≈110 s of training, when worker 1 has cached it — started together, one of the two finding-1 tests used to wait
  ≈30 s on the probe's lock with a core idle);
- then hidden capability (≈77 at 300 steps; now 600 steps and 4 checkpoints, est. ≈170) on worker 2,
  composition (≈72) on worker 1, and the rest to whichever is free.

The finding-1 tests have since gone from 15 checkpoints to 8 (est. ≈140 each). Serial runs are unaffected
apart from the order."""

FIRST = [
    "test_larger_concept_signal_is_learned_first[concept-signal-color-first-tiny-color-size]",
    "test_masked_color_prompts_hide_the_held_out_class_from_naive_prompting_but_not_from_over_prompting",
    "test_three_level_hierarchy_commits_in_signal_order_under_every_measure",
    "test_larger_concept_signal_is_learned_first[concept-signal-size-first-tiny-size-color]",
    "test_over_prompting_reaches_the_held_out_class_before_naive_prompting",
    "test_composition_generalizes_where_interpolation_fails",
]


def pytest_collection_modifyitems(session, config, items):
    """Findings tests first (those named in FIRST in that order, any others after them), the rest as collected."""
    def rank(item) -> int:
        if "/findings/" not in item.path.as_posix():
            return len(FIRST) + 1
        return FIRST.index(item.name) if item.name in FIRST else len(FIRST)

    items.sort(key=rank)  # stable
