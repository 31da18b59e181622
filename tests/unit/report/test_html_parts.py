"""The report's building blocks: headline fields, escaped sortable tables, sample frames by checkpoint."""

import json
import base64

import pandas as pd
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
