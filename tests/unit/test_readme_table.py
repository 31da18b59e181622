"""The README's findings table is generated (report.readme): headlines rendered from the evaluation, findings that
share a title grouped, the table written between the README's markers; the suite refuses a headline field that
names no criterion."""

from __future__ import annotations

import pytest
import yaml

from conceptlab.experiments.findings_spec import load_suite
from conceptlab.experiments.loading import ConfigError
from conceptlab.report.readme import BEGIN, END, ReadmeError, readme_table, render_headline, table_in, with_table


def _criterion(name, passed, values, seeds_failing=(), of=3):
    seeds = [{"seed": s, "passed": s not in seeds_failing} for s in (100, 101, 102)[:of]]
    return {"name": name, "passed": passed, "of": of, "seeds": seeds, "control": {"path": "x"}, "threshold": None,
            "values": values, "controls": {"n": 3, "mean": 0.5, "min": 0.4, "max": 0.6, "censored": 0}}


def _finding(name, title, headline, verdict="mixed", setup="fast", **extra):
    crit = [_criterion("first", 3, {"n": 3, "mean": 4333.3, "min": 4000, "max": 5000, "censored": 0}),
            _criterion("second-departs", 1, {"n": 1, "mean": 8000, "min": 8000, "max": 8000, "censored": 2},
                       seeds_failing=(101, 102)),
            _criterion("third-departs", 2, None, seeds_failing=(102,))]
    return {"name": name, "title": title, "headline": headline, "verdict": verdict, "setup": setup,
            "criteria": crit, "precision": ["bf16 autocast"], "see_also": [], **extra}


def test_a_headline_is_filled_from_its_criteria():
    f = _finding("a", "t", "first on {first} ({first:value} vs {first:control}); second fails on "
                           "{second-departs:failing}; third on {third-departs:failing}; weakest {*-departs}; {first:failing}")
    assert render_headline(f) == ("first on 3 of 3 (4,330 [4,000, 5,000] vs 0.5 [0.4, 0.6]); second fails on seeds "
                                  "101, 102; third on seed 102; weakest 1 of 3; no seed")
    assert render_headline({**f, "criteria": [], "headline": "no runs: {first}"}) == "no runs: —"


def test_findings_sharing_a_title_are_one_group_in_the_suites_order():
    result = {"findings": [
        _finding("fast-one", "larger signal first", "fast {first}"),
        _finding("other", "another finding", "x {first}", verdict="reproduced", see_also=["[h](docs/h.md)"]),
        _finding("paper-one", "larger signal first", "paper {first}", setup="paper"),
        _finding("untitled", None, "never shown"),
        _finding("analytic", "an analytic one", "y", precision=["analytic (no network)"]),
    ]}
    rows = readme_table(result).splitlines()
    assert rows[0] == "| finding (paper) | setup | verdict | headline | details |"
    assert rows[2] == "| larger signal first | fast | mixed | fast 3 of 3 | [findings](docs/findings.md#fast-one) |"
    assert rows[3] == "| the same | paper | mixed | paper 3 of 3 | [findings](docs/findings.md#paper-one) |"
    assert rows[4] == ("| another finding | fast | reproduced | x 3 of 3 | [findings](docs/findings.md#other), "
                       "[h](docs/h.md) |")
    assert rows[5].startswith("| an analytic one | analytic |") and len(rows) == 6


def test_the_table_goes_between_the_markers_and_nowhere_else():
    readme = f"# x\n\nbefore\n\n{BEGIN}\nold rows\n{END}\n\nafter\n"
    new = with_table(readme, "| new |")
    assert new == f"# x\n\nbefore\n\n{BEGIN}\n| new |\n{END}\n\nafter\n" and table_in(new) == "| new |"
    with pytest.raises(ReadmeError, match="no findings-table markers"):
        with_table("# no markers\n", "| new |")
    with pytest.raises(ReadmeError):
        with_table(f"{END}\n{BEGIN}\n", "| new |")


def _suite_with_headline(tmp_path, headline):
    data = {"runs": {"a": {"preset": "micro", "seeds": [100, 101, 102], "overrides": ["train.steps=20"]},
                     "b": {"preset": "micro", "seeds": [100, 101, 102], "overrides": ["train.steps=30"]}},
            "findings": [{"name": "toy", "paper": "test", "claim": "a beats b", "setup": "fast", "control": "run set b",
                          "title": "toy", "headline": headline,
                          "criteria": [{"name": "a-beats-b", "statement": "a's color accuracy beats b's",
                                        "value": {"runs": "a", "path": "final_accuracy.11/color"},
                                        "control": {"runs": "b", "path": "final_accuracy.11/color"},
                                        "direction": "greater", "margin": 0.1}]}]}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("headline, message", [
    ("on {a-beats-c}", r"headline field \{a-beats-c\} names no criterion of it; its criteria: a-beats-b"),
    ("on {a-beats-b:median}", r"headline field \{a-beats-b:median\} is not \{criterion\}"),
    ("on {*-c}", r"headline field \{\*-c\} names no criterion"),
    ("on {a-*:value}", r"a glob gives the weakest pass count and takes no part"),
])
def test_a_headline_field_that_names_no_criterion_is_refused_at_load(tmp_path, headline, message):
    with pytest.raises(ConfigError, match=message):
        load_suite(_suite_with_headline(tmp_path, headline))
    assert load_suite(_suite_with_headline(tmp_path, "a on {a-beats-b} ({a-beats-b:value}, {a-*})")).findings


def test_every_shipped_finding_has_a_readme_title_and_headline():
    for f in load_suite().findings:
        assert f.title and f.headline, f.name


def test_findings_readme_option_rewrites_the_table_and_refuses_a_readme_without_markers(tmp_path):
    from typer.testing import CliRunner

    from conceptlab.cli import app

    suite = _suite_with_headline(tmp_path, "a beats b on {a-beats-b}")
    bare = tmp_path / "BARE.md"
    bare.write_text("# a README without the markers\n")
    args = ["findings", "--suite", suite, "--root", str(tmp_path / "out"), "--evaluate-only", "--no-progress"]
    refused = CliRunner().invoke(app, [*args, "--readme", str(bare)])
    assert refused.exit_code == 2 and "no findings-table markers" in " ".join(refused.output.split())
    assert not (tmp_path / "out" / "findings.json").exists()  # refused before anything was evaluated
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{BEGIN}\n{END}\n")
    done = CliRunner().invoke(app, [*args, "--readme", str(readme)])
    assert done.exit_code == 0, done.output
    assert table_in(readme.read_text()).splitlines()[2].startswith("| toy | fast | incomplete | a beats b on 0 of 3 |")
