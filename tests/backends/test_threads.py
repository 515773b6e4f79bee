"""Compute threads from the free cores (runner/backends/threads.py): /proc/stat read by hand-computed examples."""

from __future__ import annotations

import pytest

from runner.backends import threads

# two snapshots of /proc/stat, 100 jiffies apart on each of cpu0 and cpu1:
# cpu0 idle 10 + iowait 0 of 100 (busy), cpu1 idle 80 + iowait 10 of 100 (mostly free); cpu2 not ours
BEFORE = """cpu  999 0 999 999 0 0 0 0 0 0
cpu0 100 0 50 1000 5 0 0 0 0 0
cpu1 100 0 50 1000 5 0 0 0 0 0
cpu2 0 0 0 0 0 0 0 0 0 0
intr 1 2 3
"""
AFTER = """cpu  999 0 999 999 0 0 0 0 0 0
cpu0 180 0 60 1010 5 0 0 0 0 0
cpu1 105 0 55 1080 15 0 0 0 0 0
cpu2 0 0 0 100 0 0 0 0 0 0
intr 1 2 3
"""


def test_cpu_times_sum_idle_and_iowait_over_the_listed_cpus_only():
    assert threads.cpu_times(BEFORE, [0, 1]) == (2010, 2310)
    assert threads.cpu_times(AFTER, [0]) == (1015, 1255)
    assert threads.cpu_times(AFTER, [2]) == (100, 100)


def test_free_cores_is_the_idle_share_of_the_window_times_the_cores():
    snapshots = iter([BEFORE, AFTER])
    slept = []
    free = threads.free_cores([0, 1], 0.25, read=lambda: next(snapshots), sleep=slept.append)
    # idle (10 + 0) + (80 + 10) = 100 of 200 jiffies: 2 cores x 0.5
    assert free == pytest.approx(1.0) and slept == [0.25]
    same = iter([BEFORE, BEFORE])  # no tick in the window: counted free
    assert threads.free_cores([0, 1], 0.0, read=lambda: next(same), sleep=slept.append) == 2.0


def test_free_cores_falls_back_to_the_load_average_without_proc_stat(monkeypatch):
    def missing() -> str:
        raise FileNotFoundError("/proc/stat")

    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1.5, 0.0, 0.0))
    assert threads.free_cores([0, 1, 2, 3], read=missing, sleep=lambda s: None) == 2.5
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert threads.free_cores([0, 1], read=missing, sleep=lambda s: None) == 0.0


@pytest.mark.parametrize("cores, free, cap, expected", [
    (2, 2.0, None, 2), (2, 1.49, None, 1), (2, 1.5, None, 2), (2, 0.0, None, 1),  # at least one
    (8, 5.6, None, 6), (8, 5.6, 4, 4), (2, 2.0, 8, 2), (4, 9.0, None, 4),  # never above the cores or the cap
])
def test_threads_are_the_free_cores_rounded_half_up_within_the_cores_and_the_cap(cores, free, cap, expected):
    assert threads.threads_from(cores, free, cap) == expected


def test_an_explicit_count_wins_and_omp_num_threads_1_is_not_measured(monkeypatch):
    def never(cpus):
        raise AssertionError("measured")

    monkeypatch.setattr(threads, "usable_cores", lambda: [0, 1])
    assert threads.choose(3, measure=never).threads == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    choice = threads.choose(None, measure=never)
    assert (choice.threads, choice.free) == (1, None)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    choice = threads.choose(None, measure=lambda cpus: 0.3)
    assert choice.threads == 1 and choice.describe() == "1 (free cores, 0.3 of 2 cores free)"
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads, "usable_cores", lambda: [0, 1, 2, 3])
    choice = threads.choose(None, measure=lambda cpus: 3.7)
    assert choice.threads == 4 and choice.reason == "free cores"


def test_a_cpu_server_gets_the_free_cores_unless_its_env_sets_them(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: [0, 1])
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "free_cores", lambda cpus: 0.4)
    assert threads.cpu_server_env({"A": "b"}) == {"A": "b", "OMP_NUM_THREADS": "1"}
    monkeypatch.setattr(threads, "free_cores", lambda cpus: 1.8)
    assert threads.cpu_server_env({}) == {"OMP_NUM_THREADS": "2"}
    assert threads.cpu_server_env({"OMP_NUM_THREADS": "2"}) == {"OMP_NUM_THREADS": "2"}


def test_the_real_measure_is_within_the_usable_cores():
    cpus = threads.usable_cores()
    assert 0.0 <= threads.free_cores(cpus, 0.05) <= len(cpus) + 1e-9
