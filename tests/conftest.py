"""Test layout and order.

The tests mirror the package: `unit/` (one module or function at a time, seconds; `make test-fast`), `integration/`
(whole runs, sweeps, the CLI and plug-ins on micro presets) and `acceptance/` (the findings, at CI size; minutes
each). Each test gets the marker of its folder (`-m unit`, `-m "not acceptance"`).

Order for two xdist workers (`make test`: `-n 2 --dist loadgroup --maxschedchunk 1`; a module marked
`xdist_group` runs on one worker, so its module- or session-scoped runs are built once: every module with such a
fixture is marked, and tests/integration/test_test_harness.py checks that the installed pytest-xdist honours the marks): the findings tests take
minutes each, everything else seconds. xdist hands each worker two tests first, then queues the next test on the
worker whose running test ends first, so the findings (acceptance) tests go first in an order that splits them evenly (seconds
at one thread, measured in one `make test` on an AMD EPYC with native bf16; an Intel Xeon without it, in fp32,
took about 2.5× as long for the same tests):

- worker 1: guidance after the transition (≈131: 1,000 steps, CFG doubles sampling, and ≈17 of it training the
  shared concept probe) + underspecification twins (≈56), then composition (≈30);
- worker 2: commitment-order hierarchy (≈72, no concept probe) + color-first (≈54: it asks for the probe after the
  guidance test has cached it), then size-first (≈51) and hidden capability (≈62);
- the rest to whichever is free. Two tests that need the probe started together leave one waiting on the probe's
  lock with a core idle, hence the order.

Serial runs are unaffected apart from the order."""

import pytest

LAYERS = ("unit", "integration", "acceptance")
FIRST = [
    "test_guidance_helps_only_after_over_prompting_reaches_the_held_out_class",
    "test_masked_color_prompts_hide_the_held_out_class_from_naive_prompting_but_not_from_over_prompting",
    "test_three_level_hierarchy_commits_in_signal_order_under_every_measure",
    "test_larger_concept_signal_is_learned_first[concept-signal-color-first-tiny-color-size]",
    "test_larger_concept_signal_is_learned_first[concept-signal-size-first-tiny-size-color]",
    "test_over_prompting_reaches_the_held_out_class_before_naive_prompting",
    "test_composition_generalizes_where_interpolation_fails",
    "test_the_representation_becomes_a_torus_and_its_code_is_factorized_beyond_untrained_and_pixels",
]

EARLY = ("test_gpu_scale_preset_runs_end_to_end_on_the_cpu",)  # ≈ 2 min over its presets, one test each


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The precision runs used here, beside the durations: on a CPU without native bf16 the findings tests train in
    fp32 and take about twice as long (docs/benchmarks.md, "The test suite's cost")."""
    from conceptlab.train.precision import resolve_bf16, resolve_device

    device = resolve_device("auto")  # where runs with `train.device: auto` went
    if device.type != "cpu":
        line = f"conceptlab: runs (the findings tests among them) used {device.type}"
    elif resolve_bf16(None, device):
        line = "conceptlab: this CPU has native bf16, so runs (the findings tests among them) used bf16 autocast"
    else:
        line = ("conceptlab: this CPU has no native bf16, so runs (the findings tests among them) used fp32, about "
                "twice as long as under bf16 (docs/benchmarks.md, \"The test suite's cost\")")
    terminalreporter.write_line(line)


def pytest_collection_modifyitems(session, config, items):
    """Findings tests first (those named in FIRST in that order, any others after them), then the tests of
    `xdist_group` modules and the GPU-preset smoke test (the other large work units: a group runs on one worker as
    one unit, up to ≈ 2.5 min), then the rest as collected — so the tail of a run is small units both workers share
    (largest first). Measured on one machine the same day, 905 tests: 16 min 29 s with the groups as collected,
    15 min 33 s in this order."""
    def rank(item) -> int:
        if "/acceptance/" not in item.path.as_posix():
            early = item.get_closest_marker("xdist_group") is not None or item.name.startswith(EARLY)
            return len(FIRST) + (1 if early else 2)
        return FIRST.index(item.name) if item.name in FIRST else len(FIRST)

    for item in items:
        for layer in LAYERS:
            if f"/tests/{layer}/" in item.path.as_posix():
                item.add_marker(getattr(pytest.mark, layer))
    items.sort(key=rank)  # stable


# -- a CelebA folder in the official layout, for the `celeba` data kind's tests ----------------------------------------
@pytest.fixture(scope="session")
def fake_celeba():
    """`conceptlab.data.celeba.write_drawn_celeba` (call it with a folder and per-class counts)."""
    from conceptlab.data.celeba import write_drawn_celeba

    return write_drawn_celeba
