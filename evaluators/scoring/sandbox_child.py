"""The first code that runs inside a sandboxed process (see ``evaluators/scoring/sandbox.py``).

It is started as ``python -I -S sandbox_child.py SETTINGS_JSON`` in the throwaway working
directory, and uses the standard library only. In order, it:

1. moves into a new network namespace (no interfaces but a down loopback) when the kernel
   allows it: ``unshare(CLONE_NEWNET)`` as root, ``CLONE_NEWUSER | CLONE_NEWNET`` otherwise;
2. sets resource limits: CPU seconds, address space, file size, open files, no core dumps;
3. as root, drops to an unprivileged uid/gid (keeping only CAP_DAC_READ_SEARCH, so an
   interpreter installed under /root can still import its standard library), sets
   ``no_new_privs``, and caps the processes that uid may own (RLIMIT_NPROC, which the kernel
   ignores for root, applies once the uid is not root);
4. installs an audit hook (``sys.addaudithook``; it cannot be removed) that refuses process
   creation, signals to other processes, sockets, ctypes, and writes or deletions outside the
   working directory;
5. runs the program, and prints ``<nonce>:passed`` only when the whole program, its tests
   included, ran to the end without an exception or an exit.

Why the nonce: a program that calls ``sys.exit(0)`` or ``os._exit(0)`` before its tests run
exits with status 0; it must still count as a failure.
"""

import json
import os
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PR_SET_KEEPCAPS = 8
PR_SET_NO_NEW_PRIVS = 38
CAP_DAC_READ_SEARCH = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522

PROCESS_EVENTS = ("os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec", "os.system", "os.kill",
                  "os.killpg", "subprocess.Popen", "pty.spawn", "signal.pthread_kill", "os.setuid", "os.setgid")
PATH_EVENTS = {  # event -> indices of the path arguments that must stay inside the working directory
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.link": (0, 1),
    "os.symlink": (1,), "os.truncate": (0,), "os.chmod": (0,), "os.chown": (0,), "os.utime": (0,),
    "os.chflags": (0,), "os.mkfifo": (0,), "os.mknod": (0,), "shutil.rmtree": (0,), "shutil.move": (0, 1),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "os.setxattr": (0,), "os.removexattr": (0,),
}
BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes", "_posixsubprocess"})  # native calls; the raw fork-exec primitive
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _count_tasks(uid):
    """Tasks (processes and threads) owned by ``uid``: what RLIMIT_NPROC counts."""
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


def _os_layers(settings):
    """Kernel-enforced limits; returns the names of the layers that took effect."""
    import ctypes
    import resource

    layers = []
    libc = ctypes.CDLL(None, use_errno=True)
    root = os.geteuid() == 0
    if settings["unshare_net"]:
        flags = CLONE_NEWNET if root else CLONE_NEWUSER | CLONE_NEWNET
        if libc.unshare(flags) == 0:
            layers.append("netns")
    # CPU: the soft limit sends SIGXCPU (reported as such), the hard one a second later SIGKILL.
    limits = [(resource.RLIMIT_CPU, settings["cpu_s"], settings["cpu_s"] + 1),
              (resource.RLIMIT_AS, settings["memory_bytes"], settings["memory_bytes"]),
              (resource.RLIMIT_FSIZE, settings["fsize_bytes"], settings["fsize_bytes"]),
              (resource.RLIMIT_NOFILE, settings["nofile"], settings["nofile"]), (resource.RLIMIT_CORE, 0, 0)]
    for which, soft, hard in limits:
        resource.setrlimit(which, (soft, hard))
    layers.append("rlimits")
    uid = settings.get("uid")
    if root and uid is not None:
        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        tasks = _count_tasks(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (tasks + settings["nproc_extra"],) * 2)
        libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        except PermissionError:
            pass  # a root without CAP_SETUID/CAP_SETGID (a restricted container): stays root, no "uid" layer
        else:
            keep = 1 << CAP_DAC_READ_SEARCH
            data = (Data * 2)(Data(keep, keep, 0), Data(0, 0, 0))
            if libc.capset(ctypes.byref(Header(LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
                raise OSError(ctypes.get_errno(), "capset failed")  # fail closed: the parent reports it
            layers += ["uid", "nproc"]
    elif not root:
        resource.setrlimit(resource.RLIMIT_NPROC, (_count_tasks(os.getuid()) + settings["nproc_extra"],) * 2)
        layers.append("nproc")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        layers.append("no_new_privs")
    del libc
    for name in [m for m in sys.modules if m == "ctypes" or m.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]
    return layers


def _install_guard(workdir):
    """The audit hook: Python-level refusals, a second line behind the kernel's limits."""
    inside = os.path.realpath(workdir)
    realpath = os.path.realpath  # relative paths resolve against the current directory, wherever it is now
    isdir = os.path.isdir
    fspath = os.fspath
    startswith = str.startswith

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
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
            if writing and not is_inside(path):
                raise PermissionError(f"sandbox: writing outside the working directory is not allowed: {path!r}")
            # A directory descriptor (os.open) would let dir_fd-relative calls, which the event does
            # not show, write outside: refuse descriptors of directories outside.
            if mode is None and not isinstance(path, int) and not is_inside(path) and isdir(path):
                raise PermissionError(f"sandbox: opening a directory outside the working directory: {path!r}")
        elif event in PATH_EVENTS:
            for i in PATH_EVENTS[event]:
                if i < len(args) and not is_inside(args[i]):
                    raise PermissionError(f"sandbox: {event} outside the working directory is not allowed")
        elif event.startswith(PROCESS_EVENTS):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event.startswith(("socket.", "ctypes.")):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event == "import" and args[0].partition(".")[0] in BLOCKED_IMPORTS:
            raise ImportError(f"sandbox: importing {args[0]} is not allowed")

    sys.addaudithook(hook)


def main():
    settings = json.loads(sys.argv[1])
    nonce = settings.pop("nonce")
    workdir = os.getcwd()
    layers = _os_layers(settings)
    if settings.get("report_layers"):
        print("sandbox-layers:" + ",".join(layers), flush=True)
    with open(settings["program"], encoding="utf-8") as handle:
        source = handle.read()
    code = compile(source, "program.py", "exec")
    sys.argv = ["program.py"]
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    if settings.get("python_guard", True):
        _install_guard(workdir)
    del settings
    try:
        exec(code, namespace)
    except SystemExit as stop:
        print(f"sandbox: the program exited (status {stop.code!r}) before its tests finished", file=sys.stderr)
        os._exit(2)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.write(f"\n{nonce}:passed\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
