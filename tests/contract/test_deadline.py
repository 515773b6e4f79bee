"""The time bound on work that may never end: interrupted where it runs (pure Python, Python's ``re`` as it
backtracks), not swallowed by the interrupted code's handlers, and leaving a timer armed by others as it was."""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest

from runner.contract.deadline import Overran, within


def spin() -> None:
    while True:
        pass


def catastrophic() -> None:
    re.match(r"(a+)+$", "a" * 40 + "b")  # 2^40 ways to split the a's: hours


def swallowing() -> None:
    try:
        spin()
    except:  # noqa: E722 - third-party code that swallows everything, then goes on working
        pass
    spin()


@pytest.mark.parametrize("work", [spin, catastrophic, swallowing])
def test_work_without_end_is_interrupted_where_it_runs(work):
    start = time.monotonic()
    with pytest.raises(Overran, match="stopped after 0.[2-9]"):
        with within(0.2):
            work()
    assert time.monotonic() - start < 5


def test_work_that_ends_in_time_is_untouched_and_the_alarm_is_gone():
    with within(5):
        assert re.match(r"(a+)+$", "a" * 10).group(0) == "a" * 10
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None)


def test_a_timer_armed_before_is_put_back():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with pytest.raises(Overran):
            with within(0.1):
                spin()
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < left <= 30 and fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_outside_the_main_thread_the_work_runs_unbounded_and_says_so(caplog):
    out = []
    with caplog.at_level("WARNING", logger="runner"):
        worker = threading.Thread(target=lambda: out.append(_bounded_sum()))
        worker.start()
        worker.join()
    assert out == [sum(range(1000))]
    assert "without a time bound outside the main thread" in caplog.text


def _bounded_sum() -> int:
    with within(0.01):
        return sum(range(1000))
