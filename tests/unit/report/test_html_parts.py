"""The report's building blocks: headline fields, escaped sortable tables, sample frames by checkpoint."""

import base64
import json
import os

import pandas as pd
import pytest
import torch

from conceptlab.report.html import flatten, headline, sample_frames, table_html


def test_headline_picks_the_numbers_a_reader_looks_at_first():
    summary = {"final_step": 20, "parameters": 7, "learning_time": {"train/color": 300, "held_out/color": None},
               "provenance": {"git_commit": "abc"}, "seconds": {"train": 1.0, "total": 2.5},
               "emergence": {"targets": {"11": {"name": "blue small", "emergence_step": {"naive": 700.0}}}}}
    h = headline(summary)
    assert list(h)[:2] == ["final_step", "parameters"]
    assert h["learning_time.train/color"] == 300 and h["seconds.total"] == 2.5
    assert h["emergence.targets.11.emergence_step.naive"] == 700.0
    assert "provenance.git_commit" not in h and "seconds.train" not in h
    assert flatten({"a": {"b": [1, 2]}}) == {"a.b": "1, 2"}


def test_tables_escape_text_and_carry_sort_values():
    frame = pd.DataFrame({"name": ["<b>x</b>", "y"], "value": [0.123456, float("nan")]})
    out = table_html(frame, "t")
    assert "&lt;b&gt;x&lt;/b&gt;" in out and "<b>x</b>" not in out
    assert 'data-v="0.123456"' in out and ">0.1235<" in out and ">—<" in out
    assert table_html(pd.DataFrame({"a": range(5)}), "t", max_rows=2).count("<tr>") == 3  # head + 2 rows
    assert "first 2 of 5 rows" in table_html(pd.DataFrame({"a": range(5)}), "t", max_rows=2)


def test_sample_frames_one_png_per_checkpoint_with_parts_as_rows():
    tensors = {"step_0000020/train": torch.zeros(2, 1, 8, 8, dtype=torch.uint8),
               "step_0000020/held_out": torch.full((1, 1, 8, 8), 255, dtype=torch.uint8),
               "step_0000010/train": torch.zeros(2, 1, 8, 8, dtype=torch.uint8),
               "not_a_step": torch.zeros(3)}
    frames, parts = sample_frames(tensors)
    assert [f["step"] for f in frames] == [10, 20] and parts == ["train", "held_out"]
    png = base64.b64decode(frames[1]["src"].split(",", 1)[1])
    assert png.startswith(b"\x89PNG")
    from io import BytesIO

    from PIL import Image

    image = Image.open(BytesIO(png))
    scale = 48 // 8
    assert image.size == ((2 * 9 + 1) * scale, (2 * 9 + 1) * scale)  # 2 columns, 2 rows (one per part)
    floats, _ = sample_frames({"step_0000001": torch.rand(4, 3, 16, 16)})
    assert len(floats) == 1


def test_claims_section_lists_each_verdict_and_is_empty_without_a_controls_report(tmp_path):
    from conceptlab.report.html import claims_html

    assert claims_html(tmp_path / "controls_claims.json") == ""
    claims = {"seeds": [100, 101, 102], "settings_seeds": [0, 1], "claims": [
        {"name": "additive-beyond-map", "statement": "more additive than <a random map>", "control": "encoding_map",
         "direction": "greater", "margin": 0.05, "passed": 0, "of": 3, "verdict": "not reproduced",
         "restated": "as additive as the map"},
        {"name": "departs", "statement": "departs", "control": None, "direction": "holds", "margin": None,
         "passed": 3, "of": 3, "verdict": "reproduced", "restated": None}]}
    (tmp_path / "controls_claims.json").write_text(json.dumps(claims))
    page = claims_html(tmp_path / "controls_claims.json")
    assert "Report seeds 100, 101, 102; settings chosen on 0, 1." in page
    assert page.count("<tr>") == 3  # header + two claims
    assert "not reproduced" in page and "0/3" in page and "3/3" in page and "as additive as the map" in page
    assert "&lt;a random map&gt;" in page  # statements are escaped


def _runs_table(page: str) -> tuple[list[str], list[list[str]]]:
    """The sweep report's runs table: header and rows as cell texts."""
    import re

    part = page[page.index('data-name="runs"'):]
    part = part[:part.index("</table>")]
    head = re.findall(r"<th>(.*?)</th>", part)
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)]
            for r in re.findall(r"<tr>(.*?)</tr>", part.split("<tbody>", 1)[1])]
    return head, rows


def _sweep(tmp_path, runs: dict[str, tuple[dict | None, dict | None]]):
    """A sweep folder: run id → (summary or None, status or None), in manifest order."""
    manifest = {"sweep": "t", "runs": [{"run_id": r, "values": {"train.train_seed": k}} for k, r in enumerate(runs)]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    for run_id, (summary, status) in runs.items():
        (tmp_path / run_id).mkdir()
        if summary is not None:
            (tmp_path / run_id / "summary.json").write_text(json.dumps(summary))
        if status is not None:
            (tmp_path / run_id / "status.json").write_text(json.dumps(status))
    return tmp_path


def _emergence_summary(step: float, held_out_color: int | None = None) -> dict:
    return {"final_step": 1000, "checkpoints": 10, "parameters": 486508,
            "learning_time": {"train/color": 300, "held_out/color": held_out_color, "train/size": 200, "held_out/size": 600},
            "final_accuracy": {f"{c}/{k}": 1.0 for c in ("00", "01", "10", "11") for k in ("color", "size")},
            "emergence": {"targets": {"11": {"name": "blue small", "capability_gap": 200.0, "turn": {"step": 600.0},
                                             "emergence_step": {"naive": step, "over_prompting": step - 200,
                                                                "embedding_shift": None, "patching": None},
                                             "final_score": {"naive": 0.3, "over_prompting": 0.7}}}},
            "seconds": {"total": 12.5}}


@pytest.mark.parametrize("first", ["failed", "done"])
def test_sweep_runs_table_shows_every_finished_runs_headline_including_the_emergence_numbers(tmp_path, first):
    """Whether the first run failed or finished, the headline columns come from the runs that finished, and a
    hidden-emergence sweep's emergence steps, capability gap and turn are among them (not crowded out by the
    final accuracies)."""
    from conceptlab.report.html import sweep_report_html

    a = (None, {"state": "failed"}) if first == "failed" else (_emergence_summary(900.0), None)
    root = _sweep(tmp_path, {"a": a, "b": (_emergence_summary(800.0), {"state": "done"}),
                             "c": (_emergence_summary(700.0), None)})
    head, rows = _runs_table(sweep_report_html(root))
    for key in ("learning_time.train/color", "final_accuracy.11/size", "emergence.targets.11.emergence_step.naive",
                "emergence.targets.11.emergence_step.over_prompting", "emergence.targets.11.capability_gap",
                "emergence.targets.11.turn.step", "seconds.total"):
        assert key in head, key
    assert "parameters" not in head  # the same in every run: in each run's own report
    naive = head.index("emergence.targets.11.emergence_step.naive")
    assert [r[naive] for r in rows] == ["—" if first == "failed" else "900", "800", "700"]
    assert [r[head.index("state")] for r in rows] == [first, "done", "done"]


def test_sweep_columns_are_the_union_over_finished_runs_in_headline_order():
    from conceptlab.report.html import SWEEP_PER_PATTERN, sweep_columns

    shown, left_out = sweep_columns([{}, {"seconds.total": 1.0, "learning_time.b": 3},
                                     {"final_step": 5, "learning_time.a": 2, "parameters": 7}])
    assert shown == ["final_step", "learning_time.b", "learning_time.a", "seconds.total"] and left_out == 0
    many = {f"final_accuracy.{i:02d}/color": 1.0 for i in range(SWEEP_PER_PATTERN + 3)}
    shown, left_out = sweep_columns([{**many, "emergence.targets.11.capability_gap": 4.0}])
    assert len(shown) == SWEEP_PER_PATTERN + 1 and left_out == 3
    assert shown[-1] == "emergence.targets.11.capability_gap"


def test_a_run_whose_status_says_done_without_a_summary_or_whose_worker_died_reads_interrupted(tmp_path):
    """status.json "done" but no summary.json (a torn finish) and "running" by a process of this host that is gone:
    the sweep report is written all the same, both rows read interrupted, as `sweep status` shows them."""
    import socket
    import subprocess
    import sys

    from conceptlab.experiments.sweep_state import run_state
    from conceptlab.report.html import sweep_report_html

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = socket.gethostname()
    root = _sweep(tmp_path, {"torn": (None, {"state": "done"}),
                             "dead": (None, {"state": "running", "host": host, "pid": gone.pid}),
                             "alive": (None, {"state": "running", "host": host, "pid": os.getpid()}),
                             "elsewhere": (None, {"state": "running", "host": host + "-other", "pid": gone.pid}),
                             "slurm": (None, {"state": "running", "host": host, "pid": gone.pid, "slurm_job": "7"}),
                             "badpid": (None, {"state": "running", "host": host, "pid": "abc"}),
                             "garbled": (None, None), "ok": (_emergence_summary(800.0), None)})
    (root / "garbled" / "status.json").write_text("{not json")
    head, rows = _runs_table(sweep_report_html(root))
    states = {r[head.index("run")]: r[head.index("state")] for r in rows}
    assert states == {"torn": "interrupted", "dead": "interrupted", "alive": "running", "elsewhere": "running",
                      "slurm": "running", "badpid": "interrupted", "garbled": "pending", "ok": "done"}
    for run_id, state in states.items():  # the same states `sweep status` shows
        assert run_state(root / run_id)[0] == state, run_id


def test_integers_print_as_integers_beside_floats():
    from conceptlab.report.html import _key_values

    out = _key_values({"parameters": 486508, "x": 0.5, "steps": 20000.0, "flag": True}, "headline")
    assert ">486508<" in out and ">0.5<" in out and ">20000<" in out and ">True<" in out
    assert "e+05" not in out and "e+04" not in out


def test_a_sweep_column_with_a_missing_value_keeps_its_integers(tmp_path):
    from conceptlab.report.html import sweep_report_html

    root = _sweep(tmp_path, {"b": (_emergence_summary(800.0), None), "c": (_emergence_summary(700.0, 12345), None)})
    head, rows = _runs_table(sweep_report_html(root))
    assert [r[head.index("learning_time.held_out/color")] for r in rows] == ["—", "12345"]


def test_a_torn_summary_is_a_row_that_says_so_and_the_other_runs_are_reported(tmp_path):
    """A run whose summary.json is there but not JSON (a torn write) does not take the sweep report down: its row
    reads "done (summary unreadable)", a line names the file, the other runs keep their numbers."""
    from conceptlab.report.html import UNREADABLE, sweep_report_html

    root = _sweep(tmp_path, {"torn": (None, None), "ok": (_emergence_summary(800.0), None)})
    (root / "torn" / "summary.json").write_text('{"learning')
    page = sweep_report_html(root)
    head, rows = _runs_table(page)
    assert [r[head.index("state")] for r in rows] == [UNREADABLE, "done"]
    assert [r[head.index("emergence.targets.11.emergence_step.naive")] for r in rows] == ["—", "800"]
    assert f"{root / 'torn' / 'summary.json'} is not valid JSON" in page and "cannot be read" in page
