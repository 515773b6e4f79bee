"""benchmarks/forward_floor.py's pieces that decide what is measured: the question counts per shot count, and the
floor's batches (length-sorted, within the token budget, every question once)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def floor():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # it imports mmlu_throughput beside it
    spec = importlib.util.spec_from_file_location("forward_floor", ROOT / "benchmarks" / "forward_floor.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_one_count_for_every_shot_count_or_one_each(floor):
    assert floor.samples_per_shot("0,5", "456,114") == {0: 456, 5: 114}  # the default: the lead's two tables
    assert floor.samples_per_shot("0,5", "57") == {0: 57, 5: 57}
    assert floor.samples_per_shot("5", "114") == {5: 114}
    with pytest.raises(SystemExit, match="one per --shots value"):
        floor.samples_per_shot("0,5", "456,114,57")
    with pytest.raises(SystemExit, match="positive"):
        floor.samples_per_shot("0", "0")


def test_floor_batches_are_length_sorted_runs_within_the_budget(floor):
    lengths = [90, 40, 300, 45, 88, 1200, 41]
    batches = floor.floor_batches(lengths, 200)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))  # every question once
    # by hand: sorted 40, 41, 45 (3 x 45 = 135 <= 200; a fourth at 88 would be 352), then 88, 90 (180), then 300 and
    # 1200 alone (a row over the budget still runs)
    assert batches == [[1, 6, 3], [4, 0], [2], [5]]
