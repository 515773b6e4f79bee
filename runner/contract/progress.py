"""One progress bar for a job's requests, advanced from any thread as answers arrive.

Why one: a backend sees one bulk call at a time (the generation cache sends misses in chunks, a
sequential monitor one look at a time), so a bar per call restarts at 0 every chunk and never shows
the job's total. The job opens a :class:`Progress` for every request it will ask
(runner/job/answer.py), the generation cache advances it by the answers it already holds, and the
backend (:meth:`runner.backends.configured.ConfiguredBackend.bar`) by each answer it computes, from
whichever thread received it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any


class Progress:
    """A thread-safe count of answered requests out of ``total``, drawn as a tqdm bar when ``shown``."""

    def __init__(self, total: int, shown: bool, desc: str = "answers") -> None:
        self.total = total
        self.done = 0
        self._lock = threading.Lock()
        self._bar: Any = None
        if shown:
            from tqdm.auto import tqdm  # lazy: only a job that draws a bar pays for the import

            self._bar = tqdm(total=total, desc=desc, unit="req", file=sys.stderr, dynamic_ncols=True,
                             mininterval=1.0)

    def update(self, n: int = 1) -> None:
        """``n`` more requests answered (the name tqdm's bars use, so either can be passed around)."""
        if n <= 0:
            return
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(n)

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Shared:
    """A view of a job's :class:`Progress` handed to one bulk call: it advances the job's bar, and closing
    it leaves the bar open for the next call."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def update(self, n: int = 1) -> None:
        self._progress.update(n)

    def close(self) -> None:
        pass
