"""The sandbox worker's audit hook, a Python-level second line behind the kernel's layers.

It refuses process creation, signals, sockets, ctypes, and writes or deletions outside the
working directory, so ordinary mistakes fail with a clear message. Its tables live in the
hook's closure as immutable values, and the worker drops this module from ``sys.modules``,
but code in the same interpreter can still reach the hook (``gc``) and defeat it: the verdict
and the containment never rely on it (see ``sandbox_child.py``). Standard library only.
"""

import os
import sys

PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system", "os.kill",
                  "os.killpg", "subprocess.Popen", "pty.spawn", "signal.pthread_kill", "os.setuid", "os.setgid")
PATH_EVENTS = (  # event, indices of the path arguments that must stay inside the working directory
    ("os.remove", (0,)), ("os.rmdir", (0,)), ("os.mkdir", (0,)), ("os.rename", (0, 1)), ("os.link", (0, 1)),
    ("os.symlink", (1,)), ("os.truncate", (0,)), ("os.chmod", (0,)), ("os.chown", (0,)), ("os.utime", (0,)),
    ("os.chflags", (0,)), ("os.mkfifo", (0,)), ("os.mknod", (0,)), ("shutil.rmtree", (0,)),
    ("shutil.move", (0, 1)), ("shutil.copyfile", (1,)), ("shutil.copytree", (1,)), ("os.setxattr", (0,)),
    ("os.removexattr", (0,)),
)
BLOCKED_IMPORTS = ("ctypes", "_ctypes", "_posixsubprocess")  # native calls; the raw fork-exec primitive
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def count_tasks(uid):
    """Tasks (processes and threads) owned by ``uid`` that /proc shows: what RLIMIT_NPROC counts."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                total += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return total


def install(workdir):
    """Add the audit hook (hooks cannot be removed) for a program confined to ``workdir``."""
    inside = os.path.realpath(workdir)
    realpath, isdir, fspath, startswith = os.path.realpath, os.path.isdir, os.fspath, str.startswith
    path_events = dict(PATH_EVENTS).get
    process_events, blocked, write_flags = PROCESS_EVENTS, frozenset(BLOCKED_IMPORTS), WRITE_FLAGS

    def is_inside(path):
        if isinstance(path, int):
            return True  # an already open descriptor
        try:
            path = fspath(path)
        except TypeError:
            return False
        if isinstance(path, bytes):
            path = path.decode(errors="surrogateescape")
        full = realpath(path)
        return full == inside or startswith(full, inside + "/")

    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & write_flags)
            if writing and not is_inside(path):
                raise PermissionError(f"sandbox: writing outside the working directory is not allowed: {path!r}")
            # A directory descriptor (os.open) would let dir_fd-relative calls, which the event does
            # not show, write outside: refuse descriptors of directories outside.
            if mode is None and not isinstance(path, int) and not is_inside(path) and isdir(path):
                raise PermissionError(f"sandbox: opening a directory outside the working directory: {path!r}")
            return
        indices = path_events(event)
        if indices is not None:
            for i in indices:
                if i < len(args) and not is_inside(args[i]):
                    raise PermissionError(f"sandbox: {event} outside the working directory is not allowed")
        elif event.startswith(process_events):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event.startswith(("socket.", "ctypes.")):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event == "import" and args[0].partition(".")[0] in blocked:
            raise ImportError(f"sandbox: importing {args[0]} is not allowed")

    sys.addaudithook(hook)
