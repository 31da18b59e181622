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
