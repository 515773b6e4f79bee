"""Run untrusted Python programs (model-written code plus its tests) in separate, limited processes.

Each program runs in its own process, started as ``python -I -S evaluators/scoring/sandbox_child.py``
(isolated mode, no site-packages) in a fresh temporary working directory, in a new session, so
its whole process group can be killed. What contains it:

- **time**: a wall-clock timeout, after which the process group is killed with SIGKILL, and
  a CPU-time limit (RLIMIT_CPU). The group is killed after every run, even a clean one;
- **memory**: an address-space limit (RLIMIT_AS); an allocation past it raises MemoryError;
- **processes**: the audit hook refuses fork, exec, spawn, subprocess and signals to other
  processes, and the kernel caps the number of processes (RLIMIT_NPROC). Root ignores that
  cap, so as root the child first drops to uid/gid 65534 (``nobody``);
- **network**: a new network namespace when the kernel allows it (then there is no usable
  interface at all), and the audit hook refuses to create any socket;
- **files**: the audit hook refuses opening for writing, deleting, renaming, linking or
  changing files outside the working directory; HOME and TMPDIR point into it; as ``nobody``
  the kernel also refuses writes to files it does not own; RLIMIT_FSIZE caps file sizes
  (stdout and stderr go to files, so a program printing without end is stopped too).

What it does NOT protect against: reading files (any file the process can read, it can read),
a program written to defeat the audit hook from inside the interpreter (it shares the
interpreter with the hook, which is why the kernel-level layers are kept under it), kernel
exploits, and, without root and without unprivileged user namespaces, network access through
a native extension that the hook does not see. For hostile code, add an OS-level sandbox
(container, VM, gVisor) around the whole run.

:func:`isolation_layers` says which kernel layers took effect on this host.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

CHILD = Path(__file__).with_name("sandbox_child.py")
SANDBOX_UID = 65534  # "nobody": the uid a root parent drops its children to
FILE_SIZE_LIMIT = 16 << 20  # bytes any single file may grow to, stdout and stderr included
OPEN_FILES_LIMIT = 64
EXTRA_PROCESSES = 4  # tasks the sandbox uid may own beyond those it owns at start (RLIMIT_NPROC)
STARTUP_GRACE_S = 2.0  # wall-clock allowance for interpreter start-up, on top of timeout_s
TAIL_BYTES = 4096


@dataclass(frozen=True)
class Limits:
    """Per-program limits: wall-clock and CPU seconds, address space in MiB, parallel workers."""

    timeout_s: float = 5.0
    memory_mb: int = 1024
    workers: int = 4


@dataclass(frozen=True)
class Result:
    """How one program ended. ``passed`` only when it ran to its end (tests included) in time."""

    passed: bool
    status: str  # passed | failed | timeout | exited | killed:<signal>
    detail: str = ""  # the last line of stderr, or why it was stopped

    def to_dict(self) -> dict[str, object]:
        return {"passed": self.passed, "status": self.status, "detail": self.detail}


def _tail(path: Path, limit: int = TAIL_BYTES) -> str:
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - limit))
        return handle.read().decode("utf-8", errors="replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_program(source: str, limits: Limits = Limits(), *, report_layers: bool = False,
                python_guard: bool = True) -> tuple[Result, str]:
    """Run ``source`` in a fresh sandbox; returns the result and the tail of its stdout.

    ``python_guard=False`` leaves out the audit hook, so that tests can check the kernel-level
    layers on their own; evaluators never turn it off.
    """
    drop_uid = SANDBOX_UID if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="runner-sandbox-"))
    try:
        work = base / "work"
        work.mkdir()
        program = base / "program.py"
        program.write_text(source, encoding="utf-8")
        if drop_uid is not None:
            os.chown(work, drop_uid, drop_uid)
        nonce = secrets.token_hex(16)
        settings = {
            "nonce": nonce, "program": str(program), "unshare_net": True, "uid": drop_uid,
            "cpu_s": max(1, int(limits.timeout_s + 0.999)), "memory_bytes": int(limits.memory_mb) << 20,
            "fsize_bytes": FILE_SIZE_LIMIT, "nofile": OPEN_FILES_LIMIT, "nproc_extra": EXTRA_PROCESSES,
            "report_layers": report_layers, "python_guard": python_guard,
        }
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work), "LANG": "C.UTF-8"}
        with open(base / "stdout", "wb") as out, open(base / "stderr", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(CHILD), json.dumps(settings)], cwd=work, env=env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True, close_fds=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=limits.timeout_s + STARTUP_GRACE_S)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc.pid)  # the whole group, whatever the program left behind
                proc.wait()
        stdout = _tail(base / "stdout")
        stderr_lines = [line for line in _tail(base / "stderr").splitlines() if line.strip()]
        detail = stderr_lines[-1][:300] if stderr_lines else ""
        if timed_out:
            return Result(False, "timeout", f"wall-clock limit of {limits.timeout_s:g} s (+ start-up) reached"), stdout
        code = proc.returncode
        if code < 0:
            name = signal.Signals(-code).name
            why = {"SIGXCPU": "CPU-time limit reached", "SIGXFSZ": "file-size limit reached"}.get(name, detail)
            return Result(False, f"killed:{name}", why), stdout
        marker = f"\n{nonce}:passed\n"
        if code == 0 and stdout.endswith(marker):
            return Result(True, "passed"), stdout[: -len(marker)]
        return Result(False, "exited" if code == 2 else "failed", detail or f"exit status {code}"), stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_programs(sources: Sequence[str], limits: Limits = Limits()) -> list[Result]:
    """Run every program in its own sandbox, ``limits.workers`` at a time; results in input order."""
    with ThreadPoolExecutor(max_workers=max(1, limits.workers)) as pool:
        return [res for res, _ in pool.map(lambda s: run_program(s, limits), sources)]


@lru_cache(maxsize=1)
def isolation_layers() -> tuple[str, ...]:
    """The kernel layers that take effect on this host (netns, rlimits, uid, nproc, no_new_privs)."""
    result, stdout = run_program("pass\n", Limits(timeout_s=10.0), report_layers=True)
    for line in stdout.splitlines():
        if line.startswith("sandbox-layers:"):
            return tuple(x for x in line.split(":", 1)[1].split(",") if x)
    from runner.errors import UserError

    raise UserError("the execution sandbox does not start on this host", where="evaluators/scoring/sandbox.py",
                    given=f"{result.status}: {result.detail}",
                    fix="run on Linux (it needs /proc and setrlimit); as root, the process must be allowed to "
                        "switch to uid 65534 and keep CAP_DAC_READ_SEARCH")
