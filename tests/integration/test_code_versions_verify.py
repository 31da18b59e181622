"""`scripts/code_versions.py verify` end to end: a micro run made with HEAD's code (a temporary worktree) and one made
with this tree's code, compared bit for bit — identical when the source equals HEAD's (the comparison itself, and
that it catches a difference, is tested in tests/unit/experiments/test_code_versions.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_verify_against_head_finds_the_micro_runs_identical():
    if subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src/conceptlab"], cwd=REPO).returncode != 0:
        pytest.skip("src/conceptlab differs from HEAD here: verify would compare two codes")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "code_versions.py"), "verify", "--kinds", "shapes"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "shapes (micro): identical"
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    assert "code-versions-" not in worktrees  # the reference worktree is removed
