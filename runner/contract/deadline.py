"""A time bound on work that may never end and holds no lock: a task's template loop, a catastrophic regular
expression over a model's answer.

A watchdog thread could only stop waiting for such work; the work itself would go on. SIGALRM interrupts it
where it runs: the main thread's handler raises :class:`Overran` between two bytecodes, or inside Python's
``re`` matcher, which checks for signals as it backtracks. The alarm repeats every :data:`REPEAT_S` until the
bound is left, so a bare ``except:`` in third-party code that swallows the first one does not end the bound.
A timer someone else armed (``signal.setitimer``) is put back, less the time spent, when the bound is left.

Signals reach the main thread only: in another thread the work runs unbounded, said once in the log.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Iterator

log = logging.getLogger("runner")
REPEAT_S = 0.05
"""After the first alarm, the next ones (until the bound is left)."""


@dataclass
class _State:
    active: bool = False
    start: float = 0.0
    warned: bool = False


_state = _State()


class Overran(BaseException):
    """The bound's time is up. A ``BaseException``, so an ``except Exception`` of the interrupted code does not
    take it for its own error; the caller of :func:`within` turns it into a message naming what ran."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"stopped after {seconds:.1f} s")
        self.seconds = seconds


def _alarm(signum: int, frame: FrameType | None) -> None:
    if _state.active:
        raise Overran(time.monotonic() - _state.start)


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the body for at most ``seconds`` (then :class:`Overran` is raised inside it). Nested bounds keep the
    outer one; outside the main thread the body runs unbounded."""
    if _state.active:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        if not _state.warned:
            _state.warned = True
            log.warning("templates and task regular expressions run without a time bound outside the main thread")
        yield
        return
    previous = signal.signal(signal.SIGALRM, _alarm)
    before = signal.setitimer(signal.ITIMER_REAL, 0)
    _state.active, _state.start = True, time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3), REPEAT_S)
    try:
        yield
    finally:
        _state.active = False  # first: an alarm due now finds the bound left and returns
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if before[0] > 0:
            left = before[0] - (time.monotonic() - _state.start)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), before[1])
