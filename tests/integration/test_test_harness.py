"""The test harness itself: `make test` relies on `--dist loadgroup` sending every test of an `xdist_group` module
to one worker, so the module's expensive module-scoped runs are built once. pytest 9.2 moved node ids to `_id` while
pytest-xdist 3.8 still appends the group to `_nodeid`, and the grouping was silently ignored (the CLI tests' micro
runs were built on both workers, ≈ 30 s each): this test fails if the installed pair does that again."""

import os
import subprocess
import sys
import textwrap


def test_loadgroup_keeps_a_group_on_one_worker(tmp_path):
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent('''
        import os
        import pytest
        pytestmark = pytest.mark.xdist_group("one")

        @pytest.mark.parametrize("i", range(6))
        def test_member(i):
            with open(os.environ["WORKERS_SEEN"], "a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
        '''))
    (tmp_path / "test_free.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    seen = tmp_path / "workers.txt"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder",
         "--maxschedchunk", "1",
         "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "WORKERS_SEEN": str(seen)})
    assert done.returncode == 0, done.stdout + done.stderr
    workers = seen.read_text().split()
    assert len(workers) == 6
    assert len(set(workers)) == 1, (
        f"the group's tests ran on {sorted(set(workers))}: this pytest / pytest-xdist pair ignores xdist_group "
        "(pin pytest below the breaking version in pyproject.toml)")
