"""The test harness itself: `make test` relies on `--dist loadgroup` sending every test of an `xdist_group` module
to one worker, so the module's expensive module-scoped runs are built once. pytest 9.2 moved node ids to `_id` while
pytest-xdist 3.8 still appends the group to `_nodeid`, and the grouping was silently ignored (the CLI tests' micro
runs were built on both workers, ≈ 30 s each): this test fails if the installed pair does that again."""

import os
import subprocess
import sys
import textwrap

import pytest


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


def _load(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_timeline_records_each_workers_tests_and_the_script_reads_it_back(tmp_path, monkeypatch, capsys):
    """CONCEPTLAB_TEST_TIMELINE (tests/conftest.py's start and finish hooks, a fresh copy of the module per worker)
    writes when each test ran on each worker, and scripts/test_timeline.py summarises it: how the findings tests'
    order was checked. (In-process: an xdist run of its own cost 8 s.)"""
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    timeline = tmp_path / "timeline"
    monkeypatch.setenv("CONCEPTLAB_TEST_TIMELINE", str(timeline))
    for worker, naps in (("gw0", [0.3, 0.02]), ("gw1", [0.02])):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        hooks = _load(repo / "tests" / "conftest.py", f"timeline_conftest_{worker}")
        for i, nap in enumerate(naps):
            test = f"tests/test_sleepy.py::test_nap[{worker}-{i}]"
            hooks.pytest_runtest_logstart(test, None)
            time.sleep(nap)
            hooks.pytest_runtest_logfinish(test, None)
        hooks.pytest_sessionfinish(None, 0)
        assert hooks._timeline is None
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    now = time.time()  # the controller's own file (reports replayed as they arrive): left out
    (timeline / "main.jsonl").write_text(f'{{"test": "x", "event": "start", "time": {now}}}\n'
                                         f'{{"test": "x", "event": "end", "time": {now + 1}}}\n')
    with open(timeline / "gw1.jsonl", "a") as torn:
        torn.write('{"test": "tests/test_sleepy.py::test_cut", "ev')  # a run killed mid-write
    script = _load(repo / "scripts" / "test_timeline.py", "test_timeline_script")
    assert script.main([str(timeline), "--long", "0.25"]) == 0
    out = capsys.readouterr().out
    assert out.count(" tests, ") == 2 and "gw0: 2 tests" in out and "gw1: 1 tests" in out  # one line per worker
    listed = out.split("per module")[0]
    assert "test_nap[gw0-0]" in listed and "test_nap[gw0-1]" not in listed  # only the long one
    assert "tests/test_sleepy.py" in out.split("per module")[1]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit, match="no finished test"):
        script.main([str(empty)])
