"""Test order for two xdist workers (`make test`: `-n 2 --dist load --maxschedchunk 1`): the findings tests take
minutes each, everything else seconds. xdist hands each worker the next two tests first, then one at a time, so the
findings tests go first in an order that splits them evenly — worker 1: color-first (≈250 s at one thread) +
composition (≈86 s); worker 2: size-first (≈186 s) + hidden capability (≈162 s); then commitment order (≈83 s)
and the rest to whichever is free. Serial runs are unaffected apart from the order."""

FIRST = [
    "test_larger_concept_signal_is_learned_first[concept-signal-color-first-tiny-color-size]",
    "test_composition_generalizes_where_interpolation_fails",
    "test_larger_concept_signal_is_learned_first[concept-signal-size-first-tiny-size-color]",
    "test_over_prompting_reveals_the_held_out_class_before_naive_prompting",
    "test_wall_hue_commits_before_shape_under_all_three_measures",
]


def pytest_collection_modifyitems(session, config, items):
    """Findings tests first (those named in FIRST in that order, any others after them), the rest as collected."""
    def rank(item) -> int:
        if "/findings/" not in item.path.as_posix():
            return len(FIRST) + 1
        return FIRST.index(item.name) if item.name in FIRST else len(FIRST)

    items.sort(key=rank)  # stable
