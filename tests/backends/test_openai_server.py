"""The managed model server stops with its job on every path: a job that ends well (reuse off, or the
next job wanting another server), a job that fails, a server that ignores SIGTERM, a stop interrupted
by a second signal, and the interpreter's exit (atexit). The "server" is the stdlib hostile server
(tests/helpers/hostile_server.py) run as a process with a sleeping child in its group, standing in for a
server's workers; no model is loaded. (SIGTERM and SIGINT of a whole job: tests/commands/test_reliability.py.)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from runner.backends.openai import server as servers
from runner.backends.openai.backend import OpenAIBackend
from runner.backends.openai.config import OpenAIBackendConfig
from runner.contract.backend import ChatFormat, TaskLimits
from tests.conftest import ROOT

SCRIPT = ROOT / "tests" / "helpers" / "hostile_server.py"


def start(tmp_path: Path, *flags: str, stop_timeout_s: float = 5.0) -> tuple[servers.ManagedServer, list[psutil.Process]]:
    """A managed server with its child, and both processes (to check they are gone)."""
    port = servers.free_port("127.0.0.1")
    managed = servers.ManagedServer([sys.executable, str(SCRIPT), "--port", str(port), "--child", *flags],
                                    "127.0.0.1", port, "/health", 30, stop_timeout_s, {}, tmp_path / "server.log")
    managed.start()
    leader = psutil.Process(managed.process.pid)
    deadline = time.monotonic() + 10
    while not leader.children() and time.monotonic() < deadline:  # the child starts before the server listens
        time.sleep(0.02)
    return managed, [leader, *leader.children()]


def gone(processes: list[psutil.Process], within_s: float = 5.0) -> bool:
    """Every process ended within ``within_s`` (a zombie has ended: only its parent's reaping is left)."""
    deadline = time.monotonic() + within_s
    while True:
        alive = [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.02)


def backend(managed: servers.ManagedServer, reuse: bool) -> OpenAIBackend:
    """The backend as a job holds it once its managed server is up (no tokenizer needed to stop it)."""
    config = OpenAIBackendConfig(base_url="http://127.0.0.1:9/v1")
    config.launch.reuse = reuse
    built = OpenAIBackend(config, SimpleNamespace(name="m"), SimpleNamespace(), TaskLimits(64, 8), ChatFormat(),
                          progress=False)
    built._server, built._server_key = managed, "key"
    return built


@pytest.mark.parametrize("ended", ["well, reuse off", "with an error"])
def test_the_job_stops_its_server_and_the_servers_workers(tmp_path, ended):
    managed, processes = start(tmp_path)
    assert len(processes) == 2
    exc = (None, None, None) if ended == "well, reuse off" else (ValueError, ValueError("boom"), None)
    backend(managed, reuse=False if ended == "well, reuse off" else True).__exit__(*exc)
    assert gone(processes) and managed.process is None


def test_a_kept_server_is_stopped_when_the_next_job_wants_another(tmp_path):
    managed, processes = start(tmp_path)
    backend(managed, reuse=True).__exit__(None, None, None)
    assert not gone(processes, within_s=0.2)  # left to the next job of this process
    assert servers.take_kept("another command line") is None
    assert gone(processes)


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    managed, processes = start(tmp_path, "--ignore-term", stop_timeout_s=0.5)
    started = time.monotonic()
    managed.stop()
    assert gone(processes) and time.monotonic() - started < 5.0


def test_a_stop_interrupted_by_a_signal_still_kills_the_group(tmp_path, monkeypatch):
    """A second signal while the job waits for its server's grace period: the group is killed anyway."""
    managed, processes = start(tmp_path, "--ignore-term", stop_timeout_s=30)

    def interrupted(timeout=None):
        raise KeyboardInterrupt("the second signal")

    monkeypatch.setattr(managed.process, "wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        managed.stop()
    assert gone(processes) and not servers._live


def test_kill_all_now_leaves_no_server_of_this_process(tmp_path):
    managed, processes = start(tmp_path, "--ignore-term")
    servers.kill_all_now()  # the second signal's handler: no grace period
    assert gone(processes, within_s=2.0)
    managed.stop()  # nothing left to stop: it only forgets the process
    assert not servers._live


AT_EXIT = """
import json, sys, time
from pathlib import Path
import psutil
from runner.backends.openai import server as servers
argv, log_file, port = json.loads(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
managed = servers.ManagedServer(argv, "127.0.0.1", port, "/health", 30, 5, {}, log_file)
managed.start()
leader = psutil.Process(managed.process.pid)
while not leader.children():
    time.sleep(0.02)
servers.keep("kept for a next job that never comes", managed)
print(json.dumps([leader.pid, *(c.pid for c in leader.children())]), flush=True)
"""


def test_the_interpreters_exit_stops_a_server_left_running(tmp_path):
    """The last line of defence: a process that ends with its server still up (kept for a next job that
    never came) stops it, and its workers, at exit."""
    import json

    port = servers.free_port("127.0.0.1")
    argv = [sys.executable, str(SCRIPT), "--port", str(port), "--child"]
    out = subprocess.run([sys.executable, "-c", AT_EXIT, json.dumps(argv), str(tmp_path / "server.log"), str(port)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    pids = json.loads(out.stdout)
    assert len(pids) == 2
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
