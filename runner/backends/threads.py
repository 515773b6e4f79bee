"""How many compute threads a CPU job should use: the cores that are free now, not all of them.

PyTorch starts one OpenMP thread per core, and its threads spin-wait for each other at every parallel
region. On a host whose cores other processes also use (a shared CI runner, parallel test workers), a
thread that waits for a core another process holds stalls all the others: one thread can answer
several times faster than two. So the count is measured: the cores this process may run on
(``os.sched_getaffinity``), times the share of them that was idle over a short window (``/proc/stat``;
the one-minute load average where that file is missing), at least one. An explicit count wins
(``backend.num_threads``), and ``OMP_NUM_THREADS``, where set, caps the measured one (a test runner or
scheduler that gave this process its share of the cores).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

PROC_STAT = Path("/proc/stat")
WINDOW_S = 0.1


@dataclass(frozen=True)
class ThreadChoice:
    """The thread count chosen and why (for the run's details and the log)."""

    threads: int
    cores: int  # the cores this process may run on
    free: float | None  # cores idle over the window; None: not measured (an explicit count)
    reason: str

    def describe(self) -> str:
        free = "" if self.free is None else f", {self.free:.1f} of {self.cores} cores free"
        return f"{self.threads} ({self.reason}{free})"


def usable_cores() -> list[int]:
    """The CPUs this process may run on (all of them where affinity is not available)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def cpu_times(stat_text: str, cpus: list[int]) -> tuple[int, int]:
    """(idle, total) jiffies summed over ``cpus`` from the text of ``/proc/stat`` (idle counts iowait too)."""
    idle = total = 0
    wanted = {f"cpu{i}" for i in cpus}
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] in wanted:
            values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
            idle += values[3] + values[4]
            total += sum(values)
    return idle, total


def free_cores(cpus: list[int], window_s: float = WINDOW_S,
               read: Callable[[], str] | None = None, sleep: Callable[[float], None] = time.sleep) -> float:
    """Cores among ``cpus`` idle over ``window_s`` (from /proc/stat), or the cores less the one-minute load
    average where /proc/stat cannot be read."""
    reader = read or PROC_STAT.read_text
    try:
        idle0, total0 = cpu_times(reader(), cpus)
        sleep(window_s)
        idle1, total1 = cpu_times(reader(), cpus)
    except OSError:
        return max(0.0, len(cpus) - os.getloadavg()[0])
    if total1 <= total0:  # no tick in the window: nothing to say it is busy
        return float(len(cpus))
    return len(cpus) * (idle1 - idle0) / (total1 - total0)


def threads_from(cores: int, free: float, cap: int | None) -> int:
    """The free cores rounded half up, at least one, at most ``cores`` and ``cap``."""
    chosen = max(1, min(cores, math.floor(free + 0.5)))
    return min(chosen, cap) if cap else chosen


def env_cap() -> int | None:
    """``OMP_NUM_THREADS`` when it is a positive integer."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def choose(requested: int | None, measure: Callable[[list[int]], float] | None = None) -> ThreadChoice:
    """``requested`` when given (> 0); else the free cores now, capped by ``OMP_NUM_THREADS``."""
    cpus = usable_cores()
    if requested:
        return ThreadChoice(requested, len(cpus), None, "backend.num_threads")
    cap = env_cap()
    if cap == 1:  # nothing to choose: not worth the measuring window
        return ThreadChoice(1, len(cpus), None, "OMP_NUM_THREADS")
    free = (measure or free_cores)(cpus)
    threads = threads_from(len(cpus), free, cap)
    reason = "free cores, capped by OMP_NUM_THREADS" if cap is not None and cap < len(cpus) else "free cores"
    return ThreadChoice(threads, len(cpus), free, reason)


def cpu_server_env(env: dict[str, str]) -> dict[str, str]:
    """A CPU model server's environment: ``env`` with ``OMP_NUM_THREADS`` set to the free cores (its torch reads it
    at start), unless ``env`` sets it already."""
    if "OMP_NUM_THREADS" in env:
        return dict(env)
    return dict(env) | {"OMP_NUM_THREADS": str(choose(None).threads)}
