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


def test_strict_json_writes_non_finite_numbers_as_text_and_reads_them_back(tmp_path):
    import json
    import math

    import numpy as np
    import pytest
    import torch

    from conceptlab.store.files import read_json, write_json

    data = {"inf": math.inf, "row": [np.float32(-np.inf), np.float64("nan"), 1.5, np.int64(3), True, None],
            "tensor": torch.tensor([1.0, math.inf]), "array": (np.array([np.inf, 2.0]), "inf-like"), "text": "ok"}
    path = write_json(tmp_path / "strict.json", data, strict=True)

    def refuse(token):
        raise ValueError(f"bare {token} in strict JSON")

    raw = json.loads(path.read_text(), parse_constant=refuse)  # what jq or JavaScript would read: no bare Infinity
    assert raw == {"inf": "inf", "row": ["-inf", "nan", 1.5, 3, True, None], "tensor": [1.0, "inf"],
                   "array": [["inf", 2.0], "inf-like"], "text": "ok"}
    back = read_json(path, nonfinite=True)
    assert back["inf"] == math.inf and back["row"][0] == -math.inf and math.isnan(back["row"][1])
    assert back["row"][2:] == [1.5, 3, True, None] and back["tensor"] == [1.0, math.inf]
    assert back["array"] == [[math.inf, 2.0], "inf-like"] and back["text"] == "ok"
    assert read_json(path)["inf"] == "inf"  # without nonfinite the text stays text
    loose = write_json(tmp_path / "loose.json", {"inf": math.inf})  # the default keeps Python's bare Infinity
    assert "Infinity" in loose.read_text() and read_json(loose)["inf"] == math.inf
    with pytest.raises(ValueError):
        json.loads(loose.read_text(), parse_constant=refuse)
