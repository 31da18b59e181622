"""Test layout and order.

The tests mirror the package: `unit/` (one module or function at a time, seconds; `make test-fast`), `integration/`
(whole runs, sweeps, the CLI and plug-ins on micro presets) and `acceptance/` (the findings, at CI size; minutes
each). Each test gets the marker of its folder (`-m unit`, `-m "not acceptance"`).

Order for two xdist workers (`make test`: `-n 2 --dist loadgroup --maxschedchunk 1`; a module marked
`xdist_group` runs on one worker, so its module- or session-scoped runs are built once: every module with such a
fixture is marked, and tests/integration/test_test_harness.py checks that the installed pytest-xdist honours the
marks): the findings tests take minutes each, everything else seconds. xdist deals each worker two tests first,
in turn (the 1st and 3rd to one worker, the 2nd and 4th to the other), then queues the next test on the worker
whose running test ends first, so the findings (acceptance) tests go first in an order that splits them evenly.
A `make test` timeline on a 2-core AMD EPYC with native bf16 (2026-12-07; seconds at one thread, an fp32 CPU takes
about twice as long):

- worker 1: guidance after the transition (251: 1,000 steps, CFG doubles sampling), then hierarchy (162), then
  composition (56);
- worker 2: the underspecification twins (138), color-first (86), size-first (91), hidden capability (107), torus
  (82);
- the rest to whichever is free; neither worker idled between tests. The shared concept probe (≈ 28 s at one
  thread) is trained by the first run to *evaluate* (after its training): here the underspecification twin's, at
  ≈ 40 s, while guidance was still training, so no test waits on the probe's lock. Two tests whose evaluations
  began together would leave one waiting with a core idle; keep the first evaluations apart.

Serial runs are unaffected apart from the order.

`CONCEPTLAB_TEST_TIMELINE=DIR` records when each test starts and ends, per worker (`DIR/<worker>.jsonl`, rewritten
by each run: use an empty DIR, as a run with fewer workers leaves the others' files);
`scripts/test_timeline.py DIR` reads it back (each worker's busy time and gaps, the long tests in order, the time per
module): how the order above was checked."""

import json
import os
import time

import pytest

# Figures as PNG only (no PDF beside each): a PDF with embedded fonts costs ≈ 0.3 s a figure, ≈ 2 s of every small
# run's summary and ≈ 10% of `make test` (2026-12-07); set here, before any test, so that subprocesses (the CLI
# tests, SLURM tasks) inherit it. The tests whose subject is the vector files set it back (`vector_figures`).
os.environ["CONCEPTLAB_VECTOR_FIGURES"] = ""  # whatever the caller's shell exports
# Runs draw no figures (CONCEPTLAB_FIGURES=none) but in the tests whose subject they are (`figures` fixture) and the
# findings tests: a micro run's summary takes 0.96 s with its figures and 0.15 s without (bench/figures.py --sides
# none); the summaries of `make test`'s ≈ 165 runs took 208 CPU-seconds with figures, 59.5 without (2026-12-07,
# docs/benchmarks.md, "Runs draw no figures in the tests").
os.environ["CONCEPTLAB_FIGURES"] = "none"

TIMELINE_ENV = "CONCEPTLAB_TEST_TIMELINE"
_timeline = None

LAYERS = ("unit", "integration", "acceptance")
FIRST = [
    "test_guidance_does_not_help_before_over_prompting_reaches_the_held_out_class",
    "test_masked_color_prompts_hide_the_held_out_class_from_naive_prompting_but_not_from_over_prompting",
    "test_three_level_hierarchy_commits_in_signal_order_under_every_measure",
    "test_larger_concept_signal_is_learned_first[concept-signal-color-first-tiny-color-size]",
    "test_larger_concept_signal_is_learned_first[concept-signal-size-first-tiny-size-color]",
    "test_over_prompting_reaches_the_held_out_class_before_naive_prompting",
    "test_composition_generalizes_where_interpolation_fails",
    "test_the_representation_becomes_a_torus_and_its_code_is_factorized_beyond_untrained_and_pixels",
]

EARLY = ("test_gpu_scale_preset_runs_end_to_end_on_the_cpu",)  # ≈ 2 min over its presets, one test each


def _mark(nodeid: str, event: str) -> None:
    global _timeline
    folder = os.environ.get(TIMELINE_ENV)
    if not folder:
        return
    if _timeline is None:
        os.makedirs(folder, exist_ok=True)
        _timeline = open(os.path.join(folder, os.environ.get("PYTEST_XDIST_WORKER", "main") + ".jsonl"), "w")
    _timeline.write(json.dumps({"test": nodeid, "event": event, "time": time.time()}) + "\n")
    _timeline.flush()


def pytest_addoption(parser):
    parser.addoption(
        "--findings-seed", type=int, default=None, metavar="SEED",
        help="run the findings tests (tests/acceptance) on this seed instead of their own: every config they load gets "
        "data.data_seed=SEED and train.train_seed=SEED (a robustness check across seeds; their thresholds were set "
        "on their own seed, docs/findings-suite.md)",
    )


def pytest_runtest_logstart(nodeid, location):
    """With CONCEPTLAB_TEST_TIMELINE set: the test's start (in a worker: when it starts running there)."""
    _mark(nodeid, "start")


def pytest_runtest_logfinish(nodeid, location):
    _mark(nodeid, "end")


def pytest_sessionfinish(session, exitstatus):
    global _timeline
    if _timeline is not None:
        _timeline.close()
        _timeline = None


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


@pytest.fixture
def figures(monkeypatch):
    """Runs draw their figures, as outside the tests (this conftest switches them off)."""
    monkeypatch.delenv("CONCEPTLAB_FIGURES", raising=False)


@pytest.fixture
def vector_figures(monkeypatch, figures):
    """Figures written with their PDF beside them, as outside the tests (this conftest switches PDFs off)."""
    monkeypatch.delenv("CONCEPTLAB_VECTOR_FIGURES", raising=False)


# -- a CelebA folder in the official layout, for the `celeba` data kind's tests ----------------------------------------
@pytest.fixture(scope="session")
def fake_celeba():
    """`conceptlab.data.celeba.write_drawn_celeba` (call it with a folder and per-class counts)."""
    from conceptlab.data.celeba import write_drawn_celeba

    return write_drawn_celeba
