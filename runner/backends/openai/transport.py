"""The HTTP transport under the ``openai`` client: a deadline per request and a cap on the answer's size.

Why: an HTTP client's timeout bounds each *read*, so a server that sends one byte a second never
times out and a server that sends gigabytes is read whole. Here each request gets one deadline,
``backend.timeout_s`` from the moment it is sent to its last byte: a watchdog shuts the request's
socket when it passes (whatever the read was waiting for), and the read that fails is reported as
a timeout, which the client library retries like any other. The body is counted as it arrives and
refused past ``backend.max_response_mb`` (a declared ``Content-Length`` over the cap is refused
before a byte of the body is read). Connections are not kept alive between requests, so the socket
the watchdog shuts belongs to its request alone (a local connect costs well under a millisecond;
generations cost far more). Redirects are never followed: the client is built with
``follow_redirects=False`` and a 3xx answer becomes an error naming where it pointed.

A stop request (SIGTERM/SIGINT, :mod:`runner.contract.stopping`) shuts the socket of every request in
flight the same way, and the request fails with :class:`~runner.contract.errors.Terminated` (a
``KeyboardInterrupt``: the client library does not retry it); a request sent after the stop fails
before it connects.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Iterator

from runner.contract import stopping


class ResponseTooLarge(Exception):
    """The server's answer passed the size cap; not an HTTP error, so the client library does not retry it."""

    def __init__(self, limit: int, seen: int, declared: bool) -> None:
        how = f"declared Content-Length {seen}" if declared else f"more than {seen} bytes read"
        super().__init__(f"{how}; the cap is {limit} bytes")
        self.limit = limit


class _Watch:
    """One request's deadline: remembers the request's socket (from the connection trace) and shuts it
    when the deadline passes or a stop is requested."""

    def __init__(self, timeout_s: float, chained: Any) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.expired = False
        self._chained = chained
        self._stream: Any = None
        self._lock = threading.RLock()  # re-entrant: a stop request may come from a handler in this thread
        self._timer = threading.Timer(timeout_s, self.expire)
        self._timer.daemon = True
        self._unlisten: Any = None

    def start(self) -> None:
        self._timer.start()
        self._unlisten = stopping.listen(self.expire)

    def stop(self) -> None:
        self._timer.cancel()
        if self._unlisten is not None:
            self._unlisten()

    def trace(self, name: str, info: dict[str, Any]) -> None:
        if self._chained is not None:
            self._chained(name, info)
        if name in ("connection.connect_tcp.complete", "connection.start_tls.complete") and "return_value" in info:
            with self._lock:
                self._stream = info["return_value"]
                late = self.expired
            if late:
                self._shut()

    def expire(self) -> None:
        with self._lock:
            self.expired = True
        self._shut()

    def _shut(self) -> None:
        stream = self._stream
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv; close() alone would not
            except OSError:
                pass


def _timeout(httpx: Any, watch: _Watch, request: Any) -> BaseException:
    if stopping.stop_requested():
        return stopping.stopped_error()
    return httpx.ReadTimeout(f"no complete answer within the request deadline ({watch.deadline:.0f})", request=request)


def guarded_transport(timeout_s: float, max_bytes: int) -> Any:
    """The transport for :func:`runner.backends.openai.client.make_client` (``httpx2`` is imported here:
    the serve extra is optional)."""
    import httpx2

    cls = type("GuardedHTTPTransport", (GuardedTransport, httpx2.BaseTransport), {})
    return cls(timeout_s, max_bytes)


class GuardedTransport:
    """The deadline and the size cap around ``httpx2``'s default transport (mixed into its base class by
    :func:`guarded_transport`)."""

    def __init__(self, timeout_s: float, max_bytes: int) -> None:
        import httpx2

        self._httpx = httpx2
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._inner = httpx2.HTTPTransport(limits=httpx2.Limits(max_keepalive_connections=0))

    def handle_request(self, request: Any) -> Any:
        stopping.check()  # a retry after a stop request is not sent
        httpx = self._httpx
        watch = _Watch(self.timeout_s, request.extensions.get("trace"))
        request.extensions["trace"] = watch.trace
        watch.start()
        try:
            response = self._inner.handle_request(request)
        except Exception:
            watch.stop()
            if watch.expired:
                raise _timeout(httpx, watch, request) from None
            raise
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            watch.stop()
            response.close()
            raise ResponseTooLarge(self.max_bytes, int(declared), declared=True)
        stream_cls = type("GuardedStream", (_GuardedStream, httpx.SyncByteStream), {})
        return httpx.Response(status_code=response.status_code, headers=response.headers,
                              stream=stream_cls(httpx, response.stream, watch, self.max_bytes, request),
                              extensions=response.extensions)

    def close(self) -> None:
        self._inner.close()


class _GuardedStream:
    """The body as it arrives: counted against the cap, failed as a timeout once the deadline passed."""

    def __init__(self, httpx: Any, inner: Any, watch: _Watch, max_bytes: int, request: Any) -> None:
        self._httpx, self._inner, self._watch, self._max, self._request = httpx, inner, watch, max_bytes, request

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        try:
            for chunk in self._inner:
                seen += len(chunk)
                if seen > self._max:
                    raise ResponseTooLarge(self._max, self._max, declared=False)
                if self._watch.expired:
                    raise _timeout(self._httpx, self._watch, self._request)
                yield chunk
        except ResponseTooLarge:
            raise
        except Exception:
            if self._watch.expired:
                raise _timeout(self._httpx, self._watch, self._request) from None
            raise
        if self._watch.expired:
            raise _timeout(self._httpx, self._watch, self._request)

    def close(self) -> None:
        self._watch.stop()
        self._inner.close()
