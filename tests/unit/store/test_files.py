"""Tests for the store's file helpers: the exclusive lock makes a second process wait."""

import subprocess
import sys
import time

from conceptlab.store.files import exclusive_lock

HOLDER = """
import sys, time
from pathlib import Path
from conceptlab.store.files import exclusive_lock
lock, held, log = map(Path, sys.argv[1:4])
with exclusive_lock(lock):
    held.write_text("yes")
    time.sleep(1.0)
    with log.open("a") as f:
        f.write("holder\\n")
"""


def test_a_second_process_waits_for_the_lock_holder(tmp_path):
    lock, held, log = tmp_path / "entry.lock", tmp_path / "held", tmp_path / "log"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), str(held), str(log)])
    try:
        while not held.exists():  # the holder has the lock and is about to sleep before writing
            assert holder.poll() is None, "the lock holder exited early"
            time.sleep(0.01)
        with exclusive_lock(lock):
            with log.open("a") as f:
                f.write("waiter\n")
    finally:
        holder.wait(timeout=60)
    assert holder.returncode == 0
    assert log.read_text().splitlines() == ["holder", "waiter"]


def test_the_lock_is_released_after_an_error(tmp_path):
    lock = tmp_path / "entry.lock"
    try:
        with exclusive_lock(lock):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    with exclusive_lock(lock):  # would block forever if the error had left it held
        pass
