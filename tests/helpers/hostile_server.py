"""An OpenAI-compatible server of our own (stdlib only) that answers badly on purpose.

Each *mode* is one way a server can misbehave after accepting a request; ``server.mode = "..."``
switches it for the POSTs that follow (``/v1/models`` always lists ``MODEL``). ``sequence`` plays a
list of modes, one per POST, then stays on the last (a server that recovers). The server counts the
POSTs it received and never blocks its own shutdown: a hanging or dripping handler stops as soon as
the test closes the server or the client goes away.

Run as a script (``python tests/helpers/hostile_server.py --port N --mode drip``) it is a model server
a job can manage (``backend.launch.command``): every GET answers 200 (the health check), each POST is
printed (the server log says when requests arrive); ``--child`` starts a sleeping child in its process
group (a server's workers) and ``--ignore-term`` makes it ignore SIGTERM (a server that must be killed).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "hostile-model"
GOOD_TEXT = " 4"
ECHO_PROMPT = 3  # token log-probabilities of a 3-token prompt, then one generated token


def completion(**choice: object) -> dict[str, object]:
    return {"id": "cmpl-1", "object": "text_completion", "model": MODEL,
            "choices": [{"index": 0, "finish_reason": "stop", **choice}]}


def echoed(values: list[object]) -> dict[str, object]:
    tops = [None] + [{"t": v} for v in values[1:]]
    return completion(text="x", logprobs={"tokens": ["a"] * len(values), "token_logprobs": values, "top_logprobs": tops})


JSON_BODIES: dict[str, object] = {
    "ok": completion(text=GOOD_TEXT),
    "ok_chat": {"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": GOOD_TEXT}}]},
    "missing_fields": {"id": "x"},
    "no_text": completion(),
    "null_text": completion(text=None),
    "no_choices": {"id": "x", "choices": []},
    "choices_string": {"id": "x", "choices": "abc"},
    "text_number": completion(text=4),
    "three_choices": {"id": "x", "choices": [{"index": i, "text": GOOD_TEXT} for i in range(3)]},
    "error_200": {"error": {"message": "model overloaded, try later", "code": 503}},
    "logprobs_ok": echoed([None, -1.0, -0.5, -0.25]),
    "logprobs_positive": echoed([None, -1.0, 0.7, -0.25]),
    "logprobs_string": echoed([None, -1.0, "-0.5", -0.25]),
    "logprobs_too_many": echoed([None, -1.0, -0.5, -0.25, -0.1, -0.1]),
}
RAW_BODIES: dict[str, tuple[str, bytes]] = {
    "malformed": ("application/json", b'{"choices": [{"text": "4"'),
    "empty": ("application/json", b""),
    "html": ("text/html", b"<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>"),
    "not_utf8": ("application/json", b'{"choices": [{"text": "\xff\xfe"}]}'),
    "logprobs_nan": ("application/json",
                     b'{"choices": [{"index": 0, "text": "x", "logprobs": {"token_logprobs": [null, -1.0, NaN, -0.25],'
                     b' "top_logprobs": null}}]}'),
}
STATUS = {"error_500": (500, {}, b'{"error": "internal: CUDA out of memory"}'),
          "error_401": (401, {}, b'{"error": "invalid api key"}'),
          "error_404": (404, {}, b'{"error": {"message": "The model does not exist.", "code": 404}}'),
          "retry_after_huge": (429, {"Retry-After": "999999"}, b'{"error": "rate limited"}')}
MODES = sorted({*JSON_BODIES, *RAW_BODIES, *STATUS, "huge_declared", "huge_streamed", "drip", "hang", "redirect",
               "echo_headers"})


class HostileServer:
    """``url`` is the root (``{url}/v1`` is the base URL); ``redirect_to`` the root a redirect points at."""

    def __init__(self, mode: str = "ok", huge_bytes: int = 4 << 20, drip_interval_s: float = 0.05,
                 redirect_to: str = "http://127.0.0.1:9/v1", port: int = 0) -> None:
        self.mode = mode
        self.sequence: list[str] = []
        self.posts = 0
        self.huge_bytes = huge_bytes
        self.drip_interval_s = drip_interval_s
        self.redirect_to = redirect_to
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.on_post = lambda mode: None
        self.last_body = ""
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None  # a client that gave up resets the connection
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def next_mode(self) -> str:
        with self._lock:
            self.posts += 1
            if self.sequence:
                return self.sequence.pop(0) if len(self.sequence) > 1 else self.sequence[0]
            return self.mode

    def close(self) -> None:
        self.closing.set()
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._send(200, "application/json", json.dumps({"object": "list", "data": [
                    {"id": MODEL, "object": "model", "max_model_len": 4096}]}).encode())

            def do_POST(self) -> None:
                owner.last_body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode("utf-8", "replace")
                mode = owner.next_mode()
                owner.on_post(mode)
                try:
                    self._answer(mode)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass  # the client gave up (its deadline), as it should

            def _answer(self, mode: str) -> None:
                if mode in JSON_BODIES:
                    return self._send(200, "application/json", json.dumps(JSON_BODIES[mode]).encode())
                if mode in RAW_BODIES:
                    kind, body = RAW_BODIES[mode]
                    return self._send(200, kind, body)
                if mode in STATUS:
                    status, headers, body = STATUS[mode]
                    return self._send(status, "application/json", body, headers)
                if mode == "echo_headers":  # a debugging proxy's 400: the request's headers and body, echoed
                    return self._send(400, "application/json", json.dumps({"error": {
                        "message": "bad request", "headers": dict(self.headers.items()), "body": owner.last_body}}).encode())
                if mode == "redirect":
                    return self._send(307, "text/plain", b"moved", {"Location": f"{owner.redirect_to}/completions"})
                if mode == "huge_declared":
                    self._head(200, "application/json", {"Content-Length": str(owner.huge_bytes)})
                    return self._stream_junk(owner.huge_bytes)
                if mode == "huge_streamed":  # no length: the body ends when the connection closes
                    self.close_connection = True
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    return self._stream_junk(owner.huge_bytes)
                if mode == "drip":
                    body = json.dumps(JSON_BODIES["ok"]).encode()
                    self._head(200, "application/json", {"Content-Length": str(len(body))})
                    for byte in body:
                        if owner.closing.wait(owner.drip_interval_s):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return None
                if mode == "hang":
                    owner.closing.wait(30)
                    return None
                raise ValueError(f"unknown mode {mode}")

            def _head(self, status: int, kind: str, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()

            def _send(self, status: int, kind: str, body: bytes, headers: dict[str, str] | None = None) -> None:
                self._head(status, kind, {"Content-Length": str(len(body)), **(headers or {})})
                self.wfile.write(body)

            def _stream_junk(self, size: int) -> None:
                chunk = b"x" * 65536
                sent = 0
                while sent < size and not owner.closing.is_set():
                    self.wfile.write(chunk)
                    sent += len(chunk)

        return Handler


def main(argv: list[str] | None = None) -> None:
    """The server as a process of its own, until it is killed."""
    import argparse
    import signal
    import subprocess
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="ok", choices=MODES)
    parser.add_argument("--drip-interval", type=float, default=0.5)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--ignore-term", action="store_true")
    args = parser.parse_args(argv)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child:  # inherits the process group (and SIG_IGN); killed with the group
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    server = HostileServer(args.mode, drip_interval_s=args.drip_interval, port=args.port)
    server.on_post = lambda mode: print(f"POST {mode}", flush=True)
    print(f"serving {args.mode} on {server.url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
