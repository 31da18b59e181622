"""Findings tests train CI-sized runs: a private probe cache, and two torch threads (CI has 2 cores) — one when
pytest-xdist runs two test files at a time (`make test`), so the two workers share the cores instead of thrashing."""

import os

import pytest
import torch


@pytest.fixture(autouse=True)
def _two_threads_and_private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)
    yield
    torch.set_num_threads(threads)
