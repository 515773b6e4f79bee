"""The process's stop request: set once (by the SIGTERM/SIGINT handler of ``python -m runner``), seen by
every thread that answers requests.

A signal handler runs in the main thread only, so it cannot stop work that waits in other threads (an
endpoint's concurrent requests, a read from a server that sends one byte a second). It calls
:func:`request_stop` instead: the flag is set for the loops that check it between requests
(:func:`check`, :func:`wait`), and the listeners registered with :func:`on_stop` run at once, so a
request blocked in a socket read gets its socket shut (runner/backends/openai/transport.py). Listeners
must be quick and must not block: they run inside the signal handler.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from runner.contract.errors import EXIT_TERMINATED, Terminated

_event = threading.Event()
_lock = threading.RLock()  # re-entrant: the handler may interrupt the main thread while it holds the lock
_listeners: dict[int, Callable[[], None]] = {}
_state = {"reason": "", "exit_status": EXIT_TERMINATED, "next_id": 0}


def request_stop(reason: str, exit_status: int = EXIT_TERMINATED) -> None:
    """Ask every answering thread to stop (the first request's reason is kept) and run the listeners."""
    with _lock:
        if not _event.is_set():
            _state["reason"], _state["exit_status"] = reason, exit_status
        _event.set()
        listeners = list(_listeners.values())
    for listener in listeners:
        try:
            listener()
        except Exception:  # one listener's failure must not keep the others from stopping their work
            pass


def stop_requested() -> bool:
    return _event.is_set()


def stopped_error() -> Terminated:
    """The error a stopped thread raises: a :class:`Terminated` (a ``KeyboardInterrupt``, so no
    ``except Exception`` of a client library retries it) with the stop's reason and exit status."""
    return Terminated(str(_state["reason"]) or "stopped", int(_state["exit_status"]))


def check() -> None:
    """Raise :func:`stopped_error` once a stop was requested."""
    if _event.is_set():
        raise stopped_error()


def wait(seconds: float) -> None:
    """Sleep ``seconds``, or less: a stop request ends the sleep with :func:`stopped_error`."""
    if _event.wait(max(seconds, 0.0)):
        raise stopped_error()


def listen(listener: Callable[[], None]) -> Callable[[], None]:
    """Run ``listener`` when a stop is requested (at once if one already was); returns the function that
    unregisters it."""
    with _lock:
        key = int(_state["next_id"])
        _state["next_id"] = key + 1
        _listeners[key] = listener
        already = _event.is_set()
    if already:
        listener()

    def unlisten() -> None:
        with _lock:
            _listeners.pop(key, None)

    return unlisten


@contextmanager
def on_stop(listener: Callable[[], None]) -> Iterator[None]:
    """:func:`listen` for the duration of a block."""
    unlisten = listen(listener)
    try:
        yield
    finally:
        unlisten()


def reset() -> None:
    """Forget a stop request: for a process that goes on after a stopped job (tests running jobs in-process)."""
    with _lock:
        _event.clear()
        _state["reason"], _state["exit_status"] = "", EXIT_TERMINATED


def keep_answered(err: BaseException, answered: dict[int, Any]) -> None:
    """Attach to ``err`` the answers its bulk call received before it failed or was stopped (by request
    index), so that the generation cache stores them: a rerun does not ask them again."""
    setattr(err, "answered", answered)


def answered(err: BaseException) -> dict[int, Any]:
    """The answers :func:`keep_answered` attached to ``err`` (none if it was not)."""
    found = getattr(err, "answered", None)
    return found if isinstance(found, dict) else {}
