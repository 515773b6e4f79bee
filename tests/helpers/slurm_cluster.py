"""A throwaway single-node SLURM cluster on this machine, for tests/sweep/test_slurm.py.

munged (a generated key), MariaDB and slurmdbd (accounting: submitit follows its jobs with ``sacct``),
slurmctld and slurmd, all as root under one directory with their own ports and sockets, so nothing
of the host's configuration is read or changed. No cgroups (containers rarely have them):
proctrack/linuxproc, task/none. ``stop`` cancels what is left and ends every daemon it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

PROGRAMS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sbatch", "sacct",
           "scancel", "squeue", "sinfo")


def missing_programs() -> list[str]:
    """The programs this cluster needs that are not installed (.ci/slurm-setup installs them)."""
    return [name for name in PROGRAMS if shutil.which(name) is None]


def why_not() -> str | None:
    """Why this machine cannot run the cluster, or None when it can."""
    missing = missing_programs()
    if missing:
        return f"SLURM is not installed (missing {', '.join(missing)}; .ci/slurm-setup installs it as root with apt-get)"
    if os.geteuid() != 0:
        return "the single-node SLURM cluster runs its daemons as root (SlurmUser=root)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SlurmCluster:
    """Start with ``start()``, use ``env`` for every SLURM client (and the runner), end with ``stop()``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.node = socket.gethostname().split(".")[0]  # replaced by slurmd -C's NodeName in start()
        self.conf = root / "etc" / "slurm.conf"
        self.env = dict(os.environ) | {"SLURM_CONF": str(self.conf)}
        self.procs: dict[str, subprocess.Popen] = {}
        self.ports = {name: _free_port() for name in ("ctld", "slurmd", "dbd", "mysql")}

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 60) -> None:
        for sub in ("etc", "munge", "db", "state", "spool", "log", "run"):
            (self.root / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
        (self.root / "munge").chmod(0o711)  # munged: its socket's directory must be searchable by all
        deadline = time.monotonic() + timeout
        self._munge()
        self._mariadb(deadline)
        self._write_confs()
        self._spawn("slurmdbd", ["slurmdbd", "-D"])
        self._wait(lambda: self._port_open(self.ports["dbd"]), deadline, "slurmdbd")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        self._spawn("slurmd", ["slurmd", "-D"])
        self._wait(lambda: self.client("sinfo", "-h", "-o", "%t").stdout.strip() == "idle", deadline,
                   "the node to be idle in sinfo")

    def stop(self) -> None:
        """Cancel the jobs left, then end the daemons in reverse order (TERM, then KILL)."""
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            try:
                self.client("scancel", "--full", "-u", "root")
                end = time.monotonic() + 15
                while time.monotonic() < end and self.client("squeue", "-h").stdout.strip():
                    time.sleep(0.5)
            except (OSError, subprocess.SubprocessError):
                pass
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=5)
        self.procs.clear()

    def client(self, *args: str, check: bool = False) -> subprocess.CompletedProcess:
        """A SLURM client command (sinfo, squeue, sacct, scancel) against this cluster."""
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=30, check=check)

    def logs(self) -> str:
        """The daemons' logs, for a failing assertion's message."""
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            parts.append(f"== {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(parts)

    # ------------------------------------------------------------------ pieces
    def _spawn(self, name: str, cmd: list[str]) -> None:
        out = open(self.root / "log" / f"{name}.out", "w")
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                            cwd=self.root / "run", start_new_session=True)
        out.close()

    def _wait(self, ready, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs.values()):
                raise RuntimeError(f"a SLURM daemon exited while waiting for {what}:\n{self.logs()}")
            try:
                if ready():
                    return
            except (OSError, subprocess.SubprocessError):
                pass
            time.sleep(0.3)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")

    @staticmethod
    def _port_open(port: int) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    def _munge(self) -> None:
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = self.root / "munge" / "munge.socket"
        self._spawn("munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                               f"--socket={self.munge_socket}", f"--pid-file={self.root / 'munge' / 'munged.pid'}",
                               f"--seed-file={self.root / 'munge' / 'munged.seed'}",
                               f"--log-file={self.root / 'log' / 'munged.log'}"])

    def _mariadb(self, deadline: float) -> None:
        db = self.root / "db"
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={db}", "--user=root",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       capture_output=True, text=True, timeout=120, check=True)
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={db}", "--user=root",
                                 f"--socket={self.root / 'run' / 'mysql.sock'}", f"--port={self.ports['mysql']}",
                                 "--bind-address=127.0.0.1", "--skip-name-resolve",
                                 f"--pid-file={self.root / 'run' / 'mariadbd.pid'}",
                                 f"--log-error={self.root / 'log' / 'mariadbd.log'}"])
        self._wait(lambda: self._port_open(self.ports["mysql"]), deadline, "MariaDB")

    def _node_line(self) -> str:
        """This host as slurmd sees it (``slurmd -C``: CPUs, sockets, cores, memory), reached on 127.0.0.1."""
        out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
        line = next(ln for ln in out.splitlines() if ln.startswith("NodeName="))
        self.node = line.split()[0].partition("=")[2]
        return f"{line} NodeAddr=127.0.0.1 State=UNKNOWN"

    def _write_confs(self) -> None:
        r, sock, node_line = self.root, self.munge_socket, self._node_line()
        self.conf.write_text("\n".join([
            "ClusterName=runnertest",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            "SlurmUser=root", "SlurmdUser=root",
            f"SlurmctldPort={self.ports['ctld']}", f"SlurmdPort={self.ports['slurmd']}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={sock}",
            f"StateSaveLocation={r / 'state'}", f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}", f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}", f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
            "MpiDefault=none", "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={self.ports['dbd']}", f"AccountingStoragePass={sock}",
            "ReturnToService=2", "KillWait=2", "MinJobAge=600",
            node_line,
            f"PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP",
            ""]))
        dbd = self.conf.parent / "slurmdbd.conf"  # read from SLURM_CONF's directory
        dbd.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={sock}",
            f"DbdHost={self.node}", "DbdAddr=127.0.0.1", f"DbdPort={self.ports['dbd']}", "SlurmUser=root",
            f"LogFile={r / 'log' / 'slurmdbd.log'}", f"PidFile={r / 'run' / 'slurmdbd.pid'}",
            "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={self.ports['mysql']}", "StorageUser=root", "StorageLoc=slurm_acct_db",
            ""]))
        dbd.chmod(0o600)
