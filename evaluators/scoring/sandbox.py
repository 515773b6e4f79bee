"""Run untrusted Python programs (model-written code) in separate, limited processes.

A job is a program (untrusted) and, optionally, test code (trusted: the dataset's ``check``).
``python -I -S evaluators/scoring/sandbox_child.py`` starts it in a fresh temporary working
directory and a new session; the test code goes over stdin (see ``sandbox_child.py`` for the
three processes: launcher, tester, worker). What decides and contains it:

- **verdict**: with test code, the trusted tester runs ``check`` and calls the program's function
  in the worker through pipes, getting back plain values only; the job passes when the launcher's
  exit status is 0, which only the tester's own completed ``check`` produces. There is no
  secret: nothing the program prints, writes or sends can make a pass. Without test code the job
  passes when the program ran to its end (the program is all there is to trust);
- **descendants**: a PID namespace whose init is the tester, so the kernel kills every process of
  the job when it ends (``pidns``); without one, the tester is a child subreaper that kills every
  process it inherits (``subreaper``); the process group is killed in any case;
- **files**: a mount namespace in which everything is read-only but the working directory
  (``readonly_fs``), with the home and cache directories hidden under empty tmpfs
  (``hidden_home``); as root the worker runs as uid 65534 without capabilities (``uid``,
  ``no_caps``); RLIMIT_FSIZE caps file sizes; the directory is removed after the job;
- **time, memory, processes**: wall-clock timeout (the tester's, the parent's as a backstop),
  RLIMIT_CPU, RLIMIT_AS, RLIMIT_NPROC (``nproc``), no_new_privs;
- **network**: a new network namespace (``netns``), and the audit hook refuses sockets;
- **audit hook**: a Python-level second line (clear errors for ordinary mistakes); never relied on.

Not covered: reading world-readable files, kernel exploits, and ``__eq__``-style tricks inside
the program's own objects (only plain values reach the tests, which closes the usual form).
:func:`isolation_layers` says which layers took effect on this host.
"""

from __future__ import annotations

import json
import os
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

from runner.contract.errors import UserError

CHILD = Path(__file__).with_name("sandbox_child.py")
SANDBOX_UID = 65534  # "nobody": the uid a root parent drops its children to
FILE_SIZE_LIMIT = 16 << 20  # bytes any single file may grow to, stdout and stderr included
OPEN_FILES_LIMIT = 64
EXTRA_PROCESSES = 4  # tasks the sandbox uid may own beyond those it owns at start (RLIMIT_NPROC)
STARTUP_GRACE_S = 2.0  # wall-clock allowance for interpreter start-up, on top of timeout_s
BACKSTOP_S = 3.0  # the parent's own limit runs this much longer than the tester's
STATUSES = {0: "passed", 1: "failed", 2: "exited", 3: "error", 124: "timeout"}
HIDDEN_ENV = ("XDG_CACHE_HOME", "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "TRANSFORMERS_CACHE",
              "TORCH_HOME", "MLFLOW_TRACKING_URI")  # directories the program must not read
TAIL_BYTES = 4096


@dataclass(frozen=True)
class Limits:
    """Per-program limits: wall-clock and CPU seconds, address space in MiB, parallel workers."""

    timeout_s: float = 5.0
    memory_mb: int = 1024
    workers: int = 4


@dataclass(frozen=True)
class Program:
    """An untrusted ``source`` and trusted ``tests`` that define ``check(candidate)``.

    ``check`` receives a function that calls ``entry_point`` of the program in its own process.
    """

    source: str
    tests: str | None = None
    entry_point: str | None = None


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


def _hidden_dirs() -> list[str]:
    dirs = [os.path.expanduser("~"), os.path.expanduser("~/.cache")]
    dirs += [os.environ[k] for k in HIDDEN_ENV if os.environ.get(k, "").startswith("/")]
    return dirs


def run_program(source: str | Program, limits: Limits = Limits(), *, report_layers: bool = False,
                python_guard: bool = True, namespaces: bool = True) -> tuple[Result, str]:
    """Run a program (with its tests, for a :class:`Program`) in a fresh sandbox; the result, stdout's tail.

    ``python_guard=False`` leaves out the audit hook and ``namespaces=False`` the namespaces, so
    that tests can check the other layers on their own; evaluators never turn them off.
    """
    job = source if isinstance(source, Program) else Program(source)
    drop_uid = SANDBOX_UID if os.geteuid() == 0 else None
    base = Path(tempfile.mkdtemp(prefix="runner-sandbox-"))
    try:
        work = base / "work"
        work.mkdir()
        program = base / "program.py"
        program.write_text(job.source, encoding="utf-8")
        if drop_uid is not None:
            os.chown(work, drop_uid, drop_uid)
        settings = {
            "program": str(program), "uid": drop_uid, "timeout_s": limits.timeout_s,
            "entry_point": job.entry_point, "hide": _hidden_dirs(),
            "cpu_s": max(1, int(limits.timeout_s + 0.999)), "memory_bytes": int(limits.memory_mb) << 20,
            "fsize_bytes": FILE_SIZE_LIMIT, "nofile": OPEN_FILES_LIMIT, "nproc_extra": EXTRA_PROCESSES,
            "report_layers": report_layers, "python_guard": python_guard, "namespaces": namespaces,
        }
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "TMPDIR": str(work), "LANG": "C.UTF-8"}
        with open(base / "stdout", "wb") as out, open(base / "stderr", "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(CHILD), json.dumps(settings)], cwd=work, env=env,
                stdin=subprocess.PIPE, stdout=out, stderr=err, start_new_session=True, close_fds=True,
            )
            timed_out = False
            try:
                proc.communicate((job.tests or "").encode(), timeout=limits.timeout_s + STARTUP_GRACE_S + BACKSTOP_S)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc.pid)  # the whole group, whatever the program left behind
                proc.wait()
        stdout = _tail(base / "stdout")
        stderr_lines = [line for line in _tail(base / "stderr").splitlines() if line.strip()]
        detail = stderr_lines[-1][:300] if stderr_lines else ""
        code = proc.returncode
        if timed_out or code == 124:
            return Result(False, "timeout", f"wall-clock limit of {limits.timeout_s:g} s (+ start-up) reached"), stdout
        if code < 0 or code > 128:
            name = signal.Signals(-code if code < 0 else code - 128).name
            why = {"SIGXCPU": "CPU-time limit reached", "SIGXFSZ": "file-size limit reached"}.get(name, detail)
            return Result(False, f"killed:{name}", why), stdout
        status = STATUSES.get(code, "failed")
        if code == 0:
            return Result(True, status), stdout
        return Result(False, status, detail or f"exit status {code}"), stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_programs(sources: Sequence[str | Program], limits: Limits = Limits()) -> list[Result]:
    """Run every program in its own sandbox, ``limits.workers`` at a time; results in input order."""
    with ThreadPoolExecutor(max_workers=max(1, limits.workers)) as pool:
        return [res for res, _ in pool.map(lambda s: run_program(s, limits), sources)]


@lru_cache(maxsize=1)
def isolation_layers() -> tuple[str, ...]:
    """The layers that take effect on this host (pidns or subreaper, netns, readonly_fs, hidden_home,
    rlimits, uid, nproc, no_caps, no_new_privs)."""
    result, stdout = run_program("pass\n", Limits(timeout_s=10.0), report_layers=True)
    for line in stdout.splitlines():
        if line.startswith("sandbox-layers:"):
            return tuple(x for x in line.split(":", 1)[1].split(",") if x)

    raise UserError("the execution sandbox does not start on this host", where="evaluators/scoring/sandbox.py",
                    given=f"{result.status}: {result.detail}",
                    fix="run on Linux (it needs /proc, fork and setrlimit); as root, the process must be allowed "
                        "to switch to uid 65534")
