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


def test_a_timeline_records_each_workers_tests_and_the_script_reads_it_back(tmp_path):
    """CONCEPTLAB_TEST_TIMELINE (tests/conftest.py) writes when each test ran on each worker, and
    scripts/test_timeline.py summarises it: how the findings tests' order was checked."""
    import shutil
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    shutil.copy(repo / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_sleepy.py").write_text(textwrap.dedent('''
        import time
        import pytest

        @pytest.mark.parametrize("i", range(4))
        def test_nap(i):
            time.sleep(0.3 if i == 0 else 0.05)
        '''))
    timeline = tmp_path / "timeline"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "CONCEPTLAB_TEST_TIMELINE": str(timeline)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in timeline.glob("gw*.jsonl")) == ["gw0.jsonl", "gw1.jsonl"]
    read = subprocess.run([sys.executable, str(repo / "scripts" / "test_timeline.py"), str(timeline), "--long", "0.25"],
                          capture_output=True, text=True, timeout=60)
    assert read.returncode == 0, read.stderr
    out = read.stdout
    assert out.count(" tests, ") == 2 and "busy" in out  # one line per worker, the controller's file left out
    assert "test_nap[0]" in out and "test_nap[1]" not in out.split("per module")[0]  # only the long one listed
    assert "test_sleepy.py" in out.split("per module")[1]
    empty = tmp_path / "empty"
    empty.mkdir()
    none = subprocess.run([sys.executable, str(repo / "scripts" / "test_timeline.py"), str(empty)],
                          capture_output=True, text=True, timeout=60)
    assert none.returncode != 0 and "no finished test" in none.stderr
