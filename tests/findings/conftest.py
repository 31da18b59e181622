"""Findings tests train CI-sized runs: two torch threads (CI has 2 cores) and a private probe cache."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _two_threads_and_private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CONCEPTLAB_CACHE", str(tmp_path_factory.getbasetemp() / "probe-cache"))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(threads)
