"""A fault-injecting HTTP proxy in front of a real OpenAI-compatible server, for the endpoint tests.

It forwards every request to ``upstream`` unchanged and counts them, and on demand answers the next
``k`` POSTs with an error status (a 503 with a body, as an overloaded server sends), or drops every
POST without an answer (a server that went away), until told otherwise. It records the headers it saw,
so a test can check what credentials the client sent.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx2 as httpx


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.forwarded = 0  # POSTs passed to the server and answered
        self.injected = 0  # POSTs answered with an injected error or dropped
        self.fail_next = 0
        self.fail_status = 503
        self.down = False
        self.forward_limit: int | None = None  # after this many forwarded POSTs, go down
        self.authorizations: set[str] = set()
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._forward(b"")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with proxy._lock:
                    proxy.authorizations.add(self.headers.get("authorization", ""))
                    if proxy.forward_limit is not None and proxy.forwarded >= proxy.forward_limit:
                        proxy.down = True
                    drop = proxy.down
                    fail = not drop and proxy.fail_next > 0
                    if drop or fail:
                        proxy.injected += 1
                        proxy.fail_next -= 1 if fail else 0
                if drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if fail:
                    payload = b'{"error": "overloaded: injected by the test proxy"}'
                    self.send_response(proxy.fail_status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self._forward(body)
                with proxy._lock:
                    proxy.forwarded += 1

            def _forward(self, body: bytes) -> None:
                answer = httpx.request(self.command, proxy.upstream + self.path, content=body or None,
                                       headers={"content-type": self.headers.get("content-type", "application/json")},
                                       timeout=600)
                self.send_response(answer.status_code)
                self.send_header("content-type", answer.headers.get("content-type", "application/json"))
                self.send_header("content-length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def reset(self) -> None:
        with self._lock:
            self.forwarded = self.injected = self.fail_next = 0
            self.down, self.forward_limit = False, None
            self.authorizations.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
