"""Fixtures of the fuzz suite: each case runs in a fresh temporary root (the working directory, the probe cache and a
hard memory cap of 4 GB all point there or are set for it), and the repository's working tree is checked unchanged
after the suite. The counts of every case are printed at the end of a run without xdist workers (`-p no:xdist`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fuzzing import TALLY, Fuzzer  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def fuzz_root(tmp_path, monkeypatch):
    """A temporary root the case runs in: the working directory, the probe cache, and the memory cap for it."""
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(root / "cache"))
    monkeypatch.setenv("CONCEPTLAB_MAX_MEMORY_GB", "4")
    monkeypatch.setenv("COLUMNS", "200")
    return root


@pytest.fixture
def fuzzer(fuzz_root, request):
    return Fuzzer(fuzz_root, request.node.originalname)


def _tree_state() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=all"],
                              capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):  # pragma: no cover - no git: nothing to compare
        return ""


@pytest.fixture(scope="module", autouse=True)
def _repository_untouched():
    """Nothing a fuzz case does writes into the repository's working tree."""
    before = _tree_state()
    yield
    assert _tree_state() == before, "the fuzz suite wrote into the repository's working tree"


def pytest_terminal_summary(terminalreporter):
    if TALLY["cases"]:
        groups = ", ".join(f"{k.split(':', 1)[1]} {v}" for k, v in sorted(TALLY.items()) if k.startswith("cases:"))
        terminalreporter.write_line(
            f"fuzz: {TALLY['cases']} cases ({groups}); tracebacks {TALLY['tracebacks']}, exit 0 on bad input "
            f"{TALLY['exit 0 on bad input']}, unclear messages {TALLY['unclear messages']}, wrote files "
            f"{TALLY['wrote files']}")
