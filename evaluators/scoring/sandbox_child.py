"""The processes of one sandboxed job (see ``evaluators/scoring/sandbox.py``); standard library only.

Started as ``python -I -S sandbox_child.py SETTINGS_JSON`` in the job's fresh working directory,
with the trusted test code (if any) on stdin. Three roles:

- **launcher** (this process): moves into new namespaces (PID, mount, network; as a non-root
  user inside a new user namespace too) and forks the tester, which becomes PID 1 of the new
  PID namespace. When PID 1 ends, the kernel kills every process left in the namespace, so no
  descendant (``setsid``, double fork) outlives the job. It exits with the tester's status.
  Without a PID namespace it is the tester itself, a child subreaper that kills what it inherits.
- **tester** (trusted): makes the whole filesystem read-only but the working directory, hides
  the home and cache directories, mounts a private /proc, then forks the worker. After the fork
  it reads the test code from stdin (so the worker never holds it), runs ``check`` and calls the
  program's function through pipes (``sandbox_wire``: plain values only). Its exit status is the
  verdict: 0 only when ``check`` returned. Nothing the worker prints or sends can make it 0.
- **worker** (untrusted): limits itself (rlimits, uid 65534 when root, no capabilities,
  no_new_privs), installs the audit hook, runs the program in a fresh ``__main__`` and answers
  the tester's calls. Without test code, the job passes when the program ran to its end.

All three are non-dumpable (no ptrace, no /proc/<pid>/mem or fd/ of one another).
Exit status: 0 passed, 1 failed, 2 exited early, 3 sandbox error, 124 timeout, 128+N signal N.
"""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sandbox_guard  # noqa: E402  (beside this file; -I leaves the script's directory off sys.path)
import sandbox_wire as wire  # noqa: E402

del sys.path[0]

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 0x4000, 1 << 18
SYS_MOUNT_SETATTR, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, 0x8000, 1
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_KEEPCAPS, PR_CAPBSET_DROP = 1, 4, 8, 24
PR_SET_SECUREBITS, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 27, 36, 38, 47
SECBIT_NOROOT_AND_LOCK = 0x3
CAP_DAC_READ_SEARCH, LINUX_CAPABILITY_VERSION_3 = 2, 0x20080522
PASSED, FAILED, EXITED, ERROR, TIMEOUT = 0, 1, 2, 3, 124
GRACE_S = 1.0  # wall-clock allowance for the worker's imports, on top of timeout_s


def _libc():
    import ctypes

    return ctypes, ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        import ctypes

        raise OSError(ctypes.get_errno(), f"sandbox: {what} failed")


# ---------------------------------------------------------------------- launcher
def _unshare(root):
    """Enter new namespaces, all together if the kernel allows, else each it allows; their names."""
    _, libc = _libc()
    wanted = {"pidns": CLONE_NEWPID, "mntns": CLONE_NEWNS, "netns": CLONE_NEWNET}
    user = 0 if root else CLONE_NEWUSER
    uid, gid = os.getuid(), os.getgid()
    got = []
    if libc.unshare(user | sum(wanted.values())) == 0:
        got = list(wanted)
    else:
        for name, flag in wanted.items():
            if libc.unshare(user | flag) == 0:
                got.append(name)
                user = 0  # one user namespace is enough
                if not root:
                    break  # the mapping below must follow the first user namespace
    if got and not root:  # become root of the new user namespace (the only uid it maps)
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                           ("/proc/self/gid_map", f"0 {gid} 1")):
            with open(path, "w") as handle:
                handle.write(text)
    return got


def _exit_code(status):
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def main():
    settings = json.loads(sys.argv[1])
    _, libc = _libc()
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # inherited by tester and worker: no ptrace, no /proc/<pid>/fd
    with open(settings["program"], encoding="utf-8") as handle:
        source = handle.read()
    root = os.geteuid() == 0
    # RLIMIT_NPROC counts every task of the uid, also those a private /proc will not show
    settings["nproc_base"] = sandbox_guard.count_tasks(settings["uid"] if root and settings.get("uid") is not None
                                                       else os.getuid())
    try:
        namespaces = _unshare(root) if settings.get("namespaces", True) else []
    except OSError:
        namespaces = []
    if "pidns" not in namespaces:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        os._exit(_tester(settings, source, namespaces + ["subreaper"], root, init=False))
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        _, libc = _libc()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != 0 and os.getppid() != launcher:  # the launcher is outside: its pid reads as 0
            os._exit(ERROR)
        os._exit(_tester(settings, source, namespaces, root, init=True))
    os.close(0)  # the tester holds the test code's pipe
    _, status = os.waitpid(pid, 0)
    os._exit(_exit_code(status))


# ---------------------------------------------------------------------- tester
def _private_fs(settings, workdir, init):
    """Read-only filesystem but ``workdir``; hidden home/cache directories; a private /proc."""
    ctypes, libc = _libc()

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def setattr_(path, flags, attr_set, attr_clr):
        attr = MountAttr(attr_set, attr_clr, 0, 0)
        _check(libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), flags, ctypes.byref(attr),
                            ctypes.sizeof(attr)), f"mount_setattr {path}")

    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    keep = [os.path.realpath(sys.base_prefix), workdir]  # what must stay visible under a hidden directory
    fds = {path: os.open(path, os.O_PATH) for path in keep}
    hidden = []
    for path in settings.get("hide", []):
        path = os.path.realpath(path)
        if os.path.isdir(path) and path != "/" and not any(path.startswith(h + "/") for h in hidden):
            _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                              b"mode=0755,size=64k,nr_inodes=256"), f"hiding {path}")
            hidden.append(path)
    for path, fd in fds.items():
        if any(path == h or path.startswith(h + "/") for h in hidden) or path == workdir:
            os.makedirs(path, exist_ok=True)
            _check(libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None),
                   f"binding {path}")
        os.close(fd)
    setattr_("/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0)
    setattr_(workdir, 0, 0, MOUNT_ATTR_RDONLY)
    os.chdir(workdir)  # the bind mount, not the directory under it
    layers = ["readonly_fs", "hidden_home"] if hidden else ["readonly_fs"]
    # Only the job's processes in /proc; a container that masks parts of /proc may refuse it.
    if init and libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0:
        layers.append("private_proc")
    return layers


class CandidateError(Exception):
    """The program's function raised; the message is its exception's type and text."""


class WorkerEnded(BaseException):
    """The worker ended before it answered (an exit, a crash, a signal)."""


def _tester(settings, source, layers, root, init):
    """Fork the worker, run the tests against it, and return the verdict as an exit status."""
    workdir = os.getcwd()
    if "mntns" in layers:
        layers = [x for x in layers if x != "mntns"]
        try:
            layers += _private_fs(settings, workdir, init)
        except OSError as error:
            print(f"sandbox: no private filesystem ({error})", file=sys.stderr)
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    deadline = time.monotonic() + settings["timeout_s"] + GRACE_S
    pid = os.fork()
    if pid == 0:
        os.close(req_w)
        os.close(resp_r)
        _worker(settings, source, workdir, req_r, resp_w, layers, root)
    os.close(req_r)
    os.close(resp_w)
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (settings["memory_bytes"],) * 2)  # the values it decodes
    tests = sys.stdin.read()  # only now: the worker was forked without it
    code = ERROR
    try:
        code = _judge(tests, settings.get("entry_point"), req_w, resp_r, deadline)
    except wire.Timeout:
        code = TIMEOUT
    except WorkerEnded:
        code = _worker_status(pid, deadline)
    except wire.ProtocolError as error:
        print(f"sandbox: {error}", file=sys.stderr)
        code = FAILED
    finally:
        _kill_tree(pid, init)
    return code


def _judge(tests, entry_point, req_w, resp_r, deadline):
    """0 when the program ran (and, with test code, ``check`` returned); raises when the worker ended."""
    try:
        first = wire.receive(resp_r, deadline)
    except wire.Closed:
        raise WorkerEnded() from None
    if first != {"ready": True}:
        return FAILED
    if not tests:
        return PASSED

    def candidate(*args, **kwargs):
        try:
            wire.send(req_w, {"call": [wire.encode(list(args)), wire.encode(kwargs)]})
            answer = wire.receive(resp_r, deadline)
        except (wire.Closed, BrokenPipeError):
            raise WorkerEnded() from None
        if not isinstance(answer, dict) or len(answer) != 1:
            raise wire.ProtocolError("a malformed answer")
        if "raised" in answer:
            raise CandidateError(str(answer["raised"])[:500])
        return wire.decode(answer["ok"])

    namespace = {"__name__": "__sandbox_tests__"}
    try:
        exec(compile(tests, "tests.py", "exec"), namespace)
        namespace[entry_point] = candidate  # as in one program, the function's own name is the program's
        namespace["check"](candidate)
    except Exception:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        return FAILED
    return PASSED if entry_point else FAILED


def _worker_status(pid, deadline):
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = _exit_code(status)
            return FAILED if code == FAILED else (code if code > 128 else EXITED)
        time.sleep(0.01)
    return TIMEOUT


def _kill_tree(pid, init):
    """Kill the worker and, without a PID namespace, every process this subreaper inherited."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if init:
        return  # PID 1 exits next: the kernel kills the rest of the namespace
    me = str(os.getpid())
    for _ in range(100):
        children = []
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/stat") as handle:
                    if name.isdigit() and handle.read().rsplit(")", 1)[1].split()[1] == me:
                        children.append(int(name))
            except (OSError, IndexError):
                continue
        if not children:
            return
        for child in children:
            try:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


# ---------------------------------------------------------------------- worker
def _worker(settings, source, workdir, req_r, resp_w, layers, root):
    """Limit this process, run the untrusted program, answer calls; never returns."""
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        layers = layers + _limit_self(settings, root, "readonly_fs" not in layers)
    except BaseException as error:  # fail closed: a worker that could not limit itself runs nothing
        print(f"sandbox: setting up the worker failed: {error!r}", file=sys.stderr)
        os._exit(ERROR)
    if settings.get("report_layers"):
        print("sandbox-layers:" + ",".join(layers), flush=True)
    module = type(sys)("__main__")
    module.__builtins__ = __builtins__
    sys.modules["__main__"] = module
    sys.argv = ["program.py"]
    code = compile(source, "program.py", "exec")
    if settings.get("python_guard", True):
        sandbox_guard.install(workdir)
    for name in [m for m in sys.modules if m.startswith(("sandbox_", "ctypes", "_ctypes"))]:
        del sys.modules[name]
    entry_point = settings.get("entry_point")
    del settings, source
    try:
        exec(code, module.__dict__)
    except SystemExit as stop:
        print(f"sandbox: the program exited (status {stop.code!r}) before its tests finished", file=sys.stderr)
        _flush_and_exit(EXITED)
    except BaseException:
        import traceback

        traceback.print_exc()
        _flush_and_exit(FAILED)
    sys.stdout.flush()
    _serve(module.__dict__.get(entry_point) if entry_point else None, req_r, resp_w)


def _flush_and_exit(code):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def _serve(function, req_r, resp_w):
    wire.send(resp_w, {"ready": True})
    while True:
        try:
            message = wire.receive(req_r)
        except wire.Closed:
            os._exit(PASSED)
        try:
            args, kwargs = wire.decode(message["call"][0]), wire.decode(message["call"][1])
            answer = {"ok": wire.encode(function(*args, **kwargs))}
        except SystemExit as stop:
            print(f"sandbox: the program exited (status {stop.code!r}) inside its tests", file=sys.stderr)
            _flush_and_exit(EXITED)
        except BaseException as error:
            answer = {"raised": f"{type(error).__name__}: {error}"[:500]}
        sys.stdout.flush()
        wire.send(resp_w, answer)


def _limit_self(settings, root, keep_read_cap):
    """rlimits, uid 65534 (as root), no capabilities, no_new_privs; the names of what took effect."""
    import resource

    ctypes, libc = _libc()
    layers = ["rlimits"]
    limits = [(resource.RLIMIT_CPU, settings["cpu_s"], settings["cpu_s"] + 1),
              (resource.RLIMIT_AS, settings["memory_bytes"], settings["memory_bytes"]),
              (resource.RLIMIT_FSIZE, settings["fsize_bytes"], settings["fsize_bytes"]),
              (resource.RLIMIT_NOFILE, settings["nofile"], settings["nofile"]), (resource.RLIMIT_CORE, 0, 0)]
    for which, soft, hard in limits:
        resource.setrlimit(which, (soft, hard))
    uid = settings.get("uid") if root else None
    resource.setrlimit(resource.RLIMIT_NPROC, (settings["nproc_base"] + settings["nproc_extra"],) * 2)
    secured = libc.prctl(PR_SET_SECUREBITS, SECBIT_NOROOT_AND_LOCK, 0, 0, 0) == 0  # exec grants no caps
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    keep = 0
    if uid is not None:
        if keep_read_cap:  # no private filesystem: the interpreter may sit under an unreadable /root
            libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0)
            keep = 1 << CAP_DAC_READ_SEARCH
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        except PermissionError:  # a root without CAP_SETUID/CAP_SETGID: stays root, no "uid" layer
            uid, keep = None, 0
        else:
            layers += ["uid", "nproc"]
    elif not root:
        layers.append("nproc")
    data = (Data * 2)(Data(keep, keep, 0), Data(0, 0, 0))
    _check(libc.capset(ctypes.byref(Header(LINUX_CAPABILITY_VERSION_3, 0)), data), "capset")
    if not keep and secured:
        layers.append("no_caps")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # after the uid change, which clears it
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        layers.append("no_new_privs")
    return layers


if __name__ == "__main__":
    main()
