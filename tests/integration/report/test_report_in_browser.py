"""The reports in a real browser: headless Chromium over the DevTools protocol renders a micro run's and a micro
sweep's report.html, screenshots go to the test's temporary folder, and the test fails on a console error, an
uncaught exception, an image that did not load, an empty table or any request outside the file itself. Sorting a
table and moving the samples slider are exercised too.

Without Chromium the test skips with the reason, except under CI (`CI=true`), where that is a failure: `.ci/run`
installs it (`scripts/chromium_install.sh`)."""

import os
import shutil

import pytest
from cdp_client import Browser, find_chromium
from typer.testing import CliRunner

from conceptlab.cli import app

CHECK = """(() => {
  const images = [...document.images];
  const tables = [...document.querySelectorAll('table')];
  return {
    images: images.length,
    broken: images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.alt),
    tables: tables.length,
    empty: tables.filter(t => !t.tBodies[0] || t.tBodies[0].rows.length === 0).map(t => t.dataset.name),
    sliders: document.querySelectorAll('.samples input[type=range]').length,
  };
})()"""

SORT = """(() => {
  const table = [...document.querySelectorAll('table.sortable')].find(t => t.tBodies[0].rows.length > 1);
  const th = table.tHead.rows[0].cells[0];
  th.click();
  const first = [...table.tBodies[0].rows].map(r => r.cells[0].textContent);
  th.click();
  const second = [...table.tBodies[0].rows].map(r => r.cells[0].textContent);
  return {asc: th.getAttribute('data-dir') === 'desc', reversed: JSON.stringify(first.slice().reverse()) === JSON.stringify(second), n: first.length};
})()"""

SLIDE = """(() => {
  const box = document.querySelector('.samples');
  const input = box.querySelector('input'), img = box.querySelector('img'), label = box.querySelector('.step');
  const last = img.src;
  input.value = 0; input.dispatchEvent(new Event('input'));
  return {changed: img.src !== last, label: label.textContent, loaded: img.complete};
})()"""


# `make test` (--dist loadgroup): one worker builds report/conftest.py's session-scoped runs, once
pytestmark = pytest.mark.xdist_group("report-micro")


@pytest.fixture(scope="module")
def chromium():
    found = find_chromium()
    if found is None:
        reason = "no Chromium on PATH (apt-get install chromium, or set CONCEPTLAB_CHROMIUM)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {reason}; .ci/run installs it with scripts/chromium_install.sh")
        pytest.skip(reason)
    return found


def _render(browser, report, shot):
    browser.open(report.as_uri())
    state = browser.evaluate(CHECK)
    browser.screenshot(shot)
    return state


@pytest.mark.slow
def test_run_and_sweep_reports_render_without_errors_in_chromium(chromium, micro_run, micro_sweep, synthetic_findings,
                                                                tmp_path):
    # the sweep as `sweep run` leaves it has no figure of its own; `conceptlab report` (on a copy: the fixture is
    # shared) adds the learning-time figure to its page, so the sweep's page shows an image that has to load
    reported = tmp_path / "reported-sweep"
    shutil.copytree(micro_sweep, reported)
    done = CliRunner().invoke(app, ["report", str(reported)])
    assert done.exit_code == 0, done.output
    pages = (("run", micro_run / "report.html", None), ("sweep", micro_sweep / "report.html", micro_sweep),
             ("reported-sweep", reported / "report.html", reported))
    with Browser(chromium, tmp_path / "profile") as browser:
        for name, report, sweep in pages:
            state = _render(browser, report, tmp_path / f"{name}.png")
            assert browser.errors() == [], f"{name} report: {browser.errors()}"
            outside = [u for u in browser.requests() if not u.startswith(("data:", report.as_uri()))]
            assert outside == [], f"{name} report fetched {outside}"
            assert state["broken"] == [], f"{name} report: images did not load: {state['broken']}"
            assert state["empty"] == [] and state["tables"] > 0, f"{name} report: empty tables {state['empty']}"
            if sweep is None:
                assert state["images"] >= 4
            else:  # a sweep's page shows exactly its figures: the PNGs at its top and under figures/
                figures = [*sweep.glob("*.png"), *sweep.glob("figures/*.png")]
                assert state["images"] == len(figures), (state, figures)
                assert sweep != reported or [p.name for p in figures] == ["concept_signal.png"], figures
            assert (tmp_path / f"{name}.png").stat().st_size > 10_000
            sort = browser.evaluate(SORT)
            assert sort["n"] > 1 and sort["reversed"], sort
            if name == "run":
                assert state["sliders"] == 1
                slide = browser.evaluate(SLIDE)
                assert slide["changed"] and slide["label"] == "step 10", slide
        # the findings report (`conceptlab findings`): verdict table, one section per finding, embedded figures
        report = synthetic_findings / "report.html"
        state = _render(browser, report, tmp_path / "findings.png")
        assert browser.errors() == [] and state["broken"] == [] and state["empty"] == [], state
        assert state["tables"] >= 3 and state["images"] >= 1, state  # verdicts, criteria, per seed; the figure
        outside = [u for u in browser.requests() if not u.startswith(("data:", report.as_uri()))]
        assert outside == [], outside
        # every run of the sweep: its own report, opened from the sweep's link
        for run_report in sorted(micro_sweep.glob("*/report.html")):
            state = _render(browser, run_report, tmp_path / f"sweep-run-{run_report.parent.name}.png")
            assert browser.errors() == [] and state["broken"] == [] and state["empty"] == []
