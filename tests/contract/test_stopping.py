"""The stop request every answering thread sees (runner/contract/stopping.py) and the job's one progress
bar (runner/contract/progress.py): pure, in-process, no server."""

from __future__ import annotations

import threading
import time

import pytest

from runner.contract import stopping
from runner.contract.errors import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
from runner.contract.progress import Progress, Shared


@pytest.fixture(autouse=True)
def fresh():
    stopping.reset()
    yield
    stopping.reset()


def test_a_stop_request_runs_the_listeners_and_later_checks_raise_with_its_status():
    calls = []
    unlisten = stopping.listen(lambda: calls.append("socket shut"))
    stopping.check()  # nothing asked yet
    stopping.request_stop("stopped by SIGINT", EXIT_INTERRUPTED)
    stopping.request_stop("stopped by SIGTERM")  # a second request keeps the first one's reason
    assert calls == ["socket shut", "socket shut"]
    with pytest.raises(Terminated, match="stopped by SIGINT") as caught:
        stopping.check()
    assert caught.value.exit_status == EXIT_INTERRUPTED and isinstance(caught.value, KeyboardInterrupt)
    unlisten()
    stopping.request_stop("again")
    assert len(calls) == 2  # unregistered


def test_a_listener_added_after_the_stop_runs_at_once_and_a_failing_one_does_not_stop_the_others():
    seen = []
    stopping.listen(lambda: 1 / 0)
    stopping.listen(lambda: seen.append("first"))
    stopping.request_stop("stopped by SIGTERM")
    assert seen == ["first"]
    with stopping.on_stop(lambda: seen.append("late")):
        assert seen == ["first", "late"]


def test_a_backoff_sleep_ends_as_soon_as_another_thread_asks_to_stop():
    threading.Timer(0.2, stopping.request_stop, args=("stopped by SIGTERM",)).start()
    started = time.monotonic()
    with pytest.raises(Terminated) as caught:
        stopping.wait(30.0)
    assert time.monotonic() - started < 5.0  # not the 30 s asked for
    assert caught.value.exit_status == EXIT_TERMINATED
    stopping.reset()
    stopping.wait(0.01)  # no stop asked: sleeps and returns


def test_the_progress_bar_counts_answers_from_every_thread_and_a_shared_view_leaves_it_open():
    progress = Progress(800, shown=False)
    view = Shared(progress)

    def answer() -> None:
        for _ in range(100):
            view.update(1)

    threads = [threading.Thread(target=answer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    view.close()  # one bulk call ends; the job's bar goes on
    progress.update(0)
    assert progress.done == 800 and progress.total == 800
