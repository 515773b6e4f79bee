"""A cross-process file lock (``filelock``), so two jobs never prepare the same artifact at once, and never
wait for one another without a word.

The lock file must be absent or a regular file: a symlink (it would be followed, and its target created or
truncated wherever it points), a directory or a FIFO is refused with a message naming it. A lock another job
holds is said after :data:`SAY_AFTER_S` (which file, for how long the wait may last) and given up after the
timeout with a message naming the lock file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import filelock

from runner.contract.errors import UserError

log = logging.getLogger("runner")
TIMEOUT_S = 900.0
"""How long a job waits for a lock another job holds (building an engine or a quantized model takes minutes)."""
SAY_AFTER_S = 2.0


def check_lock_path(path: Path) -> None:
    """``path`` is absent or a regular file: anything else is refused before it is opened."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    kinds = ((stat.S_ISLNK, "a symbolic link (the lock would follow it)"), (stat.S_ISDIR, "a directory"),
             (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
             (stat.S_ISBLK, "a device"))
    for test, kind in kinds:
        if test(info.st_mode):
            raise UserError("a lock file of the runner is not a regular file", where=str(path), given=kind,
                            allowed="a regular file, or none (it is created)",
                            fix=f"remove {path} (no job of the runner made it so) and run again")


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float = TIMEOUT_S) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if needed) for the block's duration; a
    :class:`UserError` naming the lock file when another job holds it past ``timeout_s``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    check_lock_path(path)
    lock = filelock.FileLock(str(path), thread_local=False)
    try:
        lock.acquire(timeout=min(SAY_AFTER_S, timeout_s))
    except filelock.Timeout:
        log.warning("waiting for the lock %s, held by another job (at most %.0f s)", path, timeout_s)
        try:
            lock.acquire(timeout=max(timeout_s - SAY_AFTER_S, 0))
        except filelock.Timeout:
            raise UserError("another job held a lock for longer than this job waits", where=str(path),
                            given=f"waited {timeout_s:.0f} s",
                            fix=f"let the other job finish (fuser {path} names it); if none is running, remove "
                                f"{path} and run again") from None
    try:
        yield
    finally:
        lock.release()
