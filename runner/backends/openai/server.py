"""A model server started for one job: a free local port, a health check, a log file, a clean stop.

Like NeMo Evaluator's deployments: ``backend.launch.command`` (``trtllm-serve serve ...``, ``vllm
serve ...``, ``transformers serve ...``) runs in its own process group, so stopping it (SIGTERM,
then SIGKILL after ``stop_timeout_s``) also stops the workers it spawned. The job's ``with backend``
stops it when the job fails or is interrupted; a job that ends well may leave it to the next job of
the same process that would start the same server (``launch.reuse``: a sweep's tasks on one model pay
for one server start), and an ``atexit`` hook stops what is left. A stop that is itself interrupted
(a second signal while waiting for the grace period) still SIGKILLs the group, and
:func:`kill_all_now` (the second signal's handler in runner/commands/main.py) kills every server this
process started without waiting: no path of the job leaves a server running, short of a SIGKILL of
the job itself.
"""

from __future__ import annotations

import atexit
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from runner.backends.openai.config import PLACEHOLDERS
from runner.contract.errors import ConfigError, EndpointError

log = logging.getLogger("runner")
_kept: tuple[str, "ManagedServer"] | None = None
_live: dict[int, "ManagedServer"] = {}  # process id -> server, for kill_all_now()


def free_port(host: str) -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def render_command(template: str, values: Mapping[str, Any]) -> list[str]:
    """``launch.command`` with its placeholders filled, split as a shell would (no shell runs it)."""
    try:
        line = template.format(**values)
    except (KeyError, IndexError, ValueError) as err:
        raise ConfigError("backend.launch.command has a placeholder that cannot be filled",
                          where="backend.launch.command", given=f"{template} ({type(err).__name__}: {err})",
                          allowed=", ".join("{" + p + "}" for p in PLACEHOLDERS),
                          fix="write literal braces as {{ and }}") from None
    argv = shlex.split(line)
    if not argv:
        raise ConfigError("backend.launch.command is empty", where="backend.launch.command", given=repr(template))
    beside = Path(sys.executable).parent / argv[0]
    if "/" not in argv[0] and shutil.which(argv[0]) is None and beside.is_file():
        argv[0] = str(beside)  # a console script of this virtualenv, which need not be activated
    return argv


class ManagedServer:
    """One server process. ``start()`` returns once ``health_path`` answers 200; ``stop()`` is idempotent."""

    def __init__(self, argv: list[str], host: str, port: int, health_path: str, ready_timeout_s: float,
                 stop_timeout_s: float, env: Mapping[str, str], log_file: Path) -> None:
        self.argv = argv
        self.host, self.port = host, port
        self.health_path = "/" + health_path.lstrip("/")
        self.ready_timeout_s, self.stop_timeout_s = ready_timeout_s, stop_timeout_s
        self.env = dict(env)
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting the model server: %s (log %s)", shlex.join(self.argv), self.log_file)
        started = time.monotonic()
        with open(self.log_file, "ab") as sink:
            try:
                self.process = subprocess.Popen(self.argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                env=os.environ | self.env, start_new_session=True)
            except OSError as err:
                raise ConfigError("the model server command could not be started", where="backend.launch.command",
                                  given=f"{shlex.join(self.argv)} ({err.strerror or err})",
                                  fix="install the server (trtllm-serve, vllm, transformers[serving]) or fix the command") from None
        _live[self.process.pid] = self
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - started
        log.info("model server ready at %s after %.1f s", self.root_url, self.startup_s)

    def _wait_ready(self) -> None:
        import httpx2 as httpx

        url = self.root_url + self.health_path
        started = time.monotonic()
        deadline = started + self.ready_timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                raise EndpointError("the model server exited before it was ready", where="backend.launch.command",
                                    given=f"exit status {code}; last lines of {self.log_file}:\n{self.log_tail()}",
                                    fix="read the server log; check the checkpoint path, the GPU and the command's flags")
            try:
                answer = httpx.get(url, timeout=5.0)
                if answer.status_code == 200:
                    return
                last = f"HTTP {answer.status_code}"
            except httpx.HTTPError as err:
                last = type(err).__name__
            time.sleep(0.1 if time.monotonic() - started < 5 else 0.5)  # a small server is up in well under a second
        raise EndpointError("the model server did not become ready in time", where="backend.launch.ready_timeout_s",
                            given=f"{self.ready_timeout_s:g} s waiting for {url} (last: {last}); log tail:\n{self.log_tail()}",
                            fix="raise backend.launch.ready_timeout_s (large checkpoints load slowly) or read the log")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after ``stop_timeout_s``; the group is SIGKILLed at the end
        whatever happened (workers the leader left behind, or this wait interrupted by a signal)."""
        process = self.process
        if process is None:
            return
        try:
            if process.poll() is None:
                for sig, wait in ((signal.SIGTERM, self.stop_timeout_s), (signal.SIGKILL, 10.0)):
                    if not _signal_group(process.pid, sig):
                        break
                    try:
                        process.wait(timeout=wait)
                        break
                    except subprocess.TimeoutExpired:
                        log.warning("the model server did not stop within %.0f s of %s", wait, sig.name)
                log.info("model server stopped (%s)", self.root_url)
        finally:
            _signal_group(process.pid, signal.SIGKILL)
            self.process = None
            _live.pop(process.pid, None)


def _signal_group(pid: int, sig: signal.Signals) -> bool:
    """Send ``sig`` to the process group ``pid`` leads; False when the group is gone."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_all_now() -> None:
    """SIGKILL every server this process started and has not stopped, without waiting (safe in a signal
    handler: no lock, no log)."""
    for pid in list(_live):
        _signal_group(pid, signal.SIGKILL)


def take_kept(key: str) -> ManagedServer | None:
    """The server a previous job of this process left running, if it is the one asked for and still up;
    any other kept server is stopped."""
    global _kept
    kept, _kept = _kept, None
    if kept is None:
        return None
    if kept[0] == key and kept[1].alive():
        return kept[1]
    kept[1].stop()
    return None


def keep(key: str, server: ManagedServer) -> None:
    """Leave ``server`` running for the next job (stopping the one kept before, if another)."""
    global _kept
    if _kept is not None and _kept[1] is not server:
        _kept[1].stop()
    _kept = (key, server)
