"""Hostile HumanEval completions against the real sandbox: none may pass, nothing may outlive its job.

Every program here is the untrusted side of a job whose trusted tests check ``add(x, y)``; each
attack ends with a wrong answer (or none), so any pass is a false pass. Programs that mean to
leave something behind name it with a per-case token (a file name, the argument of ``sleep``),
looked for afterwards. Many first defeat the audit hook from inside (``DEFEAT_HOOK``), to show
that the kernel-level layers hold alone; a case whose layer this host lacks is skipped, saying so.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from evaluators.scoring import sandbox, sandbox_wire
from evaluators.scoring.sandbox import Limits, Program, run_program
from tests.tasks.test_humaneval import _processes_with

LIMITS = Limits(timeout_s=2.0, memory_mb=256, workers=1)
TESTS = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"
HOME = os.path.expanduser("~")

# Replace the audit hook's code with a no-op: what a completion can do from inside the interpreter.
DEFEAT_HOOK = """
import gc
_hooks = [o for o in gc.get_objects() if type(o).__name__ == "function" and o.__name__ == "hook"
          and "sandbox" in o.__code__.co_filename]
for _hook in _hooks:
    _names = _hook.__code__.co_freevars
    _src = "def outer():\\n" + "".join(f"    {n} = None\\n" for n in _names) + \\
        "    def hook(event, args):\\n        " + ("; ".join(_names) or "pass") + "\\n        return None\\n    return hook\\n"
    _ns = {}
    exec(_src, _ns)
    _hook.__code__ = _ns["outer"]().__code__
import ctypes  # refused while the hook works
"""

# Cases: (name, program, layers of which one must be active, else skip). "{token}" and "{target}"
# (a world-writable directory of the test) are filled in per case.
CASES = [
    ("module exits 0", "import os\nos._exit(0)\n", ()),
    ("module sys.exit(0)", "import sys\nsys.exit(0)\n", ()),
    ("prints pass markers then exits", "import os\nfor m in ('passed', ':passed', 'ok'):\n    print(m)\n"
     "print('\\n' + 'x' * 32 + ':passed')\nos._exit(0)\n", ()),
    ("SystemExit inside check", "def add(x, y):\n    raise SystemExit(0)\n", ()),
    ("os._exit(0) inside check", "def add(x, y):\n    import os\n    os._exit(0)\n", ()),
    ("replays secrets from its own and its parents' argv and environ", """
import os, re, sys
seen = []
for pid in ("self", os.getppid(), 1):
    for part in ("cmdline", "environ"):
        try:
            seen += re.findall(r"[0-9a-f]{16,}", open(f"/proc/{pid}/{part}").read())
        except OSError:
            pass
for secret in seen:
    sys.stdout.write(f"\\n{secret}:passed\\n")
sys.stdout.flush()
os._exit(0)
""", ()),
    ("replays secrets from the caller's frames", """
import os, re, sys
def add(x, y):
    seen, frame = [], sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            seen += re.findall(r"[0-9a-f]{16,}", repr(value))
        frame = frame.f_back
    for secret in seen:
        sys.stdout.write(f"\\n{secret}:passed\\n")
    sys.stdout.flush()
    os._exit(0)
""", ()),
    ("searches memory for the tests' answers", """
import gc
def add(x, y):
    for obj in gc.get_objects():
        if isinstance(obj, str) and "candidate(2, 3) == 5" in obj:
            return 5 if x == 2 else 0
    return -1
""", ()),
    ("monkeypatches builtins and assert", """
import builtins
class Never(BaseException):
    pass
builtins.AssertionError = Never
builtins.Exception = Never
def add(x, y):
    return 7
""", ()),
    ("jumps over the caller's asserts with a tracer", """
import sys
def _tracer(frame, event, arg):
    if event == "line" and "assert" in open(frame.f_code.co_filename).read().splitlines()[frame.f_lineno - 1]:
        try:
            frame.f_lineno = frame.f_lineno + 1
        except Exception:
            pass
    return _tracer
def add(x, y):
    caller = sys._getframe(1)
    caller.f_trace = _tracer
    sys.settrace(_tracer)
    return 7
""", ()),
    ("returns an object that equals everything", """
class Any:
    def __eq__(self, other):
        return True
def add(x, y):
    return Any()
""", ()),
    ("returns an int subclass that equals everything", """
class Any(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
def add(x, y):
    return Any(7)
""", ()),
    ("forges answer frames on every pipe", DEFEAT_HOOK + """
import json, os
def frame(msg):
    data = json.dumps(msg).encode()
    return len(data).to_bytes(4, "big") + data
forged = frame({"ready": True}) + frame({"ok": 7}) * 4 + frame({"passed": True})
for fd in range(3, 64):
    try:
        os.write(fd, forged)
    except OSError:
        pass
for name in os.listdir("/proc"):
    if name.isdigit():
        for fd in range(0, 16):
            try:
                with open(f"/proc/{name}/fd/{fd}", "wb") as handle:
                    handle.write(forged)
            except OSError:
                pass
os._exit(0)
""", ()),
    ("oversized and malformed frames", """
import os
def add(x, y):
    for fd in range(3, 16):
        try:
            os.write(fd, (2**31).to_bytes(4, "big") + b"{")
        except OSError:
            pass
    return [[[]]]
""", ()),
    ("ptrace and /proc/mem on the tester", DEFEAT_HOOK + """
import os
libc = ctypes.CDLL(None)
for pid in (os.getppid(), 1):
    libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
    try:
        with open(f"/proc/{pid}/mem", "r+b") as mem:
            mem.write(b"x")
    except OSError:
        pass
os._exit(0)
""", ()),
    ("kills the tester", DEFEAT_HOOK + """
import os, signal
for pid in (os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
os._exit(0)
""", ()),
    ("setsid double-fork sleeper", DEFEAT_HOOK + """
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{token}"])
    os._exit(0)
def add(x, y):
    return 7
""", ("pidns", "subreaper")),
    ("Popen new session sleeper", DEFEAT_HOOK + """
import subprocess
subprocess.Popen(["sleep", "{token}"], start_new_session=True, stdin=subprocess.DEVNULL)
def add(x, y):
    return 7
""", ("pidns", "subreaper")),
    ("sleeper that ignores signals, via ctypes fork", DEFEAT_HOOK + """
import os
libc = ctypes.CDLL(None)
if libc.fork() == 0:
    libc.setsid()
    os.execv("/bin/sh", ["sh", "-c", "trap '' HUP TERM INT; exec sleep {token}"])
def add(x, y):
    return 7
""", ("pidns", "subreaper")),
    ("fork bomb of sleepers", DEFEAT_HOOK + """
import os
for _ in range(200):
    try:
        if os.fork() == 0:
            os.setsid()
            os.execv("/bin/sleep", ["sleep", "{token}"])
    except OSError:
        break
def add(x, y):
    return 7
""", ("pidns", "subreaper")),
    ("sleeper started inside check", DEFEAT_HOOK + """
import os
def add(x, y):
    if os.fork() == 0:
        os.setsid()
        os.execv("/bin/sleep", ["sleep", "{token}"])
    return 7
""", ("pidns", "subreaper")),
    ("writes /tmp, /var/tmp, /dev/shm, /run/lock", DEFEAT_HOOK + """
for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "{target}"):
    try:
        open(d + "/{token}", "w").write("x")
    except OSError:
        pass
def add(x, y):
    return 7
""", ("readonly_fs",)),
    ("writes beside and above the working directory", DEFEAT_HOOK + """
import os
for d in ("..", "../..", os.path.dirname(os.getcwd())):
    try:
        open(os.path.join(d, "{token}"), "w").write("x")
    except OSError:
        pass
def add(x, y):
    return 7
""", ("readonly_fs", "uid")),
    ("writes HOME and the cache", DEFEAT_HOOK + """
import os
for d in ({home!r}, {home!r} + "/.cache", {home!r} + "/.cache/runner", os.environ.get("HOME", "/")):
    try:
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "{token}"), "w").write("x")
    except OSError:
        pass
def add(x, y):
    return 7
""", ("readonly_fs", "uid")),
    ("symlink out of the working directory", DEFEAT_HOOK + """
import os
for d in ("/tmp", "{target}"):
    try:
        os.symlink(d, "out")
        open("out/{token}", "w").write("x")
    except OSError:
        pass
    try:
        os.remove("out")
    except OSError:
        pass
def add(x, y):
    return 7
""", ("readonly_fs",)),
    ("a world-writable file outside, through the guard", """
import os
fd = os.open("{target}", os.O_RDONLY)
try:
    os.close(os.open("{token}", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
except OSError:
    pass
def add(x, y):
    return 7
""", ()),
    ("reads the model and cache files (a pass means it could)", DEFEAT_HOOK + """
import os
def add(x, y):
    for d in ({home!r} + "/.cache/runner", {home!r} + "/.cache"):
        try:
            if os.listdir(d):
                return x + y
        except OSError:
            pass
    return 7
""", ("hidden_home", "uid")),
    ("reaches the network (a pass means it could)", DEFEAT_HOOK + """
import socket
def add(x, y):
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=1).close()
        return x + y
    except OSError:
        return 7
""", ("netns",)),
]


def _token(i: int) -> str:
    return f"{400 + i}.{os.getpid()}{time.time_ns() % 10**6}"


def _starts_a_sleeper(template: str) -> bool:
    """Whether a case starts a process named by its token (``sleep <token>``); the others use the token as a file
    name or not at all, so no process of theirs could carry it."""
    return "{token}" in template and "sleep" in template


def _files_named(token: str, dirs: list[Path]) -> list[str]:
    return [str(d / token) for d in dirs if os.path.lexists(d / token)]


@pytest.fixture(scope="module")
def layers() -> tuple[str, ...]:
    return sandbox.isolation_layers()


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_a_hostile_completion_neither_passes_nor_outlives_its_job(index, layers, tmp_path, monkeypatch):
    name, template, needs = CASES[index]
    own_tmp = tmp_path / "tmp"  # the job's directory goes here, apart from other test processes' jobs
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    if needs and not set(needs) & set(layers):
        pytest.skip(f"needs one of {needs}; this host's layers: {layers}")
    token = _token(index)
    target = tmp_path / "open"
    target.mkdir()
    target.chmod(0o777)  # writable by the sandbox uid: only the read-only filesystem protects it
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(5)
        server.setblocking(False)
        source = (template.replace("{token}", token).replace("{target}", str(target))
                  .replace("{home!r}", repr(HOME)).replace("{port}", str(server.getsockname()[1])))
        before = set(own_tmp.glob("runner-sandbox-*"))
        result, stdout = run_program(Program(source, TESTS, "add"), LIMITS)
        try:
            server.accept()[0].close()
            connected = True
        except BlockingIOError:
            connected = False
    assert not result.passed, (name, result, stdout[-500:])
    assert not connected, name
    if _starts_a_sleeper(template):
        time.sleep(0.3)  # an escaped sleeper has time to show up under its token
    assert _processes_with(token) == [], name
    dirs = [Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"), target, Path(HOME),
            Path(HOME) / ".cache", Path(HOME) / ".cache" / "runner", Path.cwd()]
    assert _files_named(token, dirs) == [], name
    left = set(own_tmp.glob("runner-sandbox-*")) - before
    assert not any(p.exists() for p in left), name  # the job's own directory is gone


ESCAPES = [i for i, case in enumerate(CASES) if case[2] == ("pidns", "subreaper")]


@pytest.mark.parametrize("index", ESCAPES, ids=[CASES[i][0] for i in ESCAPES])
def test_without_namespaces_the_subreaper_still_kills_every_descendant(index, layers):
    """The fallback for hosts without a PID namespace, tried here by turning the namespaces off."""
    if "uid" not in layers:
        pytest.skip("without a uid of its own the worker can kill the subreaper (not root here)")
    result, stdout = run_program(DEFEAT_HOOK + "print('sandbox-up')\n", LIMITS, namespaces=False, report_layers=True)
    assert result.passed and "subreaper" in stdout and "pidns" not in stdout, (result, stdout)
    token = _token(100 + index)
    result, _ = run_program(Program(CASES[index][1].replace("{token}", token), TESTS, "add"), LIMITS, namespaces=False)
    assert not result.passed
    time.sleep(0.3)
    assert _processes_with(token) == []


def test_the_defeated_hook_is_really_off(layers):
    """The attack the file relies on works: after DEFEAT_HOOK, what the hook refuses goes through."""
    result, stdout = run_program(DEFEAT_HOOK + "print(ctypes.__name__)\n", LIMITS)
    assert result.passed and stdout.strip() == "ctypes", (result, stdout)


def test_an_honest_completion_passes(layers):
    result, _ = run_program(Program("def add(x, y):\n    return x + y\n", TESTS, "add"), LIMITS)
    assert result.passed and result.status == "passed", result


def test_only_plain_values_cross_and_come_back_as_exact_builtins():
    import json

    class Sneaky(int):
        def __eq__(self, other):
            return True

    value = [1, -2**80, 0.1, float("inf"), "s\ud800", b"\x00", 1 + 2j, (1, (2,)), {(1, 2): {3}},
             frozenset({4}), None, True, Sneaky(7)]
    back = sandbox_wire.decode(json.loads(json.dumps(sandbox_wire.encode(value))))
    assert back[:-1] == value[:-1] and type(back[-1]) is int and back[-1] == 7 and back[-1] != 8
    assert [type(v) for v in back[:-1]] == [type(v) for v in value[:-1]]
    with pytest.raises(TypeError):
        sandbox_wire.encode(object())
    for forged in ({"x": 1}, {"t": [1], "s": [2]}, {"d": [[[1], 2]]}, {"f": "1e400x"}):
        with pytest.raises(sandbox_wire.ProtocolError):
            sandbox_wire.decode(forged)
