"""benchmarks/forward_floor.py's pieces that decide what is measured: the question counts per shot count, and the
floor's batches (length-sorted, within the token budget, every question once), the summary of paired passes (per-pair
ratios, their median and the sign test's interval); benchmarks/floor_profile.py's runner settings."""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys

import pytest

from tests.conftest import ROOT


def benchmark(name: str):
    """benchmarks/NAME.py as a module (it imports its neighbours: mmlu_throughput, forward_floor)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(name, None)
        sys.path.remove(str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def floor():
    yield from benchmark("forward_floor")


@pytest.fixture(scope="module")
def profile():
    yield from benchmark("floor_profile")


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


def test_paired_ratios_their_median_range_and_sign_test_interval(floor):
    # by hand: 12/10, 10/10, 11/10, 13/10, 10.5/10 = 1.2, 1.0, 1.1, 1.3, 1.05; median 1.1. With 5 pairs the
    # narrowest order-statistic interval holding the median with probability >= 0.9 is (min, max): 1 - 2 / 2^5 =
    # 0.9375 (the 2nd to 4th smallest: 1 - 2 x 6 / 32 = 0.625)
    got = floor.ratios([12, 10, 11, 13, 10.5], [10] * 5)
    assert got.ratios == pytest.approx((1.2, 1.0, 1.1, 1.3, 1.05))
    assert (got.median, got.low, got.high) == pytest.approx((1.1, 1.0, 1.3))
    assert got.interval == pytest.approx((1.0, 1.3))
    # 10 pairs, ratios 1..10: (2nd, 9th smallest) holds the median with 1 - 2 x (1 + 10) / 1024 = 0.979, the next
    # narrower (3rd, 8th) only with 1 - 2 x 56 / 1024 = 0.891 < 0.9
    assert floor.ratios(list(range(1, 11)), [1] * 10).interval == (2.0, 9.0)
    # 4 pairs: even (min, max) holds it only with 1 - 2 / 16 = 0.875: no interval at 90%
    four = floor.ratios([1, 2, 3, 4], [1] * 4)
    assert all(math.isnan(x) for x in four.interval)
    assert "interval none (4 pairs are too few for it)" in four.describe(0.9)
    with pytest.raises(ValueError):  # a pass without its pair
        floor.ratios([1, 2], [1])


def test_runner_settings_from_the_command_line(profile):
    assert profile.backend_setting("batch_size=32") == ("batch_size", 32)
    assert profile.backend_setting("batch_search=false") == ("batch_search", False)
    assert profile.backend_setting("max_batch_tokens=null") == ("max_batch_tokens", None)
    assert profile.backend_setting("dtype=float32") == ("dtype", "float32")
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        profile.backend_setting("batch_size")
