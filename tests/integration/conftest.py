"""Fixtures shared by the integration tests: one probe cache per test session, so the micro concept probe is
trained once and the CLI, sweep and report tests load it."""

import os

import pytest


@pytest.fixture(scope="session")
def probe_cache(tmp_path_factory):
    """The probe cache the CLI tests also use (so the micro probe is trained once per session)."""
    path = tmp_path_factory.getbasetemp() / "probe-cache"
    old = os.environ.get("CONCEPTLAB_CACHE")
    os.environ["CONCEPTLAB_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("CONCEPTLAB_CACHE", None)
    else:
        os.environ["CONCEPTLAB_CACHE"] = old


MICRO_FINDINGS = {
    "description": "two micro run sets for the findings tests",
    "runs": {
        "short": {"preset": "micro", "seeds": [100, 101],
                  "overrides": ["train.steps=20", "train.checkpoint_steps=[20]", "train.tensorboard=false"],
                  "paper": {"preset": "micro", "overrides": ["train.steps=40"]}},
        "long": {"preset": "micro", "seeds": [100, 101],
                 "overrides": ["train.steps=30", "train.checkpoint_steps=[30]", "train.tensorboard=false"]},
    },
    "findings": [
        {"name": "shorter-runs-end-earlier", "paper": "test", "claim": "a 20-step run ends before a 30-step one",
         "setup": "fast", "control": "the 30-step runs",
         "criteria": [{"name": "ends-earlier", "statement": "final step 20 < 30",
                       "value": {"runs": "short", "path": "final_step"},
                       "control": {"runs": "long", "path": "final_step"}, "direction": "less", "margin": 10}]},
        {"name": "twenty-steps-learn-nothing", "paper": "test",
         "claim": "20 micro steps do not learn the held-out class's color (its learning time is censored: never)",
         "setup": "fast", "control": "none", "reason": "a test of censoring on real runs",
         "criteria": [{"name": "color-never-learned", "statement": "learning time (never = +∞) beyond step 1,000",
                       "value": {"runs": "short", "path": "learning_time.held_out/color", "censored": "high"},
                       "threshold": 1000, "direction": "greater"}]},
        {"name": "shorter-runs-end-later", "paper": "test", "claim": "a false claim: it must not reproduce",
         "setup": "fast", "control": "the 30-step runs",
         "criteria": [{"name": "ends-later", "statement": "final step 20 > 30",
                       "value": {"runs": "short", "path": "final_step"},
                       "control": {"runs": "long", "path": "final_step"}, "direction": "greater"}]},
    ],
}


@pytest.fixture(scope="session")
def micro_findings(tmp_path_factory, probe_cache):
    """`conceptlab findings` on a two-finding micro suite (4 micro runs, one worker): the output folder."""
    import yaml
    from typer.testing import CliRunner

    from conceptlab.cli import app

    folder = tmp_path_factory.mktemp("findings")
    suite = folder / "suite.yaml"
    suite.write_text(yaml.safe_dump(MICRO_FINDINGS, sort_keys=False))
    out = folder / "out"
    result = CliRunner().invoke(app, ["findings", "--suite", str(suite), "--root", str(out), "--workers", "1",
                                      "--threads", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    return {"suite": suite, "out": out, "output": result.output}
