"""The self-contained report.html of a micro run and of a micro sweep, parsed with html.parser: every figure
embedded as base64, tables non-empty, the samples slider has one frame per checkpoint, nothing is fetched."""

import base64
import json
import re
from html.parser import HTMLParser

import pytest

from conceptlab.report.html import write_run_report, write_sweep_report


# `make test` (--dist loadgroup): one worker builds report/conftest.py's session-scoped runs, once
pytestmark = pytest.mark.xdist_group("report-micro")


class Page(HTMLParser):
    """The parts of a report the tests look at: images, tables (rows per body), links, scripts, sections."""

    def __init__(self):
        super().__init__()
        self.images, self.links, self.sections, self.tables, self.sliders = [], [], [], [], []
        self.external = []
        self._in_tbody = False
        self._json = None
        self.frames = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a)
        if tag == "a":
            self.links.append(a.get("href", ""))
        if tag == "section":
            self.sections.append(a.get("id"))
        if tag == "table":
            self.tables.append({"name": a.get("data-name"), "sortable": "sortable" in a.get("class", ""), "rows": 0})
        if tag == "tbody":
            self._in_tbody = True
        if tag == "tr" and self._in_tbody:
            self.tables[-1]["rows"] += 1
        if tag == "input" and a.get("type") == "range":
            self.sliders.append(a)
        if tag == "script" and a.get("type") == "application/json":
            self._json = ""
        for key in ("src", "href"):
            value = a.get(key, "")
            if value.startswith(("http:", "https:", "//")) or (tag in ("script", "link") and key in a):
                self.external.append(value)

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_tbody = False
        if tag == "script" and self._json is not None:
            self.frames.append(json.loads(self._json))
            self._json = None

    def handle_data(self, data):
        if self._json is not None:
            self._json += data


def parse(path):
    page = Page()
    page.feed(path.read_text())
    return page


def _png(uri):
    assert uri.startswith("data:image/png;base64,")
    return base64.b64decode(uri.split(",", 1)[1]).startswith(b"\x89PNG")


@pytest.mark.slow
def test_run_report_embeds_every_figure_and_has_non_empty_sortable_tables(micro_run):
    report = micro_run / "report.html"
    assert report.is_file()  # written by the run driver at the end of the run
    page = parse(report)
    figures = sorted(p.name for p in (micro_run / "figures").glob("*.png"))
    embedded = sorted(i["alt"] for i in page.images if i["alt"].endswith(".png"))
    assert embedded == figures == ["accuracy.png", "concept_space.png", "loss.png", "samples.png"]
    assert all(_png(i["src"]) for i in page.images)
    assert {"headline", "figures", "tables", "samples", "config", "summary", "provenance"} <= set(page.sections)
    names = {t["name"] for t in page.tables}
    assert {"headline", "learning_times", "concept_space"} <= names
    assert all(t["rows"] > 0 and t["sortable"] for t in page.tables)
    # samples by checkpoint: a slider over the two checkpoints, a PNG frame each
    (slider,) = page.sliders
    assert slider["max"] == "1" and [f["step"] for f in page.frames[0]] == [10, 20]
    assert all(_png(f["src"]) for f in page.frames[0])
    # vector versions linked relatively, nothing external
    assert "figures/accuracy.pdf" in page.links and (micro_run / "figures" / "accuracy.pdf").is_file()
    assert page.external == []
    text = report.read_text()
    assert "blue small" in text and "train_seed" in text  # class names and the config


@pytest.mark.slow
def test_sweep_report_lists_every_run_with_a_link_to_its_report(micro_sweep):
    report = micro_sweep / "report.html"
    assert report.is_file()  # written by run_sweep
    page = parse(report)
    runs = next(t for t in page.tables if t["name"] == "runs")
    assert runs["rows"] == 2
    run_links = [h for h in page.links if h.endswith("/report.html")]
    assert len(run_links) == 2 and all((micro_sweep / h).is_file() for h in run_links)
    assert all(t["rows"] > 0 for t in page.tables) and page.external == []
    assert "color_separation" in report.read_text()


MARKER = "<p>not a report: left by test_reports_are_rewritten_by_the_library_functions</p>"
WRITTEN = re.compile(r"written \d{4}-\d{2}-\d{2} \d{2}:\d{2}")  # the one part of a page that changes on a rewrite


@pytest.mark.slow
def test_reports_are_rewritten_by_the_library_functions(micro_run, micro_sweep):
    # each report, as the run driver / run_sweep wrote it, replaced by a marker: the function must write it anew,
    # the same page but for the minute it was written at
    for folder, write in ((micro_run, write_run_report), (micro_sweep, write_sweep_report)):
        report = folder / "report.html"
        original = report.read_text()
        report.write_text(MARKER)
        try:
            assert write(folder) == report
            text = report.read_text()
            assert MARKER not in text and text.startswith("<!DOCTYPE html>"), text[:200]
            assert WRITTEN.sub("", text) == WRITTEN.sub("", original), folder.name
        finally:
            if report.read_text() == MARKER:  # not rewritten: the other tests read the fixture's report
                report.write_text(original)
    page = parse(micro_run / "report.html")
    assert sorted(i["alt"] for i in page.images if i["alt"].endswith(".png")) == [
        "accuracy.png", "concept_space.png", "loss.png", "samples.png"]
    page = parse(micro_sweep / "report.html")
    assert next(t for t in page.tables if t["name"] == "runs")["rows"] == 2


def test_a_run_without_summary_has_no_report(tmp_path):
    with pytest.raises(FileNotFoundError, match="has not finished"):
        write_run_report(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a sweep folder"):
        write_sweep_report(tmp_path)
