"""Test modules are imported by their file name (no packages under tests/): two with one name in different folders
make pytest refuse to collect the second, so a whole `make test` fails on collection."""

from collections import Counter
from pathlib import Path


def test_no_two_test_modules_share_a_file_name():
    tests = Path(__file__).resolve().parents[1]
    names = Counter(p.name for p in tests.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], sorted(n for n, k in names.items() if k > 1)
