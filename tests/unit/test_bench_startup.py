"""The start-up bench (bench/startup.py) times a command only when it exits as it is meant to: 0, or 2 for the
missing-run error; a usage error (exit 2) of another command is refused, not timed as its work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_a_command_that_exits_otherwise_than_meant_is_not_timed(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    for name in ("startup", "benchlib"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import startup

    src = startup.ROOT / "src"
    usage_error = ["-c", "import sys; sys.exit(2)"]
    with pytest.raises(SystemExit):
        startup.time_once(src, usage_error)
    assert startup.time_once(src, ["-c", "pass"]) > 0
    assert startup.EXIT_CODES == {"missing-run": 2}
    assert startup.time_once(src, usage_error, startup.EXIT_CODES["missing-run"]) > 0
